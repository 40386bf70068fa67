/* cpu_kdot_test.c - the K-quants' act_q8 path (cpu_kdot.c) and the matmul built on it.
 * - pl_cpu_quant_act_k (AVX2 where present) gives the portable rule's bits (quants, float
 *   scales, sums of 16) on random rows, zero rows, rows with NaN/infinity and huge values;
 * - pl_cpu_kdot (AVX2 or NEON where present), 1..4 activation rows, and decode's tile
 *   pl_cpu_kdot_rows (1..4 weight rows x 1 activation row), are bit-identical to
 *   pl_cpu_kdot_row_portable for Q4_K, Q5_K and Q6_K on fresh random super-blocks (any
 *   bytes: every nibble, high bit and 6-bit scale/min occurs) and extreme activations
 *   (+-127), at every x86 level the CPU has (AVX-512 VNNI, AVX-VNNI, AVX2);
 * - the portable dot equals, within float rounding, the double sum of ggml's dequantised
 *   weights (pl_dequant_row) times the dequantised activations: the integer formula reads
 *   the blocks as the format says;
 * - pl_be_matmul with act_q8 on K-quant weights (1 and 3 threads, one row, short batches and
 *   the GEMM's, bias, accumulate) gives exactly the portable dot of each weight row with
 *   each quantised row. */
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
static float frand(float lo, float hi) {
    return lo + (hi - lo) * (float)(rnd() % 1000001) / 1000000.0f;
}

static const uint32_t ktypes[3] = {PL_TYPE_Q4_K, PL_TYPE_Q5_K, PL_TYPE_Q6_K};

/* Random super-blocks: random bytes, the f16 scales set to values in +-0.1 (Q6_K: d at
 * byte 208; Q4_K/Q5_K: d and dmin at 0 and 2). */
static void fill_k(uint32_t t, unsigned char *w, int64_t nsb, int iter) {
    int bs = (int)pl_row_size(t, 256);
    for (int64_t i = 0; i < nsb * bs; i++) w[i] = (unsigned char)rnd();
    for (int64_t b = 0; b < nsb; b++) {
        unsigned char *p = w + b * bs;
        if (iter % 7 == 0) memset(p, iter % 14 ? 0xff : 0x00, (size_t)bs); /* extremes */
        uint16_t d = pl_f32_to_f16(frand(-0.1f, 0.1f)), m = pl_f32_to_f16(frand(-0.1f, 0.1f));
        if (t == PL_TYPE_Q6_K) {
            memcpy(p + 208, &d, 2);
        } else {
            memcpy(p, &d, 2), memcpy(p + 2, &m, 2);
        }
    }
}

/* n values of activations, some rows with extremes. */
static void fill_x(float *x, int64_t n, int iter) {
    for (int64_t i = 0; i < n; i++) x[i] = frand(-3, 3);
    if (iter % 5 == 0)
        for (int64_t i = 0; i < n; i++) x[i] = (rnd() & 1) ? 3.0f : -3.0f; /* all +-127 */
}

static void test_quant(void) {
    int bad = 0, rows = 0;
    float x[1024];
    int8_t q0[1024], q1[1024];
    float d0[4], d1[4];
    int16_t s0[64], s1[64];
    for (int iter = 0; iter < 400; iter++) {
        fill_x(x, 1024, iter);
        for (int i = 0; i < 1024; i++)
            if (iter % 3 == 0) x[i] *= (float)(rnd() % 1000) * 1e-3f; /* small values, ties */
        if (iter % 9 == 1) memset(x + 256, 0, 256 * sizeof *x);
        if (iter % 9 == 2) x[rnd() % 1024] = NAN;
        if (iter % 9 == 3) x[rnd() % 1024] = -INFINITY;
        if (iter % 9 == 4) x[rnd() % 1024] = 3e38f;
        if (iter % 9 == 5) /* exact halves: roundf goes away from zero */
            for (int i = 0; i < 256; i++) x[i] = (float)((int)(rnd() % 255) - 127) / 2;
        pl_cpu_quant_act_k(x, 1024, q0, d0, s0);
        pl_cpu_quant_act_k_portable(x, 1024, q1, d1, s1);
        bad += memcmp(q0, q1, sizeof q0) != 0 || memcmp(d0, d1, sizeof d0) != 0 ||
               memcmp(s0, s1, sizeof s0) != 0;
        /* the rule itself on a finite block: max |q| is 127, each sum is its 16 quants' */
        if (iter % 9 > 4) {
            int mx = 0, sums = 1;
            for (int i = 0; i < 256; i++) mx = abs(q1[i]) > mx ? abs(q1[i]) : mx;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int e = 0; e < 16; e++) s += q1[16 * g + e];
                sums &= s == s1[g];
            }
            bad += mx != 127 || !sums;
        }
        rows++;
    }
    CHECK(bad == 0, "quant_act_k: %d of %d rows differ from the portable rule", bad, rows);
}

/* The double reference: dequantised weights times dequantised activations; *mag the sum of
 * the terms' magnitudes. */
static double dot_double(uint32_t t, const unsigned char *w, const int8_t *q, const float *d,
                         int64_t nsb, double *mag) {
    float *wf = malloc(sizeof(float) * (size_t)nsb * 256);
    pl_dequant_row(t, w, wf, nsb * 256);
    double s = 0;
    *mag = 0;
    for (int64_t i = 0; i < nsb * 256; i++) {
        double v = (double)wf[i] * q[i] * d[i / 256];
        s += v, *mag += fabs(v);
    }
    free(wf);
    return s;
}

/* Decode's tile pl_cpu_kdot_rows: 1..4 weight rows (fresh random blocks each time) against
 * one activation row, each value the portable dot's bits; rows of 1-5 super-blocks, up to 40
 * and now and then 120-140 (past the tile's chunk of 64, KROWS_CHUNK). */
static void test_rows(void) {
    int bad = 0, cases = 0;
    enum { MAX_SB = 140 };
    float *x = malloc(sizeof(float) * MAX_SB * 256), d[MAX_SB];
    int8_t *q = malloc(MAX_SB * 256);
    int16_t s[MAX_SB * 16];
    for (int iter = 0; iter < 300; iter++) {
        uint32_t t = ktypes[iter % 3];
        int64_t nsb = iter % 4   ? 1 + rnd() % 5
                      : iter % 3 ? 1 + rnd() % 40
                                 : 120 + rnd() % (MAX_SB - 119),
                k = nsb * 256;
        int64_t rb = pl_row_size(t, k);
        int nr = 1 + (int)(rnd() % 4);
        unsigned char *w = malloc((size_t)(rb * nr));
        fill_k(t, w, nsb * nr, iter);
        fill_x(x, k, iter);
        pl_cpu_quant_act_k(x, k, q, d, s);
        const unsigned char *wr[4];
        for (int r = 0; r < nr; r++) wr[r] = w + r * rb;
        float got[4];
        pl_cpu_kdot_rows(t, nr, wr, q, d, s, nsb, got);
        for (int r = 0; r < nr; r++) {
            float p = pl_cpu_kdot_row_portable(t, wr[r], q, d, s, nsb);
            bad += memcmp(&p, &got[r], sizeof p) != 0;
            cases++;
        }
        free(w);
    }
    free(x), free(q);
    CHECK(bad == 0, "kdot_rows vs portable: %d of %d values differ", bad, cases);
}

static void test_dots(void) {
    int bad = 0, bad_ref = 0, cases = 0;
    for (int iter = 0; iter < 500; iter++) { /* per level: 1500 in all on AVX-512 */
        uint32_t t = ktypes[iter % 3];
        int64_t nsb = 1 + rnd() % 6, k = nsb * 256;
        int nc = 1 + (int)(rnd() % 4);
        unsigned char *w = malloc((size_t)pl_row_size(t, k));
        float *x = malloc(sizeof(float) * (size_t)(k * nc)), d[4 * 6];
        int8_t *q = malloc((size_t)(k * nc));
        int16_t s[4 * 6 * 16];
        fill_k(t, w, nsb, iter);
        fill_x(x, k * nc, iter);
        const int8_t *y[4];
        const float *yd[4];
        const int16_t *ys[4];
        for (int c = 0; c < nc; c++) {
            pl_cpu_quant_act_k(x + c * k, k, q + c * k, d + c * nsb, s + c * nsb * 16);
            y[c] = q + c * k, yd[c] = d + c * nsb, ys[c] = s + c * nsb * 16;
        }
        float got[4];
        pl_cpu_kdot(t, w, nc, y, yd, ys, nsb, got);
        for (int c = 0; c < nc; c++) {
            float p = pl_cpu_kdot_row_portable(t, w, y[c], yd[c], ys[c], nsb);
            bad += memcmp(&p, &got[c], sizeof p) != 0;
            double mag, want = dot_double(t, w, y[c], yd[c], nsb, &mag);
            bad_ref += !(fabs(p - want) <= 1e-6 * mag + 1e-30);
            cases++;
        }
        free(w), free(x), free(q);
    }
    CHECK(bad == 0, "kdot vs portable: %d of %d values differ", bad, cases);
    test_rows();
    CHECK(bad_ref == 0, "portable kdot vs dequantised double dot: %d of %d values off", bad_ref,
          cases);
}

/* pl_be_matmul act_q8 on K-quant weights against the portable dot, 1 and 3 threads. */
static int matmul_case(pl_backend *bes[2], uint32_t t, int n_out, int64_t nsb, int n, bool bias,
                       bool acc, int iter) {
    int64_t k = nsb * 256, row_bytes = pl_row_size(t, k);
    unsigned char *w = malloc((size_t)(row_bytes * n_out));
    fill_k(t, w, nsb * n_out, iter);
    float *x = malloc(sizeof(float) * (size_t)(n * k)), *bv = malloc(sizeof(float) * n_out);
    float *o0 = malloc(sizeof(float) * (size_t)n * n_out),
          *got = malloc(sizeof(float) * (size_t)n * n_out);
    fill_x(x, n * k, iter + 1);
    for (int i = 0; i < n_out; i++) bv[i] = frand(-0.5f, 0.5f);
    for (int i = 0; i < n * n_out; i++) o0[i] = frand(0, 10);
    int8_t *xq = malloc((size_t)(n * k));
    float *xd = malloc(sizeof(float) * (size_t)(n * nsb));
    int16_t *xs = malloc(sizeof(int16_t) * (size_t)(n * nsb * 16));
    for (int i = 0; i < n; i++)
        pl_cpu_quant_act_k_portable(x + i * k, k, xq + i * k, xd + i * nsb, xs + i * nsb * 16);
    float *dot = malloc(sizeof(float) * (size_t)n * n_out);
    for (int i = 0; i < n; i++)
        for (int r = 0; r < n_out; r++)
            dot[i * n_out + r] = pl_cpu_kdot_row_portable(t, w + r * row_bytes, xq + i * k,
                                                          xd + i * nsb, xs + i * nsb * 16, nsb);
    int bad = 0;
    for (int b = 0; b < 2; b++) {
        if (!act_q8_matmul(bes[b], t, k, n_out, n, w, x, bias ? bv : NULL, acc, o0, got)) return 1;
        bad += act_q8_mismatches(n, n_out, dot, bias ? bv : NULL, acc, o0, got);
    }
    free(w), free(x), free(bv), free(o0), free(got), free(xq), free(xd), free(xs), free(dot);
    return bad;
}

static void test_matmul(void) {
    pl_backend *bes[2];
    if (!act_q8_backends(bes)) return;
    /* one row, short batches (pl_cpu_kdot), the GEMM from 8 rows: an odd last group, two
     * groups, past one item's column range (128 columns on the 3-thread backend,
     * act_q8_backends) */
    static const int ns[] = {1, 2, 5, 8, 17, 140};
    int bad = 0, cases = 0;
    for (int iter = 0; iter < 36; iter++) {
        uint32_t t = ktypes[iter % 3];
        int n = ns[(iter / 3) % 6], n_out = 1 + (int)(rnd() % 40);
        int64_t nsb = 1 + rnd() % 3;
        if (iter % 6 == 5) n_out = 67, nsb = 4; /* past the one-thread cutoff */
        bad += matmul_case(bes, t, n_out, nsb, n, iter % 2 == 0, iter % 4 == 1, iter);
        cases++;
    }
    CHECK(bad == 0, "matmul act_q8 K-quants: %d values differ from the portable dot (%d cases)",
          bad, cases);
    pl_be_destroy(bes[0]), pl_be_destroy(bes[1]);
}

static void run_tests(void) {
    test_quant();
    /* the SIMD kernels once per level the CPU has (simd_first_pass) */
    for (int pass = simd_first_pass(); pass < 3; pass++) {
        simd_pass(pass);
        test_dots();
        test_matmul();
    }
    pl_cpu_no_vnni = pl_cpu_no_avx512 = 0;
    pl_cpu_portable = 1; /* the portable paths through the same checks */
    test_quant();
    test_matmul();
    pl_cpu_portable = 0;
}
