/* cmd_info.c - `pooled info`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'info' is not implemented yet");
}
