/* model_fuzz.c - libFuzzer target for model loading and the forward pass: the input is a
 * GGUF (from memory); if it parses and loads as a model, a small state is made and two
 * tokens are run through it. Any failure must be a one-line error, never a crash, a hang
 * or an out-of-bounds access. Seeds in corpus/model_fuzz/ are tiny random llama / qwen2 /
 * qwen3 / qwen3moe models (POOLED_WRITE_FUZZ_SEEDS=DIR build/tests/bad_model_test) and
 * qwen35 hybrids (the same with build/tests/bad_hybrid_test). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "model/model.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "model_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,              \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_gguf *g = NULL;
    pl_backend *be = NULL;
    pl_model *m = NULL;
    pl_state *st = NULL;
    pl_clear_error();
    if (pl_gguf_parse(data, size, &g)) {
        REQUIRE(pl_last_error()[0] && !strchr(pl_last_error(), '\n'));
        return 0;
    }
    REQUIRE(pl_cpu_new(1, &be) == PL_OK);
    pl_status s = pl_model_load(g, be, NULL, &m);
    if (!s) {
        /* keep the work small whatever the file claims */
        pl_state_opts o = {.n_ctx = 4, .n_batch = 2, .n_logits = 2, .kv_type = PL_TYPE_F16};
        const pl_model_info *in = pl_model_get_info(m);
        if ((int64_t)in->n_vocab * in->n_embd < (1 << 22)) s = pl_state_new(m, &o, &st);
        const int32_t ids[2] = {0, in->n_vocab - 1};
        if (!s && st) s = pl_model_forward(m, st, ids, 2, 0, true);
        if (!s && st) s = pl_model_forward(m, st, ids, 1, 2, false);
        if (!s && st) REQUIRE(pl_model_forward(m, st, ids, 2, 3, false) != PL_OK); /* past ctx */
        s = PL_ERR; /* only the message is checked below */
        pl_fail(PL_ERR, "done");
    }
    REQUIRE(s != PL_OK && pl_last_error()[0] && !strchr(pl_last_error(), '\n'));
    pl_state_free(st);
    pl_model_free(m);
    REQUIRE(be->live_bufs == 0);
    pl_be_destroy(be);
    pl_gguf_free(g);
    return 0;
}
