/* batcher.c - the turn (a hand-over queue: no herd wakes) and continuous batching's steps:
 * decoding sessions put their next id in `pend`; whoever finds the step due (every
 * decoding session in, or STEP_WAIT_NS after its own came) runs it for all, picks each
 * one's next id in the same turn, and hands the results back. */
#include "batcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../base/thread.h"

#define STEP_WAIT_NS                                                                               \
    10000000L /* a step waits at most 10 ms for decoding sessions still choosing                   \
               */

typedef struct turn_waiter {
    pl_cond cv;
    bool go;
    struct turn_waiter *next;
} turn_waiter;

typedef struct step_entry {
    pl_session *ses;
    pl_sampler *smp; /* picks the id after id, in the same turn */
    int32_t id, picked;
    bool done;
    pl_status st;
    bool have; /* picked by the step's argmax of all columns */
    int cols;  /* the step's columns */
    char err[256];
    struct step_entry *next;
} step_entry;

struct pl_batcher {
    pl_mutex turn_mu;
    bool turn_held;
    turn_waiter *line, *line_tail;
    pl_batch *batch; /* NULL: no batched steps */
    pl_mutex bmu;
    pl_cond bcv;
    step_entry *pend;
    int n_pend, n_decoding;
    bool stepping;
    uint64_t n_steps, n_columns;
    pl_session **step_ses; /* [n_max of pl_batcher_new]: the stepper's arguments */
    int32_t *step_ids;
};

pl_status pl_batcher_new(pl_batch *batch, int n_max, pl_batcher **out) {
    *out = NULL;
    if (n_max < 1) return pl_fail(PL_ERR_ARG, "batcher: n_max %d", n_max);
    pl_batcher *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->batch = batch;
    b->step_ses = malloc(sizeof *b->step_ses * (size_t)n_max);
    b->step_ids = malloc(sizeof *b->step_ids * (size_t)n_max);
    if (!b->step_ses || !b->step_ids) {
        free(b->step_ses), free(b->step_ids), free(b);
        return pl_fail(PL_ERR_NOMEM, "out of memory");
    }
    pl_mutex_init(&b->turn_mu);
    pl_mutex_init(&b->bmu);
    pl_cond_init(&b->bcv);
    *out = b;
    return PL_OK;
}

void pl_batcher_free(pl_batcher *b) {
    if (!b) return;
    pl_mutex_destroy(&b->turn_mu);
    pl_mutex_destroy(&b->bmu);
    pl_cond_destroy(&b->bcv);
    free(b->step_ses), free(b->step_ids);
    free(b);
}

void pl_batcher_stats(pl_batcher *b, uint64_t *steps, uint64_t *columns) {
    pl_mutex_lock(&b->bmu);
    *steps = b->n_steps, *columns = b->n_columns;
    pl_mutex_unlock(&b->bmu);
}

void pl_batcher_take(pl_batcher *b) {
    pl_mutex_lock(&b->turn_mu);
    if (!b->turn_held) {
        b->turn_held = true;
    } else {
        turn_waiter w = {.go = false};
        pl_cond_init(&w.cv);
        if (b->line_tail)
            b->line_tail->next = &w;
        else
            b->line = &w;
        b->line_tail = &w;
        while (!w.go) pl_cond_wait(&w.cv, &b->turn_mu);
        pl_cond_destroy(&w.cv);
    }
    pl_mutex_unlock(&b->turn_mu);
}

/* To the first in line (which holds it from then on), or free. */
void pl_batcher_give(pl_batcher *b) {
    pl_mutex_lock(&b->turn_mu);
    turn_waiter *w = b->line;
    if (w) {
        b->line = w->next;
        if (!b->line) b->line_tail = NULL;
        w->go = true;
        pl_cond_signal(&w->cv);
    } else {
        b->turn_held = false;
    }
    pl_mutex_unlock(&b->turn_mu);
}

/* With bmu held: take every waiting entry, run their step and then each one's pick
 * (without bmu, holding the turn), hand each its result. The picks run here, for the
 * sessions, so that a step costs one turn and not one per session. */
static void run_step(pl_batcher *b) {
    step_entry *list = b->pend;
    int n = 0;
    for (step_entry *p = list; p; p = p->next) b->step_ses[n] = p->ses, b->step_ids[n++] = p->id;
    b->pend = NULL, b->n_pend = 0, b->stepping = true;
    pl_mutex_unlock(&b->bmu);
    pl_batcher_take(b);
    pl_status st = pl_session_push_batch(b->batch, b->step_ses, b->step_ids, n);
    char step_err[256] = "";
    if (st) snprintf(step_err, sizeof step_err, "%s", pl_last_error());
    /* the columns' greedy ids in one read, for the sessions whose sampler is a plain
     * argmax (pl_session_pick would find the same, one read each) */
    bool greedy = false;
    for (step_entry *p = list; p && !greedy; p = p->next) greedy = pl_sampler_is_argmax(p->smp);
    if (!st && n > 1 && greedy && !pl_batch_argmax(b->batch, n, b->step_ids)) {
        int i = 0;
        for (step_entry *p = list; p; p = p->next, i++)
            if (pl_sampler_is_argmax(p->smp) && b->step_ids[i] >= 0)
                p->picked = b->step_ids[i], p->have = true;
    }
    for (step_entry *p = list; p; p = p->next) { /* (each owner waits for its done) */
        p->st = st ? st : p->have ? PL_OK : pl_session_pick(p->ses, p->smp, &p->picked);
        if (p->st) snprintf(p->err, sizeof p->err, "%s", st ? step_err : pl_last_error());
    }
    pl_batcher_give(b);
    pl_mutex_lock(&b->bmu);
    b->n_steps++, b->n_columns += (uint64_t)n;
    for (step_entry *p = list; p; p = p->next) p->done = true, p->cols = n;
    b->stepping = false;
    pl_cond_broadcast(&b->bcv);
}

/* Append id to ses in the next batched step and pick the id after it with smp (*next):
 * the step runs once every decoding session has its id in, or STEP_WAIT_NS after this one
 * came, whichever is first; whoever finds it due runs it. */
static pl_status step_push(pl_batcher *b, pl_session *ses, pl_sampler *smp, int32_t id,
                           int32_t *next, int *cols) {
    step_entry me = {.ses = ses, .smp = smp, .id = id};
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += STEP_WAIT_NS;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pl_mutex_lock(&b->bmu);
    me.next = b->pend, b->pend = &me, b->n_pend++;
    pl_cond_broadcast(&b->bcv);
    bool late = false;
    while (!me.done) {
        if (!b->stepping && b->n_pend && (b->n_pend >= b->n_decoding || late)) {
            run_step(b);
        } else if (b->stepping || b->n_pend >= b->n_decoding) {
            pl_cond_wait(&b->bcv, &b->bmu);
        } else {
            late = pl_cond_timedwait(&b->bcv, &b->bmu, &until) != 0;
        }
    }
    pl_mutex_unlock(&b->bmu);
    *next = me.picked;
    *cols = me.cols;
    /* (the step ran on another thread: its error is said again on this one) */
    return me.st ? pl_fail(me.st, "%s", me.err) : PL_OK;
}

static void decoding(pl_batcher *b, int d) {
    pl_mutex_lock(&b->bmu);
    b->n_decoding += d;
    pl_cond_broadcast(&b->bcv);
    pl_mutex_unlock(&b->bmu);
}

/* pl_generate's callback wrapped: the turn given up while the caller's runs. */
typedef struct {
    pl_batcher *b;
    const pl_gen_opts *go;
} unturned;

static bool on_token_unturned(void *ud, int32_t id) {
    unturned *u = ud;
    pl_batcher_give(u->b);
    bool more = !u->go->on_token || u->go->on_token(u->go->ud, id);
    pl_batcher_take(u->b);
    return more;
}

pl_status pl_batcher_generate(pl_batcher *b, pl_session *ses, pl_sampler *smp,
                              const int32_t *prompt, int64_t n_prompt, const pl_gen_opts *go,
                              pl_gen_stats *st) {
    *st = (pl_gen_stats){0};
    if (!b->batch || go->drafter) {
        unturned u = {b, go};
        pl_gen_opts g = *go;
        g.on_token = on_token_unturned, g.ud = &u;
        return pl_generate(ses, smp, prompt, n_prompt, &g, st);
    }
    /* pl_generate's loop (pick, hand over, append) with each append and the next pick in a
     * batched step */
    double t0 = pl_now();
    int32_t id;
    int64_t want = go->n_predict;
    pl_status s = pl_session_set(ses, prompt, n_prompt, &st->n_prompt_run);
    if (!s && want > 0) s = pl_session_pick(ses, smp, &id);
    double t1 = pl_now();
    st->t_prompt = t1 - t0;
    if (s || want <= 0) return s;
    decoding(b, 1);
    pl_batcher_give(b);
    for (int64_t t = 0; !s; t++) {
        st->n_generated++;
        bool more = !go->on_token || go->on_token(go->ud, id);
        if (!more || t + 1 == want) break;
        int cols = 0;
        s = step_push(b, ses, smp, id, &id, &cols);
        if (!s) st->n_decoded++, st->n_steps++, st->n_shared += cols > 1;
    }
    decoding(b, -1); /* done: the steps need not wait for it */
    st->t_decode = pl_now() - t1;
    pl_batcher_take(b);
    return s;
}
