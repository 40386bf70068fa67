/* quant_k.c - the K-quants (256-value super-blocks with quantized sub-block scales):
 * dequantize Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K bit-exactly as ggml does, and quantize
 * Q4_K and Q6_K byte-exactly as llama-quantize does without an importance matrix.
 *
 * The quantizers search for good sub-block scales:
 *  - Q4_K (asymmetric, value = scale*q - min) fits each 32-value sub-block with a weighted
 *    least-squares search over 21 candidate scales (fit_scale_min), then quantizes the 8
 *    scales and 8 mins to 6 bits against the super-block maxima, and finally re-rounds every
 *    value against the scales as stored.
 *  - Q6_K (symmetric, value = scale*q) fits each 16-value sub-block with fit_scale_sym, a
 *    search over 19 candidate inverse scales maximizing the captured energy, stores the 16
 *    scales as int8 against the largest, and re-rounds the values likewise.
 * Candidate order, tie-breaking and every float operation's order follow the reference
 * algorithm exactly: a different but equally good choice would change the bytes. */
#include <math.h>
#include <string.h>

#include "quant_rows.h"

PL_NO_FP_CONTRACT

/* Scale and min j (0..7) of a Q4_K/Q5_K block: 6 bits each, packed in 12 bytes. Bytes 0-3
 * hold scales 0-3 and bytes 4-7 mins 0-3 in their low 6 bits; scales/mins 4-7 keep their
 * low 4 bits in the nibbles of bytes 8-11 and their top 2 bits in the spare top bits of
 * bytes 0-3 (scales) and 4-7 (mins). */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* ---- dequantize ---- */

void pl_dequant_q2_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q2_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d), dmin = pl_f16_to_f32(b->dmin);
        for (int half = 0; half < 2; half++) {
            const uint8_t *q = b->qs + 32 * half;
            for (int s = 0; s < 8; s++) { /* 8 runs of 16 values per 128 */
                const uint8_t sc = b->scales[8 * half + s];
                const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
                const int shift = 2 * (s / 2), off = 16 * (s % 2);
                for (int l = 0; l < 16; l++) *dst++ = dl * (float)((q[off + l] >> shift) & 3) - ml;
            }
        }
    }
}

/* The 16 signed 6-bit scales of a Q3_K block (stored with an offset of 32). */
static void q3_scales(const uint8_t *p, int out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? p[j] & 0x0f : p[j - 8] >> 4;
        int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (lo | hi << 4) - 32;
    }
}

void pl_dequant_q3_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q3_K *restrict b = src;
    int sc[16];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        q3_scales(b->scales, sc);
        for (int half = 0; half < 2; half++) {
            const uint8_t *q = b->qs + 32 * half;
            for (int s = 0; s < 8; s++) {
                const float dl = d * (float)sc[8 * half + s];
                const int shift = 2 * (s / 2), off = 16 * (s % 2);
                const uint8_t mask = (uint8_t)(1u << (4 * half + s / 2));
                for (int l = 0; l < 16; l++) {
                    int v = ((q[off + l] >> shift) & 3) - (b->hmask[off + l] & mask ? 0 : 4);
                    *dst++ = dl * (float)v;
                }
            }
        }
    }
}

void pl_dequant_q4_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q4_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d), dmin = pl_f16_to_f32(b->dmin);
        for (int j = 0; j < 4; j++) { /* 64 values: low nibbles, then high nibbles */
            const uint8_t *q = b->qs + 32 * j;
            uint8_t sc, m;
            k4_scale_min(2 * j, b->scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_scale_min(2 * j + 1, b->scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void pl_dequant_q5_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q5_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d), dmin = pl_f16_to_f32(b->dmin);
        for (int j = 0; j < 4; j++) {
            const uint8_t *q = b->qs + 32 * j;
            const uint8_t u1 = (uint8_t)(1u << (2 * j)), u2 = (uint8_t)(2u << (2 * j));
            uint8_t sc, m;
            k4_scale_min(2 * j, b->scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_scale_min(2 * j + 1, b->scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((q[l] & 0x0f) + (b->qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((q[l] >> 4) + (b->qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void pl_dequant_q6_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q6_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        for (int half = 0; half < 2; half++, dst += 128) {
            const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            const int8_t *sc = b->scales + 8 * half;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void pl_dequant_q8_K(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_q8_K *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++)
        for (int j = 0; j < PL_QK_K; j++) *dst++ = b->d * (float)b->qs[j];
}

/* ---- quantize ---- */

static int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Fit x[0..n) (weights w) as scale * L[i] - min with L in 0..nmax, min >= 0 returned in
 * *the_min. Starts from the plain min..max grid, then tries nstep+1 stretched grids
 * (nmax + rmin + rdelta*k levels across the range), solving the weighted least squares for
 * scale and min on each and keeping the one with the smallest weighted squared error. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
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
        best_err += w[i] * (diff * diff);
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (max - min);
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
            err += w[i] * (diff * diff);
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

/* Fit x[0..n) as scale * (L[i] - nmax), L in 0..2*nmax-1, weighting each value by x^2.
 * Tries the inverse scales -(nmax + k/10)/max for k = 0, -9..9 (max = the signed value of
 * largest magnitude) and keeps the one capturing the most weighted energy
 * (sum w*x*l)^2 / (sum w*l*l); returns its least-squares scale. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(pl_round_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(pl_round_even(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(pl_round_even(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Quantize v >= 0 against inv (63/max) to 6 bits; the reference stores the rounded int in
 * a uint8_t before clamping, so keep that wrap for the (never seen) negative case. */
static uint8_t six_bits(float inv, float v) {
    const uint8_t l = (uint8_t)pl_round_even(inv * v);
    return l < 63 ? l : 63;
}

void pl_quant_q4_K(const float *src, void *dst, int64_t n) {
    pl_block_q4_K *b = dst;
    uint8_t L[PL_QK_K], Laux[32];
    float w[32], mins[8], scales[8];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            const float *x = src + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += x[l] * x[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[l]);
            scales[j] = fit_scale_min(32, 15, x, w, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < 8; j++) {
            const uint8_t ls = six_bits(inv_scale, scales[j]), lm = six_bits(inv_min, mins[j]);
            if (j < 4) {
                b->scales[j] = ls;
                b->scales[j + 4] = lm;
            } else {
                b->scales[j + 4] = (uint8_t)((ls & 0x0f) | (lm & 0x0f) << 4);
                b->scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
                b->scales[j] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        b->d = pl_f32_to_f16(max_scale / 63.0f);
        b->dmin = pl_f32_to_f16(max_min / 63.0f);
        /* re-round every value against the scales as they will be read back */
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            k4_scale_min(j, b->scales, &sc, &m);
            const float d = pl_f16_to_f32(b->d) * (float)sc;
            if (d == 0) continue;
            const float dm = pl_f16_to_f32(b->dmin) * (float)m;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] =
                    (uint8_t)clamp_int(pl_round_even((src[32 * j + l] + dm) / d), 0, 15);
        }
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                b->qs[32 * j + l] = (uint8_t)(L[64 * j + l] | L[64 * j + 32 + l] << 4);
    }
}

void pl_quant_q6_K(const float *src, void *dst, int64_t n) {
    pl_block_q6_K *b = dst;
    int8_t L[PL_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        float max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale_sym(16, 32, src + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) max_abs = fabsf(scales[j]), max_scale = scales[j];
        }
        if (max_abs < 1e-15f) { /* all (near) zero: an all-zero block */
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
