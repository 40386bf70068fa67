/* cpu_x86.h - the AVX2 helpers the act_q8 tiles share (cpu_qdot.c, cpu_qdot_more.c); x86
 * only, included where PL_QDOT_X86-style guards hold. */
#ifndef PL_CPU_X86_H
#define PL_CPU_X86_H

#include <immintrin.h>

/* acc + the sums of four u8 x s8 products per int32 lane: AVX-VNNI's vpdpbusd in its VEX
 * form, written as one instruction of inline assembly so the kernels around it keep their
 * AVX2 target and are compiled once for both paths; only called where pl_cpu_have_vnni().
 * No saturation: the same integers maddubs (whose pairs here never saturate) + madd give. */
__attribute__((target("avx2"), always_inline)) static inline __m256i dpbusd(__m256i acc, __m256i u8,
                                                                            __m256i s8) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
    return acc;
}

/* The eight lanes' block sums: lane k is the sum of d[k]'s eight int32s (exact). */
__attribute__((target("avx2"))) static inline __m256i reduce8(const __m256i d[8]) {
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(d[4], d[5]), _mm256_hadd_epi32(d[6], d[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

#endif
