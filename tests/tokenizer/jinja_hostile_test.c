/* jinja_hostile_test.c - templates and conversations a hostile user writes: integers at
 * the ends of int64 (range, slices, *, **), values that are huge or nested without end,
 * work that would take hours (sort, unique, count, comparing shared lists), and NUL
 * characters in message content, tools, keys, template escapes and the model's template.
 * Each renders what Python's Jinja2 renders (the expected texts were checked with Python)
 * or fails with one line, quickly: never a crash, a hang, or a render cut short with
 * success. */
#include <time.h>

#include "base/json.h"
#include "tok_test_util.h"
#include "tokenizer/jinja.h"

/* Render src with no variables: want_out (exact) or an error containing want_err, within
 * a few seconds. */
static void check(const char *src, const char *want_out, const char *want_err) {
    pl_jinja *t = NULL;
    char *out = NULL;
    size_t len = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pl_status st = pl_jinja_parse(src, strlen(src), &t);
    CHECK(st == PL_OK, "%s: parse: %s", src, pl_last_error());
    if (st != PL_OK) return;
    pl_jinja_ctx *c = pl_jinja_ctx_new();
    st = pl_jinja_render(t, c, &out, &len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (want_out)
        CHECK(st == PL_OK && len == strlen(want_out) && !strcmp(out, want_out),
              "%.80s: want '%s', got '%.80s' (%s)", src, want_out, out ? out : "",
              st ? pl_last_error() : "ok");
    else
        CHECK(st != PL_OK && strstr(pl_last_error(), want_err) && !strchr(pl_last_error(), '\n'),
              "%.80s: want an error with '%s', got %s '%.80s'", src, want_err,
              st ? "error" : "success", st ? pl_last_error() : out);
    CHECK(secs < 20, "%.80s took %.1f s", src, secs);
    if (getenv("JINJA_HOSTILE_TIMES")) fprintf(stderr, "%6.2f s  %.100s\n", secs, src);
    free(out);
    pl_jinja_ctx_free(c);
    pl_jinja_free(t);
}

/* A template that must not parse: an error containing want_err. */
static void check_parse(const char *src, const char *want_err) {
    pl_jinja *t = NULL;
    pl_status st = pl_jinja_parse(src, strlen(src), &t);
    CHECK(st != PL_OK && strstr(pl_last_error(), want_err),
          "%s: want a parse error with '%s', got %s", src, want_err,
          st ? pl_last_error() : "success");
    pl_jinja_free(t);
}

static void test_integers(void) {
    /* range: any int64 bounds and steps, at most a million items */
    check("{{ range(-9223372036854775807, 9223372036854775807)|length }}", NULL,
          "range of more than");
    check("{{ range(0, 10, 9223372036854775807)|list }}", "[0]", NULL);
    check("{{ range(5, -9223372036854775807, -9223372036854775807)|list }}",
          "[5, -9223372036854775802]", NULL);
    check("{{ range(9223372036854775806, 9223372036854775807)|list }}", "[9223372036854775806]",
          NULL);
    check("{{ range(-9223372036854775807 - 1, -9223372036854775807 + 1)|list }}",
          "[-9223372036854775808, -9223372036854775807]", NULL);
    /* slices with extreme steps */
    check("{{ [1, 2, 3][::9223372036854775807] }}", "[1]", NULL);
    check("{{ [1, 2, 3][::-9223372036854775807 - 1] }}", "[3]", NULL);
    check("{{ 'abc'[::-9223372036854775807] }}", "c", NULL);
    check("{{ 'abc'[-9223372036854775807:9223372036854775807] }}", "abc", NULL);
    /* string * int: the size check cannot wrap, an empty string is quick */
    check("{{ 'abcd' * 4611686018427387904 }}", NULL, "string too long");
    check("{{ ('' * 9223372036854775807)|length }}", "0", NULL);
    /* ** by squaring: quick for 0, 1, -1, exact at the edge, overflow is an error */
    check("{{ 1 ** 9223372036854775807 }}", "1", NULL);
    check("{{ (-1) ** 9223372036854775806 }}", "1", NULL);
    check("{{ 0 ** 9223372036854775807 }}", "0", NULL);
    check("{{ 2 ** 62 }}", "4611686018427387904", NULL);
    check("{{ (-2) ** 63 }}", "-9223372036854775808", NULL);
    check("{{ 2 ** 63 }}", NULL, "integer overflow");
    check("{{ 3 ** 40 }}", NULL, "integer overflow");
    check("{{ (-9223372036854775807 - 1)|abs }}", NULL, "integer overflow");
    check("{{ (-9223372036854775807)|abs }}", "9223372036854775807", NULL);
    /* literals past int64 or longer than 63 characters are errors, not other numbers */
    check_parse("{{ 99999999999999999999 }}", "out of range");
    check_parse("{{ 0.00000000000000000000000000000000000000000000000000000000000000000001 }}",
                "too long");
    /* int of a string: the whole string, NUL included */
    check("{{ '12\\x003'|int }}", "0", NULL);
    check("{{ '12\\x003'|float }}", "0.0", NULL);
    check("{{ ' 12 '|int }}", "12", NULL);
}

/* tojson(sort_keys=true) of a dict of 200,000 keys (tools JSON can be that big): n log n. */
static void test_sort_keys(void) {
    pl_strbuf b = {0};
    pl_sb_putc(&b, '{');
    for (int i = 200000; i-- > 0;) pl_sb_printf(&b, "%s\"k%06d\":%d", i < 199999 ? "," : "", i, i);
    pl_sb_putc(&b, '}');
    pl_json_doc *d = NULL;
    CHECK(pl_json_parse(b.s, b.len, &d) == PL_OK, "%s", pl_last_error());
    pl_sb_free(&b);
    pl_jinja *t = NULL;
    const char *src = "{{ (d|tojson(sort_keys=true))[:27] }}";
    CHECK(pl_jinja_parse(src, strlen(src), &t) == PL_OK, "%s", pl_last_error());
    pl_jinja_ctx *c = pl_jinja_ctx_new();
    pl_jinja_set_json(c, "d", pl_json_root(d));
    char *out = NULL;
    time_t t0 = time(NULL);
    CHECK(pl_jinja_render(t, c, &out, NULL) == PL_OK &&
              !strcmp(out, "{\"k000000\": 0, \"k000001\": 1"),
          "tojson sort_keys: %s", out ? out : pl_last_error());
    CHECK(time(NULL) - t0 < 20, "tojson sort_keys took %ld s", (long)(time(NULL) - t0));
    free(out);
    pl_jinja_ctx_free(c);
    pl_jinja_free(t);
    pl_json_doc_free(d);
}

static void test_sizes(void) {
    /* a list that holds itself through namespaces compares by identity, not forever */
    check("{% set a = namespace(x=0) %}{% set b = namespace(x=0) %}{% set a.x = [a] %}"
          "{% set b.x = [b] %}{{ a == b }} {{ a == a }} {{ [a] == [b] }}",
          "False True False", NULL);
    /* lists nested 250,000 deep: comparing them is refused, not a stack overflow */
    check("{% set ns = namespace(x=[], y=[]) %}{% for i in range(250000) %}"
          "{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}{{ ns.x == ns.y }}",
          NULL, "nested too deep");
    check("{% set ns = namespace(x=[], y=[]) %}{% for i in range(250000) %}"
          "{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}{{ ns.x < ns.y }}",
          NULL, "nested too deep");
    /* 2^60 items shared by reference: comparing or printing them stops at the limits */
    static const char dag[] = "{% set ns = namespace(x=[0], y=[0]) %}{% for i in range(60) %}"
                              "{% set ns.x = [ns.x, ns.x] %}{% set ns.y = [ns.y, ns.y] %}"
                              "{% endfor %}";
    static const char *const uses[][2] = {
        {"{{ ns.x == ns.y }}", "takes too long"},
        {"{{ ns.x in [ns.y] }}", "takes too long"},
        {"{{ ns.x }}", "longer than"},
        {"{{ ns.x ~ '' }}", "longer than"},
        {"{{ ns.x|string|length }}", "longer than"},
        {"{{ [ns.x]|join(',')|length }}", "longer than"},
    };
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        char src[512];
        snprintf(src, sizeof src, "%s%s", dag, uses[i][0]);
        check(src, NULL, uses[i][1]);
    }
    /* 100,000 items sorted in n log n; a million, unique stops at the work limit */
    check("{{ (range(100000)|sort(reverse=true))[0] }} {{ (range(100000)|sort)[-1] }}",
          "99999 99999", NULL);
    check("{{ [3, 1, 2, 1]|sort }} {{ [{'a': 2, 'b': 0}, {'a': 1, 'b': 1}, {'a': 2, 'b': 2}]"
          "|sort(attribute='a')|map(attribute='b')|list }}",
          "[1, 1, 2, 3] [1, 0, 2]", NULL);
    check("{{ range(1000000)|unique|length }}", NULL, "takes too long");
    /* scanning a 16 MB string a million times is charged too */
    check("{% set s = 'a' * 16000000 %}{% for i in range(1000000) %}{{ s|length > 0 }}"
          "{% endfor %}",
          NULL, "takes too long");
    check("{% set s = 'a' * 16000000 %}{% for i in range(1000000) %}{{ s.isalpha() }}"
          "{% endfor %}",
          NULL, "takes too long");
    /* find/count on 16 MB: linear */
    check("{{ ('a' * 16000000).count('a' * 8000000) }} {{ ('ab' * 4000000).find('ba' * 100) }}",
          "2 1", NULL);
    check("{{ 'abc'.count('') }} {{ 'abc'.rfind('') }} {{ 'abc'.find('') }}", "4 3 0", NULL);
    /* strftime_now: a format with a NUL, or a result past the buffer, is an error */
    check("{{ strftime_now('%Y\\x00%m') }}", NULL, "NUL");
    check("{{ strftime_now('%Y' * 100) }}", NULL, "too long");
}

/* ---- NUL characters through the chat renderer ---- */

static pl_status render_json(const char *tmpl, const char *messages, const char *tools,
                             char **out) {
    pl_json_doc *m = NULL, *t = NULL;
    pl_status st = pl_json_parse(messages, strlen(messages), &m);
    if (st == PL_OK && tools) st = pl_json_parse(tools, strlen(tools), &t);
    pl_chat_opts opts = {.add_generation_prompt = true, .enable_thinking = true};
    if (st == PL_OK)
        st = pl_chat_render_template(tmpl, "<s>", "</s>", pl_json_root(m),
                                     t ? pl_json_root(t) : NULL, &opts, out);
    pl_json_doc_free(m), pl_json_doc_free(t);
    return st;
}

static void check_chat(const char *tmpl, const char *messages, const char *tools,
                       const char *want_err) {
    char *out = NULL;
    pl_status st = render_json(tmpl, messages, tools, &out);
    CHECK(st != PL_OK && strstr(pl_last_error(), want_err), "%s / %s: want '%s', got %s '%s'",
          messages, tools ? tools : "", want_err, st ? "error" : "success",
          st ? pl_last_error() : out);
    free(out);
}

static const char k_chatml[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if tools %}{{ tools|tojson }}{% endif %}";

static void test_nul(void) {
    check_chat(k_chatml, "[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]", NULL,
               "message 1 contains a NUL");
    check_chat(k_chatml,
               "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":"
               "[{\"type\":\"text\",\"text\":\"x\\u0000\"}]}]",
               NULL, "message 2 contains a NUL");
    check_chat(k_chatml, "[{\"role\":\"user\",\"content\":\"a\",\"na\\u0000me\":1}]", NULL,
               "message 1 contains a NUL");
    check_chat(k_chatml, "[{\"role\":\"user\",\"content\":\"a\"}]",
               "[{\"type\":\"function\",\"function\":{\"name\":\"f\\u0000\"}}]",
               "tools contain a NUL");
    /* a template that makes a NUL itself */
    check_chat("{{ 'a\\x00b' }}", "[]", NULL, "output contains a NUL");
    check_chat("{{ 'a\\0b' }}", "[]", NULL, "output contains a NUL");
    check_chat("{{ 'a\\u0000b' }}", "[]", NULL, "output contains a NUL");
    /* the same content without the NUL renders */
    char *out = NULL;
    CHECK(render_json(k_chatml, "[{\"role\":\"user\",\"content\":\"a\\u0001b\"}]", NULL, &out) ==
                  PL_OK &&
              !strcmp(out, "<|im_start|>user\na\001b<|im_end|>\n"),
          "a control character other than NUL is kept");
    free(out);

    /* the model's own template with a NUL inside (GGUF strings carry their length) */
    pl_gguf *src = NULL;
    CHECK(pl_gguf_open(test_shared("fixtures/hf/qwen3/qwen3-q8_0.gguf"), &src) == PL_OK, "%s",
          pl_last_error());
    if (!src) return;
    pl_gguf *g = pl_gguf_new();
    for (int64_t i = 0; i < pl_gguf_kv_count(src); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (!strncmp(key, "tokenizer.", 10)) pl_gguf_set_value(g, key, &kv->value);
    }
    static const char tmpl[] = "{{ 'x' }}\0{{ 'y' }}";
    pl_gguf_value v = {.type = PL_GGUF_STRING, .str = {tmpl, sizeof tmpl - 1}};
    pl_gguf_set_value(g, "tokenizer.chat_template", &v);
    pl_tokenizer *t = NULL;
    CHECK(pl_tok_load(g, &t) == PL_OK, "%s", pl_last_error());
    if (t) {
        pl_json_doc *m = NULL;
        pl_json_parse("[]", 2, &m);
        CHECK(pl_chat_render_json(t, pl_json_root(m), NULL, NULL, &out) != PL_OK &&
                  strstr(pl_last_error(), "chat template contains a NUL"),
              "want an error for the NUL in the model's template, got %s",
              out ? out : pl_last_error());
        free(out);
        out = NULL;
        pl_json_doc_free(m);
    }
    pl_tok_free(t);
    pl_gguf_free(g);
    pl_gguf_free(src);

    /* the command: one line, non-zero exit */
    char path[600], args[2048];
    snprintf(path, sizeof path, "%s/nul.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    if (f) fputs("[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]", f), fclose(f);
    snprintf(args, sizeof args, "template -m '%s' --messages '%s'",
             test_shared("fixtures/hf/qwen3/qwen3-q8_0.gguf"), path);
    check_command_fails(args, "NUL");
}

static void run_tests(void) {
    test_integers();
    test_sizes();
    test_sort_keys();
    test_nul();
}
