/* batch_step_test.c - continuous batching on the CPU (the checks: batch_step_check.h).
 * Models: stories260K (llama, f32), the qwen3 fixture (q8_0, per-head q/k norms), the
 * qwen3moe one (the experts' FFN over the batch) and the Qwen3.5 hybrids qwen35 and
 * qwen35moe (each column's Gated DeltaNet states and sectioned partial RoPE its own), and
 * the hybrid's refusals at the model level (hybrid_refusals). */
#include "cpu/cpu.h"
#include "test.h"

#include "runtime/batch_step_check.h" /* (after test.h) */

/* The logits row 0 of s on the host. */
static void logits_of(pl_state *s, int V, float *out) {
    CHECK(pl_be_read(pl_state_logits(s), 0, out, (int64_t)V * (int64_t)sizeof *out) == PL_OK, "%s",
          pl_last_error());
}

/* On the qwen35 file with an MTP block (its main model is the plain file's): a batched step
 * asked at a position a recurrent state is not at (also beside a state asked to start
 * afresh at 0), or with a drafting state, is one line and moves no state; then a batched step
 * (which never runs the block) gives each state exactly its own step's logits. s[0] and s[1] step,
 * s[2] is s[0] stepping alone. */
static void hybrid_refusals(pl_backend *be) {
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf"), &g) == PL_OK, "%s",
          pl_last_error());
    if (g) CHECK(pl_model_load(g, be, NULL, &m) == PL_OK, "%s", pl_last_error());
    pl_state *s[4] = {NULL, NULL, NULL, NULL}, *b = NULL;
    int V = m ? pl_model_get_info(m)->n_vocab : 1;
    float *l0 = malloc(sizeof *l0 * (size_t)V), *l1 = malloc(sizeof *l1 * (size_t)V);
    if (!m || !l0 || !l1) goto out;
    pl_state_opts o = pl_state_opts_default(m), ob = o;
    o.n_ctx = 32, o.n_batch = 8, o.n_snap = 2;
    ob.n_ctx = 1, ob.n_batch = ob.n_logits = 2;
    for (int i = 0; i < 4; i++) {
        o.draft = i == 3;
        CHECK(pl_state_new(m, &o, &s[i]) == PL_OK, "%s", pl_last_error());
    }
    CHECK(pl_state_new(m, &ob, &b) == PL_OK, "%s", pl_last_error());
    if (!s[0] || !s[1] || !s[2] || !s[3] || !b) goto out;
    int32_t p[7] = {3, 10, 17, 24, 31, 38, 45}, ids[2] = {52, 59};
    const int plen[4] = {5, 7, 5, 7};
    for (int i = 0; i < 4; i++)
        CHECK(pl_model_forward(m, s[i], p, plen[i], 0, false) == PL_OK, "%s", pl_last_error());
    int64_t wrong[2] = {5, 6}, afresh[2] = {0, 6}, pos[2] = {5, 7}; /* s[1] is at 7 */
    pl_state *two[2] = {s[0], s[1]}, *drafting[2] = {s[0], s[3]};
    CHECK(pl_model_forward_batch(m, b, two, ids, wrong, 2) != PL_OK &&
              strstr(pl_last_error(), "recurrent state is at position 7, not 6"),
          "a batched step at the wrong position: %s", pl_last_error());
    CHECK(pl_model_forward_batch(m, b, two, ids, afresh, 2) != PL_OK &&
              strstr(pl_last_error(), "recurrent state is at position 7, not 6"),
          "a batched step at the wrong position (and s[0] asked to start afresh): %s",
          pl_last_error());
    CHECK(pl_model_forward_batch(m, b, drafting, ids, pos, 2) != PL_OK &&
              strstr(pl_last_error(), "not a plain state"),
          "a drafting state in a batched step: %s", pl_last_error());
    CHECK(pl_model_forward_batch(m, b, two, ids, pos, 2) == PL_OK, "%s", pl_last_error());
    CHECK(pl_model_forward(m, s[2], ids, 1, 5, false) == PL_OK, "%s", pl_last_error());
    logits_of(s[0], V, l0);
    logits_of(s[2], V, l1);
    CHECK(!memcmp(l0, l1, sizeof *l0 * (size_t)V),
          "after refused steps, a batched step's logits differ from the state's own step's");
out:
    free(l0);
    free(l1);
    for (int i = 0; i < 4; i++) pl_state_free(s[i]);
    pl_state_free(b);
    pl_model_free(m);
    pl_gguf_free(g);
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(2, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    bs_model(be, "models/stories260K.gguf", "stories260K", true);
    bs_model(be, "fixtures/hf/qwen3/qwen3-q8_0.gguf", "qwen3 q8_0", true);
    bs_model(be, "fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf", "qwen3moe q8_0", true);
    bs_model(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", "qwen35 q8_0", true);
    bs_model(be, "fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf", "qwen35moe q8_0", true);
    bs_ns = 9; /* 9 columns a step: the matmuls take the CPU's GEMM (8 or more) */
    bs_model(be, "models/stories260K.gguf", "stories260K, 9 sessions", true);
    bs_model(be, "fixtures/hf/qwen3/qwen3-q8_0.gguf", "qwen3 q8_0, 9 sessions", true);
    bs_model(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", "qwen35 q8_0, 9 sessions", true);
    bs_ns = BS_NS;
    hybrid_refusals(be);
    pl_be_destroy(be);
}
