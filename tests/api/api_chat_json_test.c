/* api_chat_json_test.c - the public API's conversations as JSON (pooled_chat_render_json,
 * _tokenize_json: tools, tool calls, tool results), a template of the caller's
 * (template_source) and vocab_only models, on the qwen3_realtok fixture (Qwen3's own chat
 * template and vocabulary) and stories260K. Only pooled.h is used. */
#include <pooled.h>

#include "test.h"

#define REALTOK "fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf"

static const char *CONV = "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
                          " {\"role\": \"user\", \"content\": \"Hi there\"}]";
static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\"}}, \"required\": [\"city\"]}}}]";
static const char *CALLS =
    "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", "
    "\"content\": \"\", \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", "
    "\"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]}, "
    "{\"role\": \"tool\", \"content\": \"sunny\", \"tool_call_id\": \"call_1\"}]";

static void check_model(pooled_model *m, const char *what) {
    /* plain messages: the JSON form renders as the struct form does */
    pooled_message msgs[] = {{"system", "Be brief."}, {"user", "Hi there"}};
    char *a = NULL, *b = NULL;
    CHECK(pooled_chat_render(m, msgs, 2, NULL, &a) == POOLED_OK, "%s: %s", what,
          pooled_last_error());
    CHECK(pooled_chat_render_json(m, CONV, NULL, NULL, &b) == POOLED_OK, "%s: %s", what,
          pooled_last_error());
    CHECK(a && b && !strcmp(a, b), "%s: struct '%s' json '%s'", what, a ? a : "", b ? b : "");
    pooled_free(a), pooled_free(b);
    a = b = NULL;
    /* tools shown, the call and its result in Qwen3's format */
    CHECK(pooled_chat_render_json(m, CALLS, TOOLS, NULL, &a) == POOLED_OK, "%s: %s", what,
          pooled_last_error());
    CHECK(a && strstr(a, "<tools>") && strstr(a, "\"get_weather\"") &&
              strstr(a, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                        "\"Paris\"}}\n</tool_call>") &&
              strstr(a, "<tool_response>\nsunny\n</tool_response>") &&
              !strcmp(a + strlen(a) - strlen("<|im_start|>assistant\n"), "<|im_start|>assistant\n"),
          "%s: '%s'", what, a ? a : "");
    CHECK(pooled_chat_render_json(m, CALLS, "null", NULL, &b) == POOLED_OK && b &&
              !strstr(b, "<tools>"),
          "%s: tools null: '%s'", what, b ? b : "");
    pooled_free(b);
    b = NULL;
    /* the object form: {"messages", "tools"} */
    char obj[2048];
    snprintf(obj, sizeof obj, "{\"messages\": %s, \"tools\": %s}", CALLS, TOOLS);
    CHECK(pooled_chat_render_json(m, obj, NULL, NULL, &b) == POOLED_OK && a && b && !strcmp(a, b),
          "%s: the object form: '%s'", what, b ? b : pooled_last_error());
    /* the ids: the text with its special tokens parsed */
    int32_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK(pooled_chat_tokenize_json(m, CALLS, TOOLS, NULL, &x, &nx) == POOLED_OK, "%s: %s", what,
          pooled_last_error());
    CHECK(a && pooled_tokenize(m, a, strlen(a), 0, 1, &y, &ny) == POOLED_OK, "%s", what);
    CHECK(nx > 20 && nx == ny && x && y && !memcmp(x, y, nx * sizeof *x), "%s: %zu vs %zu ids",
          what, nx, ny);
    pooled_free(x), pooled_free(y), pooled_free(a), pooled_free(b);
    /* bad JSON or shapes: one line, nothing returned */
    const char *bad[][2] = {{"[{\"role\": ", NULL},
                            {"{\"role\": \"user\"}", NULL},
                            {CONV, "{}"},
                            {"\"x\"", NULL},
                            {"{\"messages\": [], \"tools\": 5}", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *t = NULL;
        CHECK(pooled_chat_render_json(m, bad[i][0], bad[i][1], NULL, &t) == POOLED_ERR_ARG && !t &&
                  !strchr(pooled_last_error(), '\n'),
              "%s: bad %zu: %s", what, i, pooled_last_error());
    }
    char *t = NULL;
    CHECK(pooled_chat_render_json(m, NULL, NULL, NULL, &t) == POOLED_ERR_ARG, "%s: NULL", what);
    /* a template of the caller's, with the model's bos_token; the struct form too */
    pooled_chat_opts co = pooled_chat_opts_default();
    co.template_source = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                         "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
    pooled_model_info in = {.size = sizeof in};
    char *bos = NULL;
    CHECK(pooled_model_get_info(m, &in) == POOLED_OK, "%s", what);
    if (in.bos >= 0) pooled_token_piece(m, in.bos, 1, &bos, NULL);
    char want[256];
    snprintf(want, sizeof want, "%s[system]Be brief.[user]Hi there[assistant]", bos ? bos : "");
    CHECK(pooled_chat_render_json(m, CONV, NULL, &co, &a) == POOLED_OK && a && !strcmp(a, want),
          "%s: own template '%s' want '%s' (%s)", what, a ? a : "", want, pooled_last_error());
    CHECK(pooled_chat_render(m, msgs, 2, &co, &b) == POOLED_OK && b && !strcmp(b, want),
          "%s: own template, struct form '%s'", what, b ? b : "");
    pooled_free(a), pooled_free(b), pooled_free(bos);
    co.template_source = "{% for m in messages %}";
    a = NULL;
    CHECK(pooled_chat_render_json(m, CONV, NULL, &co, &a) != POOLED_OK && !a &&
              !strchr(pooled_last_error(), '\n'),
          "%s: a broken template: %s", what, pooled_last_error());
}

static void run_tests(void) {
    /* the whole model and the vocabulary alone render and tokenize alike */
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu";
    pooled_model *full = NULL, *voc = NULL;
    CHECK(pooled_model_open(test_shared(REALTOK), &mo, &full) == POOLED_OK, "%s",
          pooled_last_error());
    mo.vocab_only = 1;
    mo.backend = "no such backend"; /* (ignored: no backend is opened) */
    CHECK(pooled_model_open(test_shared(REALTOK), &mo, &voc) == POOLED_OK, "%s",
          pooled_last_error());
    if (full) check_model(full, "full");
    const char *tmpl = full ? pooled_chat_template(full) : NULL;
    CHECK(tmpl && strstr(tmpl, "<|im_start|>") && strstr(tmpl, "tool_call"), "the template: %.80s",
          tmpl ? tmpl : "(none)");
    if (voc) check_model(voc, "vocab_only");
    if (full && voc) {
        pooled_model_info a = {.size = sizeof a}, b = {.size = sizeof b};
        CHECK(pooled_model_get_info(full, &a) == POOLED_OK &&
                  pooled_model_get_info(voc, &b) == POOLED_OK,
              "info");
        CHECK(!strcmp(a.arch, b.arch) && !strcmp(a.name, b.name) && a.n_vocab == b.n_vocab &&
                  a.bos == b.bos && a.eos == b.eos && b.n_layer == 0 &&
                  strstr(b.backend, "vocab_only"),
              "vocab_only info: %s/%s %d/%d '%s'", a.arch, b.arch, a.n_vocab, b.n_vocab, b.backend);
        pooled_session *s = NULL;
        CHECK(pooled_session_new(voc, &s) == POOLED_ERR_ARG && !s &&
                  strstr(pooled_last_error(), "vocab_only"),
              "a session on vocab_only: %s", pooled_last_error());
    }
    pooled_model_close(full);
    pooled_model_close(voc);
    /* stories260K has no template: the caller's renders it */
    voc = NULL;
    CHECK(pooled_model_open(test_shared("models/stories260K.gguf"), &mo, &voc) == POOLED_OK, "%s",
          pooled_last_error());
    if (voc) {
        CHECK(pooled_chat_template(voc) == NULL, "stories260K has a template?");
        pooled_chat_opts co = pooled_chat_opts_default();
        co.template_source = "{{ bos_token }}{{ messages[0].content }}";
        char *t = NULL;
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(pooled_chat_render_json(voc, "[{\"role\": \"user\", \"content\": \"Lily\"}]", NULL,
                                      &co, &t) == POOLED_OK &&
                  t && !strcmp(t, "<s>Lily"),
              "'%s' %s", t ? t : "", pooled_last_error());
        CHECK(pooled_chat_tokenize_json(voc, "[{\"role\": \"user\", \"content\": \"Lily\"}]", NULL,
                                        &co, &ids, &n) == POOLED_OK &&
                  n >= 2 && ids[0] == 1,
              "ids: %zu, first %d", n, n ? ids[0] : -1);
        pooled_free(t), pooled_free(ids);
        pooled_model_close(voc);
    }
}
