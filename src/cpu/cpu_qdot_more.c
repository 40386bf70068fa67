/* cpu_qdot_more.c - the act_q8 tiles for the other formats of 32-value blocks: Q4_1, Q5_0,
 * Q5_1, IQ4_NL, and IQ4_XS (super-blocks of 256 taken as 8 blocks of 32, each with its own
 * 6-bit scale), against activation rows quantised to Q8_0 blocks (pl_cpu_quant_act, as
 * for Q4_0/Q8_0 in cpu_qdot.c): 8 weight rows x 1 activation row (decode) or 2 x 4.
 *
 * The arithmetic, one formula per format, the same on every path. Per block of 32, dot is
 * the exact integer sum over the block of q_w * y (q_w the weight's integer level: Q4_1
 * 0..15, Q5_0 -16..15, Q5_1 0..31, IQ4_NL/IQ4_XS the table's -127..113); d_w, m_w the
 * block's f16 scale and min widened (IQ4_XS: d_w = d * (float)(ls - 32), one float
 * product, ls its sub-block's 6-bit scale); d_x the activation block's scale and ys the sum
 * of its 32 quants. Then, in block order, no fused multiply-add:
 *   Q5_0, IQ4_NL, IQ4_XS:  sum = sum + ((float)dot * d_w) * d_x
 *   Q4_1, Q5_1:            sum = sum + (((float)dot * d_w) * d_x + (m_w * d_x) * (float)ys)
 * (the _1 formats' value d_w * q + m_w dotted with d_x * y, the min's part through the
 * activation block's sum, split as llama.cpp's vec_dot_q4_1_q8_1 splits it, though it
 * takes d_x * ys rounded to f16 from its Q8_1 blocks: not its bits). row_scalar below is the
 * portable reference; the AVX2 tiles compute the same integers and do exactly these float
 * operations in this order per lane, so their results are bit-identical. NEON and wasm
 * builds run the portable reference for these formats (no vector kernels yet).
 *
 * AVX2: the nibbles are unpacked into element order as for Q4_0; Q5's fifth bits are
 * spread from qh into bytes (bit j -> byte j, 0x10); the unsigned levels (Q4_1, Q5_1:
 * 0..31) meet y in maddubs directly, Q5_0 dots 0..31 and takes 16 x ys off (exact); the
 * IQ4 levels come from the 16-entry table through pshufb and are signed, so |w| (<= 127)
 * meets y given w's sign, as Q8_0 does. Every int16 pair of maddubs is at most
 * 2 * 127 * 127 in size: no saturation.
 *
 * The prefill GEMM (pl_cpu_qdot_more_unpack): Q5_0, IQ4_NL and IQ4_XS blocks are d_w times
 * int8 levels, so their rows unpack into Q8_0's GEMM layout (cpu_qdot.c) and its tiles,
 * which compute ((float)dot * d_w) * d_x per block in order, give the same bits as these
 * tiles. Q4_1/Q5_1 would need the min term in the GEMM: they stay on the 2 x 4 tiles. */
#include <string.h>

#include "cpu_internal.h"
#include "format/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_x86.h"
#define PL_QMORE_X86 1
#endif

/* The formats, as the kernels index them. */
enum { F_Q4_1, F_Q5_0, F_Q5_1, F_IQ4_NL, F_IQ4_XS, F_NONE };

static int fmt_of(uint32_t t) {
    switch (t) {
    case PL_TYPE_Q4_1: return F_Q4_1;
    case PL_TYPE_Q5_0: return F_Q5_0;
    case PL_TYPE_Q5_1: return F_Q5_1;
    case PL_TYPE_IQ4_NL: return F_IQ4_NL;
    case PL_TYPE_IQ4_XS: return F_IQ4_XS;
    default: return F_NONE;
    }
}

int pl_cpu_qdot_more_type(uint32_t t) {
    return fmt_of(t) != F_NONE;
}

/* ggml's kvalues_iq4nl (format/quant_iq.c's levels) */
static const int8_t kvalues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

static inline float half(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pl_f16_to_f32(h);
}

/* Where block b of a row starts (IQ4_XS: its super-block), and where its 16 bytes of
 * nibbles are. */
static inline const unsigned char *blk_of(int f, const unsigned char *w, int64_t b) {
    static const int bs[] = {20, 22, 24, 18};
    return f == F_IQ4_XS ? w + (b / 8) * 136 : w + b * bs[f];
}
static inline const unsigned char *nib_of(int f, const unsigned char *p, int64_t b) {
    static const int at[] = {4, 6, 8, 2};
    return f == F_IQ4_XS ? p + 8 + 16 * (b % 8) : p + at[f];
}
/* IQ4_XS: block b's 6-bit sub-block scale minus 32 */
static inline int xs_scale(const unsigned char *p, int64_t b) {
    int j = (int)(b % 8);
    uint16_t sh;
    memcpy(&sh, p + 2, 2);
    return (((p[4 + j / 2] >> (4 * (j % 2))) & 15) | ((sh >> (2 * j)) & 3) << 4) - 32;
}

/* One weight block's integer level of element j. */
static inline int level(int f, const unsigned char *p, int64_t b, int j) {
    const unsigned char *qs = nib_of(f, p, b);
    int n = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    if (f == F_IQ4_NL || f == F_IQ4_XS) return kvalues[n];
    if (f == F_Q5_0 || f == F_Q5_1) {
        uint32_t qh;
        memcpy(&qh, p + (f == F_Q5_0 ? 2 : 4), 4);
        n |= (int)((qh >> j) & 1) << 4;
    }
    return f == F_Q5_0 ? n - 16 : n;
}

/* The block's d_w as the formula above says */
static inline float scale_of(int f, const unsigned char *p, int64_t b) {
    return f == F_IQ4_XS ? half(p) * (float)xs_scale(p, b) : half(p);
}

static float row_scalar(int f, const unsigned char *w, const int8_t *y, const float *yd,
                        const int32_t *ys, int64_t nb) {
    float sum = 0;
    for (int64_t b = 0; b < nb; b++, y += 32) {
        const unsigned char *p = blk_of(f, w, b);
        int32_t dot = 0;
        for (int j = 0; j < 32; j++) dot += level(f, p, b, j) * y[j];
        const float dw = scale_of(f, p, b), dx = yd[b];
        if (f == F_Q4_1 || f == F_Q5_1)
            sum = sum + (((float)dot * dw) * dx + (half(p + 2) * dx) * (float)ys[b]);
        else
            sum = sum + ((float)dot * dw) * dx;
    }
    return sum;
}

float pl_cpu_qdot_more_row_portable(uint32_t t, const unsigned char *w, const int8_t *y,
                                    const float *yd, const int32_t *ys, int64_t nb) {
    return row_scalar(fmt_of(t), w, y, yd, ys, nb);
}

void pl_cpu_qdot_more_tile_portable(uint32_t t, int nr, int nc, const unsigned char *const w[],
                                    const int8_t *const y[], const float *const yd[],
                                    const int32_t *const ys[], int64_t nb, float *out) {
    int f = fmt_of(t);
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) out[r * nc + c] = row_scalar(f, w[r], y[c], yd[c], ys[c], nb);
}

#ifdef PL_QMORE_X86
/* (dpbusd and reduce8: cpu_x86.h) */

/* Byte j = 0x10 where bit j of qh is set, else 0 (Q5's fifth bits in element order). */
__attribute__((target("avx2"))) static inline __m256i fifth_bits(const unsigned char *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i spread =
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    __m256i x = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread); /* byte j: qh byte j/8 */
    x = _mm256_or_si256(x, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));     /* all but bit j % 8 */
    x = _mm256_cmpeq_epi8(x, _mm256_set1_epi64x(-1));
    return _mm256_and_si256(x, _mm256_set1_epi8(0x10));
}

/* Lanes k = r * C + c of the per-row f16 values h[r] widened (F16C: exact, as
 * pl_f16_to_f32), C == 1: h[k]; C == 4: h[k / 4]. Built from registers, not stored and
 * reloaded (a wide load of narrow stores stalls). */
__attribute__((target("avx2,f16c"))) static inline __m256 rows_f16(const int C,
                                                                   const uint16_t h[8]) {
    if (C == 1)
        return _mm256_cvtph_ps(_mm_set_epi16((short)h[7], (short)h[6], (short)h[5], (short)h[4],
                                             (short)h[3], (short)h[2], (short)h[1], (short)h[0]));
    __m128 d2 = _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, 0, 0, (short)h[1], (short)h[0]));
    return _mm256_set_m128(_mm_permute_ps(d2, 0x55), _mm_permute_ps(d2, 0x00));
}
/* ... of per-row ints i[r], as floats (exact: IQ4_XS's sub-block scales) */
__attribute__((target("avx2"))) static inline __m256 rows_int(const int C, const int i[8]) {
    if (C == 1)
        return _mm256_cvtepi32_ps(
            _mm256_setr_epi32(i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7]));
    return _mm256_set_m128(_mm_set1_ps((float)i[1]), _mm_set1_ps((float)i[0]));
}
/* ... of a per-column value: col[c] at lanes with that c */
__attribute__((target("avx2"))) static inline __m256 cols_f(const int C, const float *const col[],
                                                            int64_t b) {
    if (C == 1) return _mm256_set1_ps(col[0][b]);
    __m128 x4 = _mm_set_ps(col[3][b], col[2][b], col[1][b], col[0][b]);
    return _mm256_set_m128(x4, x4);
}
__attribute__((target("avx2"))) static inline __m256i
cols_i(const int C, const int32_t *const col[], int64_t b) {
    if (C == 1) return _mm256_set1_epi32(col[0][b]);
    __m128i x4 = _mm_set_epi32(col[3][b], col[2][b], col[1][b], col[0][b]);
    return _mm256_set_m128i(x4, x4);
}

/* The 32 nibbles of the 16 bytes at qs in element order (low nibbles first), as bytes. */
__attribute__((target("avx2"))) static inline __m256i nibbles(const unsigned char *qs) {
    __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0)),
                            _mm256_set1_epi8(15));
}

/* Block b of format f at p: its 32 quants in element order as bytes, before any table
 * (Q4_1, IQ4: the nibbles; Q5: nibble | fifth bit << 4; all 0..31, unsigned). */
__attribute__((target("avx2"), always_inline)) static inline __m256i
raw_quants(const int f, const unsigned char *p, int64_t b) {
    __m256i q = nibbles(nib_of(f, p, b));
    if (f == F_Q5_0 || f == F_Q5_1) q = _mm256_or_si256(q, fifth_bits(p + (f == F_Q5_0 ? 2 : 4)));
    return q;
}

/* The R x C tile (R * C == 8) for format f, lane k = r * C + c, as tile_avx2 in cpu_qdot.c. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
tile_avx2(const int vnni, const int f, const int R, const int C, const unsigned char *const w[],
          const int8_t *const y[], const float *const yd[], const int32_t *const ys[], int64_t nb,
          const unsigned char *pf, float out[8]) {
    static const int bpb[] = {20, 22, 24, 18, 17}; /* bytes per 32 values */
    const int step = R * bpb[f];
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues));
    const int sgn = f == F_IQ4_NL || f == F_IQ4_XS, asym = f == F_Q4_1 || f == F_Q5_1;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        if (pf) /* the next tile's R rows, contiguous, at the pace this one reads its own */
            for (int o = 0; o < step; o += 64)
                _mm_prefetch((const char *)pf + b * step + o, _MM_HINT_T0);
        __m256i wv[8], sg[8], v[4], d[8];
        uint16_t hw[8], hm[8];
        int ls[8];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const unsigned char *p = blk_of(f, w[r], b);
            __m256i q = raw_quants(f, p, b);
            if (sgn) {
                sg[r] = _mm256_shuffle_epi8(table, q);
                q = _mm256_sign_epi8(sg[r], sg[r]);
            }
            wv[r] = q;
            memcpy(&hw[r], p, 2);
            if (asym) memcpy(&hm[r], p + 2, 2);
            if (f == F_IQ4_XS) ls[r] = xs_scale(p, b);
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) v[c] = _mm256_loadu_si256((const __m256i *)(y[c] + b * 32));
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                __m256i a = sgn ? _mm256_sign_epi8(v[c], sg[r]) : v[c];
                d[r * C + c] = vnni ? dpbusd(_mm256_setzero_si256(), wv[r], a)
                                    : _mm256_madd_epi16(_mm256_maddubs_epi16(wv[r], a), one);
            }
        __m256i s = reduce8(d);
        if (f == F_Q5_0) /* the levels are q - 16: 16 x the activation sum off, exactly */
            s = _mm256_sub_epi32(s, _mm256_slli_epi32(cols_i(C, ys, b), 4));
        /* d_w: the f16 scale widened, IQ4_XS's times (float)(ls - 32), one rounding as in
         * scale_of */
        __m256 dw = rows_f16(C, hw), dx = cols_f(C, yd, b);
        if (f == F_IQ4_XS) dw = _mm256_mul_ps(dw, rows_int(C, ls));
        __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), dw), dx);
        if (asym) /* + (m_w * d_x) * (float)ys */
            t = _mm256_add_ps(t, _mm256_mul_ps(_mm256_mul_ps(rows_f16(C, hm), dx),
                                               _mm256_cvtepi32_ps(cols_i(C, ys, b))));
        acc = _mm256_add_ps(acc, t);
    }
    _mm256_storeu_ps(out, acc);
}

#define PL_TILE(name, vnni, f, R, C)                                                               \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const unsigned char *const w[], const int8_t *const y[], const float *const yd[],          \
        const int32_t *const ys[], int64_t nb, const unsigned char *pf, float out[8]) {            \
        tile_avx2(vnni, f, R, C, w, y, yd, ys, nb, pf, out);                                       \
    }
#define PL_TILES(f)                                                                                \
    PL_TILE(tile_##f##_8x1, 0, f, 8, 1)                                                            \
    PL_TILE(tile_##f##_2x4, 0, f, 2, 4)                                                            \
    PL_TILE(tile_##f##_8x1_vnni, 1, f, 8, 1)                                                       \
    PL_TILE(tile_##f##_2x4_vnni, 1, f, 2, 4)
PL_TILES(F_Q4_1)
PL_TILES(F_Q5_0)
PL_TILES(F_Q5_1)
PL_TILES(F_IQ4_NL)
PL_TILES(F_IQ4_XS)
#define PL_ROW(f)                                                                                  \
    {                                                                                              \
        {tile_##f##_8x1, tile_##f##_2x4}, {                                                        \
            tile_##f##_8x1_vnni, tile_##f##_2x4_vnni                                               \
        }                                                                                          \
    }
/* [format][vnni][2 x 4] */
static tile_fn *const tiles[5][2][2] = {PL_ROW(F_Q4_1), PL_ROW(F_Q5_0), PL_ROW(F_Q5_1),
                                        PL_ROW(F_IQ4_NL), PL_ROW(F_IQ4_XS)};
#endif

/* The GEMM's Q8_0 layout (pl_cpu_gemm_unpack) of the formats whose block value is
 * d_w * level with a level in int8: the levels, then their absolute values; d_w as floats. */
#ifdef PL_QMORE_X86
__attribute__((target("avx2,f16c"))) static void unpack_avx2(int f, int nr,
                                                             const unsigned char *const w[],
                                                             int64_t nb, unsigned char *wu,
                                                             float *wd) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues));
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < 4; r++) {
            const unsigned char *p = blk_of(f, w[r < nr ? r : nr - 1], b);
            unsigned char *o = wu + (b * 4 + r) * 64;
            __m256i q = f == F_Q5_0 ? _mm256_sub_epi8(raw_quants(f, p, b), _mm256_set1_epi8(16))
                                    : _mm256_shuffle_epi8(table, nibbles(nib_of(f, p, b)));
            _mm256_storeu_si256((__m256i *)o, q);
            _mm256_storeu_si256((__m256i *)(o + 32), _mm256_abs_epi8(q));
            wd[b * 4 + r] = scale_of(f, p, b);
        }
}
#endif

int pl_cpu_qdot_more_gemm_type(uint32_t t) {
    return t == PL_TYPE_Q5_0 || t == PL_TYPE_IQ4_NL || t == PL_TYPE_IQ4_XS;
}

int pl_cpu_qdot_more_unpack(uint32_t t, int nr, const unsigned char *const w[], int64_t nb,
                            unsigned char *wu, float *wd) {
    int f = fmt_of(t);
    if (!pl_cpu_qdot_more_gemm_type(t)) return 0;
#ifdef PL_QMORE_X86
    if (pl_cpu_have_avx2()) {
        unpack_avx2(f, nr, w, nb, wu, wd);
        return 1;
    }
#endif
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < 4; r++) {
            const unsigned char *p = blk_of(f, w[r < nr ? r : nr - 1], b);
            unsigned char *o = wu + (b * 4 + r) * 64;
            for (int j = 0; j < 32; j++) {
                int v = level(f, p, b, j);
                o[j] = (unsigned char)(int8_t)v, o[32 + j] = (unsigned char)(v < 0 ? -v : v);
            }
            wd[b * 4 + r] = scale_of(f, p, b);
        }
    return 1;
}

void pl_cpu_qdot_more_tile(uint32_t t, int nr, int nc, const unsigned char *const w[],
                           const int8_t *const y[], const float *const yd[],
                           const int32_t *const ys[], int64_t nb, const unsigned char *pf,
                           float *out) {
    (void)pf; /* a prefetch hint only the x86 tiles take */
#ifdef PL_QMORE_X86
    if (pl_cpu_have_avx2()) {
        run_tile(tiles[fmt_of(t)][pl_cpu_have_vnni()][nc != 1], nr, nc, w, y, yd, ys, nb, pf, out);
        return;
    }
#endif
    pl_cpu_qdot_more_tile_portable(t, nr, nc, w, y, yd, ys, nb, out);
}
