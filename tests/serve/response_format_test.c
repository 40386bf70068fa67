/* response_format_test.c - chat's response_format in serve/request.c: text, json_object and
 * json_schema into the schema text the library takes (checked here by compiling it as
 * pooled_generate does); the refusals, one line naming the field. */
#include "test.h"

#include "grammar/grammar.h"
#include "serve/request.h"

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static bool parse(srv_kind k, const char *body, srv_request *r, char *err) {
    return srv_request_parse(k, body, strlen(body), r, err, 256);
}

/* body is taken; its schema (if any) takes text as a whole value (NULL: no schema) */
static void taken(const char *body, const char *text) {
    srv_request r;
    char err[256] = "";
    CHECK(parse(SRV_CHAT, body, &r, err), "%s: %s", body, err);
    CHECK(!text == !r.schema, "%s: schema %s", body, r.schema ? r.schema : "(none)");
    pl_grammar *g = NULL;
    pl_gstate *s = NULL;
    if (text && r.schema)
        CHECK(pl_grammar_compile(r.schema, strlen(r.schema), &g) == PL_OK, "%s: %s", r.schema,
              pl_last_error());
    if (g && pl_gstate_new(g, &s) == PL_OK)
        CHECK(pl_gstate_feed(s, text, strlen(text)) && pl_gstate_complete(s), "%s: %s", body, text);
    pl_gstate_free(s);
    pl_grammar_free(g);
    srv_request_free(&r);
}

static void refused(const char *body, const char *want) {
    srv_request r;
    char err[256] = "";
    CHECK(!parse(SRV_CHAT, body, &r, err), "accepted: %s", body);
    CHECK(strstr(err, want) && !strchr(err, '\n'), "'%s' for %s (wanted '%s')", err, body, want);
    srv_request_free(&r);
}

static void run_tests(void) {
    taken("{" MSGS "}", NULL);
    taken("{" MSGS ",\"response_format\":null}", NULL);
    taken("{" MSGS ",\"response_format\":{\"type\":\"text\"}}", NULL);
    taken("{" MSGS ",\"response_format\":{\"type\":\"json_object\"}}", "{\"a\":[1]}");
    taken("{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
          "\"p\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":"
          "\"integer\"}},\"required\":[\"n\"],\"additionalProperties\":false}}}}",
          "{\"n\":5}");
    taken("{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
          "\"any\"}}}",
          "[1,\"x\"]");
    refused("{" MSGS ",\"response_format\":\"json\"}", "'response_format' must be an object");
    refused("{" MSGS ",\"response_format\":{}}", "'response_format.type'");
    refused("{" MSGS ",\"response_format\":{\"type\":\"xml\"}}", "'response_format.type'");
    refused("{" MSGS ",\"response_format\":{\"type\":\"json_schema\"}}",
            "'response_format.json_schema' must be an object");
    refused("{" MSGS
            ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":7}}}",
            "'response_format.json_schema.name'");
    refused("{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
            "\"p\",\"strict\":1}}}",
            "'response_format.json_schema.strict'");
    refused("{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
            "\"p\",\"schema\":{\"type\":\"string\",\"pattern\":\"x\"}}}}",
            "'response_format.json_schema.schema': 'pattern' is not supported");
    refused(
        "{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
        "\"p\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\\nb\":{}},\"required\":[\"x\"]"
        "}}}}",
        "'response_format.json_schema.schema': required names a property");
    /* another field refused: no schema is kept, nothing leaks (ASan) */
    refused("{" MSGS ",\"response_format\":{\"type\":\"json_object\"},\"temperature\":9}",
            "'temperature'");
}
