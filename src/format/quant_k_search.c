/* quant_k_search.c - quantize to the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K byte-exactly
 * as llama-quantize does without an importance matrix (ggml's reference quantizers).
 *
 * Every K-quant stores sub-block scales quantized against one super-block scale, so each
 * quantizer runs in three steps:
 *  1. fit each sub-block on its own with a small search over candidate scales:
 *     - asymmetric formats (Q2_K, Q4_K, Q5_K: value = scale*q - min): fit_scale_min tries
 *       stretched grids and solves weighted least squares for scale and min on each;
 *     - symmetric formats (Q6_K: fit_scale_sym; Q3_K: fit_scale_q3, which then nudges
 *       single values while that helps) fit value = scale*q;
 *  2. quantize the sub-block scales (and mins) against the largest one;
 *  3. re-round every value against the scales as they will be read back.
 * Candidate order, tie-breaking and the order of every float operation follow the
 * reference exactly: an equally good but different choice would change the bytes. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "quant_rows.h"

PL_NO_FP_CONTRACT

#define GROUP_MAX_EPS 1e-15f /* below this magnitude a group counts as all zero */

static int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- sub-block fits ---- */

/* The search fit_scale_min runs: nstep+1 grids of nmax + rmin + rdelta*k levels. */
typedef struct {
    int nmax;
    float rmin, rdelta;
    int nstep;
    bool abs_err; /* weigh |error| instead of error^2 */
} grid_search;

/* Fit x[0..n) (weights w) as scale * L[i] - min with L in 0..nmax and min >= 0 returned in
 * *the_min. Starts from the plain min..max grid, then tries the stretched grids, solving
 * the weighted least squares for scale and min on each and keeping the one with the
 * smallest weighted error. */
static float fit_scale_min(int n, const grid_search *g, const float *x, const float *w, uint8_t *L,
                           float *the_min) {
    uint8_t Laux[32];
    const int nmax = g->nmax;
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(pl_round_even(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * (float)L[i] + min - x[i];
        best_err += w[i] * (g->abs_err ? fabsf(diff) : diff * diff);
    }
    for (int k = 0; k <= g->nstep; k++) {
        iscale = (g->rmin + g->rdelta * (float)k + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(pl_round_even(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * (float)Laux[i] + this_min - x[i];
            err += w[i] * (g->abs_err ? fabsf(diff) : diff * diff);
        }
        if (err < best_err) {
            memcpy(L, Laux, (size_t)n);
            best_err = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* Round x[0..n) against iscale to levels -nmax..nmax-1 and return the energy sums
 * sum w*x*l and sum w*l*l (w = x^2); with L, store each level plus `offset` there. */
static void sym_levels(int n, int nmax, const float *x, float iscale, int8_t *L, int offset,
                       float *sumlx, float *suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(pl_round_even(iscale * x[i]), -nmax, nmax - 1);
        if (L) L[i] = (int8_t)(l + offset);
        const float w = x[i] * x[i];
        *sumlx += w * x[i] * (float)l;
        *suml2 += w * (float)l * (float)l;
    }
}

/* Fit x[0..n) as scale * (L[i] - nmax), L in 0..2*nmax-1, weighting each value by x^2.
 * Tries the inverse scales -(nmax + k/10)/max for k = 0, -9..9 (max = the signed value of
 * largest magnitude) and keeps the one capturing the most weighted energy
 * (sum w*x*l)^2 / (sum w*l*l); returns its least-squares scale. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax, max = pl_signed_max(n, x, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float sumlx, suml2;
    sym_levels(n, nmax, x, (float)-nmax / max, L, nmax, &sumlx, &suml2);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        const float iscale = -((float)nmax + 0.1f * (float)k) / max;
        sym_levels(n, nmax, x, iscale, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            float again_lx, again_l2; /* the same sums again: only L is wanted */
            sym_levels(n, nmax, x, iscale, L, nmax, &again_lx, &again_l2);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's fit: round against -nmax/max, then up to 5 passes that move single values to the
 * level that maximizes the captured energy (sum w*x*l)^2 / (sum w*l*l), w = x^2. L comes
 * back offset by nmax. */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax, max = pl_signed_max(n, x, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float sumlx, suml2;
    sym_levels(n, nmax, x, (float)-nmax / max, L, 0, &sumlx, &suml2);
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            const int nl = clamp_int(pl_round_even(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- Q2_K ---- */

/* 2 bits per value (packed as the qs comment in quant_blocks.h says) from L[256]. */
static void pack2(const uint8_t *L, uint8_t *qs) {
    for (int half = 0; half < 2; half++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *q = L + 128 * half + l;
            qs[32 * half + l] = (uint8_t)(q[0] | q[32] << 2 | q[64] << 4 | q[96] << 6);
        }
}

void pl_quant_q2_K(const float *src, void *dst, int64_t n) {
    static const grid_search g = {3, -0.5f, 0.1f, 15, true};
    pl_block_q2_K *b = dst;
    uint8_t L[PL_QK_K];
    float w[16], mins[16], scales[16];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(src[16 * j + l]);
            scales[j] = fit_scale_min(16, &g, src + 16 * j, w, L + 16 * j, &mins[j]);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit scales and mins against their maxima */
        memset(b->scales, 0, sizeof b->scales);
        b->d = b->dmin = 0;
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) b->scales[j] = (uint8_t)pl_round_even(iscale * scales[j]);
            b->d = pl_f32_to_f16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++)
                b->scales[j] |= (uint8_t)(pl_round_even(iscale * mins[j]) << 4);
            b->dmin = pl_f32_to_f16(max_min / 15.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = pl_f16_to_f32(b->d) * (float)(b->scales[j] & 0x0f);
            if (d == 0) continue;
            const float dm = pl_f16_to_f32(b->dmin) * (float)(b->scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clamp_int(pl_round_even((src[16 * j + l] + dm) / d), 0, 3);
        }
        pack2(L, b->qs);
    }
}

/* ---- Q3_K ---- */

void pl_quant_q3_K(const float *src, void *dst, int64_t n) {
    pl_block_q3_K *b = dst;
    int8_t L[PL_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        for (int j = 0; j < 16; j++) scales[j] = fit_scale_q3(16, 4, src + 16 * j, L + 16 * j);
        float amax;
        const float max_scale = pl_signed_max(16, scales, &amax);
        memset(b->scales, 0, sizeof b->scales);
        b->d = 0;
        if (max_scale != 0) { /* 6-bit signed scales, stored +32 */
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                const int l = clamp_int((int8_t)pl_round_even(iscale * scales[j]), -32, 31) + 32;
                if (j < 8)
                    b->scales[j] = (uint8_t)(l & 0x0f);
                else
                    b->scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
                b->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            b->d = pl_f32_to_f16(1 / iscale);
        }
        for (int j = 0; j < 16; j++) {
            const float d = pl_f16_to_f32(b->d) * (float)pl_q3_scale(j, b->scales);
            if (d == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(pl_round_even(src[16 * j + l] / d), -4, 3) + 4);
        }
        /* the high bit of value j goes to hmask[j % 32] bit j / 32, the low 2 bits to qs */
        uint8_t low[PL_QK_K];
        memset(b->hmask, 0, sizeof b->hmask);
        for (int j = 0; j < PL_QK_K; j++) {
            if (L[j] > 3) b->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            low[j] = (uint8_t)(L[j] > 3 ? L[j] - 4 : L[j]);
        }
        pack2(low, b->qs);
    }
}

/* ---- Q4_K and Q5_K ---- */

/* Steps 1-3 for the formats with 8 sub-blocks of 32, 6-bit scales and mins: fills
 * scales[12], d and dmin, and the levels L (0..g->nmax) of all 256 values. */
static void fit_k4(const float *x, const grid_search *g, uint8_t packed[12], pl_half *d_out,
                   pl_half *dmin_out, uint8_t *L) {
    float w[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, g, xs, w, L + 32 * j, &mins[j]);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        /* the reference keeps the rounded value in a byte before clamping: keep the wrap */
        uint8_t ls = (uint8_t)pl_round_even(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)pl_round_even(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0x0f) | (lm & 0x0f) << 4);
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = pl_f32_to_f16(max_scale / 63.0f);
    *dmin_out = pl_f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pl_k4_scale_min(j, packed, &sc, &m);
        const float d = pl_f16_to_f32(*d_out) * (float)sc;
        if (d == 0) continue;
        const float dm = pl_f16_to_f32(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clamp_int(pl_round_even((x[32 * j + l] + dm) / d), 0, g->nmax);
    }
}

void pl_quant_q4_K(const float *src, void *dst, int64_t n) {
    static const grid_search g = {15, -1.0f, 0.1f, 20, false};
    pl_block_q4_K *b = dst;
    uint8_t L[PL_QK_K];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        fit_k4(src, &g, b->scales, &b->d, &b->dmin, L);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                b->qs[32 * j + l] = (uint8_t)(L[64 * j + l] | L[64 * j + 32 + l] << 4);
    }
}

void pl_quant_q5_K(const float *src, void *dst, int64_t n) {
    static const grid_search g = {31, -0.5f, 0.1f, 15, false};
    pl_block_q5_K *b = dst;
    uint8_t L[PL_QK_K];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        fit_k4(src, &g, b->scales, &b->d, &b->dmin, L);
        memset(b->qh, 0, sizeof b->qh);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
                b->qh[l] |= (uint8_t)((lo >> 4) << (2 * j) | (hi >> 4) << (2 * j + 1));
                b->qs[32 * j + l] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
            }
    }
}

/* ---- Q6_K ---- */

void pl_quant_q6_K(const float *src, void *dst, int64_t n) {
    pl_block_q6_K *b = dst;
    int8_t L[PL_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        for (int j = 0; j < 16; j++) scales[j] = fit_scale_sym(16, 32, src + 16 * j, L + 16 * j);
        float max_abs;
        const float max_scale = pl_signed_max(16, scales, &max_abs);
        if (max_abs < GROUP_MAX_EPS) { /* all (near) zero: an all-zero block */
            memset(b, 0, sizeof *b);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        b->d = pl_f32_to_f16(1 / iscale);
        for (int j = 0; j < 16; j++) {
            const int s = pl_round_even(iscale * scales[j]);
            b->scales[j] = (int8_t)(s < 127 ? s : 127);
        }
        for (int j = 0; j < 16; j++) {
            const float d = pl_f16_to_f32(b->d) * (float)b->scales[j];
            if (d == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] =
                    (int8_t)(clamp_int(pl_round_even(src[16 * j + l] / d), -32, 31) + 32);
        }
        for (int half = 0; half < 2; half++) {
            const int8_t *q = L + 128 * half;
            uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((q[l] & 0x0f) | (q[l + 64] & 0x0f) << 4);
                ql[l + 32] = (uint8_t)((q[l + 32] & 0x0f) | (q[l + 96] & 0x0f) << 4);
                qh[l] = (uint8_t)((q[l] >> 4) | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 |
                                  (q[l + 96] >> 4) << 6);
            }
        }
    }
}
