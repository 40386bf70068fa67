/* tokenizer_fuzz.c - libFuzzer target for the tokenizers: random bytes (invalid UTF-8
 * included) through encode, piece, decode and the streaming detokeniser.
 *
 * Vocabularies are loaded once from shared/ (POOLED_SHARED, default ../shared, so
 * tests/fuzz/run.sh works from the repository root): SPM (stories260K), byte-level BPE
 * with special tokens (the tiny Qwen2-style one), BPE through the regex engine
 * (deepseek-coder's pre-tokenizer), and WordPiece (bert-bge). The first input byte picks
 * the vocabulary and the flags; the rest is the text. Every id must be in range, decode
 * must succeed, the stream must only ever hand out valid UTF-8, and SPM and byte-level
 * BPE must give back every valid UTF-8 input (for SPM, one without U+2581, which it uses
 * for spaces). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "tokenizer_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,          \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const char *k_files[] = {
    "models/stories260K.gguf",
    "fixtures/hf/qwen3/qwen3-q8_0.gguf",
    "fixtures/vocab/ggml-vocab-deepseek-coder.gguf",
    "fixtures/vocab/ggml-vocab-bert-bge.gguf",
};
#define N_VOCABS 4
static pl_tokenizer *g_tok[N_VOCABS];

static void load_all(void) {
    const char *root = getenv("POOLED_SHARED");
    if (!root || !*root) root = "../shared";
    for (int i = 0; i < N_VOCABS; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", root, k_files[i]);
        pl_gguf *g = NULL;
        if (pl_gguf_open(path, &g) != PL_OK || pl_tok_load(g, &g_tok[i]) != PL_OK) {
            fprintf(stderr, "tokenizer_fuzz: cannot load %s: %s (set POOLED_SHARED)\n", path,
                    pl_last_error());
            abort();
        }
        pl_gguf_free(g);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_tok[0]) load_all();
    if (size == 0) return 0;
    uint8_t sel = data[0];
    const pl_tokenizer *t = g_tok[sel % N_VOCABS];
    bool add_special = sel & 4, parse_special = sel & 8;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int32_t *ids = NULL;
    int64_t n = 0;
    REQUIRE(pl_tok_encode(t, text, len, add_special, parse_special, &ids, &n) == PL_OK);
    for (int64_t i = 0; i < n; i++) REQUIRE(ids[i] >= 0 && ids[i] < pl_tok_n_vocab(t));

    char *back = NULL;
    size_t back_len = 0;
    REQUIRE(pl_tok_decode(t, ids, n, parse_special, &back, &back_len) == PL_OK);
    /* SPM and byte-level BPE give back valid UTF-8 text (as in llama.cpp, BPE turns invalid
     * bytes into U+FFFD, and SPM's byte fallback can keep an escaped space as U+2581 after a
     * broken sequence); WordPiece lower-cases and drops spaces */
    bool spm = sel % N_VOCABS == 0, bpe = sel % N_VOCABS == 1 || sel % N_VOCABS == 2;
    bool has_space_mark = memmem(text, len, "\xe2\x96\x81", 3) != NULL; /* SPM's own space */
    if (!add_special && ((spm && !parse_special && !has_space_mark) || bpe) &&
        pl_utf8_is_valid(text, len))
        REQUIRE(back_len == len && memcmp(back, text, len) == 0);

    /* streaming: whatever comes out is valid UTF-8, and all of it is the decoded text */
    pl_tok_stream *s = pl_tok_stream_new(t, parse_special);
    REQUIRE(s != NULL);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *piece = pl_tok_stream_push(s, ids[i]);
        REQUIRE(pl_utf8_is_valid(piece, strlen(piece)));
        total += strlen(piece);
    }
    const char *rest = pl_tok_stream_flush(s);
    REQUIRE(pl_utf8_is_valid(rest, strlen(rest)));
    total += strlen(rest);
    REQUIRE(total <= back_len * 3 + 3); /* U+FFFD for a bad byte is at most 3 bytes */
    /* ids straight from the input bytes (any id, valid or not) */
    for (size_t i = 0; i + 2 <= len; i += 2) {
        int32_t id = (int32_t)(((uint8_t)text[i] << 8) | (uint8_t)text[i + 1]) - 64;
        char buf[64];
        int64_t k = pl_tok_piece(t, id, true, buf, sizeof buf);
        REQUIRE((id < 0 || id >= pl_tok_n_vocab(t)) ? k == -1 : k >= 0);
        const char *piece = pl_tok_stream_push(s, id);
        REQUIRE(pl_utf8_is_valid(piece, strlen(piece)));
    }
    pl_tok_stream_free(s);
    free(back);
    free(ids);
    return 0;
}
