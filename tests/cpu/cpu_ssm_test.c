/* cpu_ssm_test.c - the CPU backend's sigmoid_mul, ssm_conv and delta_rule against
 * straightforward double-precision references written here from backend.h's contracts,
 * on random shapes, with every output poisoned (NaN) before the call: value heads more
 * than key heads (value head h reads key head h % n_k), the snapshots equal to the state
 * after each row, and a state carried across two calls equal to one call over all rows. */
#include "cpu/cpu.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}
static int irand(int lo, int hi) { /* in [lo, hi] */
    return lo + (int)((urand() + 1.0) * 0.5 * (hi - lo + 1)) % (hi - lo + 1);
}
static void fill(float *v, int64_t n, double scale) {
    for (int64_t i = 0; i < n; i++) v[i] = (float)(urand() * scale);
}

static pl_backend *be;

/* A buffer of ne1 rows (at least 1) holding the first `rows` rows of v. */
static pl_buf *mk_rows(const float *v, int64_t ne0, int64_t ne1, int64_t rows) {
    pl_buf *b = NULL;
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, ne0, ne1 > 0 ? ne1 : 1, &b) == PL_OK, "%s",
          pl_last_error());
    if (b && v && rows > 0) pl_be_write(b, 0, v, ne0 * rows * 4);
    return b;
}
static pl_buf *mk(const float *v, int64_t ne0, int64_t ne1) {
    return mk_rows(v, ne0, ne1, ne1);
}
static pl_buf *poisoned(int64_t ne0, int64_t ne1) {
    float *v = malloc(sizeof(float) * (size_t)(ne0 * ne1));
    for (int64_t i = 0; i < ne0 * ne1; i++) v[i] = NAN;
    pl_buf *b = mk(v, ne0, ne1);
    free(v);
    return b;
}
static float *get(const pl_buf *b, int64_t n) {
    float *v = malloc(sizeof(float) * (size_t)n);
    pl_be_read(b, 0, v, n * 4);
    return v;
}
/* max |a - ref| / max(1, max |ref|) */
static double err(const float *a, const double *ref, int64_t n) {
    double e = 0, mx = 1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - ref[i]);
        if (!(d <= e)) e = isnan(d) ? INFINITY : d;
        if (fabs(ref[i]) > mx) mx = fabs(ref[i]);
    }
    return e / mx;
}
static double sig(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* ---- sigmoid_mul ---- */

static void test_sigmoid_mul(void) {
    for (int trial = 0; trial < 20; trial++) {
        int rows = irand(1, 7), cols = irand(1, 70), gc = trial % 2 ? 1 : cols;
        bool acc = trial % 4 >= 2;
        float *x = malloc(sizeof(float) * (size_t)(rows * cols)),
              *g = malloc(sizeof(float) * (size_t)(rows * gc)),
              *o0 = malloc(sizeof(float) * (size_t)(rows * cols));
        fill(x, rows * cols, 3), fill(g, rows * gc, 6), fill(o0, rows * cols, 2);
        pl_buf *bx = mk(x, cols, rows), *bg = mk(g, gc, rows);
        pl_buf *bo = acc ? mk(o0, cols, rows) : poisoned(cols, rows);
        CHECK(pl_be_sigmoid_mul(bx, bg, rows, cols, gc, acc, bo) == PL_OK, "%s", pl_last_error());
        double *ref = malloc(sizeof(double) * (size_t)(rows * cols));
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                ref[r * cols + c] = (acc ? o0[r * cols + c] : 0) +
                                    (double)x[r * cols + c] * sig(g[r * gc + (gc == 1 ? 0 : c)]);
        float *o = get(bo, rows * cols);
        double e = err(o, ref, rows * cols);
        CHECK(e < 1e-6, "sigmoid_mul %dx%d g_cols %d acc %d: error %.3g", rows, cols, gc, acc, e);
        free(o), free(ref), free(x), free(g), free(o0);
        pl_be_buf_free(bx), pl_be_buf_free(bg), pl_be_buf_free(bo);
    }
    /* in place (out == x) without accumulate */
    float x[6] = {1, -2, 3, 0.5f, -1, 2}, g[2] = {0.3f, -4};
    pl_buf *bx = mk(x, 3, 2), *bg = mk(g, 1, 2);
    CHECK(pl_be_sigmoid_mul(bx, bg, 2, 3, 1, false, bx) == PL_OK, "%s", pl_last_error());
    float o[6];
    pl_be_read(bx, 0, o, sizeof o);
    CHECK(fabs(o[4] - (-1 * sig(-4))) < 1e-7 && fabs(o[0] - sig(0.3)) < 1e-7, "in place");
    pl_be_buf_free(bx), pl_be_buf_free(bg);
}

/* ---- ssm_conv ---- */

/* Reference over state0 [K-1, ch] ++ x [n, ch]: out, the final state, and each row's. */
static void conv_ref(const float *w, const float *st0, const float *x, int K, int ch, int n,
                     double *out, double *st, double *snaps) {
    int km1 = K - 1;
    double *in = malloc(sizeof(double) * (size_t)((km1 + n) * ch));
    for (int i = 0; i < km1 * ch; i++) in[i] = st0[i];
    for (int i = 0; i < n * ch; i++) in[km1 * ch + i] = x[i];
    for (int t = 0; t < n; t++) {
        for (int c = 0; c < ch; c++) {
            double a = 0;
            for (int j = 0; j < K; j++) a += (double)w[c * K + j] * in[(t + j) * ch + c];
            out[t * ch + c] = a * sig(a);
        }
        for (int i = 0; i < km1 * ch; i++) snaps[t * km1 * ch + i] = in[(t + 1) * ch + i];
    }
    for (int i = 0; i < km1 * ch; i++) st[i] = in[n * ch + i];
    free(in);
}

static void test_ssm_conv(void) {
    for (int trial = 0; trial < 16; trial++) {
        int K = irand(2, 5), ch = irand(1, 40), n = irand(1, 9), km1 = K - 1;
        float *w = malloc(sizeof(float) * (size_t)(K * ch)),
              *st0 = malloc(sizeof(float) * (size_t)(km1 * ch)),
              *x = malloc(sizeof(float) * (size_t)(n * ch));
        fill(w, K * ch, 1), fill(st0, km1 * ch, 2), fill(x, n * ch, 2);
        if (trial == 0) memset(st0, 0, sizeof(float) * (size_t)(km1 * ch)); /* a fresh start */
        pl_buf *bw = NULL;
        CHECK(pl_be_buf_weight(be, PL_TYPE_F32, K, ch, w, &bw) == PL_OK, "%s", pl_last_error());
        pl_buf *bx = mk(x, ch, n), *bs = mk(st0, ch, km1), *bo = poisoned(ch, n),
               *bsn = poisoned(ch, (int64_t)n * km1);
        CHECK(pl_be_ssm_conv(bx, bw, bs, n, bsn, bo) == PL_OK, "%s", pl_last_error());
        double *ro = malloc(sizeof(double) * (size_t)(n * ch)),
               *rs = malloc(sizeof(double) * (size_t)(km1 * ch)),
               *rsn = malloc(sizeof(double) * (size_t)(n * km1 * ch));
        conv_ref(w, st0, x, K, ch, n, ro, rs, rsn);
        float *o = get(bo, n * ch), *s = get(bs, km1 * ch), *sn = get(bsn, n * km1 * ch);
        double eo = err(o, ro, n * ch), es = err(s, rs, km1 * ch), esn = err(sn, rsn, n * km1 * ch);
        CHECK(eo < 1e-6 && es == 0 && esn == 0,
              "ssm_conv K %d ch %d n %d: out %.3g state %.3g snaps %.3g", K, ch, n, eo, es, esn);

        /* two calls (n1 rows, then the rest, the state carried) == one call; no snaps */
        int n1 = irand(0, n);
        pl_buf *bs2 = mk(st0, ch, km1), *bo2 = poisoned(ch, n),
               *bx2 = mk_rows(x + n1 * ch, ch, n - n1, n - n1);
        pl_buf *bo2b = poisoned(ch, n);
        CHECK(pl_be_ssm_conv(bx, bw, bs2, n1, NULL, bo2) == PL_OK &&
                  pl_be_ssm_conv(bx2, bw, bs2, n - n1, NULL, bo2b) == PL_OK,
              "%s", pl_last_error());
        float *o2a = get(bo2, n * ch), *o2b = get(bo2b, n * ch), *s2 = get(bs2, km1 * ch);
        CHECK(!memcmp(o2a, o, sizeof(float) * (size_t)(n1 * ch)) &&
                  !memcmp(o2b, o + n1 * ch, sizeof(float) * (size_t)((n - n1) * ch)) &&
                  !memcmp(s2, s, sizeof(float) * (size_t)(km1 * ch)),
              "ssm_conv split %d + %d differs from one call", n1, n - n1);
        free(o2a), free(o2b), free(s2);
        pl_be_buf_free(bs2), pl_be_buf_free(bo2), pl_be_buf_free(bx2), pl_be_buf_free(bo2b);
        free(o), free(s), free(sn), free(ro), free(rs), free(rsn), free(w), free(st0), free(x);
        pl_be_buf_free(bw), pl_be_buf_free(bx), pl_be_buf_free(bs), pl_be_buf_free(bo);
        pl_be_buf_free(bsn);
    }
}

/* ---- delta_rule ---- */

typedef struct {
    int nk, nv, dk, dv, n;
    float eps;
} dshape;

/* The contract in double: state [nv, dk*dv] updated in place, out [n, nv*dv], snaps. */
static void delta_ref(const dshape *d, const float *qkv, const float *a, const float *b,
                      const float *sa, const float *dt, double *S, double *out, double *snaps) {
    int row = 2 * d->nk * d->dk + d->nv * d->dv;
    double q[64], k[64], u[64];
    for (int t = 0; t < d->n; t++) {
        for (int h = 0; h < d->nv; h++) {
            int kh = h % d->nk;
            const float *qr = qkv + t * row + kh * d->dk,
                        *kr = qkv + t * row + (d->nk + kh) * d->dk;
            const float *v = qkv + t * row + 2 * d->nk * d->dk + h * d->dv;
            double qs = 0, ks = 0;
            for (int i = 0; i < d->dk; i++)
                qs += (double)qr[i] * qr[i], ks += (double)kr[i] * kr[i];
            for (int i = 0; i < d->dk; i++) {
                q[i] = qr[i] / sqrt(qs + d->eps) / sqrt((double)d->dk);
                k[i] = kr[i] / sqrt(ks + d->eps);
            }
            double beta = sig(b[t * d->nv + h]);
            double x = a[t * d->nv + h] + (double)dt[h];
            double g = exp(sa[h] * (x > 20 ? x : log1p(exp(x))));
            double *Sh = S + (int64_t)h * d->dk * d->dv;
            for (int i = 0; i < d->dk * d->dv; i++) Sh[i] *= g;
            for (int j = 0; j < d->dv; j++) {
                double s = 0;
                for (int i = 0; i < d->dk; i++) s += Sh[i * d->dv + j] * k[i];
                u[j] = beta * (v[j] - s);
            }
            for (int i = 0; i < d->dk; i++)
                for (int j = 0; j < d->dv; j++) Sh[i * d->dv + j] += k[i] * u[j];
            for (int j = 0; j < d->dv; j++) {
                double s = 0;
                for (int i = 0; i < d->dk; i++) s += Sh[i * d->dv + j] * q[i];
                out[(t * d->nv + h) * d->dv + j] = s;
            }
        }
        memcpy(snaps + (int64_t)t * d->nv * d->dk * d->dv, S,
               sizeof(double) * (size_t)(d->nv * d->dk * d->dv));
    }
}

typedef struct {
    pl_buf *qkv, *a, *b, *sa, *dt;
} delta_in;

static delta_in delta_bufs(const dshape *d, const float *qkv, const float *a, const float *b,
                           const float *sa, const float *dt, int row0, int n) {
    int row = 2 * d->nk * d->dk + d->nv * d->dv;
    return (delta_in){mk_rows(qkv + row0 * row, row, n, n), mk_rows(a + row0 * d->nv, d->nv, n, n),
                      mk_rows(b + row0 * d->nv, d->nv, n, n), mk(sa, d->nv, 1), mk(dt, d->nv, 1)};
}
static void delta_free(delta_in *in) {
    pl_be_buf_free(in->qkv), pl_be_buf_free(in->a), pl_be_buf_free(in->b);
    pl_be_buf_free(in->sa), pl_be_buf_free(in->dt);
}

static void test_delta_rule(void) {
    for (int trial = 0; trial < 24; trial++) {
        dshape d = {.nk = irand(1, 3),
                    .dk = irand(1, 24),
                    .dv = irand(1, 24),
                    .n = irand(1, 8),
                    .eps = 1e-6f};
        d.nv = d.nk * irand(1, 3);
        if (trial == 0) d.nk = 2, d.nv = 4, d.dk = 32, d.dv = 32; /* the fixtures' shape */
        int row = 2 * d.nk * d.dk + d.nv * d.dv, sz = d.nv * d.dk * d.dv;
        pl_delta_params p = {d.nk, d.nv, d.dk, d.dv, d.eps};
        float *qkv = malloc(sizeof(float) * (size_t)(d.n * row)),
              *a = malloc(sizeof(float) * (size_t)(d.n * d.nv)),
              *b = malloc(sizeof(float) * (size_t)(d.n * d.nv)),
              *sa = malloc(sizeof(float) * 3 * 3), *dt = malloc(sizeof(float) * 9),
              *s0 = malloc(sizeof(float) * (size_t)sz);
        fill(qkv, d.n * row, 2), fill(a, d.n * d.nv, 3), fill(b, d.n * d.nv, 3);
        for (int h = 0; h < d.nv; h++) sa[h] = (float)(-exp(urand())), dt[h] = (float)urand();
        if (trial == 1) a[0] = 30; /* softplus' linear branch */
        fill(s0, sz, trial == 0 ? 0 : 0.5);
        delta_in in = delta_bufs(&d, qkv, a, b, sa, dt, 0, d.n);
        pl_buf *st = mk(s0, d.dk * d.dv, d.nv), *out = poisoned(d.nv * d.dv, d.n),
               *sn = poisoned(d.dk * d.dv, (int64_t)d.n * d.nv);
        CHECK(pl_be_delta_rule(in.qkv, in.a, in.b, in.sa, in.dt, st, d.n, &p, sn, out) == PL_OK,
              "%s", pl_last_error());
        double *rS = malloc(sizeof(double) * (size_t)sz),
               *ro = malloc(sizeof(double) * (size_t)(d.n * d.nv * d.dv)),
               *rsn = malloc(sizeof(double) * (size_t)(d.n * sz));
        for (int i = 0; i < sz; i++) rS[i] = s0[i];
        delta_ref(&d, qkv, a, b, sa, dt, rS, ro, rsn);
        float *o = get(out, d.n * d.nv * d.dv), *s = get(st, sz), *snv = get(sn, (int64_t)d.n * sz);
        double eo = err(o, ro, d.n * d.nv * d.dv), es = err(s, rS, sz),
               esn = err(snv, rsn, (int64_t)d.n * sz);
        CHECK(eo < 2e-5 && es < 2e-5 && esn < 2e-5,
              "delta_rule nk %d nv %d dk %d dv %d n %d: out %.3g state %.3g snaps %.3g", d.nk, d.nv,
              d.dk, d.dv, d.n, eo, es, esn);
        CHECK(!memcmp(snv + (int64_t)(d.n - 1) * sz, s, sizeof(float) * (size_t)sz),
              "the last snapshot is the final state");

        /* rows [0, n1) then [n1, n) with the state carried == one call, bit for bit; and
         * the first call's state == the snapshot after row n1 - 1 */
        int n1 = irand(1, d.n);
        delta_in in1 = delta_bufs(&d, qkv, a, b, sa, dt, 0, n1),
                 in2 = delta_bufs(&d, qkv, a, b, sa, dt, n1, d.n - n1);
        pl_buf *st2 = mk(s0, d.dk * d.dv, d.nv), *o1 = poisoned(d.nv * d.dv, n1),
               *o2 = poisoned(d.nv * d.dv, d.n - n1 > 0 ? d.n - n1 : 1);
        CHECK(pl_be_delta_rule(in1.qkv, in1.a, in1.b, in1.sa, in1.dt, st2, n1, &p, NULL, o1) ==
                  PL_OK,
              "%s", pl_last_error());
        float *mid = get(st2, sz);
        CHECK(!memcmp(mid, snv + (int64_t)(n1 - 1) * sz, sizeof(float) * (size_t)sz),
              "delta_rule: the snapshot after row %d differs from the state after %d rows", n1 - 1,
              n1);
        CHECK(pl_be_delta_rule(in2.qkv, in2.a, in2.b, in2.sa, in2.dt, st2, d.n - n1, &p, NULL,
                               o2) == PL_OK,
              "%s", pl_last_error());
        float *oa = get(o1, n1 * d.nv * d.dv), *ob = get(o2, (d.n - n1) * d.nv * d.dv),
              *s2 = get(st2, sz);
        CHECK(!memcmp(oa, o, sizeof(float) * (size_t)(n1 * d.nv * d.dv)) &&
                  !memcmp(ob, o + n1 * d.nv * d.dv,
                          sizeof(float) * (size_t)((d.n - n1) * d.nv * d.dv)) &&
                  !memcmp(s2, s, sizeof(float) * (size_t)sz),
              "delta_rule split %d + %d differs from one call", n1, d.n - n1);
        free(oa), free(ob), free(s2), free(mid);
        delta_free(&in1), delta_free(&in2);
        pl_be_buf_free(st2), pl_be_buf_free(o1), pl_be_buf_free(o2);

        free(o), free(s), free(snv), free(rS), free(ro), free(rsn);
        free(qkv), free(a), free(b), free(sa), free(dt), free(s0);
        delta_free(&in);
        pl_be_buf_free(st), pl_be_buf_free(out), pl_be_buf_free(sn);
    }
}

static void run_tests(void) {
    CHECK(pl_cpu_new(2, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    test_sigmoid_mul();
    test_ssm_conv();
    test_delta_rule();
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
}
