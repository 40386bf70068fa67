/* f16.c - IEEE binary16 and bfloat16 <-> float32, bit-exact with ggml's conversions
 * (round to nearest even; NaN stays NaN). */
#include <string.h>

#include "quant.h"

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

float pl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (!man) return u2f(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
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

float pl_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t pl_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
