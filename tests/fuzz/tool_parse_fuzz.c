/* tool_parse_fuzz.c - libFuzzer target for the split of a model's reply into text,
 * reasoning and tool calls (serve/tool_parse.c). The first byte picks the options, the
 * second where the reply is cut into pieces. Whatever the cuts, the events are the same as
 * for the reply in one piece; every call's arguments are a JSON object; with nothing to
 * split off the text is the reply itself. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "serve/tool_parse.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "tool_parse_fuzz: %s failed (line %d)\n", #cond, __LINE__);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

typedef struct {
    pl_strbuf log, text;
    char last;
} rec;

static bool piece(rec *r, char kind, const char *s, size_t n) {
    if (r->last != kind) pl_sb_printf(&r->log, "\x01%c", kind);
    r->last = kind;
    pl_sb_append(&r->log, s, n);
    if (kind == 'T') pl_sb_append(&r->text, s, n);
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
    pl_json_doc *doc = NULL;
    REQUIRE(name[0] && strlen(name) <= TP_MAX_NAME);
    REQUIRE(!pl_json_parse(args, n, &doc) && pl_json_root(doc)->type == PL_JSON_OBJECT);
    pl_json_doc_free(doc);
    pl_sb_printf(&r->log,
                 "\x01"
                 "C%s\x02",
                 name);
    pl_sb_append(&r->log, args, n);
    r->last = 'C';
    return true;
}

static void parse(const tp_opts *o, const char *s, size_t n, size_t step, rec *r) {
    tp_sink sink = {on_text, on_reasoning, on_call, r};
    tp_parser *p = tp_new(o, &sink);
    REQUIRE(p);
    for (size_t i = 0; i < n; i += step) REQUIRE(tp_push(p, s + i, n - i < step ? n - i : step));
    REQUIRE(tp_finish(p));
    REQUIRE(tp_n_calls(p) <= TP_MAX_CALLS);
    tp_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    tp_opts o = {.calls = (tp_calls)(data[0] % 3), .think = data[0] & 4, .in_think = data[0] & 8};
    size_t step = 1 + data[1] % 16;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    rec whole = {0}, cut = {0};
    parse(&o, s, n, n ? n : 1, &whole);
    parse(&o, s, n, step, &cut);
    REQUIRE(!whole.log.failed && !cut.log.failed);
    REQUIRE(whole.log.len == cut.log.len &&
            (!whole.log.len || !memcmp(whole.log.s, cut.log.s, whole.log.len)));
    if (o.calls == TP_CALLS_NONE && !o.think)
        REQUIRE(whole.text.len == n && (!n || !memcmp(whole.text.s, s, n)));
    pl_sb_free(&whole.log), pl_sb_free(&whole.text);
    pl_sb_free(&cut.log), pl_sb_free(&cut.text);
    /* the reasoning-id count's state after the text (up to a NUL) does not depend on how it
     * was split into ids */
    size_t z = strnlen(s, n);
    char piece[17];
    tp_think one = {.in = o.in_think}, many = {.in = o.in_think};
    char *all = malloc(z + 1);
    REQUIRE(all);
    memcpy(all, s, z), all[z] = 0;
    tp_think_id(&one, all);
    free(all);
    for (size_t i = 0; i < z; i += step) {
        size_t k = z - i < step ? z - i : step;
        memcpy(piece, s + i, k), piece[k] = 0;
        tp_think_id(&many, piece);
    }
    REQUIRE(one.in == many.in && one.at == many.at);
    return 0;
}
