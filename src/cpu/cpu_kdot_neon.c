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
 * And the K-quants' prefill GEMM (4 weight rows x 8 or 16 columns), below. */
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

/* The instances, per type and row count (n1, n2), with SDOT (suffix _dot) or without, and
 * their tables [SDOT][Q4_K, Q5_K, Q6_K][n1 or n2]: for the row dots and the GEMM below. */
#define PL_K_SET(M, base, n1, n2, sfx, attr, sdot)                                                 \
    M(base##_q4k_##n1##sfx, attr, sdot, PL_TYPE_Q4_K, n1)                                          \
    M(base##_q4k_##n2##sfx, attr, sdot, PL_TYPE_Q4_K, n2)                                          \
    M(base##_q5k_##n1##sfx, attr, sdot, PL_TYPE_Q5_K, n1)                                          \
    M(base##_q5k_##n2##sfx, attr, sdot, PL_TYPE_Q5_K, n2)                                          \
    M(base##_q6k_##n1##sfx, attr, sdot, PL_TYPE_Q6_K, n1)                                          \
    M(base##_q6k_##n2##sfx, attr, sdot, PL_TYPE_Q6_K, n2)
#define PL_K_TABLE(base, n1, n2, sfx)                                                              \
    {                                                                                              \
        {base##_q4k_##n1##sfx, base##_q4k_##n2##sfx},                                              \
            {base##_q5k_##n1##sfx, base##_q5k_##n2##sfx}, {                                        \
            base##_q6k_##n1##sfx, base##_q6k_##n2##sfx                                             \
        }                                                                                          \
    }
static int k_index(uint32_t t) {
    return t == PL_TYPE_Q4_K ? 0 : t == PL_TYPE_Q5_K ? 1 : 2;
}

#define PL_KDOT(name, attr, sdot, t, C)                                                            \
    attr static void name(const unsigned char *w, const int8_t *const y[],                         \
                          const float *const yd[], const int16_t *const ys[], int64_t nsb,         \
                          float *out) {                                                            \
        kdot_neon(sdot, t, C, w, y, yd, ys, nsb, out);                                             \
    }
PL_K_SET(PL_KDOT, kdot, 1, 4, _dot, PL_DOTPROD, 1)
PL_K_SET(PL_KDOT, kdot, 1, 4, , , 0)

pl_cpu_kdot_fn *pl_cpu_kdot_neon(uint32_t t, int four) {
    static pl_cpu_kdot_fn *const fns[2][3][2] = {PL_K_TABLE(kdot, 1, 4, ),
                                                 PL_K_TABLE(kdot, 1, 4, _dot)};
    return fns[pl_cpu_neon_level() == 2][k_index(t)][four != 0];
}

/* The K-quants' prefill GEMM (pl_cpu_kgemm_*, layouts in cpu_internal.h), as the AVX2 one:
 * an output lane per activation column. Per super-block, row and 32 values, the dot of the
 * unpacked unsigned quants with the 8 packed columns (pl_gemm_groups_*, 16 values a half
 * for Q6_K's scale per 16) times the scale, in int32; the mins (Q4_K/Q5_K) or Q6_K's
 * offset of 32 from the pack's int16 sums of 16; then pl_cpu_k_step's float operations on
 * each lane, in its order. */
void pl_cpu_kq_row_neon(uint32_t t, const unsigned char *blk, uint8_t *wq, int16_t *sc) {
    int8x16_t q[16];
    kq_neon(t, blk, q, sc);
    for (int i = 0; i < 16; i++) vst1q_s8((int8_t *)wq + 16 * i, q[i]);
}

__attribute__((always_inline)) static inline void
kgemm_neon(const int sdot, const uint32_t t, const int NG, const uint8_t *wq, const int16_t *wsc,
           const float *wd, int64_t nsb, const int8_t *q, const float *d, const int16_t *s,
           float out[64]) {
    float32x4_t acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 8 * NG; i++) acc[i] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nsb; b++)
        for (int k = 0; k < NG; k++) {
            const int8_t *yk = q + (k * nsb + b) * 2048; /* values 32v.. at yk + 256 v */
            const int16_t *sk = s + (k * nsb + b) * 128;
            const float32x4_t dy0 = vld1q_f32(d + (k * nsb + b) * 8);
            const float32x4_t dy1 = vld1q_f32(d + (k * nsb + b) * 8 + 4);
            for (int r = 0; r < 4; r++) {
                const uint8_t *wr = wq + (b * 4 + r) * 256;
                const int16_t *sc = wsc + (b * 4 + r) * 16;
                int32x4_t is0 = vdupq_n_s32(0), is1 = is0, mn0 = is0, mn1 = is0;
                for (int v = 0; v < 8; v++)
                    for (int h = 0; h < (t == PL_TYPE_Q6_K ? 2 : 1); h++) {
                        /* Q4_K/Q5_K: the 32 values at sub-block v's scale; Q6_K: each 16 */
                        int g0 = t == PL_TYPE_Q6_K ? 4 * h : 0, g1 = t == PL_TYPE_Q6_K ? g0 + 4 : 8;
                        int16_t m = t == PL_TYPE_Q6_K ? sc[2 * v + h] : sc[v];
                        int32x4_t l = vdupq_n_s32(0), u = vdupq_n_s32(0);
                        if (sdot)
                            pl_gemm_groups_sdot(wr + 32 * v, yk + 256 * v, g0, g1, &l, &u);
                        else
                            pl_gemm_groups_mull(wr + 32 * v, yk + 256 * v, g0, g1, &l, &u);
                        is0 = vmlaq_n_s32(is0, l, m), is1 = vmlaq_n_s32(is1, u, m);
                    }
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) { /* the sums 2j, 2j+1 of columns 0..3, 4..7 */
                    int16x8_t s0 = vld1q_s16(sk + 16 * j), s1 = vld1q_s16(sk + 16 * j + 8);
                    if (t != PL_TYPE_Q6_K) { /* min j times the sum of 32 */
                        mn0 = vmlaq_n_s32(mn0, vpaddlq_s16(s0), sc[8 + j]);
                        mn1 = vmlaq_n_s32(mn1, vpaddlq_s16(s1), sc[8 + j]);
                    } else { /* scale 2j times sum 2j plus scale 2j+1 times sum 2j+1 */
                        uint32_t pair =
                            (uint32_t)(uint16_t)sc[2 * j + 1] << 16 | (uint16_t)sc[2 * j];
                        int16x8_t m = vreinterpretq_s16_u32(vdupq_n_u32(pair));
                        mn0 =
                            vaddq_s32(mn0, vpaddq_s32(vmull_s16(vget_low_s16(s0), vget_low_s16(m)),
                                                      vmull_high_s16(s0, m)));
                        mn1 =
                            vaddq_s32(mn1, vpaddq_s32(vmull_s16(vget_low_s16(s1), vget_low_s16(m)),
                                                      vmull_high_s16(s1, m)));
                    }
                }
                const float *dw = wd + (b * 4 + r) * 2;
                float32x4_t a0 = vmulq_n_f32(dy0, dw[0]), a1 = vmulq_n_f32(dy1, dw[0]), x0, x1;
                if (t == PL_TYPE_Q6_K) {
                    x0 = vmulq_f32(vcvtq_f32_s32(vsubq_s32(is0, vshlq_n_s32(mn0, 5))), a0);
                    x1 = vmulq_f32(vcvtq_f32_s32(vsubq_s32(is1, vshlq_n_s32(mn1, 5))), a1);
                } else {
                    float32x4_t m0 = vmulq_n_f32(dy0, dw[1]), m1 = vmulq_n_f32(dy1, dw[1]);
                    x0 = vsubq_f32(vmulq_f32(vcvtq_f32_s32(is0), a0),
                                   vmulq_f32(vcvtq_f32_s32(mn0), m0));
                    x1 = vsubq_f32(vmulq_f32(vcvtq_f32_s32(is1), a1),
                                   vmulq_f32(vcvtq_f32_s32(mn1), m1));
                }
                float32x4_t *o = acc + (k * 4 + r) * 2;
                o[0] = vaddq_f32(o[0], x0), o[1] = vaddq_f32(o[1], x1);
            }
        }
#pragma GCC unroll 16
    for (int i = 0; i < 8 * NG; i++) vst1q_f32(out + 4 * i, acc[i]);
}

#define PL_KGEMM(name, attr, sdot, t, ng)                                                          \
    attr static void name(const uint8_t *wq, const int16_t *wsc, const float *wd, int64_t nsb,     \
                          const int8_t *q, const float *d, const int16_t *s, float out[64]) {      \
        kgemm_neon(sdot, t, ng, wq, wsc, wd, nsb, q, d, s, out);                                   \
    }
PL_K_SET(PL_KGEMM, kgemm, 1, 2, _dot, PL_DOTPROD, 1)
PL_K_SET(PL_KGEMM, kgemm, 1, 2, , , 0)

void pl_cpu_kgemm_tile_neon(uint32_t t, int ng, const uint8_t *wq, const int16_t *wsc,
                            const float *wd, int64_t nsb, const int8_t *q, const float *d,
                            const int16_t *s, float *out) {
    typedef void fn(const uint8_t *, const int16_t *, const float *, int64_t, const int8_t *,
                    const float *, const int16_t *, float *);
    static fn *const fns[2][3][2] = {PL_K_TABLE(kgemm, 1, 2, ), PL_K_TABLE(kgemm, 1, 2, _dot)};
    fns[pl_cpu_neon_level() == 2][k_index(t)][ng == 2](wq, wsc, wd, nsb, q, d, s, out);
}

#else

/* ISO C wants a declaration in every translation unit; off arm64 this file has no other. */
typedef int pl_cpu_kdot_neon_unused;

#endif
