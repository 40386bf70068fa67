/* stories_test.c - stories260K (llama architecture, SPM vocabulary) F32, Q8_0 and Q4_0, and
 * llama-2-tiny-random (F16), on the CPU against llama.cpp b10573: the prompt-end logits of
 * "Once upon a time" (BOS + 4 ids) and the 64 greedy ids, which must be identical.
 *
 * Tolerances on the logits, relative to the largest logit:
 *   - F32 file, default f16 cache: 1e-4. llama.cpp ran with an f16 cache and f16 flash
 *     attention; our f16 path rounds the same way (cpu_attention.c) and lands at 9.6e-5.
 *     With an f32 cache (exact arithmetic) we are 4.3e-4 away: that is llama.cpp's f16
 *     rounding, so the f32-cache check allows 1e-4 + 4.5e-4.
 *   - Q8_0 / Q4_0: llama.cpp quantises activations to 8 bits in these matmuls, we keep them
 *     float32, so the reference is only as good as its own quantisation spread: how far
 *     llama.cpp's Q8_0 / Q4_0 logits are from its F32 ones, 1.5e-2 / 1.67e-1. Measured:
 *     8.2e-3 / 9.1e-3.
 *   - llama-2-tiny-random (F16 weights, 32000-id vocabulary): llama.cpp rounds activations
 *     to f16 inside F16 matmuls, we keep float32: 5e-4 (measured 2.8e-4). */
#include "cpu/cpu.h"
#include "model/model.h"
#include "model/fixture.h"
#include "test.h"

typedef struct {
    const char *file;   /* under shared/models */
    const char *logits; /* under shared/fixtures/llamacpp-b10573 */
    double tol;         /* logits, relative to the largest */
} stories_case;

static void run_case(pl_backend *be, const char *json, const stories_case *c, uint32_t kv) {
    char path[512];
    snprintf(path, sizeof path, "models/%s", c->file);
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    pl_state *st = NULL;
    pl_status s = pl_gguf_open(test_shared(path), &g);
    CHECK(s == PL_OK, "%s: %s", c->file, pl_last_error());
    if (s) return;
    s = pl_model_load(g, be, NULL, &m);
    CHECK(s == PL_OK, "%s: %s", c->file, pl_last_error());
    if (s) goto done;
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = 128;
    o.n_batch = 16;
    o.kv_type = kv;
    s = pl_state_new(m, &o, &st);
    CHECK(s == PL_OK, "%s", pl_last_error());
    if (s) goto done;

    const char *pp[] = {c->file, "prompt_ids"}, *gp[] = {c->file, "generated_ids"};
    int32_t prompt[16], want[64];
    int np = fixture_ids(json, pp, 2, prompt, 16), ng = fixture_ids(json, gp, 2, want, 64);
    CHECK(np == 5 && ng == 64, "fixture arrays %d %d", np, ng);
    if (np != 5 || ng != 64) goto done;

    s = pl_model_forward(m, st, prompt, np, 0, false);
    CHECK(s == PL_OK, "%s", pl_last_error());
    float logits[32000];
    pl_be_read(pl_state_logits(st), 0, logits, 4 * (int64_t)pl_model_get_info(m)->n_vocab);
    snprintf(path, sizeof path, "fixtures/llamacpp-b10573/%s", c->logits);
    int64_t nref = 0;
    float *ref = fixture_f32(test_shared(path), &nref);
    int64_t V = pl_model_get_info(m)->n_vocab;
    CHECK(ref && nref == V && V <= 32000, "reference logits %s", path);
    if (ref && nref == V && V <= 32000) {
        /* f32 cache: exact arithmetic, llama.cpp's f16 attention is up to ~4.3e-4 away */
        double tol = kv == PL_TYPE_F16 ? c->tol : c->tol + 4.5e-4;
        double err = fixture_rel_err(logits, ref, V);
        CHECK(err <= tol, "%s kv %s: prompt logits off by %.3g of the largest (tolerance %g)",
              c->file, kv == PL_TYPE_F16 ? "f16" : "f32", err, tol);
        if (getenv("POOLED_TEST_VERBOSE"))
            fprintf(stderr, "%s kv %s: rel err %.3g\n", c->file, kv == PL_TYPE_F16 ? "f16" : "f32",
                    err);
    }
    free(ref);

    /* greedy: argmax on the backend, the id fed back as the next token */
    int32_t got[64];
    int64_t pos = np;
    for (int t = 0; t < 64 && s == PL_OK; t++) {
        pl_be_argmax(pl_state_logits(st), 1, pl_state_ids(st), 0);
        pl_be_read(pl_state_ids(st), 0, &got[t], 4);
        s = pl_model_forward(m, st, &got[t], 1, pos++, false);
    }
    CHECK(s == PL_OK, "%s", pl_last_error());
    int first_bad = -1;
    for (int t = 0; t < 64 && first_bad < 0; t++)
        if (got[t] != want[t]) first_bad = t;
    CHECK(first_bad < 0, "%s kv %s: greedy id %d is %d, llama.cpp %d", c->file,
          kv == PL_TYPE_F16 ? "f16" : "f32", first_bad, first_bad >= 0 ? got[first_bad] : 0,
          first_bad >= 0 ? want[first_bad] : 0);
done:
    pl_state_free(st);
    pl_model_free(m);
    pl_gguf_free(g);
}

static void run_tests(void) {
    char *json = fixture_text(test_shared("fixtures/llamacpp-b10573/greedy_once_upon_a_time.json"));
    CHECK(json != NULL, "greedy fixture missing");
    if (!json) return;
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    static const stories_case cases[] = {
        {"stories260K.gguf", "stories260K.prompt_last_logits.f32", 1e-4},
        {"stories260K-Q8_0.gguf", "stories260K-Q8_0.prompt_last_logits.f32", 1.5e-2},
        {"stories260K-Q4_0.gguf", "stories260K-Q4_0.prompt_last_logits.f32", 1.67e-1},
        {"llama-2-tiny-random.gguf", "llama-2-tiny-random.prompt_last_logits.f32", 5e-4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(be, json, &cases[i], PL_TYPE_F16);
        run_case(be, json, &cases[i], PL_TYPE_F32);
    }
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    free(json);
}
