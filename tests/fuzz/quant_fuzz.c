/* quant_fuzz.c - libFuzzer target for the weight-format converters.
 *
 * The first byte picks a type; the rest are blocks of that type (whole blocks only), as an
 * untrusted file would hold them. Dequantizing must not crash or trip the sanitizers (any
 * bit pattern is a valid block, so it must also succeed), and quantizing the result back -
 * NaN, Inf and huge values included - must not either. For the types we write, a second
 * round trip from finite values must give finite values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint32_t t = data[0] % PL_TYPE_COUNT;
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr || !tr->dequant) return 0;
    const size_t nblocks = (size - 1) / (size_t)tr->type_size;
    if (!nblocks || nblocks > 4096) return 0;
    const int64_t n = (int64_t)nblocks * tr->block_size;
    /* copy so the blocks are aligned as in a mapped file */
    void *blocks = malloc(nblocks * (size_t)tr->type_size);
    float *x = malloc((size_t)n * sizeof *x);
    void *q = malloc(nblocks * (size_t)tr->type_size);
    if (!blocks || !x || !q) abort();
    memcpy(blocks, data + 1, nblocks * (size_t)tr->type_size);
    if (pl_dequant_row(t, blocks, x, n) != PL_OK) abort();
    if (tr->quant) {
        if (pl_quant_row(t, x, q, n) != PL_OK) abort();
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(x[i]) || fabsf(x[i]) > 60000.0f) x[i] = 0; /* keep f16 scales finite */
        if (pl_quant_row(t, x, q, n) != PL_OK || pl_dequant_row(t, q, x, n) != PL_OK) abort();
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(x[i])) abort();
    }
    free(blocks);
    free(x);
    free(q);
    return 0;
}
