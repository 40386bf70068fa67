/* f16_test.c - the half and bfloat16 conversions against IEEE 754's definitions, for every
 * 16-bit pattern: decoding equals the value the bits denote (computed here in double from
 * sign, exponent and mantissa), and encoding rounds to nearest with ties to even (every
 * half maps back to itself; midpoints between neighbours go to the even one, and a hair
 * either side goes to the nearer). */
#include <stdint.h>

#include "format/quant.h"
#include "test.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The value of half h by the standard: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m. */
static double half_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

/* The row converters (8 at a time with F16C) give the one-by-one bits: every half decoded,
 * in runs of every length mod 8 (the tails) and with NaNs (signalling ones too) among
 * them; and floats encoded - every half's value, the midpoints and their neighbours,
 * random bits (NaNs, infinities, subnormals, overflow). */
static void check_rows(void) {
    enum { N = 65536 };
    static uint16_t h[4 * N];
    static float f[4 * N];
    for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)(i * 40503u); /* every pattern, mixed */
    int bad = 0;
    for (int64_t off = 0; off < 8; off++) {
        int64_t n = N - off - (off * 3) % 8;
        pl_f16_to_f32_row(h + off, f, n);
        for (int64_t i = 0; i < n; i++) bad += bits(f[i]) != bits(pl_f16_to_f32(h[off + i]));
    }
    CHECK(bad == 0, "f16 rows: %d values decode differently from pl_f16_to_f32", bad);
    uint64_t r = 88172645463325252ull;
    int64_t nf = 0;
    for (uint32_t i = 0; i < N; i++) {
        float v = pl_f16_to_f32((uint16_t)i), w = pl_f16_to_f32((uint16_t)(i + 1));
        f[nf++] = v;
        if (!isnan(v) && !isnan(w) && (i & 0x7fff) < 0x7bff) {
            float mid = (float)(((double)v + w) / 2);
            f[nf++] = mid;
            f[nf++] = nextafterf(mid, INFINITY);
        }
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        uint32_t u = (uint32_t)r;
        memcpy(&f[nf++], &u, 4);
    }
    bad = 0;
    for (int64_t off = 0; off < 8; off++) {
        int64_t n = nf - off - (off * 5) % 8;
        pl_f32_to_f16_row(f + off, h, n);
        for (int64_t i = 0; i < n; i++) bad += h[i] != pl_f32_to_f16(f[off + i]);
    }
    CHECK(bad == 0, "f16 rows: %d values encode differently from pl_f32_to_f16", bad);
}

static void run_tests(void) {
    int bad_dec = 0, bad_rt = 0, bad_mid = 0, bad_near = 0, bad_bf = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        double want = half_value(h);
        float got = pl_f16_to_f32(h);
        if (isnan(want) ? !isnan(got) || (bits(got) >> 31) != (h >> 15u)
                        : (double)got != want || !!signbit(got) != (h >> 15))
            bad_dec++;
        if (!isnan(want) && pl_f32_to_f16(got) != h) bad_rt++;
        /* halfway to the next half up in magnitude (finite, below the largest) */
        int e = (h >> 10) & 31;
        if (e < 30 || (e == 30 && (h & 1023) != 1023)) {
            double next = half_value((uint16_t)(h + 1));
            double mid = (want + next) / 2; /* exact in float: halves have 11 bits */
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;
            if (pl_f32_to_f16((float)mid) != even) bad_mid++;
            float below = nextafterf((float)mid, (float)want),
                  above = nextafterf((float)mid, (float)next);
            if (pl_f32_to_f16(below) != h || pl_f32_to_f16(above) != (uint16_t)(h + 1)) bad_near++;
        }
        /* bfloat16 is the top half of a float: decoding is exact, encoding rounds to even */
        float b = pl_bf16_to_f32(h);
        if (bits(b) != (uint32_t)h << 16) bad_bf++;
        if (!isnan(b) && pl_f32_to_bf16(b) != h) bad_bf++;
    }
    CHECK(bad_dec == 0, "%d halves decode wrong", bad_dec);
    CHECK(bad_rt == 0, "%d halves do not encode back to themselves", bad_rt);
    CHECK(bad_mid == 0, "%d midpoints not rounded to even", bad_mid);
    CHECK(bad_near == 0, "%d values next to a midpoint rounded the wrong way", bad_near);
    CHECK(bad_bf == 0, "%d bfloat16 errors", bad_bf);
    CHECK(pl_f32_to_f16(65520.0f) == 0x7c00 && pl_f32_to_f16(65519.99f) == 0x7bff, "overflow edge");
    CHECK(pl_f32_to_f16(-1e10f) == 0xfc00 && (pl_f32_to_f16(NAN) & 0x7fff) > 0x7c00, "inf, nan");
    CHECK(pl_f32_to_f16(ldexpf(1, -25)) == 0 && pl_f32_to_f16(nextafterf(ldexpf(1, -25), 1)) == 1,
          "smallest subnormal edge");
    CHECK(pl_f32_to_bf16(1.00390625f) == 0x3f80 && pl_f32_to_bf16(1.01171875f) == 0x3f82,
          "bf16 ties to even");
    CHECK(isnan(pl_bf16_to_f32(pl_f32_to_bf16(NAN))), "bf16 nan");
    check_rows();
}
