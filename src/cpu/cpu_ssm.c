/* cpu_ssm.c - the CPU backend's gate and Gated DeltaNet ops: sigmoid_mul, the causal
 * depthwise convolution (ssm_conv) and the gated delta rule (delta_rule), as backend.h
 * defines them. The recurrence runs token by token in float32 state with double
 * accumulators for its dot products (the float64 reference is what the tests compare
 * with); value heads are independent and split across the pool's threads, and so are
 * sigmoid_mul's rows (pl_cpu_rows). */
#include "cpu_internal.h"

#include <math.h>

static float sigmoidf(float x) {
    return 1.0f / (1.0f + expf(-x));
}

typedef struct {
    const float *x, *g;
    float *out;
    int64_t cols, g_cols;
    bool accumulate;
} gate_job;

static void sigmoid_mul_rows(void *ctx, int64_t r0, int64_t r1) {
    const gate_job *j = ctx;
    int64_t cols = j->cols, g_cols = j->g_cols;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = j->x + r * cols, *gr = j->g + r * g_cols;
        float *orow = j->out + r * cols;
        for (int64_t c = 0; c < cols; c++) {
            float v = xr[c] * sigmoidf(gr[g_cols == 1 ? 0 : c]);
            orow[c] = j->accumulate ? orow[c] + v : v;
        }
    }
}

pl_status pl_cpu_sigmoid_mul(pl_backend *be, const pl_buf *x, const pl_buf *g, int64_t rows,
                             int64_t cols, int64_t g_cols, bool accumulate, pl_buf *out) {
    gate_job j = {fptr(x), fptr(g), fptr(out), cols, g_cols, accumulate};
    pl_cpu_rows(cpu_of(be), rows, cols, sigmoid_mul_rows, &j);
    return PL_OK;
}

/* ---- ssm_conv ---- */

pl_status pl_cpu_ssm_conv(pl_backend *be, const pl_buf *x, const pl_buf *w, pl_buf *state,
                          int64_t n, pl_buf *snaps, pl_buf *out) {
    (void)be;
    int64_t ch = w->ne1, K = w->ne0, km1 = K - 1;
    const float *wv = fptr(w), *xv = fptr(x);
    float *st = fptr(state), *o = fptr(out), *sn = snaps ? fptr(snaps) : NULL;
    /* window[j] = the input j places back from the current one, per channel: the state
     * rows then x rows, read through one index */
    for (int64_t t = 0; t < n; t++) {
        for (int64_t c = 0; c < ch; c++) {
            const float *wc = wv + c * K;
            float acc = 0;
            for (int64_t j = 0; j < K; j++) {
                int64_t r = t + j; /* row of the (state ++ x) sequence */
                float in = r < km1 ? st[r * ch + c] : xv[(r - km1) * ch + c];
                acc += wc[j] * in;
            }
            o[t * ch + c] = acc * sigmoidf(acc);
        }
        if (sn) { /* the state after row t: the K-1 inputs ending at row t */
            float *dst = sn + t * km1 * ch;
            for (int64_t j = 0; j < km1; j++) {
                int64_t r = t + 1 + j;
                const float *src = r < km1 ? st + r * ch : xv + (r - km1) * ch;
                memcpy(dst + j * ch, src, sizeof(float) * (size_t)ch);
            }
        }
    }
    /* the new state: the last K-1 rows of (state ++ x); shift then copy */
    for (int64_t j = 0; j < km1; j++) {
        int64_t r = n + j;
        if (r < km1)
            memmove(st + j * ch, st + r * ch, sizeof(float) * (size_t)ch);
        else
            memcpy(st + j * ch, xv + (r - km1) * ch, sizeof(float) * (size_t)ch);
    }
    return PL_OK;
}

/* ---- delta_rule ---- */

typedef struct {
    const float *qkv, *a, *b, *ssm_a, *dt_bias;
    float *state, *snaps, *out;
    int64_t n;
    const pl_delta_params *p;
} delta_job;

static float softplusf(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
}

/* x / sqrt(sum(x^2) + eps) * scale into y, in double. */
static void l2norm(const float *x, int d, float eps, double scale, double *y) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)x[i] * x[i];
    double f = scale / sqrt(ss + eps);
    for (int i = 0; i < d; i++) y[i] = x[i] * f;
}

/* Value head h over all n tokens: its state rows are independent of every other head's. */
static void delta_head(void *ctx, int64_t h, int thread) {
    (void)thread;
    const delta_job *J = ctx;
    const pl_delta_params *p = J->p;
    int nk = p->n_k_heads, nv = p->n_v_heads, dk = p->d_k, dv = p->d_v;
    int64_t row = 2 * (int64_t)nk * dk + (int64_t)nv * dv;
    int kh = (int)(h % nk);
    float *S = J->state + h * dk * dv;
    double q[1024], k[1024], u[1024]; /* backend.c caps d_k and d_v at 1024 */
    for (int64_t t = 0; t < J->n; t++) {
        const float *r = J->qkv + t * row;
        l2norm(r + (int64_t)kh * dk, dk, p->eps, 1.0 / sqrt((double)dk), q);
        l2norm(r + (int64_t)nk * dk + (int64_t)kh * dk, dk, p->eps, 1.0, k);
        const float *v = r + 2 * (int64_t)nk * dk + h * dv;
        float beta = sigmoidf(J->b[t * nv + h]);
        float g = expf(J->ssm_a[h] * softplusf(J->a[t * nv + h] + J->dt_bias[h]));
        /* S = g S;  u = beta (v - S^T k) */
        for (int j = 0; j < dv; j++) u[j] = 0;
        for (int i = 0; i < dk; i++) {
            float *Si = S + (int64_t)i * dv;
            for (int j = 0; j < dv; j++) {
                Si[j] *= g;
                u[j] += (double)Si[j] * k[i];
            }
        }
        for (int j = 0; j < dv; j++) u[j] = beta * (v[j] - u[j]);
        /* S += k u^T;  o = S^T q */
        float *o = J->out + t * (int64_t)nv * dv + h * dv;
        for (int i = 0; i < dk; i++) {
            float *Si = S + (int64_t)i * dv;
            for (int j = 0; j < dv; j++) Si[j] = (float)(Si[j] + k[i] * u[j]);
        }
        for (int j = 0; j < dv; j++) {
            double s = 0;
            for (int i = 0; i < dk; i++) s += (double)S[(int64_t)i * dv + j] * q[i];
            o[j] = (float)s;
        }
        if (J->snaps)
            memcpy(J->snaps + (t * nv + h) * (int64_t)dk * dv, S,
                   sizeof(float) * (size_t)dk * (size_t)dv);
    }
}

pl_status pl_cpu_delta_rule(pl_backend *be, const pl_buf *qkv, const pl_buf *a, const pl_buf *b,
                            const pl_buf *ssm_a, const pl_buf *dt_bias, pl_buf *state, int64_t n,
                            const pl_delta_params *p, pl_buf *snaps, pl_buf *out) {
    delta_job J = {.qkv = fptr(qkv),
                   .a = fptr(a),
                   .b = fptr(b),
                   .ssm_a = fptr(ssm_a),
                   .dt_bias = fptr(dt_bias),
                   .state = fptr(state),
                   .snaps = snaps ? fptr(snaps) : NULL,
                   .out = fptr(out),
                   .n = n,
                   .p = p};
    double work = (double)n * p->n_v_heads * p->d_k * p->d_v * 4;
    if (work < CPU_PAR_MIN_WORK) {
        for (int64_t h = 0; h < p->n_v_heads; h++) delta_head(&J, h, 0);
    } else {
        pl_pool_run(cpu_of(be)->pool, p->n_v_heads, delta_head, &J);
    }
    return PL_OK;
}
