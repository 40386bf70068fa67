/* cpu_matmul.c - out[i, :] (+)= W x[i, :] + bias on the CPU, for a weight of any readable
 * format.
 *
 * Each weight row is dequantised once into float and then dotted with every activation row
 * of the batch, so a prompt's tokens share the dequantisation. The output rows are split
 * between the pool's threads in chunks; each output value is computed by exactly one
 * thread in one fixed order, so results do not depend on the thread count.
 *
 * With act_q8 (backend.h) and a Q4_0/Q8_0 weight, the activation rows are quantised to Q8_0
 * blocks once, and each block product is an integer dot scaled by the two f16 scales,
 * summed in block order: llama.cpp's arithmetic, and no dequantisation at all. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    const pl_buf *w, *x, *bias;
    const int8_t *xq; /* act_q8: the quantised activation rows, and their block scales */
    const float *xd;  /* (the f16 scales widened once, not once per weight row) */
    pl_buf *out;
    int64_t n, rows_per_item;
    bool accumulate;
    atomic_int failed; /* set if a dequantisation failed (cannot happen after the wrapper checks) */
} mm_job;

/* Weight rows are taken MM_BLOCK at a time: the block's dequantised rows stay in cache
 * while every activation row of the batch passes over them once. */
#define MM_BLOCK 8

/* The act_q8 path: rows r0..r1 of a Q4_0/Q8_0 weight against every quantised row. */
static void mm_item_q8(const mm_job *j, int64_t r0, int64_t r1) {
    int64_t k = j->w->ne0, n_out = j->w->ne1, nb = k / 32;
    int q4 = j->w->type == PL_TYPE_Q4_0;
    int64_t row_bytes = pl_row_size(j->w->type, k);
    const unsigned char *wdata = vptr(j->w);
    const float *bias = j->bias ? fptr(j->bias) : NULL;
    float *out = fptr(j->out);
    for (int64_t r = r0; r < r1; r++) {
        const unsigned char *wr = wdata + r * row_bytes;
        for (int64_t i = 0; i < j->n;) {
            float sums[4];
            int m = j->n - i >= 4 ? 4 : 1; /* a batch goes four activation rows at a time */
            if (m == 4) {
                const int8_t *y[4];
                const float *yd[4];
                for (int t = 0; t < 4; t++)
                    y[t] = j->xq + (i + t) * k, yd[t] = j->xd + (i + t) * nb;
                pl_cpu_qdot_rows4(q4, wr, y, yd, nb, sums);
            } else {
                sums[0] = pl_cpu_qdot_row(q4, wr, j->xq + i * k, j->xd + i * nb, nb);
            }
            for (int t = 0; t < m; t++, i++) {
                float v = sums[t] + (bias ? bias[r] : 0.0f);
                float *o = out + i * n_out + r;
                *o = j->accumulate ? *o + v : v;
            }
        }
    }
}

static void mm_item(void *ctx, int64_t item) {
    mm_job *j = ctx;
    if (j->xq) {
        int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item;
        mm_item_q8(j, r0, r1 < j->w->ne1 ? r1 : j->w->ne1);
        return;
    }
    int64_t k = j->w->ne0, n_out = j->w->ne1;
    int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item;
    if (r1 > n_out) r1 = n_out;
    int64_t row_bytes = pl_row_size(j->w->type, k);
    const char *wdata = vptr(j->w);
    const float *x = fptr(j->x), *bias = j->bias ? fptr(j->bias) : NULL;
    float *out = fptr(j->out);
    float *tmp = NULL;
    if (j->w->type != PL_TYPE_F32 && !(tmp = malloc((size_t)(k * MM_BLOCK) * sizeof *tmp))) {
        atomic_store(&j->failed, 1);
        return;
    }
    const float *rows[MM_BLOCK];
    for (int64_t rb = r0; rb < r1; rb += MM_BLOCK) {
        int nb = r1 - rb < MM_BLOCK ? (int)(r1 - rb) : MM_BLOCK;
        for (int b = 0; b < nb; b++) {
            const char *src = wdata + (rb + b) * row_bytes;
            rows[b] = (const float *)src;
            if (tmp) {
                if (pl_dequant_row(j->w->type, src, tmp + b * k, k)) {
                    atomic_store(&j->failed, 1);
                    free(tmp);
                    return;
                }
                rows[b] = tmp + b * k;
            }
        }
        for (int64_t i = 0; i < j->n; i++) {
            const float *xi = x + i * k;
            float *o = out + i * n_out + rb;
            for (int b = 0; b < nb; b++) {
                float v = pl_cpu_dot(rows[b], xi, k) + (bias ? bias[rb + b] : 0.0f);
                o[b] = j->accumulate ? o[b] + v : v;
            }
        }
    }
    free(tmp);
}

pl_status pl_cpu_matmul(pl_backend *be, const pl_buf *w, const pl_buf *x, const pl_buf *bias,
                        int64_t n, bool accumulate, pl_buf *out) {
    cpu_backend *c = cpu_of(be);
    int64_t n_out = w->ne1;
    mm_job j = {.w = w, .x = x, .bias = bias, .out = out, .n = n, .accumulate = accumulate};
    atomic_init(&j.failed, 0);
    int threads = pl_pool_threads(c->pool);
    int64_t work = n * n_out * w->ne0;
    int64_t items = work < CPU_PAR_MIN_WORK ? 1 : (int64_t)threads * 4;
    if (items > n_out) items = n_out;
    j.rows_per_item = (n_out + items - 1) / items;
    items = (n_out + j.rows_per_item - 1) / j.rows_per_item;
    int8_t *xq = NULL;
    uint16_t *xh = NULL;
    float *xd = NULL;
    if (be->act_q8 && (w->type == PL_TYPE_Q4_0 || w->type == PL_TYPE_Q8_0)) {
        int64_t k = w->ne0, nbt = n * (k / 32);
        xq = malloc((size_t)(n * k));
        xh = malloc((size_t)nbt * sizeof *xh);
        xd = malloc((size_t)nbt * sizeof *xd);
        if (!xq || !xh || !xd) {
            free(xq), free(xh), free(xd);
            return pl_fail(PL_ERR_NOMEM, "matmul: out of memory");
        }
        for (int64_t i = 0; i < n; i++)
            pl_quant_act_q8_0(fptr(x) + i * k, k, xq + i * k, xh + i * (k / 32));
        for (int64_t b = 0; b < nbt; b++) xd[b] = pl_f16_to_f32(xh[b]);
        j.xq = xq, j.xd = xd;
    }
    pl_pool_run(c->pool, items, mm_item, &j);
    free(xq), free(xh), free(xd);
    if (atomic_load(&j.failed))
        return pl_fail(PL_ERR_NOMEM, "matmul: out of memory or unreadable weights");
    return PL_OK;
}
