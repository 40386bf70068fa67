/* wgsl_gen.h - WGSL kernels generated from C templates.
 *
 * Each kernel family is one function that writes WGSL text from a parameter struct: the
 * shape (baked in as constants), thread count, rows per workgroup, widths and fusions. One
 * source serves every device: the autotuner and the backend pick the parameters.
 * kernel_ref.h holds the CPU reference of every family on the same buffer layouts.
 *
 * Conventions of every generated kernel:
 * - entry point `main`; bindings are @group(0) @binding(0..n-1) in the order documented at
 *   each generator (that order is the pl_gpu_ref array given to pl_gpu_bind_new);
 * - the workgroup index is wid.x + wid.y * nwg.x (pl_gpu_dispatch's 2-D grid) and groups
 *   past the count do nothing;
 * - f16 data (block scales, F16 weights, the KV cache) stays packed two per u32 and is
 *   read with unpack2x16float: no shader-f16 is needed, and nothing accumulates in f16. */
#ifndef PL_GPU_WGSL_GEN_H
#define PL_GPU_WGSL_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

/* Weight layouts on the GPU (repack.h makes them):
 * F32  : row-major f32.
 * F16  : row-major f16, two per u32 (element e is half e&1 of word e>>1).
 * Q4_0 : quants: 16 bytes per 32-weight block (byte j: low nibble weight j, high nibble
 *        weight j+16; value = (nibble - 8) * scale); scales: f16, two per u32, by block.
 * Q8_0 : quants: 32 signed bytes per block; scales as Q4_0.
 * Blocks are numbered row * (cols / 32) + column block, so a row is a contiguous stripe. */
typedef enum { PL_GW_F32, PL_GW_F16, PL_GW_Q4_0, PL_GW_Q8_0 } pl_gpu_wtype;

#define PL_GEMV_MAX_PARTS 4

typedef enum {
    PL_GEMV_STORE,   /* y = W x (+ bias) */
    PL_GEMV_ACCUM,   /* y += W x: output projections add into the residual */
    PL_GEMV_GATE_UP, /* y = silu(Wg x) * (Wu x): both FFN projections in one sweep */
} pl_gemv_mode;

/* Cooperative GEMV: a workgroup of `threads` sweeps `rows_per_wg` rows together, thread t
 * taking blocks t, t+threads, ... so each read of a row is a contiguous stripe.
 * Bindings: 0 x (f32[cols]), 1 y (f32[rows]), then for each matrix (gate then up in
 * GATE_UP) and each part p: quants_p (and scales_p for Q4_0/Q8_0); then the norm weight
 * f32[cols] if `norm`; then the bias f32[rows] if `bias`.
 * Parts: a matrix too big for one binding is cut into `parts` row ranges of
 * `rows_per_part` rows (a multiple of rows_per_wg), each bound separately. */
typedef struct {
    pl_gpu_wtype type;
    uint32_t rows, cols;
    uint32_t threads;     /* power of two, 8..1024 */
    uint32_t rows_per_wg; /* 1..8 */
    pl_gemv_mode mode;
    int norm;  /* fused RMSNorm of x: x * (1/sqrt(mean(x^2) + eps)) * norm_weight */
    float eps;
    int bias;
    uint32_t parts, rows_per_part; /* parts 1 (rows_per_part ignored) .. PL_GEMV_MAX_PARTS */
    int subgroups; /* reduce with subgroupAdd (needs the subgroups feature) */
} pl_gemv_params;

/* Workgroups of one dispatch of this GEMV. */
uint32_t pl_gemv_groups(const pl_gemv_params *p);
/* Number of bindings the generated GEMV declares. */
int pl_gemv_bindings(const pl_gemv_params *p);

/* RMSNorm, one workgroup: y = x * (1/sqrt(mean(x^2) + eps)) * w.
 * Bindings: 0 x f32[n], 1 y f32[n], 2 w f32[n]. */
typedef struct {
    uint32_t n, threads;
    float eps;
} pl_rmsnorm_params;

/* Per-token parameters every kernel that needs them reads from one uniform buffer. */
typedef struct {
    uint32_t pos;      /* position of the token being decoded */
    uint32_t n_kv;     /* positions in the cache after writing this one (pos + 1) */
    uint32_t n_splits; /* attention splits over the cache (pl_attn_splits) */
    uint32_t pad;
} pl_gpu_step;

/* RoPE, optional per-head RMSNorm of q and k (Qwen3), and the K/V cache store, one
 * workgroup per head: groups 0..n_head-1 rotate q into q_out, the next n_kv_head groups
 * rotate k and write it with v into the f16 caches at position step.pos.
 * Bindings: 0 qkv f32[(n_head + 2 n_kv_head) head_dim] (q, then k, then v), 1 q_out
 * f32[n_head head_dim], 2 k cache, 3 v cache (u32[n_kv_head][ctx][head_dim / 2]), 4 rope
 * table f32[ctx][rot_dim / 2][2] (cos, sin), 5 step (uniform), then if qk_norm: 6 q norm
 * weight f32[head_dim], 7 k norm weight f32[head_dim]. */
typedef struct {
    uint32_t n_head, n_kv_head, head_dim, rot_dim, ctx;
    int neox;    /* rotate pairs (i, i + rot_dim/2); else adjacent pairs (2i, 2i+1) */
    int qk_norm; /* RMSNorm of each q and k head before RoPE */
    float eps;
    uint32_t threads;
} pl_rope_params;

/* Split-K flash-decoding attention over the f16 cache. Workgroup (head h, split s) covers
 * cache positions [s * chunk, min(n_kv, (s+1) * chunk)); with one split it writes the
 * normalised output, else (max, sum, unnormalised acc[head_dim]) per (h, s) for
 * pl_wgsl_attn_combine. Bindings: 0 q f32[n_head head_dim], 1 k cache, 2 v cache, 3 out
 * f32[n_head head_dim], 4 partials f32[n_head][max_splits][head_dim + 2], 5 step. */
typedef struct {
    uint32_t n_head, n_kv_head, head_dim, ctx;
    uint32_t chunk;   /* positions per split (<= 1024) */
    uint32_t threads; /* power of two */
    float scale;      /* 1/sqrt(head_dim) unless the model says otherwise */
} pl_attn_params;

/* Splits of the cache for n_kv positions. */
uint32_t pl_attn_splits(const pl_attn_params *p, uint32_t n_kv);
/* Merge the splits: one workgroup per head. Bindings: 0 partials, 1 out, 2 step. */
typedef struct {
    uint32_t n_head, head_dim, ctx, chunk, threads;
} pl_attn_combine_params;

/* Top-k (k = 1 is argmax) with ties broken towards the lower index, in two stages.
 * Stage 1 (pairs_in = 0): workgroup g takes values [g * chunk, ...) of f32[n] and writes its
 * k best as (value, index) pairs; stage 2 (pairs_in = 1): one workgroup reads n pairs and
 * writes the k best, in order, as pairs; `ids_out` also writes the indices alone into a u32
 * buffer (the next token's id for the embedding kernel).
 * Bindings: 0 input, 1 output pairs (vec2<u32>: bitcast value, index), then 2 ids u32[k]
 * if ids_out. */
typedef struct {
    uint32_t n, k, chunk, threads;
    int pairs_in, ids_out;
} pl_topk_params;

uint32_t pl_topk_groups(const pl_topk_params *p);

/* Embedding: x = row `id` of the table, dequantised, times `scale` (1 for most models),
 * with the id read from a u32 buffer on the GPU. Bindings: 0 ids u32[], 1 x f32[cols], then
 * the table's quants_p (and scales_p) for each part. `slot` picks ids[slot]. */
typedef struct {
    pl_gpu_wtype type;
    uint32_t rows, cols, threads;
    uint32_t parts, rows_per_part;
    uint32_t slot;
    float scale;
} pl_embed_params;

/* Each generator returns malloc'd WGSL in *out, or fails on parameters it cannot build. */
pl_status pl_wgsl_gemv(const pl_gemv_params *p, char **out);
pl_status pl_wgsl_rmsnorm(const pl_rmsnorm_params *p, char **out);
pl_status pl_wgsl_rope(const pl_rope_params *p, char **out);
pl_status pl_wgsl_attn(const pl_attn_params *p, char **out);
pl_status pl_wgsl_attn_combine(const pl_attn_combine_params *p, char **out);
pl_status pl_wgsl_topk(const pl_topk_params *p, char **out);
pl_status pl_wgsl_embed(const pl_embed_params *p, char **out);

#endif
