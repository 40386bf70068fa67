/* llama.c - the llama family of decoder-only transformers: llama (Llama 2/3, SmolLM2,
 * TinyStories), qwen2 (biases on q/k/v), qwen3 (RMSNorm on each q/k head) and qwen3moe
 * (qwen3 with a mixture-of-experts feed-forward, moe.c).
 *
 * Per layer: RMSNorm -> q,k,v projections -> (qwen3: per-head norm) -> RoPE -> KV cache ->
 * causal grouped-query attention -> output projection added to the residual -> RMSNorm ->
 * SwiGLU feed-forward (or the MoE block) added to the residual. Then the final RMSNorm and
 * the output matrix (tied to the token embedding when the file has no output.weight). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* This family's parts of the model and the state. */
static const llama_model *LM(const pl_model *m) {
    return m->fam;
}
static llama_state *LS(pl_state *s) {
    return s->fam;
}

/* RoPE frequency scaling from rope.scaling.type / factor (or the older rope.scale_linear). */
static pl_status read_rope_scaling(pl_loader *ld, llama_config *c) {
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->m->info.arch);
    char *type = pl_gguf_get_string(ld->g, key);
    double factor = 1.0;
    pl_status s = PL_OK;
    if (type && strcmp(type, "none") != 0) {
        pl_load_printable(type);
        if (strcmp(type, "linear") != 0)
            s = pl_fail(PL_ERR_FORMAT, "RoPE scaling '%.32s' is not supported (none or linear)",
                        type);
        else
            s = pl_load_float(ld, "rope.scaling.factor", false, 1.0, &factor);
    } else if (!type) {
        s = pl_load_float(ld, "rope.scale_linear", false, 1.0, &factor);
    }
    free(type);
    if (s) return s;
    if (!(factor > 0 && factor < 1e6))
        return pl_fail(PL_ERR_FORMAT, "bad RoPE scaling factor %g", factor);
    c->rope_freq_scale = (float)(1.0 / factor);
    return PL_OK;
}

static pl_status read_config(pl_loader *ld, llama_config *c) {
    const char *arch = ld->m->info.arch;
    TRY(pl_load_int_in(ld, "embedding_length", true, 0, 1, MAX_DIM, &c->n_embd));
    TRY(pl_load_int_in(ld, "block_count", true, 0, 1, MAX_LAYERS, &c->n_layer));
    /* experts (qwen3moe; a llama file may have them too): then no dense FFN */
    TRY(pl_moe_read_config(ld, strcmp(arch, "qwen3moe") == 0, &c->moe));
    bool dense = c->moe.n_expert == 0;
    TRY(pl_load_int_in(ld, "feed_forward_length", dense, 0, dense, MAX_DIM, &c->n_ff));
    pl_attn_keys a;
    TRY(pl_load_attn_keys(ld, c->n_embd, &a));
    c->n_head = a.n_head, c->n_head_kv = a.n_head_kv;
    c->head_dim = a.head_dim, c->head_dim_v = a.head_dim_v, c->rope_dim = a.rope_dim;
    c->n_ctx_train = a.n_ctx_train, c->rms_eps = a.rms_eps, c->rope_base = a.rope_base;
    TRY(read_rope_scaling(ld, c));
    /* The llama converter permutes q/k rows into adjacent pairs; qwen keeps the halves. */
    c->rope_mode = strcmp(arch, "llama") == 0 ? PL_ROPE_NORMAL : PL_ROPE_NEOX;
    c->qk_norm = strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0;
    return PL_OK;
}

static pl_status load_layer(pl_loader *ld, const llama_config *c, int l, llama_layer *L) {
    char nm[96];
    int64_t d = c->n_embd, q_rows = (int64_t)c->n_head * c->head_dim;
    int64_t k_rows = (int64_t)c->n_head_kv * c->head_dim;
    int64_t v_rows = (int64_t)c->n_head_kv * c->head_dim_v;
#define T(field, suffix, ne0, ne1, req)                                                            \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);                                           \
        TRY(pl_load_tensor(ld, nm, ne0, ne1, req, &L->field));                                     \
    } while (0)
    T(attn_norm, "attn_norm.weight", d, 1, true);
    T(wq, "attn_q.weight", d, q_rows, true);
    T(wk, "attn_k.weight", d, k_rows, true);
    T(wv, "attn_v.weight", d, v_rows, true);
    /* Biases: qwen2 always has them; a llama-architecture file may too. */
    bool bias_req = strcmp(ld->m->info.arch, "qwen2") == 0;
    T(bq, "attn_q.bias", q_rows, 1, bias_req);
    T(bk, "attn_k.bias", k_rows, 1, bias_req);
    T(bv, "attn_v.bias", v_rows, 1, bias_req);
    T(q_norm, "attn_q_norm.weight", c->head_dim, 1, c->qk_norm);
    T(k_norm, "attn_k_norm.weight", c->head_dim, 1, c->qk_norm);
    T(wo, "attn_output.weight", (int64_t)c->n_head * c->head_dim_v, d, true);
    if (!c->qk_norm && (L->q_norm || L->k_norm))
        return pl_fail(PL_ERR_FORMAT, "blk.%d has q/k norms, which %s does not use", l,
                       ld->m->info.arch);
    T(ffn_norm, "ffn_norm.weight", d, 1, true);
    if (c->moe.n_expert) return pl_moe_load_layer(ld, &c->moe, c->n_embd, l, &L->moe);
    T(w_gate, "ffn_gate.weight", d, c->n_ff, true);
    T(w_up, "ffn_up.weight", d, c->n_ff, true);
    T(w_down, "ffn_down.weight", c->n_ff, d, true);
#undef T
    return PL_OK;
}

static pl_status llama_load(pl_loader *ld) {
    pl_model *m = ld->m;
    llama_model *lm = calloc(1, sizeof *lm);
    if (!lm) return pl_fail(PL_ERR_NOMEM, "out of memory loading the model");
    m->fam = lm;
    llama_config *c = &lm->cfg;
    TRY(read_config(ld, c));
    llama_weights *w = &lm->w;
    TRY(pl_load_ends(ld, c->n_embd, c->n_layer, c->n_layer, &c->n_vocab, &w->tok_embd, &w->out_norm,
                     &w->output));
    int first = m->info.layer_first, last = m->info.layer_last;
    TRY(pl_load_tensor(ld, "rope_freqs.weight", c->rope_dim / 2, 1, false, &w->rope_freqs));
    w->layers = calloc((size_t)c->n_layer, sizeof *w->layers);
    if (!w->layers) return pl_fail(PL_ERR_NOMEM, "out of memory for %d layers", c->n_layer);
    for (int l = first; l < last; l++) TRY(load_layer(ld, c, l, &w->layers[l]));
    m->info.n_vocab = c->n_vocab;
    m->info.n_embd = c->n_embd;
    m->info.n_layer = c->n_layer;
    m->info.n_ctx_train = c->n_ctx_train;
    m->info.n_expert = c->moe.n_expert;
    m->info.n_expert_used = c->moe.n_used;
    return PL_OK;
}

/* What the state holds (see pl_check_state_size). */
static pl_status check_state_size(const pl_state *s) {
    const llama_config *c = &LM(s->m)->cfg;
    double elem = pl_row_size(s->o.kv_type, 32) / 32.0; /* bytes per cached value */
    double layers = s->m->info.layer_last - s->m->info.layer_first;
    /* activations per token, in floats: x, xb, q, k, v, att, then gate, up (dense FFN) or
     * the MoE block's scratch */
    bool moe = c->moe.n_expert > 0;
    double ffn = moe ? pl_moe_floats_per_token(&c->moe, c->n_embd) : 2.0 * c->n_ff;
    double widest = moe ? pl_moe_largest_per_token(&c->moe, c->n_embd) : c->n_ff;
    if (c->n_embd > widest) widest = c->n_embd;
    if ((double)c->n_head * c->head_dim > widest) widest = (double)c->n_head * c->head_dim;
    /* caches of n_slots sequences, or none (a slot of another state's) */
    double slots = s->o.slot_of ? 0 : s->o.n_slots > 0 ? s->o.n_slots : 1;
    pl_state_size z = {
        .ctx_row = slots * c->n_head_kv *
                   (double)(c->head_dim > c->head_dim_v ? c->head_dim : c->head_dim_v) * elem,
        .ctx_tok = slots * c->n_head_kv * (double)(c->head_dim + c->head_dim_v) * elem *
                   layers, /* k + v */
        .act_tok = 4.0 * (2.0 * c->n_embd + (double)c->n_head * (c->head_dim + c->head_dim_v) +
                          (double)c->n_head_kv * (c->head_dim + c->head_dim_v) + ffn),
        .act_row = widest * 4};
    return pl_check_state_size(s, &z);
}

static void llama_model_free(pl_model *m) {
    llama_model *lm = m->fam;
    if (lm) free(lm->w.layers);
    free(lm);
}

static pl_status llama_state_new(pl_state *s) {
    const llama_config *c = &LM(s->m)->cfg;
    pl_backend *be = s->m->be;
    int64_t B = s->o.n_batch;
    TRY(check_state_size(s));
    llama_state *ls = calloc(1, sizeof *ls);
    if (!ls) return pl_fail(PL_ERR_NOMEM, "out of memory for the state");
    s->fam = ls;
    TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_embd, B, &ls->xb));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, (int64_t)c->n_head * c->head_dim, B, &ls->q));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, (int64_t)c->n_head_kv * c->head_dim, B, &ls->k));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, (int64_t)c->n_head_kv * c->head_dim_v, B, &ls->v));
    TRY(pl_be_buf_new(be, PL_TYPE_F32, (int64_t)c->n_head * c->head_dim_v, B, &ls->att));
    if (c->moe.n_expert) {
        TRY(pl_moe_state_new(be, &c->moe, c->n_embd, (int)B, &ls->moe));
    } else {
        TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_ff, B, &ls->gate));
        TRY(pl_be_buf_new(be, PL_TYPE_F32, c->n_ff, B, &ls->up));
    }
    ls->kc = calloc((size_t)c->n_layer, sizeof *ls->kc);
    ls->vc = calloc((size_t)c->n_layer, sizeof *ls->vc);
    if (!ls->kc || !ls->vc) return pl_fail(PL_ERR_NOMEM, "out of memory for the KV cache");
    int64_t ctx = s->o.n_ctx, rows = ctx * (s->o.n_slots > 0 ? s->o.n_slots : 1);
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++) {
        if (s->o.slot_of) { /* views of the slot's rows */
            const llama_state *of = s->o.slot_of->fam;
            TRY(pl_be_buf_view(of->kc[l], s->o.slot * ctx, ctx, &ls->kc[l]));
            TRY(pl_be_buf_view(of->vc[l], s->o.slot * ctx, ctx, &ls->vc[l]));
            continue;
        }
        TRY(pl_be_buf_new(be, s->o.kv_type, (int64_t)c->n_head_kv * c->head_dim, rows, &ls->kc[l]));
        TRY(pl_be_buf_new(be, s->o.kv_type, (int64_t)c->n_head_kv * c->head_dim_v, rows,
                          &ls->vc[l]));
    }
    if (s->o.n_slots > 0) TRY(pl_be_buf_new(be, PL_TYPE_I32, 2, B, &ls->slot_pos));
    return PL_OK;
}

/* The state's scratch buffers (the caches are per layer, visited separately; gate and up
 * are NULL in a MoE model, whose scratch is ls->moe). */
#define LLAMA_N_SCRATCH 7
static void scratch_bufs(const llama_state *ls, pl_buf *b[LLAMA_N_SCRATCH]) {
    pl_buf *all[LLAMA_N_SCRATCH] = {ls->xb, ls->q, ls->k, ls->v, ls->att, ls->gate, ls->up};
    memcpy(b, all, sizeof all);
}

static void llama_state_free(pl_state *s) {
    llama_state *ls = s->fam;
    if (!ls) return;
    pl_buf *b[LLAMA_N_SCRATCH];
    scratch_bufs(ls, b);
    for (int i = 0; ls->cols && i < 4 * s->o.n_batch; i++) pl_be_buf_free(ls->cols[i]);
    free(ls->cols); /* (views: before their parents) */
    pl_be_buf_free(ls->slot_pos);
    for (int i = 0; i < LLAMA_N_SCRATCH; i++) pl_be_buf_free(b[i]);
    pl_moe_state_free(&ls->moe);
    for (int l = 0; ls->kc && l < s->m->info.n_layer; l++) pl_be_buf_free(ls->kc[l]);
    for (int l = 0; ls->vc && l < s->m->info.n_layer; l++) pl_be_buf_free(ls->vc[l]);
    free(ls->kc);
    free(ls->vc);
    free(ls);
}

static int64_t llama_state_bytes(const pl_state *s) {
    const llama_state *ls = s->fam;
    int64_t b = pl_moe_state_bytes(&ls->moe);
    pl_buf *bufs[LLAMA_N_SCRATCH];
    scratch_bufs(ls, bufs);
    for (int i = 0; i < LLAMA_N_SCRATCH; i++) b += bufs[i] ? pl_be_buf_bytes(bufs[i]) : 0;
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++)
        b += pl_be_buf_bytes(ls->kc[l]) + pl_be_buf_bytes(ls->vc[l]);
    return b;
}

static pl_status llama_embed(const pl_model *m, pl_state *s, int64_t n) {
    return pl_be_embed(LM(m)->w.tok_embd, s->ids, n, s->x);
}

/* The attention block's projections of x rows 0..n-1 into the state's q, k, v (normed per
 * head for qwen3). */
static pl_status qkv_block(const pl_model *m, pl_state *s, int l, int64_t n) {
    const llama_config *c = &LM(m)->cfg;
    const llama_layer *L = &LM(m)->w.layers[l];
    llama_state *ls = LS(s);
    float eps = c->rms_eps;
    TRY(pl_be_rms_norm(s->x, L->attn_norm, n, c->n_embd, eps, ls->xb));
    TRY(pl_be_matmul(L->wq, ls->xb, L->bq, n, false, ls->q));
    TRY(pl_be_matmul(L->wk, ls->xb, L->bk, n, false, ls->k));
    TRY(pl_be_matmul(L->wv, ls->xb, L->bv, n, false, ls->v));
    if (c->qk_norm) { /* qwen3: RMSNorm over each head's values */
        TRY(pl_be_rms_norm(ls->q, L->q_norm, n * c->n_head, c->head_dim, eps, ls->q));
        TRY(pl_be_rms_norm(ls->k, L->k_norm, n * c->n_head_kv, c->head_dim, eps, ls->k));
    }
    return PL_OK;
}

/* The model's RoPE and attention parameters (pl_rope_attend sets the RoPE's heads). */
static void attn_params(const pl_model *m, pl_rope_params *rp, pl_attn_params *ap) {
    const llama_config *c = &LM(m)->cfg;
    *rp = (pl_rope_params){.mode = c->rope_mode,
                           .head_dim = c->head_dim,
                           .rope_dim = c->rope_dim,
                           .theta_base = c->rope_base,
                           .freq_scale = c->rope_freq_scale,
                           .factors = LM(m)->w.rope_freqs};
    *ap = (pl_attn_params){.n_head = c->n_head,
                           .n_head_kv = c->n_head_kv,
                           .head_dim = c->head_dim,
                           .head_dim_v = c->head_dim_v,
                           .scale = (float)(1.0 / sqrt((double)c->head_dim))};
}

/* RoPE of q and k rows 0..n-1 at pos0.., their store into the caches of layer l of
 * state ls, and the attention of q over them into att. */
static pl_status rope_attend(const pl_model *m, const llama_state *ls, int l, pl_buf *q, pl_buf *k,
                             pl_buf *v, pl_buf *att, int64_t n, int64_t pos0) {
    pl_rope_params rp;
    pl_attn_params ap;
    attn_params(m, &rp, &ap);
    return pl_rope_attend(q, k, v, ls->kc[l], ls->vc[l], n, pos0, &rp, &ap, att);
}

/* RoPE, the layer's caches and the attention of the state's q, k, v rows 0..n-1 at pos0.. */
static pl_status attend(const pl_model *m, pl_state *s, int l, int64_t n, int64_t pos0) {
    llama_state *ls = LS(s);
    return rope_attend(m, ls, l, ls->q, ls->k, ls->v, ls->att, n, pos0);
}

/* Batch state b's columns as views (llama_state.cols), or NULL where the backend cannot
 * place them (then the rows are copied to each sequence's own buffers and back). */
static pl_buf *const *col_views(pl_state *b) {
    llama_state *lb = LS(b);
    if (lb->cols || lb->cols_tried) return lb->cols;
    lb->cols_tried = true;
    int nb = b->o.n_batch;
    pl_buf **v = calloc(4 * (size_t)nb, sizeof *v), *par[4] = {lb->q, lb->k, lb->v, lb->att};
    pl_status st = v ? PL_OK : PL_ERR_NOMEM;
    for (int i = 0; i < 4 * nb && !st; i++) st = pl_be_buf_view(par[i % 4], i / 4, 1, &v[i]);
    if (st) { /* e.g. rows off the GPU's binding alignment */
        for (int i = 0; v && i < 4 * nb; i++) pl_be_buf_free(v[i]);
        free(v);
        pl_clear_error();
        return NULL;
    }
    return lb->cols = v;
}

static pl_status attention_block(const pl_model *m, pl_state *s, int l, int64_t n, int64_t pos0) {
    const llama_config *c = &LM(m)->cfg;
    /* the fused kernels this block's ops make (gpu_fuse.c), in the order issued below */
    unsigned fuse = PL_FUSE_NORM_MATMUL | PL_FUSE_QKV | PL_FUSE_ROPE_STORE | PL_FUSE_ROPE_PAIR;
    TRY(pl_be_fuse(m->be, fuse | (c->qk_norm ? PL_FUSE_NORM_ROPE : 0)));
    TRY(qkv_block(m, s, l, n));
    TRY(attend(m, s, l, n, pos0));
    /* residual add fused */
    return pl_be_matmul(LM(m)->w.layers[l].wo, LS(s)->att, NULL, n, true, s->x);
}

/* A decode step of n sequences at once: b's rows are the sequences' columns through the
 * weights (one matmul each for all of them); each row's RoPE, cache store and attention
 * run on its own sequence's state at its own position. The fusions of the single step are
 * asked where their ops stay neighbours: the norm and the q/k/v sweep over all rows, and
 * per row the RoPE of q and k with the cache stores (qwen3's per-head norms run on all
 * rows before the copies, so they do not fold into the RoPE here). */
static pl_status attention_block_batch(const pl_model *m, pl_state *b, pl_state *const *seqs, int n,
                                       const int64_t *pos, int l) {
    const llama_config *c = &LM(m)->cfg;
    llama_state *lb = LS(b);
    int64_t nq = (int64_t)c->n_head * c->head_dim, nk = (int64_t)c->n_head_kv * c->head_dim;
    int64_t nv = (int64_t)c->n_head_kv * c->head_dim_v, na = (int64_t)c->n_head * c->head_dim_v;
    TRY(pl_be_fuse(m->be, PL_FUSE_NORM_MATMUL | PL_FUSE_QKV));
    TRY(qkv_block(m, b, l, n));
    TRY(pl_be_fuse(m->be, 0));
    pl_buf *const *cv = col_views(b);
    for (int i = 0; i < n; i++) {
        llama_state *li = LS(seqs[i]);
        if (cv) { /* the batch's rows in place: no copies */
            TRY(pl_be_fuse(m->be, PL_FUSE_ROPE_STORE | PL_FUSE_ROPE_PAIR));
            TRY(rope_attend(m, li, l, cv[4 * i], cv[4 * i + 1], cv[4 * i + 2], cv[4 * i + 3], 1,
                            pos[i]));
            continue;
        }
        TRY(pl_be_copy(lb->q, i * nq, nq, li->q, 0));
        TRY(pl_be_copy(lb->k, i * nk, nk, li->k, 0));
        TRY(pl_be_copy(lb->v, i * nv, nv, li->v, 0));
        TRY(pl_be_fuse(m->be, PL_FUSE_ROPE_STORE | PL_FUSE_ROPE_PAIR)); /* ends with the stores */
        TRY(attend(m, seqs[i], l, 1, pos[i]));
        TRY(pl_be_copy(li->att, 0, na, lb->att, i * na));
    }
    return pl_be_matmul(LM(m)->w.layers[l].wo, lb->att, NULL, n, true, b->x);
}

/* The batched step over cache slots (every sequence a slot of b's caches, b->fam's
 * slot_pos holding each column's slot and position): RoPE, the cache stores and attention
 * of all columns in one op each, with the single step's fusions. */
static pl_status attention_block_slots(const pl_model *m, pl_state *b, int n, int64_t max_keys,
                                       int l) {
    const llama_config *c = &LM(m)->cfg;
    llama_state *lb = LS(b);
    unsigned fuse = PL_FUSE_NORM_MATMUL | PL_FUSE_QKV | PL_FUSE_ROPE_STORE | PL_FUSE_ROPE_PAIR;
    TRY(pl_be_fuse(m->be, fuse | (c->qk_norm ? PL_FUSE_NORM_ROPE : 0)));
    TRY(qkv_block(m, b, l, n));
    pl_rope_params rp;
    pl_attn_params ap;
    attn_params(m, &rp, &ap);
    TRY(pl_rope_attend_cols(lb->q, lb->k, lb->v, lb->kc[l], lb->vc[l], n, lb->slot_pos, b->o.n_ctx,
                            max_keys, &rp, &ap, lb->att));
    return pl_be_matmul(LM(m)->w.layers[l].wo, lb->att, NULL, n, true, b->x);
}

/* Whether every sequence is a slot of b's caches; then each column's slot and position are
 * written to b's slot_pos and *max_keys is the most keys a column attends. */
static bool slotted(pl_state *b, pl_state *const *seqs, int n, const int64_t *pos,
                    int64_t *max_keys) {
    llama_state *lb = LS(b);
    if (!lb->slot_pos || n > b->o.n_batch) return false;
    int32_t *sp = malloc(2 * (size_t)n * sizeof *sp);
    bool all = sp != NULL;
    *max_keys = 0;
    for (int i = 0; i < n && all; i++) {
        all = seqs[i]->o.slot_of == b;
        sp[2 * i] = seqs[i]->o.slot, sp[2 * i + 1] = (int32_t)pos[i];
        if (pos[i] + 1 > *max_keys) *max_keys = pos[i] + 1;
    }
    all = all && pl_be_write(lb->slot_pos, 0, sp, 2 * n * (int64_t)sizeof *sp) == PL_OK;
    free(sp);
    return all;
}

static pl_status ffn_block(const pl_model *m, pl_state *s, int l, int64_t n) {
    const llama_config *c = &LM(m)->cfg;
    const llama_layer *L = &LM(m)->w.layers[l];
    llama_state *ls = LS(s);
    /* the norm folds into the first GEMV (MoE: the router's, whose group ends there) */
    TRY(pl_be_fuse(m->be, PL_FUSE_NORM_MATMUL | (c->moe.n_expert ? 0 : PL_FUSE_GATE_UP)));
    TRY(pl_be_rms_norm(s->x, L->ffn_norm, n, c->n_embd, c->rms_eps, ls->xb));
    if (c->moe.n_expert) return pl_moe_ffn(&c->moe, &L->moe, &ls->moe, ls->xb, n, s->x);
    return pl_swiglu_ffn(L->w_gate, L->w_up, L->w_down, ls->xb, n, c->n_ff, ls->gate, ls->up, s->x);
}

static pl_status llama_layers(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                              int last) {
    for (int l = first; l < last; l++) {
        TRY(attention_block(m, s, l, n, pos0));
        TRY(ffn_block(m, s, l, n));
    }
    return PL_OK;
}

static pl_status llama_layers_batch(const pl_model *m, pl_state *b, pl_state *const *seqs, int n,
                                    const int64_t *pos) {
    int64_t max_keys = 1;
    bool slots = slotted(b, seqs, n, pos, &max_keys);
    for (int l = 0; l < m->info.n_layer; l++) {
        if (slots)
            TRY(attention_block_slots(m, b, n, max_keys, l));
        else
            TRY(attention_block_batch(m, b, seqs, n, pos, l));
        TRY(ffn_block(m, b, l, n));
    }
    return PL_OK;
}

static pl_status llama_head(const pl_model *m, pl_state *s, int64_t n, bool all_rows) {
    const llama_weights *w = &LM(m)->w;
    return pl_run_head(s, w->out_norm, w->output, LM(m)->cfg.rms_eps, LS(s)->xb, n, all_rows);
}

static const char *const llama_archs[] = {"llama", "qwen2", "qwen3", "qwen3moe", NULL};

const pl_family pl_family_llama = {
    .archs = llama_archs,
    .load = llama_load,
    .model_free = llama_model_free,
    .state_new = llama_state_new,
    .state_free = llama_state_free,
    .state_bytes = llama_state_bytes,
    .embed = llama_embed,
    .layers = llama_layers,
    .layers_batch = llama_layers_batch,
    .head = llama_head,
    .slots = true,
};
