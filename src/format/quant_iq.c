/* quant_iq.c - the non-linear 4-bit formats IQ4_NL (32-value blocks) and IQ4_XS (256-value
 * super-blocks with 6-bit sub-block scales): dequantize, bit-exactly as ggml does.
 *
 * Both store 4-bit indices into one fixed table of 16 levels, denser near zero, which
 * follows the bell shape of trained weights better than evenly spaced levels. */
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
