/* session_recurrent_test.c - sessions over a recurrent model (the qwen35 fixture), whose
 * state cannot drop its last positions the way a KV cache can. Every case must leave the
 * logits of a fresh session over the same ids, bit for bit:
 *   - a second turn that diverges from the first inside the cached ids restarts from 0;
 *   - a second turn that extends the cached ids runs only the new ones;
 *   - after a greedy run stopped by its callback (the state ran one id past the cache), a
 *     turn that goes on with that id runs only what follows it, one that diverges before it
 *     restarts, and a push goes back to the cached ids. */
#include "cpu/cpu.h"
#include "model/fixture.h"
#include "runtime/session.h"
#include "test.h"

#define NP 16

static const int32_t p1[NP] = {18, 751, 334, 202, 338, 671, 341, 828,
                               57, 751, 979, 867, 749, 102, 113, 57};

static pl_model *model;
static int V;

static pl_session *new_session(void) {
    pl_state_opts o = pl_state_opts_default(model);
    o.n_ctx = 96;
    o.n_batch = 8; /* prompts run in several calls */
    pl_session *s = NULL;
    CHECK(pl_session_new(model, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

/* s's logits equal those of a fresh session set to ids. */
static void check_fresh(pl_session *s, const int32_t *ids, int64_t n, const char *what) {
    pl_session *f = new_session();
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    pl_status st = f ? pl_session_set(f, ids, n, NULL) : PL_ERR;
    if (!st) st = pl_session_logits(s, a);
    if (!st) st = pl_session_logits(f, b);
    CHECK(!st && !memcmp(a, b, sizeof(float) * (size_t)V),
          "%s: logits differ from a fresh run (%s)", what, st ? pl_last_error() : "");
    free(a), free(b);
    pl_session_free(f);
}

/* set ids; n_run must be want_run */
static void set_ids(pl_session *s, const int32_t *ids, int64_t n, int64_t want_run,
                    const char *what) {
    int64_t ran = -1;
    pl_status st = pl_session_set(s, ids, n, &ran);
    CHECK(st == PL_OK, "%s: %s", what, pl_last_error());
    CHECK(st || ran == want_run, "%s: ran %lld ids, expected %lld", what, (long long)ran,
          (long long)want_run);
    if (!st) check_fresh(s, ids, n, what);
}

static bool stop_at_3(void *ud, int32_t id) {
    (void)id;
    return ++*(int *)ud < 3;
}

static void run_tests(void) {
    pl_gguf *g = NULL;
    pl_backend *be = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf"), &g) == PL_OK, "%s",
          pl_last_error());
    CHECK(g && pl_cpu_new(2, &be) == PL_OK && pl_model_load(g, be, NULL, &model) == PL_OK, "%s",
          pl_last_error());
    if (!model) return;
    V = pl_model_get_info(model)->n_vocab;
    pl_session *s = new_session();
    int32_t ids[64];
    int64_t n, ng = 0;

    /* turn 1, then a turn that diverges at position 8: a restart */
    set_ids(s, p1, NP, NP, "turn 1");
    CHECK(pl_session_greedy(s, 6, NULL, NULL, &ng) == PL_OK && ng == 6, "%s", pl_last_error());
    memcpy(ids, p1, sizeof p1);
    for (int i = 8; i < 14; i++) ids[i] = 500 + i;
    set_ids(s, ids, 14, 14, "diverging turn");

    /* greedy, then a turn that extends exactly what is cached: only the new ids */
    CHECK(pl_session_greedy(s, 4, NULL, NULL, &ng) == PL_OK && ng == 4, "%s", pl_last_error());
    const int32_t *c = pl_session_ids(s, &n);
    CHECK(n == 14 + 3, "greedy of 4 caches 3 ids: %lld", (long long)n);
    memcpy(ids, c, sizeof *ids * (size_t)n);
    ids[n] = 7, ids[n + 1] = 9;
    set_ids(s, ids, n + 2, 2, "extending turn");

    /* a greedy run stopped by its callback runs one id past the cache */
    set_ids(s, p1, NP, NP, "turn 1 again");
    int count = 0;
    CHECK(pl_session_greedy(s, 10, stop_at_3, &count, &ng) == PL_OK && ng == 3, "%s",
          pl_last_error());
    c = pl_session_ids(s, &n);
    CHECK(n == NP + 2, "stopped greedy caches 2 ids: %lld", (long long)n);
    memcpy(ids, c, sizeof *ids * (size_t)n);
    /* going on with the id the state ran (the greedy pick after the cached ids): only
     * what follows it */
    pl_session *h = new_session();
    int32_t last = -1;
    if (h && pl_session_set(h, ids, n, NULL) == PL_OK) {
        pl_buf *lg = pl_state_logits(pl_session_state(h));
        pl_be_argmax(lg, 1, pl_state_ids(pl_session_state(h)), 0);
        pl_be_read(pl_state_ids(pl_session_state(h)), 0, &last, sizeof last);
    }
    pl_session_free(h);
    ids[n] = last, ids[n + 1] = 11;
    set_ids(s, ids, n + 2, 1, "going on after a stopped greedy run");

    /* diverging just before the id the state ran past: a restart */
    count = 0;
    set_ids(s, p1, NP, NP, "turn 1, third time");
    CHECK(pl_session_greedy(s, 10, stop_at_3, &count, &ng) == PL_OK && ng == 3, "%s",
          pl_last_error());
    ids[n] = (last + 1) % V;
    set_ids(s, ids, n + 1, n + 1, "diverging after a stopped greedy run");

    /* a push after a stopped greedy run: back to the cached ids (here by a rerun) */
    count = 0;
    set_ids(s, p1, NP, NP, "turn 1, fourth time");
    CHECK(pl_session_greedy(s, 10, stop_at_3, &count, &ng) == PL_OK && ng == 3, "%s",
          pl_last_error());
    CHECK(pl_session_push(s, 42) == PL_OK, "push: %s", pl_last_error());
    ids[n] = 42;
    check_fresh(s, ids, n + 1, "push after a stopped greedy run");

    pl_session_free(s);
    pl_model_free(model);
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    pl_gguf_free(g);
}
