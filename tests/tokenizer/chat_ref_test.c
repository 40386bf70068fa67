/* chat_ref_test.c - chat templates rendered as transformers renders them: the four Qwen3
 * conversations of fixtures/hf/qwen3_realtok/ref.json (default and enable_thinking=False),
 * through the template stored in the GGUF, from JSON messages and from pl_chat_msg. And the
 * built-in formats used when a model has no template (ChatML, Llama 3): with the template
 * taken out of the Qwen3 and Llama 3 GGUFs, they must render what the real templates render
 * (tests/tokenizer/data/jinja_refs.json, made by jinja2) for conversations where the two
 * agree (no reasoning to strip, generation prompt on). */
#include "test.h"
#include "tok_test_util.h"

#include "base/file_map.h"
#include "base/json.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

static void show_diff(const char *got, const char *want) {
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    fprintf(stderr, "  first difference at byte %zu\n  got:  '%s'\n  want: '%s'\n", i, got + i,
            want + i);
}

static void test_qwen3(void) {
    char *text = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    CHECK(pl_file_read_all(test_shared("fixtures/hf/qwen3_realtok/ref.json"), &text, &len) == PL_OK,
          "ref");
    if (!text) return;
    CHECK(pl_json_parse(text, len, &d) == PL_OK, "%s", pl_last_error());
    free(text);
    pl_tokenizer *t = load_tok("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf");
    if (!d || !t) goto done;
    CHECK(pl_tok_chat_template(t) != NULL, "the GGUF has a template");
    const pl_json *ct = pl_json_get(pl_json_root(d), "chat_template");
    CHECK(pl_json_count(ct) == 4, "4 renderings");
    for (size_t i = 0; i < pl_json_count(ct); i++) {
        const char *name = ct->obj.keys[i];
        const pl_json *r = ct->obj.vals[i];
        const pl_json *msgs = pl_json_get(r, "messages");
        const pl_json *think = pl_json_get(pl_json_get(r, "kwargs"), "enable_thinking");
        const pl_json *agp = pl_json_get(r, "add_generation_prompt");
        const char *want = pl_json_string(pl_json_get(r, "text"));
        pl_chat_opts o = {.add_generation_prompt = agp && agp->type == PL_JSON_TRUE,
                          .enable_thinking = !(think && think->type == PL_JSON_FALSE)};
        char *got = NULL;
        CHECK(pl_chat_render_json(t, msgs, NULL, &o, &got) == PL_OK, "%s: %s", name,
              pl_last_error());
        bool same = got && want && strcmp(got, want) == 0;
        if (!same && got && want) show_diff(got, want);
        CHECK(same, "%s rendered as transformers", name);
        free(got);
        /* the same through the plain message array */
        pl_chat_msg m[8];
        int n = 0;
        for (size_t k = 0; k < pl_json_count(msgs) && n < 8; k++, n++) {
            m[n].role = pl_json_string(pl_json_get(pl_json_at(msgs, k), "role"));
            m[n].content = pl_json_string(pl_json_get(pl_json_at(msgs, k), "content"));
        }
        got = NULL;
        CHECK(pl_chat_render(t, m, n, &o, &got) == PL_OK, "%s: %s", name, pl_last_error());
        CHECK(got && want && strcmp(got, want) == 0, "%s via pl_chat_render", name);
        free(got);
    }
done:
    pl_tok_free(t);
    pl_json_doc_free(d);
}

static void test_fallback(const char *gguf, const char *const *refs) {
    char *text = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    pl_gguf *g = NULL;
    pl_tokenizer *t = NULL;
    CHECK(pl_file_read_all("tests/tokenizer/data/jinja_refs.json", &text, &len) == PL_OK, "refs");
    if (text) CHECK(pl_json_parse(text, len, &d) == PL_OK, "%s", pl_last_error());
    free(text);
    CHECK(pl_gguf_open(test_shared(gguf), &g) == PL_OK, "%s", gguf);
    if (!d || !g) goto done;
    pl_gguf_remove(g, "tokenizer.chat_template");
    CHECK(pl_tok_load(g, &t) == PL_OK && !pl_tok_chat_template(t), "%s without its template", gguf);
    if (!t) goto done;
    const pl_json *list = pl_json_get(pl_json_root(d), "refs");
    for (const char *const *name = refs; *name; name++) {
        const pl_json *r = NULL;
        for (size_t i = 0; i < pl_json_count(list) && !r; i++)
            if (!strcmp(pl_json_string(pl_json_get(pl_json_at(list, i), "name")), *name))
                r = pl_json_at(list, i);
        CHECK(r != NULL, "reference %s", *name);
        if (!r) continue;
        const char *want = pl_json_string(pl_json_get(r, "expected"));
        pl_chat_opts o = {.add_generation_prompt = true, .enable_thinking = true};
        char *got = NULL;
        CHECK(pl_chat_render_json(t, pl_json_get(pl_json_get(r, "context"), "messages"), NULL, &o,
                                  &got) == PL_OK,
              "%s: %s", *name, pl_last_error());
        bool same = got && want && !strcmp(got, want);
        if (!same && got && want) show_diff(got, want);
        CHECK(same, "built-in format for %s", *name);
        free(got);
    }
done:
    pl_tok_free(t);
    pl_gguf_free(g);
    pl_json_doc_free(d);
}

static void run_tests(void) {
    test_qwen3();
    static const char *const chatml[] = {"qwen3/sys_user_asst_user/agp=True/think=None",
                                         "qwen3/unicode/agp=True/think=None", NULL};
    test_fallback("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf", chatml);
    static const char *const llama3[] = {"llama3/sys_user_asst_user/agp=True/think=None",
                                         "llama3/think_in_content/agp=True/think=None",
                                         "llama3/unicode/agp=True/think=None", NULL};
    test_fallback("fixtures/hf/llama3_vocab/llama3-vocab.gguf", llama3);
}
