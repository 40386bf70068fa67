/* gpu_internal.h - what the GPU backend's files share: its buffers, the queue of recorded
 * ops, and the caches of kernels and bindings.
 *
 * How a token runs: every backend.h op appends an `op` to the queue (gpu_backend.c). When
 * the host needs bytes (read) or writes some (write), the queue is flushed: the fusion pass
 * (gpu_fuse.c) merges neighbouring ops into fused kernels, the encoder (gpu_encode.c) turns
 * each live op into dispatches, all recorded into one command buffer, submitted once. A
 * fused kernel always writes every buffer the ops it replaces would have written, so no
 * buffer is ever left stale, whatever the host reads later. */
#ifndef PL_GPU_GPU_INTERNAL_H
#define PL_GPU_GPU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "device.h"
#include "gpu.h"
#include "wgsl_gen.h"

/* A backend buffer: an activation (one GPU buffer) or a weight (quants and scales per
 * part of at most one binding's worth of rows). */
typedef struct gbuf_s {
    pl_buf h;
    pl_gpu_buf *buf; /* activations, and F32/F16 weights of one part */
    uint64_t bytes;
    uint64_t off; /* a view (h.view): where its rows start in the parent's buf (not owned) */
    /* weights */
    pl_gpu_wtype wt;
    uint32_t parts, rows_per_part;
    pl_gpu_buf *q[PL_GEMV_MAX_PARTS], *s[PL_GEMV_MAX_PARTS];
    const void *host; /* the file's bytes (valid while the buffer lives) */
    /* small I32 buffers (sampled ids): a copy made at each submit that wrote them, so a
     * read need not wait for work recorded later (gpu_backend.c, read) */
    int64_t wflush; /* submit that last wrote it (-1: the host wrote it since) */
    pl_gpu_buf *snap[2];
    int64_t snap_flush[2];
    /* q/k/v fusion (gpu_fuse.c): on the q weight, its rows followed by k's and v's (and a
     * fourth projection's, merge_u, or NULL) in one weight made at first use; on the others,
     * the q weight that holds such a copy */
    const struct gbuf_s *merge_k, *merge_v, *merge_u;
    struct gbuf_s *merged, *merged_owner;
} gbuf;

typedef enum {
    OP_EMBED,
    OP_NORM,
    OP_MATMUL,
    OP_ADD,
    OP_ROPE,
    OP_STORE,
    OP_ATTN,
    OP_SWIGLU,
    OP_ARGMAX,
    OP_TOPK,
    OP_COPY,
    OP_SOFTMAX,
    OP_TOPK_ROWS,
    OP_MATMUL_ID,
    OP_MOE_COMBINE,
    OP_SIGMOID_MUL,
    OP_SSM_CONV,
    OP_DELTA_RULE,
} op_kind;

/* One recorded op. Fields by kind:
 * EMBED  a table, b ids, out, n            NORM   a x, b w, out, rows, cols, eps (fused
 *                                          gate: c z, out2 silu(z) * out, gpu_fuse.c)
 * MATMUL a w, b x, c bias, out, n, acc     ADD/SWIGLU a, b, out, count
 * ROPE   out x, n, pos0, rope              STORE  a src, out cache, n, pos0
 * ATTN   a q, b k cache, c v cache, out, n, pos0, attn
 *        (the *_cols ops: seq the columns' slots and positions, ctx the slot rows, k the
 *        positions below which they are: backend.h)
 * ARGMAX a x, out ids, rows, dst0          TOPK   a x, out ids, vals, row (rows), k
 * COPY   a src, src0, count, out, dst0
 * SOFTMAX a x, out, rows, cols             TOPK_ROWS a x, out ids, vals, rows, cols, k
 * MATMUL_ID a w, b x, c ids, out, n, k n_exp, count n_used, acc x_shared
 * MOE_COMBINE a y, b wts, out, n, count n_used, acc
 * SIGMOID_MUL a x, b g, out, rows, cols, k g_cols, acc
 * SSM_CONV a x, b w, out, out2 state, out3 snaps (or NULL), n
 * DELTA_RULE a qkv, b a, c b, d ssm_a, e dt_bias, out, out2 state, out3 snaps, n, delta */
typedef struct op_s {
    op_kind kind;
    bool dead;      /* absorbed into a fused op */
    unsigned fmask; /* PL_FUSE_* kinds its group asks for (pl_be_fuse), 0: none */
    uint32_t group; /* the fusion group it was issued in */
    const gbuf *a, *b, *c, *d, *e;
    gbuf *out, *vals, *out2, *out3;
    const gbuf *seq; /* ROPE/STORE/ATTN of columns of separate sequences (backend.h *_cols) */
    int64_t n, pos0, rows, cols, count, k, src0, dst0, ctx;
    float eps;
    bool acc;
    pl_rope_params rope;
    pl_attn_params attn;
    pl_delta_params delta;
    /* fusions (gpu_fuse.c) */
    struct {
        const gbuf *x, *w; /* MATMUL: read x normalised with w instead of b */
        float eps;
        gbuf *out; /* ... and also store the normalised x there (or NULL) */
    } fnorm;
    struct {
        const gbuf *w_up; /* MATMUL: gate/up with SwiGLU into out */
        gbuf *gate_out, *up_out;
    } fgate;
    struct {
        const gbuf *nw; /* ROPE: per-head norm weight first */
        float eps;
        gbuf *kc;      /* then store into this K cache */
        const gbuf *v; /* and v into the V cache */
        gbuf *vc;
    } frope;
    const struct op_s *pair; /* ROPE: the next RoPE (k), done in the same dispatch */
    bool fsoftmax;           /* TOPK_ROWS: vals get the softmax of the k values (ROUTER) */
    struct {
        const gbuf *w, *x; /* TOPK_ROWS: also out[r] = w . x[r] (an F32 1-row weight), */
        gbuf *out;         /* the MoE shared expert's gate (SHARED_GATE) */
    } fshgate;
    struct {
        const gbuf *y, *g; /* MOE_COMBINE: then out += y * sigmoid(g) per row (COMBINE_SHARED) */
    } fcomb;
    struct {
        const gbuf *w;      /* MATMUL: q, k and v (and u) weights in one; rows past */
        gbuf *y1, *y2, *y3; /* split[0], split[1] (and split[2]) go to y1, y2 (and y3) */
        uint32_t split[3];  /* split[2] 0: three projections */
    } fqkv;
} op;

/* A cached kernel: a family and its parameter bytes. */
typedef struct kcache_entry {
    int family;
    unsigned char params[128]; /* pl_gpu_get_kernel refuses bigger parameter structs */
    pl_gpu_kernel *k;
    struct kcache_entry *next;
} kcache_entry;

#define BIND_MAX 12

/* A cached binding: kernel + buffer ranges. */
typedef struct bcache_entry {
    const pl_gpu_kernel *k;
    int n;
    pl_gpu_ref refs[BIND_MAX];
    pl_gpu_bind *b;
    struct bcache_entry *next;
} bcache_entry;

/* Rows per workgroup and threads of the GEMV, per weight type. */
typedef struct {
    uint32_t threads, rows, subgroups, sg_rows, unroll; /* see pl_gemv_params */
} gemv_tune;

/* GEMV tune classes: the four GPU weight types with float activations, then Q4_0 and Q8_0
 * with quantised activations (q8x): each has its own built-in and tuned shapes. */
#define PL_GPU_TUNE_CLASSES 6

/* The GEMV shape tuned for one weight shape (rows x cols of a tune class). */
typedef struct {
    int wt; /* the tune class */
    uint32_t rows, cols;
    gemv_tune t;
} shape_tune;

typedef struct {
    pl_backend be; /* first: the seam's view */
    pl_gpu *g;
    pl_gpu_backend_opts o;
    const pl_gpu_info *info;
    gemv_tune tune[PL_GPU_TUNE_CLASSES]; /* built-in GEMV shape by tune class */
    shape_tune *shapes;                  /* tuned per weight shape at its first use (selftest.c) */
    int n_shapes, cap_shapes;
    int tune_fixed;  /* opts.gemv gave the shape: no tuning */
    int in_selftest; /* the self-test's small weights are not worth tuning */
    int q8_preload;  /* q8x GEMVs load every row's block first (opts.q8_preload) */
    int gemv_xpre;   /* which q8x GEMVs read a pre-quantised x: PL_GPU_XPRE_* */
    int topk_rank;   /* opts.topk_rank: the router's top-k by rank (wgsl_moe.c) */
    int moe_shgate;  /* opts.moe_shgate: the shared expert's gate row in the top-k */
    int moe_comb;    /* opts.moe_comb: the gated shared expert added by the combine */
    int fa;          /* opts.fa: attention of many rows through the prefill kernel */
    int dr_chunk;    /* opts.dr_chunk: prefill's delta rule in staged chunks (wgsl_ssm.c) */
    int gemv_cols;   /* opts.gemv_cols resolved: most columns a q8x GEMV workgroup (-1: one; 0: per
                        type) */
    int gemv_cols_acc; /* opts.gemv_cols_acc resolved (0: per type) */
    int gemm_min;      /* opts.gemm_min_cols resolved: the GEMM above this many columns */
    uint32_t exact_min, exact_max; /* opts.gemm_exact resolved (min > max: never) */
    int submit_every; /* opts.submit_every resolved: dispatches a command buffer of a flush
                         that a read waits on (<= 0: one command buffer) */
    /* prefill GEMM (gpu_encode_gemm.c): its tile (tm, tn, rm, rn, bk, version of
     * pl_gemm_params; the built-in one, or opts.gemm "tm,tn,rm,rn,bk[,version]" for every
     * shape: gemm_fixed), gemm_off: never (opts.gemm "off"), and the scratch buffers of the
     * pre-quantised columns */
    uint32_t gemm_tile[6];
    int gemm_off, gemm_fixed;
    /* the prefill GEMM's subgroup-matrix version (5-7; 0: the portable kernel) and the
     * adapter's config it runs on (info->smx[smx_cfg]) */
    int smx, smx_cfg;
    pl_gpu_buf *gemm_xq, *gemm_xd, *gemm_grp;
    /* the op queue */
    op *ops;
    int n_ops, cap_ops;
    /* fusion requests (pl_be_fuse): the open group's kinds and number, and the requested
     * kinds that found no ops of their pattern (gpu_fuse.c) */
    unsigned fuse_mask;
    uint32_t fuse_group;
    uint64_t fusions_missed;
    char last_missed[96];
    /* per-dispatch arguments: host copy, written before each submit */
    pl_gpu_buf *args;
    unsigned char *args_host;
    uint32_t args_used, args_cap, args_stride;
    /* caches */
    kcache_entry *kernels[64];
    bcache_entry *binds[1024];
    /* the RoPE table of the last rope configuration */
    pl_gpu_buf *rope_tab;
    uint32_t rope_positions, rope_dim;
    float rope_base, rope_scale;
    const void *rope_factors;
    /* scratch: attention partials, top-k pairs, read back */
    pl_gpu_buf *partials, *pairs, *readback;
    int64_t flush_no; /* submits made by flush() */
    /* profiling (gpu_profile.c): the flush with a read number profile_at is profiled */
    const char *profile_path;
    int64_t profile_at, n_reads;
    double last_read_t;
    /* a pass prepared before its input arrives (pl_be_prepare): its command buffers, each
     * with the argument bytes to write before it, recorded but not submitted (holding:
     * flush_parts keeps them instead of submitting); the input its run writes first and
     * the reads it then fills (read i at held_at[i] of the read-back buffer) */
    int holding, prepared;
    struct held_cmd {
        pl_gpu_cmd *cmd;
        unsigned char *args;
        size_t n_args;
    } * held;
    int n_held, cap_held;
    gbuf *held_input;
    pl_read_range held_reads[PL_READ_MANY_MAX];
    uint64_t held_at[PL_READ_MANY_MAX], held_bytes;
    int n_held_reads;
    /* buffers replaced while a recording still refers to them, freed after the submit */
    pl_gpu_buf *retired[16];
    int n_retired;
} gpu_backend;

/* Whether matmuls with weight w quantise their activations (backend.h act_q8): only for
 * weights that are Q4_0 or Q8_0 in the file, as on the CPU. */
static inline int pl_gpu_q8x(const gpu_backend *gb, const gbuf *w) {
    return gb->be.act_q8 && (w->h.type == PL_TYPE_Q4_0 || w->h.type == PL_TYPE_Q8_0) &&
           (w->wt == PL_GW_Q4_0 || w->wt == PL_GW_Q8_0);
}
static inline int pl_gpu_tune_class(const gpu_backend *gb, const gbuf *w) {
    return pl_gpu_q8x(gb, w) ? 4 + (w->wt == PL_GW_Q8_0) : (int)w->wt;
}

/* Kernel families (the kernel cache's keys). */
enum {
    F_GEMV,
    F_NORM,
    F_ROPE,
    F_COPY,
    F_ATTN,
    F_COMBINE,
    F_TOPK,
    F_EMBED,
    F_EW,
    F_SOFTMAX,
    F_MOE_COMBINE,
    F_SIGMOID_MUL,
    F_SSM_CONV,
    F_DELTA_RULE,
    F_GEMM,
    F_Q8PRE,
    F_MOE_GROUP,
    F_KV_Q8,
    F_ATTN_PREFILL,
    F_STORE_COLS,
};

/* gpu_encode.c: what the encoders share. A generator writes WGSL from its parameters. */
typedef pl_status (*pl_gpu_gen_fn)(const void *params, char **out);
/* The cached kernel of `family` built from params (a zero-padded struct of `size` bytes). */
pl_status pl_gpu_get_kernel(gpu_backend *gb, int family, const void *params, size_t size,
                            pl_gpu_gen_fn gen, const char *label, pl_gpu_kernel **out);
/* A fresh argument slot holding a, as a binding. */
pl_status pl_gpu_args_ref(gpu_backend *gb, pl_gpu_args a, pl_gpu_ref *ref);
/* Bind refs[0..n) (the args last) and dispatch `groups` workgroups of k. */
pl_status pl_gpu_run(gpu_backend *gb, const pl_gpu_kernel *k, pl_gpu_ref *refs, int n,
                     uint32_t groups);
static inline pl_gpu_ref pl_gpu_whole(const pl_gpu_buf *b) {
    return (pl_gpu_ref){(pl_gpu_buf *)b, 0, 0};
}
/* The binding of a backend buffer: all of it, or a view's rows. */
static inline pl_gpu_ref pl_gpu_at(const gbuf *b) {
    return (pl_gpu_ref){b->buf, b->off, b->h.view ? b->bytes : 0};
}
/* A power of two from lo up to hi, the first >= n. */
uint32_t pl_gpu_threads_for(uint64_t n, uint32_t lo, uint32_t hi);
/* The GEMV parameters of weight w with GEMV shape t (type, size, q8x, shape), mode STORE. */
void pl_gpu_gemv_base(const gpu_backend *gb, const gbuf *w, const gemv_tune *t, pl_gemv_params *p);
/* Append the bindings of matmul o's outputs after y, as the GEMV and the GEMM bind them:
 * the bias, the gate and up side outputs, the split's y1 and y2 (those o has). */
void pl_gpu_matmul_side_refs(const op *o, pl_gpu_ref *refs, int *n);
/* Append the bindings of w's quants (and scales) part by part at refs[*n]. */
void pl_gpu_weight_refs(const gbuf *w, pl_gpu_ref *refs, int *n);
/* Top-k of `rows` rows of `cols` values of x from row row0 into ids[dst0 + r * k ...] and,
 * if given, vals[r * k ...] (softmax: the softmax of each row's k values instead). */
bool pl_gpu_topk_by_rank(const gpu_backend *gb, const op *o);
pl_status pl_gpu_enc_topk(gpu_backend *gb, const gbuf *x, uint32_t cols, uint32_t row0,
                          uint32_t rows, uint32_t k, gbuf *ids, uint32_t dst0, gbuf *vals,
                          bool softmax);
/* A scratch buffer of at least `bytes` in *b, replacing (and retiring) a smaller one. */
pl_status pl_gpu_scratch(gpu_backend *gb, pl_gpu_buf **b, uint64_t bytes, const char *label);
/* gpu_encode_gemm.c: batches of more than PL_GPU_GEMM_MIN_COLS columns through q8x weights
 * go through the prefill GEMM (a Q8_0 pre-pass, then the tiled GEMM); fewer keep the
 * one-column-per-workgroup GEMV, bit-exact per column to decode (speculative verification
 * and the chain's frames rely on it). */
#define PL_GPU_GEMM_MIN_COLS 16
/* The delta rule of more columns than this runs in staged chunks (opts.dr_chunk): the
 * GEMM's bound, so decode and verify passes keep the same bits. */
#define PL_GPU_DR_MIN_COLS PL_GPU_GEMM_MIN_COLS
/* Whether matmul o can go through the GEMM (its weights, the scratch limits), in the
 * order of the one-column GEMV of gt threads (0: in order, pl_gemm_params.gt). */
int pl_gpu_gemm_fits(const gpu_backend *gb, const op *o, uint32_t gt);
/* Whether matmul o goes through the in-order GEMM (more than gemm_min columns, fits). */
int pl_gpu_gemm_applies(const gpu_backend *gb, const op *o);
/* Record the pre-pass (of pre_threads threads; 0: its own count) and the GEMM of matmul o
 * (gt: as pl_gpu_gemm_fits). */
pl_status pl_gpu_encode_gemm(gpu_backend *gb, const op *o, uint32_t gt, uint32_t pre_threads);
/* Record the Q8_0 pre-pass of n columns of x (cols values each; normalised with the norm
 * weight nw and eps if nw, the normalised x stored to xn if xn) into gb->gemm_xq/xd, in
 * workgroups of `threads` (0: by cols; the sum of squares' order follows them). */
pl_status pl_gpu_encode_q8pre(gpu_backend *gb, const gbuf *x, uint32_t cols, uint32_t n,
                              const gbuf *nw, float eps, const gbuf *xn, uint32_t threads);
/* The MoE's gathered expert matmul o (OP_MATMUL_ID) of more than PL_GPU_GEMM_MIN_COLS
 * tokens through q8x weights: the pre-pass of x, the grouping of the slots by expert
 * (pl_wgsl_moe_group) and one GEMM over every expert's pairs. */
int pl_gpu_gemm_id_applies(const gpu_backend *gb, const op *o);
pl_status pl_gpu_encode_gemm_id(gpu_backend *gb, const op *o);
/* The GEMM's parameters for weight w over n columns (rows, cols, type, the tile pinned for
 * its shape and n) in STORE mode, or GATE_UP if gate_up. */
void pl_gpu_gemm_base(const gpu_backend *gb, const gbuf *w, int gate_up, uint32_t n,
                      pl_gemm_params *p);
/* v5-7 (subgroup matrices): fill p's matrix shape and subgroup size from the adapter. */
void pl_gpu_gemm_smx_shape(const gpu_backend *gb, pl_gemm_params *p);
/* pl_gpu_open_opts.smx for opts.smx: take the feature only where a version may run. */
int pl_gpu_smx_wanted(int opt);
/* At open: gb->smx and gb->smx_cfg from opts.smx and what the device took. */
pl_status pl_gpu_smx_choose(gpu_backend *gb);
/* gpu_backend.c: what is recorded out with its arguments (written first): submitted, or,
 * while a pass is being prepared, kept for its run. Argument slots start again at 0. */
pl_status pl_gpu_end_chunk(gpu_backend *gb);

/* gpu_encode_moe.c / gpu_encode_ssm.c: the MoE and Gated DeltaNet ops. */
pl_status pl_gpu_encode_moe(gpu_backend *gb, op *o);
pl_status pl_gpu_encode_ssm(gpu_backend *gb, op *o);

/* gpu_fuse.c: merge ops of the queue (no-op when fusion is off). */
void pl_gpu_fuse(gpu_backend *gb);
/* gpu_encode.c: record op i into the open command buffer. */
pl_status pl_gpu_encode_op(gpu_backend *gb, op *o);
/* gpu_encode.c: drop cached bindings that use buffer b (before it is freed). */
void pl_gpu_forget_buf(gpu_backend *gb, const pl_gpu_buf *b);
void pl_gpu_caches_free(gpu_backend *gb);
/* gpu_profile.c: append the profile of the queued ops to `path`. */
void pl_gpu_profile(gpu_backend *gb, const char *path, double step_seconds);
/* The GEMV shape for weight w: tuned for its shape, else the built-in one of its type. */
const gemv_tune *pl_gpu_tune_for(const gpu_backend *gb, const gbuf *w);
/* gpu_encode.c: seconds per GEMV of w (plain, into scratch) with shape t: the median of 5
 * differences of 60 and 10 GEMVs per submit, after a warm-up. */
double pl_gpu_time_gemv(gpu_backend *gb, const gbuf *w, gemv_tune t, pl_gpu_buf *x, pl_gpu_buf *y);
/* gpu_fuse.c: free the merged q/k/v weight that involves weight b, if any. */
void pl_gpu_drop_merged(gpu_backend *gb, gbuf *b);
/* gpu_backend.c: keep b alive until the next submit, then free it. */
void pl_gpu_retire(gpu_backend *gb, pl_gpu_buf *b);

/* Attention of at least this many query rows (and opts.fa not -1) goes through the prefill
 * kernel (wgsl_attn_prefill.c), one dispatch for all rows; fewer keep the decode kernel,
 * which is bit-exact per row to decode: a verify pass of 1 + 15 drafts (16 rows, the GEMM's
 * PL_GPU_GEMM_MIN_COLS too) must give decode's bits, so the threshold is 17. */
#define PL_GPU_FA_MIN_ROWS 17

/* Which q8x GEMVs read x quantised once by a pre-pass (opts.gemv_xpre: 0 auto, -1 none, 1
 * normed, 2 all). */
enum { PL_GPU_XPRE_NONE, PL_GPU_XPRE_NORMED, PL_GPU_XPRE_ALL, PL_GPU_XPRE_AUTO };
#define PL_GPU_XPRE_MIN_COLS 4096
int pl_gpu_xpre_applies(int mode, int norm, uint32_t cols);

#endif
