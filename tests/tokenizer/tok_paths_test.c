/* tok_paths_test.c - every fast path of the tokenizer gives what the plain path gives:
 * the hand-written pre-tokenizer matchers against the regex engine on random text, and whole
 * encodes of a long text (chunking at line breaks, the piece cache, SPM's word split)
 * against the plain encode, for each kind of vocabulary. The plain paths themselves are
 * checked against llama.cpp and transformers in tok_vocab_test and tok_ref_test. */
#include "test.h"

#include "format/gguf.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Code points that exercise every branch of the expressions. */
static const uint32_t k_alphabet[] = {
    'a',
    'Z',
    's',
    'S',
    't',
    'T',
    'r',
    'R',
    'e',
    'E',
    'v',
    'V',
    'm',
    'M',
    'l',
    'L',
    'd',
    'D',
    '\'',
    '0',
    '7',
    ' ',
    ' ',
    ' ',
    '\t',
    '\n',
    '\n',
    '\r',
    '.',
    ',',
    '!',
    '$',
    '+',
    '<',
    '|',
    0x00E9 /* é */,
    0x0301 /* combining acute */,
    0x0661 /* Arabic-Indic one */,
    0x00A0 /* no-break space */,
    0x3000 /* ideographic space */,
    0x4E2D /* 中 */,
    0x1F680 /* rocket */,
    0x200D /* ZWJ, Cf */,
    0x17B6 /* Khmer vowel sign, Mc */,
    0x0378 /* unassigned */,
    0x01,
    0x2160 /* Roman numeral one, Nl */,
    0x00B2 /* superscript 2 */,
};

static void test_matchers(void) {
    static const char *names[] = {"gpt-2",          "llama3",      "qwen2",   "qwen35",
                                  "starcoder",      "falcon",      "default", "deepseek-llm",
                                  "deepseek-coder", "deepseek-v3", "bloom",   "viking"};
    pl_regex_scratch sc = {0};
    pl_pieces fast = {0}, slow = {0};
    uint32_t text[48];
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        pl_pretok *p = NULL;
        CHECK(pl_pretok_new(names[k], &p, NULL) == PL_OK, "%s: %s", names[k], pl_last_error());
        if (!p) continue;
        int bad = 0;
        for (int it = 0; it < 3000; it++) {
            size_t n = next_rand() % 40;
            for (size_t i = 0; i < n; i++)
                text[i] = k_alphabet[next_rand() % (sizeof k_alphabet / sizeof k_alphabet[0])];
            pl_pretok_split(p, &sc, text, n, &fast, true);
            pl_pretok_split(p, &sc, text, n, &slow, false);
            bool same = fast.n == slow.n && !memcmp(fast.len, slow.len, fast.n * sizeof *fast.len);
            if (!same && bad++ < 3) {
                fprintf(stderr, "%s differs on:", names[k]);
                for (size_t i = 0; i < n; i++) fprintf(stderr, " %X", text[i]);
                fprintf(stderr, "\n fast:");
                for (size_t i = 0; i < fast.n; i++) fprintf(stderr, " %u", fast.len[i]);
                fprintf(stderr, "\n slow:");
                for (size_t i = 0; i < slow.n; i++) fprintf(stderr, " %u", slow.len[i]);
                fprintf(stderr, "\n");
            }
        }
        CHECK(bad == 0, "%s: %d of 3000 random texts split differently", names[k], bad);
        pl_pretok_free(p);
    }
    pl_pieces_free(&fast), pl_pieces_free(&slow);
    pl_regex_scratch_free(&sc);
}

/* ~150 KB of words, numbers, scripts and whitespace, with plenty of lone line breaks. */
static char *long_text(size_t *len) {
    static const char *words[] = {
        "the",          "Quick",
        "fox's",        "don't",
        "WE'LL",        "3.14159",
        "2024",         "1234567",
        "naïve",        "Cafe\xcc\x81",
        "日本語",       "Привет",
        "안녕하세요",   "🚀",
        "👍🏽",     "printf(\"%d\\n\", x);",
        "<|im_start|>", "<html>",
        "  ",           "\t",
        "\r\n",         "\n\n",
        "   \n",        "x\u00a0y",
        "!!!",          "...",
        "$+<=>^~|`",
    };
    size_t n_words = sizeof words / sizeof words[0], cap = 160000, used = 0;
    char *s = malloc(cap + 64);
    while (used < cap) {
        const char *w = words[next_rand() % n_words];
        size_t l = strlen(w);
        memcpy(s + used, w, l);
        used += l;
        uint32_t r = next_rand() % 8;
        s[used++] = r == 0 ? '\n' : r == 1 ? '.' : ' ';
    }
    s[used] = 0;
    *len = used;
    return s;
}

static void test_encode_paths(void) {
    static const char *files[] = {
        "fixtures/vocab/ggml-vocab-gpt-2.gguf",
        "fixtures/vocab/ggml-vocab-starcoder.gguf",
        "fixtures/vocab/ggml-vocab-falcon.gguf",
        "fixtures/vocab/ggml-vocab-deepseek-coder.gguf",
        "fixtures/vocab/ggml-vocab-llama-spm.gguf",
        "fixtures/vocab/ggml-vocab-bert-bge.gguf",
        "fixtures/hf/llama3_vocab/llama3-vocab.gguf",
        "fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf",
        "models/stories260K.gguf",
    };
    size_t len;
    char *text = long_text(&len);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        pl_gguf *g = NULL;
        pl_tokenizer *t = NULL;
        CHECK(pl_gguf_open(test_shared(files[f]), &g) == PL_OK, "%s", files[f]);
        if (!g) continue;
        CHECK(pl_tok_load(g, &t) == PL_OK, "%s: %s", files[f], pl_last_error());
        pl_gguf_free(g);
        if (!t) continue;
        int32_t *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        CHECK(pl_tok_encode(t, text, len, true, true, &a, &na) == PL_OK, "fast");
        t->slow = true;
        CHECK(pl_tok_encode(t, text, len, true, true, &b, &nb) == PL_OK, "slow");
        int64_t first = 0;
        while (first < na && first < nb && a[first] == b[first]) first++;
        CHECK(na == nb && first == na, "%s: fast %lld ids, plain %lld, first difference at %lld",
              files[f], (long long)na, (long long)nb, (long long)first);
        free(a), free(b);
        pl_tok_free(t);
    }
    free(text);
}

static void run_tests(void) {
    test_matchers();
    test_encode_paths();
}
