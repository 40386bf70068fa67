/* cmd_bench.c - `pooled bench`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'bench' is not implemented yet");
}
