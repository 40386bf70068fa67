/* selftest.h - what the GPU backend runs when it opens: the autotune of the GEMV shape per
 * weight type (cached per adapter) and the self-test of every kernel family against its
 * CPU reference. Either failing makes pl_gpu_backend_new fail with the reason. */
#ifndef PL_GPU_SELFTEST_H
#define PL_GPU_SELFTEST_H

#include "gpu_internal.h"

/* Pick threads and rows per workgroup of the GEMV for each weight type by timing the
 * candidates on a 2048 x 2048 and an 8192 x 4096 matrix (time relative to the built-in
 * choice, summed, each the median of 5 runs), a couple of seconds; a candidate must beat the
 * built-in choice by 5% to replace it (noise guard). Results are cached in
 * $XDG_CACHE_HOME/pooled (or ~/.cache/pooled) per adapter; POOLED_GPU_TUNE=0 skips it,
 * POOLED_GPU_TUNE=verbose re-tunes and prints every candidate's time to stderr. */
pl_status pl_gpu_autotune(gpu_backend *gb);

/* Run each kernel family, as the backend will build it, on small random inputs and compare
 * with kernel_ref.h. */
pl_status pl_gpu_selftest(gpu_backend *gb);

#endif
