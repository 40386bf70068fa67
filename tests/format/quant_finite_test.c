/* quant_finite_test.c - pl_find_nonfinite against dequantization as the oracle: for every
 * readable format, a NaN/Inf bit pattern written at each position of a block is reported
 * (at that block's first value) exactly when dequantizing the block gives a non-finite
 * value; plain F32/F16/BF16 report the exact index, in and across the scan's chunks. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "format/quant.h"
#include "test.h"

static bool all_finite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

/* Three blocks of random values in type t (Q8_K, which we cannot write, gets random bytes
 * with finite scales); poison block 1 at every 2-byte step with an f16 NaN/Inf and an f32
 * NaN. */
static void check_blocks(uint32_t t) {
    const pl_type_traits *tr = pl_type_get(t);
    int64_t n = 3 * (int64_t)tr->block_size, bytes = 3 * (int64_t)tr->type_size;
    float *f = malloc(sizeof *f * (size_t)n), *back = malloc(sizeof *back * (size_t)n);
    unsigned char *q = malloc((size_t)bytes), *p = malloc((size_t)bytes);
    uint32_t x = 7;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        f[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 2;
    }
    if (tr->quant) {
        pl_quant_row(t, f, q, n);
    } else {
        for (int64_t i = 0; i < bytes; i++) q[i] = (unsigned char)(i * 37 + 11);
        for (int b = 0; b < 3; b++) { /* Q8_K: an f32 scale first */
            float d = 0.01f;
            memcpy(q + b * tr->type_size, &d, sizeof d);
        }
    }
    CHECK(pl_dequant_row(t, q, back, n) == PL_OK && all_finite(back, n), "%s: clean blocks",
          tr->name);
    CHECK(pl_find_nonfinite(t, q, n) == -1, "%s: clean blocks report nothing", tr->name);
    static const unsigned char pats[][4] = {{0x00, 0x7e}, {0x00, 0x7c}, {0x00, 0x00, 0xc0, 0x7f}};
    static const int len[] = {2, 2, 4};
    int seen_bad = 0, wrong = 0;
    for (int k = 0; k < 3; k++) {
        for (int off = 0; off + len[k] <= tr->type_size; off += 2) {
            memcpy(p, q, (size_t)bytes);
            memcpy(p + tr->type_size + off, pats[k], (size_t)len[k]);
            pl_dequant_row(t, p, back, n);
            int64_t want = all_finite(back, n) ? -1 : tr->block_size;
            int64_t got = pl_find_nonfinite(t, p, n);
            seen_bad += want >= 0;
            if (got != want && wrong++ < 3)
                CHECK(0, "%s: pattern %d at byte %d: got %lld, want %lld", tr->name, k, off,
                      (long long)got, (long long)want);
        }
    }
    CHECK(wrong == 0, "%s: %d poisoned positions judged wrongly", tr->name, wrong);
    CHECK(seen_bad > 0, "%s: some poisoned position gives non-finite values", tr->name);
    free(f);
    free(back);
    free(q);
    free(p);
}

static void check_plain(uint32_t t, int size) {
    const int64_t n = 1500; /* two whole chunks of the scan and a tail */
    unsigned char *v = calloc((size_t)n, (size_t)size);
    CHECK(pl_find_nonfinite(t, v, n) == -1, "type %u: zeros are finite", t);
    static const int64_t at[] = {0, 1, 511, 512, 1023, 1024, 1499};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        for (int inf = 0; inf < 2; inf++) {
            float bad = inf ? -INFINITY : NAN;
            unsigned char *e = v + at[i] * size;
            if (t == PL_TYPE_F32) memcpy(e, &bad, 4);
            uint16_t h = t == PL_TYPE_F16 ? pl_f32_to_f16(bad) : pl_f32_to_bf16(bad);
            if (t != PL_TYPE_F32) memcpy(e, &h, 2);
            int64_t got = pl_find_nonfinite(t, v, n);
            CHECK(got == at[i], "type %u: %s at %lld found at %lld", t, inf ? "-inf" : "NaN",
                  (long long)at[i], (long long)got);
            /* a later bad value does not hide an earlier one */
            CHECK(pl_find_nonfinite(t, v, at[i] + 1) == at[i], "type %u: prefix", t);
            memset(e, 0, (size_t)size);
        }
    }
    /* the largest finite values are finite */
    float big = 3.4e38f;
    uint16_t hbig = t == PL_TYPE_F16 ? 0x7bff : 0x7f7f;
    for (int64_t i = 0; i < n; i++) {
        if (t == PL_TYPE_F32)
            memcpy(v + i * 4, &big, 4);
        else
            memcpy(v + i * 2, &hbig, 2);
    }
    CHECK(pl_find_nonfinite(t, v, n) == -1, "type %u: the largest finite values", t);
    free(v);
}

static void run_tests(void) {
    check_plain(PL_TYPE_F32, 4);
    check_plain(PL_TYPE_F16, 2);
    check_plain(PL_TYPE_BF16, 2);
    int blocks = 0;
    for (uint32_t t = 0; t < PL_TYPE_COUNT; t++) {
        const pl_type_traits *tr = pl_type_get(t);
        if (!tr || !tr->dequant || tr->block_size == 1) continue;
        check_blocks(t);
        blocks++;
    }
    CHECK(blocks >= 14, "every readable block format checked (%d)", blocks);
}
