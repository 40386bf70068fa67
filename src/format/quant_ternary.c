/* quant_ternary.c - the ternary formats TQ1_0 and TQ2_0 (values in {-1, 0, 1} times one
 * scale per 256): dequantize bit-exactly as ggml does, and quantize byte-exactly as
 * llama-quantize does.
 *
 * TQ2_0 spends 2 bits per value. TQ1_0 packs 5 trits in a byte (3^5 = 243 <= 256) as a
 * fixed-point fraction: the byte is ceil(t * 256 / 243) for the base-3 number t, so
 * multiplying by 3^k (mod 256) shifts trit k to the top, and (byte * 3) >> 8 reads it. */
#include <math.h>

#include "quant_rows.h"

PL_NO_FP_CONTRACT

/* The top trit of a TQ1_0 byte after multiplying by pow3, as -1, 0 or 1. */
static int trit(uint8_t byte, int pow3) {
    const uint8_t q = (uint8_t)(byte * pow3);
    return ((q * 3) >> 8) - 1;
}

void pl_dequant_tq1_0(const void *src, float *dst, int64_t n) {
    static const int pow3[5] = {1, 3, 9, 27, 81};
    const pl_block_tq1_0 *b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        /* qs[0..32): 5 runs of 32 values; qs[32..48): 5 runs of 16; qh: 4 runs of 4 */
        for (int k = 0; k < 5; k++)
            for (int m = 0; m < 32; m++) *dst++ = d * (float)trit(b->qs[m], pow3[k]);
        for (int k = 0; k < 5; k++)
            for (int m = 0; m < 16; m++) *dst++ = d * (float)trit(b->qs[32 + m], pow3[k]);
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < 4; m++) *dst++ = d * (float)trit(b->qh[m], pow3[k]);
    }
}

void pl_dequant_tq2_0(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_tq2_0 *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        for (int half = 0; half < 2; half++)
            for (int shift = 0; shift < 8; shift += 2)
                for (int m = 0; m < 32; m++)
                    *dst++ = d * (float)(((b->qs[32 * half + m] >> shift) & 3) - 1);
    }
}

/* ---- quantize: scale = the block's largest magnitude, trits = round(x / scale) ---- */

/* The trit of x * id as 0, 1, 2 (rounding half away from zero, as lroundf does). */
static int trit_of(float v) {
    const float r = roundf(v);
    return (r > 0) - (r < 0) + 1; /* |v| <= 1 for real data; NaN gives the middle trit */
}

static float absmax_256(const float *x) {
    float amax = 0;
    for (int j = 0; j < PL_QK_K; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

/* 5 trits (first most significant) as a byte: ceil(t * 256 / 243), so reading multiplies
 * them out again (see the top of the file). */
static uint8_t trit_byte(const float *x, int stride, int count, float id) {
    int q = 0;
    for (int k = 0; k < count; k++) q = q * 3 + trit_of(x[k * stride] * id);
    for (int k = count; k < 5; k++) q *= 3; /* fewer than 5: shift up to the top trits */
    return (uint8_t)((q * 256 + 242) / 243);
}

void pl_quant_tq1_0(const float *src, void *dst, int64_t n) {
    pl_block_tq1_0 *b = dst;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        const float d = absmax_256(src), id = d != 0 ? 1.0f / d : 0.0f;
        b->d = pl_f32_to_f16(d);
        for (int m = 0; m < 32; m++) b->qs[m] = trit_byte(src + m, 32, 5, id);
        for (int m = 0; m < 16; m++) b->qs[32 + m] = trit_byte(src + 160 + m, 16, 5, id);
        for (int m = 0; m < 4; m++) b->qh[m] = trit_byte(src + 240 + m, 4, 4, id);
    }
}

void pl_quant_tq2_0(const float *src, void *dst, int64_t n) {
    pl_block_tq2_0 *b = dst;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        const float d = absmax_256(src), id = d != 0 ? 1.0f / d : 0.0f;
        b->d = pl_f32_to_f16(d);
        for (int half = 0; half < 2; half++)
            for (int m = 0; m < 32; m++) {
                const float *x = src + 128 * half + m;
                int q = 0;
                for (int k = 0; k < 4; k++) q |= trit_of(x[32 * k] * id) << (2 * k);
                b->qs[32 * half + m] = (uint8_t)q;
            }
    }
}
