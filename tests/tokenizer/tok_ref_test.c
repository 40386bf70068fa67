/* tok_ref_test.c - tokenizations recorded from the references, matched exactly:
 * llama.cpp b10573's llama-tokenize (fixtures/llamacpp-b10573/tokenize.json: with and
 * without BOS, special tokens parsed) on two models and two vocabularies, and transformers'
 * tokenizers (fixtures/hf/): the real Qwen3 tokenizer (NFC included), the Llama 3 tokenizer
 * and the tiny byte-level BPE of the architecture fixtures. Decoding must give the text back
 * where the reference says it round-trips. */
#include "test.h"
#include "tok_test_util.h"

#include "base/file_map.h"
#include "base/json.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

static pl_json_doc *load_json(const char *rel) {
    char *text = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    CHECK(pl_file_read_all(test_shared(rel), &text, &len) == PL_OK, "%s", rel);
    if (!text) return NULL;
    CHECK(pl_json_parse(text, len, &d) == PL_OK, "%s: %s", rel, pl_last_error());
    free(text);
    return d;
}

/* Tokenize and compare with a JSON array of ids; prints both on a mismatch. */
static bool check_ids(const pl_tokenizer *t, const char *what, const char *text, size_t len,
                      bool add_special, const pl_json *want) {
    int32_t *ids = NULL;
    int64_t n = 0;
    bool ok = pl_tok_encode(t, text, len, add_special, true, &ids, &n) == PL_OK &&
              (size_t)n == pl_json_count(want);
    for (int64_t i = 0; ok && i < n; i++) {
        int64_t w;
        ok = pl_json_int(pl_json_at(want, (size_t)i), &w) && w == ids[i];
    }
    if (!ok) {
        fprintf(stderr, "%s '%.60s'\n  got ", what, text);
        for (int64_t i = 0; i < n && i < 60; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  want");
        for (size_t i = 0; i < pl_json_count(want) && i < 60; i++) {
            int64_t w = -1;
            pl_json_int(pl_json_at(want, i), &w);
            fprintf(stderr, " %d", (int)w);
        }
        fprintf(stderr, "\n");
    }
    CHECK(ok, "%s", what);
    free(ids);
    return ok;
}

static void check_roundtrip(const pl_tokenizer *t, const char *what, const char *text) {
    int32_t *ids = NULL;
    int64_t n = 0;
    char *back = NULL;
    CHECK(pl_tok_encode(t, text, strlen(text), false, true, &ids, &n) == PL_OK, "%s", what);
    CHECK(pl_tok_decode(t, ids, n, true, &back, NULL) == PL_OK, "%s", what);
    CHECK(back && strcmp(back, text) == 0, "%s round trip: '%s' -> '%s'", what, text,
          back ? back : "");
    free(ids), free(back);
}

static void test_llamacpp(void) {
    pl_json_doc *d = load_json("fixtures/llamacpp-b10573/tokenize.json");
    if (!d) return;
    const pl_json *models = pl_json_get(pl_json_root(d), "models");
    static const char *files[][2] = {
        {"stories260K.gguf", "models/stories260K.gguf"},
        {"llama-2-tiny-random.gguf", "models/llama-2-tiny-random.gguf"},
        {"ggml-vocab-gpt-2.gguf", "fixtures/vocab/ggml-vocab-gpt-2.gguf"},
        {"ggml-vocab-llama-spm.gguf", "fixtures/vocab/ggml-vocab-llama-spm.gguf"},
    };
    int n_cases = 0;
    for (size_t f = 0; f < 4; f++) {
        const pl_json *cases = pl_json_get(models, files[f][0]);
        CHECK(pl_json_count(cases) == 5, "%s: %zu cases", files[f][0], pl_json_count(cases));
        pl_tokenizer *t = load_tok(files[f][1]);
        if (!t) continue;
        for (size_t i = 0; i < pl_json_count(cases); i++) {
            const pl_json *c = pl_json_at(cases, i);
            const pl_json *text = pl_json_get(c, "text");
            const char *s = pl_json_string(text);
            CHECK(s != NULL, "text");
            if (!s) continue;
            check_ids(t, files[f][0], s, text->str.len, true, pl_json_get(c, "ids"));
            check_ids(t, files[f][0], s, text->str.len, false, pl_json_get(c, "ids_no_bos"));
            check_roundtrip(t, files[f][0], s);
            n_cases++;
        }
        pl_tok_free(t);
    }
    CHECK(n_cases == 20, "%d llama.cpp cases", n_cases);
    pl_json_doc_free(d);
}

/* transformers' tokenizations: list of {text, ids, roundtrip_ok} under key. */
static void test_hf(const char *gguf, const char *ref, const char *key, size_t want_cases) {
    pl_json_doc *d = load_json(ref);
    pl_tokenizer *t = load_tok(gguf);
    if (d && t) {
        const pl_json *list = pl_json_get(pl_json_root(d), key);
        CHECK(pl_json_count(list) == want_cases, "%s: %zu cases", ref, pl_json_count(list));
        for (size_t i = 0; i < pl_json_count(list); i++) {
            const pl_json *c = pl_json_at(list, i);
            const pl_json *text = pl_json_get(c, "text");
            if (!pl_json_string(text)) continue;
            /* no BOS is added by these vocabularies: with and without add_special alike */
            check_ids(t, gguf, text->str.s, text->str.len, false, pl_json_get(c, "ids"));
            check_ids(t, gguf, text->str.s, text->str.len, true, pl_json_get(c, "ids"));
            if (pl_json_get(c, "roundtrip_ok") &&
                pl_json_get(c, "roundtrip_ok")->type == PL_JSON_TRUE)
                check_roundtrip(t, gguf, text->str.s);
        }
    }
    pl_tok_free(t);
    pl_json_doc_free(d);
}

/* The Qwen3 chat renderings of the reference tokenize to its ids. */
static void test_qwen3_chat_ids(void) {
    pl_json_doc *d = load_json("fixtures/hf/qwen3_realtok/ref.json");
    pl_tokenizer *t = load_tok("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf");
    if (d && t) {
        const pl_json *ct = pl_json_get(pl_json_root(d), "chat_template");
        CHECK(pl_json_count(ct) == 4, "4 renderings");
        for (size_t i = 0; i < pl_json_count(ct); i++) {
            const pl_json *r = ct->obj.vals[i];
            const pl_json *text = pl_json_get(r, "text");
            if (pl_json_string(text))
                check_ids(t, "qwen3 chat", text->str.s, text->str.len, false,
                          pl_json_get(r, "ids"));
        }
    }
    pl_tok_free(t);
    pl_json_doc_free(d);
}

static void test_specials(void) {
    pl_tokenizer *t = load_tok("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf");
    if (!t) return;
    CHECK(pl_tok_bos(t) == 151643 && pl_tok_eos(t) == 151645, "bos/eos");
    CHECK(!pl_tok_adds_bos(t), "qwen adds no BOS");
    CHECK(pl_tok_is_eog(t, 151645) && pl_tok_is_eog(t, 151643) && !pl_tok_is_eog(t, 151644),
          "eog set");
    CHECK(pl_tok_n_vocab(t) == 151936, "n_vocab");
    /* control tokens stay text unless parse_special */
    int32_t *ids = NULL;
    int64_t n = 0;
    const char *s = "<|im_start|>";
    CHECK(pl_tok_encode(t, s, strlen(s), false, false, &ids, &n) == PL_OK && n > 1,
          "not parsed: %d ids", (int)n);
    free(ids);
    pl_tok_free(t);
    t = load_tok("models/stories260K.gguf");
    if (!t) return;
    CHECK(pl_tok_adds_bos(t) && pl_tok_bos(t) == 1 && pl_tok_eos(t) == 2, "stories specials");
    pl_tok_free(t);
}

static void run_tests(void) {
    test_llamacpp();
    test_hf("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf",
            "fixtures/hf/qwen3_realtok/ref.json", "tokenization", 20);
    test_hf("fixtures/hf/llama3_vocab/llama3-vocab.gguf", "fixtures/hf/llama3_vocab/ref.json",
            "strings", 20);
    test_hf("fixtures/hf/qwen3/qwen3-q8_0.gguf", "fixtures/hf/qwen3/ref.json", "tokenization", 5);
    test_qwen3_chat_ids();
    test_specials();
}
