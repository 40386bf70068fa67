/* quant_legacy.c - the 32-value block formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: dequantize
 * (bit-exact with ggml) and quantize (the deterministic round-to-nearest rules
 * llama-quantize uses, byte-exact with its files).
 *
 * The quantizers follow the reference rules literally, including their quirks: Q4_0/Q5_0
 * take the scale from the signed value of largest magnitude (d = max / -8), so that value
 * lands exactly on q = 0, and round by truncating x/d + 8.5; the _1 kinds round
 * (x - min)/d + 0.5 down; Q8_0 rounds half away from zero. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant_rows.h"

PL_NO_FP_CONTRACT

/* ---- dequantize ---- */

void pl_dequant_q4_0(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q4_0 *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, dst += PL_QK) {
        const float d = pl_f16_to_f32(b->d);
        for (int j = 0; j < PL_QK / 2; j++) {
            dst[j] = (float)((b->qs[j] & 0x0f) - 8) * d;
            dst[j + PL_QK / 2] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

void pl_dequant_q4_1(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q4_1 *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, dst += PL_QK) {
        const float d = pl_f16_to_f32(b->d), m = pl_f16_to_f32(b->m);
        for (int j = 0; j < PL_QK / 2; j++) {
            dst[j] = (float)(b->qs[j] & 0x0f) * d + m;
            dst[j + PL_QK / 2] = (float)(b->qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void pl_dequant_q5_0(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q5_0 *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, dst += PL_QK) {
        const float d = pl_f16_to_f32(b->d);
        const uint32_t qh = load_u32(b->qh);
        for (int j = 0; j < PL_QK / 2; j++) {
            int lo = (b->qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)(lo - 16) * d;
            dst[j + PL_QK / 2] = (float)(hi - 16) * d;
        }
    }
}

void pl_dequant_q5_1(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q5_1 *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, dst += PL_QK) {
        const float d = pl_f16_to_f32(b->d), m = pl_f16_to_f32(b->m);
        const uint32_t qh = load_u32(b->qh);
        for (int j = 0; j < PL_QK / 2; j++) {
            int lo = (b->qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)lo * d + m;
            dst[j + PL_QK / 2] = (float)hi * d + m;
        }
    }
}

void pl_dequant_q8_0(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q8_0 *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, dst += PL_QK) {
        const float d = pl_f16_to_f32(b->d);
        for (int j = 0; j < PL_QK; j++) dst[j] = (float)b->qs[j] * d;
    }
}

/* ---- quantize ---- */

/* The _1 formats' block header: scale d = (max - min) / levels and the min, both stored as
 * f16; returns the min and sets *id = 1/d (0 for a constant block). */
static float asym_header(const float *x, int levels, pl_half *d16, pl_half *m16, float *id) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < PL_QK; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / (float)levels;
    *id = d != 0 ? 1.0f / d : 0.0f;
    *d16 = pl_f32_to_f16(d);
    *m16 = pl_f32_to_f16(min);
    return min;
}

/* Truncate toward zero as the reference's (int8_t) cast does for the values it sees (0 to
 * about 17); out-of-range or NaN input (a broken file) gives 0 instead of undefined
 * behaviour. */
static int trunc_q(float v) {
    return v > -1.0f && v < 128.0f ? (int)v : 0;
}

static int min_int(int a, int b) {
    return a < b ? a : b;
}

void pl_quant_q4_0(const float *src, void *dst, int64_t n) {
    pl_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, src += PL_QK) {
        float amax;
        const float d = pl_signed_max(PL_QK, src, &amax) / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b->d = pl_f32_to_f16(d);
        for (int j = 0; j < PL_QK / 2; j++) {
            const float x0 = src[j] * id, x1 = src[j + PL_QK / 2] * id;
            const int q0 = min_int(15, trunc_q(x0 + 8.5f));
            const int q1 = min_int(15, trunc_q(x1 + 8.5f));
            b->qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void pl_quant_q4_1(const float *src, void *dst, int64_t n) {
    pl_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, src += PL_QK) {
        float id;
        const float min = asym_header(src, 15, &b->d, &b->m, &id);
        for (int j = 0; j < PL_QK / 2; j++) {
            const float x0 = (src[j] - min) * id, x1 = (src[j + PL_QK / 2] - min) * id;
            const int q0 = min_int(15, trunc_q(x0 + 0.5f));
            const int q1 = min_int(15, trunc_q(x1 + 0.5f));
            b->qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* Store 32 five-bit values: low nibbles in qs, the 5th bits gathered into qh. */
static void pack5(const int *q, uint8_t qs[PL_QK / 2], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < PL_QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + PL_QK / 2] & 0x0f) << 4);
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + PL_QK / 2] >> 4) & 1) << (j + PL_QK / 2);
    }
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

void pl_quant_q5_0(const float *src, void *dst, int64_t n) {
    pl_block_q5_0 *b = dst;
    int q[PL_QK];
    for (int64_t i = 0; i < n / PL_QK; i++, b++, src += PL_QK) {
        float amax;
        const float d = pl_signed_max(PL_QK, src, &amax) / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b->d = pl_f32_to_f16(d);
        for (int j = 0; j < PL_QK; j++) {
            const float x = src[j] * id;
            q[j] = min_int(31, trunc_q(x + 16.5f));
        }
        pack5(q, b->qs, b->qh);
    }
}

void pl_quant_q5_1(const float *src, void *dst, int64_t n) {
    pl_block_q5_1 *b = dst;
    int q[PL_QK];
    for (int64_t i = 0; i < n / PL_QK; i++, b++, src += PL_QK) {
        float id;
        const float min = asym_header(src, 31, &b->d, &b->m, &id);
        for (int j = 0; j < PL_QK; j++) {
            const float x = (src[j] - min) * id;
            q[j] = trunc_q(x + 0.5f); /* no clamp in the reference: max lands on 31 */
        }
        pack5(q, b->qs, b->qh);
    }
}

void pl_quant_q8_0(const float *src, void *dst, int64_t n) {
    pl_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, src += PL_QK) {
        float amax = 0;
        for (int j = 0; j < PL_QK; j++) amax = amax > fabsf(src[j]) ? amax : fabsf(src[j]);
        const float d = amax / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b->d = pl_f32_to_f16(d);
        for (int j = 0; j < PL_QK; j++) {
            const float q = roundf(src[j] * id); /* in -127..127 unless the input has NaN */
            b->qs[j] = (int8_t)(q >= -128.0f && q <= 127.0f ? (int)q : 0);
        }
    }
}
