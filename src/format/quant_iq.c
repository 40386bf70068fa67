/* quant_iq.c - the non-linear 4-bit formats IQ4_NL (32-value blocks) and IQ4_XS (256-value
 * super-blocks with 6-bit sub-block scales): dequantize bit-exactly as ggml does, and
 * quantize byte-exactly as llama-quantize does without an importance matrix.
 *
 * Both store 4-bit indices into one fixed table of 16 levels, denser near zero, which
 * follows the bell shape of trained weights better than evenly spaced levels. */
#include <math.h>
#include <string.h>

#include "quant_rows.h"

PL_NO_FP_CONTRACT

/* The 16 levels (ggml's kvalues_iq4nl), as int8 multiples of the block scale. */
static const int8_t iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

/* 32 values from 16 bytes of nibbles (low nibbles first) times scale d. */
static void iq4_run(const uint8_t *qs, float d, float *dst) {
    for (int j = 0; j < 16; j++) {
        dst[j] = d * (float)iq4_levels[qs[j] & 0x0f];
        dst[j + 16] = d * (float)iq4_levels[qs[j] >> 4];
    }
}

void pl_dequant_iq4_nl(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_iq4_nl *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK; i++, b++, dst += PL_QK)
        iq4_run(b->qs, pl_f16_to_f32(b->d), dst);
}

void pl_dequant_iq4_xs(const void *restrict src, float *restrict dst, int64_t n) {
    const pl_block_iq4_xs *restrict b = src;
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++) {
        const float d = pl_f16_to_f32(b->d);
        for (int j = 0; j < 8; j++, dst += 32) {
            const int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
            const int hi = (b->scales_h >> (2 * j)) & 3;
            iq4_run(b->qs + 16 * j, d * (float)((lo | hi << 4) - 32), dst);
        }
    }
}

/* ---- quantize ---- */

/* The level nearest to x (the upper one on a tie), by binary search on the sorted table:
 * comparing 2x with the sum of two neighbours keeps the midpoint test exact. */
static int nearest_level(float x) {
    const float x2 = x + x;
    int idx = 0;
    for (int step = 8; step > 0; step >>= 1) {
        const int j = idx + step;
        if (x2 >= (float)(iq4_levels[j - 1] + iq4_levels[j])) idx = j;
    }
    return idx;
}

/* Fit 32 values as d * level[L[j]] (weights x^2): start from d = max/127 (the largest
 * magnitude on the outermost level), then try the inverse scales (k - 127)/max for
 * k = -7..7, keeping the least-squares d of the one capturing the most weighted energy.
 * L gets the levels of the starting scale. */
static float fit_iq4(const float *x, uint8_t *L) {
    float amax, max = pl_signed_max(32, x, &amax), w[32];
    for (int j = 0; j < 32; j++) w[j] = x[j] * x[j];
    if (amax < 1e-15f) {
        memset(L, 0, 32);
        return 0;
    }
    float id = 1 / (-max / (float)iq4_levels[0]);
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        L[j] = (uint8_t)nearest_level(id * x[j]);
        const float q = iq4_levels[L[j]];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int k = -7; k <= 7; k++) {
        id = (float)(k + iq4_levels[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const float q = iq4_levels[nearest_level(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 levels as 16 bytes of nibbles (values j and j+16 share byte j). */
static void pack_iq4(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

void pl_quant_iq4_nl(const float *src, void *dst, int64_t n) {
    pl_block_iq4_nl *b = dst;
    uint8_t L[32];
    for (int64_t i = 0; i < n / PL_QK; i++, b++, src += PL_QK) {
        const float d = fit_iq4(src, L);
        b->d = pl_f32_to_f16(d);
        /* re-pick the levels for the fitted (not yet f16-rounded) scale */
        const float id = d != 0 ? 1 / d : 0;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_level(id * src[j]);
        pack_iq4(L, b->qs);
    }
}

void pl_quant_iq4_xs(const float *src, void *dst, int64_t n) {
    pl_block_iq4_xs *b = dst;
    uint8_t L[32];
    float scales[8];
    for (int64_t i = 0; i < n / PL_QK_K; i++, b++, src += PL_QK_K) {
        for (int j = 0; j < 8; j++) scales[j] = fit_iq4(src + 32 * j, L);
        float amax;
        const float max_scale = pl_signed_max(8, scales, &amax);
        /* 6-bit signed sub-block scales (stored +32) against d = -max/32 */
        const float d = -max_scale / 32, id = d != 0 ? 1 / d : 0.0f;
        b->d = pl_f32_to_f16(d);
        b->scales_h = 0;
        for (int j = 0; j < 8; j++) {
            const int l = pl_round_even(id * scales[j]);
            const int lc = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)lc, idl = dl != 0 ? 1 / dl : 0.0f;
            for (int k = 0; k < 32; k++) L[k] = (uint8_t)nearest_level(idl * src[32 * j + k]);
            pack_iq4(L, b->qs + 16 * j);
            const int u = lc + 32;
            if (j % 2 == 0)
                b->scales_l[j / 2] = (uint8_t)(u & 0x0f);
            else
                b->scales_l[j / 2] |= (uint8_t)((u & 0x0f) << 4);
            b->scales_h |= (uint16_t)((u >> 4) << (2 * j));
        }
    }
}
