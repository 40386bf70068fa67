/* cpu_moe.c - the mixture-of-experts ops of the CPU backend (backend.h): the row softmax
 * and row top-k of the router, and the weighted sum of the chosen experts' outputs. The
 * gathered expert matmul (matmul_id) lives with the other matmuls in cpu_matmul.c.
 *
 * Every value is computed in float32 in the order backend.h states, so the GPU can give the
 * same bits where it follows the same order. Rows are split between the pool's threads
 * (pl_cpu_rows), each computed whole by one of them. */
#include <math.h>

#include "cpu_internal.h"

/* The ops' arguments, for their rows r0..r1 (pl_cpu_rows). */
typedef struct {
    const pl_buf *x, *w;
    pl_buf *out, *ids;
    int64_t cols, k, n_used;
    bool accumulate;
} moe_job;

static void softmax_part(void *ctx, int64_t r0, int64_t r1) {
    const moe_job *j = ctx;
    int64_t cols = j->cols;
    for (int64_t r = r0; r < r1; r++) {
        const float *v = fptr(j->x) + r * cols;
        float *o = fptr(j->out) + r * cols;
        float mx = v[0];
        for (int64_t c = 1; c < cols; c++) mx = v[c] > mx ? v[c] : mx;
        float sum = 0;
        for (int64_t c = 0; c < cols; c++) sum += o[c] = expf(v[c] - mx);
        for (int64_t c = 0; c < cols; c++) o[c] /= sum;
    }
}

pl_status pl_cpu_softmax_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols,
                              pl_buf *out) {
    moe_job j = {.x = x, .out = out, .cols = cols};
    pl_cpu_rows(cpu_of(be), rows, cols, softmax_part, &j);
    return PL_OK;
}

static void topk_part(void *ctx, int64_t r0, int64_t r1) {
    const moe_job *j = ctx;
    for (int64_t r = r0; r < r1; r++)
        pl_cpu_topk_row(fptr(j->x) + r * j->cols, j->cols, j->k, (int32_t *)vptr(j->ids) + r * j->k,
                        fptr(j->out) + r * j->k);
}

pl_status pl_cpu_topk_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols, int64_t k,
                           pl_buf *ids, pl_buf *vals) {
    moe_job j = {.x = x, .out = vals, .ids = ids, .cols = cols, .k = k};
    pl_cpu_rows(cpu_of(be), rows, cols, topk_part, &j);
    return PL_OK;
}

static void combine_part(void *ctx, int64_t r0, int64_t r1) {
    const moe_job *j = ctx;
    int64_t d = j->cols, n_used = j->n_used;
    const float *w = fptr(j->w);
    for (int64_t i = r0; i < r1; i++) {
        float *o = fptr(j->out) + i * d;
        const float *yi = fptr(j->x) + i * n_used * d;
        for (int64_t c = 0; c < d; c++) {
            float s = 0; /* the weighted sum first, then the residual add */
            for (int64_t u = 0; u < n_used; u++) s += w[i * n_used + u] * yi[u * d + c];
            o[c] = j->accumulate ? o[c] + s : s;
        }
    }
}

pl_status pl_cpu_moe_combine(pl_backend *be, const pl_buf *y, const pl_buf *wts, int64_t n,
                             int64_t n_used, bool accumulate, pl_buf *out) {
    moe_job j = {
        .x = y, .w = wts, .out = out, .cols = y->ne0, .n_used = n_used, .accumulate = accumulate};
    pl_cpu_rows(cpu_of(be), n, y->ne0 * n_used, combine_part, &j);
    return PL_OK;
}
