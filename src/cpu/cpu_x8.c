/* cpu_x8.c - Q4_0 and Q8_0 weights with 8 rows interleaved (made when a weight is copied
 * into the backend's own memory, cpu_weights.c), and the kernels that read them.
 *
 * Why: decode's tile over the GGUF layout (cpu_qdot.c, 8 rows x 1) gets each row's 32
 * products of a block in one register and must add the 8 rows' lanes across registers (a
 * reduction tree of ~12 shuffles and adds a block) and gather the 8 scales one by one:
 * about 90 instructions per block of 8 rows, which is what bounded a 1-thread decode on
 * Zen 4 (docs/cpu-notes.md). Interleaved, each 32-bit lane of a register holds 4 bytes of
 * one row, so one vpdpbusd of the weights with 4 activation bytes broadcast gives every row
 * its 4 products in its own lane: no reduction, the scales one 16-byte load, ~40
 * instructions for the same Q4_0 block. And the 8 rows are one sequential stream.
 *
 * The layout: the first (rows / 8) * 8 rows of the tensor in groups of 8; a group takes the
 * bytes its 8 rows took (8 x 18 bytes a block for Q4_0, 8 x 34 for Q8_0), block b at
 * b times that:
 *   [0, 16)    the 8 rows' f16 scales, row r at 2r
 *   [16, ...)  4 (Q4_0) or 8 (Q8_0) chunks of 32 bytes; chunk j, bytes 4r..4r+3 = row r's
 *              quant bytes 4j..4j+3 (Q4_0: low nibbles elements 4j..4j+3, high nibbles
 *              16+4j..16+4j+3; Q8_0: elements 4j..4j+3)
 * Rows past the last whole group keep the GGUF layout. Every value is the same as before:
 * the kernels compute sum + ((float)dot * d_w) * d_x per block in block order, the integer
 * dot exact, as row_scalar (cpu_qdot.c) does, so every path gives the same bits. */
#include "cpu_internal.h"

#include "format/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include "cpu_x86.h"
#define X8_X86 1
#endif

/* a block's bytes, its quant bytes, a group's block (q4: Q4_0, else Q8_0) */
static inline int qb(int q4) {
    return q4 ? 18 : 34;
}
static inline int qn(int q4) {
    return q4 ? 16 : 32;
}
static inline int gb(int q4) {
    return 8 * qb(q4);
}

void pl_x8_pack_group(int q4, const unsigned char *src, int64_t nb, unsigned char *dst) {
    int64_t row = nb * qb(q4);
    for (int64_t b = 0; b < nb; b++) {
        unsigned char *o = dst + b * gb(q4);
        for (int r = 0; r < 8; r++) {
            const unsigned char *p = src + r * row + b * qb(q4);
            memcpy(o + 2 * r, p, 2);
            for (int j = 0; j < qn(q4) / 4; j++) memcpy(o + 16 + 32 * j + 4 * r, p + 2 + 4 * j, 4);
        }
    }
}

void pl_x8_block(int q4, const unsigned char *group, int lane, int64_t b, unsigned char *out) {
    const unsigned char *p = group + b * gb(q4);
    memcpy(out, p + 2 * lane, 2);
    for (int j = 0; j < qn(q4) / 4; j++) memcpy(out + 2 + 4 * j, p + 16 + 32 * j + 4 * lane, 4);
}

void pl_x8_unpack_group(int q4, const unsigned char *group, int64_t nb, unsigned char *dst) {
    for (int r = 0; r < 8; r++)
        for (int64_t b = 0; b < nb; b++) pl_x8_block(q4, group, r, b, dst + (r * nb + b) * qb(q4));
}

/* The portable reference: each row rebuilt a block at a time, row_scalar's arithmetic. */
static void tile_portable(int q4, const unsigned char *g, int nc, const int8_t *const y[],
                          const float *const yd[], int64_t nb, float *out) {
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < nc; c++) {
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                unsigned char blk[34];
                pl_x8_block(q4, g, r, b, blk);
                sum += pl_cpu_qdot_row_portable(q4, blk, y[c] + b * 32, yd[c] + b, 1);
            }
            out[r * nc + c] = sum;
        }
}

#ifdef X8_X86
static inline int32_t word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* One group against C activation rows (C 1..4), out[r * C + c]. Q4_0: with VNNI the 8 dots
 * of a column go into two accumulators (low and high nibbles) so the dependent vpdpbusd
 * chain is 4 long, not 8; without, maddubs' int16 pairs (each |pair| <= 2 * 15 * 127) are
 * summed 8 at a time in int16 (<= 30480) and widened once; the nibbles are q + 8, so 8 x
 * the activations' block sum comes off. Q8_0: with VNNI the quants' sign bits flipped make
 * them q + 128 as unsigned bytes (128 x the block sum comes off); without, |q| meets y
 * given q's sign (|q| <= 128, y never -128: pairs <= 32512) and each chunk is widened. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
tile8(const int vnni, const int q4, const int C, const unsigned char *g, const int8_t *const y[],
      const float *const yd[], const int32_t *const ys[], int64_t nb, float *out) {
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi16(1);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const int G = gb(q4), NJ = q4 ? 4 : 8; /* chunks a block */
    __m256 acc[4];
    for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const unsigned char *p = g + b * G;
        __m256i w[8]; /* Q4_0: low nibbles 0-3, high 4-7; Q8_0: chunks 0-7 */
#pragma GCC unroll 8
        for (int j = 0; j < NJ; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * j));
            if (q4) {
                w[j] = _mm256_and_si256(q, m4);
                w[4 + j] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            } else {
                w[j] = vnni ? _mm256_xor_si256(q, flip) : q;
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const int8_t *yb = y[c] + b * 32;
            /* element offset of register j's 4 values */
#define YOFF(j) (q4 ? ((j) < 4 ? 4 * (j) : 16 + 4 * ((j)-4)) : 4 * (j))
            __m256i s;
            if (vnni) {
                __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    s0 = dpbusd(s0, w[j], _mm256_set1_epi32(word(yb + YOFF(j))));
                    s1 = dpbusd(s1, w[4 + j], _mm256_set1_epi32(word(yb + YOFF(4 + j))));
                }
                s = _mm256_sub_epi32(_mm256_add_epi32(s0, s1),
                                     _mm256_set1_epi32(ys[c][b] * (q4 ? 8 : 128)));
            } else if (q4) {
                __m256i t = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++)
                    t = _mm256_add_epi16(
                        t, _mm256_maddubs_epi16(w[j], _mm256_set1_epi32(word(yb + YOFF(j)))));
                s = _mm256_sub_epi32(_mm256_madd_epi16(t, one), _mm256_set1_epi32(ys[c][b] * 8));
            } else {
                s = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    __m256i yv = _mm256_sign_epi8(_mm256_set1_epi32(word(yb + 4 * j)), w[j]);
                    s = _mm256_add_epi32(
                        s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w[j]), yv), one));
                }
            }
#undef YOFF
            __m256 t =
                _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), dw), _mm256_set1_ps(yd[c][b]));
            acc[c] = _mm256_add_ps(acc[c], t);
        }
    }
    if (C == 1) {
        _mm256_storeu_ps(out, acc[0]);
        return;
    }
    float v[4][8];
    for (int c = 0; c < C; c++) _mm256_storeu_ps(v[c], acc[c]);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < C; c++) out[r * C + c] = v[c][r];
}

typedef void tile8_fn(const unsigned char *g, const int8_t *const y[], const float *const yd[],
                      const int32_t *const ys[], int64_t nb, float *out);
#define PL_TILE8(name, vnni, q4, C)                                                                \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const unsigned char *g, const int8_t *const y[], const float *const yd[],                  \
        const int32_t *const ys[], int64_t nb, float *out) {                                       \
        tile8(vnni, q4, C, g, y, yd, ys, nb, out);                                                 \
    }
PL_TILE8(t4_1, 0, 1, 1)
PL_TILE8(t4_2, 0, 1, 2)
PL_TILE8(t4_3, 0, 1, 3)
PL_TILE8(t4_4, 0, 1, 4)
PL_TILE8(t4_1v, 1, 1, 1)
PL_TILE8(t4_2v, 1, 1, 2)
PL_TILE8(t4_3v, 1, 1, 3)
PL_TILE8(t4_4v, 1, 1, 4)
PL_TILE8(t8_1, 0, 0, 1)
PL_TILE8(t8_2, 0, 0, 2)
PL_TILE8(t8_3, 0, 0, 3)
PL_TILE8(t8_4, 0, 0, 4)
PL_TILE8(t8_1v, 1, 0, 1)
PL_TILE8(t8_2v, 1, 0, 2)
PL_TILE8(t8_3v, 1, 0, 3)
PL_TILE8(t8_4v, 1, 0, 4)
/* [q4][vnni][columns - 1] */
static tile8_fn *const tiles8[2][2][4] = {{{t8_1, t8_2, t8_3, t8_4}, {t8_1v, t8_2v, t8_3v, t8_4v}},
                                          {{t4_1, t4_2, t4_3, t4_4}, {t4_1v, t4_2v, t4_3v, t4_4v}}};

/* 4 x 4 words: c[j] holds rows a = 0..3's word j... transposed to r[a] holding row a's words
 * j = 0..3. */
__attribute__((target("avx2"))) static inline void transpose4(const __m128i c[4], __m128i r[4]) {
    __m128i t0 = _mm_unpacklo_epi32(c[0], c[1]), t1 = _mm_unpacklo_epi32(c[2], c[3]);
    __m128i t2 = _mm_unpackhi_epi32(c[0], c[1]), t3 = _mm_unpackhi_epi32(c[2], c[3]);
    r[0] = _mm_unpacklo_epi64(t0, t1), r[1] = _mm_unpackhi_epi64(t0, t1);
    r[2] = _mm_unpacklo_epi64(t2, t3), r[3] = _mm_unpackhi_epi64(t2, t3);
}

/* The GEMM's unpack (pl_cpu_gemm_unpack's layout) of the 4 rows 4h..4h+3 of a group: per
 * block the 4 rows' slices of each 4 chunks are a 4 x 4 matrix of words (chunk j, row a),
 * transposed to (row a, chunk j); then Q4_0's nibbles split, Q8_0's absolute values. */
__attribute__((target("avx2,f16c"))) static void
unpack_half_avx2(int q4, const unsigned char *g, int h, int64_t nb, unsigned char *wu, float *wd) {
    const __m128i m4 = _mm_set1_epi8(15);
    const int G = gb(q4), wbs = q4 ? 32 : 64;
    for (int64_t b = 0; b < nb; b++) {
        const unsigned char *p = g + b * G;
        _mm_storeu_ps(wd + b * 4, _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(p + 8 * h))));
        __m128i c[4], r[2][4];
        for (int k = 0; k < (q4 ? 1 : 2); k++) { /* chunks 4k..4k+3 */
            for (int j = 0; j < 4; j++)
                c[j] = _mm_loadu_si128((const __m128i *)(p + 16 + 32 * (4 * k + j) + 16 * h));
            transpose4(c, r[k]);
        }
        for (int a = 0; a < 4; a++) {
            unsigned char *o = wu + (b * 4 + a) * wbs;
            if (q4) {
                _mm_storeu_si128((__m128i *)o, _mm_and_si128(r[0][a], m4));
                _mm_storeu_si128((__m128i *)(o + 16),
                                 _mm_and_si128(_mm_srli_epi16(r[0][a], 4), m4));
            } else {
                _mm_storeu_si128((__m128i *)o, r[0][a]);
                _mm_storeu_si128((__m128i *)(o + 16), r[1][a]);
                _mm_storeu_si128((__m128i *)(o + 32), _mm_abs_epi8(r[0][a]));
                _mm_storeu_si128((__m128i *)(o + 48), _mm_abs_epi8(r[1][a]));
            }
        }
    }
}
#endif

int pl_x8_available(void) {
#ifdef X8_X86
    return pl_cpu_have_avx2();
#else
    return 0;
#endif
}

void pl_x8_tile(int q4, const unsigned char *g, int nc, const int8_t *const y[],
                const float *const yd[], const int32_t *const ys[], int64_t nb, float *out) {
#ifdef X8_X86
    if (pl_cpu_have_avx2()) {
        tiles8[q4 != 0][pl_cpu_have_vnni()][nc - 1](g, y, yd, ys, nb, out);
        return;
    }
#endif
    (void)ys;
    tile_portable(q4, g, nc, y, yd, nb, out);
}

void pl_x8_tile_portable(int q4, const unsigned char *g, int nc, const int8_t *const y[],
                         const float *const yd[], int64_t nb, float *out) {
    tile_portable(q4, g, nc, y, yd, nb, out);
}

void pl_x8_gemm_unpack(int q4, const unsigned char *g, int h, int64_t nb, unsigned char *wu,
                       float *wd) {
#ifdef X8_X86
    if (pl_cpu_have_avx2()) {
        unpack_half_avx2(q4, g, h, nb, wu, wd);
        return;
    }
#endif
    const unsigned char *w[4];
    unsigned char rows[4][34];
    for (int64_t b = 0; b < nb; b++) { /* a block at a time through the GGUF unpack */
        for (int a = 0; a < 4; a++) pl_x8_block(q4, g, 4 * h + a, b, rows[a]), w[a] = rows[a];
        pl_cpu_gemm_unpack(q4, 4, w, 1, wu + b * 4 * (q4 ? 32 : 64), wd + b * 4);
    }
}
