/* batch_step_test.c - continuous batching on the CPU (the checks: batch_step_check.h).
 * Models: stories260K (llama, f32), the qwen3 fixture (q8_0, per-head q/k norms), the
 * qwen3moe one (the experts' FFN over the batch) and the Qwen3.5 hybrids qwen35 and
 * qwen35moe (each column's Gated DeltaNet states and sectioned partial RoPE its own). */
#include "cpu/cpu.h"
#include "test.h"

#include "runtime/batch_step_check.h" /* (after test.h) */

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
    pl_be_destroy(be);
}
