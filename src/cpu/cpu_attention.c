/* cpu_attention.c - causal grouped-query attention over the KV cache on the CPU.
 *
 * One work item is one query row and the query heads that share one kv head. Two
 * arithmetics, picked by the cache type:
 *   - F32 cache: exact float32 - scores against every key up to the row's own position,
 *     a max-subtracted softmax, the weighted sum of the values, divided by the total.
 *   - F16 cache, calls of 64 query rows or more: float32 tiles (cpu_attention_tiled.c), as
 *     llama.cpp takes its prompt batches of 64 or more.
 *   - F16 cache, shorter calls: half-precision attention as llama.cpp's CPU flash attention
 *     computes it for them (llama.cpp's default, so its reference outputs carry this
 *     rounding): the query is
 *     rounded to f16, keys are visited once with a running maximum (online softmax), and
 *     the value accumulator is held in f16, rounded after every update (multiply, then
 *     add: the same stories260K results as a fused multiply-add, and fmaf is a library
 *     call on CPUs built without FMA). Exact float32
 *     arithmetic on the same f16 cache lands about 3e-4 of the largest logit away from
 *     llama.cpp on stories260K; this path lands within 1e-4.
   - Q8_0 cache: each key and value dequantised (int8 quant x its block's f16 scale, exact
 *     in float32), then the F32 cache's arithmetic.
 * Each output value is computed by one thread in one fixed order, so the thread count
 * never changes a result. On x86 with AVX2 + F16C (16 lanes for the lane-wise operations
 * with AVX-512 F; chosen at run time) and on arm64 (NEON) the F16 path runs many lanes at a
 * time with the same bits (attend_f16_rows). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef pl_cpu_attn_job attn_job;

/* Values [off, off + len) of cache row t as floats: the F32 cache's own, or a Q8_0 cache's
 * dequantised into tmp (quant x its block's f16 scale: exact in float32). */
static const float *cache_row(const attn_job *j, const pl_buf *c, int64_t t, int64_t off,
                              int64_t len, float *tmp) {
    int64_t e0 = t * c->ne0 + off;
    if (c->type == PL_TYPE_F32) return fptr(c) + e0;
    const int8_t *q = q8_quants(c);
    const uint16_t *sc = q8_scales(c);
    for (int64_t d = 0; d < len; d++) tmp[d] = (float)q[e0 + d] * j->c->f16[sc[(e0 + d) / 32]];
    return tmp;
}

/* Exact float32 attention of query q (hd values) over keys 0..n_keys-1 of kv head kvh, on
 * an F32 cache or the dequantised values of a Q8_0 cache. */
static void attend_f32(const attn_job *j, const float *q, int64_t kvh, int64_t n_keys, float *o,
                       float *scratch) {
    const pl_attn_params *p = j->p;
    int64_t hd = p->head_dim, hdv = p->head_dim_v;
    float *scores = scratch, *acc = scratch + n_keys, *row = acc + hdv;
    float mx = -INFINITY;
    for (int64_t t = 0; t < n_keys; t++) {
        scores[t] = pl_cpu_dot(q, cache_row(j, j->k, t, kvh * hd, hd, row), hd) * p->scale;
        if (scores[t] > mx) mx = scores[t];
    }
    float sum = 0;
    for (int64_t t = 0; t < n_keys; t++) {
        scores[t] = expf(scores[t] - mx);
        sum += scores[t];
    }
    for (int64_t d = 0; d < hdv; d++) acc[d] = 0;
    for (int64_t t = 0; t < n_keys; t++) {
        const float *vr = cache_row(j, j->v, t, kvh * hdv, hdv, row);
        for (int64_t d = 0; d < hdv; d++) acc[d] += scores[t] * vr[d];
    }
    for (int64_t d = 0; d < hdv; d++) o[d] = acc[d] / sum;
}

/* Kv head kvh's key and value rows for position t in an F16 cache. */
static inline const uint16_t *key_half(const attn_job *j, int64_t t, int64_t kvh) {
    return (const uint16_t *)vptr(j->k) + t * j->k->ne0 + kvh * j->p->head_dim;
}
static inline const uint16_t *value_half(const attn_job *j, int64_t t, int64_t kvh) {
    return (const uint16_t *)vptr(j->v) + t * j->v->ne0 + kvh * j->p->head_dim_v;
}

/* Half-precision attention (see the file comment) over an F16 cache for the g query heads
 * q[0..g) that share kv head kvh, writing o[0..g). Each key and value row is converted once
 * for the whole group. The accumulators hold half values, stored as floats. */
static void attend_f16(const attn_job *j, const float *q, int64_t g, int64_t kvh, int64_t n_keys,
                       float *o, float *scratch) {
    const pl_attn_params *p = j->p;
    const float *h2f = j->c->f16;
    int64_t hd = p->head_dim, hdv = p->head_dim_v;
    float *qh = scratch, *kr = qh + g * hd, *vr = kr + hd, *acc = vr + hdv;
    float *mx = acc + g * hdv, *sum = mx + g;
    for (int64_t d = 0; d < g * hd; d++) qh[d] = pl_cpu_round_half(q[d]);
    for (int64_t d = 0; d < g * hdv; d++) acc[d] = 0;
    for (int64_t h = 0; h < g; h++) mx[h] = -INFINITY, sum[h] = 0;
    for (int64_t t = 0; t < n_keys; t++) {
        const uint16_t *kh = key_half(j, t, kvh), *vh = value_half(j, t, kvh);
        for (int64_t d = 0; d < hd; d++) kr[d] = h2f[kh[d]];
        for (int64_t d = 0; d < hdv; d++) vr[d] = h2f[vh[d]];
        for (int64_t h = 0; h < g; h++) {
            float s = pl_cpu_dot(qh + h * hd, kr, hd) * p->scale, *ah = acc + h * hdv;
            float rescale = 1, w = 1; /* old terms are scaled when the maximum grows */
            if (s > mx[h]) {
                rescale = expf(mx[h] - s);
                mx[h] = s;
                for (int64_t d = 0; d < hdv; d++) ah[d] = pl_cpu_round_half(ah[d] * rescale);
            } else {
                w = expf(s - mx[h]);
            }
            for (int64_t d = 0; d < hdv; d++) ah[d] = pl_cpu_round_half(vr[d] * w + ah[d]);
            sum[h] = sum[h] * rescale + w;
        }
    }
    for (int64_t h = 0; h < g; h++) {
        float inv = 1.0f / sum[h];
        for (int64_t d = 0; d < hdv; d++) o[h * hdv + d] = acc[h * hdv + d] * inv;
    }
}

/* The query rows of one vector work item: ATTN_ROWS consecutive rows (their g heads each)
 * visit the keys together, so each key and value row is converted once for all of them
 * and the rows' key dots run side by side. */
#define ATTN_ROWS 4
/* and the keys they visit a tile at a time (attend_f16_rows) */
#define ATTN_KEYS 32

/* attend_f16's row operations on many lanes at a time, for head sizes that are multiples
 * of 8 (AVX2 + F16C on x86, NEON on arm64): the same operations in the same order, so the
 * same bits. Half conversions in hardware are exact both ways and round to nearest even
 * as pl_cpu_round_half does (a NaN may keep more of its payload); the key dot keeps
 * pl_cpu_dot's eight partial sums and their pairwise total; multiplies and adds stay
 * separate (no fused multiply-add). */
/* One key's step of a head's online softmax, worked out before the accumulator is touched
 * (the running maximum depends on the scores alone): rescale the accumulator first (when
 * the key's score is a new maximum: a = half(a * rescale)), then a = half(v * w + a). */
struct key_step {
    int scale; /* the score was a new maximum */
    float rescale, w;
};

typedef struct {
    void (*from_half)(float *dst, const uint16_t *src, int64_t n); /* dst = src as floats */
    void (*round)(float *dst, const float *src, int64_t n);        /* dst = half(src) */
    void (*scale)(float *a, float r, int64_t n);                   /* a = half(a * r) */
    void (*axpy)(float *a, const float *v, float w, int64_t n);    /* a = half(v * w + a) */
    /* s[h] = (head h's query . kr) * scale for heads h0..h1-1 of qh (hd values apart) */
    void (*dots)(const float *qh, const float *kr, int64_t h0, int64_t h1, int64_t hd, float scale,
                 float *s);
    /* One head's accumulator a (n values) over ns keys (key_steps), 1; or 0 (nothing done,
     * or NULL): the caller takes scale and axpy key by key. */
    int (*update)(float *a, const float *vt, int64_t n, const struct key_step *st, int64_t ns);
} attn_ops;

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PL_ATTN_X86 1
__attribute__((target("avx2,f16c"))) static inline __m256 round_half8(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("avx2,f16c"))) static void from_half_avx2(float *dst, const uint16_t *src,
                                                                int64_t n) {
    for (int64_t d = 0; d < n; d += 8)
        _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + d))));
}
__attribute__((target("avx2,f16c"))) static void round_avx2(float *dst, const float *src,
                                                            int64_t n) {
    for (int64_t d = 0; d < n; d += 8)
        _mm256_storeu_ps(dst + d, round_half8(_mm256_loadu_ps(src + d)));
}
__attribute__((target("avx2,f16c"))) static void scale_avx2(float *a, float r, int64_t n) {
    __m256 r8 = _mm256_set1_ps(r);
    for (int64_t d = 0; d < n; d += 8)
        _mm256_storeu_ps(a + d, round_half8(_mm256_mul_ps(_mm256_loadu_ps(a + d), r8)));
}
__attribute__((target("avx2,f16c"))) static void axpy_avx2(float *a, const float *v, float w,
                                                           int64_t n) {
    __m256 w8 = _mm256_set1_ps(w);
    for (int64_t d = 0; d < n; d += 8) {
        __m256 x = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + d), w8), _mm256_loadu_ps(a + d));
        _mm256_storeu_ps(a + d, round_half8(x));
    }
}

/* Four heads at a time where there are four. */
__attribute__((target("avx2,f16c"))) static void dots_avx2(const float *qh, const float *kr,
                                                           int64_t h0, int64_t h1, int64_t hd,
                                                           float scale, float *s) {
    int64_t h = h0;
    for (; h + 4 <= h1; h += 4) {
        const float *q0 = qh + h * hd;
        __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
        for (int64_t e = 0; e < hd; e += 8) {
            __m256 k = _mm256_loadu_ps(kr + e);
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(q0 + e), k));
            b = _mm256_add_ps(b, _mm256_mul_ps(_mm256_loadu_ps(q0 + hd + e), k));
            c = _mm256_add_ps(c, _mm256_mul_ps(_mm256_loadu_ps(q0 + 2 * hd + e), k));
            d = _mm256_add_ps(d, _mm256_mul_ps(_mm256_loadu_ps(q0 + 3 * hd + e), k));
        }
        /* ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) of each, as pl_cpu_dot */
        __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
        __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
        _mm_storeu_ps(s + h, _mm_mul_ps(u, _mm_set1_ps(scale)));
    }
    for (; h < h1; h++) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t e = 0; e < hd; e += 8)
            a = _mm256_add_ps(
                a, _mm256_mul_ps(_mm256_loadu_ps(qh + h * hd + e), _mm256_loadu_ps(kr + e)));
        float l[8];
        _mm256_storeu_ps(l, a);
        s[h] = (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) * scale;
    }
}
static const attn_ops ops_avx2 = {from_half_avx2, round_avx2, scale_avx2,
                                  axpy_avx2,      dots_avx2,  NULL};

/* The lane-wise operations on AVX-512 F: 16 lanes, then 8 (head sizes 8 past a multiple of
 * 16) as above; each lane the same operations, so the same bits. The key dots stay
 * dots_avx2's (their eight partial sums a head are pl_cpu_dot's). */
#define AVX512_TARGET __attribute__((target("avx512f,avx2,f16c")))
AVX512_TARGET static inline __m512 round_half16(__m512 x) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
AVX512_TARGET static void from_half_avx512(float *dst, const uint16_t *src, int64_t n) {
    int64_t d = 0;
    for (; d + 16 <= n; d += 16)
        _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + d))));
    if (d < n) from_half_avx2(dst + d, src + d, n - d);
}
AVX512_TARGET static void round_avx512(float *dst, const float *src, int64_t n) {
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) _mm512_storeu_ps(dst + d, round_half16(_mm512_loadu_ps(src + d)));
    if (d < n) round_avx2(dst + d, src + d, n - d);
}
AVX512_TARGET static void scale_avx512(float *a, float r, int64_t n) {
    __m512 r16 = _mm512_set1_ps(r);
    int64_t d = 0;
    for (; d + 16 <= n; d += 16)
        _mm512_storeu_ps(a + d, round_half16(_mm512_mul_ps(_mm512_loadu_ps(a + d), r16)));
    if (d < n) scale_avx2(a + d, r, n - d);
}
AVX512_TARGET static void axpy_avx512(float *a, const float *v, float w, int64_t n) {
    __m512 w16 = _mm512_set1_ps(w);
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        __m512 x =
            _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + d), w16), _mm512_loadu_ps(a + d));
        _mm512_storeu_ps(a + d, round_half16(x));
    }
    if (d < n) axpy_avx2(a + d, v + d, w, n - d);
}
/* The head's accumulator held in N registers of 16 lanes over all its keys (head sizes 64,
 * 128, 256): each key's scale and axpy as scale_avx512 and axpy_avx512 do them. */
AVX512_TARGET __attribute__((always_inline)) static inline void
update_regs(const int N, float *a, const float *vt, const struct key_step *st, int64_t ns) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int u = 0; u < N; u++) acc[u] = _mm512_loadu_ps(a + 16 * u);
    for (int64_t i = 0; i < ns; i++) {
        if (st[i].scale) {
            __m512 r16 = _mm512_set1_ps(st[i].rescale);
#pragma GCC unroll 16
            for (int u = 0; u < N; u++) acc[u] = round_half16(_mm512_mul_ps(acc[u], r16));
        }
        __m512 w16 = _mm512_set1_ps(st[i].w);
        const float *v = vt + i * 16 * N;
#pragma GCC unroll 16
        for (int u = 0; u < N; u++)
            acc[u] = round_half16(
                _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + 16 * u), w16), acc[u]));
    }
#pragma GCC unroll 16
    for (int u = 0; u < N; u++) _mm512_storeu_ps(a + 16 * u, acc[u]);
}
AVX512_TARGET static int update_avx512(float *a, const float *vt, int64_t n,
                                       const struct key_step *st, int64_t ns) {
    if (n == 64)
        update_regs(4, a, vt, st, ns);
    else if (n == 128)
        update_regs(8, a, vt, st, ns);
    else if (n == 256)
        update_regs(16, a, vt, st, ns);
    else
        return 0;
    return 1;
}
static const attn_ops ops_avx512 = {from_half_avx512, round_avx512, scale_avx512,
                                    axpy_avx512,      dots_avx2,    update_avx512};
#endif

#if defined(__aarch64__)
#include <arm_neon.h>
/* Four lanes a vector; arm64's half conversions (FCVTN, FCVTL) are baseline armv8-a. */
static inline float32x4_t round_half4(float32x4_t x) {
    return vcvt_f32_f16(vcvt_f16_f32(x));
}
static void from_half_neon(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t d = 0; d < n; d += 4)
        vst1q_f32(dst + d, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + d))));
}
static void round_neon(float *dst, const float *src, int64_t n) {
    for (int64_t d = 0; d < n; d += 4) vst1q_f32(dst + d, round_half4(vld1q_f32(src + d)));
}
static void scale_neon(float *a, float r, int64_t n) {
    for (int64_t d = 0; d < n; d += 4)
        vst1q_f32(a + d, round_half4(vmulq_n_f32(vld1q_f32(a + d), r)));
}
static void axpy_neon(float *a, const float *v, float w, int64_t n) {
    for (int64_t d = 0; d < n; d += 4)
        vst1q_f32(a + d,
                  round_half4(vaddq_f32(vmulq_n_f32(vld1q_f32(v + d), w), vld1q_f32(a + d))));
}
/* pl_cpu_dot's partial sums 0..3 in lo, 4..7 in hi; two pairwise adds give its total. */
static void dots_neon(const float *qh, const float *kr, int64_t h0, int64_t h1, int64_t hd,
                      float scale, float *s) {
    for (int64_t h = h0; h < h1; h++) {
        const float *q = qh + h * hd;
        float32x4_t lo = vdupq_n_f32(0), hi = vdupq_n_f32(0);
        for (int64_t e = 0; e < hd; e += 8) {
            lo = vaddq_f32(lo, vmulq_f32(vld1q_f32(q + e), vld1q_f32(kr + e)));
            hi = vaddq_f32(hi, vmulq_f32(vld1q_f32(q + e + 4), vld1q_f32(kr + e + 4)));
        }
        float32x4_t t = vpaddq_f32(lo, hi); /* l0+l1, l2+l3, l4+l5, l6+l7 */
        t = vpaddq_f32(t, t);
        s[h] = (vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 1)) * scale;
    }
}
static const attn_ops ops_neon = {from_half_neon, round_neon, scale_neon,
                                  axpy_neon,      dots_neon,  NULL};
#endif

/* The conversions above on whole groups of 8 (4 on arm64), the rest one by one
 * (cpu_internal.h; the tiled attention's key and value tiles). */
void pl_cpu_from_half(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
#ifdef PL_ATTN_X86
    if (pl_cpu_have_avx2()) {
        i = n / 8 * 8;
        (pl_cpu_have_avx512f() ? from_half_avx512 : from_half_avx2)(d, s, i);
    }
#endif
#if defined(__aarch64__)
    i = n / 4 * 4;
    from_half_neon(d, s, i);
#endif
    for (; i < n; i++) d[i] = pl_f16_to_f32(s[i]);
}

#if defined(PL_ATTN_X86) || defined(__aarch64__) /* the targets with vector operations */
/* Key rows this far ahead of the one being read are asked for (the hardware prefetchers
 * do not follow rows a few hundred bytes long 2 KiB or more apart): with the KV cache on
 * huge pages (cpu_weights.c) the 0.6b's 1-thread tg512 went 40-47 -> 53-63 tok/s; on 4 KiB
 * pages, or 4 to 32 keys ahead, less (docs/cpu-notes.md). */
#define ATTN_PREFETCH 8
static inline void prefetch_rows(const attn_job *j, int64_t t, int64_t kvh) {
    int64_t hd = j->p->head_dim, hdv = j->p->head_dim_v;
    const char *k = (const char *)key_half(j, t, kvh), *v = (const char *)value_half(j, t, kvh);
    for (int64_t b = 0; b < 2 * hd; b += 64) __builtin_prefetch(k + b);
    for (int64_t b = 0; b < 2 * hdv; b += 64) __builtin_prefetch(v + b);
}

/* attend_f16 on vector operations for the nr <= ATTN_ROWS query rows q (row r:
 * n_keys0 + r keys, g heads of hd values, rows q_stride apart), head sizes multiples of 8:
 * per row and head the same operations in the same order as attend_f16. The keys go
 * ATTN_KEYS at a time: their rows converted once, every head's scores for them, then each
 * head's steps over them (ops->update: its accumulator in registers where it can be), so
 * each head meets its keys in order as attend_f16 does. */
__attribute__((always_inline)) static inline void
attend_f16_rows(const attn_ops *ops, const attn_job *j, const float *q, int64_t q_stride,
                int64_t nr, int64_t g, int64_t kvh, int64_t n_keys0, float *o, int64_t o_stride,
                float *scratch) {
    const pl_attn_params *p = j->p;
    int64_t hd = p->head_dim, hdv = p->head_dim_v, nh = nr * g;
    float *qh = scratch, *kt = qh + nh * hd, *vt = kt + ATTN_KEYS * hd, *acc = vt + ATTN_KEYS * hdv;
    float *mx = acc + nh * hdv, *sum = mx + nh, *sc = sum + nh;
    struct key_step *st = (struct key_step *)(sc + ATTN_KEYS * nh);
    for (int64_t r = 0; r < nr; r++) ops->round(qh + r * g * hd, q + r * q_stride, g * hd);
    for (int64_t d = 0; d < nh * hdv; d++) acc[d] = 0;
    for (int64_t h = 0; h < nh; h++) mx[h] = -INFINITY, sum[h] = 0;
    int64_t n_keys = n_keys0 + nr - 1; /* the last row's */
    for (int64_t t0 = 0; t0 < n_keys; t0 += ATTN_KEYS) {
        int64_t nt = n_keys - t0 < ATTN_KEYS ? n_keys - t0 : ATTN_KEYS;
        for (int64_t i = 0; i < nt; i++) {
            int64_t t = t0 + i;
            /* the rows that see key t: r >= t - n_keys0 + 1, heads h0.. */
            int64_t h0 = (t < n_keys0 ? 0 : t - n_keys0 + 1) * g;
            if (t + ATTN_PREFETCH < n_keys) prefetch_rows(j, t + ATTN_PREFETCH, kvh);
            ops->from_half(kt + i * hd, key_half(j, t, kvh), hd);
            ops->from_half(vt + i * hdv, value_half(j, t, kvh), hdv);
            ops->dots(qh, kt + i * hd, h0, nh, hd, p->scale, sc + i * nh);
        }
        for (int64_t h = 0; h < nh; h++) {
            /* head h (row h / g) sees keys up to n_keys0 + h / g - 1 */
            int64_t ns = n_keys0 + h / g - t0;
            if (ns > nt) ns = nt;
            for (int64_t i = 0; i < ns; i++) { /* its steps: the scores alone decide them */
                float s = sc[i * nh + h];
                st[i] = (struct key_step){0, 1, 1};
                if (s > mx[h]) {
                    st[i].scale = 1, st[i].rescale = expf(mx[h] - s);
                    mx[h] = s;
                } else {
                    st[i].w = expf(s - mx[h]);
                }
                sum[h] = sum[h] * st[i].rescale + st[i].w;
            }
            float *ah = acc + h * hdv;
            if (ns <= 0 || !ops->update || !ops->update(ah, vt, hdv, st, ns))
                for (int64_t i = 0; i < ns; i++) {
                    if (st[i].scale) ops->scale(ah, st[i].rescale, hdv);
                    ops->axpy(ah, vt + i * hdv, st[i].w, hdv);
                }
        }
    }
    for (int64_t h = 0; h < nh; h++) {
        float inv = 1.0f / sum[h];
        float *oh = o + (h / g) * o_stride + (h % g) * hdv;
        for (int64_t d = 0; d < hdv; d++) oh[d] = acc[h * hdv + d] * inv;
    }
}
#endif

/* The driver instanced per instruction set, with its operations known, so the compiler
 * calls (and can inline) them directly. */
typedef void attn_rows_fn(const attn_job *j, const float *q, int64_t q_stride, int64_t nr,
                          int64_t g, int64_t kvh, int64_t n_keys0, float *o, int64_t o_stride,
                          float *scratch);
#ifdef PL_ATTN_X86
__attribute__((target("avx2,f16c"))) static void rows_avx2(const attn_job *j, const float *q,
                                                           int64_t q_stride, int64_t nr, int64_t g,
                                                           int64_t kvh, int64_t n_keys0, float *o,
                                                           int64_t o_stride, float *scratch) {
    attend_f16_rows(&ops_avx2, j, q, q_stride, nr, g, kvh, n_keys0, o, o_stride, scratch);
}
AVX512_TARGET static void rows_avx512(const attn_job *j, const float *q, int64_t q_stride,
                                      int64_t nr, int64_t g, int64_t kvh, int64_t n_keys0, float *o,
                                      int64_t o_stride, float *scratch) {
    attend_f16_rows(&ops_avx512, j, q, q_stride, nr, g, kvh, n_keys0, o, o_stride, scratch);
}
#endif
#if defined(__aarch64__)
static void rows_neon(const attn_job *j, const float *q, int64_t q_stride, int64_t nr, int64_t g,
                      int64_t kvh, int64_t n_keys0, float *o, int64_t o_stride, float *scratch) {
    attend_f16_rows(&ops_neon, j, q, q_stride, nr, g, kvh, n_keys0, o, o_stride, scratch);
}
#endif

/* The vector path for j, or NULL: the portable one (ATTN_ROWS query rows an item with it,
 * one without). */
static attn_rows_fn *attn_vector(const attn_job *j) {
    if (j->k->type != PL_TYPE_F16 || j->p->head_dim % 8 || j->p->head_dim_v % 8) return NULL;
#ifdef PL_ATTN_X86
    if (pl_cpu_have_avx512f()) return rows_avx512;
    if (pl_cpu_have_avx2()) return rows_avx2;
#endif
#if defined(__aarch64__)
    if (pl_cpu_neon_level()) return rows_neon;
#endif
    return NULL;
}

/* One work item: the group of query heads of kv head kvh (or its part-th of j->parts
 * parts), for query row i (or ATTN_ROWS rows from i on the vector path). */
static void attn_item(void *ctx, int64_t item, int thread) {
    attn_job *j = ctx;
    const pl_attn_params *p = j->p;
    int64_t g = p->n_head / p->n_head_kv / j->parts, nr = attn_vector(j) ? ATTN_ROWS : 1;
    int64_t part = item % j->parts;
    item /= j->parts;
    /* the last rows (the most keys) first, so the threads' shares even out at the end */
    int64_t blocks = (j->n + nr - 1) / nr;
    int64_t i = (blocks - 1 - item / p->n_head_kv) * nr, kvh = item % p->n_head_kv;
    if (nr > j->n - i) nr = j->n - i;
    int64_t n_keys = j->pos0 + i + 1, hd = p->head_dim, hdv = p->head_dim_v;
    bool f16 = j->k->type == PL_TYPE_F16;
    /* f32 and q8_0: scores, accumulator, a dequantised row; f16 portable: queries, key and
     * value rows, accumulators, max, sum, scores; f16 vector (attend_f16_rows): queries, key
     * and value tiles, accumulators, max, sum, the tile's scores, its steps */
    size_t need = !f16              ? (size_t)(n_keys + hdv + (hd > hdv ? hd : hdv))
                  : !attn_vector(j) ? (size_t)(nr * g * hd + hd + hdv + nr * g * hdv + 3 * nr * g)
                                    : (size_t)(nr * g * hd + ATTN_KEYS * (hd + hdv) + nr * g * hdv +
                                               2 * nr * g + ATTN_KEYS * nr * g + 3 * ATTN_KEYS);
    float *scratch = pl_cpu_scratch(&j->c->per_thread[thread], sizeof(float) * need);
    if (!scratch) {
        atomic_store(&j->failed, 1);
        return;
    }
    int64_t h0 = kvh * g * j->parts + part * g; /* the item's first query head */
    const float *q = fptr(j->q) + i * j->q->ne0 + h0 * hd;
    float *o = fptr(j->out) + i * j->out->ne0 + h0 * hdv;
    if (!f16) {
        for (int64_t h = 0; h < g; h++)
            attend_f32(j, q + h * hd, kvh, n_keys, o + h * hdv, scratch);
    } else {
        attn_rows_fn *rows = attn_vector(j);
        if (rows)
            rows(j, q, j->q->ne0, nr, g, kvh, n_keys, o, j->out->ne0, scratch);
        else
            attend_f16(j, q, g, kvh, n_keys, o, scratch);
    }
}

pl_status pl_cpu_attention(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                           const pl_buf *v_cache, int64_t n, int64_t pos0, const pl_attn_params *p,
                           pl_buf *out) {
    cpu_backend *c = cpu_of(be);
    attn_job j = {
        .c = c, .q = q, .k = k_cache, .v = v_cache, .out = out, .n = n, .pos0 = pos0, .p = p};
    atomic_init(&j.failed, 0);
    if (k_cache->type == PL_TYPE_F16 && n >= PL_CPU_ATTN_TILED_ROWS)
        return pl_cpu_attention_tiled(&j);
    int64_t rows = attn_vector(&j) ? ATTN_ROWS : 1, items = (n + rows - 1) / rows * p->n_head_kv;
    /* Fewer items than threads (a decode step: one a kv head): each kv head's query heads
     * split into parts (a divisor of their count) until every thread has one; the parts
     * read the same key and value rows, each head's arithmetic is unchanged. */
    int64_t g = p->n_head / p->n_head_kv, threads = pl_pool_threads(c->pool);
    j.parts = 1;
    while (items * j.parts < threads && j.parts < g) {
        int64_t d = j.parts + 1;
        while (g % d) d++;
        j.parts = d;
    }
    items *= j.parts;
    int64_t work = n * p->n_head * (pos0 + n) * (p->head_dim + p->head_dim_v);
    if (work < CPU_PAR_MIN_WORK) {
        for (int64_t it = 0; it < items; it++) attn_item(&j, it, 0);
    } else {
        pl_pool_run(c->pool, items, attn_item, &j);
    }
    if (atomic_load(&j.failed)) return pl_fail(PL_ERR_NOMEM, "attention: out of memory");
    return PL_OK;
}

pl_status pl_cpu_attention_cols(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                                const pl_buf *v_cache, int64_t n, const pl_buf *cols, int64_t n_ctx,
                                int64_t max_keys, const pl_attn_params *p, pl_buf *out) {
    for (int64_t i = 0; i < n; i++) { /* column i: its row over its slot's rows */
        int64_t slot, pos;
        if (!pl_cpu_col(cols, i, k_cache, n_ctx, max_keys, &slot, &pos)) return PL_ERR_ARG;
        cpu_buf qi = pl_cpu_row_view(q, i, 1), oi = pl_cpu_row_view(out, i, 1);
        cpu_buf kc = pl_cpu_row_view(k_cache, slot * n_ctx, n_ctx);
        cpu_buf vc = pl_cpu_row_view(v_cache, slot * n_ctx, n_ctx);
        pl_status st = pl_cpu_attention(be, &qi.h, &kc.h, &vc.h, 1, pos, p, &oi.h);
        if (st) return st;
    }
    return PL_OK;
}
