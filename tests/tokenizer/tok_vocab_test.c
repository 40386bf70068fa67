/* tok_vocab_test.c - llama.cpp's tokenizer test vectors: every string of every vocabulary in
 * shared/fixtures/vocab/ (X.gguf.inp, strings separated by "\n__ggml_vocab_test__\n") must give
 * exactly the ids of X.gguf.out (no BOS, special tokens not parsed: test-tokenizer-0's call),
 * and detokenising must give the string back wherever the vocabulary can represent it. */
#include "test.h"

#include "base/file_map.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

static const char *k_vocabs[] = {"llama-spm", "gpt-2",          "bert-bge",
                                 "falcon",    "deepseek-coder", "starcoder"};

/* Parse one line of space-separated ids. */
static int parse_ids(const char *line, const char *end, int32_t *ids, int cap) {
    int n = 0;
    while (line < end && n < cap) {
        while (line < end && *line == ' ') line++;
        if (line >= end) break;
        char *e;
        long v = strtol(line, &e, 10);
        if (e == line) break;
        ids[n++] = (int32_t)v;
        line = e;
    }
    return n;
}

static void run_vocab(const char *name) {
    char path[256], inp_path[300], out_path[300];
    snprintf(path, sizeof path, "fixtures/vocab/ggml-vocab-%s.gguf", name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    pl_gguf *g = NULL;
    pl_tokenizer *t = NULL;
    CHECK(pl_gguf_open(test_shared(path), &g) == PL_OK, "%s: %s", name, pl_last_error());
    if (!g) return;
    CHECK(pl_tok_load(g, &t) == PL_OK, "%s: %s", name, pl_last_error());
    pl_gguf_free(g);
    if (!t) return;
    char *inp = NULL, *out = NULL;
    size_t inp_len = 0, out_len = 0;
    CHECK(pl_file_read_all(test_shared(inp_path), &inp, &inp_len) == PL_OK, "%s", inp_path);
    CHECK(pl_file_read_all(test_shared(out_path), &out, &out_len) == PL_OK, "%s", out_path);
    if (!inp || !out) goto done;
    const char *sep = "\n__ggml_vocab_test__\n";
    const char *p = inp, *q = out;
    int cases = 0, bad = 0;
    static int32_t want[4096];
    for (;;) {
        const char *e = strstr(p, sep);
        if (!e) break;
        const char *qe = strchr(q, '\n');
        if (!qe) break;
        int nw = parse_ids(q, qe, want, 4096);
        int32_t *ids = NULL;
        int64_t n = 0;
        pl_status st = pl_tok_encode(t, p, (size_t)(e - p), false, false, &ids, &n);
        bool same = st == PL_OK && n == nw && memcmp(ids, want, (size_t)nw * sizeof *ids) == 0;
        if (!same) {
            bad++;
            fprintf(stderr, "%s case %d '%.*s': got", name, cases, (int)(e - p), p);
            for (int64_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n   want");
            for (int i = 0; i < nw && i < 40; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n");
        }
        CHECK(same, "%s case %d", name, cases);
        /* round trip: WordPiece lower-cases and drops spaces, so it cannot give text back */
        if (st == PL_OK && strcmp(name, "bert-bge") != 0) {
            char *text = NULL;
            size_t tl = 0;
            CHECK(pl_tok_decode(t, ids, n, false, &text, &tl) == PL_OK, "decode");
            bool rt = text && tl == (size_t)(e - p) && memcmp(text, p, tl) == 0;
            CHECK(rt, "%s case %d round trip: '%.*s' -> '%s'", name, cases, (int)(e - p), p,
                  text ? text : "");
            free(text);
        }
        free(ids);
        cases++;
        p = e + strlen(sep);
        q = qe + 1;
    }
    CHECK(cases == 46, "%s: %d cases (want 46)", name, cases);
    if (bad) fprintf(stderr, "%s: %d of %d cases differ\n", name, bad, cases);
done:
    free(inp), free(out);
    pl_tok_free(t);
}

static void run_tests(void) {
    for (size_t i = 0; i < sizeof k_vocabs / sizeof k_vocabs[0]; i++) run_vocab(k_vocabs[i]);
}
