/* cmd_tokenize.c - `pooled tokenize`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'tokenize' is not implemented yet");
}
