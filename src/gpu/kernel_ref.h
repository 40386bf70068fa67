/* kernel_ref.h - the CPU reference of every generated kernel family, on the same buffer
 * layouts and with the same parameter structs (wgsl_gen.h). The unit tests and the
 * load-time self-test compare each GPU kernel against these.
 *
 * References accumulate in double and can report, per output, the sum of the absolute
 * values of the terms (`mag`): a GPU result in f32 is right when it is within a few ulps of
 * that magnitude, whatever order it summed in. */
#ifndef PL_GPU_KERNEL_REF_H
#define PL_GPU_KERNEL_REF_H

#include <stdint.h>

#include "wgsl_gen.h"

/* Value (row, col) of a matrix in GPU layout (q: quants or values, s: packed f16 scales). */
float pl_gpu_ref_weight(pl_gpu_wtype t, const void *q, const uint16_t *s, uint32_t cols,
                        uint64_t row, uint32_t col);

/* One matrix of a GEMV: its parts' quants and scales (scales NULL for F32/F16). */
typedef struct {
    const void *q[PL_GEMV_MAX_PARTS];
    const uint16_t *s[PL_GEMV_MAX_PARTS];
} pl_gpu_ref_mat;

/* y as the GEMV defines it (y is read for PL_GEMV_ACCUM). mats: 1, or 2 for gate/up.
 * mag (optional, rows): sum of |terms| of each output's dot products. */
void pl_gpu_ref_gemv(const pl_gemv_params *p, const pl_gpu_ref_mat *mats, const float *x,
                     const float *norm_w, const float *bias, float *y, double *mag);

void pl_gpu_ref_rmsnorm(const pl_rmsnorm_params *p, const float *x, const float *w, float *y);

/* The (cos, sin) table of pl_rope_params: f32[ctx][rot_dim/2][2], angle pos * base^(-2i/rot). */
void pl_gpu_rope_table(uint32_t ctx, uint32_t rot_dim, float base, float *tab);

/* RoPE (+ q/k norm) of qkv at position pos: q into q_out, k and v into the caches. */
void pl_gpu_ref_rope(const pl_rope_params *p, const float *qkv, const float *tab, uint32_t pos,
                     const float *qn, const float *kn, float *q_out, uint32_t *kc, uint32_t *vc);

/* Attention of q over cache positions [0, n_kv): softmax(q.k * scale) . v per head. */
void pl_gpu_ref_attn(const pl_attn_params *p, const float *q, const uint32_t *kc,
                     const uint32_t *vc, uint32_t n_kv, float *out);

/* The k best of x[0..n) in order (larger first, equal values lower index first); NaNs are
 * never picked and missing entries are (-inf, 0xffffffff). */
void pl_gpu_ref_topk(const float *x, uint32_t n, uint32_t k, float *vals, uint32_t *ids);

/* Row id of an embedding table (parts as in the GEMV), times scale. */
void pl_gpu_ref_embed(const pl_embed_params *p, const pl_gpu_ref_mat *table, uint32_t id, float *x);

#endif
