/* request_test.c - `pooled serve`'s request parsing (serve/request.c): each API's fields
 * into the request struct, and the refusals, each with one line naming the field. */
#include "test.h"

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

static void run_tests(void) {
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
    refused(SRV_RESPONSES, "{\"input\":[{\"type\":\"function_call\"}]}", "function_call");
    refused(SRV_RESPONSES, "{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "role");
    refused(SRV_RESPONSES, "{\"input\":\"x\",\"max_output_tokens\":0}", "'max_output_tokens'");

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
