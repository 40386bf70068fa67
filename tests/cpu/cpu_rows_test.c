/* cpu_rows_test.c - the CPU backend's row-wise ops split between the pool's threads
 * (pl_cpu_rows): every row of a split is computed exactly once, and each op run by a
 * 4-thread backend gives the bits of the same op run by a 1-thread one (which never splits),
 * on random inputs of enough rows to be split. Outputs start as NaNs on both, so a row the
 * split skips stays NaN; the in-place ops (rms_norm on its input, rope) and the accumulating
 * ones (sigmoid_mul, moe_combine) change again if a row is computed twice. Two ops also
 * against the test's own arithmetic: argmax over rows wide enough to be searched in chunks
 * (ties, NaNs), and rope, whose angles the backend keeps from call to call (new positions,
 * parameters and factor values must not find the old ones). And the matmuls a fusion holds
 * back (PL_FUSE_QKV / GATE_UP on the 4-thread backend): held (their outputs unwritten until
 * a read or another op), then the 1-thread backend's bits; two into one output never at
 * once. */
#include <stdatomic.h>

#include "cpu/cpu_internal.h"
#include "format/quant.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float unif(float lo, float hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * ((uint32_t)(rng >> 16) / 4294967296.0f);
}

static pl_backend *be[2]; /* 1 thread, 4 threads */

/* ---- pl_cpu_rows itself: every row once ---- */

static void count_rows(void *ctx, int64_t r0, int64_t r1) {
    atomic_int *hits = ctx;
    for (int64_t r = r0; r < r1; r++) atomic_fetch_add(&hits[r], 1);
}

static void check_split(void) {
    static const int64_t sizes[] = {1, 2, 5, 16, 17, 63, 1000, 4097};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t rows = sizes[s];
        atomic_int *hits = malloc(sizeof *hits * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) atomic_init(&hits[r], 0);
        /* work enough per row to be split */
        pl_cpu_rows(cpu_of(be[1]), rows, CPU_PAR_MIN_WORK, count_rows, hits);
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; r++) bad += atomic_load(&hits[r]) != 1;
        CHECK(bad == 0, "%lld rows: %lld computed other than once", (long long)rows,
              (long long)bad);
        free(hits);
    }
}

/* ---- the ops, 1 thread against 4 ---- */

typedef struct {
    pl_buf *b[2];
    size_t bytes;
} duo;

/* A buffer on both backends holding data (NULL: all-ones bytes, NaN as f32 and f16). */
static duo make(uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    duo d = {{NULL, NULL}, 0};
    d.bytes = type == PL_TYPE_Q8_0  ? (size_t)(pl_row_size(type, ne0) * ne1)
              : type == PL_TYPE_F16 ? (size_t)(ne0 * ne1) * 2
                                    : (size_t)(ne0 * ne1) * 4;
    unsigned char *tmp = malloc(d.bytes);
    if (data)
        memcpy(tmp, data, d.bytes);
    else
        memset(tmp, 0xff, d.bytes);
    for (int i = 0; i < 2; i++) {
        CHECK(pl_be_buf_new(be[i], type, ne0, ne1, &d.b[i]) == PL_OK, "%s", pl_last_error());
        pl_be_write(d.b[i], 0, tmp, (int64_t)d.bytes);
    }
    free(tmp);
    return d;
}

static duo rand_f32(int64_t ne0, int64_t ne1, float lo, float hi) {
    float *v = malloc(sizeof *v * (size_t)(ne0 * ne1));
    for (int64_t i = 0; i < ne0 * ne1; i++) v[i] = unif(lo, hi);
    duo d = make(PL_TYPE_F32, ne0, ne1, v);
    free(v);
    return d;
}

/* The two backends' bytes of d are equal, and the 1-thread one's hold no NaN fill (f32). */
static void same(const char *what, duo d, int f32) {
    unsigned char *a = malloc(d.bytes), *b = malloc(d.bytes);
    pl_be_read(d.b[0], 0, a, (int64_t)d.bytes);
    pl_be_read(d.b[1], 0, b, (int64_t)d.bytes);
    size_t diff = 0, nan = 0;
    for (size_t i = 0; i < d.bytes; i++) diff += a[i] != b[i];
    if (f32)
        for (size_t i = 0; i + 4 <= d.bytes; i += 4) {
            float v;
            memcpy(&v, a + i, 4);
            nan += v != v;
        }
    CHECK(diff == 0, "%s: %zu bytes differ between 1 and 4 threads", what, diff);
    CHECK(nan == 0, "%s: %zu values not written", what, nan);
    free(a), free(b);
}

static void dfree(duo d) {
    pl_be_buf_free(d.b[0]);
    pl_be_buf_free(d.b[1]);
}

#define BOTH(call)                                                                                 \
    for (int i = 0; i < 2; i++) CHECK((call) == PL_OK, "%s: %s", #call, pl_last_error())

static void check_ops(void) {
    const int64_t rows = 301, cols = 256; /* 77k values: split */
    duo x = rand_f32(cols, rows, -2, 2), y = rand_f32(cols, rows, -2, 2);
    duo w = rand_f32(cols, 1, 0.5f, 1.5f), o = make(PL_TYPE_F32, cols, rows, NULL);

    BOTH(pl_be_rms_norm(x.b[i], w.b[i], rows, cols, 1e-6f, o.b[i]));
    same("rms_norm", o, 1);
    duo xi = rand_f32(cols, rows, -2, 2); /* in place: a row done twice is normed twice */
    BOTH(pl_be_rms_norm(xi.b[i], w.b[i], rows, cols, 1e-6f, xi.b[i]));
    same("rms_norm in place", xi, 1);
    dfree(xi);

    dfree(o), o = make(PL_TYPE_F32, cols, rows, NULL);
    BOTH(pl_be_add(x.b[i], y.b[i], rows * cols, o.b[i]));
    same("add", o, 1);
    dfree(o), o = make(PL_TYPE_F32, cols, rows, NULL);
    BOTH(pl_be_swiglu(x.b[i], y.b[i], rows * cols, o.b[i]));
    same("swiglu", o, 1);

    /* rope, in place, both layouts, with and without frequency factors */
    duo fac = rand_f32(16, 1, 1, 4);
    for (int mode = 0; mode < 2; mode++)
        for (int f = 0; f < 2; f++) {
            duo r = rand_f32(cols, rows, -2, 2);
            pl_rope_params rp = {.mode = mode ? PL_ROPE_NEOX : PL_ROPE_NORMAL,
                                 .n_heads = 4,
                                 .head_dim = 64,
                                 .rope_dim = 32,
                                 .theta_base = 10000,
                                 .freq_scale = 0.5f};
            for (int i = 0; i < 2; i++) {
                rp.factors = f ? fac.b[i] : NULL;
                CHECK(pl_be_rope(r.b[i], rows, 7, &rp) == PL_OK, "rope: %s", pl_last_error());
            }
            same(mode ? "rope neox" : "rope normal", r, 1);
            dfree(r);
        }
    dfree(fac);

    /* kv_store into each cache type, at an offset */
    static const uint32_t kv_types[] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_Q8_0};
    for (int t = 0; t < 3; t++) {
        duo c = make(kv_types[t], cols, rows + 5, NULL);
        BOTH(pl_be_kv_store(x.b[i], rows, 5, c.b[i]));
        same("kv_store", c, 0);
        dfree(c);
    }

    /* embed from a Q8_0 table, ids in and out of range */
    int64_t n_vocab = 50;
    float *tv = malloc(sizeof *tv * (size_t)(n_vocab * cols));
    for (int64_t i = 0; i < n_vocab * cols; i++) tv[i] = unif(-1, 1);
    char *tq = malloc((size_t)(pl_row_size(PL_TYPE_Q8_0, cols) * n_vocab));
    for (int64_t r = 0; r < n_vocab; r++)
        pl_quant_row(PL_TYPE_Q8_0, tv + r * cols, tq + r * pl_row_size(PL_TYPE_Q8_0, cols), cols);
    int32_t *idv = malloc(sizeof *idv * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) idv[r] = r % 17 == 3 ? -1 : (int32_t)(r * 7 % n_vocab);
    duo ids = make(PL_TYPE_I32, rows, 1, idv), e = make(PL_TYPE_F32, cols, rows, NULL);
    pl_buf *table[2];
    for (int i = 0; i < 2; i++)
        CHECK(pl_be_buf_weight(be[i], PL_TYPE_Q8_0, cols, n_vocab, tq, &table[i]) == PL_OK, "%s",
              pl_last_error());
    BOTH(pl_be_embed(table[i], ids.b[i], rows, e.b[i]));
    same("embed", e, 1);
    for (int i = 0; i < 2; i++) pl_be_buf_free(table[i]);
    dfree(ids), dfree(e), free(idv), free(tq), free(tv);

    /* sigmoid_mul, accumulating: a row done twice adds twice; per value and per row gates */
    for (int gc = 0; gc < 2; gc++) {
        duo acc = rand_f32(cols, rows, -1, 1), g = rand_f32(gc ? 1 : cols, rows, -3, 3);
        BOTH(pl_be_sigmoid_mul(x.b[i], g.b[i], rows, cols, gc ? 1 : cols, true, acc.b[i]));
        same("sigmoid_mul", acc, 1);
        dfree(acc), dfree(g);
    }

    /* the router: softmax and top-k of rows of 64 experts, then the weighted combine */
    const int64_t n_exp = 64, k = 4, tok = 1200;
    duo lg = rand_f32(n_exp, tok, -4, 4), sm = make(PL_TYPE_F32, n_exp, tok, NULL);
    BOTH(pl_be_softmax_rows(lg.b[i], tok, n_exp, sm.b[i]));
    same("softmax_rows", sm, 1);
    duo ti = make(PL_TYPE_I32, k, tok, NULL), tvv = make(PL_TYPE_F32, k, tok, NULL);
    BOTH(pl_be_topk_rows(sm.b[i], tok, n_exp, k, ti.b[i], tvv.b[i]));
    same("topk_rows ids", ti, 0);
    same("topk_rows values", tvv, 1);
    duo ye = rand_f32(cols, rows * k, -1, 1), acc = rand_f32(cols, rows, -1, 1);
    BOTH(pl_be_moe_combine(ye.b[i], tvv.b[i], rows, k, true, acc.b[i]));
    same("moe_combine", acc, 1);
    dfree(lg), dfree(sm), dfree(ti), dfree(tvv), dfree(ye), dfree(acc);

    dfree(x), dfree(y), dfree(w), dfree(o);
}

/* kv_store into an F16 cache (F16C's conversion where the CPU has it, and the portable one)
 * gives pl_f32_to_f16's bits for every value: NaNs with payloads among finite values, the
 * infinities, values at and past the overflow to infinity, subnormal halves and ties. */
static void check_kv_f16(void) {
    enum { COLS = 64, ROWS = 40 };
    static const uint32_t special[] = {
        0x7fc00000, 0xffc00001, 0x7f800001, 0x7fbfffff, /* NaNs */
        0x7f800000, 0xff800000, 0x477fefff, 0x477ff000, /* inf; 65519.99..., 65520 */
        0x49742400, 0x33800000, 0x33000000, 0x33000001, /* 1e6; 2^-24; half of it, just over */
        0x387fe000, 0x387ff000, 0x38800000, 0x80000000, /* subnormal top, a tie, 2^-14, -0 */
        0x00000001, 0x3f801000, 0x3f803000, 0xc7000000, /* float subnormal; ties; -32768 */
    };
    uint32_t *bits = malloc(sizeof *bits * COLS * ROWS);
    for (int i = 0; i < COLS * ROWS; i++) {
        float f = unif(-70000, 70000) * (i % 3 ? 1.0f : 1e-6f);
        memcpy(&bits[i], &f, 4);
        if (i % 5 == 0) bits[i] = special[(i / 5) % (sizeof special / sizeof special[0])];
    }
    for (int portable = 0; portable < 2; portable++) {
        duo x = make(PL_TYPE_F32, COLS, ROWS, bits), c = make(PL_TYPE_F16, COLS, ROWS, NULL);
        pl_cpu_portable = portable;
        BOTH(pl_be_kv_store(x.b[i], ROWS, 0, c.b[i]));
        pl_cpu_portable = 0;
        int bad = 0;
        for (int i = 0; i < 2; i++) {
            uint16_t got[COLS * ROWS];
            pl_be_read(c.b[i], 0, got, sizeof got);
            for (int e = 0; e < COLS * ROWS; e++) {
                float f;
                memcpy(&f, &bits[e], 4);
                bad += got[e] != pl_f32_to_f16(f);
            }
        }
        CHECK(bad == 0, "kv_store f16 (portable %d): %d values not pl_f32_to_f16's", portable, bad);
        dfree(x), dfree(c);
    }
    free(bits);
}

/* argmax of vocabulary-wide rows: the first largest non-NaN value, as one pass finds it;
 * values from a few levels (ties across chunks), NaNs, one row of NaNs alone (-1). */
static void check_argmax(void) {
    const int64_t cols = 151936, rows = 4;
    float *v = malloc(sizeof *v * (size_t)(cols * rows));
    for (int64_t i = 0; i < cols * rows; i++) {
        float u = unif(0, 1);
        v[i] = u < 0.05f ? NAN : (float)(int)(unif(0, 1) * 6) - 2;
    }
    v[5] = 100, v[cols - 3] = 100; /* row 0: the first of two, chunks apart */
    v[cols + 70000] = -0.0f;       /* row 1: a tie of -0 and 0 below the top */
    v[2 * cols + cols - 1] = 7;    /* row 2: the top in the last value */
    for (int64_t i = 0; i < cols; i++) v[3 * cols + i] = NAN; /* row 3: none */
    int32_t want[4];
    for (int64_t r = 0; r < rows; r++) {
        int64_t best = -1;
        for (int64_t i = 0; i < cols; i++) {
            float x = v[r * cols + i];
            if (x == x && (best < 0 || x > v[r * cols + best])) best = i;
        }
        want[r] = (int32_t)best;
    }
    duo x = make(PL_TYPE_F32, cols, rows, v), ids = make(PL_TYPE_I32, rows, 1, NULL);
    BOTH(pl_be_argmax(x.b[i], rows, ids.b[i], 0));
    for (int i = 0; i < 2; i++) {
        int32_t got[4];
        pl_be_read(ids.b[i], 0, got, sizeof got);
        CHECK(!memcmp(got, want, sizeof got), "argmax (%d threads): %d %d %d %d, want %d %d %d %d",
              i ? 4 : 1, got[0], got[1], got[2], got[3], want[0], want[1], want[2], want[3]);
    }
    dfree(x), dfree(ids), free(v);
}

/* rope against its formula, call after call on one backend: positions, bases and factor
 * values change between calls. */
static void check_rope(void) {
    enum { HEADS = 3, HD = 16, ROWS = 5, HALF = HD / 2 };
    float fv[HALF], xv[ROWS * HEADS * HD];
    duo fac = rand_f32(HALF, 1, 1, 4);
    struct {
        int64_t pos0;
        float base;
        int with_factors, new_factors;
    } calls[] = {{7, 10000, 1, 0},  {7, 10000, 1, 1},  {8, 10000, 1, 0},
                 {8, 500000, 1, 0}, {8, 500000, 0, 0}, {7, 10000, 1, 0}};
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        if (calls[c].new_factors) {
            for (int k = 0; k < HALF; k++) fv[k] = unif(1, 4);
            for (int i = 0; i < 2; i++) pl_be_write(fac.b[i], 0, fv, sizeof fv);
        }
        pl_be_read(fac.b[0], 0, fv, sizeof fv);
        duo r = rand_f32(HEADS * HD, ROWS, -2, 2);
        pl_be_read(r.b[0], 0, xv, sizeof xv);
        pl_rope_params rp = {PL_ROPE_NEOX, HEADS, HD, HD, calls[c].base, 0.5f, NULL};
        for (int i = 0; i < 2; i++) {
            rp.factors = calls[c].with_factors ? fac.b[i] : NULL;
            CHECK(pl_be_rope(r.b[i], ROWS, calls[c].pos0, &rp) == PL_OK, "%s", pl_last_error());
        }
        int wrong = 0;
        for (int i = 0; i < 2; i++) {
            float got[ROWS * HEADS * HD];
            pl_be_read(r.b[i], 0, got, sizeof got);
            for (int row = 0; row < ROWS; row++)
                for (int k = 0; k < HALF; k++) {
                    double th =
                        (double)(calls[c].pos0 + row) * 0.5f * pow(calls[c].base, -2.0 * k / HD);
                    if (calls[c].with_factors) th /= fv[k];
                    for (int h = 0; h < HEADS; h++) {
                        const float *x0 = xv + (row * HEADS + h) * HD;
                        const float *g = got + (row * HEADS + h) * HD;
                        float a = (float)(x0[k] * cos(th) - x0[k + HALF] * sin(th));
                        float b = (float)(x0[k] * sin(th) + x0[k + HALF] * cos(th));
                        wrong += memcmp(&a, g + k, 4) != 0 || memcmp(&b, g + k + HALF, 4) != 0;
                    }
                }
        }
        CHECK(wrong == 0, "rope call %zu: %d pairs differ from the formula", c, wrong);
        dfree(r);
    }
    dfree(fac);
}

/* A weight of type t on both backends: rows x k random values quantised; its bytes
 * (returned) must outlive the buffers. */
static void *weight(uint32_t t, int64_t k, int64_t rows, pl_buf *w[2]) {
    float *v = malloc(sizeof *v * (size_t)(k * rows));
    for (int64_t i = 0; i < k * rows; i++) v[i] = unif(-1, 1);
    size_t rb = (size_t)pl_row_size(t, k);
    unsigned char *q = malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) pl_quant_row(t, v + r * k, q + rb * (size_t)r, k);
    for (int i = 0; i < 2; i++)
        CHECK(pl_be_buf_weight(be[i], t, k, rows, q, &w[i]) == PL_OK, "%s", pl_last_error());
    free(v);
    return q;
}

/* Whether out's values on the 4-thread backend are still the NaN fill (a held matmul's). */
static bool unwritten(duo out) {
    const float *d = ((const cpu_buf *)out.b[1])->data;
    return d[0] != d[0];
}

/* qwen3's per-head ops between the projections and attention (the q/k norms in place, the
 * RoPE of q and k, the stores of k and v), asked to fuse: held on the 4-thread backend and
 * run as one job (the count says so) with the 1-thread bits, on F32, F16 and Q8_0 caches,
 * 1 and 3 rows, both RoPE layouts; and where the plan does not hold (a rope of k at other
 * positions, a norm with nothing after it), one by one with the same bits. */
static void check_heads(void) {
    enum { NH = 4, NKV = 2, HD = 64 };
    static const uint32_t caches[] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_Q8_0};
    for (int ct = 0; ct < 3; ct++)
        for (int variant = 0; variant < 4; variant++) {
            int64_t n = variant & 1 ? 3 : 1, pos0 = 5;
            duo q = rand_f32(NH * HD, n, -2, 2), k = rand_f32(NKV * HD, n, -2, 2);
            duo v = rand_f32(NKV * HD, n, -2, 2), qw = rand_f32(HD, 1, 0.5f, 1.5f);
            duo kw = rand_f32(HD, 1, 0.5f, 1.5f);
            duo kc = make(caches[ct], NKV * HD, 16, NULL),
                vc = make(caches[ct], NKV * HD, 16, NULL);
            pl_rope_params rp = {.mode = variant & 2 ? PL_ROPE_NORMAL : PL_ROPE_NEOX,
                                 .head_dim = HD,
                                 .rope_dim = variant & 2 ? 32 : HD,
                                 .theta_base = 10000,
                                 .freq_scale = 1};
            int64_t fused0 = cpu_of(be[1])->heads.fused;
            for (int b = 0; b < 2; b++) {
                pl_backend *e = be[b];
                CHECK(pl_be_fuse(e, PL_FUSE_NORM_ROPE | PL_FUSE_ROPE_PAIR | PL_FUSE_ROPE_STORE) ==
                          PL_OK,
                      "%s", pl_last_error());
                CHECK(pl_be_rms_norm(q.b[b], qw.b[b], n * NH, HD, 1e-6f, q.b[b]) == PL_OK, "%s",
                      pl_last_error());
                CHECK(pl_be_rms_norm(k.b[b], kw.b[b], n * NKV, HD, 1e-6f, k.b[b]) == PL_OK, "%s",
                      pl_last_error());
                if (b == 1)
                    CHECK(cpu_of(e)->heads.n == 2, "cache %u: the norms were not held", caches[ct]);
                rp.n_heads = NH;
                CHECK(pl_be_rope(q.b[b], n, pos0, &rp) == PL_OK, "%s", pl_last_error());
                rp.n_heads = NKV;
                CHECK(pl_be_rope(k.b[b], n, pos0, &rp) == PL_OK, "%s", pl_last_error());
                CHECK(pl_be_kv_store(k.b[b], n, pos0, kc.b[b]) == PL_OK, "%s", pl_last_error());
                CHECK(pl_be_kv_store(v.b[b], n, pos0, vc.b[b]) == PL_OK, "%s", pl_last_error());
                CHECK(pl_be_fuse(e, 0) == PL_OK, "%s", pl_last_error());
            }
            CHECK(cpu_of(be[1])->heads.fused - fused0 == 1, "cache %u, variant %d: not one job",
                  caches[ct], variant);
            char what[80];
            snprintf(what, sizeof what, "per-head ops, cache %u, variant %d", caches[ct], variant);
            same(what, q, 1), same(what, k, 1), same(what, kc, 0), same(what, vc, 0);
            /* not the plan: k rotated at other positions; a norm of v alone at the end */
            fused0 = cpu_of(be[1])->heads.fused;
            for (int b = 0; b < 2; b++) {
                CHECK(pl_be_fuse(be[b], PL_FUSE_NORM_ROPE | PL_FUSE_ROPE_PAIR |
                                            PL_FUSE_ROPE_STORE) == PL_OK,
                      "%s", pl_last_error());
                rp.n_heads = NH;
                CHECK(pl_be_rope(q.b[b], n, pos0 + 4, &rp) == PL_OK, "%s", pl_last_error());
                rp.n_heads = NKV;
                CHECK(pl_be_rope(k.b[b], n, pos0 + 1, &rp) == PL_OK, "%s", pl_last_error());
                CHECK(pl_be_kv_store(k.b[b], n, pos0 + 4, kc.b[b]) == PL_OK, "%s", pl_last_error());
                CHECK(pl_be_rms_norm(v.b[b], kw.b[b], n * NKV, HD, 1e-6f, v.b[b]) == PL_OK, "%s",
                      pl_last_error());
                CHECK(pl_be_fuse(be[b], 0) == PL_OK, "%s", pl_last_error());
            }
            CHECK(cpu_of(be[1])->heads.fused == fused0, "variant %d: an unplanned group fused",
                  variant);
            snprintf(what, sizeof what, "per-head ops one by one, cache %u, variant %d", caches[ct],
                     variant);
            same(what, q, 1), same(what, k, 1), same(what, v, 1), same(what, kc, 0);
            dfree(q), dfree(k), dfree(v), dfree(qw), dfree(kw), dfree(kc), dfree(vc);
        }
}

static void check_fused(void) {
    enum { K = 512, N = 2 };
    /* weights of one x: Q4_0 and Q8_0 (Q8_0 activations), Q4_K and Q6_K (per 256), F16 */
    static const uint32_t types[] = {PL_TYPE_Q4_0, PL_TYPE_Q8_0, PL_TYPE_Q4_0, PL_TYPE_Q8_0,
                                     PL_TYPE_Q4_0, PL_TYPE_Q4_K, PL_TYPE_Q6_K, PL_TYPE_F16};
    enum { NW = sizeof types / sizeof types[0] };
    static const int64_t rows[NW] = {64, 40, 24, 64, 16, 32, 48, 24};
    for (int act = 0; act < 2; act++) {
        be[0]->act_q8 = be[1]->act_q8 = act;
        pl_buf *w[NW][2];
        void *wb[NW];
        duo out[NW];
        for (int i = 0; i < NW; i++) {
            wb[i] = weight(types[i], K, rows[i], w[i]);
            out[i] = i == 4 ? rand_f32(rows[i], N, -1, 1) : make(PL_TYPE_F32, rows[i], N, NULL);
        }
        duo x = rand_f32(K, N, -2, 2), x2 = rand_f32(K, N, -2, 2);
        for (int b = 0; b < 2; b++) {
            CHECK(pl_be_fuse(be[b], PL_FUSE_QKV | PL_FUSE_GATE_UP) == PL_OK, "%s", pl_last_error());
            /* 0-3: one group of x (Q8_0 activations: held together when act is on) */
            for (int i = 0; i < 4; i++)
                CHECK(pl_be_matmul(w[i][b], x.b[b], NULL, N, false, out[i].b[b]) == PL_OK, "%s",
                      pl_last_error());
            if (b == 1)
                CHECK(unwritten(out[0]) && unwritten(out[3]),
                      "act %d: the group's matmuls were not held", act);
            /* 4: a fifth of the same x, accumulating (the group is full: the four run
             * first, the fifth is held) */
            const float *o4 = ((const cpu_buf *)out[4].b[b])->data;
            float before = o4[0];
            CHECK(pl_be_matmul(w[4][b], x.b[b], NULL, N, true, out[4].b[b]) == PL_OK, "%s",
                  pl_last_error());
            if (b == 1)
                CHECK(!unwritten(out[0]) && o4[0] == before,
                      "act %d: a full group did not run before its fifth", act);
            /* 5-6: K-quants of x2 (another x: 4 runs first), then F16 of x2 (with act on,
             * another kind of activations: 5 and 6 run first) */
            for (int i = 5; i < 8; i++)
                CHECK(pl_be_matmul(w[i][b], x2.b[b], NULL, N, false, out[i].b[b]) == PL_OK, "%s",
                      pl_last_error());
            if (b == 1)
                CHECK(o4[0] != before && unwritten(out[7]),
                      "act %d: another x did not run the held matmuls first", act);
            if (b == 1 && act)
                CHECK(!unwritten(out[5]) && !unwritten(out[6]),
                      "act %d: another kind of activations did not run the held ones", act);
            /* an op: runs what is held, then reads its outputs */
            CHECK(pl_be_add(out[7].b[b], out[7].b[b], rows[7] * N, out[7].b[b]) == PL_OK, "%s",
                  pl_last_error());
            CHECK(pl_be_fuse(be[b], 0) == PL_OK, "%s", pl_last_error());
        }
        for (int i = 0; i < NW; i++) {
            char what[64];
            snprintf(what, sizeof what, "fused matmul %d (act %d)", i, act);
            same(what, out[i], 1);
            dfree(out[i]);
            for (int b = 0; b < 2; b++) pl_be_buf_free(w[i][b]);
            free(wb[i]);
        }
        /* two of one x accumulating into one output: the second waits for the first (one
         * pool job would run them at once), the 1-thread bits after many rounds */
        {
            pl_buf *wa[2], *wb2[2];
            void *qa = weight(PL_TYPE_Q4_0, K, 256, wa), *qb = weight(PL_TYPE_Q8_0, K, 256, wb2);
            duo acc = rand_f32(256, N, -1, 1);
            for (int b = 0; b < 2; b++) {
                CHECK(pl_be_fuse(be[b], PL_FUSE_QKV) == PL_OK, "%s", pl_last_error());
                for (int round = 0; round < 20; round++) {
                    CHECK(pl_be_matmul(wa[b], x.b[b], NULL, N, true, acc.b[b]) == PL_OK, "%s",
                          pl_last_error());
                    CHECK(pl_be_matmul(wb2[b], x.b[b], NULL, N, true, acc.b[b]) == PL_OK, "%s",
                          pl_last_error());
                }
                CHECK(pl_be_fuse(be[b], 0) == PL_OK, "%s", pl_last_error());
            }
            char what[64];
            snprintf(what, sizeof what, "fused matmuls into one output (act %d)", act);
            same(what, acc, 1);
            dfree(acc);
            for (int b = 0; b < 2; b++) pl_be_buf_free(wa[b]), pl_be_buf_free(wb2[b]);
            free(qa), free(qb);
        }
        /* GATE_UP: gate and up held, then their swiglu runs with them in one job (in
         * place into the gate or the up rows, 1 and 2 rows of x, rows not a whole number
         * of items); a swiglu into a third buffer runs them first, then alone */
        static const uint32_t gu_types[] = {PL_TYPE_Q4_0, PL_TYPE_Q8_0, PL_TYPE_Q4_K, PL_TYPE_F16};
        for (int t = 0; t < 4; t++)
            for (int into = 0; into < 3; into++) {
                int64_t ff = 72 + 8 * t, nx = 1 + (into & 1);
                pl_buf *wg[2], *wu[2];
                void *qg = weight(gu_types[t], K, ff, wg), *qu = weight(gu_types[t], K, ff, wu);
                duo g = make(PL_TYPE_F32, ff, nx, NULL), u = make(PL_TYPE_F32, ff, nx, NULL);
                duo third = make(PL_TYPE_F32, ff, nx, NULL);
                int64_t fused0 = cpu_of(be[1])->swiglu_fused;
                for (int b = 0; b < 2; b++) {
                    pl_buf *o = into == 0 ? g.b[b] : into == 1 ? u.b[b] : third.b[b];
                    CHECK(pl_be_fuse(be[b], PL_FUSE_GATE_UP) == PL_OK, "%s", pl_last_error());
                    CHECK(pl_be_matmul(wg[b], x.b[b], NULL, nx, false, g.b[b]) == PL_OK, "%s",
                          pl_last_error());
                    CHECK(pl_be_matmul(wu[b], x.b[b], NULL, nx, false, u.b[b]) == PL_OK, "%s",
                          pl_last_error());
                    if (b == 1)
                        CHECK(unwritten(g) && unwritten(u), "type %u: gate/up not held",
                              gu_types[t]);
                    CHECK(pl_be_swiglu(g.b[b], u.b[b], nx * ff, o) == PL_OK, "%s", pl_last_error());
                    CHECK(pl_be_fuse(be[b], 0) == PL_OK, "%s", pl_last_error());
                }
                CHECK(cpu_of(be[1])->swiglu_fused - fused0 == (into < 2),
                      "type %u, into %d: the swiglu ran %s its matmuls", gu_types[t], into,
                      into < 2 ? "apart from" : "with");
                char what[80];
                snprintf(what, sizeof what, "gate/up + swiglu, type %u, into %d (act %d)",
                         gu_types[t], into, act);
                same(what, g, 1);
                same(what, u, 1);
                if (into == 2) same(what, third, 1);
                dfree(g), dfree(u), dfree(third);
                for (int b = 0; b < 2; b++) pl_be_buf_free(wg[b]), pl_be_buf_free(wu[b]);
                free(qg), free(qu);
            }
        /* held, then the output freed: the free runs it first (ASan: no write after it) */
        pl_buf *wq[2], *o = NULL;
        void *wqb = weight(PL_TYPE_Q4_0, K, 32, wq);
        CHECK(pl_be_buf_new(be[1], PL_TYPE_F32, 32, N, &o) == PL_OK, "%s", pl_last_error());
        CHECK(pl_be_fuse(be[1], PL_FUSE_GATE_UP) == PL_OK, "%s", pl_last_error());
        CHECK(pl_be_matmul(wq[1], x.b[1], NULL, N, false, o) == PL_OK, "%s", pl_last_error());
        pl_be_buf_free(o);
        CHECK(pl_be_fuse(be[1], 0) == PL_OK, "%s", pl_last_error());
        for (int b = 0; b < 2; b++) pl_be_buf_free(wq[b]);
        free(wqb);
        dfree(x), dfree(x2);
    }
    be[0]->act_q8 = be[1]->act_q8 = 0;
}

static void run_tests(void) {
    CHECK(pl_cpu_new(1, &be[0]) == PL_OK, "%s", pl_last_error());
    CHECK(pl_cpu_new(4, &be[1]) == PL_OK, "%s", pl_last_error());
    if (!be[0] || !be[1]) return;
#ifndef __wasi__ /* (no threads there: both backends run on the caller's) */
    CHECK(strstr(be[1]->device, "4 threads") != NULL, "%s", be[1]->device);
#endif
    check_split();
    check_ops();
    check_kv_f16();
    check_argmax();
    check_rope();
    check_heads();
    check_fused();
    pl_be_destroy(be[0]);
    pl_be_destroy(be[1]);
}
