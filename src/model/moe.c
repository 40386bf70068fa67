/* moe.c - the mixture-of-experts feed-forward block (see moe.h): configuration, tensors,
 * scratch buffers and the forward pass through the backend seam. Family-independent: a
 * family calls it with its normed input and its residual stream. */
#include "moe.h"

#include <stdio.h>

#include "model_internal.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        pl_status s_ = (x);                                                                        \
        if (s_) return s_;                                                                         \
    } while (0)

/* Largest expert width accepted from metadata. */
#define MOE_MAX_FF 1048576

pl_status pl_moe_read_config(pl_loader *ld, bool required, pl_moe_config *c) {
    *c = (pl_moe_config){0};
    TRY(pl_load_int_in(ld, "expert_count", required, 0, required, PL_MOE_MAX_EXPERTS,
                       &c->n_expert));
    if (c->n_expert == 0) return PL_OK;
    TRY(pl_load_int_in(ld, "expert_used_count", true, 0, 1, c->n_expert, &c->n_used));
    TRY(pl_load_int_in(ld, "expert_feed_forward_length", true, 0, 1, MOE_MAX_FF, &c->n_ff_exp));
    TRY(pl_load_int_in(ld, "expert_shared_feed_forward_length", false, 0, 0, MOE_MAX_FF,
                       &c->n_ff_shexp));
    c->norm_topk = true;
    return PL_OK;
}

pl_status pl_moe_load_layer(pl_loader *ld, const pl_moe_config *c, int n_embd, int l,
                            pl_moe_weights *w) {
    char nm[96];
    int64_t d = n_embd, ne = c->n_expert, ff = c->n_ff_exp, sh = c->n_ff_shexp;
#define T3(field, suffix, ne0, ne1, ne2, req)                                                      \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);                                           \
        TRY(pl_load_tensor3(ld, nm, ne0, ne1, ne2, req, &w->field));                               \
    } while (0)
    T3(router, "ffn_gate_inp.weight", d, ne, 1, true);
    T3(gate_exps, "ffn_gate_exps.weight", d, ff, ne, true);
    T3(up_exps, "ffn_up_exps.weight", d, ff, ne, true);
    T3(down_exps, "ffn_down_exps.weight", ff, d, ne, true);
    if (sh > 0) {
        T3(gate_shexp, "ffn_gate_shexp.weight", d, sh, 1, true);
        T3(up_shexp, "ffn_up_shexp.weight", d, sh, 1, true);
        T3(down_shexp, "ffn_down_shexp.weight", sh, d, 1, true);
        T3(gate_inp_shexp, "ffn_gate_inp_shexp.weight", d, 1, 1, false);
    } else {
        snprintf(nm, sizeof nm, "blk.%d.ffn_gate_shexp.weight", l);
        if (pl_gguf_find_tensor(ld->g, nm))
            return pl_fail(PL_ERR_FORMAT,
                           "blk.%d has a shared expert, but %s.expert_shared_feed_forward_length "
                           "is missing",
                           l, ld->m->info.arch);
    }
#undef T3
    return PL_OK;
}

/* Every scratch buffer, for freeing and counting. */
#define MOE_N_BUFS 10
static void all_bufs(const pl_moe_state *s, pl_buf *b[MOE_N_BUFS]) {
    pl_buf *all[MOE_N_BUFS] = {s->logits, s->ids,     s->wts,   s->gate, s->up,
                               s->y,      s->sh_gate, s->sh_up, s->sh_g, s->sh_y};
    for (int i = 0; i < MOE_N_BUFS; i++) b[i] = all[i];
}

pl_status pl_moe_state_new(pl_backend *be, const pl_moe_config *c, int n_embd, int n_batch,
                           pl_moe_state *s) {
    *s = (pl_moe_state){0};
    int64_t B = n_batch, slots = B * c->n_used;
    TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_expert, B, &s->logits));
    TRY(pl_be_buf_new(be, PL_TYPE_I32, c->n_used, B, &s->ids));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_used, B, &s->wts));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_ff_exp, slots, &s->gate));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_ff_exp, slots, &s->up));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, n_embd, slots, &s->y));
    if (c->n_ff_shexp > 0) {
        TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_ff_shexp, B, &s->sh_gate));
        TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_ff_shexp, B, &s->sh_up));
        TRY(pl_be_buf_new(be, PL_TYPE_F32, 1, B, &s->sh_g));
        TRY(pl_be_buf_new(be, PL_TYPE_F32, n_embd, B, &s->sh_y));
    }
    return PL_OK;
}

void pl_moe_state_free(pl_moe_state *s) {
    pl_buf *b[MOE_N_BUFS];
    all_bufs(s, b);
    for (int i = 0; i < MOE_N_BUFS; i++) pl_be_buf_free(b[i]);
    *s = (pl_moe_state){0};
}

int64_t pl_moe_state_bytes(const pl_moe_state *s) {
    pl_buf *b[MOE_N_BUFS];
    all_bufs(s, b);
    int64_t n = 0;
    for (int i = 0; i < MOE_N_BUFS; i++) n += b[i] ? pl_be_buf_bytes(b[i]) : 0;
    return n;
}

double pl_moe_floats_per_token(const pl_moe_config *c, int n_embd) {
    double sh = c->n_ff_shexp > 0 ? 2.0 * c->n_ff_shexp + 1 + n_embd : 0;
    return c->n_expert + 2.0 * c->n_used + (double)c->n_used * (2.0 * c->n_ff_exp + n_embd) + sh;
}

double pl_moe_largest_per_token(const pl_moe_config *c, int n_embd) {
    double m = c->n_expert,
           v[] = {(double)c->n_used * c->n_ff_exp, (double)c->n_used * n_embd, c->n_ff_shexp};
    for (int i = 0; i < 3; i++) m = v[i] > m ? v[i] : m;
    return m;
}

pl_status pl_moe_ffn(const pl_moe_config *c, const pl_moe_weights *w, pl_moe_state *s,
                     const pl_buf *xn, int64_t n, pl_buf *x) {
    int64_t k = c->n_used, ne = c->n_expert;
    /* route: the k best experts of each token and their weights */
    TRY(pl_be_matmul(w->router, xn, NULL, n, false, s->logits));
    /* the caller's group ends with the router */
    TRY(pl_be_fuse(x->be, (c->norm_topk ? PL_FUSE_ROUTER : 0) | PL_FUSE_GATE_UP |
                              (w->gate_inp_shexp ? PL_FUSE_SHARED_GATE : 0)));
    if (c->norm_topk) {
        TRY(pl_be_topk_rows(s->logits, n, ne, k, s->ids, s->wts));
        TRY(pl_be_softmax_rows(s->wts, n, k, s->wts));
    } else {
        TRY(pl_be_softmax_rows(s->logits, n, ne, s->logits));
        TRY(pl_be_topk_rows(s->logits, n, ne, k, s->ids, s->wts));
    }
    /* the shared expert's gate logit, right after the top-k that can compute it */
    if (w->gate_inp_shexp) TRY(pl_be_matmul(w->gate_inp_shexp, xn, NULL, n, false, s->sh_g));
    /* the chosen experts' SwiGLU */
    TRY(pl_be_matmul_id(w->gate_exps, ne, xn, s->ids, n, k, true, s->gate));
    TRY(pl_be_matmul_id(w->up_exps, ne, xn, s->ids, n, k, true, s->up));
    TRY(pl_be_swiglu(s->gate, s->up, n * k * c->n_ff_exp, s->gate));
    /* the shared expert's SwiGLU, every token */
    bool gated = w->gate_shexp && w->gate_inp_shexp;
    if (w->gate_shexp) {
        TRY(pl_be_fuse(x->be, PL_FUSE_GATE_UP));
        TRY(pl_be_matmul(w->gate_shexp, xn, NULL, n, false, s->sh_gate));
        TRY(pl_be_matmul(w->up_shexp, xn, NULL, n, false, s->sh_up));
        TRY(pl_be_swiglu(s->sh_gate, s->sh_up, n * c->n_ff_shexp, s->sh_gate));
    }
    TRY(pl_be_fuse(x->be, 0));
    if (gated) TRY(pl_be_matmul(w->down_shexp, s->sh_gate, NULL, n, false, s->sh_y));
    /* the experts' weighted sum into the residual, then the shared expert scaled by its
     * sigmoid gate (one pass where the backend can) or added as it is */
    TRY(pl_be_matmul_id(w->down_exps, ne, s->gate, s->ids, n, k, false, s->y));
    if (gated) TRY(pl_be_fuse(x->be, PL_FUSE_COMBINE_SHARED));
    TRY(pl_be_moe_combine(s->y, s->wts, n, k, true, x));
    if (gated) {
        TRY(pl_be_sigmoid_mul(s->sh_y, s->sh_g, n, x->ne0, 1, true, x));
        return pl_be_fuse(x->be, 0);
    }
    return w->gate_shexp ? pl_be_matmul(w->down_shexp, s->sh_gate, NULL, n, true, x) : PL_OK;
}
