/* synth_test.c - synthetic GGUFs have the shapes the references say.
 *
 *  - Against llama.cpp's converter: for the llama, qwen2 and qwen3 fixtures of
 *    shared/fixtures/hf, a configuration read from the fixture's config.json, planned with
 *    the fixture's own tokenizer and type q8_0, gives exactly the converted GGUF's metadata
 *    (every key and value but the name) and tensor table (names, order, shapes, types).
 *  - Against the published configs: each preset's key shapes and parameter count.
 *  - Written files: parse back, hold the values pl_synth_values describes (converted to the
 *    tensor's type), are the same bytes for the same seed whatever the thread count, and
 *    run through the CPU model to finite logits. */
#include "cpu/cpu.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "model/model.h"
#include "synth/synth.h"
#include "test.h"

/* ---- config.json: top-level numbers and booleans, by key ---- */

static double config_num(const char *json, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

static bool config_true(const char *json, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": true", key);
    return strstr(json, pat) != NULL;
}

static bool same_value(const pl_gguf_value *a, const pl_gguf_value *b) {
    if (a->type != b->type) return false;
    if (a->type == PL_GGUF_STRING)
        return a->str.len == b->str.len && !memcmp(a->str.ptr, b->str.ptr, a->str.len);
    if (a->type == PL_GGUF_FLOAT32 || a->type == PL_GGUF_FLOAT64) return a->f == b->f;
    if (a->type != PL_GGUF_ARRAY) return a->u == b->u;
    if (a->arr.elem_type != b->arr.elem_type || a->arr.count != b->arr.count) return false;
    for (uint64_t i = 0; i < a->arr.count; i++) {
        pl_gguf_value x, y;
        pl_gguf_arr_at(a, i, &x);
        pl_gguf_arr_at(b, i, &y);
        if (!same_value(&x, &y)) return false;
    }
    return true;
}

/* The n-th integer of the JSON array after "key": [ (0 when there is none). */
static int config_arr(const char *json, const char *key, int n) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": [", key);
    const char *p = strstr(json, pat);
    if (!p) return 0;
    p += strlen(pat);
    for (int i = 0; i < n; i++) {
        p = strchr(p, ',');
        if (!p) return 0;
        p++;
    }
    return (int)strtol(p, NULL, 10);
}

/* layer_types: how many layers up to and with the first full_attention one */
static int config_interval(const char *json) {
    const char *p = strstr(json, "\"layer_types\"");
    const char *full = p ? strstr(p, "\"full_attention\"") : NULL;
    int n = 1;
    for (const char *q = p; q && full && (q = strstr(q, "\"linear_attention\"")) && q < full; q++)
        n++;
    return full ? n : 0;
}

static int config_int(const char *json, const char *key) {
    double v = config_num(json, key);
    return v > 0 ? (int)v : 0;
}

/* A configuration from a fixture's config.json (NULL on failure). */
static char *read_config(const char *dir, const char *arch, pl_synth_config *c) {
    char path[256];
    snprintf(path, sizeof path, "fixtures/hf/%s/config.json", dir);
    char *json = NULL;
    size_t len;
    CHECK(pl_file_read_all(test_shared(path), &json, &len) == PL_OK, "%s", pl_last_error());
    if (!json) return NULL;
    *c = (pl_synth_config){.preset = dir, .arch = arch, .name = "x", .size_label = "x"};
    c->n_layer = (int)config_num(json, "num_hidden_layers");
    c->n_embd = (int)config_num(json, "hidden_size");
    c->n_ff = config_int(json, "intermediate_size");
    c->n_head = (int)config_num(json, "num_attention_heads");
    c->n_head_kv = (int)config_num(json, "num_key_value_heads");
    c->head_dim = config_num(json, "head_dim") > 0 ? (int)config_num(json, "head_dim")
                                                   : c->n_embd / c->n_head;
    c->n_vocab = (int)config_num(json, "vocab_size");
    c->n_ctx = (int)config_num(json, "max_position_embeddings");
    c->rope_theta = (float)config_num(json, "rope_theta");
    c->rms_eps = (float)config_num(json, "rms_norm_eps");
    c->tied = config_true(json, "tie_word_embeddings");
    /* mixture of experts (qwen3_moe says num_local_experts, qwen3_5_moe num_experts) */
    c->n_expert = config_int(json, "num_experts") + config_int(json, "num_local_experts");
    c->n_expert_used = config_int(json, "num_experts_per_tok");
    c->n_ff_exp = config_int(json, "moe_intermediate_size");
    c->n_ff_shexp = config_int(json, "shared_expert_intermediate_size");
    /* hybrid */
    c->full_attn_interval = config_interval(json);
    double partial = config_num(json, "partial_rotary_factor");
    c->rope_dims = partial > 0 ? (int)(partial * c->head_dim) : 0;
    for (int i = 0; i < 3; i++) c->rope_sections[i] = config_arr(json, "mrope_section", i);
    c->ssm_conv = config_int(json, "linear_conv_kernel_dim");
    c->ssm_k_heads = config_int(json, "linear_num_key_heads");
    c->ssm_v_heads = config_int(json, "linear_num_value_heads");
    c->ssm_k_dim = config_int(json, "linear_key_head_dim");
    c->ssm_v_dim = config_int(json, "linear_value_head_dim");
    return json;
}

static void against_converter(const char *dir, const char *arch) {
    pl_synth_config c;
    char *json = read_config(dir, arch, &c);
    if (!json) return;
    free(json);
    char path[256];
    snprintf(path, sizeof path, "fixtures/hf/%s/%s-q8_0.gguf", dir, dir);
    pl_gguf *ref = NULL;
    CHECK(pl_gguf_open(test_shared(path), &ref) == PL_OK, "%s", pl_last_error());
    if (!ref) return;

    pl_synth_opts o = {PL_TYPE_Q8_0, ref, NULL, NULL};
    pl_gguf *plan = NULL;
    pl_status st = pl_synth_plan(&c, &o, &plan);
    CHECK(st == PL_OK, "%s: %s", dir, pl_last_error());
    if (st) goto done;
    /* metadata: same keys in the same order, same values, but the model's name */
    CHECK(pl_gguf_kv_count(plan) == pl_gguf_kv_count(ref), "%s: %lld keys, converter wrote %lld",
          dir, (long long)pl_gguf_kv_count(plan), (long long)pl_gguf_kv_count(ref));
    for (int64_t i = 0; i < pl_gguf_kv_count(ref) && i < pl_gguf_kv_count(plan); i++) {
        const pl_gguf_kv *a = pl_gguf_kv_at(plan, i), *b = pl_gguf_kv_at(ref, i);
        bool same_key = a->key.len == b->key.len && !memcmp(a->key.ptr, b->key.ptr, a->key.len);
        CHECK(same_key, "%s: key %lld is %.*s, converter wrote %.*s", dir, (long long)i,
              (int)a->key.len, a->key.ptr, (int)b->key.len, b->key.ptr);
        if (!same_key || pl_gguf_str_eq(b->key, "general.name") ||
            pl_gguf_str_eq(b->key, "general.size_label"))
            continue;
        CHECK(same_value(&a->value, &b->value), "%s: value of %.*s differs", dir, (int)b->key.len,
              b->key.ptr);
    }
    /* tensors: same names, order, shapes and types */
    CHECK(pl_gguf_tensor_count(plan) == pl_gguf_tensor_count(ref),
          "%s: %lld tensors, converter %lld", dir, (long long)pl_gguf_tensor_count(plan),
          (long long)pl_gguf_tensor_count(ref));
    for (int64_t i = 0; i < pl_gguf_tensor_count(ref) && i < pl_gguf_tensor_count(plan); i++) {
        const pl_gguf_tensor *a = pl_gguf_tensor_at(plan, i), *b = pl_gguf_tensor_at(ref, i);
        CHECK(a->name.len == b->name.len && !memcmp(a->name.ptr, b->name.ptr, a->name.len) &&
                  a->n_dims == b->n_dims && !memcmp(a->ne, b->ne, sizeof a->ne) &&
                  a->type == b->type,
              "%s: tensor %lld is %.*s %s [%lld,%lld,%lld], converter wrote %.*s %s "
              "[%lld,%lld,%lld]",
              dir, (long long)i, (int)a->name.len, a->name.ptr, pl_type_get(a->type)->name,
              (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[2], (int)b->name.len,
              b->name.ptr, pl_type_get(b->type)->name, (long long)b->ne[0], (long long)b->ne[1],
              (long long)b->ne[2]);
    }
done:
    pl_gguf_free(plan);
    pl_gguf_free(ref);
}

/* ---- presets against the published configs ---- */

static int64_t params_of(const pl_gguf *g) {
    int64_t n = 0;
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

static bool shape_is(const pl_gguf *g, const char *name, int64_t ne0, int64_t ne1) {
    const pl_gguf_tensor *t = pl_gguf_find_tensor(g, name);
    return t && t->ne[0] == ne0 && t->ne[1] == ne1;
}

static pl_gguf *plan_preset(const char *name, uint32_t type) {
    const pl_synth_config *c = pl_synth_preset(NULL, name);
    CHECK(c != NULL, "no preset %s", name);
    if (!c) return NULL;
    pl_synth_opts o = {type, NULL, NULL, NULL};
    pl_gguf *g = NULL;
    CHECK(pl_synth_plan(c, &o, &g) == PL_OK, "%s: %s", name, pl_last_error());
    return g;
}

static void presets(void) {
    /* Qwen/Qwen3-8B config.json: hidden 4096, 36 layers, 32 heads, 8 kv heads, head_dim 128,
     * intermediate 12288, vocab 151936, untied; the model card says 8.2B parameters. */
    pl_gguf *g = plan_preset("qwen3-8b", PL_TYPE_Q4_0);
    if (g) {
        CHECK(pl_gguf_tensor_count(g) == 3 + 36 * 11, "qwen3-8b tensors %lld",
              (long long)pl_gguf_tensor_count(g));
        CHECK(shape_is(g, "token_embd.weight", 4096, 151936) &&
                  shape_is(g, "output.weight", 4096, 151936),
              "qwen3-8b embeddings");
        CHECK(shape_is(g, "blk.35.attn_q.weight", 4096, 32 * 128) &&
                  shape_is(g, "blk.35.attn_k.weight", 4096, 8 * 128) &&
                  shape_is(g, "blk.35.attn_v.weight", 4096, 8 * 128) &&
                  shape_is(g, "blk.35.attn_output.weight", 32 * 128, 4096) &&
                  shape_is(g, "blk.35.ffn_gate.weight", 4096, 12288) &&
                  shape_is(g, "blk.35.ffn_down.weight", 12288, 4096) &&
                  shape_is(g, "blk.35.attn_q_norm.weight", 128, 1) &&
                  shape_is(g, "blk.35.attn_k_norm.weight", 128, 1),
              "qwen3-8b layer shapes");
        CHECK(!pl_gguf_find_tensor(g, "blk.36.attn_q.weight"), "qwen3-8b has 36 layers");
        int64_t p = params_of(g);
        CHECK(p > 8150000000 && p < 8250000000, "qwen3-8b has %lld parameters, not 8.2B",
              (long long)p);
        CHECK(pl_gguf_find_tensor(g, "blk.0.ffn_down.weight")->type == PL_TYPE_Q4_0 &&
                  pl_gguf_find_tensor(g, "blk.0.attn_norm.weight")->type == PL_TYPE_F32,
              "qwen3-8b types");
        pl_gguf_free(g);
    }
    /* Qwen/Qwen3-0.6B: hidden 1024, 28 layers, 16/8 heads, head_dim 128 (so attn_q is
     * 1024 -> 2048), intermediate 3072, tied; the model card says 0.6B parameters. */
    if ((g = plan_preset("qwen3-0.6b", PL_TYPE_F16))) {
        CHECK(!pl_gguf_find_tensor(g, "output.weight"), "qwen3-0.6b is tied");
        CHECK(shape_is(g, "blk.27.attn_q.weight", 1024, 2048) &&
                  shape_is(g, "blk.27.attn_output.weight", 2048, 1024) &&
                  shape_is(g, "blk.27.ffn_up.weight", 1024, 3072),
              "qwen3-0.6b layer shapes");
        int64_t p = params_of(g);
        CHECK(p > 590000000 && p < 610000000, "qwen3-0.6b has %lld parameters", (long long)p);
        pl_gguf_free(g);
    }
    /* meta-llama/Llama-3.2-1B: hidden 2048, 16 layers, 32/8 heads, head_dim 64,
     * intermediate 8192, vocab 128256, tied, rope_scaling llama3 factor 32 (low 1, high 4,
     * original context 8192): 1.24B parameters (1235814400) plus 32 rope factors. */
    if ((g = plan_preset("llama3.2-1b", PL_TYPE_Q8_0))) {
        CHECK(params_of(g) == 1235814400 + 32, "llama3.2-1b has %lld parameters",
              (long long)params_of(g));
        CHECK(shape_is(g, "rope_freqs.weight", 32, 1), "llama3.2-1b rope_freqs [head_dim/2]");
        CHECK(shape_is(g, "blk.15.attn_k.weight", 2048, 512), "llama3.2-1b attn_k");
        const pl_synth_config *c = pl_synth_preset("llama", "llama3.2-1b");
        float f[32];
        pl_synth_values(g, c, 1, "rope_freqs.weight", 0, 1, f);
        /* high frequencies are untouched, the lowest are divided by the factor (32), and
         * the factors grow in between */
        bool mono = true;
        for (int i = 1; i < 32; i++) mono &= f[i] >= f[i - 1];
        CHECK(f[0] == 1.0f && f[31] == 32.0f && mono, "rope factors %g .. %g", f[0], f[31]);
        pl_gguf_free(g);
    }
    /* HuggingFaceTB/SmolLM2-135M: 134515008 parameters (hidden 576, 30 layers, 9/3 heads,
     * intermediate 1536, vocab 49152, tied). With q4_k (256-value blocks) the 576-wide rows
     * cannot be stored: those matrices fall back to f16, the 1536-wide ffn_down stays q4_k. */
    if ((g = plan_preset("smollm2-135m", PL_TYPE_Q4_K))) {
        CHECK(params_of(g) == 134515008, "smollm2-135m has %lld parameters",
              (long long)params_of(g));
        CHECK(pl_gguf_find_tensor(g, "blk.0.ffn_down.weight")->type == PL_TYPE_Q4_K &&
                  pl_gguf_find_tensor(g, "blk.0.ffn_up.weight")->type == PL_TYPE_F16,
              "smollm2-135m q4_k fallback");
        pl_gguf_free(g);
    }
    /* Qwen/Qwen2.5-0.5B: biases on q/k/v; 494032768 parameters (0.49B). */
    if ((g = plan_preset("qwen2.5-0.5b", PL_TYPE_F16))) {
        CHECK(shape_is(g, "blk.0.attn_q.bias", 896, 1) && shape_is(g, "blk.0.attn_k.bias", 128, 1),
              "qwen2.5 biases");
        CHECK(params_of(g) == 494032768, "qwen2.5-0.5b has %lld parameters",
              (long long)params_of(g));
        pl_gguf_free(g);
    }
    /* The MoE and hybrid presets at full size (shapes per layer: tests/e2e/synth_test.sh).
     * Qwen/Qwen3-30B-A3B: 30.53B parameters (transformers' count of the checkpoint). The
     * Qwen3.5 checkpoints also hold a vision tower and an MTP layer, which synth leaves out;
     * the issue gives llama.cpp's own Q4_0 random-weight files of these shapes: 27B 15.1 GB,
     * 35B-A3B 19.6 GB. */
    struct {
        const char *name;
        int64_t tensors, p_lo, p_hi;
        double gb;
    } big[] = {{"qwen3-30b-a3b", 3 + 48 * 12, 30525000000, 30535000000, 0},
               {"qwen3.5-27b", 2 + 1 + 48 * 14 + 16 * 11, 26500000000, 27500000000, 15.1},
               {"qwen3.5-35b-a3b", 2 + 1 + 30 * 19 + 10 * 16, 34000000000, 35500000000, 19.6}};
    for (int i = 0; i < 3; i++) {
        if (!(g = plan_preset(big[i].name, PL_TYPE_Q4_0))) continue;
        int64_t p = params_of(g);
        uint64_t bytes = 0;
        for (int64_t k = 0; k < pl_gguf_tensor_count(g); k++)
            bytes += pl_gguf_tensor_at(g, k)->nbytes;
        CHECK(pl_gguf_tensor_count(g) == big[i].tensors, "%s: %lld tensors", big[i].name,
              (long long)pl_gguf_tensor_count(g));
        CHECK(p >= big[i].p_lo && p <= big[i].p_hi, "%s: %lld parameters", big[i].name,
              (long long)p);
        CHECK(!big[i].gb || fabs((double)bytes / 1e9 - big[i].gb) < 0.06, "%s: %.3f GB at q4_0",
              big[i].name, (double)bytes / 1e9);
        pl_gguf_free(g);
    }
    for (int i = 0; pl_synth_preset_at(i); i++) {
        const pl_synth_config *c = pl_synth_preset_at(i);
        CHECK(pl_synth_preset(c->arch, c->preset) == c, "preset lookup %s", c->preset);
    }
    CHECK(!pl_synth_preset("llama", "qwen3-8b"), "arch must match");
}

/* ---- written files ---- */

/* A preset shrunk to a few hundred thousand weights (architecture, RoPE scaling and tying
 * kept), for files the tests can afford to write. */
static pl_synth_config small(const char *preset) {
    pl_synth_config c = *pl_synth_preset(NULL, preset);
    c.n_layer = 2;
    c.n_embd = 64;
    c.n_ff = 128;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.head_dim = 16;
    c.n_vocab = 320;
    return c;
}

static uint8_t *slurp(const char *path, size_t *n) {
    char *b = NULL;
    return pl_file_read_all(path, &b, n) ? NULL : (uint8_t *)b;
}

/* Write c's plan of type `type` with 1 and 3 threads: the same bytes; every tensor's last
 * row holds the values pl_synth_values describes, converted to its type, within the
 * ranges of their kind. */
static void write_and_check(const pl_synth_config *c, uint32_t type, const char *a, const char *b) {
    pl_synth_opts o = {type, NULL, NULL, NULL};
    pl_gguf *plan = NULL;
    if (pl_synth_plan(c, &o, &plan)) {
        CHECK(0, "%s", pl_last_error());
        return;
    }
    const char *tn = pl_type_get(type)->name;
    CHECK(pl_synth_write(plan, c, 7, 1, a, NULL, NULL) == PL_OK, "%s: %s", tn, pl_last_error());
    CHECK(pl_synth_write(plan, c, 7, 3, b, NULL, NULL) == PL_OK, "%s: %s", tn, pl_last_error());
    size_t na, nb;
    uint8_t *da = slurp(a, &na), *db = slurp(b, &nb);
    CHECK(da && db && na == nb && !memcmp(da, db, na), "%s %s: 1 and 3 threads differ", c->arch,
          tn);
    free(db);

    pl_gguf *g = NULL;
    CHECK(da && pl_gguf_parse(da, na, &g) == PL_OK, "%s: written file: %s", tn, pl_last_error());
    for (int64_t i = 0; g && i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        /* the last row (of the last expert for 3-D tensors) */
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3], n0 = t->ne[0];
        int64_t r = rows - 1;
        float *v = malloc((size_t)n0 * 4);
        uint8_t *q = malloc((size_t)pl_row_size(t->type, n0));
        pl_synth_values(plan, c, 7, name, r, 1, v);
        pl_quant_row(t->type, v, q, n0);
        size_t rb = (size_t)pl_row_size(t->type, n0);
        CHECK(!memcmp(q, (const uint8_t *)t->data + (size_t)r * rb, rb), "%s: %s row %lld", tn,
              name, (long long)r);
        /* ranges: norms near 1, biases small, the DeltaNet's ssm_a -exp(+-0.5), matrices
         * within +-0.87/sqrt(row) */
        bool norm = strstr(name, "norm") != NULL, bias = strstr(name, ".bias") != NULL;
        size_t nl = strlen(name);
        bool ssm_a = nl > 6 && !strcmp(name + nl - 6, ".ssm_a"), ok = true;
        float lim = norm ? 0.05f : bias ? 0.02f : 0.87f / sqrtf((float)n0);
        for (int64_t k = 0; k < n0; k++) {
            if (ssm_a)
                ok &= v[k] <= -0.6f && v[k] >= -1.65f;
            else
                ok &= fabsf(v[k] - (norm ? 1.0f : 0.0f)) <= lim;
        }
        CHECK(ok, "%s: values of %s out of range", tn, name);
        free(v);
        free(q);
    }
    pl_gguf_free(g);
    free(da);
    pl_gguf_free(plan);
}

static void written(void) {
    pl_synth_config c = small("qwen3-0.6b");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.gguf", test_tmpdir());
    snprintf(b, sizeof b, "%s/b.gguf", test_tmpdir());
    uint32_t types[] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_Q8_0, PL_TYPE_Q4_0};
    for (int ti = 0; ti < 4; ti++) write_and_check(&c, types[ti], a, b);
    /* the hybrid MoE (3-D expert tensors, F32 conv and routers) and the qwen3 MoE, at the
     * fixtures' sizes */
    const char *dirs[][2] = {{"qwen3_5_moe", "qwen35moe"}, {"qwen3_moe", "qwen3moe"}};
    for (int i = 0; i < 2; i++) {
        char *json = read_config(dirs[i][0], dirs[i][1], &c);
        free(json);
        if (json) write_and_check(&c, i ? PL_TYPE_Q4_0 : PL_TYPE_Q8_0, a, b);
    }
    /* a different seed gives different weights */
    pl_synth_opts o = {PL_TYPE_F16, NULL, NULL, NULL};
    pl_gguf *plan = NULL;
    if (!pl_synth_plan(&c, &o, &plan)) {
        pl_synth_write(plan, &c, 1, 2, a, NULL, NULL);
        pl_synth_write(plan, &c, 2, 2, b, NULL, NULL);
        size_t na, nb;
        uint8_t *da = slurp(a, &na), *db = slurp(b, &nb);
        CHECK(da && db && na == nb && memcmp(da, db, na), "seeds 1 and 2 give the same file");
        free(da);
        free(db);
        pl_gguf_free(plan);
    }
    remove(a);
    remove(b);
}

/* Each architecture's synthetic model loads in our model code and gives finite logits. */
static void runs(void) {
    const char *names[] = {"smollm2-135m", "llama3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b"};
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    char path[512];
    snprintf(path, sizeof path, "%s/run.gguf", test_tmpdir());
    for (int i = 0; i < 4; i++) {
        pl_synth_config c = small(names[i]);
        pl_synth_opts o = {PL_TYPE_Q8_0, NULL, NULL, NULL};
        pl_gguf *plan = NULL, *g = NULL;
        pl_model *m = NULL;
        pl_state *s = NULL;
        pl_status st = pl_synth_plan(&c, &o, &plan);
        if (!st) st = pl_synth_write(plan, &c, 3, 2, path, NULL, NULL);
        if (!st) st = pl_gguf_open(path, &g);
        if (!st) st = pl_model_load(g, be, NULL, &m);
        pl_state_opts so;
        if (!st) {
            so = pl_state_opts_default(m);
            so.n_ctx = 16;
            so.n_batch = 8;
            st = pl_state_new(m, &so, &s);
        }
        int32_t ids[5] = {256, 72, 105, 33, 258};
        if (!st) st = pl_model_forward(m, s, ids, 5, 0, false);
        CHECK(st == PL_OK, "%s: %s", names[i], pl_last_error());
        if (!st) {
            float logits[320];
            pl_be_read(pl_state_logits(s), 0, logits, sizeof logits);
            bool finite = true, varied = false;
            for (int k = 0; k < 320; k++) {
                finite &= isfinite(logits[k]);
                varied |= logits[k] != logits[0];
            }
            CHECK(finite && varied, "%s: logits not finite or all equal", names[i]);
        }
        pl_state_free(s);
        pl_model_free(m);
        pl_gguf_free(g);
        pl_gguf_free(plan);
    }
    remove(path);
    pl_be_destroy(be);
}

static void run_tests(void) {
    against_converter("llama", "llama");
    against_converter("qwen2", "qwen2");
    against_converter("qwen3", "qwen3");
    against_converter("qwen3_moe", "qwen3moe");
    against_converter("qwen3_5", "qwen35");
    against_converter("qwen3_5_moe", "qwen35moe");
    presets();
    written();
    runs();

    /* bad configurations are refused with a message */
    pl_synth_config c = *pl_synth_preset(NULL, "qwen3-0.6b");
    c.n_head_kv = 3;
    pl_synth_opts o = {PL_TYPE_F16, NULL, NULL, NULL};
    pl_gguf *g = NULL;
    CHECK(pl_synth_plan(&c, &o, &g) != PL_OK && strstr(pl_last_error(), "kv heads"), "16/3 heads");
    c = *pl_synth_preset(NULL, "qwen3-0.6b");
    c.n_vocab = 100;
    CHECK(pl_synth_plan(&c, &o, &g) != PL_OK && strstr(pl_last_error(), "at least"), "tiny vocab");
    o.type = PL_TYPE_IQ2_XXS;
    c.n_vocab = 1000;
    CHECK(pl_synth_plan(&c, &o, &g) != PL_OK && strstr(pl_last_error(), "cannot write"), "iq2_xxs");
}
