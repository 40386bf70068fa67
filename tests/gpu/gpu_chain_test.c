/* gpu_chain_test.c - a session over a chain of local stages on the WebGPU backend
 * (lavapipe in CI) against one session over the whole model on the same backend:
 * stories260K split two ways (chain_check.h: every turn's logits bit-identical, the greedy
 * and sampled ids the same), and the submits (device waits) a greedy token costs. Without
 * an adapter this fails, as gpu_model_test does; POOLED_SKIP_GPU=1 outside CI skips. */
#include "gpu/gpu.h"
#include "test.h"

#include "gpu/gpu_test_util.h" /* (after test.h) */

#include "runtime/chain_check.h" /* (after test.h) */

/* Submits to the device (each one waited for) per greedy token through a chain whose host
 * holds the first layer and one local stage the rest: the argmax, the embedding of its id
 * and the host's own layer run together and their id and column read back at once
 * (pl_chain_pick_ahead's pl_be_read_many: 1), the stage's write, layers and read of its
 * frame (1). Greedy n ids: n argmaxes, n - 1 stage frames between. (Before the id and the
 * column were read in one wait, a step cost one submit more: 8 + 7 * 2.) */
static void check_submits(const pl_gguf *g, pl_backend *gpu, const pl_model *w) {
    int L = pl_model_get_info(w)->n_layer;
    pl_model *host = cc_load(g, gpu, 0, 1, PL_ENDS_EMBED | PL_ENDS_HEAD);
    pl_model *part = cc_load(g, gpu, 1, L, PL_ENDS_NONE);
    pl_state_opts o = cc_opts(w);
    pl_stage *st = NULL;
    pl_session *cs = NULL;
    if (host && part) {
        CHECK(pl_stage_local_new(part, &o, 1, L, &st) == PL_OK, "%s", pl_last_error());
        CHECK(st && pl_session_new_chain(host, &o, &st, 1, NULL, &cs) == PL_OK, "%s",
              pl_last_error());
    }
    const int32_t prompt[5] = {1, 5, 9, 13, 17};
    int64_t n = 0;
    uint64_t d0, d1, s0 = 0, s1 = 0;
    if (cs) {
        CHECK(pl_session_set(cs, prompt, 5, NULL) == PL_OK, "%s", pl_last_error());
        pl_gpu_backend_counters(gpu, &d0, &s0);
        CHECK(pl_session_greedy(cs, 8, NULL, NULL, &n) == PL_OK && n == 8, "greedy: %s",
              pl_last_error());
        pl_gpu_backend_counters(gpu, &d1, &s1);
        /* each of the 7 picks after a stage frame was prepared while the frame ran, except
         * the last (nothing follows it) */
        CHECK(pl_chain_prepared(pl_session_chain(cs)) == 6, "%lld picks prepared, expected 6",
              (long long)pl_chain_prepared(pl_session_chain(cs)));
        CHECK(s1 - s0 == 8 + 7,
              "greedy 8 through host [0, 1) + a stage: %llu submits, "
              "expected 15 (8 argmaxes with the host's layer, 7 stage frames)",
              (unsigned long long)(s1 - s0));
    }
    pl_session_free(cs);
    pl_stage_free(st);
    pl_model_free(part);
    pl_model_free(host);
}

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
        check_submits(g, gpu, w);
    }
    pl_model_free(w);
    pl_gguf_free(g);
    CHECK(gpu->live_bufs == 0, "%lld buffers leaked", (long long)gpu->live_bufs);
    pl_be_destroy(gpu);
}
