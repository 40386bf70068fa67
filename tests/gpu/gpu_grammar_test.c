/* gpu_grammar_test.c - constrained decoding on the GPU: the device's argmax and top-k would
 * ignore the grammar, so a constrained sampler reads every logit; the JSON written is the
 * CPU's, greedy and sampled, and it validates. Model: stories260K (f32). */
#include "cpu/cpu.h"
#include "test.h"

#include "../grammar/json_check.h"
#include "../grammar/json_gen.h"
#include "gpu_test_util.h"

static const char schema[] =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"ok\":{\"type\":"
    "\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",null]},"
    "\"maxItems\":"
    "3}},\"required\":[\"id\",\"ok\",\"tags\"],\"additionalProperties\":false}";

static void run(pl_backend *be, pl_gguf *gg, const pl_tokenizer *t, pl_vocab_trie *v,
                const pl_grammar *g, uint64_t seed, pl_strbuf *out) {
    pl_model *m = NULL;
    gen_out o = {.t = t};
    pl_status st = pl_model_load(gg, be, NULL, &m);
    if (!st) st = jc_generate(m, v, g, seed, 60, &o);
    CHECK(st == PL_OK, "%s seed %llu: %s", be->name, (unsigned long long)seed, pl_last_error());
    CHECK(o.eog && jc_check(o.text.s ? o.text.s : "", o.text.len, schema), "%s seed %llu: %.*s",
          be->name, (unsigned long long)seed, (int)o.text.len, o.text.s);
    *out = o.text;
    pl_model_free(m);
}

static void run_tests(void) {
    pl_backend *gpu = gt_backend(), *cpu = NULL;
    if (!gpu) return;
    pl_gguf *gg;
    pl_tokenizer *t;
    pl_vocab_trie *v;
    pl_grammar *g = NULL;
    CHECK(pl_cpu_new(1, &cpu) == PL_OK, "%s", pl_last_error());
    jc_open_stories(&gg, &t, &v);
    CHECK(pl_grammar_compile(schema, sizeof schema - 1, &g) == PL_OK, "%s", pl_last_error());
    for (uint64_t seed = 0; cpu && v && g && seed < 2; seed++) {
        pl_strbuf a = {0}, b = {0};
        run(cpu, gg, t, v, g, seed, &a);
        run(gpu, gg, t, v, g, seed, &b);
        CHECK(a.len == b.len && (!a.len || !memcmp(a.s, b.s, a.len)),
              "seed %llu: cpu %.*s gpu %.*s", (unsigned long long)seed, (int)a.len, a.s, (int)b.len,
              b.s);
        pl_sb_free(&a);
        pl_sb_free(&b);
    }
    pl_grammar_free(g);
    jc_close_stories(gg, t, v);
    pl_be_destroy(cpu);
    pl_be_destroy(gpu);
}
