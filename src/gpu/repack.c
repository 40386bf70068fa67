/* repack.c - GGUF weight rows into the GPU layouts (see repack.h for what becomes what). */
#include <math.h>
#include <string.h>

#include "../format/quant.h"
#include "repack.h"

pl_status pl_gpu_repack_type(uint32_t ggml_type, uint32_t cols, pl_gpu_wtype *out) {
    switch (ggml_type) {
    case PL_TYPE_F32:
    case PL_TYPE_BF16: *out = PL_GW_F32; return PL_OK;
    case PL_TYPE_F16: *out = PL_GW_F16; return PL_OK;
    case PL_TYPE_Q4_0: *out = PL_GW_Q4_0; return PL_OK;
    case PL_TYPE_Q8_0: *out = PL_GW_Q8_0; return PL_OK;
    default: break;
    }
    const pl_type_traits *tr = pl_type_get(ggml_type);
    if (!tr || !tr->dequant)
        return pl_fail(PL_ERR_FORMAT, "GPU: cannot read weights of type %s",
                       tr ? tr->name : "unknown");
    *out = cols % 32 == 0 ? PL_GW_Q8_0 : PL_GW_F32;
    return PL_OK;
}

uint64_t pl_gpu_quant_bytes(pl_gpu_wtype t, uint32_t cols, uint64_t n_rows) {
    switch (t) {
    case PL_GW_Q4_0: return n_rows * (cols / 32) * 16;
    case PL_GW_Q8_0: return n_rows * (cols / 32) * 32;
    case PL_GW_F16: return n_rows * cols * 2;
    case PL_GW_F32:
    default: return n_rows * cols * 4;
    }
}

uint64_t pl_gpu_scale_bytes(pl_gpu_wtype t, uint32_t cols, uint64_t n_rows) {
    return t == PL_GW_Q4_0 || t == PL_GW_Q8_0 ? n_rows * (cols / 32) * 2 : 0;
}

/* Split n blocks of (f16 scale, nq quant bytes) into quants and scales. */
static void split_blocks(const unsigned char *src, uint64_t n, size_t nq, unsigned char *q,
                         uint16_t *s) {
    for (uint64_t b = 0; b < n; b++, src += 2 + nq) {
        memcpy(&s[b], src, 2);
        memcpy(q + b * nq, src + 2, nq);
    }
}

pl_status pl_gpu_repack_rows(uint32_t ggml_type, const void *src, uint32_t cols, uint32_t n_rows,
                             pl_gpu_wtype t, void *q, uint16_t *s, float *tmp) {
    uint64_t nblk = (uint64_t)n_rows * (cols / 32);
    if (ggml_type == PL_TYPE_Q4_0 && t == PL_GW_Q4_0) {
        split_blocks(src, nblk, 16, q, s);
        return PL_OK;
    }
    if (ggml_type == PL_TYPE_Q8_0 && t == PL_GW_Q8_0) {
        split_blocks(src, nblk, 32, q, s);
        return PL_OK;
    }
    if ((ggml_type == PL_TYPE_F32 && t == PL_GW_F32) ||
        (ggml_type == PL_TYPE_F16 && t == PL_GW_F16)) {
        memcpy(q, src, (size_t)pl_gpu_quant_bytes(t, cols, n_rows));
        return PL_OK;
    }
    /* converted formats: one row at a time through floats */
    int64_t row_bytes = pl_row_size(ggml_type, cols);
    if (row_bytes < 0 || t == PL_GW_Q4_0 || t == PL_GW_F16)
        return pl_fail(PL_ERR_FORMAT, "GPU: cannot convert type %u rows of %u", ggml_type, cols);
    for (uint32_t r = 0; r < n_rows; r++) {
        const unsigned char *row = (const unsigned char *)src + (uint64_t)r * (uint64_t)row_bytes;
        if (pl_dequant_row(ggml_type, row, tmp, cols) != PL_OK) return PL_ERR_FORMAT;
        if (t == PL_GW_F32) {
            memcpy((float *)q + (uint64_t)r * cols, tmp, (size_t)cols * 4);
        } else {
            uint64_t b0 = (uint64_t)r * (cols / 32);
            pl_quant_act_q8_0(tmp, cols, (int8_t *)q + b0 * 32, s + b0);
        }
    }
    return PL_OK;
}
