/* selftest.h - what the GPU backend runs when it opens: the autotune of the GEMV shape per
 * weight type (cached per adapter) and the self-test of every kernel family against its
 * CPU reference. Either failing makes pl_gpu_backend_new fail with the reason. */
#ifndef PL_GPU_SELFTEST_H
#define PL_GPU_SELFTEST_H

#include "gpu_internal.h"

/* Load the GEMV shapes tuned earlier on this adapter (gpu-tune.txt in the folder
 * pl_gpu_backend_opts.tune_cache names; none without one). */
void pl_gpu_tune_load(gpu_backend *gb);

/* Tune the GEMV shape (threads, rows per workgroup, reduction, unroll) of every weight
 * shape the recorded ops use for the first time: each candidate times 10 GEMVs over the
 * model's own weight (median of 5); one must beat the built-in shape by 5% to replace it
 * (noise guard: runs on the H200 varied by 10-20% from one call to the next). About 0.2 s
 * per shape, a dense model has 5 or 6; the results are cached per adapter. Skipped on
 * software adapters, with the options no_tune or gemv; tune_verbose prints every
 * candidate's time to stderr. */
pl_status pl_gpu_tune_pending(gpu_backend *gb);

/* Run each kernel family, as the backend will build it, on small random inputs and compare
 * with kernel_ref.h. */
pl_status pl_gpu_selftest(gpu_backend *gb);

#endif
