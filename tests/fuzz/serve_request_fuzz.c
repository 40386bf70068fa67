/* serve_request_fuzz.c - libFuzzer target for `pooled serve`'s request parsing
 * (srv_request_parse: a body of any bytes into the request struct). The first byte picks
 * the route. A refusal must leave a one-line reason that the API's error object carries; a
 * success must hold what the rest of the server relies on (messages with role and text,
 * stop strings within their limits, sane sampling values, tools and tool calls as JSON the
 * chat template can read). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "serve/api.h"
#include "serve/request.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "serve_request_fuzz: %s failed (line %d)\n", #cond, __LINE__);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static pl_json_doc *doc;
static const pl_json *json_root(const char *s) {
    REQUIRE(!pl_json_parse(s, strlen(s), &doc));
    return pl_json_root(doc);
}
static void json_free(void) {
    pl_json_doc_free(doc);
    doc = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv_kind kind = (srv_kind)(data[0] % 7);
    srv_request r;
    char err[512] = "";
    bool ok = srv_request_parse(kind, (const char *)data + 1, size - 1, &r, err, sizeof err);
    if (!ok) {
        REQUIRE(err[0] && !strchr(err, '\n'));
        pl_strbuf b = {0};
        srv_api_error(&b, data[0] & 1, 400, err);
        REQUIRE(!b.failed && b.len > 0);
        pl_sb_free(&b);
    } else {
        REQUIRE(r.kind == kind);
        for (int i = 0; i < r.n_msgs; i++) {
            REQUIRE(r.msgs[i].role && r.msgs[i].content);
            REQUIRE(strcmp(r.msgs[i].role, "developer"));
            /* what the chat template gets: JSON arrays of calls with object arguments */
            if (r.msgs[i].tool_calls) {
                const pl_json *c = json_root(r.msgs[i].tool_calls);
                REQUIRE(c->type == PL_JSON_ARRAY && pl_json_count(c) <= SRV_MAX_CALLS_IN);
                for (size_t j = 0; j < pl_json_count(c); j++)
                    REQUIRE(
                        pl_json_get(pl_json_get(pl_json_at(c, j), "function"), "arguments")->type ==
                        PL_JSON_OBJECT);
                json_free();
            }
        }
        for (int i = 0; i < r.n_msgs; i++) /* reasoning only where the template reads it */
            REQUIRE(!r.msgs[i].reasoning || !strcmp(r.msgs[i].role, "assistant"));
        if (r.text_format) { /* responses' text.format, echoed: a JSON object */
            REQUIRE(kind == SRV_RESPONSES && json_root(r.text_format)->type == PL_JSON_OBJECT);
            json_free();
        }
        REQUIRE(r.n_tools >= 0 && r.n_tools <= SRV_MAX_TOOLS && !r.tools == !r.n_tools);
        if (r.tools) {
            REQUIRE(pl_json_count(json_root(r.tools)) == (size_t)r.n_tools);
            json_free();
        }
        if (r.tool_choice == SRV_TOOLS_NAMED) REQUIRE(r.tool_name[0] && r.tools);
        if (kind == SRV_CHAT || kind == SRV_MESSAGES || kind == SRV_COUNT_TOKENS ||
            kind == SRV_RESPONSES)
            REQUIRE(r.n_msgs > 0);
        if (kind == SRV_COMPLETION || kind == SRV_TOKENIZE) REQUIRE(r.prompt);
        REQUIRE(r.n_stop >= 0 && r.n_stop <= SRV_MAX_STOPS);
        for (int i = 0; i < r.n_stop; i++)
            REQUIRE(r.stop[i] && r.stop[i][0] && strlen(r.stop[i]) <= SRV_MAX_STOP_LEN);
        REQUIRE(r.temperature >= 0 && r.temperature <= 2 && r.top_p >= 0 && r.top_p <= 1);
        REQUIRE(r.max_tokens == -1 || r.max_tokens >= 1);
        REQUIRE(r.logprobs >= -1 && r.logprobs <= SRV_MAX_TOP_LOGPROBS);
        for (int64_t i = 0; i < r.n_tokens; i++) REQUIRE(r.tokens[i] >= 0);
    }
    srv_request_free(&r);
    return 0;
}
