/* gpu_mat_util.h - random weight matrices for the GPU kernel tests: made the way a model's
 * are (GGML rows with random block scales, then repacked), checked against the GGML values,
 * and uploaded as the kernels bind them. Include after gpu_test_util.h. */
#ifndef PL_TEST_GPU_MAT_UTIL_H
#define PL_TEST_GPU_MAT_UTIL_H

#include "gpu/kernel_ref.h"
#include "gpu/repack.h"

/* A random matrix made the way a model's is: GGML rows, then repacked for the GPU. */
typedef struct {
    pl_gpu_wtype t;
    uint32_t rows, cols;
    void *q;
    uint16_t *s;
} mat;

static inline uint32_t ggml_of(pl_gpu_wtype t) {
    return t == PL_GW_Q4_0   ? PL_TYPE_Q4_0
           : t == PL_GW_Q8_0 ? PL_TYPE_Q8_0
           : t == PL_GW_F16  ? PL_TYPE_F16
                             : PL_TYPE_F32;
}

/* Random GGML rows of type t: quantised blocks with random scales of either sign, f16 or
 * f32 values in [-1, 1). */
static inline unsigned char *ggml_rows(pl_gpu_wtype t, uint32_t rows, uint32_t cols) {
    int64_t rb = pl_row_size(ggml_of(t), cols);
    unsigned char *src = malloc((size_t)rb * rows);
    for (uint64_t r = 0; r < rows; r++) {
        unsigned char *row = src + r * (uint64_t)rb;
        if (t == PL_GW_Q4_0 || t == PL_GW_Q8_0) {
            size_t bs = t == PL_GW_Q4_0 ? 18 : 34;
            for (uint32_t b = 0; b < cols / 32; b++) {
                uint16_t d = gt_f16(0.01f, 0.1f) | (gt_u32() & 1 ? 0x8000 : 0);
                memcpy(row + b * bs, &d, 2);
                for (size_t j = 2; j < bs; j++) row[b * bs + j] = (unsigned char)gt_u32();
            }
        } else if (t == PL_GW_F16) {
            for (uint32_t c = 0; c < cols; c++) {
                uint16_t h = gt_f16(-1, 1);
                memcpy(row + 2 * c, &h, 2);
            }
        } else {
            gt_fill((float *)row, cols, -1, 1);
        }
    }
    return src;
}

static inline mat make_mat(pl_gpu_wtype t, uint32_t rows, uint32_t cols) {
    mat m = {t, rows, cols, NULL, NULL};
    int64_t rb = pl_row_size(ggml_of(t), cols);
    unsigned char *src = ggml_rows(t, rows, cols);
    m.q = malloc(pl_gpu_quant_bytes(t, cols, rows) + 16);
    m.s = malloc(pl_gpu_scale_bytes(t, cols, rows) + 16);
    CHECK(pl_gpu_repack_rows(ggml_of(t), src, cols, rows, t, m.q, m.s, NULL) == PL_OK, "repack");
    /* the repacked layout holds exactly the GGML block values */
    for (int i = 0; i < 64; i++) {
        uint32_t r = gt_u32() % rows, c = gt_u32() % cols;
        const unsigned char *row = src + (uint64_t)r * (uint64_t)rb;
        float want;
        if (t == PL_GW_Q4_0 || t == PL_GW_Q8_0) {
            size_t bs = t == PL_GW_Q4_0 ? 18 : 34;
            const unsigned char *blk = row + (c / 32) * bs;
            uint16_t d;
            memcpy(&d, blk, 2);
            int j = c % 32, v;
            if (t == PL_GW_Q4_0)
                v = (j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8;
            else
                v = (int8_t)blk[2 + j];
            want = (float)v * pl_f16_to_f32(d);
        } else if (t == PL_GW_F16) {
            uint16_t h;
            memcpy(&h, row + 2 * c, 2);
            want = pl_f16_to_f32(h);
        } else {
            memcpy(&want, row + 4 * c, 4);
        }
        float got = pl_gpu_ref_weight(t, m.q, m.s, cols, r, c);
        if (got != want) {
            CHECK(0, "repack type %d (%u,%u): %g != %g", t, r, c, got, want);
            break;
        }
    }
    free(src);
    return m;
}

static inline void free_mat(mat *m) {
    free(m->q), free(m->s);
}

/* Upload rows [r0, r1) of m: quants (or values) and scales as separate buffers. */
static inline void upload_part(pl_gpu *g, const mat *m, uint32_t r0, uint32_t r1, pl_gpu_buf **q,
                               pl_gpu_buf **s, pl_gpu_ref_mat *ref, int part) {
    uint64_t qo = pl_gpu_quant_bytes(m->t, m->cols, r0), so = pl_gpu_scale_bytes(m->t, m->cols, r0);
    *q = gt_buf(g, (char *)m->q + qo, pl_gpu_quant_bytes(m->t, m->cols, r1 - r0));
    ref->q[part] = (char *)m->q + qo;
    ref->s[part] = NULL;
    *s = NULL;
    if (pl_gpu_scale_bytes(m->t, m->cols, 1)) {
        *s = gt_buf(g, (char *)m->s + so, pl_gpu_scale_bytes(m->t, m->cols, r1 - r0));
        ref->s[part] = (const uint16_t *)((char *)m->s + so);
    }
}

#endif
