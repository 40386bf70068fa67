/* cpu_attention_tiled.c - prompt-sized attention over an F16 KV cache, in float32 tiles.
 *
 * pl_cpu_attention hands a call of PL_CPU_ATTN_TILED_ROWS (64) query rows or more over an
 * F16 cache here, as llama.cpp's CPU flash attention turns to its tiled float32 kernel for
 * micro-batches of 64 rows or more: its prompt logits carry float32 arithmetic, not the
 * half-precision accumulator of its one-token path (cpu_attention.c), and so do ours. The
 * shorter calls (decode steps, speculative verification, batched streams) keep
 * cpu_attention.c's arithmetic. So a prompt's logits depend on whether its rows ran in calls
 * of 64 or more, as llama.cpp's do.
 *
 * Why: the half accumulator is rounded after every key, one key after another; here a
 * tile of keys is scored for a vector of query vectors at a time (one per lane, the queries
 * transposed once per work item) and the accumulator stays float32: several times less
 * work a key (one layer of qwen3-0.6b over a 512-token prompt, 1 thread: 38-48 ms in calls
 * of 63 rows, 14-19 ms in one call on AVX-512; 50-64 against 38 on AVX2; docs/cpu-notes.md).
 *
 * The arithmetic, for one query vector q (float32, as it comes) that sees keys 0..L, the
 * keys visited TILE_KEYS (32) at a time (tile_ref spells it out):
 *   s[t] = (q[0]k[t][0] + q[1]k[t][1] + ... in order) * scale; keys past L: -inf
 *   m' = max(m, the tile's scores, in order); r = exp(m - m'); p[t] = exp(s[t] - m')
 *   l = l r, then l = l + p[t] key by key
 *   a[d] = a[d] r (where r != 1), then a[d] = a[d] + p[t] v[t][d] key by key (keys up to L)
 *   out[d] = a[d] (1 / l)
 * with every product rounded before its sum (no fused multiply-add: -ffp-contract=off) and
 * exp our own (attn_exp: the same operations everywhere, where libm's expf differs between
 * C libraries). So the portable loops and the vector code (GCC vector extensions,
 * cpu_attention_tiled_vec.h: 16 lanes on AVX-512, 8 on AVX2, 4 on NEON and wasm simd128)
 * give the same bits, and so does every thread count (each query vector is one thread's,
 * in one order). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_internal.h"

#define TILE_KEYS 32 /* keys scored together */
#define TILE_ROWS 32 /* query rows a work item: each key tile converted once for them all */

/* exp(x) for the softmax (x <= 0 there; NaN stays NaN, below -87 gives 0): n = x log2(e)
 * rounded to nearest, x - n ln2 in two steps (Cody and Waite), a degree-5 polynomial for
 * exp of the rest, times 2^n. About 1 ulp. Written once for a scalar and once for vectors
 * (cpu_attention_tiled_vec.h), operation for operation. */
#define EXP_MIN   -87.0f
#define EXP_MAGIC 12582912.0f /* 1.5 * 2^23: adding and subtracting it rounds to an integer */
#define LOG2E     1.44269504088896341f
#define LN2_HI    0.693359375f
#define LN2_LO    -2.12194440e-4f
#define EXP_P0    1.9875691500e-4f
#define EXP_P1    1.3981999507e-3f
#define EXP_P2    8.3334519073e-3f
#define EXP_P3    4.1665795894e-2f
#define EXP_P4    1.6666665459e-1f
#define EXP_P5    5.0000001201e-1f

static float attn_exp(float x) {
    if (x != x) return x;
    if (!(x >= EXP_MIN)) return 0;
    float n = (x * LOG2E + EXP_MAGIC) - EXP_MAGIC;
    float r = x - n * LN2_HI;
    r = r - n * LN2_LO;
    float p = EXP_P0;
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    float y = (p * r) * r + r + 1.0f;
    int32_t e = ((int32_t)n + 127) * (1 << 23);
    float two_n;
    memcpy(&two_n, &e, sizeof e);
    return y * two_n;
}

/* A work item: TILE_ROWS query rows (or fewer) and the g query heads of one kv head. Query
 * vector u is row u / g's head u % g and sees keys 0..lim0 + u / g; nqp rounds nq up to a
 * multiple of 16 (the lanes past nq repeat the last vector, their results unused). */
typedef struct {
    int64_t g, nq, nqp, lim0, hd, hdv;
    float scale;
    float *qt;        /* [hd][nqp] the queries transposed */
    float *kr, *vr;   /* [TILE_KEYS][hd], [TILE_KEYS][hdv] the tile's keys and values */
    float *pt, *rs;   /* [TILE_KEYS][nqp] the tile's weights p, [nqp] its rescales r */
    float *acc;       /* [nqp][hdv] */
    float *lsum, *mx; /* [nqp] each */
    float *sc;        /* [2][TILE_KEYS][TV_W <= 16] two lane groups' scores (vector code) */
} tiled_item;

static int64_t lim_of(const tiled_item *it, int64_t u) {
    return it->lim0 + (u < it->nq ? u : it->nq - 1) / it->g;
}

/* The reference: query vector u's scores, softmax step and weights over the tile t0..
 * (nt keys loaded), then its accumulator. */
static void tile_ref(const tiled_item *it, int64_t u, int64_t t0, int64_t nt) {
    int64_t hd = it->hd, hdv = it->hdv, nqp = it->nqp, lim = lim_of(it, u);
    float s[TILE_KEYS], mt = -INFINITY;
    for (int64_t t = 0; t < nt; t++) {
        float a = 0;
        for (int64_t d = 0; d < hd; d++) a = a + it->qt[d * nqp + u] * it->kr[t * hd + d];
        s[t] = t0 + t <= lim ? a * it->scale : -INFINITY;
        mt = s[t] > mt ? s[t] : mt;
    }
    float mn = mt > it->mx[u] ? mt : it->mx[u], r = attn_exp(it->mx[u] - mn), l = it->lsum[u] * r;
    for (int64_t t = 0; t < nt; t++) {
        float p = attn_exp(s[t] - mn);
        l = l + p;
        it->pt[t * nqp + u] = p;
    }
    it->mx[u] = mn, it->lsum[u] = l, it->rs[u] = r;
    float *acc = it->acc + u * hdv;
    if (r != 1.0f)
        for (int64_t d = 0; d < hdv; d++) acc[d] = acc[d] * r;
    for (int64_t t = 0; t < nt && t0 + t <= lim; t++)
        for (int64_t d = 0; d < hdv; d++)
            acc[d] = acc[d] + it->pt[t * nqp + u] * it->vr[t * hdv + d];
}

/* ---- the same on vectors (cpu_attention_tiled_vec.h), where the target has them ---- */
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__wasm_simd128__)
/* The vector helpers are always inlined into the per-instruction-set passes; GCC warns (at
 * the end of the file) that a 64-byte vector argument would change the ABI without
 * AVX-512, which no call does. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#define ALWAYS __attribute__((always_inline)) static inline
#if defined(__x86_64__) || defined(__i386__)
#define TV_W      16
#define TV_CH     4
#define TV_NAME   tile_avx512
#define TV_TARGET __attribute__((target("avx512f,avx2")))
#include "cpu_attention_tiled_vec.h"
#define TV_W      8
#define TV_CH     4
#define TV_NAME   tile_avx2
#define TV_TARGET __attribute__((target("avx2")))
#include "cpu_attention_tiled_vec.h"
#else /* NEON, wasm simd128: 4 lanes */
#define TV_W    4
#define TV_CH   4
#define TV_NAME tile_neon
#define TV_TARGET
#include "cpu_attention_tiled_vec.h"
#endif
#endif

static void tile_portable(const tiled_item *it, int64_t t0, int64_t nt) {
    for (int64_t u = 0; u < it->nq; u++) tile_ref(it, u, t0, nt);
}

/* The tile pass for p: the vector code where the instruction set and the value head size
 * (whole chunks of TV_W x TV_CH values: 64, 32, 16) allow, else the portable loops. */
static void (*tile_pass(const pl_attn_params *p))(const tiled_item *, int64_t, int64_t) {
    int64_t hdv = p->head_dim_v;
#if defined(__x86_64__) || defined(__i386__)
    if (pl_cpu_have_avx512f() && hdv % 64 == 0) return tile_avx512;
    if (pl_cpu_have_avx2() && hdv % 32 == 0) return tile_avx2;
#endif
#if defined(__aarch64__)
    if (pl_cpu_neon_level() && hdv % 16 == 0) return tile_neon;
#endif
#if defined(__wasm_simd128__)
    if (!pl_cpu_portable && hdv % 16 == 0) return tile_neon;
#endif
    (void)hdv;
    return tile_portable;
}

static void tiled_run_item(void *ctx, int64_t item, int thread) {
    pl_cpu_attn_job *j = ctx;
    const pl_attn_params *p = j->p;
    int64_t g = p->n_head / p->n_head_kv, hd = p->head_dim, hdv = p->head_dim_v;
    /* the last rows (the most keys) first, so the threads' shares even out at the end */
    int64_t blocks = (j->n + TILE_ROWS - 1) / TILE_ROWS;
    int64_t i0 = (blocks - 1 - item / p->n_head_kv) * TILE_ROWS, kvh = item % p->n_head_kv;
    int64_t nr = j->n - i0 < TILE_ROWS ? j->n - i0 : TILE_ROWS, nq = nr * g;
    int64_t nqp = (nq + 15) / 16 * 16;
    size_t need = (size_t)(hd * nqp + TILE_KEYS * (hd + hdv + nqp + 32) + nqp * (hdv + 3));
    float *scratch = pl_cpu_scratch(&j->c->per_thread[thread], sizeof(float) * need);
    if (!scratch) {
        atomic_store(&j->failed, 1);
        return;
    }
    tiled_item it = {.g = g,
                     .nq = nq,
                     .nqp = nqp,
                     .lim0 = j->pos0 + i0,
                     .hd = hd,
                     .hdv = hdv,
                     .scale = p->scale,
                     .qt = scratch};
    it.kr = it.qt + hd * nqp, it.vr = it.kr + TILE_KEYS * hd, it.pt = it.vr + TILE_KEYS * hdv;
    it.sc = it.pt + TILE_KEYS * nqp, it.rs = it.sc + TILE_KEYS * 32, it.acc = it.rs + nqp;
    it.lsum = it.acc + nqp * hdv, it.mx = it.lsum + nqp;
    const float *q = fptr(j->q) + i0 * j->q->ne0 + kvh * g * hd;
    for (int64_t u = 0; u < nqp; u++) {
        int64_t uu = u < nq ? u : nq - 1;
        const float *qu = q + (uu / g) * j->q->ne0 + (uu % g) * hd;
        for (int64_t d = 0; d < hd; d++) it.qt[d * nqp + u] = qu[d];
        it.lsum[u] = 0, it.mx[u] = -INFINITY;
    }
    memset(it.acc, 0, sizeof(float) * (size_t)(nqp * hdv));
    void (*tile)(const tiled_item *, int64_t, int64_t) = tile_pass(p);
    const uint16_t *kc = (const uint16_t *)vptr(j->k) + kvh * hd;
    const uint16_t *vc = (const uint16_t *)vptr(j->v) + kvh * hdv;
    int64_t last = it.lim0 + nr - 1; /* the block's last key */
    for (int64_t t0 = 0; t0 <= last; t0 += TILE_KEYS) {
        int64_t nt = last - t0 + 1 < TILE_KEYS ? last - t0 + 1 : TILE_KEYS;
        for (int64_t t = 0; t < nt; t++) {
            pl_cpu_from_half(it.kr + t * hd, kc + (t0 + t) * j->k->ne0, hd);
            pl_cpu_from_half(it.vr + t * hdv, vc + (t0 + t) * j->v->ne0, hdv);
        }
        tile(&it, t0, nt);
    }
    float *o = fptr(j->out) + i0 * j->out->ne0 + kvh * g * hdv;
    for (int64_t u = 0; u < nq; u++) {
        float inv = 1.0f / it.lsum[u], *ou = o + (u / g) * j->out->ne0 + (u % g) * hdv;
        for (int64_t d = 0; d < hdv; d++) ou[d] = it.acc[u * hdv + d] * inv;
    }
}

pl_status pl_cpu_attention_tiled(pl_cpu_attn_job *j) {
    int64_t items = (j->n + TILE_ROWS - 1) / TILE_ROWS * j->p->n_head_kv;
    pl_pool_run(j->c->pool, items, tiled_run_item, j);
    if (atomic_load(&j->failed)) return pl_fail(PL_ERR_NOMEM, "attention: out of memory");
    return PL_OK;
}
