/* gguf_roundtrip_test.c - every GGUF in shared/ parses, and parse-then-write gives the
 * same bytes back. */
#include "format/gguf.h"
#include "test.h"

static const char *files[] = {
    "models/stories260K.gguf",
    "models/stories260K-Q8_0.gguf",
    "models/stories260K-Q4_0.gguf",
    "models/llama-2-tiny-random.gguf",
    "fixtures/vocab/ggml-vocab-llama-spm.gguf",
    "fixtures/vocab/ggml-vocab-gpt-2.gguf",
    "fixtures/vocab/ggml-vocab-bert-bge.gguf",
    "fixtures/vocab/ggml-vocab-falcon.gguf",
    "fixtures/vocab/ggml-vocab-deepseek-coder.gguf",
    "fixtures/vocab/ggml-vocab-starcoder.gguf",
    "fixtures/quant/base-f32.gguf",
    "fixtures/quant/q-Q4_K.gguf",
    "fixtures/quant/q-TQ1_0.gguf",
    "fixtures/hf/llama/llama-q8_0.gguf",
    "fixtures/hf/qwen2/qwen2-q4_0.gguf",
    "fixtures/hf/qwen3/qwen3-q8_0.gguf",
    "fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf",
    "fixtures/hf/qwen3_5_moe/qwen3_5_moe-q4_0.gguf",
    "fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf",
    "fixtures/hf/llama3_vocab/llama3-vocab.gguf",
};

static int same_file(const char *a, const char *b) {
    pl_file_map ma, mb;
    if (pl_file_map_open(&ma, a) || pl_file_map_open(&mb, b)) return 0;
    int same = ma.size == mb.size && (ma.size == 0 || !memcmp(ma.data, mb.data, ma.size));
    pl_file_map_close(&ma);
    pl_file_map_close(&mb);
    return same;
}

static void run_tests(void) {
    char out[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *path = test_shared(files[i]);
        pl_gguf *g = NULL;
        pl_status st = pl_gguf_open(path, &g);
        CHECK(st == PL_OK, "%s: %s", files[i], pl_last_error());
        if (st) continue;
        snprintf(out, sizeof out, "%s/rt.gguf", test_tmpdir());
        st = pl_gguf_write_file(g, out);
        CHECK(st == PL_OK, "%s: write: %s", files[i], pl_last_error());
        CHECK(same_file(path, out), "%s: round trip is not byte-identical", files[i]);
        pl_gguf_free(g);
        remove(out);
    }
}
