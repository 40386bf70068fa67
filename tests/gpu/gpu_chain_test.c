/* gpu_chain_test.c - a session over a chain of local stages on the WebGPU backend
 * (lavapipe in CI) against one session over the whole model on the same backend:
 * stories260K split two ways (chain_check.h: every turn's logits bit-identical, the greedy
 * and sampled ids the same). Without an adapter this fails, as gpu_model_test does;
 * POOLED_SKIP_GPU=1 outside CI skips. */
#include "gpu/gpu.h"
#include "test.h"

#include "gpu/gpu_test_util.h" /* (after test.h) */

#include "runtime/chain_check.h" /* (after test.h) */

static void run_tests(void) {
    pl_backend *gpu = gt_backend();
    if (!gpu) return;
    fprintf(stderr, "backend: %s\n", gpu->name);
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    pl_model *w = g ? cc_load(g, gpu, 0, 0, PL_ENDS_AUTO) : NULL;
    if (w) {
        cc_split sp[4];
        cc_splits(pl_model_get_info(w)->n_layer, sp);
        cc_check_split(g, gpu, w, &sp[1], "stories260K on the GPU"); /* host layer 0, 2 stages */
        cc_check_split(g, gpu, w, &sp[3], "stories260K on the GPU"); /* host layer 1 between */
    }
    pl_model_free(w);
    pl_gguf_free(g);
    CHECK(gpu->live_bufs == 0, "%lld buffers leaked", (long long)gpu->live_bufs);
    pl_be_destroy(gpu);
}
