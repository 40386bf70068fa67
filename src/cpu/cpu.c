/* cpu.c - the CPU backend's buffers, its methods table and the element-wise ops.
 * The matrix products live in cpu_matmul.c, attention in cpu_attention.c, the
 * mixture-of-experts ops in cpu_moe.c, the Gated DeltaNet ops in cpu_ssm.c. */
#include "cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- buffers ---- */

static pl_status buf_new(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, pl_buf **out) {
    cpu_buf *b = calloc(1, sizeof *b);
    size_t bytes = (size_t)pl_row_size(type, ne0) * (size_t)ne1;
    if (type == PL_TYPE_I32) bytes = (size_t)ne0 * (size_t)ne1 * 4;
    void *data = b ? calloc(1, bytes ? bytes : 1) : NULL;
    if (!data) {
        free(b);
        return pl_fail(PL_ERR_NOMEM, "out of memory for a %zu-byte buffer", bytes);
    }
    b->h = (pl_buf){.be = be, .type = type, .ne0 = ne0, .ne1 = ne1};
    b->data = data;
    b->owned = true;
    *out = &b->h;
    return PL_OK;
}

static pl_status buf_weight(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                            const void *data, pl_buf **out) {
    cpu_buf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->h = (pl_buf){.be = be, .type = type, .ne0 = ne0, .ne1 = ne1, .weight = true};
    b->data = (void *)data; /* zero-copy: the mapped file outlives the buffer */
    *out = &b->h;
    return PL_OK;
}

/* A view: the parent's bytes from row0 on, not owned. */
static pl_status buf_view(pl_backend *be, pl_buf *parent, int64_t row0, int64_t rows,
                          pl_buf **out) {
    cpu_buf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->h = (pl_buf){.be = be, .type = parent->type, .ne0 = parent->ne0, .ne1 = rows};
    b->data = (char *)vptr(parent) + row0 * pl_row_size(parent->type, parent->ne0);
    *out = &b->h;
    return PL_OK;
}

static void buf_free(pl_backend *be, pl_buf *h) {
    (void)be;
    cpu_buf *b = (cpu_buf *)h;
    if (b->owned) free(b->data);
    free(b);
}

static pl_status buf_write(pl_backend *be, pl_buf *dst, int64_t off, const void *src, int64_t n) {
    (void)be;
    memcpy((char *)vptr(dst) + off, src, (size_t)n);
    return PL_OK;
}

static pl_status buf_read(pl_backend *be, const pl_buf *src, int64_t off, void *dst, int64_t n) {
    (void)be;
    memcpy(dst, (const char *)vptr(src) + off, (size_t)n);
    return PL_OK;
}

/* ---- small ops ---- */

static pl_status op_embed(pl_backend *be, const pl_buf *table, const pl_buf *ids, int64_t n,
                          pl_buf *out) {
    (void)be;
    const int32_t *id = vptr(ids);
    int64_t d = table->ne0, row = pl_row_size(table->type, d);
    for (int64_t i = 0; i < n; i++) {
        float *o = fptr(out) + i * d;
        if (id[i] < 0 || id[i] >= table->ne1) {
            memset(o, 0, (size_t)d * sizeof *o);
            continue;
        }
        pl_status s = pl_dequant_row(table->type, (const char *)vptr(table) + id[i] * row, o, d);
        if (s) return s;
    }
    return PL_OK;
}

static pl_status op_rms_norm(pl_backend *be, const pl_buf *x, const pl_buf *w, int64_t rows,
                             int64_t cols, float eps, pl_buf *out) {
    (void)be;
    const float *wv = fptr(w);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = fptr(x) + r * cols;
        float *o = fptr(out) + r * cols;
        double ss = 0; /* in double: rows can be thousands wide */
        for (int64_t i = 0; i < cols; i++) ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)cols + eps));
        for (int64_t i = 0; i < cols; i++) o[i] = (xr[i] * scale) * wv[i];
    }
    return PL_OK;
}

static pl_status op_add(pl_backend *be, const pl_buf *a, const pl_buf *b, int64_t count,
                        pl_buf *out) {
    (void)be;
    const float *av = fptr(a), *bv = fptr(b);
    float *o = fptr(out);
    for (int64_t i = 0; i < count; i++) o[i] = av[i] + bv[i];
    return PL_OK;
}

static pl_status op_rope(pl_backend *be, pl_buf *x, int64_t n, int64_t pos0,
                         const pl_rope_params *p) {
    (void)be;
    int half = p->rope_dim / 2;
    const float *factors = p->factors ? fptr(p->factors) : NULL;
    double *cs = malloc(sizeof(double) * 2 * (size_t)half);
    if (!cs) return pl_fail(PL_ERR_NOMEM, "out of memory in rope");
    int64_t row = (int64_t)p->n_heads * p->head_dim;
    for (int64_t i = 0; i < n; i++) {
        /* theta_j = pos * scale * base^(-2j/rope_dim) / factor_j, in double: the float64
         * reference computes it so, and float rounding at large positions is visible. */
        double pos = (double)(pos0 + i) * p->freq_scale;
        for (int j = 0; j < half; j++) {
            double th = pos * pow(p->theta_base, -2.0 * j / p->rope_dim);
            if (factors) th /= factors[j];
            cs[2 * j] = cos(th);
            cs[2 * j + 1] = sin(th);
        }
        for (int h = 0; h < p->n_heads; h++) {
            float *v = fptr(x) + i * row + (int64_t)h * p->head_dim;
            for (int j = 0; j < half; j++) {
                int a = p->mode == PL_ROPE_NEOX ? j : 2 * j;
                int b = p->mode == PL_ROPE_NEOX ? j + half : 2 * j + 1;
                double c = cs[2 * j], s = cs[2 * j + 1];
                float x0 = v[a], x1 = v[b];
                v[a] = (float)(x0 * c - x1 * s);
                v[b] = (float)(x0 * s + x1 * c);
            }
        }
    }
    free(cs);
    return PL_OK;
}

static pl_status op_kv_store(pl_backend *be, const pl_buf *src, int64_t n, int64_t pos0,
                             pl_buf *cache) {
    (void)be;
    int64_t d = cache->ne0;
    const float *s = fptr(src);
    if (cache->type == PL_TYPE_F32) {
        memcpy(fptr(cache) + pos0 * d, s, (size_t)(n * d) * sizeof(float));
    } else if (cache->type == PL_TYPE_Q8_0) { /* rows are whole blocks: one run of them */
        pl_quant_act_q8_0(s, n * d, q8_quants(cache) + pos0 * d, q8_scales(cache) + pos0 * d / 32);
    } else {
        uint16_t *c = (uint16_t *)vptr(cache) + pos0 * d;
        for (int64_t i = 0; i < n * d; i++) c[i] = pl_f32_to_f16(s[i]);
    }
    return PL_OK;
}

bool pl_cpu_col(const pl_buf *cols, int64_t i, const pl_buf *cache, int64_t n_ctx, int64_t max_keys,
                int64_t *slot, int64_t *pos) {
    const int32_t *c = vptr(cols);
    *slot = c[2 * i], *pos = c[2 * i + 1];
    if (*slot >= 0 && *slot < cache->ne1 / n_ctx && *pos >= 0 && *pos < max_keys) return true;
    pl_fail(PL_ERR_ARG, "column %lld: slot %lld, position %lld outside %lld slots of %lld",
            (long long)i, (long long)*slot, (long long)*pos, (long long)(cache->ne1 / n_ctx),
            (long long)max_keys);
    return false;
}

/* Each column: the single-sequence op on its row at its position (so the same bits). */
static pl_status op_rope_cols(pl_backend *be, pl_buf *x, int64_t n, const pl_buf *cols,
                              int64_t n_pos, const pl_rope_params *p) {
    for (int64_t i = 0; i < n; i++) {
        int32_t pos = ((const int32_t *)vptr(cols))[2 * i + 1];
        if (pos < 0 || pos >= n_pos)
            return pl_fail(PL_ERR_ARG, "column %lld: position %d of %lld", (long long)i, pos,
                           (long long)n_pos);
        cpu_buf r = pl_cpu_row_view(x, i, 1);
        pl_status st = op_rope(be, &r.h, 1, pos, p);
        if (st) return st;
    }
    return PL_OK;
}

static pl_status op_kv_store_cols(pl_backend *be, const pl_buf *src, int64_t n, const pl_buf *cols,
                                  int64_t n_ctx, pl_buf *cache) {
    for (int64_t i = 0; i < n; i++) {
        int64_t slot, pos;
        if (!pl_cpu_col(cols, i, cache, n_ctx, n_ctx, &slot, &pos)) return PL_ERR_ARG;
        cpu_buf r = pl_cpu_row_view(src, i, 1);
        pl_status st = op_kv_store(be, &r.h, 1, slot * n_ctx + pos, cache);
        if (st) return st;
    }
    return PL_OK;
}

static pl_status op_swiglu(pl_backend *be, const pl_buf *gate, const pl_buf *up, int64_t count,
                           pl_buf *out) {
    (void)be;
    const float *g = fptr(gate), *u = fptr(up);
    float *o = fptr(out);
    for (int64_t i = 0; i < count; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    return PL_OK;
}

static pl_status op_argmax(pl_backend *be, const pl_buf *x, int64_t rows, pl_buf *ids,
                           int64_t dst0) {
    (void)be;
    int32_t *o = (int32_t *)vptr(ids) + dst0;
    for (int64_t r = 0; r < rows; r++) {
        const float *v = fptr(x) + r * x->ne0;
        int64_t best = -1; /* NaN is skipped, as the GPU does; all NaN gives -1 */
        for (int64_t i = 0; i < x->ne0; i++)
            if (!isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
        o[r] = (int32_t)best;
    }
    return PL_OK;
}

void pl_cpu_topk_row(const float *v, int64_t cols, int64_t k, int32_t *oi, float *ov) {
    int64_t have = 0;
    /* Insertion into a sorted list of k: a strictly larger value moves ahead, so among
     * equal values the lower index (seen first) stays first. */
    for (int64_t i = 0; i < cols; i++) {
        if (isnan(v[i]) || (have == k && !(v[i] > ov[k - 1]))) continue;
        int64_t j = have < k ? have++ : k - 1;
        while (j > 0 && v[i] > ov[j - 1]) {
            ov[j] = ov[j - 1];
            oi[j] = oi[j - 1];
            j--;
        }
        ov[j] = v[i];
        oi[j] = (int32_t)i;
    }
    for (; have < k; have++) { /* fewer than k numbers: the GPU's filler */
        ov[have] = -INFINITY;
        oi[have] = -1;
    }
}

static pl_status op_topk(pl_backend *be, const pl_buf *x, int64_t row, int64_t k, pl_buf *ids,
                         pl_buf *vals) {
    (void)be;
    pl_cpu_topk_row(fptr(x) + row * x->ne0, x->ne0, k, vptr(ids), fptr(vals));
    return PL_OK;
}

static pl_status op_copy(pl_backend *be, const pl_buf *src, int64_t src0, int64_t count,
                         pl_buf *dst, int64_t dst0) {
    (void)be;
    size_t es = src->type == PL_TYPE_F16 ? 2 : 4;
    memcpy((char *)vptr(dst) + dst0 * es, (const char *)vptr(src) + src0 * es, (size_t)count * es);
    return PL_OK;
}

/* The CPU has no fused kernels: each op already runs in one pass over its rows. */
static pl_status op_fuse(pl_backend *be, unsigned kinds) {
    (void)be, (void)kinds;
    return PL_OK;
}

static void destroy(pl_backend *be) {
    cpu_backend *c = cpu_of(be);
    pl_pool_free(c->pool);
    free(c);
}

static const pl_backend_methods cpu_methods = {
    .buf_new = buf_new,
    .buf_weight = buf_weight,
    .buf_free = buf_free,
    .buf_view = buf_view,
    .write = buf_write,
    .read = buf_read,
    .embed = op_embed,
    .rms_norm = op_rms_norm,
    .matmul = pl_cpu_matmul,
    .add = op_add,
    .rope = op_rope,
    .kv_store = op_kv_store,
    .attention = pl_cpu_attention,
    .rope_cols = op_rope_cols,
    .kv_store_cols = op_kv_store_cols,
    .attention_cols = pl_cpu_attention_cols,
    .swiglu = op_swiglu,
    .argmax = op_argmax,
    .topk = op_topk,
    .copy = op_copy,
    .softmax_rows = pl_cpu_softmax_rows,
    .topk_rows = pl_cpu_topk_rows,
    .matmul_id = pl_cpu_matmul_id,
    .moe_combine = pl_cpu_moe_combine,
    .sigmoid_mul = pl_cpu_sigmoid_mul,
    .ssm_conv = pl_cpu_ssm_conv,
    .delta_rule = pl_cpu_delta_rule,
    .fuse = op_fuse,
    .destroy = destroy,
};

pl_status pl_cpu_new(int n_threads, pl_backend **out) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)(n < 64 ? n : 64) : 1;
    }
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return pl_fail(PL_ERR_NOMEM, "out of memory for the CPU backend");
    pl_status s = pl_pool_new(n_threads, &c->pool);
    if (s) {
        free(c);
        return s;
    }
    for (uint32_t i = 0; i < 65536; i++) c->f16[i] = pl_f16_to_f32((uint16_t)i);
    c->base.m = &cpu_methods;
    c->base.name = "cpu";
    if ((s = pl_be_check_methods(&c->base))) {
        pl_pool_free(c->pool);
        free(c);
        return s;
    }
    int nt = pl_pool_threads(c->pool);
    snprintf(c->base.device, sizeof c->base.device, "cpu, %d thread%s", nt, nt == 1 ? "" : "s");
    *out = &c->base;
    return PL_OK;
}
