/* tok_test_util.h - what the tokenizer tests share: loading a vocabulary from shared/. */
#ifndef PL_TESTS_TOK_TEST_UTIL_H
#define PL_TESTS_TOK_TEST_UTIL_H

#include <sys/wait.h>

#include "format/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* The tokenizer of shared/REL (a failed CHECK and NULL if it does not load). */
static inline pl_tokenizer *load_tok(const char *rel) {
    pl_gguf *g = NULL;
    pl_tokenizer *t = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    if (!g) return NULL;
    CHECK(pl_tok_load(g, &t) == PL_OK, "%s: %s", rel, pl_last_error());
    pl_gguf_free(g);
    return t;
}

/* Run `pooled ARGS` (stdout dropped): it must exit non-zero without a signal, with exactly
 * one line on stderr that contains want. */
static inline void check_command_fails(const char *args, const char *want) {
    char cmd[4096], err_path[600];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>'%s'", test_pooled_bin(), args, err_path);
    int st = system(cmd);
    char buf[2048] = {0};
    FILE *f = fopen(err_path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) < 128, "%s: exit status %d",
          args, st);
    CHECK(lines == 1 && strstr(buf, want) && !strstr(buf, "Sanitizer"),
          "%s: stderr should be one line with '%s', got: %s", args, want, buf);
}

#endif
