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
