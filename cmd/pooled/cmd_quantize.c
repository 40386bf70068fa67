/* cmd_quantize.c - `pooled quantize`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'quantize' is not implemented yet");
}
