/* lab_util.h - what the kernel labs (gemv_lab.c, gemm_lab.c) share: a seeded random
 * generator, uploads and a comparison for qsort. */
#ifndef PL_TOOLS_LAB_UTIL_H
#define PL_TOOLS_LAB_UTIL_H

#include <stdint.h>

#include "gpu/device.h"

static uint64_t rng = 88172645463325252ull;
static inline uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static inline float unif(float a, float b) {
    return a + (b - a) * (float)(rnd() & 0xffffff) / 16777216.0f;
}

/* A storage buffer of n bytes holding data (NULL: left as the device made it). */
static inline pl_gpu_buf *upload(pl_gpu *g, const void *data, uint64_t n, const char *label) {
    pl_gpu_buf *b = NULL;
    if (pl_gpu_buf_new(g, n, PL_GPU_STORAGE, label, &b) != PL_OK) return NULL;
    if (data && pl_gpu_write(g, b, 0, data, (size_t)n) != PL_OK) return NULL;
    return b;
}

static inline int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
