/* tool_force_test.c - serve/tool_force.c: the schema of a forced tool call (tool_choice
 * required / named) takes a well-formed call of each offered tool in the template's format,
 * which the reply parser reads back as that call, and refuses anything else; the refusals
 * (XML calls, no call format, too many tools, a schema outside the subset). */
#include "test.h"

#include "base/strbuf.h"
#include "grammar/grammar.h"
#include "serve/request.h"
#include "serve/tool_force.h"
#include "serve/tool_parse.h"

#define QWEN  "{%- if tools %}<tool_call>{%- endif %}"
#define LLAMA "<|start_header_id|>assistant<|end_header_id|>"
#define XML   "<tool_call>\n<function=name>"
#define MSGS  "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"     \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":"      \
    "\"integer\"}},\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":"      \
    "\"now\"}}]"

static void req(const char *body, srv_request *r) {
    char err[256] = "";
    CHECK(srv_request_parse(SRV_CHAT, body, strlen(body), r, err, sizeof err), "%s: %s", body, err);
}

/* tf_schema's call compiled as pooled_generate compiles json_schema, json_prefix and
 * json_suffix: *g NULL when r forces none. */
static bool tf_grammar(const srv_request *r, const char *tmpl, pl_grammar **g, char *err,
                       size_t cap) {
    tf_call c;
    *g = NULL;
    if (!tf_schema(r, tmpl, &c, err, cap)) {
        CHECK(!c.schema, "%s", "a refused call left a schema");
        return false;
    }
    bool ok = !c.schema || pl_grammar_compile(c.schema, strlen(c.schema), g) == PL_OK;
    const char *p = c.prefix ? c.prefix : "", *q = c.suffix ? c.suffix : "";
    if (ok && *g && (c.prefix || c.suffix)) ok = !pl_grammar_wrap(*g, p, strlen(p), q, strlen(q));
    CHECK(ok, "%s: %s", c.schema, pl_last_error());
    tf_call_free(&c);
    return ok;
}

static pl_grammar *forced(const char *body, const char *tmpl) {
    srv_request r;
    req(body, &r);
    pl_grammar *g = NULL;
    char err[256] = "";
    CHECK(tf_grammar(&r, tmpl, &g, err, sizeof err), "%s: %s", body, err);
    srv_request_free(&r);
    return g;
}

static bool whole(const pl_grammar *g, const char *text) {
    pl_gstate *s = NULL;
    if (pl_gstate_new(g, &s)) return false;
    bool ok = pl_gstate_feed(s, text, strlen(text)) && pl_gstate_complete(s);
    pl_gstate_free(s);
    return ok;
}

/* text is a whole value of g, and the reply parser reads inner (the call) as name's call */
static void call(const pl_grammar *g, const char *text, const char *inner, const char *name) {
    CHECK(whole(g, text), "refused: %s", text);
    char *n = NULL, *a = NULL;
    size_t al = 0;
    CHECK(tp_parse_call(inner, strlen(inner), &n, &a, &al) && n && !strcmp(n, name),
          "parsed as %s: %s", n ? n : "(nothing)", inner);
    free(n), free(a);
}

static void refused(const char *body, const char *tmpl, const char *want) {
    srv_request r;
    req(body, &r);
    pl_grammar *g = NULL;
    char err[256] = "";
    CHECK(!tf_grammar(&r, tmpl, &g, err, sizeof err) && !g, "accepted: %s", body);
    CHECK(strstr(err, want) && !strchr(err, '\n'), "'%s' for %s (wanted '%s')", err, body, want);
    srv_request_free(&r);
}

static void run_tests(void) {
    /* not forced: no grammar */
    CHECK(!forced("{" MSGS "," TOOLS "}", QWEN), " ");
    CHECK(!forced("{" MSGS "," TOOLS ",\"tool_choice\":\"auto\"}", QWEN), " ");
    CHECK(!forced("{" MSGS "}", QWEN), " ");

    pl_grammar *g = forced("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", QWEN);
    CHECK(g, " ");
    if (g) {
        call(g,
             "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</"
             "tool_call>",
             "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}", "get_weather");
        call(g,
             "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"days\":3}}"
             "\n</tool_call>",
             "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"days\":3}}",
             "get_weather");
        call(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":{\"tz\":\"UTC\"}}\n</tool_call>",
             "{\"name\":\"now\",\"arguments\":{\"tz\":\"UTC\"}}", "now");
        CHECK(!whole(g, "Sure, the weather in Oslo is"), "%s", "-");
        CHECK(!whole(g, "{\"name\":\"now\",\"arguments\":{}}"), "%s", "-"); /* no tags */
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"other\",\"arguments\":{}}\n</tool_call>"), "%s",
              "-");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{}}\n</tool_call>"),
              "%s", "-");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":1}}\n"
                        "</tool_call>"),
              "%s", "-");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":[]}\n</tool_call>"), "%s",
              "-");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}"), "%s",
              "-"); /* unclosed */
        pl_grammar_free(g);
    }
    g = forced("{" MSGS "," TOOLS
               ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}}}",
               QWEN);
    CHECK(g, " ");
    if (g) {
        call(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>",
             "{\"name\":\"now\",\"arguments\":{}}", "now");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"O\"}}"
                        "\n</tool_call>"),
              "%s", "-");
        pl_grammar_free(g);
    }
    /* Anthropic's any / tool, Llama 3's bare {"name", "parameters"} */
    g = forced("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", LLAMA);
    CHECK(g, " ");
    if (g) {
        const char *c = "{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Rome\"}}";
        call(g, c, c, "get_weather");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"), "%s",
              "-");
        pl_grammar_free(g);
    }
    srv_request r;
    const char *ant = "{\"model\":\"m\",\"max_tokens\":8," MSGS
                      ",\"tools\":[{\"name\":\"a\",\"input_schema\":{\"type\":\"object\"}},{"
                      "\"name\":\"b\",\"input_schema\":{\"type\":\"object\",\"properties\":{"
                      "\"x\":{\"type\":\"boolean\"}},\"required\":[\"x\"]}}],\"tool_choice\":{"
                      "\"type\":\"tool\",\"name\":\"b\"}}";
    char err[256] = "";
    CHECK(srv_request_parse(SRV_MESSAGES, ant, strlen(ant), &r, err, sizeof err), "%s", err);
    g = NULL;
    CHECK(tf_grammar(&r, QWEN, &g, err, sizeof err) && g, "%s", err);
    if (g) {
        call(g, "<tool_call>\n{\"name\":\"b\",\"arguments\":{\"x\":true}}\n</tool_call>",
             "{\"name\":\"b\",\"arguments\":{\"x\":true}}", "b");
        CHECK(!whole(g, "<tool_call>\n{\"name\":\"a\",\"arguments\":{}}\n</tool_call>"), "%s", "-");
        pl_grammar_free(g);
    }
    srv_request_free(&r);

    refused("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", XML, "XML");
    refused("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", "{{ messages }}",
            "no tool-call format");
    refused("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", NULL, "no tool-call format");
    refused("{" MSGS
            ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
            "\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"x\"}}}}}]"
            ",\"tool_choice\":\"required\"}",
            QWEN, "'pattern' is not supported");
    refused("{" MSGS "," TOOLS
            ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}",
            QWEN, "cannot be combined");
    /* more tools than one anyOf takes: refused when required, fine when one is named */
    pl_strbuf b = {0};
    pl_sb_puts(&b, "{" MSGS ",\"tools\":[");
    for (int i = 0; i <= TF_MAX_TOOLS; i++)
        pl_sb_printf(&b, "%s{\"type\":\"function\",\"function\":{\"name\":\"t%d\"}}", i ? "," : "",
                     i);
    size_t at = b.len;
    pl_sb_puts(&b, "],\"tool_choice\":\"required\"}");
    refused(b.s, QWEN, "at most 64 tools");
    b.len = at;
    pl_sb_puts(&b, "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"t64\"}}}");
    g = forced(b.s, QWEN);
    CHECK(g && whole(g, "<tool_call>\n{\"name\":\"t64\",\"arguments\":{}}\n</tool_call>"), "%s",
          "-");
    pl_grammar_free(g);
    pl_sb_free(&b);
}
