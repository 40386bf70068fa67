/* kernel_ref.c - CPU references of the GPU kernels (see kernel_ref.h). Written for clarity:
 * plain loops over the math, double accumulation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../format/quant.h"
#include "kernel_ref.h"
#include "repack.h"

/* Integer quant (row, col) of a Q4_0 (nibble - 8) or Q8_0 matrix in GPU layout, and its
 * block's scale in *scale. */
static int ref_quant(pl_gpu_wtype t, const void *q, const uint16_t *s, uint32_t cols, uint64_t row,
                     uint32_t col, float *scale) {
    uint64_t blk = row * (cols / 32) + col / 32;
    uint32_t j = col % 32;
    *scale = pl_f16_to_f32(s[blk]);
    if (t == PL_GW_Q8_0) return ((const int8_t *)q)[blk * 32 + j];
    uint8_t byte = ((const uint8_t *)q)[blk * 16 + j % 16];
    return (j < 16 ? (byte & 15) : (byte >> 4)) - 8;
}

float pl_gpu_ref_weight(pl_gpu_wtype t, const void *q, const uint16_t *s, uint32_t cols,
                        uint64_t row, uint32_t col) {
    switch (t) {
    case PL_GW_Q4_0:
    case PL_GW_Q8_0: {
        float d;
        int v = ref_quant(t, q, s, cols, row, col, &d);
        return (float)v * d;
    }
    case PL_GW_F16: return pl_f16_to_f32(((const uint16_t *)q)[row * cols + col]);
    case PL_GW_F32:
    default: return ((const float *)q)[row * cols + col];
    }
}

/* The part holding matrix row `row` (parts of rows_per_part rows), and the row within it. */
static uint32_t mat_part(const pl_gemv_params *p, uint32_t row, uint32_t *local) {
    uint32_t part = p->parts > 1 ? row / p->rows_per_part : 0;
    *local = row - part * (p->parts > 1 ? p->rows_per_part : 0);
    return part;
}

/* Weight (row, col) of a matrix cut into parts. */
static float mat_weight(const pl_gemv_params *p, const pl_gpu_ref_mat *m, uint32_t row,
                        uint32_t col) {
    uint32_t local, part = mat_part(p, row, &local);
    return pl_gpu_ref_weight(p->type, m->q[part], m->s[part], p->cols, local, col);
}

static double rms_inv(const float *x, uint32_t n, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    return 1.0 / sqrt(ss / n + eps);
}

/* Output r of a GEMV from its dot products (acc[1]: the up matrix's in GATE_UP). */
static void store_out(const pl_gemv_params *p, const double acc[2], const float *bias, uint32_t r,
                      float *yv) {
    switch (p->mode) {
    case PL_GEMV_STORE: yv[r] = (float)(acc[0] + (p->bias ? bias[r] : 0.0)); break;
    case PL_GEMV_ACCUM: yv[r] = (float)(yv[r] + acc[0] + (p->bias ? bias[r] : 0.0)); break;
    case PL_GEMV_GATE_UP: yv[r] = (float)(acc[0] / (1.0 + exp(-acc[0])) * acc[1]); break;
    }
}

/* Integer quant (row, col) of a Q4_0/Q8_0 matrix cut into parts, and its block scale. */
static int mat_quant(const pl_gemv_params *p, const pl_gpu_ref_mat *m, uint32_t row, uint32_t col,
                     float *scale) {
    uint32_t local, part = mat_part(p, row, &local);
    return ref_quant(p->type, m->q[part], m->s[part], p->cols, local, col, scale);
}

/* The q8x GEMV: x (normalised first with the norm) quantised to Q8_0 blocks, integer block
 * dots, each scaled by the two f16 scales. */
static void ref_gemv_q8x(const pl_gemv_params *p, const pl_gpu_ref_mat *mats, const float *xv,
                         const float *norm_w, const float *bias, float *yv, double *mag) {
    uint32_t K = p->cols, nb = K / 32;
    float *xs = malloc((size_t)K * sizeof *xs);
    int8_t *xq = malloc(K);
    uint16_t *xd = malloc((size_t)nb * sizeof *xd);
    if (!xs || !xq || !xd) abort();
    /* the normalised x exactly as the CPU backend's rms_norm makes it, then quantised */
    float inv = p->norm ? (float)rms_inv(xv, K, p->eps) : 1.0f;
    for (uint32_t c = 0; c < K; c++) xs[c] = p->norm ? (xv[c] * inv) * norm_w[c] : xv[c];
    pl_quant_act_q8_0(xs, K, xq, xd);
    for (uint32_t r = 0; r < p->rows; r++) {
        double acc[2] = {0, 0}, m = 0;
        for (int k = 0; k < (p->mode == PL_GEMV_GATE_UP ? 2 : 1); k++) {
            for (uint32_t b = 0; b < nb; b++) {
                int32_t sumi = 0;
                float dw = 0;
                for (uint32_t j = 0; j < 32; j++)
                    sumi += mat_quant(p, &mats[k], r, b * 32 + j, &dw) * xq[b * 32 + j];
                double term = (double)sumi * dw * pl_f16_to_f32(xd[b]);
                acc[k] += term;
                m += fabs(term);
            }
        }
        store_out(p, acc, bias, r, yv);
        if (mag) mag[r] = m;
    }
    free(xs), free(xq), free(xd);
}

void pl_gpu_ref_gemv(const pl_gemv_params *p, const pl_gpu_ref_mat *mats, uint32_t n,
                     const float *x, const float *norm_w, const float *bias, float *y,
                     double *mag) {
    if (p->q8x) {
        for (uint32_t v = 0; v < n; v++)
            ref_gemv_q8x(p, mats, x + (uint64_t)v * p->cols, norm_w, bias,
                         y + (uint64_t)v * p->rows, mag ? mag + (uint64_t)v * p->rows : NULL);
        return;
    }
    for (uint32_t v = 0; v < n; v++) {
        const float *xv = x + (uint64_t)v * p->cols;
        float *yv = y + (uint64_t)v * p->rows;
        double inv = p->norm ? rms_inv(xv, p->cols, p->eps) : 1.0;
        for (uint32_t r = 0; r < p->rows; r++) {
            double acc[2] = {0, 0}, m = 0;
            for (int k = 0; k < (p->mode == PL_GEMV_GATE_UP ? 2 : 1); k++) {
                for (uint32_t c = 0; c < p->cols; c++) {
                    double xc = p->norm ? xv[c] * inv * norm_w[c] : xv[c];
                    double term = (double)mat_weight(p, &mats[k], r, c) * xc;
                    acc[k] += term;
                    m += fabs(term);
                }
            }
            store_out(p, acc, bias, r, yv);
            if (mag) mag[(uint64_t)v * p->rows + r] = m;
        }
    }
}

void pl_gpu_ref_rmsnorm(const pl_rmsnorm_params *p, uint32_t rows, const float *x, const float *w,
                        float *y) {
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (uint64_t)r * p->cols;
        float *yr = y + (uint64_t)r * p->cols;
        double inv = rms_inv(xr, p->cols, p->eps);
        for (uint32_t i = 0; i < p->cols; i++) yr[i] = (float)(xr[i] * inv * w[i]);
    }
}

void pl_gpu_rope_table(uint32_t positions, uint32_t rot_dim, float base, float freq_scale,
                       const float *factors, float *tab) {
    uint32_t half = rot_dim / 2;
    for (uint32_t pos = 0; pos < positions; pos++) {
        for (uint32_t i = 0; i < half; i++) {
            double a = (double)pos * freq_scale * pow((double)base, -2.0 * i / rot_dim);
            if (factors) a /= factors[i];
            tab[((uint64_t)pos * half + i) * 2] = (float)cos(a);
            tab[((uint64_t)pos * half + i) * 2 + 1] = (float)sin(a);
        }
    }
}

/* Store value val at element i of a cache of f16 bits or f32. */
static void cache_put(int f16, void *c, uint64_t i, float val) {
    if (f16)
        ((uint16_t *)c)[i] = pl_f32_to_f16(val);
    else
        ((float *)c)[i] = val;
}

void pl_gpu_ref_rope(const pl_rope_params_gpu *p, const float *tab, uint32_t pos0, uint32_t n,
                     float *x, const float *nw, void *kc, const float *v, void *vc) {
    uint32_t half = p->rot_dim / 2, HD = p->head_dim, HDV = p->head_dim_v;
    for (uint32_t r = 0; r < n; r++) {
        uint64_t pos = pos0 + r;
        for (uint32_t h = 0; h < p->n_heads; h++) {
            float *hv = x + ((uint64_t)r * p->n_heads + h) * HD;
            if (p->norm) {
                double inv = rms_inv(hv, HD, p->eps);
                for (uint32_t d = 0; d < HD; d++) hv[d] = (float)(hv[d] * inv * nw[d]);
            }
            for (uint32_t i = 0; i < half; i++) {
                uint32_t ia = p->neox ? i : 2 * i, ib = p->neox ? i + half : 2 * i + 1;
                float c = tab[(pos * half + i) * 2], s = tab[(pos * half + i) * 2 + 1];
                float a = hv[ia], b = hv[ib];
                hv[ia] = a * c - b * s;
                hv[ib] = a * s + b * c;
            }
            uint64_t row = pos * p->n_heads + h;
            if (p->store)
                for (uint32_t d = 0; d < HD; d++) cache_put(p->cache_f16, kc, row * HD + d, hv[d]);
            if (p->store_v)
                for (uint32_t d = 0; d < HDV; d++)
                    cache_put(p->cache_f16, vc, row * HDV + d,
                              v[((uint64_t)r * p->n_heads + h) * HDV + d]);
        }
    }
}

/* Element i of a buffer of type e as f32 (F32/F16) or its raw 32 bits (I32). */
static float elem_f(pl_gpu_etype e, const void *buf, uint64_t i) {
    if (e == PL_GE_F16) return pl_f16_to_f32(((const uint16_t *)buf)[i]);
    return ((const float *)buf)[i];
}

void pl_gpu_ref_copy(const pl_copy_params *p, const void *src, void *dst, uint32_t src0,
                     uint32_t dst0, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        uint64_t si = (uint64_t)src0 + i, di = (uint64_t)dst0 + i;
        if (p->dst == PL_GE_I32) {
            ((int32_t *)dst)[di] = ((const int32_t *)src)[si];
        } else if (p->dst == PL_GE_F16) {
            ((uint16_t *)dst)[di] = p->src == PL_GE_F16 ? ((const uint16_t *)src)[si]
                                                        : pl_f32_to_f16(((const float *)src)[si]);
        } else {
            ((float *)dst)[di] = elem_f(p->src, src, si);
        }
    }
}

void pl_gpu_ref_attn(const pl_attn_params_gpu *p, const float *q, const void *kc, const void *vc,
                     uint32_t pos0, uint32_t row0, uint32_t nrows, float *out) {
    uint32_t HD = p->head_dim, HDV = p->head_dim_v, gq = p->n_head / p->n_kv_head;
    uint64_t kvd = (uint64_t)p->n_kv_head * HD, vd = (uint64_t)p->n_kv_head * HDV;
    pl_gpu_etype ct = p->kv_f16 ? PL_GE_F16 : PL_GE_F32;
    uint64_t max_keys = (uint64_t)pos0 + row0 + nrows;
    double *sc = malloc(max_keys * sizeof *sc);
    if (!sc) return;
    for (uint32_t r = row0; r < row0 + nrows; r++) {
        uint64_t nk = (uint64_t)pos0 + r + 1;
        for (uint32_t h = 0; h < p->n_head; h++) {
            uint32_t kvh = h / gq;
            const float *qh = q + ((uint64_t)r * p->n_head + h) * HD;
            double mx = -INFINITY, sum = 0;
            for (uint64_t i = 0; i < nk; i++) {
                double acc = 0;
                for (uint32_t d = 0; d < HD; d++)
                    acc += (double)qh[d] * elem_f(ct, kc, i * kvd + kvh * HD + d);
                sc[i] = acc * p->scale;
                if (sc[i] > mx) mx = sc[i];
            }
            for (uint64_t i = 0; i < nk; i++) sum += (sc[i] = exp(sc[i] - mx));
            for (uint32_t d = 0; d < HDV; d++) {
                double acc = 0;
                for (uint64_t i = 0; i < nk; i++)
                    acc += sc[i] * elem_f(ct, vc, i * vd + kvh * HDV + d);
                out[((uint64_t)r * p->n_head + h) * HDV + d] = (float)(acc / sum);
            }
        }
    }
    free(sc);
}

void pl_gpu_ref_topk(const float *x, uint32_t n, uint32_t k, float *vals, uint32_t *ids) {
    for (uint32_t r = 0; r < k; r++) {
        float bv = -INFINITY;
        uint32_t bi = UINT32_MAX;
        for (uint32_t i = 0; i < n; i++) {
            float v = x[i];
            if (v != v) continue;
            /* must come after the previous pick in the order (value desc, index asc) */
            if (r && !(v < vals[r - 1] || (v == vals[r - 1] && i > ids[r - 1]))) continue;
            if (bi == UINT32_MAX || v > bv || (v == bv && i < bi)) bv = v, bi = i;
        }
        vals[r] = bv;
        ids[r] = bi;
    }
}

void pl_gpu_ref_embed(const pl_embed_params *p, const pl_gpu_ref_mat *table, const int32_t *ids,
                      uint32_t n, float *x) {
    for (uint32_t g = 0; g < n; g++) {
        float *o = x + (uint64_t)g * p->cols;
        if (ids[g] < 0 || (uint32_t)ids[g] >= p->rows) {
            memset(o, 0, p->cols * sizeof *o);
            continue;
        }
        uint32_t id = (uint32_t)ids[g];
        uint32_t part = p->parts > 1 ? id / p->rows_per_part : 0;
        uint32_t local = id - part * (p->parts > 1 ? p->rows_per_part : 0);
        for (uint32_t c = 0; c < p->cols; c++)
            o[c] = pl_gpu_ref_weight(p->type, table->q[part], table->s[part], p->cols, local, c);
    }
}

void pl_gpu_ref_ew(pl_ew_op op, const float *a, const float *b, uint32_t count, float *out) {
    for (uint32_t i = 0; i < count; i++) {
        float x = a[i];
        out[i] = op == PL_EW_ADD ? x + b[i] : (float)(x / (1.0 + exp(-(double)x)) * b[i]);
    }
}
