/* session_test.c - conversations that reuse their KV cache give exactly what a fresh run
 * over the whole text gives, and run only the new ids; batching does not change results;
 * running past the context is a clear error. Model: stories260K, prompt ids from the
 * llama.cpp fixture (BOS "Once upon a time"); the first turn's greedy ids are checked
 * against llama.cpp's. */
#include "cpu/cpu.h"
#include "model/fixture.h"
#include "runtime/generate.h"
#include "test.h"

typedef struct {
    int32_t ids[256];
    int n;
} id_list;

static bool collect(void *ud, int32_t id) {
    id_list *l = ud;
    if (l->n < 256) l->ids[l->n++] = id;
    return true;
}

static pl_session *session(const pl_model *m, int n_ctx, int n_batch) {
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = n_ctx;
    o.n_batch = n_batch;
    pl_session *s = NULL;
    CHECK(pl_session_new(m, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

static pl_sampler *greedy_sampler(int n_vocab) {
    pl_sampler_params p = pl_sampler_defaults();
    p.temp = 0;
    pl_sampler *smp = NULL;
    pl_sampler_new(&p, n_vocab, &smp);
    return smp;
}

static bool same_ids(const id_list *a, const id_list *b) {
    return a->n == b->n && !memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t)a->n);
}

static void test_two_turns(const pl_model *m, const char *json) {
    const int V = pl_model_get_info(m)->n_vocab;
    const char *pp[] = {"stories260K.gguf", "prompt_ids"},
               *gp[] = {"stories260K.gguf", "generated_ids"};
    int32_t prompt[8], want[64];
    int np = fixture_ids(json, pp, 2, prompt, 8);
    CHECK(np == 5 && fixture_ids(json, gp, 2, want, 64) == 64, "fixture");
    pl_sampler *smp = greedy_sampler(V);
    pl_session *chat = session(m, 256, 512 > 256 ? 256 : 512);
    pl_gen_stats st;

    /* turn 1 */
    id_list g1 = {0};
    pl_gen_opts o = {.n_predict = 20, .on_token = collect, .ud = &g1};
    CHECK(pl_generate(chat, smp, prompt, np, &o, &st) == PL_OK, "%s", pl_last_error());
    CHECK(st.n_prompt_run == np && g1.n == 20, "turn 1 ran %lld, made %d",
          (long long)st.n_prompt_run, g1.n);
    CHECK(!memcmp(g1.ids, want, 20 * sizeof(int32_t)), "turn 1 differs from llama.cpp");

    /* turn 2: the whole text so far plus new ids (a "user turn") */
    int32_t full[64];
    int nf = 0;
    memcpy(full, prompt, sizeof(int32_t) * (size_t)np);
    nf += np;
    memcpy(full + nf, g1.ids, sizeof(int32_t) * (size_t)g1.n);
    nf += g1.n;
    const int32_t user[] = {426, 13, 438, 310}; /* ". \n Lily 's" as ids */
    memcpy(full + nf, user, sizeof user);
    nf += 4;
    id_list g2 = {0};
    o.ud = &g2;
    CHECK(pl_generate(chat, smp, full, nf, &o, &st) == PL_OK, "%s", pl_last_error());
    /* cached: the prompt and every generated id but the last (never fed back) */
    CHECK(st.n_prompt_run == 4 + 1, "turn 2 ran %lld ids, expected the 5 new ones",
          (long long)st.n_prompt_run);
    float reused[512], fresh_l[512];
    /* logits after the turn-2 prompt, both ways, must be bit-identical */
    pl_session *fresh = session(m, 256, 256);
    id_list g2f = {0};
    o.ud = &g2f;
    CHECK(pl_generate(fresh, smp, full, nf, &o, &st) == PL_OK, "%s", pl_last_error());
    CHECK(st.n_prompt_run == nf, "fresh run ran %lld", (long long)st.n_prompt_run);
    CHECK(same_ids(&g2, &g2f), "turn 2 differs from a fresh run over the same text");

    /* the same with a batch of 3 (prompt split into batches), compared logits bit for bit */
    pl_session *small = session(m, 256, 3);
    int64_t ran;
    CHECK(pl_session_set(small, full, nf, &ran) == PL_OK && ran == nf, "batched set");
    CHECK(pl_session_set(fresh, full, nf, &ran) == PL_OK && ran == 1, "re-set ran %lld",
          (long long)ran);
    pl_session_logits(small, reused);
    pl_session_logits(fresh, fresh_l);
    CHECK(!memcmp(reused, fresh_l, sizeof reused), "batch size changed the logits");

    /* a changed history: only what follows the first difference runs */
    full[10] = 300;
    CHECK(pl_session_set(small, full, nf, &ran) == PL_OK && ran == nf - 10, "edit ran %lld",
          (long long)ran);
    pl_session_free(small);
    pl_session_free(fresh);
    pl_session_free(chat);
    pl_sampler_free(smp);
}

static void test_sampled_reproducible(const pl_model *m) {
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    id_list a = {0}, b = {0};
    for (int run = 0; run < 2; run++) {
        pl_sampler_params p = pl_sampler_defaults();
        p.seed = 1234;
        p.repeat_penalty = 1.1f;
        pl_sampler *smp = NULL;
        pl_sampler_new(&p, pl_model_get_info(m)->n_vocab, &smp);
        pl_session *s = session(m, 128, 64);
        pl_gen_opts o = {.n_predict = 40, .on_token = collect, .ud = run ? &b : &a};
        pl_gen_stats st;
        CHECK(pl_generate(s, smp, prompt, 5, &o, &st) == PL_OK, "%s", pl_last_error());
        pl_session_free(s);
        pl_sampler_free(smp);
    }
    CHECK(a.n == 40 && same_ids(&a, &b), "same seed, different ids");
}

/* Sampling through the backend's top-k (pl_session_pick with the default settings) gives
 * the ids of sampling from every logit with the same seed. */
static void test_sampled_top_path(const pl_model *m) {
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    int V = pl_model_get_info(m)->n_vocab;
    pl_sampler_params p = pl_sampler_defaults();
    p.seed = 77;
    pl_sampler *a = NULL, *b = NULL;
    pl_sampler_new(&p, V, &a), pl_sampler_new(&p, V, &b);
    CHECK(pl_sampler_top_count(a) == 41, "defaults should take the top-k path");
    pl_session *s1 = session(m, 128, 64), *s2 = session(m, 128, 64);
    float *logits = malloc(sizeof(float) * (size_t)V);
    int64_t nr;
    int same = 0, n = 0;
    bool ok = s1 && s2 && logits && pl_session_set(s1, prompt, 5, &nr) == PL_OK &&
              pl_session_set(s2, prompt, 5, &nr) == PL_OK;
    for (int t = 0; ok && t < 40; t++, n++) {
        int32_t x = -1, y = -1;
        const int32_t *hist = pl_session_ids(s2, &nr); /* the draw is keyed by position nr */
        ok = pl_session_pick(s1, a, &x) == PL_OK && pl_session_logits(s2, logits) == PL_OK &&
             pl_sampler_pick(b, logits, hist, nr, &y) == PL_OK;
        same += ok && x == y;
        ok = ok && pl_session_push(s1, x) == PL_OK && pl_session_push(s2, x) == PL_OK;
    }
    CHECK(ok && same == 40, "top-k path: %d of %d ids equal the full-logits path (%s)", same, n,
          ok ? "" : pl_last_error());
    free(logits);
    pl_session_free(s1), pl_session_free(s2);
    pl_sampler_free(a), pl_sampler_free(b);
}

static void test_context_limits(const pl_model *m) {
    pl_sampler *smp = greedy_sampler(pl_model_get_info(m)->n_vocab);
    pl_session *s = session(m, 8, 8);
    int32_t ids[9] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
    int64_t ran;
    CHECK(pl_session_set(s, ids, 9, &ran) != PL_OK && strstr(pl_last_error(), "context"),
          "a 9-id prompt in a context of 8: %s", pl_last_error());
    id_list out = {0};
    pl_gen_opts o = {.n_predict = 10, .on_token = collect, .ud = &out};
    pl_gen_stats st;
    pl_status r = pl_generate(s, smp, ids, 5, &o, &st);
    CHECK(r != PL_OK && strstr(pl_last_error(), "context full"), "past the context: %s",
          pl_last_error());
    /* 5 prompt ids + 3 fed back fill the 8 positions; the 4th generated id cannot be fed */
    CHECK(st.n_generated == 4 && st.n_decoded == 3, "stopped after %lld generated",
          (long long)st.n_generated);
    pl_session_free(s);
    pl_sampler_free(smp);
}

static void run_tests(void) {
    char *json = fixture_text(test_shared("fixtures/llamacpp-b10573/greedy_once_upon_a_time.json"));
    pl_backend *be = NULL;
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    CHECK(json && pl_cpu_new(1, &be) == PL_OK, "setup");
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    if (!json || !be || !g) return;
    CHECK(pl_model_load(g, be, NULL, &m) == PL_OK, "%s", pl_last_error());
    if (m) {
        test_two_turns(m, json);
        test_sampled_reproducible(m);
        test_sampled_top_path(m);
        test_context_limits(m);
    }
    pl_model_free(m);
    pl_gguf_free(g);
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    free(json);
}
