/* backend_ops_test.c - every op of the seam on every backend against the CPU backend (as
 * ggml's test-backend-ops does), on fresh random inputs and shapes.
 *
 * Each case makes the same inputs on the CPU and on the backend under test, fills every
 * output with NaNs, runs the op on both and compares every value of every buffer the op
 * may write (the parts it must not write too: both must still hold the NaNs there). Ids
 * must be equal; values must agree within a normalised squared error (sum (a - b)^2 /
 * sum b^2) stated per op. An op that fails on either backend is a failure, and so is a
 * slot of PL_BACKEND_SLOTS that no case here runs. Backends: WebGPU (lavapipe in CI; a
 * missing adapter is a failure unless POOLED_SKIP_GPU=1 outside CI, as in tests/gpu/). The
 * seed is printed; POOLED_TEST_SEED replays one. */
#include <time.h>

#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "test.h"

/* ------------------------------------------------------------------ harness */

static uint64_t rng;
static uint32_t u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static uint32_t rnd(uint32_t lo, uint32_t hi) { /* in [lo, hi] */
    return lo + u32() % (hi - lo + 1);
}
static float unif(float lo, float hi) {
    return lo + (hi - lo) * (u32() / 4294967296.0f);
}
static float *randv(size_t n, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = unif(lo, hi);
    return v;
}

static pl_backend *be2[2]; /* [0] the CPU (the reference), [1] the backend under test */
static const char *covered[64];
static int n_covered;

static void cover(const char *op) {
    for (int i = 0; i < n_covered; i++)
        if (!strcmp(covered[i], op)) return;
    if (n_covered < 64) covered[n_covered++] = op;
}

/* One buffer on each backend. */
typedef struct {
    pl_buf *b[2];
} duo;

static size_t esize(uint32_t type) {
    return type == PL_TYPE_F16 ? 2 : 4;
}

/* Bytes of ne1 rows of ne0 values (a Q8_0 KV cache: 34 per 32 values). */
static size_t act_bytes(uint32_t type, int64_t ne0, int64_t ne1) {
    return type == PL_TYPE_Q8_0 ? (size_t)(pl_row_size(type, ne0) * ne1)
                                : (size_t)(ne0 * ne1) * esize(type);
}

/* ne1 rows of ne0 values of type: data, or NaNs (all-ones bytes: NaN as f32 and as f16,
 * -1 as i32). */
static duo act(uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    duo d = {{NULL, NULL}};
    size_t bytes = act_bytes(type, ne0, ne1);
    unsigned char *tmp = malloc(bytes ? bytes : 1);
    if (data)
        memcpy(tmp, data, bytes);
    else
        memset(tmp, 0xff, bytes);
    for (int i = 0; i < 2; i++) {
        CHECK(pl_be_buf_new(be2[i], type, ne0, ne1, &d.b[i]) == PL_OK, "%s", pl_last_error());
        if (d.b[i]) pl_be_write(d.b[i], 0, tmp, (int64_t)bytes);
    }
    free(tmp);
    return d;
}

static duo f32(int64_t ne0, int64_t ne1, const float *data) {
    return act(PL_TYPE_F32, ne0, ne1, data);
}

static duo weight(uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    duo d = {{NULL, NULL}};
    for (int i = 0; i < 2; i++)
        CHECK(pl_be_buf_weight(be2[i], type, ne0, ne1, data, &d.b[i]) == PL_OK, "%s",
              pl_last_error());
    return d;
}

/* Random rows of a weight type (held by the caller while the weights live). */
static void *weight_data(uint32_t type, int64_t ne0, int64_t ne1) {
    float *f = randv((size_t)(ne0 * ne1), -1, 1);
    if (type == PL_TYPE_F32) return f;
    void *out = malloc((size_t)(pl_row_size(type, ne0) * ne1));
    if (type == PL_TYPE_F16)
        for (int64_t i = 0; i < ne0 * ne1; i++) ((uint16_t *)out)[i] = pl_f32_to_f16(f[i]);
    else
        for (int64_t r = 0; r < ne1; r++)
            pl_quant_row(type, f + r * ne0, (char *)out + r * pl_row_size(type, ne0), ne0);
    free(f);
    return out;
}

static void dfree(duo d) {
    pl_be_buf_free(d.b[0]);
    pl_be_buf_free(d.b[1]);
}

/* Run `call` on both backends: X(d) is d's buffer on the one running. */
#define X(d) ((d).b[be_i])
#define BOTH(op, call)                                                                             \
    do {                                                                                           \
        cover(op);                                                                                 \
        for (int be_i = 0; be_i < 2; be_i++)                                                       \
            CHECK((call) == PL_OK, "%s on %s: %s", op, be2[be_i]->name, pl_last_error());          \
    } while (0)

static float value(const unsigned char *raw, uint32_t type, size_t i) {
    if (type == PL_TYPE_F16) return pl_f16_to_f32(((const uint16_t *)raw)[i]);
    float v;
    memcpy(&v, raw + 4 * i, 4);
    return v;
}

/* Every value of d on both backends: I32 equal, floats within the normalised squared error
 * nmse (NaN only where the other has NaN). */
static void compare(const char *what, duo d, double nmse) {
    const pl_buf *b = d.b[0];
    if (!b || !d.b[1]) return;
    size_t n = (size_t)(b->ne0 * b->ne1), bytes = n * esize(b->type);
    unsigned char *ra = malloc(bytes), *rb = malloc(bytes);
    CHECK(pl_be_read(d.b[0], 0, ra, (int64_t)bytes) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_read(d.b[1], 0, rb, (int64_t)bytes) == PL_OK, "%s", pl_last_error());
    if (b->type == PL_TYPE_I32) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (((int32_t *)ra)[i] != ((int32_t *)rb)[i] && !bad++) first = i;
        CHECK(bad == 0, "%s: %zu ids differ (first %zu: cpu %d, %s %d)", what, bad, first,
              ((int32_t *)ra)[first], be2[1]->name, ((int32_t *)rb)[first]);
    } else {
        double num = 0, den = 0;
        size_t nan_bad = 0;
        for (size_t i = 0; i < n; i++) {
            float x = value(ra, b->type, i), y = value(rb, b->type, i);
            if ((x != x) != (y != y)) {
                nan_bad++;
                continue;
            }
            if (x != x) continue;
            if (isinf(x) || isinf(y)) {
                nan_bad += x != y;
                continue;
            }
            num += ((double)x - y) * ((double)x - y);
            den += (double)x * x;
        }
        double err = den > 0 ? num / den : num;
        CHECK(nan_bad == 0 && err <= nmse, "%s: %zu NaN/inf mismatches, nmse %.3g (limit %.3g)",
              what, nan_bad, err, nmse);
    }
    free(ra), free(rb);
}

/* ------------------------------------------------------------------ dense ops */

static const uint32_t wtypes[4] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_Q4_0, PL_TYPE_Q8_0};

static int quantised(uint32_t t) {
    return t == PL_TYPE_Q4_0 || t == PL_TYPE_Q8_0;
}

static void case_embed_matmul(void) {
    for (int ti = 0; ti < 4; ti++) {
        uint32_t t = wtypes[ti], n = rnd(1, 4), rows = rnd(1, 80);
        uint32_t cols = quantised(t) ? 32 * rnd(1, 5) : rnd(1, 150);
        void *wd = weight_data(t, cols, rows);
        float *bd = randv(rows, -1, 1), *xd = randv((size_t)(n + 1) * cols, -1, 1);
        float *od = randv((size_t)(n + 1) * rows, -1, 1);
        duo w = weight(t, cols, rows, wd), bias = weight(PL_TYPE_F32, rows, 1, bd);
        duo x = f32(cols, n + 1, xd), y = f32(rows, n + 1, NULL), acc = f32(rows, n + 1, od);
        char what[96];
        for (int q8 = 0; q8 <= quantised(t); q8++) {
            be2[0]->act_q8 = be2[1]->act_q8 = q8;
            BOTH("matmul", pl_be_matmul(X(w), X(x), X(bias), n, false, X(y)));
            BOTH("matmul", pl_be_matmul(X(w), X(x), NULL, n, true, X(acc)));
            snprintf(what, sizeof what, "matmul type %u %ux%u n %u act_q8 %d", t, rows, cols, n,
                     q8);
            compare(what, y, 1e-9);
            compare(what, acc, 1e-9);
        }
        be2[0]->act_q8 = be2[1]->act_q8 = 0;
        /* embed: rows of the same weight, one id out of range */
        int32_t ids[4] = {(int32_t)(u32() % rows), (int32_t)rows, (int32_t)(u32() % rows), -2};
        duo di = act(PL_TYPE_I32, 4, 1, ids), e = f32(cols, 5, NULL);
        BOTH("embed", pl_be_embed(X(w), X(di), 4, X(e)));
        snprintf(what, sizeof what, "embed type %u %ux%u", t, rows, cols);
        compare(what, e, 0);
        dfree(w), dfree(bias), dfree(x), dfree(y), dfree(acc), dfree(di), dfree(e);
        free(wd), free(bd), free(xd), free(od);
    }
}

static void case_norm_ew(void) {
    for (int it = 0; it < 3; it++) {
        uint32_t rows = rnd(1, 6), cols = rnd(1, 300);
        size_t nv = (size_t)rows * cols;
        float *xd = randv(nv, -3, 3), *yd = randv(nv, -3, 3), *wd = randv(cols, 0.5f, 1.5f);
        duo x = f32(cols, rows, xd), y = f32(cols, rows, yd), w = weight(PL_TYPE_F32, cols, 1, wd);
        duo o = f32(cols, rows + 1, NULL), s = f32(cols, rows + 1, NULL);
        duo a = f32(cols, rows + 1, NULL);
        BOTH("rms_norm", pl_be_rms_norm(X(x), X(w), rows, cols, 1e-5f, X(o)));
        BOTH("swiglu", pl_be_swiglu(X(x), X(y), (int64_t)nv, X(s)));
        BOTH("add", pl_be_add(X(x), X(y), (int64_t)nv, X(a)));
        compare("rms_norm", o, 1e-11);
        compare("swiglu", s, 1e-11);
        compare("add", a, 0);
        dfree(x), dfree(y), dfree(w), dfree(o), dfree(s), dfree(a);
        free(xd), free(yd), free(wd);
    }
}

static void case_rope_attention(void) {
    for (int it = 0; it < 4; it++) {
        uint32_t kvt = it % 2 ? PL_TYPE_F16 : PL_TYPE_F32;
        int nkv = (int)rnd(1, 2), nh = nkv * (int)rnd(1, 3), hd = 2 * (int)rnd(2, 16);
        uint32_t n = rnd(1, 5), pos0 = rnd(0, 20), ctx = pos0 + n + rnd(0, 3);
        pl_rope_params rp = {
            it < 2 ? PL_ROPE_NEOX : PL_ROPE_NORMAL, nh, hd, hd - 2 * (it % 3 == 2), 10000, 1, NULL};
        float *qd = randv((size_t)n * nh * hd, -1, 1), *kd = randv((size_t)ctx * nkv * hd, -1, 1);
        float *vd = randv((size_t)ctx * nkv * hd, -1, 1);
        duo q = f32(nh * hd, n, qd), k = f32(nkv * hd, ctx, kd), v = f32(nkv * hd, ctx, vd);
        duo kc = act(kvt, nkv * hd, ctx, NULL), vc = act(kvt, nkv * hd, ctx, NULL);
        duo o = f32(nh * hd, n + 1, NULL);
        BOTH("rope", pl_be_rope(X(q), n, pos0, &rp));
        /* the cache's earlier rows, then this call's */
        BOTH("kv_store", pl_be_kv_store(X(k), pos0 + n, 0, X(kc)));
        BOTH("kv_store", pl_be_kv_store(X(v), pos0 + n, 0, X(vc)));
        pl_attn_params ap = {nh, nkv, hd, hd, 1.0f / sqrtf((float)hd)};
        BOTH("attention", pl_be_attention(X(q), X(kc), X(vc), n, pos0, &ap, X(o)));
        compare("rope", q, 1e-11);
        compare("kv_store", kc,
                kvt == PL_TYPE_F16 ? 1e-6 : 0); /* f16 rounding may differ by a step */
        /* the CPU rounds q and the value accumulator to f16 on an f16 cache (backend.h) */
        compare("attention", o, kvt == PL_TYPE_F16 ? 1e-5 : 1e-10);
        dfree(q), dfree(k), dfree(v), dfree(kc), dfree(vc), dfree(o);
        free(qd), free(kd), free(vd);
    }
}

/* Views (buf_view): each row of a batch's q, k, v and output taken as a buffer of its own
 * and run through RoPE, the stores into that row's own caches and attention at its own
 * position (llama.c's batched decode step), a write and a read through a view, and an
 * element-wise op in place on one; every parent compared whole, so a view at the wrong
 * offset, or one that spills into the next row, shows. Rows are multiples of 256 bytes,
 * which every WebGPU adapter can bind at their offsets. A view of a view, and rows
 * outside the parent, are refused. */
static void case_views(void) {
    for (int it = 0; it < 2; it++) {
        uint32_t kvt = it ? PL_TYPE_F16 : PL_TYPE_F32;
        int nkv = 2, nh = 4, hd = 32, n = (int)rnd(2, 4), ctx = 24;
        pl_rope_params rp = {PL_ROPE_NEOX, nh, hd, hd, 10000, 1, NULL};
        pl_rope_params rk = {PL_ROPE_NEOX, nkv, hd, hd, 10000, 1, NULL};
        pl_attn_params ap = {nh, nkv, hd, hd, 1.0f / sqrtf((float)hd)};
        float *qd = randv((size_t)n * nh * hd, -1, 1), *kd = randv((size_t)n * nkv * hd, -1, 1);
        float *vd = randv((size_t)n * nkv * hd, -1, 1),
              *hist = randv((size_t)ctx * nkv * hd, -1, 1);
        duo q = f32(nh * hd, n, qd), k = f32(nkv * hd, n, kd), v = f32(nkv * hd, n, vd);
        duo o = f32(nh * hd, n, NULL), kc[4], vc[4], hk = f32(nkv * hd, ctx, hist);
        int pos[4];
        for (int i = 0; i < n; i++) { /* row i's own caches, holding pos[i] earlier rows */
            pos[i] = (int)rnd(0, ctx - 1);
            kc[i] = act(kvt, nkv * hd, ctx, NULL), vc[i] = act(kvt, nkv * hd, ctx, NULL);
            if (pos[i]) BOTH("kv_store", pl_be_kv_store(X(hk), pos[i], 0, X(kc[i])));
            if (pos[i]) BOTH("kv_store", pl_be_kv_store(X(hk), pos[i], 0, X(vc[i])));
        }
        for (int i = 0; i < n; i++) {
            pl_buf *vw[2][4] = {{NULL}};
            duo par[4] = {q, k, v, o};
            for (int b = 0; b < 2; b++)
                for (int j = 0; j < 4; j++)
                    CHECK(pl_be_buf_view(par[j].b[b], i, 1, &vw[b][j]) == PL_OK, "view: %s",
                          pl_last_error());
            if (vw[0][3] && vw[1][3]) {
                cover("buf_view");
                for (int b = 0; b < 2; b++) {
                    pl_buf **w = vw[b];
                    const pl_buf *kcb = kc[i].b[b], *vcb = vc[i].b[b];
                    CHECK(pl_be_rope(w[0], 1, pos[i], &rp) == PL_OK, "%s", pl_last_error());
                    CHECK(pl_be_rope(w[1], 1, pos[i], &rk) == PL_OK, "%s", pl_last_error());
                    CHECK(pl_be_kv_store(w[1], 1, pos[i], (pl_buf *)kcb) == PL_OK, "%s",
                          pl_last_error());
                    CHECK(pl_be_kv_store(w[2], 1, pos[i], (pl_buf *)vcb) == PL_OK, "%s",
                          pl_last_error());
                    CHECK(pl_be_attention(w[0], kcb, vcb, 1, pos[i], &ap, w[3]) == PL_OK, "%s",
                          pl_last_error());
                }
            }
            for (int b = 0; b < 2; b++)
                for (int j = 0; j < 4; j++) pl_be_buf_free(vw[b][j]);
        }
        /* a write and a read through a view of the last row of k, an add in place on it */
        float row[64], back[64];
        for (int j = 0; j < nkv * hd; j++) row[j] = (float)j - 7.5f;
        for (int b = 0; b < 2; b++) {
            pl_buf *w = NULL, *ww = NULL;
            CHECK(pl_be_buf_view(k.b[b], n - 1, 1, &w) == PL_OK, "%s", pl_last_error());
            if (!w) continue;
            CHECK(pl_be_write(w, 0, row, (int64_t)sizeof row) == PL_OK, "%s", pl_last_error());
            CHECK(pl_be_add(w, w, nkv * hd, w) == PL_OK, "%s", pl_last_error());
            CHECK(pl_be_read(w, 0, back, (int64_t)sizeof back) == PL_OK, "%s", pl_last_error());
            CHECK(back[0] == -15.0f && back[63] == 111.0f, "%s: a view read %g, %g", be2[b]->name,
                  back[0], back[63]);
            CHECK(pl_be_buf_view(w, 0, 1, &ww) != PL_OK, "%s: a view of a view", be2[b]->name);
            pl_be_buf_free(ww);
            pl_be_buf_free(w);
            CHECK(pl_be_buf_view(k.b[b], n - 1, 2, &w) != PL_OK, "%s: rows past the parent",
                  be2[b]->name);
            pl_be_buf_free(w);
        }
        pl_clear_error();
        compare("views: q", q, 1e-11);
        compare("views: k", k, 1e-11);
        compare("views: v", v, 0);
        compare("views: attention", o, kvt == PL_TYPE_F16 ? 1e-5 : 1e-10);
        for (int i = 0; i < n; i++) {
            compare("views: k cache", kc[i], kvt == PL_TYPE_F16 ? 1e-6 : 1e-11); /* roped */
            compare("views: v cache", vc[i], kvt == PL_TYPE_F16 ? 1e-6 : 0);
            dfree(kc[i]), dfree(vc[i]);
        }
        dfree(q), dfree(k), dfree(v), dfree(o), dfree(hk);
        free(qd), free(kd), free(vd), free(hist);
    }
}

/* The *_cols ops (columns of separate sequences in cache slots): random slots (two columns
 * may share one, at different positions) and positions, f32 and f16 caches, on both
 * backends; and on the CPU against the single-sequence ops on each column's own rows, bit
 * for bit (its definition). Slot rows outside the columns' stay NaN. */
static void case_cols(void) {
    for (int it = 0; it < 4; it++) {
        uint32_t kvt = it % 2 ? PL_TYPE_F16 : PL_TYPE_F32;
        int nkv = (int)rnd(1, 2), nh = nkv * (int)rnd(1, 3), hd = 2 * (int)rnd(2, 16);
        int n = (int)rnd(1, 6), slots = (int)rnd(1, 4), ctx = (int)rnd(8, 40);
        int32_t cd[12];
        int max_keys = 1;
        for (int i = 0; i < n; i++) {
            cd[2 * i] = (int32_t)rnd(0, slots - 1), cd[2 * i + 1] = (int32_t)rnd(0, ctx - 1);
            for (int j = 0; j < i; j++) /* a slot's position once per call */
                if (cd[2 * j] == cd[2 * i] && cd[2 * j + 1] == cd[2 * i + 1])
                    cd[2 * i + 1] = (cd[2 * i + 1] + 1 + i) % ctx, j = -1;
            if (cd[2 * i + 1] + 1 > max_keys) max_keys = cd[2 * i + 1] + 1;
        }
        pl_rope_params rp = {
            it < 2 ? PL_ROPE_NEOX : PL_ROPE_NORMAL, nh, hd, hd - 2 * (it == 3), 10000, 1, NULL};
        pl_rope_params rk = rp;
        rk.n_heads = nkv;
        float *qd = randv((size_t)n * nh * hd, -1, 1), *kd = randv((size_t)n * nkv * hd, -1, 1);
        float *vd = randv((size_t)n * nkv * hd, -1, 1);
        float *hist = randv((size_t)slots * ctx * nkv * hd, -1, 1);
        duo q = f32(nh * hd, n, qd), k = f32(nkv * hd, n, kd), v = f32(nkv * hd, n, vd);
        duo h = f32(nkv * hd, slots * ctx, hist), cols = act(PL_TYPE_I32, 2, n, cd);
        duo kc = act(kvt, nkv * hd, slots * ctx, NULL), vc = act(kvt, nkv * hd, slots * ctx, NULL);
        duo o = f32(nh * hd, n + 1, NULL);
        /* every slot's rows below each column's position hold earlier keys and values */
        BOTH("kv_store", pl_be_kv_store(X(h), slots * ctx, 0, X(kc)));
        BOTH("kv_store", pl_be_kv_store(X(h), slots * ctx, 0, X(vc)));
        BOTH("rope_cols", pl_be_rope_cols(X(q), n, X(cols), max_keys, &rp));
        BOTH("rope_cols", pl_be_rope_cols(X(k), n, X(cols), max_keys, &rk));
        BOTH("kv_store_cols", pl_be_kv_store_cols(X(k), n, X(cols), ctx, X(kc)));
        BOTH("kv_store_cols", pl_be_kv_store_cols(X(v), n, X(cols), ctx, X(vc)));
        pl_attn_params ap = {nh, nkv, hd, hd, 1.0f / sqrtf((float)hd)};
        BOTH("attention_cols",
             pl_be_attention_cols(X(q), X(kc), X(vc), n, X(cols), ctx, max_keys, &ap, X(o)));
        compare("rope_cols", q, 1e-11);
        compare("kv_store_cols", kc, kvt == PL_TYPE_F16 ? 1e-6 : 1e-11);
        compare("kv_store_cols", vc, kvt == PL_TYPE_F16 ? 1e-6 : 0);
        compare("attention_cols", o, kvt == PL_TYPE_F16 ? 1e-5 : 1e-10);
        /* the CPU's columns are its single-sequence ops on each column's own rows */
        pl_backend *c = be2[0];
        pl_buf *q1 = NULL, *k1 = NULL, *v1 = NULL, *kc1 = NULL, *vc1 = NULL, *o1 = NULL;
        int row = nh * hd, kr = nkv * hd;
        CHECK(pl_be_buf_new(c, PL_TYPE_F32, row, n, &q1) == PL_OK &&
                  pl_be_buf_new(c, PL_TYPE_F32, kr, n, &k1) == PL_OK &&
                  pl_be_buf_new(c, PL_TYPE_F32, kr, n, &v1) == PL_OK &&
                  pl_be_buf_new(c, kvt, kr, slots * ctx, &kc1) == PL_OK &&
                  pl_be_buf_new(c, kvt, kr, slots * ctx, &vc1) == PL_OK &&
                  pl_be_buf_new(c, PL_TYPE_F32, row, n, &o1) == PL_OK,
              "%s", pl_last_error());
        if (o1) {
            pl_be_write(q1, 0, qd, (int64_t)n * row * 4),
                pl_be_write(k1, 0, kd, (int64_t)n * kr * 4);
            pl_be_write(v1, 0, vd, (int64_t)n * kr * 4);
            pl_be_kv_store(h.b[0], slots * ctx, 0, kc1),
                pl_be_kv_store(h.b[0], slots * ctx, 0, vc1);
            /* all columns' stores, then all attentions (as the ops run them) */
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < n; i++) {
                    pl_buf *w[4] = {NULL}, *ks = NULL, *vs = NULL, *par[4] = {q1, k1, v1, o1};
                    for (int j = 0; j < 4; j++) pl_be_buf_view(par[j], i, 1, &w[j]);
                    int sl = cd[2 * i], ps = cd[2 * i + 1];
                    pl_be_buf_view(kc1, (int64_t)sl * ctx, ctx, &ks);
                    pl_be_buf_view(vc1, (int64_t)sl * ctx, ctx, &vs);
                    CHECK(w[3] && ks && vs &&
                              (pass ? !pl_be_attention(w[0], ks, vs, 1, ps, &ap, w[3])
                                    : !pl_be_rope(w[0], 1, ps, &rp) &&
                                          !pl_be_rope(w[1], 1, ps, &rk) &&
                                          !pl_be_kv_store(w[1], 1, ps, ks) &&
                                          !pl_be_kv_store(w[2], 1, ps, vs)),
                          "cpu, column %d by the single ops: %s", i, pl_last_error());
                    for (int j = 0; j < 4; j++) pl_be_buf_free(w[j]);
                    pl_be_buf_free(ks), pl_be_buf_free(vs);
                }
            size_t ob = (size_t)n * row * 4;
            float *ra = malloc(ob), *rb = malloc(ob);
            pl_be_read(o.b[0], 0, ra, (int64_t)ob), pl_be_read(o1, 0, rb, (int64_t)ob);
            CHECK(!memcmp(ra, rb, ob), "cpu attention_cols: not the single ops' bits");
            free(ra), free(rb);
        }
        pl_be_buf_free(q1), pl_be_buf_free(k1), pl_be_buf_free(v1);
        pl_be_buf_free(kc1), pl_be_buf_free(vc1), pl_be_buf_free(o1);
        /* a position at max_keys, a slot past the cache: refused on the CPU */
        int32_t bad[2] = {0, (int32_t)max_keys};
        pl_be_write(cols.b[0], 0, bad, sizeof bad);
        CHECK(pl_be_attention_cols(q.b[0], kc.b[0], vc.b[0], 1, cols.b[0], ctx, max_keys, &ap,
                                   o.b[0]) != PL_OK,
              "cpu attention_cols took a position past max_keys");
        bad[0] = slots, bad[1] = 0;
        pl_be_write(cols.b[0], 0, bad, sizeof bad);
        CHECK(pl_be_kv_store_cols(k.b[0], 1, cols.b[0], ctx, kc.b[0]) != PL_OK,
              "cpu kv_store_cols took a slot past the cache");
        pl_clear_error();
        dfree(q), dfree(k), dfree(v), dfree(h), dfree(cols), dfree(kc), dfree(vc), dfree(o);
        free(qd), free(kd), free(vd), free(hist);
    }
}

/* Attention of more than 16 rows, which the GPU runs through its prefill kernel (opened
 * with fa = 1: lavapipe too): head dims 64/128/256, GQA 1/4/8, f16 and f32 caches, a fresh
 * prompt, one continuing a cache, one past 256 positions; the cache's rows past the last
 * stay NaN. A software adapter takes one smaller random shape (lavapipe compiles one in
 * 5-40 s). */
static void case_attention_prefill(void) {
    static const int hds[3] = {64, 128, 256}, gqs[3] = {1, 4, 8};
    int sw = pl_gpu_backend_is_software(be2[1]);
    for (int it = 0; it < (sw ? 1 : 6); it++) {
        uint32_t kvt = rnd(0, 1) ? PL_TYPE_F16 : PL_TYPE_F32, at = rnd(0, 2);
        int hd = sw ? 32 : hds[it % 3], gq = gqs[sw ? (int)rnd(0, 2) : (it + it / 3) % 3];
        int nkv = (int)rnd(1, 2), nh = nkv * gq;
        uint32_t n = rnd(17, 40), pos0 = at == 0 ? 0 : at == 1 ? rnd(1, 60) : rnd(250, 300);
        uint32_t ctx = pos0 + n + rnd(0, 3), kd = (uint32_t)(nkv * hd);
        float *qd = randv((size_t)n * nh * hd, -1, 1), *kd_ = randv((size_t)(pos0 + n) * kd, -2, 2);
        float *vd = randv((size_t)(pos0 + n) * kd, -1, 1);
        duo q = f32(nh * hd, n, qd), k = f32(kd, pos0 + n, kd_), v = f32(kd, pos0 + n, vd);
        duo kc = act(kvt, kd, ctx, NULL), vc = act(kvt, kd, ctx, NULL);
        duo o = f32(nh * hd, n + 1, NULL);
        BOTH("kv_store", pl_be_kv_store(X(k), pos0 + n, 0, X(kc)));
        BOTH("kv_store", pl_be_kv_store(X(v), pos0 + n, 0, X(vc)));
        pl_attn_params ap = {nh, nkv, hd, hd, 1.0f / sqrtf((float)hd)};
        BOTH("attention", pl_be_attention(X(q), X(kc), X(vc), n, pos0, &ap, X(o)));
        /* the CPU rounds q and the value accumulator to f16 on an f16 cache (backend.h) */
        compare("attention (prefill)", o, kvt == PL_TYPE_F16 ? 1e-5 : 1e-10);
        dfree(q), dfree(k), dfree(v), dfree(kc), dfree(vc), dfree(o);
        free(qd), free(kd_), free(vd);
    }
}

/* The same bytes in d on both backends (a Q8_0 cache: quants and scales, and the poison
 * where nothing was stored). */
static void compare_bytes(const char *what, duo d) {
    if (!d.b[0] || !d.b[1]) return;
    size_t bytes = act_bytes(d.b[0]->type, d.b[0]->ne0, d.b[0]->ne1), bad = 0, first = 0;
    unsigned char *ra = malloc(bytes), *rb = malloc(bytes);
    CHECK(pl_be_read(d.b[0], 0, ra, (int64_t)bytes) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_read(d.b[1], 0, rb, (int64_t)bytes) == PL_OK, "%s", pl_last_error());
    for (size_t i = 0; i < bytes; i++)
        if (ra[i] != rb[i] && !bad++) first = i;
    CHECK(bad == 0, "%s: %zu of %zu bytes differ (first %zu: cpu %02x, %s %02x)", what, bad, bytes,
          first, ra[first], be2[1]->name, rb[first]);
    free(ra), free(rb);
}

/* A Q8_0 KV cache: stored in two calls (a call may start and end inside a scale word), the
 * same bytes on both backends, and attention over it - decode and prefill rows, one split
 * and several (past 256 positions) - within float32 summation order of the CPU. Values
 * span magnitudes (tiny blocks give subnormal f16 scales) and include exact ties. */
static void case_kv_q8(void) {
    for (int it = 0; it < 3; it++) { /* decode; prefill rows past one block; split-K */
        int nkv = (int)rnd(1, 2), hd = it == 1 ? 4 * (int)rnd(1, 8) : 32 * (int)rnd(1, 2);
        while (nkv * hd % 32) nkv++;
        int nh = nkv * (int)rnd(1, 3);
        uint32_t n = it == 1 ? rnd(9, 20) : rnd(1, 4), pos0 = it == 2 ? rnd(250, 300) : rnd(0, 20);
        uint32_t ctx = pos0 + n + rnd(0, 3), kd = (uint32_t)(nkv * hd);
        float *qd = randv((size_t)n * nh * hd, -1, 1), *kd_ = randv((size_t)ctx * kd, -2, 2);
        float *vd = randv((size_t)ctx * kd, -2, 2);
        for (size_t i = 0; i < (size_t)ctx * kd; i++) {
            if (i / 32 % 5 == 1) kd_[i] *= 1e-4f, vd[i] *= 1e-6f;       /* subnormal scales */
            if (i % 7 == 3) kd_[i] = 0.5f * (float)((int)(kd_[i] * 8)); /* ties */
        }
        /* a block whose quant x / (amax / 127) is 113.499985: the GPU's division residual
         * through an unfused fma (lavapipe) made it 114 (seed 14193491942) */
        for (size_t j = 0; j < 32 && (size_t)ctx * kd >= 96; j++)
            vd[64 + j] = j == 0   ? 0x1.ffdb9p+0f
                         : j == 1 ? 0x1.c97294p+0f
                                  : 0.25f * (float)(j % 7) - 0.75f;
        duo q = f32(nh * hd, n, qd), k = f32(kd, ctx, kd_), v = f32(kd, ctx, vd);
        duo kc = act(PL_TYPE_Q8_0, kd, ctx, NULL), vc = act(PL_TYPE_Q8_0, kd, ctx, NULL);
        duo o = f32(nh * hd, n + 1, NULL);
        /* the earlier rows from row 0 of k, then this call's rows from row 0 of k2 */
        duo k2 = f32(kd, n, kd_ + (size_t)pos0 * kd), v2 = f32(kd, n, vd + (size_t)pos0 * kd);
        BOTH("kv_store", pl_be_kv_store(X(k), pos0, 0, X(kc)));
        BOTH("kv_store", pl_be_kv_store(X(v), pos0, 0, X(vc)));
        BOTH("kv_store", pl_be_kv_store(X(k2), n, pos0, X(kc)));
        BOTH("kv_store", pl_be_kv_store(X(v2), n, pos0, X(vc)));
        pl_attn_params ap = {nh, nkv, hd, hd, 1.0f / sqrtf((float)hd)};
        BOTH("attention", pl_be_attention(X(q), X(kc), X(vc), n, pos0, &ap, X(o)));
        compare_bytes("kv_store q8_0 (k)", kc);
        compare_bytes("kv_store q8_0 (v)", vc);
        compare("attention q8_0", o, 1e-10);
        dfree(q), dfree(k), dfree(v), dfree(k2), dfree(v2), dfree(kc), dfree(vc), dfree(o);
        free(qd), free(kd_), free(vd);
    }
}

/* Values with many ties, NaNs and -inf. */
static float *tied(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = u32();
        x[i] = (float)(r % 23) - 11.0f;
        if (r % 37 == 0) x[i] = NAN;
        if (r % 41 == 0) x[i] = -INFINITY;
    }
    return x;
}

static void case_select_copy(void) {
    for (int it = 0; it < 3; it++) {
        uint32_t rows = rnd(1, 5), cols = rnd(1, 2000), k = rnd(1, cols < 40 ? cols : 40);
        float *xd = tied((size_t)rows * cols);
        duo x = f32(cols, rows, xd), ids = act(PL_TYPE_I32, rows + 2, 1, NULL);
        duo tid = act(PL_TYPE_I32, k + 1, 1, NULL), tv = f32(k + 1, 1, NULL);
        BOTH("argmax", pl_be_argmax(X(x), rows, X(ids), 1));
        BOTH("topk", pl_be_topk(X(x), rows - 1, k, X(tid), X(tv)));
        compare("argmax", ids, 0);
        compare("topk ids", tid, 0);
        compare("topk values", tv, 0);
        /* copy: f32, f16 and i32, offsets */
        uint32_t types[3] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_I32};
        for (int ti = 0; ti < 3; ti++) {
            uint32_t len = rnd(1, 200), s0 = rnd(0, 5), d0 = rnd(0, 5);
            float *src = randv(len + s0, -2, 2);
            uint16_t *h = malloc((len + s0) * 2);
            for (uint32_t i = 0; i < len + s0; i++) h[i] = pl_f32_to_f16(src[i]);
            duo a = act(types[ti], len + s0, 1, ti == 1 ? (void *)h : (void *)src);
            duo b = act(types[ti], len + d0 + 1, 1, NULL);
            BOTH("copy", pl_be_copy(X(a), s0, len, X(b), d0));
            compare("copy", b, 0);
            dfree(a), dfree(b);
            free(src), free(h);
        }
        dfree(x), dfree(ids), dfree(tid), dfree(tv);
        free(xd);
    }
}

/* ------------------------------------------------------------------ MoE ops */

static void case_moe(void) {
    for (int it = 0; it < 4; it++) {
        uint32_t n = rnd(1, 4), n_exp = rnd(2, 8), nu = rnd(1, n_exp < 4 ? n_exp : 4);
        uint32_t t = wtypes[it % 4], d = quantised(t) ? 32 * rnd(1, 4) : rnd(1, 100);
        uint32_t ff = quantised(t) ? 32 * rnd(1, 3) : rnd(1, 80);
        /* router: logits -> top-k -> softmax over the k */
        float *ld = randv((size_t)n * n_exp, -3, 3);
        duo logits = f32(n_exp, n, ld), ids = act(PL_TYPE_I32, nu, n + 1, NULL);
        duo vals = f32(nu, n + 1, NULL), wts = f32(nu, n + 1, NULL), probs = f32(n_exp, n, NULL);
        BOTH("softmax_rows", pl_be_softmax_rows(X(logits), n, n_exp, X(probs)));
        BOTH("topk_rows", pl_be_topk_rows(X(logits), n, n_exp, nu, X(ids), X(vals)));
        BOTH("softmax_rows", pl_be_softmax_rows(X(vals), n, nu, X(wts)));
        compare("softmax_rows", probs, 1e-11);
        compare("topk_rows ids", ids, 0);
        compare("topk_rows values", vals, 0);
        compare("softmax_rows of the top k", wts, 1e-11);
        /* experts: gate and up from the shared x, down from each slot's own row; the
         * reference's ids feed both backends, with one bad id */
        int32_t *idd = malloc((size_t)n * nu * 4);
        CHECK(pl_be_read(ids.b[0], 0, idd, (int64_t)n * nu * 4) == PL_OK, "%s", pl_last_error());
        if (it == 1) idd[0] = -1;
        duo ids2 = act(PL_TYPE_I32, nu, n, idd);
        void *gd = weight_data(t, d, (int64_t)ff * n_exp),
             *dd = weight_data(t, ff, (int64_t)d * n_exp);
        duo wg = weight(t, d, (int64_t)ff * n_exp, gd), wd = weight(t, ff, (int64_t)d * n_exp, dd);
        float *xd = randv((size_t)n * d, -1, 1), *od = randv((size_t)(n + 1) * d, -1, 1);
        duo x = f32(d, n, xd), h = f32(ff, n * nu + 1, NULL), y = f32(d, n * nu + 1, NULL);
        duo out = f32(d, n + 1, od), out2 = f32(d, n + 1, NULL);
        for (int q8 = 0; q8 <= quantised(t); q8++) {
            be2[0]->act_q8 = be2[1]->act_q8 = q8;
            BOTH("matmul_id", pl_be_matmul_id(X(wg), n_exp, X(x), X(ids2), n, nu, true, X(h)));
            BOTH("matmul_id", pl_be_matmul_id(X(wd), n_exp, X(h), X(ids2), n, nu, false, X(y)));
            char what[96];
            snprintf(what, sizeof what, "matmul_id type %u, %u of %u experts %ux%u act_q8 %d", t,
                     nu, n_exp, ff, d, q8);
            compare(what, h, 1e-9);
            compare(what, y, 1e-9);
        }
        be2[0]->act_q8 = be2[1]->act_q8 = 0;
        BOTH("moe_combine", pl_be_moe_combine(X(y), X(wts), n, nu, true, X(out)));
        BOTH("moe_combine", pl_be_moe_combine(X(y), X(wts), n, nu, false, X(out2)));
        compare("moe_combine (accumulate)", out, 1e-10);
        compare("moe_combine", out2, 1e-10);
        /* the combine then the gated shared expert's add, asked to fuse (COMBINE_SHARED: one
         * kernel on the GPU, the plain ops on the CPU) */
        float *sd = randv((size_t)n * d, -1, 1), *sg = randv(n, -4, 4);
        duo ysh = f32(d, n, sd), sgate = f32(1, n, sg), out3 = f32(d, n + 1, od);
        BOTH("fuse", pl_be_fuse(be2[be_i], PL_FUSE_COMBINE_SHARED));
        BOTH("moe_combine", pl_be_moe_combine(X(y), X(wts), n, nu, true, X(out3)));
        BOTH("sigmoid_mul", pl_be_sigmoid_mul(X(ysh), X(sgate), n, d, 1, true, X(out3)));
        BOTH("fuse", pl_be_fuse(be2[be_i], 0));
        compare("moe_combine + gated shared expert, fused", out3, 1e-10);
        dfree(ysh), dfree(sgate), dfree(out3);
        free(sd), free(sg);
        dfree(logits), dfree(ids), dfree(vals), dfree(wts), dfree(probs), dfree(ids2);
        dfree(wg), dfree(wd), dfree(x), dfree(h), dfree(y), dfree(out), dfree(out2);
        free(ld), free(idd), free(gd), free(dd), free(xd), free(od);
    }
}

/* ------------------------------------------------------------------ Gated DeltaNet ops */

/* The delta rule from a random state: m0 columns (with snapshots if asked), then (decode)
 * one step from the state they left. */
static void delta_rule_calls(int nk, int nv, int dk, int dv, uint32_t m0, int with_snaps,
                             int decode) {
    pl_delta_params dp = {nk, nv, dk, dv, 1e-6f};
    int64_t row = 2 * nk * dk + nv * dv, hs = (int64_t)dk * dv;
    float *sad = malloc((size_t)nv * 4), *dtd = randv((size_t)nv, -1, 1);
    for (int h = 0; h < nv; h++) sad[h] = -expf(unif(-2, 1));
    float *s0 = randv((size_t)(nv * hs), -0.5f, 0.5f);
    duo sa = f32(nv, 1, sad), dt = f32(nv, 1, dtd), state = f32(hs, nv, s0);
    for (uint32_t call = 0; call < 1u + (decode != 0); call++) {
        uint32_t m = call ? 1 : m0;
        int sn = with_snaps && !call;
        float *qd = randv((size_t)(m * row), -1, 1), *ad = randv((size_t)m * nv, -4, 4);
        float *bd = randv((size_t)m * nv, -4, 4);
        duo qkv = f32(row, m, qd), a = f32(nv, m, ad), b = f32(nv, m, bd);
        duo out = f32((int64_t)nv * dv, m + 1, NULL);
        duo snaps = sn ? f32(hs, (int64_t)(m + 1) * nv, NULL) : (duo){{NULL, NULL}};
        BOTH("delta_rule", pl_be_delta_rule(X(qkv), X(a), X(b), X(sa), X(dt), X(state), m, &dp,
                                            sn ? X(snaps) : NULL, X(out)));
        char what[112];
        snprintf(what, sizeof what, "delta_rule %d/%d heads of %d/%d, %u tokens%s", nk, nv, dk, dv,
                 m, sn ? ", snapshots" : "");
        compare(what, out, 1e-9);
        compare("delta_rule state", state, 1e-9);
        if (sn) compare("delta_rule snapshots", snaps, 1e-9);
        dfree(qkv), dfree(a), dfree(b), dfree(out), dfree(snaps);
        free(qd), free(ad), free(bd);
    }
    dfree(sa), dfree(dt), dfree(state);
    free(sad), free(dtd), free(s0);
}

static void case_deltanet(void) {
    for (int it = 0; it < 3; it++) {
        uint32_t rows = rnd(1, 5), cols = rnd(1, 200), gc = it % 2 ? 1 : cols;
        float *xd = randv((size_t)rows * cols, -3, 3), *gd = randv((size_t)rows * gc, -5, 5);
        float *od = randv((size_t)(rows + 1) * cols, -1, 1);
        duo x = f32(cols, rows, xd), g = f32(gc, rows, gd), o = f32(cols, rows + 1, od);
        BOTH("sigmoid_mul", pl_be_sigmoid_mul(X(x), X(g), rows, cols, gc, it == 1, X(o)));
        compare("sigmoid_mul", o, 1e-11);
        dfree(x), dfree(g), dfree(o);
        free(xd), free(gd), free(od);

        /* conv1d: two calls, the second from the state the first left, snapshots */
        /* (the third: a prompt's rows, more than the GPU's 16 rows a turn) */
        uint32_t ch = rnd(1, 200), k = it ? 4 : rnd(2, 6), n = it == 2 ? rnd(17, 40) : rnd(1, 6);
        float *wd = randv((size_t)ch * k, -1, 1), *sd = randv((size_t)(k - 1) * ch, -1, 1);
        duo w = weight(PL_TYPE_F32, k, ch, wd), st = f32(ch, k - 1, sd);
        for (uint32_t call = 0; call < 2; call++) {
            uint32_t m = call ? 1 : n;
            float *cx = randv((size_t)m * ch, -2, 2);
            duo cin = f32(ch, m, cx), cout = f32(ch, m + 1, NULL);
            duo snaps = f32(ch, (int64_t)(m + 1) * (k - 1), NULL);
            BOTH("ssm_conv", pl_be_ssm_conv(X(cin), X(w), X(st), m, X(snaps), X(cout)));
            compare("ssm_conv", cout, 1e-11);
            compare("ssm_conv state", st, 0);
            compare("ssm_conv snapshots", snaps, 0);
            dfree(cin), dfree(cout), dfree(snaps);
            free(cx);
        }
        dfree(w), dfree(st);
        free(wd), free(sd);
    }
    /* the delta rule: a verify-sized batch (token by token on the GPU) then a decode step,
     * prefill batches of 17 to 130 columns (staged chunks, their last one partial) on small
     * heads and on the models' (d 128, 16 key heads, 16 or 32 value heads: qwen3.5-35b-a3b's)
     * with and without snapshots, then a decode step from the state they left (each kernel
     * costs lavapipe seconds to compile: no more of them than before the chunks) */
    int nk = (int)rnd(1, 2), k16 = (int)rnd(1, 2);
    delta_rule_calls(nk, nk * (int)rnd(1, 3), (int)rnd(1, 40), (int)rnd(1, 40), rnd(1, 16), 1, 1);
    delta_rule_calls(nk, nk * (int)rnd(1, 3), (int)rnd(1, 40), (int)rnd(1, 40), rnd(17, 120), 1, 0);
    delta_rule_calls(2, 4, 128, 128, rnd(17, 40), 1, 0);
    delta_rule_calls(16, 16 * k16, 128, 128, rnd(17, 130), 0, 1);
}

/* ------------------------------------------------------------------ fusion requests */

/* A dense feed-forward asked to fuse (the input norm into the gate/up sweep with SwiGLU):
 * a backend with fused kernels runs them, the CPU the plain ops; the results must agree. */
static void case_fuse(void) {
    for (int ti = 0; ti < 4; ti++) {
        uint32_t t = wtypes[ti], n = rnd(1, 4), ff = rnd(1, 70);
        uint32_t d = quantised(t) ? 32 * rnd(1, 4) : rnd(1, 120);
        void *gd = weight_data(t, d, ff), *ud = weight_data(t, d, ff);
        float *nd = randv(d, 0.5f, 1.5f), *xd = randv((size_t)n * d, -1, 1);
        duo wg = weight(t, d, ff, gd), wu = weight(t, d, ff, ud),
            nw = weight(PL_TYPE_F32, d, 1, nd);
        duo x = f32(d, n, xd), xn = f32(d, n, NULL), g = f32(ff, n, NULL), u = f32(ff, n, NULL);
        BOTH("fuse", pl_be_fuse(be2[be_i], PL_FUSE_NORM_MATMUL | PL_FUSE_GATE_UP));
        BOTH("rms_norm", pl_be_rms_norm(X(x), X(nw), n, d, 1e-6f, X(xn)));
        BOTH("matmul", pl_be_matmul(X(wg), X(xn), NULL, n, false, X(g)));
        BOTH("matmul", pl_be_matmul(X(wu), X(xn), NULL, n, false, X(u)));
        BOTH("swiglu", pl_be_swiglu(X(g), X(u), (int64_t)n * ff, X(g)));
        BOTH("fuse", pl_be_fuse(be2[be_i], 0));
        char what[96];
        snprintf(what, sizeof what, "fused norm + gate/up, type %u %ux%u n %u", t, ff, d, n);
        compare(what, g, 1e-9);
        compare(what, xn, 1e-9);
        dfree(wg), dfree(wu), dfree(nw), dfree(x), dfree(xn), dfree(g), dfree(u);
        free(gd), free(ud), free(nd), free(xd);
    }
}

/* The experts' gate and up GEMVs of the same ids with their SwiGLU, asked to fuse (one
 * sweep over both stacked weights on the GPU): the SwiGLU, and the up products it must
 * still write, against the CPU's plain ops; one bad id, one row past the slots untouched. */
static void case_fuse_experts(void) {
    for (int it = 0; it < 4; it++) {
        uint32_t n = rnd(1, 3), n_exp = rnd(2, 9), nu = rnd(1, n_exp < 4 ? n_exp : 4);
        uint32_t t = wtypes[it], d = quantised(t) ? 32 * rnd(1, 4) : rnd(1, 100);
        uint32_t ff = quantised(t) ? 32 * rnd(1, 3) : rnd(1, 80), slots = n * nu;
        int32_t *idd = malloc((size_t)slots * 4);
        for (uint32_t i = 0; i < slots; i++) idd[i] = (int32_t)rnd(0, n_exp - 1);
        if (it == 2) idd[slots - 1] = (int32_t)n_exp; /* out of range: a zero row */
        void *gd = weight_data(t, d, (int64_t)ff * n_exp),
             *ud = weight_data(t, d, (int64_t)ff * n_exp);
        duo wg = weight(t, d, (int64_t)ff * n_exp, gd), wu = weight(t, d, (int64_t)ff * n_exp, ud);
        float *xd = randv((size_t)n * d, -1, 1);
        duo ids = act(PL_TYPE_I32, nu, n, idd), x = f32(d, n, xd);
        for (int q8 = 0; q8 <= quantised(t); q8++) {
            be2[0]->act_q8 = be2[1]->act_q8 = q8;
            duo g = f32(ff, slots + 1, NULL), u = f32(ff, slots + 1, NULL);
            BOTH("fuse", pl_be_fuse(be2[be_i], PL_FUSE_GATE_UP));
            BOTH("matmul_id", pl_be_matmul_id(X(wg), n_exp, X(x), X(ids), n, nu, true, X(g)));
            BOTH("matmul_id", pl_be_matmul_id(X(wu), n_exp, X(x), X(ids), n, nu, true, X(u)));
            BOTH("swiglu", pl_be_swiglu(X(g), X(u), (int64_t)slots * ff, X(g)));
            BOTH("fuse", pl_be_fuse(be2[be_i], 0));
            char what[112];
            snprintf(what, sizeof what,
                     "fused expert gate/up, type %u, %u of %u experts %ux%u act_q8 %d", t, nu,
                     n_exp, ff, d, q8);
            compare(what, g, 1e-9);
            compare(what, u, 1e-9);
            dfree(g), dfree(u);
        }
        be2[0]->act_q8 = be2[1]->act_q8 = 0;
        dfree(wg), dfree(wu), dfree(ids), dfree(x);
        free(idd), free(gd), free(ud), free(xd);
    }
}

/* The router's top-k and the softmax of its k values, asked to fuse (the top-k kernel
 * normalises them): ids and weights against the CPU's plain ops, on rows with ties and NaNs,
 * short enough for one workgroup or long enough for the merge stage. Every other case also
 * asks for the MoE shared expert's gate (a 1-row F32 GEMV of another x right after the
 * top-k, SHARED_GATE: the rank top-k computes it; the long rows run it alone). */
static void case_fuse_router(void) {
    for (int it = 0; it < 6; it++) {
        uint32_t n = rnd(1, 4), cols = it == 3 ? rnd(1025, 3000) : rnd(1, 300);
        uint32_t k = rnd(1, cols < 12 ? cols : 12);
        float *ld = randv((size_t)n * cols, -3, 3);
        for (size_t i = 0; i < (size_t)n * cols; i++) {
            if (u32() % 4 == 0) ld[i] = (float)(int)ld[i]; /* ties */
            if (u32() % 50 == 0) ld[i] = NAN;
        }
        duo logits = f32(cols, n, ld), ids = act(PL_TYPE_I32, k, n + 1, NULL);
        duo wts = f32(k, n + 1, NULL);
        bool gate = it % 2;
        uint32_t d = rnd(1, 2100);
        float *xd = randv((size_t)d * n, -2, 2), *gd = randv(d, -1, 1);
        duo x = f32(d, n, xd), gw = weight(PL_TYPE_F32, d, 1, gd), g = f32(1, n + 1, NULL);
        BOTH("fuse", pl_be_fuse(be2[be_i], PL_FUSE_ROUTER | (gate ? PL_FUSE_SHARED_GATE : 0)));
        BOTH("topk_rows", pl_be_topk_rows(X(logits), n, cols, k, X(ids), X(wts)));
        BOTH("softmax_rows", pl_be_softmax_rows(X(wts), n, k, X(wts)));
        if (gate) BOTH("matmul", pl_be_matmul(X(gw), X(x), NULL, n, false, X(g)));
        BOTH("fuse", pl_be_fuse(be2[be_i], 0));
        char what[96];
        snprintf(what, sizeof what, "fused top-%u + softmax%s of %u x %u", k,
                 gate ? " + shared gate" : "", n, cols);
        compare(what, ids, 0);
        compare(what, wts, 1e-11);
        if (gate) compare(what, g, 1e-10);
        dfree(logits), dfree(ids), dfree(wts), dfree(x), dfree(gw), dfree(g);
        free(ld), free(xd), free(gd);
    }
}

/* The gated RMSNorm asked to fuse (rms_norm of o in place per head, then swiglu(z, o)),
 * gating into z itself or into a buffer of its own: fused on the GPU, plain ops on the CPU. */
static void case_fuse_norm_gate(void) {
    for (int i = 0; i < 4; i++) {
        uint32_t heads = rnd(1, 9), hd = rnd(1, 140), n = heads * hd;
        float *od = randv(n, -3, 3), *zd = randv(n, -6, 6), *wd = randv(hd, 0.5f, 1.5f);
        duo o = f32(hd, heads, od), z = f32(hd, heads, zd), w = weight(PL_TYPE_F32, hd, 1, wd);
        duo g = f32(hd, heads, NULL);
        BOTH("fuse", pl_be_fuse(be2[be_i], PL_FUSE_NORM_GATE));
        BOTH("rms_norm", pl_be_rms_norm(X(o), X(w), heads, hd, 1e-6f, X(o)));
        BOTH("swiglu", pl_be_swiglu(X(z), X(o), n, i % 2 ? X(g) : X(z)));
        BOTH("fuse", pl_be_fuse(be2[be_i], 0));
        char what[96];
        snprintf(what, sizeof what, "fused gated norm, %u heads of %u, %s", heads, hd,
                 i % 2 ? "to g" : "in place");
        compare(what, o, 1e-9);
        compare(what, i % 2 ? g : z, 1e-9);
        dfree(o), dfree(z), dfree(w), dfree(g);
        free(od), free(zd), free(wd);
    }
}

/* ------------------------------------------------------------------ driver */

/* read_many: ranges of several buffers (unaligned offsets and lengths, an empty one, the
 * output of an op recorded just before, not yet waited for) in one call give the bytes the
 * reads one by one give, on both backends alike; bad calls are refused. */
static void case_read_many(void) {
    cover("read_many");
    for (int round = 0; round < 4; round++) {
        int64_t ne0 = rnd(8, 70), ne1 = rnd(1, 4), count = ne0 * ne1;
        float *va = randv((size_t)count, -3, 3);
        int32_t vi[9];
        for (int i = 0; i < 9; i++) vi[i] = (int32_t)u32();
        duo a = f32(ne0, ne1, va), out = f32(ne0, ne1, NULL), ids = act(PL_TYPE_I32, 9, 1, vi);
        int64_t bytes = count * 4;
        unsigned char got[2][4][300], one[4][300];
        for (int be_i = 0; be_i < 2; be_i++) {
            if (!a.b[be_i] || !out.b[be_i] || !ids.b[be_i]) continue;
            /* out = a + a, recorded: read_many must wait for it */
            CHECK(pl_be_add(a.b[be_i], a.b[be_i], count, out.b[be_i]) == PL_OK, "%s",
                  pl_last_error());
            int64_t o0 = rnd(0, (uint32_t)bytes - 1), n0 = rnd(1, (uint32_t)(bytes - o0));
            if (n0 > 300) n0 = 300;
            int64_t o1 = rnd(0, 35), n1 = rnd(1, (uint32_t)(36 - o1));
            int64_t o3 = rnd(0, (uint32_t)bytes - 1), n3 = rnd(1, (uint32_t)(bytes - o3));
            if (n3 > 300) n3 = 300;
            pl_read_range r[4] = {{out.b[be_i], o0, got[be_i][0], n0},
                                  {ids.b[be_i], o1, got[be_i][1], n1},
                                  {a.b[be_i], 0, got[be_i][2], 0},
                                  {a.b[be_i], o3, got[be_i][3], n3}};
            CHECK(pl_be_read_many(r, 4) == PL_OK, "read_many on %s: %s", be2[be_i]->name,
                  pl_last_error());
            for (int k = 0; k < 4; k++)
                CHECK(pl_be_read(r[k].src, r[k].offset, one[k], r[k].nbytes) == PL_OK, "%s",
                      pl_last_error());
            bool same = true;
            for (int k = 0; k < 4; k++)
                same = same && !memcmp(got[be_i][k], one[k], (size_t)r[k].nbytes);
            CHECK(same, "read_many on %s: the reads one by one differ", be2[be_i]->name);
            /* and what is there: a + a, the ids, a */
            float sum[75 * 4];
            for (int64_t i = 0; i < count; i++) sum[i] = va[i] + va[i];
            CHECK(!memcmp(got[be_i][0], (unsigned char *)sum + o0, (size_t)n0) &&
                      !memcmp(got[be_i][1], (unsigned char *)vi + o1, (size_t)n1) &&
                      !memcmp(got[be_i][3], (unsigned char *)va + o3, (size_t)n3),
                  "read_many on %s: wrong bytes", be2[be_i]->name);
        }
        /* bad calls: none, too many, another backend's buffer, past the end */
        if (a.b[0] && a.b[1]) {
            unsigned char t[8];
            pl_read_range bad[9];
            for (int k = 0; k < 9; k++) bad[k] = (pl_read_range){a.b[0], 0, t, 4};
            CHECK(pl_be_read_many(bad, 0) == PL_ERR_ARG && pl_be_read_many(bad, 9) == PL_ERR_ARG,
                  "read_many of 0 or 9 reads refused");
            bad[1].src = a.b[1];
            CHECK(pl_be_read_many(bad, 2) == PL_ERR_ARG, "read_many across backends refused");
            bad[1] = (pl_read_range){a.b[0], bytes - 2, t, 4};
            CHECK(pl_be_read_many(bad, 2) == PL_ERR_ARG, "read_many past a buffer's end refused");
        }
        dfree(a), dfree(out), dfree(ids);
        free(va);
    }
}

/* prepare / run_prepared: a pass recorded before its input is written (rms_norm, a matmul,
 * the argmax of its rows) gives, run on that input, what the same ops after a plain write
 * give: bit for bit on the backend itself, within the ops' tolerance of the CPU; a call
 * between prepare and run drops the pass unrun; a backend that runs ops as they come (the
 * CPU) refuses to prepare. */
static void case_prepare(void) {
    cover("prepare"), cover("run_prepared"), cover("has_prepared");
    for (int round = 0; round < 3; round++) {
        int64_t rows = rnd(1, 4), cols = rnd(8, 96), n_out = rnd(2, 40);
        float *x0 = randv((size_t)(rows * cols), -2, 2), *x1 = randv((size_t)(rows * cols), -2, 2);
        float *wn = randv((size_t)cols, 0.5f, 1.5f), *wm = weight_data(PL_TYPE_F32, cols, n_out);
        duo x = f32(cols, rows, x0), y = f32(cols, rows, NULL), z = f32(n_out, rows, NULL);
        duo ids = act(PL_TYPE_I32, rows, 1, NULL), other = f32(4, 1, NULL);
        duo w = weight(PL_TYPE_F32, cols, 1, wn), m = weight(PL_TYPE_F32, cols, n_out, wm);
        int64_t xb = rows * cols * 4, zb = rows * n_out * 4;
        float zref[40 * 4], zplain[40 * 4], zprep[40 * 4], zdrop[40 * 4];
        int32_t iref[4], iplain[4], iprep[4];
#define PASS(be_i)                                                                                 \
    (pl_be_rms_norm(x.b[be_i], w.b[be_i], rows, cols, 1e-6f, y.b[be_i]) ||                         \
     pl_be_matmul(m.b[be_i], y.b[be_i], NULL, rows, false, z.b[be_i]) ||                           \
     pl_be_argmax(z.b[be_i], rows, ids.b[be_i], 0))
        /* the CPU: the write, then the ops */
        CHECK(!pl_be_write(x.b[0], 0, x1, xb) && !PASS(0) && !pl_be_read(z.b[0], 0, zref, zb) &&
                  !pl_be_read(ids.b[0], 0, iref, rows * 4),
              "cpu pass: %s", pl_last_error());
        CHECK(!be2[0]->can_prepare &&
                  pl_be_prepare(x.b[0], &(pl_read_range){z.b[0], 0, zref, 4}, 1) == PL_ERR_ARG &&
                  !pl_be_has_prepared(be2[0]),
              "the CPU refuses to prepare a pass");
        pl_backend *be = be2[1];
        if (be && be->can_prepare) {
            /* plain on the backend under test */
            CHECK(!pl_be_write(x.b[1], 0, x1, xb) && !PASS(1) &&
                      !pl_be_read(z.b[1], 0, zplain, zb) &&
                      !pl_be_read(ids.b[1], 0, iplain, rows * 4),
                  "%s plain pass: %s", be->name, pl_last_error());
            /* prepared on the old input, run on the new */
            pl_read_range r[2] = {{z.b[1], 0, zprep, zb}, {ids.b[1], 0, iprep, rows * 4}};
            CHECK(!pl_be_write(x.b[1], 0, x0, xb) && !pl_be_write(z.b[1], 0, x0, 4) && !PASS(1) &&
                      !pl_be_prepare(x.b[1], r, 2) && pl_be_has_prepared(be),
                  "%s prepare: %s", be->name, pl_last_error());
            CHECK(!pl_be_run_prepared(be, x1, xb) && !pl_be_has_prepared(be), "%s run_prepared: %s",
                  be->name, pl_last_error());
            CHECK(!memcmp(zprep, zplain, (size_t)zb) && !memcmp(iprep, iplain, (size_t)rows * 4),
                  "%s: the prepared pass differs from the plain one", be->name);
            double err = 0, ref = 0;
            for (int64_t i = 0; i < rows * n_out; i++)
                err += (zprep[i] - zref[i]) * (double)(zprep[i] - zref[i]),
                    ref += zref[i] * (double)zref[i];
            CHECK(err <= 1e-9 * (ref + 1e-30), "%s: prepared pass vs cpu nmse %g", be->name,
                  err / (ref + 1e-30));
            /* dropped by a write in between: nothing ran (z keeps what was written) */
            float zero[40 * 4] = {0};
            CHECK(!pl_be_write(z.b[1], 0, zero, zb) && !PASS(1) && !pl_be_prepare(x.b[1], r, 2) &&
                      !pl_be_write(other.b[1], 0, x1, 4) && !pl_be_has_prepared(be) &&
                      pl_be_run_prepared(be, x1, xb) == PL_ERR_ARG,
                  "%s: a write drops the prepared pass", be->name);
            CHECK(!pl_be_read(z.b[1], 0, zdrop, zb) && !memcmp(zdrop, zero, (size_t)zb),
                  "%s: a dropped pass ran", be->name);
            /* an input longer than the buffer: refused, the pass dropped */
            CHECK(!PASS(1) && !pl_be_prepare(x.b[1], r, 2) &&
                      pl_be_run_prepared(be, x1, xb + 4 * cols) == PL_ERR_ARG &&
                      !pl_be_has_prepared(be),
                  "%s: an input past the buffer refused", be->name);
        }
#undef PASS
        dfree(x), dfree(y), dfree(z), dfree(ids), dfree(other), dfree(w), dfree(m);
        free(x0), free(x1), free(wn), free(wm);
    }
}

static void check_coverage(void) {
    static const char *const slots[] = {
#define SLOT_NAME(name) #name,
        PL_BACKEND_SLOTS(SLOT_NAME)
#undef SLOT_NAME
    };
    /* the buffer and lifetime slots are what every case uses */
    static const char *const infra[] = {"buf_new", "buf_weight", "weights_expect", "buf_free",
                                        "write",   "read",       "destroy"};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        int found = 0;
        for (size_t j = 0; j < sizeof infra / sizeof infra[0]; j++)
            found |= !strcmp(slots[i], infra[j]);
        for (int j = 0; j < n_covered; j++) found |= !strcmp(slots[i], covered[j]);
        CHECK(found, "seam op %s has no case in backend_ops_test", slots[i]);
    }
}

static pl_backend *open_gpu(void) {
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_gpu_backend_opts o = {.no_tune = 1, .no_selftest = 1, .fa = 1};
    pl_backend *be = NULL;
    if (pl_gpu_backend_new(&o, &be) == PL_OK) return be;
    test_no_gpu("the webgpu backend", pl_last_error());
    return NULL;
}

static void run_tests(void) {
    const char *s = getenv("POOLED_TEST_SEED");
    rng = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    if (!rng) rng = 1;
    fprintf(stderr, "seed %llu\n", (unsigned long long)rng);
    CHECK(pl_cpu_new(2, &be2[0]) == PL_OK, "cpu: %s", pl_last_error());
    be2[1] = open_gpu();
    if (!be2[0] || !be2[1]) {
        pl_be_destroy(be2[0]);
        pl_be_destroy(be2[1]);
        return;
    }
    fprintf(stderr, "%s against %s\n", be2[1]->device, be2[0]->device);
    static void (*const cases[])(void) = {
        case_embed_matmul, case_norm_ew,           case_rope_attention, case_views,
        case_cols,         case_attention_prefill, case_kv_q8,          case_select_copy,
        case_moe,          case_deltanet,          case_fuse,           case_fuse_experts,
        case_fuse_router,  case_fuse_norm_gate,    case_read_many,      case_prepare};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) cases[i]();
    check_coverage();
    pl_be_destroy(be2[1]);
    pl_be_destroy(be2[0]);
}
