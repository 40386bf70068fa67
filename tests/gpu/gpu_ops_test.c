/* gpu_ops_test.c - the WebGPU backend's MoE and Gated DeltaNet ops (softmax_rows, topk_rows,
 * matmul_id, moe_combine, sigmoid_mul, ssm_conv, delta_rule) through the seam, against the
 * double-precision references of kernel_ref.h, on fresh random inputs and shapes with every
 * output poisoned with NaNs first; rows past an op's range must stay poisoned. */
#include "test.h"

#include "gpu/gpu.h"
#include "gpu/kernel_ref.h"
#include "gpu/repack.h"
#include "gpu_test_util.h"

#include "gpu_mat_util.h"

static pl_backend *open_gpu(void) {
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_gpu_backend_opts o = {.no_tune = 1, .no_selftest = 1};
    pl_backend *be = NULL;
    if (pl_gpu_backend_new(&o, &be) == PL_OK) {
        fprintf(stderr, "GPU: %s\n", be->device);
        return be;
    }
    gt_no_gpu("the webgpu backend");
    return NULL;
}

static uint32_t rnd(uint32_t lo, uint32_t hi) { /* in [lo, hi] */
    return lo + gt_u32() % (hi - lo + 1);
}

/* A buffer of ne1 rows of ne0 values holding data, or NaNs (data NULL). */
static pl_buf *mk(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    pl_buf *b = NULL;
    if (pl_be_buf_new(be, type, ne0, ne1, &b) != PL_OK) {
        CHECK(0, "buffer: %s", pl_last_error());
        return NULL;
    }
    size_t bytes = (size_t)(ne0 * ne1) * 4;
    unsigned char *tmp = malloc(bytes);
    if (data)
        memcpy(tmp, data, bytes);
    else
        memset(tmp, 0xff, bytes);
    CHECK(pl_be_write(b, 0, tmp, (int64_t)bytes) == PL_OK, "write: %s", pl_last_error());
    free(tmp);
    return b;
}

static pl_buf *mkf(pl_backend *be, int64_t ne0, int64_t ne1, const float *data) {
    return mk(be, PL_TYPE_F32, ne0, ne1, data);
}

static float *rd(const pl_buf *b) {
    size_t n = (size_t)(b->ne0 * b->ne1);
    float *v = malloc(n * 4);
    CHECK(pl_be_read(b, 0, v, (int64_t)n * 4) == PL_OK, "read: %s", pl_last_error());
    return v;
}

static float *randv(size_t n, float lo, float hi) {
    float *v = malloc((n ? n : 1) * 4);
    gt_fill(v, n, lo, hi);
    return v;
}

/* got[0..n) against want within rel * (mag or |want|) + abs; got[n..total) still NaN. */
static void compare(const char *what, const float *got, const float *want, const double *mag,
                    size_t n, size_t total, double rel, double abs) {
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; i++) {
        double scale = mag ? mag[i] : fabs((double)want[i]);
        if (!(fabs((double)got[i] - want[i]) <= rel * scale + abs)) {
            CHECK(0, "%s: value %zu is %.9g, expected %.9g", what, i, got[i], want[i]);
            bad++;
        }
    }
    for (size_t i = n; i < total && !bad; i++)
        if (got[i] == got[i]) {
            CHECK(0, "%s: value %zu past the op's range was written (%g)", what, i, got[i]);
            bad++;
        }
    if (!bad) CHECK(1, "%s", what);
}

/* ------------------------------------------------------------------ softmax / top-k */

/* (Each new shape compiles kernels, seconds on lavapipe: few shapes per op, random ones.) */
static void test_softmax(pl_backend *be) {
    for (int it = 0; it < 3; it++) {
        uint32_t rows = rnd(1, 6), cols = it == 0 ? 1 : rnd(2, 700);
        int inplace = it % 3 == 1;
        float *x = randv((size_t)rows * cols, -12, 12), *want = malloc((size_t)rows * cols * 4);
        pl_buf *bx = mkf(be, cols, rows + 1, NULL),
               *bo = inplace ? bx : mkf(be, cols, rows + 1, NULL);
        pl_be_write(bx, 0, x, (int64_t)rows * cols * 4);
        CHECK(pl_be_softmax_rows(bx, rows, cols, bo) == PL_OK, "%s", pl_last_error());
        float *got = rd(bo);
        pl_gpu_ref_softmax(x, rows, cols, want);
        char what[96];
        snprintf(what, sizeof what, "softmax %u x %u%s", rows, cols, inplace ? " in place" : "");
        compare(what, got, want, NULL, (size_t)rows * cols, (size_t)(rows + 1) * cols, 2e-5, 1e-9);
        free(x), free(want), free(got);
        if (!inplace) pl_be_buf_free(bo);
        pl_be_buf_free(bx);
    }
}

static void test_topk_rows(pl_backend *be) {
    for (int it = 0; it < 4; it++) {
        /* one workgroup per row up to 1024 values, else chunks merged in a second pass */
        uint32_t rows = rnd(1, 5), cols = it == 0 ? 1 : it == 2 ? rnd(1025, 2500) : rnd(2, 600);
        uint32_t k = rnd(1, cols < 32 ? cols : 32);
        size_t nx = (size_t)rows * cols;
        float *x = malloc(nx * 4);
        for (size_t i = 0; i < nx; i++) { /* few distinct values: many ties; NaNs, -inf */
            uint32_t r = gt_u32();
            x[i] = (float)(r % 23) - 11.0f;
            if (r % 37 == 0) x[i] = NAN;
            if (r % 41 == 0) x[i] = -INFINITY;
        }
        if (it == 1)
            for (size_t i = 0; i < nx; i++) x[i] = NAN; /* places left over: -1, -inf */
        pl_buf *bx = mkf(be, cols, rows, x);
        pl_buf *bi = mk(be, PL_TYPE_I32, k, rows + 1, NULL), *bv = mkf(be, k, rows + 1, NULL);
        CHECK(pl_be_topk_rows(bx, rows, cols, k, bi, bv) == PL_OK, "%s", pl_last_error());
        int32_t *ids = (int32_t *)rd(bi);
        float *vals = rd(bv), *rv = malloc(k * 4);
        uint32_t *ri = malloc(k * 4);
        int bad = 0;
        for (uint32_t r = 0; r < rows; r++) {
            pl_gpu_ref_topk(x + (size_t)r * cols, cols, k, rv, ri);
            for (uint32_t j = 0; j < k; j++)
                bad += ids[r * k + j] != (int32_t)ri[j] || memcmp(&vals[r * k + j], &rv[j], 4);
        }
        for (uint32_t j = 0; j < k; j++)
            bad += ids[rows * k + j] != -1 || vals[rows * k + j] == vals[rows * k + j];
        CHECK(bad == 0, "top-%u of %u rows of %u: %d wrong", k, rows, cols, bad);
        free(x), free(ids), free(vals), free(rv), free(ri);
        pl_be_buf_free(bx), pl_be_buf_free(bi), pl_be_buf_free(bv);
    }
}

/* ------------------------------------------------------------------ experts */

/* big: more than PL_GPU_GEMM_MIN_COLS tokens (with act_q8: the grouped expert GEMM), ids
 * pattern 0 random (some bad), 1 every slot the same expert, 2 only even experts (the odd
 * ones empty) */
static void matmul_id_case(pl_backend *be, pl_gpu_wtype t, int act_q8, int big, int pattern) {
    int quant = t == PL_GW_Q4_0 || t == PL_GW_Q8_0;
    uint32_t n_exp = big ? rnd(3, 9) : rnd(1, 6), n_out = rnd(1, 70);
    uint32_t n = big ? rnd(17, 60) : rnd(1, 4), n_used = rnd(1, n_exp);
    uint32_t cols = quant ? 32 * rnd(1, 6) : t == PL_GW_F16 ? 8 * rnd(1, 12) : rnd(1, 200);
    if (t == PL_GW_F16 && gt_u32() % 2) cols = rnd(1, 90); /* not whole vectors */
    int shared = gt_u32() % 2;
    uint32_t slots = n * n_used, nx = shared ? n : slots;
    unsigned char *w = ggml_rows(t, n_exp * n_out, cols);
    int32_t *ids = malloc(slots * 4);
    for (uint32_t s = 0; s < slots; s++) {
        uint32_t r = gt_u32() % 16;
        ids[s] = r == 0 ? -1 : r == 1 ? (int32_t)n_exp : (int32_t)(gt_u32() % n_exp);
        if (pattern == 1) ids[s] = (int32_t)(n_exp - 1);
        if (pattern == 2) ids[s] = (int32_t)(2 * (gt_u32() % ((n_exp + 1) / 2)));
    }
    float *x = randv((size_t)nx * cols, -1, 1), *want = malloc((size_t)slots * n_out * 4);
    double *mag = malloc((size_t)slots * n_out * sizeof *mag);
    be->act_q8 = act_q8;
    pl_buf *bw = NULL, *bx = mkf(be, cols, nx, x), *bi = mk(be, PL_TYPE_I32, slots, 1, ids);
    pl_buf *bo = mkf(be, n_out, slots + 1, NULL);
    CHECK(pl_be_buf_weight(be, ggml_of(t), cols, (int64_t)n_exp * n_out, w, &bw) == PL_OK, "%s",
          pl_last_error());
    CHECK(pl_be_matmul_id(bw, n_exp, bx, bi, n, n_used, shared, bo) == PL_OK, "%s",
          pl_last_error());
    float *got = rd(bo);
    /* the reference on the GPU layout of the same weight */
    uint64_t rows = (uint64_t)n_exp * n_out;
    void *q = malloc(pl_gpu_quant_bytes(t, cols, rows) + 16);
    uint16_t *sc = malloc(pl_gpu_scale_bytes(t, cols, rows) + 16);
    CHECK(pl_gpu_repack_rows(ggml_of(t), w, cols, (uint32_t)rows, t, q, sc, NULL) == PL_OK,
          "repack");
    pl_gemv_params p = {.type = t,
                        .rows = n_out,
                        .cols = cols,
                        .mode = PL_GEMV_STORE,
                        .q8x = act_q8 && quant,
                        .ids = 1,
                        .n_exp = n_exp,
                        .n_used = n_used,
                        .x_shared = shared,
                        .parts = 1};
    pl_gpu_ref_mat m = {{q}, {quant ? sc : NULL}};
    pl_gpu_ref_matmul_id(&p, &m, ids, slots, x, want, mag);
    for (size_t i = 0; i < (size_t)slots * n_out; i++) mag[i] += 1e-6 * fabs(want[i]) + 1e-30;
    char what[128];
    snprintf(what, sizeof what, "matmul_id type %d q8 %d: %u experts of %u x %u, %u x %u%s", t,
             act_q8, n_exp, n_out, cols, n, n_used, shared ? " shared" : "");
    compare(what, got, want, mag, (size_t)slots * n_out, (size_t)(slots + 1) * n_out, 1e-5, 0);
    be->act_q8 = 0;
    free(w), free(ids), free(x), free(want), free(mag), free(got), free(q), free(sc);
    pl_be_buf_free(bw), pl_be_buf_free(bx), pl_be_buf_free(bi), pl_be_buf_free(bo);
}

static void test_matmul_id(pl_backend *be) {
    const pl_gpu_wtype types[4] = {PL_GW_F32, PL_GW_F16, PL_GW_Q4_0, PL_GW_Q8_0};
    for (int i = 0; i < 4; i++) {
        matmul_id_case(be, types[i], 0, 0, 0);
        if (types[i] == PL_GW_Q4_0 || types[i] == PL_GW_Q8_0) matmul_id_case(be, types[i], 1, 0, 0);
    }
    /* prefill's grouped expert GEMM */
    for (int pattern = 0; pattern < 3; pattern++)
        matmul_id_case(be, pattern == 1 ? PL_GW_Q8_0 : PL_GW_Q4_0, 1, 1, pattern);
}

static void test_moe_combine(pl_backend *be) {
    for (int it = 0; it < 6; it++) {
        uint32_t n = rnd(1, 4), nu = rnd(1, 8), cols = rnd(1, 300);
        int acc = it % 2;
        float *y = randv((size_t)n * nu * cols, -2, 2), *w = randv((size_t)n * nu, 0, 1);
        float *o0 = randv((size_t)n * cols, -1, 1), *want = malloc((size_t)n * cols * 4);
        pl_buf *by = mkf(be, cols, n * nu, y), *bw = mkf(be, n * nu, 1, w);
        pl_buf *bo = mkf(be, cols, n + 1, NULL);
        pl_be_write(bo, 0, o0, (int64_t)n * cols * 4);
        CHECK(pl_be_moe_combine(by, bw, n, nu, acc, bo) == PL_OK, "%s", pl_last_error());
        float *got = rd(bo);
        memcpy(want, o0, (size_t)n * cols * 4);
        pl_gpu_ref_moe_combine(y, w, n, nu, cols, acc, want);
        char what[96];
        snprintf(what, sizeof what, "moe_combine %u x %u of %u%s", n, nu, cols, acc ? " acc" : "");
        compare(what, got, want, NULL, (size_t)n * cols, (size_t)(n + 1) * cols, 1e-5, 1e-5);
        free(y), free(w), free(o0), free(want), free(got);
        pl_be_buf_free(by), pl_be_buf_free(bw), pl_be_buf_free(bo);
    }
}

/* ------------------------------------------------------------------ DeltaNet */

static void test_sigmoid_mul(pl_backend *be) {
    for (int it = 0; it < 8; it++) {
        uint32_t rows = rnd(1, 5), cols = rnd(1, 300), gc = it % 2 ? 1 : cols;
        int acc = it % 4 >= 2, inplace = !acc && it % 3 == 0;
        size_t nv = (size_t)rows * cols;
        float *x = randv(nv, -3, 3), *g = randv((size_t)rows * gc, -6, 6);
        float *o0 = randv(nv, -1, 1), *want = malloc(nv * 4);
        pl_buf *bx = mkf(be, cols, rows + 1, NULL), *bg = mkf(be, gc, rows, g);
        pl_buf *bo = inplace ? bx : mkf(be, cols, rows + 1, NULL);
        pl_be_write(bx, 0, x, (int64_t)nv * 4);
        if (!inplace) pl_be_write(bo, 0, o0, (int64_t)nv * 4);
        CHECK(pl_be_sigmoid_mul(bx, bg, rows, cols, gc, acc, bo) == PL_OK, "%s", pl_last_error());
        float *got = rd(bo);
        memcpy(want, inplace ? x : o0, nv * 4);
        pl_gpu_ref_sigmoid_mul(x, g, rows, cols, gc, acc, want);
        char what[96];
        snprintf(what, sizeof what, "sigmoid_mul %u x %u gate cols %u%s%s", rows, cols, gc,
                 acc ? " acc" : "", inplace ? " in place" : "");
        compare(what, got, want, NULL, nv, (size_t)(rows + 1) * cols, 1e-5, 1e-6);
        free(x), free(g), free(o0), free(want), free(got);
        if (!inplace) pl_be_buf_free(bo);
        pl_be_buf_free(bx), pl_be_buf_free(bg);
    }
}

static void test_ssm_conv(pl_backend *be) {
    for (int it = 0; it < 4; it++) {
        uint32_t ch = rnd(1, 300), k = it % 2 ? 4 : rnd(2, 6), km1 = k - 1;
        int snaps = it % 3 != 0;
        float *w = randv((size_t)ch * k, -1, 1), *st = randv((size_t)km1 * ch, -2, 2);
        pl_buf *bw = NULL, *bs = mkf(be, ch, km1, st);
        CHECK(pl_be_buf_weight(be, PL_TYPE_F32, k, ch, w, &bw) == PL_OK, "%s", pl_last_error());
        /* two calls in a row: the second starts from the state the first left */
        for (int call = 0; call < 2; call++) {
            uint32_t n = call ? 1 : rnd(1, 9);
            float *x = randv((size_t)n * ch, -2, 2), *want = malloc((size_t)n * ch * 4);
            float *wsn = malloc((size_t)n * km1 * ch * 4 + 4);
            pl_buf *bx = mkf(be, ch, n, x), *bo = mkf(be, ch, n + 1, NULL);
            pl_buf *bn = snaps ? mkf(be, ch, (n + 1) * km1, NULL) : NULL;
            CHECK(pl_be_ssm_conv(bx, bw, bs, n, bn, bo) == PL_OK, "%s", pl_last_error());
            float *got = rd(bo), *gst = rd(bs);
            pl_gpu_ref_ssm_conv(x, w, st, n, ch, k, snaps ? wsn : NULL, want);
            char what[96];
            snprintf(what, sizeof what, "ssm_conv %u channels, kernel %u, %u rows (call %d)", ch, k,
                     n, call);
            compare(what, got, want, NULL, (size_t)n * ch, (size_t)(n + 1) * ch, 1e-5, 1e-6);
            compare("ssm_conv state", gst, st, NULL, (size_t)km1 * ch, 0, 0, 0);
            if (snaps) {
                float *gsn = rd(bn);
                compare("ssm_conv snapshots", gsn, wsn, NULL, (size_t)n * km1 * ch,
                        (size_t)(n + 1) * km1 * ch, 0, 0);
                free(gsn);
            }
            free(x), free(want), free(wsn), free(got), free(gst);
            pl_be_buf_free(bx), pl_be_buf_free(bo), pl_be_buf_free(bn);
        }
        free(w), free(st);
        pl_be_buf_free(bw), pl_be_buf_free(bs);
    }
}

static void delta_case(pl_backend *be, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv,
                       uint32_t n, int snaps) {
    pl_delta_rule_params p = {.n_k = nk, .n_v = nv, .d_k = dk, .d_v = dv, .eps = 1e-6f};
    uint32_t row = 2 * nk * dk + nv * dv;
    size_t hs = (size_t)dk * dv, no = (size_t)n * nv * dv;
    float *qkv = randv((size_t)n * row, -1, 1), *a = randv((size_t)n * nv, -4, 4);
    float *b = randv((size_t)n * nv, -4, 4), *dt = randv(nv, -1, 1), *sa = malloc(nv * 4);
    for (uint32_t h = 0; h < nv; h++) sa[h] = -expf(gt_unif(-2, 1));
    if (n > 2) a[nv] = 30; /* softplus of a large value is the value */
    float *st = randv(nv * hs, -0.5f, 0.5f), *want = malloc(no * 4);
    float *wsn = malloc(n * nv * hs * 4);
    pl_buf *bq = mkf(be, row, n, qkv), *ba = mkf(be, nv, n, a), *bb = mkf(be, nv, n, b);
    pl_buf *bsa = mkf(be, nv, 1, sa), *bdt = mkf(be, nv, 1, dt), *bs = mkf(be, hs, nv, st);
    pl_buf *bo = mkf(be, (int64_t)nv * dv, n + 1, NULL);
    pl_buf *bn = snaps ? mkf(be, hs, (int64_t)(n + 1) * nv, NULL) : NULL;
    pl_delta_params dp = {(int)nk, (int)nv, (int)dk, (int)dv, p.eps};
    CHECK(pl_be_delta_rule(bq, ba, bb, bsa, bdt, bs, n, &dp, bn, bo) == PL_OK, "%s",
          pl_last_error());
    float *got = rd(bo), *gst = rd(bs);
    pl_gpu_ref_delta_rule(&p, qkv, a, b, sa, dt, st, n, snaps ? wsn : NULL, want);
    char what[112];
    snprintf(what, sizeof what, "delta_rule %u/%u heads of %u/%u, %u tokens%s", nk, nv, dk, dv, n,
             snaps ? ", snapshots" : "");
    compare(what, got, want, NULL, no, no + (size_t)nv * dv, 1e-4, 1e-5);
    compare("delta_rule state", gst, st, NULL, nv * hs, 0, 1e-4, 1e-5);
    if (snaps) {
        float *gsn = rd(bn);
        compare("delta_rule snapshots", gsn, wsn, NULL, n * nv * hs, (n + 1) * nv * hs, 1e-4, 1e-5);
        free(gsn);
    }
    free(qkv), free(a), free(b), free(dt), free(sa), free(st), free(want), free(wsn), free(got),
        free(gst);
    pl_be_buf_free(bq), pl_be_buf_free(ba), pl_be_buf_free(bb), pl_be_buf_free(bsa);
    pl_be_buf_free(bdt), pl_be_buf_free(bs), pl_be_buf_free(bo), pl_be_buf_free(bn);
}

static void test_delta_rule(pl_backend *be) {
    delta_case(be, 1, 1, 4, 4, 1, 0);
    delta_case(be, 2, 4, 16, 8, 3, 1);  /* value heads tiled over key heads */
    delta_case(be, 1, 2, 20, 40, 5, 1); /* sizes that are not powers of two */
    delta_case(be, 2, 2, 128, 128, 2, 0);
    delta_case(be, 1, 1, 256, 256, 2, 1); /* the largest heads of the models */
    delta_case(be, 1, 1, 1024, 8, 1, 0);  /* the seam's largest key head: 64 parts */
    for (int it = 0; it < 2; it++) {
        uint32_t nk = rnd(1, 2), nv = nk * rnd(1, 3);
        delta_case(be, nk, nv, rnd(1, 70), rnd(1, 70), rnd(1, 6), it % 2);
    }
}

/* The GEMM in the GEMV's order (opts.gemm_exact_min; a software adapter never takes it
 * itself): every column of a q8x matmul over n columns, accumulating or not, bit for bit
 * that column's own one-column GEMV (decode's), on K of fewer blocks than the GEMV's
 * threads and of more (two a thread for some). */
static void exact_case(pl_backend *be, pl_gpu_wtype t, uint32_t rows, uint32_t cols, uint32_t n,
                       bool acc) {
    unsigned char *w = ggml_rows(t, rows, cols);
    float *x = randv((size_t)n * cols, -1, 1), *y0 = randv((size_t)n * rows, -1, 1);
    pl_buf *bw = NULL, *bx = mkf(be, cols, n, x), *bo = mkf(be, rows, n, y0);
    CHECK(pl_be_buf_weight(be, ggml_of(t), cols, rows, w, &bw) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_matmul(bw, bx, NULL, n, acc, bo) == PL_OK, "%s", pl_last_error());
    float *got = rd(bo);
    size_t bad = 0;
    for (uint32_t c = 0; c < n; c++) {
        pl_buf *x1 = mkf(be, cols, 1, x + (size_t)c * cols),
               *o1 = mkf(be, rows, 1, y0 + (size_t)c * rows);
        CHECK(pl_be_matmul(bw, x1, NULL, 1, acc, o1) == PL_OK, "%s", pl_last_error());
        float *one = rd(o1);
        bad += memcmp(one, got + (size_t)c * rows, rows * 4) != 0;
        free(one);
        pl_be_buf_free(x1), pl_be_buf_free(o1);
    }
    CHECK(bad == 0,
          "GEMV-order GEMM type %d %ux%u, %u columns%s: %zu columns differ from "
          "their one-column GEMV",
          t, rows, cols, n, acc ? ", accumulating" : "", bad);
    free(w), free(x), free(y0), free(got);
    pl_be_buf_free(bw), pl_be_buf_free(bx), pl_be_buf_free(bo);
}

static void test_exact_matmul(void) {
    pl_gpu_backend_opts o = {.no_tune = 1, .no_selftest = 1, .gemm_exact_min = 2};
    pl_backend *be = NULL;
    if (pl_gpu_backend_new(&o, &be) != PL_OK) {
        CHECK(0, "GPU backend with gemm_exact_min = 2: %s", pl_last_error());
        return;
    }
    be->act_q8 = 1;
    exact_case(be, PL_GW_Q4_0, 37, 32 * 45, 11, false); /* 45 blocks: two a thread for some */
    exact_case(be, PL_GW_Q8_0, 21, 32 * 25, 5, true);   /* 25 blocks: one a thread at most */
    pl_be_destroy(be);
}

static void run_tests(void) {
    gt_seed();
    pl_backend *be = open_gpu();
    if (!be) return;
    static void (*const tests[])(pl_backend *) = {
        test_softmax,     test_topk_rows, test_matmul_id, test_moe_combine,
        test_sigmoid_mul, test_ssm_conv,  test_delta_rule};
    static const char *const names[] = {"softmax",     "topk_rows", "matmul_id", "moe_combine",
                                        "sigmoid_mul", "ssm_conv",  "delta_rule"};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        double t0 = pl_gpu_now();
        tests[i](be);
        fprintf(stderr, "%s %.2fs\n", names[i], pl_gpu_now() - t0);
    }
    pl_be_destroy(be);
    test_exact_matmul();
}
