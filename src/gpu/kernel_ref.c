/* kernel_ref.c - CPU references of the GPU kernels (see kernel_ref.h). Written for clarity:
 * plain loops over the math, double accumulation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../format/quant.h"
#include "kernel_ref.h"

float pl_gpu_ref_weight(pl_gpu_wtype t, const void *q, const uint16_t *s, uint32_t cols,
                        uint64_t row, uint32_t col) {
    uint64_t blk = row * (cols / 32) + col / 32;
    uint32_t j = col % 32;
    switch (t) {
    case PL_GW_Q4_0: {
        uint8_t byte = ((const uint8_t *)q)[blk * 16 + j % 16];
        int nib = j < 16 ? (byte & 15) : (byte >> 4);
        return (float)(nib - 8) * pl_f16_to_f32(s[blk]);
    }
    case PL_GW_Q8_0: return (float)((const int8_t *)q)[blk * 32 + j] * pl_f16_to_f32(s[blk]);
    case PL_GW_F16: return pl_f16_to_f32(((const uint16_t *)q)[row * cols + col]);
    case PL_GW_F32:
    default: return ((const float *)q)[row * cols + col];
    }
}

/* Weight (row, col) of a matrix cut into parts of rows_per_part rows. */
static float mat_weight(const pl_gemv_params *p, const pl_gpu_ref_mat *m, uint32_t row,
                        uint32_t col) {
    uint32_t part = p->parts > 1 ? row / p->rows_per_part : 0;
    uint32_t local = row - part * (p->parts > 1 ? p->rows_per_part : 0);
    return pl_gpu_ref_weight(p->type, m->q[part], m->s[part], p->cols, local, col);
}

static double rms_inv(const float *x, uint32_t n, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    return 1.0 / sqrt(ss / n + eps);
}

void pl_gpu_ref_gemv(const pl_gemv_params *p, const pl_gpu_ref_mat *mats, const float *x,
                     const float *norm_w, const float *bias, float *y, double *mag) {
    double inv = p->norm ? rms_inv(x, p->cols, p->eps) : 1.0;
    for (uint32_t r = 0; r < p->rows; r++) {
        double acc[2] = {0, 0}, m = 0;
        for (int k = 0; k < (p->mode == PL_GEMV_GATE_UP ? 2 : 1); k++) {
            for (uint32_t c = 0; c < p->cols; c++) {
                double xv = p->norm ? x[c] * inv * norm_w[c] : x[c];
                double term = (double)mat_weight(p, &mats[k], r, c) * xv;
                acc[k] += term;
                m += fabs(term);
            }
        }
        switch (p->mode) {
        case PL_GEMV_STORE: y[r] = (float)(acc[0] + (p->bias ? bias[r] : 0.0)); break;
        case PL_GEMV_ACCUM: y[r] = (float)(y[r] + acc[0]); break;
        case PL_GEMV_GATE_UP: y[r] = (float)(acc[0] / (1.0 + exp(-acc[0])) * acc[1]); break;
        }
        if (mag) mag[r] = m;
    }
}

void pl_gpu_ref_rmsnorm(const pl_rmsnorm_params *p, const float *x, const float *w, float *y) {
    double inv = rms_inv(x, p->n, p->eps);
    for (uint32_t i = 0; i < p->n; i++) y[i] = (float)(x[i] * inv * w[i]);
}

void pl_gpu_rope_table(uint32_t ctx, uint32_t rot_dim, float base, float *tab) {
    uint32_t half = rot_dim / 2;
    for (uint32_t pos = 0; pos < ctx; pos++) {
        for (uint32_t i = 0; i < half; i++) {
            double a = pos * pow((double)base, -2.0 * i / rot_dim);
            tab[((uint64_t)pos * half + i) * 2] = (float)cos(a);
            tab[((uint64_t)pos * half + i) * 2 + 1] = (float)sin(a);
        }
    }
}

/* Rotate one head in place. */
static void rotate(const pl_rope_params *p, float *h, const float *tab, uint32_t pos) {
    uint32_t half = p->rot_dim / 2;
    for (uint32_t i = 0; i < half; i++) {
        uint32_t ia = p->neox ? i : 2 * i, ib = p->neox ? i + half : 2 * i + 1;
        float c = tab[((uint64_t)pos * half + i) * 2], s = tab[((uint64_t)pos * half + i) * 2 + 1];
        float a = h[ia], b = h[ib];
        h[ia] = a * c - b * s;
        h[ib] = a * s + b * c;
    }
}

static void head_norm(float *h, uint32_t n, float eps, const float *w) {
    double inv = rms_inv(h, n, eps);
    for (uint32_t d = 0; d < n; d++) h[d] = (float)(h[d] * inv * w[d]);
}

static uint32_t pack2(float a, float b) {
    return (uint32_t)pl_f32_to_f16(a) | (uint32_t)pl_f32_to_f16(b) << 16;
}

void pl_gpu_ref_rope(const pl_rope_params *p, const float *qkv, const float *tab, uint32_t pos,
                     const float *qn, const float *kn, float *q_out, uint32_t *kc, uint32_t *vc) {
    uint32_t HD = p->head_dim;
    float h[1024];
    for (uint32_t g = 0; g < p->n_head + p->n_kv_head; g++) {
        int is_q = g < p->n_head;
        const float *src = qkv + (is_q ? g * HD : p->n_head * HD + (g - p->n_head) * HD);
        memcpy(h, src, HD * sizeof(float));
        if (p->qk_norm) head_norm(h, HD, p->eps, is_q ? qn : kn);
        rotate(p, h, tab, pos);
        if (is_q) {
            memcpy(q_out + g * HD, h, HD * sizeof(float));
            continue;
        }
        uint32_t kv = g - p->n_head;
        uint64_t dst = ((uint64_t)kv * p->ctx + pos) * (HD / 2);
        const float *v = qkv + (uint64_t)(p->n_head + p->n_kv_head + kv) * HD;
        for (uint32_t j = 0; j < HD / 2; j++) {
            kc[dst + j] = pack2(h[2 * j], h[2 * j + 1]);
            vc[dst + j] = pack2(v[2 * j], v[2 * j + 1]);
        }
    }
}

static float cache_at(const uint32_t *c, uint64_t word_base, uint32_t d) {
    uint32_t w = c[word_base + d / 2];
    return pl_f16_to_f32((uint16_t)(d & 1 ? w >> 16 : w & 0xffff));
}

void pl_gpu_ref_attn(const pl_attn_params *p, const float *q, const uint32_t *kc,
                     const uint32_t *vc, uint32_t n_kv, float *out) {
    uint32_t HD = p->head_dim, gq = p->n_head / p->n_kv_head;
    double *sc = malloc((n_kv ? n_kv : 1) * sizeof *sc);
    if (!sc) return;
    for (uint32_t h = 0; h < p->n_head; h++) {
        uint32_t kvh = h / gq;
        double mx = -INFINITY, sum = 0;
        for (uint32_t i = 0; i < n_kv; i++) {
            uint64_t base = ((uint64_t)kvh * p->ctx + i) * (HD / 2);
            double acc = 0;
            for (uint32_t d = 0; d < HD; d++) acc += (double)q[h * HD + d] * cache_at(kc, base, d);
            sc[i] = acc * p->scale;
            if (sc[i] > mx) mx = sc[i];
        }
        for (uint32_t i = 0; i < n_kv; i++) sum += (sc[i] = exp(sc[i] - mx));
        for (uint32_t d = 0; d < HD; d++) {
            double acc = 0;
            for (uint32_t i = 0; i < n_kv; i++)
                acc += sc[i] * cache_at(vc, ((uint64_t)kvh * p->ctx + i) * (HD / 2), d);
            out[h * HD + d] = (float)(acc / sum);
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

void pl_gpu_ref_embed(const pl_embed_params *p, const pl_gpu_ref_mat *table, uint32_t id, float *x) {
    if (id >= p->rows) id = p->rows - 1;
    uint32_t part = p->parts > 1 ? id / p->rows_per_part : 0;
    uint32_t local = id - part * (p->parts > 1 ? p->rows_per_part : 0);
    for (uint32_t c = 0; c < p->cols; c++) {
        float v = pl_gpu_ref_weight(p->type, table->q[part], table->s[part], p->cols, local, c);
        x[c] = p->scale != 1.0f ? v * p->scale : v;
    }
}
