/* stage.c - the checked stage calls, the local stage (a pl_model and a pl_state, computing
 * in submit and queueing the results for collect), and the f16 wire helpers. */
#include "stage.h"

#include <stdlib.h>
#include <string.h>

#include "../format/quant.h"

/* ---- the checked calls ---- */

pl_status pl_stage_submit(pl_stage *st, const float *hidden, int64_t n, int64_t pos0,
                          uint64_t tag) {
    if (n < 1 || n > st->max_cols)
        return pl_fail(PL_ERR_ARG, "%lld columns for a %s stage that takes 1 to %d", (long long)n,
                       st->m->kind, st->max_cols);
    if (pos0 < 0 || pos0 + n > st->n_ctx)
        return pl_fail(PL_ERR_ARG,
                       "context full: positions up to %lld do not fit the %d of "
                       "the stage of layers %d..%d",
                       (long long)(pos0 + n), st->n_ctx, st->first, st->last);
    if (st->in_flight >= st->max_in_flight)
        return pl_fail(PL_ERR_ARG, "%d frames already in flight to the stage of layers %d..%d",
                       st->in_flight, st->first, st->last);
    pl_status s = st->m->submit(st, hidden, n, pos0, tag);
    if (!s) st->in_flight++;
    return s;
}

pl_status pl_stage_collect(pl_stage *st, float *hidden_out, int64_t *n, uint64_t *tag) {
    *n = 0;
    *tag = 0;
    if (st->in_flight < 1)
        return pl_fail(PL_ERR_ARG, "nothing in flight to collect from the stage of layers %d..%d",
                       st->first, st->last);
    st->in_flight--; /* taken off the queue, failed or not */
    return st->m->collect(st, hidden_out, n, tag);
}

bool pl_stage_can_rewind(const pl_stage *st, int64_t n_past) {
    return n_past >= 0 && n_past <= st->n_ctx && st->m->can_rewind(st, n_past);
}

pl_status pl_stage_rewind(pl_stage *st, int64_t n_past) {
    if (n_past < 0 || n_past > st->n_ctx)
        return pl_fail(PL_ERR_ARG, "cannot rewind to position %lld: the stage holds 0 to %d",
                       (long long)n_past, st->n_ctx);
    pl_status s = st->m->rewind(st, n_past);
    if (!s) st->in_flight = 0;
    return s;
}

void pl_stage_free(pl_stage *st) {
    if (st) st->m->free(st);
}

/* ---- the local stage ---- */

typedef struct {
    const pl_model *m;
    pl_state *s;
    bool owns_state;
    /* a ring of the results not yet collected: slot i holds q_n[i] columns, in a buffer
     * grown to the largest frame it has held (q_cap[i] floats) */
    float *q[PL_STAGE_MAX_IN_FLIGHT];
    int64_t q_cap[PL_STAGE_MAX_IN_FLIGHT], q_n[PL_STAGE_MAX_IN_FLIGHT];
    uint64_t q_tag[PL_STAGE_MAX_IN_FLIGHT];
    int q_head, q_count;
} local_stage;

static pl_status local_submit(pl_stage *st, const float *hidden, int64_t n, int64_t pos0,
                              uint64_t tag) {
    local_stage *L = st->impl;
    pl_buf *x = pl_state_hidden(L->s);
    int64_t floats = n * st->n_embd, bytes = floats * (int64_t)sizeof(float);
    int tail = (L->q_head + L->q_count) % st->max_in_flight;
    if (L->q_cap[tail] < floats) {
        float *grown = realloc(L->q[tail], (size_t)bytes);
        if (!grown) return pl_fail(PL_ERR_NOMEM, "out of memory for a stage's queue");
        L->q[tail] = grown;
        L->q_cap[tail] = floats;
    }
    pl_status s = pl_be_write(x, 0, hidden, bytes);
    if (!s) s = pl_model_layers(L->m, L->s, n, pos0, st->first, st->last);
    if (!s) s = pl_be_read(x, 0, L->q[tail], bytes);
    if (s) return s;
    L->q_n[tail] = n;
    L->q_tag[tail] = tag;
    L->q_count++;
    return PL_OK;
}

static pl_status local_collect(pl_stage *st, float *hidden_out, int64_t *n, uint64_t *tag) {
    local_stage *L = st->impl;
    int h = L->q_head;
    *n = L->q_n[h];
    *tag = L->q_tag[h];
    memcpy(hidden_out, L->q[h], sizeof(float) * (size_t)(*n * st->n_embd));
    L->q_head = (h + 1) % st->max_in_flight;
    L->q_count--;
    return PL_OK;
}

static bool local_can_rewind(const pl_stage *st, int64_t n_past) {
    const local_stage *L = st->impl;
    return pl_state_can_rewind(L->s, n_past);
}

static pl_status local_rewind(pl_stage *st, int64_t n_past) {
    local_stage *L = st->impl;
    pl_status s = pl_state_rewind(L->s, n_past);
    if (!s) L->q_head = L->q_count = 0;
    return s;
}

static void local_free(pl_stage *st) {
    local_stage *L = st->impl;
    if (L) {
        if (L->owns_state) pl_state_free(L->s);
        for (int i = 0; i < PL_STAGE_MAX_IN_FLIGHT; i++) free(L->q[i]);
        free(L);
    }
    free(st);
}

static const pl_stage_methods local_methods = {.kind = "local",
                                               .submit = local_submit,
                                               .collect = local_collect,
                                               .can_rewind = local_can_rewind,
                                               .rewind = local_rewind,
                                               .free = local_free};

static pl_status local_new(const pl_model *m, pl_state *s, bool owns, int first, int last,
                           pl_stage **out) {
    const pl_model_info *in = pl_model_get_info(m);
    const pl_state_opts *o = pl_state_get_opts(s);
    pl_stage *st = calloc(1, sizeof *st);
    local_stage *L = calloc(1, sizeof *L);
    if (st) st->impl = L;
    if (!st || !L) {
        free(st), free(L);
        if (owns) pl_state_free(s);
        return pl_fail(PL_ERR_NOMEM, "out of memory for a stage");
    }
    *st = (pl_stage){.m = &local_methods,
                     .first = first,
                     .last = last,
                     .n_layer = in->n_layer,
                     .n_embd = in->n_embd,
                     .n_ctx = o->n_ctx,
                     .max_cols = o->n_batch,
                     .max_in_flight = PL_STAGE_MAX_IN_FLIGHT,
                     .impl = L};
    *L = (local_stage){.m = m, .s = s, .owns_state = owns};
    *out = st;
    return PL_OK;
}

static pl_status check_range(const pl_model *m, int first, int last) {
    const pl_model_info *in = pl_model_get_info(m);
    if (first < in->layer_first || last > in->layer_last || first >= last)
        return pl_fail(PL_ERR_ARG, "a stage of layers [%d, %d): the model holds [%d, %d)", first,
                       last, in->layer_first, in->layer_last);
    return PL_OK;
}

pl_status pl_stage_local_new(const pl_model *m, const pl_state_opts *o, int first, int last,
                             pl_stage **out) {
    *out = NULL;
    pl_state *s = NULL;
    pl_state_opts so = *o;
    so.draft = false; /* layers only: the draft block runs on the chain's host, with the head */
    pl_status st = check_range(m, first, last);
    if (!st) st = pl_state_new(m, &so, &s);
    if (!st) st = local_new(m, s, true, first, last, out);
    return st;
}

pl_status pl_stage_local_wrap(const pl_model *m, pl_state *s, int first, int last, pl_stage **out) {
    *out = NULL;
    pl_status st = check_range(m, first, last);
    if (!st) st = local_new(m, s, false, first, last, out);
    return st;
}

/* ---- f16 on the wire ---- */

void pl_hidden_to_f16(const float *x, uint16_t *out, int64_t n) {
    pl_f32_to_f16_row(x, out, n);
}

void pl_hidden_from_f16(const uint16_t *x, float *out, int64_t n) {
    pl_f16_to_f32_row(x, out, n);
}
