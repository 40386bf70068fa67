/* cpu_moe.c - the mixture-of-experts ops of the CPU backend (backend.h): the row softmax
 * and row top-k of the router, and the weighted sum of the chosen experts' outputs. The
 * gathered expert matmul (matmul_id) lives with the other matmuls in cpu_matmul.c.
 *
 * Every value is computed in float32 in the order backend.h states, so the GPU can give the
 * same bits where it follows the same order. */
#include <math.h>

#include "cpu_internal.h"

pl_status pl_cpu_softmax_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols,
                              pl_buf *out) {
    (void)be;
    for (int64_t r = 0; r < rows; r++) {
        const float *v = fptr(x) + r * cols;
        float *o = fptr(out) + r * cols;
        float mx = v[0];
        for (int64_t c = 1; c < cols; c++) mx = v[c] > mx ? v[c] : mx;
        float sum = 0;
        for (int64_t c = 0; c < cols; c++) sum += o[c] = expf(v[c] - mx);
        for (int64_t c = 0; c < cols; c++) o[c] /= sum;
    }
    return PL_OK;
}

pl_status pl_cpu_topk_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols, int64_t k,
                           pl_buf *ids, pl_buf *vals) {
    (void)be;
    for (int64_t r = 0; r < rows; r++)
        pl_cpu_topk_row(fptr(x) + r * cols, cols, k, (int32_t *)vptr(ids) + r * k,
                        fptr(vals) + r * k);
    return PL_OK;
}

pl_status pl_cpu_moe_combine(pl_backend *be, const pl_buf *y, const pl_buf *wts, int64_t n,
                             int64_t n_used, bool accumulate, pl_buf *out) {
    (void)be;
    int64_t d = y->ne0;
    const float *w = fptr(wts);
    for (int64_t i = 0; i < n; i++) {
        float *o = fptr(out) + i * d;
        const float *yi = fptr(y) + i * n_used * d;
        for (int64_t c = 0; c < d; c++) {
            float s = 0; /* the weighted sum first, then the residual add */
            for (int64_t j = 0; j < n_used; j++) s += w[i * n_used + j] * yi[j * d + c];
            o[c] = accumulate ? o[c] + s : s;
        }
    }
    return PL_OK;
}
