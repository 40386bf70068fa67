/* chain.c - the forward pass of a session over stages: embed on the host, the frames
 * through the stages with several in flight, the head on the host (see chain.h). */
#include "chain.h"

#include <stdlib.h>
#include <string.h>

#define TRY(x)                                                                                     \
    do {                                                                                           \
        pl_status s_ = (x);                                                                        \
        if (s_) return s_;                                                                         \
    } while (0)

struct pl_chain {
    const pl_model *m;
    pl_state *s;     /* the host's: ids, hidden, logits, and the caches of its own layers */
    pl_stage *own;   /* the host's own layers as a stage over s, or NULL */
    pl_stage **hops; /* [n_hops] the stages in layer order (own among them) */
    int n_hops;
    int frame;      /* columns a frame carries */
    int *in_flight; /* [n_hops] frames submitted before collecting, per stage */
    int64_t *sent;  /* [n_hops] frames submitted to each stage during a pass */
    int64_t *done;  /* [n_hops] frames collected from each stage */
    uint64_t pass;  /* forward passes so far (mod 2^32): the high half of every frame's tag */
    float *hidden;  /* [n_batch][n_embd] the batch's columns between stages */
    /* pl_chain_pick_ahead read the pass's one column into hidden with its id (one wait,
     * not two); pl_chain_forward_ahead at ahead_pos goes on from it without reading again */
    bool ahead_read;
    int64_t ahead_pos;
    /* pl_chain_forward_ahead(next) ran the next pick (prepared while the last stage worked)
     * when the column came back: its id and the host's own layers at picked_pos are done */
    bool picked, no_prepare;
    int64_t picked_pos, n_prepared;
    int32_t picked_id;
};

pl_chain_opts pl_chain_opts_default(void) {
    return (pl_chain_opts){.frame_cols = 512, .in_flight = 4};
}

void pl_chain_free(pl_chain *c) {
    if (!c) return;
    pl_stage_free(c->own);
    free(c->hops);
    free(c->in_flight);
    free(c->sent);
    free(c->done);
    free(c->hidden);
    free(c);
}

/* Stage i fits the host: same model shape, a real range, enough context. */
static pl_status check_stage(const pl_chain *c, const pl_stage *st, int i) {
    const pl_model_info *in = pl_model_get_info(c->m);
    int n_ctx = pl_state_get_opts(c->s)->n_ctx;
    if (st->n_layer != in->n_layer || st->n_embd != in->n_embd)
        return pl_fail(PL_ERR_ARG,
                       "stage %d is of a model of %d layers of width %d, the host's has %d of %d",
                       i, st->n_layer, st->n_embd, in->n_layer, in->n_embd);
    if (st->first >= st->last || st->last > in->n_layer)
        return pl_fail(PL_ERR_ARG, "stage %d runs layers [%d, %d) of %d", i, st->first, st->last,
                       in->n_layer);
    if (st->n_ctx < n_ctx)
        return pl_fail(PL_ERR_ARG, "stage %d (layers %d..%d) holds %d positions, the session %d", i,
                       st->first, st->last, st->n_ctx, n_ctx);
    if (st->max_cols < 1 || st->max_in_flight < 1)
        return pl_fail(PL_ERR_ARG, "stage %d (layers %d..%d) takes no frame", i, st->first,
                       st->last);
    return PL_OK;
}

/* hops = the host's own layers and the stages, in layer order, tiling [0, n_layer). */
static pl_status order(pl_chain *c, pl_stage *const *stages, int n_stages) {
    const pl_model_info *in = pl_model_get_info(c->m);
    bool own_done = !c->own;
    int pos = 0, i = 0;
    while (pos < in->n_layer) {
        pl_stage *next = NULL;
        if (!own_done && c->own->first == pos) {
            next = c->own;
            own_done = true;
        } else if (i < n_stages && stages[i] && stages[i]->first == pos) {
            pl_status s = check_stage(c, stages[i], i);
            if (s) return s;
            next = stages[i++];
        } else {
            return pl_fail(PL_ERR_ARG,
                           "no stage starts at layer %d: the host's layers [%d, %d) and the "
                           "stages must cover [0, %d) in order",
                           pos, in->layer_first, in->layer_last, in->n_layer);
        }
        c->hops[c->n_hops++] = next;
        pos = next->last;
    }
    if (i < n_stages || !own_done)
        return pl_fail(PL_ERR_ARG,
                       "the stages overlap or run past layer %d: the host's layers [%d, %d) and "
                       "the stages must cover [0, %d) once, in order",
                       in->n_layer, in->layer_first, in->layer_last, in->n_layer);
    return PL_OK;
}

pl_status pl_chain_new(const pl_model *host, pl_state *s, pl_stage *const *stages, int n_stages,
                       const pl_chain_opts *co, pl_chain **out) {
    *out = NULL;
    pl_chain_opts o = co ? *co : pl_chain_opts_default();
    const pl_model_info *in = pl_model_get_info(host);
    const pl_state_opts *so = pl_state_get_opts(s);
    if (!in->has_embed || !in->has_head)
        return pl_fail(PL_ERR_ARG, "the host of a chain needs the embedding and the head "
                                   "(pl_model_opts.ends)");
    if (n_stages < 0 || n_stages >= PL_CHAIN_MAX_STAGES || (n_stages && !stages))
        return pl_fail(PL_ERR_ARG, "%d stages: a chain takes 0 to %d", n_stages,
                       PL_CHAIN_MAX_STAGES - 1);
    if (o.frame_cols < 1 || o.frame_cols > PL_CHAIN_MAX_FRAME || o.in_flight < 1 ||
        o.in_flight > PL_CHAIN_MAX_IN_FLIGHT)
        return pl_fail(PL_ERR_ARG, "frames of %d columns, %d in flight: 1 to %d and 1 to %d",
                       o.frame_cols, o.in_flight, PL_CHAIN_MAX_FRAME, PL_CHAIN_MAX_IN_FLIGHT);
    pl_chain *c = calloc(1, sizeof *c);
    if (!c) return pl_fail(PL_ERR_NOMEM, "out of memory for a chain");
    c->m = host;
    c->s = s;
    int n = n_stages + 1;
    c->hops = calloc((size_t)n, sizeof *c->hops);
    c->in_flight = calloc((size_t)n, sizeof *c->in_flight);
    c->sent = calloc((size_t)n, sizeof *c->sent);
    c->done = calloc((size_t)n, sizeof *c->done);
    c->hidden = malloc(sizeof(float) * (size_t)so->n_batch * (size_t)in->n_embd);
    pl_status st = PL_OK;
    if (!c->hops || !c->in_flight || !c->sent || !c->done || !c->hidden)
        st = pl_fail(PL_ERR_NOMEM, "out of memory for a chain");
    if (!st && in->layer_first < in->layer_last)
        st = pl_stage_local_wrap(host, s, in->layer_first, in->layer_last, &c->own);
    if (!st) st = order(c, stages, n_stages);
    if (!st) st = pl_chain_rewind(c, 0); /* nothing of an earlier user left in flight */
    if (st) {
        pl_chain_free(c);
        return st;
    }
    c->frame = o.frame_cols < so->n_batch ? o.frame_cols : so->n_batch;
    c->no_prepare = o.no_prepare;
    for (int k = 0; k < c->n_hops; k++) {
        if (c->hops[k]->max_cols < c->frame) c->frame = c->hops[k]->max_cols;
        c->in_flight[k] =
            o.in_flight < c->hops[k]->max_in_flight ? o.in_flight : c->hops[k]->max_in_flight;
    }
    *out = c;
    return PL_OK;
}

/* The width of frame f of a batch of n columns. */
static int64_t frame_len(const pl_chain *c, int64_t f, int64_t n) {
    int64_t left = n - f * c->frame;
    return left < c->frame ? left : c->frame;
}

static pl_status send_frame(pl_chain *c, int k, int64_t n, int64_t pos0) {
    int64_t f = c->sent[k], d = pl_model_get_info(c->m)->n_embd;
    pl_status s = pl_stage_submit(c->hops[k], c->hidden + f * c->frame * d, frame_len(c, f, n),
                                  pos0 + f * c->frame, c->pass << 32 | (uint64_t)f);
    if (!s) c->sent[k]++;
    return s;
}

static pl_status take_frame(pl_chain *c, int k, int64_t n) {
    int64_t f = c->done[k], d = pl_model_get_info(c->m)->n_embd, got;
    uint64_t tag;
    pl_stage *st = c->hops[k];
    pl_status s = pl_stage_collect(st, c->hidden + f * c->frame * d, &got, &tag);
    if (s) return s;
    if (tag != (c->pass << 32 | (uint64_t)f) || got != frame_len(c, f, n))
        return pl_fail(PL_ERR,
                       "the stage of layers %d..%d answered frame %llu of pass %llu with %lld "
                       "columns, expected frame %lld of pass %llu with %lld",
                       st->first, st->last, (unsigned long long)(tag & 0xffffffffu),
                       (unsigned long long)(tag >> 32), (long long)got, (long long)f,
                       (unsigned long long)c->pass, (long long)frame_len(c, f, n));
    c->done[k]++;
    return PL_OK;
}

/* Every frame through stages k0.. (the columns in c->hidden): a stage gets a frame as
 * soon as the one before has returned it and fewer than in_flight of its own are
 * outstanding. Then one result is taken from each stage that is full (so it can be fed
 * again while the others work), or, where none is, from the first stage with frames out. */
static pl_status pipeline(pl_chain *c, int64_t n, int64_t pos0, int k0) {
    int K = c->n_hops;
    int64_t nf = (n + c->frame - 1) / c->frame;
    c->pass = (c->pass + 1) & 0xffffffffu;
    memset(c->sent, 0, sizeof *c->sent * (size_t)K);
    memset(c->done, 0, sizeof *c->done * (size_t)K);
    while (k0 < K && c->done[K - 1] < nf) {
        for (int k = k0; k < K; k++) {
            int64_t ready = k > k0 ? c->done[k - 1] : nf;
            while (c->sent[k] < ready && c->sent[k] - c->done[k] < c->in_flight[k])
                TRY(send_frame(c, k, n, pos0));
        }
        int taken = 0, first = -1;
        for (int k = k0; k < K; k++) {
            if (first < 0 && c->done[k] < c->sent[k]) first = k;
            if (c->sent[k] - c->done[k] == c->in_flight[k]) {
                TRY(take_frame(c, k, n));
                taken++;
            }
        }
        if (!taken && first >= 0) TRY(take_frame(c, first, n));
    }
    return PL_OK;
}

/* The rest of a pass whose embedding is recorded in the state's hidden rows (and the host's
 * own layers too when k0 is 1): the columns back to the host (unless `read`: already in
 * c->hidden), through the stages, the head. */
static pl_status finish(pl_chain *c, int64_t n, int64_t pos0, int k0, bool all_rows, bool read) {
    int64_t d = pl_model_get_info(c->m)->n_embd;
    pl_buf *x = pl_state_hidden(c->s);
    if (!read) TRY(pl_be_read(x, 0, c->hidden, n * d * (int64_t)sizeof(float)));
    /* the head for the last position only: the last stage's other columns are not used */
    bool every = all_rows || pl_state_get_opts(c->s)->draft;
    c->hops[c->n_hops - 1]->tail = !every;
    pl_status s = pipeline(c, n, pos0, k0);
    c->hops[c->n_hops - 1]->tail = false;
    if (s) return s;
    if (every) {
        /* every row back on the host: the head for every position (a speculative verify
         * pass), and the draft block's input (its cache entries from every row) */
        TRY(pl_be_write(x, 0, c->hidden, n * d * (int64_t)sizeof(float)));
        TRY(pl_model_head(c->m, c->s, n, all_rows));
        return pl_model_draft_absorb(c->m, c->s, n, pos0);
    }
    /* the head for the last position only */
    TRY(pl_be_write(x, 0, c->hidden + (n - 1) * d, d * (int64_t)sizeof(float)));
    return pl_model_head(c->m, c->s, 1, false);
}

/* Whether the host runs its own layers first, on the embedding where it lies. */
static bool own_first(const pl_chain *c) {
    return c->own && c->hops[0] == c->own;
}

pl_status pl_chain_forward(pl_chain *c, const int32_t *ids, int64_t n, int64_t pos0,
                           bool all_rows) {
    const pl_model_info *in = pl_model_get_info(c->m);
    if (n < 1 || n > pl_state_get_opts(c->s)->n_batch)
        return pl_fail(PL_ERR_ARG, "%lld tokens in one call (the batch holds 1 to %d)",
                       (long long)n, pl_state_get_opts(c->s)->n_batch);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= in->n_vocab)
            return pl_fail(PL_ERR_ARG, "token id %d outside the vocabulary of %d", ids[i],
                           in->n_vocab);
    c->ahead_read = false, c->picked = false; /* its column is not this pass's */
    TRY(pl_be_write(pl_state_ids(c->s), 0, ids, n * (int64_t)sizeof *ids));
    TRY(pl_model_embed(c->m, c->s, n));
    /* The host's own layers first and the batch in one frame (decode): they run on the
     * embedding where it lies, the state's hidden rows, as their stage would after copying
     * it out and back in; on the GPU that is one wait for the device less a token. */
    int k0 = 0;
    if (own_first(c) && n <= c->frame) {
        TRY(pl_model_layers(c->m, c->s, n, pos0, c->own->first, c->own->last));
        k0 = 1;
    }
    return finish(c, n, pos0, k0, all_rows, false);
}

/* Whether the next pick (its head, argmax, embedding and the host's own layers at pos) can
 * be prepared while the last stage works: a backend that records (backend.h's prepare),
 * host layers with nothing to undo if the pass is dropped, and room in the context. */
static bool can_prepare_pick(const pl_chain *c, int64_t pos) {
    pl_buf *x = pl_state_hidden(c->s);
    return x->be->can_prepare && !c->no_prepare && pos < pl_state_get_opts(c->s)->n_ctx &&
           (!own_first(c) || pl_state_rewinds_free(c->s));
}

/* The one column of a decode step through the stages after the host's own; before the
 * last stage's answer comes, the host records and prepares what follows it - the head on
 * that column, the pick, the picked id's embedding and the host's own layers at pos0 + 1 -
 * and runs it the moment the column arrives (one write, the submits, one wait), instead of
 * recording it then. Where the prepared pass was dropped (a stage taken over here ran its
 * layers on this backend meanwhile), the head as finish records it. */
static pl_status forward_prepared(pl_chain *c, int64_t pos0, int k0) {
    int K = c->n_hops;
    const pl_model_info *in = pl_model_get_info(c->m);
    pl_buf *x = pl_state_hidden(c->s);
    c->pass = (c->pass + 1) & 0xffffffffu;
    memset(c->sent, 0, sizeof *c->sent * (size_t)K);
    memset(c->done, 0, sizeof *c->done * (size_t)K);
    bool prepared = false;
    for (int k = k0; k < K; k++) {
        TRY(send_frame(c, k, 1, pos0));
        if (k == K - 1) {
            pl_read_range r[2] = {{pl_state_ids(c->s), 0, &c->picked_id, sizeof c->picked_id},
                                  {x, 0, c->hidden, in->n_embd * (int64_t)sizeof(float)}};
            pl_status s = pl_model_head(c->m, c->s, 1, false);
            if (!s) s = pl_be_argmax(pl_state_logits(c->s), 1, pl_state_ids(c->s), 0);
            if (!s) s = pl_model_embed(c->m, c->s, 1);
            if (!s && own_first(c))
                s = pl_model_layers(c->m, c->s, 1, pos0 + 1, c->own->first, c->own->last);
            if (!s) s = pl_be_prepare(x, r, 2);
            /* (a failure leaves recorded work that the write below runs first: on the
             * host's KV caches only, at pos0 + 1, which the next step writes again) */
            if (s) pl_clear_error();
            prepared = !s;
        }
        TRY(take_frame(c, k, 1));
    }
    if (prepared && pl_be_has_prepared(x->be)) {
        TRY(pl_be_run_prepared(x->be, c->hidden, in->n_embd * (int64_t)sizeof(float)));
        c->picked = true, c->picked_pos = pos0 + 1;
        c->n_prepared++;
        return PL_OK;
    }
    TRY(pl_be_write(x, 0, c->hidden, in->n_embd * (int64_t)sizeof(float)));
    return pl_model_head(c->m, c->s, 1, false);
}

bool pl_chain_can_pick_ahead(const pl_chain *c, int64_t pos0) {
    /* the host's own layers run ahead of the pick being kept: they must be able to go back
     * one position for free, which a KV cache can and a recurrent state cannot */
    return !own_first(c) || (pos0 >= 1 && pl_state_can_rewind(c->s, pos0 - 1));
}

pl_status pl_chain_pick_ahead(pl_chain *c, int64_t pos0, int32_t *id) {
    if (!pl_chain_can_pick_ahead(c, pos0))
        return pl_fail(PL_ERR_ARG, "the host's layers cannot run ahead of the pick");
    if (c->picked && c->picked_pos == pos0) { /* done when the last column came back */
        c->picked = false;
        *id = c->picked_id;
        c->ahead_read = true, c->ahead_pos = pos0;
        return PL_OK;
    }
    c->picked = false;
    c->ahead_read = false;
    TRY(pl_be_argmax(pl_state_logits(c->s), 1, pl_state_ids(c->s), 0));
    TRY(pl_model_embed(c->m, c->s, 1));
    if (own_first(c)) TRY(pl_model_layers(c->m, c->s, 1, pos0, c->own->first, c->own->last));
    /* the id and the column the pass goes on with, after one wait: on the GPU each read
     * back has a fixed cost (~0.3 ms on the H200), which a second read would pay again */
    int64_t d = pl_model_get_info(c->m)->n_embd;
    pl_read_range r[2] = {{pl_state_ids(c->s), 0, id, (int64_t)sizeof *id},
                          {pl_state_hidden(c->s), 0, c->hidden, d * (int64_t)sizeof(float)}};
    TRY(pl_be_read_many(r, 2));
    c->ahead_read = true, c->ahead_pos = pos0;
    return PL_OK;
}

pl_status pl_chain_forward_ahead(pl_chain *c, int64_t pos0, bool pick_next) {
    bool read = c->ahead_read && c->ahead_pos == pos0;
    int k0 = own_first(c) ? 1 : 0;
    c->ahead_read = false, c->picked = false;
    if (pick_next && read && k0 < c->n_hops && !pl_state_get_opts(c->s)->draft &&
        can_prepare_pick(c, pos0 + 1))
        return forward_prepared(c, pos0, k0);
    return finish(c, 1, pos0, k0, false, read);
}

int64_t pl_chain_prepared(const pl_chain *c) {
    return c ? c->n_prepared : 0;
}

pl_status pl_chain_drop_ahead(pl_chain *c, int64_t pos0) {
    c->ahead_read = false, c->picked = false;
    return own_first(c) ? pl_state_rewind(c->s, pos0) : PL_OK;
}

bool pl_chain_can_rewind(const pl_chain *c, int64_t n_past) {
    for (int k = 0; k < c->n_hops; k++)
        if (!pl_stage_can_rewind(c->hops[k], n_past)) return false;
    return true;
}

pl_status pl_chain_rewind(pl_chain *c, int64_t n_past) {
    pl_status first = PL_OK;
    c->ahead_read = false, c->picked = false;
    for (int k = 0; k < c->n_hops; k++) {
        pl_status s = pl_stage_rewind(c->hops[k], n_past);
        if (s && n_past) { /* some went back, some not: a fresh start for all */
            pl_chain_rewind(c, 0);
            return s;
        }
        if (s && !first) first = s;
    }
    return first;
}
