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

static const int mtp_depths[] = {3, 5, 7};
#define MTP_N_DEPTHS 3

typedef struct {
    pl_drafter base;
    pl_session *s;
    int fixed;                                   /* the depth, or 0: measured */
    int best;                                    /* index into mtp_depths */
    int64_t pass;                                /* passes so far */
    double t0;                                   /* when this pass's draft began */
    double ids[MTP_N_DEPTHS], sec[MTP_N_DEPTHS]; /* this window's probes */
} mtp;

/* The depth index of this pass: a probe at the start of each window, else the best. */
static int mtp_slot(const mtp *d) {
    int64_t w = d->pass % PL_MTP_WINDOW;
    return w < PL_MTP_PROBE * MTP_N_DEPTHS ? (int)(w / PL_MTP_PROBE) : d->best;
}

int pl_drafter_mtp_depth(const pl_drafter *d) {
    const mtp *m = (const mtp *)d;
    return m->fixed ? m->fixed : mtp_depths[mtp_slot(m)];
}

static int mtp_draft(pl_drafter *d, const int32_t *ctx, int64_t n_ctx, int32_t *out, int max) {
    mtp *m = (mtp *)d;
    int depth = pl_drafter_mtp_depth(d);
    if (max > depth) max = depth;
    m->t0 = pl_now();
    return n_ctx > 0 && max > 0 ? pl_session_draft_model(m->s, ctx[n_ctx - 1], max, out) : 0;
}

static void mtp_feedback(pl_drafter *d, int n_drafted, int n_accepted) {
    mtp *m = (mtp *)d;
    (void)n_drafted;
    if (m->fixed) return;
    int64_t w = m->pass % PL_MTP_WINDOW;
    if (w == 0)
        for (int i = 0; i < MTP_N_DEPTHS; i++) m->ids[i] = m->sec[i] = 0;
    int slot = mtp_slot(m);
    m->ids[slot] += n_accepted + 1; /* the pass's own id and the accepted drafts */
    m->sec[slot] += pl_now() - m->t0;
    if (w + 1 == PL_MTP_PROBE * MTP_N_DEPTHS) { /* the probes are done: pick */
        m->best = 0;
        for (int i = 1; i < MTP_N_DEPTHS; i++)
            if (m->ids[i] * m->sec[m->best] > m->ids[m->best] * m->sec[i]) m->best = i;
    }
    m->pass++;
}

pl_status pl_drafter_mtp_new(pl_session *s, int depth, pl_drafter **out) {
    *out = NULL;
    if (depth < 0 || depth > PL_SPEC_MAX)
        return pl_fail(PL_ERR_ARG, "MTP depth %d: 1 to %d (0: measured)", depth, PL_SPEC_MAX);
    mtp *m = calloc(1, sizeof *m);
    if (!m) return pl_fail(PL_ERR_NOMEM, "out of memory for the drafter");
    m->base = (pl_drafter){.draft = mtp_draft, .feedback = mtp_feedback, .free = plain_free};
    m->s = s;
    m->fixed = depth;
    *out = &m->base;
    return PL_OK;
}
