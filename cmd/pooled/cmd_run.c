/* cmd_run.c - `pooled run`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'run' is not implemented yet");
}
