/* cpu_qdot_neon.c - the arm64 (NEON) kernels of the act_q8 matmul: Q4_0/Q8_0 weight rows
 * against Q8_0 activation rows, the decode and batch tiles (8 x 1, 2 x 4) and the prefill
 * GEMM tile (4 rows x 8 or 16 packed columns), the arm64 twins of cpu_qdot.c's AVX2 ones.
 *
 * Two instruction sets, chosen at run time (pl_cpu_neon_level): the ARMv8.2 dot product
 * (SDOT, vdotq_s32) where the kernel reports it (HWCAP_ASIMDDP), compiled for that
 * extension per function so the library stays baseline armv8-a; and plain NEON otherwise
 * (widening multiplies vmull_s8, pairwise adds into int32 vpadalq_s16). Each block's
 * integer dot is exact either way (int32 never overflows on 32 products of bytes), and
 * the float work is row_scalar's, lane by lane: sum + ((float)dot * d_w) * d_x in block
 * order, as separate multiplies and adds, never contracted into FMLA (cpu_neon.h). So the
 * bits equal the portable path's and the AVX2 path's: the same tokens on an arm64 phone as
 * on an x86 server. */
#include <math.h>

#include "cpu_internal.h"

#if defined(__aarch64__)
#include "cpu_neon.h"

#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20) /* Linux's arm64 hwcap bit, for older headers */
#endif
#endif

int pl_cpu_neon_level(void) {
    static int level = -1; /* benign race: every thread computes the same answer */
    if (level < 0) {
#if defined(__ARM_FEATURE_DOTPROD)
        level = 2; /* built for CPUs that have it (Apple's, for one) */
#elif defined(__linux__)
        level = PL_SDOT && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? 2 : 1;
#else
        level = 1; /* no way to ask here: plain NEON is always there */
#endif
    }
    return pl_cpu_portable ? 0 : level;
}

/* A tile of R weight rows x C activation rows (R * C == 8, constants where it is inlined):
 * lane k = r * C + c, as the AVX2 tile. Per block, each weight block is loaded (and, for
 * Q4_0, its nibbles made signed: q - 8 in -8..7) once for its C activation rows, and each
 * activation block once for its R weight rows; the eight integer dots are reduced to two
 * int32x4 by pairwise adds (exact), converted, and every lane then does
 * sum + ((float)dot * d_w) * d_x. */
__attribute__((always_inline)) static inline void
tile_neon(const int sdot, const int q4, const int R, const int C, const unsigned char *const w[],
          const int8_t *const y[], const float *const yd[], int64_t nb, float out[8]) {
    const int bs = q4 ? 18 : 34;
    const uint8x16_t lo = vdupq_n_u8(15);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t wa[8], wb[8], ya[4], yb[4];
        int32x4_t d[8];
        uint16_t hw[8] = {0};
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const unsigned char *p = w[r] + b * bs;
            memcpy(&hw[r], p, 2);
            if (q4) { /* elements 0..15 in the low nibbles, 16..31 in the high ones */
                uint8x16_t q = vld1q_u8(p + 2);
                wa[r] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, lo)), eight);
                wb[r] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
            } else {
                wa[r] = vld1q_s8((const int8_t *)p + 2);
                wb[r] = vld1q_s8((const int8_t *)p + 18);
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            ya[c] = vld1q_s8(y[c] + b * 32);
            yb[c] = vld1q_s8(y[c] + b * 32 + 16);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                d[r * C + c] = sdot ? pl_dot32_sdot(wa[r], wb[r], ya[c], yb[c])
                                    : pl_dot32_mull(wa[r], wb[r], ya[c], yb[c]);
        int32x4_t s0 = vpaddq_s32(vpaddq_s32(d[0], d[1]), vpaddq_s32(d[2], d[3]));
        int32x4_t s1 = vpaddq_s32(vpaddq_s32(d[4], d[5]), vpaddq_s32(d[6], d[7]));
        float32x4_t dw0, dw1, dx0, dx1;
        if (C == 1) {
            dw0 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(hw)));
            dw1 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(hw + 4)));
            dx0 = dx1 = vdupq_n_f32(yd[0][b]);
        } else {
            float32x4_t h = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(hw)));
            dw0 = vdupq_laneq_f32(h, 0), dw1 = vdupq_laneq_f32(h, 1);
            const float x4[4] = {yd[0][b], yd[1][b], yd[2][b], yd[3][b]};
            dx0 = dx1 = vld1q_f32(x4);
        }
        acc0 = vaddq_f32(acc0, vmulq_f32(vmulq_f32(vcvtq_f32_s32(s0), dw0), dx0));
        acc1 = vaddq_f32(acc1, vmulq_f32(vmulq_f32(vcvtq_f32_s32(s1), dw1), dx1));
    }
    vst1q_f32(out, acc0);
    vst1q_f32(out + 4, acc1);
}

/* The eight instances: SDOT or plain, Q4_0 or Q8_0, 8 x 1 or 2 x 4. */
#define PL_TILE(name, attr, sdot, q4, R, C)                                                        \
    attr static void name(const unsigned char *const w[], const int8_t *const y[],                 \
                          const float *const yd[], int64_t nb, float out[8]) {                     \
        tile_neon(sdot, q4, R, C, w, y, yd, nb, out);                                              \
    }
PL_TILE(tile_q4_8x1_dot, PL_DOTPROD, 1, 1, 8, 1)
PL_TILE(tile_q4_2x4_dot, PL_DOTPROD, 1, 1, 2, 4)
PL_TILE(tile_q8_8x1_dot, PL_DOTPROD, 1, 0, 8, 1)
PL_TILE(tile_q8_2x4_dot, PL_DOTPROD, 1, 0, 2, 4)
PL_TILE(tile_q4_8x1, , 0, 1, 8, 1)
PL_TILE(tile_q4_2x4, , 0, 1, 2, 4)
PL_TILE(tile_q8_8x1, , 0, 0, 8, 1)
PL_TILE(tile_q8_2x4, , 0, 0, 2, 4)

void pl_cpu_qdot_tile_neon(int q4, int nr, int nc, const unsigned char *const w[],
                           const int8_t *const y[], const float *const yd[], int64_t nb,
                           float *out) {
    /* the kernel's fixed shape, missing rows/columns standing in for the last ones */
    int R = nc == 1 ? 8 : 2, C = 8 / R, sdot = pl_cpu_neon_level() == 2;
    const unsigned char *wt[8];
    const int8_t *yt[8];
    const float *ydt[8];
    for (int r = 0; r < R; r++) wt[r] = w[r < nr ? r : nr - 1];
    for (int c = 0; c < C; c++) {
        int cc = c < nc ? c : nc - 1;
        yt[c] = y[cc], ydt[c] = yd[cc];
    }
    float o[8];
    if (nc == 1)
        (sdot ? (q4 ? tile_q4_8x1_dot : tile_q8_8x1_dot)
              : (q4 ? tile_q4_8x1 : tile_q8_8x1))(wt, yt, ydt, nb, o);
    else
        (sdot ? (q4 ? tile_q4_2x4_dot : tile_q8_2x4_dot)
              : (q4 ? tile_q4_2x4 : tile_q8_2x4))(wt, yt, ydt, nb, o);
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) out[r * nc + c] = o[r * C + c];
}

/* The prefill GEMM tile on pl_cpu_gemm_pack's and pl_cpu_gemm_unpack's layouts (see
 * cpu_internal.h): an output lane per activation column, so no horizontal sums; the block
 * dots are cpu_neon.h's pl_gemm_groups_*. The unpacked Q4_0 weights are 0..15, so the dot
 * is taken unsigned and 8 x the activation block's sum (the pack's s) taken off; Q8_0's
 * unpacked quants are the signed ones. Exact in int32. NG (1 or 2) column groups, the
 * second nb blocks after the first (the pack's layout); acc[(k * 4 + r) * 2 + h]: row r,
 * columns 4h..4h+3 of group k. */
__attribute__((always_inline)) static inline void
gemm_neon(const int sdot, const int q4, const int NG, const unsigned char *wu, const float *wd,
          int64_t nb, const int8_t *q, const float *d, const int32_t *s, float out[64]) {
    const int wbs = q4 ? 32 : 64; /* unpacked bytes per row and block */
    float32x4_t acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 8 * NG; i++) acc[i] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 2
        for (int k = 0; k < NG; k++) {
            const int8_t *yb = q + (k * nb + b) * 256;
            const float *dx = d + (k * nb + b) * 8;
            const int32_t *sy = s + (k * nb + b) * 8;
            float32x4_t dx0 = vld1q_f32(dx), dx1 = vld1q_f32(dx + 4);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                int32x4_t i0 = vdupq_n_s32(0), i1 = vdupq_n_s32(0);
                if (sdot)
                    pl_gemm_groups_sdot(wu + (b * 4 + r) * wbs, yb, 0, 8, &i0, &i1);
                else
                    pl_gemm_groups_mull(wu + (b * 4 + r) * wbs, yb, 0, 8, &i0, &i1);
                if (q4) i0 = vsubq_s32(i0, vld1q_s32(sy)), i1 = vsubq_s32(i1, vld1q_s32(sy + 4));
                float32x4_t dw = vdupq_n_f32(wd[b * 4 + r]);
                float32x4_t *a = acc + (k * 4 + r) * 2;
                a[0] = vaddq_f32(a[0], vmulq_f32(vmulq_f32(vcvtq_f32_s32(i0), dw), dx0));
                a[1] = vaddq_f32(a[1], vmulq_f32(vmulq_f32(vcvtq_f32_s32(i1), dw), dx1));
            }
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8 * NG; i++) vst1q_f32(out + 4 * i, acc[i]);
}

/* The eight instances: SDOT or plain, Q4_0 or Q8_0, one or two column groups. */
#define PL_GEMM(name, attr, sdot, q4, ng)                                                          \
    attr static void name(const unsigned char *wu, const float *wd, int64_t nb, const int8_t *q,   \
                          const float *d, const int32_t *s, float out[64]) {                       \
        gemm_neon(sdot, q4, ng, wu, wd, nb, q, d, s, out);                                         \
    }
PL_GEMM(gemm_q4_1_dot, PL_DOTPROD, 1, 1, 1)
PL_GEMM(gemm_q4_2_dot, PL_DOTPROD, 1, 1, 2)
PL_GEMM(gemm_q8_1_dot, PL_DOTPROD, 1, 0, 1)
PL_GEMM(gemm_q8_2_dot, PL_DOTPROD, 1, 0, 2)
PL_GEMM(gemm_q4_1, , 0, 1, 1)
PL_GEMM(gemm_q4_2, , 0, 1, 2)
PL_GEMM(gemm_q8_1, , 0, 0, 1)
PL_GEMM(gemm_q8_2, , 0, 0, 2)

void pl_cpu_gemm_tile_neon(int q4, int ng, const unsigned char *wu, const float *wd, int64_t nb,
                           const int8_t *q, const float *d, const int32_t *s, float *out) {
    int sdot = pl_cpu_neon_level() == 2;
    if (ng == 2)
        (sdot ? (q4 ? gemm_q4_2_dot : gemm_q8_2_dot) : (q4 ? gemm_q4_2 : gemm_q8_2))(wu, wd, nb, q,
                                                                                     d, s, out);
    else
        (sdot ? (q4 ? gemm_q4_1_dot : gemm_q8_1_dot) : (q4 ? gemm_q4_1 : gemm_q8_1))(wu, wd, nb, q,
                                                                                     d, s, out);
}

/* The activation quantisation's vector helpers (pl_cpu_quant_act, _k in cpu_qdot.c): the
 * largest |x| of n finite values (0 if any is NaN or infinite: that block goes the scalar
 * way), exact in any order; and roundf(x * is) for 32 values: FRINTA rounds half away from
 * zero as roundf does, the product is the scalar code's, out-of-range values (only from a
 * huge is) become 0 as there. */
int pl_cpu_amax_neon(const float *x, int n, float *amax) {
    const float32x4_t inf = vdupq_n_f32(INFINITY);
    float32x4_t m = vdupq_n_f32(0);
    uint32x4_t ok = vdupq_n_u32(~0u);
    for (int i = 0; i < n; i += 4) {
        float32x4_t a = vabsq_f32(vld1q_f32(x + i));
        ok = vandq_u32(ok, vcltq_f32(a, inf)); /* false for NaN and infinity */
        m = vmaxq_f32(m, a);
    }
    if (vminvq_u32(ok) == 0) return 0;
    *amax = vmaxvq_f32(m);
    return 1;
}

void pl_cpu_round32_neon(const float *x, float is, int8_t *q) {
    const float32x4_t lo = vdupq_n_f32(-128.0f), hi = vdupq_n_f32(127.0f);
    int16x8_t h[4];
    for (int i = 0; i < 4; i++) {
        int32x4_t n[2];
        for (int k = 0; k < 2; k++) {
            float32x4_t t = vrndaq_f32(vmulq_n_f32(vld1q_f32(x + 8 * i + 4 * k), is));
            uint32x4_t in = vandq_u32(vcgeq_f32(t, lo), vcleq_f32(t, hi));
            n[k] = vandq_s32(vcvtq_s32_f32(t), vreinterpretq_s32_u32(in));
        }
        h[i] = vcombine_s16(vmovn_s32(n[0]), vmovn_s32(n[1])); /* all in -128..127: exact */
    }
    vst1q_s8(q, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
    vst1q_s8(q + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
}

#else

int pl_cpu_neon_level(void) {
    return 0;
}

#endif
