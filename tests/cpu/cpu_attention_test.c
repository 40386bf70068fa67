/* cpu_attention_test.c - the CPU attention's AVX2 + F16C path over F16 caches
 * (cpu_attention.c) gives the same bits as its portable path (pl_cpu_portable set), on
 * random shapes: grouped heads, head sizes that are multiples of 8 (the vector path) and
 * not (the portable path both times), prompt batches of 1..13 rows (the AVX2 path takes 4
 * query rows at a time: whole blocks and short ones) after a cached prefix, values large
 * enough that the half accumulator overflows; and the same bits from 1 and 3 threads. */
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

/* The attention of one random case on be, portable or not; malloc'd output. */
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
        pl_cpu_portable = portable;
        CHECK(pl_be_attention(bq, bk, bv, n, pos0, p, bo) == PL_OK, "%s", pl_last_error());
        pl_cpu_portable = 0;
        CHECK(pl_be_read(bo, 0, out, (int64_t)n * od * 4) == PL_OK, "%s", pl_last_error());
    }
    pl_be_buf_free(bq), pl_be_buf_free(bk), pl_be_buf_free(bv), pl_be_buf_free(bo);
    return out;
}

static void run_tests(void) {
    pl_backend *be1 = NULL, *be3 = NULL;
    CHECK(pl_cpu_new(1, &be1) == PL_OK && pl_cpu_new(3, &be3) == PL_OK, "%s", pl_last_error());
    if (!be1 || !be3) return;
    static const int dims[] = {8, 16, 64, 128, 12, 40};
    int bad_simd = 0, bad_threads = 0, cases = 0, vector_cases = 0;
    for (int iter = 0; iter < 60; iter++) {
        pl_attn_params p = {.n_head_kv = 1 + (int)(rnd() % 4)};
        p.n_head = p.n_head_kv * (1 + (int)(rnd() % 3));
        p.head_dim = dims[rnd() % 6], p.head_dim_v = iter % 4 ? p.head_dim : dims[rnd() % 6];
        p.scale = 1.0f / sqrtf((float)p.head_dim);
        int n = 1 + (int)(rnd() % 13), pos0 = (int)(rnd() % 40), n_ctx = pos0 + n;
        /* big: scores far apart (the running maximum moves) and values near half's top */
        float qr = iter % 5 == 0 ? 30.0f : 2.0f, vr = iter % 7 == 0 ? 30000.0f : 3.0f;
        int nq = n * p.n_head * p.head_dim, nk = n_ctx * p.n_head_kv * p.head_dim;
        int nv = n_ctx * p.n_head_kv * p.head_dim_v;
        float *q = malloc(sizeof(float) * (size_t)nq);
        uint16_t *k = malloc(2 * (size_t)nk), *v = malloc(2 * (size_t)nv);
        for (int i = 0; i < nq; i++) q[i] = frand(-qr, qr);
        for (int i = 0; i < nk; i++) k[i] = pl_f32_to_f16(frand(-2, 2));
        for (int i = 0; i < nv; i++) v[i] = pl_f32_to_f16(frand(-vr, vr));
        float *port = attend(be1, 1, &p, n, pos0, q, k, v);
        float *simd = attend(be1, 0, &p, n, pos0, q, k, v);
        float *simd3 = attend(be3, 0, &p, n, pos0, q, k, v);
        size_t bytes = sizeof(float) * (size_t)n * p.n_head * p.head_dim_v;
        bad_simd += memcmp(port, simd, bytes) != 0;
        bad_threads += memcmp(simd, simd3, bytes) != 0;
        vector_cases += p.head_dim % 8 == 0 && p.head_dim_v % 8 == 0;
        cases++;
        free(q), free(k), free(v), free(port), free(simd), free(simd3);
    }
    CHECK(bad_simd == 0, "attention f16: %d of %d cases differ from the portable path", bad_simd,
          cases);
    CHECK(bad_threads == 0, "attention f16: %d of %d cases differ between 1 and 3 threads",
          bad_threads, cases);
    CHECK(vector_cases > 20, "only %d cases took the vector path's shapes", vector_cases);
    pl_be_destroy(be1), pl_be_destroy(be3);
}
