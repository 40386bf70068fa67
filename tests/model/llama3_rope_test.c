/* llama3_rope_test.c - Llama 3 RoPE scaling (rope_freqs.weight) on the CPU against
 * transformers.
 *
 * tests/fixtures/llama3_rope/ holds what tools/fixtures/gen_llama3_rope.py made with
 * transformers: a tiny random LlamaForCausalLM with rope_scaling llama3 (factor 8,
 * low_freq_factor 1, high_freq_factor 4, original context 64, theta 500000: 7 of each
 * head's 8 frequencies are scaled), its F32 GGUF (rope_freqs.weight = transformers' default
 * inverse frequencies over its scaled ones), the float32 logits of 124 fixed prompt ids
 * (positions 0..123), the float64 logits of the prompt and its 16 greedy ids, and the ids.
 *   - prompt logits at every position within TOL of the largest logit, against the
 *     float32 and the float64 forward;
 *   - the 16 greedy ids exactly, through the KV cache, each step's logits within TOL;
 *   - the reference tells the scaling apart: the same file with rope_freqs all ones (the
 *     scaling ignored) or inverted (1/f, so angles are multiplied instead of divided) gives
 *     prompt logits at least MIN_MOVE (relative) away, hundreds of times TOL, so a loader
 *     or kernel that drops or inverts rope_freqs fails the first check. (The script also
 *     checks this on transformers' side: ref.json rel_diff_without_scaling and
 *     rel_diff_inverted_scaling, at least 0.05.)
 * POOLED_LLAMA3_ROPE_DIR names another folder (e.g. the script's --selftest output, whose
 * reference is a plain-Python float64 forward). */
#include "base/file_write.h"
#include "cpu/cpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "test.h"

#define TOL      1e-4 /* relative to the largest logit (~float32 noise is ~1e-6) */
#define MIN_MOVE 1e-2
#define N_POS    124
#define N_GEN    16
#define MAX_V    4096

static char dir[512];

static const char *fx(const char *file) {
    static char buf[4][600];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", dir, file);
    return b;
}

static double rows_err(const float *a, const float *ref, int rows, int V) {
    double worst = 0;
    for (int i = 0; i < rows; i++) {
        double e = fixture_rel_err(a + (int64_t)i * V, ref + (int64_t)i * V, V);
        if (e > worst) worst = e;
    }
    return worst;
}

static void report(const char *what, double v) {
    if (getenv("POOLED_TEST_VERBOSE")) fprintf(stderr, "llama3_rope %-28s %.3g\n", what, v);
}

/* Load path and run the prompt; its logits into out [N_POS * V]. With want/seq, also the
 * greedy decode through the cache: ids into got, the worst step error returned in *step. */
static bool run(pl_backend *be, const char *path, const int32_t *prompt, int V, float *out,
                const int32_t *want, const float *seq, int32_t *got, double *step) {
    pl_state_opts o = {
        .n_ctx = N_POS + N_GEN + 4, .n_batch = N_POS, .n_logits = N_POS, .kv_type = PL_TYPE_F32};
    fixture_model fm;
    pl_status s = fixture_model_open(&fm, be, path, &o);
    if (!s && pl_model_get_info(fm.m)->n_vocab != V)
        s = pl_fail(PL_ERR_FORMAT, "vocabulary %d, the reference has %d",
                    pl_model_get_info(fm.m)->n_vocab, V);
    if (!s) s = pl_model_forward(fm.m, fm.st, prompt, N_POS, 0, true);
    if (!s) s = pl_be_read(pl_state_logits(fm.st), 0, out, (int64_t)N_POS * V * 4);
    CHECK(s == PL_OK, "%s: %s", path, pl_last_error());
    if (!s && want) {
        float *row = malloc(sizeof(float) * (size_t)V);
        pl_buf *lg = pl_state_logits(fm.st);
        *step = 0;
        pl_be_copy(lg, (int64_t)(N_POS - 1) * V, V, lg, 0); /* the last prompt row first */
        for (int t = 0; t < N_GEN && !s; t++) {
            pl_be_read(lg, 0, row, (int64_t)V * 4);
            double e = fixture_rel_err(row, seq + (int64_t)(N_POS - 1 + t) * V, V);
            if (e > *step) *step = e;
            pl_be_argmax(lg, 1, pl_state_ids(fm.st), 0);
            pl_be_read(pl_state_ids(fm.st), 0, &got[t], 4);
            /* feed the reference id so one wrong step does not hide the later ones */
            s = pl_model_forward(fm.m, fm.st, &want[t], 1, N_POS + t, false);
            CHECK(s == PL_OK, "decode step %d: %s", t, pl_last_error());
        }
        free(row);
    }
    fixture_model_close(&fm);
    return s == PL_OK;
}

/* A copy of the GGUF with each rope_freqs factor f replaced by mode 0: 1, mode 1: 1/f. */
static bool write_variant(const char *src, const char *dst, int mode) {
    char *buf = NULL;
    size_t len = 0;
    pl_gguf *g = NULL;
    bool ok = pl_file_read_all(src, &buf, &len) == PL_OK &&
              pl_gguf_parse((const uint8_t *)buf, len, &g) == PL_OK;
    const pl_gguf_tensor *t = ok ? pl_gguf_find_tensor(g, "rope_freqs.weight") : NULL;
    ok = t && t->type == PL_TYPE_F32;
    CHECK(ok, "%s: no F32 rope_freqs.weight", src);
    if (ok) {
        float *f = (float *)(buf + ((const char *)t->data - buf));
        bool scaled = false;
        for (int64_t i = 0; i < t->ne[0]; i++) {
            scaled |= f[i] != 1.0f;
            f[i] = mode == 0 ? 1.0f : 1.0f / f[i];
        }
        CHECK(scaled, "rope_freqs are all 1: the fixture does not scale");
        ok = scaled && pl_file_write_all(dst, buf, len) == PL_OK;
    }
    pl_gguf_free(g);
    free(buf);
    return ok;
}

static void run_tests(void) {
    const char *d = getenv("POOLED_LLAMA3_ROPE_DIR");
    snprintf(dir, sizeof dir, "%s", d && *d ? d : "tests/fixtures/llama3_rope");
    CHECK(access(fx("llama3_rope.gguf"), R_OK) == 0,
          "%s is missing (tools/fixtures/gen_llama3_rope.py makes it on a machine with "
          "transformers)",
          fx("llama3_rope.gguf"));
    char *ref = fixture_text(fx("ref.json"));
    int32_t prompt[N_POS], want[N_GEN], got[N_GEN];
    const char *pp[] = {"prompt_ids"}, *gp[] = {"greedy_fp64"};
    int np = ref ? fixture_ids(ref, pp, 1, prompt, N_POS) : -1;
    int ng = ref ? fixture_ids(ref, gp, 1, want, N_GEN) : -1;
    const char *vk = ref ? strstr(ref, "\"vocab\":") : NULL;
    int V = vk ? (int)strtol(vk + 8, NULL, 10) : 0;
    int64_t n32 = 0, n64 = 0;
    float *f32 = fixture_f32(fx("prompt_logits_fp32.f32"), &n32);
    float *f64 = fixture_f32(fx("seq_logits_fp64.f32"), &n64);
    bool ok = np == N_POS && ng == N_GEN && V > 0 && V <= MAX_V && f32 && f64 &&
              n32 == (int64_t)N_POS * V && n64 == (int64_t)(N_POS + N_GEN) * V;
    CHECK(ok, "%s: ref.json (%d prompt ids, %d greedy ids, vocab %d) or logit files", dir, np, ng,
          V);
    pl_backend *be = NULL;
    if (ok) CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    float *logits = ok ? malloc(sizeof(float) * (size_t)N_POS * V) : NULL;
    double step = 0;
    if (be && run(be, fx("llama3_rope.gguf"), prompt, V, logits, want, f64, got, &step)) {
        double e32 = rows_err(logits, f32, N_POS, V), e64 = rows_err(logits, f64, N_POS, V);
        report("prompt vs fp32", e32);
        report("prompt vs fp64", e64);
        report("decode steps vs fp64", step);
        CHECK(e32 <= TOL, "prompt logits %.3g from transformers fp32 (tolerance %g)", e32, TOL);
        CHECK(e64 <= TOL, "prompt logits %.3g from fp64 (tolerance %g)", e64, TOL);
        CHECK(step <= TOL, "decode step logits %.3g from fp64 (tolerance %g)", step, TOL);
        for (int t = 0; t < N_GEN; t++)
            CHECK(got[t] == want[t], "greedy id %d is %d, transformers' %d", t, got[t], want[t]);

        /* the fixture tells the scaling apart */
        const char *names[] = {"rope_freqs ignored (all 1)", "rope_freqs inverted (1/f)"};
        char path[600];
        snprintf(path, sizeof path, "%s/variant.gguf", test_tmpdir());
        float *alt = malloc(sizeof(float) * (size_t)N_POS * V);
        for (int mode = 0; mode < 2; mode++) {
            if (!write_variant(fx("llama3_rope.gguf"), path, mode) ||
                !run(be, path, prompt, V, alt, NULL, NULL, NULL, NULL))
                continue;
            double e = rows_err(alt, f32, N_POS, V);
            report(names[mode], e);
            CHECK(e >= MIN_MOVE, "%s: logits only %.3g from the reference", names[mode], e);
        }
        remove(path);
        free(alt);
    }
    free(logits);
    free(f32);
    free(f64);
    free(ref);
    if (be) pl_be_destroy(be);
}
