/* cpu_attention_test.c - the CPU attention's vector path over F16 caches (cpu_attention.c:
 * AVX-512 F, AVX2 + F16C on x86, NEON on arm64) gives the same bits as its portable path
 * (pl_cpu_portable set), on random shapes: grouped heads, head sizes that are multiples of
 * 8 (the vector path) and not (the portable path both times), prompt batches of 1..13 rows
 * (the vector path takes 4 query rows at a time: whole blocks and short ones) after a
 * cached prefix of up to 149 rows (its keys go 32 at a time: several tiles, the last one
 * short), values large enough that the half accumulator overflows; and the same
 * bits from 1 and 3 threads.
 * Q8_0 caches: kv_store writes pl_quant_act_q8_0's quants and scales (backend.h's layout:
 * quants, then scales), and attention over them gives the bits of the F32 path over an F32
 * cache holding the dequantised values (quant x scale), from 1 and 3 threads. */
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "format/quant.h"
#include "test.h"

static uint64_t rng = 0x5851f42d4c957f2dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float frand(float lo, float hi) {
    return lo + (hi - lo) * (float)(rnd() % 1000000) / 1000000.0f;
}

/* The attention of one random case on be, on the portable path (portable 1), the best vector
 * one (0), or the best short of AVX-512 (2: AVX2 on x86); malloc'd output. */
static float *attend(pl_backend *be, int portable, const pl_attn_params *p, int n, int pos0,
                     const float *q, const uint16_t *k, const uint16_t *v) {
    int n_ctx = pos0 + n, kd = p->n_head_kv * p->head_dim, vd = p->n_head_kv * p->head_dim_v;
    int od = p->n_head * p->head_dim_v;
    pl_buf *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, p->n_head * p->head_dim, n, &bq) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F16, kd, n_ctx, &bk) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F16, vd, n_ctx, &bv) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, od, n, &bo) == PL_OK,
          "%s", pl_last_error());
    float *out = calloc((size_t)n * od, sizeof *out);
    if (bq && bk && bv && bo) {
        pl_be_write(bq, 0, q, (int64_t)n * p->n_head * p->head_dim * 4);
        pl_be_write(bk, 0, k, (int64_t)n_ctx * kd * 2);
        pl_be_write(bv, 0, v, (int64_t)n_ctx * vd * 2);
        pl_cpu_portable = portable == 1, pl_cpu_no_avx512 = portable == 2;
        CHECK(pl_be_attention(bq, bk, bv, n, pos0, p, bo) == PL_OK, "%s", pl_last_error());
        pl_cpu_portable = pl_cpu_no_avx512 = 0;
        CHECK(pl_be_read(bo, 0, out, (int64_t)n * od * 4) == PL_OK, "%s", pl_last_error());
    }
    pl_be_buf_free(bq), pl_be_buf_free(bk), pl_be_buf_free(bv), pl_be_buf_free(bo);
    return out;
}

/* One random Q8_0 case on be: stores rows [0, pos0) then [pos0, n_ctx) of k and v (f32),
 * checks the cache's bytes, and returns the attention over it (malloc'd); kdq/vdq get
 * the dequantised values. */
static float *attend_q8(pl_backend *be, const pl_attn_params *p, int n, int pos0, const float *q,
                        const float *k, const float *v, float *kdq, float *vdq) {
    int n_ctx = pos0 + n, kd = p->n_head_kv * p->head_dim, vd = p->n_head_kv * p->head_dim_v;
    int od = p->n_head * p->head_dim_v;
    pl_buf *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *sk = NULL, *sv = NULL;
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, p->n_head * p->head_dim, n, &bq) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_Q8_0, kd, n_ctx, &bk) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_Q8_0, vd, n_ctx, &bv) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, kd, n_ctx, &sk) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, vd, n_ctx, &sv) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, od, n, &bo) == PL_OK,
          "%s", pl_last_error());
    float *out = calloc((size_t)n * od, sizeof *out);
    if (bq && bk && bv && bo && sk && sv) {
        pl_be_write(bq, 0, q, (int64_t)n * p->n_head * p->head_dim * 4);
        pl_be_write(sk, 0, k, (int64_t)n_ctx * kd * 4);
        pl_be_write(sv, 0, v, (int64_t)n_ctx * vd * 4);
        /* earlier rows, then this call's: a store that starts inside the cache */
        CHECK(pl_be_kv_store(sk, pos0, 0, bk) == PL_OK && pl_be_kv_store(sv, pos0, 0, bv) == PL_OK,
              "%s", pl_last_error());
        pl_be_write(sk, 0, k + (size_t)pos0 * kd, (int64_t)n * kd * 4);
        pl_be_write(sv, 0, v + (size_t)pos0 * vd, (int64_t)n * vd * 4);
        CHECK(pl_be_kv_store(sk, n, pos0, bk) == PL_OK && pl_be_kv_store(sv, n, pos0, bv) == PL_OK,
              "%s", pl_last_error());
        const pl_buf *caches[2] = {bk, bv};
        const float *src[2] = {k, v};
        float *deq[2] = {kdq, vdq};
        int dims[2] = {kd, vd};
        for (int c = 0; c < 2; c++) { /* the bytes, then the values they stand for */
            int64_t nv = (int64_t)n_ctx * dims[c], bytes = pl_be_buf_bytes(caches[c]);
            unsigned char *got = malloc((size_t)bytes), *want = malloc((size_t)bytes);
            pl_quant_act_q8_0(src[c], nv, (int8_t *)want, (uint16_t *)(want + nv));
            CHECK(bytes == nv + nv / 16 && pl_be_read(caches[c], 0, got, bytes) == PL_OK &&
                      !memcmp(got, want, (size_t)bytes),
                  "q8_0 kv_store: the cache's bytes are not pl_quant_act_q8_0's");
            for (int64_t i = 0; i < nv; i++)
                deq[c][i] =
                    (float)((int8_t *)want)[i] * pl_f16_to_f32(((uint16_t *)(want + nv))[i / 32]);
            free(got), free(want);
        }
        CHECK(pl_be_attention(bq, bk, bv, n, pos0, p, bo) == PL_OK, "%s", pl_last_error());
        CHECK(pl_be_read(bo, 0, out, (int64_t)n * od * 4) == PL_OK, "%s", pl_last_error());
    }
    pl_be_buf_free(bq), pl_be_buf_free(bk), pl_be_buf_free(bv), pl_be_buf_free(bo);
    pl_be_buf_free(sk), pl_be_buf_free(sv);
    return out;
}

/* Attention over F32 caches holding k and v (malloc'd). */
static float *attend_f32(pl_backend *be, const pl_attn_params *p, int n, int pos0, const float *q,
                         const float *k, const float *v) {
    int n_ctx = pos0 + n, kd = p->n_head_kv * p->head_dim, vd = p->n_head_kv * p->head_dim_v;
    int od = p->n_head * p->head_dim_v;
    pl_buf *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, p->n_head * p->head_dim, n, &bq) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, kd, n_ctx, &bk) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, vd, n_ctx, &bv) == PL_OK &&
              pl_be_buf_new(be, PL_TYPE_F32, od, n, &bo) == PL_OK,
          "%s", pl_last_error());
    float *out = calloc((size_t)n * od, sizeof *out);
    if (bq && bk && bv && bo) {
        pl_be_write(bq, 0, q, (int64_t)n * p->n_head * p->head_dim * 4);
        pl_be_write(bk, 0, k, (int64_t)n_ctx * kd * 4);
        pl_be_write(bv, 0, v, (int64_t)n_ctx * vd * 4);
        CHECK(pl_be_attention(bq, bk, bv, n, pos0, p, bo) == PL_OK, "%s", pl_last_error());
        CHECK(pl_be_read(bo, 0, out, (int64_t)n * od * 4) == PL_OK, "%s", pl_last_error());
    }
    pl_be_buf_free(bq), pl_be_buf_free(bk), pl_be_buf_free(bv), pl_be_buf_free(bo);
    return out;
}

static void q8_cases(pl_backend *be1, pl_backend *be3) {
    static const int dims[] = {8, 16, 32, 64, 128, 40};
    int bad = 0, bad_threads = 0, cases = 0;
    for (int iter = 0; iter < 30; iter++) {
        pl_attn_params p = {.n_head_kv = 1 + (int)(rnd() % 4)};
        p.head_dim = dims[rnd() % 6], p.head_dim_v = iter % 4 ? p.head_dim : dims[rnd() % 6];
        while ((p.n_head_kv * p.head_dim) % 32 || (p.n_head_kv * p.head_dim_v) % 32) p.n_head_kv++;
        p.n_head = p.n_head_kv * (1 + (int)(rnd() % 3));
        p.scale = 1.0f / sqrtf((float)p.head_dim);
        int n = 1 + (int)(rnd() % 13), pos0 = (int)(rnd() % 40), n_ctx = pos0 + n;
        int nq = n * p.n_head * p.head_dim, nk = n_ctx * p.n_head_kv * p.head_dim;
        int nv = n_ctx * p.n_head_kv * p.head_dim_v;
        float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk);
        float *v = malloc(sizeof(float) * (size_t)nv), *kdq = malloc(sizeof(float) * (size_t)nk);
        float *vdq = malloc(sizeof(float) * (size_t)nv);
        for (int i = 0; i < nq; i++) q[i] = frand(-2, 2);
        for (int i = 0; i < nk; i++) k[i] = frand(-2, 2) * (i / 32 % 3 == 1 ? 1e-5f : 1.0f);
        for (int i = 0; i < nv; i++) v[i] = frand(-3, 3);
        float *got = attend_q8(be1, &p, n, pos0, q, k, v, kdq, vdq);
        float *got3 = attend_q8(be3, &p, n, pos0, q, k, v, kdq, vdq);
        float *want = attend_f32(be1, &p, n, pos0, q, kdq, vdq);
        size_t bytes = sizeof(float) * (size_t)n * p.n_head * p.head_dim_v;
        bad += memcmp(got, want, bytes) != 0;
        bad_threads += memcmp(got, got3, bytes) != 0;
        cases++;
        free(q), free(k), free(v), free(kdq), free(vdq), free(got), free(got3), free(want);
    }
    CHECK(bad == 0, "attention q8_0: %d of %d cases differ from f32 over the dequantised cache",
          bad, cases);
    CHECK(bad_threads == 0, "attention q8_0: %d of %d cases differ between 1 and 3 threads",
          bad_threads, cases);
}

/* One random f16 case (queries within +-qr, keys +-2, values +-vr, n rows after pos0): the
 * portable path, the best vector one, 3 threads and AVX2 run; bad[0..2] count the cases
 * where the vector path and AVX2 differ from the portable one and 3 threads from 1. The
 * vector path's output is returned, the inputs in *qo, *ko, *vo (all malloc'd). */
static float *f16_case(pl_backend *be1, pl_backend *be3, const pl_attn_params *p, int n, int pos0,
                       float qr, float vr, int bad[3], float **qo, uint16_t **ko, uint16_t **vo) {
    int n_ctx = pos0 + n, nq = n * p->n_head * p->head_dim, nk = n_ctx * p->n_head_kv * p->head_dim;
    int nv = n_ctx * p->n_head_kv * p->head_dim_v;
    float *q = malloc(sizeof(float) * (size_t)nq);
    uint16_t *k = malloc(2 * (size_t)nk), *v = malloc(2 * (size_t)nv);
    for (int i = 0; i < nq; i++) q[i] = frand(-qr, qr);
    for (int i = 0; i < nk; i++) k[i] = pl_f32_to_f16(frand(-2, 2));
    for (int i = 0; i < nv; i++) v[i] = pl_f32_to_f16(frand(-vr, vr));
    float *port = attend(be1, 1, p, n, pos0, q, k, v);
    float *simd = attend(be1, 0, p, n, pos0, q, k, v);
    float *simd3 = attend(be3, 0, p, n, pos0, q, k, v);
    float *avx2 = attend(be1, 2, p, n, pos0, q, k, v);
    size_t bytes = sizeof(float) * (size_t)n * p->n_head * p->head_dim_v;
    bad[0] += memcmp(port, simd, bytes) != 0;
    bad[1] += memcmp(port, avx2, bytes) != 0;
    bad[2] += memcmp(simd, simd3, bytes) != 0;
    free(port), free(simd3), free(avx2);
    *qo = q, *ko = k, *vo = v;
    return simd;
}

/* Exact attention (double precision) of query row i, head h over the dequantised cache. */
static void attend_exact(const pl_attn_params *p, int i, int pos0, int h, const float *q,
                         const uint16_t *k, const uint16_t *v, double *out) {
    int kd = p->n_head_kv * p->head_dim, vd = p->n_head_kv * p->head_dim_v;
    int kvh = h / (p->n_head / p->n_head_kv), n_keys = pos0 + i + 1;
    const float *qh = q + (size_t)i * p->n_head * p->head_dim + (size_t)h * p->head_dim;
    double *s = malloc(sizeof(double) * (size_t)n_keys), mx = -INFINITY, sum = 0;
    for (int t = 0; t < n_keys; t++) {
        double a = 0;
        for (int d = 0; d < p->head_dim; d++)
            a += (double)qh[d] * pl_f16_to_f32(k[(size_t)t * kd + kvh * p->head_dim + d]);
        s[t] = a * p->scale;
        mx = s[t] > mx ? s[t] : mx;
    }
    for (int d = 0; d < p->head_dim_v; d++) out[d] = 0;
    for (int t = 0; t < n_keys; t++) {
        double w = exp(s[t] - mx);
        sum += w;
        for (int d = 0; d < p->head_dim_v; d++)
            out[d] += w * pl_f16_to_f32(v[(size_t)t * vd + kvh * p->head_dim_v + d]);
    }
    for (int d = 0; d < p->head_dim_v; d++) out[d] /= sum;
    free(s);
}

/* Calls of 64 rows or more (cpu_attention_tiled.c): float32 tiles of keys, so within 2e-5 of
 * the exact attention (relative to the values' size; the one-token path's half accumulator
 * lands about 5e-4 away), and the same bits from the portable path, AVX2, AVX-512 and 3
 * threads: query rows past and inside a tile of 32 rows, prefixes of several key tiles,
 * head sizes the vector code takes (multiples of 32) and not. */
static void tiled_cases(pl_backend *be1, pl_backend *be3) {
    static const int dims[] = {64, 128, 32, 96, 40, 256};
    int bad[3] = {0}, cases = 0, far = 0;
    double worst = 0;
    for (int iter = 0; iter < 12; iter++) {
        pl_attn_params p = {.n_head_kv = 1 + (int)(rnd() % 3)};
        p.n_head = p.n_head_kv * (1 + (int)(rnd() % 3));
        p.head_dim = dims[rnd() % 6], p.head_dim_v = iter % 3 ? p.head_dim : dims[rnd() % 6];
        p.scale = 1.0f / sqrtf((float)p.head_dim);
        int n = 64 + (int)(rnd() % 77), pos0 = iter % 2 ? (int)(rnd() % 100) : 0;
        float qr = iter % 4 == 0 ? 12.0f : 2.0f, vr = iter % 5 == 0 ? 30000.0f : 3.0f, *q;
        uint16_t *k, *v;
        float *simd = f16_case(be1, be3, &p, n, pos0, qr, vr, bad, &q, &k, &v);
        double *want = malloc(sizeof(double) * (size_t)p.head_dim_v);
        for (int i = 0; i < n; i++)
            for (int h = 0; h < p.n_head; h++) {
                attend_exact(&p, i, pos0, h, q, k, v, want);
                const float *got = simd + ((size_t)i * p.n_head + h) * p.head_dim_v;
                for (int d = 0; d < p.head_dim_v; d++) {
                    double e = fabs(got[d] - want[d]) / vr;
                    worst = e > worst ? e : worst;
                    far += e > 2e-5;
                }
            }
        cases++;
        free(want), free(q), free(k), free(v), free(simd);
    }
    printf("tiled: %d cases, worst error %.3g of the values' size\n", cases, worst);
    CHECK(far == 0, "attention f16, 64 rows or more: %d values further than 2e-5 from exact", far);
    CHECK(bad[0] == 0, "attention f16 tiled: %d of %d cases differ from the portable path", bad[0],
          cases);
    CHECK(bad[1] == 0, "attention f16 tiled short of AVX-512: %d of %d cases differ", bad[1],
          cases);
    CHECK(bad[2] == 0, "attention f16 tiled: %d of %d cases differ between 1 and 3 threads", bad[2],
          cases);
}

static void run_tests(void) {
    pl_backend *be1 = NULL, *be3 = NULL;
    CHECK(pl_cpu_new(1, &be1) == PL_OK && pl_cpu_new(3, &be3) == PL_OK, "%s", pl_last_error());
    if (!be1 || !be3) return;
    /* 64, 128, 256: AVX-512's accumulators held in registers; 8, 16, 40 its others */
    static const int dims[] = {8, 16, 64, 128, 12, 40, 256};
    int bad[3] = {0}, cases = 0, vector_cases = 0;
    printf("dispatch: avx2 %d, avx512f %d, neon level %d\n", pl_cpu_have_avx2(),
           pl_cpu_have_avx512f(), pl_cpu_neon_level());
    for (int iter = 0; iter < 90; iter++) {
        pl_attn_params p = {.n_head_kv = 1 + (int)(rnd() % 4)};
        p.n_head = p.n_head_kv * (1 + (int)(rnd() % 3));
        p.head_dim = dims[rnd() % 7], p.head_dim_v = iter % 4 ? p.head_dim : dims[rnd() % 7];
        p.scale = 1.0f / sqrtf((float)p.head_dim);
        int n = 1 + (int)(rnd() % 13), pos0 = (int)(rnd() % (iter % 6 == 5 ? 150 : 40));
        /* big: scores far apart (the running maximum moves) and values near half's top */
        float qr = iter % 5 == 0 ? 30.0f : 2.0f, vr = iter % 7 == 0 ? 30000.0f : 3.0f, *q;
        uint16_t *k, *v;
        float *simd = f16_case(be1, be3, &p, n, pos0, qr, vr, bad, &q, &k, &v);
        vector_cases += p.head_dim % 8 == 0 && p.head_dim_v % 8 == 0;
        cases++;
        free(q), free(k), free(v), free(simd);
    }
    CHECK(bad[0] == 0, "attention f16: %d of %d cases differ from the portable path", bad[0],
          cases);
    CHECK(bad[1] == 0,
          "attention f16 short of AVX-512: %d of %d cases differ from the portable path", bad[1],
          cases);
    CHECK(bad[2] == 0, "attention f16: %d of %d cases differ between 1 and 3 threads", bad[2],
          cases);
    CHECK(vector_cases > 20, "only %d cases took the vector path's shapes", vector_cases);
    q8_cases(be1, be3);
    tiled_cases(be1, be3);
    pl_be_destroy(be1), pl_be_destroy(be3);
}
