/* cpu_moe_test.c - the CPU backend's mixture-of-experts ops (softmax_rows, topk_rows,
 * matmul_id, moe_combine) against references written out here in double precision, on
 * random shapes, with every output buffer filled with NaN first (a value the op should
 * write and did not stays NaN; one it should leave alone must still be NaN).
 *
 * topk_rows: values drawn from a few integers so ties are common (the lower index must come
 * first), NaN skipped, rows of NaN alone filled with id -1 / -inf. matmul_id: F32, F16,
 * Q8_0, Q4_0 and Q4_K experts, activations shared or per slot, ids outside [0, n_exp) giving
 * zero rows, with act_q8 off (dequantised weights, float activations) and on (Q4_0/Q8_0
 * take Q8_0-quantised activations and integer block dots, Q4_K activations quantised per
 * 256 values, the float types stay float);
 * the same results, bit for bit, from a 1-thread and a 3-thread backend. */
#include "cpu/cpu.h"
#include "format/quant.h"
#include "test.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static int irand(int lo, int hi) { /* [lo, hi] */
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}
static float frand(float lo, float hi) {
    return lo + (hi - lo) * (float)(rnd() % 1000000) / 1000000.0f;
}

/* An F32 (or I32) buffer of rows x cols with the given values, or NaN everywhere. */
static pl_buf *buf_of(pl_backend *be, uint32_t type, int64_t cols, int64_t rows, const void *v) {
    pl_buf *b = NULL;
    CHECK(pl_be_buf_new(be, type, cols, rows, &b) == PL_OK, "%s", pl_last_error());
    if (!b) return NULL;
    int64_t n = cols * rows;
    float *nan = NULL;
    if (!v) {
        nan = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) nan[i] = NAN;
        v = nan;
    }
    pl_be_write(b, 0, v, n * 4);
    free(nan);
    return b;
}

static float *read_all(const pl_buf *b) {
    float *v = malloc(sizeof(float) * (size_t)(b->ne0 * b->ne1));
    CHECK(pl_be_read(b, 0, v, b->ne0 * b->ne1 * 4) == PL_OK, "%s", pl_last_error());
    return v;
}

/* The values from `from` on are still NaN (the op wrote nothing there). */
static bool untouched(const float *v, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i++)
        if (!isnan(v[i])) return false;
    return true;
}

/* ---- softmax_rows ---- */

static void test_softmax(pl_backend *be) {
    int bad = 0, bad_tail = 0;
    for (int iter = 0; iter < 300; iter++) {
        int rows = irand(1, 8), cols = irand(1, 300), spare = irand(0, 2);
        float scale = iter % 3 == 0 ? 80.0f : 8.0f;
        float *x = malloc(sizeof(float) * (size_t)(rows + spare) * cols);
        for (int i = 0; i < (rows + spare) * cols; i++) x[i] = frand(-scale, scale);
        pl_buf *bx = buf_of(be, PL_TYPE_F32, cols, rows + spare, x);
        bool in_place = iter & 1;
        pl_buf *bo = in_place ? bx : buf_of(be, PL_TYPE_F32, cols, rows + spare, NULL);
        CHECK(pl_be_softmax_rows(bx, rows, cols, bo) == PL_OK, "%s", pl_last_error());
        float *o = read_all(bo);
        for (int r = 0; r < rows; r++) {
            const float *xr = x + r * cols;
            double mx = xr[0], sum = 0;
            for (int c = 1; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
            for (int c = 0; c < cols; c++) sum += exp((double)xr[c] - mx);
            for (int c = 0; c < cols; c++) {
                double want = exp((double)xr[c] - mx) / sum, got = o[r * cols + c];
                bad += !(fabs(got - want) <= 1e-5 * want + 1e-30);
            }
        }
        if (!in_place)
            bad_tail += !untouched(o, (int64_t)rows * cols, (int64_t)(rows + spare) * cols);
        free(o);
        free(x);
        if (!in_place) pl_be_buf_free(bo);
        pl_be_buf_free(bx);
    }
    CHECK(bad == 0, "softmax_rows: %d values off the double reference", bad);
    CHECK(bad_tail == 0, "softmax_rows: %d calls wrote past their rows", bad_tail);
}

/* ---- topk_rows ---- */

/* The k largest of v, by selection: the largest not yet taken, the lowest index among equal
 * values, NaN never; then id -1, value -inf. */
static void topk_ref(const float *v, int cols, int k, int32_t *ids, float *vals) {
    bool *taken = calloc((size_t)cols, 1);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int c = 0; c < cols; c++)
            if (!taken[c] && !isnan(v[c]) && (best < 0 || v[c] > v[best])) best = c;
        ids[j] = best;
        vals[j] = best < 0 ? -INFINITY : v[best];
        if (best >= 0) taken[best] = true;
    }
    free(taken);
}

static void test_topk_rows(pl_backend *be) {
    int bad = 0, ties = 0, fillers = 0;
    for (int iter = 0; iter < 400; iter++) {
        int rows = irand(1, 6), cols = irand(1, 40), k = irand(1, cols);
        float *x = malloc(sizeof(float) * (size_t)rows * cols);
        for (int i = 0; i < rows * cols; i++) {
            uint32_t u = rnd() % 20;
            x[i] = u < 3 ? NAN : u == 3 ? -INFINITY : u == 4 ? INFINITY : (float)irand(-3, 3);
        }
        if (iter % 7 == 0)
            for (int c = 0; c < cols; c++) x[c] = NAN; /* a row of NaN alone */
        pl_buf *bx = buf_of(be, PL_TYPE_F32, cols, rows, x);
        pl_buf *bi = buf_of(be, PL_TYPE_I32, k, rows + 1, NULL);
        pl_buf *bv = buf_of(be, PL_TYPE_F32, k, rows + 1, NULL);
        CHECK(pl_be_topk_rows(bx, rows, cols, k, bi, bv) == PL_OK, "%s", pl_last_error());
        float *vals = read_all(bv);
        int32_t *ids = (int32_t *)read_all(bi);
        int32_t want_i[40];
        float want_v[40];
        for (int r = 0; r < rows; r++) {
            topk_ref(x + r * cols, cols, k, want_i, want_v);
            for (int j = 0; j < k; j++) {
                bad += ids[r * k + j] != want_i[j] ||
                       memcmp(&vals[r * k + j], &want_v[j], sizeof(float)) != 0;
                fillers += want_i[j] < 0;
                ties += j > 0 && want_i[j] >= 0 && want_v[j] == want_v[j - 1];
            }
        }
        bad += !untouched(vals, (int64_t)rows * k, (int64_t)(rows + 1) * k);
        free(vals), free(ids), free(x);
        pl_be_buf_free(bx), pl_be_buf_free(bi), pl_be_buf_free(bv);
    }
    CHECK(bad == 0, "topk_rows: %d values differ from the reference", bad);
    CHECK(ties > 100 && fillers > 50, "topk_rows: the cases had %d ties and %d fillers", ties,
          fillers);
}

/* ---- matmul_id ---- */

/* What act_q8 turns an activation row into (quant.h's rule, written out again): per block
 * of 32, scale s = max|x| / 127 (kept as f16), quant round(x / s). */
static void act_q8_ref(const float *x, int k, int8_t *q, double *d) {
    for (int b = 0; b < k / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        float s = amax / 127, is = s != 0 ? 1.0f / s : 0.0f;
        d[b] = pl_f16_to_f32(pl_f32_to_f16(s));
        for (int j = 0; j < 32; j++) q[b * 32 + j] = (int8_t)roundf(x[b * 32 + j] * is);
    }
}

/* act_q8 for K-quants (the rule written out again): per 256 values, scale s = max|x| / 127
 * (a float), quant round(x / s). */
static void act_k_ref(const float *x, int k, int8_t *q, double *d) {
    for (int b = 0; b < k / 256; b++) {
        float amax = 0;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(x[b * 256 + j]));
        float s = amax / 127, is = s != 0 ? 1.0f / s : 0.0f;
        d[b] = s;
        for (int j = 0; j < 256; j++) q[b * 256 + j] = (int8_t)roundf(x[b * 256 + j] * is);
    }
}

/* W_e x in double: float activations against the dequantised row, or (q8) each Q8_0 block
 * of the activation against the weight block: its integer dot times the two scales (Q4_K:
 * the dequantised row against the activation quantised per 256 values). *mag
 * gets the sum of the terms' magnitudes, the scale of the float rounding error. */
static double dot_ref(uint32_t type, const float *wrow, const unsigned char *wq, const float *x,
                      int k, bool q8, double *mag) {
    double s = 0;
    *mag = 0;
    if (!q8) {
        for (int i = 0; i < k; i++) s += (double)wrow[i] * x[i], *mag += fabs(wrow[i] * x[i]);
        return s;
    }
    int8_t q[256];
    double d[8] = {0};
    if (type == PL_TYPE_Q4_K) {
        act_k_ref(x, k, q, d);
        for (int i = 0; i < k; i++) {
            double t = (double)wrow[i] * q[i] * d[i / 256];
            s += t, *mag += fabs(t);
        }
        return s;
    }
    act_q8_ref(x, k, q, d);
    int bs = type == PL_TYPE_Q4_0 ? 18 : 34;
    for (int b = 0; b < k / 32; b++) {
        const unsigned char *blk = wq + b * bs;
        uint16_t dh;
        memcpy(&dh, blk, 2);
        long isum = 0;
        for (int j = 0; j < 32; j++) {
            int w = type == PL_TYPE_Q4_0 ? (j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4)) - 8
                                         : (int8_t)blk[2 + j];
            isum += w * q[b * 32 + j];
        }
        double t = (double)isum * pl_f16_to_f32(dh) * d[b];
        s += t, *mag += fabs(t);
    }
    return s;
}

typedef struct {
    int bad, bad_zero, bad_tail, bad_threads, q8_moved, cases;
} mid_stats;

static void matmul_id_case(pl_backend *be1, pl_backend *be3, uint32_t type, bool act_q8,
                           bool x_shared, bool big, mid_stats *st) {
    int k = type == PL_TYPE_Q4_K ? 256 : 32 * irand(1, 4);
    int n_exp = irand(1, 6), n_used = irand(1, n_exp), n = irand(1, 5);
    int n_out = irand(1, 40);
    if (big) n = 24, n_exp = 4, n_used = 2, n_out = 96, k = 256; /* past the one-thread cutoff */
    int slots = n * n_used, xrows = x_shared ? n : slots;
    int64_t wvals = (int64_t)n_exp * n_out * k, row_bytes = pl_row_size(type, k);
    float *wf = malloc(sizeof(float) * (size_t)wvals), *wd = malloc(sizeof(float) * (size_t)wvals);
    unsigned char *wq = malloc((size_t)(row_bytes * n_exp * n_out));
    for (int64_t i = 0; i < wvals; i++) wf[i] = frand(-1, 1);
    for (int64_t r = 0; r < (int64_t)n_exp * n_out; r++) {
        pl_quant_row(type, wf + r * k, wq + r * row_bytes, k);
        pl_dequant_row(type, wq + r * row_bytes, wd + r * k, k);
    }
    float *x = malloc(sizeof(float) * (size_t)xrows * k);
    for (int i = 0; i < xrows * k; i++) x[i] = frand(-2, 2);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)slots);
    for (int s = 0; s < slots; s++) {
        uint32_t u = rnd() % 10;
        ids[s] = u == 0   ? -1
                 : u == 1 ? n_exp + irand(0, 3)
                 : u == 2 ? -irand(2, 1000)
                          : irand(0, n_exp - 1);
    }
    float *got[2] = {NULL, NULL};
    pl_backend *bes[2] = {be1, be3};
    for (int b = 0; b < 2; b++) {
        pl_backend *be = bes[b];
        be->act_q8 = act_q8;
        pl_buf *bw = NULL;
        CHECK(pl_be_buf_weight(be, type, k, (int64_t)n_exp * n_out, wq, &bw) == PL_OK, "%s",
              pl_last_error());
        pl_buf *bx = buf_of(be, PL_TYPE_F32, k, xrows, x);
        pl_buf *bi = buf_of(be, PL_TYPE_I32, slots, 1, ids);
        pl_buf *bo = buf_of(be, PL_TYPE_F32, n_out, slots + 1, NULL);
        pl_status s = pl_be_matmul_id(bw, n_exp, bx, bi, n, n_used, x_shared, bo);
        CHECK(s == PL_OK, "matmul_id: %s", pl_last_error());
        got[b] = read_all(bo);
        pl_be_buf_free(bw), pl_be_buf_free(bx), pl_be_buf_free(bi), pl_be_buf_free(bo);
        be->act_q8 = 0;
    }
    bool q8 = act_q8 && (type == PL_TYPE_Q4_0 || type == PL_TYPE_Q8_0 || type == PL_TYPE_Q4_K);
    for (int s = 0; s < slots; s++) {
        const float *xr = x + (int64_t)(x_shared ? s / n_used : s) * k;
        for (int r = 0; r < n_out; r++) {
            float g = got[0][(int64_t)s * n_out + r];
            if (ids[s] < 0 || ids[s] >= n_exp) {
                st->bad_zero += g != 0;
                continue;
            }
            int64_t wr = (int64_t)ids[s] * n_out + r;
            double mag, want = dot_ref(type, wd + wr * k, wq + wr * row_bytes, xr, k, q8, &mag);
            st->bad += !(fabs(g - want) <= 2e-5 * mag + 1e-6);
            if (q8) { /* the quantised activations must have acted */
                double mf, wantf = dot_ref(type, wd + wr * k, NULL, xr, k, false, &mf);
                st->q8_moved += fabs(g - wantf) > 2e-5 * mf + 1e-6;
            }
        }
    }
    st->bad_tail += !untouched(got[0], (int64_t)slots * n_out, (int64_t)(slots + 1) * n_out);
    st->bad_threads += memcmp(got[0], got[1], sizeof(float) * (size_t)(slots + 1) * n_out) != 0;
    st->cases++;
    free(got[0]), free(got[1]), free(wf), free(wd), free(wq), free(x), free(ids);
}

static void test_matmul_id(pl_backend *be1, pl_backend *be3) {
    static const uint32_t types[] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_Q8_0, PL_TYPE_Q4_0,
                                     PL_TYPE_Q4_K};
    mid_stats st = {0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int mode = 0; mode < 4; mode++)
            for (int iter = 0; iter < 25; iter++)
                matmul_id_case(be1, be3, types[t], mode & 1, mode & 2, iter == 0, &st);
    CHECK(st.bad == 0, "matmul_id: %d values off the double reference", st.bad);
    CHECK(st.bad_zero == 0, "matmul_id: %d values of unknown experts are not 0", st.bad_zero);
    CHECK(st.bad_tail == 0, "matmul_id: %d calls wrote past their slots", st.bad_tail);
    CHECK(st.bad_threads == 0, "matmul_id: %d of %d cases differ between 1 and 3 threads",
          st.bad_threads, st.cases);
    CHECK(st.q8_moved > 100, "matmul_id act_q8: only %d values differ from the float path",
          st.q8_moved);
}

/* ---- moe_combine ---- */

static void test_moe_combine(pl_backend *be) {
    int bad = 0, bad_tail = 0;
    for (int iter = 0; iter < 300; iter++) {
        int n = irand(1, 6), n_used = irand(1, 8), d = irand(1, 100);
        bool acc = iter & 1;
        float *y = malloc(sizeof(float) * (size_t)n * n_used * d);
        float *w = malloc(sizeof(float) * (size_t)n * n_used);
        float *base = malloc(sizeof(float) * (size_t)(n + 1) * d);
        for (int i = 0; i < n * n_used * d; i++) y[i] = frand(-3, 3);
        for (int i = 0; i < n * n_used; i++) w[i] = frand(0, 1);
        for (int i = 0; i < (n + 1) * d; i++) base[i] = i < n * d ? frand(-5, 5) : NAN;
        pl_buf *by = buf_of(be, PL_TYPE_F32, d, n * n_used, y);
        pl_buf *bw = buf_of(be, PL_TYPE_F32, n * n_used, 1, w);
        pl_buf *bo = buf_of(be, PL_TYPE_F32, d, n + 1, acc ? base : NULL);
        CHECK(pl_be_moe_combine(by, bw, n, n_used, acc, bo) == PL_OK, "%s", pl_last_error());
        float *o = read_all(bo);
        for (int i = 0; i < n; i++)
            for (int c = 0; c < d; c++) {
                double want = acc ? base[i * d + c] : 0, mag = fabs(want);
                for (int j = 0; j < n_used; j++) {
                    double t = (double)w[i * n_used + j] * y[((int64_t)i * n_used + j) * d + c];
                    want += t, mag += fabs(t);
                }
                bad += !(fabs(o[i * d + c] - want) <= 1e-6 * mag + 1e-7);
            }
        bad_tail += !untouched(o, (int64_t)n * d, (int64_t)(n + 1) * d);
        free(o), free(y), free(w), free(base);
        pl_be_buf_free(by), pl_be_buf_free(bw), pl_be_buf_free(bo);
    }
    CHECK(bad == 0, "moe_combine: %d values off the double reference", bad);
    CHECK(bad_tail == 0, "moe_combine: %d calls wrote past their rows", bad_tail);
}

static void run_tests(void) {
    pl_backend *be1 = NULL, *be3 = NULL;
    /* be3 copies its weights: Q4_0 experts then lie interleaved (cpu_x8.c) where the CPU
     * has AVX2, and each expert's rows are a view that may start inside a group of 8 */
    pl_cpu_opts copied = {.n_threads = 3, .anon_weights = 1};
    CHECK(pl_cpu_new(1, &be1) == PL_OK && pl_cpu_new_with(&copied, &be3) == PL_OK, "%s",
          pl_last_error());
    if (!be1 || !be3) return;
    test_softmax(be1);
    test_topk_rows(be1);
    test_matmul_id(be1, be3);
    test_moe_combine(be1);
    CHECK(be1->live_bufs == 0 && be3->live_bufs == 0, "buffers leaked");
    pl_be_destroy(be1);
    pl_be_destroy(be3);
}
