/* quant_k.c - the K-quants (256-value super-blocks with quantized sub-block scales):
 * dequantize Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K bit-exactly as ggml does. The quantizers
 * are in quant_k_search.c. */
#include <math.h>
#include <string.h>

#include "quant_rows.h"

PL_NO_FP_CONTRACT

/* ---- dequantize ---- */

void pl_dequant_q2_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q2_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d), dmin = pl_f16_to_f32(b->dmin);
        for (int half = 0; half < 2; half++) {
            const uint8_t *q = b->qs + 32 * half;
            for (int s = 0; s < 8; s++) { /* 8 runs of 16 values per 128 */
                const uint8_t sc = b->scales[8 * half + s];
                const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
                const int shift = 2 * (s / 2), off = 16 * (s % 2);
                for (int l = 0; l < 16; l++) *dst++ = dl * (float)((q[off + l] >> shift) & 3) - ml;
            }
        }
    }
}

void pl_dequant_q3_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q3_K *restrict b = src;
    int sc[16];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        for (int j = 0; j < 16; j++) sc[j] = pl_q3_scale(j, b->scales);
        for (int half = 0; half < 2; half++) {
            const uint8_t *q = b->qs + 32 * half;
            for (int s = 0; s < 8; s++) {
                const float dl = d * (float)sc[8 * half + s];
                const int shift = 2 * (s / 2), off = 16 * (s % 2);
                const uint8_t mask = (uint8_t)(1u << (4 * half + s / 2));
                for (int l = 0; l < 16; l++) {
                    int v = ((q[off + l] >> shift) & 3) - (b->hmask[off + l] & mask ? 0 : 4);
                    *dst++ = dl * (float)v;
                }
            }
        }
    }
}

void pl_dequant_q4_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q4_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d), dmin = pl_f16_to_f32(b->dmin);
        for (int j = 0; j < 4; j++) { /* 64 values: low nibbles, then high nibbles */
            const uint8_t *q = b->qs + 32 * j;
            uint8_t sc, m;
            pl_k4_scale_min(2 * j, b->scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            pl_k4_scale_min(2 * j + 1, b->scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void pl_dequant_q5_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q5_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d), dmin = pl_f16_to_f32(b->dmin);
        for (int j = 0; j < 4; j++) {
            const uint8_t *q = b->qs + 32 * j;
            const uint8_t u1 = (uint8_t)(1u << (2 * j)), u2 = (uint8_t)(2u << (2 * j));
            uint8_t sc, m;
            pl_k4_scale_min(2 * j, b->scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            pl_k4_scale_min(2 * j + 1, b->scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((q[l] & 0x0f) + (b->qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((q[l] >> 4) + (b->qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void pl_dequant_q6_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q6_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        for (int half = 0; half < 2; half++, dst += 128) {
            const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            const int8_t *sc = b->scales + 8 * half;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void pl_dequant_q8_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q8_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++)
        for (int j = 0; j < PL_QK_K; j++) *dst++ = b->d * (float)b->qs[j];
}
