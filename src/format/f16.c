/* f16.c - the plain float formats: IEEE binary16 and bfloat16 <-> float32, bit-exact with
 * ggml's conversions (round to nearest even; NaN stays NaN), and the F32/F16/BF16 row
 * converters of the traits table. */
#include <string.h>

#include "quant.h"
#include "quant_rows.h"

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t pl_f32_to_f16(float f) {
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (ax < 0x38800000u) {
        /* result is subnormal (or zero): round ax*2^24 to an integer, ties to even */
        float v = u2f(ax) * 16777216.0f; /* exact: scales by a power of two */
        uint32_t i = (uint32_t)v;
        float frac = v - (float)i;
        if (frac > 0.5f || (frac == 0.5f && (i & 1))) i++;
        return (uint16_t)(sign | i);
    }
    /* normal: rebias exponent and round the mantissa to 10 bits, ties to even */
    uint32_t r = ax - 0x38000000u; /* exponent - 112 */
    uint32_t lsb = (r >> 13) & 1;
    r += 0xfff + lsb;
    return (uint16_t)(sign | (r >> 13));
}

/* ---- many at once ---- */

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define PL_F16_X86 1
/* AVX and F16C (cpuid leaf 1, ECX bit 29: clang's builtin does not know it). */
static int have_f16c(void) {
    static int v = -1; /* benign race: every thread computes the same answer */
    if (v < 0) {
        unsigned a, b, c = 0, d;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        v = f16c && __builtin_cpu_supports("avx") ? 1 : 0;
    }
    return v;
}

/* The hardware rounds to nearest even as pl_f32_to_f16 does (overflow and subnormals
 * included) but keeps a NaN's payload where it makes 0x7e00: 8 with a NaN go one by one.
 * Returns how many were done. */
__attribute__((target("avx,f16c"))) static int64_t to_f16_x86(const float *x, uint16_t *out,
                                                              int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int k = 0; k < 8; k++) out[i + k] = pl_f32_to_f16(x[i + k]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

/* Exact for every half but a signalling NaN, which the hardware quiets: 8 with a NaN (a
 * magnitude above 0x7c00) go one by one. */
__attribute__((target("avx,f16c"))) static int64_t to_f32_x86(const uint16_t *h, float *out,
                                                              int64_t n) {
    int64_t i = 0;
    const __m128i mag = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(h + i));
        if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(v, mag), inf))) {
            for (int k = 0; k < 8; k++) out[i + k] = pl_f16_to_f32(h[i + k]);
            continue;
        }
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(v));
    }
    return i;
}
#endif

void pl_f32_to_f16_row(const float *x, uint16_t *out, int64_t n) {
    int64_t i = 0;
#ifdef PL_F16_X86
    if (have_f16c()) i = to_f16_x86(x, out, n);
#endif
    for (; i < n; i++) out[i] = pl_f32_to_f16(x[i]);
}

void pl_f16_to_f32_row(const uint16_t *h, float *out, int64_t n) {
    int64_t i = 0;
#ifdef PL_F16_X86
    if (have_f16c()) i = to_f32_x86(h, out, n);
#endif
    for (; i < n; i++) out[i] = pl_f16_to_f32(h[i]);
}

float pl_bf16_to_f32(uint16_t h) {
    return u2f((uint32_t)h << 16);
}

uint16_t pl_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* ---- rows ---- */

/* The row loops run in fixed runs of 16 so that compilers vectorize them at -O2 (their
 * cheap cost model takes loops of known trip count); the tail is done one by one. */
#define RUN 16

void pl_dequant_f32(const void *restrict src, float *restrict dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof *dst);
}

void pl_quant_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof *src);
}

void pl_dequant_f16(const void *restrict src, float *restrict dst, int64_t n) {
    const uint16_t *restrict s = src;
    int64_t i = 0;
    for (; i + RUN <= n; i += RUN)
        for (int k = 0; k < RUN; k++) dst[i + k] = pl_f16_to_f32(s[i + k]);
    for (; i < n; i++) dst[i] = pl_f16_to_f32(s[i]);
}

void pl_quant_f16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = pl_f32_to_f16(src[i]);
}

void pl_dequant_bf16(const void *restrict src, float *restrict dst, int64_t n) {
    const uint16_t *restrict s = src;
    uint32_t *restrict d = (uint32_t *)dst; /* a bfloat16 is the top half of a float's bits */
    int64_t i = 0;
    for (; i + RUN <= n; i += RUN)
        for (int k = 0; k < RUN; k++) d[i + k] = (uint32_t)s[i + k] << 16;
    for (; i < n; i++) d[i] = (uint32_t)s[i] << 16;
}

void pl_quant_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = pl_f32_to_bf16(src[i]);
}
