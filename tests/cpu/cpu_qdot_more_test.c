/* cpu_qdot_more_test.c - the act_q8 tiles of Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS weights
 * (cpu_qdot_more.c) and the matmul built on them (cpu_matmul.c).
 *
 * - direct: each weight block's integer levels read straight from the GGUF layout here
 *   (written independently of the kernels) times the block's scale (+ min) give exactly
 *   the values pl_dequant_row gives (so the levels are the format's), and the portable
 *   reference row dot equals the sum written out here: the exact integer block dot, then
 *   the format's float formula (cpu_qdot_more.c) in block order.
 * - tiles: the dispatched tile (AVX2, with AVX-VNNI and without where the CPU has it; the
 *   portable path elsewhere and with pl_cpu_portable) is bit-identical to the portable row
 *   dot on fresh random rows of every allowed shape, short tiles included, extreme values
 *   included (nibbles all 0 or all 15, fifth bits all 0 or all 1, IQ4_XS sub-block scales
 *   0 and 63, activations +-127).
 * - GEMM: Q5_0/IQ4_NL/IQ4_XS unpacked into Q8_0's GEMM layout, the GEMM tile (vector and
 *   portable) bit-identical to the portable row dot.
 * - matmul: pl_be_matmul with act_q8 on each format, batches 1..9, 17 and 35 (8 x 1 tiles,
 *   2 x 4 tiles, and from 8 rows the prefill GEMM for Q5_0/IQ4_NL/IQ4_XS, with AVX-512
 *   VNNI, AVX-VNNI, AVX2 and portable as the CPU has them), rows not a multiple of the
 *   tiles, bias and accumulate, 1 and 3 threads, gives exactly the portable dot of each
 *   weight row with each quantised activation row; and it stays close to the float matmul
 *   (act f32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "format/quant.h"
#include "cpu_matmul_run.h"
#include "test.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static const uint32_t types[] = {PL_TYPE_Q4_1, PL_TYPE_Q5_0, PL_TYPE_Q5_1, PL_TYPE_IQ4_NL,
                                 PL_TYPE_IQ4_XS};
static const char *const names[] = {"Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS"};
#define NT 5

static const int iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                            1,    13,   25,  38,  53,  69,  89,  113};

static float f16(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pl_f16_to_f32(h);
}

/* Block b (of 32 values) of a row of type t: its 32 integer levels, its scale and min (0
 * for the formats without one). Written from the block layouts of format/quant_blocks.h. */
static void levels(uint32_t t, const unsigned char *row, int b, int q[32], float *d, float *m) {
    const unsigned char *p, *qs;
    uint32_t qh = 0;
    *m = 0;
    switch (t) {
    case PL_TYPE_Q4_1: p = row + 20 * b, qs = p + 4, *m = f16(p + 2); break;
    case PL_TYPE_Q5_0: p = row + 22 * b, qs = p + 6, memcpy(&qh, p + 2, 4); break;
    case PL_TYPE_Q5_1: p = row + 24 * b, qs = p + 8, memcpy(&qh, p + 4, 4), *m = f16(p + 2); break;
    case PL_TYPE_IQ4_NL: p = row + 18 * b, qs = p + 2; break;
    default: p = row + 136 * (b / 8), qs = p + 8 + 16 * (b % 8); break; /* IQ4_XS */
    }
    *d = f16(p);
    if (t == PL_TYPE_IQ4_XS) {
        int j = b % 8, lo = (p[4 + j / 2] >> (4 * (j % 2))) & 15,
            hi = (p[2 + j / 4] >> (2 * (j % 4))) & 3;
        *d = *d * (float)((lo | hi << 4) - 32);
    }
    for (int j = 0; j < 32; j++) {
        int n = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
        n |= (int)((qh >> j) & 1) << 4;
        q[j] = t == PL_TYPE_Q5_0 ? n - 16 : t == PL_TYPE_IQ4_NL || t == PL_TYPE_IQ4_XS ? iq4[n] : n;
    }
}

/* The row dot written out: per block the integer dot, then the float formula. */
static float direct(uint32_t t, const unsigned char *w, const int8_t *y, const float *yd, int nb) {
    float sum = 0;
    for (int b = 0; b < nb; b++) {
        int q[32], dot = 0, ys = 0;
        float d, m;
        levels(t, w, b, q, &d, &m);
        for (int j = 0; j < 32; j++) dot += q[j] * y[b * 32 + j], ys += y[b * 32 + j];
        float v = (float)dot * d * yd[b];
        if (t == PL_TYPE_Q4_1 || t == PL_TYPE_Q5_1) v = v + m * yd[b] * (float)ys;
        sum = sum + v;
    }
    return sum;
}

/* Random weights of type t for nb blocks of 32 (nb a multiple of 8 for IQ4_XS): scales and
 * mins in +-0.5; iter picks extremes: all nibbles and fifth bits 0, or all 1s; IQ4_XS
 * sub-block scales all 0 or all 63. */
static void fill_weights(uint32_t t, unsigned char *w, int64_t nb, int iter) {
    int64_t bytes = pl_row_size(t, nb * 32);
    for (int64_t i = 0; i < bytes; i++) w[i] = (unsigned char)rnd();
    int bs = t == PL_TYPE_IQ4_XS ? 136 : (int)(bytes / nb);
    for (int64_t b = 0; b < (t == PL_TYPE_IQ4_XS ? nb / 8 : nb); b++) {
        unsigned char *p = w + b * bs;
        if (iter % 5 == 0) memset(p, iter % 10 == 0 ? 0x00 : 0xff, (size_t)bs);
        uint16_t d = pl_f32_to_f16((float)(rnd() % 1000) / 1000.0f - 0.5f);
        uint16_t m = pl_f32_to_f16((float)(rnd() % 1000) / 1000.0f - 0.5f);
        memcpy(p, &d, 2);
        if (t == PL_TYPE_Q4_1 || t == PL_TYPE_Q5_1) memcpy(p + 2, &m, 2);
    }
}

static void fill_acts(int8_t *y, float *yd, int32_t *ys, int64_t nb, int iter) {
    for (int64_t i = 0; i < nb * 32; i++)
        y[i] = (int8_t)(iter % 7 == 0 ? ((rnd() & 1) ? 127 : -127) : (int)(rnd() % 255) - 127);
    for (int64_t b = 0; b < nb; b++) {
        yd[b] = pl_f16_to_f32(pl_f32_to_f16((float)(rnd() % 1000) / 50000.0f));
        ys[b] = 0;
        for (int j = 0; j < 32; j++) ys[b] += y[b * 32 + j];
    }
}

/* The levels above against pl_dequant_row: d * q (+ m) as the dequantisers compute it. */
static void test_levels(void) {
    for (int ti = 0; ti < NT; ti++) {
        uint32_t t = types[ti];
        int bad = 0;
        for (int iter = 0; iter < 200; iter++) {
            int nb = 8;
            unsigned char w[8 * 24];
            fill_weights(t, w, nb, iter);
            float x[256];
            CHECK(pl_dequant_row(t, w, x, 256) == PL_OK, "%s", pl_last_error());
            for (int b = 0; b < nb; b++) {
                int q[32];
                float d, m;
                levels(t, w, b, q, &d, &m);
                for (int j = 0; j < 32; j++) {
                    float v = t == PL_TYPE_Q4_1 || t == PL_TYPE_Q5_1 ? (float)q[j] * d + m
                                                                     : (float)q[j] * d;
                    if (t == PL_TYPE_IQ4_NL || t == PL_TYPE_IQ4_XS) v = d * (float)q[j];
                    bad += memcmp(&v, &x[b * 32 + j], 4) != 0;
                }
            }
        }
        CHECK(bad == 0, "%s: the test's levels vs pl_dequant_row: %d values differ", names[ti],
              bad);
    }
}

static void test_tiles(void) {
    for (int ti = 0; ti < NT; ti++) {
        uint32_t t = types[ti];
        int bad_tile = 0, bad_direct = 0, cases = 0;
        for (int iter = 0; iter < 1200; iter++) {
            int nb = t == PL_TYPE_IQ4_XS ? 8 * (1 + (int)(rnd() % 4)) : 1 + (int)(rnd() % 40);
            int nc = iter % 3 == 0 ? 1 : 1 + (int)(rnd() % 4);
            int nr = nc == 1 ? 1 + (int)(rnd() % 8) : 1 + (int)(rnd() % 2);
            int64_t rb = pl_row_size(t, nb * 32);
            unsigned char *w = malloc((size_t)(16 * rb));
            int8_t *y = malloc((size_t)(4 * nb * 32));
            float *yd = malloc(sizeof(float) * 4 * (size_t)nb);
            int32_t *ys = malloc(sizeof(int32_t) * 4 * (size_t)nb);
            fill_weights(t, w, 16 * (int64_t)nb, iter);
            fill_acts(y, yd, ys, 4 * (int64_t)nb, iter);
            const unsigned char *wr[16]; /* the tile's rows, then the next tile's (prefetched) */
            ;
            const int8_t *yr[4];
            const float *ydr[4];
            const int32_t *ysr[4];
            for (int r = 0; r < 16; r++) wr[r] = w + r * rb;
            for (int c = 0; c < 4; c++)
                yr[c] = y + c * nb * 32, ydr[c] = yd + c * nb, ysr[c] = ys + c * nb;
            float got[8], want[8];
            pl_cpu_qdot_more_tile(t, nr, nc, wr, yr, ydr, ysr, nb, iter % 2 ? wr[nr] : NULL, got);
            pl_cpu_qdot_more_tile_portable(t, nr, nc, wr, yr, ydr, ysr, nb, want);
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) {
                    float p = pl_cpu_qdot_more_row_portable(t, wr[r], yr[c], ydr[c], ysr[c], nb);
                    float d = direct(t, wr[r], yr[c], ydr[c], nb);
                    bad_tile += memcmp(&got[r * nc + c], &p, 4) != 0;
                    bad_tile += memcmp(&want[r * nc + c], &p, 4) != 0;
                    bad_direct += memcmp(&p, &d, 4) != 0;
                    cases++;
                }
            free(w), free(y), free(yd), free(ys);
        }
        CHECK(bad_tile == 0, "%s: tile vs portable row: %d of %d values differ", names[ti],
              bad_tile, cases);
        CHECK(bad_direct == 0, "%s: portable vs direct sum: %d of %d values differ", names[ti],
              bad_direct, cases);
    }
}

/* The prefill GEMM of Q5_0/IQ4_NL/IQ4_XS: pl_cpu_qdot_more_unpack into Q8_0's unpacked
 * layout, then pl_cpu_gemm_tile (Q8_0's) on two packed groups of 8 columns, the vector and
 * the portable paths (the portable unpack runs in the matmul only on arm64), against the
 * portable row dot; Q4_1/Q5_1 must refuse. */
static void test_gemm_tile(void) {
    for (int ti = 0; ti < NT; ti++) {
        uint32_t t = types[ti];
        int bad = 0, cases = 0;
        if (!pl_cpu_qdot_more_gemm_type(t)) {
            const unsigned char *w0[1] = {NULL};
            CHECK(pl_cpu_qdot_more_unpack(t, 1, w0, 0, NULL, NULL) == 0, "%s: unpacked", names[ti]);
            continue;
        }
        for (int iter = 0; iter < 300; iter++) {
            int nb = t == PL_TYPE_IQ4_XS ? 8 * (1 + iter % 2) : 1 + (int)(rnd() % 9);
            int nr = 1 + iter % 4, ng = 1 + iter / 4 % 2;
            int64_t rb = pl_row_size(t, nb * 32);
            unsigned char *w = malloc((size_t)(4 * rb)), *wu = malloc((size_t)nb * 4 * 64);
            int8_t *y = malloc((size_t)16 * nb * 32), *pq = malloc((size_t)nb * 512);
            float *yd = malloc(sizeof(float) * 16 * (size_t)nb),
                  *wd = malloc(sizeof(float) * 4 * (size_t)nb);
            float *pd = malloc(sizeof(float) * 16 * (size_t)nb);
            int32_t *ys = malloc(sizeof(int32_t) * 16 * (size_t)nb),
                    *ps = malloc(sizeof(int32_t) * 16 * (size_t)nb);
            fill_weights(t, w, 4 * (int64_t)nb, iter);
            fill_acts(y, yd, ys, 16 * (int64_t)nb, iter);
            const unsigned char *wr[4];
            const int8_t *yr[16];
            const float *ydr[16];
            const int32_t *ysr[16];
            for (int r = 0; r < 4; r++) wr[r] = w + r * rb;
            for (int c = 0; c < 16; c++)
                yr[c] = y + c * nb * 32, ydr[c] = yd + c * nb, ysr[c] = ys + c * nb;
            for (int k = 0; k < 2; k++)
                pl_cpu_gemm_pack(yr + 8 * k, ydr + 8 * k, ysr + 8 * k, nb, pq + k * nb * 256,
                                 pd + k * nb * 8, ps + k * nb * 8);
            for (int portable = 0; portable < 2; portable++) {
                pl_cpu_portable = portable;
                float got[64];
                CHECK(pl_cpu_qdot_more_unpack(t, nr, wr, nb, wu, wd) == 1, "%s: not unpacked",
                      names[ti]);
                pl_cpu_gemm_tile(0, ng, wu, wd, nb, pq, pd, ps, got);
                for (int k = 0; k < ng; k++)
                    for (int r = 0; r < 4; r++)
                        for (int c = 0; c < 8; c++) {
                            int cc = 8 * k + c;
                            float p = pl_cpu_qdot_more_row_portable(t, wr[r < nr ? r : nr - 1],
                                                                    yr[cc], ydr[cc], ysr[cc], nb);
                            bad += memcmp(&got[(k * 4 + r) * 8 + c], &p, 4) != 0;
                            cases++;
                        }
            }
            pl_cpu_portable = 0;
            free(w), free(wu), free(y), free(pq), free(yd), free(wd), free(pd), free(ys), free(ps);
        }
        CHECK(bad == 0, "%s: GEMM tile vs portable row: %d of %d values differ", names[ti], bad,
              cases);
    }
}

/* One act_q8 pl_be_matmul per backend against the portable dots; *rel the largest error
 * relative to the row's scale (max |float result|) of the act_q8 result vs the float one. */
static int matmul_case(pl_backend *bes[2], uint32_t t, int n_out, int k, int n, bool bias, bool acc,
                       int iter, float *rel) {
    int nb = k / 32;
    int64_t rb = pl_row_size(t, k);
    unsigned char *w = malloc((size_t)(rb * n_out));
    fill_weights(t, w, (int64_t)n_out * nb, iter + 1); /* no all-zero/all-one rows */
    float *x, *bv, *o0, *got = malloc(sizeof(float) * (size_t)n * n_out);
    act_q8_inputs(rnd, n, k, n_out, &x, &bv, &o0);
    int8_t *xq = malloc((size_t)n * k);
    uint16_t *xh = malloc(sizeof *xh * (size_t)n * nb);
    float *xd = malloc(sizeof *xd * (size_t)n * nb),
          *dot = malloc(sizeof(float) * (size_t)n * n_out);
    int32_t *xs = malloc(sizeof *xs * (size_t)n * nb);
    for (int i = 0; i < n; i++)
        pl_quant_act_q8_0(x + (int64_t)i * k, k, xq + (int64_t)i * k, xh + (int64_t)i * nb);
    for (int i = 0; i < n * nb; i++) {
        xd[i] = pl_f16_to_f32(xh[i]), xs[i] = 0;
        for (int j = 0; j < 32; j++) xs[i] += xq[i * 32 + j];
    }
    for (int i = 0; i < n; i++)
        for (int r = 0; r < n_out; r++)
            dot[i * n_out + r] = pl_cpu_qdot_more_row_portable(
                t, w + r * rb, xq + (int64_t)i * k, xd + (int64_t)i * nb, xs + (int64_t)i * nb, nb);
    int bad = 0;
    for (int b = 0; b < 2; b++) {
        if (!act_q8_matmul(bes[b], t, k, n_out, n, w, x, bias ? bv : NULL, acc, o0, got)) return 1;
        bad += act_q8_mismatches(n, n_out, dot, bias ? bv : NULL, acc, o0, got);
    }
    /* the float path: the dequantised rows dotted with x in float */
    float *wf = malloc(sizeof(float) * (size_t)k);
    for (int r = 0; r < n_out; r++) {
        pl_dequant_row(t, w + r * rb, wf, k);
        float scale = 0, err = 0;
        for (int i = 0; i < n; i++) {
            double s = 0, sa = 0;
            for (int j = 0; j < k; j++)
                s += (double)wf[j] * x[i * k + j], sa += fabs((double)wf[j] * x[i * k + j]);
            err = fmaxf(err, fabsf((float)s - dot[i * n_out + r]));
            scale = fmaxf(scale, (float)sa);
        }
        if (scale > 0) *rel = fmaxf(*rel, err / scale);
    }
    free(wf);
    free(w), free(x), free(bv), free(o0), free(got), free(xq), free(xh), free(xd), free(xs),
        free(dot);
    return bad;
}

static void test_matmul(void) {
    pl_backend *bes[2];
    if (!act_q8_backends(bes)) return;
    static const int ns[] = {1, 2, 3, 4, 5, 8, 9, 17};
    for (int ti = 0; ti < NT; ti++) {
        uint32_t t = types[ti];
        int bad = 0, cases = 0;
        float rel = 0;
        for (int iter = 0; iter < 10; iter++, cases++) {
            int n = ns[iter % 8], n_out = 8 * (1 + (int)(rnd() % 8)) + (int)(rnd() % 8);
            int k =
                t == PL_TYPE_IQ4_XS ? 256 * (1 + (int)(rnd() % 2)) : 32 * (1 + (int)(rnd() % 12));
            if (iter == 9) /* split between threads; the GEMM's 2-D split */
                n_out = 101, k = t == PL_TYPE_IQ4_XS ? 512 : 32 * 13, n = 35;
            bad += matmul_case(bes, t, n_out, k, n, iter % 3 != 0, iter % 4 == 1, iter, &rel);
        }
        CHECK(bad == 0, "%s: matmul act_q8: %d values differ from the portable dot (%d cases)",
              names[ti], bad, cases);
        /* Q8_0 activations carry ~1/254 of each block's largest value as error; relative to
         * sum |w x|, the difference from the float matmul stays well under 1% */
        CHECK(rel < 0.01f, "%s: act_q8 vs float matmul: error %g of sum |w x|", names[ti], rel);
    }
    pl_be_destroy(bes[0]), pl_be_destroy(bes[1]);
}

static void run_tests(void) {
    test_levels();
    /* each level the CPU has (simd_first_pass): AVX-512 VNNI (the GEMM's 16-column tile, for
     * Q5_0/IQ4), AVX-VNNI, plain AVX2; then the portable paths */
    for (int pass = simd_first_pass(); pass < 4; pass++) {
        simd_pass(pass);
        pl_cpu_portable = pass == 3;
        if (pass != 1) test_tiles();    /* (the tiles have no AVX-512 path) */
        if (pass < 3) test_gemm_tile(); /* (which runs its portable half itself) */
        test_matmul();
    }
    pl_cpu_no_vnni = pl_cpu_no_avx512 = pl_cpu_portable = 0;
}
