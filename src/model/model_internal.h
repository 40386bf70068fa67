/* model_internal.h - the structs behind pl_model and pl_state, and the loader helpers the
 * architecture files share. Only src/model/ includes it. */
#ifndef PL_MODEL_INTERNAL_H
#define PL_MODEL_INTERNAL_H

#include "model.h"

/* ---- the llama family: llama, qwen2 (q/k/v bias), qwen3 (per-head q/k RMSNorm) ---- */

typedef struct {
    int n_vocab;
    int n_embd;      /* hidden size */
    int n_layer;
    int n_head;      /* query heads */
    int n_head_kv;   /* key/value heads (grouped-query attention when fewer) */
    int head_dim;    /* query/key values per head */
    int head_dim_v;  /* value values per head */
    int n_ff;        /* feed-forward hidden size */
    int n_ctx_train;
    float rms_eps;
    pl_rope_mode rope_mode;
    int rope_dim;    /* rotated values per head */
    float rope_base;
    float rope_freq_scale;
    bool qkv_bias;   /* qwen2 */
    bool qk_norm;    /* qwen3 */
} llama_config;

typedef struct {
    pl_buf *attn_norm;  /* [n_embd] */
    pl_buf *wq;         /* [n_head*head_dim, n_embd] */
    pl_buf *wk;         /* [n_head_kv*head_dim, n_embd] */
    pl_buf *wv;         /* [n_head_kv*head_dim_v, n_embd] */
    pl_buf *bq, *bk, *bv; /* [rows of wq / wk / wv], qwen2 only, else NULL */
    pl_buf *q_norm;     /* [head_dim], qwen3 only, else NULL */
    pl_buf *k_norm;     /* [head_dim], qwen3 only, else NULL */
    pl_buf *wo;         /* [n_embd, n_head*head_dim_v] */
    pl_buf *ffn_norm;   /* [n_embd] */
    pl_buf *w_gate;     /* [n_ff, n_embd] */
    pl_buf *w_up;       /* [n_ff, n_embd] */
    pl_buf *w_down;     /* [n_embd, n_ff] */
} llama_layer;

typedef struct {
    pl_buf *tok_embd;   /* [n_vocab, n_embd] */
    pl_buf *out_norm;   /* [n_embd] */
    pl_buf *output;     /* [n_vocab, n_embd]; the same buffer as tok_embd when tied */
    pl_buf *rope_freqs; /* [rope_dim/2] frequency divisors (Llama 3), or NULL */
    llama_layer *layers; /* [n_layer] */
} llama_weights;

/* ---- the model and one sequence's state ---- */

struct pl_model {
    pl_model_info info;
    pl_backend *be;
    llama_config cfg;
    llama_weights w;
    pl_buf **bufs;   /* every weight buffer made, freed together */
    int n_bufs, cap_bufs;
    void **owned;    /* F32 copies of small vectors stored in other formats */
    int n_owned, cap_owned;
};

struct pl_state {
    const pl_model *m;
    pl_state_opts o;
    pl_buf *ids;    /* I32 [n_batch] */
    pl_buf *x;      /* [n_batch, n_embd] the residual stream (hidden state) */
    pl_buf *xb;     /* [n_batch, n_embd] normed input of a block */
    pl_buf *q;      /* [n_batch, n_head*head_dim] */
    pl_buf *k;      /* [n_batch, n_head_kv*head_dim] */
    pl_buf *v;      /* [n_batch, n_head_kv*head_dim_v] */
    pl_buf *att;    /* [n_batch, n_head*head_dim_v] attention output */
    pl_buf *gate;   /* [n_batch, n_ff] */
    pl_buf *up;     /* [n_batch, n_ff] */
    pl_buf *logits; /* [n_logits, n_vocab] */
    pl_buf **kc;    /* [n_layer] each [n_ctx, n_head_kv*head_dim] */
    pl_buf **vc;    /* [n_layer] each [n_ctx, n_head_kv*head_dim_v] */
};

/* ---- loader helpers (model.c) ---- */

typedef struct {
    const pl_gguf *g;
    pl_model *m;
    const pl_model_opts *opts;
    uint64_t done, total; /* bytes, for progress */
} pl_loader;

/* "<arch>.<suffix>" as an integer / float; a missing key is an error when required, else
 * the default is stored. */
pl_status pl_load_int(pl_loader *ld, const char *suffix, bool required, int64_t dflt,
                      int64_t *out);
pl_status pl_load_float(pl_loader *ld, const char *suffix, bool required, double dflt,
                        double *out);
/* The tensor `name` as a weight buffer with shape [ne1, ne0] (ne1 = 1 for a vector).
 * Absent: NULL when optional, an error when required. Vectors in other formats than F32
 * are converted to an owned F32 copy (backends take F32 norms and biases). */
pl_status pl_load_tensor(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1,
                         bool required, pl_buf **out);

/* Replace control characters in a string from the file, so an error message that quotes
 * it stays one line. */
void pl_load_printable(char *s);

/* llama.c */
pl_status pl_llama_load(pl_loader *ld);
pl_status pl_llama_state_init(pl_state *s);
pl_status pl_llama_layers(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                          int last);
pl_status pl_llama_head(const pl_model *m, pl_state *s, int64_t n, bool all_rows);

#endif
