/* api_test.c - the public API (include/pooled.h) on stories260K and a synthetic ChatML
 * model: versions, errors, model info, tokens, chat rendering, generation with a callback
 * that stops, stop strings, max_tokens, the end of the context, cancel from another thread,
 * and option structs of an older (smaller) size. Only pooled.h is used. */
#include <pooled.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "test.h"

typedef struct {
    char text[8192];
    size_t n;
    int calls, stop_at;
    int last_id;
    atomic_int *started, *cancelled; /* the cancel test's handshake */
} sink;

static int collect(void *user, int32_t id, const char *text, size_t len) {
    sink *k = user;
    CHECK(text[len] == 0, "text not NUL-terminated");
    if (k->n + len < sizeof k->text) memcpy(k->text + k->n, text, len), k->n += len;
    k->text[k->n] = 0;
    k->calls++;
    k->last_id = id;
    if (k->started && !atomic_load(k->started)) { /* wait for the other thread's cancel */
        atomic_store(k->started, 1);
        for (int i = 0; i < 5000 && !atomic_load(k->cancelled); i++) usleep(1000);
    }
    return k->stop_at && k->calls >= k->stop_at;
}

typedef struct {
    int calls, backwards;
    uint64_t done, total;
} progress_seen;

static void on_progress(void *user, uint64_t done, uint64_t total) {
    progress_seen *p = user;
    if (p->calls++ && (done < p->done || total != p->total)) p->backwards++;
    p->done = done, p->total = total;
}

static void *canceller(void *arg) {
    void **a = arg;
    atomic_int *started = a[1], *cancelled = a[2];
    for (int i = 0; i < 5000 && !atomic_load(started); i++) usleep(1000);
    pooled_session_cancel(a[0]);
    atomic_store(cancelled, 1);
    return NULL;
}

/* n greedy tokens after BOS (id 1) on a new session of m, their text into out: 1 if all
 * of it worked. */
static int greedy_after_bos(pooled_model *m, int n, sink *out) {
    pooled_session *s = NULL;
    pooled_sample_opts so = pooled_sample_opts_default();
    so.temperature = 0, so.max_tokens = n, so.ignore_eos = 1;
    pooled_result r = {.size = sizeof r};
    int32_t bos = 1;
    int ok = pooled_session_new(m, &s) == POOLED_OK &&
             pooled_generate(s, &bos, 1, &so, collect, out, &r) == POOLED_OK && r.n_gen == n;
    pooled_session_free(s);
    return ok;
}

/* The greedy text of n ids after a repetitive prompt (lookup drafts find it) with spec,
 * from file opened with mo (its n_stages and spec sizing), into text; the counters in *r. */
static bool greedy_text(const char *file, const pooled_model_opts *mo, int spec, int n, char *text,
                        size_t cap, pooled_result *r) {
    pooled_model *m = NULL;
    pooled_session *s = NULL;
    sink out = {0};
    pooled_sample_opts so = pooled_sample_opts_default();
    so.temperature = 0, so.max_tokens = n, so.ignore_eos = 1, so.spec = spec;
    *r = (pooled_result){.size = sizeof *r};
    int32_t prompt[8] = {1, 2, 3, 1, 2, 3, 1, 2};
    bool ok = pooled_model_open(test_shared(file), mo, &m) == POOLED_OK &&
              pooled_session_new(m, &s) == POOLED_OK &&
              pooled_generate(s, prompt, 8, &so, collect, &out, r) == POOLED_OK && r->n_gen == n;
    snprintf(text, cap, "%s", out.text);
    pooled_session_free(s);
    pooled_model_close(m);
    return ok;
}

/* Since 0.3: the layers as a chain of stages, speculation with the model's MTP block and
 * the counters of a speculative generation, the same text as plain decoding. */
static void check_stages_and_mtp(void) {
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu", mo.n_threads = 2, mo.n_ctx = 128;
    char plain[8192], got[8192];
    pooled_result r0, r;
    CHECK(
        greedy_text("models/stories260K.gguf", &mo, POOLED_SPEC_OFF, 24, plain, sizeof plain, &r0),
        "plain: %s", pooled_last_error());
    CHECK(r0.n_steps == r0.n_decoded && r0.n_drafted == 0 && r0.n_decoded > 0,
          "plain counters: %lld steps, %lld decoded", (long long)r0.n_steps,
          (long long)r0.n_decoded);
    mo.n_stages = 3, mo.chain_frame = 4; /* the prompt in frames of 4 through 3 stages */
    CHECK(greedy_text("models/stories260K.gguf", &mo, POOLED_SPEC_OFF, 24, got, sizeof got, &r) &&
              !strcmp(got, plain),
          "3 stages: '%s' against '%s' (%s)", got, plain, pooled_last_error());
    CHECK(
        greedy_text("models/stories260K.gguf", &mo, POOLED_SPEC_LOOKUP, 24, got, sizeof got, &r) &&
            !strcmp(got, plain) && r.n_drafted > 0 && r.n_steps < r.n_decoded,
        "3 stages, lookup: '%s' (%lld drafted, %lld steps)", got, (long long)r.n_drafted,
        (long long)r.n_steps);
    mo.n_stages = 64;
    pooled_model *m = NULL;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "n_stages"),
          "n_stages 64: %s", pooled_last_error());
    mo.n_stages = 6; /* more than the layers */
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) != POOLED_OK &&
              strstr(pooled_last_error(), "only 5 layers"),
          "n_stages 6: %s", pooled_last_error());
    mo.n_stages = 0, mo.chain_frame = 0;
    /* MTP: refused on a model without the block, at open; a model opened for lookup only
     * refuses an MTP generation; with the block, the text of plain decoding */
    mo.spec = POOLED_SPEC_MTP;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) != POOLED_OK &&
              strstr(pooled_last_error(), "no MTP block"),
          "spec mtp without the block: %s", pooled_last_error());
    const char *q = "fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf";
    mo.spec = POOLED_SPEC_OFF;
    CHECK(greedy_text(q, &mo, POOLED_SPEC_OFF, 16, plain, sizeof plain, &r0), "qwen3_5: %s",
          pooled_last_error());
    mo.spec = POOLED_SPEC_LOOKUP;
    CHECK(!greedy_text(q, &mo, POOLED_SPEC_MTP, 16, got, sizeof got, &r) &&
              strstr(pooled_last_error(), "not opened for it"),
          "mtp on a lookup model: %s", pooled_last_error());
    for (int k = 0; k < 2; k++) {
        mo.spec = k ? POOLED_SPEC_AUTO : POOLED_SPEC_MTP;
        CHECK(
            greedy_text(q, &mo, k ? POOLED_SPEC_AUTO : POOLED_SPEC_MTP, 16, got, sizeof got, &r) &&
                !strcmp(got, plain) && (k || r.n_drafted > 0),
            "%s: '%s' against '%s', %lld drafted (%s)", k ? "auto" : "mtp", got, plain,
            (long long)r.n_drafted, pooled_last_error());
    }
}

static void check_generation(pooled_model *m) {
    pooled_session *s = NULL;
    CHECK(pooled_session_new(m, &s) == POOLED_OK, "%s", pooled_last_error());
    if (!s) return;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(pooled_tokenize(m, "Once upon a time", 16, 1, 0, &ids, &n) == POOLED_OK && n > 1, "%s",
          pooled_last_error());
    pooled_sample_opts so = pooled_sample_opts_default();
    so.temperature = 0;
    so.max_tokens = 48;
    so.ignore_eos = 1;
    sink full = {0};
    pooled_result r = {.size = sizeof r};
    CHECK(pooled_generate(s, ids, n, &so, collect, &full, &r) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(r.n_gen == 48 && r.stop_reason == POOLED_STOP_LENGTH && r.n_prompt == (int64_t)n,
          "n_gen %lld reason %d", (long long)r.n_gen, r.stop_reason);
    CHECK(full.n > 20, "text: '%s'", full.text);
    /* the same again reuses the whole prompt from the cache but its last id */
    sink again = {0};
    CHECK(pooled_generate(s, ids, n, &so, collect, &again, &r) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(!strcmp(again.text, full.text) && r.n_prompt_run == 1, "run %lld, '%s' vs '%s'",
          (long long)r.n_prompt_run, again.text, full.text);
    /* the callback stops it */
    sink three = {.stop_at = 3};
    CHECK(pooled_generate(s, ids, n, &so, collect, &three, &r) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(r.n_gen == 3 && r.stop_reason == POOLED_STOP_CALLBACK && three.calls == 3,
          "n_gen %lld reason %d", (long long)r.n_gen, r.stop_reason);
    /* a stop string from the middle of the text: everything before it, nothing after */
    char stop[8];
    snprintf(stop, sizeof stop, "%.4s", full.text + 20);
    const char *stops[] = {"no such text at all", stop};
    so.stop = stops;
    so.n_stop = 2;
    sink cut = {0};
    CHECK(pooled_generate(s, ids, n, &so, collect, &cut, &r) == POOLED_OK, "%s",
          pooled_last_error());
    size_t at = (size_t)(strstr(full.text, stop) - full.text);
    CHECK(r.stop_reason == POOLED_STOP_STRING && cut.n == at && !memcmp(cut.text, full.text, at),
          "stop '%s': reason %d, got '%s' of '%s'", stop, r.stop_reason, cut.text, full.text);
    so.n_stop = 0;
    so.stop = NULL;
    /* the end of the context (64) is a stop, not an error */
    so.max_tokens = -1;
    sink all = {0};
    CHECK(pooled_generate(s, ids, n, &so, collect, &all, &r) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(r.stop_reason == POOLED_STOP_LENGTH && r.n_gen == 64 - (int64_t)n + 1, "n_gen %lld",
          (long long)r.n_gen);
    /* cancel from another thread while the first id is being handed over */
    atomic_int started = 0, cancelled = 0;
    void *args[3] = {s, &started, &cancelled};
    pthread_t th;
    sink c = {.started = &started, .cancelled = &cancelled};
    pthread_create(&th, NULL, canceller, args);
    CHECK(pooled_generate(s, ids, n, &so, collect, &c, &r) == POOLED_OK, "%s", pooled_last_error());
    pthread_join(th, NULL);
    CHECK(r.stop_reason == POOLED_STOP_CANCELLED && r.n_gen == 1, "reason %d after %lld ids",
          r.stop_reason, (long long)r.n_gen);
    /* the flag is cleared: the next call runs */
    sink after = {0};
    so.max_tokens = 4;
    CHECK(pooled_generate(s, ids, n, &so, collect, &after, &r) == POOLED_OK &&
              r.stop_reason == POOLED_STOP_LENGTH && r.n_gen == 4,
          "reason %d", r.stop_reason);
    /* an older, smaller options struct: the fields it lacks take their defaults */
    pooled_sample_opts old = so;
    old.size = offsetof(pooled_sample_opts, seed);
    old.temperature = 0;
    sink o = {.stop_at = 2};
    CHECK(pooled_generate(s, ids, n, &old, collect, &o, &r) == POOLED_OK &&
              r.stop_reason == POOLED_STOP_CALLBACK,
          "%s", pooled_last_error());
    /* bad input: one line, no crash */
    old.size = 0;
    CHECK(pooled_generate(s, ids, n, &old, collect, &o, &r) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "size"),
          "%s", pooled_last_error());
    int32_t bad = 1 << 30;
    CHECK(pooled_generate(s, &bad, 1, &so, NULL, NULL, NULL) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "vocabulary"),
          "%s", pooled_last_error());
    CHECK(pooled_generate(s, ids, 0, &so, NULL, NULL, NULL) == POOLED_ERR_ARG, "empty prompt");
    const char *huge[17] = {0};
    so.stop = huge;
    so.n_stop = 17;
    CHECK(pooled_generate(s, ids, n, &so, NULL, NULL, NULL) == POOLED_ERR_ARG, "17 stops");
    pooled_free(ids);
    pooled_session_free(s);
}

static void check_chat(void) {
    char path[600], cmd[3000];
    snprintf(path, sizeof path, "%s/chatml.gguf", test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "%s synth --preset qwen3-0.6b --layers 1 --vocab 300 -o '%s' >/dev/null 2>&1",
             test_pooled_bin(), path);
    CHECK(system(cmd) == 0, "%s", cmd);
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu";
    pooled_model *m = NULL;
    CHECK(pooled_model_open(path, &mo, &m) == POOLED_OK, "%s", pooled_last_error());
    if (!m) return;
    pooled_message msgs[] = {{"system", "Be brief."}, {"user", "Hi there"}};
    pooled_chat_opts co = pooled_chat_opts_default();
    co.no_think = 1;
    char *text = NULL;
    CHECK(pooled_chat_render(m, msgs, 2, &co, &text) == POOLED_OK, "%s", pooled_last_error());
    /* what `pooled template` makes of the same conversation */
    char json[600], out[600];
    snprintf(json, sizeof json, "%s/msgs.json", test_tmpdir());
    snprintf(out, sizeof out, "%s/tmpl.txt", test_tmpdir());
    FILE *f = fopen(json, "w");
    if (f) {
        fputs("[{\"role\":\"system\",\"content\":\"Be brief.\"},"
              "{\"role\":\"user\",\"content\":\"Hi there\"}]",
              f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s template -m '%s' --messages '%s' --no-thinking >'%s'",
             test_pooled_bin(), path, json, out);
    CHECK(system(cmd) == 0, "%s", cmd);
    char want[4096] = {0};
    f = fopen(out, "r");
    if (f) {
        size_t r = fread(want, 1, sizeof want - 1, f);
        want[r] = 0;
        fclose(f);
    }
    CHECK(text && !strcmp(text, want), "render '%s', template '%s'", text ? text : "", want);
    CHECK(text && strstr(text, "<|im_start|>user\nHi there"), "'%s'", text ? text : "");
    /* the ids: the rendered text with its special tokens parsed */
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(pooled_chat_tokenize(m, msgs, 2, &co, &a, &na) == POOLED_OK, "%s", pooled_last_error());
    CHECK(text && pooled_tokenize(m, text, strlen(text), 0, 1, &b, &nb) == POOLED_OK, "%s",
          pooled_last_error());
    CHECK(na > 0 && na == nb && a && b && !memcmp(a, b, na * sizeof *a), "%zu vs %zu ids", na, nb);
    pooled_message bad[] = {{"user", NULL}};
    char *t2 = NULL;
    CHECK(pooled_chat_render(m, bad, 1, NULL, &t2) == POOLED_ERR_ARG && !t2, "NULL content");
    pooled_free(a);
    pooled_free(b);
    pooled_free(text);
    pooled_model_close(m);
}

static void run_tests(void) {
    check_stages_and_mtp();
    int ma = -1, mi = -1, pa = -1;
    const char *v = pooled_version(&ma, &mi, &pa);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", POOLED_VERSION_MAJOR, POOLED_VERSION_MINOR,
             POOLED_VERSION_PATCH);
    CHECK(!strcmp(v, want) && ma == POOLED_VERSION_MAJOR && mi == POOLED_VERSION_MINOR &&
              pa == POOLED_VERSION_PATCH,
          "%s", v);

    pooled_model *m = NULL;
    CHECK(pooled_model_open("/nonexistent/model.gguf", NULL, &m) != POOLED_OK && !m, "opened");
    CHECK(strstr(pooled_last_error(), "/nonexistent/model.gguf") &&
              !strchr(pooled_last_error(), '\n'),
          "%s", pooled_last_error());
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "vulkan";
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_ERR_ARG,
          "backend vulkan");
    mo.backend = "cpu";
    mo.n_ctx = 64;
    mo.n_threads = 2;
    mo.kv_type = 3;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "POOLED_KV_Q8"),
          "kv_type 3: %s", pooled_last_error());
    mo.kv_type = POOLED_KV_Q8; /* the int8 cache: a session on it generates */
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_OK, "%s",
          pooled_last_error());
    if (m) {
        sink out = {0};
        CHECK(greedy_after_bos(m, 8, &out), "kv q8: %s", pooled_last_error());
        pooled_model_close(m);
        m = NULL;
    }
    mo.kv_type = POOLED_KV_F16;
    /* gpu_options: an unknown setting or a malformed item fails the open, on any backend */
    mo.gpu_options = "fuse=0;bogus=1";
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_ERR_ARG &&
              !m && strstr(pooled_last_error(), "unknown setting 'bogus'"),
          "gpu_options bogus: %s", pooled_last_error());
    mo.gpu_options = "fuse";
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_ERR_ARG &&
              !m && strstr(pooled_last_error(), "NAME=VALUE"),
          "gpu_options fuse: %s", pooled_last_error());
    mo.gpu_options = " fuse=0 ; mc=4,16 ;";
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_OK, "%s",
          pooled_last_error());
    pooled_model_close(m);
    m = NULL;
    mo.gpu_options = NULL;
    /* cpu_weights: the CPU backend's copy or the mapped file, said in the backend line,
     * the same text either way; out of range refused */
    mo.cpu_weights = 2;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "cpu_weights"),
          "cpu_weights 2: %s", pooled_last_error());
    char texts[2][8192];
    for (int k = 0; k < 2; k++) {
        mo.cpu_weights = k ? 1 : -1;
        texts[k][0] = 0;
        CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_OK,
              "cpu_weights %d: %s", mo.cpu_weights, pooled_last_error());
        if (!m) continue;
        pooled_model_info wi = {.size = sizeof wi};
        CHECK(pooled_model_get_info(m, &wi) == POOLED_OK &&
                  strstr(wi.backend, k ? "weights copied" : "weights mapped"),
              "cpu_weights %d: '%s'", mo.cpu_weights, wi.backend);
        sink out = {0};
        CHECK(greedy_after_bos(m, 12, &out), "cpu_weights %d: %s", mo.cpu_weights,
              pooled_last_error());
        snprintf(texts[k], sizeof texts[k], "%s", out.text);
        pooled_model_close(m);
        m = NULL;
    }
    CHECK(texts[0][0] && !strcmp(texts[0], texts[1]), "copied '%s' mapped '%s'", texts[1],
          texts[0]);
    mo.cpu_weights = 0;
    /* the load's progress: called, never backwards, ending at its total */
    progress_seen ps = {0};
    mo.progress = on_progress, mo.progress_user = &ps;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &m) == POOLED_OK, "%s",
          pooled_last_error());
    if (!m) return;
    CHECK(ps.calls > 0 && !ps.backwards && ps.total > 0 && ps.done == ps.total,
          "progress: %d calls, %llu of %llu, backwards %d", ps.calls, (unsigned long long)ps.done,
          (unsigned long long)ps.total, ps.backwards);
    mo.progress = NULL;
    pooled_model_info in = {.size = sizeof in};
    CHECK(pooled_model_get_info(m, &in) == POOLED_OK, "%s", pooled_last_error());
    CHECK(!strcmp(in.arch, "llama") && in.n_ctx == 64 && in.n_vocab == 512 && in.bos == 1 &&
              in.eos == 2 && in.n_ctx_train > 0 && !strncmp(in.backend, "cpu", 3),
          "%s ctx %d vocab %d bos %d eos %d '%s'", in.arch, in.n_ctx, in.n_vocab, in.bos, in.eos,
          in.backend);
    /* since 0.3: what the load report says */
    CHECK(in.weight_bytes > 0 && !strcmp(in.weight_type, "f32") && in.n_expert == 0 &&
              in.kv_type == POOLED_KV_F16 && !in.nonfinite[0] && !in.note[0],
          "%llu bytes '%s', %d experts, kv %d, nonfinite '%s', note '%s'",
          (unsigned long long)in.weight_bytes, in.weight_type, in.n_expert, in.kv_type,
          in.nonfinite, in.note);
    pooled_model_stats mst = {.size = sizeof mst};
    CHECK(pooled_model_get_stats(m, &mst) == POOLED_OK && !mst.batched && !mst.n_batched_steps,
          "stats of n_parallel 0: batched %d, %llu steps", mst.batched,
          (unsigned long long)mst.n_batched_steps);
    CHECK(pooled_model_get_stats(m, NULL) == POOLED_ERR_ARG, "stats NULL");
    CHECK(pooled_token_is_eog(m, in.eos) && !pooled_token_is_eog(m, 100) &&
              !pooled_token_is_eog(m, -5),
          "eog");
    /* an older info struct: only its bytes are written */
    struct {
        pooled_model_info in;
        int canary;
    } small;
    memset(&small, 0x5a, sizeof small);
    small.in.size = offsetof(pooled_model_info, n_ctx_train);
    CHECK(pooled_model_get_info(m, &small.in) == POOLED_OK && !strcmp(small.in.arch, "llama") &&
              small.in.size == offsetof(pooled_model_info, n_ctx_train) &&
              ((unsigned char *)&small.in)[offsetof(pooled_model_info, n_ctx_train)] == 0x5a,
          "wrote past size");
    /* tokens: text -> ids -> text */
    int32_t *ids = NULL;
    size_t n = 0;
    const char *text = "Lily saw a big dog.";
    CHECK(pooled_tokenize(m, text, strlen(text), 0, 0, &ids, &n) == POOLED_OK && n > 2, "%s",
          pooled_last_error());
    char *back = NULL;
    size_t len = 0;
    CHECK(pooled_detokenize(m, ids, n, 0, &back, &len) == POOLED_OK && back &&
              !strcmp(back, text) && len == strlen(text),
          "'%s'", back ? back : "");
    char *piece = NULL;
    CHECK(
        pooled_token_piece(m, ids[0], 0, &piece, &len) == POOLED_OK && piece &&
            !strncmp(text, piece[0] == ' ' ? piece + 1 : piece, strlen(piece) - (piece[0] == ' ')),
        "piece '%s'", piece ? piece : "");
    int32_t bad = 99999;
    char *none = NULL;
    CHECK(pooled_detokenize(m, &bad, 1, 0, &none, NULL) == POOLED_ERR_ARG && !none, "bad id");
    CHECK(pooled_token_piece(m, -1, 0, &none, NULL) != POOLED_OK && !none, "bad piece id");
    pooled_free(ids);
    pooled_free(back);
    pooled_free(piece);
    /* no chat template and no known markers: one line */
    pooled_message msg = {"user", "hi"};
    char *chat = NULL;
    CHECK(pooled_chat_render(m, &msg, 1, NULL, &chat) != POOLED_OK && !chat &&
              strstr(pooled_last_error(), "chat template"),
          "%s", pooled_last_error());
    check_generation(m);
    pooled_model_close(m);
    check_chat();
}
