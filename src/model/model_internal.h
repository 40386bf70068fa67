/* model_internal.h - the structs behind pl_model and pl_state, and the loader helpers the
 * architecture files share. Only src/model/ includes it. */
#ifndef PL_MODEL_INTERNAL_H
#define PL_MODEL_INTERNAL_H

#include "model.h"
#include "moe.h"

/* ---- the llama family: llama, qwen2 (q/k/v bias), qwen3 (per-head q/k RMSNorm), qwen3moe
 * (qwen3 with a mixture-of-experts FFN) ---- */

typedef struct {
    int n_vocab;
    int n_embd; /* hidden size */
    int n_layer;
    int n_head;     /* query heads */
    int n_head_kv;  /* key/value heads (grouped-query attention when fewer) */
    int head_dim;   /* query/key values per head */
    int head_dim_v; /* value values per head */
    int n_ff;       /* feed-forward hidden size (dense FFN) */
    int n_ctx_train;
    float rms_eps;
    pl_rope_mode rope_mode;
    int rope_dim; /* rotated values per head */
    float rope_base;
    float rope_freq_scale;
    bool qkv_bias;     /* qwen2 */
    bool qk_norm;      /* qwen3, qwen3moe */
    pl_moe_config moe; /* qwen3moe: moe.n_expert > 0 and every FFN is MoE */
} llama_config;

typedef struct {
    pl_buf *attn_norm;    /* [n_embd] */
    pl_buf *wq;           /* [n_head*head_dim, n_embd] */
    pl_buf *wk;           /* [n_head_kv*head_dim, n_embd] */
    pl_buf *wv;           /* [n_head_kv*head_dim_v, n_embd] */
    pl_buf *bq, *bk, *bv; /* [rows of wq / wk / wv], qwen2 only, else NULL */
    pl_buf *q_norm;       /* [head_dim], qwen3 only, else NULL */
    pl_buf *k_norm;       /* [head_dim], qwen3 only, else NULL */
    pl_buf *wo;           /* [n_embd, n_head*head_dim_v] */
    pl_buf *ffn_norm;     /* [n_embd] */
    pl_buf *w_gate;       /* [n_ff, n_embd] (dense FFN) */
    pl_buf *w_up;         /* [n_ff, n_embd] */
    pl_buf *w_down;       /* [n_embd, n_ff] */
    pl_moe_weights moe;   /* (MoE FFN) */
} llama_layer;

typedef struct {
    pl_buf *tok_embd;    /* [n_vocab, n_embd] */
    pl_buf *out_norm;    /* [n_embd] */
    pl_buf *output;      /* [n_vocab, n_embd]; the same buffer as tok_embd when tied */
    pl_buf *rope_freqs;  /* [rope_dim/2] frequency divisors (Llama 3), or NULL */
    llama_layer *layers; /* [n_layer] */
} llama_weights;

/* The llama family's part of a model (pl_model.fam) and of a state (pl_state.fam). */
typedef struct {
    llama_config cfg;
    llama_weights w;
} llama_model;

typedef struct {
    pl_buf *xb;       /* [n_batch, n_embd] normed input of a block */
    pl_buf *q;        /* [n_batch, n_head*head_dim] */
    pl_buf *k;        /* [n_batch, n_head_kv*head_dim] */
    pl_buf *v;        /* [n_batch, n_head_kv*head_dim_v] */
    pl_buf *att;      /* [n_batch, n_head*head_dim_v] attention output */
    pl_buf *gate;     /* [n_batch, n_ff] (dense FFN) */
    pl_buf *up;       /* [n_batch, n_ff] */
    pl_moe_state moe; /* (MoE FFN) */
    pl_buf **kc;      /* [n_layer] each [n_ctx, n_head_kv*head_dim] (loaded layers only) */
    pl_buf **vc;      /* [n_layer] each [n_ctx, n_head_kv*head_dim_v] */
    /* A batch state's columns (llama.c, col_views): row i of q, k, v and att as views at
     * cols[4 * i ..], made at the first batched step; cols_tried: do not try again (a
     * backend that cannot place them: the rows are copied instead) */
    pl_buf **cols;
    bool cols_tried;
    /* A state with cache slots (opts.n_slots): each column's slot and position, I32
     * [n_batch, 2] (the *_cols ops of backend.h) */
    pl_buf *slot_pos;
} llama_state;

/* ---- model families ---- */

typedef struct pl_loader pl_loader;

/* One model family: the methods model.c dispatches every pl_model_* / pl_state_* call
 * through. model.c checks the arguments (layer range, rows, positions, embed/head present)
 * before a method runs, and owns what every family shares: the info, the weight buffers
 * made by pl_load_tensor, and the state's ids, hidden (x) and logits buffers. A family
 * keeps its own configuration and weights in m->fam and its caches and scratch buffers in
 * s->fam. Every slot is filled except can_rewind, rewind and the draft ones. */
typedef struct pl_family {
    /* The general.architecture values this family serves, NULL-terminated. */
    const char *const *archs;
    /* Read the configuration and weights (layers [first, last) of the loader's opts) into
     * m->fam, and fill the info's shape fields, layer range, has_embed and has_head. */
    pl_status (*load)(pl_loader *ld);
    /* Free m->fam (the weight buffers are freed by model.c). NULL m->fam is fine. */
    void (*model_free)(pl_model *m);
    /* Check that the state's opts fit the device and the machine, then make s->fam (caches
     * of the loaded layers, scratch). Called before model.c makes ids, x and logits. */
    pl_status (*state_new)(pl_state *s);
    /* Free s->fam (its buffers too). NULL s->fam is fine. */
    void (*state_free)(pl_state *s);
    /* Backend bytes held by s->fam. */
    int64_t (*state_bytes)(const pl_state *s);
    /* x[0..n) = embeddings of ids[0..n). */
    pl_status (*embed)(const pl_model *m, pl_state *s, int64_t n);
    /* Layers [first, last) over x rows 0..n-1 at positions pos0.. (see pl_model_layers). */
    pl_status (*layers)(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                        int last);
    /* Final norm and output: logits of x rows 0..n-1 (all_rows) or of row n-1 only. */
    pl_status (*head)(const pl_model *m, pl_state *s, int64_t n, bool all_rows);
    /* Optional (NULL: no batched step): every layer over b's x rows 0..n-1, row i being
     * sequence i at position pos[i] of seqs[i]'s caches (see pl_model_forward_batch;
     * model.c checked the shapes). */
    pl_status (*layers_batch)(const pl_model *m, pl_state *b, pl_state *const *seqs, int n,
                              const int64_t *pos);
    /* Optional (NULL: nothing recurrent, any n_past works, nothing to do): whether the
     * state can go back to n_past (see pl_state_rewind), and doing it. rewind fails with a
     * one-line reason, leaving the state as it was, when can_rewind says no. model.c checks
     * 0 <= n_past <= n_ctx first. */
    bool (*can_rewind)(const pl_state *s, int64_t n_past);
    pl_status (*rewind)(pl_state *s, int64_t n_past);
    /* The multi-token-prediction block (NULL: the family has none). draft_absorb runs
     * after pl_model_forward's head on a state with opts.draft: the block's cache entries
     * for the n rows run at pos0 (see pl_model_draft); draft drafts (model.c checked
     * has_draft, opts.draft, 1 <= k <= n_batch, 0 <= pos < n_ctx). */
    pl_status (*draft_absorb)(const pl_model *m, pl_state *s, int64_t n, int64_t pos0);
    pl_status (*draft)(const pl_model *m, pl_state *s, int64_t pos, int32_t next, int k,
                       int32_t *out, int *n_out);
    pl_buf *(*draft_logits)(pl_state *s);
    /* Whether state_new keeps cache slots (pl_state_opts.n_slots, slot_of). */
    bool slots;
} pl_family;

/* The slots every family must fill (all but can_rewind, rewind and the draft ones), as an X-macro.
 */
#define PL_FAMILY_SLOTS(X)                                                                         \
    X(load) X(model_free) X(state_new) X(state_free) X(state_bytes) X(embed) X(layers) X(head)

/* The draft slots: none, or all of them. */
#define PL_FAMILY_DRAFT_SLOTS(X) X(draft_absorb) X(draft) X(draft_logits)

extern const pl_family pl_family_llama;  /* llama.c: llama, qwen2, qwen3, qwen3moe */
extern const pl_family pl_family_qwen35; /* qwen35.c: qwen35, qwen35moe (hybrid Gated DeltaNet) */

/* The family table (model.c): count, the i-th family, the family serving an architecture
 * (or NULL), and a check that a family names an architecture and fills every slot of
 * PL_FAMILY_SLOTS, and every one of PL_FAMILY_DRAFT_SLOTS when it fills any (fails naming
 * the first empty one; pl_model_load runs it before using a family). */
size_t pl_family_count(void);
const pl_family *pl_family_at(size_t i);
const pl_family *pl_family_find(const char *arch);
pl_status pl_family_check(const pl_family *f);

/* ---- the model and one sequence's state ---- */

struct pl_model {
    pl_model_info info;
    pl_backend *be;
    const pl_family *family;
    void *fam;     /* the family's configuration and weights (llama_model, ...) */
    pl_buf **bufs; /* every weight buffer made, freed together */
    int n_bufs, cap_bufs;
    void **owned; /* F32 copies of small vectors stored in other formats */
    int n_owned, cap_owned;
};

struct pl_state {
    const pl_model *m;
    pl_state_opts o;
    pl_buf *ids;    /* I32 [n_batch] */
    pl_buf *x;      /* [n_batch, n_embd] the residual stream (hidden state) */
    pl_buf *logits; /* [n_logits, n_vocab] */
    void *fam;      /* the family's caches and scratch buffers (llama_state, ...) */
};

/* ---- loader helpers (model.c) ---- */

/* Return the status of x when it fails (the family files' error propagation). */
#define TRY(x)                                                                                     \
    do {                                                                                           \
        pl_status s_ = (x);                                                                        \
        if (s_) return s_;                                                                         \
    } while (0)

/* Largest values we accept from metadata: far above any real model, small enough that no
 * product of them overflows or asks for absurd memory before the tensor checks run. */
#define MAX_DIM    1048576
#define MAX_LAYERS 4096

struct pl_loader {
    const pl_gguf *g;
    pl_model *m;
    const pl_model_opts *opts;
    uint64_t done, total; /* bytes, for progress */
};

/* "<arch>.<suffix>" as an integer / float; a missing key is an error when required, else
 * the default is stored. */
pl_status pl_load_int(pl_loader *ld, const char *suffix, bool required, int64_t dflt, int64_t *out);
/* The same, as an int within [lo, hi] (else one line naming the key and the range). */
pl_status pl_load_int_in(pl_loader *ld, const char *suffix, bool required, int64_t dflt, int lo,
                         int hi, int *out);
pl_status pl_load_float(pl_loader *ld, const char *suffix, bool required, double dflt, double *out);
/* The attention keys every decoder has: head counts and sizes, rotated values per head,
 * training context, RMSNorm epsilon and RoPE base (<arch>.attention.*, rope.*,
 * context_length), with their defaults and one line for a value out of range. */
typedef struct {
    int n_head, n_head_kv;    /* query heads, key/value heads (n_head is a multiple) */
    int head_dim, head_dim_v; /* key_length (n_embd / n_head), value_length (head_dim) */
    int rope_dim;             /* rope.dimension_count (head_dim), even */
    int n_ctx_train;          /* context_length (4096) */
    float rms_eps, rope_base; /* rope.freq_base (10000) */
} pl_attn_keys;
pl_status pl_load_attn_keys(pl_loader *ld, int n_embd, pl_attn_keys *a);

/* The tensor `name` as a weight buffer with shape [ne1, ne0] (ne1 = 1 for a vector).
 * Absent: NULL when optional, an error when required. Vectors in other formats than F32
 * are converted to an owned F32 copy (backends take F32 norms and biases). */
pl_status pl_load_tensor(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1, bool required,
                         pl_buf **out);
/* A 3-D tensor [ne0, ne1, ne2] (GGUF order; a stack of ne2 matrices, such as the experts of
 * a mixture-of-experts layer) as one weight buffer of shape [ne1*ne2, ne0]: matrix e is rows
 * [e*ne1, (e+1)*ne1). Otherwise as pl_load_tensor (which is this with ne2 = 1). */
pl_status pl_load_tensor3(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                          bool required, pl_buf **out);

/* The layers to load, from the opts, for a model of n_layer: sets the info's layer_first,
 * layer_last, has_embed and has_head (as opts.ends asks), or fails for a range outside
 * [0, n_layer) or one that loads nothing. */
pl_status pl_load_layer_range(pl_loader *ld, int n_layer);

/* The tensor `name` of ne1 rows of ne0, whose rows come in groups of `chunk` that belong
 * in turn to n_parts outputs (group g goes to part g % n_parts): each part becomes its
 * own weight buffer of ne1 / n_parts rows, an owned copy of those rows in file order. */
pl_status pl_load_tensor_split(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1,
                               int64_t chunk, int n_parts, pl_buf **outs);

/* What a family's state will hold, for pl_check_state_size: bytes per position of the
 * caches of the loaded layers (ctx_tok) and of the largest single cache buffer (ctx_row),
 * bytes of activations per batch token (act_tok) and of the widest activation buffer
 * (act_row), and bytes that depend on neither (recurrent states, snapshots: fixed, the
 * largest of those buffers fixed_buf). */
typedef struct {
    double ctx_tok, ctx_row, act_tok, act_row, fixed, fixed_buf;
} pl_state_size;

/* Refuse a context or batch whose buffers cannot be had, before allocating them: every
 * buffer must fit the backend's largest one, and all of them the memory the weights leave.
 * One line saying which limit and the largest value that fits. */
pl_status pl_check_state_size(const pl_state *s, const pl_state_size *z);

/* The core of an attention block: RoPE (rp, its n_heads ignored) on q's ap->n_head and
 * k's ap->n_head_kv heads at positions pos0.., k and v into the layer's caches kc and vc,
 * then causal attention of q over them into att. Ends the caller's fusion group
 * (pl_be_fuse) after the cache stores, before the attention. */
pl_status pl_rope_attend(pl_buf *q, pl_buf *k, const pl_buf *v, pl_buf *kc, pl_buf *vc, int64_t n,
                         int64_t pos0, const pl_rope_params *rp, const pl_attn_params *ap,
                         pl_buf *att);
/* pl_rope_attend over columns of separate sequences in cache slots (backend.h *_cols):
 * row i at its slot and position from cols, n_ctx rows a slot, positions below max_keys. */
pl_status pl_rope_attend_cols(pl_buf *q, pl_buf *k, const pl_buf *v, pl_buf *kc, pl_buf *vc,
                              int64_t n, const pl_buf *cols, int64_t n_ctx, int64_t max_keys,
                              const pl_rope_params *rp, const pl_attn_params *ap, pl_buf *att);

/* The dense SwiGLU feed-forward of the normed rows xn[0..n): x += down(silu(gate xn) *
 * (up xn)), the residual add fused; gate and up are scratch of n rows of n_ff. Ends the
 * caller's fusion group (pl_be_fuse) after the SwiGLU, before the down projection. */
pl_status pl_swiglu_ffn(const pl_buf *w_gate, const pl_buf *w_up, const pl_buf *w_down,
                        const pl_buf *xn, int64_t n, int64_t n_ff, pl_buf *gate, pl_buf *up,
                        pl_buf *x);

/* The final RMSNorm and output matrix into the state's logits: of x rows 0..n-1
 * (all_rows) or of row n-1 only; xb is scratch of at least n rows of n_embd. */
pl_status pl_run_head(pl_state *s, const pl_buf *norm, const pl_buf *output, float eps, pl_buf *xb,
                      int64_t n, bool all_rows);

/* What every decoder has at its two ends: n_vocab from token_embd.weight, n_blocks checked
 * against the tensor count, the layer range of n_layer (pl_load_layer_range), then the
 * ends it asks for: tok_embd for the embedding (or a tied head), out_norm and output
 * (tok_embd when the file has no output.weight) for the head. What is not needed stays
 * NULL. */
pl_status pl_load_ends(pl_loader *ld, int n_embd, int n_blocks, int n_layer, int *n_vocab,
                       pl_buf **tok_embd, pl_buf **out_norm, pl_buf **output);

/* Replace control characters in a string from the file, so an error message that quotes
 * it stays one line. */
void pl_load_printable(char *s);

#endif
