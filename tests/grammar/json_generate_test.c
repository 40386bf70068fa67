/* json_generate_test.c - constrained generation end to end on the CPU: stories260K (random
 * enough) sampled with several seeds under JSON Schemas; every text that ends parses and
 * validates (an independent validator, json_check.h); one cut by the length limit is a
 * prefix the grammar takes. Also the sampler's side: with a constraint it is never a
 * device argmax or top-k, and it picks only allowed ids even where NaN logits would win. */
#include "cpu/cpu.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "runtime/generate.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include "json_check.h"
#include "json_gen.h"

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"score\":{\"type\":"
    "\"number\"},\"ok\":{\"type\":\"boolean\"},\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"integer\"},"
    "{\"const\":\"x\"}]},\"minItems\":1,\"maxItems\":3},\"child\":{\"type\":\"object\","
    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"additionalProperties\":"
    "false},\"note\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"id\",\"color\",\"tags\","
    "\"child\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":5}", NULL, /* json_object */
};

static void generate(const pl_model *m, const pl_tokenizer *t, pl_vocab_trie *v, int k,
                     uint64_t seed, int *n_done) {
    pl_grammar *g = NULL;
    pl_status st = schemas[k] ? pl_grammar_compile(schemas[k], strlen(schemas[k]), &g)
                              : pl_grammar_any_object(&g);
    CHECK(st == PL_OK, "%s", pl_last_error());
    gen_out o = {.t = t};
    if (!st) st = jc_generate(m, v, g, seed, 150, &o);
    CHECK(st == PL_OK, "schema %d seed %llu: %s", k, (unsigned long long)seed, pl_last_error());
    if (getenv("JSON_TEST_SHOW"))
        fprintf(stderr, "schema %d seed %llu: %.*s\n", k, (unsigned long long)seed, (int)o.text.len,
                o.text.s);
    if (!st && o.eog) {
        (*n_done)++;
        CHECK(jc_check(o.text.s ? o.text.s : "", o.text.len, schemas[k]),
              "schema %d seed %llu: %.*s does not validate", k, (unsigned long long)seed,
              (int)o.text.len, o.text.s);
    } else if (!st) {
        pl_gstate *gs2 = NULL;
        CHECK(o.n == 150, "schema %d seed %llu: stopped early", k, (unsigned long long)seed);
        CHECK(pl_gstate_new(g, &gs2) == PL_OK && pl_gstate_feed(gs2, o.text.s, o.text.len),
              "schema %d seed %llu: the cut text is no prefix", k, (unsigned long long)seed);
        pl_gstate_free(gs2);
    }
    pl_sb_free(&o.text);
    pl_grammar_free(g);
}

/* The sampler: constrained means host logits, and only allowed ids. */
static int allow_even(void *ud, uint8_t *allow, int n) {
    (void)ud;
    for (int i = 0; i < n; i++) allow[i] = i % 2 == 0;
    return (n + 1) / 2;
}
static pl_status accept_id(void *ud, int32_t id) {
    *(int32_t *)ud = id;
    return PL_OK;
}

static void test_sampler(void) {
    pl_sampler_params p = pl_sampler_defaults();
    p.temp = 0;
    pl_sampler *s = NULL;
    CHECK(pl_sampler_new(&p, 8, &s) == PL_OK, "%s", pl_last_error());
    if (!s) return;
    int32_t seen = -1, id = -1;
    pl_sampler_constraint c = {.allowed = allow_even, .accept = accept_id, .ud = &seen};
    CHECK(pl_sampler_is_argmax(s), "greedy alone is a device argmax");
    CHECK(pl_sampler_constrain(s, &c), "constrain");
    CHECK(!pl_sampler_is_argmax(s) && pl_sampler_top_count(s) == 0,
          "constrained: every logit on the host");
    float lg[8] = {0, 5, 1, 9, 2, 0, 0, 0};
    CHECK(pl_sampler_pick(s, lg, NULL, 0, &id) == PL_OK && id == 4 && seen == 4,
          "greedy: the best allowed id (got %d)", id);
    float nan_lg[8] = {NAN, 5, NAN, 9, NAN, 0, NAN, 0};
    CHECK(pl_sampler_pick(s, nan_lg, NULL, 0, &id) == PL_OK && id % 2 == 0, "NaN: got %d", id);
    pl_sampler_free(s);
    p = pl_sampler_defaults(); /* temp 0.8, top-k 40: would take the device's top-k */
    CHECK(pl_sampler_new(&p, 64, &s) == PL_OK, "%s", pl_last_error());
    if (!s) return;
    CHECK(pl_sampler_top_count(s) > 0, "unconstrained sampling takes the device's top-k");
    CHECK(pl_sampler_constrain(s, &c), "constrain");
    CHECK(pl_sampler_top_count(s) == 0, "constrained sampling takes no device top-k");
    for (int seed = 0; seed < 50; seed++) {
        float l2[64] = {0, 5, 1, 9, 2, 0, 3, 0};
        for (int i = 8; i < 64; i++) l2[i] = (float)(i % 7);
        CHECK(pl_sampler_pick(s, l2, NULL, seed, &id) == PL_OK && id % 2 == 0 && seen == id,
              "sampled: %d is not allowed", id);
    }
    CHECK(pl_sampler_constrain(s, NULL) && pl_sampler_top_count(s) > 0, "cleared");
    pl_sampler_free(s);
}

static void run_tests(void) {
    test_sampler();
    pl_backend *be = NULL;
    pl_model *m = NULL;
    pl_gguf *gg;
    pl_tokenizer *t;
    pl_vocab_trie *v;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    jc_open_stories(&gg, &t, &v);
    if (!be || !v) {
        jc_close_stories(gg, t, v);
        pl_be_destroy(be);
        return;
    }
    CHECK(pl_model_load(gg, be, NULL, &m) == PL_OK, "%s", pl_last_error());
    for (int k = 0; m && k < 3; k++) {
        int done = 0;
        int n = k == 2 ? 2 : 5; /* json_object: free strings, which seldom end */
        for (uint64_t seed = 0; seed < (uint64_t)n; seed++) generate(m, t, v, k, seed, &done);
        fprintf(stderr, "schema %d: %d of %d generations ended (the rest hit the limit)\n", k, done,
                n);
        CHECK(k == 2 || done >= 2, "schema %d: only %d of %d ended", k, done, n);
    }
    pl_model_free(m);
    jc_close_stories(gg, t, v);
    pl_be_destroy(be);
}
