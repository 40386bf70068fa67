/* mtp_test.c - the Qwen3.5 multi-token-prediction (MTP) block against an independent
 * reference (tools/gen_mtp_ref.py, plain Python reading the GGUF itself), on both -mtp-
 * fixtures, CPU, exact f32 activations and an f32 cache:
 *   - the main model's hidden states still equal the ones the reference was made from
 *     (its only input taken from our code);
 *   - the block's logits at every prompt position (one id at a time: the cache entries
 *     made after each forward pass) within MTP_TOL of the reference, the same argmax;
 *   - chained drafts (depth 3, its own output and argmax fed back) equal the reference's,
 *     with the last step's logits within MTP_TOL, after one-id passes and after one batch;
 *   - the same on the GPU (lavapipe; the dense fixture, within MTP_TOL_GPU);
 *   - a state made to draft gives the main model's logits bit for bit as one that is not;
 *     a model without the block refuses such a state with one line.
 * POOLED_MTP_DUMP=DIR writes the hidden states the reference takes (DIR/NAME-hidden.f32)
 * and does nothing else; the reference is then made with
 *     tools/gen_mtp_ref.py M.gguf DIR/NAME-hidden.f32 tests/fixtures/mtp/NAME-ref.f32 \
 *         --ids "51 270 220 386 298 74 310 291" --next 86 --depth 3 */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "test.h"

#include "gpu/gpu_test_util.h" /* (after test.h) */

#define T           8 /* prompt ids */
#define DEPTH       3
#define MTP_TOL     1e-4 /* max |ours - reference| over a row of logits (CPU) */
#define MTP_TOL_GPU 5e-4 /* (GPU: other summation orders) */

static double tol = MTP_TOL;

static const int32_t prompt[T] = {51, 270, 220, 386, 298, 74, 310, 291}; /* ref.json's first 8 */
static const int32_t next_id = 86;                                       /* its 9th */

static const char *const names[2] = {"qwen3_5", "qwen3_5_moe"};

static float *read_all(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    float *v = malloc(sizeof *v * n);
    size_t got = f && v ? fread(v, sizeof *v, n, f) : 0;
    bool more = f && fgetc(f) != EOF;
    if (f) fclose(f);
    CHECK(got == n && !more, "%s: expected %zu floats", path, n);
    if (got != n || more) free(v), v = NULL;
    return v;
}

static pl_state *new_state(const pl_model *m, bool draft) {
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = 32, o.n_batch = 16, o.kv_type = PL_TYPE_F32, o.draft = draft;
    pl_state *s = NULL;
    CHECK(pl_state_new(m, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* The draft step's logits against ref (one row), and the argmax. */
static void check_row(pl_state *s, const float *ref, int V, float *tmp, const char *what) {
    CHECK(pl_be_read(pl_state_draft_logits(s), 0, tmp, (int64_t)V * 4) == PL_OK, "%s",
          pl_last_error());
    double d = max_diff(tmp, ref, V);
    CHECK(d <= tol && argmax(tmp, V) == argmax(ref, V),
          "%s: max |ours - reference| %.3g (tolerance %g), argmax %d vs %d", what, d, tol,
          argmax(tmp, V), argmax(ref, V));
}

static void check_chain(pl_state *s, const pl_model *m, const float *ref, int V, float *tmp,
                        const char *what) {
    int32_t got[DEPTH];
    int n = 0;
    pl_status e = pl_model_draft(m, s, T - 1, next_id, DEPTH, got, &n);
    CHECK(!e && n == DEPTH, "%s: %d drafts (%s)", what, n, e ? pl_last_error() : "");
    for (int j = 0; j < n; j++)
        CHECK(got[j] == argmax(ref + (size_t)(T - 1 + j) * V, V), "%s: draft %d is %d, want %d",
              what, j, got[j], argmax(ref + (size_t)(T - 1 + j) * V, V));
    if (n == DEPTH) check_row(s, ref + (size_t)(T - 2 + DEPTH) * V, V, tmp, what);
}

static void check_model(pl_backend *be, int which, const char *dump) {
    char path[256], what[96];
    snprintf(path, sizeof path, "fixtures/hf/%s/%s-mtp-q8_0.gguf", names[which], names[which]);
    char name[64]; /* the model and the backend, in every message */
    snprintf(name, sizeof name, "%s on %s", names[which], be->name);
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    CHECK(pl_gguf_open(test_shared(path), &g) == PL_OK && pl_model_load(g, be, NULL, &m) == PL_OK,
          "%s: %s", path, pl_last_error());
    if (!m) {
        pl_gguf_free(g);
        return;
    }
    int d = pl_model_get_info(m)->n_embd, V = pl_model_get_info(m)->n_vocab;
    CHECK(pl_model_get_info(m)->has_draft, "%s: no draft block found", name);
    pl_state *a = new_state(m, true), *b = new_state(m, false);
    float *hid = malloc(sizeof *hid * (size_t)T * d), *tmp = malloc(sizeof *tmp * (size_t)V),
          *tmp2 = malloc(sizeof *tmp2 * (size_t)V);
    /* the batch pass: hidden states, and the main logits with and without the block */
    pl_status e = a && b ? PL_OK : PL_ERR;
    if (!e) e = pl_model_forward(m, a, prompt, T, 0, false);
    if (!e) e = pl_model_forward(m, b, prompt, T, 0, false);
    if (!e) e = pl_be_read(pl_state_hidden(a), 0, hid, (int64_t)T * d * 4);
    if (!e) e = pl_be_read(pl_state_logits(a), 0, tmp, (int64_t)V * 4);
    if (!e) e = pl_be_read(pl_state_logits(b), 0, tmp2, (int64_t)V * 4);
    CHECK(!e, "%s: %s", name, e ? pl_last_error() : "");
    CHECK(!e && !memcmp(tmp, tmp2, sizeof *tmp * (size_t)V),
          "%s: the main logits change when the state drafts", name);
    if (!e && dump) {
        snprintf(path, sizeof path, "%s/%s-hidden.f32", dump, names[which]);
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(hid, sizeof *hid, (size_t)T * d, f) == (size_t)T * d, "%s", path);
        if (f) fclose(f);
    }
    snprintf(path, sizeof path, "tests/fixtures/mtp/%s-hidden.f32", names[which]);
    float *want_hid = e || dump ? NULL : read_all(path, (size_t)T * d);
    snprintf(path, sizeof path, "tests/fixtures/mtp/%s-ref.f32", names[which]);
    float *ref = e || dump ? NULL : read_all(path, (size_t)(T - 1 + DEPTH) * V);
    if (want_hid && ref) {
        double dh = max_diff(hid, want_hid, T * d);
        CHECK(dh <= tol / 10, "%s: hidden states moved %.3g from the reference's input", name, dh);
        snprintf(what, sizeof what, "%s, one batch, chained", name);
        check_chain(a, m, ref, V, tmp, what);
        /* one id at a time: the entry at p-1 made after the pass of id p */
        for (int p = 0; !e && p < T; p++) {
            if ((e = pl_model_forward(m, a, &prompt[p], 1, p, false))) break;
            int32_t got;
            int n = 0;
            if (p == T - 1) break;
            e = pl_model_draft(m, a, p, prompt[p + 1], 1, &got, &n);
            snprintf(what, sizeof what, "%s, position %d", name, p);
            CHECK(!e && n == 1, "%s: no draft (%s)", what, e ? pl_last_error() : "");
            if (!e) check_row(a, ref + (size_t)p * V, V, tmp, what);
        }
        CHECK(!e, "%s: %s", name, e ? pl_last_error() : "");
        snprintf(what, sizeof what, "%s, one id at a time, chained", name);
        if (!e) check_chain(a, m, ref, V, tmp, what);
        /* a position the last pass did not run: no drafts, no error */
        int32_t got[DEPTH];
        int n = 1;
        CHECK(pl_model_draft(m, a, 2, next_id, DEPTH, got, &n) == PL_OK && n == 0,
              "%s: %d drafts from a position the last pass did not run", name, n);
    }
    free(hid), free(tmp), free(tmp2), free(want_hid), free(ref);
    pl_state_free(a), pl_state_free(b);
    pl_model_free(m);
    pl_gguf_free(g);
}

static void run_tests(void) {
    pl_backend *cpu = NULL;
    CHECK(pl_cpu_new(2, &cpu) == PL_OK, "%s", pl_last_error());
    if (!cpu) return;
    cpu->act_q8 = 0; /* exact f32, as the reference */
    const char *dump = getenv("POOLED_MTP_DUMP");
    for (int i = 0; i < 2; i++) check_model(cpu, i, dump && *dump ? dump : NULL);
    /* a model without the block: a state made to draft is refused with one line */
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf"), &g) == PL_OK &&
              pl_model_load(g, cpu, NULL, &m) == PL_OK,
          "%s", pl_last_error());
    if (m) {
        pl_state_opts o = pl_state_opts_default(m);
        o.n_ctx = 32, o.draft = true;
        pl_state *s = NULL;
        CHECK(pl_state_new(m, &o, &s) != PL_OK && !s && strstr(pl_last_error(), "no draft") &&
                  !strchr(pl_last_error(), '\n'),
              "a model without the block: %s", pl_last_error());
        CHECK(!pl_model_get_info(m)->has_draft, "has_draft without the block");
    }
    pl_model_free(m);
    pl_gguf_free(g);
    pl_be_destroy(cpu);

    pl_backend *gpu = gt_backend();
    if (!gpu) return;
    tol = MTP_TOL_GPU;
    check_model(gpu, 0, NULL); /* lean: the dense fixture */
    CHECK(gpu->live_bufs == 0, "%lld buffers leaked", (long long)gpu->live_bufs);
    pl_be_destroy(gpu);
}
