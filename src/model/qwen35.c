/* qwen35.c - the Qwen3.5 hybrid family (qwen35, and qwen35moe with mixture-of-experts
 * feed-forwards): Gated DeltaNet linear attention in most layers, gated full attention in
 * every full_attention_interval-th one.
 *
 * Per layer: RMSNorm -> mixer added to the residual -> RMSNorm -> feed-forward added to
 * the residual (SwiGLU; qwen35moe: the MoE block of moe.c, routed experts plus a
 * sigmoid-gated shared expert), where the mixer is
 *   - full attention (layers l with (l+1) % interval == 0): q (with an output gate stored
 *     interleaved with it in attn_q), k, v -> per-head q/k RMSNorm -> NEOX RoPE on the
 *     first rope.dimension_count values of each head -> KV cache -> causal attention ->
 *     times sigmoid(gate) -> output projection;
 *   - Gated DeltaNet (the others): qkv, z, beta, alpha projections -> causal depthwise
 *     conv1d + SiLU over qkv (a state of the last K-1 inputs) -> the gated delta rule (a
 *     d_k x d_v state per value head) -> RMSNorm per head (ssm_norm) times silu(z) ->
 *     output projection.
 * Then the final RMSNorm and the output matrix (tied to the token embedding when the file
 * has no output.weight). With
 * nextn_predict_layers = N the last N blocks of the file are the multi-token-prediction
 * block: loaded with the head, never run by plain decoding; a state made with opts.draft
 * runs the first of them after every forward pass and drafts from it (see
 * pl_model_draft): x = eh_proj([enorm(embedding), hnorm(final-normed hidden)]), then a
 * full-attention layer over its own KV cache, then shared_head_norm and the model's output
 * matrix.
 *
 * rope.dimension_sections is multimodal RoPE: for text every section gets the same
 * position, which is plain partial RoPE. All norm weights are stored as 1 + w by the
 * converter except ssm_norm, so the plain RMSNorm serves them all.
 *
 * The recurrent states (conv and delta rule) replace the KV cache of DeltaNet layers: their
 * memory does not grow with the context, and they cannot be rewound except to where they
 * are, to 0, or to a position the last layers call kept (n_snap; see pl_state_rewind).
 *
 * The batched decode step (pl_model_forward_batch) runs one id of each of several
 * sequences: the weights once for all of them, each one's attention and recurrent states
 * on its own state, each result bit for bit that of its own step on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "moe.h"

/* ---- configuration, weights, state ---- */

typedef struct {
    int n_vocab, n_embd, n_ff, n_ctx_train;
    int n_layer;                     /* the main model's layers (block_count - n_nextn) */
    int n_nextn;                     /* trailing multi-token-prediction blocks */
    int interval;                    /* full_attention_interval */
    int n_head, n_head_kv, head_dim; /* full attention (value heads as wide as key heads) */
    int rope_dim;
    float rope_base, rms_eps;
    int conv_k;        /* ssm.conv_kernel */
    int nk, nv;        /* key heads (ssm.group_count), value heads (ssm.time_step_rank) */
    int dk, dv;        /* ssm.state_size, ssm.inner_size / nv */
    int conv_dim;      /* 2*nk*dk + nv*dv: the qkv row the conv runs over */
    pl_moe_config moe; /* qwen35moe: every feed-forward is MoE (n_expert > 0) */
} q35_config;

typedef struct {
    pl_buf *attn_norm; /* [n_embd] */
    pl_buf *post_norm; /* [n_embd] post_attention_norm, before the FFN */
    /* full attention */
    pl_buf *wq;              /* [n_head*head_dim, n_embd] query rows of attn_q */
    pl_buf *wq_gate;         /* [n_head*head_dim, n_embd] output-gate rows of attn_q */
    pl_buf *wk, *wv;         /* [n_head_kv*head_dim, n_embd] */
    pl_buf *q_norm, *k_norm; /* [head_dim] */
    pl_buf *wo;              /* [n_embd, n_head*head_dim] */
    /* Gated DeltaNet */
    pl_buf *w_qkv;    /* [conv_dim, n_embd] attn_qkv */
    pl_buf *w_z;      /* [nv*dv, n_embd] attn_gate */
    pl_buf *w_beta;   /* [nv, n_embd] ssm_beta */
    pl_buf *w_alpha;  /* [nv, n_embd] ssm_alpha */
    pl_buf *conv1d;   /* [conv_dim, conv_k] F32 */
    pl_buf *ssm_a;    /* [nv] -exp(A_log) */
    pl_buf *dt_bias;  /* [nv] ssm_dt.bias */
    pl_buf *ssm_norm; /* [dv] */
    pl_buf *ssm_out;  /* [n_embd, nv*dv] */
    /* feed-forward: dense (qwen35) */
    pl_buf *w_gate, *w_up; /* [n_ff, n_embd] */
    pl_buf *w_down;        /* [n_embd, n_ff] */
    pl_moe_weights moe;    /* or mixture of experts (qwen35moe) */
} q35_layer;

/* The multi-token-prediction block (the drafter of pl_model_draft). */
typedef struct {
    pl_buf *eh_proj;          /* [n_embd, 2*n_embd] */
    pl_buf *enorm, *hnorm;    /* [n_embd] */
    pl_buf *shared_head_norm; /* [n_embd] */
    q35_layer layer;          /* a full-attention layer */
} q35_nextn;

typedef struct {
    q35_config cfg;
    pl_buf *tok_embd;  /* [n_vocab, n_embd] */
    pl_buf *out_norm;  /* [n_embd] */
    pl_buf *output;    /* [n_vocab, n_embd]; tok_embd when tied */
    q35_layer *layers; /* [n_layer] */
    q35_nextn *nextn;  /* [n_nextn], loaded with the head */
} q35_model;

typedef struct {
    /* scratch, [n_batch, width] */
    pl_buf *xb;              /* n_embd: a block's normed input */
    pl_buf *q, *gate, *att;  /* n_head*head_dim */
    pl_buf *k, *v;           /* n_head_kv*head_dim */
    pl_buf *qkv, *conv_out;  /* conv_dim */
    pl_buf *z, *o;           /* nv*dv */
    pl_buf *alpha, *beta;    /* nv */
    pl_buf *ff_gate, *ff_up; /* n_ff (dense), else NULL */
    pl_moe_state moe;        /* MoE scratch (qwen35moe) */
    /* per layer [n_layer], NULL where the layer is of the other kind or not loaded */
    pl_buf **kc, **vc;              /* [n_ctx, n_head_kv*head_dim] */
    pl_buf **conv, **ssm;           /* [K-1, conv_dim], [nv, dk*dv] */
    pl_buf **conv_snap, **ssm_snap; /* [n_snap*(K-1), conv_dim], [n_snap*nv, dk*dv] */
    int64_t *pos;                   /* positions each recurrent state has consumed; -1 unknown */
    int64_t *snap_lo, *snap_hi;     /* the kept states: after n_past in [snap_lo, snap_hi] */
    /* zeros on the device, as many floats as the larger recurrent state: a new sequence's
     * states are copied from it (recorded with the step; a host write of ~3 MB per layer
     * cost a 27B prompt ~70 ms on the H200: 48 uploads, each flushing the recorded ops) */
    pl_buf *zeros;
    /* the draft block (opts.draft), else NULL */
    pl_buf *d_kc, *d_vc;     /* [n_ctx, n_head_kv*head_dim] its KV cache */
    pl_buf *d_x, *d_e, *d_h; /* [n_batch, n_embd] its residual, embeddings, hidden inputs */
    pl_buf *d_cat;           /* [n_batch, 2*n_embd] [enorm(e), hnorm(h)] rows */
    pl_buf *d_hn;            /* [n_batch, n_embd] the last pass's final-normed hidden rows */
    pl_buf *d_ids, *d_out;   /* I32 [1] the id being drafted, [n_batch] the drafts */
    pl_buf *d_logits;        /* [1, n_vocab] */
    int64_t d_pos0, d_n;     /* d_hn holds positions [d_pos0, d_pos0 + d_n) */
} q35_state;

static const q35_model *QM(const pl_model *m) {
    return m->fam;
}
static q35_state *QS(pl_state *s) {
    return s->fam;
}

static bool is_full(const q35_config *c, int l) {
    return (l + 1) % c->interval == 0;
}

/* ---- loading ---- */

/* rope.dimension_sections: up to 4 non-negative section sizes (pairs) within the rotated
 * half. Text gives every section the same position, so only their validity matters. */
static pl_status check_sections(pl_loader *ld, const q35_config *c) {
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", ld->m->info.arch);
    const pl_gguf_value *v = pl_gguf_get(ld->g, key);
    if (!v) return PL_OK;
    uint32_t et = v->type == PL_GGUF_ARRAY ? v->arr.elem_type : PL_GGUF_STRING;
    bool ints = et <= PL_GGUF_INT32 || et == PL_GGUF_UINT64 || et == PL_GGUF_INT64;
    if (v->type != PL_GGUF_ARRAY || v->arr.count > 4 || !v->arr.data || !ints)
        return pl_fail(PL_ERR_FORMAT, "%s: expected up to 4 integers", key);
    int64_t sum = 0;
    for (uint64_t i = 0; i < v->arr.count; i++) {
        int64_t x = pl_gguf_arr_int(v, i);
        if (x < 0 || x > MAX_DIM)
            return pl_fail(PL_ERR_FORMAT, "%s: bad section %lld", key, (long long)x);
        sum += x;
    }
    if (sum > c->rope_dim / 2)
        return pl_fail(PL_ERR_FORMAT, "%s: sections of %lld pairs exceed the %d rotated pairs", key,
                       (long long)sum, c->rope_dim / 2);
    return PL_OK;
}

static pl_status read_config(pl_loader *ld, q35_config *c) {
    int n_blocks;
    TRY(pl_load_int_in(ld, "embedding_length", true, 0, 1, MAX_DIM, &c->n_embd));
    TRY(pl_load_int_in(ld, "block_count", true, 0, 1, MAX_LAYERS, &n_blocks));
    TRY(pl_load_int_in(ld, "nextn_predict_layers", false, 0, 0, MAX_LAYERS, &c->n_nextn));
    if (c->n_nextn >= n_blocks)
        return pl_fail(PL_ERR_FORMAT,
                       "%d prediction layers leave none of the %d blocks to the model", c->n_nextn,
                       n_blocks);
    c->n_layer = n_blocks - c->n_nextn;
    TRY(pl_load_int_in(ld, "full_attention_interval", true, 0, 1, MAX_LAYERS, &c->interval));
    if (c->interval > c->n_layer)
        return pl_fail(PL_ERR_FORMAT,
                       "full_attention_interval %d leaves no full-attention layer among %d",
                       c->interval, c->n_layer);
    /* qwen35moe: experts in every layer, no dense FFN */
    TRY(pl_moe_read_config(ld, strcmp(ld->m->info.arch, "qwen35moe") == 0, &c->moe));
    bool dense = c->moe.n_expert == 0;
    TRY(pl_load_int_in(ld, "feed_forward_length", dense, 0, dense, MAX_DIM, &c->n_ff));
    pl_attn_keys a;
    TRY(pl_load_attn_keys(ld, c->n_embd, &a));
    if (a.head_dim_v != a.head_dim) /* the output gate has a value per query value */
        return pl_fail(PL_ERR_FORMAT, "key length %d and value length %d differ", a.head_dim,
                       a.head_dim_v);
    c->n_head = a.n_head, c->n_head_kv = a.n_head_kv, c->head_dim = a.head_dim;
    c->rope_dim = a.rope_dim, c->n_ctx_train = a.n_ctx_train;
    c->rms_eps = a.rms_eps, c->rope_base = a.rope_base;
    TRY(check_sections(ld, c));
    /* the Gated DeltaNet */
    int inner;
    TRY(pl_load_int_in(ld, "ssm.conv_kernel", true, 0, 2, 16, &c->conv_k));
    TRY(pl_load_int_in(ld, "ssm.state_size", true, 0, 1, 1024, &c->dk));
    TRY(pl_load_int_in(ld, "ssm.group_count", true, 0, 1, MAX_DIM, &c->nk));
    TRY(pl_load_int_in(ld, "ssm.time_step_rank", true, 0, 1, MAX_DIM, &c->nv));
    TRY(pl_load_int_in(ld, "ssm.inner_size", true, 0, 1, MAX_DIM, &inner));
    if (c->nv % c->nk)
        return pl_fail(PL_ERR_FORMAT, "%d linear-attention value heads cannot share %d key heads",
                       c->nv, c->nk);
    if (inner % c->nv || inner / c->nv > 1024)
        return pl_fail(PL_ERR_FORMAT,
                       "ssm.inner_size %d is not %d value heads of at most 1024 values", inner,
                       c->nv);
    c->dv = inner / c->nv;
    int64_t conv_dim = 2 * (int64_t)c->nk * c->dk + inner;
    if (conv_dim > MAX_DIM)
        return pl_fail(PL_ERR_FORMAT, "a linear-attention input of %lld values is too wide",
                       (long long)conv_dim);
    c->conv_dim = (int)conv_dim;
    return PL_OK;
}

/* The rows of attn_q come per head as [query (head_dim rows), gate (head_dim rows)]: split
 * once here into two matrices, so each is one plain matmul (the copy is the size of
 * attn_q; the file's pages of it are then never read again). */
static pl_status load_attention(pl_loader *ld, const q35_config *c, const char *p, q35_layer *L) {
    char nm[128];
    int64_t d = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kd = (int64_t)c->n_head_kv * c->head_dim;
    snprintf(nm, sizeof nm, "%s.attn_q.weight", p);
    pl_buf *parts[2];
    TRY(pl_load_tensor_split(ld, nm, d, 2 * qd, c->head_dim, 2, parts));
    L->wq = parts[0];
    L->wq_gate = parts[1];
#define T(field, suffix, ne0, ne1)                                                                 \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "%s.%s", p, suffix);                                               \
        TRY(pl_load_tensor(ld, nm, ne0, ne1, true, &L->field));                                    \
    } while (0)
    T(wk, "attn_k.weight", d, kd);
    T(wv, "attn_v.weight", d, kd);
    T(q_norm, "attn_q_norm.weight", c->head_dim, 1);
    T(k_norm, "attn_k_norm.weight", c->head_dim, 1);
    T(wo, "attn_output.weight", qd, d);
    return PL_OK;
}

static pl_status load_delta_net(pl_loader *ld, const q35_config *c, const char *p, q35_layer *L) {
    char nm[128];
    int64_t d = c->n_embd, inner = (int64_t)c->nv * c->dv;
    T(w_qkv, "attn_qkv.weight", d, c->conv_dim);
    T(w_z, "attn_gate.weight", d, inner);
    T(w_beta, "ssm_beta.weight", d, c->nv);
    T(w_alpha, "ssm_alpha.weight", d, c->nv);
    T(conv1d, "ssm_conv1d.weight", c->conv_k, c->conv_dim);
    T(ssm_a, "ssm_a", c->nv, 1);
    T(dt_bias, "ssm_dt.bias", c->nv, 1);
    T(ssm_norm, "ssm_norm.weight", c->dv, 1);
    T(ssm_out, "ssm_out.weight", inner, d);
    if (L->conv1d->type != PL_TYPE_F32)
        return pl_fail(PL_ERR_FORMAT, "%s.ssm_conv1d.weight is not F32", p);
    return PL_OK;
}

/* What every layer has: the two norms and the feed-forward. */
static pl_status load_common(pl_loader *ld, const q35_config *c, int l, const char *p,
                             q35_layer *L) {
    char nm[128];
    int64_t d = c->n_embd;
    T(attn_norm, "attn_norm.weight", d, 1);
    T(post_norm, "post_attention_norm.weight", d, 1);
    if (c->moe.n_expert) return pl_moe_load_layer(ld, &c->moe, c->n_embd, l, &L->moe);
    T(w_gate, "ffn_gate.weight", d, c->n_ff);
    T(w_up, "ffn_up.weight", d, c->n_ff);
    T(w_down, "ffn_down.weight", c->n_ff, d);
#undef T
    return PL_OK;
}

static pl_status load_layer(pl_loader *ld, const q35_config *c, int l, bool full, q35_layer *L) {
    char p[32];
    snprintf(p, sizeof p, "blk.%d", l);
    TRY(load_common(ld, c, l, p, L));
    return full ? load_attention(ld, c, p, L) : load_delta_net(ld, c, p, L);
}

static pl_status load_nextn(pl_loader *ld, const q35_config *c, int l, q35_nextn *N) {
    char nm[128];
    int64_t d = c->n_embd;
#define T(field, suffix, ne0, ne1)                                                                 \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d.nextn.%s", l, suffix);                                     \
        TRY(pl_load_tensor(ld, nm, ne0, ne1, true, &N->field));                                    \
    } while (0)
    T(eh_proj, "eh_proj.weight", 2 * d, d);
    T(enorm, "enorm.weight", d, 1);
    T(hnorm, "hnorm.weight", d, 1);
    T(shared_head_norm, "shared_head_norm.weight", d, 1);
#undef T
    return load_layer(ld, c, l, true, &N->layer);
}

static pl_status q35_load(pl_loader *ld) {
    pl_model *m = ld->m;
    q35_model *qm = calloc(1, sizeof *qm);
    if (!qm) return pl_fail(PL_ERR_NOMEM, "out of memory loading the model");
    m->fam = qm;
    q35_config *c = &qm->cfg;
    TRY(read_config(ld, c));
    TRY(pl_load_ends(ld, c->n_embd, c->n_layer + c->n_nextn, c->n_layer, &c->n_vocab, &qm->tok_embd,
                     &qm->out_norm, &qm->output));
    bool head = m->info.has_head;
    qm->layers = calloc((size_t)c->n_layer, sizeof *qm->layers);
    qm->nextn = calloc((size_t)c->n_nextn + 1, sizeof *qm->nextn);
    if (!qm->layers || !qm->nextn)
        return pl_fail(PL_ERR_NOMEM, "out of memory for %d layers", c->n_layer);
    for (int l = m->info.layer_first; l < m->info.layer_last; l++)
        TRY(load_layer(ld, c, l, is_full(c, l), &qm->layers[l]));
    for (int i = 0; head && i < c->n_nextn; i++)
        TRY(load_nextn(ld, c, c->n_layer + i, &qm->nextn[i]));
    m->info.has_draft = head && c->n_nextn > 0;
    m->info.n_vocab = c->n_vocab;
    m->info.n_embd = c->n_embd;
    m->info.n_layer = c->n_layer;
    m->info.n_ctx_train = c->n_ctx_train;
    m->info.n_expert = c->moe.n_expert;
    m->info.n_expert_used = c->moe.n_used;
    return PL_OK;
}

static void q35_model_free(pl_model *m) {
    q35_model *qm = m->fam;
    if (qm) {
        free(qm->layers);
        free(qm->nextn);
    }
    free(qm);
}

/* ---- state ---- */

static pl_status check_state_size(const pl_state *s) {
    const q35_config *c = &QM(s->m)->cfg;
    double elem = pl_row_size(s->o.kv_type, 32) / 32.0, n_full = 0, n_rec = 0;
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++) {
        n_full += is_full(c, l);
        n_rec += !is_full(c, l);
    }
    double qd = (double)c->n_head * c->head_dim, kd = (double)c->n_head_kv * c->head_dim;
    double inner = (double)c->nv * c->dv, state = (double)c->nv * c->dk * c->dv * 4;
    double conv = (double)(c->conv_k - 1) * c->conv_dim * 4;
    double widest = c->n_embd;
    bool moe = c->moe.n_expert > 0;
    double ffn = moe ? pl_moe_floats_per_token(&c->moe, c->n_embd) : 2.0 * c->n_ff;
    double widths[] = {qd, c->conv_dim, inner,
                       moe ? pl_moe_largest_per_token(&c->moe, c->n_embd) : c->n_ff};
    for (int i = 0; i < 4; i++)
        if (widths[i] > widest) widest = widths[i];
    double dr = s->o.draft; /* the draft block: a KV cache and 6 rows of n_embd per token */
    pl_state_size z = {.ctx_row = kd * elem,
                       .ctx_tok = 2 * kd * elem * (n_full + dr),
                       .act_tok = 4.0 * (2.0 * c->n_embd + 3 * qd + 2 * kd + 2.0 * c->conv_dim +
                                         2 * inner + 2.0 * c->nv + ffn + dr * 6 * c->n_embd),
                       .act_row = widest * 4,
                       .fixed = (state + conv) * n_rec * (1.0 + s->o.n_snap) +
                                (state > conv ? state : conv), /* the zeros */
                       .fixed_buf = state * (s->o.n_snap > 1 ? s->o.n_snap : 1)};
    return pl_check_state_size(s, &z);
}

static pl_status q35_state_new(pl_state *s) {
    const q35_config *c = &QM(s->m)->cfg;
    pl_backend *be = s->m->be;
    int64_t B = s->o.n_batch, L = c->n_layer, S = s->o.n_snap;
    int64_t qd = (int64_t)c->n_head * c->head_dim, kd = (int64_t)c->n_head_kv * c->head_dim;
    int64_t inner = (int64_t)c->nv * c->dv, km1 = c->conv_k - 1, sd = (int64_t)c->dk * c->dv;
    TRY(check_state_size(s));
    q35_state *qs = calloc(1, sizeof *qs);
    if (!qs) return pl_fail(PL_ERR_NOMEM, "out of memory for the state");
    s->fam = qs;
    struct {
        pl_buf **b;
        int64_t w;
    } scratch[] = {{&qs->xb, c->n_embd},
                   {&qs->q, qd},
                   {&qs->gate, qd},
                   {&qs->att, qd},
                   {&qs->k, kd},
                   {&qs->v, kd},
                   {&qs->qkv, c->conv_dim},
                   {&qs->conv_out, c->conv_dim},
                   {&qs->z, inner},
                   {&qs->o, inner},
                   {&qs->alpha, c->nv},
                   {&qs->beta, c->nv},
                   {&qs->ff_gate, c->n_ff},
                   {&qs->ff_up, c->n_ff},
                   {&qs->d_x, s->o.draft ? c->n_embd : 0},
                   {&qs->d_e, s->o.draft ? c->n_embd : 0},
                   {&qs->d_h, s->o.draft ? c->n_embd : 0},
                   {&qs->d_hn, s->o.draft ? c->n_embd : 0},
                   {&qs->d_cat, s->o.draft ? 2 * c->n_embd : 0}};
    for (size_t i = 0; i < sizeof scratch / sizeof *scratch; i++)
        if (scratch[i].w > 0) /* no dense FFN in qwen35moe, no draft block unless asked */
            TRY(pl_be_buf_new(be, PL_TYPE_F32, scratch[i].w, B, scratch[i].b));
    if (s->o.draft) {
        TRY(pl_be_buf_new(be, s->o.kv_type, kd, s->o.n_ctx, &qs->d_kc));
        TRY(pl_be_buf_new(be, s->o.kv_type, kd, s->o.n_ctx, &qs->d_vc));
        TRY(pl_be_buf_new(be, PL_TYPE_I32, 1, 1, &qs->d_ids));
        TRY(pl_be_buf_new(be, PL_TYPE_I32, B, 1, &qs->d_out));
        TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_vocab, 1, &qs->d_logits));
    }
    if (c->moe.n_expert) TRY(pl_moe_state_new(be, &c->moe, c->n_embd, (int)B, &qs->moe));
    pl_buf ***per[] = {&qs->kc, &qs->vc, &qs->conv, &qs->ssm, &qs->conv_snap, &qs->ssm_snap};
    for (size_t i = 0; i < sizeof per / sizeof *per; i++)
        if (!(*per[i] = calloc((size_t)L, sizeof(pl_buf *))))
            return pl_fail(PL_ERR_NOMEM, "out of memory for the state");
    qs->pos = calloc((size_t)L * 3, sizeof(int64_t));
    if (!qs->pos) return pl_fail(PL_ERR_NOMEM, "out of memory for the state");
    int64_t zn = sd * c->nv > km1 * c->conv_dim ? sd * c->nv : km1 * c->conv_dim;
    void *z = calloc((size_t)zn, 4);
    if (!z) return pl_fail(PL_ERR_NOMEM, "out of memory for the state");
    pl_status zst = pl_be_buf_new(be, PL_TYPE_F32, zn, 1, &qs->zeros);
    if (!zst) zst = pl_be_write(qs->zeros, 0, z, zn * 4);
    free(z);
    TRY(zst);
    qs->snap_lo = qs->pos + L;
    qs->snap_hi = qs->pos + 2 * L;
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++) {
        qs->snap_lo[l] = 1; /* none kept: an empty range */
        if (is_full(c, l)) {
            TRY(pl_be_buf_new(be, s->o.kv_type, kd, s->o.n_ctx, &qs->kc[l]));
            TRY(pl_be_buf_new(be, s->o.kv_type, kd, s->o.n_ctx, &qs->vc[l]));
            continue;
        }
        TRY(pl_be_buf_new(be, PL_TYPE_F32, c->conv_dim, km1, &qs->conv[l]));
        TRY(pl_be_buf_new(be, PL_TYPE_F32, sd, c->nv, &qs->ssm[l]));
        if (S > 0) {
            TRY(pl_be_buf_new(be, PL_TYPE_F32, c->conv_dim, S * km1, &qs->conv_snap[l]));
            TRY(pl_be_buf_new(be, PL_TYPE_F32, sd, S * c->nv, &qs->ssm_snap[l]));
        }
    }
    return PL_OK;
}

#define Q35_N_SCRATCH 25
static void scratch_bufs(const q35_state *qs, pl_buf *b[Q35_N_SCRATCH]) {
    pl_buf *all[Q35_N_SCRATCH] = {qs->xb,    qs->q,     qs->gate,     qs->att,      qs->k,
                                  qs->v,     qs->qkv,   qs->conv_out, qs->z,        qs->o,
                                  qs->alpha, qs->beta,  qs->ff_gate,  qs->ff_up,    qs->d_kc,
                                  qs->d_vc,  qs->d_x,   qs->d_e,      qs->d_h,      qs->d_cat,
                                  qs->d_hn,  qs->d_ids, qs->d_out,    qs->d_logits, qs->zeros};
    memcpy(b, all, sizeof all);
}

/* The per-layer buffers of layer l (NULL ones included). */
#define Q35_N_PER_LAYER 6
static void layer_bufs(const q35_state *qs, int l, pl_buf *b[Q35_N_PER_LAYER]) {
    pl_buf *all[Q35_N_PER_LAYER] = {qs->kc[l],  qs->vc[l],        qs->conv[l],
                                    qs->ssm[l], qs->conv_snap[l], qs->ssm_snap[l]};
    memcpy(b, all, sizeof all);
}

static void q35_state_free(pl_state *s) {
    q35_state *qs = s->fam;
    if (!qs) return;
    pl_buf *b[Q35_N_SCRATCH], *lb[Q35_N_PER_LAYER];
    scratch_bufs(qs, b);
    for (int i = 0; i < Q35_N_SCRATCH; i++) pl_be_buf_free(b[i]);
    pl_moe_state_free(&qs->moe);
    bool have_all = qs->kc && qs->vc && qs->conv && qs->ssm && qs->conv_snap && qs->ssm_snap;
    for (int l = 0; have_all && l < s->m->info.n_layer; l++) {
        layer_bufs(qs, l, lb);
        for (int i = 0; i < Q35_N_PER_LAYER; i++) pl_be_buf_free(lb[i]);
    }
    free(qs->kc), free(qs->vc), free(qs->conv), free(qs->ssm);
    free(qs->conv_snap), free(qs->ssm_snap);
    free(qs->pos);
    free(qs);
}

static int64_t q35_state_bytes(const pl_state *s) {
    const q35_state *qs = s->fam;
    pl_buf *b[Q35_N_SCRATCH], *lb[Q35_N_PER_LAYER];
    int64_t n = pl_moe_state_bytes(&qs->moe);
    scratch_bufs(qs, b);
    for (int i = 0; i < Q35_N_SCRATCH; i++) n += b[i] ? pl_be_buf_bytes(b[i]) : 0;
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++) {
        layer_bufs(qs, l, lb);
        for (int i = 0; i < Q35_N_PER_LAYER; i++) n += lb[i] ? pl_be_buf_bytes(lb[i]) : 0;
    }
    return n;
}

/* ---- recurrent positions and rewinding ---- */

static bool layer_can_rewind(const q35_state *qs, int l, int64_t n_past) {
    return n_past == 0 || qs->pos[l] == n_past ||
           (n_past >= qs->snap_lo[l] && n_past <= qs->snap_hi[l]);
}

static bool q35_can_rewind(const pl_state *s, int64_t n_past) {
    const q35_config *c = &QM(s->m)->cfg;
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++)
        if (!is_full(c, l) && !layer_can_rewind(s->fam, l, n_past)) return false;
    return true;
}

/* Zero layer l's recurrent state: a sequence's start. */
static pl_status restart(pl_state *s, int l) {
    q35_state *qs = QS(s);
    qs->pos[l] = 0;
    qs->snap_lo[l] = 1, qs->snap_hi[l] = 0;
    TRY(pl_be_copy(qs->zeros, 0, pl_be_buf_bytes(qs->conv[l]) / 4, qs->conv[l], 0));
    return pl_be_copy(qs->zeros, 0, pl_be_buf_bytes(qs->ssm[l]) / 4, qs->ssm[l], 0);
}

static pl_status q35_rewind(pl_state *s, int64_t n_past) {
    const q35_config *c = &QM(s->m)->cfg;
    q35_state *qs = QS(s);
    int first = s->m->info.layer_first, last = s->m->info.layer_last;
    for (int l = first; l < last; l++)
        if (!is_full(c, l) && !layer_can_rewind(qs, l, n_past))
            return pl_fail(PL_ERR_ARG,
                           "cannot rewind to position %lld: layer %d's recurrent state is at %lld "
                           "and keeps no state for it (0, %lld or a kept snapshot)",
                           (long long)n_past, l, (long long)qs->pos[l], (long long)qs->pos[l]);
    int64_t km1 = c->conv_k - 1, sd = (int64_t)c->nv * c->dk * c->dv;
    for (int l = first; l < last; l++) {
        if (is_full(c, l) || qs->pos[l] == n_past) continue;
        if (n_past == 0) {
            TRY(restart(s, l));
            continue;
        }
        int64_t t = n_past - (qs->snap_lo[l] - 1); /* the snapshot after column t-1 */
        TRY(pl_be_copy(qs->conv_snap[l], (t - 1) * km1 * c->conv_dim, km1 * c->conv_dim,
                       qs->conv[l], 0));
        TRY(pl_be_copy(qs->ssm_snap[l], (t - 1) * sd, sd, qs->ssm[l], 0));
        qs->pos[l] = n_past;
        qs->snap_hi[l] = n_past; /* later ones no longer follow from this state */
    }
    return PL_OK;
}

/* Before running layers [first, last) at pos0: every recurrent state must be at pos0, or
 * pos0 is 0 and the states start afresh. */
static pl_status check_positions(pl_state *s, int64_t pos0, int first, int last) {
    const q35_config *c = &QM(s->m)->cfg;
    q35_state *qs = QS(s);
    for (int l = first; l < last; l++) {
        if (is_full(c, l)) continue;
        if (pos0 == 0) {
            TRY(restart(s, l));
        } else if (qs->pos[l] != pos0) {
            if (qs->pos[l] < 0)
                return pl_fail(PL_ERR_ARG,
                               "layer %d's recurrent state was left unfinished by a failed call: "
                               "start again from position 0",
                               l);
            return pl_fail(PL_ERR_ARG,
                           "layer %d's recurrent state is at position %lld, not %lld (rewind it "
                           "first)",
                           l, (long long)qs->pos[l], (long long)pos0);
        }
    }
    return PL_OK;
}

/* ---- the forward pass ---- */

static pl_status q35_embed(const pl_model *m, pl_state *s, int64_t n) {
    return pl_be_embed(QM(m)->tok_embd, s->ids, n, s->x);
}

/* The fused kernels each block asks for (pl_be_fuse), in the order its ops are issued: the
 * input norm folded into the projections, and three of them swept as one; for attention
 * also the per-head q/k norms in the RoPE, the RoPE of q and k together, the cache stores. */
#define FUSE_ATTENTION                                                                             \
    (PL_FUSE_NORM_MATMUL | PL_FUSE_QKV | PL_FUSE_NORM_ROPE | PL_FUSE_ROPE_STORE | PL_FUSE_ROPE_PAIR)
#define FUSE_DELTA_NET (PL_FUSE_NORM_MATMUL | PL_FUSE_QKV)

/* Partial RoPE: the first rope_dim values of each head. */
static pl_rope_params rope_params(const q35_config *c) {
    return (pl_rope_params){.mode = PL_ROPE_NEOX,
                            .head_dim = c->head_dim,
                            .rope_dim = c->rope_dim,
                            .theta_base = c->rope_base,
                            .freq_scale = 1.0f};
}

/* The attention's projections of the normed rows xb: q and k (normed per head), v and the
 * output gate. */
static pl_status attention_in(const pl_model *m, q35_state *qs, const q35_layer *L, int64_t n) {
    const q35_config *c = &QM(m)->cfg;
    TRY(pl_be_matmul(L->wq, qs->xb, NULL, n, false, qs->q));
    TRY(pl_be_matmul(L->wk, qs->xb, NULL, n, false, qs->k));
    TRY(pl_be_matmul(L->wv, qs->xb, NULL, n, false, qs->v));
    TRY(pl_be_matmul(L->wq_gate, qs->xb, NULL, n, false, qs->gate));
    /* RMSNorm over each head's values */
    TRY(pl_be_rms_norm(qs->q, L->q_norm, n * c->n_head, c->head_dim, c->rms_eps, qs->q));
    return pl_be_rms_norm(qs->k, L->k_norm, n * c->n_head_kv, c->head_dim, c->rms_eps, qs->k);
}

/* RoPE, the cache kc, vc and causal attention of the rows q, k, v at positions pos0.. into
 * att: the part of an attention layer that is one sequence's. */
static pl_status attend(const pl_model *m, q35_state *qs, pl_buf *kc, pl_buf *vc, int64_t n,
                        int64_t pos0) {
    const q35_config *c = &QM(m)->cfg;
    pl_rope_params rp = rope_params(c);
    pl_attn_params ap = {.n_head = c->n_head,
                         .n_head_kv = c->n_head_kv,
                         .head_dim = c->head_dim,
                         .head_dim_v = c->head_dim,
                         .scale = (float)(1.0 / sqrt((double)c->head_dim))};
    return pl_rope_attend(qs->q, qs->k, qs->v, kc, vc, n, pos0, &rp, &ap, qs->att);
}

/* att times sigmoid(gate), through the output projection, added to x. */
static pl_status attention_out(const pl_model *m, q35_state *qs, const q35_layer *L, int64_t n,
                               pl_buf *x) {
    const q35_config *c = &QM(m)->cfg;
    int64_t qd = (int64_t)c->n_head * c->head_dim;
    TRY(pl_be_sigmoid_mul(qs->att, qs->gate, n, qd, qd, false, qs->att)); /* the output gate */
    return pl_be_matmul(L->wo, qs->att, NULL, n, true, x);                /* residual add fused */
}

/* Full attention with a sigmoid output gate, over the normed input xb. */
static pl_status gated_attention(const pl_model *m, pl_state *s, const q35_layer *L, pl_buf *kc,
                                 pl_buf *vc, int64_t n, int64_t pos0, pl_buf *x) {
    q35_state *qs = QS(s);
    TRY(attention_in(m, qs, L, n));
    TRY(attend(m, qs, kc, vc, n, pos0));
    return attention_out(m, qs, L, n, x);
}

/* The Gated DeltaNet's projections of the normed rows xb: q, k, v of every head (qkv), the
 * output gate z, beta and alpha. */
static pl_status delta_net_in(q35_state *qs, const q35_layer *L, int64_t n) {
    TRY(pl_be_matmul(L->w_qkv, qs->xb, NULL, n, false, qs->qkv));
    TRY(pl_be_matmul(L->w_z, qs->xb, NULL, n, false, qs->z));
    TRY(pl_be_matmul(L->w_beta, qs->xb, NULL, n, false, qs->beta));
    return pl_be_matmul(L->w_alpha, qs->xb, NULL, n, false, qs->alpha);
}

/* The causal conv1d + SiLU and the gated delta rule of the rows qkv, alpha, beta into o, on
 * layer l's recurrent states (snap: keeping the state after each row): the part of a
 * DeltaNet layer that is one sequence's. */
static pl_status delta_net_scan(const pl_model *m, q35_state *qs, const q35_layer *L, int l,
                                int64_t n, bool snap) {
    const q35_config *c = &QM(m)->cfg;
    TRY(pl_be_ssm_conv(qs->qkv, L->conv1d, qs->conv[l], n, snap ? qs->conv_snap[l] : NULL,
                       qs->conv_out));
    pl_delta_params dp = {
        .n_k_heads = c->nk, .n_v_heads = c->nv, .d_k = c->dk, .d_v = c->dv, .eps = 1e-6f};
    return pl_be_delta_rule(qs->conv_out, qs->alpha, qs->beta, L->ssm_a, L->dt_bias, qs->ssm[l], n,
                            &dp, snap ? qs->ssm_snap[l] : NULL, qs->o);
}

/* The gated RMSNorm of o (per value head, times silu(z)) through the output projection,
 * added to x. */
static pl_status delta_net_out(const pl_model *m, q35_state *qs, const q35_layer *L, int64_t n,
                               pl_buf *x) {
    const q35_config *c = &QM(m)->cfg;
    TRY(pl_be_fuse(m->be, PL_FUSE_NORM_GATE)); /* one kernel where the backend can */
    TRY(pl_be_rms_norm(qs->o, L->ssm_norm, n * c->nv, c->dv, c->rms_eps, qs->o));
    TRY(pl_be_swiglu(qs->z, qs->o, n * c->nv * c->dv, qs->z));
    TRY(pl_be_fuse(m->be, 0));
    return pl_be_matmul(L->ssm_out, qs->z, NULL, n, true, x); /* residual add fused */
}

/* The Gated DeltaNet over the normed input xb; snap keeps the state after each token. */
static pl_status delta_net(const pl_model *m, pl_state *s, const q35_layer *L, int l, int64_t n,
                           bool snap) {
    q35_state *qs = QS(s);
    TRY(delta_net_in(qs, L, n));
    TRY(pl_be_fuse(m->be, 0));
    TRY(delta_net_scan(m, qs, L, l, n, snap));
    return delta_net_out(m, qs, L, n, s->x);
}

static pl_status ffn(const pl_model *m, pl_state *s, const q35_layer *L, int64_t n, pl_buf *x) {
    const q35_config *c = &QM(m)->cfg;
    q35_state *qs = QS(s);
    /* the norm folds into the first GEMV (MoE: the router's, whose group ends there) */
    TRY(pl_be_fuse(m->be, PL_FUSE_NORM_MATMUL | (c->moe.n_expert ? 0 : PL_FUSE_GATE_UP)));
    TRY(pl_be_rms_norm(x, L->post_norm, n, c->n_embd, c->rms_eps, qs->xb));
    if (c->moe.n_expert) /* routed experts + the gated shared expert, added to x */
        return pl_moe_ffn(&c->moe, &L->moe, &qs->moe, qs->xb, n, x);
    return pl_swiglu_ffn(L->w_gate, L->w_up, L->w_down, qs->xb, n, c->n_ff, qs->ff_gate, qs->ff_up,
                         x);
}

/* A full-attention layer over the residual rows x (the main model's, or the draft
 * block's) with the KV cache kc, vc. */
static pl_status attention_layer(const pl_model *m, pl_state *s, const q35_layer *L, pl_buf *kc,
                                 pl_buf *vc, int64_t n, int64_t pos0, pl_buf *x) {
    const q35_config *c = &QM(m)->cfg;
    TRY(pl_be_fuse(m->be, FUSE_ATTENTION));
    TRY(pl_be_rms_norm(x, L->attn_norm, n, c->n_embd, c->rms_eps, QS(s)->xb));
    TRY(gated_attention(m, s, L, kc, vc, n, pos0, x));
    return ffn(m, s, L, n, x);
}

/* Whether a call of n rows keeps the recurrent states after each (else none is kept). */
static bool keeps_snaps(const pl_state *s, int64_t n) {
    return s->o.n_snap > 0 && n <= s->o.n_snap;
}

/* Layer l's recurrent state starts to move: unknown until the layer is done, and its
 * snapshots are being replaced. */
static void recurrent_begin(q35_state *qs, int l) {
    qs->pos[l] = -1;
    qs->snap_lo[l] = 1, qs->snap_hi[l] = 0;
}

/* Layer l is done: its state has consumed n rows at pos0 (snap: and kept each one's). */
static void recurrent_done(q35_state *qs, int l, int64_t pos0, int64_t n, bool snap) {
    qs->pos[l] = pos0 + n;
    qs->snap_lo[l] = snap ? pos0 + 1 : 1;
    qs->snap_hi[l] = snap ? pos0 + n : 0;
}

static pl_status q35_layers(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                            int last) {
    const q35_config *c = &QM(m)->cfg;
    q35_state *qs = QS(s);
    TRY(check_positions(s, pos0, first, last));
    qs->d_n = 0; /* the kept hidden rows no longer follow (pl_model_forward makes new ones) */
    bool snap = keeps_snaps(s, n);
    for (int l = first; l < last; l++) {
        const q35_layer *L = &QM(m)->layers[l];
        if (is_full(c, l)) {
            TRY(attention_layer(m, s, L, qs->kc[l], qs->vc[l], n, pos0, s->x));
            continue;
        }
        recurrent_begin(qs, l);
        TRY(pl_be_fuse(m->be, FUSE_DELTA_NET));
        TRY(pl_be_rms_norm(s->x, L->attn_norm, n, c->n_embd, c->rms_eps, qs->xb));
        TRY(delta_net(m, s, L, l, n, snap));
        TRY(ffn(m, s, L, n, s->x));
        recurrent_done(qs, l, pos0, n, snap);
    }
    return PL_OK;
}

/* ---- the batched decode step ----
 *
 * Row i of the batch state b is one step of sequence seqs[i] at position pos[i]. The
 * norms, projections, gates and the feed-forward take the n rows at once in b's scratch
 * (the weights read once); what a sequence keeps - the attention's RoPE, KV cache and
 * attention, the DeltaNet's conv and delta rule - runs on row 0 of that sequence's own
 * scratch over its own caches and recurrent states: the ops of its own single step, so its
 * state, snapshots included, ends as that step leaves it. The projections' norm and the
 * sweep of several weights are fused as in the single step, and each row's RoPE with its
 * cache stores; the rest of the per-sequence ops are not (their copies sit between them). */

/* Row i of the batch's q, k, v through sequence s's own RoPE, cache and attention at pos,
 * into row i of the batch's att. */
static pl_status attend_column(const pl_model *m, q35_state *qb, pl_state *s, int i, int l,
                               int64_t pos) {
    const q35_config *c = &QM(m)->cfg;
    q35_state *qs = QS(s);
    int64_t qd = (int64_t)c->n_head * c->head_dim, kd = (int64_t)c->n_head_kv * c->head_dim;
    TRY(pl_be_copy(qb->q, i * qd, qd, qs->q, 0));
    TRY(pl_be_copy(qb->k, i * kd, kd, qs->k, 0));
    TRY(pl_be_copy(qb->v, i * kd, kd, qs->v, 0));
    /* the RoPE of q and k with the cache stores, as the single step (not the per-head
     * norms: they ran on all rows before the copies); the group ends with the stores */
    TRY(pl_be_fuse(m->be, PL_FUSE_ROPE_STORE | PL_FUSE_ROPE_PAIR));
    TRY(attend(m, qs, qs->kc[l], qs->vc[l], 1, pos));
    return pl_be_copy(qs->att, 0, qd, qb->att, i * qd);
}

/* Row i of the batch's qkv, alpha, beta through one step of sequence s's own conv and
 * delta-rule states of layer l, into row i of the batch's o. */
static pl_status delta_net_column(const pl_model *m, q35_state *qb, pl_state *s, int i, int l) {
    const q35_config *c = &QM(m)->cfg;
    q35_state *qs = QS(s);
    int64_t cd = c->conv_dim, nv = c->nv, inner = (int64_t)c->nv * c->dv;
    TRY(pl_be_copy(qb->qkv, i * cd, cd, qs->qkv, 0));
    TRY(pl_be_copy(qb->alpha, i * nv, nv, qs->alpha, 0));
    TRY(pl_be_copy(qb->beta, i * nv, nv, qs->beta, 0));
    TRY(delta_net_scan(m, qs, &QM(m)->layers[l], l, 1, keeps_snaps(s, 1)));
    return pl_be_copy(qs->o, 0, inner, qb->o, i * inner);
}

/* Layer l of the batch: the mixer's projections over all rows, each row's own part on its
 * own sequence, the mixer's output and the feed-forward over all rows again. */
static pl_status layer_batch(const pl_model *m, pl_state *b, pl_state *const *seqs, int n,
                             const int64_t *pos, int l) {
    const q35_config *c = &QM(m)->cfg;
    const q35_layer *L = &QM(m)->layers[l];
    q35_state *qb = QS(b);
    bool full = is_full(c, l);
    for (int i = 0; !full && i < n; i++) recurrent_begin(QS(seqs[i]), l);
    TRY(pl_be_fuse(m->be, PL_FUSE_NORM_MATMUL | PL_FUSE_QKV));
    TRY(pl_be_rms_norm(b->x, L->attn_norm, n, c->n_embd, c->rms_eps, qb->xb));
    TRY(full ? attention_in(m, qb, L, n) : delta_net_in(qb, L, n));
    TRY(pl_be_fuse(m->be, 0));
    for (int i = 0; i < n; i++)
        TRY(full ? attend_column(m, qb, seqs[i], i, l, pos[i])
                 : delta_net_column(m, qb, seqs[i], i, l));
    TRY(full ? attention_out(m, qb, L, n, b->x) : delta_net_out(m, qb, L, n, b->x));
    TRY(ffn(m, b, L, n, b->x));
    for (int i = 0; !full && i < n; i++)
        recurrent_done(QS(seqs[i]), l, pos[i], 1, keeps_snaps(seqs[i], 1));
    return PL_OK;
}

static pl_status q35_layers_batch(const pl_model *m, pl_state *b, pl_state *const *seqs, int n,
                                  const int64_t *pos) {
    const q35_config *c = &QM(m)->cfg;
    /* every state where its row asks before any moves (a refused step leaves them all);
     * then those at 0 start afresh */
    for (int i = 0; i < n; i++)
        if (pos[i] > 0) TRY(check_positions(seqs[i], pos[i], 0, c->n_layer));
    for (int i = 0; i < n; i++)
        if (pos[i] == 0) TRY(check_positions(seqs[i], 0, 0, c->n_layer));
    for (int l = 0; l < c->n_layer; l++) TRY(layer_batch(m, b, seqs, n, pos, l));
    return PL_OK;
}

static pl_status q35_head(const pl_model *m, pl_state *s, int64_t n, bool all_rows) {
    const q35_model *qm = QM(m);
    return pl_run_head(s, qm->out_norm, qm->output, qm->cfg.rms_eps, QS(s)->xb, n, all_rows);
}

/* ---- the draft block ---- */

/* Only what a full-attention layer leaves in its cache for the rows x at positions pos0..:
 * the normed keys (RoPE'd) and the values. */
static pl_status cache_entries(const pl_model *m, pl_state *s, const q35_layer *L, pl_buf *kc,
                               pl_buf *vc, int64_t n, int64_t pos0, const pl_buf *x) {
    const q35_config *c = &QM(m)->cfg;
    q35_state *qs = QS(s);
    TRY(pl_be_rms_norm(x, L->attn_norm, n, c->n_embd, c->rms_eps, qs->xb));
    TRY(pl_be_matmul(L->wk, qs->xb, NULL, n, false, qs->k));
    TRY(pl_be_matmul(L->wv, qs->xb, NULL, n, false, qs->v));
    TRY(pl_be_rms_norm(qs->k, L->k_norm, n * c->n_head_kv, c->head_dim, c->rms_eps, qs->k));
    pl_rope_params rp = rope_params(c);
    rp.n_heads = c->n_head_kv;
    TRY(pl_be_rope(qs->k, n, pos0, &rp));
    TRY(pl_be_kv_store(qs->k, n, pos0, kc));
    return pl_be_kv_store(qs->v, n, pos0, vc);
}

/* x = eh_proj([enorm(e), hnorm(h)]) of rows r0..n-1 of the embeddings d_e and hidden inputs
 * d_h, into d_x rows 0..n-r0-1, then at positions pos0..: the block's whole layer (full),
 * or only its cache entries (a pass's rows, whose outputs nothing reads). */
static pl_status draft_block(const pl_model *m, pl_state *s, int64_t r0, int64_t n, int64_t pos0,
                             bool full) {
    const q35_model *qm = QM(m);
    const q35_nextn *N = &qm->nextn[0];
    q35_state *qs = QS(s);
    int64_t d = qm->cfg.n_embd;
    float eps = qm->cfg.rms_eps;
    TRY(pl_be_rms_norm(qs->d_e, N->enorm, n, d, eps, qs->d_e));
    TRY(pl_be_rms_norm(qs->d_h, N->hnorm, n, d, eps, qs->d_h));
    for (int64_t r = r0; r < n; r++) { /* the embedding first, then the hidden state */
        TRY(pl_be_copy(qs->d_e, r * d, d, qs->d_cat, (r - r0) * 2 * d));
        TRY(pl_be_copy(qs->d_h, r * d, d, qs->d_cat, (r - r0) * 2 * d + d));
    }
    TRY(pl_be_matmul(N->eh_proj, qs->d_cat, NULL, n - r0, false, qs->d_x));
    if (!full) return cache_entries(m, s, &N->layer, qs->d_kc, qs->d_vc, n - r0, pos0, qs->d_x);
    return attention_layer(m, s, &N->layer, qs->d_kc, qs->d_vc, n - r0, pos0, qs->d_x);
}

/* After a forward pass of n rows at pos0 (x: their final hidden states, ids: their ids):
 * the block's cache entries of positions pos0-1 .. pos0+n-2, the entry at p from the normed
 * hidden row of p and the embedding of the id at p+1. */
static pl_status q35_draft_absorb(const pl_model *m, pl_state *s, int64_t n, int64_t pos0) {
    const q35_model *qm = QM(m);
    q35_state *qs = QS(s);
    int64_t d = qm->cfg.n_embd, prev = pos0 - 1;
    /* the hidden row of pos0-1, from the previous pass if it ran it */
    bool have = prev >= 0 && prev >= qs->d_pos0 && prev < qs->d_pos0 + qs->d_n;
    if (have) TRY(pl_be_copy(qs->d_hn, (prev - qs->d_pos0) * d, d, qs->d_h, 0));
    qs->d_n = 0;
    TRY(pl_be_rms_norm(s->x, qm->out_norm, n, d, qm->cfg.rms_eps, qs->d_hn));
    if (n > 1) TRY(pl_be_copy(qs->d_hn, 0, (n - 1) * d, qs->d_h, d));
    TRY(pl_be_embed(qm->tok_embd, s->ids, n, qs->d_e));
    int64_t r0 = have ? 0 : 1;
    if (r0 < n) TRY(draft_block(m, s, r0, n, prev + r0, false));
    qs->d_pos0 = pos0;
    qs->d_n = n;
    return PL_OK;
}

static pl_status q35_draft(const pl_model *m, pl_state *s, int64_t pos, int32_t next, int k,
                           int32_t *out, int *n_out) {
    const q35_model *qm = QM(m);
    const q35_nextn *N = &qm->nextn[0];
    q35_state *qs = QS(s);
    int64_t d = qm->cfg.n_embd;
    if (pos < qs->d_pos0 || pos >= qs->d_pos0 + qs->d_n) return PL_OK; /* not run last */
    TRY(pl_be_copy(qs->d_hn, (pos - qs->d_pos0) * d, d, qs->d_h, 0));
    TRY(pl_be_write(qs->d_ids, 0, &next, sizeof next));
    for (int j = 0; j < k; j++) { /* the ids stay on the device from step to step */
        TRY(pl_be_embed(qm->tok_embd, qs->d_ids, 1, qs->d_e));
        TRY(draft_block(m, s, 0, 1, pos + j, true));
        TRY(pl_be_rms_norm(qs->d_x, N->shared_head_norm, 1, d, qm->cfg.rms_eps, qs->d_h));
        TRY(pl_be_matmul(qm->output, qs->d_h, NULL, 1, false, qs->d_logits));
        TRY(pl_be_argmax(qs->d_logits, 1, qs->d_ids, 0));
        TRY(pl_be_copy(qs->d_ids, 0, 1, qs->d_out, j));
    }
    TRY(pl_be_read(qs->d_out, 0, out, (int64_t)k * (int64_t)sizeof *out));
    int got = 0;
    while (got < k && out[got] >= 0 && out[got] < qm->cfg.n_vocab) got++;
    *n_out = got;
    return PL_OK;
}

static pl_buf *q35_draft_logits(pl_state *s) {
    return QS(s)->d_logits;
}

static const char *const q35_archs[] = {"qwen35", "qwen35moe", NULL};

const pl_family pl_family_qwen35 = {
    .archs = q35_archs,
    .load = q35_load,
    .model_free = q35_model_free,
    .state_new = q35_state_new,
    .state_free = q35_state_free,
    .state_bytes = q35_state_bytes,
    .embed = q35_embed,
    .layers = q35_layers,
    .layers_batch = q35_layers_batch,
    .head = q35_head,
    .can_rewind = q35_can_rewind,
    .rewind = q35_rewind,
    .draft_absorb = q35_draft_absorb,
    .draft = q35_draft,
    .draft_logits = q35_draft_logits,
};
