/* quant_roundtrip_test.c - for every format we write, dequant(quant(x)) stays within a
 * stated bound of x on random data (Gaussian with 1% outliers, blocks of widely varying
 * scale), zero and constant blocks come back exactly, and NaN/Inf input does not crash.
 *
 * Bounds, per block (d16: a scale rounded to f16, relative error <= 2^-11):
 *   F16 |e| <= 2^-11 |x| + 2^-25 (half a subnormal step), BF16 |e| <= 2^-8 |x|
 *   Q8_0 |e| <= 0.57 amax/127   (half a step, plus 127 steps of the f16 scale error)
 *   Q4_0 |e| <= 1.01 amax/8     (the clamp at q=15 costs a full step on the far side)
 *   Q5_0 |e| <= 1.01 amax/16
 *   Q4_1 |e| <= 0.51 range/15 + |min| 2^-11   (half a step; min stored as f16)
 *   Q5_1 |e| <= 0.52 range/31 + |min| 2^-11
 *   TQ1_0, TQ2_0 |e| <= 0.501 amax per 256 (values round to -amax, 0 or amax)
 * The K-quants and IQ4 formats choose their scales by a search, so there is no closed form;
 * these bounds are about 1.5x the worst seen on this data (|e| / amax, rms(e) / rms(x) per
 * block: Q2_K 0.34, 0.38; Q3_K 0.17, 0.23; Q4_K 0.063, 0.100; Q5_K 0.034, 0.047; Q6_K 0.016,
 * 0.029; IQ4_NL (per 32) 0.104, 0.152; IQ4_XS 0.076, 0.123):
 *   Q2_K 0.5, 0.55   Q3_K 0.26, 0.35   Q4_K 0.10, 0.15   Q5_K 0.05, 0.07   Q6_K 0.025, 0.04
 *   IQ4_NL 0.16, 0.23   IQ4_XS 0.12, 0.19
 * Each bound must also be approached (worst > 0.2 of it), so a loose bound fails too. */
#include <stdint.h>

#include "format/quant.h"
#include "format/quant_blocks.h"
#include "test.h"

#define N (64 * 256) /* values per test array */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static float gaussian(void) {
    double u = uniform(), v = uniform();
    return (float)(sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

/* Random weights: each 256 has its own scale (1e-2 .. 10) and 1% outliers of 5x. */
static void fill(float *x) {
    for (int b = 0; b < N / 256; b++) {
        float scale = (float)pow(10.0, -2 + 3 * uniform());
        for (int i = 0; i < 256; i++) {
            float v = gaussian() * scale;
            if (uniform() < 0.01) v *= 5;
            x[256 * b + i] = v;
        }
    }
}

typedef struct {
    uint32_t type;
    int block;     /* values the bound is stated over */
    double k_step; /* |e| <= k_step * step + k_min * |min| (step: see block_step); */
    double k_min;  /* for block 1: |e| <= k_step * |x| + k_min */
    double k_rms;  /* rms(e) <= k_rms * rms(x) per block, 0 = not checked */
} bound;

/* The step the bound is scaled by, from the block's values: amax/levels for the symmetric
 * formats, range/levels for the _1 formats, amax for the K-quants, |x| for f16/bf16. */
static double block_step(uint32_t t, const float *x, int n, double *min_out) {
    double amax = 0, mn = x[0], mx = x[0];
    for (int i = 0; i < n; i++) {
        amax = fmax(amax, fabs(x[i]));
        mn = fmin(mn, x[i]);
        mx = fmax(mx, x[i]);
    }
    *min_out = mn;
    switch (t) {
    case PL_TYPE_Q8_0: return amax / 127;
    case PL_TYPE_Q4_0: return amax / 8;
    case PL_TYPE_Q5_0: return amax / 16;
    case PL_TYPE_Q4_1: return (mx - mn) / 15;
    case PL_TYPE_Q5_1: return (mx - mn) / 31;
    default: return amax;
    }
}

static void check_bound(const bound *b) {
    static float x[N], y[N];
    static uint8_t q[N * 4];
    const pl_type_traits *tr = pl_type_get(b->type);
    fill(x);
    CHECK(pl_quant_row(b->type, x, q, N) == PL_OK, "%s: %s", tr->name, pl_last_error());
    CHECK(pl_dequant_row(b->type, q, y, N) == PL_OK, "%s: %s", tr->name, pl_last_error());
    double worst = 0, worst_rms = 0;
    for (int s = 0; s < N / b->block; s++) {
        const float *xs = x + s * b->block, *ys = y + s * b->block;
        double mn, step = block_step(b->type, xs, b->block, &mn);
        double e2 = 0, x2 = 0;
        for (int i = 0; i < b->block; i++) {
            double e = fabs((double)ys[i] - xs[i]);
            double lim = b->block == 1 ? b->k_step * fabs(xs[i]) + b->k_min
                                       : b->k_step * step + b->k_min * fabs(mn);
            if (e / lim > worst) worst = e / lim;
            e2 += e * e;
            x2 += (double)xs[i] * xs[i];
        }
        if (b->k_rms > 0 && sqrt(e2 / x2) / b->k_rms > worst_rms)
            worst_rms = sqrt(e2 / x2) / b->k_rms;
    }
    CHECK(worst <= 1.0, "%s: error reaches %.3f of its bound", tr->name, worst);
    CHECK(worst_rms <= 1.0, "%s: rms error reaches %.3f of its bound", tr->name, worst_rms);
    CHECK(worst > 0.2, "%s: error only %.3f of its bound: is the bound stated too loosely?",
          tr->name, worst);
}

/* Zero and constant blocks come back exactly; NaN/Inf input is handled without a crash. */
static void check_special(uint32_t t) {
    const pl_type_traits *tr = pl_type_get(t);
    static float x[512], y[512];
    static uint8_t q[512 * 4];
    memset(x, 0, sizeof x);
    pl_quant_row(t, x, q, 512);
    pl_dequant_row(t, q, y, 512);
    int bad = 0;
    for (int i = 0; i < 512; i++) bad += y[i] != 0;
    CHECK(bad == 0, "%s: %d zeros came back non-zero", tr->name, bad);
    for (int i = 0; i < 512; i++) x[i] = 0.5f; /* exactly representable in every format's scale */
    pl_quant_row(t, x, q, 512);
    pl_dequant_row(t, q, y, 512);
    bad = 0;
    for (int i = 0; i < 512; i++) bad += fabsf(y[i] - 0.5f) > 0.5f / 64;
    CHECK(bad == 0, "%s: %d of a constant block off", tr->name, bad);
    x[3] = NAN;
    x[300] = INFINITY;
    x[301] = -INFINITY;
    CHECK(pl_quant_row(t, x, q, 512) == PL_OK, "%s with NaN/Inf", tr->name);
    pl_dequant_row(t, q, y, 512);
}

static void run_tests(void) {
    static const bound bounds[] = {
        {PL_TYPE_F16, 1, 1.0 / 2048, 1.0 / 33554432, 0},
        {PL_TYPE_BF16, 1, 1.0 / 256, 0, 0},
        {PL_TYPE_Q8_0, 32, 0.57, 0, 0},
        {PL_TYPE_Q4_0, 32, 1.01, 0, 0},
        {PL_TYPE_Q5_0, 32, 1.01, 0, 0},
        {PL_TYPE_Q4_1, 32, 0.51, 1.0 / 2048, 0},
        {PL_TYPE_Q5_1, 32, 0.52, 1.0 / 2048, 0},
        {PL_TYPE_Q4_K, 256, 0.10, 0, 0.15},
        {PL_TYPE_Q6_K, 256, 0.025, 0, 0.04},
        {PL_TYPE_Q2_K, 256, 0.5, 0, 0.55},
        {PL_TYPE_Q3_K, 256, 0.26, 0, 0.35},
        {PL_TYPE_Q5_K, 256, 0.05, 0, 0.07},
        {PL_TYPE_IQ4_NL, 32, 0.16, 0, 0.23},
        {PL_TYPE_IQ4_XS, 256, 0.12, 0, 0.19},
        {PL_TYPE_TQ1_0, 256, 0.501, 0, 0},
        {PL_TYPE_TQ2_0, 256, 0.501, 0, 0},
    };
    int n_written = 0;
    for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
        check_bound(&bounds[i]);
        check_special(bounds[i].type);
    }
    /* every format the table says we write is covered above */
    for (uint32_t t = 0; t < PL_TYPE_COUNT; t++) {
        const pl_type_traits *tr = pl_type_get(t);
        if (!tr || !tr->quant || t == PL_TYPE_F32) continue;
        int listed = 0;
        for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) listed |= bounds[i].type == t;
        CHECK(listed, "%s can be written but has no stated bound here", tr->name);
        n_written++;
    }
    CHECK(n_written == 16, "%d writable formats", n_written);
}
