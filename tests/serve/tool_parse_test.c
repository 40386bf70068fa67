/* tool_parse_test.c - the split of a reply into text, reasoning and tool calls
 * (serve/tool_parse.c): model outputs in each format, every split of them into two and three
 * pieces giving the same events, and malformed calls given back as text. */
#include "test.h"

#include "base/strbuf.h"
#include "serve/tool_parse.h"

/* The events as one string: T[text] R[reasoning] C[name args], adjacent pieces merged. */
typedef struct {
    pl_strbuf log;
    char last;
} rec;

static bool piece(rec *r, char kind, const char *s, size_t n) {
    if (r->last != kind) {
        if (r->last) pl_sb_puts(&r->log, "] ");
        pl_sb_putc(&r->log, kind);
        pl_sb_putc(&r->log, '[');
        r->last = kind;
    }
    pl_sb_append(&r->log, s, n);
    return true;
}
static bool on_text(void *ud, const char *s, size_t n) {
    return piece(ud, 'T', s, n);
}
static bool on_reasoning(void *ud, const char *s, size_t n) {
    return piece(ud, 'R', s, n);
}
static bool on_call(void *ud, const char *name, const char *args, size_t n) {
    rec *r = ud;
    if (r->last) pl_sb_puts(&r->log, "] ");
    pl_sb_printf(&r->log, "C[%s ", name);
    pl_sb_append(&r->log, args, n);
    r->last = 'c'; /* two calls in a row stay two */
    return true;
}

/* The events for s fed in pieces cut at a and b (0 <= a <= b <= len). Malloc'd. */
static char *parse_split(const tp_opts *o, const char *s, size_t a, size_t b) {
    rec r = {0};
    tp_sink sink = {on_text, on_reasoning, on_call, &r};
    tp_parser *p = tp_new(o, &sink);
    size_t n = strlen(s);
    tp_push(p, s, a);
    tp_push(p, s + a, b - a);
    tp_push(p, s + b, n - b);
    tp_finish(p);
    tp_free(p);
    if (r.last) pl_sb_puts(&r.log, "]");
    char *out = pl_sb_take(&r.log, NULL);
    return out ? out : calloc(1, 1);
}

/* s gives want, whatever the pieces. */
static void expect(const tp_opts *o, const char *s, const char *want) {
    size_t n = strlen(s);
    char *whole = parse_split(o, s, n, n);
    CHECK(!strcmp(whole, want), "%s\n  gave %s\n  want %s", s, whole, want);
    int bad = 0;
    for (size_t a = 0; a <= n && bad < 3; a++)
        for (size_t b = a; b <= n && bad < 3; b += (n > 80 ? 7 : 1)) {
            char *got = parse_split(o, s, a, b);
            if (strcmp(got, whole)) {
                bad++;
                CHECK(false, "%s cut at %zu, %zu: %s (whole: %s)", s, a, b, got, whole);
            }
            free(got);
        }
    /* byte by byte */
    rec r = {0};
    tp_sink sink = {on_text, on_reasoning, on_call, &r};
    tp_parser *p = tp_new(o, &sink);
    for (size_t i = 0; i < n; i++) tp_push(p, s + i, 1);
    tp_finish(p);
    tp_free(p);
    if (r.last) pl_sb_puts(&r.log, "]");
    CHECK(r.log.s && !strcmp(r.log.s, whole), "byte by byte: %s", r.log.s);
    pl_sb_free(&r.log);
    free(whole);
}

static void run_tests(void) {
    tp_opts qwen = {.calls = TP_CALLS_QWEN, .think = true};
    /* Qwen3: reasoning, text, then two calls (the blank lines around the tags dropped) */
    expect(&qwen,
           "<think>\nLook it up.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", "
           "\"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n"
           "{\"name\": \"t2\", \"arguments\": \"{\\\"a\\\": [1, 2.5]}\"}\n</tool_call>",
           "R[Look it up.] T[Checking.] C[get_weather {\"city\":\"Paris\",\"days\":3}] "
           "C[t2 {\"a\":[1,2.5]}]");
    /* Qwen3.5: the prompt opened <think>; XML parameters, JSON values where they parse */
    tp_opts q35 = {.calls = TP_CALLS_QWEN, .think = true, .in_think = true};
    expect(&q35,
           "Plan.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew "
           "York\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=opts>\n[\"c\", "
           "1.5]\n</parameter>\n</function>\n</tool_call>",
           "R[Plan.] C[get_weather {\"city\":\"New York\",\"days\":3,\"opts\":[\"c\",1.5]}]");
    /* not calls: given back as text, nothing lost */
    expect(&qwen, "a <tool_call>{\"name\": 1}</tool_call> b",
           "T[a <tool_call>{\"name\": 1}</tool_call> b]");
    expect(&qwen, "x <tool_call>{\"name\": \"f\", \"arguments\": {}", /* unfinished */
           "T[x <tool_call>{\"name\": \"f\", \"arguments\": {}]");
    expect(&qwen, "1 < 2 and <tool but <tool_cal", "T[1 < 2 and <tool but <tool_cal]");
    expect(&qwen, "<tool_call><function=f><parameter=a>1</parameter></function>junk</tool_call>",
           "T[<tool_call><function=f><parameter=a>1</parameter></function>junk</tool_call>]");
    expect(&qwen, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
           "T[<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>]");
    /* no arguments: an empty object; an unclosed think is reasoning to the end */
    expect(&qwen, "<tool_call>{\"name\":\"now\"}</tool_call>", "C[now {}]");
    expect(&qwen, "<think>still thinking", "R[still thinking]");
    /* tags not asked for are text */
    tp_opts plain = {.calls = TP_CALLS_NONE};
    expect(&plain, "<think>x</think><tool_call>{\"name\":\"f\"}</tool_call>\n",
           "T[<think>x</think><tool_call>{\"name\":\"f\"}</tool_call>\n]");
    tp_opts think_only = {.calls = TP_CALLS_NONE, .think = true};
    expect(&think_only, "<think>r</think>\n\n<tool_call>{\"name\":\"f\"}</tool_call> ",
           "R[r] T[<tool_call>{\"name\":\"f\"}</tool_call> ]");
    /* Llama 3: the whole reply one JSON object */
    tp_opts llama = {.calls = TP_CALLS_LLAMA3};
    expect(&llama, "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
           "C[get_weather {\"city\":\"Paris\"}]");
    expect(&llama, "{\"name\": \"get_weather\"} and more",
           "T[{\"name\": \"get_weather\"} and more]");
    expect(&llama, "Sure: {\"name\": \"f\", \"parameters\": {}}",
           "T[Sure: {\"name\": \"f\", \"parameters\": {}}]");

    /* the parse of one call, and its limits */
    char *name, *args;
    size_t n;
    const char *one = " {\"name\":\"f\",\"arguments\":{\"x\":\"\\u00e9\"}} ";
    CHECK(tp_parse_call(one, strlen(one), &name, &args, &n) && !strcmp(name, "f") &&
              !strcmp(args, "{\"x\":\"\xc3\xa9\"}") && n == strlen(args),
          "json call");
    free(name), free(args);
    CHECK(!tp_parse_call("{\"name\":\"\"}", 11, &name, &args, &n) && !name && !args,
          "an empty name is no call");
    /* a reply past TP_MAX_CALLS calls: the rest is text */
    pl_strbuf many = {0};
    for (int i = 0; i <= TP_MAX_CALLS; i++)
        pl_sb_puts(&many, "<tool_call>{\"name\":\"f\"}</tool_call>");
    char *got = parse_split(&qwen, many.s, 0, 0);
    CHECK(strstr(got, "T[<tool_call>{\"name\":\"f\"}</tool_call>]") && !strstr(got, "]T"),
          "call %d is text", TP_MAX_CALLS + 1);
    free(got);
    pl_sb_free(&many);

    /* reasoning ids: the tags' ids and those between them; a tag over several ids counts
     * from the id that ends it; a prompt that ended inside <think> counts from the first */
    struct {
        bool in;
        const char *ids[8];
        const char *want; /* per id: r reasoning, . not */
    } th[] = {
        {false, {"<think>", "\nplan", " more", "</think>", "\n\nHi", "<think>"}, "rrrr.r"},
        {false, {"Hi <", "th", "ink>x", "</", "think", ">", " y"}, "..rrrr."},
        {false, {"a <b> </think>", "<thin", "g> <think", ">"}, "...r"},
        {true, {"still", "</think>", "done"}, "rr."},
        {false, {"<<think>>", "x</think></think>"}, "rr"},
    };
    for (size_t c = 0; c < sizeof th / sizeof *th; c++) {
        tp_think t = {.in = th[c].in};
        for (size_t i = 0; th[c].ids[i]; i++)
            CHECK(tp_think_id(&t, th[c].ids[i]) == (th[c].want[i] == 'r'),
                  "think case %zu: id %zu '%s' should%s be reasoning", c, i, th[c].ids[i],
                  th[c].want[i] == 'r' ? "" : " not");
    }
}
