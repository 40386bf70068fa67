/* bad_model_test.c - broken models give one clear error, never a crash: an unknown
 * architecture, a missing tensor, a tensor of the wrong shape, an unreadable weight
 * format, absurd metadata. Each is a copy of stories260K with one thing changed, written
 * to the test's temporary folder, loaded through the library and run through `pooled run`
 * (non-zero exit, exactly one line on stderr). A prompt longer than the context is the
 * last case. Tiny random models of each architecture (tiny_model.h) must load and give
 * finite logits; POOLED_WRITE_FUZZ_SEEDS=DIR also writes them as the model fuzzer's seeds. */
#include <sys/wait.h>

#include "cpu/cpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "test.h"

typedef enum { EDIT_ARCH, EDIT_DROP, EDIT_SHAPE, EDIT_TYPE, EDIT_LAYERS, EDIT_HEADS } edit_kind;

/* Copy src into a new file with one edit; returns the path (static buffer per call slot). */
static const char *write_edited(const pl_gguf *src, edit_kind e, const char *name) {
    static char path[6][512];
    char *p = path[e];
    snprintf(p, sizeof path[0], "%s/%s.gguf", test_tmpdir(), name);
    pl_gguf *g = pl_gguf_new();
    for (int64_t i = 0; i < pl_gguf_kv_count(src); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        pl_gguf_set_value(g, key, &kv->value);
    }
    if (e == EDIT_ARCH) pl_gguf_set_str(g, "general.architecture", "mamba9");
    if (e == EDIT_LAYERS) pl_gguf_set_u32(g, "llama.block_count", 4000);
    if (e == EDIT_HEADS) pl_gguf_set_u32(g, "llama.attention.head_count_kv", 3);
    for (int64_t i = 0; i < pl_gguf_tensor_count(src); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(src, i);
        char tn[256];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint32_t type = t->type;
        if (!strcmp(tn, "blk.2.attn_k.weight")) {
            if (e == EDIT_DROP) continue;
            if (e == EDIT_SHAPE) { /* same bytes, rows and columns swapped */
                int64_t x = ne[0];
                ne[0] = ne[1];
                ne[1] = x;
            }
        }
        if (e == EDIT_TYPE && !strcmp(tn, "blk.1.ffn_up.weight")) {
            /* same bytes read as I32: a format a weight can never be */
            type = PL_TYPE_I32;
        }
        pl_gguf_add_tensor(g, tn, type, t->n_dims, ne, t->data);
    }
    CHECK(pl_gguf_write_file(g, p) == PL_OK, "%s", pl_last_error());
    pl_gguf_free(g);
    return p;
}

/* pooled run on the file: non-zero exit, no signal, exactly one line on stderr that
 * contains `want`. */
static void check_command(const char *model, const char *extra, const char *want) {
    char args[2048];
    snprintf(args, sizeof args, "run -m '%s' --prompt-ids '1 403 407' -n 4 --temp 0 %s", model,
             extra);
    check_command_fails(args, want);
}

static void check_library(pl_backend *be, const char *path, const char *want) {
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    pl_status s = pl_gguf_open(path, &g);
    CHECK(s == PL_OK, "%s", pl_last_error());
    if (s) return;
    s = pl_model_load(g, be, NULL, &m);
    CHECK(s != PL_OK && strstr(pl_last_error(), want), "%s: want an error with '%s', got '%s'",
          path, want, s ? pl_last_error() : "success");
    pl_model_free(m);
    pl_gguf_free(g);
}

/* Tiny models of each architecture and weight type load and give finite logits. */
static void check_tiny(pl_backend *be) {
    static const struct {
        const char *arch, *file;
        int layers;
        uint32_t type;
    } tiny[] = {
        {"llama", "tiny-llama.gguf", 1, PL_TYPE_F32},
        {"qwen2", "tiny-qwen2.gguf", 1, PL_TYPE_F32},
        {"qwen3", "tiny-qwen3.gguf", 1, PL_TYPE_F32},
        {"llama", "tiny-llama-f16.gguf", 2, PL_TYPE_F16},
    };
    const char *seeds = getenv("POOLED_WRITE_FUZZ_SEEDS");
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", seeds && *seeds ? seeds : test_tmpdir(), tiny[i].file);
        CHECK(tiny_model_write(path, tiny[i].arch, tiny[i].layers, tiny[i].type) == 0, "%s", path);
        fixture_model fm;
        pl_state_opts o = {.n_ctx = 8, .n_batch = 4, .n_logits = 4, .kv_type = PL_TYPE_F16};
        pl_status s = fixture_model_open(&fm, be, path, &o);
        const int32_t ids[4] = {1, 5, 9, 15};
        if (!s) s = pl_model_forward(fm.m, fm.st, ids, 4, 0, true);
        float lg[4 * TINY_VOCAB];
        if (!s) s = pl_be_read(pl_state_logits(fm.st), 0, lg, sizeof lg);
        CHECK(s == PL_OK, "%s: %s", tiny[i].file, pl_last_error());
        bool finite = true;
        for (int k = 0; k < 4 * TINY_VOCAB; k++) finite &= isfinite(lg[k]) && lg[k] != 0;
        CHECK(s || finite, "%s: logits not finite", tiny[i].file);
        fixture_model_close(&fm);
    }
}

static void run_tests(void) {
    pl_gguf *src = NULL;
    pl_backend *be = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &src) == PL_OK, "%s",
          pl_last_error());
    CHECK(pl_cpu_new(1, &be) == PL_OK, "cpu");
    if (!src || !be) return;
    static const struct {
        edit_kind e;
        const char *name, *want;
    } cases[] = {
        {EDIT_ARCH, "arch", "unsupported architecture 'mamba9'"},
        {EDIT_DROP, "drop", "missing tensor blk.2.attn_k.weight"},
        {EDIT_SHAPE, "shape",
         "tensor blk.2.attn_k.weight has shape [32, 64, 1, 1], expected [64, 32]"},
        {EDIT_TYPE, "type", "blk.1.ffn_up.weight is stored as i32"},
        {EDIT_LAYERS, "layers", "4000 layers but only 48 tensors"},
        {EDIT_HEADS, "heads", "8 heads cannot share 3 kv heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = write_edited(src, cases[i].e, cases[i].name);
        check_library(be, p, cases[i].want);
        check_command(p, "--backend cpu", cases[i].want);
    }
    check_tiny(be);
    const char *good = test_shared("models/stories260K.gguf");
    check_command(good, "--ctx 2", "longer than the context of 2");
    /* webgpu without its library: one clear line, no fallback */
    setenv("POOLED_DAWN", "/nonexistent/libwebgpu_wrapper.so", 1);
    check_command(good, "--backend webgpu", "Dawn library");
    unsetenv("POOLED_DAWN");
    check_command(good, "--kv q4", "--kv");
    check_command("/nonexistent/model.gguf", "", "/nonexistent/model.gguf");
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    pl_gguf_free(src);
}
