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

/* y as the GEMV defines it, for n vectors x[n][cols] -> y[n][rows] (y is read for
 * PL_GEMV_ACCUM). mats: 1, or 2 for gate/up. mag (optional, [n][rows]): sum of |terms| of
 * each output's dot products. */
void pl_gpu_ref_gemv(const pl_gemv_params *p, const pl_gpu_ref_mat *mats, uint32_t n,
                     const float *x, const float *norm_w, const float *bias, float *y, double *mag);

/* rows rows of p->cols values; y may be x. */
void pl_gpu_ref_rmsnorm(const pl_rmsnorm_params *p, uint32_t rows, const float *x, const float *w,
                        float *y);

/* The (cos, sin) table of the RoPE kernel: f32[positions][rot_dim/2][2], angle
 * pos * freq_scale * base^(-2i/rot_dim) / factors[i] (factors may be NULL), in double. */
void pl_gpu_rope_table(uint32_t positions, uint32_t rot_dim, float base, float freq_scale,
                       const float *factors, float *tab);

/* RoPE in place on n rows at positions pos0.., with the kernel's fusions: norm weight nw,
 * K cache kc and V cache vc (raw f16 bits or f32 as p->cache_f16 says) from v. */
void pl_gpu_ref_rope(const pl_rope_params_gpu *p, const float *tab, uint32_t pos0, uint32_t n,
                     float *x, const float *nw, void *kc, const float *v, void *vc);

/* The copy kernel on raw words (src and dst as the shader sees them). */
void pl_gpu_ref_copy(const pl_copy_params *p, const void *src, void *dst, uint32_t src0,
                     uint32_t dst0, uint32_t count);

/* Attention of query rows row0..row0+nrows-1 (row r at position pos0 + r, seeing cache
 * positions 0..pos0+r): softmax(q.k * scale) . v per head, into out rows. */
void pl_gpu_ref_attn(const pl_attn_params_gpu *p, const float *q, const void *kc, const void *vc,
                     uint32_t pos0, uint32_t row0, uint32_t nrows, float *out);

/* The k best of x[0..n) in order (larger first, equal values lower index first); NaNs are
 * never picked and missing entries are (-inf, 0xffffffff). */
void pl_gpu_ref_topk(const float *x, uint32_t n, uint32_t k, float *vals, uint32_t *ids);

/* Rows ids[0..n) of an embedding table (parts as in the GEMV); bad ids give zeros. */
void pl_gpu_ref_embed(const pl_embed_params *p, const pl_gpu_ref_mat *table, const int32_t *ids,
                      uint32_t n, float *x);

/* The element-wise op over count values. */
void pl_gpu_ref_ew(pl_ew_op op, const float *a, const float *b, uint32_t count, float *out);

/* ---- the MoE and Gated DeltaNet kernels (kernel_ref_moe_ssm.c), as backend.h defines
 * their ops; every sum in double ---- */

/* Softmax of each of rows rows of cols values. out may be x. */
void pl_gpu_ref_softmax(const float *x, uint32_t rows, uint32_t cols, float *out);

/* The gathered expert GEMV: p as the kernel's (ids set, rows = rows per expert, parts of the
 * stacked weight), mat the whole stacked weight (two: gate and up in GATE_UP); slots = n * n_used;
 * y[slots][rows]; mag (optional) as in pl_gpu_ref_gemv. A bad expert id gives a zero row. */
void pl_gpu_ref_matmul_id(const pl_gemv_params *p, const pl_gpu_ref_mat *mat, const int32_t *ids,
                          uint32_t slots, const float *x, float *y, double *mag);

/* out[i, c] (+)= sum_j wts[i * n_used + j] * y[i * n_used + j, c], for i < n, c < cols. */
void pl_gpu_ref_moe_combine(const float *y, const float *wts, uint32_t n, uint32_t n_used,
                            uint32_t cols, int acc, float *out);

/* out[r, c] (+)= x[r, c] * sigmoid(g[r, g_cols == 1 ? 0 : c]). out may be x unless acc. */
void pl_gpu_ref_sigmoid_mul(const float *x, const float *g, uint32_t rows, uint32_t cols,
                            uint32_t g_cols, int acc, float *out);

/* Conv1d + SiLU: w [channels][k], state [k-1][channels] (updated), x and out [n][channels],
 * snaps NULL or [n * (k-1)][channels]. */
void pl_gpu_ref_ssm_conv(const float *x, const float *w, float *state, uint32_t n,
                         uint32_t channels, uint32_t k, float *snaps, float *out);

/* The gated delta rule over n tokens (backend.h): p's n_k, n_v, d_k, d_v and eps; state
 * [n_v][d_k * d_v] updated; snaps NULL or [n * n_v][d_k * d_v]; out [n][n_v * d_v]. */
void pl_gpu_ref_delta_rule(const pl_delta_rule_params *p, const float *qkv, const float *a,
                           const float *b, const float *ssm_a, const float *dt_bias, float *state,
                           uint32_t n, float *snaps, float *out);

#endif
