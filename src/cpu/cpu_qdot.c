/* cpu_qdot.c - tiles of weight rows of Q4_0 or Q8_0 blocks against activation rows quantised
 * to Q8_0 blocks (the act_q8 matmul, cpu_matmul.c): 8 weight rows x 1 activation row for
 * decode, 2 x 4 for a short batch, and the prefill GEMM's 4 x 8 or 4 x 16 on packed
 * activations; and the activation quantisation itself.
 *
 * Each block's integer dot is exact whatever instructions compute it, and the float sum
 * over blocks always runs in block order, (float)sumi * d_w * d_x, so the AVX2 path and the
 * portable one give bit-identical results: the same tokens on every machine. The AVX2 path
 * is chosen at run time (x86 only; the library is still built for the baseline ISA), and on
 * CPUs with AVX-VNNI its byte dots are one vpdpbusd instead of maddubs + madd. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "format/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#include "cpu_x86.h"
#define PL_QDOT_X86 1
#endif

static inline float half(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pl_f16_to_f32(h);
}

static float row_scalar(int q4, const unsigned char *w, const int8_t *y, const float *yd,
                        int64_t nb) {
    float sum = 0;
    for (int64_t b = 0; b < nb; b++, y += 32) {
        int32_t s = 0;
        if (q4) {
            const unsigned char *qs = w + 2;
            for (int i = 0; i < 16; i++)
                s += ((qs[i] & 15) - 8) * y[i] + ((qs[i] >> 4) - 8) * y[i + 16];
        } else {
            const int8_t *qs = (const int8_t *)(w + 2);
            for (int i = 0; i < 32; i++) s += qs[i] * y[i];
        }
        sum += (float)s * half(w) * yd[b];
        w += q4 ? 18 : 34;
    }
    return sum;
}

#ifdef PL_QDOT_X86
/* (dpbusd and reduce8: cpu_x86.h) */

/* A tile of R weight rows x C activation rows (R * C == 8, compile-time constants where it
 * is inlined): lane k = r * C + c. Per block, each weight block is unpacked once for its C
 * activation rows and each activation block loaded once for its R weight rows; the eight
 * integer block dots come out of one reduction, and each lane then does
 * sum + ((float)dot * d_w) * d_x, the scalar path's operations in its order (no fused
 * multiply-add), so every lane is bit-identical to row_scalar.
 * maddubs wants one unsigned operand. Q4_0 dots the unsigned nibbles (0..15) with the
 * activations and takes 8 * (the activation block's sum, ys) off: sum((q - 8) * y) exactly,
 * with no sign operation per pair. Q8_0 meets |w| (<= 128 as an unsigned byte) with y
 * given w's sign (y, an activation, is never -128, so negating it cannot wrap); the pairs
 * fit int16 either way. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
tile_avx2(const int vnni, const int q4, const int R, const int C, const unsigned char *const w[],
          const int8_t *const y[], const float *const yd[], const int32_t *const ys[], int64_t nb,
          const unsigned char *pf, float out[8]) {
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_set1_epi8(15), nib_shift = _mm256_set_epi64x(4, 4, 0, 0);
    const int bs = q4 ? 18 : 34;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        if (pf) /* the next tile's R * bs bytes per block, a line at a time */
            for (int o = 0; o < R * bs; o += 64)
                _mm_prefetch((const char *)pf + b * R * bs + o, _MM_HINT_T0);
        __m256i wv[8], sg[8], v[4], d[8];
        uint16_t hw[8];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const unsigned char *p = w[r] + b * bs;
            memcpy(&hw[r], p, 2);
            if (q4) { /* the 16 bytes in both halves, the high half shifted down a nibble */
                __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 2)));
                wv[r] = _mm256_and_si256(_mm256_srlv_epi64(q, nib_shift), lo);
            } else {
                sg[r] = _mm256_loadu_si256((const __m256i *)(p + 2));
                wv[r] = _mm256_sign_epi8(sg[r], sg[r]);
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) v[c] = _mm256_loadu_si256((const __m256i *)(y[c] + b * 32));
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                __m256i a = q4 ? v[c] : _mm256_sign_epi8(v[c], sg[r]);
                d[r * C + c] = vnni ? dpbusd(_mm256_setzero_si256(), wv[r], a)
                                    : _mm256_madd_epi16(_mm256_maddubs_epi16(wv[r], a), one);
            }
        __m256i s = reduce8(d);
        __m256 dw, dx;
        __m256i sy = _mm256_setzero_si256();
        if (C == 1) {
            dw = _mm256_cvtph_ps(_mm_set_epi16((short)hw[7], (short)hw[6], (short)hw[5],
                                               (short)hw[4], (short)hw[3], (short)hw[2],
                                               (short)hw[1], (short)hw[0]));
            dx = _mm256_set1_ps(yd[0][b]);
            if (q4) sy = _mm256_set1_epi32(ys[0][b]);
        } else {
            __m128 d2 = _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, 0, 0, (short)hw[1], (short)hw[0]));
            dw = _mm256_set_m128(_mm_permute_ps(d2, 0x55), _mm_permute_ps(d2, 0x00));
            __m128 x4 = _mm_set_ps(yd[3][b], yd[2][b], yd[1][b], yd[0][b]);
            dx = _mm256_set_m128(x4, x4);
            if (q4) {
                __m128i s4 = _mm_set_epi32(ys[3][b], ys[2][b], ys[1][b], ys[0][b]);
                sy = _mm256_set_m128i(s4, s4);
            }
        }
        if (q4) s = _mm256_sub_epi32(s, _mm256_slli_epi32(sy, 3));
        __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), dw), dx);
        acc = _mm256_add_ps(acc, t);
    }
    _mm256_storeu_ps(out, acc);
}

/* The eight instances: AVX2 or AVX-VNNI, Q4_0 or Q8_0, 8 x 1 or 2 x 4. */
#define PL_TILE(name, vnni, q4, R, C)                                                              \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const unsigned char *const w[], const int8_t *const y[], const float *const yd[],          \
        const int32_t *const ys[], int64_t nb, const unsigned char *pf, float out[8]) {            \
        tile_avx2(vnni, q4, R, C, w, y, yd, ys, nb, pf, out);                                      \
    }
PL_TILE(tile_q4_8x1, 0, 1, 8, 1)
PL_TILE(tile_q4_2x4, 0, 1, 2, 4)
PL_TILE(tile_q8_8x1, 0, 0, 8, 1)
PL_TILE(tile_q8_2x4, 0, 0, 2, 4)
PL_TILE(tile_q4_8x1_vnni, 1, 1, 8, 1)
PL_TILE(tile_q4_2x4_vnni, 1, 1, 2, 4)
PL_TILE(tile_q8_8x1_vnni, 1, 0, 8, 1)
PL_TILE(tile_q8_2x4_vnni, 1, 0, 2, 4)
/* [vnni][q4][2 x 4] */
static tile_fn *const tiles[2][2][2] = {
    {{tile_q8_8x1, tile_q8_2x4}, {tile_q4_8x1, tile_q4_2x4}},
    {{tile_q8_8x1_vnni, tile_q8_2x4_vnni}, {tile_q4_8x1_vnni, tile_q4_2x4_vnni}}};
#endif

/* The prefill GEMM (pl_cpu_gemm_*): an output lane per activation column, so no horizontal
 * reduction at all. The pack holds 8 columns' block b as 256 bytes, [g][c][4] = the four
 * quants 4g..4g+3 of column c; the weight rows of a tile are unpacked once into 32 bytes a
 * block (Q4_0: the nibbles 0..15 in element order; Q8_0: the quants, then their absolute
 * values) and their scales into floats. For each group g of four elements, the weight's
 * four bytes are broadcast and maddubs'd with the 8 columns' quants: int16 lane 2c + h is
 * two products of column c. Q4_0 adds the eight groups in int16 (each pair is at most
 * 2 * 15 * 127 = 3810 in size, eight of them 30480: no overflow) and widens once; Q8_0
 * meets |w| (<= 128) with y given w's sign (pairs <= 32512) and widens every group. The
 * block's integer dot is then exact in every lane, and each lane does
 * sum + ((float)dot * d_w) * d_x as row_scalar does. */
#ifdef PL_QDOT_X86
__attribute__((target("avx2"))) static inline __m256i bcast4(const unsigned char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* NG (1 or 2) column groups, the second nb blocks after the first (the pack's layout):
 * each weight broadcast then serves NG products. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
gemm_avx2(const int vnni, const int q4, const int NG, const unsigned char *wu, const float *wd,
          int64_t nb, const int8_t *q, const float *d, const int32_t *s, float out[64]) {
    const __m256i one = _mm256_set1_epi16(1);
    const int wbs = q4 ? 32 : 64; /* unpacked bytes per row and block */
    const int8_t *qg[2] = {q, q + nb * 256};
    const float *dg[2] = {d, d + nb * 8};
    const int32_t *sg[2] = {s, s + nb * 8};
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 4 * NG; i++) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, wd += 4) {
        const unsigned char *wb = wu + b * 4 * wbs;
        __m256i dot[8];
#pragma GCC unroll 8
        for (int i = 0; i < 4 * NG; i++) dot[i] = _mm256_setzero_si256();
            /* not unrolled: unrolled, the compiler hoists all the products and spills them */
#pragma GCC unroll 1
        for (int g = 0; g < 8; g++) {
            __m256i y[2];
#pragma GCC unroll 2
            for (int k = 0; k < NG; k++)
                y[k] = _mm256_loadu_si256((const __m256i *)(qg[k] + b * 256 + g * 32));
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m256i w = bcast4(wb + r * wbs + 4 * g), aw = w;
                if (!q4) aw = bcast4(wb + r * wbs + 32 + 4 * g);
#pragma GCC unroll 2
                for (int k = 0; k < NG; k++) {
                    if (vnni) { /* int32 lanes: each column's block dot, whole */
                        dot[k * 4 + r] =
                            dpbusd(dot[k * 4 + r], aw, q4 ? y[k] : _mm256_sign_epi8(y[k], w));
                    } else if (q4) {
                        dot[k * 4 + r] =
                            _mm256_add_epi16(dot[k * 4 + r], _mm256_maddubs_epi16(w, y[k]));
                    } else {
                        __m256i t = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(y[k], w));
                        dot[k * 4 + r] =
                            _mm256_add_epi32(dot[k * 4 + r], _mm256_madd_epi16(t, one));
                    }
                }
            }
        }
#pragma GCC unroll 2
        for (int k = 0; k < NG; k++) {
            __m256 dx = _mm256_loadu_ps(dg[k] + b * 8);
            __m256i sy =
                q4 ? _mm256_loadu_si256((const __m256i *)(sg[k] + b * 8)) : _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m256i i = dot[k * 4 + r];
                if (q4) i = _mm256_sub_epi32(vnni ? i : _mm256_madd_epi16(i, one), sy);
                __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(i), _mm256_broadcast_ss(wd + r));
                acc[k * 4 + r] = _mm256_add_ps(acc[k * 4 + r], _mm256_mul_ps(t, dx));
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 4 * NG; i++) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

/* The eight instances: AVX2 or AVX-VNNI, Q4_0 or Q8_0, one or two column groups. */
typedef void gemm_fn(const unsigned char *wu, const float *wd, int64_t nb, const int8_t *q,
                     const float *d, const int32_t *s, float out[64]);
#define PL_GEMM(name, vnni, q4, ng)                                                                \
    __attribute__((target("avx2,f16c"))) static void name(                                         \
        const unsigned char *wu, const float *wd, int64_t nb, const int8_t *q, const float *d,     \
        const int32_t *s, float out[64]) {                                                         \
        gemm_avx2(vnni, q4, ng, wu, wd, nb, q, d, s, out);                                         \
    }
PL_GEMM(gemm_q4_1, 0, 1, 1)
PL_GEMM(gemm_q4_2, 0, 1, 2)
PL_GEMM(gemm_q8_1, 0, 0, 1)
PL_GEMM(gemm_q8_2, 0, 0, 2)
PL_GEMM(gemm_q4_1_vnni, 1, 1, 1)
PL_GEMM(gemm_q4_2_vnni, 1, 1, 2)
PL_GEMM(gemm_q8_1_vnni, 1, 0, 1)
PL_GEMM(gemm_q8_2_vnni, 1, 0, 2)
/* [vnni][q4][two groups] */
static gemm_fn *const gemms[2][2][2] = {
    {{gemm_q8_1, gemm_q8_2}, {gemm_q4_1, gemm_q4_2}},
    {{gemm_q8_1_vnni, gemm_q8_2_vnni}, {gemm_q4_1_vnni, gemm_q4_2_vnni}}};
#endif

#ifdef PL_QDOT_X86
/* The two-group GEMM tile (4 rows x 16 columns) on AVX-512 with VNNI: both groups' 8
 * columns side by side in one 512-bit register (lanes 0-7 the first group's, 8-15 the
 * second's), so each weight broadcast meets 16 columns in one vpdpbusd. AVX-512 has no
 * byte sign operation, so Q8_0 dots (w + 128) as unsigned bytes with y and takes 128 x the
 * activation block's sum off (the pack's s is 8 x it): sum(w * y) exactly. The float steps
 * are gemm_avx2's, lane for lane, so the same bits. */
#define PL_AVX512 "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c"
__attribute__((target(PL_AVX512))) static inline __m512i bcast4_512(const unsigned char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
__attribute__((target(PL_AVX512))) static inline __m512i two(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
__attribute__((target(PL_AVX512))) static void gemm512(int q4, const unsigned char *wu,
                                                       const float *wd, int64_t nb, const int8_t *q,
                                                       const float *d, const int32_t *s,
                                                       float out[64]) {
    const int wbs = q4 ? 32 : 64;
    const int8_t *q1 = q + nb * 256;
    const float *d1 = d + nb * 8;
    const int32_t *s1 = s + nb * 8;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[4];
    for (int r = 0; r < 4; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, wd += 4) {
        const unsigned char *wb = wu + b * 4 * wbs;
        __m512i dot[4];
        for (int r = 0; r < 4; r++) dot[r] = _mm512_setzero_si512();
#pragma GCC unroll 1
        for (int g = 0; g < 8; g++) {
            __m512i y = two(q + b * 256 + g * 32, q1 + b * 256 + g * 32);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m512i w = bcast4_512(wb + r * wbs + 4 * g);
                if (!q4) w = _mm512_xor_si512(w, flip); /* the quant + 128, unsigned */
                dot[r] = _mm512_dpbusd_epi32(dot[r], w, y);
            }
        }
        __m512 dx = _mm512_castsi512_ps(two(d + b * 8, d1 + b * 8));
        __m512i sy = two(s + b * 8, s1 + b * 8);
        if (!q4) sy = _mm512_slli_epi32(sy, 4); /* 128 x the block sum */
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512i i = _mm512_sub_epi32(dot[r], sy);
            __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(i), _mm512_set1_ps(wd[r]));
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(t, dx));
        }
    }
    for (int r = 0; r < 4; r++) {
        _mm256_storeu_ps(out + r * 8, _mm512_castps512_ps256(acc[r]));
        _mm256_storeu_ps(out + (4 + r) * 8,
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1)));
    }
}
#endif

void pl_cpu_gemm_pack(const int8_t *const y[8], const float *const yd[8],
                      const int32_t *const ys[8], int64_t nb, int8_t *q, float *d, int32_t *s) {
    for (int64_t b = 0; b < nb; b++)
        for (int c = 0; c < 8; c++) {
            for (int g = 0; g < 8; g++)
                memcpy(q + b * 256 + g * 32 + c * 4, y[c] + b * 32 + g * 4, 4);
            d[b * 8 + c] = yd[c][b];
            s[b * 8 + c] = 8 * ys[c][b];
        }
}

#ifdef PL_QDOT_X86
__attribute__((target("avx2,f16c"))) static void unpack_avx2(int q4, int nr,
                                                             const unsigned char *const w[],
                                                             int64_t nb, unsigned char *wu,
                                                             float *wd) {
    const int wbs = q4 ? 32 : 64, bs = q4 ? 18 : 34;
    const __m128i lo = _mm_set1_epi8(15);
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < 4; r++) {
            const unsigned char *p = w[r < nr ? r : nr - 1] + b * bs;
            unsigned char *o = wu + (b * 4 + r) * wbs;
            uint16_t h;
            memcpy(&h, p, 2);
            wd[b * 4 + r] = _cvtsh_ss(h);
            if (q4) {
                __m128i x = _mm_loadu_si128((const __m128i *)(p + 2));
                _mm_storeu_si128((__m128i *)o, _mm_and_si128(x, lo));
                _mm_storeu_si128((__m128i *)(o + 16), _mm_and_si128(_mm_srli_epi16(x, 4), lo));
            } else {
                __m256i x = _mm256_loadu_si256((const __m256i *)(p + 2));
                _mm256_storeu_si256((__m256i *)o, x);
                _mm256_storeu_si256((__m256i *)(o + 32), _mm256_abs_epi8(x));
            }
        }
}
#endif

void pl_cpu_gemm_unpack(int q4, int nr, const unsigned char *const w[], int64_t nb,
                        unsigned char *wu, float *wd) {
#ifdef PL_QDOT_X86
    if (pl_cpu_have_avx2()) {
        unpack_avx2(q4, nr, w, nb, wu, wd);
        return;
    }
#endif
    const int wbs = q4 ? 32 : 64, bs = q4 ? 18 : 34;
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < 4; r++) {
            const unsigned char *p = w[r < nr ? r : nr - 1] + b * bs;
            unsigned char *o = wu + (b * 4 + r) * wbs;
            wd[b * 4 + r] = half(p);
            for (int i = 0; i < (q4 ? 16 : 32); i++) {
                if (q4) {
                    o[i] = p[2 + i] & 15, o[i + 16] = p[2 + i] >> 4;
                } else {
                    int v = (int8_t)p[2 + i];
                    o[i] = p[2 + i], o[32 + i] = (unsigned char)(v < 0 ? -v : v);
                }
            }
        }
}

void pl_cpu_gemm_tile(int q4, int ng, const unsigned char *wu, const float *wd, int64_t nb,
                      const int8_t *q, const float *d, const int32_t *s, float *out) {
    (void)s; /* the x86 kernels' activation block sums; the portable tile does not need them */
#ifdef PL_QDOT_X86
    if (ng == 2 && pl_cpu_have_avx512vnni()) {
        gemm512(q4, wu, wd, nb, q, d, s, out);
        return;
    }
    if (pl_cpu_have_avx2()) {
        gemms[pl_cpu_have_vnni()][q4 != 0][ng == 2](wu, wd, nb, q, d, s, out);
        return;
    }
#endif
#ifdef PL_QDOT_WASM
    if (!pl_cpu_portable) {
        pl_cpu_gemm_tile_wasm(q4, ng, wu, wd, nb, q, d, out);
        return;
    }
#endif
#ifdef __aarch64__
    if (pl_cpu_neon_level()) {
        pl_cpu_gemm_tile_neon(q4, ng, wu, wd, nb, q, d, s, out);
        return;
    }
#endif
    /* the portable reference on the same layouts: row_scalar's arithmetic */
    const int wbs = q4 ? 32 : 64;
    for (int k = 0; k < ng; k++)
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 8; c++) {
                float sum = 0;
                for (int64_t b = 0; b < nb; b++) {
                    const unsigned char *wb = wu + (b * 4 + r) * wbs;
                    const int8_t *qb = q + (k * nb + b) * 256;
                    int32_t dot = 0;
                    for (int e = 0; e < 32; e++)
                        dot += (q4 ? wb[e] - 8 : (int8_t)wb[e]) * qb[(e / 4) * 32 + c * 4 + e % 4];
                    sum += (float)dot * wd[b * 4 + r] * d[(k * nb + b) * 8 + c];
                }
                out[(k * 4 + r) * 8 + c] = sum;
            }
}

/* Activation quantisation (pl_cpu_quant_act): pl_quant_act_q8_0's bits, a block at a time.
 * The vector paths take blocks of finite values (max|x| is then the same whatever the
 * order) and round half away from zero as roundf does (AVX2: t = trunc(v), plus v's sign
 * where |v - t| >= 0.5, v - t being exact; NEON: FRINTA); a block holding NaN or infinity
 * goes the scalar way. */
#ifdef PL_QDOT_X86
/* The largest of m's 8 values. */
__attribute__((target("avx2,f16c"), always_inline)) static inline float hmax_avx2(__m256 m) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    return _mm_cvtss_f32(m4);
}

/* 8 more values v into the running largest |v| (*m) and the lanes that met NaN or
 * infinity (*bad). */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
amax_step(__m256 v, __m256 *m, __m256 *bad) {
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    *bad = _mm256_or_ps(*bad, _mm256_cmp_ps(a, _mm256_set1_ps(INFINITY), _CMP_NLT_UQ));
    *m = _mm256_max_ps(*m, a);
}

/* Whether the n (a multiple of 32) values at x are all finite; their largest |x| in *amax. */
__attribute__((target("avx2,f16c"))) static int amax_avx2(const float *x, int n, float *amax) {
    __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) amax_step(_mm256_loadu_ps(x + i), &m, &bad);
    if (_mm256_movemask_ps(bad)) return 0;
    *amax = hmax_avx2(m);
    return 1;
}

/* roundf(y) of 8 finite values as int32, 0 where outside -128..127 (as the scalar code). */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m256i round8_avx2(__m256 y) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    __m256 t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(y, t)), half, _CMP_GE_OQ);
    t = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(one, _mm256_and_ps(y, sign))));
    __m256 ok = _mm256_and_ps(_mm256_cmp_ps(t, lo, _CMP_GE_OQ), _mm256_cmp_ps(t, hi, _CMP_LE_OQ));
    return _mm256_and_si256(_mm256_cvttps_epi32(t), _mm256_castps_si256(ok));
}

/* 32 int32 values (all in -128..127) to int8 at q, in element order. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
store32_avx2(const __m256i n[4], int8_t *q) {
    __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
    w = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, w);
}

/* q[0..32) = roundf(x * is), as the scalar code (finite x). */
__attribute__((target("avx2,f16c"))) static void round32_avx2(const float *x, float is, int8_t *q) {
    const __m256 vis = _mm256_set1_ps(is);
    __m256i n[4];
    for (int i = 0; i < 4; i++) n[i] = round8_avx2(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vis));
    store32_avx2(n, q);
}

#endif

/* The vector helpers of the activation quantisation where the CPU has them (AVX2 above,
 * NEON in cpu_qdot_neon.c): amax (0 if the n values hold NaN or infinity, else their
 * largest |x| in *amax) and round32 (q[0..32) = roundf(x * is), finite x); false: none. */
typedef struct {
    int (*amax)(const float *x, int n, float *amax);
    void (*round32)(const float *x, float is, int8_t *q);
} quant_vec;

static bool quant_vec_get(quant_vec *v) {
#ifdef PL_QDOT_X86
    if (pl_cpu_have_avx2()) {
        *v = (quant_vec){amax_avx2, round32_avx2};
        return true;
    }
#endif
#ifdef __aarch64__
    if (pl_cpu_neon_level()) {
        *v = (quant_vec){pl_cpu_amax_neon, pl_cpu_round32_neon};
        return true;
    }
#endif
    (void)v;
    return false;
}

/* One block of 32 the vector way, or 0 (NaN or infinity in it: the scalar way). */
static int quant_block_vec(const quant_vec *v, const float *x, int8_t *q, uint16_t *d) {
    float amax;
    if (!v->amax(x, 32, &amax)) return 0;
    const float sc = amax / 127, is = sc != 0 ? 1.0f / sc : 0.0f;
    *d = pl_f32_to_f16(sc);
    v->round32(x, is, q);
    return 1;
}

#ifdef PL_QDOT_X86
/* One block of pl_cpu_quant_act in one pass (amax, scale, rounding as round32_avx2 and the
 * quants' sum from the same registers; F16C for the scale's half: round to nearest even,
 * as pl_f32_to_f16 for the finite scale), or 0 (NaN or infinity in it: the scalar way). A
 * 0.6b decode step quantises ~6,000 blocks on the caller alone between the pool's jobs:
 * with two calls through pointers, the half conversions in C and a sum loop a block took
 * ~27 ns (Zen 4), ~3% of a 16-thread step; so ~19 ns. */
__attribute__((target("avx2,f16c"))) static int quant_block_avx2(const float *x, int8_t *q,
                                                                 float *d, int32_t *s) {
    __m256 v[4], m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) amax_step(v[i] = _mm256_loadu_ps(x + 8 * i), &m, &bad);
    if (_mm256_movemask_ps(bad)) return 0;
    const float sc = hmax_avx2(m) / 127, is = sc != 0 ? 1.0f / sc : 0.0f;
    __m128i h = _mm_cvtps_ph(_mm_set_ss(sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *d = _mm_cvtss_f32(_mm_cvtph_ps(h));
    const __m256 vis = _mm256_set1_ps(is);
    __m256i n[4];
    for (int i = 0; i < 4; i++) n[i] = round8_avx2(_mm256_mul_ps(v[i], vis));
    *s = hsum8(_mm256_add_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3])));
    store32_avx2(n, q);
    return 1;
}
#endif

void pl_cpu_quant_act(const float *x, int64_t k, int8_t *q, float *d, int32_t *s) {
    quant_vec v;
    bool vec = quant_vec_get(&v);
#ifdef PL_QDOT_X86
    const bool one_pass = pl_cpu_have_avx2();
#endif
    for (int64_t b = 0; b < k / 32; b++, x += 32, q += 32) {
#ifdef PL_QDOT_X86
        if (one_pass && quant_block_avx2(x, q, d + b, s + b)) continue;
#endif
        uint16_t h;
        if (!vec || !quant_block_vec(&v, x, q, &h)) pl_quant_act_q8_0(x, 32, q, &h);
        d[b] = pl_f16_to_f32(h);
        int32_t sum = 0;
        for (int t = 0; t < 32; t++) sum += q[t];
        s[b] = sum;
    }
}

/* The 16 sums of 16 quants each of a super-block of 256. */
static void sums16(const int8_t *q, int16_t *s) {
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int t = 0; t < 16; t++) sum += q[16 * g + t];
        s[g] = (int16_t)sum;
    }
}

/* The K-quants' activations: per 256 values, a float scale; the scalar rule and the AVX2
 * one (finite blocks) give the same bits, as for Q8_0 above. */
void pl_cpu_quant_act_k_portable(const float *x, int64_t k, int8_t *q, float *d, int16_t *s) {
    for (int64_t b = 0; b < k / 256; b++, x += 256, q += 256) {
        float amax = 0;
        for (int j = 0; j < 256; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float sc = amax / 127, is = sc != 0 ? 1.0f / sc : 0.0f;
        d[b] = sc;
        for (int j = 0; j < 256; j++) {
            const float v = roundf(x[j] * is); /* -127..127 unless x holds NaN */
            q[j] = (int8_t)(v >= -128.0f && v <= 127.0f ? (int)v : 0);
        }
        sums16(q, s + b * 16);
    }
}

void pl_cpu_quant_act_k(const float *x, int64_t k, int8_t *q, float *d, int16_t *s) {
    quant_vec v;
    if (!quant_vec_get(&v)) {
        pl_cpu_quant_act_k_portable(x, k, q, d, s);
        return;
    }
    for (int64_t b = 0; b < k / 256; b++) {
        const float *xb = x + b * 256;
        int8_t *qb = q + b * 256;
        float amax;
        if (!v.amax(xb, 256, &amax)) {
            pl_cpu_quant_act_k_portable(xb, 256, qb, d + b, s + b * 16);
            continue;
        }
        const float sc = amax / 127, is = sc != 0 ? 1.0f / sc : 0.0f;
        d[b] = sc;
        for (int i = 0; i < 8; i++) v.round32(xb + 32 * i, is, qb + 32 * i);
        sums16(qb, s + b * 16);
    }
}

int pl_cpu_portable;

int pl_cpu_have_avx2(void) {
#ifdef PL_QDOT_X86
    static int avx2 = -1; /* benign race: every thread computes the same answer */
    if (avx2 < 0) { /* F16C from cpuid leaf 1 (ECX bit 29): clang's builtin does not know it */
        unsigned a, b, c = 0, d;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        avx2 = __builtin_cpu_supports("avx2") && f16c ? 1 : 0;
    }
    return avx2 && !pl_cpu_portable;
#else
    return 0;
#endif
}

int pl_cpu_no_vnni, pl_cpu_no_avx512;

int pl_cpu_have_avx512vnni(void) {
#ifdef PL_QDOT_X86
    static int v = -1; /* benign race, as above; the builtin also asks the OS (XCR0) */
    if (v < 0)
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    return v && !pl_cpu_no_avx512 && pl_cpu_have_avx2();
#else
    return 0;
#endif
}

int pl_cpu_have_avx512f(void) {
#ifdef PL_QDOT_X86
    static int v = -1; /* benign race, as above */
    if (v < 0) v = __builtin_cpu_supports("avx512f");
    return v && !pl_cpu_no_avx512 && pl_cpu_have_avx2();
#else
    return 0;
#endif
}

int pl_cpu_have_vnni(void) {
#ifdef PL_QDOT_X86
    static int vnni = -1; /* benign race, as above */
    if (vnni < 0) {       /* AVX-VNNI: cpuid leaf 7, sub-leaf 1, EAX bit 4 */
        unsigned a = 0, b, c, d;
        vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) ? 1 : 0;
    }
    return vnni && !pl_cpu_no_vnni && pl_cpu_have_avx2();
#else
    return 0;
#endif
}

void pl_cpu_qdot_tile(int q4, int nr, int nc, const unsigned char *const w[],
                      const int8_t *const y[], const float *const yd[], const int32_t *const ys[],
                      int64_t nb, const unsigned char *pf, float *out) {
    (void)pf; /* a prefetch hint only the x86 tiles take */
#ifdef PL_QDOT_X86
    if (pl_cpu_have_avx2()) {
        run_tile(tiles[pl_cpu_have_vnni()][q4 != 0][nc != 1], nr, nc, w, y, yd, ys, nb, pf, out);
        return;
    }
#endif
#ifdef PL_QDOT_WASM
    if (!pl_cpu_portable) {
        pl_cpu_qdot_tile_wasm(q4, nr, nc, w, y, yd, nb, out);
        return;
    }
#endif
#ifdef __aarch64__
    if (pl_cpu_neon_level()) {
        pl_cpu_qdot_tile_neon(q4, nr, nc, w, y, yd, nb, out);
        return;
    }
#endif
    pl_cpu_qdot_tile_portable(q4, nr, nc, w, y, yd, ys, nb, out);
}

void pl_cpu_qdot_tile_portable(int q4, int nr, int nc, const unsigned char *const w[],
                               const int8_t *const y[], const float *const yd[],
                               const int32_t *const ys[], int64_t nb, float *out) {
    (void)ys;
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) out[r * nc + c] = row_scalar(q4, w[r], y[c], yd[c], nb);
}

float pl_cpu_qdot_row_portable(int q4, const unsigned char *w, const int8_t *y, const float *yd,
                               int64_t nb) {
    return row_scalar(q4, w, y, yd, nb);
}
