/* cpu_kdot.c - rows of Q4_K, Q5_K or Q6_K weights against activation rows quantised per
 * 256-value super-block (the act_q8 matmul for K-quants, cpu_matmul.c): a weight row x 1
 * or 4 activation rows (a short batch), 4 weight rows x 1 activation row (decode), and the
 * prefill GEMM (4 weight rows x 8 or 16 packed columns), each weight super-block unpacked
 * once for all its activation rows.
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
 * portable one give bit-identical results.
 *
 * Decode (one activation row) goes 4 weight rows a tile (pl_cpu_kdot_rows), prefill from 8
 * rows through the GEMM (pl_cpu_kgemm_*). Where the CPU has them, chosen at run time as in
 * cpu_qdot.c: AVX-512 VNNI (the decode tile 64 values a register, the GEMM's two-group tile
 * 16 columns a register with vpdpbusd), else AVX-VNNI (vpdpwssd for the scales' madd + add,
 * vpdpbusd + mullo in the GEMM), else plain AVX2; every one computes the same integers. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "format/quant.h"
#include "format/quant_blocks.h"
#include "format/quant_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_x86.h"
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
        if (t == PL_TYPE_Q6_K)
            sum = pl_cpu_k_step(sum, t, half_at(w + 208), 0, isum, 0, yd[b]);
        else
            sum = pl_cpu_k_step(sum, t, half_at(w), half_at(w + 2), isum, imin, yd[b]);
    }
    return sum;
}

/* ---- AVX2 ---- */

#ifdef PL_KDOT_X86
/* pl_cpu_k4_scales in one SSE register: the bytes [scales 0-7, mins 0-7] of the Q4_K/Q5_K
 * super-block at blk (its 12 packed bytes at blk + 4), by two shuffles and masks where the
 * scalar unpack took ~25 instructions of the AVX-512 decode tile's ~75 a row and super-block. */
__attribute__((target("avx2"), always_inline)) static inline __m128i
k4_scales_sse(const unsigned char *blk) {
    const __m128i x = _mm_loadu_si128((const __m128i *)blk); /* packed byte j at 4 + j */
    /* bytes 0-3: scales 0-3 (6 bits); 4-7: scales 4-7's low nibbles (bytes 8-11); 8-11: mins
     * 0-3; 12-15: mins 4-7's (the high nibbles of bytes 8-11) */
    const __m128i a = _mm_shuffle_epi8(
        x, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
    /* the top two bits of bytes 0-3 (scales 4-7) and 4-7 (mins 4-7), at 4-7 and 12-15 */
    const __m128i b = _mm_shuffle_epi8(
        x, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m128i lo =
        _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
    const __m128i nib =
        _mm_and_si128(_mm_srli_epi16(a, 4), /* 16-bit shift: masked per byte */
                      _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(_mm_or_si128(lo, nib), hi);
}

/* A super-block's 256 quants, unsigned (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63), in element
 * order: q[v] holds values 32v..32v+31. sc gets the scales as int16: Q4_K/Q5_K sc[0..7]
 * the sub-block scales and sc[8..15] the mins; Q6_K the 16 scales. */
__attribute__((target("avx2"), always_inline)) static inline void
kq_avx2(const uint32_t t, const unsigned char *w, __m256i q[8], int16_t sc[16]) {
    const __m256i lo4 = _mm256_set1_epi8(15), b1 = _mm256_set1_epi8(1), b3 = _mm256_set1_epi8(3);
    if (t != PL_TYPE_Q6_K) {
        const int q5 = t == PL_TYPE_Q5_K;
        const uint8_t *qs = w + (q5 ? 48 : 16);
        _mm256_storeu_si256((__m256i *)sc, _mm256_cvtepu8_epi16(k4_scales_sse(w)));
        __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(w + 16)) : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) { /* values 64j..64j+63: sub-blocks 2j and 2j+1 */
            __m256i x = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            q[2 * j] = _mm256_and_si256(x, lo4);
            q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(x, 4), lo4);
            if (q5) { /* bit 2j of qh byte l: value 64j + l; bit 2j+1: value 64j + 32 + l */
                q[2 * j] =
                    _mm256_or_si256(q[2 * j], _mm256_slli_epi16(_mm256_and_si256(hb, b1), 4));
                hb = _mm256_srli_epi16(hb, 1);
                q[2 * j + 1] =
                    _mm256_or_si256(q[2 * j + 1], _mm256_slli_epi16(_mm256_and_si256(hb, b1), 4));
                hb = _mm256_srli_epi16(hb, 1);
            }
        }
    } else {
        const pl_block_q6_K *k = (const pl_block_q6_K *)w;
        _mm256_storeu_si256((__m256i *)sc,
                            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)k->scales)));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) { /* values 128h + 32p + l */
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h + 32));
            __m256i hh = _mm256_loadu_si256((const __m256i *)(k->qh + 32 * h));
            __m256i *o = q + 4 * h;
            o[0] = _mm256_and_si256(l0, lo4);
            o[1] = _mm256_and_si256(l1, lo4);
            o[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4);
            o[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4);
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hh, 2 * p), b3);
                o[p] = _mm256_or_si256(o[p], _mm256_slli_epi16(hi, 4));
            }
        }
    }
}

/* The int16 multipliers of the 32 values 32v..32v+31 (madd with their maddubs pairs): one
 * scale (Q4_K/Q5_K) or one per 16 (Q6_K: the low 128 bits hold values 32v..32v+15). */
__attribute__((target("avx2"), always_inline)) static inline __m256i
kscale_avx2(const uint32_t t, const int16_t sc[16], int v) {
    if (t != PL_TYPE_Q6_K) return _mm256_set1_epi16(sc[v]);
    return _mm256_set_m128i(_mm_set1_epi16(sc[2 * v + 1]), _mm_set1_epi16(sc[2 * v]));
}

/* The multipliers of a super-block's 16 sums of 16 activations: Q4_K/Q5_K min j for sums
 * 2j and 2j+1, Q6_K scale i for sum i (madd'd with the sums: imin in 8 int32 parts). */
__attribute__((target("avx2"), always_inline)) static inline __m256i
kminmul_avx2(const uint32_t t, const int16_t sc[16]) {
    __m256i v = _mm256_loadu_si256((const __m256i *)sc);
    if (t == PL_TYPE_Q6_K) return v;
    __m128i m = _mm256_extracti128_si256(v, 1); /* mins 0..7 */
    return _mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m));
}

/* One weight row against C activation rows (C a compile-time constant where inlined).
 * maddubs pairs: unsigned quants (Q4_K <= 15, Q5_K <= 31, Q6_K <= 63) times activations
 * (|y| <= 127), at most 2 * 63 * 127 = 16002: no int16 saturation; madd with the
 * sub-block's scale widens them to int32 (exact: see the ranges in the file comment). */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
kdot_avx2(const uint32_t t, const int C, const unsigned char *w, const int8_t *const y[],
          const float *const yd[], const int16_t *const ys[], int64_t nsb, float *out) {
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    float sum[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < nsb; b++, w += bs) {
        __m256i acc[4], q[8];
        int16_t sc[16];
        kq_avx2(t, w, q, sc);
        uint16_t hd[2] = {0, 0}; /* d and dmin (Q6_K: d, at its end) */
        memcpy(hd, t == PL_TYPE_Q6_K ? w + 208 : w, t == PL_TYPE_Q6_K ? 2 : 4);
        const float dw = _cvtsh_ss(hd[0]), dm = _cvtsh_ss(hd[1]);
        const __m256i mm = kminmul_avx2(t, sc);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            const __m256i s = kscale_avx2(t, sc, v);
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                __m256i yv = _mm256_loadu_si256((const __m256i *)(y[c] + b * 256 + 32 * v));
                acc[c] =
                    _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[v], yv), s));
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            __m256i mv =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(ys[c] + b * 16)), mm);
            int32_t isum, imin = 0;
            if (t == PL_TYPE_Q6_K) {
                isum = hsum8(_mm256_sub_epi32(acc[c], _mm256_slli_epi32(mv, 5)));
            } else { /* both sums in one reduction */
                __m256i h = _mm256_hadd_epi32(acc[c], mv);
                __m128i x =
                    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                x = _mm_hadd_epi32(x, x);
                isum = _mm_cvtsi128_si32(x), imin = _mm_extract_epi32(x, 1);
            }
            sum[c] = pl_cpu_k_step(sum[c], t, dw, dm, isum, imin, yd[c][b]);
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

/* The end of a decode tile's super-block: the 4 rows' integer parts d[0..3] and their imin
 * (Q6_K: offset) parts d[4..7] reduced in one reduce8 (each lane's integer exact), then
 * k_step's float operations on 4 lanes, lane for lane (hd, hm: the rows' f16 d and dmin). */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m128
krows_step(const uint32_t t, __m128 sum, const __m256i d[8], const uint16_t hd[4],
           const uint16_t hm[4], float y_d) {
    const __m256i s = reduce8(d);
    __m128i is = _mm256_castsi256_si128(s), im = _mm256_extracti128_si256(s, 1);
    const __m128 dy = _mm_set1_ps(y_d);
    const __m128 dw = _mm_cvtph_ps(
        _mm_set_epi16(0, 0, 0, 0, (short)hd[3], (short)hd[2], (short)hd[1], (short)hd[0]));
    if (t == PL_TYPE_Q6_K) {
        is = _mm_sub_epi32(is, _mm_slli_epi32(im, 5));
        return _mm_add_ps(sum, _mm_mul_ps(_mm_cvtepi32_ps(is), _mm_mul_ps(dw, dy)));
    }
    const __m128 dm = _mm_cvtph_ps(
        _mm_set_epi16(0, 0, 0, 0, (short)hm[3], (short)hm[2], (short)hm[1], (short)hm[0]));
    return _mm_add_ps(sum, _mm_sub_ps(_mm_mul_ps(_mm_cvtepi32_ps(is), _mm_mul_ps(dw, dy)),
                                      _mm_mul_ps(_mm_cvtepi32_ps(im), _mm_mul_ps(dm, dy))));
}

/* Decode's tile: 4 weight rows x the one activation row. Each row's super-block is unpacked
 * and dotted as in kdot_avx2 (vnni: AVX-VNNI's vpdpwssd does the scale's madd and the add in
 * one instruction), but the 4 rows' sums and mins come out of one reduction (reduce8: lanes
 * 0-3 the rows' isum parts, 4-7 their imin or Q6_K offset parts, each lane's integer exact),
 * and the float step runs on 4 lanes at once, k_step's operations lane for lane: the same
 * bits as the one-row kernel. The weights are read row after row, KROWS_CHUNK super-blocks
 * of a row at a time (the whole row up to k = 16384), the rows' integer parts kept for the
 * float steps that follow in super-block order: the 4 rows are then one sequential stream,
 * which the hardware prefetcher follows. Read super-block by super-block across the 4 rows
 * (4 short streams, even with the next tile prefetched in software) decode was 20-35%
 * slower than the one-row kernel's at 1 thread on this machine, for all the fewer
 * instructions; in chunks of 16 super-blocks, a longer row (ffn_down: k = 6144, 14336) went
 * back and forth between the 4 rows' chunks and streamed at about half speed (16 KiB of
 * parts on the stack for 64; docs/cpu-notes.md, eighteenth session). */
#define KROWS_CHUNK 64
/* ... and each super-block's bytes KROWS_AHEAD bytes on are prefetched as it is read: the
 * hardware prefetcher alone kept a 1-thread decode of qwen3-1.7b Q4_K_M at ~15 GB/s of
 * weights on the test machine (Zen 4, AVX-512 tile), ~19 with this (alternating runs on a
 * noisy VM; the distance was picked from a sweep of builds that lacked the Makefile's
 * flags: docs/cpu-notes.md). A prefetch never faults, past the weights' end included.
 * (__builtin_prefetch: _mm_prefetch in this untargeted helper compiled to nothing here.) */
#define KROWS_AHEAD 6144
static inline void krows_prefetch(const unsigned char *p, int bs) {
    for (int o = 0; o < bs; o += 64) __builtin_prefetch(p + KROWS_AHEAD + o, 0, 3);
}
__attribute__((target("avx2,f16c"), always_inline)) static inline void
krows_avx2(const int vnni, const uint32_t t, const unsigned char *const w[4], const int8_t *y,
           const float *yd, const int16_t *ys, int64_t nsb, float out[4]) {
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    __m128 sum = _mm_setzero_ps();
    for (int64_t b0 = 0; b0 < nsb; b0 += KROWS_CHUNK) {
        const int nb = nsb - b0 < KROWS_CHUNK ? (int)(nsb - b0) : KROWS_CHUNK;
        __m256i d[KROWS_CHUNK][8];
        uint16_t hd[KROWS_CHUNK][4], hm[KROWS_CHUNK][4];
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < nb; i++) {
                const int64_t b = b0 + i;
                const unsigned char *p = w[r] + b * bs;
                krows_prefetch(p, bs);
                __m256i q[8];
                int16_t sc[16];
                kq_avx2(t, p, q, sc);
                memcpy(&hd[i][r], t == PL_TYPE_Q6_K ? p + 208 : p, 2);
                memcpy(&hm[i][r], t == PL_TYPE_Q6_K ? p + 208 : p + 2, 2);
                __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int v = 0; v < 8; v++) {
                    __m256i pr = _mm256_maddubs_epi16(
                        q[v], _mm256_loadu_si256((const __m256i *)(y + b * 256 + 32 * v)));
                    const __m256i s = kscale_avx2(t, sc, v);
                    acc =
                        vnni ? dpwssd(acc, pr, s) : _mm256_add_epi32(acc, _mm256_madd_epi16(pr, s));
                }
                d[i][r] = acc;
                d[i][4 + r] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(ys + b * 16)),
                                                kminmul_avx2(t, sc));
            }
        for (int i = 0; i < nb; i++) sum = krows_step(t, sum, d[i], hd[i], hm[i], yd[b0 + i]);
    }
    _mm_storeu_ps(out, sum);
}

typedef void krows_fn(const unsigned char *const w[4], const int8_t *y, const float *yd,
                      const int16_t *ys, int64_t nsb, float out[4]);
#define PL_KROWS(name, vnni, t)                                                                    \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const unsigned char *const w[4], const int8_t *y, const float *yd, const int16_t *ys,      \
        int64_t nsb, float out[4]) {                                                               \
        krows_avx2(vnni, t, w, y, yd, ys, nsb, out);                                               \
    }
PL_KROWS(krows_q4k, 0, PL_TYPE_Q4_K)
PL_KROWS(krows_q5k, 0, PL_TYPE_Q5_K)
PL_KROWS(krows_q6k, 0, PL_TYPE_Q6_K)
PL_KROWS(krows_q4k_vnni, 1, PL_TYPE_Q4_K)
PL_KROWS(krows_q5k_vnni, 1, PL_TYPE_Q5_K)
PL_KROWS(krows_q6k_vnni, 1, PL_TYPE_Q6_K)
/* [vnni][Q4_K, Q5_K, Q6_K] */
static krows_fn *const krows[2][3] = {{krows_q4k, krows_q5k, krows_q6k},
                                      {krows_q4k_vnni, krows_q5k_vnni, krows_q6k_vnni}};

/* ---- the prefill GEMM for K-quants (AVX2; NEON in cpu_kdot_neon.c) ----
 * As the Q4_0/Q8_0 GEMM (cpu_qdot.c): an output lane per activation column. The pack is
 * that GEMM's quant layout per 32 values ([g][c][4]), the 8 columns' float scales per
 * super-block, and their sums of 16 as int16 pairs (column c: sums 2j and 2j+1), so one
 * madd gives 8 columns' min or offset term of a pair of groups. Each weight value's byte
 * is broadcast (4 at a time) and maddubs'd with 8 columns; the int16 pair sums are added
 * for as many steps as cannot overflow (Q4_K 8 steps: 8 x 2 x 15 x 127 = 30480; Q5_K 4:
 * 4 x 2 x 31 x 127 = 31496; Q6_K 2: 2 x 2 x 63 x 127 = 32004), then madd'd with the
 * (sub-)block's scale into int32. Per super-block each lane then takes k_step's float
 * operations in its order. */
__attribute__((target("avx2"))) static inline __m256i bcast4(const unsigned char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The int16 pair that multiplies a column's sums of 16 number 2j and 2j + 1 (one madd
 * lane): Q4_K/Q5_K min j for both, Q6_K scales 2j and 2j + 1; sc: a row's 16 unpacked. */
static inline int32_t kmin_pair(uint32_t t, const int16_t *sc, int j) {
    uint16_t lo = (uint16_t)(t == PL_TYPE_Q6_K ? sc[2 * j] : sc[8 + j]);
    uint16_t hi = (uint16_t)(t == PL_TYPE_Q6_K ? sc[2 * j + 1] : sc[8 + j]);
    return (int32_t)((uint32_t)hi << 16 | lo);
}

/* The imin (Q6_K: the offset's sum of scale x ys) of 4 unpacked rows' super-block b
 * against 8 packed columns' sums sk, one int32 lane a column: 8 madds a row. */
__attribute__((target("avx2"), always_inline)) static inline __m256i
kmin_avx2(const uint32_t t, const int16_t *sc, const __m256i sv[8]) {
    __m256i imin = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) { /* sums 2j, 2j+1 of the 8 columns */
        imin = _mm256_add_epi32(imin,
                                _mm256_madd_epi16(sv[j], _mm256_set1_epi32(kmin_pair(t, sc, j))));
    }
    return imin;
}

/* vnni: the byte dots by AVX-VNNI's vpdpbusd into int32 (four products a lane, exact), then
 * each (sub-)block's int32 dots times its scale (mullo: Q4_K/Q5_K every 8 steps of 4 values,
 * Q6_K every 4): the same integers as maddubs/madd, in fewer instructions. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
kgemm_avx2(const int vnni, const uint32_t t, const int NG, const uint8_t *wq, const int16_t *wsc,
           const float *wd, int64_t nsb, const int8_t *q, const float *d, const int16_t *s,
           float out[64]) {
    /* steps of 4 values between two widenings, and widenings per 32 values */
    const int S = vnni ? (t == PL_TYPE_Q6_K ? 4 : 8)
                       : (t == PL_TYPE_Q4_K   ? 8
                          : t == PL_TYPE_Q5_K ? 4
                                              : 2),
              F = 8 / S;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 4 * NG; i++) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        const uint8_t *wb = wq + b * 4 * 256;
        const int16_t *sb = wsc + b * 4 * 16;
        __m256i isum[8];
#pragma GCC unroll 8
        for (int i = 0; i < 4 * NG; i++) isum[i] = _mm256_setzero_si256();
#pragma GCC unroll 1
        for (int v = 0; v < 8; v++)
#pragma GCC unroll 1
            for (int f = 0; f < F; f++) {
                __m256i d16[8];
#pragma GCC unroll 8
                for (int i = 0; i < 4 * NG; i++) d16[i] = _mm256_setzero_si256();
#pragma GCC unroll 1
                for (int g = f * S; g < f * S + S; g++) {
                    __m256i y[2];
#pragma GCC unroll 2
                    for (int k = 0; k < NG; k++)
                        y[k] = _mm256_loadu_si256(
                            (const __m256i *)(q + ((k * nsb + b) * 8 + v) * 256 + g * 32));
#pragma GCC unroll 4
                    for (int r = 0; r < 4; r++) {
                        __m256i w = bcast4(wb + r * 256 + 32 * v + 4 * g);
#pragma GCC unroll 2
                        for (int k = 0; k < NG; k++)
                            d16[k * 4 + r] = vnni ? dpbusd(d16[k * 4 + r], w, y[k])
                                                  : _mm256_add_epi16(d16[k * 4 + r],
                                                                     _mm256_maddubs_epi16(w, y[k]));
                    }
                }
                /* the scale of these S steps: the sub-block's, or Q6_K's per 16 */
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    const int16_t *sc = sb + r * 16;
                    const int16_t m1 = t == PL_TYPE_Q6_K ? sc[2 * v + (f * S) / 4] : sc[v];
                    __m256i m = vnni ? _mm256_set1_epi32(m1) : _mm256_set1_epi16(m1);
#pragma GCC unroll 2
                    for (int k = 0; k < NG; k++)
                        isum[k * 4 + r] = _mm256_add_epi32(
                            isum[k * 4 + r], vnni ? _mm256_mullo_epi32(d16[k * 4 + r], m)
                                                  : _mm256_madd_epi16(d16[k * 4 + r], m));
                }
            }
#pragma GCC unroll 2
        for (int k = 0; k < NG; k++) {
            const __m256 dy = _mm256_loadu_ps(d + (k * nsb + b) * 8);
            const int16_t *sk = s + (k * nsb + b) * 128;
            __m256i sv[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) sv[j] = _mm256_loadu_si256((const __m256i *)(sk + 16 * j));
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m256i imin = kmin_avx2(t, sb + r * 16, sv);
                __m256i is = isum[k * 4 + r];
                const float *dw = wd + (b * 4 + r) * 2;
                __m256 a = _mm256_mul_ps(_mm256_set1_ps(dw[0]), dy), x;
                if (t == PL_TYPE_Q6_K) {
                    is = _mm256_sub_epi32(is, _mm256_slli_epi32(imin, 5));
                    x = _mm256_mul_ps(_mm256_cvtepi32_ps(is), a);
                } else {
                    __m256 mm = _mm256_mul_ps(_mm256_set1_ps(dw[1]), dy);
                    x = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(is), a),
                                      _mm256_mul_ps(_mm256_cvtepi32_ps(imin), mm));
                }
                acc[k * 4 + r] = _mm256_add_ps(acc[k * 4 + r], x);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 4 * NG; i++) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

#define PL_KGEMM(name, vnni, t, ng)                                                                \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const uint8_t *wq, const int16_t *wsc, const float *wd, int64_t nsb, const int8_t *q,      \
        const float *d, const int16_t *s, float *out) {                                            \
        kgemm_avx2(vnni, t, ng, wq, wsc, wd, nsb, q, d, s, out);                                   \
    }
PL_KGEMM(kgemm_q4k_1, 0, PL_TYPE_Q4_K, 1)
PL_KGEMM(kgemm_q4k_2, 0, PL_TYPE_Q4_K, 2)
PL_KGEMM(kgemm_q5k_1, 0, PL_TYPE_Q5_K, 1)
PL_KGEMM(kgemm_q5k_2, 0, PL_TYPE_Q5_K, 2)
PL_KGEMM(kgemm_q6k_1, 0, PL_TYPE_Q6_K, 1)
PL_KGEMM(kgemm_q6k_2, 0, PL_TYPE_Q6_K, 2)
PL_KGEMM(kgemm_q4k_1_vnni, 1, PL_TYPE_Q4_K, 1)
PL_KGEMM(kgemm_q4k_2_vnni, 1, PL_TYPE_Q4_K, 2)
PL_KGEMM(kgemm_q5k_1_vnni, 1, PL_TYPE_Q5_K, 1)
PL_KGEMM(kgemm_q5k_2_vnni, 1, PL_TYPE_Q5_K, 2)
PL_KGEMM(kgemm_q6k_1_vnni, 1, PL_TYPE_Q6_K, 1)
PL_KGEMM(kgemm_q6k_2_vnni, 1, PL_TYPE_Q6_K, 2)
typedef void kgemm_fn(const uint8_t *wq, const int16_t *wsc, const float *wd, int64_t nsb,
                      const int8_t *q, const float *d, const int16_t *s, float *out);
/* [vnni][Q4_K, Q5_K, Q6_K][two groups] */
static kgemm_fn *const kgemms[2][3][2] = {
    {{kgemm_q4k_1, kgemm_q4k_2}, {kgemm_q5k_1, kgemm_q5k_2}, {kgemm_q6k_1, kgemm_q6k_2}},
    {{kgemm_q4k_1_vnni, kgemm_q4k_2_vnni},
     {kgemm_q5k_1_vnni, kgemm_q5k_2_vnni},
     {kgemm_q6k_1_vnni, kgemm_q6k_2_vnni}}};

/* The two-group tile (4 rows x 16 columns) on AVX-512 with VNNI, as gemm512 in cpu_qdot.c:
 * both groups' 8 columns side by side in one 512-bit register (lanes 0-7 the first
 * group's), each weight broadcast meeting 16 columns in one vpdpbusd (u8 quants x s8
 * activations, four products a lane), each (sub-)block's int32 dots times its scale by one
 * mullo; the mins (Q6_K: the offset) by madd of the pack's sums of 16 with the scales. The
 * float steps are kgemm_avx2's, lane for lane: the same bits. */
#define PL_AVX512 "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c"
__attribute__((target(PL_AVX512))) static inline __m512i ktwo(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

__attribute__((target(PL_AVX512), always_inline)) static inline void
kgemm512(const uint32_t t, const int NZ, const uint8_t *wq, const int16_t *wsc, const float *wd,
         int64_t nsb, const int8_t *q, const float *d, const int16_t *s, float *out) {
    const int S = t == PL_TYPE_Q6_K ? 4 : 8;                     /* steps of 4 values a scale */
    const int64_t gq = nsb * 2048, gd = nsb * 8, gs = nsb * 128; /* one group's strides */
    __m512 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 4 * NZ; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        const uint8_t *wb = wq + b * 4 * 256;
        const int16_t *sb = wsc + b * 4 * 16;
        __m512i isum[8];
#pragma GCC unroll 8
        for (int i = 0; i < 4 * NZ; i++) isum[i] = _mm512_setzero_si512();
        for (int u = 0; u < 64 / S; u++) { /* (sub-)block u: values 4 S u .. */
            __m512i dot[8];
#pragma GCC unroll 8
            for (int i = 0; i < 4 * NZ; i++) dot[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int e = 0; e < S; e++) {
                const int64_t o = (b * 8 + u * S / 8) * 256 + (u * S % 8 + e) * 32;
                __m512i y[2];
#pragma GCC unroll 2
                for (int z = 0; z < NZ; z++)
                    y[z] = ktwo(q + 2 * z * gq + o, q + (2 * z + 1) * gq + o);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    int32_t w4;
                    memcpy(&w4, wb + r * 256 + 4 * (u * S + e), 4);
                    const __m512i w = _mm512_set1_epi32(w4);
#pragma GCC unroll 2
                    for (int z = 0; z < NZ; z++)
                        dot[z * 4 + r] = _mm512_dpbusd_epi32(dot[z * 4 + r], w, y[z]);
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m512i m = _mm512_set1_epi32(sb[r * 16 + u]);
#pragma GCC unroll 2
                for (int z = 0; z < NZ; z++)
                    isum[z * 4 + r] =
                        _mm512_add_epi32(isum[z * 4 + r], _mm512_mullo_epi32(dot[z * 4 + r], m));
            }
        }
#pragma GCC unroll 2
        for (int z = 0; z < NZ; z++) {
            const float *d0 = d + 2 * z * gd + b * 8;
            const int16_t *s0 = s + 2 * z * gs + b * 128;
            const __m512 dy = _mm512_castsi512_ps(ktwo(d0, d0 + gd));
            __m512i sv[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) sv[j] = ktwo(s0 + 16 * j, s0 + gs + 16 * j);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const int16_t *sc = sb + r * 16;
                __m512i imin = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    imin = _mm512_dpwssd_epi32(imin, sv[j], _mm512_set1_epi32(kmin_pair(t, sc, j)));
                }
                __m512i is = isum[z * 4 + r];
                const float *dw = wd + (b * 4 + r) * 2;
                __m512 a = _mm512_mul_ps(_mm512_set1_ps(dw[0]), dy), x;
                if (t == PL_TYPE_Q6_K) {
                    is = _mm512_sub_epi32(is, _mm512_slli_epi32(imin, 5));
                    x = _mm512_mul_ps(_mm512_cvtepi32_ps(is), a);
                } else {
                    __m512 mm = _mm512_mul_ps(_mm512_set1_ps(dw[1]), dy);
                    x = _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(is), a),
                                      _mm512_mul_ps(_mm512_cvtepi32_ps(imin), mm));
                }
                acc[z * 4 + r] = _mm512_add_ps(acc[z * 4 + r], x);
            }
        }
    }
#pragma GCC unroll 2
    for (int z = 0; z < NZ; z++)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) { /* groups 2z (lanes 0-7) and 2z + 1 (lanes 8-15) */
            const __m512 v = acc[z * 4 + r];
            _mm256_storeu_ps(out + (8 * z + r) * 8, _mm512_castps512_ps256(v));
            _mm256_storeu_ps(out + (8 * z + 4 + r) * 8,
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        }
}

#define PL_KGEMM512(name, t, nz)                                                                   \
    __attribute__((target(PL_AVX512))) static void name(                                           \
        const uint8_t *wq, const int16_t *wsc, const float *wd, int64_t nsb, const int8_t *q,      \
        const float *d, const int16_t *s, float *out) {                                            \
        kgemm512(t, nz, wq, wsc, wd, nsb, q, d, s, out);                                           \
    }
PL_KGEMM512(kgemm512_q4k, PL_TYPE_Q4_K, 1)
PL_KGEMM512(kgemm512_q5k, PL_TYPE_Q5_K, 1)
PL_KGEMM512(kgemm512_q6k, PL_TYPE_Q6_K, 1)
PL_KGEMM512(kgemm512_q4k_4, PL_TYPE_Q4_K, 2)
PL_KGEMM512(kgemm512_q5k_4, PL_TYPE_Q5_K, 2)
PL_KGEMM512(kgemm512_q6k_4, PL_TYPE_Q6_K, 2)
/* [Q4_K, Q5_K, Q6_K][four groups] */
static kgemm_fn *const kgemms512[3][2] = {
    {kgemm512_q4k, kgemm512_q4k_4}, {kgemm512_q5k, kgemm512_q5k_4}, {kgemm512_q6k, kgemm512_q6k_4}};

/* Decode's tile on AVX-512 (krows_avx2's contract and reductions): each row's 64 values
 * 64m..64m+63 in one 512-bit register - Q4_K/Q5_K the 32 quant bytes of sub-blocks 2m and
 * 2m+1 in both halves, the high half shifted down a nibble (and Q5_K's fifth bits 2m, 2m+1),
 * Q6_K 64 low-bit bytes whose nibble (part m % 2) and two high bits give values 128h + 64p ..
 * in order - so one maddubs meets 64 activations, and one vpdpwssd multiplies its pairs by
 * the scales (vpermw puts each sub-block's or 16-group's scale on its lanes) and adds them:
 * the same integers, then the same reduction and float step, so the same bits. */
__attribute__((target(PL_AVX512), always_inline)) static inline void
krows512(const uint32_t t, const unsigned char *const w[4], const int8_t *y, const float *yd,
         const int16_t *ys, int64_t nsb, float out[4]) {
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    const __m512i lo4 = _mm512_set1_epi8(15), b1 = _mm512_set1_epi8(1), b3 = _mm512_set1_epi8(3);
    /* per 64 values m: the scale index of each int16 lane (values 64m + 2i, 64m + 2i + 1),
     * and the shift counts of the two 256-bit halves (Q5_K fifth bit: 2m, 2m + 1; Q6_K high
     * bits: 0, 2 or 4, 6) */
    int16_t ix[4][32], hs[4][32];
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < 32; i++) {
            ix[m][i] = (int16_t)(t == PL_TYPE_Q6_K ? 4 * m + i / 8 : 2 * m + i / 16);
            hs[m][i] = (int16_t)(t == PL_TYPE_Q6_K ? 4 * (m % 2) + 2 * (i / 16) : 2 * m + i / 16);
        }
    __m512i idx[4], hsh[4];
    for (int m = 0; m < 4; m++)
        idx[m] = _mm512_loadu_si512(ix[m]), hsh[m] = _mm512_loadu_si512(hs[m]);
    /* the nibble shift: 0 in the low half, 4 in the high half */
    const __m512i nib = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m128 sum = _mm_setzero_ps();
    for (int64_t b0 = 0; b0 < nsb; b0 += KROWS_CHUNK) {
        const int nb = nsb - b0 < KROWS_CHUNK ? (int)(nsb - b0) : KROWS_CHUNK;
        __m256i d[KROWS_CHUNK][8];
        uint16_t hd[KROWS_CHUNK][4], hm[KROWS_CHUNK][4] = {{0}};
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < nb; i++) {
                const int64_t b = b0 + i;
                const unsigned char *p = w[r] + b * bs;
                krows_prefetch(p, bs);
                __m256i sc; /* the 16 scales (Q4_K/Q5_K: 8 scales, 8 mins) as int16 */
                __m128i sc8 = _mm_setzero_si128(); /* Q4_K/Q5_K: the same as bytes */
                if (t == PL_TYPE_Q6_K) {
                    sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
                    memcpy(&hd[i][r], p + 208, 2);
                } else {
                    sc8 = k4_scales_sse(p);
                    sc = _mm256_cvtepu8_epi16(sc8);
                    memcpy(&hd[i][r], p, 2), memcpy(&hm[i][r], p + 2, 2);
                }
                const __m512i scv = _mm512_castsi256_si512(sc);
                __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int m = 0; m < 4; m++) {
                    __m512i qv;
                    if (t == PL_TYPE_Q6_K) {
                        const int h = m / 2;
                        __m512i l = _mm512_loadu_si512(p + 64 * h);
                        qv = _mm512_and_si512(m % 2 ? _mm512_srli_epi16(l, 4) : l, lo4);
                        __m512i hh = _mm512_broadcast_i64x4(
                            _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
                        __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(hh, hsh[m]), b3);
                        qv = _mm512_or_si512(qv, _mm512_slli_epi16(hi, 4));
                    } else {
                        const unsigned char *qs = p + (t == PL_TYPE_Q5_K ? 48 : 16);
                        __m512i x = _mm512_broadcast_i64x4(
                            _mm256_loadu_si256((const __m256i *)(qs + 32 * m)));
                        qv = _mm512_and_si512(_mm512_srlv_epi16(x, nib), lo4);
                        if (t == PL_TYPE_Q5_K) {
                            __m512i hb = _mm512_broadcast_i64x4(
                                _mm256_loadu_si256((const __m256i *)(p + 16)));
                            __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(hb, hsh[m]), b1);
                            qv = _mm512_or_si512(qv, _mm512_slli_epi16(hi, 4));
                        }
                    }
                    __m512i pr = _mm512_maddubs_epi16(qv, _mm512_loadu_si512(y + b * 256 + 64 * m));
                    acc = _mm512_dpwssd_epi32(acc, pr, _mm512_permutexvar_epi16(idx[m], scv));
                }
                d[i][r] = _mm256_add_epi32(_mm512_castsi512_si256(acc),
                                           _mm512_extracti64x4_epi64(acc, 1));
                __m256i mm = sc; /* kminmul_avx2's multipliers: each min twice */
                if (t != PL_TYPE_Q6_K)
                    mm = _mm256_cvtepu8_epi16(
                        _mm_shuffle_epi8(sc8, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
                                                            13, 14, 14, 15, 15)));
                d[i][4 + r] =
                    _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(ys + b * 16)), mm);
            }
        for (int i = 0; i < nb; i++) sum = krows_step(t, sum, d[i], hd[i], hm[i], yd[b0 + i]);
    }
    _mm_storeu_ps(out, sum);
}

#define PL_KROWS512(name, t)                                                                       \
    __attribute__((target(PL_AVX512))) static void name(                                           \
        const unsigned char *const w[4], const int8_t *y, const float *yd, const int16_t *ys,      \
        int64_t nsb, float out[4]) {                                                               \
        krows512(t, w, y, yd, ys, nsb, out);                                                       \
    }
PL_KROWS512(krows512_q4k, PL_TYPE_Q4_K)
PL_KROWS512(krows512_q5k, PL_TYPE_Q5_K)
PL_KROWS512(krows512_q6k, PL_TYPE_Q6_K)
static krows_fn *const krows512s[3] = {krows512_q4k, krows512_q5k, krows512_q6k};

/* kq_avx2 into pl_cpu_kgemm_unpack's layout: one row's super-block. */
__attribute__((target("avx2,f16c"))) static void kq_row_avx2(uint32_t t, const unsigned char *blk,
                                                             uint8_t *wq, int16_t *sc) {
    __m256i q[8];
    kq_avx2(t, blk, q, sc);
    for (int v = 0; v < 8; v++) _mm256_storeu_si256((__m256i *)(wq + 32 * v), q[v]);
}
#endif

int pl_cpu_kgemm_unpack(uint32_t t, int nr, const unsigned char *const w[], int64_t nsb,
                        uint8_t *wq, int16_t *wsc, float *wd) {
    /* one super-block of one row into its 256 quants and 16 scales, per instruction set */
    void (*row)(uint32_t t, const unsigned char *blk, uint8_t *wq, int16_t *sc) = NULL;
#ifdef PL_KDOT_X86
    if (pl_cpu_have_avx2()) row = kq_row_avx2;
#endif
#ifdef __aarch64__
    if (pl_cpu_neon_level()) row = pl_cpu_kq_row_neon;
#endif
    if (!row) return 0;
    const int bs = t == PL_TYPE_Q4_K ? 144 : t == PL_TYPE_Q5_K ? 176 : 210;
    for (int64_t b = 0; b < nsb; b++)
        for (int r = 0; r < 4; r++) {
            const unsigned char *p = w[r < nr ? r : nr - 1] + b * bs;
            row(t, p, wq + (b * 4 + r) * 256, wsc + (b * 4 + r) * 16);
            float *o = wd + (b * 4 + r) * 2;
            o[0] = half_at(t == PL_TYPE_Q6_K ? p + 208 : p);
            o[1] = t == PL_TYPE_Q6_K ? 0.0f : half_at(p + 2);
        }
    return 1;
}

void pl_cpu_kgemm_pack(const int8_t *const y[8], const float *const yd[8],
                       const int16_t *const ys[8], int64_t nsb, int8_t *q, float *d, int16_t *s) {
    for (int64_t b = 0; b < nsb; b++)
        for (int c = 0; c < 8; c++) {
            for (int v = 0; v < 8; v++)
                for (int g = 0; g < 8; g++)
                    memcpy(q + (b * 8 + v) * 256 + g * 32 + c * 4, y[c] + b * 256 + 32 * v + 4 * g,
                           4);
            d[b * 8 + c] = yd[c][b];
            for (int j = 0; j < 8; j++) {
                s[b * 128 + j * 16 + 2 * c] = ys[c][b * 16 + 2 * j];
                s[b * 128 + j * 16 + 2 * c + 1] = ys[c][b * 16 + 2 * j + 1];
            }
        }
}

int pl_cpu_kgemm_tile(uint32_t t, int ng, const uint8_t *wq, const int16_t *wsc, const float *wd,
                      int64_t nsb, const int8_t *q, const float *d, const int16_t *s, float *out) {
#ifdef PL_KDOT_X86
    const int ti = t == PL_TYPE_Q4_K ? 0 : t == PL_TYPE_Q5_K ? 1 : 2;
    if (ng >= 2 && pl_cpu_have_avx512vnni()) {
        kgemms512[ti][ng == 4](wq, wsc, wd, nsb, q, d, s, out);
        return 1;
    }
#endif
    if (ng == 4) /* two tiles of two groups */
        return pl_cpu_kgemm_tile(t, 2, wq, wsc, wd, nsb, q, d, s, out) &&
               pl_cpu_kgemm_tile(t, 2, wq, wsc, wd, nsb, q + 2 * nsb * 2048, d + 2 * nsb * 8,
                                 s + 2 * nsb * 128, out + 64);
#ifdef PL_KDOT_X86
    if (pl_cpu_have_avx2()) {
        kgemms[pl_cpu_have_vnni()][ti][ng == 2](wq, wsc, wd, nsb, q, d, s, out);
        return 1;
    }
#endif
#ifdef __aarch64__
    if (pl_cpu_neon_level()) {
        pl_cpu_kgemm_tile_neon(t, ng, wq, wsc, wd, nsb, q, d, s, out);
        return 1;
    }
#endif
    (void)t, (void)ng, (void)wq, (void)wsc, (void)wd, (void)nsb, (void)q, (void)d, (void)s,
        (void)out;
    return 0;
}

void pl_cpu_kdot(uint32_t t, const unsigned char *w, int nc, const int8_t *const y[],
                 const float *const yd[], const int16_t *const ys[], int64_t nsb, float *out) {
    pl_cpu_kdot_fn *f = NULL; /* the kernel for 1 or 4 activation rows, if there is one */
#ifdef PL_KDOT_X86
    if (pl_cpu_have_avx2())
        f = nc == 1 ? (t == PL_TYPE_Q4_K   ? kdot_q4k_1
                       : t == PL_TYPE_Q5_K ? kdot_q5k_1
                                           : kdot_q6k_1)
                    : (t == PL_TYPE_Q4_K   ? kdot_q4k_4
                       : t == PL_TYPE_Q5_K ? kdot_q5k_4
                                           : kdot_q6k_4);
#endif
#ifdef __aarch64__
    if (pl_cpu_neon_level()) f = pl_cpu_kdot_neon(t, nc > 1);
#endif
    if (!f) {
        for (int c = 0; c < nc; c++)
            out[c] = pl_cpu_kdot_row_portable(t, w, y[c], yd[c], ys[c], nsb);
        return;
    }
    if (nc == 1) {
        f(w, y, yd, ys, nsb, out);
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
    f(w, yt, ydt, yst, nsb, o);
    for (int c = 0; c < nc; c++) out[c] = o[c];
}

void pl_cpu_kdot_rows(uint32_t t, int nr, const unsigned char *const w[], const int8_t *y,
                      const float *yd, const int16_t *ys, int64_t nsb, float *out) {
#ifdef PL_KDOT_X86
    if (pl_cpu_have_avx2()) {
        const unsigned char *wt[4];
        for (int r = 0; r < 4; r++) wt[r] = w[r < nr ? r : nr - 1]; /* short: the last again */
        float o[4];
        const int ti = t == PL_TYPE_Q4_K ? 0 : t == PL_TYPE_Q5_K ? 1 : 2;
        (pl_cpu_have_avx512vnni() ? krows512s[ti] : krows[pl_cpu_have_vnni()][ti])(wt, y, yd, ys,
                                                                                   nsb, o);
        for (int r = 0; r < nr; r++) out[r] = o[r];
        return;
    }
#endif
    for (int r = 0; r < nr; r++) pl_cpu_kdot(t, w[r], 1, &y, &yd, &ys, nsb, out + r);
}
