/* chat_session_test.c - a two-turn chat with the real Qwen3 tokenizer and chat template
 * (fixtures/hf/qwen3_realtok): the second turn, which continues the first turn's session,
 * gives exactly the ids of a fresh run over the whole rendered conversation, and runs only
 * the ids after the prefix it shares with what the cache holds (the first prompt and the
 * reply). */
#include "cpu/cpu.h"
#include "runtime/chat_ids.h"
#include "runtime/generate.h"
#include "test.h"

typedef struct {
    const pl_tokenizer *tok;
    int32_t ids[64];
    int n;
} reply;

static bool collect(void *ud, int32_t id) {
    reply *r = ud;
    if (pl_tok_is_eog(r->tok, id)) return false;
    if (r->n < 64) r->ids[r->n++] = id;
    return true;
}

static pl_session *new_session(const pl_model *m) {
    pl_state_opts o = pl_state_opts_default(m);
    o.n_ctx = 256;
    o.n_batch = 64;
    pl_session *s = NULL;
    CHECK(pl_session_new(m, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

static void run_tests(void) {
    pl_gguf *g = NULL;
    pl_backend *be = NULL;
    pl_model *m = NULL;
    pl_tokenizer *tok = NULL;
    pl_sampler *smp = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf"), &g) ==
              PL_OK,
          "%s", pl_last_error());
    CHECK(g && pl_cpu_new(2, &be) == PL_OK && pl_model_load(g, be, NULL, &m) == PL_OK &&
              pl_tok_load(g, &tok) == PL_OK,
          "%s", pl_last_error());
    pl_sampler_params sp = pl_sampler_defaults();
    sp.temp = 0;
    if (!m || !tok || pl_sampler_new(&sp, pl_model_get_info(m)->n_vocab, &smp)) return;

    pl_chat_opts co = {.add_generation_prompt = true, .enable_thinking = true};
    pl_chat_msg msgs[3] = {{"user", "Hello there, who are you?"}};
    int32_t *ids1 = NULL, *ids2 = NULL;
    int64_t n1 = 0, n2 = 0;
    CHECK(pl_chat_ids(tok, msgs, 1, &co, &ids1, &n1) == PL_OK, "%s", pl_last_error());
    CHECK(n1 > 4 && ids1[0] == 151644, "turn 1 starts with <|im_start|>: %d", n1 ? ids1[0] : -1);

    /* turn 1 */
    pl_session *chat = new_session(m);
    reply r1 = {.tok = tok};
    pl_gen_opts go = {.n_predict = 12, .on_token = collect, .ud = &r1};
    pl_gen_stats st;
    CHECK(pl_generate(chat, smp, ids1, n1, &go, &st) == PL_OK, "%s", pl_last_error());
    char *text = NULL;
    CHECK(pl_tok_decode(tok, r1.ids, r1.n, false, &text, NULL) == PL_OK, "%s", pl_last_error());

    /* turn 2: the whole conversation rendered again */
    msgs[1] = (pl_chat_msg){"assistant", text ? text : ""};
    msgs[2] = (pl_chat_msg){"user", "And what can you do?"};
    CHECK(pl_chat_ids(tok, msgs, 3, &co, &ids2, &n2) == PL_OK, "%s", pl_last_error());
    int64_t n_cached;
    const int32_t *cached = pl_session_ids(chat, &n_cached);
    int64_t shared = 0;
    while (shared < n_cached && shared < n2 && cached[shared] == ids2[shared]) shared++;
    CHECK(shared >= n1, "the first prompt (%lld ids) is not a prefix of turn 2 (shared %lld)",
          (long long)n1, (long long)shared);
    reply r2 = {.tok = tok}, fresh = {.tok = tok};
    go.ud = &r2;
    CHECK(pl_generate(chat, smp, ids2, n2, &go, &st) == PL_OK, "%s", pl_last_error());
    CHECK(st.n_prompt_run == n2 - shared, "turn 2 ran %lld ids, %lld are new",
          (long long)st.n_prompt_run, (long long)(n2 - shared));
    if (getenv("POOLED_TEST_VERBOSE"))
        fprintf(
            stderr,
            "turn 1: %lld ids, reply %d; turn 2: %lld ids, %lld cached, %lld shared, ran %lld\n",
            (long long)n1, r1.n, (long long)n2, (long long)n_cached, (long long)shared,
            (long long)st.n_prompt_run);

    pl_session *s2 = new_session(m);
    go.ud = &fresh;
    CHECK(pl_generate(s2, smp, ids2, n2, &go, &st) == PL_OK && st.n_prompt_run == n2, "%s",
          pl_last_error());
    CHECK(r2.n > 0 && r2.n == fresh.n && !memcmp(r2.ids, fresh.ids, sizeof(int32_t) * (size_t)r2.n),
          "turn 2 (%d ids) differs from a fresh run over the conversation (%d ids)", r2.n, fresh.n);

    pl_session_free(s2);
    pl_session_free(chat);
    free(text);
    free(ids1);
    free(ids2);
    pl_sampler_free(smp);
    pl_tok_free(tok);
    pl_model_free(m);
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    pl_gguf_free(g);
}
