/* request.c - API request bodies (JSON) into srv_request, every field's type and range
 * checked; fields this slice does not know are ignored, as the APIs' own servers do. */
#include "request.h"

#include <math.h>
#include <pooled.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

typedef struct {
    char *err;
    size_t cap;
} ectx;

static bool fail(ectx *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(ectx *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, e->cap, fmt, ap);
    va_end(ap);
    /* Reasons may quote the client's strings; the error stays one line whatever they hold. */
    for (char *c = e->err; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    return false;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A string without NUL bytes (the model's text is a C string). */
static bool take_text(ectx *e, const pl_json *v, const char *what, char **out) {
    if (!v || v->type != PL_JSON_STRING) return fail(e, "'%s' must be a string", what);
    if (memchr(v->str.s, 0, v->str.len)) return fail(e, "'%s' holds a NUL character", what);
    if (!(*out = dup_n(v->str.s, v->str.len))) return fail(e, "out of memory");
    return true;
}

/* An optional number in [lo, hi]: absent or null leaves *out. */
static bool opt_num(ectx *e, const pl_json *o, const char *key, double lo, double hi, double *out) {
    const pl_json *v = pl_json_get(o, key);
    if (!v || v->type == PL_JSON_NULL) return true;
    double d;
    if (!pl_json_number(v, &d)) return fail(e, "'%s' must be a number", key);
    if (!(d >= lo && d <= hi)) return fail(e, "'%s' must be between %g and %g", key, lo, hi);
    *out = d;
    return true;
}

static bool opt_int(ectx *e, const pl_json *o, const char *key, int64_t lo, int64_t hi,
                    int64_t *out) {
    const pl_json *v = pl_json_get(o, key);
    if (!v || v->type == PL_JSON_NULL) return true;
    int64_t i;
    if (!pl_json_int(v, &i)) return fail(e, "'%s' must be an integer", key);
    if (i < lo || i > hi)
        return fail(e, "'%s' must be between %lld and %lld", key, (long long)lo, (long long)hi);
    *out = i;
    return true;
}

static bool opt_bool(ectx *e, const pl_json *o, const char *key, bool *out) {
    const pl_json *v = pl_json_get(o, key);
    if (!v || v->type == PL_JSON_NULL) return true;
    if (v->type != PL_JSON_TRUE && v->type != PL_JSON_FALSE)
        return fail(e, "'%s' must be true or false", key);
    *out = v->type == PL_JSON_TRUE;
    return true;
}

static bool add_stop(ectx *e, srv_request *r, const pl_json *v, const char *key) {
    if (!v || v->type != PL_JSON_STRING) return fail(e, "'%s' must hold strings", key);
    if (v->str.len == 0) return true; /* an empty stop would end every reply at once */
    if (v->str.len > SRV_MAX_STOP_LEN)
        return fail(e, "'%s': a stop string is longer than %d bytes", key, SRV_MAX_STOP_LEN);
    if (r->n_stop == SRV_MAX_STOPS)
        return fail(e, "'%s': more than %d stop strings", key, SRV_MAX_STOPS);
    return take_text(e, v, key, &r->stop[r->n_stop++]);
}

/* stop (OpenAI: a string or an array) or stop_sequences (Anthropic: an array). */
static bool take_stops(ectx *e, const pl_json *o, const char *key, bool string_ok, srv_request *r) {
    const pl_json *v = pl_json_get(o, key);
    if (!v || v->type == PL_JSON_NULL) return true;
    if (v->type == PL_JSON_STRING && string_ok) return add_stop(e, r, v, key);
    if (v->type != PL_JSON_ARRAY)
        return fail(e, "'%s' must be %s", key,
                    string_ok ? "a string or an array of strings" : "an array of strings");
    for (size_t i = 0; i < pl_json_count(v); i++)
        if (!add_stop(e, r, pl_json_at(v, i), key)) return false;
    return true;
}

/* Message content: a string, or an array of text blocks ({"type": "text", "text": ...});
 * OpenAI also allows null for an assistant's tool-call turn. Blocks are joined. */
static bool take_content(ectx *e, const pl_json *c, const char *where, bool null_ok, char **out) {
    if (c && c->type == PL_JSON_STRING) return take_text(e, c, where, out);
    if (null_ok && (!c || c->type == PL_JSON_NULL))
        return (*out = dup_n("", 0)) ? true : fail(e, "out of memory");
    if (!c || c->type != PL_JSON_ARRAY)
        return fail(e, "%s must be a string or an array of text blocks", where);
    pl_strbuf b = {0};
    for (size_t j = 0; j < pl_json_count(c); j++) {
        const pl_json *blk = pl_json_at(c, j);
        const char *type = pl_json_string(pl_json_get(blk, "type"));
        if (!type) {
            pl_sb_free(&b);
            return fail(e, "%s[%zu] must be an object with a 'type'", where, j);
        }
        if (strcmp(type, "text") && strcmp(type, "input_text") && strcmp(type, "output_text")) {
            pl_sb_free(&b);
            return fail(e, "%s[%zu]: blocks of type '%.40s' are not supported (text only)", where,
                        j, type);
        }
        const pl_json *t = pl_json_get(blk, "text");
        if (!t || t->type != PL_JSON_STRING || memchr(t->str.s, 0, t->str.len)) {
            pl_sb_free(&b);
            return fail(e, "%s[%zu].text must be a string without NUL characters", where, j);
        }
        pl_sb_append(&b, t->str.s, t->str.len);
    }
    if (!(*out = pl_sb_take(&b, NULL))) return fail(e, "out of memory");
    return true;
}

static srv_msg *new_msg(ectx *e, srv_request *r, const char *role) {
    srv_msg *m = &r->msgs[r->n_msgs];
    if (!(m->role = dup_n(role, strlen(role)))) return fail(e, "out of memory"), NULL;
    r->n_msgs++;
    return m;
}

static bool add_msg(ectx *e, srv_request *r, const char *role, const pl_json *content,
                    const char *where, bool null_ok) {
    srv_msg *m = new_msg(e, r, role);
    return m && take_content(e, content, where, null_ok, &m->content);
}

static bool take_oa_tool_fields(ectx *e, const pl_json *m, size_t i, srv_msg *out);
static bool take_an_blocks(ectx *e, srv_request *r, const char *role, const pl_json *content,
                           size_t i);

static bool take_messages(ectx *e, const pl_json *root, srv_request *r, bool anthropic) {
    const pl_json *msgs = pl_json_get(root, "messages");
    if (!msgs || msgs->type != PL_JSON_ARRAY) return fail(e, "'messages' must be an array");
    size_t n = pl_json_count(msgs);
    if (n == 0) return fail(e, "'messages' is empty");
    const pl_json *sys = anthropic ? pl_json_get(root, "system") : NULL;
    if (sys && sys->type == PL_JSON_NULL) sys = NULL;
    /* an Anthropic message becomes one per tool_result block besides its own */
    size_t cap = n + 1;
    for (size_t i = 0; anthropic && i < n; i++)
        cap += pl_json_count(pl_json_get(pl_json_at(msgs, i), "content"));
    if (!(r->msgs = calloc(cap, sizeof *r->msgs))) return fail(e, "out of memory");
    if (sys && !add_msg(e, r, "system", sys, "'system'", false)) return false;
    for (size_t i = 0; i < n; i++) {
        const pl_json *m = pl_json_at(msgs, i);
        char where[64];
        snprintf(where, sizeof where, "messages[%zu].content", i);
        const char *role = pl_json_string(pl_json_get(m, "role"));
        if (!role) return fail(e, "messages[%zu] must be an object with a string 'role'", i);
        bool ok_role = anthropic ? !strcmp(role, "user") || !strcmp(role, "assistant")
                                 : !strcmp(role, "system") || !strcmp(role, "developer") ||
                                       !strcmp(role, "user") || !strcmp(role, "assistant") ||
                                       !strcmp(role, "tool");
        if (!ok_role)
            return fail(e, "messages[%zu].role '%.40s' is not one of %s", i, role,
                        anthropic ? "user, assistant" : "system, developer, user, assistant, tool");
        if (!strcmp(role, "developer")) role = "system";
        const pl_json *c = pl_json_get(m, "content");
        if (anthropic && c && c->type == PL_JSON_ARRAY) {
            if (!take_an_blocks(e, r, role, c, i)) return false;
            continue;
        }
        bool null_ok = !anthropic && !strcmp(role, "assistant");
        if (!add_msg(e, r, role, c, where, null_ok)) return false;
        if (!anthropic && !take_oa_tool_fields(e, m, i, &r->msgs[r->n_msgs - 1])) return false;
    }
    return true;
}

static bool add_call(ectx *e, pl_strbuf *b, const char *where, const pl_json *id,
                     const pl_json *name, const pl_json *args);

/* A Responses input item: a function_call (the model's earlier call, {"call_id", "name",
 * "arguments": a JSON string}) joins the assistant message just before it (or starts one),
 * as chat's tool_calls; a function_call_output ({"call_id", "output"}) is a tool message. */
static bool take_fn_item(ectx *e, srv_request *r, const pl_json *m, size_t i, bool call, int *run) {
    char where[64];
    snprintf(where, sizeof where, "input[%zu]", i);
    const pl_json *id = pl_json_get(m, "call_id");
    if (!id || id->type != PL_JSON_STRING) return fail(e, "%s.call_id must be a string", where);
    if (!call) {
        srv_msg *t = new_msg(e, r, "tool");
        snprintf(where, sizeof where, "input[%zu].output", i);
        return t && take_text(e, id, "call_id", &t->tool_call_id) &&
               take_content(e, pl_json_get(m, "output"), where, false, &t->content);
    }
    srv_msg *a = r->n_msgs ? &r->msgs[r->n_msgs - 1] : NULL;
    if (!a || strcmp(a->role, "assistant")) {
        if (!(a = new_msg(e, r, "assistant"))) return false;
        if (!(a->content = dup_n("", 0))) return fail(e, "out of memory");
    }
    if (++*run > SRV_MAX_CALLS_IN)
        return fail(e, "%s: more than %d function calls in a row", where, SRV_MAX_CALLS_IN);
    pl_strbuf b = {0};
    if (a->tool_calls) { /* "[...]" so far: reopen it */
        size_t len = strlen(a->tool_calls);
        pl_sb_append(&b, a->tool_calls, len - 1);
        pl_sb_putc(&b, ',');
    } else {
        pl_sb_putc(&b, '[');
    }
    if (!add_call(e, &b, where, id, pl_json_get(m, "name"), pl_json_get(m, "arguments")))
        return pl_sb_free(&b), false;
    pl_sb_putc(&b, ']');
    free(a->tool_calls);
    if (!(a->tool_calls = pl_sb_take(&b, NULL))) return fail(e, "out of memory");
    return true;
}

/* One Responses input message (role system / developer / user / assistant). */
static bool take_input_message(ectx *e, srv_request *r, const pl_json *m, size_t i,
                               const char *role, const char *where) {
    if (!role) return fail(e, "input[%zu] must be a message with a string 'role'", i);
    if (!strcmp(role, "developer")) role = "system";
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))
        return fail(e, "input[%zu].role '%.40s' is not one of system, developer, user, assistant",
                    i, role);
    return add_msg(e, r, role, pl_json_get(m, "content"), where, false);
}

/* A Responses reasoning item (the model's earlier <think> block, as this server answers
 * it: {"type": "reasoning", "content": [{"type": "reasoning_text", "text"}], "summary":
 * [...]}): its text, NULL when it has none (OpenAI's own items carry only a summary or
 * encrypted_content, which are not the model's words). */
static bool take_reasoning_item(ectx *e, const pl_json *m, size_t i, char **out) {
    const pl_json *c = pl_json_get(m, "content");
    pl_strbuf b = {0};
    if (c && c->type != PL_JSON_NULL && c->type != PL_JSON_ARRAY)
        return fail(e, "input[%zu].content must be an array of reasoning_text parts", i);
    for (size_t k = 0; c && k < pl_json_count(c); k++) {
        const pl_json *p = pl_json_at(c, k), *t = pl_json_get(p, "text");
        const char *type = pl_json_string(pl_json_get(p, "type"));
        if (!type || strcmp(type, "reasoning_text") || !t || t->type != PL_JSON_STRING ||
            memchr(t->str.s, 0, t->str.len)) {
            pl_sb_free(&b);
            return fail(e,
                        "input[%zu].content[%zu] must be {\"type\": \"reasoning_text\", "
                        "\"text\": a string without NUL characters}",
                        i, k);
        }
        pl_sb_append(&b, t->str.s, t->str.len);
    }
    *out = NULL; /* none: nothing for the template to show */
    if (b.len && !(*out = pl_sb_take(&b, NULL))) return fail(e, "out of memory");
    pl_sb_free(&b);
    return true;
}

/* Responses: 'instructions' (the system message) and 'input', a string (one user message)
 * or a list of messages ({"role", "content"}, with or without "type": "message"; content a
 * string or input_text / output_text parts), function call items (take_fn_item) and
 * reasoning items: a reasoning item's text becomes the reasoning_content of the assistant
 * message that follows it (its message or its first call), as chat's. */
static bool take_input(ectx *e, const pl_json *root, srv_request *r) {
    const pl_json *in = pl_json_get(root, "input"), *ins = pl_json_get(root, "instructions");
    if (ins && ins->type == PL_JSON_NULL) ins = NULL;
    bool list = in && in->type == PL_JSON_ARRAY;
    if (!list && (!in || in->type != PL_JSON_STRING))
        return fail(e, "'input' must be a string or an array of messages");
    size_t n = list ? pl_json_count(in) : 1;
    if (n == 0) return fail(e, "'input' is empty");
    if (!(r->msgs = calloc(n + 1, sizeof *r->msgs))) return fail(e, "out of memory");
    if (ins && !add_msg(e, r, "system", ins, "'instructions'", false)) return false;
    if (!list) return add_msg(e, r, "user", in, "'input'", false);
    int run = 0;
    char *thought = NULL; /* a reasoning item's text, for the next assistant message */
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const pl_json *m = pl_json_at(in, i);
        const char *type = pl_json_string(pl_json_get(m, "type"));
        const char *role = pl_json_string(pl_json_get(m, "role"));
        char where[64];
        snprintf(where, sizeof where, "input[%zu].content", i);
        bool fc = type && !strcmp(type, "function_call");
        if (type && !strcmp(type, "reasoning")) {
            free(thought);
            thought = NULL;
            ok = take_reasoning_item(e, m, i, &thought);
            continue;
        }
        int had = r->n_msgs;
        run = fc ? run : 0; /* calls merged into one assistant message in a row */
        if (fc || (type && !strcmp(type, "function_call_output"))) {
            ok = take_fn_item(e, r, m, i, fc, &run);
        } else if (type && strcmp(type, "message")) {
            ok = fail(e,
                      "input[%zu]: items of type '%.40s' are not supported (messages, "
                      "function_call, function_call_output, reasoning)",
                      i, type);
        } else {
            ok = take_input_message(e, r, m, i, role, where);
        }
        /* the assistant message this item made (or joined) takes the reasoning before it */
        srv_msg *a = r->n_msgs ? &r->msgs[r->n_msgs - 1] : NULL;
        if (ok && thought && a && (r->n_msgs > had || fc) && !strcmp(a->role, "assistant")) {
            if (!a->reasoning) a->reasoning = thought, thought = NULL;
        } else if (ok && r->n_msgs > had) { /* another role came between: the reasoning is not
                                               this turn's */
            free(thought);
            thought = NULL;
        }
    }
    free(thought);
    return ok;
}

/* Chat: 'logprobs' (a boolean) and 'top_logprobs' (0 to 20); completions: 'logprobs' as the
 * number of alternatives. */
static bool take_logprobs(ectx *e, const pl_json *root, srv_request *r) {
    int64_t n = -1;
    if (r->kind == SRV_COMPLETION) {
        if (!opt_int(e, root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &n)) return false;
        r->logprobs = (int)n;
        return true;
    }
    bool on = false;
    if (!opt_bool(e, root, "logprobs", &on) ||
        !opt_int(e, root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &n))
        return false;
    if (n >= 0 && !on) return fail(e, "'top_logprobs' needs 'logprobs': true");
    r->logprobs = on ? (n < 0 ? 0 : (int)n) : -1;
    return true;
}

/* An effort name ("none" ... "high"); *off when it asks for no thinking. */
static bool take_effort(ectx *e, const pl_json *v, const char *at, bool *off) {
    if (!v || v->type == PL_JSON_NULL) return true;
    const char *eff = pl_json_string(v);
    static const char *const known[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    for (size_t i = 0; eff && i < sizeof known / sizeof *known; i++)
        if (!strcmp(eff, known[i])) {
            *off = *off || i < 2;
            return true;
        }
    return fail(e, "'%s' must be one of none, minimal, low, medium, high, xhigh", at);
}

/* The client's switches of the model's thinking (see srv_request.no_think). */
static bool take_thinking(ectx *e, const pl_json *root, srv_request *r) {
    if (r->kind == SRV_CHAT) {
        const pl_json *kw = pl_json_get(root, "chat_template_kwargs");
        if (kw && kw->type != PL_JSON_NULL && kw->type != PL_JSON_OBJECT)
            return fail(e, "'chat_template_kwargs' must be an object");
        const pl_json *et = kw ? pl_json_get(kw, "enable_thinking") : NULL;
        if (et && et->type != PL_JSON_TRUE && et->type != PL_JSON_FALSE && et->type != PL_JSON_NULL)
            return fail(e, "'chat_template_kwargs.enable_thinking' must be a boolean");
        r->no_think = et && et->type == PL_JSON_FALSE;
        return take_effort(e, pl_json_get(root, "reasoning_effort"), "reasoning_effort",
                           &r->no_think);
    }
    if (r->kind == SRV_RESPONSES) {
        const pl_json *rs = pl_json_get(root, "reasoning");
        if (rs && rs->type != PL_JSON_NULL && rs->type != PL_JSON_OBJECT)
            return fail(e, "'reasoning' must be an object");
        return take_effort(e, rs ? pl_json_get(rs, "effort") : NULL, "reasoning.effort",
                           &r->no_think);
    }
    if (r->kind == SRV_MESSAGES || r->kind == SRV_COUNT_TOKENS) {
        const pl_json *th = pl_json_get(root, "thinking");
        if (!th || th->type == PL_JSON_NULL) return true;
        const char *type =
            th->type == PL_JSON_OBJECT ? pl_json_string(pl_json_get(th, "type")) : NULL;
        if (!type ||
            (strcmp(type, "enabled") && strcmp(type, "disabled") && strcmp(type, "adaptive")))
            return fail(e,
                        "'thinking' must be {\"type\": \"enabled\" | \"disabled\" | \"adaptive\"}");
        r->no_think = !strcmp(type, "disabled");
    }
    return true;
}

/* Responses: 'include' (a list of names; "message.output_text.logprobs" asks for the
 * message's logprobs, the others name what this server does not have and are ignored) and
 * 'top_logprobs' (0 to 20, which also asks for them). */
static bool take_include(ectx *e, const pl_json *root, srv_request *r) {
    const pl_json *inc = pl_json_get(root, "include");
    bool on = false;
    if (inc && inc->type != PL_JSON_NULL && inc->type != PL_JSON_ARRAY)
        return fail(e, "'include' must be an array of strings");
    for (size_t i = 0; inc && i < pl_json_count(inc); i++) {
        const char *what = pl_json_string(pl_json_at(inc, i));
        if (!what) return fail(e, "include[%zu] must be a string", i);
        on = on || !strcmp(what, "message.output_text.logprobs");
    }
    int64_t n = -1;
    if (!opt_int(e, root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &n)) return false;
    r->logprobs = on || n >= 0 ? (n < 0 ? 0 : (int)n) : -1;
    return true;
}

/* ---- tools: the tool list, tool_choice, tool calls and tool results in messages ---- */

static bool tool_name_ok(const char *s, size_t n) {
    if (n == 0 || n > SRV_MAX_TOOL_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return false;
    return true;
}

static bool take_name(ectx *e, const pl_json *v, const char *where, pl_strbuf *b) {
    if (!v || v->type != PL_JSON_STRING) return fail(e, "%s must be a string", where);
    if (!tool_name_ok(v->str.s, v->str.len))
        return fail(e, "%s must be 1 to %d letters, digits, '_', '-' or '.'", where,
                    SRV_MAX_TOOL_NAME);
    pl_json_quote(b, v->str.s, v->str.len, false);
    return true;
}

/* One tool, appended to b as {"type": "function", "function": {"name", "description",
 * "parameters"}}: OpenAI's {"type": "function", "function": {...}} (the Responses API's
 * flat: {"type": "function", "name", ...}), Anthropic's {"name", "description",
 * "input_schema"}. */
static bool add_tool(ectx *e, const pl_json *t, size_t i, bool anthropic, bool flat, pl_strbuf *b) {
    char where[64];
    const pl_json *f = t;
    if (!t || t->type != PL_JSON_OBJECT) return fail(e, "tools[%zu] must be an object", i);
    const char *type = pl_json_string(pl_json_get(t, "type"));
    if (anthropic ? type && strcmp(type, "custom") : !type || strcmp(type, "function"))
        return fail(e, "tools[%zu]: tools of type '%.40s' are not supported (%s only)", i,
                    type ? type : "(none)", anthropic ? "custom" : "function");
    if (!anthropic && !flat) {
        f = pl_json_get(t, "function");
        if (!f || f->type != PL_JSON_OBJECT)
            return fail(e, "tools[%zu].function must be an object", i);
    }
    const char *pkey = anthropic ? "input_schema" : "parameters";
    const pl_json *d = pl_json_get(f, "description"), *p = pl_json_get(f, pkey);
    if (d && d->type == PL_JSON_NULL) d = NULL;
    if (p && p->type == PL_JSON_NULL) p = NULL;
    if (d && (d->type != PL_JSON_STRING || memchr(d->str.s, 0, d->str.len)))
        return fail(e, "tools[%zu]: 'description' must be a string without NUL characters", i);
    if (p && p->type != PL_JSON_OBJECT)
        return fail(e, "tools[%zu]: '%s' must be a JSON Schema object", i, pkey);
    if (anthropic && !p) return fail(e, "tools[%zu]: 'input_schema' is required", i);
    snprintf(where, sizeof where, "tools[%zu]: 'name'", i);
    pl_sb_puts(b, "{\"type\":\"function\",\"function\":{\"name\":");
    if (!take_name(e, pl_json_get(f, "name"), where, b)) return false;
    if (d) pl_sb_puts(b, ",\"description\":"), pl_json_write(b, d);
    if (p) pl_sb_puts(b, ",\"parameters\":"), pl_json_write(b, p);
    pl_sb_puts(b, "}}");
    return true;
}

/* Whether tools (already taken, as JSON text) has a function of this name. */
static bool has_tool(const srv_request *r, const char *name) {
    pl_json_doc *doc = NULL;
    bool found = false;
    if (!r->tools || pl_json_parse(r->tools, strlen(r->tools), &doc)) return false;
    const pl_json *t = pl_json_root(doc);
    for (size_t i = 0; i < pl_json_count(t) && !found; i++) {
        const char *n =
            pl_json_string(pl_json_get(pl_json_get(pl_json_at(t, i), "function"), "name"));
        found = n && !strcmp(n, name);
    }
    pl_json_doc_free(doc);
    return found;
}

/* OpenAI: "none" | "auto" | "required" | {"type": "function", "function": {"name"}} (the
 * Responses API: {"type": "function", "name"}); Anthropic: {"type": "auto" | "any" | "none"
 * | "tool", "name"}. */
static bool take_tool_choice(ectx *e, const pl_json *root, srv_request *r, bool anthropic) {
    const pl_json *c = pl_json_get(root, "tool_choice");
    if (!c || c->type == PL_JSON_NULL) return true;
    const char *mode = anthropic ? pl_json_string(pl_json_get(c, "type")) : pl_json_string(c);
    const pl_json *name = NULL;
    if (!anthropic && c->type == PL_JSON_OBJECT) {
        const char *type = pl_json_string(pl_json_get(c, "type"));
        if (!type || strcmp(type, "function"))
            return fail(e, "'tool_choice' objects must be of type 'function'");
        mode = "tool";
        name = r->kind == SRV_RESPONSES ? pl_json_get(c, "name")
                                        : pl_json_get(pl_json_get(c, "function"), "name");
    } else if (anthropic && mode && !strcmp(mode, "tool")) {
        name = pl_json_get(c, "name");
    }
    if (mode && !strcmp(mode, "auto")) return true;
    if (mode && !strcmp(mode, "none")) return r->tool_choice = SRV_TOOLS_NONE, true;
    if (mode && !strcmp(mode, anthropic ? "any" : "required"))
        r->tool_choice = SRV_TOOLS_REQUIRED;
    else if (mode && !strcmp(mode, "tool")) {
        pl_strbuf b = {0};
        bool ok = take_name(e, name, "'tool_choice' name", &b);
        pl_sb_free(&b);
        if (!ok) return false;
        memcpy(r->tool_name, name->str.s, name->str.len);
        r->tool_name[name->str.len] = 0;
        if (!has_tool(r, r->tool_name))
            return fail(e, "'tool_choice' names '%s', which is not in 'tools'", r->tool_name);
        r->tool_choice = SRV_TOOLS_NAMED;
    } else
        return fail(e, "'tool_choice' must be %s",
                    anthropic ? "an object with 'type' auto, any, tool or none"
                              : "none, auto, required or a function object");
    if (!r->tools) return fail(e, "'tool_choice' asks for a tool call but 'tools' is empty");
    return true;
}

static bool take_tools(ectx *e, const pl_json *root, srv_request *r, bool anthropic) {
    const pl_json *t = pl_json_get(root, "tools");
    if (t && t->type != PL_JSON_NULL) {
        if (t->type != PL_JSON_ARRAY) return fail(e, "'tools' must be an array");
        size_t n = pl_json_count(t);
        if (n > SRV_MAX_TOOLS) return fail(e, "'tools': more than %d tools", SRV_MAX_TOOLS);
        pl_strbuf b = {0};
        pl_sb_putc(&b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i) pl_sb_putc(&b, ',');
            if (!add_tool(e, pl_json_at(t, i), i, anthropic, r->kind == SRV_RESPONSES, &b))
                return pl_sb_free(&b), false;
        }
        pl_sb_putc(&b, ']');
        if (n && !(r->tools = pl_sb_take(&b, NULL))) return fail(e, "out of memory");
        pl_sb_free(&b);
        r->n_tools = (int)n;
    }
    return take_tool_choice(e, root, r, anthropic);
}

/* One call in the template's shape: {"id", "type": "function", "function": {"name",
 * "arguments": {object}}}; args is the object, or (OpenAI) a string holding one. */
static bool add_call(ectx *e, pl_strbuf *b, const char *where, const pl_json *id,
                     const pl_json *name, const pl_json *args) {
    pl_json_doc *doc = NULL;
    if (id && id->type != PL_JSON_STRING && id->type != PL_JSON_NULL)
        return fail(e, "%s: the id must be a string", where);
    if (args && args->type == PL_JSON_STRING) {
        bool empty = true; /* "" is a call without arguments */
        for (size_t i = 0; i < args->str.len && empty; i++)
            empty = strchr(" \t\r\n", args->str.s[i]) != NULL;
        if (!empty && (pl_json_parse(args->str.s, args->str.len, &doc) ||
                       pl_json_root(doc)->type != PL_JSON_OBJECT)) {
            pl_json_doc_free(doc);
            return fail(e, "%s: the arguments must be a JSON object (in a string)", where);
        }
        args = doc ? pl_json_root(doc) : NULL;
    } else if (args && args->type == PL_JSON_NULL)
        args = NULL;
    if (args && args->type != PL_JSON_OBJECT)
        return fail(e, "%s: the arguments must be an object", where);
    pl_sb_puts(b, "{\"id\":");
    if (id && id->type == PL_JSON_STRING)
        pl_json_quote(b, id->str.s, id->str.len, false);
    else
        pl_sb_puts(b, "\"\"");
    pl_sb_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
    char nw[96];
    snprintf(nw, sizeof nw, "%s: the name", where);
    bool ok = take_name(e, name, nw, b);
    if (ok) {
        pl_sb_puts(b, ",\"arguments\":");
        if (args)
            pl_json_write(b, args);
        else
            pl_sb_puts(b, "{}");
        pl_sb_puts(b, "}}");
    }
    pl_json_doc_free(doc);
    return ok;
}

static bool take_str_field(ectx *e, const pl_json *m, const char *key, size_t i, char **out) {
    const pl_json *v = pl_json_get(m, key);
    if (!v || v->type == PL_JSON_NULL) return true;
    char where[64];
    snprintf(where, sizeof where, "messages[%zu].%s", i, key);
    return take_text(e, v, where, out);
}

/* OpenAI: an assistant's tool_calls and reasoning_content, a tool message's tool_call_id. */
static bool take_oa_tool_fields(ectx *e, const pl_json *m, size_t i, srv_msg *out) {
    if (!strcmp(out->role, "tool"))
        return take_str_field(e, m, "tool_call_id", i, &out->tool_call_id);
    if (strcmp(out->role, "assistant")) return true;
    if (!take_str_field(e, m, "reasoning_content", i, &out->reasoning)) return false;
    const pl_json *tc = pl_json_get(m, "tool_calls");
    if (!tc || tc->type == PL_JSON_NULL) return true;
    if (tc->type != PL_JSON_ARRAY) return fail(e, "messages[%zu].tool_calls must be an array", i);
    size_t n = pl_json_count(tc);
    if (n > SRV_MAX_CALLS_IN)
        return fail(e, "messages[%zu].tool_calls: more than %d calls", i, SRV_MAX_CALLS_IN);
    pl_strbuf b = {0};
    pl_sb_putc(&b, '[');
    for (size_t j = 0; j < n; j++) {
        const pl_json *c = pl_json_at(tc, j), *f = pl_json_get(c, "function");
        char where[64];
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu]", i, j);
        const char *type = pl_json_string(pl_json_get(c, "type"));
        if (!f || f->type != PL_JSON_OBJECT || (type && strcmp(type, "function"))) {
            pl_sb_free(&b);
            return fail(e,
                        "%s must be a function call: {\"type\": \"function\", \"function\": "
                        "{\"name\", \"arguments\"}}",
                        where);
        }
        if (j) pl_sb_putc(&b, ',');
        if (!add_call(e, &b, where, pl_json_get(c, "id"), pl_json_get(f, "name"),
                      pl_json_get(f, "arguments")))
            return pl_sb_free(&b), false;
    }
    pl_sb_putc(&b, ']');
    if (!(out->tool_calls = pl_sb_take(&b, NULL))) return fail(e, "out of memory");
    return true;
}

/* Anthropic content blocks: text; an assistant's tool_use and thinking blocks; a user's
 * tool_result blocks, each becoming a tool message (in their order, text between them a
 * user message). */
static bool take_an_blocks(ectx *e, srv_request *r, const char *role, const pl_json *content,
                           size_t i) {
    bool assistant = !strcmp(role, "assistant"), ok = true, any_result = false;
    pl_strbuf text = {0}, calls = {0}, reasoning = {0};
    int n_calls = 0;
    for (size_t j = 0; j < pl_json_count(content) && ok; j++) {
        const pl_json *blk = pl_json_at(content, j);
        const char *type = pl_json_string(pl_json_get(blk, "type"));
        char where[64];
        snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, j);
        if (type && !strcmp(type, "text")) {
            const pl_json *t = pl_json_get(blk, "text");
            if (!t || t->type != PL_JSON_STRING || memchr(t->str.s, 0, t->str.len))
                ok = fail(e, "%s.text must be a string without NUL characters", where);
            else
                pl_sb_append(&text, t->str.s, t->str.len);
        } else if (assistant && type && !strcmp(type, "tool_use")) {
            if (n_calls++ == SRV_MAX_CALLS_IN)
                ok = fail(e, "messages[%zu]: more than %d tool_use blocks", i, SRV_MAX_CALLS_IN);
            else {
                pl_sb_putc(&calls, calls.len ? ',' : '[');
                ok = add_call(e, &calls, where, pl_json_get(blk, "id"), pl_json_get(blk, "name"),
                              pl_json_get(blk, "input"));
                if (ok && pl_json_get(blk, "input") &&
                    pl_json_get(blk, "input")->type == PL_JSON_STRING)
                    ok = fail(e, "%s: 'input' must be an object", where);
            }
        } else if (assistant && type && !strcmp(type, "thinking")) {
            const pl_json *t = pl_json_get(blk, "thinking");
            if (!t || t->type != PL_JSON_STRING || memchr(t->str.s, 0, t->str.len))
                ok = fail(e, "%s.thinking must be a string without NUL characters", where);
            else
                pl_sb_append(&reasoning, t->str.s, t->str.len);
        } else if (assistant && type && !strcmp(type, "redacted_thinking")) {
            continue; /* nothing a local model can read */
        } else if (!assistant && type && !strcmp(type, "tool_result")) {
            srv_msg *m = NULL;
            if (text.len) { /* text before the result: a user message of its own */
                if (!(m = new_msg(e, r, "user")) || !(m->content = pl_sb_take(&text, NULL)))
                    ok = fail(e, "out of memory");
            }
            char cw[80];
            snprintf(cw, sizeof cw, "%s.content", where);
            const pl_json *id = pl_json_get(blk, "tool_use_id");
            if (ok && (!id || id->type != PL_JSON_STRING))
                ok = fail(e, "%s.tool_use_id must be a string", where);
            ok = ok && (m = new_msg(e, r, "tool")) &&
                 take_text(e, id, "tool_use_id", &m->tool_call_id) &&
                 take_content(e, pl_json_get(blk, "content"), cw, true, &m->content);
            any_result = true;
        } else {
            ok = fail(e, "%s: blocks of type '%.40s' are not supported in a%s message", where,
                      type ? type : "(none)", assistant ? "n assistant" : " user");
        }
    }
    if (ok && (assistant || text.len || !any_result)) {
        srv_msg *m = new_msg(e, r, role);
        if (!m) ok = false;
        if (ok && !(m->content = pl_sb_take(&text, NULL)) && !(m->content = dup_n("", 0)))
            ok = fail(e, "out of memory");
        if (ok && calls.len) pl_sb_putc(&calls, ']');
        if (ok && calls.len && !(m->tool_calls = pl_sb_take(&calls, NULL)))
            ok = fail(e, "out of memory");
        if (ok && reasoning.len && !(m->reasoning = pl_sb_take(&reasoning, NULL)))
            ok = fail(e, "out of memory");
    }
    pl_sb_free(&text), pl_sb_free(&calls), pl_sb_free(&reasoning);
    return ok;
}

static bool parse_root(ectx *e, const pl_json *root, srv_request *r) {
    if (!root || root->type != PL_JSON_OBJECT)
        return fail(e, "the request body must be a JSON object");
    const pl_json *model = pl_json_get(root, "model");
    if (model && model->type != PL_JSON_STRING && model->type != PL_JSON_NULL)
        return fail(e, "'model' must be a string");
    bool gen = r->kind == SRV_CHAT || r->kind == SRV_COMPLETION || r->kind == SRV_MESSAGES ||
               r->kind == SRV_RESPONSES;
    switch (r->kind) {
    case SRV_CHAT:
    case SRV_MESSAGES:
    case SRV_COUNT_TOKENS:
        if (!take_messages(e, root, r, r->kind != SRV_CHAT) ||
            !take_tools(e, root, r, r->kind != SRV_CHAT))
            return false;
        break;
    case SRV_RESPONSES: {
        /* no responses are kept: a continuation by id would silently lose its context */
        const pl_json *prev = pl_json_get(root, "previous_response_id");
        if (prev && prev->type != PL_JSON_NULL)
            return fail(e, "'previous_response_id' is not supported: this server keeps no "
                           "responses (send the conversation so far as 'input')");
        if (!take_input(e, root, r) || !take_tools(e, root, r, false)) return false;
        break;
    }
    case SRV_COMPLETION: {
        const pl_json *p = pl_json_get(root, "prompt");
        if (p && p->type == PL_JSON_ARRAY)
            return fail(e,
                        "'prompt' must be a string (arrays of prompts or ids are not supported)");
        if (!take_text(e, p, "prompt", &r->prompt)) return false;
        break;
    }
    case SRV_TOKENIZE:
        if (!take_text(e, pl_json_get(root, "content"), "content", &r->prompt)) return false;
        return opt_bool(e, root, "add_special", &r->add_special) &&
               opt_bool(e, root, "parse_special", &r->parse_special) &&
               opt_bool(e, root, "with_pieces", &r->with_pieces);
    case SRV_DETOKENIZE: {
        const pl_json *t = pl_json_get(root, "tokens");
        if (!t || t->type != PL_JSON_ARRAY) return fail(e, "'tokens' must be an array of integers");
        size_t n = pl_json_count(t);
        if (n > SRV_MAX_TOKENS_IN) return fail(e, "'tokens': more than %d ids", SRV_MAX_TOKENS_IN);
        if (!(r->tokens = malloc(sizeof *r->tokens * (n ? n : 1)))) return fail(e, "out of memory");
        for (size_t i = 0; i < n; i++) {
            int64_t id;
            if (!pl_json_int(pl_json_at(t, i), &id) || id < 0 || id > INT32_MAX)
                return fail(e, "tokens[%zu] must be a non-negative integer id", i);
            r->tokens[i] = (int32_t)id;
        }
        r->n_tokens = (int64_t)n;
        return true;
    }
    }
    if (!gen) return true;
    if (!opt_bool(e, root, "stream", &r->stream)) return false;
    const pl_json *so = pl_json_get(root, "stream_options");
    if (so && so->type != PL_JSON_NULL) {
        if (so->type != PL_JSON_OBJECT) return fail(e, "'stream_options' must be an object");
        if (!opt_bool(e, so, "include_usage", &r->include_usage)) return false;
    }
    if (!opt_num(e, root, "temperature", 0, 2, &r->temperature) ||
        !opt_num(e, root, "top_p", 0, 1, &r->top_p) ||
        !opt_num(e, root, "presence_penalty", -2, 2, &r->presence_penalty) ||
        !opt_num(e, root, "frequency_penalty", -2, 2, &r->frequency_penalty))
        return false;
    int64_t seed = -1;
    if (!opt_int(e, root, "seed", INT64_MIN, INT64_MAX, &seed)) return false;
    const pl_json *sv = pl_json_get(root, "seed");
    if (sv && sv->type != PL_JSON_NULL) r->has_seed = true, r->seed = (uint64_t)seed;
    if (r->kind == SRV_MESSAGES) {
        const pl_json *mt = pl_json_get(root, "max_tokens");
        if (!mt || mt->type == PL_JSON_NULL) return fail(e, "'max_tokens' is required");
        if (!opt_int(e, root, "max_tokens", 1, INT32_MAX, &r->max_tokens)) return false;
        return take_stops(e, root, "stop_sequences", false, r);
    }
    if (r->kind == SRV_RESPONSES)
        return opt_int(e, root, "max_output_tokens", 1, INT32_MAX, &r->max_tokens) &&
               take_include(e, root, r);
    if (!take_logprobs(e, root, r)) return false;
    if (!opt_int(e, root, "max_tokens", 1, INT32_MAX, &r->max_tokens) ||
        !opt_int(e, root, "max_completion_tokens", 1, INT32_MAX, &r->max_tokens))
        return false;
    int64_t n = 1;
    if (!opt_int(e, root, "n", 1, INT32_MAX, &n)) return false;
    if (n != 1) return fail(e, "'n' must be 1 (one choice per request for now)");
    return take_stops(e, root, "stop", true, r);
}

/* A structured-output format object: {"type": "text" | "json_object" | "json_schema"}, the
 * schema's name, schema and strict in js (chat: response_format.json_schema; responses: the
 * format object itself), its schema as text in r->schema (checked now: a schema the
 * library cannot follow is a 400). at: the object's path, for errors. */
static bool take_format(ectx *e, const pl_json *f, bool nested, const char *at, srv_request *r) {
    if (!f || f->type == PL_JSON_NULL) return true;
    if (f->type != PL_JSON_OBJECT) return fail(e, "'%s' must be an object", at);
    const char *type = pl_json_string(pl_json_get(f, "type"));
    if (!type) return fail(e, "'%s.type' must be a string", at);
    if (!strcmp(type, "text")) return true;
    if (!strcmp(type, "json_object")) {
        if (!(r->schema = strdup("{\"type\":\"object\"}"))) return fail(e, "out of memory");
        return true;
    }
    if (strcmp(type, "json_schema"))
        return fail(e, "'%s.type' must be text, json_object or json_schema", at);
    char js_at[64];
    snprintf(js_at, sizeof js_at, nested ? "%s.json_schema" : "%s", at);
    const pl_json *js = nested ? pl_json_get(f, "json_schema") : f;
    if (!js || js->type != PL_JSON_OBJECT) return fail(e, "'%s' must be an object", js_at);
    const pl_json *name = pl_json_get(js, "name"), *strict = pl_json_get(js, "strict");
    if (name && (name->type != PL_JSON_STRING || name->str.len == 0 || name->str.len > 64))
        return fail(e, "'%s.name' must be a string of 1 to 64 bytes", js_at);
    if (strict && strict->type != PL_JSON_TRUE && strict->type != PL_JSON_FALSE &&
        strict->type != PL_JSON_NULL)
        return fail(e, "'%s.strict' must be a boolean", js_at);
    const pl_json *schema = pl_json_get(js, "schema");
    pl_strbuf b = {0};
    if (!schema || schema->type == PL_JSON_NULL)
        pl_sb_puts(&b, "{}"); /* any JSON value */
    else
        pl_json_write(&b, schema);
    if (b.failed) return pl_sb_free(&b), fail(e, "out of memory");
    if (pooled_json_schema_check(b.s)) {
        const char *why = pooled_last_error();
        if (!strncmp(why, "json_schema: ", 13)) why += 13;
        if (!strncmp(why, "schema: ", 8)) why += 8;
        pl_sb_free(&b);
        return fail(e, "'%s.schema': %s", js_at, why);
    }
    r->schema = b.s;
    return true;
}

/* Chat's response_format ({"type", "json_schema": {"name", "schema", "strict",
 * "description"}}) and the Responses API's text.format ({"type", "name", "schema",
 * "strict", "description"}). */
static bool take_response_format(ectx *e, const pl_json *root, srv_request *r) {
    if (r->kind == SRV_CHAT)
        return take_format(e, pl_json_get(root, "response_format"), true, "response_format", r);
    const pl_json *t = pl_json_get(root, "text");
    if (!t || t->type == PL_JSON_NULL) return true;
    if (t->type != PL_JSON_OBJECT) return fail(e, "'text' must be an object");
    const pl_json *f = pl_json_get(t, "format");
    if (!take_format(e, f, false, "text.format", r)) return false;
    if (!f || f->type == PL_JSON_NULL) return true;
    pl_strbuf b = {0}; /* echoed in the response object */
    pl_json_write(&b, f);
    if (!(r->text_format = pl_sb_take(&b, NULL))) return fail(e, "out of memory");
    return true;
}

bool srv_request_parse(srv_kind kind, const char *body, size_t len, srv_request *r, char *err,
                       size_t cap) {
    *r = (srv_request){.kind = kind,
                       .max_tokens = -1,
                       .temperature = 1,
                       .top_p = 1,
                       .parse_special = true,
                       .logprobs = -1};
    ectx e = {err, cap};
    pl_json_doc *doc = NULL;
    if (pl_json_parse(body, len, &doc)) {
        snprintf(err, cap, "the request body is not valid JSON: %s", pl_last_error());
        return false;
    }
    bool ok = parse_root(&e, pl_json_root(doc), r) && take_thinking(&e, pl_json_root(doc), r) &&
              ((kind != SRV_CHAT && kind != SRV_RESPONSES) ||
               take_response_format(&e, pl_json_root(doc), r));
    pl_json_doc_free(doc);
    return ok;
}

void srv_request_free(srv_request *r) {
    for (int i = 0; i < r->n_msgs; i++) {
        srv_msg *m = &r->msgs[i];
        free(m->role), free(m->content), free(m->tool_calls), free(m->reasoning);
        free(m->tool_call_id);
    }
    free(r->tools);
    free(r->text_format);
    free(r->msgs);
    free(r->prompt);
    free(r->tokens);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->schema);
    memset(r, 0, sizeof *r);
}
