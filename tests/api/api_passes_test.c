/* api_passes_test.c - pooled.h's single passes against what pooled_generate gives: eval
 * and its logits (the greedy id of a generation is their argmax; ids run in one call or one
 * at a time agree), verify (the greedy id after each of n ids in one pass is exactly plain
 * decoding's, on a KV-cache model and on the recurrent hybrid, and truncate brings the
 * session back), sessions_step (several conversations, batched on an n_parallel model and
 * one by one on another, each one's ids those of its own generation), the new info fields,
 * and every misuse refused with POOLED_ERR_ARG; and against transformers: eval's logits at
 * every position of the fixtures' 24-id prompt and 32-id greedy continuation (their
 * seq_logits_fp64.f32), verify's ids equal to the reference continuation. Includes nothing of
 * the library but pooled.h. */
#include <pooled.h>
#include <stdbool.h>
#include <stdint.h>

#include "test.h"

enum { N_GEN = 8, MAX_VOCAB = 160000 };

static pooled_model *open_model(const char *file, int n_parallel, int spec) {
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu", mo.n_threads = 1, mo.n_ctx = 96, mo.n_parallel = n_parallel;
    mo.spec = spec;
    pooled_model *m = NULL;
    CHECK(pooled_model_open(test_shared(file), &mo, &m) == POOLED_OK, "%s: %s", file,
          pooled_last_error());
    return m;
}

typedef struct {
    int32_t ids[64];
    int n;
} id_list;

static int keep(void *user, int32_t id, const char *text, size_t len) {
    (void)text, (void)len;
    id_list *l = user;
    if (id >= 0 && l->n < 64) l->ids[l->n++] = id;
    return 0;
}

/* The greedy ids a fresh session generates after prompt (past end-of-generation ids). */
static id_list greedy(pooled_model *m, const int32_t *prompt, size_t n, int n_gen) {
    id_list l = {.n = 0};
    pooled_session *s = NULL;
    pooled_sample_opts o = pooled_sample_opts_default();
    o.temperature = 0, o.max_tokens = n_gen, o.ignore_eos = 1;
    CHECK(pooled_session_new(m, &s) == POOLED_OK &&
              pooled_generate(s, prompt, n, &o, keep, &l, NULL) == POOLED_OK && l.n == n_gen,
          "greedy: %s", pooled_last_error());
    pooled_session_free(s);
    return l;
}

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static size_t n_held(pooled_session *s) {
    int32_t *ids = NULL;
    size_t n = 0;
    pooled_session_ids(s, &ids, &n);
    pooled_free(ids);
    return n;
}

static const int32_t PROMPT[] = {1, 403, 407, 261, 378, 300, 270, 301, 425, 290};
#define N_PROMPT (sizeof PROMPT / sizeof PROMPT[0])

static void check_eval(const char *file) {
    pooled_model *m = open_model(file, 0, POOLED_SPEC_LOOKUP);
    if (!m) return;
    pooled_model_info in = {.size = sizeof in};
    pooled_model_get_info(m, &in);
    id_list g = greedy(m, PROMPT, N_PROMPT, N_GEN);
    float *a = malloc(sizeof *a * MAX_VOCAB), *b = malloc(sizeof *b * MAX_VOCAB);
    pooled_session *s = NULL, *t = NULL;
    CHECK(pooled_session_new(m, &s) == POOLED_OK && pooled_session_new(m, &t) == POOLED_OK,
          "sessions");
    /* the prompt in one call; the logits' argmax is the generation's first id */
    CHECK(pooled_session_eval(s, PROMPT, N_PROMPT) == POOLED_OK &&
              pooled_session_logits(s, a, (size_t)in.n_vocab) == POOLED_OK,
          "%s: eval: %s", file, pooled_last_error());
    CHECK(argmax(a, in.n_vocab) == g.ids[0], "%s: argmax %d, generated %d", file,
          argmax(a, in.n_vocab), g.ids[0]);
    /* the same ids in three calls: the same logits within float tolerance (a batch and
     * single columns may sum in another order) */
    CHECK(pooled_session_eval(t, PROMPT, 4) == POOLED_OK &&
              pooled_session_eval(t, PROMPT + 4, 5) == POOLED_OK &&
              pooled_session_eval(t, PROMPT + 9, N_PROMPT - 9) == POOLED_OK &&
              pooled_session_logits(t, b, (size_t)in.n_vocab) == POOLED_OK,
          "%s: eval in parts: %s", file, pooled_last_error());
    double worst = 0;
    for (int i = 0; i < in.n_vocab; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-3 && argmax(b, in.n_vocab) == g.ids[0], "%s: parts differ by %g", file, worst);
    CHECK(n_held(s) == N_PROMPT && n_held(t) == N_PROMPT, "held ids");

    /* verify: the greedy id after each of 1 + 5 ids in one pass = plain decoding's */
    int32_t next[16];
    CHECK(pooled_session_verify(s, g.ids, 6, next) == POOLED_OK, "%s: verify: %s", file,
          pooled_last_error());
    for (int j = 0; j < 6; j++)
        CHECK(next[j] == g.ids[j + 1], "%s: verify column %d: %d, plain %d", file, j, next[j],
              g.ids[j + 1]);
    CHECK(n_held(s) == N_PROMPT + 6, "verify keeps its ids");
    CHECK(pooled_session_logits(s, a, (size_t)in.n_vocab) == POOLED_ERR_ARG,
          "no logits after a verify pass of several ids");
    /* back to the prompt: the first pass again gives the same */
    CHECK(pooled_session_truncate(s, N_PROMPT) == POOLED_OK && n_held(s) == N_PROMPT,
          "%s: truncate: %s", file, pooled_last_error());
    CHECK(pooled_session_verify(s, g.ids, 3, next) == POOLED_OK && next[0] == g.ids[1] &&
              next[1] == g.ids[2] && next[2] == g.ids[3],
          "%s: verify after truncate", file);
    /* a wrong draft: the columns after it follow the wrong id, the ones before do not */
    int32_t wrong[3] = {g.ids[0], (g.ids[1] + 1) % in.n_vocab, g.ids[2]};
    CHECK(pooled_session_truncate(s, N_PROMPT) == POOLED_OK &&
              pooled_session_verify(s, wrong, 3, next) == POOLED_OK && next[0] == g.ids[1],
          "%s: a rejected draft keeps the first column", file);
    CHECK(pooled_session_truncate(s, 1000) == POOLED_OK && n_held(s) == N_PROMPT + 3,
          "truncate past the end keeps all");
    /* one id: a plain step */
    CHECK(pooled_session_truncate(s, N_PROMPT) == POOLED_OK &&
              pooled_session_verify(s, g.ids, 1, next) == POOLED_OK && next[0] == g.ids[1],
          "%s: a pass of one id", file);

    /* misuse */
    CHECK(pooled_session_verify(s, g.ids, 17, next) == POOLED_ERR_ARG, "17 ids");
    CHECK(pooled_session_verify(s, g.ids, 0, next) == POOLED_ERR_ARG, "0 ids");
    int32_t bad = in.n_vocab;
    CHECK(pooled_session_eval(s, &bad, 1) == POOLED_ERR_ARG &&
              pooled_session_verify(s, &bad, 1, next) == POOLED_ERR_ARG,
          "an id outside the vocabulary");
    CHECK(pooled_session_logits(t, a, (size_t)in.n_vocab - 1) == POOLED_ERR_ARG, "a short buffer");
    int32_t *many = calloc(200, sizeof *many);
    CHECK(pooled_session_eval(t, many, 200) == POOLED_ERR_ARG && n_held(t) == N_PROMPT,
          "past the context: refused, the session as it was (%s)", pooled_last_error());
    free(many);
    CHECK(pooled_session_bytes(s) > 0 && pooled_session_bytes(NULL) == 0, "session bytes");
    CHECK(in.decode_bytes > 0 && in.loaded_bytes >= in.decode_bytes &&
              !strcmp(in.backend_name, "cpu") && in.spec == POOLED_SPEC_LOOKUP,
          "info: decode %llu, loaded %llu, backend %s, spec %d",
          (unsigned long long)in.decode_bytes, (unsigned long long)in.loaded_bytes, in.backend_name,
          in.spec);
    pooled_session_free(s);
    pooled_session_free(t);
    free(a);
    free(b);
    pooled_model_close(m);

    /* a model opened without speculation checks one id at a time */
    m = open_model(file, 0, POOLED_SPEC_OFF);
    if (!m) return;
    pooled_model_get_info(m, &in);
    CHECK(pooled_session_new(m, &s) == POOLED_OK && pooled_session_eval(s, PROMPT, 4) == POOLED_OK,
          "spec off");
    CHECK(pooled_session_verify(s, PROMPT + 4, 2, next) == POOLED_ERR_ARG &&
              pooled_session_verify(s, PROMPT + 4, 1, next) == POOLED_OK &&
              in.spec == POOLED_SPEC_OFF,
          "spec off: 2 ids refused, 1 runs (spec %d)", in.spec);
    pooled_session_free(s);
    pooled_model_close(m);
}

/* Three conversations stepped together: each one's ids are its own generation's. */
static void check_step(const char *file, int n_parallel) {
    enum { N = 3 };
    pooled_model *m = open_model(file, n_parallel, POOLED_SPEC_OFF);
    if (!m) return;
    const int32_t *prompts[N] = {PROMPT, PROMPT + 2, PROMPT + 5};
    size_t lens[N] = {N_PROMPT, 6, 4};
    id_list want[N];
    for (int j = 0; j < N; j++) want[j] = greedy(m, prompts[j], lens[j], N_GEN);
    pooled_session *ss[N] = {NULL};
    int32_t cur[N], next[N];
    for (int j = 0; j < N; j++) {
        CHECK(pooled_session_new(m, &ss[j]) == POOLED_OK, "%s", pooled_last_error());
        if (!ss[j]) return;
        /* the prompt and its first id, as a generation of one id leaves it */
        id_list first = {.n = 0};
        pooled_sample_opts o = pooled_sample_opts_default();
        o.temperature = 0, o.max_tokens = 1;
        CHECK(pooled_generate(ss[j], prompts[j], lens[j], &o, keep, &first, NULL) == POOLED_OK &&
                  first.n == 1 && first.ids[0] == want[j].ids[0],
              "first id");
        cur[j] = first.ids[0];
    }
    pooled_model_stats st = {.size = sizeof st};
    pooled_model_get_stats(m, &st);
    CHECK(st.batched == (n_parallel > 1), "%s, n_parallel %d: batched %d", file, n_parallel,
          st.batched);
    bool same = true;
    for (int t = 1; t < N_GEN; t++) {
        CHECK(pooled_sessions_step(ss, cur, N, next) == POOLED_OK, "step %d: %s", t,
              pooled_last_error());
        for (int j = 0; j < N; j++) {
            same = same && next[j] == want[j].ids[t];
            cur[j] = next[j];
        }
    }
    CHECK(same, "%s, n_parallel %d: every conversation's ids are its own generation's", file,
          n_parallel);
    for (int j = 0; j < N; j++)
        CHECK(n_held(ss[j]) == lens[j] + N_GEN - 1, "held ids %zu", n_held(ss[j]));
    /* misuse: a session twice, of another model, none */
    pooled_session *twice[2] = {ss[0], ss[0]};
    CHECK(pooled_sessions_step(twice, cur, 2, next) == POOLED_ERR_ARG, "a session twice");
    pooled_model *other = open_model(file, 0, POOLED_SPEC_OFF);
    pooled_session *o = NULL;
    if (other && !pooled_session_new(other, &o)) {
        pooled_session *mixed[2] = {ss[0], o};
        CHECK(pooled_sessions_step(mixed, cur, 2, next) == POOLED_ERR_ARG, "two models");
    }
    pooled_session_free(o);
    pooled_model_close(other);
    CHECK(pooled_sessions_step(ss, cur, 0, next) == POOLED_ERR_ARG, "no sessions");
    for (int j = 0; j < N; j++) pooled_session_free(ss[j]);
    pooled_model_close(m);
}

/* ---- against transformers (tests/model/hf_test.c checks the same through the internals) */

enum { REF_PROMPT = 24, REF_GEN = 32 };

/* The ints of "key": [ ... ] in json into out (at most n); how many. */
static int json_ints(const char *json, const char *key, int32_t *out, int n) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": [", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) return 0;
    p += strlen(pat);
    int k = 0;
    while (k < n) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        out[k++] = (int32_t)v;
        p = end;
        while (*p == ',' || *p == ' ' || *p == '\n') p++;
    }
    return k;
}

static void *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) free(b), b = NULL;
    if (b) b[n] = 0, *len = (size_t)n;
    fclose(f);
    return b;
}

/* max |a - ref| / max |ref| */
static double rel_err(const float *a, const float *ref, int n) {
    double mx = 0, err = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        if (d > err) err = d;
        if (fabs((double)ref[i]) > mx) mx = fabs((double)ref[i]);
    }
    return mx > 0 ? err / mx : err;
}

/* dir's q8_0 file (lossless: its weights are the reference's) with an f32 cache and float
 * activations, against transformers' float64 logits within tol of the largest logit (the
 * tolerances of hf_test.c). */
static void check_reference(const char *dir, double tol) {
    char path[512], rel[256];
    snprintf(rel, sizeof rel, "fixtures/hf/%s/ref.json", dir);
    size_t len = 0;
    char *ref = read_all(test_shared(rel), &len);
    snprintf(rel, sizeof rel, "fixtures/hf/%s/seq_logits_fp64.f32", dir);
    float *seq = read_all(test_shared(rel), &len);
    int32_t ids[REF_PROMPT + REF_GEN];
    CHECK(ref && seq && json_ints(ref, "prompt_ids", ids, REF_PROMPT) == REF_PROMPT &&
              json_ints(ref, "greedy_fp64", ids + REF_PROMPT, REF_GEN) == REF_GEN,
          "%s: reference files", dir);
    snprintf(rel, sizeof rel, "fixtures/hf/%s/%s-q8_0.gguf", dir, dir);
    snprintf(path, sizeof path, "%s", test_shared(rel));
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu", mo.n_threads = 2, mo.n_ctx = 64, mo.kv_type = POOLED_KV_F32;
    mo.act_type = POOLED_ACT_F32;
    pooled_model *m = NULL;
    pooled_session *s = NULL;
    pooled_model_info in = {.size = sizeof in};
    if (!ref || !seq || pooled_model_open(path, &mo, &m) || pooled_session_new(m, &s) ||
        pooled_model_get_info(m, &in)) {
        CHECK(0, "%s: %s", dir, pooled_last_error());
        goto done;
    }
    int V = in.n_vocab;
    CHECK(len == (size_t)(REF_PROMPT + REF_GEN) * (size_t)V * sizeof(float), "%s: seq logits", dir);
    float *lg = malloc(sizeof *lg * (size_t)V);
    /* the prompt in one call, then every continuation id alone: row 23 + t each time */
    double worst = 0;
    int rc = pooled_session_eval(s, ids, REF_PROMPT);
    for (int t = 0; !rc && t < REF_GEN; t++) {
        rc = pooled_session_logits(s, lg, (size_t)V);
        double e = rc ? 1 : rel_err(lg, seq + (size_t)(REF_PROMPT - 1 + t) * (size_t)V, V);
        if (e > worst) worst = e;
        CHECK(!rc && argmax(lg, V) == ids[REF_PROMPT + t], "%s: step %d picks %d, reference %d",
              dir, t, argmax(lg, V), ids[REF_PROMPT + t]);
        if (!rc) rc = pooled_session_eval(s, ids + REF_PROMPT + t, 1);
    }
    CHECK(!rc && worst <= tol, "%s: eval's logits %.3g from transformers' (tolerance %g): %s", dir,
          worst, tol, rc ? pooled_last_error() : "");
    /* verify: back to the prompt and its first id, then 16 ids a pass; each column's id is
     * the reference's next */
    int32_t next[16];
    bool same = !pooled_session_truncate(s, REF_PROMPT + 1);
    for (int k = 0; same && k + 16 <= REF_GEN - 1; k += 16) {
        same = !pooled_session_verify(s, ids + REF_PROMPT + 1 + k, 16, next);
        for (int j = 0; same && j < 16; j++) same = next[j] == ids[REF_PROMPT + 2 + k + j];
    }
    CHECK(same, "%s: verify's ids are transformers' greedy continuation: %s", dir,
          pooled_last_error());
    free(lg);
done:
    pooled_session_free(s);
    pooled_model_close(m);
    free(ref);
    free(seq);
}

static void run_tests(void) {
    check_reference("llama", 5e-6);
    check_reference("qwen2", 5e-6);
    check_reference("qwen3", 5e-6);
    check_reference("qwen3_moe", 5e-6);
    check_reference("qwen3_5", 1e-5);
    check_reference("qwen3_5_moe", 2e-5);
    check_eval("models/stories260K.gguf");
    check_eval("fixtures/hf/qwen3/qwen3-q8_0.gguf");
    check_eval("fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf"); /* recurrent: truncate re-runs */
    check_step("models/stories260K.gguf", 3);
    check_step("models/stories260K.gguf", 0);
    check_step("fixtures/hf/qwen3/qwen3-q8_0.gguf", 3);
}
