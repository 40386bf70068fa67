/* moe.h - the mixture-of-experts feed-forward block, shared by every family that has one
 * (qwen3moe in llama.c; qwen35moe).
 *
 * Per token, with xn the normed input row:
 *   router logits = ffn_gate_inp xn                       (float32 weights: routing is exact)
 *   ids, weights  = the n_used largest logits (ties: lower expert id), weights = softmax over
 *                   them (norm_topk; = HF's softmax over all, top-k, divided by their sum),
 *                   else softmax over all experts and the n_used largest probabilities
 *   y_j           = down_e(silu(gate_e xn) * up_e xn)      for each chosen expert e = ids[j]
 *   x            += sum_j weights[j] * y_j
 *   (shared expert) x += sigmoid(ffn_gate_inp_shexp . xn) * down_s(silu(gate_s xn) * up_s xn),
 *                   without the sigmoid factor when the file has no ffn_gate_inp_shexp.
 * In GGUF (llama.cpp's converter): ffn_gate_inp [n_embd, n_expert], ffn_{gate,up}_exps
 * [n_embd, n_ff_exp, n_expert], ffn_down_exps [n_ff_exp, n_embd, n_expert],
 * ffn_{gate,up}_shexp [n_embd, n_ff_shexp], ffn_down_shexp [n_ff_shexp, n_embd],
 * ffn_gate_inp_shexp [n_embd] (or [n_embd, 1]). Metadata <arch>.expert_count,
 * expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length. */
#ifndef PL_MODEL_MOE_H
#define PL_MODEL_MOE_H

#include "../backend/backend.h"

typedef struct pl_loader pl_loader;

/* Largest expert count accepted from metadata (real models: 8 to 512). */
#define PL_MOE_MAX_EXPERTS 4096

typedef struct {
    int n_expert;   /* experts per layer; 0: a dense model (no MoE block) */
    int n_used;     /* experts chosen per token, 1..n_expert */
    int n_ff_exp;   /* hidden size of each expert */
    int n_ff_shexp; /* hidden size of the shared expert; 0: none */
    bool norm_topk; /* weights = softmax over the chosen logits (HF norm_topk_prob) */
} pl_moe_config;

typedef struct {
    pl_buf *router;         /* [n_expert, n_embd] (F32 in the files) */
    pl_buf *gate_exps;      /* [n_expert*n_ff_exp, n_embd]: expert e is rows e*n_ff_exp.. */
    pl_buf *up_exps;        /* [n_expert*n_ff_exp, n_embd] */
    pl_buf *down_exps;      /* [n_expert*n_embd, n_ff_exp] */
    pl_buf *gate_shexp;     /* [n_ff_shexp, n_embd], or NULL: no shared expert */
    pl_buf *up_shexp;       /* [n_ff_shexp, n_embd] */
    pl_buf *down_shexp;     /* [n_embd, n_ff_shexp] */
    pl_buf *gate_inp_shexp; /* [1, n_embd] the shared expert's gate, or NULL: ungated */
} pl_moe_weights;

/* Scratch buffers for n_batch tokens. */
typedef struct {
    pl_buf *logits;          /* [n_batch, n_expert] router logits */
    pl_buf *ids;             /* I32 [n_batch, n_used] chosen experts */
    pl_buf *wts;             /* [n_batch, n_used] their weights */
    pl_buf *gate;            /* [n_batch*n_used, n_ff_exp] */
    pl_buf *up;              /* [n_batch*n_used, n_ff_exp] */
    pl_buf *y;               /* [n_batch*n_used, n_embd] each chosen expert's output */
    pl_buf *sh_gate, *sh_up; /* [n_batch, n_ff_shexp], shared expert only */
    pl_buf *sh_g;            /* [n_batch, 1] the shared expert's gate logit */
    pl_buf *sh_y;            /* [n_batch, n_embd] the gated shared expert's output */
} pl_moe_state;

/* The configuration from <arch>.expert_count (absent or 0: dense, the rest is not read; an
 * error when required), expert_used_count, expert_feed_forward_length and
 * expert_shared_feed_forward_length (optional); norm_topk is set (every family so far
 * normalises; a family may clear it). */
pl_status pl_moe_read_config(pl_loader *ld, bool required, pl_moe_config *c);

/* Layer l's MoE tensors (blk.l.ffn_gate_inp, ffn_*_exps, and the shared expert's when
 * n_ff_shexp > 0), checked against the configuration: one line for a missing or misshaped
 * tensor, or a shared expert the metadata does not declare. */
pl_status pl_moe_load_layer(pl_loader *ld, const pl_moe_config *c, int n_embd, int l,
                            pl_moe_weights *w);

/* The scratch buffers for batches of up to n_batch tokens. On failure the buffers made so
 * far stay in s for pl_moe_state_free. */
pl_status pl_moe_state_new(pl_backend *be, const pl_moe_config *c, int n_embd, int n_batch,
                           pl_moe_state *s);
void pl_moe_state_free(pl_moe_state *s);
int64_t pl_moe_state_bytes(const pl_moe_state *s);
/* Floats of scratch per token in all the buffers, and in the largest one (for a state-size
 * check before the buffers are made). */
double pl_moe_floats_per_token(const pl_moe_config *c, int n_embd);
double pl_moe_largest_per_token(const pl_moe_config *c, int n_embd);

/* x[0..n) += the MoE block of xn[0..n) (xn [>= n, n_embd], the normed input; x the
 * residual stream). The caller's fusion group (pl_be_fuse) ends after the router's matmul,
 * the first op: a caller asks for PL_FUSE_NORM_MATMUL before its norm of xn so that the
 * router normalises x itself; here the top-k asks for PL_FUSE_ROUTER (its softmax folded in),
 * the experts' and the shared expert's gate/up GEMVs with their SwiGLU for PL_FUSE_GATE_UP. */
pl_status pl_moe_ffn(const pl_moe_config *c, const pl_moe_weights *w, pl_moe_state *s,
                     const pl_buf *xn, int64_t n, pl_buf *x);

#endif
