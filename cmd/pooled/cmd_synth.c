/* cmd_synth.c - `pooled synth`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'synth' is not implemented yet");
}
