/* api_output_test.c - the public API's output controls on the qwen3 fixture (random
 * weights): json_schema (each answer, at several seeds, is one JSON value the schema
 * allows, and ends when it is complete), on_logprob (one call per id before its token,
 * greedy's pick the most likely, the alternatives sorted and summing to at most 1) and
 * pooled_session_ids. Only pooled.h is used. */
#include <ctype.h>
#include <math.h>
#include <pooled.h>

#include "test.h"

#define QWEN3 "fixtures/hf/qwen3/qwen3-q8_0.gguf"

typedef struct {
    char text[8192];
    size_t n;
    int32_t ids[512];
    int n_ids, n_lp;
    pooled_logprob lps[512];
    int order_bad; /* a token came without its logprob just before */
} sink;

static int on_tok(void *user, int32_t id, const char *text, size_t len) {
    sink *k = user;
    if (k->n + len < sizeof k->text) memcpy(k->text + k->n, text, len), k->n += len;
    k->text[k->n] = 0;
    if (id >= 0 && k->n_ids < 512) {
        if (k->n_lp && k->lps[k->n_lp - 1].id != id) k->order_bad++;
        k->ids[k->n_ids++] = id;
    }
    return 0;
}

static void on_lp(void *user, const pooled_logprob *lp) {
    sink *k = user;
    if (k->n_lp < 512) k->lps[k->n_lp++] = *lp;
}

/* The schema below, checked by hand: {"n": integer, "ok": boolean} in any order, n
 * required, nothing else; whitespace allowed where JSON allows it. */
static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}
/* After a key: the ':' and the value's start, NULL without the ':'. */
static const char *value_at(const char *p) {
    p = skip_ws(p);
    return *p == ':' ? skip_ws(p + 1) : NULL;
}
static int valid(const char *s) {
    const char *p = skip_ws(s);
    int has_n = 0, has_ok = 0;
    if (*p++ != '{') return 0;
    for (int first = 1;; first = 0) {
        p = skip_ws(p);
        if (*p == '}' && first) break;
        if (!strncmp(p, "\"n\"", 3) && !has_n) {
            if (!(p = value_at(p + 3))) return 0;
            if (*p == '-') p++;
            if (!isdigit((unsigned char)*p)) return 0;
            while (isdigit((unsigned char)*p)) p++;
            has_n = 1;
        } else if (!strncmp(p, "\"ok\"", 4) && !has_ok) {
            if (!(p = value_at(p + 4))) return 0;
            if (!strncmp(p, "true", 4))
                p += 4;
            else if (!strncmp(p, "false", 5))
                p += 5;
            else
                return 0;
            has_ok = 1;
        } else {
            return 0;
        }
        p = skip_ws(p);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != '}') return 0;
        break;
    }
    return has_n && !*skip_ws(p + 1);
}

static void run_tests(void) {
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu";
    mo.n_ctx = 512;
    pooled_model *m = NULL;
    CHECK(pooled_model_open(test_shared(QWEN3), &mo, &m) == POOLED_OK, "%s", pooled_last_error());
    if (!m) return;
    pooled_session *s = NULL;
    CHECK(pooled_session_new(m, &s) == POOLED_OK, "%s", pooled_last_error());
    if (!s) return;
    pooled_message msg = {"user", "Describe a thing as JSON."};
    pooled_chat_opts co = pooled_chat_opts_default();
    co.no_think = 1;
    int32_t *prompt = NULL;
    size_t np = 0;
    CHECK(pooled_chat_tokenize(m, &msg, 1, &co, &prompt, &np) == POOLED_OK, "%s",
          pooled_last_error());

    /* the checker itself */
    CHECK(valid("{\"n\": -12, \"ok\": true}") && valid(" {\"ok\":false,\"n\":0} ") &&
              !valid("{\"ok\": true}") && !valid("{\"n\": 1, \"x\": 2}") && !valid("{\"n\" 1}") &&
              !valid("{\"n\": 1} x") && !valid("{\"n\": 1.5}"),
          "valid()");
    /* json_schema: every seed's answer is a value the schema allows, ended when complete */
    pooled_sample_opts so = pooled_sample_opts_default();
    so.json_schema = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}, "
                     "\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"n\"], "
                     "\"additionalProperties\": false}";
    so.temperature = 1, so.top_k = 0, so.top_p = 1, so.min_p = 0, so.max_tokens = 300;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        so.seed = seed;
        sink out = {0};
        pooled_result r = {.size = sizeof r};
        CHECK(pooled_generate(s, prompt, np, &so, on_tok, &out, &r) == POOLED_OK, "%s",
              pooled_last_error());
        CHECK(r.stop_reason == POOLED_STOP_EOG && valid(out.text), "seed %llu: reason %d, '%s'",
              (unsigned long long)seed, r.stop_reason, out.text);
    }
    /* without the schema the same seed writes no such thing */
    so.json_schema = NULL;
    so.seed = 1;
    sink free_text = {0};
    CHECK(pooled_generate(s, prompt, np, &so, on_tok, &free_text, NULL) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(!valid(free_text.text), "unconstrained: '%s'", free_text.text);
    so.json_schema = "{\"type\": \"string\", \"pattern\": \"a+\"}";
    CHECK(pooled_generate(s, prompt, np, &so, on_tok, &free_text, NULL) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "json_schema") &&
              strstr(pooled_last_error(), "pattern") && !strchr(pooled_last_error(), '\n'),
          "%s", pooled_last_error());
    so.json_schema = "{not json";
    CHECK(pooled_generate(s, prompt, np, &so, on_tok, &free_text, NULL) == POOLED_ERR_ARG,
          "a schema that is not JSON");
    so.json_schema = NULL;
    /* the schema checked alone */
    CHECK(pooled_json_schema_check("{\"type\": \"object\"}") == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(pooled_json_schema_check("{\"type\": \"string\", \"pattern\": \"a\"}") ==
                  POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "pattern") && !strchr(pooled_last_error(), '\n'),
          "%s", pooled_last_error());
    CHECK(pooled_json_schema_check("{oops") == POOLED_ERR_ARG, "not JSON");
    CHECK(pooled_json_schema_check(NULL) == POOLED_ERR_ARG, "NULL");
    /* literal text around the value: a tool call's tags */
    so.json_schema = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}, "
                     "\"required\": [\"n\"], \"additionalProperties\": false}";
    so.json_prefix = "<tool_call>\n", so.json_suffix = "\n</tool_call>";
    for (uint64_t seed = 1; seed <= 2; seed++) {
        so.seed = seed;
        sink out = {0};
        pooled_result r = {.size = sizeof r};
        CHECK(pooled_generate(s, prompt, np, &so, on_tok, &out, &r) == POOLED_OK, "%s",
              pooled_last_error());
        size_t n = strlen(out.text), pl = strlen(so.json_prefix), sl = strlen(so.json_suffix);
        char mid[8192] = "";
        if (n >= pl + sl) memcpy(mid, out.text + pl, n - pl - sl), mid[n - pl - sl] = 0;
        CHECK(r.stop_reason == POOLED_STOP_EOG && n >= pl + sl &&
                  !strncmp(out.text, so.json_prefix, pl) &&
                  !strcmp(out.text + n - sl, so.json_suffix) && valid(mid),
              "wrapped, seed %llu: reason %d '%s'", (unsigned long long)seed, r.stop_reason,
              out.text);
    }
    so.json_schema = NULL, so.json_prefix = so.json_suffix = NULL;

    /* logprobs: one per id, before the id's token callback; greedy's pick is the most
     * likely; the alternatives sorted, at most all of the probability */
    so.temperature = 0, so.max_tokens = 12, so.ignore_eos = 1;
    so.top_logprobs = 5;
    sink lp = {0};
    so.on_logprob = on_lp, so.logprob_user = &lp;
    pooled_result r = {.size = sizeof r};
    CHECK(pooled_generate(s, prompt, np, &so, on_tok, &lp, &r) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(lp.n_lp == 12 && lp.n_ids == 12 && !lp.order_bad, "%d logprobs, %d ids, %d out of order",
          lp.n_lp, lp.n_ids, lp.order_bad);
    for (int i = 0; i < lp.n_lp; i++) {
        const pooled_logprob *x = &lp.lps[i];
        double sum = 0;
        int sorted = 1;
        for (int j = 0; j < x->n_top; j++) {
            sum += exp(x->top[j].logprob);
            if (j && x->top[j].logprob > x->top[j - 1].logprob) sorted = 0;
        }
        CHECK(x->id == lp.ids[i] && x->n_top == 5 && x->top[0].id == x->id &&
                  x->top[0].logprob == x->logprob && x->logprob <= 0 && sorted && sum <= 1.0001,
              "id %d: %d vs %d, top %d, %g", i, x->id, lp.ids[i], x->n_top, (double)x->logprob);
    }
    /* the same text as without them */
    sink plain = {0};
    so.on_logprob = NULL;
    CHECK(pooled_generate(s, prompt, np, &so, on_tok, &plain, NULL) == POOLED_OK &&
              plain.n_ids == lp.n_ids && !memcmp(plain.ids, lp.ids, sizeof *lp.ids * 12),
          "logprobs changed the ids");
    so.top_logprobs = 21;
    CHECK(pooled_generate(s, prompt, np, &so, NULL, NULL, NULL) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "top_logprobs"),
          "%s", pooled_last_error());

    /* the cache's ids: the prompt, then what was generated but the last id (not yet run) */
    int32_t *have = NULL;
    size_t nh = 0;
    CHECK(pooled_session_ids(s, &have, &nh) == POOLED_OK, "%s", pooled_last_error());
    CHECK(nh == np + 11 && have && !memcmp(have, prompt, np * sizeof *have) &&
              !memcmp(have + np, plain.ids, 11 * sizeof *have),
          "%zu ids cached, want %zu", nh, np + 11);
    pooled_free(have);
    pooled_session_reset(s);
    have = NULL;
    CHECK(pooled_session_ids(s, &have, &nh) == POOLED_OK && nh == 0 && !have, "after reset: %zu",
          nh);
    pooled_free(prompt);
    pooled_session_free(s);
    pooled_model_close(m);
}
