/* bad_hybrid_test.c - broken qwen35 (hybrid Gated DeltaNet) files give one clear error,
 * never a crash: missing or misshaped tensors, a full-attention interval that does not fit
 * the layers, value heads that do not tile the key heads, an inner size that is not whole
 * value heads, a conv kernel out of range, an MTP block as large as the model, experts
 * that do not match the metadata (qwen35moe). Each is a copy of a qwen3_5(_moe) fixture with one
 * thing changed, written to the test's temporary folder, loaded through the library and run through
 * `pooled run` (non-zero exit, exactly one line on stderr), as bad_model_test.c does for llama. */
#include "cpu/cpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "model/tiny_hybrid.h"
#include "test.h"

typedef struct {
    const char *name;
    const char *key; /* metadata to set (u32), or NULL */
    uint32_t value;
    const char *drop; /* tensor to leave out, or NULL */
    const char *swap; /* tensor whose two dimensions are swapped, or NULL */
    int file;         /* edit the plain file (0), the -mtp- one (1), the qwen35moe one (2) */
    const char *want; /* in the error line */
} edit;

static const edit edits[] = {
    {"drop-ssm-a", NULL, 0, "blk.1.ssm_a", NULL, 0, "missing tensor blk.1.ssm_a"},
    {"drop-q", NULL, 0, "blk.3.attn_q.weight", NULL, 0, "missing tensor blk.3.attn_q.weight"},
    {"shape-qkv", NULL, 0, NULL, "blk.0.attn_qkv.weight", 0,
     "tensor blk.0.attn_qkv.weight has shape [256, 64, 1, 1], expected [64, 256]"},
    {"shape-conv", NULL, 0, NULL, "blk.2.ssm_conv1d.weight", 0,
     "tensor blk.2.ssm_conv1d.weight has shape [256, 4, 1, 1], expected [4, 256]"},
    {"interval-0", "qwen35.full_attention_interval", 0, NULL, NULL, 0,
     "qwen35.full_attention_interval = 0 is outside [1, 4096]"},
    {"interval-9", "qwen35.full_attention_interval", 9, NULL, NULL, 0,
     "full_attention_interval 9 leaves no full-attention layer among 8"},
    {"layers-3", "qwen35.block_count", 3, NULL, NULL, 0,
     "full_attention_interval 4 leaves no full-attention layer among 3"},
    /* every 3rd layer full: blk.2 has DeltaNet tensors, not attention ones */
    {"interval-3", "qwen35.full_attention_interval", 3, NULL, NULL, 0,
     "missing tensor blk.2.attn_q.weight"},
    {"heads", "qwen35.ssm.time_step_rank", 3, NULL, NULL, 0,
     "3 linear-attention value heads cannot share 2 key heads"},
    {"inner", "qwen35.ssm.inner_size", 130, NULL, NULL, 0,
     "ssm.inner_size 130 is not 4 value heads"},
    {"inner-96", "qwen35.ssm.inner_size", 96, NULL, NULL, 0,
     "tensor blk.0.attn_qkv.weight has shape [64, 256, 1, 1], expected [64, 224]"},
    {"kernel-1", "qwen35.ssm.conv_kernel", 1, NULL, NULL, 0,
     "qwen35.ssm.conv_kernel = 1 is outside [2, 16]"},
    {"kernel-17", "qwen35.ssm.conv_kernel", 17, NULL, NULL, 0,
     "qwen35.ssm.conv_kernel = 17 is outside [2, 16]"},
    {"kernel-5", "qwen35.ssm.conv_kernel", 5, NULL, NULL, 0,
     "tensor blk.0.ssm_conv1d.weight has shape [4, 256, 1, 1], expected [5, 256]"},
    {"value-length", "qwen35.attention.value_length", 16, NULL, NULL, 0,
     "key length 32 and value length 16 differ"},
    {"nextn-8", "qwen35.nextn_predict_layers", 8, NULL, NULL, 0,
     "8 prediction layers leave none of the 8 blocks"},
    {"mtp-drop", NULL, 0, "blk.8.nextn.eh_proj.weight", NULL, 1,
     "missing tensor blk.8.nextn.eh_proj.weight"},
    /* without the key the MTP block is a 9th layer, a DeltaNet one by the interval */
    {"mtp-none", "qwen35.nextn_predict_layers", 0, NULL, NULL, 1,
     "missing tensor blk.8.attn_qkv.weight"},
    /* qwen35moe: the experts as the metadata declares them */
    {"moe-experts", "qwen35moe.expert_count", 4, NULL, NULL, 2,
     "tensor blk.0.ffn_gate_inp.weight has shape [64, 8, 1, 1], expected [64, 4]"},
    {"moe-drop", NULL, 0, "blk.5.ffn_down_exps.weight", NULL, 2,
     "missing tensor blk.5.ffn_down_exps.weight"},
    {"moe-interval", "qwen35moe.full_attention_interval", 0, NULL, NULL, 2,
     "qwen35moe.full_attention_interval = 0 is outside [1, 4096]"},
};

static const char *write_edited(const pl_gguf *src, const edit *e) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), e->name);
    pl_gguf *g = fixture_gguf_copy_kv(src);
    if (e->key) pl_gguf_set_u32(g, e->key, e->value);
    for (int64_t i = 0; i < pl_gguf_tensor_count(src); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(src, i);
        char tn[256];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (e->drop && !strcmp(tn, e->drop)) continue;
        if (e->swap && !strcmp(tn, e->swap)) { /* same bytes, rows and columns swapped */
            int64_t x = ne[0];
            ne[0] = ne[1];
            ne[1] = x;
        }
        pl_gguf_add_tensor(g, tn, t->type, t->n_dims, ne, t->data);
    }
    CHECK(pl_gguf_write_file(g, path) == PL_OK, "%s", pl_last_error());
    pl_gguf_free(g);
    return path;
}

/* Tiny qwen35 models (F32, F16, and with an MTP block) load and give finite logits, the
 * MTP one the plain one's exactly; POOLED_WRITE_FUZZ_SEEDS=DIR also writes them as the
 * model fuzzer's seeds. */
static void check_tiny(pl_backend *be) {
    static const struct {
        const char *file;
        int nextn;
        uint32_t type;
    } tiny[] = {{"tiny-qwen35.gguf", 0, PL_TYPE_F32},
                {"tiny-qwen35-f16.gguf", 0, PL_TYPE_F16},
                {"tiny-qwen35-mtp.gguf", 1, PL_TYPE_F32}};
    const char *seeds = getenv("POOLED_WRITE_FUZZ_SEEDS");
    float first[4 * TINY_VOCAB];
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", seeds && *seeds ? seeds : test_tmpdir(), tiny[i].file);
        CHECK(tiny_hybrid_write(path, 2, tiny[i].nextn, tiny[i].type) == 0, "%s", path);
        fixture_model fm;
        pl_state_opts o = {.n_ctx = 8, .n_batch = 4, .n_logits = 4, .kv_type = PL_TYPE_F32};
        pl_status s = fixture_model_open(&fm, be, path, &o);
        const int32_t ids[4] = {1, 5, 9, 15};
        float lg[4 * TINY_VOCAB];
        if (!s) s = pl_model_forward(fm.m, fm.st, ids, 4, 0, true);
        if (!s) s = pl_be_read(pl_state_logits(fm.st), 0, lg, sizeof lg);
        CHECK(s == PL_OK, "%s: %s", tiny[i].file, pl_last_error());
        bool finite = true;
        for (int k = 0; k < 4 * TINY_VOCAB; k++) finite &= isfinite(lg[k]) && lg[k] != 0;
        CHECK(s || finite, "%s: logits not finite", tiny[i].file);
        if (i == 0) memcpy(first, lg, sizeof lg);
        if (tiny[i].nextn)
            CHECK(s || !memcmp(first, lg, sizeof lg), "%s: logits differ without the MTP block",
                  tiny[i].file);
        fixture_model_close(&fm);
    }
}

static void run_tests(void) {
    pl_gguf *src[3] = {NULL, NULL, NULL};
    pl_backend *be = NULL;
    const char *files[3] = {"fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf",
                            "fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf",
                            "fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf"};
    for (int i = 0; i < 3; i++)
        CHECK(pl_gguf_open(test_shared(files[i]), &src[i]) == PL_OK, "%s", pl_last_error());
    CHECK(pl_cpu_new(1, &be) == PL_OK, "cpu");
    if (!src[0] || !src[1] || !src[2] || !be) return;
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const edit *e = &edits[i];
        const char *p = write_edited(src[e->file], e);
        pl_gguf *g = NULL;
        pl_model *m = NULL;
        pl_status s = pl_gguf_open(p, &g);
        CHECK(s == PL_OK, "%s", pl_last_error());
        if (!s) s = pl_model_load(g, be, NULL, &m);
        CHECK(s != PL_OK && strstr(pl_last_error(), e->want) && !strchr(pl_last_error(), '\n'),
              "%s: want an error with '%s', got '%s'", e->name, e->want,
              s ? pl_last_error() : "success");
        pl_model_free(m);
        pl_gguf_free(g);
        char args[1024];
        snprintf(args, sizeof args, "run -m '%s' --prompt-ids '1 2 3' -n 2 --temp 0 --backend cpu",
                 p);
        check_command_fails(args, e->want);
    }
    check_tiny(be);
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    for (int i = 0; i < 3; i++) pl_gguf_free(src[i]);
}
