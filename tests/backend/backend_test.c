/* backend_test.c - the seam's argument checks, and each CPU op against values worked out
 * by hand (RoPE angles, RMSNorm, a two-key attention, ties in argmax/top-k, f16 storage,
 * a Q8_0 matmul against its dequantised weights). */
#include <math.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "test.h"

static pl_buf *f32(pl_backend *be, int64_t ne0, int64_t ne1, const float *init) {
    pl_buf *b = NULL;
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, ne0, ne1, &b) == PL_OK, "%s", pl_last_error());
    if (b && init) pl_be_write(b, 0, init, ne0 * ne1 * 4);
    return b;
}

static void get(const pl_buf *b, float *out, int64_t n) {
    pl_be_read(b, 0, out, n * 4);
}

static bool close_to(float a, double b, double tol) {
    return fabs(a - b) <= tol;
}

static void test_checks(pl_backend *be, pl_backend *other) {
    static const float wv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    pl_buf *w = NULL, *x = f32(be, 4, 2, NULL), *o = f32(be, 2, 1, NULL),
           *ox = f32(other, 2, 2, NULL);
    pl_buf *ids = NULL;
    CHECK(pl_be_buf_weight(be, PL_TYPE_F32, 4, 2, wv, &w) == PL_OK, "weight");
    CHECK(pl_be_matmul(w, x, NULL, 2, false, o) != PL_OK, "2 rows into a 1-row output accepted");
    CHECK(pl_be_matmul(w, x, NULL, 1, false, o) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_matmul(w, x, NULL, 1, false, ox) != PL_OK, "buffers of two backends accepted");
    CHECK(pl_be_matmul(w, o, NULL, 1, false, x) != PL_OK, "wrong row length accepted");
    CHECK(pl_be_rms_norm(x, x, 1, 4, 1e-5f, w) != PL_OK, "a weight as destination accepted");
    CHECK(pl_be_buf_new(be, PL_TYPE_Q4_0, 32, 1, &ids) != PL_OK, "a q4_0 activation buffer");
    CHECK(pl_be_buf_new(be, PL_TYPE_I32, 4, 1, &ids) == PL_OK, "ids");
    CHECK(pl_be_embed(w, x, 1, o) != PL_OK, "f32 ids accepted");
    CHECK(pl_be_kv_store(x, 1, 2, x) != PL_OK, "kv_store past the cache accepted");
    CHECK(pl_be_copy(x, 0, 4, x, 2) != PL_OK, "overlapping copy accepted");
    CHECK(pl_be_read(x, 0, (float[9]){0}, 36) != PL_OK, "read past the end accepted");
    uint8_t junk[18] = {0};
    pl_buf *q = NULL;
    CHECK(pl_be_buf_weight(be, PL_TYPE_Q4_0, 20, 1, junk, &q) != PL_OK, "partial q4_0 block");
    pl_be_buf_free(w);
    pl_be_buf_free(x);
    pl_be_buf_free(o);
    pl_be_buf_free(ox);
    pl_be_buf_free(ids);
}

static void test_rms_norm_swiglu(pl_backend *be) {
    /* rows [3, 4] and [1, 1] (cols 2), eps 0: rms 3.5355 and 1 */
    float xv[4] = {3, 4, 1, 1}, wv[2] = {1, 2}, out[4];
    pl_buf *x = f32(be, 2, 2, xv), *w = NULL, *o = f32(be, 2, 2, NULL);
    pl_be_buf_weight(be, PL_TYPE_F32, 2, 1, wv, &w);
    pl_be_rms_norm(x, w, 2, 2, 0, o);
    get(o, out, 4);
    double r = sqrt(12.5);
    CHECK(close_to(out[0], 3 / r, 1e-6) && close_to(out[1], 8 / r, 1e-6) &&
              close_to(out[2], 1, 1e-6) && close_to(out[3], 2, 1e-6),
          "rms_norm %g %g %g %g", out[0], out[1], out[2], out[3]);
    /* swiglu: silu(g) * u, silu(1) = 1 / (1 + e^-1) */
    float gv[2] = {1, -2}, uv[2] = {2, 3};
    pl_buf *g = f32(be, 2, 1, gv), *u = f32(be, 2, 1, uv);
    pl_be_swiglu(g, u, 2, g);
    get(g, out, 2);
    CHECK(close_to(out[0], 2 / (1 + exp(-1.0)), 1e-6) &&
              close_to(out[1], 3 * -2 / (1 + exp(2.0)), 1e-6),
          "swiglu %g %g", out[0], out[1]);
    pl_be_buf_free(x);
    pl_be_buf_free(w);
    pl_be_buf_free(o);
    pl_be_buf_free(g);
    pl_be_buf_free(u);
}

static void test_rope(pl_backend *be) {
    /* one head of 4, position 2, base 100: theta_0 = 2, theta_1 = 2 * 100^(-1/2) = 0.2 */
    const float v[4] = {1, 2, 3, 4};
    double t0 = 2, t1 = 0.2;
    for (int mode = 0; mode < 2; mode++) {
        pl_buf *x = f32(be, 4, 1, v);
        pl_rope_params p = {.mode = mode ? PL_ROPE_NEOX : PL_ROPE_NORMAL,
                            .n_heads = 1,
                            .head_dim = 4,
                            .rope_dim = 4,
                            .theta_base = 100,
                            .freq_scale = 1};
        CHECK(pl_be_rope(x, 1, 2, &p) == PL_OK, "%s", pl_last_error());
        float o[4], e[4];
        get(x, o, 4);
        if (!mode) { /* pairs (0,1) and (2,3) */
            e[0] = (float)(1 * cos(t0) - 2 * sin(t0));
            e[1] = (float)(1 * sin(t0) + 2 * cos(t0));
            e[2] = (float)(3 * cos(t1) - 4 * sin(t1));
            e[3] = (float)(3 * sin(t1) + 4 * cos(t1));
        } else { /* pairs (0,2) and (1,3) */
            e[0] = (float)(1 * cos(t0) - 3 * sin(t0));
            e[2] = (float)(1 * sin(t0) + 3 * cos(t0));
            e[1] = (float)(2 * cos(t1) - 4 * sin(t1));
            e[3] = (float)(2 * sin(t1) + 4 * cos(t1));
        }
        bool ok = true;
        for (int i = 0; i < 4; i++) ok &= close_to(o[i], e[i], 1e-6);
        CHECK(ok, "rope mode %d: %g %g %g %g", mode, o[0], o[1], o[2], o[3]);
        pl_be_buf_free(x);
    }
    /* frequency factors divide theta; scale multiplies the position */
    float fac[1] = {4};
    pl_buf *x = f32(be, 2, 1, (float[2]){1, 0}), *fb = NULL;
    pl_be_buf_weight(be, PL_TYPE_F32, 1, 1, fac, &fb);
    pl_rope_params p = {.mode = PL_ROPE_NORMAL,
                        .n_heads = 1,
                        .head_dim = 2,
                        .rope_dim = 2,
                        .theta_base = 10000,
                        .freq_scale = 0.5f,
                        .factors = fb};
    pl_be_rope(x, 1, 4, &p); /* theta = 4 * 0.5 / 4 = 0.5 */
    float o[2];
    get(x, o, 2);
    CHECK(close_to(o[0], cos(0.5), 1e-6) && close_to(o[1], sin(0.5), 1e-6), "rope factors %g %g",
          o[0], o[1]);
    pl_be_buf_free(x);
    pl_be_buf_free(fb);
}

static void test_attention(pl_backend *be, uint32_t kv) {
    /* 2 heads sharing 1 kv head of dim 2; keys k0 = [1, 0], k1 = [0, 1]; values v0 = [1, 2],
     * v1 = [3, 4]; query row 1 (position 1) sees both keys. */
    pl_buf *kc = NULL, *vc = NULL;
    pl_be_buf_new(be, kv, 2, 4, &kc);
    pl_be_buf_new(be, kv, 2, 4, &vc);
    pl_buf *k = f32(be, 2, 2, (float[4]){1, 0, 0, 1}), *v = f32(be, 2, 2, (float[4]){1, 2, 3, 4});
    pl_be_kv_store(k, 2, 0, kc);
    pl_be_kv_store(v, 2, 0, vc);
    /* q rows: row 0 (pos 0) head0 [2, 0] head1 [0, 0]; row 1 (pos 1) head0 [1, 0] head1 [0, 2] */
    pl_buf *q = f32(be, 4, 2, (float[8]){2, 0, 0, 0, 1, 0, 0, 2}), *o = f32(be, 4, 2, NULL);
    pl_attn_params p = {.n_head = 2, .n_head_kv = 1, .head_dim = 2, .head_dim_v = 2, .scale = 1};
    CHECK(pl_be_attention(q, kc, vc, 2, 0, &p, o) == PL_OK, "%s", pl_last_error());
    float out[8];
    get(o, out, 8);
    /* row 0 sees only key 0: v0 for both heads */
    double a = 1 / (1 + exp(-1.0)); /* row 1 head 0: scores [1, 0] */
    double b = 1 / (1 + exp(2.0));  /* row 1 head 1: scores [0, 2] */
    double tol = kv == PL_TYPE_F16 ? 2e-3 : 1e-6;
    double e[8] = {1,
                   2,
                   1,
                   2,
                   a * 1 + (1 - a) * 3,
                   a * 2 + (1 - a) * 4,
                   b * 1 + (1 - b) * 3,
                   b * 2 + (1 - b) * 4};
    bool ok = true;
    for (int i = 0; i < 8; i++) ok &= close_to(out[i], e[i], tol);
    CHECK(ok, "attention (%s cache): %g %g %g %g %g %g %g %g", kv == PL_TYPE_F16 ? "f16" : "f32",
          out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7]);
    /* the f16 cache holds rounded values: 0.1 becomes 0.0999755859375 */
    if (kv == PL_TYPE_F16) {
        pl_buf *t = f32(be, 2, 1, (float[2]){0.1f, 1});
        pl_be_kv_store(t, 1, 3, kc);
        uint16_t h[2];
        pl_be_read(kc, 3 * 2 * 2, h, 4);
        CHECK(pl_f16_to_f32(h[0]) == 0.0999755859375f && pl_f16_to_f32(h[1]) == 1.0f, "f16 store");
        pl_be_buf_free(t);
    }
    pl_be_buf_free(kc);
    pl_be_buf_free(vc);
    pl_be_buf_free(k);
    pl_be_buf_free(v);
    pl_be_buf_free(q);
    pl_be_buf_free(o);
}

static void test_select(pl_backend *be) {
    pl_buf *x = f32(be, 5, 2, (float[10]){1, 3, 3, -1, 2, 0, 0, 0, 0, 0}), *ids = NULL,
           *vals = f32(be, 3, 1, NULL);
    pl_be_buf_new(be, PL_TYPE_I32, 4, 1, &ids);
    pl_be_argmax(x, 2, ids, 1);
    int32_t got[4];
    pl_be_read(ids, 0, got, 16);
    CHECK(got[1] == 1 && got[2] == 0, "argmax ties to the lowest index: %d %d", got[1], got[2]);
    pl_be_topk(x, 0, 3, ids, vals);
    float v[3];
    pl_be_read(ids, 0, got, 12);
    get(vals, v, 3);
    CHECK(got[0] == 1 && got[1] == 2 && got[2] == 4 && v[0] == 3 && v[2] == 2, "topk %d %d %d",
          got[0], got[1], got[2]);
    pl_be_buf_free(x);
    /* NaN is skipped, as the GPU kernel does; a row of NaN alone gives -1, and top-k fills
     * the places no number is left for with (-1, -inf): never an id made up from NaN */
    x = f32(be, 5, 2, (float[10]){NAN, 3, NAN, 5, 1, NAN, NAN, NAN, NAN, NAN});
    pl_be_argmax(x, 2, ids, 0);
    pl_be_read(ids, 0, got, 8);
    CHECK(got[0] == 3 && got[1] == -1, "argmax over NaN: %d %d", got[0], got[1]);
    pl_be_topk(x, 0, 3, ids, vals);
    pl_be_read(ids, 0, got, 12);
    get(vals, v, 3);
    CHECK(got[0] == 3 && got[1] == 1 && got[2] == 4 && v[0] == 5, "topk over NaN %d %d %d", got[0],
          got[1], got[2]);
    pl_be_topk(x, 1, 3, ids, vals);
    pl_be_read(ids, 0, got, 12);
    get(vals, v, 3);
    CHECK(got[0] == -1 && got[1] == -1 && got[2] == -1 && v[0] == -INFINITY && v[2] == -INFINITY,
          "topk of NaN alone: %d %d %d", got[0], got[1], got[2]);
    pl_be_buf_free(x);
    pl_be_buf_free(ids);
    pl_be_buf_free(vals);
}

static void test_matmul_embed(pl_backend *be) {
    /* a Q8_0 weight [2, 32]: out = W x + bias, then accumulate */
    float wf[64], xf[32], deq[64];
    for (int i = 0; i < 64; i++) wf[i] = (float)((i * 37) % 19 - 9) / 7.0f;
    for (int i = 0; i < 32; i++) xf[i] = (float)(i % 5) - 2.0f;
    uint8_t wq[2 * 34];
    CHECK(pl_quant_row(PL_TYPE_Q8_0, wf, wq, 64) == PL_OK, "%s", pl_last_error());
    pl_dequant_row(PL_TYPE_Q8_0, wq, deq, 64);
    pl_buf *w = NULL, *bias = NULL, *x = f32(be, 32, 1, xf), *o = f32(be, 2, 1, (float[2]){10, 20});
    const float bv[2] = {0.5f, -0.5f};
    pl_be_buf_weight(be, PL_TYPE_Q8_0, 32, 2, wq, &w);
    pl_be_buf_weight(be, PL_TYPE_F32, 2, 1, bv, &bias);
    CHECK(pl_be_matmul(w, x, bias, 1, true, o) == PL_OK, "%s", pl_last_error());
    double e[2] = {10.5, 19.5};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 32; i++) e[r] += (double)deq[r * 32 + i] * xf[i];
    float out[2];
    get(o, out, 2);
    CHECK(close_to(out[0], e[0], 1e-4) && close_to(out[1], e[1], 1e-4),
          "q8_0 matmul %g %g (want %g %g)", out[0], out[1], e[0], e[1]);
    /* embed rows 1 and an out-of-range id (a zero row) */
    pl_buf *ids = NULL, *emb = f32(be, 32, 2, NULL);
    pl_be_buf_new(be, PL_TYPE_I32, 2, 1, &ids);
    pl_be_write(ids, 0, (int32_t[2]){1, 7}, 8);
    pl_be_embed(w, ids, 2, emb);
    float er[64];
    get(emb, er, 64);
    CHECK(!memcmp(er, deq + 32, 32 * 4) && er[32] == 0 && er[63] == 0, "embed");
    pl_be_buf_free(w);
    pl_be_buf_free(bias);
    pl_be_buf_free(x);
    pl_be_buf_free(o);
    pl_be_buf_free(ids);
    pl_be_buf_free(emb);
}

/* The fast half rounding of the f16 attention equals the exact conversion (every 61st bit
 * pattern over the range it handles specially and around it, every 7th among zero and the
 * float denormals, a sparse sample between; exhaustively it took 15 s). */
static void test_round_half(void) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < (uint64_t)145 << 23; i += i < (uint64_t)2 << 23     ? 7
                                                       : i < (uint64_t)110 << 23 ? 9973
                                                                                 : 61) {
        for (int sign = 0; sign < 2; sign++) {
            uint32_t u = (uint32_t)i | (uint32_t)sign << 31;
            float x, a, b;
            memcpy(&x, &u, 4);
            a = pl_cpu_round_half(x);
            b = pl_f16_to_f32(pl_f32_to_f16(x));
            bad += memcmp(&a, &b, 4) != 0;
        }
    }
    CHECK(bad == 0, "%llu values round differently", (unsigned long long)bad);
}

static void run_tests(void) {
    test_round_half();
    pl_backend *be = NULL, *other = NULL;
    CHECK(pl_cpu_new(2, &be) == PL_OK && pl_cpu_new(1, &other) == PL_OK, "%s", pl_last_error());
    if (!be || !other) return;
    test_checks(be, other);
    test_rms_norm_swiglu(be);
    test_rope(be);
    test_attention(be, PL_TYPE_F32);
    test_attention(be, PL_TYPE_F16);
    test_select(be);
    test_matmul_embed(be);
    CHECK(be->live_bufs == 0 && other->live_bufs == 0, "%lld buffers leaked",
          (long long)be->live_bufs);
    pl_be_destroy(be);
    pl_be_destroy(other);
}
