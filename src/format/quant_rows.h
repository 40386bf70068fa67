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
void pl_quant_q4_K(const float *src, void *dst, int64_t n);
void pl_quant_q6_K(const float *src, void *dst, int64_t n);

/* quant_iq.c */
void pl_dequant_iq4_nl(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_iq4_xs(const void *restrict src, float *restrict dst, int64_t n);

/* quant_ternary.c */
void pl_dequant_tq1_0(const void *restrict src, float *restrict dst, int64_t n);
void pl_dequant_tq2_0(const void *restrict src, float *restrict dst, int64_t n);

#endif
