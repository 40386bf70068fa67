/* quant_rows.h - the row converters behind the traits table (internal to src/format/).
 *
 * Each takes n values (a multiple of the block size, checked by the caller) and does no
 * other checking: they are the inner loops. Everyone else calls them through
 * pl_type_get(t)->dequant / ->quant or pl_dequant_row / pl_quant_row.
 *
 * Bit-exactness: the dequantizers reproduce ggml's (and gguf-py's) float32 output bit for
 * bit, and the quantizers reproduce llama-quantize's bytes. Both depend on the exact order
 * of float operations and on a*b+c NOT being fused into one FMA: GCC in -std=c11 mode does
 * not contract, and the files set FP_CONTRACT OFF for clang (see PL_NO_FP_CONTRACT). */
#ifndef PL_FORMAT_QUANT_ROWS_H
#define PL_FORMAT_QUANT_ROWS_H

#include <math.h>
#include <stdint.h>

#include "quant.h"
#include "quant_blocks.h"

#if defined(__clang__)
#define PL_NO_FP_CONTRACT _Pragma("STDC FP_CONTRACT OFF")
#else
#define PL_NO_FP_CONTRACT /* gcc: -std=c11 already means -ffp-contract=off */
#endif

/* Round to the nearest integer, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves the
 * rounded integer in the low mantissa bits. This is the rounding ggml's K-quant and IQ
 * quantizers use (not roundf, which rounds ties away from zero). */
static inline int pl_round_even(float x) {
    union {
        float f;
        int32_t i;
    } u = {x + 12582912.0f};
    return (u.i & 0x007fffff) - 0x00400000;
}

/* The value of largest magnitude with its sign (the first one on ties), and that magnitude:
 * the symmetric formats put it on their outermost level. */
static inline float pl_signed_max(int n, const float *x, float *amax) {
    float max = 0;
    *amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > *amax) *amax = fabsf(x[i]), max = x[i];
    return max;
}

/* Scale and min j (0..7) of a Q4_K/Q5_K block: 6 bits each, packed in 12 bytes. Bytes 0-3
 * hold scales 0-3 and bytes 4-7 mins 0-3 in their low 6 bits; scales/mins 4-7 keep their
 * low 4 bits in the nibbles of bytes 8-11 and their top 2 bits in the spare top bits of
 * bytes 0-3 (scales) and 4-7 (mins). */
static inline void pl_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* Scale j (0..15) of a Q3_K block, -32..31: low 4 bits in the nibbles of bytes 0-7 (scales
 * 0-7 low nibbles, 8-15 high), top 2 bits in bytes 8-11 (byte 8 + j%4, bits 2*(j/4)). */
static inline int pl_q3_scale(int j, const uint8_t *p) {
    const int lo = j < 8 ? p[j] & 0x0f : p[j - 8] >> 4;
    const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* f16.c */
void pl_dequant_f32(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_f16(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_bf16(const void *restrict src, float *restrict dst, int64_t n);
void pl_quant_f32(const float *src, void *dst, int64_t n);
void pl_quant_f16(const float *src, void *dst, int64_t n);
void pl_quant_bf16(const float *src, void *dst, int64_t n);

/* quant_legacy.c */
void pl_dequant_q4_0(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q4_1(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q5_0(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q5_1(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q8_0(const void *restrict src, float *restrict dst, int64_t n);
void pl_quant_q4_0(const float *src, void *dst, int64_t n);
void pl_quant_q4_1(const float *src, void *dst, int64_t n);
void pl_quant_q5_0(const float *src, void *dst, int64_t n);
void pl_quant_q5_1(const float *src, void *dst, int64_t n);
void pl_quant_q8_0(const float *src, void *dst, int64_t n);

/* quant_k.c */
void pl_dequant_q2_K(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q3_K(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q4_K(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q5_K(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q6_K(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_q8_K(const void *restrict src, float *restrict dst, int64_t n);

/* quant_k_search.c */
void pl_quant_q2_K(const float *src, void *dst, int64_t n);
void pl_quant_q3_K(const float *src, void *dst, int64_t n);
void pl_quant_q4_K(const float *src, void *dst, int64_t n);
void pl_quant_q5_K(const float *src, void *dst, int64_t n);
void pl_quant_q6_K(const float *src, void *dst, int64_t n);

/* quant_iq.c */
void pl_dequant_iq4_nl(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_iq4_xs(const void *restrict src, float *restrict dst, int64_t n);
void pl_quant_iq4_nl(const float *src, void *dst, int64_t n);
void pl_quant_iq4_xs(const float *src, void *dst, int64_t n);

/* quant_ternary.c */
void pl_dequant_tq1_0(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_tq2_0(const void *restrict src, float *restrict dst, int64_t n);
void pl_quant_tq1_0(const float *src, void *dst, int64_t n);
void pl_quant_tq2_0(const float *src, void *dst, int64_t n);

#endif
