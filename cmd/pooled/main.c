/* main.c - the `pooled` command: picks a subcommand and hands it the rest of argv.
 *
 * Whatever the command, a write error on standard output makes the exit status non-zero
 * with one line (out_close). SIGPIPE keeps its inherited action: by default a reader that
 * goes away (`pooled run ... | head -c1`) ends pooled at its next write, quietly; with
 * SIGPIPE ignored the write fails, generation stops and the status is 1. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <pooled.h>
#include <unistd.h>

#include "args.h"
#include "base/file_write.h"
#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate a continuation of a prompt"},
    {"chat", cmd_chat, "interactive multi-turn chat with a model"},
    {"bench", cmd_bench, "measure prefill and decode speed"},
    {"serve", cmd_serve, "answer OpenAI and Anthropic API clients over HTTP"},
    {"room", cmd_room, "split one model across machines: room host / room join"},
    {"info", cmd_info, "show a GGUF file's metadata and tensors"},
    {"quantize", cmd_quantize, "convert a GGUF's weights to another format"},
    {"synth", cmd_synth, "write a random-weight GGUF with a real model's shapes"},
    {"tokenize", cmd_tokenize, "turn text into token ids with a model's tokenizer"},
    {"template", cmd_template, "render a conversation with a model's chat template"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: pooled COMMAND [options]   (pooled COMMAND --help for its options)\n"
               "       pooled --version\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

/* A closed standard stream (`>&-`) would be the lowest free descriptor, and the next file
 * opened (a model, a temporary output) would take its number: stdout text would land in
 * it. Park /dev/null there, opened the wrong way round so that using the stream still
 * fails (EBADF) as it would have. */
static void hold_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) open("/dev/null", fd ? O_RDONLY : O_WRONLY);
}

/* Ctrl-C or kill during a write: remove the temporary file (the target is untouched), then
 * die of the signal as before. */
static void on_signal(int sig) {
    pl_file_out_remove_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_temp_on_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa = {.sa_handler = on_signal};
        /* a signal ignored by the caller (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv) {
    hold_std_fds();
    remove_temp_on_signals();
    /* past a file size limit (ulimit -f) a write fails with EFBIG instead of killing the
     * process, so the temporary file is removed and the reason printed */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("pooled %s\n", pooled_version(NULL, NULL, NULL)); /* the library's */
        return out_close(0);
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return out_close(0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return out_close(commands[i].fn(argc - 1, argv + 1));
    return die("unknown command '%s' (try pooled --help)", argv[1]);
}
