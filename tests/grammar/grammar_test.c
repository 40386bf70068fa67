/* grammar_test.c - the JSON Schema compiler and matcher on hand-written texts (accepted or
 * refused byte by byte), the schemas it refuses, and the token masker against a brute-force
 * check over stories260K's vocabulary on random walks. */
#include "test.h"

#include "base/status.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

#include <time.h>

static double pl_test_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pl_grammar *compile(const char *schema) {
    pl_grammar *g = NULL;
    pl_status st =
        schema ? pl_grammar_compile(schema, strlen(schema), &g) : pl_grammar_any_object(&g);
    CHECK(st == PL_OK, "%s: %s", schema, pl_last_error());
    return g;
}

/* 1: the whole text is a complete value; 0: some byte is refused; 2: a valid prefix only */
static int judge(const pl_grammar *g, const char *text) {
    pl_gstate *s;
    if (pl_gstate_new(g, &s)) return -1;
    int r = 1;
    for (size_t i = 0; text[i] && r; i++)
        if (!pl_gstate_feed(s, &text[i], 1)) r = 0;
    if (r && !pl_gstate_complete(s)) r = 2;
    pl_gstate_free(s);
    return r;
}

#define OK(g, t)     CHECK(judge(g, t) == 1, "accept %s", t)
#define NO(g, t)     CHECK(judge(g, t) == 0, "refuse %s", t)
#define PREFIX(g, t) CHECK(judge(g, t) == 2, "prefix only %s", t)

static void test_any_object(void) {
    pl_grammar *g = compile(NULL);
    if (!g) return;
    OK(g, "{}");
    OK(g, "{\"a\":1}");
    OK(g, "{\"a\":[1,-2.5e+3,{\"b\":null},[],true,false,\"\"],\"c\":\"x\\\"\\\\\\u00e9\\n\"}");
    OK(g, "{\"k\":\"\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac\"}"); /* é, 😀, € raw */
    OK(g, "{\"\":{\"\":{}}}");
    NO(g, "[]");
    NO(g, "\"x\"");
    NO(g, "{\"a\":1,}");
    NO(g, "{\"a\" :1}"); /* compact: no whitespace */
    NO(g, " {}");
    NO(g, "{}x");
    NO(g, "{\"k\":\"\xc0\x80\"}");         /* overlong */
    NO(g, "{\"k\":\"\xed\xa0\x80\"}");     /* a surrogate in UTF-8 */
    NO(g, "{\"k\":\"\xf4\x90\x80\x80\"}"); /* above U+10FFFF */
    NO(g, "{\"k\":\"a\nb\"}");             /* a raw control byte */
    NO(g, "{\"k\":tru}");
    NO(g, "{\"k\":nul,");
    PREFIX(g, "{\"a\":[1,{\"b\":");
    PREFIX(g, "{\"k\":\"\xf0\x9f");
    pl_grammar_free(g);
}

static void test_numbers(void) {
    pl_grammar *g = compile("{\"type\":\"number\"}");
    if (!g) return;
    const char *ok[] = {"0",         "-0",  "1.5e+10",         "1E5",
                        "-12.25e-3", "0.5", "123456789012345", "1.000000000000001",
                        "9e99"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) OK(g, ok[i]);
    NO(g, "01");
    NO(g, ".5");
    NO(g, "+1");
    NO(g, "1234567890123456"); /* 16 digits */
    NO(g, "1e100");            /* 3 exponent digits */
    NO(g, "1.e5");
    NO(g, "--1");
    NO(g, "\"1\"");
    PREFIX(g, "1.");
    PREFIX(g, "1e");
    PREFIX(g, "1e-");
    PREFIX(g, "-");
    pl_grammar_free(g);
    g = compile("{\"type\":\"integer\"}");
    if (!g) return;
    OK(g, "42");
    OK(g, "-7");
    OK(g, "0");
    NO(g, "1.0");
    NO(g, "1e2");
    NO(g, "00");
    pl_grammar_free(g);
}

static void test_object(void) {
    pl_grammar *g = compile(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
        "\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
        "\"maxItems\":2},\"n\":{\"type\":\"null\"}},\"required\":[\"name\",\"tags\"],"
        "\"additionalProperties\":false,\"title\":\"ignored\"}");
    if (!g) return;
    OK(g, "{\"name\":\"a\",\"tags\":[\"x\"]}");
    OK(g, "{\"name\":\"a\",\"age\":3,\"tags\":[\"x\",\"y\"]}");
    OK(g, "{\"name\":\"\",\"tags\":[\"\"],\"n\":null}");
    NO(g, "{\"tags\":[\"x\"],\"name\":\"a\"}"); /* the schema's order */
    NO(g, "{\"name\":\"a\"}");
    NO(g, "{\"name\":\"a\",\"tags\":[]}");
    NO(g, "{\"name\":\"a\",\"tags\":[\"1\",\"2\",\"3\"]}");
    NO(g, "{\"name\":\"a\",\"extra\":1}");
    NO(g, "{\"name\":\"a\",\"name\":\"b\"}");
    NO(g, "{\"age\":1}"); /* name is required before age */
    NO(g, "{\"nam\":1}");
    NO(g, "{}");
    PREFIX(g, "{\"na");
    pl_grammar_free(g);

    /* keys sharing prefixes, all optional */
    g = compile("{\"properties\":{\"ab\":{\"type\":\"integer\"},\"a\":{\"type\":\"integer\"},"
                "\"abc\":{\"type\":\"boolean\"}}}");
    if (!g) return;
    OK(g, "{}");
    OK(g, "{\"ab\":1,\"a\":2,\"abc\":true}");
    OK(g, "{\"a\":2}");
    OK(g, "{\"abc\":false}");
    NO(g, "{\"a\":2,\"ab\":1}");
    NO(g, "{\"abc\":false,\"a\":1}");
    pl_grammar_free(g);

    g = compile("{\"type\":\"object\",\"additionalProperties\":false}");
    if (!g) return;
    OK(g, "{}");
    NO(g, "{\"a\":1}");
    pl_grammar_free(g);

    g = compile("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}");
    if (!g) return;
    OK(g, "{\"a\":1,\"b\":-2}");
    NO(g, "{\"a\":\"x\"}");
    pl_grammar_free(g);

    /* objects of objects, none with properties (the fuzzer's double free: a 0-byte realloc
     * of the key order freed it and left it dangling) */
    g = compile("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"object\"}}");
    if (!g) return;
    OK(g, "{\"a\":{},\"b\":{\"c\":1}}");
    NO(g, "{\"a\":1}");
    pl_grammar_free(g);
}

static void test_enum_anyof(void) {
    pl_grammar *g = compile("{\"enum\":[\"red\",\"green\",1,12,null,{\"a\":[1]},\"r\\u00e9\"]}");
    if (!g) return;
    OK(g, "\"red\"");
    OK(g, "\"green\"");
    OK(g, "1");
    OK(g, "12");
    OK(g, "null");
    OK(g, "{\"a\":[1]}");
    OK(g, "\"r\xc3\xa9\"");
    PREFIX(g, "\"re");
    NO(g, "2");
    NO(g, "\"blue\"");
    NO(g, "123");
    pl_grammar_free(g);

    g = compile("{\"enum\":[1,\"a\",2.5,3],\"type\":[\"integer\",\"null\"]}");
    if (!g) return;
    OK(g, "1");
    OK(g, "3");
    NO(g, "\"a\"");
    NO(g, "2");
    pl_grammar_free(g);
    g = compile("{\"const\":2,\"enum\":[1,2]}");
    if (!g) return;
    OK(g, "2");
    NO(g, "1");
    pl_grammar_free(g);

    g = compile("{\"const\":\"a\\\"b\"}");
    if (!g) return;
    OK(g, "\"a\\\"b\"");
    NO(g, "\"ab\"");
    pl_grammar_free(g);

    g = compile("{\"anyOf\":[{\"type\":\"string\"},{\"anyOf\":[{\"type\":\"integer\"},{\"type\":"
                "\"array\",\"items\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"boolean\"},"
                "{\"type\":\"object\",\"properties\":{\"x\":{\"const\":1}},\"required\":[\"x\"]}"
                "]}}]}]}");
    if (!g) return;
    OK(g, "\"s\"");
    OK(g, "5");
    OK(g, "[]");
    OK(g, "[null,true,false,{\"x\":1}]");
    NO(g, "[1]");
    NO(g, "5.5");
    NO(g, "[{\"x\":2}]");
    NO(g, "[{}]");
    pl_grammar_free(g);

    g = compile("{\"type\":[\"string\",\"null\"]}");
    if (!g) return;
    OK(g, "null");
    OK(g, "\"\\ud83d\\ude00\\/\\b\\f\\r\\t\"");
    NO(g, "\"\\x\"");
    NO(g, "\"\\u12g4\"");
    NO(g, "1");
    pl_grammar_free(g);

    g = compile("{\"type\":\"array\",\"maxItems\":0}");
    if (!g) return;
    OK(g, "[]");
    NO(g, "[1]");
    pl_grammar_free(g);

    g = compile("{\"type\":\"array\",\"minItems\":2,\"maxItems\":3,\"items\":true}");
    if (!g) return;
    OK(g, "[1,\"a\"]");
    OK(g, "[[],{},null]");
    NO(g, "[1]");
    NO(g, "[1,2,3,4]");
    pl_grammar_free(g);
}

/* literal text around the value (a tool call's tags) */
static void test_wrap(void) {
    pl_grammar *g = compile(NULL);
    if (!g) return;
    CHECK(pl_grammar_wrap(g, "<tool_call>\n", 12, "\n</tool_call>", 13) == PL_OK, "%s",
          pl_last_error());
    OK(g, "<tool_call>\n{\"a\":1}\n</tool_call>");
    NO(g, "{\"a\":1}");
    PREFIX(g, "<tool_call>\n{\"a\":1}");
    NO(g, "<tool_call>\n{\"a\":1}\n</tool_call>x");
    PREFIX(g, "<tool_call>\n{\"a\":1}\n</tool");
    PREFIX(g, "<tool_");
    pl_grammar_free(g);
    /* a number ends at the suffix; no suffix: a number may be the end */
    g = compile("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}");
    if (!g) return;
    CHECK(pl_grammar_wrap(g, "n=", 2, ";", 1) == PL_OK, "%s", pl_last_error());
    OK(g, "n=12;");
    OK(g, "n=null;");
    PREFIX(g, "n=12");
    NO(g, "n=1.5;");
    pl_grammar_free(g);
    g = compile("{\"type\":\"number\"}");
    if (!g) return;
    CHECK(pl_grammar_wrap(g, NULL, 0, NULL, 0) == PL_OK, "%s", pl_last_error());
    OK(g, "12");
    OK(g, "-1.5e3");
    NO(g, "12;");
    CHECK(pl_grammar_wrap(g, "[", 1, "", 0) == PL_OK, "%s", pl_last_error());
    OK(g, "[7");
    NO(g, "7");
    pl_grammar_free(g);
}

static void test_refused(void) {
    const char *bad[] = {
        "{\"$ref\":\"#/x\"}",
        "{\"oneOf\":[{}]}",
        "{\"type\":\"string\",\"pattern\":\"a+\"}",
        "{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}",
        "{\"type\":\"array\",\"minItems\":-1}",
        "{\"type\":\"array\",\"maxItems\":1.5}",
        "{\"type\":\"foo\"}",
        "{\"type\":7}",
        "{\"type\":[]}",
        "{\"enum\":[]}",
        "{\"anyOf\":[]}",
        "{\"anyOf\":[{}],\"type\":\"string\"}",
        "{\"properties\":{\"a\":{}},\"required\":[\"b\"]}",
        "{\"properties\":{\"a\":{},\"a\":{}}}",
        "{\"properties\":{\"a\":false}}",
        "{\"type\":\"array\",\"items\":[{}]}",
        "false",
        "[1]",
        "{",
        "",
        "{\"type\":\"object\",\"properties\":7}",
        "{\"const\":\"a\",\"enum\":[\"b\"]}",
        "{\"enum\":[\"a\"],\"type\":\"integer\"}",
        "{\"enum\":[{}],\"properties\":{}}",
        "{\"const\":1e999}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pl_grammar *g = NULL;
        pl_clear_error();
        pl_status st = pl_grammar_compile(bad[i], strlen(bad[i]), &g);
        CHECK(st != PL_OK && !g && *pl_last_error() && !strchr(pl_last_error(), '\n'),
              "refuse %s (%s)", bad[i], pl_last_error());
        pl_grammar_free(g);
    }
    /* nested deeper than the limit */
    char deep[2048] = "", tail[1024] = "";
    for (int i = 0; i < PL_GRAMMAR_MAX_DEPTH + 2; i++) {
        strcat(deep, "{\"type\":\"array\",\"items\":");
        strcat(tail, "}");
    }
    strcat(deep, "{}");
    strcat(deep, tail);
    pl_grammar *g = NULL;
    CHECK(pl_grammar_compile(deep, strlen(deep), &g) != PL_OK && strstr(pl_last_error(), "deeper"),
          "%s", pl_last_error());
    pl_grammar_free(g);
    /* an anyOf of anyOfs: alternatives flattened and counted */
    pl_strbuf b = {0};
    pl_sb_puts(&b, "{\"anyOf\":[");
    for (int i = 0; i < 40; i++)
        pl_sb_printf(&b, "%s{\"anyOf\":[{\"const\":%d},{\"const\":%d}]}", i ? "," : "", i, -i);
    pl_sb_puts(&b, "]}");
    CHECK(pl_grammar_compile(b.s, b.len, &g) != PL_OK && strstr(pl_last_error(), "alternatives"),
          "%s", pl_last_error());
    pl_sb_free(&b);
}

/* ---- the masker against brute force ---- */

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void walk(const pl_grammar *g, pl_vocab_trie *v, char **pieces, size_t *lens,
                 const pl_tokenizer *t, int steps) {
    int n = pl_vocab_trie_n_vocab(v);
    uint8_t *allow = malloc((size_t)n);
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    pl_gstate *s;
    if (!allow || !ids || pl_gstate_new(g, &s)) return;
    int bad = 0;
    for (int step = 0; step < steps; step++) {
        int na;
        CHECK(pl_token_mask(v, s, allow, &na) == PL_OK, "%s", pl_last_error());
        int m = 0;
        bool complete = pl_gstate_complete(s);
        for (int i = 0; i < n; i++) {
            bool want = pl_tok_is_eog(t, i)
                            ? complete
                            : lens[i] > 0 && pl_gstate_accepts(s, pieces[i], lens[i]);
            if (want != (allow[i] != 0) && bad++ < 5)
                CHECK(false, "step %d id %d '%.*s': mask %d, brute force %d", step, i, (int)lens[i],
                      pieces[i], allow[i], want);
            if (allow[i] && !pl_tok_is_eog(t, i)) ids[m++] = i;
        }
        CHECK(na > 0, "step %d: nothing allowed (a dead end)", step);
        if (m == 0) break;
        int32_t id = ids[rnd() % (uint32_t)m];
        CHECK(pl_gstate_feed(s, pieces[id], lens[id]), "id %d", id);
    }
    pl_gstate_free(s);
    free(allow);
    free(ids);
}

static void test_mask(void) {
    pl_gguf *gg = NULL;
    pl_tokenizer *t = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &gg) == PL_OK, "%s",
          pl_last_error());
    if (!gg || pl_tok_load(gg, &t)) return;
    int n = pl_tok_n_vocab(t);
    char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    for (int i = 0; i < n; i++) pl_tok_piece_str(t, i, false, &pieces[i], &lens[i]);
    pl_vocab_trie *v = NULL;
    CHECK(pl_vocab_trie_from_tok(t, &v) == PL_OK, "%s", pl_last_error());
    const char *schemas[] = {
        NULL,
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"n\":{\"type\":"
        "\"number\"},\"ok\":{\"type\":\"boolean\"},\"list\":{\"type\":\"array\",\"items\":{"
        "\"enum\":"
        "[\"a\",\"ab\",3]},\"maxItems\":4}},\"required\":[\"name\",\"list\"]}",
        "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"array\",\"items\":{\"type\":[\"string\","
        "\"null\"]}}]}",
    };
    for (size_t k = 0; v && k < sizeof schemas / sizeof *schemas; k++) {
        pl_grammar *g = compile(schemas[k]);
        for (int w = 0; g && w < 2; w++) walk(g, v, pieces, lens, t, 40);
        pl_grammar_free(g);
    }
    pl_vocab_trie_free(v);
    for (int i = 0; i < n; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    pl_tok_free(t);
    pl_gguf_free(gg);
}

/* qwen3's 151,936 ids: random walks stay valid; the time per mask goes to stderr. */
static void test_mask_qwen3(void) {
    pl_gguf *gg = NULL;
    pl_tokenizer *t = NULL;
    const char *path = test_shared("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf");
    CHECK(pl_gguf_open(path, &gg) == PL_OK, "%s", pl_last_error());
    if (!gg || pl_tok_load(gg, &t)) return;
    double t0 = pl_test_now();
    pl_vocab_trie *v = NULL;
    CHECK(pl_vocab_trie_from_tok(t, &v) == PL_OK, "%s", pl_last_error());
    double t_build = pl_test_now() - t0;
    int n = pl_tok_n_vocab(t);
    uint8_t *allow = malloc((size_t)n);
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    const char *schemas[] = {
        NULL, "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
              "\"string\"},\"n\":{\"type\":\"number\"},\"list\":{\"type\":\"array\","
              "\"items\":{\"type\":\"integer\"}}},\"required\":[\"name\",\"list\"]}"};
    double t_mask = 0, n_mask = 0, worst = 0;
    for (size_t k = 0; v && allow && ids && k < 2; k++) {
        pl_grammar *g = compile(schemas[k]);
        pl_gstate *s = NULL;
        if (!g || pl_gstate_new(g, &s)) break;
        for (int step = 0; step < 30; step++) {
            int na = 0, m = 0;
            double t1 = pl_test_now();
            CHECK(pl_token_mask(v, s, allow, &na) == PL_OK, "%s", pl_last_error());
            double dt = pl_test_now() - t1;
            t_mask += dt, n_mask++, worst = dt > worst ? dt : worst;
            CHECK(na > 0, "qwen3 step %d: nothing allowed", step);
            for (int i = 0; i < n; i++)
                if (allow[i] && !pl_tok_is_eog(t, i)) ids[m++] = i;
            if (m == 0) break;
            char *p;
            size_t len;
            int32_t id = ids[rnd() % (uint32_t)m];
            if (pl_tok_piece_str(t, id, false, &p, &len)) break;
            CHECK(pl_gstate_feed(s, p, len), "qwen3 id %d", id);
            free(p);
        }
        pl_gstate_free(s);
        pl_grammar_free(g);
    }
    fprintf(stderr,
            "qwen3 vocabulary (%d ids): trie built in %.1f ms, mask %.2f ms per token "
            "on average, %.2f ms at most (%d masks)\n",
            n, t_build * 1e3, n_mask ? t_mask / n_mask * 1e3 : 0, worst * 1e3, (int)n_mask);
    free(allow);
    free(ids);
    pl_vocab_trie_free(v);
    pl_tok_free(t);
    pl_gguf_free(gg);
}

static void run_tests(void) {
    test_any_object();
    test_numbers();
    test_object();
    test_enum_anyof();
    test_wrap();
    test_refused();
    test_mask();
    test_mask_qwen3();
}
