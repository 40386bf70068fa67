/* json_test.c - the JSON reader against RFC 8259: values, escapes (surrogate pairs, lone
 * surrogates as U+FFFD, \u0000 kept with the length), numbers, duplicate keys, the depth
 * limit, errors with their byte offset, and compact writing that parses back the same. */
#include "test.h"

#include "base/json.h"

static pl_json_doc *parse(const char *s) {
    pl_json_doc *d = NULL;
    pl_json_parse(s, strlen(s), &d);
    return d;
}

static void fails(const char *s, const char *why) {
    pl_json_doc *d = NULL;
    CHECK(pl_json_parse(s, strlen(s), &d) != PL_OK && !d, "'%s' should fail (%s)", s, why);
    CHECK(strstr(pl_last_error(), "json:") && !strchr(pl_last_error(), '\n'), "one line: %s",
          pl_last_error());
}

static void run_tests(void) {
    pl_json_doc *d =
        parse(" {\"a\": [1, -2.5e1, true, false, null, \"x\"], \"b\": {}, \"a\": 7}\n");
    CHECK(d != NULL, "%s", pl_last_error());
    const pl_json *r = pl_json_root(d);
    int64_t i;
    double f;
    CHECK(pl_json_count(r) == 3, "members kept in order, duplicates too");
    CHECK(pl_json_int(pl_json_get(r, "a"), &i) && i == 7, "the last duplicate wins");
    const pl_json *a = r->obj.vals[0];
    CHECK(pl_json_int(pl_json_at(a, 0), &i) && i == 1, "int");
    CHECK(pl_json_number(pl_json_at(a, 1), &f) && f == -25.0 && !pl_json_int(pl_json_at(a, 1), &i),
          "float");
    CHECK(pl_json_at(a, 2)->type == PL_JSON_TRUE && pl_json_at(a, 4)->type == PL_JSON_NULL,
          "literals");
    CHECK(pl_json_at(a, 6) == NULL && pl_json_get(a, "x") == NULL && pl_json_string(a) == NULL,
          "wrong types");
    pl_json_doc_free(d);

    d = parse("\"\\u00e9\\ud83d\\ude80\\ud800x\\u0000y\\n\\/\"");
    CHECK(d != NULL, "%s", pl_last_error());
    if (d) {
        const pl_json *s = pl_json_root(d);
        const char want[] = "\xc3\xa9\xf0\x9f\x9a\x80\xef\xbf\xbdx\0y\n/";
        CHECK(s->str.len == sizeof want - 1 && !memcmp(s->str.s, want, sizeof want - 1), "escapes");
    }
    pl_json_doc_free(d);
    d = parse("12345678901234567890");
    CHECK(d && !pl_json_int(pl_json_root(d), &i) && pl_json_number(pl_json_root(d), &f) &&
              f > 1.2e19,
          "big int is a float");
    pl_json_doc_free(d);
    d = parse("\xef\xbb\xbf[]");
    CHECK(d && pl_json_count(pl_json_root(d)) == 0, "BOM");
    pl_json_doc_free(d);

    fails("", "empty");
    fails("[1,]", "trailing comma");
    fails("{\"a\" 1}", "no colon");
    fails("[1] x", "trailing characters");
    fails("\"a\x01\"", "control character");
    fails("\"\xff\"", "invalid UTF-8");
    fails("01", "leading zero");
    fails("1.", "no fraction digits");
    fails("\"\\x\"", "bad escape");
    fails("[\"\\u12\"]", "short \\u");
    fails("{'a': 1}", "single quotes");
    fails("nul", "bad literal");
    pl_json_doc *bad = NULL;
    pl_json_parse("[1, 2, @]", 9, &bad);
    CHECK(strstr(pl_last_error(), "at byte 7"), "offset: %s", pl_last_error());

    char deep[400];
    memset(deep, '[', 129), memset(deep + 129, ']', 129), deep[258] = 0;
    fails(deep, "129 levels");
    deep[128] = ']', deep[257] = 0;
    memset(deep, '[', 128), memset(deep + 128, ']', 128), deep[256] = 0;
    d = parse(deep);
    CHECK(d != NULL, "128 levels are fine: %s", pl_last_error());
    pl_json_doc_free(d);

    pl_strbuf b = {0};
    pl_json_quote(&b, "a\"\\\n\x01\xc3\xa9\xff", 8, false);
    CHECK(!strcmp(b.s, "\"a\\\"\\\\\\n\\u0001\xc3\xa9\xef\xbf\xbd\""), "quote: %s", b.s);
    pl_sb_free(&b);
    pl_json_quote(&b, "\xc3\xa9\xf0\x9f\x9a\x80", 6, true);
    CHECK(!strcmp(b.s, "\"\\u00e9\\ud83d\\ude80\""), "ascii quote: %s", b.s);
    pl_sb_free(&b);
    d = parse("{\"k\":[0.1,-3,\"s\",null,{\"n\":true}],\"e\":1e-7}");
    pl_json_write(&b, pl_json_root(d));
    CHECK(!strcmp(b.s, "{\"k\":[0.10000000000000001,-3,\"s\",null,{\"n\":true}],\"e\":9."
                       "9999999999999995e-08}"),
          "write: %s", b.s);
    pl_sb_free(&b);
    pl_json_doc_free(d);
}
