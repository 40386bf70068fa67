/* quantize_test.c - pl_quantize_file reproduces llama-quantize's files byte for byte:
 *  - shared/fixtures/quant/base-f32.gguf -> q-T.gguf with --pure, for all 14 fixture types
 *    (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS TQ1_0 TQ2_0);
 *  - stories260K.gguf -> stories260K-Q8_0/-Q4_0.gguf with --pure --tensor-type ffn_down=f32.
 * The whole output file must equal llama.cpp's; when it does not, each tensor's type, shape
 * and bytes are compared to say where. Then the type choices without --pure (llama-quantize's
 * mixture rules as its source states them: no llama.cpp file made without --pure is in
 * shared/), thread-count independence, and the failures. */
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
    pl_quantize_params p = {.file_type = pl_quantize_file_type_from_name(type_name),
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
    pl_quantize_params p = {.file_type = 2 /* Q4_0 */, .note = count_note, .ctx = &n};
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
    pl_quantize_params p = {.file_type = 19 /* IQ2_XXS: not one we write */};
    CHECK(pl_quantize_file(in, out, &p) == PL_ERR_ARG && strstr(pl_last_error(), "file type"),
          "unwritable type: %s", pl_last_error());
    pl_quant_override ov = {"ffn_down", PL_TYPE_IQ2_XXS};
    p = (pl_quantize_params){.file_type = 7, .overrides = &ov, .n_overrides = 1};
    CHECK(pl_quantize_file(in, out, &p) == PL_ERR_ARG && strstr(pl_last_error(), "iq2_xxs"),
          "unwritable override: %s", pl_last_error());
    pl_quant_override bad = {"ffn_(down", PL_TYPE_F32};
    p = (pl_quantize_params){.file_type = 7, .overrides = &bad, .n_overrides = 1};
    CHECK(pl_quantize_file(in, out, &p) == PL_ERR_ARG && strstr(pl_last_error(), "pattern"),
          "bad pattern: %s", pl_last_error());
    p = (pl_quantize_params){.file_type = 7};
    CHECK(pl_quantize_file("/nonexistent/x.gguf", out, &p) != PL_OK, "missing input");
    snprintf(probe, sizeof probe, "%s", out);
    CHECK(access(probe, F_OK) != 0, "a failed run left %s behind", out);
    CHECK(pl_quantize_file(in, in, &p) == PL_ERR_ARG, "output over input: %s", pl_last_error());
    /* llama.cpp's LLAMA_FTYPE ids */
    static const struct {
        const char *name;
        int id;
    } ids[] = {{"F32", 0},     {"f16", 1},     {"Q4_0", 2},    {"Q4_1", 3},     {"Q8_0", 7},
               {"Q5_0", 8},    {"Q5_1", 9},    {"Q2_K", 10},   {"Q3_K_S", 11},  {"Q3_K_M", 12},
               {"Q3_K", 12},   {"Q3_K_L", 13}, {"Q4_K_S", 14}, {"Q4_K_M", 15},  {"q4_k", 15},
               {"Q5_K_S", 16}, {"Q5_K_M", 17}, {"Q6_K", 18},   {"IQ4_NL", 25},  {"IQ4_XS", 30},
               {"BF16", 32},   {"TQ1_0", 36},  {"TQ2_0", 37},  {"IQ2_XXS", -1}, {"q8_0_m", -1}};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        CHECK(pl_quantize_file_type_from_name(ids[i].name) == ids[i].id, "%s", ids[i].name);
}

/* Uniform values in [-0.5, 0.5) from a fixed seed (a plain LCG). */
static void fill_uniform(float *w, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

/* A random llama-shaped model of 8 layers (GQA 4: 8 heads, 2 KV heads), 256-wide matrices of
 * 16 rows, written to path. */
static void write_model8(const char *path) {
    static float w[256 * 16];
    fill_uniform(w, sizeof w / sizeof *w, 99);
    pl_gguf *g = pl_gguf_new();
    int64_t ne[2] = {256, 16};
    pl_status st = !g || pl_gguf_set_str(g, "general.architecture", "llama") ||
                   pl_gguf_set_u32(g, "llama.block_count", 8) ||
                   pl_gguf_set_u32(g, "llama.attention.head_count", 8) ||
                   pl_gguf_set_u32(g, "llama.attention.head_count_kv", 2) ||
                   pl_gguf_add_tensor(g, "token_embd.weight", PL_TYPE_F32, 2, ne, w) ||
                   pl_gguf_add_tensor(g, "output.weight", PL_TYPE_F32, 2, ne, w);
    static const char *per_layer[] = {"attn_q", "attn_v", "attn_output", "ffn_down", "ffn_up"};
    for (int l = 0; l < 8 && !st; l++)
        for (int k = 0; k < 5 && !st; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, per_layer[k]);
            st = pl_gguf_add_tensor(g, name, PL_TYPE_F32, 2, ne, w);
        }
    if (!st) st = pl_gguf_write_file(g, path);
    CHECK(st == PL_OK, "model8: %s", pl_last_error());
    pl_gguf_free(g);
}

/* Each letter is a layer 0..7: the type its tensor should get ('4' Q4_K, '6' Q6_K, '5' Q5_K,
 * '3' Q3_K). */
static void expect_layers(const pl_gguf *g, const char *ft, const char *tensor, const char *want) {
    for (int l = 0; l < 8; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, tensor);
        uint32_t t = type_of(g, name);
        uint32_t w = want[l] == '6'   ? PL_TYPE_Q6_K
                     : want[l] == '5' ? PL_TYPE_Q5_K
                     : want[l] == '4' ? PL_TYPE_Q4_K
                                      : PL_TYPE_Q3_K;
        CHECK(t == w, "%s: %s is type %u, expected %u", ft, name, t, w);
    }
}

/* llama-quantize's mixtures on the 8-layer model. more_bits(i, 8) holds for layers 0, 3, 6
 * and 7 (i < n/8, i >= 7n/8, (i - n/8) % 3 == 2). */
static void check_mixture_rules(void) {
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/m8.gguf", test_tmpdir());
    snprintf(out, sizeof out, "%s/m8q.gguf", test_tmpdir());
    write_model8(in);
    static const struct {
        const char *ft;
        const char *attn_v, *ffn_down, *attn_output, *attn_q; /* per layer */
        uint32_t output, token_embd;
    } cases[] = {
        /* Q4_K_M: attn_v and ffn_down of the more_bits layers in Q6_K */
        {"Q4_K_M", "64464466", "64464466", "44444444", "44444444", PL_TYPE_Q6_K, PL_TYPE_Q4_K},
        /* Q3_K_M: attn_v Q5_K for the first two, else Q4_K; ffn_down and attn_output Q4_K */
        {"Q3_K_M", "55444444", "44444444", "44444444", "33333333", PL_TYPE_Q6_K, PL_TYPE_Q3_K},
        /* Q2_K with GQA 4: attn_v Q4_K; ffn_down and attn_output Q3_K; the rest Q2_K */
        {"Q2_K", "44444444", "33333333", "33333333", NULL, PL_TYPE_Q6_K, PL_TYPE_Q2_K},
        /* Q4_K_S: attn_v Q5_K for the first four, ffn_down Q5_K for i < n/8 */
        {"Q4_K_S", "55554444", "54444444", "44444444", "44444444", PL_TYPE_Q6_K, PL_TYPE_Q4_K},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_quantize_params p = {.file_type = pl_quantize_file_type_from_name(cases[i].ft)};
        CHECK(pl_quantize_file(in, out, &p) == PL_OK, "%s: %s", cases[i].ft, pl_last_error());
        pl_gguf *g = NULL;
        if (pl_gguf_open(out, &g)) {
            CHECK(0, "%s", pl_last_error());
            continue;
        }
        expect_layers(g, cases[i].ft, "attn_v", cases[i].attn_v);
        expect_layers(g, cases[i].ft, "ffn_down", cases[i].ffn_down);
        expect_layers(g, cases[i].ft, "attn_output", cases[i].attn_output);
        if (cases[i].attn_q) expect_layers(g, cases[i].ft, "attn_q", cases[i].attn_q);
        CHECK(type_of(g, "output.weight") == cases[i].output, "%s output", cases[i].ft);
        CHECK(type_of(g, "token_embd.weight") == cases[i].token_embd, "%s token_embd", cases[i].ft);
        int64_t ft = -1;
        CHECK(pl_gguf_get_int(g, "general.file_type", &ft) &&
                  ft == pl_quantize_file_type_from_name(cases[i].ft),
              "%s: file_type %lld", cases[i].ft, (long long)ft);
        pl_gguf_free(g);
    }
    remove(in);
    remove(out);
}

/* Threads split the rows, so the bytes must not depend on their number: a random 512x1024
 * matrix (big enough to be split) in Q4_K and Q8_0 with 1 and with 5 threads. */
static void check_threads(void) {
    char in[512], a[512], b[512];
    snprintf(in, sizeof in, "%s/big.gguf", test_tmpdir());
    snprintf(a, sizeof a, "%s/t1.gguf", test_tmpdir());
    snprintf(b, sizeof b, "%s/t5.gguf", test_tmpdir());
    static float w[512 * 1024];
    fill_uniform(w, sizeof w / sizeof *w, 12345);
    pl_gguf *g = pl_gguf_new();
    int64_t ne[2] = {1024, 512};
    CHECK(g && !pl_gguf_set_str(g, "general.architecture", "llama") &&
              !pl_gguf_add_tensor(g, "blk.0.ffn_up.weight", PL_TYPE_F32, 2, ne, w) &&
              !pl_gguf_write_file(g, in),
          "%s", pl_last_error());
    pl_gguf_free(g);
    static const int file_types[] = {15 /* Q4_K_M */, 7 /* Q8_0 */};
    for (int i = 0; i < 2; i++) {
        pl_quantize_params p = {.file_type = file_types[i], .pure = true, .n_threads = 1};
        CHECK(pl_quantize_file(in, a, &p) == PL_OK, "%s", pl_last_error());
        p.n_threads = 5;
        CHECK(pl_quantize_file(in, b, &p) == PL_OK, "%s", pl_last_error());
        CHECK(same_bytes(a, b), "file type %d: 1 and 5 threads give different bytes",
              file_types[i]);
    }
    remove(in);
    remove(a);
    remove(b);
}

static void run_tests(void) {
    static const char *types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1",   "Q8_0",   "Q2_K",  "Q3_K",
                                  "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "fixtures/quant/q-%s.gguf", types[i]);
        expect_same("fixtures/quant/base-f32.gguf", ref, types[i], true, NULL, 0);
    }
    pl_quant_override down = {"ffn_down", PL_TYPE_F32};
    expect_same("models/stories260K.gguf", "models/stories260K-Q8_0.gguf", "Q8_0", true, &down, 1);
    expect_same("models/stories260K.gguf", "models/stories260K-Q4_0.gguf", "Q4_0", true, &down, 1);
    check_mixture();
    check_mixture_rules();
    check_errors();
    check_threads();
}
