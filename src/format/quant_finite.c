/* quant_finite.c - find NaN or infinite weights without dequantizing them.
 *
 * In a block format the quants are small integers: only the float fields of a block (its
 * f16 scales and minimums, Q8_K's f32 scale) can be NaN or infinite, so only those are
 * read. Plain F32/F16/BF16 tensors are scanned value by value. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quant_blocks.h"

/* The byte offsets of a block's f16 fields (up to two; -1 ends the list). */
typedef struct {
    uint32_t type;
    int off[2];
} half_fields;

static const half_fields fields[] = {
    {PL_TYPE_Q4_0, {offsetof(pl_block_q4_0, d), -1}},
    {PL_TYPE_Q4_1, {offsetof(pl_block_q4_1, d), offsetof(pl_block_q4_1, m)}},
    {PL_TYPE_Q5_0, {offsetof(pl_block_q5_0, d), -1}},
    {PL_TYPE_Q5_1, {offsetof(pl_block_q5_1, d), offsetof(pl_block_q5_1, m)}},
    {PL_TYPE_Q8_0, {offsetof(pl_block_q8_0, d), -1}},
    {PL_TYPE_Q8_1, {offsetof(pl_block_q8_1, d), offsetof(pl_block_q8_1, s)}},
    {PL_TYPE_Q2_K, {offsetof(pl_block_q2_K, d), offsetof(pl_block_q2_K, dmin)}},
    {PL_TYPE_Q3_K, {offsetof(pl_block_q3_K, d), -1}},
    {PL_TYPE_Q4_K, {offsetof(pl_block_q4_K, d), offsetof(pl_block_q4_K, dmin)}},
    {PL_TYPE_Q5_K, {offsetof(pl_block_q5_K, d), offsetof(pl_block_q5_K, dmin)}},
    {PL_TYPE_Q6_K, {offsetof(pl_block_q6_K, d), -1}},
    {PL_TYPE_IQ4_NL, {offsetof(pl_block_iq4_nl, d), -1}},
    {PL_TYPE_IQ4_XS, {offsetof(pl_block_iq4_xs, d), -1}},
    {PL_TYPE_TQ1_0, {offsetof(pl_block_tq1_0, d), -1}},
    {PL_TYPE_TQ2_0, {offsetof(pl_block_tq2_0, d), -1}},
};

static inline uint16_t half_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return h;
}

/* A value is Inf or NaN when its exponent bits are all ones (exp: the exponent mask, f32
 * 0x7f800000, f16 0x7c00, bf16 0x7f80; top: the sign bit). Adding the exponent's lowest
 * bit to the masked exponent carries into the sign bit exactly then, so a chunk is tested
 * with additions and ORs alone (no branch per value: the loop vectorises); the chunk that
 * hits is searched again for the index. */
#define SCAN_CHUNK 512
#define SCAN(name, T)                                                                              \
    static int64_t name(const T *v, int64_t n, T exp, T top) {                                     \
        const T low = exp & (T)-exp;                                                               \
        int64_t c = 0;                                                                             \
        for (; c + SCAN_CHUNK <= n; c += SCAN_CHUNK) { /* a constant count: it vectorises */       \
            T acc = 0;                                                                             \
            for (int i = 0; i < SCAN_CHUNK; i++) acc |= (T)((v[c + i] & exp) + low);               \
            if (acc & top) break;                                                                  \
        }                                                                                          \
        for (; c < n; c++)                                                                         \
            if ((v[c] & exp) == exp) return c;                                                     \
        return -1;                                                                                 \
    }
SCAN(scan_halves, uint16_t)
SCAN(scan_floats, uint32_t)

int64_t pl_find_nonfinite(uint32_t t, const void *data, int64_t n) {
    const unsigned char *p = data;
    if (t == PL_TYPE_F32) return scan_floats(data, n, 0x7f800000u, 0x80000000u);
    if (t == PL_TYPE_F16) return scan_halves(data, n, 0x7c00, 0x8000);
    if (t == PL_TYPE_BF16) return scan_halves(data, n, 0x7f80, 0x8000);
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr || tr->block_size < 1 || n % tr->block_size) return -1;
    int64_t blocks = n / tr->block_size;
    if (t == PL_TYPE_Q8_K) {
        /* a full-float scale can also be so large that its values overflow */
        for (int64_t b = 0; b < blocks; b++) {
            pl_block_q8_K blk;
            memcpy(&blk, p + b * tr->type_size, sizeof blk);
            int big = 0;
            for (int i = 0; i < PL_QK_K; i++) big = abs(blk.qs[i]) > big ? abs(blk.qs[i]) : big;
            if (!isfinite(blk.d) || !isfinite(blk.d * (float)big)) return b * tr->block_size;
        }
        return -1;
    }
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        if (fields[k].type != t) continue;
        int o0 = fields[k].off[0], o1 = fields[k].off[1];
        for (int64_t b = 0; b < blocks; b++) {
            const unsigned char *blk = p + b * tr->type_size;
            if ((half_at(blk + o0) & 0x7c00) == 0x7c00 ||
                (o1 >= 0 && (half_at(blk + o1) & 0x7c00) == 0x7c00))
                return b * tr->block_size;
        }
        return -1;
    }
    return -1; /* a format whose values we cannot read: nothing to say */
}
