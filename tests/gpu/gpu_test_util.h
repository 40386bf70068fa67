/* gpu_test_util.h - what the GPU tests share: opening the device (a missing adapter is a
 * failure, never a silent pass), fresh random inputs, poisoned buffers, comparisons.
 * Include after test.h. */
#ifndef PL_TEST_GPU_UTIL_H
#define PL_TEST_GPU_UTIL_H

#include <stdint.h>
#include <time.h>

#include "format/quant.h"
#include "gpu/device.h"
#include "gpu/gpu.h"
#include "gpu/wgsl_gen.h"

/* No GPU: test.h's test_no_gpu (a failure unless POOLED_SKIP_GPU=1 outside CI). */
static inline void gt_no_gpu(const char *what) {
    test_no_gpu(what, pl_last_error());
}

/* Open the GPU device (NULL: see gt_no_gpu). */
static inline pl_gpu *gt_open(void) {
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_gpu *g = NULL;
    if (pl_gpu_open(NULL, &g) == PL_OK) {
        fprintf(stderr, "GPU: %s\n", pl_gpu_get_info(g)->name);
        return g;
    }
    gt_no_gpu("the GPU adapter");
    return NULL;
}

/* Open the GPU backend with default options (NULL: see gt_no_gpu). */
static inline pl_backend *gt_backend(void) {
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0);
    pl_backend *be = NULL;
    if (pl_gpu_backend_new(NULL, &be) == PL_OK) return be;
    gt_no_gpu("the webgpu backend");
    return NULL;
}

/* Fresh random inputs every run; the seed is printed so a failure can be replayed with
 * POOLED_TEST_SEED. */
static uint64_t gt_rng;
static inline void gt_seed(void) {
    const char *s = getenv("POOLED_TEST_SEED");
    gt_rng = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    if (!gt_rng) gt_rng = 1;
    fprintf(stderr, "seed %llu\n", (unsigned long long)gt_rng);
}
static inline uint32_t gt_u32(void) {
    gt_rng ^= gt_rng << 13, gt_rng ^= gt_rng >> 7, gt_rng ^= gt_rng << 17;
    return (uint32_t)(gt_rng >> 16);
}
static inline float gt_unif(float lo, float hi) {
    return lo + (hi - lo) * (gt_u32() / 4294967296.0f);
}
static inline void gt_fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = gt_unif(lo, hi);
}

/* A STORAGE buffer holding `bytes` of data (NULL: poisoned with NaNs). */
static inline pl_gpu_buf *gt_buf(pl_gpu *g, const void *data, size_t bytes) {
    pl_gpu_buf *b = NULL;
    size_t n = (bytes + 3) & ~(size_t)3;
    if (pl_gpu_buf_new(g, n ? n : 4, PL_GPU_STORAGE, "test", &b) != PL_OK) {
        CHECK(0, "buffer: %s", pl_last_error());
        return NULL;
    }
    unsigned char *tmp = malloc(n ? n : 4);
    if (data) {
        memset(tmp, 0, n);
        memcpy(tmp, data, bytes);
    } else {
        memset(tmp, 0xff, n); /* all-ones words are NaN as f32 and as both f16 halves */
    }
    if (n) CHECK(pl_gpu_write(g, b, 0, tmp, n) == PL_OK, "write: %s", pl_last_error());
    free(tmp);
    return b;
}

/* A uniform buffer holding the per-dispatch arguments. */
static inline pl_gpu_buf *gt_args(pl_gpu *g, const pl_gpu_args *a) {
    pl_gpu_buf *b = NULL;
    if (pl_gpu_buf_new(g, sizeof *a, PL_GPU_UNIFORM, "args", &b) != PL_OK) {
        CHECK(0, "args buffer: %s", pl_last_error());
        return NULL;
    }
    CHECK(pl_gpu_write(g, b, 0, a, sizeof *a) == PL_OK, "write: %s", pl_last_error());
    return b;
}

/* Make a kernel from generated WGSL (printing the text if the device rejects it). The text
 * comes through a pointer: the generator call is an argument, evaluated in any order. */
static inline pl_gpu_kernel *gt_kernel(pl_gpu *g, pl_status gen, char **src, const char *label) {
    pl_gpu_kernel *k = NULL;
    char *wgsl = *src;
    *src = NULL;
    if (gen != PL_OK) {
        CHECK(0, "%s: generator failed: %s", label, pl_last_error());
        return NULL;
    }
    if (pl_gpu_kernel_new(g, wgsl, label, &k) != PL_OK) {
        CHECK(0, "%s: %s", label, pl_last_error());
        if (wgsl) fprintf(stderr, "%s\n", wgsl);
    }
    free(wgsl);
    return k;
}

/* Bind, dispatch once, submit. */
static inline int gt_run(pl_gpu *g, pl_gpu_kernel *k, const pl_gpu_ref *refs, int n,
                         uint32_t groups) {
    pl_gpu_bind *b = NULL;
    if (!k || pl_gpu_bind_new(g, k, refs, n, &b) != PL_OK) {
        if (k) CHECK(0, "bind: %s", pl_last_error());
        return 0;
    }
    pl_gpu_begin(g);
    pl_gpu_dispatch(g, k, b, groups);
    int ok = pl_gpu_submit(g) == PL_OK;
    CHECK(ok, "submit: %s", pl_last_error());
    pl_gpu_bind_free(b);
    return ok;
}

static inline void gt_read(pl_gpu *g, pl_gpu_buf *b, void *dst, size_t bytes) {
    CHECK(pl_gpu_download(g, b, 0, dst, bytes) == PL_OK, "download: %s", pl_last_error());
}

/* Random f16 bits of a value in [lo, hi). */
static inline uint16_t gt_f16(float lo, float hi) {
    return pl_f32_to_f16(gt_unif(lo, hi));
}

#endif
