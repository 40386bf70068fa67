/* bad_model_test.c - broken models give one clear error, never a crash: an unknown
 * architecture, a missing tensor, a tensor of the wrong shape, an unreadable weight
 * format, absurd metadata. Each is a copy of stories260K with one thing changed, written
 * to the test's temporary folder, loaded through the library and run through `pooled run`
 * (non-zero exit, exactly one line on stderr); then the same for mixture-of-experts
 * mistakes in copies of the qwen3_moe fixture. A prompt longer than the context is the
 * last case. Tiny random models of each architecture (tiny_model.h) must load and give
 * finite logits; POOLED_WRITE_FUZZ_SEEDS=DIR also writes them as the model fuzzer's seeds. */
#include <sys/wait.h>

#include "cpu/cpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "test.h"

/* One broken copy of a model: at most one metadata edit and one tensor edit. */
typedef enum { T_NONE, T_DROP, T_SWAP, T_I32, T_NE2, T_COPY } tensor_edit;
typedef struct {
    const char *name;   /* the file's name and the case's */
    const char *key;    /* metadata key edited, or NULL */
    const char *str;    /* ... set to this string, or */
    int64_t val;        /* ... to this u32 (-1: the key is removed) */
    const char *tensor; /* tensor edited, or NULL */
    tensor_edit te;     /* dropped; rows and columns swapped; read as I32; its
                         * third dimension set to ne2 (the bytes cut to fit); or
                         * also copied under the name `to` */
    int64_t ne2;        /* T_NE2 */
    const char *to;     /* T_COPY */
    const char *want;   /* the error must contain this */
} bad_case;

/* Copy src into a new file with the case's edits; returns the path. */
static const char *write_edited(const pl_gguf *src, const bad_case *c) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s.gguf", test_tmpdir(), c->name);
    pl_gguf *g = pl_gguf_new();
    for (int64_t i = 0; i < pl_gguf_kv_count(src); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (c->key && !strcmp(key, c->key) && !c->str && c->val < 0) continue;
        pl_gguf_set_value(g, key, &kv->value);
    }
    if (c->key && c->str) pl_gguf_set_str(g, c->key, c->str);
    if (c->key && !c->str && c->val >= 0) pl_gguf_set_u32(g, c->key, (uint32_t)c->val);
    for (int64_t i = 0; i < pl_gguf_tensor_count(src); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(src, i);
        char tn[256];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint32_t type = t->type;
        int n_dims = t->n_dims;
        if (c->tensor && !strcmp(tn, c->tensor)) {
            if (c->te == T_DROP) continue;
            if (c->te == T_SWAP) { /* same bytes, rows and columns swapped */
                int64_t x = ne[0];
                ne[0] = ne[1];
                ne[1] = x;
            }
            /* same bytes read as I32: a format a weight can never be */
            if (c->te == T_I32) type = PL_TYPE_I32;
            if (c->te == T_NE2) ne[2] = c->ne2, n_dims = 3;
            if (c->te == T_COPY) pl_gguf_add_tensor(g, c->to, type, n_dims, ne, t->data);
        }
        pl_gguf_add_tensor(g, tn, type, n_dims, ne, t->data);
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

static void check_case(pl_backend *be, const pl_gguf *src, const bad_case *c) {
    const char *p = write_edited(src, c);
    check_library(be, p, c->want);
    check_command(p, "--backend cpu", c->want);
}

/* Mixture-of-experts files (copies of the qwen3_moe fixture): expert count or use count
 * against the tensors, a missing or misshaped expert tensor, an undeclared shared expert. */
static void check_moe(pl_backend *be) {
    pl_gguf *src = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf"), &src) == PL_OK,
          "%s", pl_last_error());
    if (!src) return;
    static const bad_case cases[] = {
        {"moe-count", "qwen3moe.expert_count", NULL, 9, NULL, T_NONE, 0, NULL,
         "tensor blk.0.ffn_gate_inp.weight has shape [64, 8, 1, 1], expected [64, 9]"},
        {"moe-no-count", "qwen3moe.expert_count", NULL, -1, NULL, T_NONE, 0, NULL,
         "missing metadata qwen3moe.expert_count"},
        {"moe-used-big", "qwen3moe.expert_used_count", NULL, 9, NULL, T_NONE, 0, NULL,
         "qwen3moe.expert_used_count = 9 is outside [1, 8]"},
        {"moe-used-0", "qwen3moe.expert_used_count", NULL, 0, NULL, T_NONE, 0, NULL,
         "qwen3moe.expert_used_count = 0 is outside [1, 8]"},
        {"moe-drop", NULL, NULL, 0, "blk.2.ffn_down_exps.weight", T_DROP, 0, NULL,
         "missing tensor blk.2.ffn_down_exps.weight"},
        {"moe-experts", NULL, NULL, 0, "blk.1.ffn_up_exps.weight", T_NE2, 7, NULL,
         "tensor blk.1.ffn_up_exps.weight has shape [64, 64, 7, 1], expected [64, 64, 8]"},
        {"moe-shexp", NULL, NULL, 0, "blk.0.ffn_up_exps.weight", T_COPY, 0,
         "blk.0.ffn_gate_shexp.weight",
         "blk.0 has a shared expert, but qwen3moe.expert_shared_feed_forward_length is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(be, src, &cases[i]);
    pl_gguf_free(src);
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
        {"qwen3moe", "tiny-qwen3moe.gguf", 2, PL_TYPE_F32},
        {"qwen3moe", "tiny-qwen3moe-f16.gguf", 1, PL_TYPE_F16},
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
    static const bad_case cases[] = {
        {"arch", "general.architecture", "mamba9", 0, NULL, T_NONE, 0, NULL,
         "unsupported architecture 'mamba9'"},
        {"drop", NULL, NULL, 0, "blk.2.attn_k.weight", T_DROP, 0, NULL,
         "missing tensor blk.2.attn_k.weight"},
        {"shape", NULL, NULL, 0, "blk.2.attn_k.weight", T_SWAP, 0, NULL,
         "tensor blk.2.attn_k.weight has shape [32, 64, 1, 1], expected [64, 32]"},
        {"type", NULL, NULL, 0, "blk.1.ffn_up.weight", T_I32, 0, NULL,
         "blk.1.ffn_up.weight is stored as i32"},
        {"layers", "llama.block_count", NULL, 4000, NULL, T_NONE, 0, NULL,
         "4000 layers but only 48 tensors"},
        {"heads", "llama.attention.head_count_kv", NULL, 3, NULL, T_NONE, 0, NULL,
         "8 heads cannot share 3 kv heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(be, src, &cases[i]);
    pl_gguf_free(src);
    check_moe(be);
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
}
