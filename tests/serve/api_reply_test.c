/* api_reply_test.c - the response builder (serve/api.c) fed a model's text through the
 * reply parser: the exact OpenAI and Anthropic objects and server-sent events for a reply
 * with reasoning, text and a tool call, as the APIs' references document them (OpenAI chat
 * completions: message.tool_calls with arguments as a JSON string, finish_reason tool_calls,
 * streamed tool_calls deltas with index/id/type/name then arguments; Anthropic messages:
 * thinking, text and tool_use blocks, stop_reason tool_use, content_block_start /
 * input_json_delta / content_block_stop). The fixture models have random weights and never
 * write a tool call, so this is where the output side is pinned. */
#include "test.h"

#include "base/json.h"
#include "serve/api.h"

typedef struct {
    int status;
    bool sse;
    pl_strbuf body;
} capture;

static void cap_head(void *ud, int status, bool sse) {
    capture *c = ud;
    c->status = status, c->sse = sse;
}
static bool cap_write(void *ud, const char *s, size_t n) {
    pl_sb_append(&((capture *)ud)->body, s, n);
    return true;
}

static const char *REPLY = "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n"
                           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                           "{\"city\": \"Paris\"}}\n</tool_call>";

/* The body srv_api_reply gives for body (a request of kind k) and the model's text in
 * pieces. Malloc'd. */
static char *reply_as(srv_kind k, const char *body, const char *const *pieces, int n, bool *sse,
                      bool cut) {
    srv_request r;
    char err[256];
    CHECK(srv_request_parse(k, body, strlen(body), &r, err, sizeof err), "%s", err);
    tp_opts fmt = {.calls = TP_CALLS_QWEN, .think = true};
    srv_gen_result g = {.finish = cut ? SRV_FINISH_LENGTH : SRV_FINISH_EOG,
                        .n_prompt = 10,
                        .n_completion = 20,
                        .n_reasoning = 7};
    capture c = {0};
    srv_out o = {.head = cap_head, .write = cap_write, .ud = &c};
    srv_api_reply(&r, &fmt, "m", 1, 1700000000, pieces, n, &g, &o);
    srv_request_free(&r);
    CHECK(c.status == 200, "status %d", c.status);
    *sse = c.sse;
    return pl_sb_take(&c.body, NULL);
}

static char *reply(srv_kind k, const char *body, const char *const *pieces, int n, bool *sse) {
    return reply_as(k, body, pieces, n, sse, false);
}

/* The same reply cut at the length limit, whole. */
static char *reply_cut(srv_kind k, const char *body, const char *const *pieces, int n) {
    bool sse;
    return reply_as(k, body, pieces, n, &sse, true);
}

static void same(const char *what, const char *got, const char *want) {
    CHECK(got && !strcmp(got, want), "%s:\n got  %s\n want %s", what, got, want);
}

/* Every "data: " line of a stream is JSON (or [DONE]). */
static void data_lines_parse(const char *s) {
    for (const char *p = s; (p = strstr(p, "data: ")); p++) {
        const char *e = strchr(p, '\n');
        pl_json_doc *d = NULL;
        if (strncmp(p + 6, "[DONE]", 6))
            CHECK(e && !pl_json_parse(p + 6, (size_t)(e - p - 6), &d), "not JSON: %.80s", p);
        pl_json_doc_free(d);
    }
}

#define OA_CHAT                                                                                    \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":[{\"type\":"           \
    "\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{}}}]"
#define AN_MSG                                                                                     \
    "{\"max_tokens\":50,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"              \
    "\"tools\":[{\"name\":\"get_weather\",\"input_schema\":{}}]"

#define RESP                                                                                       \
    "{\"input\":\"Weather?\",\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\","          \
    "\"parameters\":{}}]"

static void run_tests(void) {
    const char *whole[] = {REPLY};
    bool sse;
    char *got = reply(SRV_CHAT, OA_CHAT "}", whole, 1, &sse);
    same("openai, whole", got,
         "{\"id\":\"chatcmpl-6553f100000001\",\"object\":\"chat.completion\",\"created\":"
         "1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
         "\"assistant\",\"content\":\"Let me check.\",\"reasoning_content\":\"The user wants "
         "weather.\",\"tool_calls\":[{\"id\":\"call_6553f10000000100\",\"type\":\"function\","
         "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}"
         "]},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":"
         "10,\"completion_tokens\":20,\"total_tokens\":30,\"prompt_tokens_details\":{\"cached_"
         "tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":7}}}");
    CHECK(!sse, "whole: not a stream");
    free(got);

    got = reply(SRV_CHAT, OA_CHAT ",\"stream\":true}", whole, 1, &sse);
#define OA_HEAD                                                                                    \
    "data: {\"id\":\"chatcmpl-6553f100000001\",\"object\":\"chat.completion.chunk\",\"created\":"  \
    "1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":"
#define OA_TAIL ",\"logprobs\":null,\"finish_reason\":null}]}\n\n"
    same(
        "openai, streamed", got,
        OA_HEAD
        "{\"role\":\"assistant\",\"content\":\"\"}" OA_TAIL OA_HEAD
        "{\"reasoning_content\":\"The user wants weather.\"}" OA_TAIL OA_HEAD
        "{\"content\":\"Let me check.\"}" OA_TAIL OA_HEAD
        "{\"tool_calls\":[{\"index\":0,\"id\":\"call_6553f10000000100\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}" OA_TAIL OA_HEAD
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
        "\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}" OA_TAIL OA_HEAD
        "{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    CHECK(sse, "a stream");
    data_lines_parse(got);
    free(got);

    got = reply(SRV_MESSAGES, AN_MSG "}", whole, 1, &sse);
    same("anthropic, whole", got,
         "{\"id\":\"msg_6553f100000001\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
         "\"m\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"The user wants weather.\","
         "\"signature\":\"\"},{\"type\":\"text\",\"text\":\"Let me check.\"},{\"type\":"
         "\"tool_use\",\"id\":\"toolu_6553f10000000100\",\"name\":\"get_weather\",\"input\":"
         "{\"city\":\"Paris\"}}],\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":"
         "{\"input_tokens\":10,\"output_tokens\":20}}");
    free(got);

    got = reply(SRV_MESSAGES, AN_MSG ",\"stream\":true}", whole, 1, &sse);
#define EV(name, data) "event: " name "\ndata: " data "\n\n"
    same("anthropic, streamed", got,
         EV("message_start",
            "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_6553f100000001\",\"type\":"
            "\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":"
            "null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":0}}}")
             EV("content_block_start",
                "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
                "\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}") EV("ping",
                                                                          "{\"type\":\"ping\"}")
                 EV("content_block_delta",
                    "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                    "\"thinking_delta\",\"thinking\":\"The user wants weather.\"}}")
                     EV("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}") EV(
                         "content_block_start",
                         "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{"
                         "\"type\":\"text\",\"text\":\"\"}}")
                         EV("content_block_delta",
                            "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
                            "\"text_delta\",\"text\":\"Let me check.\"}}")
                             EV("content_block_stop",
                                "{\"type\":\"content_block_stop\",\"index\":1}")
                                 EV("content_block_start",
                                    "{\"type\":\"content_block_start\",\"index\":2,"
                                    "\"content_block\":{\"type\":\"tool_use\",\"id\":"
                                    "\"toolu_6553f10000000100\",\"name\":\"get_weather\","
                                    "\"input\":{}}}")
                                     EV("content_block_delta",
                                        "{\"type\":\"content_block_delta\",\"index\":2,\"delta\":"
                                        "{\"type\":\"input_json_delta\",\"partial_json\":"
                                        "\"{\\\"city\\\":\\\"Paris\\\"}\"}}")
                                         EV("content_block_stop",
                                            "{\"type\":\"content_block_stop\",\"index\":2}")
                                             EV("message_delta",
                                                "{\"type\":\"message_delta\",\"delta\":{"
                                                "\"stop_reason\":\"tool_use\",\"stop_sequence\":"
                                                "null},\"usage\":{\"output_tokens\":20}}")
                                                 EV("message_stop", "{\"type\":\"message_stop\"}"));
    data_lines_parse(got);
    free(got);

    /* the same reply in pieces cut inside the tags: the same whole object */
    const char *cut[] = {"<thi",
                         "nk>\nThe user wants weather.\n</th",
                         "ink>\n\nLet me check.\n<tool",
                         "_call>\n{\"name\": \"get_weather\", \"argu",
                         "ments\": {\"city\": \"Paris\"}}\n</tool_ca",
                         "ll>"};
    char *a = reply(SRV_MESSAGES, AN_MSG "}", whole, 1, &sse);
    char *b = reply(SRV_MESSAGES, AN_MSG "}", cut, 6, &sse);
    same("anthropic, in pieces", b, a);
    free(a), free(b);

    /* no call: a malformed one is text, finish_reason stop, content kept as the model wrote */
    const char *bad[] = {"<tool_call>{\"name\": 5}</tool_call>"};
    got = reply(SRV_CHAT, OA_CHAT "}", bad, 1, &sse);
    CHECK(got && strstr(got, "\"content\":\"<tool_call>{\\\"name\\\": 5}</tool_call>\"") &&
              strstr(got, "\"finish_reason\":\"stop\"") && !strstr(got, "tool_calls"),
          "%s", got);
    free(got);
    /* responses: the items in the order the model wrote them - a reasoning item (its
     * reasoning_text part), the message item, one function_call item; streamed, each item's
     * events at its output_index and the same items in the last event's response */
    for (int st = 0; st < 2; st++) {
        got = reply(SRV_RESPONSES, st ? RESP ",\"stream\":true}" : RESP "}", cut, 6, &sse);
        const char *obj = got;
        if (st) { /* the response.completed event's response */
            const char *last = got ? strstr(got, "event: response.completed\ndata: ") : NULL;
            CHECK(last != NULL, "no response.completed: %s", got);
            obj = last ? strchr(last, '{') : NULL;
            const char *want[] = {"response.created",
                                  "response.in_progress",
                                  "response.output_item.added",
                                  "response.content_part.added",
                                  "response.reasoning_text.delta",
                                  "response.reasoning_text.done",
                                  "response.content_part.done",
                                  "response.output_item.done",
                                  "response.output_item.added",
                                  "response.content_part.added",
                                  "response.output_text.delta",
                                  "response.output_text.done",
                                  "response.content_part.done",
                                  "response.output_item.done",
                                  "response.output_item.added",
                                  "response.function_call_arguments.delta",
                                  "response.function_call_arguments.done",
                                  "response.output_item.done",
                                  "response.completed"};
            const char *p = got;
            for (size_t i = 0; p && i < sizeof want / sizeof *want; i++) {
                char ev[80];
                snprintf(ev, sizeof ev, "event: %s\n", want[i]);
                p = strstr(p, ev);
                CHECK(p != NULL, "responses stream: no %s in order", want[i]);
                if (p) p += strlen(ev);
            }
            CHECK(got &&
                      strstr(got, "\"type\":\"response.reasoning_text.done\",\"sequence_number\":"
                                  "5,\"item_id\":\"rs_6553f10000000100\",\"output_index\":0,"
                                  "\"content_index\":0,\"text\":\"The user wants weather.\"}") &&
                      strstr(got, "\"type\":\"response.output_text.delta\",\"sequence_number\":"
                                  "10,\"item_id\":\"msg_6553f10000000101\",\"output_index\":1,") &&
                      strstr(got, "\"type\":\"response.function_call_arguments.done\","
                                  "\"sequence_number\":") &&
                      strstr(got, "\"output_index\":2,\"name\":\"get_weather\","
                                  "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}"),
                  "responses stream: the items' events: %s", got);
            data_lines_parse(got);
        }
        pl_json_doc *d = NULL;
        const char *end = obj ? strstr(obj, "}\n\n") : NULL;
        size_t len = obj ? (st && end ? (size_t)(end - obj) + 1 : strlen(obj)) : 0;
        CHECK(obj && !pl_json_parse(obj, len, &d), "responses (stream %d): not JSON", st);
        const pl_json *root = d ? pl_json_root(d) : NULL;
        if (st) root = pl_json_get(root, "response");
        const pl_json *out = pl_json_get(root, "output"), *rs = pl_json_at(out, 0),
                      *m = pl_json_at(out, 1), *c = pl_json_at(out, 2);
        const char *text =
            pl_json_string(pl_json_get(pl_json_at(pl_json_get(m, "content"), 0), "text"));
        const pl_json *rc = pl_json_at(pl_json_get(rs, "content"), 0);
        const char *rtext = pl_json_string(pl_json_get(rc, "text"));
        CHECK(pl_json_count(out) == 3, "responses (stream %d): %zu output items", st,
              pl_json_count(out));
        CHECK(text && !strcmp(text, "Let me check."), "responses (stream %d): message text '%s'",
              st, text ? text : "(none)");
        same("responses: the reasoning item's type", pl_json_string(pl_json_get(rs, "type")),
             "reasoning");
        same("responses: the reasoning item's id", pl_json_string(pl_json_get(rs, "id")),
             "rs_6553f10000000100");
        same("responses: the reasoning part", pl_json_string(pl_json_get(rc, "type")),
             "reasoning_text");
        same("responses: the reasoning", rtext, "The user wants weather.");
        same("responses: the message id", pl_json_string(pl_json_get(m, "id")),
             "msg_6553f10000000101");
        const char *ty = pl_json_string(pl_json_get(c, "type")),
                   *nm = pl_json_string(pl_json_get(c, "name")),
                   *ar = pl_json_string(pl_json_get(c, "arguments")),
                   *ci = pl_json_string(pl_json_get(c, "call_id")),
                   *id = pl_json_string(pl_json_get(c, "id")),
                   *su = pl_json_string(pl_json_get(c, "status"));
        CHECK(ty && !strcmp(ty, "function_call") && nm && !strcmp(nm, "get_weather") && ar &&
                  !strcmp(ar, "{\"city\":\"Paris\"}") && ci &&
                  !strcmp(ci, "call_6553f10000000100") && id &&
                  !strcmp(id, "fc_6553f10000000100") && su && !strcmp(su, "completed"),
              "responses (stream %d): the function_call item", st);
        int64_t rt = -1;
        pl_json_int(pl_json_get(pl_json_get(pl_json_get(root, "usage"), "output_tokens_details"),
                                "reasoning_tokens"),
                    &rt);
        CHECK(rt == 7, "responses (stream %d): reasoning_tokens %lld", st, (long long)rt);
        pl_json_doc_free(d);
        free(got);
    }
    /* responses: a call alone is the only item; an empty reply one empty message; text
     * after a call a second message item after it; cut at the limit, the open item is
     * incomplete */
    const char *call_only[] = {"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"};
    got = reply(SRV_RESPONSES, RESP "}", call_only, 1, &sse);
    CHECK(got &&
              strstr(got, "\"output\":[{\"id\":\"fc_6553f10000000100\",\"type\":"
                          "\"function_call\"") &&
              !strstr(got, "\"type\":\"message\""),
          "responses: a call alone: %s", got);
    free(got);
    got = reply(SRV_RESPONSES, RESP ",\"stream\":true}", NULL, 0, &sse);
    CHECK(got &&
              strstr(got, "\"output\":[{\"id\":\"msg_6553f10000000100\",\"type\":\"message\","
                          "\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
                          "\"output_text\",\"text\":\"\""),
          "responses: an empty reply: %s", got);
    free(got);
    const char *after[] = {"A.<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>B."};
    got = reply(SRV_RESPONSES, RESP "}", after, 1, &sse);
    CHECK(got && strstr(got, "\"output\":[{\"id\":\"msg_6553f10000000100\"") &&
              strstr(got, "\"text\":\"A.\"") && strstr(got, "\"fc_6553f10000000100\"") &&
              strstr(got, "{\"id\":\"msg_6553f10000000102\",\"type\":\"message\",\"status\":"
                          "\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
                          "\"output_text\",\"text\":\"B.\""),
          "responses: text after a call: %s", got);
    free(got);
    const char *cut_text[] = {"<think>x</think>Some te"};
    got = reply_cut(SRV_RESPONSES, RESP "}", cut_text, 1);
    CHECK(got && strstr(got, "\"status\":\"incomplete\"") &&
              strstr(got, "\"type\":\"reasoning\",\"status\":\"completed\"") &&
              strstr(got, "\"type\":\"message\",\"status\":\"incomplete\""),
          "responses: cut at the limit: %s", got);
    free(got);
    /* an empty reply: Anthropic still gets one (empty) text block */
    got = reply(SRV_MESSAGES, AN_MSG ",\"stream\":true}", NULL, 0, &sse);
    CHECK(got && strstr(got, "\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}") &&
              strstr(got, "\"stop_reason\":\"end_turn\""),
          "%s", got);
    free(got);
}
