/* cmd_chat.c - `pooled chat`. Not built yet: see the open issues. */
#include "args.h"
#include "commands.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return die("'chat' is not implemented yet");
}
