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
#include <unistd.h>

#include "model_internal.h"

/* This family's parts of the model and the state. */
static const llama_model *LM(const pl_model *m) {
    return m->fam;
}
static llama_state *LS(pl_state *s) {
    return s->fam;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        pl_status s_ = (x);                                                                        \
        if (s_) return s_;                                                                         \
    } while (0)

/* Largest values we accept from metadata: far above any real model, small enough that no
 * product of them overflows or asks for absurd memory before the tensor checks run. */
#define MAX_DIM    1048576
#define MAX_LAYERS 4096

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
    TRY(pl_load_int_in(ld, "attention.head_count", true, 0, 1, MAX_DIM, &c->n_head));
    TRY(pl_load_int_in(ld, "attention.head_count_kv", false, c->n_head, 1, c->n_head,
                       &c->n_head_kv));
    if (c->n_head % c->n_head_kv)
        return pl_fail(PL_ERR_FORMAT, "%d heads cannot share %d kv heads", c->n_head, c->n_head_kv);
    TRY(pl_load_int_in(ld, "attention.key_length", false, c->n_embd / c->n_head, 1, MAX_DIM,
                       &c->head_dim));
    TRY(pl_load_int_in(ld, "attention.value_length", false, c->head_dim, 1, MAX_DIM,
                       &c->head_dim_v));
    TRY(pl_load_int_in(ld, "rope.dimension_count", false, c->head_dim, 2, c->head_dim,
                       &c->rope_dim));
    if (c->rope_dim % 2) return pl_fail(PL_ERR_FORMAT, "odd RoPE dimension %d", c->rope_dim);
    TRY(pl_load_int_in(ld, "context_length", false, 4096, 1, 1 << 30, &c->n_ctx_train));
    double eps, base;
    TRY(pl_load_float(ld, "attention.layer_norm_rms_epsilon", true, 0, &eps));
    TRY(pl_load_float(ld, "rope.freq_base", false, 10000.0, &base));
    if (!(eps >= 0 && eps < 1)) return pl_fail(PL_ERR_FORMAT, "bad RMSNorm epsilon %g", eps);
    if (!(base > 1 && base < 1e12)) return pl_fail(PL_ERR_FORMAT, "bad RoPE base %g", base);
    c->rms_eps = (float)eps;
    c->rope_base = (float)base;
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
    const pl_gguf_tensor *te = pl_gguf_find_tensor(ld->g, "token_embd.weight");
    if (!te) return pl_fail(PL_ERR_FORMAT, "missing tensor token_embd.weight");
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return pl_fail(PL_ERR_FORMAT, "token_embd.weight has %lld rows", (long long)te->ne[1]);
    c->n_vocab = (int)te->ne[1];
    if ((int64_t)c->n_layer > pl_gguf_tensor_count(ld->g))
        return pl_fail(PL_ERR_FORMAT, "%d layers but only %lld tensors", c->n_layer,
                       (long long)pl_gguf_tensor_count(ld->g));
    TRY(pl_load_layer_range(ld, c->n_layer));
    int first = m->info.layer_first, last = m->info.layer_last;
    bool embed = m->info.has_embed, head = m->info.has_head;
    bool tied = !pl_gguf_find_tensor(ld->g, "output.weight");
    llama_weights *w = &lm->w;
    if (embed || (head && tied))
        TRY(pl_load_tensor(ld, "token_embd.weight", c->n_embd, c->n_vocab, true, &w->tok_embd));
    if (head) {
        TRY(pl_load_tensor(ld, "output_norm.weight", c->n_embd, 1, true, &w->out_norm));
        TRY(pl_load_tensor(ld, "output.weight", c->n_embd, c->n_vocab, false, &w->output));
        if (!w->output) w->output = w->tok_embd; /* tied */
    }
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

/* Refuse a context or batch whose buffers cannot be had, before allocating them: one
 * layer's cache and one activation buffer must fit the backend's largest buffer, and all
 * of them the memory the weights leave. */
static pl_status check_state_size(const pl_state *s) {
    const llama_config *c = &LM(s->m)->cfg;
    const pl_backend *be = s->m->be;
    const double mib = 1024.0 * 1024.0, gib = mib * 1024.0;
    double elem = s->o.kv_type == PL_TYPE_F16 ? 2 : 4, n_ctx = s->o.n_ctx, n_batch = s->o.n_batch;
    double kv_row =
        c->n_head_kv * (double)(c->head_dim > c->head_dim_v ? c->head_dim : c->head_dim_v) * elem;
    double kv_tok = c->n_head_kv * (double)(c->head_dim + c->head_dim_v) * elem; /* k + v */
    double layers = s->m->info.layer_last - s->m->info.layer_first;
    /* activations per token, in floats: x, xb, q, k, v, att, then gate, up (dense FFN) or
     * the MoE block's scratch */
    bool moe = c->moe.n_expert > 0;
    double ffn = moe ? pl_moe_floats_per_token(&c->moe, c->n_embd) : 2.0 * c->n_ff;
    double widest = moe ? pl_moe_largest_per_token(&c->moe, c->n_embd) : c->n_ff;
    if (c->n_embd > widest) widest = c->n_embd;
    if ((double)c->n_head * c->head_dim > widest) widest = (double)c->n_head * c->head_dim;
    double act_tok = 4.0 * (2.0 * c->n_embd + (double)c->n_head * (c->head_dim + c->head_dim_v) +
                            (double)c->n_head_kv * (c->head_dim + c->head_dim_v) + ffn);
    double limit = (double)be->max_buf_bytes;
    if (limit > 0 && kv_row > 0 && kv_row * n_ctx > limit)
        return pl_fail(PL_ERR_ARG,
                       "a context of %d tokens needs %.1f MiB of KV cache per layer, "
                       "more than the %s device's largest buffer of %.1f MiB (--ctx "
                       "%.0f at most)",
                       s->o.n_ctx, kv_row * n_ctx / mib, be->name, limit / mib,
                       floor(limit / kv_row));
    if (limit > 0 && widest * 4 * n_batch > limit)
        return pl_fail(PL_ERR_ARG,
                       "a batch of %d tokens needs %.1f MiB per activation buffer, "
                       "more than the %s device's largest buffer of %.1f MiB (%.0f "
                       "tokens at most)",
                       s->o.n_batch, widest * 4 * n_batch / mib, be->name, limit / mib,
                       floor(limit / (widest * 4)));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double mem = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    mem -= (double)s->m->info.weight_bytes; /* the weights need their room too */
    double total = kv_tok * layers * n_ctx + act_tok * n_batch;
    if (pages > 0 && page > 0 && act_tok * n_batch > mem)
        return pl_fail(PL_ERR_ARG,
                       "a batch of %d tokens needs %.1f GiB of activations, more than "
                       "the %.1f GiB of this machine's memory the weights leave",
                       s->o.n_batch, act_tok * n_batch / gib, mem > 0 ? mem / gib : 0.0);
    if (pages > 0 && page > 0 && total > mem)
        return pl_fail(PL_ERR_ARG,
                       "a context of %d tokens needs %.1f GiB of KV cache, more than "
                       "the %.1f GiB of this machine's memory the weights and "
                       "activations leave (--ctx %.0f at most)",
                       s->o.n_ctx, kv_tok * layers * n_ctx / gib, (mem - act_tok * n_batch) / gib,
                       kv_tok * layers > 0 ? floor((mem - act_tok * n_batch) / (kv_tok * layers))
                                           : 0.0);
    return PL_OK;
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
    for (int l = s->m->info.layer_first; l < s->m->info.layer_last; l++) {
        TRY(pl_be_buf_new(be, s->o.kv_type, (int64_t)c->n_head_kv * c->head_dim, s->o.n_ctx,
                          &ls->kc[l]));
        TRY(pl_be_buf_new(be, s->o.kv_type, (int64_t)c->n_head_kv * c->head_dim_v, s->o.n_ctx,
                          &ls->vc[l]));
    }
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

static pl_status attention_block(const pl_model *m, pl_state *s, int l, int64_t n, int64_t pos0) {
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
    pl_rope_params rp = {.mode = c->rope_mode,
                         .n_heads = c->n_head,
                         .head_dim = c->head_dim,
                         .rope_dim = c->rope_dim,
                         .theta_base = c->rope_base,
                         .freq_scale = c->rope_freq_scale,
                         .factors = LM(m)->w.rope_freqs};
    TRY(pl_be_rope(ls->q, n, pos0, &rp));
    rp.n_heads = c->n_head_kv;
    TRY(pl_be_rope(ls->k, n, pos0, &rp));
    TRY(pl_be_kv_store(ls->k, n, pos0, ls->kc[l]));
    TRY(pl_be_kv_store(ls->v, n, pos0, ls->vc[l]));
    pl_attn_params ap = {.n_head = c->n_head,
                         .n_head_kv = c->n_head_kv,
                         .head_dim = c->head_dim,
                         .head_dim_v = c->head_dim_v,
                         .scale = (float)(1.0 / sqrt((double)c->head_dim))};
    TRY(pl_be_attention(ls->q, ls->kc[l], ls->vc[l], n, pos0, &ap, ls->att));
    return pl_be_matmul(L->wo, ls->att, NULL, n, true, s->x); /* residual add fused */
}

static pl_status ffn_block(const pl_model *m, pl_state *s, int l, int64_t n) {
    const llama_config *c = &LM(m)->cfg;
    const llama_layer *L = &LM(m)->w.layers[l];
    llama_state *ls = LS(s);
    TRY(pl_be_rms_norm(s->x, L->ffn_norm, n, c->n_embd, c->rms_eps, ls->xb));
    if (c->moe.n_expert) return pl_moe_ffn(&c->moe, &L->moe, &ls->moe, ls->xb, n, s->x);
    TRY(pl_be_matmul(L->w_gate, ls->xb, NULL, n, false, ls->gate));
    TRY(pl_be_matmul(L->w_up, ls->xb, NULL, n, false, ls->up));
    TRY(pl_be_swiglu(ls->gate, ls->up, n * c->n_ff, ls->gate));
    return pl_be_matmul(L->w_down, ls->gate, NULL, n, true, s->x); /* residual add fused */
}

static pl_status llama_layers(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                              int last) {
    for (int l = first; l < last; l++) {
        TRY(attention_block(m, s, l, n, pos0));
        TRY(ffn_block(m, s, l, n));
    }
    return PL_OK;
}

static pl_status llama_head(const pl_model *m, pl_state *s, int64_t n, bool all_rows) {
    const llama_config *c = &LM(m)->cfg;
    const llama_weights *w = &LM(m)->w;
    llama_state *ls = LS(s);
    int64_t rows = all_rows ? n : 1;
    if (all_rows) {
        TRY(pl_be_rms_norm(s->x, w->out_norm, n, c->n_embd, c->rms_eps, ls->xb));
    } else { /* only the last token's row is needed for the next token */
        TRY(pl_be_copy(s->x, (n - 1) * c->n_embd, c->n_embd, ls->xb, 0));
        TRY(pl_be_rms_norm(ls->xb, w->out_norm, 1, c->n_embd, c->rms_eps, ls->xb));
    }
    return pl_be_matmul(w->output, ls->xb, NULL, rows, false, s->logits);
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
    .head = llama_head,
    .draft = NULL,
};
