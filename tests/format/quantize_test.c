/* quantize_test.c - pl_quantize_file reproduces llama-quantize's files byte for byte:
 *  - shared/fixtures/quant/base-f32.gguf -> q-T.gguf with --pure, for every type we write
 *    that has a fixture (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K);
 *  - stories260K.gguf -> stories260K-Q8_0/-Q4_0.gguf with --pure --tensor-type ffn_down=f32.
 * The whole output file must equal llama.cpp's; when it does not, each tensor's type, shape
 * and bytes are compared to say where. Then the type choices without --pure, and the
 * failures (unwritable type, bad pattern, missing input, output over input). */
#include "base/file_map.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/quantize.h"
#include "test.h"

static int same_bytes(const char *a, const char *b) {
    pl_file_map ma = {0}, mb = {0};
    int same = !pl_file_map_open(&ma, a) && !pl_file_map_open(&mb, b) && ma.size == mb.size &&
               !memcmp(ma.data, mb.data, ma.size);
    pl_file_map_close(&ma);
    pl_file_map_close(&mb);
    return same;
}

/* Say which tensors differ (only runs when the whole files differ). */
static void explain(const char *ours, const char *ref) {
    pl_gguf *a = NULL, *b = NULL;
    if (pl_gguf_open(ours, &a) || pl_gguf_open(ref, &b)) {
        CHECK(0, "cannot open %s / %s: %s", ours, ref, pl_last_error());
    } else {
        CHECK(pl_gguf_tensor_count(a) == pl_gguf_tensor_count(b), "%s: tensor count", ref);
        for (int64_t i = 0; i < pl_gguf_tensor_count(b); i++) {
            const pl_gguf_tensor *tb = pl_gguf_tensor_at(b, i);
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)tb->name.len, tb->name.ptr);
            const pl_gguf_tensor *ta = pl_gguf_find_tensor(a, name);
            CHECK(ta && ta->type == tb->type && !memcmp(ta->ne, tb->ne, sizeof ta->ne) &&
                      ta->nbytes == tb->nbytes && !memcmp(ta->data, tb->data, tb->nbytes),
                  "%s: tensor %s differs (type %d vs %u)", ref, name, ta ? (int)ta->type : -1,
                  tb->type);
        }
    }
    pl_gguf_free(a);
    pl_gguf_free(b);
}

static void expect_same(const char *in, const char *ref, const char *type_name, bool pure,
                        const pl_quant_override *ov, int n_ov) {
    char out[512];
    snprintf(out, sizeof out, "%s/q-%s.gguf", test_tmpdir(), type_name);
    pl_quantize_params p = {.type = (uint32_t)pl_quantize_type_from_name(type_name),
                            .overrides = ov,
                            .n_overrides = n_ov,
                            .pure = pure};
    pl_status st = pl_quantize_file(test_shared(in), out, &p);
    CHECK(st == PL_OK, "%s -> %s: %s", in, type_name, pl_last_error());
    if (st) return;
    int same = same_bytes(out, test_shared(ref));
    CHECK(same, "%s: our file differs from %s", type_name, ref);
    if (!same) explain(out, test_shared(ref));
    remove(out);
}

typedef struct {
    int n;
    char last[512];
} notes;

static void count_note(void *ctx, const char *line) {
    notes *n = ctx;
    n->n++;
    snprintf(n->last, sizeof n->last, "%s", line);
}

static uint32_t type_of(const pl_gguf *g, const char *name) {
    const pl_gguf_tensor *t = pl_gguf_find_tensor(g, name);
    return t ? t->type : 9999;
}

/* Without --pure: output.weight would be Q6_K, but its 64-value rows fall back to Q8_0;
 * ffn_down's 172-value rows fall back to F16 (each with a note); the rest is Q4_0. */
static void check_mixture(void) {
    char out[512];
    snprintf(out, sizeof out, "%s/mix.gguf", test_tmpdir());
    notes n = {0};
    pl_quantize_params p = {.type = PL_TYPE_Q4_0, .note = count_note, .ctx = &n};
    CHECK(pl_quantize_file(test_shared("models/stories260K.gguf"), out, &p) == PL_OK, "%s",
          pl_last_error());
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(out, &g) == PL_OK, "%s", pl_last_error());
    if (!g) return;
    CHECK(type_of(g, "output.weight") == PL_TYPE_Q8_0, "output.weight");
    CHECK(type_of(g, "token_embd.weight") == PL_TYPE_Q4_0, "token_embd.weight");
    CHECK(type_of(g, "blk.4.ffn_down.weight") == PL_TYPE_F16, "ffn_down");
    CHECK(type_of(g, "blk.4.ffn_norm.weight") == PL_TYPE_F32, "ffn_norm");
    CHECK(type_of(g, "blk.2.attn_v.weight") == PL_TYPE_Q4_0, "attn_v");
    CHECK(n.n == 6, "%d notes (1 output + 5 ffn_down expected), last: %s", n.n, n.last);
    int64_t ft = -1;
    CHECK(pl_gguf_get_int(g, "general.file_type", &ft) && ft == 2, "file_type %lld", (long long)ft);
    /* the F16 fallback holds the weights to f16 precision */
    pl_gguf *src = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &src) == PL_OK, "%s",
          pl_last_error());
    const pl_gguf_tensor *a = pl_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    const pl_gguf_tensor *b = src ? pl_gguf_find_tensor(src, "blk.0.ffn_down.weight") : NULL;
    if (a && b) {
        const uint16_t *h = a->data;
        const float *x = b->data;
        int bad = 0;
        for (int64_t i = 0; i < b->ne[0] * b->ne[1]; i++)
            bad += fabsf(pl_f16_to_f32(h[i]) - x[i]) > fabsf(x[i]) * (1.0f / 2048) + 6e-8f;
        CHECK(bad == 0, "%d ffn_down values off by more than f16 rounding", bad);
    }
    pl_gguf_free(src);
    pl_gguf_free(g);
    remove(out);
}

static void check_errors(void) {
    char out[512], probe[600];
    snprintf(out, sizeof out, "%s/err.gguf", test_tmpdir());
    const char *in = test_shared("models/stories260K.gguf");
    pl_quantize_params p = {.type = PL_TYPE_IQ2_XXS};
    CHECK(pl_quantize_file(in, out, &p) == PL_ERR_ARG && strstr(pl_last_error(), "iq2_xxs"),
          "unwritable type: %s", pl_last_error());
    pl_quant_override bad = {"ffn_(down", PL_TYPE_F32};
    p = (pl_quantize_params){.type = PL_TYPE_Q8_0, .overrides = &bad, .n_overrides = 1};
    CHECK(pl_quantize_file(in, out, &p) == PL_ERR_ARG && strstr(pl_last_error(), "pattern"),
          "bad pattern: %s", pl_last_error());
    p = (pl_quantize_params){.type = PL_TYPE_Q8_0};
    CHECK(pl_quantize_file("/nonexistent/x.gguf", out, &p) != PL_OK, "missing input");
    snprintf(probe, sizeof probe, "%s", out);
    CHECK(access(probe, F_OK) != 0, "a failed run left %s behind", out);
    CHECK(pl_quantize_file(in, in, &p) == PL_ERR_ARG, "output over input: %s", pl_last_error());
    CHECK(pl_quantize_type_from_name("Q4_K_M") == PL_TYPE_Q4_K, "Q4_K_M");
    CHECK(pl_quantize_type_from_name("q8_0_m") == -1, "q8_0_m");
    CHECK(pl_quantize_file_type(PL_TYPE_Q8_0) == 7 && pl_quantize_file_type(PL_TYPE_BF16) == 32,
          "file types");
}

static void run_tests(void) {
    static const char *types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "fixtures/quant/q-%s.gguf", types[i]);
        expect_same("fixtures/quant/base-f32.gguf", ref, types[i], true, NULL, 0);
    }
    pl_quant_override down = {"ffn_down", PL_TYPE_F32};
    expect_same("models/stories260K.gguf", "models/stories260K-Q8_0.gguf", "Q8_0", true, &down, 1);
    expect_same("models/stories260K.gguf", "models/stories260K-Q4_0.gguf", "Q4_0", true, &down, 1);
    check_mixture();
    check_errors();
}
