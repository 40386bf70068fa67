/* request.c - API request bodies (JSON) into srv_request, every field's type and range
 * checked; fields this slice does not know are ignored, as the APIs' own servers do. */
#include "request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "grammar/grammar.h"

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

static bool add_msg(ectx *e, srv_request *r, const char *role, const pl_json *content,
                    const char *where, bool null_ok) {
    srv_msg *m = &r->msgs[r->n_msgs];
    if (!(m->role = dup_n(role, strlen(role)))) return fail(e, "out of memory");
    r->n_msgs++;
    return take_content(e, content, where, null_ok, &m->content);
}

static bool take_messages(ectx *e, const pl_json *root, srv_request *r, bool anthropic) {
    const pl_json *msgs = pl_json_get(root, "messages");
    if (!msgs || msgs->type != PL_JSON_ARRAY) return fail(e, "'messages' must be an array");
    size_t n = pl_json_count(msgs);
    if (n == 0) return fail(e, "'messages' is empty");
    const pl_json *sys = anthropic ? pl_json_get(root, "system") : NULL;
    if (sys && sys->type == PL_JSON_NULL) sys = NULL;
    if (!(r->msgs = calloc(n + 1, sizeof *r->msgs))) return fail(e, "out of memory");
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
        bool null_ok = !anthropic && !strcmp(role, "assistant");
        if (!add_msg(e, r, role, pl_json_get(m, "content"), where, null_ok)) return false;
    }
    return true;
}

/* Responses: 'instructions' (the system message) and 'input', a string (one user message)
 * or a list of messages ({"role", "content"}, with or without "type": "message"); content a
 * string or input_text / output_text parts. */
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
    for (size_t i = 0; i < n; i++) {
        const pl_json *m = pl_json_at(in, i);
        const char *type = pl_json_string(pl_json_get(m, "type"));
        const char *role = pl_json_string(pl_json_get(m, "role"));
        char where[64];
        snprintf(where, sizeof where, "input[%zu].content", i);
        if (type && strcmp(type, "message"))
            return fail(e, "input[%zu]: items of type '%.40s' are not supported (messages only)", i,
                        type);
        if (!role) return fail(e, "input[%zu] must be a message with a string 'role'", i);
        if (!strcmp(role, "developer")) role = "system";
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))
            return fail(e,
                        "input[%zu].role '%.40s' is not one of system, developer, user, "
                        "assistant",
                        i, role);
        if (!add_msg(e, r, role, pl_json_get(m, "content"), where, false)) return false;
    }
    return true;
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
        if (!take_messages(e, root, r, r->kind != SRV_CHAT)) return false;
        break;
    case SRV_RESPONSES:
        if (!take_input(e, root, r)) return false;
        break;
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
        return opt_int(e, root, "max_output_tokens", 1, INT32_MAX, &r->max_tokens);
    if (!take_logprobs(e, root, r)) return false;
    if (!opt_int(e, root, "max_tokens", 1, INT32_MAX, &r->max_tokens) ||
        !opt_int(e, root, "max_completion_tokens", 1, INT32_MAX, &r->max_tokens))
        return false;
    int64_t n = 1;
    if (!opt_int(e, root, "n", 1, INT32_MAX, &n)) return false;
    if (n != 1) return fail(e, "'n' must be 1 (one choice per request for now)");
    return take_stops(e, root, "stop", true, r);
}

/* Chat's response_format: {"type": "text" | "json_object" | "json_schema", "json_schema":
 * {"name", "schema", "strict", "description"}} compiled into r->grammar. */
static bool take_response_format(ectx *e, const pl_json *root, srv_request *r) {
    const pl_json *rf = pl_json_get(root, "response_format");
    if (!rf || rf->type == PL_JSON_NULL) return true;
    if (rf->type != PL_JSON_OBJECT) return fail(e, "'response_format' must be an object");
    const char *type = pl_json_string(pl_json_get(rf, "type"));
    if (!type) return fail(e, "'response_format.type' must be a string");
    if (!strcmp(type, "text")) return true;
    if (!strcmp(type, "json_object")) {
        if (pl_grammar_any_object(&r->grammar)) return fail(e, "%s", pl_last_error());
        return true;
    }
    if (strcmp(type, "json_schema"))
        return fail(e, "'response_format.type' must be text, json_object or json_schema");
    const pl_json *js = pl_json_get(rf, "json_schema");
    if (!js || js->type != PL_JSON_OBJECT)
        return fail(e, "'response_format.json_schema' must be an object");
    const pl_json *name = pl_json_get(js, "name"), *strict = pl_json_get(js, "strict");
    if (name && (name->type != PL_JSON_STRING || name->str.len == 0 || name->str.len > 64))
        return fail(e, "'response_format.json_schema.name' must be a string of 1 to 64 bytes");
    if (strict && strict->type != PL_JSON_TRUE && strict->type != PL_JSON_FALSE &&
        strict->type != PL_JSON_NULL)
        return fail(e, "'response_format.json_schema.strict' must be a boolean");
    const pl_json *schema = pl_json_get(js, "schema");
    static const pl_json any = {.type = PL_JSON_TRUE};
    if (!schema || schema->type == PL_JSON_NULL) schema = &any; /* any JSON value */
    if (pl_grammar_compile_json(schema, &r->grammar)) {
        const char *why = pl_last_error();
        if (!strncmp(why, "schema: ", 8)) why += 8;
        return fail(e, "'response_format.json_schema.schema': %s", why);
    }
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
    bool ok = parse_root(&e, pl_json_root(doc), r) &&
              (kind != SRV_CHAT || take_response_format(&e, pl_json_root(doc), r));
    pl_json_doc_free(doc);
    return ok;
}

void srv_request_free(srv_request *r) {
    for (int i = 0; i < r->n_msgs; i++) free(r->msgs[i].role), free(r->msgs[i].content);
    free(r->msgs);
    free(r->prompt);
    free(r->tokens);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    pl_grammar_free(r->grammar);
    memset(r, 0, sizeof *r);
}
