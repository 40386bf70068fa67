/* tool_parse.c - the streaming split of a reply into text, reasoning and tool calls. Input
 * waits in `buf` only while it could still be the start of a tag (or is a call's body);
 * whitespace at the end of text or reasoning waits in `ws`, so the blank lines a model
 * writes around its tags are dropped and the rest is never lost. */
#include "tool_parse.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"

typedef enum { M_TEXT, M_THINK, M_CALL, M_JSON } mode;

struct tp_parser {
    tp_opts o;
    tp_sink sink;
    mode m;
    pl_strbuf buf;  /* input not yet settled */
    pl_strbuf ws;   /* trailing whitespace of the text or reasoning emitted so far */
    bool skip_lead; /* drop whitespace at the start of this text or reasoning */
    bool started;   /* something other than whitespace was seen (Llama 3 JSON only first) */
    bool failed;
    int n_calls;
    size_t scan; /* M_CALL: bytes of buf already searched for the end tag */
};

static const char TAG_THINK[] = "<think>", TAG_THINK_END[] = "</think>";
static const char TAG_CALL[] = "<tool_call>", TAG_CALL_END[] = "</tool_call>";

static bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

tp_parser *tp_new(const tp_opts *o, const tp_sink *sink) {
    tp_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->o = *o;
    p->sink = *sink;
    p->m = o->think && o->in_think ? M_THINK : M_TEXT;
    p->skip_lead = p->m == M_THINK;
    return p;
}

void tp_free(tp_parser *p) {
    if (!p) return;
    pl_sb_free(&p->buf);
    pl_sb_free(&p->ws);
    free(p);
}

int tp_n_calls(const tp_parser *p) {
    return p->n_calls;
}

static bool out(tp_parser *p, bool reasoning, const char *s, size_t n) {
    if (p->failed || !n) return !p->failed;
    bool ok = reasoning ? p->sink.reasoning(p->sink.ud, s, n) : p->sink.text(p->sink.ud, s, n);
    if (!ok) p->failed = true;
    return ok;
}

/* Text or reasoning: leading whitespace dropped after a tag, trailing whitespace held. */
static bool emit(tp_parser *p, bool reasoning, const char *s, size_t n) {
    if (p->skip_lead) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return !p->failed;
        p->skip_lead = false;
    }
    size_t body = n;
    while (body && is_ws(s[body - 1])) body--;
    if (body) {
        if (!out(p, reasoning, p->ws.s, p->ws.len)) return false;
        p->ws.len = 0;
        if (!out(p, reasoning, s, body)) return false;
    }
    pl_sb_append(&p->ws, s + body, n - body);
    if (p->ws.failed) p->failed = true;
    return !p->failed;
}

/* A mode ends at a tag: its held whitespace is dropped, the next one starts fresh. */
static void switch_to(tp_parser *p, mode m) {
    p->ws.len = 0;
    p->skip_lead = true;
    p->m = m;
}

static void consume(tp_parser *p, size_t n) {
    memmove(p->buf.s, p->buf.s + n, p->buf.len - n + 1);
    p->buf.len -= n;
}

/* Where tag starts in s[0..n), or where a prefix of it ends s (partial: *whole false);
 * n when neither. */
static size_t find_tag(const char *s, size_t n, const char *tag, bool *whole) {
    size_t tl = strlen(tag);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<') continue;
        size_t k = n - i < tl ? n - i : tl;
        if (memcmp(s + i, tag, k)) continue;
        *whole = k == tl;
        return i;
    }
    *whole = false;
    return n;
}

static bool deliver_call(tp_parser *p, const char *s, size_t n) {
    char *name = NULL, *args = NULL;
    size_t args_len = 0;
    if (p->n_calls >= TP_MAX_CALLS || !tp_parse_call(s, n, &name, &args, &args_len)) return false;
    p->n_calls++;
    if (!p->failed && !p->sink.call(p->sink.ud, name, args, args_len)) p->failed = true;
    free(name), free(args);
    return true;
}

/* A <tool_call> body that is not a call: given back as the text it was. */
static void call_as_text(tp_parser *p, const char *body, size_t n, bool closed) {
    p->skip_lead = false;
    emit(p, false, TAG_CALL, strlen(TAG_CALL));
    emit(p, false, body, n);
    if (closed) emit(p, false, TAG_CALL_END, strlen(TAG_CALL_END));
}

/* Settle what buf holds; final: nothing more comes. */
static bool run(tp_parser *p, bool final) {
    while (!p->failed && p->buf.len) {
        const char *s = p->buf.s;
        size_t n = p->buf.len;
        bool whole = false;
        if (p->m == M_TEXT && p->o.calls == TP_CALLS_LLAMA3 && !p->started) {
            size_t i = 0;
            while (i < n && is_ws(s[i])) i++;
            if (i == n) {
                if (!final) return true;
                emit(p, false, s, n);
                consume(p, n);
                continue;
            }
            p->started = true;
            if (s[i] == '{') {
                consume(p, i);
                p->m = M_JSON;
            }
            continue;
        }
        switch (p->m) {
        case M_TEXT: {
            size_t at = n, ti;
            bool tw = false;
            const char *tag = NULL;
            if (p->o.think && (ti = find_tag(s, n, TAG_THINK, &whole)) < at)
                at = ti, tw = whole, tag = TAG_THINK;
            if (p->o.calls == TP_CALLS_QWEN && (ti = find_tag(s, n, TAG_CALL, &whole)) <= at &&
                ti < n)
                /* both may be partial at the same place ("<"): the longer match wins */
                if (ti < at || whole || !tw) at = ti, tw = whole, tag = TAG_CALL;
            if (!tag || (!tw && final)) {
                emit(p, false, s, n);
                consume(p, n);
                continue;
            }
            if (!tw) {
                /* a partial tag at the end: it may still complete. A '<' later in the same
                 * partial cannot start another tag before this one, so the rest waits. */
                emit(p, false, s, at);
                consume(p, at);
                return true;
            }
            emit(p, false, s, at);
            consume(p, at + strlen(tag));
            if (tag == TAG_THINK)
                switch_to(p, M_THINK);
            else /* the whitespace before it waits: text again if the call is not one */
                p->m = M_CALL, p->scan = 0;
            continue;
        }
        case M_THINK: {
            size_t at = find_tag(s, n, TAG_THINK_END, &whole);
            if (at < n && !whole && !final) {
                emit(p, true, s, at);
                consume(p, at);
                return true;
            }
            if (at == n || !whole) {
                emit(p, true, s, n);
                consume(p, n);
                continue;
            }
            emit(p, true, s, at);
            consume(p, at + strlen(TAG_THINK_END));
            switch_to(p, M_TEXT);
            continue;
        }
        case M_CALL: {
            /* searched from where the last piece ended, so a long call costs linear time */
            size_t tl = strlen(TAG_CALL_END), from = p->scan > tl ? p->scan - tl : 0;
            const char *end = NULL;
            for (size_t i = from; i + tl <= n && !end; i++)
                if (!memcmp(s + i, TAG_CALL_END, tl)) end = s + i;
            p->scan = n;
            if (!end) {
                if (!final && n <= TP_MAX_CALL_BYTES) return true;
                call_as_text(p, s, n, false); /* unfinished, or too long to be a call */
                consume(p, n);
                p->m = M_TEXT;
                continue;
            }
            size_t body = (size_t)(end - s);
            bool call = deliver_call(p, s, body);
            if (!call) call_as_text(p, s, body, true);
            consume(p, body + tl);
            if (call)
                switch_to(p, M_TEXT);
            else
                p->m = M_TEXT;
            continue;
        }
        case M_JSON:
            if (!final && n <= TP_MAX_CALL_BYTES) return true;
            if (!final || !deliver_call(p, s, n)) emit(p, false, s, n);
            consume(p, n);
            p->m = M_TEXT;
            continue;
        }
    }
    return !p->failed;
}

bool tp_push(tp_parser *p, const char *s, size_t n) {
    if (p->failed) return false;
    if (p->o.calls == TP_CALLS_NONE && !p->o.think) return out(p, false, s, n);
    pl_sb_append(&p->buf, s, n);
    if (p->buf.failed) return p->failed = true, false;
    return run(p, false);
}

bool tp_finish(tp_parser *p) {
    if (p->failed) return false;
    run(p, true);
    /* the whitespace at the very end is kept as the model wrote it (never lost) */
    if (p->ws.len && !out(p, p->m == M_THINK, p->ws.s, p->ws.len)) return false;
    p->ws.len = 0;
    return !p->failed;
}

bool tp_think_id(tp_think *t, const char *s) {
    bool counted = t->in;
    for (; *s; s++) {
        const char *tag = t->in ? TAG_THINK_END : TAG_THINK;
        if (*s == tag[t->at]) {
            if (tag[++t->at]) continue;
            t->in = !t->in, t->at = 0, counted = true;
        } else {
            t->at = *s == '<'; /* neither tag has another '<' to restart from */
        }
    }
    return counted;
}

/* ---- one call's text ---- */

static bool name_ok(const char *s, size_t n) {
    if (n == 0 || n > TP_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return false;
    return true;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* {"name": "...", "arguments"|"parameters": {...} or a string holding one} */
static bool json_call(const char *s, size_t n, char **name, pl_strbuf *args) {
    pl_json_doc *doc = NULL, *inner = NULL;
    if (pl_json_parse(s, n, &doc)) return false;
    const pl_json *root = pl_json_root(doc), *nm = pl_json_get(root, "name");
    const pl_json *a = pl_json_get(root, "arguments");
    if (!a) a = pl_json_get(root, "parameters");
    bool ok = root->type == PL_JSON_OBJECT && nm && nm->type == PL_JSON_STRING &&
              name_ok(nm->str.s, nm->str.len);
    if (ok && a && a->type == PL_JSON_STRING) { /* arguments as a JSON text */
        ok = !pl_json_parse(a->str.s, a->str.len, &inner);
        a = ok ? pl_json_root(inner) : NULL;
    }
    ok = ok && (!a || a->type == PL_JSON_OBJECT);
    if (ok) {
        if (a)
            pl_json_write(args, a);
        else
            pl_sb_puts(args, "{}");
        ok = (*name = dup_n(nm->str.s, nm->str.len)) != NULL;
    }
    pl_json_doc_free(inner);
    pl_json_doc_free(doc);
    return ok;
}

static bool skip_prefix(const char **s, const char *end, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(end - *s) < n || memcmp(*s, lit, n)) return false;
    *s += n;
    return true;
}

static void skip_ws(const char **s, const char *end) {
    while (*s < end && is_ws(**s)) (*s)++;
}

static const char *find(const char *s, const char *end, const char *lit) {
    size_t n = strlen(lit);
    for (; (size_t)(end - s) >= n; s++)
        if (!memcmp(s, lit, n)) return s;
    return NULL;
}

/* Qwen3.5: <function=NAME> (<parameter=KEY>\nVALUE\n</parameter>)* </function>; a value
 * that reads as JSON is taken as that value, any other as a string. */
static bool xml_call(const char *s, const char *end, char **name, pl_strbuf *args) {
    if (!skip_prefix(&s, end, "<function=")) return false;
    const char *gt = memchr(s, '>', (size_t)(end - s));
    if (!gt || !name_ok(s, (size_t)(gt - s)) || memchr(s, '<', (size_t)(gt - s))) return false;
    const char *nm = s;
    size_t nm_len = (size_t)(gt - s);
    s = gt + 1;
    pl_sb_putc(args, '{');
    for (int k = 0;; k++) {
        skip_ws(&s, end);
        if (!skip_prefix(&s, end, "<parameter=")) break;
        const char *kg = memchr(s, '>', (size_t)(end - s));
        if (!kg || kg == s || memchr(s, '<', (size_t)(kg - s)) || memchr(s, '\n', (size_t)(kg - s)))
            return false;
        const char *v = kg + 1, *ve = find(v, end, "</parameter>");
        if (!ve) return false;
        if (k) pl_sb_putc(args, ',');
        pl_json_quote(args, s, (size_t)(kg - s), false);
        pl_sb_putc(args, ':');
        const char *vs = v, *vz = ve;
        if (vs < vz && *vs == '\n') vs++;
        if (vz > vs && vz[-1] == '\n') vz--;
        pl_json_doc *doc = NULL;
        if (vz > vs && !pl_json_parse(vs, (size_t)(vz - vs), &doc))
            pl_json_write(args, pl_json_root(doc));
        else
            pl_json_quote(args, vs, (size_t)(vz - vs), false);
        pl_json_doc_free(doc);
        s = ve + strlen("</parameter>");
    }
    pl_sb_putc(args, '}');
    if (!skip_prefix(&s, end, "</function>")) return false;
    skip_ws(&s, end);
    return s == end && (*name = dup_n(nm, nm_len)) != NULL;
}

bool tp_parse_call(const char *s, size_t n, char **name, char **args, size_t *args_len) {
    *name = *args = NULL;
    *args_len = 0;
    const char *end = s + n;
    skip_ws(&s, end);
    while (end > s && is_ws(end[-1])) end--;
    size_t len = end > s ? (size_t)(end - s) : 0;
    if (!len || memchr(s, 0, len)) return false;
    pl_strbuf b = {0};
    bool ok = *s == '{' ? json_call(s, len, name, &b) : xml_call(s, end, name, &b);
    if (ok && b.failed) ok = false;
    if (!ok) {
        free(*name);
        *name = NULL;
        pl_sb_free(&b);
        return false;
    }
    *args = pl_sb_take(&b, args_len);
    return *args != NULL || (free(*name), *name = NULL, false);
}
