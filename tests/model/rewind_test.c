/* rewind_test.c - recurrent state positions, snapshots and pl_state_rewind on the qwen35
 * fixture (6 Gated DeltaNet layers, 2 attention layers), and on an attention-only model:
 *   - N columns run with snapshots kept (n_snap = N), rewound to column k and rerun give
 *     the logits of the first run bit for bit, and the state after it continues exactly as
 *     a fresh run does (the following decode steps' logits are identical);
 *   - rewinding to 0 restarts, to the current position does nothing, to a position not
 *     kept fails with one line and leaves the state usable; a call larger than n_snap
 *     keeps nothing; a layers call at a position the state is not at fails with one line;
 *   - an attention-only model (llama) can always rewind.
 * The snapshot checks run on the CPU and on the WebGPU backend (lavapipe in CI; a missing
 * adapter is a failure unless POOLED_SKIP_GPU=1 outside CI). */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "test.h"

#define N   12 /* prompt columns */
#define GEN 6  /* decode steps compared after */

static const int32_t prompt[N] = {18, 751, 334, 202, 338, 671, 341, 828, 57, 751, 979, 867};

static int V;

static fixture_model open_q35(pl_backend *be, int n_snap) {
    fixture_model fm;
    pl_state_opts o = {
        .n_ctx = 64, .n_batch = N, .n_logits = N, .kv_type = PL_TYPE_F32, .n_snap = n_snap};
    pl_status s =
        fixture_model_open(&fm, be, test_shared("fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf"), &o);
    CHECK(s == PL_OK, "%s", pl_last_error());
    if (!s) V = pl_model_get_info(fm.m)->n_vocab;
    return fm;
}

/* Forward ids at pos0 with every row's logits into out [n * V]. */
static bool fwd(fixture_model *fm, const int32_t *ids, int n, int pos0, float *out) {
    pl_status s = pl_model_forward(fm->m, fm->st, ids, n, pos0, true);
    if (!s && out) s = pl_be_read(pl_state_logits(fm->st), 0, out, (int64_t)n * V * 4);
    CHECK(s == PL_OK, "forward %d at %d: %s", n, pos0, pl_last_error());
    return s == PL_OK;
}

/* GEN decode steps from position pos (ids from the prompt, reversed), logits into out. */
static bool decode(fixture_model *fm, int pos, float *out) {
    for (int t = 0; t < GEN; t++)
        if (!fwd(fm, &prompt[N - 1 - t], 1, pos + t, out + (int64_t)t * V)) return false;
    return true;
}

static void check_snapshots(pl_backend *be) {
    fixture_model a = open_q35(be, N), fresh = open_q35(be, 0);
    if (!a.st || !fresh.st) return;
    float *first = malloc(sizeof(float) * (size_t)N * V),
          *again = malloc(sizeof(float) * (size_t)N * V);
    float *da = malloc(sizeof(float) * (size_t)GEN * V),
          *db = malloc(sizeof(float) * (size_t)GEN * V);
    for (int k = 1; k < N; k += 3) {
        if (!fwd(&a, prompt, N, 0, first)) break;
        CHECK(pl_state_can_rewind(a.st, k) && pl_state_can_rewind(a.st, N) &&
                  pl_state_can_rewind(a.st, 0),
              "rewind to %d, %d, 0 should be possible", k, N);
        CHECK(pl_state_rewind(a.st, k) == PL_OK, "rewind to %d: %s", k, pl_last_error());
        /* rerun the columns after k: the same logits, bit for bit */
        if (!fwd(&a, prompt + k, N - k, k, again)) break;
        CHECK(!memcmp(again, first + (int64_t)k * V, sizeof(float) * (size_t)(N - k) * V),
              "rewound to %d and rerun: logits differ", k);
        /* and the state is that of a run without any rewinding */
        if (!fwd(&fresh, prompt, N, 0, NULL) || !decode(&a, N, da) || !decode(&fresh, N, db)) break;
        CHECK(!memcmp(da, db, sizeof(float) * (size_t)GEN * V),
              "rewound to %d: the following decode steps differ from a fresh run", k);
    }
    /* after the decode steps (calls of 1 column) only the last position and 0 are kept */
    int64_t at = N + GEN;
    CHECK(!pl_state_can_rewind(a.st, 5), "rewind to 5 after decoding should not be possible");
    pl_status s = pl_state_rewind(a.st, 5);
    CHECK(s != PL_OK && strstr(pl_last_error(), "cannot rewind to position 5") &&
              !strchr(pl_last_error(), '\n'),
          "rewind to a position not kept: '%s'", s ? pl_last_error() : "success");
    /* a one-column call keeps the state after its column, which is the current one */
    CHECK(!pl_state_can_rewind(a.st, at - 1), "the position before a one-column call kept");
    CHECK(pl_state_rewind(a.st, at) == PL_OK, "rewind to the current position: %s",
          pl_last_error());
    /* a layers call at the wrong position */
    s = pl_model_forward(a.m, a.st, prompt, 1, at + 1, false);
    CHECK(s != PL_OK && strstr(pl_last_error(), "recurrent state is at position"),
          "forward at a position the state is not at: '%s'", s ? pl_last_error() : "success");
    /* the failed rewind and call changed nothing: the state still continues from `at` */
    CHECK(fwd(&a, prompt, 1, (int)at, da), "continue after the refused calls");
    /* rewinding to 0 and rerunning gives the first run's logits */
    CHECK(pl_state_rewind(a.st, 0) == PL_OK && fwd(&a, prompt, N, 0, again) &&
              !memcmp(again, first, sizeof(float) * (size_t)N * V),
          "rewind to 0 and rerun");
    free(first), free(again), free(da), free(db);
    fixture_model_close(&a);
    fixture_model_close(&fresh);

    /* a call of more columns than n_snap keeps none of them */
    fixture_model small = open_q35(be, 4);
    if (small.st && fwd(&small, prompt, N, 0, NULL)) {
        CHECK(!pl_state_can_rewind(small.st, N - 1) && pl_state_can_rewind(small.st, N),
              "n_snap 4, a call of %d: nothing kept", N);
        CHECK(fwd(&small, prompt, 3, N, NULL) && pl_state_can_rewind(small.st, N + 1) &&
                  pl_state_rewind(small.st, N + 1) == PL_OK,
              "n_snap 4, a call of 3: its columns kept");
    }
    fixture_model_close(&small);
}

/* An attention-only model: every position can be rewound to, nothing to do. */
static void check_llama(pl_backend *be) {
    fixture_model fm;
    pl_state_opts o = {.n_ctx = 32, .n_batch = 8, .n_logits = 1, .kv_type = PL_TYPE_F32};
    pl_status s = fixture_model_open(&fm, be, test_shared("models/stories260K.gguf"), &o);
    CHECK(s == PL_OK, "%s", pl_last_error());
    const int32_t ids[4] = {1, 403, 407, 500};
    if (!s) s = pl_model_forward(fm.m, fm.st, ids, 4, 0, false);
    CHECK(!s && pl_state_can_rewind(fm.st, 2) && pl_state_rewind(fm.st, 2) == PL_OK &&
              !pl_state_can_rewind(fm.st, 33) && pl_state_rewind(fm.st, -1) != PL_OK,
          "llama rewind: %s", pl_last_error());
    fixture_model_close(&fm);
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(2, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    check_snapshots(be);
    check_llama(be);
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_gpu_backend_opts go = {.no_tune = 1, .no_selftest = 1};
    pl_backend *gpu = NULL;
    if (pl_gpu_backend_new(&go, &gpu) != PL_OK) {
        test_no_gpu("the webgpu backend", pl_last_error());
        return;
    }
    check_snapshots(gpu);
    CHECK(gpu->live_bufs == 0, "webgpu: %lld buffers leaked", (long long)gpu->live_bufs);
    pl_be_destroy(gpu);
}
