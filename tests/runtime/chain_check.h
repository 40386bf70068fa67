/* chain_check.h - the check chain_test.c (CPU) and gpu_chain_test.c (WebGPU) share: a
 * session over a chain of local stages, each its own partial pl_model loaded from the same
 * GGUF, against a session over the whole model, through several turns - a prompt run in
 * several frames, greedy decoding, a turn that extends the cached ids, a rewind into the
 * last call's snapshots, seeded sampling, a turn that diverges far back, a greedy run
 * stopped by its callback, a reset. The logits after every turn must be bit-identical,
 * the ids identical, and the ids each turn runs the same (prefix reuse reaches every
 * stage). Include after test.h. */
#ifndef PL_TEST_CHAIN_CHECK_H
#define PL_TEST_CHAIN_CHECK_H

#include "model/model.h"
#include "runtime/session.h"

#define CC_CTX   96
#define CC_BATCH 32
#define CC_SNAP  4

/* A split: the host's own layers [host_first, host_last) (maybe empty) and n stages, given
 * by their ranges [cut[i][0], cut[i][1]) in layer order. */
typedef struct {
    int host_first, host_last;
    int n;
    int cut[4][2];
} cc_split;

static inline pl_state_opts cc_opts(const pl_model *m) {
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = CC_CTX;
    o.n_batch = CC_BATCH;
    o.n_snap = CC_SNAP;
    return o;
}

static inline pl_model *cc_load(const pl_gguf *g, pl_backend *be, int first, int last, int ends) {
    pl_model_opts o = {.layer_first = first, .layer_last = last, .ends = ends};
    pl_model *m = NULL;
    CHECK(pl_model_load(g, be, &o, &m) == PL_OK, "load [%d, %d) ends %d: %s", first, last, ends,
          pl_last_error());
    return m;
}

typedef struct {
    pl_session *w, *c;
    int V;
    const char *what;
} cc_pair;

/* Both sessions' logits are the same bits. */
static inline void cc_same_logits(const cc_pair *p, const char *step) {
    float *a = malloc(sizeof(float) * (size_t)p->V), *b = malloc(sizeof(float) * (size_t)p->V);
    pl_status sa = pl_session_logits(p->w, a), sb = pl_session_logits(p->c, b);
    CHECK(!sa && !sb && !memcmp(a, b, sizeof(float) * (size_t)p->V),
          "%s, %s: the chain's logits differ from the whole model's (%s)", p->what, step,
          sa || sb ? pl_last_error() : "");
    free(a), free(b);
}

/* Set both to ids[0..n): the same ids run, the same logits. */
static inline void cc_set(const cc_pair *p, const int32_t *ids, int64_t n, const char *step) {
    int64_t rw = -1, rc = -2;
    pl_status sw = pl_session_set(p->w, ids, n, &rw), sc = pl_session_set(p->c, ids, n, &rc);
    CHECK(!sw && !sc, "%s, %s: %s", p->what, step, pl_last_error());
    CHECK(rw == rc, "%s, %s: the chain ran %lld ids, the whole model %lld", p->what, step,
          (long long)rc, (long long)rw);
    if (!sw && !sc) cc_same_logits(p, step);
}

typedef struct {
    int32_t ids[64];
    int n, stop; /* stop after this many (0: never) */
} cc_ids;

static inline bool cc_take(void *ud, int32_t id) {
    cc_ids *l = ud;
    if (l->n < 64) l->ids[l->n++] = id;
    return !l->stop || l->n < l->stop;
}

/* Greedy n on both (stopping after stop ids when stop > 0): the same ids. */
static inline void cc_greedy(const cc_pair *p, int64_t n, int stop, const char *step) {
    cc_ids a = {.stop = stop}, b = {.stop = stop};
    int64_t na = 0, nb = 0;
    pl_status sa = pl_session_greedy(p->w, n, cc_take, &a, &na);
    pl_status sb = pl_session_greedy(p->c, n, cc_take, &b, &nb);
    CHECK(!sa && !sb && na == nb && a.n == b.n &&
              !memcmp(a.ids, b.ids, sizeof *a.ids * (size_t)a.n),
          "%s, %s: greedy ids differ (%lld and %lld ids) %s", p->what, step, (long long)na,
          (long long)nb, sa || sb ? pl_last_error() : "");
}

/* `steps` seeded sampling steps (temperature 0.9, seed 7) on both sessions: the same ids and
 * the same logits after each. */
static void cc_sampled(const cc_pair *p, int steps) {
    pl_sampler_params sp = pl_sampler_defaults();
    sp.temp = 0.9f;
    sp.seed = 7;
    pl_sampler *ma = NULL, *mb = NULL;
    CHECK(!pl_sampler_new(&sp, p->V, &ma) && !pl_sampler_new(&sp, p->V, &mb), "sampler");
    for (int t = 0; ma && mb && t < steps; t++) {
        int32_t a = -1, b = -2;
        pl_status sa = pl_session_pick(p->w, ma, &a), sb = pl_session_pick(p->c, mb, &b);
        CHECK(!sa && !sb && a == b, "%s, sampled step %d: ids %d and %d", p->what, t, a, b);
        if (sa || sb || a != b) break;
        CHECK(!pl_session_push(p->w, a) && !pl_session_push(p->c, b), "%s: push: %s", p->what,
              pl_last_error());
        cc_same_logits(p, "sampled step");
    }
    pl_sampler_free(ma);
    pl_sampler_free(mb);
}

/* The whole scenario over the pair. */
static inline void cc_turns(const cc_pair *p) {
    int32_t ids[CC_CTX];
    int64_t n;
    for (int i = 0; i < 21; i++) ids[i] = (int32_t)((i * 7919 + 13) % p->V);
    cc_set(p, ids, 21, "prompt"); /* 21 ids: six frames of 4 and one of 1 */
    cc_greedy(p, 6, 0, "greedy");
    const int32_t *cached = pl_session_ids(p->w, &n);
    memcpy(ids, cached, sizeof *ids * (size_t)n);
    for (int i = 0; i < 3; i++) ids[n + i] = (int32_t)((n * 31 + i * 17) % p->V);
    cc_set(p, ids, n + 3, "extending turn"); /* 3 ids in one call: their states are kept */
    ids[n + 1] = (ids[n + 1] + 1) % p->V;
    cc_set(p, ids, n + 2, "rewind by one"); /* back into those kept states */
    n += 2;
    cc_sampled(p, 5);
    cached = pl_session_ids(p->w, &n);
    memcpy(ids, cached, sizeof *ids * (size_t)n);
    for (int i = 10; i < 15; i++) ids[i] = (int32_t)((i * 101 + 5) % p->V);
    cc_set(p, ids, 15, "diverging turn");
    cc_greedy(p, 8, 2, "stopped greedy");
    cached = pl_session_ids(p->c, &n);
    memcpy(ids, cached, sizeof *ids * (size_t)n);
    ids[n] = 3;
    int64_t rw = -1, rc = -1;
    pl_status sw = pl_session_set(p->w, ids, n + 1, &rw),
              sc = pl_session_set(p->c, ids, n + 1, &rc);
    CHECK(!sw && !sc, "%s, after a stopped greedy run: %s", p->what, pl_last_error());
    if (!sw && !sc) cc_same_logits(p, "after a stopped greedy run");
    pl_session_reset(p->w);
    pl_session_reset(p->c);
    cc_set(p, ids, 12, "after a reset");
}

/* The split on be against the whole model w: a host model with the ends and its layers,
 * one model per stage, each with its own state; frames of 4 columns, 3 in flight. Stage i
 * loads its part from part_g[i] (part_g NULL: from g, as the host does). */
static inline void cc_check_split_from(const pl_gguf *g, const pl_gguf *const *part_g,
                                       pl_backend *be, const pl_model *w, const cc_split *sp,
                                       const char *name) {
    char what[160];
    snprintf(what, sizeof what, "%s host [%d, %d) + %d stages", name, sp->host_first, sp->host_last,
             sp->n);
    pl_model *host = cc_load(g, be, sp->host_first, sp->host_last, PL_ENDS_EMBED | PL_ENDS_HEAD);
    pl_model *parts[4] = {NULL};
    pl_stage *stages[4] = {NULL};
    pl_session *ws = NULL, *cs = NULL;
    pl_state_opts o = cc_opts(w);
    bool ok = host != NULL;
    for (int i = 0; ok && i < sp->n; i++) {
        parts[i] = cc_load(part_g ? part_g[i] : g, be, sp->cut[i][0], sp->cut[i][1], PL_ENDS_NONE);
        ok = parts[i] &&
             pl_stage_local_new(parts[i], &o, sp->cut[i][0], sp->cut[i][1], &stages[i]) == PL_OK;
        CHECK(ok, "%s: stage %d: %s", what, i, pl_last_error());
    }
    pl_chain_opts co = {.frame_cols = 4, .in_flight = 3};
    if (ok) {
        CHECK(pl_session_new(w, &o, &ws) == PL_OK, "%s", pl_last_error());
        CHECK(pl_session_new_chain(host, &o, stages, sp->n, &co, &cs) == PL_OK, "%s: %s", what,
              pl_last_error());
    }
    if (ws && cs) cc_turns(&(cc_pair){ws, cs, pl_model_get_info(w)->n_vocab, what});
    pl_session_free(ws);
    pl_session_free(cs);
    for (int i = 0; i < sp->n; i++) {
        pl_stage_free(stages[i]);
        pl_model_free(parts[i]);
    }
    pl_model_free(host);
}

static inline void cc_check_split(const pl_gguf *g, pl_backend *be, const pl_model *w,
                                  const cc_split *sp, const char *name) {
    cc_check_split_from(g, NULL, be, w, sp, name);
}

/* The splits of a model of L >= 2 layers: 2 stages and a host without layers; the host's
 * first layer and the rest in 2 stages (1 when L is 2); with L >= 3, 3 stages, and the
 * host's layer 1 between 2 stages. */
static inline int cc_splits(int L, cc_split out[4]) {
    int h = L / 2 > 1 ? L / 2 : 2;
    out[0] = (cc_split){0, 0, 2, {{0, L / 2}, {L / 2, L}}};
    out[1] = L > 2 ? (cc_split){0, 1, 2, {{1, h}, {h, L}}} : (cc_split){0, 1, 1, {{1, L}}};
    if (L < 3) return 2;
    out[2] = (cc_split){0, 0, 3, {{0, 1}, {1, L - 1}, {L - 1, L}}};
    out[3] = (cc_split){1, 2, 2, {{0, 1}, {2, L}}};
    return 4;
}

#endif
