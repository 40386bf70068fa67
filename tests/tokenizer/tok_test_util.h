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

#endif
