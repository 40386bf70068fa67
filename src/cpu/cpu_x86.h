/* cpu_x86.h - the AVX2 helpers the act_q8 tiles share (cpu_qdot.c, cpu_qdot_more.c, cpu_kdot.c);
 * x86 only, included where PL_QDOT_X86-style guards hold. */
#ifndef PL_CPU_X86_H
#define PL_CPU_X86_H

#include <immintrin.h>
#include <stdint.h>

/* acc + the sums of four u8 x s8 products per int32 lane: AVX-VNNI's vpdpbusd in its VEX
 * form, written as one instruction of inline assembly so the kernels around it keep their
 * AVX2 target and are compiled once for both paths; only called where pl_cpu_have_vnni().
 * No saturation: the same integers maddubs (whose pairs here never saturate) + madd give. */
__attribute__((target("avx2"), always_inline)) static inline __m256i dpbusd(__m256i acc, __m256i u8,
                                                                            __m256i s8) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
    return acc;
}

/* acc + madd(a, b) (int16 pairs multiplied and summed into int32 lanes): AVX-VNNI's
 * vpdpwssd in its VEX form, as dpbusd above; only called where pl_cpu_have_vnni(). Exact
 * (the non-saturating form, as madd + add). */
__attribute__((target("avx2"), always_inline)) static inline __m256i dpwssd(__m256i acc, __m256i a,
                                                                            __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
}

/* The sum of v's eight int32s (exact where it fits). */
__attribute__((target("avx2"))) static inline int32_t hsum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The eight lanes' block sums: lane k is the sum of d[k]'s eight int32s (exact). */
__attribute__((target("avx2"))) static inline __m256i reduce8(const __m256i d[8]) {
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(d[4], d[5]), _mm256_hadd_epi32(d[6], d[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

/* A decode or batch tile kernel: 8 x 1 or 2 x 4 (weight rows x activation rows), lane
 * r * C + c of out. */
typedef void tile_fn(const unsigned char *const w[], const int8_t *const y[],
                     const float *const yd[], const int32_t *const ys[], int64_t nb,
                     const unsigned char *pf, float out[8]);

/* nr weight rows x nc activation rows through fn, whose shape is fixed (nc == 1: 8 x 1,
 * else 2 x 4): missing rows and columns stand in for the last ones, and only the nr x nc
 * wanted values go to out[r * nc + c]. */
static inline void run_tile(tile_fn *fn, int nr, int nc, const unsigned char *const w[],
                            const int8_t *const y[], const float *const yd[],
                            const int32_t *const ys[], int64_t nb, const unsigned char *pf,
                            float *out) {
    int R = nc == 1 ? 8 : 2, C = 8 / R;
    const unsigned char *wt[8];
    const int8_t *yt[4];
    const float *ydt[4];
    const int32_t *yst[4];
    for (int r = 0; r < R; r++) wt[r] = w[r < nr ? r : nr - 1];
    for (int c = 0; c < C; c++) {
        int cc = c < nc ? c : nc - 1;
        yt[c] = y[cc], ydt[c] = yd[cc], yst[c] = ys[cc];
    }
    float o[8];
    fn(wt, yt, ydt, yst, nb, pf, o);
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) out[r * nc + c] = o[r * C + c];
}

#endif
