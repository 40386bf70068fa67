/* session.c - a conversation's KV cache and the ids in it, with common-prefix reuse.
 *
 * A recurrent model's state (qwen35) cannot drop its last positions the way a KV cache
 * can: reuse goes through pl_state_can_rewind / pl_state_rewind, and where the state cannot
 * go back to the shared prefix the session starts again from position 0.
 *
 * A session over a chain of stages (pl_session_new_chain) runs each batch through
 * pl_chain_forward (chain.c) instead of pl_model_forward, and rewinds every stage; its
 * greedy decoding picks and pushes one id at a time (the ids cross the host anyway). */
#include "session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pl_session {
    const pl_model *m;
    pl_state *st;
    pl_chain *chain; /* NULL: the model runs every layer itself */
    int32_t *ids;    /* [n_ctx]: the ids whose keys and values are cached */
    int64_t n_ids;
    /* Positions the model's state has run: n_ids, or n_ids + 1 after a greedy step that
     * ran an id the caller did not keep (ids[n_ids] then holds it, or -1 if unknown). */
    int64_t n_state; /* -1: unknown (a failed call) */
    float *logits;   /* [n_logits][n_vocab] host copy for sampling */
    int n_vocab;
    bool have_logits; /* the state's logits belong to ids[n_ids - 1] */
    /* sampling from the device's top-k (pl_sampler_top_count): its pairs land here, so a
     * few hundred bytes come back per token instead of every logit */
    pl_buf *top_ids, *top_vals;
};

pl_status pl_session_new(const pl_model *m, const pl_state_opts *o, pl_session **out) {
    return pl_session_new_chain(m, o, NULL, 0, NULL, out);
}

pl_status pl_session_new_chain(const pl_model *m, const pl_state_opts *o, pl_stage *const *stages,
                               int n_stages, const pl_chain_opts *co, pl_session **out) {
    *out = NULL;
    const pl_model_info *in = pl_model_get_info(m);
    bool whole = !n_stages && in->has_embed && in->has_head && in->layer_first == 0 &&
                 in->layer_last == in->n_layer;
    pl_state_opts so = *o;
    if (so.n_logits < 1) so.n_logits = 1;
    pl_session *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(PL_ERR_NOMEM, "out of memory for the session");
    s->m = m;
    s->n_vocab = pl_model_get_info(m)->n_vocab;
    pl_status st = pl_state_new(m, &so, &s->st);
    if (!st) {
        s->ids = malloc(sizeof *s->ids * (size_t)so.n_ctx);
        s->logits = malloc(sizeof *s->logits * (size_t)s->n_vocab * (size_t)so.n_logits);
        if (!s->ids || !s->logits) st = pl_fail(PL_ERR_NOMEM, "out of memory for the session");
    }
    if (!st && !whole) st = pl_chain_new(m, s->st, stages, n_stages, co, &s->chain);
    if (st) {
        pl_session_free(s);
        return st;
    }
    *out = s;
    return PL_OK;
}

void pl_session_free(pl_session *s) {
    if (!s) return;
    pl_chain_free(s->chain);
    pl_be_buf_free(s->top_ids);
    pl_be_buf_free(s->top_vals);
    pl_state_free(s->st);
    free(s->ids);
    free(s->logits);
    free(s);
}

void pl_session_reset(pl_session *s) {
    if (s->chain) pl_chain_rewind(s->chain, 0); /* tell every stage (a failure shows later) */
    s->n_ids = 0;
    s->n_state = 0;
    s->have_logits = false;
}

int64_t pl_session_n_ctx(const pl_session *s) {
    return pl_state_get_opts(s->st)->n_ctx;
}
pl_state *pl_session_state(pl_session *s) {
    return s->st;
}

const int32_t *pl_session_ids(const pl_session *s, int64_t *n) {
    *n = s->n_ids;
    return s->ids;
}

static int64_t rewind_to(pl_session *s, int64_t keep);
static pl_status pass_columns(pl_session *s, const int32_t *batch, int64_t n);

/* Run ids[0..n) at position n_ids onwards, in batches, appending them; all_rows: every
 * column's logits kept (rows 0..n-1; n within one batch), else the last one's. The state
 * must be at n_ids. On failure the cache holds what it held, if it can go back to it. */
static pl_status forward(pl_session *s, const int32_t *ids, int64_t n, bool all_rows) {
    int64_t batch = pl_state_get_opts(s->st)->n_batch;
    s->have_logits = false;
    for (int64_t i = 0; i < n; i += batch) {
        int64_t len = n - i < batch ? n - i : batch;
        pl_status st = s->chain ? pl_chain_forward(s->chain, ids + i, len, s->n_ids, all_rows)
                                : pl_model_forward(s->m, s->st, ids + i, len, s->n_ids, all_rows);
        if (st) { /* keep what is cached if the state can still go back to it, else none */
            s->n_state = -1;
            rewind_to(s, s->n_ids);
            return st;
        }
        memcpy(s->ids + s->n_ids, ids + i, sizeof *ids * (size_t)len);
        s->n_ids += len;
        s->n_state = s->n_ids;
    }
    s->have_logits = n > 0;
    return PL_OK;
}

static pl_status run(pl_session *s, const int32_t *ids, int64_t n) {
    return forward(s, ids, n, false);
}

/* Put the state back to the first keep positions when it can (a KV cache always can),
 * else to 0. Returns the positions kept; n_ids and n_state become it. */
static int64_t rewind_to(pl_session *s, int64_t keep) {
    if (keep != s->n_state && s->chain) {
        if (!pl_chain_can_rewind(s->chain, keep) || pl_chain_rewind(s->chain, keep)) {
            keep = 0;
            pl_chain_rewind(s->chain, 0); /* every stage starts afresh */
        }
    } else if (keep != s->n_state &&
               (!pl_state_can_rewind(s->st, keep) || pl_state_rewind(s->st, keep))) {
        keep = 0; /* pos0 0 starts afresh: nothing to rewind */
    }
    s->n_ids = s->n_state = keep;
    return keep;
}

pl_status pl_session_set(pl_session *s, const int32_t *ids, int64_t n, int64_t *n_run) {
    if (n_run) *n_run = 0;
    int64_t n_ctx = pl_session_n_ctx(s);
    if (n < 1) return pl_fail(PL_ERR_ARG, "nothing to run: no tokens");
    if (n > n_ctx)
        return pl_fail(PL_ERR_ARG,
                       "the prompt is %lld tokens, longer than the context of %lld "
                       "(raise --ctx)",
                       (long long)n, (long long)n_ctx);
    /* what the state has run includes a greedy step's id the caller did not keep */
    int64_t keep = 0;
    while (keep < s->n_state && keep < n && s->ids[keep] == ids[keep]) keep++;
    if (keep == n) keep = n - 1; /* the last id is run again: its logits are needed */
    keep = rewind_to(s, keep);
    if (n_run) *n_run = n - keep;
    return run(s, ids + keep, n - keep);
}

/* After a greedy step that ran past the ids, put the state back to them (or redo them). */
static pl_status settle(pl_session *s) {
    int64_t n_keep = s->n_ids;
    if (s->n_state != n_keep && rewind_to(s, n_keep) < n_keep) return run(s, s->ids, n_keep);
    return PL_OK;
}

pl_status pl_session_push(pl_session *s, int32_t id) {
    int64_t n_ctx = pl_session_n_ctx(s);
    if (s->n_ids >= n_ctx)
        return pl_fail(PL_ERR_ARG, "context full: all %lld positions are used (raise --ctx)",
                       (long long)n_ctx);
    pl_status st = settle(s);
    return st ? st : run(s, &id, 1);
}

struct pl_batch {
    const pl_model *m;
    pl_state *st; /* scratch of n_max columns; its caches: none, or the sessions' slots */
    int n_max;
    int last_n; /* columns of the last batched pass whose logits st holds (0: none) */
};

/* A batch of n_max sessions; slots: o's caches for each of them in the batch's state. */
static pl_status batch_new(const pl_model *m, int n_max, const pl_state_opts *slots,
                           pl_batch **out) {
    *out = NULL;
    if (n_max < 1) return pl_fail(PL_ERR_ARG, "a batch of %d sessions", n_max);
    pl_batch *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory for the batch");
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = 1, o.n_batch = n_max, o.n_logits = n_max;
    if (slots) o.n_ctx = slots->n_ctx, o.kv_type = slots->kv_type, o.n_slots = n_max;
    pl_status st = pl_state_new(m, &o, &b->st);
    if (st) {
        free(b);
        return st;
    }
    b->m = m, b->n_max = n_max;
    *out = b;
    return PL_OK;
}

pl_status pl_batch_new(const pl_model *m, int n_max, pl_batch **out) {
    return batch_new(m, n_max, NULL, out);
}

pl_status pl_batch_new_slots(const pl_model *m, int n_max, const pl_state_opts *o, pl_batch **out) {
    if (!pl_model_keeps_slots(m) || o->kv_type == PL_TYPE_Q8_0)
        return batch_new(m, n_max, NULL, out);
    return batch_new(m, n_max, o, out);
}

pl_status pl_batch_session_new(pl_batch *b, int slot, const pl_state_opts *o, pl_session **out) {
    if (!pl_state_get_opts(b->st)->n_slots) return pl_session_new(b->m, o, out);
    if (slot < 0 || slot >= b->n_max)
        return pl_fail(PL_ERR_ARG, "slot %d of a batch of %d", slot, b->n_max);
    pl_state_opts so = *o;
    so.slot_of = b->st, so.slot = slot;
    return pl_session_new(b->m, &so, out);
}

void pl_batch_free(pl_batch *b) {
    if (!b) return;
    pl_state_free(b->st);
    free(b);
}

pl_status pl_session_push_batch(pl_batch *b, pl_session *const *ss, const int32_t *ids, int n) {
    enum { CHUNK = 64 };
    if (n < 1 || n > b->n_max)
        return pl_fail(PL_ERR_ARG, "%d sessions in one step (the batch holds 1 to %d)", n,
                       b->n_max);
    for (int i = 0; i < n; i++) {
        pl_session *s = ss[i];
        if (s->chain || s->m != b->m)
            return pl_fail(PL_ERR_ARG, "session %d: not a whole session of the batch's model", i);
        int64_t n_ctx = pl_session_n_ctx(s);
        if (s->n_ids >= n_ctx)
            return pl_fail(PL_ERR_ARG, "context full: all %lld positions are used (raise --ctx)",
                           (long long)n_ctx);
        pl_status st = settle(s);
        if (st) return st;
    }
    /* one session: a push (the plain pass, with the fused kernels a batched pass does not ask
     * for on the GPU), so a lone request gives exactly what pooled run gives */
    b->last_n = 0;
    if (n == 1) return run(ss[0], ids, 1);
    pl_state *st_[CHUNK];
    int64_t pos[CHUNK];
    pl_status st = PL_OK;
    b->last_n = n <= CHUNK ? n : 0; /* (a longer one leaves only its last chunk's logits) */
    for (int i0 = 0; i0 < n && !st; i0 += CHUNK) {
        int k = n - i0 < CHUNK ? n - i0 : CHUNK;
        for (int i = 0; i < k; i++) st_[i] = ss[i0 + i]->st, pos[i] = ss[i0 + i]->n_ids;
        st = pl_model_forward_batch(b->m, b->st, st_, ids + i0, pos, k);
    }
    if (st) b->last_n = 0;
    for (int i = 0; i < n; i++) {
        pl_session *s = ss[i];
        if (st) { /* the caches past n_ids may be written: a KV cache just ignores them */
            s->n_state = -1;
            rewind_to(s, s->n_ids);
            s->have_logits = false;
            continue;
        }
        s->ids[s->n_ids++] = ids[i];
        s->n_state = s->n_ids;
        s->have_logits = true;
    }
    return st;
}

pl_status pl_batch_argmax(pl_batch *b, int n, int32_t *ids) {
    if (n < 1 || n != b->last_n)
        return pl_fail(PL_ERR_ARG, "argmax of %d columns: the last batched pass had %d", n,
                       b->last_n);
    pl_status st = pl_be_argmax(pl_state_logits(b->st), n, pl_state_ids(b->st), 0);
    return st ? st : pl_be_read(pl_state_ids(b->st), 0, ids, n * (int64_t)sizeof *ids);
}

bool pl_session_has_logits(const pl_session *s) {
    return s->have_logits;
}

pl_status pl_session_logits(pl_session *s, float *out) {
    if (!s->have_logits) return pl_fail(PL_ERR_ARG, "no logits: nothing has been run");
    return pl_be_read(pl_state_logits(s->st), 0, out, (int64_t)s->n_vocab * (int64_t)sizeof *out);
}

/* NaN or +Inf logits (from NaN/Inf weights, or an overflow) rank nothing: an error, never
 * an id made up from them. The backends' argmax skips NaN and gives -1 when nothing is
 * left, so an id outside the vocabulary means the same. */
static pl_status nonfinite(const pl_session *s) {
    return pl_fail(PL_ERR, "the model produced non-finite logits at position %lld",
                   (long long)(s->n_ids - 1));
}

static pl_status check_id(const pl_session *s, int32_t id) {
    return id >= 0 && id < s->n_vocab ? PL_OK : nonfinite(s);
}

/* Pick the id at position pos from one row of host logits, with s->ids[0..pos) as the
 * penalty context. */
static pl_status pick_row(pl_session *s, pl_sampler *smp, float *row, int64_t pos, int32_t *out) {
    for (int i = 0; i < s->n_vocab; i++)
        if (isnan(row[i]) || row[i] == INFINITY) return nonfinite(s);
    pl_status st = pl_sampler_pick(smp, row, s->ids, pos, out);
    return st ? st : check_id(s, *out);
}

/* The largest logit's id of each of the first `rows` rows, found on the device: only the
 * ids come back. Not checked (check_id): a caller checks those it uses. */
static pl_status device_argmax_rows(pl_session *s, int64_t rows, int32_t *out) {
    pl_status st = pl_be_argmax(pl_state_logits(s->st), rows, pl_state_ids(s->st), 0);
    return st ? st : pl_be_read(pl_state_ids(s->st), 0, out, rows * (int64_t)sizeof *out);
}

static pl_status device_argmax(pl_session *s, int32_t *out) {
    pl_status st = device_argmax_rows(s, 1, out);
    return st ? st : check_id(s, *out);
}

pl_status pl_session_pick(pl_session *s, pl_sampler *smp, int32_t *out) {
    if (!s->have_logits) return pl_fail(PL_ERR_ARG, "no logits: nothing has been run");
    pl_status st;
    if (pl_sampler_is_argmax(smp)) return device_argmax(s, out);
    int m = pl_sampler_top_count(smp);
    if (m > 0) {
        pl_buf *lg = pl_state_logits(s->st);
        int32_t ids[PL_SAMPLER_TOP_MAX + 1];
        float vals[PL_SAMPLER_TOP_MAX + 1];
        if (!s->top_ids &&
            (st = pl_be_buf_new(lg->be, PL_TYPE_I32, PL_SAMPLER_TOP_MAX + 1, 1, &s->top_ids)))
            return st;
        if (!s->top_vals &&
            (st = pl_be_buf_new(lg->be, PL_TYPE_F32, PL_SAMPLER_TOP_MAX + 1, 1, &s->top_vals)))
            return st;
        if ((st = pl_be_topk(lg, 0, m, s->top_ids, s->top_vals)) ||
            (st = pl_be_read(s->top_ids, 0, ids, (int64_t)m * 4)) ||
            (st = pl_be_read(s->top_vals, 0, vals, (int64_t)m * 4)))
            return st;
        if (vals[0] == INFINITY) return nonfinite(s);
        if (pl_sampler_pick_top(smp, ids, vals, m, s->n_ids, out)) return PL_OK;
    }
    if ((st = pl_session_logits(s, s->logits))) return st;
    return pick_row(s, smp, s->logits, s->n_ids, out);
}

int pl_session_spec_max(const pl_session *s) {
    const pl_state_opts *o = pl_state_get_opts(s->st);
    int k = o->n_logits < o->n_batch ? o->n_logits : o->n_batch;
    if (o->n_snap < k) k = o->n_snap; /* a recurrent state goes back only to a snapshot */
    k -= 1;
    if (k > PL_SPEC_MAX) k = PL_SPEC_MAX;
    return k < 0 ? 0 : k;
}

int pl_session_draft_model(pl_session *s, int32_t last, int max, int32_t *out) {
    if (!pl_state_get_opts(s->st)->draft || s->n_ids < 1 || s->n_state != s->n_ids) return 0;
    if (max > PL_SPEC_MAX) max = PL_SPEC_MAX;
    int n = 0;
    if (pl_model_draft(s->m, s->st, s->n_ids - 1, last, max, out, &n)) return 0;
    return n;
}

/* n more ids fit in the context, else why not. */
static pl_status fits(const pl_session *s, int64_t n) {
    int64_t n_ctx = pl_session_n_ctx(s);
    if (n <= n_ctx - s->n_ids) return PL_OK;
    return pl_fail(PL_ERR_ARG,
                   "%lld more ids do not fit: %lld of the context's %lld positions are used",
                   (long long)n, (long long)s->n_ids, (long long)n_ctx);
}

pl_status pl_session_append(pl_session *s, const int32_t *ids, int64_t n) {
    if (n < 1) return pl_fail(PL_ERR_ARG, "nothing to run: no tokens");
    pl_status st = fits(s, n);
    if (!st) st = settle(s);
    return st ? st : run(s, ids, n);
}

pl_status pl_session_verify(pl_session *s, const int32_t *ids, int n, int32_t *next) {
    int most = pl_session_spec_max(s) + 1;
    if (n < 1 || n > most)
        return pl_fail(PL_ERR_ARG, "a pass of %d ids: this session checks 1 to %d at once", n,
                       most);
    pl_status st = fits(s, n);
    if (!st) st = pass_columns(s, ids, n);
    if (!st) st = device_argmax_rows(s, n, next);
    for (int j = 0; !st && j < n; j++) st = check_id(s, next[j]);
    return st;
}

pl_status pl_session_truncate(pl_session *s, int64_t n) {
    if (n < 0) n = 0;
    if (n > s->n_ids) n = s->n_ids;
    if (n == s->n_ids && s->n_state == s->n_ids) return PL_OK;
    s->have_logits = false;
    if (rewind_to(s, n) < n) return run(s, s->ids, n); /* went back to 0: redo them */
    return PL_OK;
}

/* batch[0..n) (within one batch) after the session's ids in one pass with the logits of
 * every column kept (rows 0..n-1), appended to the cache; on failure the cache holds what
 * it held. The logits are not left ready: row 0 is the first column's, not the last's. */
static pl_status pass_columns(pl_session *s, const int32_t *batch, int64_t n) {
    pl_status st = settle(s);
    if (!st) st = forward(s, batch, n, true);
    s->have_logits = false;
    return st;
}

pl_status pl_session_spec_step(pl_session *s, pl_sampler *smp, int32_t last, const int32_t *drafts,
                               int k, int32_t *out, int *n_out) {
    *n_out = 0;
    int64_t n_ctx = pl_session_n_ctx(s);
    if (s->n_ids >= n_ctx)
        return pl_fail(PL_ERR_ARG, "context full: all %lld positions are used (raise --ctx)",
                       (long long)n_ctx);
    int kmax = pl_session_spec_max(s);
    if (k > kmax) k = kmax;
    if (k > n_ctx - s->n_ids - 1) k = (int)(n_ctx - s->n_ids - 1);
    if (k < 0) k = 0;
    int32_t batch[PL_SPEC_MAX + 1];
    batch[0] = last;
    for (int j = 0; j < k; j++) batch[j + 1] = drafts[j];
    int64_t n0 = s->n_ids, n = 1 + k;
    pl_status st = pass_columns(s, batch, n);
    if (st) return st;
    int j = 0;
    if (pl_sampler_is_argmax(smp)) {
        /* greedy: every column's argmax on the device, as a plain step takes it (the same
         * ties), and only the n ids come back, not n rows of logits */
        int32_t got[PL_SPEC_MAX + 1];
        if ((st = device_argmax_rows(s, n, got))) return st;
        for (;; j++) {
            out[j] = got[j];
            if ((st = check_id(s, out[j])) || j == k || out[j] != drafts[j]) break;
        }
    } else {
        if ((st = pl_be_read(pl_state_logits(s->st), 0, s->logits,
                             n * s->n_vocab * (int64_t)sizeof *s->logits)))
            return st;
        /* column j's logits choose the id at position n0 + 1 + j, with the ids before it
         * (the accepted drafts included) as the penalty context, exactly as a plain step */
        for (;; j++) {
            if ((st = pick_row(s, smp, s->logits + (int64_t)j * s->n_vocab, n0 + 1 + j, &out[j])))
                break;
            if (j == k || out[j] != drafts[j]) break;
        }
    }
    if (!st) *n_out = j + 1;
    /* keep last and the accepted drafts; the rejected columns' cache rows go */
    int64_t keep = st ? n0 : n0 + 1 + j;
    if (keep < s->n_ids && rewind_to(s, keep) < keep) {
        pl_status e = run(s, s->ids, keep);
        if (!st) st = e;
    }
    s->have_logits = false; /* the kept column's logits are not in row 0 */
    return st;
}

/* The next step's input stays on the device: embed the id the argmax left in ids[0]. */
static pl_status record_step(pl_session *s, pl_buf *hist) {
    const pl_model *m = s->m;
    pl_state *st = s->st;
    pl_status e = pl_model_embed(m, st, 1);
    if (!e) e = pl_model_layers(m, st, 1, s->n_ids, 0, pl_model_get_info(m)->n_layer);
    if (!e) e = pl_model_head(m, st, 1, false);
    if (!e) e = pl_be_argmax(pl_state_logits(st), 1, pl_state_ids(st), 0);
    if (!e) e = pl_be_copy(pl_state_ids(st), 0, 1, hist, 0);
    int32_t none;
    if (!e) e = pl_be_read(hist, 0, &none, 0); /* submit now, do not wait */
    return e;
}

/* Greedy over a chain: pick and push, one id at a time; where the host's layers allow
 * (chain.h), each pick and the start of the step that feeds it share one wait. */
static pl_status greedy_chain(pl_session *s, int64_t n, bool (*on_token)(void *ud, int32_t id),
                              void *ud, int64_t *n_gen) {
    pl_status e = PL_OK;
    int64_t n_ctx = pl_session_n_ctx(s);
    for (int64_t t = 0; !e && t < n; t++) {
        int32_t id;
        bool ahead = t + 1 < n && s->n_ids < n_ctx && s->n_state == s->n_ids &&
                     pl_chain_can_pick_ahead(s->chain, s->n_ids);
        e = ahead ? pl_chain_pick_ahead(s->chain, s->n_ids, &id) : device_argmax(s, &id);
        if (!e && ahead) e = check_id(s, id);
        if (e) {
            if (ahead && pl_chain_drop_ahead(s->chain, s->n_ids)) s->n_state = -1;
            break;
        }
        (*n_gen)++;
        bool more = !on_token || on_token(ud, id);
        if (!more || t + 1 == n) {
            if (ahead && pl_chain_drop_ahead(s->chain, s->n_ids)) s->n_state = -1;
            break;
        }
        if (!ahead) {
            e = pl_session_push(s, id);
            continue;
        }
        s->have_logits = false;
        /* the next turn of this loop picks ahead at n_ids + 1 when there is one */
        bool next = t + 2 < n && s->n_ids + 1 < n_ctx;
        if ((e = pl_chain_forward_ahead(s->chain, s->n_ids, next))) {
            s->n_state = -1;
            rewind_to(s, s->n_ids);
            break;
        }
        s->ids[s->n_ids++] = id;
        s->n_state = s->n_ids;
        s->have_logits = true;
    }
    return e;
}

const pl_chain *pl_session_chain(const pl_session *s) {
    return s->chain;
}

pl_status pl_session_greedy(pl_session *s, int64_t n, bool (*on_token)(void *ud, int32_t id),
                            void *ud, int64_t *n_gen) {
    *n_gen = 0;
    if (!s->have_logits) return pl_fail(PL_ERR_ARG, "no logits: nothing has been run");
    if (n <= 0) return PL_OK;
    if (s->chain) return greedy_chain(s, n, on_token, ud, n_gen);
    pl_backend *be = pl_model_backend(s->m);
    pl_buf *hist[2] = {NULL, NULL}; /* step t's id, read by the host after step t+1 is sent */
    pl_status e = pl_be_buf_new(be, PL_TYPE_I32, 1, 1, &hist[0]);
    if (!e) e = pl_be_buf_new(be, PL_TYPE_I32, 1, 1, &hist[1]);
    pl_buf *ids = pl_state_ids(s->st);
    int32_t none;
    if (!e) e = pl_be_argmax(pl_state_logits(s->st), 1, ids, 0);
    if (!e) e = pl_be_copy(ids, 0, 1, hist[0], 0);
    if (!e) e = pl_be_read(hist[0], 0, &none, 0);
    int64_t n_ctx = pl_session_n_ctx(s);
    for (int64_t t = 0; !e && t < n; t++) {
        /* record the step that feeds id t before knowing it */
        bool ahead = t + 1 < n && s->n_ids < n_ctx;
        if (ahead) e = record_step(s, hist[(t + 1) % 2]);
        int32_t id = 0;
        if (!e) e = pl_be_read(hist[t % 2], 0, &id, sizeof id);
        if (!e) e = check_id(s, id);
        if (e) {
            if (ahead) { /* the step ran on a made-up id */
                s->have_logits = false;
                s->ids[s->n_ids] = -1;
                s->n_state = s->n_ids + 1;
            }
            break;
        }
        (*n_gen)++;
        bool more = on_token ? on_token(ud, id) : true;
        if (ahead) s->ids[s->n_ids] = id; /* the step ran on it */
        if (ahead && more) {              /* the step ran on id: it is in the cache now */
            s->n_state = ++s->n_ids;
            s->have_logits = true;
        } else if (ahead) {
            s->n_state = s->n_ids + 1; /* ran, not kept: a later set may still use it */
            s->have_logits = false;    /* the logits belong to an id the caller did not keep */
        }
        if (!more || t + 1 == n) break;
        if (!ahead)
            e = pl_fail(PL_ERR_ARG, "context full: all %lld positions are used (raise --ctx)",
                        (long long)n_ctx);
    }
    pl_be_buf_free(hist[0]);
    pl_be_buf_free(hist[1]);
    return e;
}
