/* cpu_kdot_neon.c - the arm64 (NEON) kernels of the K-quants' act_q8 dot (cpu_kdot.c): one
 * Q4_K, Q5_K or Q6_K weight row against 1 or 4 activation rows (decode, short batches),
 * with SDOT or plain NEON (cpu_neon.h), chosen by pl_cpu_kdot through pl_cpu_neon_level.
 *
 * Per super-block the weight's 256 quants are unpacked once, unsigned (Q4_K 0..15, Q5_K
 * 0..31, Q6_K 0..63, so as int8 they keep their value) in element order, with its scales
 * and mins as int16, for all its activation rows. The integer sums are cpu_kdot.c's, exact
 * in int32: Q4_K/Q5_K isum = sum of scale_j * dot_j over the 8 sub-blocks of 32, imin =
 * sum of min_j * (the two sums of 16 of sub-block j); Q6_K isum = sum of scale_i * dot_i
 * over the 16 groups of 16, less 32 * sum of scale_i * (sum of group i). Then each row
 * takes pl_cpu_k_step, the portable path's float step: the same bits.
 *
 * Not here (yet): the K-quants' prefill GEMM (pl_cpu_kgemm_*, AVX2 only), so arm64 batches
 * of K-quant weights take these row kernels, 4 activation rows at a time. */
#include "cpu_internal.h"
#include "format/quant.h"
#include "format/quant_blocks.h"

#if defined(__aarch64__)
#include "cpu_neon.h"

/* A super-block's quants (q[i]: values 16i..16i+15) and scales (as kq_avx2 in cpu_kdot.c:
 * Q4_K/Q5_K sc[0..7] the sub-block scales, sc[8..15] the mins; Q6_K the 16 scales). */
static inline void kq_neon(const uint32_t t, const unsigned char *w, int8x16_t q[16],
                           int16_t sc[16]) {
    const uint8x16_t lo4 = vdupq_n_u8(15), b1 = vdupq_n_u8(1), b3 = vdupq_n_u8(3);
    uint8x16_t u[16];
    if (t != PL_TYPE_Q6_K) {
        const int q5 = t == PL_TYPE_Q5_K;
        const uint8_t *qs = w + (q5 ? 48 : 16);
        uint32_t o[4];
        pl_cpu_k4_scales(w, o);
        uint8_t ob[16];
        memcpy(ob, o, 16);
        uint8x16_t ov = vld1q_u8(ob);
        vst1q_s16(sc, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(ov))));
        vst1q_s16(sc + 8, vreinterpretq_s16_u16(vmovl_high_u8(ov)));
        /* qh byte l (l < 32): bit j is the fifth bit of value 32j + l */
        uint8x16_t h0 = q5 ? vld1q_u8(w + 16) : vdupq_n_u8(0);
        uint8x16_t h1 = q5 ? vld1q_u8(w + 32) : vdupq_n_u8(0);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) { /* values 64j..64j+63: sub-blocks 2j and 2j+1 */
            uint8x16_t x0 = vld1q_u8(qs + 32 * j), x1 = vld1q_u8(qs + 32 * j + 16);
            u[4 * j] = vandq_u8(x0, lo4), u[4 * j + 1] = vandq_u8(x1, lo4);
            u[4 * j + 2] = vshrq_n_u8(x0, 4), u[4 * j + 3] = vshrq_n_u8(x1, 4);
            if (q5)
                for (int k = 0; k < 4; k++) { /* bit 2j for the low nibbles, 2j+1 the high */
                    uint8x16_t h = k & 1 ? h1 : h0;
                    h = vshlq_u8(h, vdupq_n_s8((int8_t)(-(2 * j + k / 2))));
                    u[4 * j + k] = vorrq_u8(u[4 * j + k], vshlq_n_u8(vandq_u8(h, b1), 4));
                }
        }
    } else {
        const pl_block_q6_K *k = (const pl_block_q6_K *)w;
        int8x16_t s8 = vld1q_s8(k->scales);
        vst1q_s16(sc, vmovl_s8(vget_low_s8(s8)));
        vst1q_s16(sc + 8, vmovl_high_s8(s8));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) { /* values 128h + 32p + l: l from ql[64h + 32(p & 1) + l] */
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++)
#pragma GCC unroll 2
                for (int e = 0; e < 2; e++) { /* l = 16e..16e+15 */
                    uint8x16_t l = vld1q_u8(k->ql + 64 * h + 32 * (p & 1) + 16 * e);
                    uint8x16_t hh = vld1q_u8(k->qh + 32 * h + 16 * e);
                    l = p < 2 ? vandq_u8(l, lo4) : vshrq_n_u8(l, 4);
                    hh = vandq_u8(vshlq_u8(hh, vdupq_n_s8((int8_t)(-2 * p))), b3);
                    u[8 * h + 2 * p + e] = vorrq_u8(l, vshlq_n_u8(hh, 4));
                }
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) q[i] = vreinterpretq_s8_u8(u[i]);
}

/* One weight row against C (1 or 4) activation rows. */
__attribute__((always_inline)) static inline void
kdot_neon(const int sdot, const uint32_t t, const int C, const unsigned char *w,
          const int8_t *const y[], const float *const yd[], const int16_t *const ys[], int64_t nsb,
          float *out) {
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    float sum[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < nsb; b++, w += bs) {
        int8x16_t q[16];
        int16_t sc[16];
        kq_neon(t, w, q, sc);
        uint16_t hd[2] = {0, 0}; /* d and dmin (Q6_K: d, at its end) */
        memcpy(hd, t == PL_TYPE_Q6_K ? w + 208 : w, t == PL_TYPE_Q6_K ? 2 : 4);
        const float dw = pl_f16_to_f32(hd[0]), dm = pl_f16_to_f32(hd[1]);
        const int16x8_t m0 = vld1q_s16(sc), m1 = vld1q_s16(sc + 8);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const int8_t *yb = y[c] + b * 256;
            const int16x8_t s0 = vld1q_s16(ys[c] + b * 16), s1 = vld1q_s16(ys[c] + b * 16 + 8);
            int32x4_t acc = vdupq_n_s32(0);
            int32_t isum, imin = 0;
            if (t != PL_TYPE_Q6_K) {
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    int8x16_t y0 = vld1q_s8(yb + 32 * j), y1 = vld1q_s8(yb + 32 * j + 16);
                    int32x4_t d = sdot ? pl_dot32_sdot(q[2 * j], q[2 * j + 1], y0, y1)
                                       : pl_dot32_mull(q[2 * j], q[2 * j + 1], y0, y1);
                    acc = vmlaq_n_s32(acc, d, sc[j]);
                }
                isum = vaddvq_s32(acc);
                /* the sums of 32 (pairs of the 16-sums) times mins 0..3 and 4..7 */
                int32x4_t mn = vmulq_s32(vpaddlq_s16(s0), vmovl_s16(vget_low_s16(m1)));
                imin = vaddvq_s32(vmlaq_s32(mn, vpaddlq_s16(s1), vmovl_s16(vget_high_s16(m1))));
            } else {
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) {
                    int8x16_t yv = vld1q_s8(yb + 16 * i);
                    int32x4_t d = sdot ? pl_dot16_sdot(q[i], yv) : pl_dot16_mull(q[i], yv);
                    acc = vmlaq_n_s32(acc, d, sc[i]);
                }
                /* less 32 x scale_i x (sum of group i) */
                int32x4_t o = vmull_s16(vget_low_s16(s0), vget_low_s16(m0));
                o = vmlal_high_s16(o, s0, m0);
                o = vmlal_s16(o, vget_low_s16(s1), vget_low_s16(m1));
                o = vmlal_high_s16(o, s1, m1);
                isum = vaddvq_s32(vsubq_s32(acc, vshlq_n_s32(o, 5)));
            }
            sum[c] = pl_cpu_k_step(sum[c], t, dw, dm, isum, imin, yd[c][b]);
        }
    }
    for (int c = 0; c < C; c++) out[c] = sum[c];
}

/* The instances: SDOT or plain, each type, 1 or 4 activation rows. */
#define PL_KDOT(name, attr, sdot, t, C)                                                            \
    attr static void name(const unsigned char *w, const int8_t *const y[],                         \
                          const float *const yd[], const int16_t *const ys[], int64_t nsb,         \
                          float *out) {                                                            \
        kdot_neon(sdot, t, C, w, y, yd, ys, nsb, out);                                             \
    }
PL_KDOT(kdot_q4k_1_dot, PL_DOTPROD, 1, PL_TYPE_Q4_K, 1)
PL_KDOT(kdot_q4k_4_dot, PL_DOTPROD, 1, PL_TYPE_Q4_K, 4)
PL_KDOT(kdot_q5k_1_dot, PL_DOTPROD, 1, PL_TYPE_Q5_K, 1)
PL_KDOT(kdot_q5k_4_dot, PL_DOTPROD, 1, PL_TYPE_Q5_K, 4)
PL_KDOT(kdot_q6k_1_dot, PL_DOTPROD, 1, PL_TYPE_Q6_K, 1)
PL_KDOT(kdot_q6k_4_dot, PL_DOTPROD, 1, PL_TYPE_Q6_K, 4)
PL_KDOT(kdot_q4k_1, , 0, PL_TYPE_Q4_K, 1)
PL_KDOT(kdot_q4k_4, , 0, PL_TYPE_Q4_K, 4)
PL_KDOT(kdot_q5k_1, , 0, PL_TYPE_Q5_K, 1)
PL_KDOT(kdot_q5k_4, , 0, PL_TYPE_Q5_K, 4)
PL_KDOT(kdot_q6k_1, , 0, PL_TYPE_Q6_K, 1)
PL_KDOT(kdot_q6k_4, , 0, PL_TYPE_Q6_K, 4)

pl_cpu_kdot_fn *pl_cpu_kdot_neon(uint32_t t, int four) {
    static pl_cpu_kdot_fn *const fns[2][3][2] = {
        /* [SDOT][Q4_K, Q5_K, Q6_K][1 or 4 rows] */
        {{kdot_q4k_1, kdot_q4k_4}, {kdot_q5k_1, kdot_q5k_4}, {kdot_q6k_1, kdot_q6k_4}},
        {{kdot_q4k_1_dot, kdot_q4k_4_dot},
         {kdot_q5k_1_dot, kdot_q5k_4_dot},
         {kdot_q6k_1_dot, kdot_q6k_4_dot}}};
    int ti = t == PL_TYPE_Q4_K ? 0 : t == PL_TYPE_Q5_K ? 1 : 2;
    return fns[pl_cpu_neon_level() == 2][ti][four != 0];
}

#else

/* ISO C wants a declaration in every translation unit; off arm64 this file has no other. */
typedef int pl_cpu_kdot_neon_unused;

#endif
