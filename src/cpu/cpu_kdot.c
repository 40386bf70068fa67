/* cpu_kdot.c - rows of Q4_K, Q5_K or Q6_K weights against activation rows quantised per
 * 256-value super-block (the act_q8 matmul for K-quants, cpu_matmul.c): a weight row x 1
 * activation row (decode) or x 4 (a batch), each weight super-block unpacked once for all
 * its activation rows.
 *
 * The activations (pl_cpu_quant_act_k): per super-block of 256 values, one float scale
 * d = max|x| / 127, quants q = roundf(x / d) in -127..127, and each 16 quants' sum (the
 * K-quants' mins and Q6_K's offset of 32 then cost one integer product per sub-block).
 *
 * Per super-block the dot is integer and exact: Q4_K/Q5_K, isum = sum over the 8 sub-blocks
 * of scale_j * dot(q_j, y_j), imin = sum of min_j * (sum of y_j); Q6_K, isum = sum over the
 * 16 groups of scale_i * (dot(q_i, y_i) - 32 * sum of y_i). Then, in super-block order,
 * sum += (float)isum * (d_w * d_x) - (float)imin * (dmin_w * d_x) (Q6_K: no second term),
 * the same float operations on every path (no fused multiply-add), so the AVX2 path and the
 * portable one give bit-identical results. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "format/quant.h"
#include "format/quant_blocks.h"
#include "format/quant_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PL_KDOT_X86 1
#endif

int pl_cpu_kdot_type(uint32_t t) {
    return t == PL_TYPE_Q4_K || t == PL_TYPE_Q5_K || t == PL_TYPE_Q6_K;
}

/* ---- the portable reference ---- */

/* One super-block's integer sums for Q4_K/Q5_K (5: with the fifth bits). */
static void k45_sums(const unsigned char *blk, int q5, const int8_t *y, const int16_t *ys,
                     int32_t *isum, int32_t *imin) {
    const uint8_t *scales = blk + 4, *qh = q5 ? blk + 16 : NULL, *qs = blk + (q5 ? 48 : 16);
    int32_t s = 0, m = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        pl_k4_scale_min(j, scales, &sc, &mn);
        const uint8_t *q = qs + 32 * (j / 2);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {
            int v = j & 1 ? q[l] >> 4 : q[l] & 15;
            if (q5 && (qh[l] >> j & 1)) v += 16;
            dot += v * y[32 * j + l];
        }
        s += sc * dot;
        m += mn * (ys[2 * j] + ys[2 * j + 1]);
    }
    *isum = s, *imin = m;
}

/* One super-block's integer sum for Q6_K. */
static int32_t k6_sum(const unsigned char *blk, const int8_t *y, const int16_t *ys) {
    const pl_block_q6_K *b = (const pl_block_q6_K *)blk;
    int32_t s = 0;
    for (int i = 0; i < 16; i++) {         /* group i: values 16i..16i+15 */
        int h = i / 8, part = (i % 8) / 2; /* half of 128, and which 32 in it */
        int32_t dot = 0;
        for (int e = 0; e < 16; e++) {
            int l = (i % 2) * 16 + e; /* 0..31 */
            int lo = b->ql[64 * h + l + (part & 1 ? 32 : 0)];
            lo = part < 2 ? lo & 15 : lo >> 4;
            int hi = b->qh[32 * h + l] >> (2 * part) & 3;
            dot += (lo | hi << 4) * y[16 * i + e];
        }
        s += b->scales[i] * (dot - 32 * ys[i]);
    }
    return s;
}

static inline float half_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pl_f16_to_f32(h);
}

/* The float step of one super-block: the same on every path. */
static inline float k_step(float sum, uint32_t t, const unsigned char *blk, int32_t isum,
                           int32_t imin, float dy) {
    if (t == PL_TYPE_Q6_K) return sum + (float)isum * (half_at(blk + 208) * dy);
    return sum + ((float)isum * (half_at(blk) * dy) - (float)imin * (half_at(blk + 2) * dy));
}

float pl_cpu_kdot_row_portable(uint32_t t, const unsigned char *w, const int8_t *y, const float *yd,
                               const int16_t *ys, int64_t nsb) {
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    float sum = 0;
    for (int64_t b = 0; b < nsb; b++, w += bs, y += 256, ys += 16) {
        int32_t isum, imin = 0;
        if (t == PL_TYPE_Q6_K)
            isum = k6_sum(w, y, ys);
        else
            k45_sums(w, t == PL_TYPE_Q5_K, y, ys, &isum, &imin);
        sum = k_step(sum, t, w, isum, imin, yd[b]);
    }
    return sum;
}

/* ---- AVX2 ---- */

#ifdef PL_KDOT_X86
__attribute__((target("avx2"))) static inline int32_t hsum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* One weight row against C activation rows (C a compile-time constant where inlined).
 * maddubs pairs: unsigned quants (Q4_K <= 15, Q5_K <= 31, Q6_K <= 63) times activations
 * (|y| <= 127), at most 2 * 63 * 127 = 16002: no int16 saturation; madd with the
 * sub-block's scale widens them to int32 (exact: see the ranges in the file comment). */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
kdot_avx2(const uint32_t t, const int C, const unsigned char *w, const int8_t *const y[],
          const float *const yd[], const int16_t *const ys[], int64_t nsb, float *out) {
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    const __m256i lo4 = _mm256_set1_epi8(15), b1 = _mm256_set1_epi8(1), b3 = _mm256_set1_epi8(3);
    float sum[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < nsb; b++, w += bs) {
        __m256i acc[4];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_si256();
        int32_t imin[4] = {0, 0, 0, 0};
        if (t != PL_TYPE_Q6_K) {
            const int q5 = t == PL_TYPE_Q5_K;
            const uint8_t *scales = w + 4, *qs = w + (q5 ? 48 : 16);
            uint8_t sc[8], mn[8];
            for (int j = 0; j < 8; j++) pl_k4_scale_min(j, scales, &sc[j], &mn[j]);
            __m256i hb =
                q5 ? _mm256_loadu_si256((const __m256i *)(w + 16)) : _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) { /* values 64j..64j+63: sub-blocks 2j and 2j+1 */
                __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
                __m256i ql = _mm256_and_si256(q, lo4);
                __m256i qhi = _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4);
                if (q5) {
                    ql = _mm256_or_si256(ql, _mm256_slli_epi16(_mm256_and_si256(hb, b1), 4));
                    hb = _mm256_srli_epi16(hb, 1);
                    qhi = _mm256_or_si256(qhi, _mm256_slli_epi16(_mm256_and_si256(hb, b1), 4));
                    hb = _mm256_srli_epi16(hb, 1);
                }
                const __m256i s0 = _mm256_set1_epi16(sc[2 * j]),
                              s1 = _mm256_set1_epi16(sc[2 * j + 1]);
#pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    const int8_t *yc = y[c] + b * 256 + 64 * j;
                    __m256i p0 = _mm256_maddubs_epi16(ql, _mm256_loadu_si256((const __m256i *)yc));
                    __m256i p1 =
                        _mm256_maddubs_epi16(qhi, _mm256_loadu_si256((const __m256i *)(yc + 32)));
                    acc[c] = _mm256_add_epi32(acc[c], _mm256_add_epi32(_mm256_madd_epi16(p0, s0),
                                                                       _mm256_madd_epi16(p1, s1)));
                }
            }
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const int16_t *s = ys[c] + b * 16;
                for (int j = 0; j < 8; j++) imin[c] += mn[j] * (s[2 * j] + s[2 * j + 1]);
            }
        } else {
            const pl_block_q6_K *k = (const pl_block_q6_K *)w;
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i l0 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h));
                __m256i l1 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h + 32));
                __m256i hh = _mm256_loadu_si256((const __m256i *)(k->qh + 32 * h));
                __m256i q[4];
                q[0] = _mm256_and_si256(l0, lo4);
                q[1] = _mm256_and_si256(l1, lo4);
                q[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4);
                q[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4);
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) {
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hh, 2 * p), b3);
                    q[p] = _mm256_or_si256(q[p], _mm256_slli_epi16(hi, 4));
                    const int8_t *s = k->scales + 8 * h + 2 * p;
                    __m256i sv = _mm256_set_m128i(_mm_set1_epi16(s[1]), _mm_set1_epi16(s[0]));
#pragma GCC unroll 4
                    for (int c = 0; c < C; c++) {
                        const int8_t *yc = y[c] + b * 256 + 128 * h + 32 * p;
                        __m256i pr =
                            _mm256_maddubs_epi16(q[p], _mm256_loadu_si256((const __m256i *)yc));
                        acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(pr, sv));
                    }
                }
            }
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const int16_t *s = ys[c] + b * 16;
                for (int i = 0; i < 16; i++) imin[c] += k->scales[i] * s[i];
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            int32_t isum = hsum8(acc[c]);
            if (t == PL_TYPE_Q6_K) isum -= 32 * imin[c];
            sum[c] = k_step(sum[c], t, w, isum, imin[c], yd[c][b]);
        }
    }
    for (int c = 0; c < C; c++) out[c] = sum[c];
}

/* The instances: each type, 1 or 4 activation rows. */
#define PL_KDOT(name, t, C)                                                                        \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const unsigned char *w, const int8_t *const y[], const float *const yd[],                  \
        const int16_t *const ys[], int64_t nsb, float *out) {                                      \
        kdot_avx2(t, C, w, y, yd, ys, nsb, out);                                                   \
    }
PL_KDOT(kdot_q4k_1, PL_TYPE_Q4_K, 1)
PL_KDOT(kdot_q4k_4, PL_TYPE_Q4_K, 4)
PL_KDOT(kdot_q5k_1, PL_TYPE_Q5_K, 1)
PL_KDOT(kdot_q5k_4, PL_TYPE_Q5_K, 4)
PL_KDOT(kdot_q6k_1, PL_TYPE_Q6_K, 1)
PL_KDOT(kdot_q6k_4, PL_TYPE_Q6_K, 4)
#endif

void pl_cpu_kdot(uint32_t t, const unsigned char *w, int nc, const int8_t *const y[],
                 const float *const yd[], const int16_t *const ys[], int64_t nsb, float *out) {
#ifdef PL_KDOT_X86
    if (pl_cpu_have_avx2()) {
        if (nc == 1) {
            (t == PL_TYPE_Q4_K   ? kdot_q4k_1
             : t == PL_TYPE_Q5_K ? kdot_q5k_1
                                 : kdot_q6k_1)(w, y, yd, ys, nsb, out);
            return;
        }
        /* columns short of 4 repeat the last one */
        const int8_t *yt[4];
        const float *ydt[4];
        const int16_t *yst[4];
        for (int c = 0; c < 4; c++) {
            int cc = c < nc ? c : nc - 1;
            yt[c] = y[cc], ydt[c] = yd[cc], yst[c] = ys[cc];
        }
        float o[4];
        (t == PL_TYPE_Q4_K   ? kdot_q4k_4
         : t == PL_TYPE_Q5_K ? kdot_q5k_4
                             : kdot_q6k_4)(w, yt, ydt, yst, nsb, o);
        for (int c = 0; c < nc; c++) out[c] = o[c];
        return;
    }
#endif
    for (int c = 0; c < nc; c++) out[c] = pl_cpu_kdot_row_portable(t, w, y[c], yd[c], ys[c], nsb);
}
