/* decode_bytes_test.c - pl_model_info.decode_bytes, the weight bytes one decoded token
 * reads (what `pooled bench` turns into GB/s), on the fixtures:
 *   - a tied dense model reads every tensor: decode_bytes == the file's weight bytes;
 *   - an untied one reads one row of its token embedding, the output matrix whole;
 *   - the multi-token-prediction block is not run: the -mtp- files read what the plain ones
 *     do;
 *   - a mixture-of-experts model reads n_used of n_expert of every expert tensor;
 *   - a layer range reads only its layers (and the embedding row / head it has; a tied
 *     model's part with the embedding and no head reads one row, not the whole matrix). */
#include "cpu/cpu.h"
#include "model/model.h"
#include "test.h"

typedef struct {
    uint64_t all, embd, embd_row, exps, first_layer;
} sums;

static sums sum_file(const pl_gguf *g) {
    sums u = {0};
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        u.all += t->nbytes;
        if (!strcmp(name, "token_embd.weight"))
            u.embd = t->nbytes, u.embd_row = t->nbytes / t->ne[1];
        if (strstr(name, "_exps.")) u.exps += t->nbytes;
        if (!strncmp(name, "blk.0.", 6)) u.first_layer += t->nbytes;
    }
    return u;
}

static uint64_t load(pl_backend *be, const char *rel, int first, int last, sums *u) {
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    uint64_t b = 0;
    pl_model_opts o = {.layer_first = first, .layer_last = last};
    pl_status s = pl_gguf_open(test_shared(rel), &g);
    if (!s) s = pl_model_load(g, be, &o, &m);
    CHECK(s == PL_OK, "%s: %s", rel, pl_last_error());
    if (!s) {
        b = pl_model_get_info(m)->decode_bytes;
        CHECK(pl_model_get_info(m)->weight_bytes == sum_file(g).all, "%s: weight bytes", rel);
        if (u) *u = sum_file(g);
    }
    pl_model_free(m);
    pl_gguf_free(g);
    return b;
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    sums u;
    /* tied (no output.weight): everything */
    uint64_t b = load(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 0, 0, &u);
    CHECK(b == u.all, "tied qwen3_5: %llu of %llu bytes", (unsigned long long)b,
          (unsigned long long)u.all);
    /* untied: one embedding row */
    b = load(be, "fixtures/hf/qwen2/qwen2-q8_0.gguf", 0, 0, &u);
    CHECK(b == u.all - u.embd + u.embd_row, "untied qwen2: %llu bytes, want %llu",
          (unsigned long long)b, (unsigned long long)(u.all - u.embd + u.embd_row));
    /* the MTP block is loaded, not read */
    uint64_t plain = load(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 0, 0, NULL);
    uint64_t mtp = load(be, "fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf", 0, 0, NULL);
    CHECK(plain == mtp && mtp > 0, "qwen3_5 -mtp-: %llu bytes, plain %llu", (unsigned long long)mtp,
          (unsigned long long)plain);
    plain = load(be, "fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf", 0, 0, NULL);
    mtp = load(be, "fixtures/hf/qwen3_5_moe/qwen3_5_moe-mtp-q8_0.gguf", 0, 0, NULL);
    CHECK(plain == mtp && mtp > 0, "qwen3_5_moe -mtp-: %llu bytes, plain %llu",
          (unsigned long long)mtp, (unsigned long long)plain);
    /* experts: 2 of 8 (untied, so one embedding row too) */
    b = load(be, "fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf", 0, 0, &u);
    uint64_t want = u.all - u.embd + u.embd_row - u.exps + u.exps * 2 / 8;
    CHECK(b == want && u.exps > 0, "qwen3_moe: %llu bytes, want %llu", (unsigned long long)b,
          (unsigned long long)want);
    /* layer 0 alone of an untied model: its tensors and one embedding row, no head */
    b = load(be, "fixtures/hf/qwen2/qwen2-q8_0.gguf", 0, 1, &u);
    CHECK(b == u.first_layer + u.embd_row, "qwen2 layer 0: %llu bytes, want %llu",
          (unsigned long long)b, (unsigned long long)(u.first_layer + u.embd_row));
    /* layer 0 alone of a tied model: one embedding row too (the output matrix is not run) */
    b = load(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 0, 1, &u);
    CHECK(b == u.first_layer + u.embd_row, "tied qwen3_5 layer 0: %llu bytes, want %llu",
          (unsigned long long)b, (unsigned long long)(u.first_layer + u.embd_row));
    pl_be_destroy(be);
}
