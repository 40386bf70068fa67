/* cmd_template.c - `pooled template`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_template(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'template' is not implemented yet");
}
