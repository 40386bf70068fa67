/* main.c - the `pooled` command: picks a subcommand and hands it the rest of argv. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate a continuation of a prompt"},
    {"chat", cmd_chat, "interactive multi-turn chat with a model"},
    {"bench", cmd_bench, "measure prefill and decode speed"},
    {"info", cmd_info, "show a GGUF file's metadata and tensors"},
    {"quantize", cmd_quantize, "convert a GGUF's weights to another format"},
    {"synth", cmd_synth, "write a random-weight GGUF with a real model's shapes"},
    {"tokenize", cmd_tokenize, "turn text into token ids with a model's tokenizer"},
    {"template", cmd_template, "render a conversation with a model's chat template"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: pooled COMMAND [options]   (pooled COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    return die("unknown command '%s' (try pooled --help)", argv[1]);
}
