/* cpu_matmul.c - out[i, :] (+)= W x[i, :] + bias on the CPU, for a weight of any readable
 * format.
 *
 * Each weight row is dequantised once into float and then dotted with every activation row
 * of the batch, so a prompt's tokens share the dequantisation. The output rows are split
 * between the pool's threads in chunks; each output value is computed by exactly one
 * thread in one fixed order, so results do not depend on the thread count. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    const pl_buf *w, *x, *bias;
    pl_buf *out;
    int64_t n, rows_per_item;
    bool accumulate;
    atomic_int failed; /* set if a dequantisation failed (cannot happen after the wrapper checks) */
} mm_job;

static void mm_item(void *ctx, int64_t item) {
    mm_job *j = ctx;
    int64_t k = j->w->ne0, n_out = j->w->ne1;
    int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item;
    if (r1 > n_out) r1 = n_out;
    int64_t row_bytes = pl_row_size(j->w->type, k);
    const char *wdata = vptr(j->w);
    const float *x = fptr(j->x), *bias = j->bias ? fptr(j->bias) : NULL;
    float *out = fptr(j->out);
    float *tmp = NULL;
    if (j->w->type != PL_TYPE_F32 && !(tmp = malloc((size_t)k * sizeof *tmp))) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const float *wr = (const float *)(wdata + r * row_bytes);
        if (tmp) {
            if (pl_dequant_row(j->w->type, wdata + r * row_bytes, tmp, k)) {
                atomic_store(&j->failed, 1);
                break;
            }
            wr = tmp;
        }
        float b = bias ? bias[r] : 0.0f;
        for (int64_t i = 0; i < j->n; i++) {
            float v = pl_cpu_dot(wr, x + i * k, k) + b;
            float *o = out + i * n_out + r;
            *o = j->accumulate ? *o + v : v;
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
    pl_pool_run(c->pool, items, mm_item, &j);
    if (atomic_load(&j.failed)) return pl_fail(PL_ERR_NOMEM, "matmul: out of memory or unreadable weights");
    return PL_OK;
}
