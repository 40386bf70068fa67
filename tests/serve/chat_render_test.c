/* chat_render_test.c - a request's tools, tool calls and tool results reach the chat template
 * as Hugging Face's apply_chat_template passes them (serve/engine.c srv_chat_context): an
 * OpenAI and an Anthropic request for the conversation of tests/tokenizer/data/jinja_refs.json
 * "tools" (made by tools/gen_jinja_refs.py with jinja2 configured as transformers configures
 * it) render exactly its expected text, with the Qwen3 template of the fixture GGUF and with
 * Qwen3.5's template. */
#include "test.h"

#include "base/file_map.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "format/gguf.h"
#include "serve/engine.h"
#include "tokenizer/tokenizer.h"

static const pl_json *find_ref(const pl_json *refs, const char *name) {
    for (size_t i = 0; i < pl_json_count(refs); i++) {
        const char *n = pl_json_string(pl_json_get(pl_json_at(refs, i), "name"));
        if (n && !strcmp(n, name)) return pl_json_at(refs, i);
    }
    CHECK(false, "no reference %s", name);
    return NULL;
}

/* The rendering of body (a request of kind k) with the template of tok, or tmpl if given. */
static char *render(srv_kind k, const char *body, const pl_tokenizer *tok, const char *tmpl) {
    srv_request r;
    char err[256];
    char *out = NULL;
    pl_json_doc *msgs = NULL, *tools = NULL;
    char *mt = NULL;
    const char *tt = NULL;
    CHECK(srv_request_parse(k, body, strlen(body), &r, err, sizeof err), "%s", err);
    CHECK(srv_chat_context(&r, &mt, &tt, err, sizeof err), "%s", err);
    CHECK(mt && pl_json_parse(mt, strlen(mt), &msgs) == PL_OK, "messages: %s", mt ? mt : "none");
    CHECK(!tt || pl_json_parse(tt, strlen(tt), &tools) == PL_OK, "tools: %s", tt);
    free(mt);
    pl_chat_opts o = {.add_generation_prompt = true, .enable_thinking = true};
    if (msgs) {
        const pl_json *t = tools ? pl_json_root(tools) : NULL;
        pl_status s =
            tmpl ? pl_chat_render_template(tmpl, "", "<|im_end|>", pl_json_root(msgs), t, &o, &out)
                 : pl_chat_render_json(tok, pl_json_root(msgs), t, &o, &out);
        CHECK(s == PL_OK, "%s", pl_last_error());
    }
    pl_json_doc_free(msgs), pl_json_doc_free(tools);
    srv_request_free(&r);
    return out;
}

static void same(const char *what, const char *got, const char *want) {
    size_t i = 0;
    while (got && want && got[i] && got[i] == want[i]) i++;
    CHECK(got && want && !strcmp(got, want), "%s: differs at byte %zu:\n got  %s\n want %s", what,
          i, got ? got + i : "(null)", want ? want + i : "(null)");
}

static void run_tests(void) {
    char *text = NULL, *tmpl35 = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    CHECK(pl_file_read_all("tests/tokenizer/data/jinja_refs.json", &text, &len) == PL_OK, "refs");
    CHECK(pl_file_read_all("tests/tokenizer/data/qwen35.jinja", &tmpl35, &len) == PL_OK, "qwen35");
    CHECK(text && pl_json_parse(text, len ? strlen(text) : 0, &d) == PL_OK, "refs parse");
    pl_gguf *g = NULL;
    pl_tokenizer *tok = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf"), &g) ==
                  PL_OK &&
              pl_tok_load(g, &tok) == PL_OK,
          "%s", pl_last_error());
    pl_gguf_free(g);
    if (!d || !tok || !tmpl35) goto done;
    const pl_json *refs = pl_json_get(pl_json_root(d), "refs");
    const pl_json *q3 = find_ref(refs, "qwen3/tools/agp=True/think=None");
    const pl_json *q35 = find_ref(refs, "qwen35/tools/agp=True/think=None");
    if (!q3 || !q35) goto done;
    const pl_json *tools = pl_json_get(pl_json_get(q3, "context"), "tools");
    const pl_json *fn = pl_json_get(pl_json_at(tools, 0), "function");

    /* OpenAI: tools as given, arguments as a JSON string, tool messages with their ids */
    pl_strbuf oa = {0};
    pl_sb_puts(&oa, "{\"messages\":[{\"role\":\"system\",\"content\":\"Use tools when useful.\"},"
                    "{\"role\":\"user\",\"content\":\"Weather in Paris for 3 days?\"},"
                    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
                    "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                    "\"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 3, \\\"opts\\\": [\\\"c\\\", "
                    "1.5]}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":"
                    "\"sunny\"},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":"
                    "[{\"type\":\"text\",\"text\":\"22\xc2\xb0\"},{\"type\":\"text\",\"text\":"
                    "\"C\"}]},{\"role\":\"assistant\",\"content\":\"Sunny, 22\xc2\xb0"
                    "C.\"},{\"role\":\"user\",\"content\":\"Thanks \xe2\x80\x94 and Lyon?\"}],"
                    "\"tool_choice\":\"auto\",\"tools\":");
    pl_json_write(&oa, tools);
    pl_sb_putc(&oa, '}');

    /* Anthropic: system apart, tool_use in the assistant's content, tool_result blocks in the
     * user's, input_schema as the parameters */
    pl_strbuf an = {0};
    pl_sb_puts(&an, "{\"max_tokens\":9,\"system\":\"Use tools when useful.\",\"messages\":["
                    "{\"role\":\"user\",\"content\":\"Weather in Paris for 3 days?\"},"
                    "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
                    "\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\","
                    "\"days\":3,\"opts\":[\"c\",1.5]}}]},{\"role\":\"user\",\"content\":["
                    "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"sunny\"},"
                    "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":[{\"type\":"
                    "\"text\",\"text\":\"22\xc2\xb0"
                    "C\"}]}]},{\"role\":\"assistant\",\"content\":"
                    "\"Sunny, 22\xc2\xb0"
                    "C.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                    "\"text\":\"Thanks \xe2\x80\x94 and Lyon?\"}]}],\"tool_choice\":{\"type\":"
                    "\"auto\"},\"tools\":[{\"name\":\"get_weather\",\"description\":");
    pl_json_write(&an, pl_json_get(fn, "description"));
    pl_sb_puts(&an, ",\"input_schema\":");
    pl_json_write(&an, pl_json_get(fn, "parameters"));
    pl_sb_puts(&an, "}]}");

    const char *want3 = pl_json_string(pl_json_get(q3, "expected"));
    const char *want35 = pl_json_string(pl_json_get(q35, "expected"));
    char *got = render(SRV_CHAT, oa.s, tok, NULL);
    same("openai, qwen3", got, want3);
    free(got);
    got = render(SRV_MESSAGES, an.s, tok, NULL);
    same("anthropic, qwen3", got, want3);
    free(got);
    got = render(SRV_CHAT, oa.s, NULL, tmpl35);
    same("openai, qwen3.5", got, want35);
    free(got);
    got = render(SRV_MESSAGES, an.s, NULL, tmpl35);
    same("anthropic, qwen3.5", got, want35);
    free(got);

    /* tool_choice none: the tools are not shown to the model */
    pl_strbuf none = {0};
    pl_sb_puts(&none, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tool_choice\":"
                      "\"none\",\"tools\":");
    pl_json_write(&none, tools);
    pl_sb_putc(&none, '}');
    got = render(SRV_CHAT, none.s, tok, NULL);
    CHECK(got && !strstr(got, "get_weather") && strstr(got, "hi"), "%s", got);
    free(got);
    pl_sb_free(&oa), pl_sb_free(&an), pl_sb_free(&none);
done:
    pl_tok_free(tok);
    pl_json_doc_free(d);
    free(text), free(tmpl35);
}
