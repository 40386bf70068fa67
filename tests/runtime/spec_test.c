/* spec_test.c - speculative decoding never changes the answer:
 *   - column j of a verify pass (1 + K columns, logits for every one) is bit-identical to
 *     a one-column step, on the CPU and (lavapipe) the GPU;
 *   - generation with the prompt-lookup drafter gives the ids of plain decoding, greedy and
 *     seeded sampling with top-k, top-p and penalties, on stories260K and the dense, MoE and
 *     hybrid (recurrent) fixtures; on a repetitive prompt drafts are both accepted and
 *     rejected;
 *   - with the model's own MTP block as the drafter (both -mtp- fixtures on the CPU, the
 *     dense one on the GPU), the same ids as plain decoding, greedy and seeded, with sane
 *     counters and the cache of plain decoding afterwards;
 *   - an oracle drafter forces every acceptance pattern (all accepted, first rejected,
 *     middle rejected, none drafted), and a stop inside accepted drafts; afterwards the
 *     cache (KV rows, the recurrent state) equals plain decoding's: extending both by one
 *     id runs only that id and gives bit-identical logits.
 * Without a GPU adapter the GPU part fails as gpu_model_test does (POOLED_SKIP_GPU=1
 * outside CI skips it). */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "runtime/draft.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "test.h"

#include "gpu/gpu_test_util.h" /* (after test.h) */

#define NGEN 40

static pl_model *load(pl_gguf **g, pl_backend *be, const char *path) {
    pl_model *m = NULL;
    *g = NULL;
    CHECK(pl_gguf_open(test_shared(path), g) == PL_OK && pl_model_load(*g, be, NULL, &m) == PL_OK,
          "%s: %s", path, pl_last_error());
    return m;
}

static pl_session *session_opts(const pl_model *m, int cols, bool draft) {
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = 160;
    o.n_batch = 16;
    o.n_logits = o.n_snap = cols;
    o.draft = draft;
    pl_session *s = NULL;
    CHECK(pl_session_new(m, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

static pl_session *session(const pl_model *m, int cols) {
    return session_opts(m, cols, false);
}

typedef struct {
    int32_t ids[NGEN + 8];
    int n;
    int stop_at; /* on_token returns false at this count (0: never) */
} id_list;

static bool collect(void *ud, int32_t id) {
    id_list *l = ud;
    l->ids[l->n++] = id;
    return l->n != l->stop_at;
}

/* The two samplers every check runs: greedy, and seeded with top-k, top-p and penalties. */
static void samplers(pl_sampler_params *greedy, pl_sampler_params *sampled) {
    *greedy = *sampled = pl_sampler_defaults();
    greedy->temp = 0;
    sampled->temp = 0.8f, sampled->top_k = 40, sampled->top_p = 0.9f, sampled->seed = 11;
    sampled->repeat_penalty = 1.1f, sampled->presence_penalty = 0.2f;
    sampled->frequency_penalty = 0.1f, sampled->penalty_last_n = 32;
}

/* Generate n ids after prompt into out (the session is kept for a cache check). */
static pl_status gen(const pl_model *m, pl_session *s, const pl_sampler_params *sp,
                     const int32_t *prompt, int np, int n, pl_drafter *dr, id_list *out,
                     pl_gen_stats *st) {
    pl_sampler *smp = NULL;
    pl_status e = pl_sampler_new(sp, pl_model_get_info(m)->n_vocab, &smp);
    out->n = 0;
    pl_gen_opts o = {.n_predict = n, .on_token = collect, .ud = out, .drafter = dr};
    if (!e) e = pl_generate(s, smp, prompt, np, &o, st);
    pl_sampler_free(smp);
    return e;
}

/* a and b hold the same ids: extending both by id runs only id, with bit-identical logits */
static void check_cache(const pl_model *m, pl_session *a, pl_session *b, int32_t id,
                        const char *what) {
    int64_t na, nb;
    const int32_t *ia = pl_session_ids(a, &na), *ib = pl_session_ids(b, &nb);
    CHECK(na == nb && !memcmp(ia, ib, sizeof *ia * (size_t)na),
          "%s: cached ids differ (%lld, %lld)", what, (long long)na, (long long)nb);
    if (na != nb || na + 1 > 160) return;
    int32_t ids[161];
    memcpy(ids, ia, sizeof *ids * (size_t)na);
    ids[na] = id;
    int V = pl_model_get_info(m)->n_vocab;
    float *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
    int64_t ra = -1, rb = -1;
    pl_status e = pl_session_set(a, ids, na + 1, &ra);
    if (!e) e = pl_session_set(b, ids, na + 1, &rb);
    if (!e) e = pl_session_logits(a, la);
    if (!e) e = pl_session_logits(b, lb);
    CHECK(!e && ra == 1 && rb == 1, "%s: extending ran %lld and %lld ids (%s)", what, (long long)ra,
          (long long)rb, e ? pl_last_error() : "");
    CHECK(!e && !memcmp(la, lb, sizeof(float) * (size_t)V),
          "%s: logits after the cache differ from plain decoding's", what);
    free(la), free(lb);
}

/* ---- column j of a verify pass == a one-column step, bit for bit ---- */

static void check_columns(const pl_model *m, const char *what, int K) {
    int V = pl_model_get_info(m)->n_vocab;
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = 64, o.n_batch = 16, o.n_logits = 16;
    pl_state *a = NULL, *b = NULL;
    int32_t prompt[6] = {1, 403, 407, 261, 378, 432},
            cols[16] = {383, 286, 261, 5, 999 % V, 77, 286, 12, 41, 9, 300, 261, 7, 88, 150, 3};
    float *la = malloc(sizeof(float) * (size_t)V * K), *lb = malloc(sizeof(float) * (size_t)V);
    pl_status e = pl_state_new(m, &o, &a);
    if (!e) e = pl_state_new(m, &o, &b);
    if (!e) e = pl_model_forward(m, a, prompt, 6, 0, false);
    if (!e) e = pl_model_forward(m, b, prompt, 6, 0, false);
    if (!e) e = pl_model_forward(m, a, cols, K, 6, true);
    if (!e) e = pl_be_read(pl_state_logits(a), 0, la, (int64_t)V * K * 4);
    int same = 0;
    for (int j = 0; !e && j < K; j++) {
        e = pl_model_forward(m, b, &cols[j], 1, 6 + j, false);
        if (!e) e = pl_be_read(pl_state_logits(b), 0, lb, (int64_t)V * 4);
        if (!e) same += !memcmp(la + (size_t)j * V, lb, sizeof(float) * (size_t)V);
    }
    CHECK(!e && same == K, "%s: %d of %d verify columns bit-identical to one-column steps (%s)",
          what, same, K, e ? pl_last_error() : "");
    free(la), free(lb);
    pl_state_free(a), pl_state_free(b);
}

/* ---- an oracle drafter: the plain run's ids, with deliberate mistakes ---- */

typedef struct {
    pl_drafter base;
    const int32_t *ref; /* prompt + plain ids */
    int64_t n_ref;
    int call, V;
    int seen_all, seen_first, seen_middle, seen_none; /* acceptance patterns met */
} oracle;

static int oracle_draft(pl_drafter *d, const int32_t *ctx, int64_t n_ctx, int32_t *out, int max) {
    oracle *o = (oracle *)d;
    (void)ctx;
    int pattern = o->call++ % 4, k = max < 5 ? max : 5;
    if (pattern == 3) k = 0; /* none drafted */
    int got = 0;
    for (; got < k && n_ctx + got < o->n_ref; got++) out[got] = o->ref[n_ctx + got];
    if (pattern == 1 && got > 0) out[0] = (out[0] + 1) % o->V; /* first rejected */
    if (pattern == 2 && got > 2) out[2] = (out[2] + 1) % o->V; /* middle rejected */
    return got;
}

static void oracle_feedback(pl_drafter *d, int n_drafted, int n_accepted) {
    oracle *o = (oracle *)d;
    o->seen_all += n_accepted == n_drafted;
    o->seen_first += n_accepted == 0;
    o->seen_middle += n_accepted > 0 && n_accepted < n_drafted;
}

static void oracle_free(pl_drafter *d) {
    (void)d;
}

/* ---- one model on one backend ---- */

static void check_model(const pl_model *m, const char *what, int n, bool oracle_too) {
    int V = pl_model_get_info(m)->n_vocab;
    /* a repetitive prompt: stories260K's "Lily and Tom." four times */
    int32_t prompt[21] = {1};
    const int32_t phrase[5] = {317, 269, 274, 287, 426};
    for (int i = 0; i < 20; i++) prompt[1 + i] = phrase[i % 5] % V;
    int np = 21;
    pl_sampler_params greedy, sampled;
    samplers(&greedy, &sampled);
    pl_session *p = session(m, 1), *q = session(m, 16);
    id_list a = {0}, b = {0};
    pl_gen_stats sa, sb;
    pl_status e = p && q ? PL_OK : PL_ERR;
    for (int smp = 0; !e && smp < 2; smp++) {
        const pl_sampler_params *sp = smp ? &sampled : &greedy;
        pl_drafter *dr = NULL;
        e = pl_drafter_lookup_new(PL_SPEC_MAX, false, &dr);
        if (!e) e = gen(m, p, sp, prompt, np, n, NULL, &a, &sa);
        if (!e) e = gen(m, q, sp, prompt, np, n, dr, &b, &sb);
        pl_drafter_free(dr);
        CHECK(!e && a.n == n && b.n == n && !memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)n),
              "%s, %s: lookup decoding's ids differ from plain decoding's (%s)", what,
              smp ? "sampled" : "greedy", e ? pl_last_error() : "");
        CHECK(!e && sb.n_steps > 0 && sb.n_steps < n && sb.n_decoded == n - 1 &&
                  sb.n_generated == n,
              "%s: %lld passes for %d ids, %lld decoded", what, (long long)sb.n_steps, n,
              (long long)sb.n_decoded);
        if (!e && !smp && !strncmp(what, "stories", 7))
            CHECK(sb.n_accepted > 0 && sb.n_accepted < sb.n_drafted,
                  "%s: on a repetitive prompt %lld of %lld drafts accepted (want some, not all)",
                  what, (long long)sb.n_accepted, (long long)sb.n_drafted);
        if (!e) check_cache(m, p, q, a.ids[n - 1], what);
    }
    for (int smp = 0; oracle_too && !e && smp < 2; smp++) {
        const pl_sampler_params *sp = smp ? &sampled : &greedy;
        int32_t ref[21 + NGEN];
        e = gen(m, p, sp, prompt, np, n, NULL, &a, &sa);
        memcpy(ref, prompt, sizeof(int32_t) * (size_t)np);
        memcpy(ref + np, a.ids, sizeof(int32_t) * (size_t)n);
        oracle o = {.base = {oracle_draft, oracle_feedback, oracle_free},
                    .ref = ref,
                    .n_ref = np + n,
                    .V = V};
        if (!e) e = gen(m, q, sp, prompt, np, n, &o.base, &b, &sb);
        CHECK(!e && b.n == n && !memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)n),
              "%s, %s, oracle drafts: ids differ from plain decoding's (%s)", what,
              smp ? "sampled" : "greedy", e ? pl_last_error() : "");
        CHECK(o.seen_all && o.seen_first && o.seen_middle && sb.n_steps > o.seen_all,
              "%s: acceptance patterns all %d, first rejected %d, middle rejected %d", what,
              o.seen_all, o.seen_first, o.seen_middle);
        if (!e) check_cache(m, p, q, a.ids[n - 1], what);
        /* a stop inside accepted drafts: the cache goes back to the stop */
        o.call = 0;
        b.stop_at = 3; /* the first pass drafts 5 correct ids: id 3 is inside them */
        if (!e) e = gen(m, q, sp, prompt, np, n, &o.base, &b, &sb);
        b.stop_at = 0;
        if (!e) e = gen(m, p, sp, prompt, np, 3, NULL, &a, &sa);
        CHECK(!e && b.n == 3 && sb.n_decoded == 2 && !memcmp(a.ids, b.ids, 3 * sizeof(int32_t)),
              "%s: a stop inside the drafts: %d ids, %lld decoded (%s)", what, b.n,
              (long long)sb.n_decoded, e ? pl_last_error() : "");
        if (!e) check_cache(m, p, q, a.ids[2], what);
    }
    pl_session_free(p), pl_session_free(q);
}

/* ---- the model's own MTP block as the drafter ---- */

static void check_mtp(const pl_model *m, const char *what, int n) {
    int32_t prompt[8] = {51, 270, 220, 386, 298, 74, 310, 291};
    pl_sampler_params greedy, sampled;
    samplers(&greedy, &sampled);
    pl_session *p = session(m, 1), *q = session_opts(m, 16, true);
    id_list a = {0}, b = {0};
    pl_gen_stats sa, sb;
    pl_status e = p && q ? PL_OK : PL_ERR;
    for (int smp = 0; !e && smp < 2; smp++) {
        const pl_sampler_params *sp = smp ? &sampled : &greedy;
        pl_drafter *dr = NULL;
        e = pl_drafter_mtp_new(q, 0, false, &dr);
        if (!e) e = gen(m, p, sp, prompt, 8, n, NULL, &a, &sa);
        if (!e) e = gen(m, q, sp, prompt, 8, n, dr, &b, &sb);
        pl_drafter_free(dr);
        CHECK(!e && a.n == n && b.n == n && !memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)n),
              "%s, %s: MTP decoding's ids differ from plain decoding's (%s)", what,
              smp ? "sampled" : "greedy", e ? pl_last_error() : "");
        /* every pass drafts (depth 3 to 7 while ids are left), none beyond what it checks */
        CHECK(!e && sb.n_steps > 0 && sb.n_drafted >= 3 * (sb.n_steps - 1) &&
                  sb.n_drafted <= 7 * sb.n_steps && sb.n_accepted <= sb.n_drafted &&
                  sb.n_decoded == n - 1 && sb.n_generated == n &&
                  sb.n_steps == n - 1 - sb.n_accepted,
              "%s: %lld passes, %lld of %lld drafts accepted, %lld decoded for %d ids", what,
              (long long)sb.n_steps, (long long)sb.n_accepted, (long long)sb.n_drafted,
              (long long)sb.n_decoded, n);
        if (!e) check_cache(m, p, q, a.ids[n - 1], what);
    }
    pl_session_free(p), pl_session_free(q);
}

/* The depth schedule: each depth probed for PL_MTP_PROBE passes in order (auto: 0 first),
 * then the pick; a session that cannot draft (not made to) gives no drafts, no error. */
static void check_mtp_schedule(const pl_model *m) {
    pl_session *s = session(m, 16);
    for (int gated = 0; s && gated < 2; gated++) {
        pl_drafter *dr = NULL;
        CHECK(pl_drafter_mtp_new(s, 0, gated, &dr) == PL_OK, "%s", pl_last_error());
        int32_t ctx[2] = {1, 2}, out[PL_SPEC_MAX];
        int bad = 0, n_probe = PL_MTP_PROBE * (3 + gated);
        for (int p = 0; dr && p < n_probe + 4; p++) {
            bad += dr->draft(dr, ctx, 2, out, PL_SPEC_MAX) != 0;
            int slot = p / PL_MTP_PROBE - gated; /* -1: the gated probe of depth 0 */
            int want = p >= n_probe ? -1 : slot < 0 ? 0 : 3 + 2 * slot;
            int got = pl_drafter_mtp_depth(dr);
            if (want >= 0)
                bad += got != want;
            else
                bad += got != 0 && got != 3 && got != 5 && got != 7;
            dr->feedback(dr, 0, 0);
        }
        CHECK(dr && !bad, "MTP depth schedule (gated %d): %d wrong passes", gated, bad);
        pl_drafter_free(dr);
    }
    pl_drafter *dr = NULL;
    CHECK(pl_drafter_mtp_new(s, 16, false, &dr) != PL_OK && !dr, "depth 16 accepted");
    pl_session_free(s);
}

static void mtp_models(pl_backend *be, int n_models, int n) {
    static const char *const paths[] = {"fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf",
                                        "fixtures/hf/qwen3_5_moe/qwen3_5_moe-mtp-q8_0.gguf"};
    for (int i = 0; i < n_models; i++) {
        pl_gguf *g = NULL;
        pl_model *m = load(&g, be, paths[i]);
        char what[160];
        snprintf(what, sizeof what, "%s on %s, mtp", strrchr(paths[i], '/') + 1, be->name);
        if (m) check_mtp(m, what, n);
        if (m && i == 0 && !strcmp(be->name, "cpu")) check_mtp_schedule(m);
        pl_model_free(m);
        pl_gguf_free(g);
    }
}

static const char *const cpu_models[] = {
    "models/stories260K.gguf",
    "fixtures/hf/llama/llama-q8_0.gguf",
    "fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf",
    "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf",
    "fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf",
};

static void on_backend(pl_backend *be, const char *const *paths, int n_paths, int n,
                       bool oracle_too) {
    for (int i = 0; i < n_paths; i++) {
        pl_gguf *g = NULL;
        pl_model *m = load(&g, be, paths[i]);
        char what[160];
        snprintf(what, sizeof what, "%s on %s", strrchr(paths[i], '/') + 1, be->name);
        if (m) check_columns(m, what, 8);
        if (m) check_model(m, what, n, oracle_too);
        pl_model_free(m);
        pl_gguf_free(g);
    }
}

static void run_tests(void) {
    pl_backend *cpu = NULL;
    CHECK(pl_cpu_new(2, &cpu) == PL_OK, "%s", pl_last_error());
    if (cpu) on_backend(cpu, cpu_models, 5, NGEN, true);
    if (cpu) mtp_models(cpu, 2, NGEN);
    pl_be_destroy(cpu);

    pl_backend *gpu = gt_backend();
    if (!gpu) return;
    on_backend(gpu, cpu_models, 2, 16, false); /* stories260K and the llama fixture */
    mtp_models(gpu, 1, 16);                    /* the hybrid with its MTP block */
    CHECK(gpu->live_bufs == 0, "%lld buffers leaked", (long long)gpu->live_bufs);
    pl_be_destroy(gpu);

    /* the prefill attention kernel forced on (lavapipe leaves it off): a verify pass of the
     * most columns (1 + 15 drafts) must still take decode's attention, bit for bit */
    pl_gpu_backend_opts fo = {.fa = 1};
    if (pl_gpu_backend_new(&fo, &gpu) != PL_OK) {
        CHECK(0, "GPU backend with fa = 1: %s", pl_last_error());
        return;
    }
    pl_gguf *g = NULL;
    pl_model *m = load(&g, gpu, cpu_models[0]);
    if (m) check_columns(m, "16 columns with the prefill attention kernel on", 16);
    pl_model_free(m);
    pl_gguf_free(g);
    pl_be_destroy(gpu);

    /* several columns a GEMV workgroup (lavapipe leaves it at one): the verify columns
     * (16: two workgroups of 8; 11: 6 + 5) and the 6-column prompt still give one-column
     * steps' bits, on Q8_0 and Q4_0 weights */
    pl_gpu_backend_opts co = {.gemv_cols = 8};
    if (pl_gpu_backend_new(&co, &gpu) != PL_OK) {
        CHECK(0, "GPU backend with gemv_cols = 8: %s", pl_last_error());
        return;
    }
    static const char *const qmodels[2] = {"fixtures/hf/llama/llama-q8_0.gguf",
                                           "models/stories260K-Q4_0.gguf"};
    for (int i = 0; i < 2; i++) {
        m = load(&g, gpu, qmodels[i]);
        if (m) check_columns(m, "16 columns, 8 a GEMV workgroup", 16);
        if (m) check_columns(m, "11 columns, 6 a GEMV workgroup", 11);
        pl_model_free(m);
        pl_gguf_free(g);
    }
    pl_be_destroy(gpu);
}
