/* gpu_batch_step_test.c - continuous batching on the WebGPU backend (the checks:
 * batch_step_check.h), on stories260K only (lavapipe is slow). */
#include "gpu/gpu.h"
#include "test.h"

#include "gpu/gpu_test_util.h"        /* (after test.h) */
#include "runtime/batch_step_check.h" /* (after test.h) */

static void run_tests(void) {
    pl_backend *gpu = gt_backend();
    if (!gpu) return;
    bs_model(gpu, "models/stories260K.gguf", "stories260K", false);
    pl_be_destroy(gpu);
}
