/* cpu_weights_test.c - the CPU backend's weights read from the file mapping or copied into
 * anonymous memory (pl_cpu_opts.anon_weights) give the same bits:
 *   - small models (dense qwen3 Q4_0, and the qwen3.5 MoE with its MTP block: 3-D experts
 *     and the split tensors the loader copies itself) loaded off, on and auto: every weight
 *     buffer holds the file tensor's bytes (compared byte for byte through the backend's
 *     read), lies in the file mapping when off and outside it when on, the first buffer of
 *     a copy on a 2 MiB boundary; the device line says "weights mapped" / "weights copied";
 *     the logits of a prompt and of two decode steps are equal bit for bit (auto: qwen3);
 *   - auto copies a model this small where /proc/meminfo is readable (CI: Linux);
 *   - a weight made without the loader's announcement is copied when on, its own piece;
 *   - an anon_weights outside -1..1 is refused;
 *   - buffers of CPU_BIG_BUF bytes or more (the KV cache) lie in pieces on huge-page
 *     boundaries, one after another, zeroed, and a piece goes when its last buffer does;
 *     smaller ones are calloc'd. */
#include "cpu/cpu_internal.h"
#include "format/gguf_internal.h"
#include "model/model_internal.h"
#include "test.h"

enum { N_PROMPT = 5, N_STEPS = 2 };

typedef struct {
    float *logits; /* (N_PROMPT all rows + N_STEPS) x n_vocab */
    int64_t n_vocab;
} run_out;

/* Every weight buffer of m against the file: its bytes, and where it lies. */
static void check_bufs(const pl_model *m, const pl_gguf *g, int mode, const char *what) {
    const unsigned char *lo = g->map.data, *hi = lo + g->map.size;
    int inside = 0, matched = 0;
    for (int i = 0; i < m->n_bufs; i++) {
        const pl_buf *b = m->bufs[i];
        const unsigned char *d = ((const cpu_buf *)b)->data;
        size_t n = (size_t)(pl_row_size(b->type, b->ne0) * b->ne1);
        inside += d >= lo && d < hi;
        if (i == 0 && mode > 0)
            CHECK((uintptr_t)d % (2u << 20) == 0, "%s: the copy starts at %p", what, (void *)d);
        /* the file tensor it came from, by position: the loader wraps a tensor's own bytes
         * (the norms it turns to f32 and the split parts are its copies: compared by the
         * logits below) */
        for (int64_t t = 0; t < pl_gguf_tensor_count(g); t++) {
            const pl_gguf_tensor *gt = pl_gguf_tensor_at(g, t);
            if (gt->type != b->type || gt->nbytes != n || gt->ne[0] != b->ne0) continue;
            unsigned char *back = malloc(n);
            CHECK(pl_be_read(b, 0, back, (int64_t)n) == PL_OK, "%s", pl_last_error());
            if (!memcmp(back, gt->data, n)) {
                matched++;
                free(back);
                break;
            }
            free(back);
        }
    }
    if (mode < 0)
        CHECK(inside >= m->n_bufs / 2, "%s: only %d of %d buffers in the mapping", what, inside,
              m->n_bufs);
    else
        CHECK(inside == 0, "%s: %d of %d buffers still in the mapping", what, inside, m->n_bufs);
    CHECK(matched >= m->n_bufs / 2, "%s: only %d of %d buffers hold a file tensor's bytes", what,
          matched, m->n_bufs);
}

static run_out run(const char *rel, int mode) {
    run_out r = {0};
    char what[200];
    snprintf(what, sizeof what, "%s, anon_weights %d", rel, mode);
    pl_backend *be = NULL;
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    pl_state *st = NULL;
    pl_cpu_opts o = {.n_threads = 1, .anon_weights = mode};
    pl_status s = pl_cpu_new_with(&o, &be);
    if (!s) s = pl_gguf_open(test_shared(rel), &g);
    if (!s) s = pl_model_load(g, be, NULL, &m);
    pl_state_opts so = {0};
    if (!s) {
        so = pl_state_opts_default(m);
        so.n_ctx = 16, so.n_batch = 8, so.n_logits = N_PROMPT;
        s = pl_state_new(m, &so, &st);
    }
    CHECK(s == PL_OK, "%s: %s", what, pl_last_error());
    if (s) goto done;
    const char *want = mode > 0 ? "weights copied" : "weights mapped";
    if (mode == 0 && !strstr(be->device, "weights copied")) /* where meminfo is readable */
        CHECK(access("/proc/meminfo", R_OK) != 0, "%s: auto did not copy (%s)", what, be->device);
    else if (mode != 0)
        CHECK(strstr(be->device, want) != NULL, "%s: device '%s'", what, be->device);
    check_bufs(m, g, mode, what);
    r.n_vocab = pl_model_get_info(m)->n_vocab;
    r.logits = malloc(sizeof(float) * (size_t)(r.n_vocab * (N_PROMPT + N_STEPS)));
    static const int32_t ids[N_PROMPT + N_STEPS] = {1, 17, 33, 5, 60, 7, 250};
    s = pl_model_forward(m, st, ids, N_PROMPT, 0, true);
    if (!s) s = pl_be_read(pl_state_logits(st), 0, r.logits, 4 * N_PROMPT * r.n_vocab);
    for (int i = 0; i < N_STEPS && !s; i++) {
        s = pl_model_forward(m, st, &ids[N_PROMPT + i], 1, N_PROMPT + i, false);
        if (!s)
            s = pl_be_read(pl_state_logits(st), 0, r.logits + (N_PROMPT + i) * r.n_vocab,
                           4 * r.n_vocab);
    }
    CHECK(s == PL_OK, "%s: %s", what, pl_last_error());
done:
    pl_state_free(st);
    pl_model_free(m);
    if (be) CHECK(be->live_bufs == 0, "%s: %lld buffers leaked", what, (long long)be->live_bufs);
    pl_be_destroy(be);
    pl_gguf_free(g);
    return r;
}

/* off against on, and against auto when `with_auto` */
static void same_bits(const char *rel, bool with_auto) {
    run_out off = run(rel, -1), on = run(rel, 1), aut = {0};
    if (with_auto) aut = run(rel, 0);
    size_t n = sizeof(float) * (size_t)(off.n_vocab * (N_PROMPT + N_STEPS));
    if (off.logits && on.logits) {
        CHECK(off.n_vocab == on.n_vocab && !memcmp(off.logits, on.logits, n),
              "%s: logits differ with the weights copied", rel);
        if (with_auto)
            CHECK(aut.logits && !memcmp(off.logits, aut.logits, n), "%s: logits differ with auto",
                  rel);
    }
    free(off.logits), free(on.logits), free(aut.logits);
}

/* Without the loader's announcement: each weight its own copy when on, freed with it; one
 * of 4 MiB + 4 bytes, which two threads copy in 4 MiB items (the last one short). */
static void unannounced(void) {
    pl_backend *be = NULL;
    pl_cpu_opts o = {.n_threads = 2, .anon_weights = 1};
    CHECK(pl_cpu_new_with(&o, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    float w[2][64];
    for (int i = 0; i < 128; i++) w[i / 64][i % 64] = (float)i * 0.5f - 3;
    pl_buf *b[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        CHECK(pl_be_buf_weight(be, PL_TYPE_F32, 16, 4, w[i], &b[i]) == PL_OK, "%s",
              pl_last_error());
        if (!b[i]) continue;
        float back[64];
        pl_be_read(b[i], 0, back, sizeof back);
        CHECK(((cpu_buf *)b[i])->data != (void *)w[i] && !memcmp(back, w[i], sizeof back),
              "weight %d not copied as it is", i);
    }
    int64_t big_n = (4 << 20) / 4 + 1;
    float *big = malloc(sizeof(float) * (size_t)big_n),
          *back = malloc(sizeof(float) * (size_t)big_n);
    for (int64_t i = 0; i < big_n; i++) big[i] = (float)(i % 1000) - 500;
    pl_buf *bb = NULL;
    CHECK(pl_be_buf_weight(be, PL_TYPE_F32, big_n, 1, big, &bb) == PL_OK, "%s", pl_last_error());
    if (bb) {
        pl_be_read(bb, 0, back, 4 * big_n);
        CHECK(((cpu_buf *)bb)->data != (void *)big && !memcmp(back, big, 4 * (size_t)big_n),
              "a 4 MiB weight not copied as it is");
    }
    pl_be_buf_free(bb);
    free(big), free(back);
    pl_be_buf_free(b[0]);
    pl_be_buf_free(b[1]);
    pl_be_destroy(be);
    pl_cpu_opts bad = {.anon_weights = 2};
    CHECK(pl_cpu_new_with(&bad, &be) != PL_OK && strstr(pl_last_error(), "anon_weights"),
          "anon_weights 2 accepted");
}

/* buf_new's big buffers: in pieces (where there is mmap), zeroed, each its own bytes. */
static void big_buffers(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    cpu_backend *c = cpu_of(be);
    /* three of 320 KiB (one piece), one of 20 MiB (a piece of its own), one of 1 KiB */
    static const int64_t rows[] = {80, 80, 80, 5120, 1};
    pl_buf *b[5] = {NULL};
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 5; i++) {
            CHECK(pl_be_buf_new(be, PL_TYPE_F32, 1024, rows[i], &b[i]) == PL_OK, "%s",
                  pl_last_error());
            if (!b[i]) return;
        }
        for (int i = 0; i < 5; i++) {
            const cpu_buf *cb = (const cpu_buf *)b[i];
            size_t n = (size_t)rows[i] * 1024;
            const float *d = cb->data;
            size_t nonzero = 0;
            for (size_t e = 0; e < n; e++) nonzero += d[e] != 0;
            CHECK(nonzero == 0, "round %d: buffer %d has %zu nonzero values", round, i, nonzero);
            CHECK((uintptr_t)d % 64 == 0, "round %d: buffer %d at %p", round, i, (void *)d);
#ifndef __wasi__
            CHECK((cb->piece != NULL) == (i < 4) && cb->owned == (i == 4),
                  "round %d: buffer %d piece %p owned %d", round, i, (void *)cb->piece, cb->owned);
#endif
        }
#ifndef __wasi__
        const cpu_buf *b0 = (const cpu_buf *)b[0], *b1 = (const cpu_buf *)b[1];
        CHECK((uintptr_t)b0->data % (2u << 20) == 0 && b1->piece == b0->piece &&
                  (char *)b1->data == (char *)b0->data + 80 * 1024 * 4 &&
                  ((const cpu_buf *)b[3])->piece != b0->piece,
              "round %d: big buffers not laid one after another in pieces", round);
#endif
        /* each its own bytes: fill them all, then read each back */
        for (int i = 0; i < 5; i++) {
            float *d = ((cpu_buf *)b[i])->data;
            for (int64_t e = 0; e < rows[i] * 1024; e++) d[e] = (float)(i + 1);
        }
        int wrong = 0;
        for (int i = 0; i < 5; i++) {
            const float *d = ((cpu_buf *)b[i])->data;
            for (int64_t e = 0; e < rows[i] * 1024; e++) wrong += d[e] != (float)(i + 1);
        }
        CHECK(wrong == 0, "round %d: %d values overwritten by another buffer", round, wrong);
        for (int i = 0; i < 5; i++) pl_be_buf_free(b[i]);
        CHECK(c->buf_cur == NULL, "round %d: a piece outlived its buffers", round);
    }
    pl_be_destroy(be);
}

static void run_tests(void) {
    same_bits("fixtures/hf/qwen3/qwen3-q4_0.gguf", true);
    same_bits("fixtures/hf/qwen3_5_moe/qwen3_5_moe-mtp-q8_0.gguf", false);
    unannounced();
    big_buffers();
}
