/* gpu_submit_test.c - a flush that a read waits on goes to the GPU in several command
 * buffers (pl_gpu_backend_opts.submit_every: the GPU starts on the first while the rest are
 * recorded). Splitting must change nothing: the same model on a backend that submits after
 * every dispatch and on one that submits once a flush gives the same logits bit for bit,
 * through a prefill (the GEMM path past 16 columns where the adapter has it) and decode
 * steps, and the split backend really submits more often. Runs on lavapipe in CI. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "gpu_test_util.h"
#include "../../src/gpu/gpu.h"
#include "../../src/format/gguf.h"
#include "../../src/model/model.h"

/* Prefill 20 ids, then 3 decode steps; logits (row 0) after each into out[4][V]. Returns
 * the submits the backend made. */
static uint64_t run_model(pl_backend *be, const char *rel, float *out, int V) {
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    pl_state *st = NULL;
    uint64_t d0, s0, d1, s1;
    pl_gpu_backend_counters(be, &d0, &s0);
    pl_status s = pl_gguf_open(test_shared(rel), &g);
    if (!s) s = pl_model_load(g, be, NULL, &m);
    if (!s) {
        CHECK(pl_model_get_info(m)->n_vocab == V, "%s: vocabulary %d", rel,
              pl_model_get_info(m)->n_vocab);
        pl_state_opts o = pl_state_opts_default(m);
        o.n_ctx = 64;
        o.n_batch = 32;
        s = pl_state_new(m, &o, &st);
    }
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = 1 + (i * 37) % (V - 1);
    if (!s) s = pl_model_forward(m, st, ids, 20, 0, false);
    if (!s) s = pl_be_read(pl_state_logits(st), 0, out, (int64_t)V * 4);
    for (int t = 0; !s && t < 3; t++) {
        s = pl_model_forward(m, st, &ids[t], 1, 20 + t, false);
        if (!s) s = pl_be_read(pl_state_logits(st), 0, out + (size_t)(t + 1) * V, (int64_t)V * 4);
    }
    CHECK(s == PL_OK, "%s: %s", rel, pl_last_error());
    pl_gpu_backend_counters(be, &d1, &s1);
    pl_state_free(st);
    pl_model_free(m);
    pl_gguf_free(g);
    return s1 - s0;
}

static void run_tests(void) {
    static const struct {
        const char *file;
        int V;
    } models[] = {{"models/stories260K.gguf", 512}, {"fixtures/hf/qwen3/qwen3-q8_0.gguf", 0}};
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_backend *split = NULL, *whole = NULL;
    pl_gpu_backend_opts so = {.no_tune = 1, .no_selftest = 1, .submit_every = 1};
    pl_gpu_backend_opts wo = {.no_tune = 1, .no_selftest = 1, .submit_every = -1};
    pl_status s = pl_gpu_backend_new(&so, &split);
    if (!s) s = pl_gpu_backend_new(&wo, &whole);
    if (s) {
        gt_no_gpu("the webgpu backend (split submits)");
        pl_be_destroy(split);
        pl_be_destroy(whole);
        return;
    }
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int V = models[i].V;
        if (!V) { /* the vocabulary from the file */
            pl_gguf *g = NULL;
            pl_model *m = NULL;
            CHECK(!pl_gguf_open(test_shared(models[i].file), &g) &&
                      !pl_model_load(g, whole, NULL, &m),
                  "%s: %s", models[i].file, pl_last_error());
            V = m ? pl_model_get_info(m)->n_vocab : 0;
            pl_model_free(m);
            pl_gguf_free(g);
        }
        if (!V) continue;
        float *a = calloc((size_t)4 * V, sizeof *a), *b = calloc((size_t)4 * V, sizeof *b);
        uint64_t na = run_model(split, models[i].file, a, V);
        uint64_t nb = run_model(whole, models[i].file, b, V);
        CHECK(na > 2 * nb, "%s: %llu submits split, %llu whole: the flushes were not split",
              models[i].file, (unsigned long long)na, (unsigned long long)nb);
        for (int t = 0; t < 4; t++)
            CHECK(!memcmp(a + (size_t)t * V, b + (size_t)t * V, sizeof *a * (size_t)V),
                  "%s, %s: the split submits changed the logits", models[i].file,
                  t ? "decode step" : "prefill");
        free(a);
        free(b);
    }
    pl_be_destroy(split);
    pl_be_destroy(whole);
}
