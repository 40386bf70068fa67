/* json.c - recursive-descent JSON parser into an arena, and the string quoter (json.h). */
#include "json.h"

#include "arena.h"
#include "utf8.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pl_json_doc {
    pl_arena arena;
    pl_json *root;
};

static void *arena_alloc(pl_json_doc *d, size_t n) {
    return pl_arena_alloc(&d->arena, n);
}

void pl_json_doc_free(pl_json_doc *d) {
    if (!d) return;
    pl_arena_free(&d->arena);
    free(d);
}

const pl_json *pl_json_root(const pl_json_doc *d) {
    return d ? d->root : NULL;
}

/* ---- parser ---- */

typedef struct {
    const char *p, *start, *end;
    pl_json_doc *doc;
    const char *err;
} parser;

/* Growable temporary list of pointers (children collected before the arena copy). */
typedef struct {
    void **v;
    size_t n, cap;
} ptrs;

static bool ptrs_push(ptrs *l, void *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        void **v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static pl_json *new_value(parser *ps, pl_json_type type) {
    pl_json *v = arena_alloc(ps->doc, sizeof *v);
    if (!v) {
        ps->err = "out of memory";
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Parse a string literal at ps->p (on the opening quote) into arena memory. */
static bool parse_string(parser *ps, const char **out, size_t *out_len) {
    const char *p = ps->p + 1;
    /* the decoded string is never longer than the literal */
    const char *q = p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) {
        ps->err = "unterminated string";
        return false;
    }
    char *o = arena_alloc(ps->doc, (size_t)(q - p) + 1);
    if (!o) {
        ps->err = "out of memory";
        return false;
    }
    size_t n = 0;
    while (p < q) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) {
            ps->p = p;
            ps->err = "control character in string";
            return false;
        }
        if (c != '\\') {
            size_t k = pl_utf8_valid(p, (size_t)(q - p));
            if (!k) {
                ps->p = p;
                ps->err = "invalid UTF-8 in string";
                return false;
            }
            memcpy(o + n, p, k);
            n += k, p += k;
            continue;
        }
        char e = p[1];
        p += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            int u = q - p >= 4 ? hex4(p) : -1;
            if (u < 0) {
                ps->p = p;
                ps->err = "bad \\u escape";
                return false;
            }
            p += 4;
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = q - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p += 6;
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            /* at most 4 bytes out for the 6 or 12 read */
            n += (size_t)pl_utf8_encode(cp, o + n);
            break;
        }
        default:
            ps->p = p - 2;
            ps->err = "bad escape";
            return false;
        }
    }
    o[n] = 0;
    *out = o;
    *out_len = n;
    ps->p = q + 1;
    return true;
}

static pl_json *parse_value(parser *ps, int depth);

static pl_json *parse_number(parser *ps) {
    const char *p = ps->p, *s = p;
    bool integral = true;
    if (p < ps->end && *p == '-') p++;
    if (p >= ps->end || !(*p >= '0' && *p <= '9')) goto bad;
    if (*p == '0')
        p++;
    else
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    if (p < ps->end && *p == '.') {
        integral = false;
        p++;
        if (p >= ps->end || !(*p >= '0' && *p <= '9')) goto bad;
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        integral = false;
        p++;
        if (p < ps->end && (*p == '+' || *p == '-')) p++;
        if (p >= ps->end || !(*p >= '0' && *p <= '9')) goto bad;
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    }
    char buf[64];
    size_t n = (size_t)(p - s);
    pl_json *v = new_value(ps, PL_JSON_NUMBER);
    if (!v) return NULL;
    char *tmp = n < sizeof buf ? buf : malloc(n + 1);
    if (!tmp) {
        ps->err = "out of memory";
        return NULL;
    }
    memcpy(tmp, s, n);
    tmp[n] = 0;
    v->n.num = strtod(tmp, NULL);
    if (integral) {
        errno = 0;
        long long i = strtoll(tmp, NULL, 10);
        if (errno == 0) v->n.is_int = true, v->n.i = i;
    }
    if (tmp != buf) free(tmp);
    ps->p = p;
    return v;
bad:
    ps->p = s;
    ps->err = "bad number";
    return NULL;
}

/* After an item of an array or object: 1 if a comma follows (another item), 0 at the
 * closing bracket, -1 (error set) otherwise. */
static int next_item(parser *ps, char close) {
    skip_ws(ps);
    if (ps->p < ps->end && (*ps->p == ',' || *ps->p == close)) return *ps->p++ == ',';
    ps->err = close == ']' ? "expected , or ]" : "expected , or }";
    return -1;
}

static pl_json *parse_array(parser *ps, int depth) {
    pl_json *v = new_value(ps, PL_JSON_ARRAY);
    ptrs items = {0};
    if (!v) return NULL;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return v;
    }
    for (;;) {
        pl_json *x = parse_value(ps, depth + 1);
        if (!x) goto fail;
        if (!ptrs_push(&items, x)) {
            ps->err = "out of memory";
            goto fail;
        }
        int more = next_item(ps, ']');
        if (more < 0) goto fail;
        if (!more) break;
    }
    v->arr.items = arena_alloc(ps->doc, items.n * sizeof *v->arr.items);
    if (!v->arr.items) {
        ps->err = "out of memory";
        goto fail;
    }
    memcpy(v->arr.items, items.v, items.n * sizeof *v->arr.items);
    v->arr.count = items.n;
    free(items.v);
    return v;
fail:
    free(items.v);
    return NULL;
}

static pl_json *parse_object(parser *ps, int depth) {
    pl_json *v = new_value(ps, PL_JSON_OBJECT);
    ptrs keys = {0}, lens = {0}, vals = {0};
    if (!v) return NULL;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return v;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            ps->err = "expected a key";
            goto fail;
        }
        const char *k;
        size_t kl;
        if (!parse_string(ps, &k, &kl)) goto fail;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            ps->err = "expected :";
            goto fail;
        }
        ps->p++;
        pl_json *x = parse_value(ps, depth + 1);
        if (!x) goto fail;
        if (!ptrs_push(&keys, (void *)k) || !ptrs_push(&lens, (void *)(uintptr_t)kl) ||
            !ptrs_push(&vals, x)) {
            ps->err = "out of memory";
            goto fail;
        }
        int more = next_item(ps, '}');
        if (more < 0) goto fail;
        if (!more) break;
    }
    size_t n = keys.n;
    v->obj.keys = arena_alloc(ps->doc, n * sizeof *v->obj.keys);
    v->obj.key_lens = arena_alloc(ps->doc, n * sizeof *v->obj.key_lens);
    v->obj.vals = arena_alloc(ps->doc, n * sizeof *v->obj.vals);
    if (!v->obj.keys || !v->obj.key_lens || !v->obj.vals) {
        ps->err = "out of memory";
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        v->obj.keys[i] = keys.v[i];
        v->obj.key_lens[i] = (size_t)(uintptr_t)lens.v[i];
        v->obj.vals[i] = vals.v[i];
    }
    v->obj.count = n;
    free(keys.v), free(lens.v), free(vals.v);
    return v;
fail:
    free(keys.v), free(lens.v), free(vals.v);
    return NULL;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
    ps->p += n;
    return true;
}

static pl_json *parse_value(parser *ps, int depth) {
    if (depth >= PL_JSON_MAX_DEPTH) {
        ps->err = "nested too deep";
        return NULL;
    }
    skip_ws(ps);
    if (ps->p >= ps->end) {
        ps->err = "unexpected end";
        return NULL;
    }
    switch (*ps->p) {
    case '{': return parse_object(ps, depth);
    case '[': return parse_array(ps, depth);
    case '"': {
        pl_json *v = new_value(ps, PL_JSON_STRING);
        if (v && !parse_string(ps, &v->str.s, &v->str.len)) return NULL;
        return v;
    }
    case 't':
        if (literal(ps, "true")) return new_value(ps, PL_JSON_TRUE);
        break;
    case 'f':
        if (literal(ps, "false")) return new_value(ps, PL_JSON_FALSE);
        break;
    case 'n':
        if (literal(ps, "null")) return new_value(ps, PL_JSON_NULL);
        break;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps);
    }
    ps->err = "unexpected character";
    return NULL;
}

pl_status pl_json_parse(const char *text, size_t len, pl_json_doc **out) {
    *out = NULL;
    pl_json_doc *d = calloc(1, sizeof *d);
    if (!d) return pl_fail(PL_ERR_NOMEM, "json: out of memory");
    parser ps = {text, text, text + len, d, NULL};
    /* a UTF-8 byte-order mark is tolerated */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) ps.p += 3;
    d->root = parse_value(&ps, 0);
    if (d->root) {
        skip_ws(&ps);
        if (ps.p != ps.end) ps.err = "trailing characters", d->root = NULL;
    }
    if (!d->root) {
        pl_status st = pl_fail(PL_ERR_FORMAT, "json: %s at byte %zu", ps.err ? ps.err : "error",
                               (size_t)(ps.p - text));
        pl_json_doc_free(d);
        return st;
    }
    *out = d;
    return PL_OK;
}

/* ---- accessors ---- */

const pl_json *pl_json_get(const pl_json *obj, const char *key) {
    if (!obj || obj->type != PL_JSON_OBJECT) return NULL;
    size_t kl = strlen(key);
    for (size_t i = obj->obj.count; i-- > 0;)
        if (obj->obj.key_lens[i] == kl && memcmp(obj->obj.keys[i], key, kl) == 0)
            return obj->obj.vals[i];
    return NULL;
}

const pl_json *pl_json_at(const pl_json *arr, size_t i) {
    if (!arr || arr->type != PL_JSON_ARRAY || i >= arr->arr.count) return NULL;
    return arr->arr.items[i];
}

size_t pl_json_count(const pl_json *v) {
    if (!v) return 0;
    if (v->type == PL_JSON_ARRAY) return v->arr.count;
    if (v->type == PL_JSON_OBJECT) return v->obj.count;
    return 0;
}

const char *pl_json_string(const pl_json *v) {
    return v && v->type == PL_JSON_STRING ? v->str.s : NULL;
}

bool pl_json_number(const pl_json *v, double *out) {
    if (!v || v->type != PL_JSON_NUMBER) return false;
    *out = v->n.num;
    return true;
}

bool pl_json_int(const pl_json *v, int64_t *out) {
    if (!v || v->type != PL_JSON_NUMBER || !v->n.is_int) return false;
    *out = v->n.i;
    return true;
}

/* ---- quoting ---- */

void pl_json_quote(pl_strbuf *b, const char *s, size_t n, bool ascii_only) {
    static const char hex[] = "0123456789abcdef";
    pl_sb_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            pl_sb_append(b, e, 2);
            i++;
        } else if (c < 0x20) {
            const char *e = c == '\n'   ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                            : c == '\b' ? "\\b"
                            : c == '\f' ? "\\f"
                                        : NULL;
            if (e)
                pl_sb_puts(b, e);
            else {
                char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                pl_sb_append(b, u, 6);
            }
            i++;
        } else if (c < 0x80) {
            pl_sb_putc(b, (char)c);
            i++;
        } else {
            uint32_t cp;
            size_t k = (size_t)pl_utf8_decode(s + i, n - i, &cp);
            if (!ascii_only) {
                char o[4];
                pl_sb_append(b, o, (size_t)pl_utf8_encode(cp, o));
            } else {
                uint32_t units[2] = {cp, 0};
                int nu = 1;
                if (cp >= 0x10000) {
                    units[0] = 0xD800 + ((cp - 0x10000) >> 10);
                    units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
                    nu = 2;
                }
                for (int u = 0; u < nu; u++) {
                    char e[6] = {'\\',
                                 'u',
                                 hex[units[u] >> 12],
                                 hex[(units[u] >> 8) & 15],
                                 hex[(units[u] >> 4) & 15],
                                 hex[units[u] & 15]};
                    pl_sb_append(b, e, 6);
                }
            }
            i += k;
        }
    }
    pl_sb_putc(b, '"');
}

void pl_json_write(pl_strbuf *b, const pl_json *v) {
    switch (v->type) {
    case PL_JSON_NULL: pl_sb_puts(b, "null"); return;
    case PL_JSON_TRUE: pl_sb_puts(b, "true"); return;
    case PL_JSON_FALSE: pl_sb_puts(b, "false"); return;
    case PL_JSON_NUMBER:
        if (v->n.is_int)
            pl_sb_printf(b, "%lld", (long long)v->n.i);
        else if (isfinite(v->n.num)) {
            /* keep a non-integer number looking like one (-0.0, 5.0), so it reads back so */
            char buf[40];
            snprintf(buf, sizeof buf, "%.17g", v->n.num);
            pl_sb_puts(b, buf);
            if (!strpbrk(buf, ".eE")) pl_sb_puts(b, ".0");
        } else
            pl_sb_puts(b, v->n.num < 0 ? "-1e999" : "1e999"); /* overflowed on input */
        return;
    case PL_JSON_STRING: pl_json_quote(b, v->str.s, v->str.len, false); return;
    case PL_JSON_ARRAY:
        pl_sb_putc(b, '[');
        for (size_t i = 0; i < v->arr.count; i++) {
            if (i) pl_sb_putc(b, ',');
            pl_json_write(b, v->arr.items[i]);
        }
        pl_sb_putc(b, ']');
        return;
    case PL_JSON_OBJECT:
        pl_sb_putc(b, '{');
        for (size_t i = 0; i < v->obj.count; i++) {
            if (i) pl_sb_putc(b, ',');
            pl_json_quote(b, v->obj.keys[i], v->obj.key_lens[i], false);
            pl_sb_putc(b, ':');
            pl_json_write(b, v->obj.vals[i]);
        }
        pl_sb_putc(b, '}');
        return;
    }
}
