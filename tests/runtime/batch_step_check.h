/* batch_step_check.h - the checks batch_step_test.c (CPU) and gpu_model_test.c (WebGPU)
 * share, of continuous batching (pl_session_push_batch): sessions at different
 * positions that each append one id in one batched pass get the logits and the greedy ids
 * that each gets from its own pushes, then go on alone as after their own pushes (the same
 * logits, the same positions to rewind to: a hybrid's recurrent states and snapshots are
 * each session's own); a batch of one is bit-identical to a push (it is one; on the GPU
 * checked within the same tolerance as the batched steps); bad batches are one-line errors
 * that leave the caches as they were. Include after test.h. */
#ifndef PL_TEST_BATCH_STEP_CHECK_H
#define PL_TEST_BATCH_STEP_CHECK_H

#include "model/model.h"
#include "runtime/session.h"

/* bs_ns sessions step together (3 by default; 9 reaches the CPU's GEMM, which takes 8 or
 * more columns), bs_steps steps each (BS_STEPS by default, fewer where a backend is slow):
 * batched ones, then the last BS_ALONE each session's own pushes (what a state left by
 * batched steps goes on to). BS_CTX positions. */
enum { BS_NS = 3, BS_MAX = 9, BS_STEPS = 12, BS_ALONE = 3, BS_CTX = 64 };
static int bs_ns = BS_NS, bs_steps = BS_STEPS;
/* The batched sessions are slots of the batch's caches (pl_batch_new_slots: one RoPE,
 * store and attention for all columns), the sessions stepping alone their own. */
static bool bs_slots;
static const int bs_plen[BS_MAX] = {5, 9, 14, 3, 7, 11, 2, 13, 6};

/* A session of BS_CTX positions; recurrent states keep snapshots (n_snap), so the batched
 * step has to keep them as a push does. */
static pl_state_opts bs_opts(const pl_model *m) {
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = BS_CTX;
    o.n_batch = 16;
    o.n_snap = 4;
    return o;
}

static pl_session *bs_session(const pl_model *m) {
    pl_state_opts o = bs_opts(m);
    pl_session *s = NULL;
    CHECK(pl_session_new(m, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

static void bs_prompt(int k, int V, int32_t *ids) {
    for (int i = 0; i < bs_plen[k]; i++) ids[i] = (int32_t)((i * 7 + k * 13 + 3) % V);
}

static int32_t bs_argmax(const float *l, int V) {
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

/* The largest difference between two rows of logits, relative to the largest logit (at
 * least 1). */
static double bs_diff(const float *a, const float *b, size_t n) {
    double diff = 0, scale = 1;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > diff) diff = fabs((double)a[i] - b[i]);
        if (fabs(a[i]) > scale) scale = fabs(a[i]);
    }
    return diff / scale;
}

/* bs_steps greedy ids of each prompt: alone (each session pushing its own id) or batched
 * (one pl_session_push_batch per step for all of them, then BS_ALONE pushes); the logits
 * of every step, and to which positions each state can go back after the last batched
 * step (rew). */
static void bs_run(const pl_model *m, bool batched, int32_t ids[BS_MAX][BS_STEPS], float *logits,
                   bool rew[BS_MAX][BS_CTX + 1]) {
    const int V = pl_model_get_info(m)->n_vocab;
    pl_session *ss[BS_MAX];
    pl_batch *b = NULL;
    pl_state_opts o = bs_opts(m);
    bool slots = bs_slots && batched;
    if (slots)
        CHECK(pl_batch_new_slots(m, bs_ns, &o, &b) == PL_OK, "%s", pl_last_error());
    else
        CHECK(pl_batch_new(m, bs_ns, &b) == PL_OK, "%s", pl_last_error());
    for (int k = 0; k < bs_ns; k++) {
        int32_t p[16];
        bs_prompt(k, V, p);
        ss[k] = NULL;
        if (slots)
            CHECK(b && pl_batch_session_new(b, k, &o, &ss[k]) == PL_OK, "%s", pl_last_error());
        else
            ss[k] = bs_session(m);
        CHECK(pl_session_set(ss[k], p, bs_plen[k], NULL) == PL_OK, "%s", pl_last_error());
    }
    for (int t = 0; t < bs_steps; t++) {
        int32_t next[BS_MAX];
        for (int k = 0; k < bs_ns; k++) {
            float *l = logits + ((size_t)t * bs_ns + (size_t)k) * (size_t)V;
            CHECK(pl_session_logits(ss[k], l) == PL_OK, "%s", pl_last_error());
            next[k] = ids[k][t] = bs_argmax(l, V);
        }
        if (batched && t < bs_steps - BS_ALONE)
            CHECK(pl_session_push_batch(b, ss, next, bs_ns) == PL_OK, "%s", pl_last_error());
        else
            for (int k = 0; k < bs_ns; k++)
                CHECK(pl_session_push(ss[k], next[k]) == PL_OK, "%s", pl_last_error());
        for (int k = 0; t == bs_steps - BS_ALONE - 1 && k < bs_ns; k++)
            for (int p = 0; p <= BS_CTX; p++)
                rew[k][p] = pl_state_can_rewind(pl_session_state(ss[k]), p);
    }
    for (int k = 0; k < bs_ns; k++) pl_session_free(ss[k]);
    pl_batch_free(b);
}

/* Sessions stepped together against each stepping alone: the same ids, the same logits
 * bit for bit (exact: the CPU) or within 1e-5 of the largest, also of the steps each
 * session then takes alone, and the same positions to go back to. */
static void bs_same_as_alone(const pl_model *m, const char *name, bool exact) {
    const int V = pl_model_get_info(m)->n_vocab;
    size_t n = (size_t)bs_steps * bs_ns * (size_t)V;
    float *la = malloc(sizeof *la * n), *lb = malloc(sizeof *lb * n);
    int32_t ia[BS_MAX][BS_STEPS] = {{0}}, ib[BS_MAX][BS_STEPS] = {{0}};
    bool ra[BS_MAX][BS_CTX + 1] = {{0}}, rb[BS_MAX][BS_CTX + 1] = {{0}};
    if (!la || !lb) return;
    bs_run(m, false, ia, la, ra);
    bs_run(m, true, ib, lb, rb);
    CHECK(!memcmp(ia, ib, sizeof ia), "%s: batched greedy ids differ from each session's own",
          name);
    CHECK(!memcmp(ra, rb, sizeof ra),
          "%s: after batched steps the states go back to other positions than after their own",
          name);
    double diff = bs_diff(la, lb, n);
    if (exact)
        CHECK(!memcmp(la, lb, sizeof *la * n),
              "%s: batched logits differ from each session's "
              "own by %g (relative to the largest), not bit for bit",
              name, diff);
    else
        CHECK(diff <= 1e-5, "%s: logits differ by %g (relative to the largest)", name, diff);
    printf("%s: %d sessions x %d steps (%d batched): ids %s, logits within %g of their own "
           "(relative to the largest)\n",
           name, bs_ns, bs_steps, bs_steps - BS_ALONE,
           memcmp(ia, ib, sizeof ia) ? "DIFFER" : "the same", diff);
    free(la);
    free(lb);
}

/* One session in a batch: exactly a push (exact), or within 1e-5 of it. */
static void bs_batch_of_one(const pl_model *m, const char *name, bool exact) {
    const int V = pl_model_get_info(m)->n_vocab;
    int32_t p[16];
    bs_prompt(1, V, p);
    pl_session *a = bs_session(m), *c = bs_session(m);
    pl_batch *b = NULL;
    float *la = malloc(sizeof *la * (size_t)V), *lc = malloc(sizeof *lc * (size_t)V);
    CHECK(pl_batch_new(m, 4, &b) == PL_OK, "%s", pl_last_error());
    if (!a || !c || !b || !la || !lc) goto out;
    CHECK(pl_session_set(a, p, bs_plen[1], NULL) == PL_OK &&
              pl_session_set(c, p, bs_plen[1], NULL) == 0,
          "set");
    for (int t = 0; t < 4; t++) {
        int32_t id = (int32_t)((t * 31 + 5) % V);
        CHECK(pl_session_push(a, id) == PL_OK, "%s", pl_last_error());
        CHECK(pl_session_push_batch(b, &c, &id, 1) == PL_OK, "%s", pl_last_error());
        CHECK(pl_session_logits(a, la) == PL_OK && pl_session_logits(c, lc) == PL_OK, "logits");
        double d = bs_diff(la, lc, (size_t)V);
        CHECK(exact ? !memcmp(la, lc, sizeof *la * (size_t)V) : d <= 1e-5,
              "%s: a batch of one differs at step %d (by %g relative)", name, t, d);
    }
out:
    free(la);
    free(lc);
    pl_batch_free(b);
    pl_session_free(a);
    pl_session_free(c);
}

static void bs_errors(const pl_model *m) {
    const int V = pl_model_get_info(m)->n_vocab;
    pl_session *a = bs_session(m), *c = bs_session(m);
    pl_batch *b = NULL;
    CHECK(pl_batch_new(m, 0, &b) != PL_OK, "a batch of 0 sessions");
    CHECK(pl_batch_new(m, 2, &b) == PL_OK, "%s", pl_last_error());
    if (!a || !c || !b) goto out;
    int32_t p[16], two[3] = {1, 2, 3};
    bs_prompt(0, V, p);
    CHECK(pl_session_set(a, p, bs_plen[0], NULL) == PL_OK &&
              pl_session_set(c, p, bs_plen[0], NULL) == 0,
          "set");
    pl_session *three[3] = {a, c, a}, *twice[2] = {a, a};
    CHECK(pl_session_push_batch(b, three, two, 3) != PL_OK &&
              strstr(pl_last_error(), "holds 1 to 2"),
          "more sessions than the batch holds: %s", pl_last_error());
    CHECK(pl_session_push_batch(b, twice, two, 2) != PL_OK && strstr(pl_last_error(), "twice"),
          "a session twice: %s", pl_last_error());
    int32_t bad[2] = {1, V};
    pl_session *ac[2] = {a, c};
    CHECK(pl_session_push_batch(b, ac, bad, 2) != PL_OK && strstr(pl_last_error(), "vocabulary"),
          "an id outside the vocabulary: %s", pl_last_error());
    int64_t na, nc;
    pl_session_ids(a, &na), pl_session_ids(c, &nc);
    CHECK(na == bs_plen[0] && nc == bs_plen[0], "a refused batch left %lld and %lld ids",
          (long long)na, (long long)nc);
    /* a full context (filled in batches of 16): one line, nothing appended */
    int32_t full[BS_CTX];
    for (int i = 0; i < BS_CTX; i++) full[i] = i < bs_plen[0] ? p[i] : 1;
    CHECK(pl_session_set(c, full, BS_CTX, NULL) == PL_OK, "%s", pl_last_error());
    CHECK(pl_session_push_batch(b, ac, two, 2) != PL_OK && strstr(pl_last_error(), "context full"),
          "a full context: %s", pl_last_error());
    pl_session_ids(a, &na);
    CHECK(na == bs_plen[0], "a refused batch appended to a session");
out:
    pl_batch_free(b);
    pl_session_free(a);
    pl_session_free(c);
}

/* Every check on the model of the file rel (under shared/) on be. exact (the CPU): with
 * exact and with Q8_0-quantised activations, a batch of one bit-identical to a push;
 * else (the GPU, slow on lavapipe) the backend's activations only, within the tolerance.
 * The batch of one and the errors, which do not depend on bs_ns, run at the default only. */
static void bs_model(pl_backend *be, const char *rel, const char *name, bool exact) {
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s", pl_last_error());
    if (be && g) CHECK(pl_model_load(g, be, NULL, &m) == PL_OK, "%s", pl_last_error());
    if (m) {
        char nm[96];
        int act = be->act_q8;
        for (int q8 = 0; q8 < (exact ? 2 : 1); q8++) {
            if (exact) be->act_q8 = q8;
            snprintf(nm, sizeof nm, "%s on %s%s", name, be->name,
                     be->act_q8 ? " (q8 activations)" : "");
            bs_slots = false;
            bs_same_as_alone(m, nm, exact);
            if (pl_model_keeps_slots(m)) { /* and as slots of the batch's caches */
                char ns[128];
                snprintf(ns, sizeof ns, "%s, cache slots", nm);
                bs_slots = true;
                bs_same_as_alone(m, ns, exact);
                bs_slots = false;
            }
            if (bs_ns == BS_NS) bs_batch_of_one(m, nm, exact); /* (no bs_ns in these two) */
        }
        be->act_q8 = act;
        if (bs_ns == BS_NS) bs_errors(m);
    }
    pl_model_free(m);
    pl_gguf_free(g);
    CHECK(be->live_bufs == 0, "%lld buffers leaked on %s", (long long)be->live_bufs, be->name);
}

#endif
