/* request_test.c - `pooled serve`'s request parsing (serve/request.c): each API's fields
 * into the request struct, and the refusals, each with one line naming the field. */
#include "test.h"

#include "base/strbuf.h"
#include "serve/request.h"

static bool parse(srv_kind k, const char *body, srv_request *r, char *err) {
    return srv_request_parse(k, body, strlen(body), r, err, 256);
}

/* body must be refused with a reason that mentions want */
static void refused(srv_kind k, const char *body, const char *want) {
    srv_request r;
    char err[256] = "";
    CHECK(!parse(k, body, &r, err), "accepted: %s", body);
    CHECK(strstr(err, want) && !strchr(err, '\n'), "'%s' for %s (wanted '%s')", err, body, want);
    srv_request_free(&r);
}

/* tools, tool_choice, tool calls and results: taken into the template's shapes */
static void test_tools(void) {
    srv_request r;
    char err[256] = "";
    CHECK(parse(SRV_CHAT,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\","
                "\"content\":null,\"reasoning_content\":\"hm\",\"tool_calls\":[{\"id\":\"c1\","
                "\"type\":\"function\",\"function\":{\"name\":\"get_w\",\"arguments\":"
                "\"{\\\"a\\\": 1}\"}},{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":"
                "\"now\",\"arguments\":\"\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
                "\"content\":\"7\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
                "\"get_w\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"},\"strict\":"
                "true}},{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],\"tool_choice\":"
                "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}}",
                &r, err),
          "%s", err);
    CHECK(r.n_tools == 2 && r.tools &&
              !strcmp(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"get_w\","
                               "\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}},"
                               "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]"),
          "tools: %s", r.tools);
    CHECK(r.tool_choice == SRV_TOOLS_NAMED && !strcmp(r.tool_name, "now"), "named choice");
    CHECK(r.msgs[1].tool_calls &&
              !strcmp(r.msgs[1].tool_calls,
                      "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_w\","
                      "\"arguments\":{\"a\":1}}},{\"id\":\"c2\",\"type\":\"function\",\"function\":"
                      "{\"name\":\"now\",\"arguments\":{}}}]"),
          "calls: %s", r.msgs[1].tool_calls);
    CHECK(r.msgs[1].reasoning && !strcmp(r.msgs[1].reasoning, "hm"), "reasoning_content");
    CHECK(r.msgs[2].tool_call_id && !strcmp(r.msgs[2].tool_call_id, "c1"), "tool_call_id");
    srv_request_free(&r);

    /* Anthropic: a user turn of results and text becomes tool messages, then a user one */
    CHECK(parse(SRV_MESSAGES,
                "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":"
                "\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\","
                "\"signature\":\"s\"},{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"tool_use\","
                "\"id\":\"tu1\",\"name\":\"get_w\",\"input\":{\"a\":[1]}}]},{\"role\":\"user\","
                "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"tu1\",\"content\":[{"
                "\"type\":\"text\",\"text\":\"7\"}]},{\"type\":\"tool_result\",\"tool_use_id\":"
                "\"tu1\"},{\"type\":\"text\",\"text\":\"and?\"}]}],\"tools\":[{\"name\":\"get_w\","
                "\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"any\"}}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 5 && r.tool_choice == SRV_TOOLS_REQUIRED, "%d messages", r.n_msgs);
    if (r.n_msgs == 5) {
        CHECK(!strcmp(r.msgs[1].content, "ok") && !strcmp(r.msgs[1].reasoning, "t") &&
                  !strcmp(r.msgs[1].tool_calls,
                          "[{\"id\":\"tu1\",\"type\":\"function\",\"function\":{\"name\":"
                          "\"get_w\",\"arguments\":{\"a\":[1]}}}]"),
              "assistant: %s", r.msgs[1].tool_calls);
        CHECK(!strcmp(r.msgs[2].role, "tool") && !strcmp(r.msgs[2].content, "7") &&
                  !strcmp(r.msgs[2].tool_call_id, "tu1") && !strcmp(r.msgs[3].content, ""),
              "tool results");
        CHECK(!strcmp(r.msgs[4].role, "user") && !strcmp(r.msgs[4].content, "and?"), "user text");
    }
    CHECK(r.tools && strstr(r.tools, "\"parameters\":{\"type\":\"object\"}"), "input_schema");
    srv_request_free(&r);

#define U  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
#define T1 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"
    refused(SRV_CHAT, U "\"tools\":{}}", "'tools' must be an array");
    refused(SRV_CHAT, U "\"tools\":[{\"type\":\"web_search\"}]}", "not supported");
    refused(SRV_CHAT, U "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}",
            "letters, digits");
    refused(SRV_CHAT,
            U "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":1}}]}",
            "JSON Schema object");
    refused(SRV_CHAT, U "\"tool_choice\":\"required\"}", "'tools' is empty");
    refused(SRV_CHAT, U T1 ",\"tool_choice\":\"sometimes\"}", "'tool_choice' must be");
    refused(SRV_CHAT,
            U T1 ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
            "not in 'tools'");
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":"
            "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}",
            "tool_calls[0]: the arguments must be a JSON object");
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":"
            "\"function\"}]}]}",
            "must be a function call");
    refused(SRV_MESSAGES,
            "{\"max_tokens\":1,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
            "\"tool_result\",\"tool_use_id\":\"x\"}]}]}",
            "not supported in an assistant message");
    refused(SRV_MESSAGES,
            "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
            "\"tool_result\"}]}]}",
            "tool_use_id must be a string");
    refused(SRV_MESSAGES,
            "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
            "{\"name\":\"f\"}]}",
            "'input_schema' is required");
    pl_strbuf many = {0};
    pl_sb_puts(&many, U "\"tools\":[");
    for (int i = 0; i <= SRV_MAX_TOOLS; i++)
        pl_sb_printf(&many, "%s{\"type\":\"function\",\"function\":{\"name\":\"f%d\"}}",
                     i ? "," : "", i);
    pl_sb_puts(&many, "]}");
    refused(SRV_CHAT, many.s, "more than 128 tools");
    pl_sb_free(&many);
#undef U
#undef T1
}

static void run_tests(void) {
    test_tools();
    srv_request r;
    char err[256] = "";
    CHECK(parse(SRV_CHAT,
                "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be "
                "brief.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null},"
                "{\"role\":\"tool\",\"content\":\"42\"}],\"max_completion_tokens\":9,"
                "\"temperature\":0,\"top_p\":0.5,\"seed\":-1,\"stop\":\"x\",\"stream\":true,"
                "\"stream_options\":{\"include_usage\":true},\"unknown\":[1]}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 4 && !strcmp(r.msgs[0].role, "system"), "developer is taken as system");
    CHECK(!strcmp(r.msgs[1].content, "ab"), "text parts joined: %s", r.msgs[1].content);
    CHECK(!strcmp(r.msgs[2].content, "") && !strcmp(r.msgs[3].role, "tool"), "null, tool");
    CHECK(r.max_tokens == 9 && r.temperature == 0 && r.top_p == 0.5, "numbers");
    CHECK(r.has_seed && r.seed == UINT64_MAX, "seed -1 wraps");
    CHECK(r.n_stop == 1 && !strcmp(r.stop[0], "x") && r.stream && r.include_usage, "stop, stream");
    srv_request_free(&r);

    CHECK(parse(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, err), "%s",
          err);
    CHECK(r.max_tokens == -1 && r.temperature == 1 && r.top_p == 1 && !r.has_seed && !r.stream,
          "defaults: no limit, temperature 1, top_p 1, a clock seed, whole");
    srv_request_free(&r);

    CHECK(parse(SRV_MESSAGES,
                "{\"system\":[{\"type\":\"text\",\"text\":\"S\"}],\"messages\":[{\"role\":"
                "\"user\",\"content\":\"hi\"}],\"max_tokens\":5,\"stop_sequences\":[\"a\",\"\","
                "\"b\"]}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[0].content, "S"),
          "the system blocks first");
    CHECK(r.n_stop == 2 && !strcmp(r.stop[1], "b"), "empty stop strings dropped");
    srv_request_free(&r);

    CHECK(parse(SRV_DETOKENIZE, "{\"tokens\":[0,5,2147483647]}", &r, err), "%s", err);
    CHECK(r.n_tokens == 3 && r.tokens[2] == INT32_MAX, "ids");
    srv_request_free(&r);
    CHECK(parse(SRV_TOKENIZE, "{\"content\":\"x\",\"with_pieces\":true}", &r, err), "%s", err);
    CHECK(r.parse_special && !r.add_special && r.with_pieces, "tokenize's defaults");
    srv_request_free(&r);

    /* responses: instructions first, input as a string or messages, max_output_tokens */
    CHECK(parse(SRV_RESPONSES,
                "{\"instructions\":\"S\",\"input\":\"hi\",\"max_output_tokens\":7,"
                "\"stream\":true}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[1].role, "user") &&
              !strcmp(r.msgs[1].content, "hi") && r.max_tokens == 7 && r.stream,
          "responses: a string input");
    srv_request_free(&r);
    CHECK(parse(SRV_RESPONSES,
                "{\"input\":[{\"role\":\"developer\",\"content\":\"D\"},{\"type\":"
                "\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                "\"text\":\"a\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":"
                "\"output_text\",\"text\":\"b\"}]}]}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 3 && !strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[1].content, "a") &&
              !strcmp(r.msgs[2].content, "b") && r.max_tokens == -1,
          "responses: a list of messages");
    srv_request_free(&r);
    refused(SRV_RESPONSES, "{}", "'input'");
    refused(SRV_RESPONSES, "{\"input\":[]}", "empty");
    refused(SRV_RESPONSES, "{\"input\":[{\"type\":\"function_call\"}]}", "call_id");
    refused(SRV_RESPONSES, "{\"input\":[{\"type\":\"image\"}]}", "function_call_output");
    refused(SRV_RESPONSES,
            "{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\","
            "\"arguments\":\"[1]\"}]}",
            "arguments");
    refused(SRV_RESPONSES, "{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}",
            "output");
    /* responses: function calls and their outputs in the input, as chat's tool_calls (two in
     * a row: one assistant message) and tool messages */
    CHECK(parse(SRV_RESPONSES,
                "{\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"type\":\"function_call\","
                "\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"},{\"type\":"
                "\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"arguments\":\"{}\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"r1\"}]}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 3 && !strcmp(r.msgs[1].role, "assistant") && !strcmp(r.msgs[1].content, "") &&
              r.msgs[1].tool_calls &&
              !strcmp(r.msgs[1].tool_calls,
                      "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                      "\"arguments\":{\"a\":1}}},{\"id\":\"c2\",\"type\":\"function\",\"function\":"
                      "{\"name\":\"g\",\"arguments\":{}}}]") &&
              !strcmp(r.msgs[2].role, "tool") && !strcmp(r.msgs[2].tool_call_id, "c1") &&
              !strcmp(r.msgs[2].content, "r1"),
          "responses: function_call items (%d messages, calls %s)", r.n_msgs,
          r.n_msgs > 1 && r.msgs[1].tool_calls ? r.msgs[1].tool_calls : "none");
    srv_request_free(&r);
    /* responses: tools in the API's flat shape, tool_choice {"type": "function", "name"} */
    CHECK(parse(SRV_RESPONSES,
                "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\","
                "\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}],\"tool_choice\":"
                "{\"type\":\"function\",\"name\":\"f\"}}",
                &r, err),
          "%s", err);
    CHECK(r.n_tools == 1 && r.tools &&
              !strcmp(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                               "\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}}]") &&
              r.tool_choice == SRV_TOOLS_NAMED && !strcmp(r.tool_name, "f"),
          "responses: flat tools (%s)", r.tools ? r.tools : "none");
    srv_request_free(&r);
    refused(SRV_RESPONSES,
            "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
            "\"f\"}}]}",
            "'name'");
    /* responses: a reasoning item (as this server answers it) goes with the assistant
     * message after it - a message or a call; one with no text (OpenAI's summaries) and one
     * before another role are dropped */
    CHECK(parse(SRV_RESPONSES,
                "{\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"type\":\"reasoning\","
                "\"id\":\"rs_1\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\","
                "\"text\":\"hm\"}]},{\"type\":\"message\",\"role\":\"assistant\",\"content\":"
                "[{\"type\":\"output_text\",\"text\":\"a\"}]},{\"type\":\"reasoning\",\"id\":"
                "\"rs_2\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"s\"}]},{\"type\":"
                "\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"},"
                "{\"role\":\"user\",\"content\":\"q2\"},{\"type\":\"reasoning\",\"content\":"
                "[{\"type\":\"reasoning_text\",\"text\":\"x\"}]},{\"role\":\"user\","
                "\"content\":\"q3\"},{\"type\":\"reasoning\",\"content\":[{\"type\":"
                "\"reasoning_text\",\"text\":\"t1\"},{\"type\":\"reasoning_text\",\"text\":"
                "\"t2\"}]},{\"type\":\"function_call\",\"call_id\":\"d\",\"name\":\"g\","
                "\"arguments\":\"{}\"}]}",
                &r, err),
          "%s", err);
    CHECK(r.n_msgs == 5 && !strcmp(r.msgs[1].role, "assistant") && r.msgs[1].reasoning &&
              !strcmp(r.msgs[1].reasoning, "hm") && !strcmp(r.msgs[1].content, "a") &&
              r.msgs[1].tool_calls && !r.msgs[2].reasoning && !r.msgs[3].reasoning &&
              !strcmp(r.msgs[4].role, "assistant") && r.msgs[4].reasoning &&
              !strcmp(r.msgs[4].reasoning, "t1t2") && r.msgs[4].tool_calls,
          "responses: reasoning items (%d messages)", r.n_msgs);
    srv_request_free(&r);
    refused(SRV_RESPONSES, "{\"input\":[{\"type\":\"reasoning\",\"content\":\"x\"}]}",
            "reasoning_text");
    refused(SRV_RESPONSES,
            "{\"input\":[{\"type\":\"reasoning\",\"content\":[{\"type\":\"text\","
            "\"text\":\"x\"}]}]}",
            "reasoning_text");
    /* responses: text.format, compiled as chat's response_format and echoed */
    CHECK(parse(SRV_RESPONSES,
                "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":"
                "\"n\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":"
                "{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}}",
                &r, err),
          "%s", err);
    CHECK(r.schema && r.text_format && strstr(r.text_format, "\"name\":\"n\"") &&
              strstr(r.text_format, "\"required\":[\"a\"]"),
          "responses: text.format json_schema (%s)", r.text_format ? r.text_format : "none");
    srv_request_free(&r);
    CHECK(parse(SRV_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}}}", &r,
                err) &&
              !r.schema,
          "responses: text.format text");
    srv_request_free(&r);
    CHECK(parse(SRV_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}",
                &r, err) &&
              r.schema,
          "responses: text.format json_object");
    srv_request_free(&r);
    refused(SRV_RESPONSES, "{\"input\":\"x\",\"text\":5}", "'text' must be an object");
    refused(SRV_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"xml\"}}}",
            "'text.format.type'");
    refused(SRV_RESPONSES,
            "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"schema\":"
            "{\"type\":\"string\",\"pattern\":\"a\"}}}}",
            "'text.format.schema': 'pattern' is not supported");
    refused(SRV_RESPONSES, "{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "role");
    refused(SRV_RESPONSES, "{\"input\":\"x\",\"max_output_tokens\":0}", "'max_output_tokens'");

    /* the model's thinking turned off by the client, in each API's words */
    struct {
        srv_kind k;
        const char *extra;
        bool off;
    } th[] = {
        {SRV_CHAT, ",\"chat_template_kwargs\":{\"enable_thinking\":false}", true},
        {SRV_CHAT, ",\"chat_template_kwargs\":{\"enable_thinking\":true}", false},
        {SRV_CHAT, ",\"reasoning_effort\":\"minimal\"", true},
        {SRV_CHAT, ",\"reasoning_effort\":\"none\"", true},
        {SRV_CHAT, ",\"reasoning_effort\":\"high\"", false},
        {SRV_CHAT, "", false},
        {SRV_MESSAGES, ",\"thinking\":{\"type\":\"disabled\"}", true},
        {SRV_MESSAGES, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}", false},
        {SRV_COUNT_TOKENS, ",\"thinking\":{\"type\":\"disabled\"}", true},
        {SRV_RESPONSES, ",\"reasoning\":{\"effort\":\"none\"}", true},
        {SRV_RESPONSES, ",\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"}", false},
    };
    for (size_t i = 0; i < sizeof th / sizeof *th; i++) {
        char body[512];
        snprintf(body, sizeof body, "%s%s}",
                 th[i].k == SRV_RESPONSES ? "{\"input\":\"x\""
                 : th[i].k == SRV_CHAT    ? "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
                                          : "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                                            "\"content\":\"x\"}]",
                 th[i].extra);
        CHECK(parse(th[i].k, body, &r, err) && r.no_think == th[i].off, "thinking %zu: %s (%s)", i,
              body, err);
        srv_request_free(&r);
    }
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":\"max\"}",
            "'reasoning_effort'");
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":1}",
            "'chat_template_kwargs'");
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{"
            "\"enable_thinking\":\"no\"}}",
            "enable_thinking");
    refused(SRV_RESPONSES, "{\"input\":\"x\",\"reasoning\":5}", "'reasoning'");
    refused(SRV_RESPONSES, "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}",
            "'previous_response_id' is not supported");
    refused(SRV_MESSAGES,
            "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":"
            "\"on\"}",
            "'thinking'");

    /* logprobs: chat's boolean and top_logprobs (0 to 20), completions' number */
    CHECK(parse(SRV_CHAT,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
                "\"top_logprobs\":20}",
                &r, err),
          "%s", err);
    CHECK(r.logprobs == 20, "top_logprobs %d", r.logprobs);
    srv_request_free(&r);
    CHECK(parse(SRV_CHAT,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true}", &r,
                err) &&
              r.logprobs == 0,
          "logprobs without top_logprobs: %d", r.logprobs);
    srv_request_free(&r);
    CHECK(parse(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r, err) &&
              r.logprobs == -1,
          "no logprobs asked: %d", r.logprobs);
    srv_request_free(&r);
    CHECK(parse(SRV_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":3}", &r, err) && r.logprobs == 3,
          "completions' logprobs: %d", r.logprobs);
    srv_request_free(&r);
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
            "\"top_logprobs\":21}",
            "between 0 and 20");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
            "needs 'logprobs'");
    refused(SRV_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "'logprobs'");

    refused(SRV_CHAT, "{\"messages\": [", "not valid JSON");
    refused(SRV_CHAT, "[]", "JSON object");
    refused(SRV_CHAT, "{}", "'messages'");
    refused(SRV_CHAT, "{\"messages\":[]}", "empty");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "role");
    /* a reason that quotes the client's string stays one line (found by the fuzzer) */
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"robot\\nx\",\"content\":\"x\"}]}", "role");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"a\\nb\"}]}]}",
            "type");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "content");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
            "image_url");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", "NUL");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", "'n'");
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"1\"}",
            "'temperature'");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}",
            "between 0 and 2");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}",
            "'max_tokens'");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}",
            "integer");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}",
            "'stop'");
    refused(SRV_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"1\",\"2\",\"3\","
            "\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\","
            "\"17\"]}",
            "more than 16");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":1}",
            "'model'");
    refused(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}",
            "'stream'");
    refused(SRV_MESSAGES, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
            "'max_tokens' is required");
    refused(SRV_MESSAGES,
            "{\"messages\":[{\"role\":\"system\",\"content\":\"x\"}],\"max_tokens\":1}", "role");
    refused(SRV_MESSAGES,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1,"
            "\"stop_sequences\":\"x\"}",
            "array of strings");
    refused(SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "arrays");
    refused(SRV_COMPLETION, "{\"prompt\":7}", "'prompt'");
    refused(SRV_DETOKENIZE, "{\"tokens\":[-1]}", "tokens[0]");
    refused(SRV_TOKENIZE, "{\"content\":\"x\",\"add_special\":\"yes\"}", "'add_special'");
}
