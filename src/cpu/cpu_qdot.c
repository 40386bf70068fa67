/* cpu_qdot.c - one weight row of Q4_0 or Q8_0 blocks against activations quantised to Q8_0
 * blocks (the act_q8 matmul, cpu_matmul.c).
 *
 * Each block's integer dot is exact whatever instructions compute it, and the float sum
 * over blocks always runs in block order, (float)sumi * d_w * d_x, so the AVX2 path and the
 * portable one give bit-identical results: the same tokens on every machine. The AVX2 path
 * is chosen at run time (x86 only; the library is still built for the baseline ISA). */
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
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
/* Signed bytes a . b over 32 lanes into 8 int32 partial sums: maddubs wants one unsigned
 * operand, so |a| meets b with a's sign (exact: |a| <= 128 as an unsigned byte, and b, an
 * activation, is never -128, so negating it cannot wrap; pairs fit int16). */
__attribute__((target("avx2"))) static inline __m256i dot_i8(__m256i a, __m256i b) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

__attribute__((target("avx2"))) static inline int32_t hsum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The 32 weights of the block at w as signed bytes: Q4_0's low nibbles (weights 0..15)
 * in bytes 0..15 and high nibbles (16..31) in 16..31, minus 8; Q8_0's as they are. */
__attribute__((target("avx2"))) static inline __m256i weights32(int q4, const unsigned char *w) {
    if (!q4) return _mm256_loadu_si256((const __m256i *)(w + 2));
    const __m128i lo = _mm_set1_epi8(15);
    __m128i q = _mm_loadu_si128((const __m128i *)(w + 2));
    __m256i n = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo), _mm_and_si128(q, lo));
    return _mm256_sub_epi8(n, _mm256_set1_epi8(8));
}

/* The block's f16 scale through F16C (exact, like pl_f16_to_f32). */
__attribute__((target("avx2,f16c"))) static inline float half_f16c(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

__attribute__((target("avx2,f16c"))) static float
row_avx2(int q4, const unsigned char *w, const int8_t *y, const float *yd, int64_t nb) {
    float sum = 0;
    for (int64_t b = 0; b < nb; b++, y += 32) {
        __m256i x = weights32(q4, w);
        int32_t s = hsum(dot_i8(x, _mm256_loadu_si256((const __m256i *)y)));
        sum += (float)s * half_f16c(w) * yd[b];
        w += q4 ? 18 : 34;
    }
    return sum;
}

/* Four activation rows at once: each weight block is unpacked once, and the four integer
 * sums come out of one horizontal reduction. Same per-row arithmetic as row_avx2. */
__attribute__((target("avx2,f16c"))) static void rows4_avx2(int q4, const unsigned char *w,
                                                            const int8_t *const y[4],
                                                            const float *const yd[4], int64_t nb,
                                                            float out[4]) {
    __m128 sum = _mm_setzero_ps(); /* lane i: row i's running sum */
    for (int64_t b = 0; b < nb; b++) {
        __m256i x = weights32(q4, w);
        __m256i ax = _mm256_sign_epi8(x, x), one = _mm256_set1_epi16(1), d[4];
        for (int i = 0; i < 4; i++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(y[i] + b * 32));
            d[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(v, x)), one);
        }
        /* lanes: (d0 d1 d2 d3) pairwise sums, then the two 128-bit halves */
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        /* each lane: sum + ((float)si * d_w) * d_x, the scalar path's operations exactly
         * (separate multiplies and add, no fused multiply-add) */
        __m128 dx = _mm_set_ps(yd[3][b], yd[2][b], yd[1][b], yd[0][b]);
        __m128 t = _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(s4), _mm_set1_ps(half_f16c(w))), dx);
        sum = _mm_add_ps(sum, t);
        w += q4 ? 18 : 34;
    }
    _mm_storeu_ps(out, sum);
}
#endif

static int have_avx2(void) {
#ifdef PL_QDOT_X86
    static int avx2 = -1; /* benign race: every thread computes the same answer */
    if (avx2 < 0) { /* F16C from cpuid leaf 1 (ECX bit 29): clang's builtin does not know it */
        unsigned a, b, c = 0, d;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        avx2 = __builtin_cpu_supports("avx2") && f16c ? 1 : 0;
    }
    return avx2;
#else
    return 0;
#endif
}

void pl_cpu_qdot_rows4(int q4, const unsigned char *w, const int8_t *const y[4],
                       const float *const yd[4], int64_t nb, float out[4]) {
#ifdef PL_QDOT_X86
    if (have_avx2()) {
        rows4_avx2(q4, w, y, yd, nb, out);
        return;
    }
#endif
    for (int i = 0; i < 4; i++) out[i] = row_scalar(q4, w, y[i], yd[i], nb);
}

float pl_cpu_qdot_row(int q4, const unsigned char *w, const int8_t *y, const float *yd,
                      int64_t nb) {
#ifdef PL_QDOT_X86
    if (have_avx2()) return row_avx2(q4, w, y, yd, nb);
#endif
    return row_scalar(q4, w, y, yd, nb);
}

float pl_cpu_qdot_row_portable(int q4, const unsigned char *w, const int8_t *y, const float *yd,
                               int64_t nb) {
    return row_scalar(q4, w, y, yd, nb);
}
