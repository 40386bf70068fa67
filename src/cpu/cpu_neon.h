/* cpu_neon.h - what the arm64 kernels (cpu_qdot_neon.c, cpu_kdot_neon.c) share: the
 * dot-product target attribute and the exact integer dots of int8 vectors, with SDOT
 * (ARMv8.2 dotprod) or plain NEON. Include only inside `#if defined(__aarch64__)`.
 *
 * Each kernel is instanced twice: with PL_DOTPROD, calling the *_sdot helpers, and without
 * it, calling the *_mull ones, so the library stays baseline armv8-a and SDOT runs only
 * where pl_cpu_neon_level() found it. The float steps after the integer dots must not be
 * contracted into FMLA (the bits would leave the portable path's): see cpu_internal.h. */
#ifndef PL_CPU_NEON_H
#define PL_CPU_NEON_H

#include <arm_neon.h>
#include <string.h>

/* PL_SDOT: whether SDOT kernels are built. A build for a CPU with the dot product has it
 * everywhere; GCC gives it per function; clang's arm_neon.h before version 16 offers
 * vdotq_s32 only to whole builds for it, so a baseline clang build has plain NEON only
 * (pl_cpu_neon_level() then never says 2, and the *_sdot helpers are the plain ones). */
#if defined(__ARM_FEATURE_DOTPROD)
#define PL_SDOT 1
#define PL_DOTPROD
#elif defined(__GNUC__) && !defined(__clang__)
#define PL_SDOT    1
#define PL_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#else
#define PL_SDOT 0
#define PL_DOTPROD
#endif

/* A block of 32 without SDOT: the weight's quants in a (elements 0..15) and b (16..31) with
 * the activation's y0 and y1; four int32 partial sums whose total is the exact dot. Each
 * product (at most 128 * 127 in size) fits int16, and each adjacent pair is widened into
 * int32 at once, so nothing can overflow. */
static inline int32x4_t pl_dot32_mull(int8x16_t a, int8x16_t b, int8x16_t y0, int8x16_t y1) {
    int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(y0)));
    s = vpadalq_s16(s, vmull_high_s8(a, y0));
    s = vpadalq_s16(s, vmull_s8(vget_low_s8(b), vget_low_s8(y1)));
    return vpadalq_s16(s, vmull_high_s8(b, y1));
}

/* The same with SDOT. */
PL_DOTPROD static inline int32x4_t pl_dot32_sdot(int8x16_t a, int8x16_t b, int8x16_t y0,
                                                 int8x16_t y1) {
#if PL_SDOT
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a, y0), b, y1);
#else
    return pl_dot32_mull(a, b, y0, y1);
#endif
}

/* A group of 16, both ways. */
static inline int32x4_t pl_dot16_mull(int8x16_t a, int8x16_t y) {
    return vpadalq_s16(vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(y))), vmull_high_s8(a, y));
}
PL_DOTPROD static inline int32x4_t pl_dot16_sdot(int8x16_t a, int8x16_t y) {
#if PL_SDOT
    return vdotq_s32(vdupq_n_s32(0), a, y);
#else
    return pl_dot16_mull(a, y);
#endif
}

/* acc + SDOT of y's bytes with w's, four to an int32 lane (the GEMM's broadcast weight). */
PL_DOTPROD static inline int32x4_t pl_sdot_acc(int32x4_t acc, int8x16_t y, int8x16_t w) {
#if PL_SDOT
    return vdotq_s32(acc, y, w);
#else
    (void)y, (void)w;
    return acc; /* never runs: a build without SDOT never chooses its kernels */
#endif
}

/* The prefill GEMMs' dot (cpu_qdot_neon.c, cpu_kdot_neon.c): groups g0..g1-1 of four
 * elements of an unpacked weight row wr (bytes in element order) against 8 packed columns
 * y (pl_cpu_gemm_pack's [g][c][4]: 32 bytes a group), added to *lo (columns 0..3) and *hi
 * (4..7). Each group's four weight bytes are broadcast to every 32-bit lane; SDOT then
 * gives a column a lane, while without it vmull_s8 + vpadalq_s16 leave each column's sum
 * in two adjacent int32 lanes, added at the end by vpaddq_s32. */
PL_DOTPROD static inline void pl_gemm_groups_sdot(const unsigned char *wr, const int8_t *y, int g0,
                                                  int g1, int32x4_t *lo, int32x4_t *hi) {
    int32x4_t a = *lo, b = *hi;
#pragma GCC unroll 8
    for (int g = g0; g < g1; g++) {
        int32_t v;
        memcpy(&v, wr + 4 * g, 4);
        int8x16_t w = vreinterpretq_s8_s32(vdupq_n_s32(v));
        a = pl_sdot_acc(a, vld1q_s8(y + 32 * g), w);
        b = pl_sdot_acc(b, vld1q_s8(y + 32 * g + 16), w);
    }
    *lo = a, *hi = b;
}

static inline void pl_gemm_groups_mull(const unsigned char *wr, const int8_t *y, int g0, int g1,
                                       int32x4_t *lo, int32x4_t *hi) {
    int32x4_t a[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
#pragma GCC unroll 8
    for (int g = g0; g < g1; g++) {
        int32_t v;
        memcpy(&v, wr + 4 * g, 4);
        int8x16_t w = vreinterpretq_s8_s32(vdupq_n_s32(v));
        int8x16_t y0 = vld1q_s8(y + 32 * g), y1 = vld1q_s8(y + 32 * g + 16);
        a[0] = vpadalq_s16(a[0], vmull_s8(vget_low_s8(y0), vget_low_s8(w))); /* columns 0, 1 */
        a[1] = vpadalq_s16(a[1], vmull_high_s8(y0, w));                      /* 2, 3 */
        a[2] = vpadalq_s16(a[2], vmull_s8(vget_low_s8(y1), vget_low_s8(w))); /* 4, 5 */
        a[3] = vpadalq_s16(a[3], vmull_high_s8(y1, w));                      /* 6, 7 */
    }
    *lo = vaddq_s32(*lo, vpaddq_s32(a[0], a[1]));
    *hi = vaddq_s32(*hi, vpaddq_s32(a[2], a[3]));
}

#endif
