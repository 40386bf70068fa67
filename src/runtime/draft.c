/* draft.c - the drafter interface's helpers, prompt lookup and the MTP drafter (rules in
 * draft.h). */
#include "draft.h"

#include <stdbool.h>
#include <stdlib.h>

#include "generate.h"
#include "session.h"

void pl_drafter_free(pl_drafter *d) {
    if (d) d->free(d);
}

typedef struct {
    pl_drafter base;
    int depth, max_depth;
    bool gated;  /* auto: pause while drafts do not pay */
    double rate; /* moving average of the accepted share of drafts */
    int paused;  /* passes left without drafts */
} lookup;

/* The ids after the latest earlier occurrence of ctx's last n ids, up to max. */
static int follow(const int32_t *ctx, int64_t n_ctx, int n, int32_t *out, int max) {
    const int32_t *tail = ctx + n_ctx - n;
    int64_t lo = n_ctx - PL_LOOKUP_WINDOW > 0 ? n_ctx - PL_LOOKUP_WINDOW : 0;
    /* an occurrence ending at e (exclusive), e < n_ctx: its followers are ctx[e..n_ctx) */
    for (int64_t e = n_ctx - 1; e - n >= lo; e--) {
        int i = 0;
        while (i < n && ctx[e - n + i] == tail[i]) i++;
        if (i < n) continue;
        int got = 0;
        while (got < max && e + got < n_ctx) {
            out[got] = ctx[e + got];
            got++;
        }
        return got;
    }
    return 0;
}

static int lookup_draft(pl_drafter *d, const int32_t *ctx, int64_t n_ctx, int32_t *out, int max) {
    lookup *l = (lookup *)d;
    if (l->paused > 0) {
        if (--l->paused == 0) l->rate = PL_LOOKUP_PAUSE_BELOW; /* probe again */
        return 0;
    }
    if (max > l->depth) max = l->depth;
    for (int n = 3; n >= 1 && max > 0; n--) {
        if (n_ctx <= n) continue;
        int got = follow(ctx, n_ctx, n, out, max);
        if (got) return got;
    }
    return 0;
}

static void lookup_feedback(pl_drafter *d, int n_drafted, int n_accepted) {
    lookup *l = (lookup *)d;
    if (n_drafted <= 0) return;
    l->rate = 0.75 * l->rate + 0.25 * (double)n_accepted / (double)n_drafted;
    if (l->gated && l->rate < PL_LOOKUP_PAUSE_BELOW) l->paused = PL_LOOKUP_PAUSE;
    if (n_accepted == n_drafted)
        l->depth = l->depth + 2 < l->max_depth ? l->depth + 2 : l->max_depth;
    else
        l->depth = n_accepted + 1;
}

static void plain_free(pl_drafter *d) {
    free(d);
}

pl_status pl_drafter_lookup_new(int max_depth, bool gated, pl_drafter **out) {
    *out = NULL;
    if (max_depth < 1 || max_depth > PL_SPEC_MAX)
        return pl_fail(PL_ERR_ARG, "lookup depth %d: 1 to %d", max_depth, PL_SPEC_MAX);
    lookup *l = calloc(1, sizeof *l);
    if (!l) return pl_fail(PL_ERR_NOMEM, "out of memory for the drafter");
    l->base = (pl_drafter){.draft = lookup_draft, .feedback = lookup_feedback, .free = plain_free};
    l->max_depth = max_depth;
    l->gated = gated;
    l->rate = 1;
    l->depth = max_depth < 7 ? max_depth : 7;
    *out = &l->base;
    return PL_OK;
}

/* ---- the model's draft block ---- */

static const int mtp_depths[] = {3, 5, 7}, mtp_depths_gated[] = {0, 3, 5, 7};
#define MTP_MAX_DEPTHS 4

typedef struct {
    pl_drafter base;
    pl_session *s;
    int fixed; /* the depth, or 0: measured */
    const int *depths;
    int n_depths;
    int best, slot; /* indices into depths: the pick, this pass's */
    int64_t w;      /* passes into this window */
    int backoff;    /* windows are PL_MTP_WINDOW << backoff passes */
    bool open;      /* a pass is running: t0, acc */
    double t0;      /* when it began */
    int acc;        /* its accepted drafts */
    double ids[MTP_MAX_DEPTHS], sec[MTP_MAX_DEPTHS]; /* this window's probes */
} mtp;

int pl_drafter_mtp_depth(const pl_drafter *d) {
    const mtp *m = (const mtp *)d;
    return m->fixed ? m->fixed : m->depths[m->slot];
}

/* The pass that ended (the one before this draft call): its ids and time to its depth;
 * after the probes, pick the depth with the most ids per second. */
static void mtp_close(mtp *m) {
    if (!m->open) return;
    m->open = false;
    m->ids[m->slot] += 1 + m->acc; /* the pass's own id and the accepted drafts */
    m->sec[m->slot] += pl_now() - m->t0;
    int64_t probes = (int64_t)PL_MTP_PROBE * m->n_depths;
    if (++m->w == probes) {
        m->best = 0;
        for (int i = 1; i < m->n_depths; i++)
            if (m->ids[i] * m->sec[m->best] > m->ids[m->best] * m->sec[i]) m->best = i;
        if (m->depths[m->best] > 0)
            m->backoff = 0;
        else if (m->backoff < PL_MTP_BACKOFF)
            m->backoff++;
    }
    if (m->w >= ((int64_t)PL_MTP_WINDOW << m->backoff)) {
        m->w = 0;
        for (int i = 0; i < m->n_depths; i++) m->ids[i] = m->sec[i] = 0;
    }
}

static int mtp_draft(pl_drafter *d, const int32_t *ctx, int64_t n_ctx, int32_t *out, int max) {
    mtp *m = (mtp *)d;
    if (!m->fixed) {
        mtp_close(m);
        m->slot = m->w < (int64_t)PL_MTP_PROBE * m->n_depths ? (int)(m->w / PL_MTP_PROBE) : m->best;
        m->open = true;
        m->acc = 0;
        m->t0 = pl_now();
    }
    int depth = pl_drafter_mtp_depth(d);
    if (max > depth) max = depth;
    return n_ctx > 0 && max > 0 ? pl_session_draft_model(m->s, ctx[n_ctx - 1], max, out) : 0;
}

static void mtp_feedback(pl_drafter *d, int n_drafted, int n_accepted) {
    (void)n_drafted;
    ((mtp *)d)->acc = n_accepted;
}

pl_status pl_drafter_mtp_new(pl_session *s, int depth, bool gated, pl_drafter **out) {
    *out = NULL;
    if (depth < 0 || depth > PL_SPEC_MAX)
        return pl_fail(PL_ERR_ARG, "MTP depth %d: 1 to %d (0: measured)", depth, PL_SPEC_MAX);
    mtp *m = calloc(1, sizeof *m);
    if (!m) return pl_fail(PL_ERR_NOMEM, "out of memory for the drafter");
    m->base = (pl_drafter){.draft = mtp_draft, .feedback = mtp_feedback, .free = plain_free};
    m->s = s;
    m->fixed = depth;
    m->depths = gated ? mtp_depths_gated : mtp_depths;
    m->n_depths = gated ? 4 : 3;
    *out = &m->base;
    return PL_OK;
}
