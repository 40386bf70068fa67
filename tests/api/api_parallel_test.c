/* api_parallel_test.c - the public API's sessions generating at once from their own
 * threads on stories260K: with n_parallel 3 their decode steps share batched passes
 * (pooled_result.n_shared), and every session's ids - greedy and seeded sampling, with and
 * without speculative lookup - are those it gets alone on a model without batching; past
 * n_parallel sessions pooled_session_new refuses; with n_parallel 1 generations from
 * several threads interleave and still give their own ids; greedy on the GPU too. Only
 * pooled.h is used. */
#include <pooled.h>
#include <pthread.h>
#include <stdatomic.h>

#include "test.h"

#define N_THREADS 3
#define N_GEN     40

static const char *const PROMPTS[N_THREADS] = {"Once upon a time", "Lily saw a big dog",
                                               "The sun was hot and"};

typedef struct {
    pooled_model *m;
    pooled_session *s;
    int which;
    float temp;
    int spec;
    int32_t ids[N_GEN];
    int n;
    pooled_result r;
    int rc;
    atomic_int *arrived; /* the first id's handshake: every thread in decode together */
} job;

static int on_id(void *user, int32_t id, const char *text, size_t len) {
    (void)text, (void)len;
    job *j = user;
    if (id >= 0 && j->n < N_GEN) j->ids[j->n++] = id;
    if (j->arrived && j->n == 1) { /* wait (a while at most) until all have their first id */
        atomic_fetch_add(j->arrived, 1);
        for (int i = 0; i < 10000 && atomic_load(j->arrived) < N_THREADS; i++) usleep(1000);
    }
    return 0;
}

static void *run_job(void *arg) {
    job *j = arg;
    pooled_sample_opts so = pooled_sample_opts_default();
    so.temperature = j->temp, so.seed = 7 + (uint64_t)j->which, so.max_tokens = N_GEN;
    so.ignore_eos = 1, so.spec = j->spec;
    j->r = (pooled_result){.size = sizeof j->r};
    j->rc = pooled_generate_text(j->s, PROMPTS[j->which], &so, on_id, j, &j->r);
    return NULL;
}

static const char *backend = "cpu";

static pooled_model *open_model(int n_parallel) {
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = backend, mo.n_threads = 1, mo.n_ctx = 128, mo.n_parallel = n_parallel;
    pooled_model *m = NULL;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_OK,
          "n_parallel %d: %s", n_parallel, pooled_last_error());
    return m;
}

/* Every prompt's ids alone, one after the other, on m. */
static void alone(pooled_model *m, float temp, int spec, job *ref) {
    for (int i = 0; i < N_THREADS; i++) {
        ref[i] = (job){.m = m, .which = i, .temp = temp, .spec = spec};
        CHECK(pooled_session_new(m, &ref[i].s) == POOLED_OK, "%s", pooled_last_error());
        if (!ref[i].s) continue;
        run_job(&ref[i]);
        CHECK(ref[i].rc == POOLED_OK && ref[i].n == N_GEN, "alone %d: %s", i, pooled_last_error());
        pooled_session_free(ref[i].s);
    }
}

/* The prompts at once on m, one thread each; their ids must be ref's. */
static int64_t at_once(pooled_model *m, float temp, int spec, const job *ref, const char *what) {
    job j[N_THREADS];
    pthread_t th[N_THREADS];
    atomic_int arrived = 0;
    int64_t shared = 0;
    for (int i = 0; i < N_THREADS; i++) {
        j[i] = (job){.m = m, .which = i, .temp = temp, .spec = spec, .arrived = &arrived};
        CHECK(pooled_session_new(m, &j[i].s) == POOLED_OK, "%s: %s", what, pooled_last_error());
    }
    for (int i = 0; i < N_THREADS; i++) pthread_create(&th[i], NULL, run_job, &j[i]);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N_THREADS; i++) {
        CHECK(j[i].rc == POOLED_OK && j[i].n == N_GEN &&
                  !memcmp(j[i].ids, ref[i].ids, sizeof j[i].ids),
              "%s: prompt %d's ids differ from alone (rc %d, %d ids)", what, i, j[i].rc, j[i].n);
        shared += j[i].r.n_shared;
        pooled_session_free(j[i].s);
    }
    return shared;
}

/* The same on the GPU (lavapipe in CI): its batched steps, greedy, against its own lone
 * generations. */
static void check_gpu(void) {
    backend = "webgpu";
    pooled_model *one = open_model(1), *par = open_model(N_THREADS);
    if (one && par) {
        job ref[N_THREADS];
        alone(one, 0, POOLED_SPEC_OFF, ref);
        CHECK(at_once(par, 0, POOLED_SPEC_OFF, ref, "webgpu") > 0, "webgpu: no shared step");
    }
    pooled_model_close(one);
    pooled_model_close(par);
    backend = "cpu";
}

static void run_tests(void) {
    check_gpu();
    pooled_model *one = open_model(1), *par = open_model(N_THREADS);
    if (!one || !par) return;
    for (int t = 0; t < 2; t++) {
        float temp = t ? 0.8f : 0;
        job ref[N_THREADS];
        alone(one, temp, POOLED_SPEC_OFF, ref);
        pooled_model_stats s0 = {.size = sizeof s0}, s1 = {.size = sizeof s1};
        pooled_model_get_stats(par, &s0);
        int64_t shared = at_once(par, temp, POOLED_SPEC_OFF, ref, t ? "sampled" : "greedy");
        CHECK(shared > 0, "temp %.1f: no decode step was shared", (double)temp);
        /* the model's counters: every shared step of a session is a column of a batched
         * step (which may also have run a lone column), some of them more than one */
        CHECK(pooled_model_get_stats(par, &s1) == POOLED_OK && s1.batched &&
                  s1.n_batched_steps > s0.n_batched_steps &&
                  s1.n_batched_columns - s0.n_batched_columns >= (uint64_t)shared &&
                  s1.n_batched_columns - s0.n_batched_columns >
                      s1.n_batched_steps - s0.n_batched_steps,
              "stats: %llu steps, %llu columns, %lld shared",
              (unsigned long long)(s1.n_batched_steps - s0.n_batched_steps),
              (unsigned long long)(s1.n_batched_columns - s0.n_batched_columns), (long long)shared);
        /* n_parallel 1: no shared steps, the same ids */
        CHECK(at_once(one, temp, POOLED_SPEC_OFF, ref, "n_parallel 1") == 0, "shared on one");
        /* speculative lookup on the batch's sessions: its own passes, the same ids */
        at_once(par, temp, POOLED_SPEC_LOOKUP, ref, "spec lookup");
    }
    /* at most n_parallel sessions; a freed one's slot is taken again */
    pooled_session *s[N_THREADS + 1] = {0};
    for (int i = 0; i < N_THREADS; i++)
        CHECK(pooled_session_new(par, &s[i]) == POOLED_OK, "%s", pooled_last_error());
    CHECK(pooled_session_new(par, &s[N_THREADS]) == POOLED_ERR_ARG && !s[N_THREADS] &&
              strstr(pooled_last_error(), "n_parallel"),
          "session %d: %s", N_THREADS + 1, pooled_last_error());
    pooled_session_free(s[1]);
    s[1] = NULL;
    CHECK(pooled_session_new(par, &s[1]) == POOLED_OK, "after a free: %s", pooled_last_error());
    for (int i = 0; i < N_THREADS; i++) pooled_session_free(s[i]);
    pooled_model_opts mo = pooled_model_opts_default();
    mo.n_parallel = 65;
    pooled_model *bad = NULL;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &bad) == POOLED_ERR_ARG &&
              !bad && strstr(pooled_last_error(), "n_parallel"),
          "%s", pooled_last_error());
    pooled_model_close(one);
    pooled_model_close(par);
}
