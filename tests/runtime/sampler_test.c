/* sampler_test.c - penalties and the sampling distribution against hand-computed values,
 * and the seeded draw: the same seed gives the same ids, and draws follow the
 * distribution. */
#include <math.h>

#include "runtime/sampler.h"
#include "test.h"

static bool near(double a, double b) {
    return fabs(a - b) < 1e-6;
}

static pl_sampler_params plain(void) {
    pl_sampler_params p = pl_sampler_defaults();
    p.temp = 1;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    return p;
}

static void test_penalties(void) {
    pl_sampler_params p = plain();
    /* repetition: id 0 occurs 3 times but is penalised once (transformers) */
    p.repeat_penalty = 2;
    float l[4] = {2.0f, -1.0f, 0.5f, 3.0f};
    int32_t ctx[] = {0, 0, 1, 0};
    pl_sampler_penalize(&p, l, 4, ctx, 4);
    CHECK(near(l[0], 1.0) && near(l[1], -2.0) && near(l[2], 0.5) && near(l[3], 3.0),
          "repetition: %g %g %g %g", l[0], l[1], l[2], l[3]);

    /* presence and frequency (OpenAI): logit -= count * f + (count > 0) * presence */
    p = plain();
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    float m[3] = {1, 1, 1};
    int32_t c2[] = {0, 0, 2};
    pl_sampler_penalize(&p, m, 3, c2, 3);
    CHECK(near(m[0], 0.0) && near(m[1], 1.0) && near(m[2], 0.25), "presence/frequency: %g %g %g",
          m[0], m[1], m[2]);

    /* the window: only the last id counts */
    p = plain();
    p.repeat_penalty = 2;
    p.penalty_last_n = 1;
    float w[3] = {1, 1, 1};
    int32_t c3[] = {0, 1, 2};
    pl_sampler_penalize(&p, w, 3, c3, 3);
    CHECK(near(w[0], 1) && near(w[1], 1) && near(w[2], 0.5), "window: %g %g %g", w[0], w[1], w[2]);

    /* ids outside the vocabulary are ignored */
    float z[2] = {1, 1};
    int32_t c4[] = {-1, 7};
    pl_sampler_penalize(&p, z, 2, c4, 2);
    CHECK(near(z[0], 1) && near(z[1], 1), "out-of-range ids");
}

/* The distribution of logits [ln 4, ln 2, 0, 0] is [0.5, 0.25, 0.125, 0.125]. */
static int64_t dist(pl_sampler_params p, pl_candidate *c) {
    float l[4] = {logf(4), logf(2), 0, 0};
    return pl_sampler_distribution(&p, l, 4, c);
}

static void test_distribution(void) {
    pl_candidate c[4];
    pl_sampler_params p = plain();
    int64_t n = dist(p, c);
    CHECK(n == 4 && c[0].id == 0 && c[1].id == 1 && c[2].id == 2 && c[3].id == 3,
          "order (ties lower id first)");
    CHECK(near(c[0].p, 0.5) && near(c[1].p, 0.25) && near(c[2].p, 0.125) && near(c[3].p, 0.125),
          "softmax %g %g %g %g", c[0].p, c[1].p, c[2].p, c[3].p);

    p.top_k = 2;
    n = dist(p, c);
    CHECK(n == 2 && near(c[0].p, 2.0 / 3) && near(c[1].p, 1.0 / 3), "top-k 2: %lld", (long long)n);
    p.top_k = 3; /* the 3rd largest ties with the 4th: transformers keeps both */
    n = dist(p, c);
    CHECK(n == 4, "top-k 3 with a tie keeps %lld", (long long)n);

    p = plain();
    p.top_p = 0.7f; /* 0.5 then 0.75 >= 0.7: two kept */
    n = dist(p, c);
    CHECK(n == 2 && near(c[0].p, 2.0 / 3), "top-p 0.7 keeps %lld", (long long)n);
    p.top_p = 0.5f; /* the first reaches 0.5 */
    n = dist(p, c);
    CHECK(n == 1 && near(c[0].p, 1.0), "top-p 0.5 keeps %lld", (long long)n);

    p = plain();
    p.min_p = 0.3f; /* floor 0.15: 0.125 goes */
    n = dist(p, c);
    CHECK(n == 2 && near(c[1].p, 1.0 / 3), "min-p 0.3 keeps %lld", (long long)n);

    p = plain();
    p.temp = 0.5f; /* probabilities ~ [16, 4, 1, 1] */
    n = dist(p, c);
    CHECK(n == 4 && near(c[0].p, 16.0 / 22) && near(c[2].p, 1.0 / 22), "temperature 0.5: %g",
          c[0].p);

    p = plain(); /* temperature first, then top-p on the sharpened distribution */
    p.temp = 0.5f;
    p.top_p = 0.9f; /* 16/22 = 0.727 < 0.9, + 4/22 = 0.909: two kept */
    n = dist(p, c);
    CHECK(n == 2 && near(c[0].p, 0.8), "temperature then top-p keeps %lld", (long long)n);

    /* a tiny temperature must not overflow */
    p = plain();
    p.temp = 1e-30f;
    n = dist(p, c);
    CHECK(isfinite(c[0].p) && near(c[0].p, 1.0), "tiny temperature: %g", c[0].p);
}

/* a context of zero ids for picks that only need a position (no penalties) */
static int32_t zeros[20000];

static void test_pick(void) {
    /* greedy with a penalty: 3 / 1.1 = 2.73 < 2.9 */
    pl_sampler_params p = plain();
    p.temp = 0;
    p.repeat_penalty = 1.1f;
    pl_sampler *s;
    CHECK(pl_sampler_new(&p, 2, &s) == PL_OK, "new");
    CHECK(!pl_sampler_is_argmax(s), "a penalty is not a plain argmax");
    float l[2] = {3.0f, 2.9f};
    int32_t ctx[] = {0}, id = -1;
    pl_sampler_pick(s, l, ctx, 1, &id);
    CHECK(id == 1, "greedy with penalty picked %d", id);
    pl_sampler_free(s);

    /* same seed, same ids; draws follow [0.5, 0.25, 0.125, 0.125] */
    p = plain();
    p.seed = 42;
    pl_sampler *a, *b;
    pl_sampler_new(&p, 4, &a);
    pl_sampler_new(&p, 4, &b);
    int count[4] = {0}, same = 1;
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        float la[4] = {logf(4), logf(2), 0, 0}, lb[4] = {logf(4), logf(2), 0, 0};
        int32_t ia, ib;
        pl_sampler_pick(a, la, zeros, i, &ia); /* the draw for position i */
        pl_sampler_pick(b, lb, zeros, i, &ib);
        same &= ia == ib;
        count[ia]++;
    }
    CHECK(same, "same seed gave different ids");
    const double want[4] = {0.5, 0.25, 0.125, 0.125};
    for (int i = 0; i < 4; i++)
        CHECK(fabs((double)count[i] / N - want[i]) < 0.015, "id %d drawn %.4f of the time", i,
              (double)count[i] / N);
    pl_sampler_free(a);
    pl_sampler_free(b);

    /* another seed: another sequence */
    p.seed = 43;
    pl_sampler_new(&p, 4, &b);
    p.seed = 42;
    pl_sampler_new(&p, 4, &a);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        float la[4] = {0, 0, 0, 0}, lb[4] = {0, 0, 0, 0};
        int32_t ia, ib;
        pl_sampler_pick(a, la, zeros, i, &ia);
        pl_sampler_pick(b, lb, zeros, i, &ib);
        differ += ia != ib;
    }
    CHECK(differ > 0, "seeds 42 and 43 gave the same 64 ids");
    pl_sampler_free(a);
    pl_sampler_free(b);

    /* bad parameters */
    p = plain();
    p.top_p = 0;
    CHECK(pl_sampler_new(&p, 4, &s) != PL_OK, "top-p 0 accepted");
}

static void test_big_vocab(void) {
    /* 151936 ids with top-k 40: the k-th largest by selection, not a full sort */
    const int V = 151936;
    float *l = malloc(sizeof(float) * V);
    pl_candidate *c = malloc(sizeof(pl_candidate) * V);
    for (int i = 0; i < V; i++) l[i] = (float)((i * 7919) % V) / V;
    pl_sampler_params p = plain();
    p.top_k = 40;
    int64_t n = pl_sampler_distribution(&p, l, V, c);
    bool sorted = true;
    for (int64_t i = 1; i < n; i++) sorted &= c[i - 1].logit >= c[i].logit;
    CHECK(n == 40 && sorted && near(c[0].logit, (float)(V - 1) / V), "top-40 of 151936: %lld",
          (long long)n);
    free(l);
    free(c);
}

/* Picking from the top k+1 pairs gives the id the full logits give, draw for draw, for
 * random logits and settings; a tie across the k-th place is refused (nothing consumed). */
static void test_pick_top(void) {
    enum { V = 600 };
    static float logits[V], work[V];
    uint64_t x = 99;
    int same = 0, refused = 0, total = 0;
    for (int trial = 0; trial < 300; trial++) {
        pl_sampler_params p = pl_sampler_defaults();
        p.seed = (uint64_t)trial;
        p.top_k = 1 + trial % 60;
        p.top_p = trial % 3 ? 0.9f : 1.0f;
        p.min_p = trial % 4 ? 0.05f : 0.0f;
        p.temp = 0.3f + (float)(trial % 5) * 0.4f;
        pl_sampler *a = NULL, *b = NULL;
        pl_sampler_new(&p, V, &a), pl_sampler_new(&p, V, &b);
        CHECK(pl_sampler_top_count(a) == p.top_k + 1, "top count %d", pl_sampler_top_count(a));
        for (int step = 0; step < 20; step++) {
            for (int i = 0; i < V; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                /* coarse values on some trials: ties, also across the k-th place */
                logits[i] = trial % 7 == 0 ? (float)((x >> 40) % 16)
                                           : (float)((x >> 11) % 100000) / 7000.0f;
            }
            /* the top k+1 pairs, descending, ties lower id first (what the device returns) */
            int32_t ids[PL_SAMPLER_TOP_MAX + 1];
            float vals[PL_SAMPLER_TOP_MAX + 1];
            int m = p.top_k + 1;
            memcpy(work, logits, sizeof logits);
            for (int j = 0; j < m; j++) {
                int best = -1;
                for (int i = 0; i < V; i++)
                    if (work[i] > -1e30f && (best < 0 || work[i] > work[best])) best = i;
                ids[j] = best, vals[j] = work[best], work[best] = -1e31f;
            }
            int32_t full = -1, top = -1;
            memcpy(work, logits, sizeof logits);
            pl_sampler_pick(a, work, zeros, step, &full);
            if (pl_sampler_pick_top(b, ids, vals, m, step, &top)) {
                same += top == full;
            } else {
                refused++;
                CHECK(!(vals[m - 1] < vals[m - 2]), "refused without a tie at the k-th place");
                memcpy(work, logits, sizeof logits);
                pl_sampler_pick(b, work, zeros, step, &top);
                same += top == full;
            }
            total++;
        }
        pl_sampler_free(a), pl_sampler_free(b);
    }
    CHECK(same == total, "top-k pick differs from the full pick in %d of %d", total - same, total);
    CHECK(refused > 0 && refused < total / 2,
          "ties refused %d of %d (the coarse trials must hit some)", refused, total);
    /* samplers that need every logit */
    pl_sampler_params p = pl_sampler_defaults();
    pl_sampler *s = NULL;
    p.repeat_penalty = 1.1f;
    pl_sampler_new(&p, V, &s);
    CHECK(pl_sampler_top_count(s) == 0, "penalties need the full logits");
    pl_sampler_free(s);
    p = pl_sampler_defaults(), p.temp = 0;
    pl_sampler_new(&p, V, &s);
    CHECK(pl_sampler_top_count(s) == 0, "greedy has its own path");
    pl_sampler_free(s);
}

/* A watcher sees the penalised logits and the id of each pick; while it is set the device
 * paths are off (it needs every logit), and without it they are as before. */
typedef struct {
    float l[3];
    int32_t id;
    int calls;
} watched;

static void watch(void *ud, const float *logits, int n_vocab, int32_t id) {
    watched *w = ud;
    for (int i = 0; i < n_vocab && i < 3; i++) w->l[i] = logits[i];
    w->id = id;
    w->calls++;
}

static void test_watch(void) {
    pl_sampler_params p = pl_sampler_defaults();
    p.temp = 0;
    pl_sampler *s = NULL;
    pl_sampler_new(&p, 3, &s);
    CHECK(pl_sampler_is_argmax(s), "greedy is an argmax without a watcher");
    watched w = {0};
    pl_sampler_set_watch(s, watch, &w);
    CHECK(!pl_sampler_is_argmax(s), "a watcher needs the logits on the host");
    p.presence_penalty = 2;
    pl_sampler_free(s);
    pl_sampler_new(&p, 3, &s);
    pl_sampler_set_watch(s, watch, &w);
    float l[3] = {3, 2, 0};
    int32_t ctx[] = {0}, id = -1;
    pl_sampler_pick(s, l, ctx, 1, &id);
    CHECK(w.calls == 1 && w.id == 1 && id == 1 && near(w.l[0], 1) && near(w.l[1], 2),
          "watch: %d calls, id %d, logits %g %g", w.calls, w.id, w.l[0], w.l[1]);
    pl_sampler_set_watch(s, NULL, NULL);
    pl_sampler_pick(s, l, ctx, 1, &id);
    CHECK(w.calls == 1, "a cleared watcher is not called");
    pl_sampler_free(s);
    p = pl_sampler_defaults();
    pl_sampler_new(&p, 600, &s);
    pl_sampler_set_watch(s, watch, &w);
    CHECK(pl_sampler_top_count(s) == 0, "a watcher needs every logit (no device top-k)");
    pl_sampler_set_watch(s, NULL, NULL);
    CHECK(pl_sampler_top_count(s) == p.top_k + 1, "no watcher: the device top-k again");
    pl_sampler_free(s);
}

static int allow_2_3(void *ud, uint8_t *allow, int n_vocab) {
    (void)ud;
    for (int i = 0; i < n_vocab; i++) allow[i] = i == 2 || i == 3;
    return 2;
}
static pl_status accept_any(void *ud, int32_t id) {
    (void)ud, (void)id;
    return PL_OK;
}

/* Constrained with every allowed logit NaN: nothing ranks, the argmax lands on a disallowed
 * id (0) and the pick corrects it to the lowest allowed one; the watcher sees the id the
 * pick returns, not the uncorrected one. */
static void test_watch_constrained(void) {
    pl_sampler_params p = pl_sampler_defaults();
    p.temp = 0;
    pl_sampler *s = NULL;
    CHECK(pl_sampler_new(&p, 4, &s) == PL_OK, "%s", pl_last_error());
    if (!s) return;
    pl_sampler_constraint c = {.allowed = allow_2_3, .accept = accept_any};
    CHECK(pl_sampler_constrain(s, &c), "constrain");
    watched w = {0};
    pl_sampler_set_watch(s, watch, &w);
    float l[4] = {1, 5, NAN, NAN};
    int32_t id = -1;
    CHECK(pl_sampler_pick(s, l, NULL, 0, &id) == PL_OK && id == 2, "constrained NaN: id %d", id);
    CHECK(w.calls == 1 && w.id == id, "the watcher saw id %d (%d calls), the pick returned %d",
          w.id, w.calls, id);
    pl_sampler_free(s);
}

static void run_tests(void) {
    test_watch();
    test_watch_constrained();
    test_pick_top();
    test_penalties();
    test_distribution();
    test_pick();
    test_big_vocab();
}
