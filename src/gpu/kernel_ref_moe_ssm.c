/* kernel_ref_moe_ssm.c - CPU references of the MoE and Gated DeltaNet kernels (see
 * kernel_ref.h): the math of backend.h's ops written as plain loops, in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_ref.h"

void pl_gpu_ref_softmax(const float *x, uint32_t rows, uint32_t cols, float *out) {
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (uint64_t)r * cols;
        float *o = out + (uint64_t)r * cols;
        double mx = -INFINITY, sum = 0;
        for (uint32_t c = 0; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
        for (uint32_t c = 0; c < cols; c++) sum += exp(xr[c] - mx);
        for (uint32_t c = 0; c < cols; c++) o[c] = (float)(exp(xr[c] - mx) / sum);
    }
}

void pl_gpu_ref_matmul_id(const pl_gemv_params *p, const pl_gpu_ref_mat *mat, const int32_t *ids,
                          uint32_t slots, const float *x, float *y, double *mag) {
    /* the whole stacked weight as one GEMV (its parts as they are), then expert e's rows */
    pl_gemv_params all = *p;
    all.ids = 0, all.n_exp = 0, all.n_used = 0, all.x_shared = 0;
    all.rows = p->rows * p->n_exp;
    size_t nr = (size_t)all.rows;
    float *ya = malloc(nr * sizeof *ya);
    double *ma = malloc(nr * sizeof *ma);
    if (!ya || !ma) goto done;
    uint32_t xv = p->x_shared ? p->n_used : 1;
    for (uint32_t s = 0; s < slots; s++) {
        float *ys = y + (uint64_t)s * p->rows;
        double *ms = mag ? mag + (uint64_t)s * p->rows : NULL;
        int32_t e = ids[s];
        if (e < 0 || (uint32_t)e >= p->n_exp) {
            memset(ys, 0, (size_t)p->rows * sizeof *ys);
            if (ms) memset(ms, 0, (size_t)p->rows * sizeof *ms);
            continue;
        }
        pl_gpu_ref_gemv(&all, mat, 1, x + (uint64_t)(s / xv) * p->cols, NULL, NULL, ya, ma);
        memcpy(ys, ya + (size_t)e * p->rows, (size_t)p->rows * sizeof *ys);
        if (ms) memcpy(ms, ma + (size_t)e * p->rows, (size_t)p->rows * sizeof *ms);
    }
done:
    free(ya), free(ma);
}

void pl_gpu_ref_moe_combine(const float *y, const float *wts, uint32_t n, uint32_t n_used,
                            uint32_t cols, int acc, float *out) {
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t c = 0; c < cols; c++) {
            double sum = 0;
            for (uint32_t j = 0; j < n_used; j++) {
                uint64_t s = (uint64_t)i * n_used + j;
                sum += (double)wts[s] * y[s * cols + c];
            }
            float *o = &out[(uint64_t)i * cols + c];
            *o = (float)(acc ? *o + sum : sum);
        }
    }
}

static double sigmoid(double v) {
    return 1.0 / (1.0 + exp(-v));
}

void pl_gpu_ref_sigmoid_mul(const float *x, const float *g, uint32_t rows, uint32_t cols,
                            uint32_t g_cols, int acc, float *out) {
    for (uint64_t r = 0; r < rows; r++) {
        for (uint64_t c = 0; c < cols; c++) {
            double v = x[r * cols + c] * sigmoid(g[r * g_cols + (g_cols == 1 ? 0 : c)]);
            float *o = &out[r * cols + c];
            *o = (float)(acc ? *o + v : v);
        }
    }
}

void pl_gpu_ref_ssm_conv(const float *x, const float *w, float *state, uint32_t n,
                         uint32_t channels, uint32_t k, float *snaps, float *out) {
    uint32_t km1 = k - 1;
    /* in = the state's rows, then x's */
    float *in = malloc((size_t)(km1 + n) * channels * sizeof *in);
    if (!in) return;
    memcpy(in, state, (size_t)km1 * channels * sizeof *in);
    memcpy(in + (size_t)km1 * channels, x, (size_t)n * channels * sizeof *in);
    for (uint64_t t = 0; t < n; t++) {
        for (uint64_t c = 0; c < channels; c++) {
            double acc = 0;
            for (uint32_t j = 0; j < k; j++)
                acc += (double)w[c * k + j] * in[(t + j) * channels + c];
            out[t * channels + c] = (float)(acc * sigmoid(acc));
        }
        if (snaps)
            memcpy(snaps + t * km1 * channels, in + (t + 1) * channels,
                   (size_t)km1 * channels * sizeof *in);
    }
    memcpy(state, in + (size_t)n * channels, (size_t)km1 * channels * sizeof *in);
    free(in);
}

/* x / sqrt(sum(x^2) + eps) * scale, in double. */
static void l2norm(const float *x, uint32_t n, double eps, double scale, double *out) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double inv = scale / sqrt(ss + eps);
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * inv;
}

void pl_gpu_ref_delta_rule(const pl_delta_rule_params *p, const float *qkv, const float *a,
                           const float *b, const float *ssm_a, const float *dt_bias, float *state,
                           uint32_t n, float *snaps, float *out) {
    uint32_t nk = p->n_k, nv = p->n_v, dk = p->d_k, dv = p->d_v;
    uint64_t row = 2ull * nk * dk + (uint64_t)nv * dv, hs = (uint64_t)dk * dv;
    double *q = malloc(dk * sizeof *q), *k = malloc(dk * sizeof *k);
    double *s = malloc(hs * sizeof *s), *kv = malloc(dv * sizeof *kv);
    if (!q || !k || !s || !kv) goto done;
    for (uint32_t h = 0; h < nv; h++) {
        uint32_t kh = h % nk;
        float *sh = state + h * hs;
        for (uint64_t i = 0; i < hs; i++) s[i] = sh[i];
        for (uint64_t t = 0; t < n; t++) {
            const float *r = qkv + t * row;
            l2norm(r + (uint64_t)kh * dk, dk, p->eps, 1.0 / sqrt((double)dk), q);
            l2norm(r + (uint64_t)nk * dk + (uint64_t)kh * dk, dk, p->eps, 1.0, k);
            const float *v = r + 2ull * nk * dk + (uint64_t)h * dv;
            double beta = sigmoid(b[t * nv + h]);
            double x = (double)a[t * nv + h] + dt_bias[h];
            double g = exp(ssm_a[h] * (x > 20 ? x : log1p(exp(x))));
            for (uint64_t i = 0; i < hs; i++) s[i] *= g;
            for (uint32_t j = 0; j < dv; j++) { /* S^T k */
                kv[j] = 0;
                for (uint32_t i = 0; i < dk; i++) kv[j] += s[(uint64_t)i * dv + j] * k[i];
            }
            for (uint32_t i = 0; i < dk; i++)
                for (uint32_t j = 0; j < dv; j++)
                    s[(uint64_t)i * dv + j] += k[i] * beta * (v[j] - kv[j]);
            for (uint32_t j = 0; j < dv; j++) {
                double o = 0;
                for (uint32_t i = 0; i < dk; i++) o += s[(uint64_t)i * dv + j] * q[i];
                out[t * nv * dv + (uint64_t)h * dv + j] = (float)o;
            }
            if (snaps)
                for (uint64_t i = 0; i < hs; i++) snaps[(t * nv + h) * hs + i] = (float)s[i];
        }
        for (uint64_t i = 0; i < hs; i++) sh[i] = (float)s[i];
    }
done:
    free(q), free(k), free(s), free(kv);
}
