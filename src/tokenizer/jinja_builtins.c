/* jinja_builtins.c - the filters, tests, methods and global functions templates may use,
 * with Jinja2's (and transformers') meaning: tojson is json.dumps(ensure_ascii=False),
 * raise_exception fails the render with its message, strftime_now formats the local time. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "unicode.h"

/* ---- helpers ---- */

static bool is_py_space(uint32_t c) {
    return pl_uni_is_space(c) || (c >= 0x1C && c <= 0x1F);
}

static jv list_value(jj_list *l) {
    return (jv){.type = JV_LIST, .l = l};
}

static size_t str_chars(const jj_str *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++) n += ((uint8_t)s->s[i] & 0xC0) != 0x80;
    return n;
}

static const jv *kwarg(const char **kwn, const jv *kwv, size_t nkw, const char *name) {
    for (size_t i = 0; i < nkw; i++)
        if (!strcmp(kwn[i], name)) return &kwv[i];
    return NULL;
}

/* Positional argument i or keyword name, or NULL. */
static const jv *arg(const jv *args, size_t n, size_t i, const char **kwn, const jv *kwv,
                     size_t nkw, const char *name) {
    if (i < n) return &args[i];
    return kwarg(kwn, kwv, nkw, name);
}

/* Does s[i..] start with one of the code points of chars (NULL = whitespace)? length or 0 */
static size_t strip_char_at(const char *s, size_t len, size_t i, const jj_str *chars) {
    uint32_t cp;
    int k = pl_utf8_decode(s + i, len - i, &cp);
    if (!chars) return is_py_space(cp) ? (size_t)k : 0;
    for (size_t j = 0; j < chars->len;) {
        uint32_t c;
        j += (size_t)pl_utf8_decode(chars->s + j, chars->len - j, &c);
        if (c == cp) return (size_t)k;
    }
    return 0;
}

static bool do_strip(jj_state *st, jv in, const jv *chars, bool left, bool right, jv *out) {
    if (in.type != JV_STR)
        return jj_fail(st, NULL, "strip needs a string, not %s", jv_type_name(in));
    const jj_str *cs = chars && chars->type == JV_STR ? chars->s : NULL;
    size_t a = 0, b = in.s->len;
    while (left && a < b) {
        size_t k = strip_char_at(in.s->s, b, a, cs);
        if (!k) break;
        a += k;
    }
    while (right && b > a) {
        size_t j = b - 1;
        while (j > a && ((uint8_t)in.s->s[j] & 0xC0) == 0x80) j--;
        if (!strip_char_at(in.s->s, b, j, cs)) break;
        b = j;
    }
    *out = jv_str(st, in.s->s + a, b - a);
    return !st->failed;
}

static bool map_case(jj_state *st, jv in, int mode,
                     jv *out) { /* 0 lower, 1 upper, 2 title, 3 capitalize */
    if (in.type != JV_STR) in = jv_stringify(st, in);
    if (st->failed) return false;
    pl_strbuf b = JJ_SB;
    bool word_start = true, first = true;
    for (size_t i = 0; i < in.s->len;) {
        uint32_t cp;
        i += (size_t)pl_utf8_decode(in.s->s + i, in.s->len - i, &cp);
        bool letter = pl_uni_cat(cp) == PL_UC_LETTER;
        bool up = mode == 1 || (mode == 2 && word_start) || (mode == 3 && first);
        uint32_t full[3];
        int nf = up ? pl_uni_toupper_full(cp, full) : 0; /* ß -> SS */
        if (!nf) full[0] = up ? pl_uni_toupper(cp) : pl_uni_tolower(cp), nf = 1;
        first = false;
        for (int k = 0; k < nf; k++) {
            char enc[4];
            pl_sb_append(&b, enc, (size_t)pl_utf8_encode(full[k], enc));
        }
        word_start = !letter;
    }
    *out = jj_sb_value(st, &b);
    return !st->failed;
}

static bool do_replace(jj_state *st, jv in, jv from, jv to, int64_t count, jv *out) {
    if (in.type != JV_STR || from.type != JV_STR || to.type != JV_STR)
        return jj_fail(st, NULL, "replace needs strings");
    pl_strbuf b = JJ_SB;
    size_t i = 0;
    int64_t done = 0;
    if (from.s->len == 0) { /* Python inserts `to` between characters */
        for (size_t k = 0; k <= in.s->len && (count < 0 || done < count);) {
            pl_sb_append(&b, to.s->s, to.s->len), done++;
            if (k == in.s->len) {
                i = k;
                break;
            }
            size_t cl = (size_t)pl_utf8_lead_len((uint8_t)in.s->s[k]);
            if (cl > in.s->len - k) cl = in.s->len - k;
            pl_sb_append(&b, in.s->s + k, cl);
            k += cl;
            i = k;
        }
    } else {
        while (count < 0 || done < count) {
            const char *hit = memmem(in.s->s + i, in.s->len - i, from.s->s, from.s->len);
            if (!hit) break;
            size_t h = (size_t)(hit - in.s->s);
            pl_sb_append(&b, in.s->s + i, h - i);
            pl_sb_append(&b, to.s->s, to.s->len);
            i = h + from.s->len;
            done++;
        }
    }
    pl_sb_append(&b, in.s->s + i, in.s->len - i);
    *out = jj_sb_value(st, &b);
    return !st->failed;
}

static bool do_split(jj_state *st, jv in, const jv *sep, int64_t maxsplit, jv *out) {
    if (in.type != JV_STR) return jj_fail(st, NULL, "split needs a string");
    jv parts[4096];
    size_t np = 0;
    const char *s = in.s->s;
    size_t n = in.s->len;
    if (!sep || sep->type == JV_NONE) { /* runs of whitespace, no empty parts */
        size_t i = 0;
        for (;;) {
            size_t k;
            while (i < n && (k = strip_char_at(s, n, i, NULL))) i += k;
            if (i >= n) break;
            size_t j = i;
            if (maxsplit >= 0 && (int64_t)np >= maxsplit)
                j = n;
            else
                while (j < n && !strip_char_at(s, n, j, NULL))
                    j += (size_t)pl_utf8_lead_len((uint8_t)s[j]);
            if (j > n) j = n;
            if (np == 4096) return jj_fail(st, NULL, "split: too many parts");
            parts[np++] = jv_str(st, s + i, j - i);
            i = j;
        }
    } else {
        if (sep->type != JV_STR || sep->s->len == 0)
            return jj_fail(st, NULL, "split: bad separator");
        size_t i = 0;
        for (;;) {
            const char *hit = (maxsplit < 0 || (int64_t)np < maxsplit)
                                  ? memmem(s + i, n - i, sep->s->s, sep->s->len)
                                  : NULL;
            size_t end = hit ? (size_t)(hit - s) : n;
            if (np == 4096) return jj_fail(st, NULL, "split: too many parts");
            parts[np++] = jv_str(st, s + i, end - i);
            if (!hit) break;
            i = end + sep->s->len;
        }
    }
    jj_list *l = jv_list_new(st, np);
    if (!l) return false;
    memcpy(l->items, parts, np * sizeof *parts);
    *out = list_value(l);
    return !st->failed;
}

static bool starts_ends(jj_state *st, jv in, jv what, bool ends, bool *out) {
    if (in.type != JV_STR) return jj_fail(st, NULL, "startswith/endswith need a string");
    if (what.type == JV_LIST) { /* a tuple of candidates */
        *out = false;
        for (size_t i = 0; i < what.l->n && !*out; i++)
            if (!starts_ends(st, in, what.l->items[i], ends, out)) return false;
        return true;
    }
    if (what.type != JV_STR) return jj_fail(st, NULL, "startswith/endswith need a string argument");
    size_t n = what.s->len;
    *out = n <= in.s->len && memcmp(in.s->s + (ends ? in.s->len - n : 0), what.s->s, n) == 0;
    return true;
}

static bool do_join(jj_state *st, jv in, jv sep, const jv *attribute, jv *out) {
    const jj_list *items = jv_iter_list(st, in);
    if (!items) return st->failed ? false : jj_fail(st, NULL, "join needs a sequence");
    pl_strbuf b = JJ_SB;
    for (size_t i = 0; i < items->n; i++) {
        if (i && sep.type == JV_STR) pl_sb_append(&b, sep.s->s, sep.s->len);
        jv v = items->items[i];
        if (attribute && attribute->type == JV_STR && v.type == JV_DICT) {
            const jv *a = jv_dict_get(v.d, attribute->s->s, attribute->s->len);
            v = a ? *a : jv_undef();
        }
        jv_to_str(&b, v);
    }
    *out = jj_sb_value(st, &b);
    return !st->failed;
}

static jv attr_of(jv v, const jv *attribute) {
    if (!attribute || attribute->type != JV_STR) return v;
    if (v.type != JV_DICT) return jv_undef();
    /* dotted paths: "function.name" */
    const char *p = attribute->s->s, *end = p + attribute->s->len;
    while (p < end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t len = dot ? (size_t)(dot - p) : (size_t)(end - p);
        if (v.type != JV_DICT) return jv_undef();
        const jv *x = jv_dict_get(v.d, p, len);
        if (!x) return jv_undef();
        v = *x;
        p += len + (dot ? 1 : 0);
    }
    return v;
}

typedef struct {
    jj_state *st;
    const jv *attribute;
    bool reverse;
} sort_ctx;

/* Items by attribute, each comparison charged to the work budget. */
static bool cmp_items(void *ctx, jv x, jv y, int *c) {
    sort_ctx *s = ctx;
    jv a = attr_of(x, s->attribute), b = attr_of(y, s->attribute);
    if (!jv_compare(s->st, a, b, c))
        return s->st->failed ? false
                             : jj_fail(s->st, NULL, "sort: cannot order %s and %s", jv_type_name(a),
                                       jv_type_name(b));
    if (s->reverse) *c = -*c;
    return true;
}

static bool sort_list(jj_state *st, const jj_list *in, bool reverse, const jv *attribute,
                      jj_list **out) {
    jj_list *l = jv_list_new(st, in->n), *tmp = jv_list_new(st, in->n);
    if (!l || !tmp) return false;
    memcpy(l->items, in->items, in->n * sizeof(jv));
    sort_ctx ctx = {st, attribute, reverse};
    if (!jv_sort(l->items, tmp->items, l->n, cmp_items, &ctx)) return false;
    *out = l;
    return true;
}

/* select/reject/selectattr/rejectattr */
static bool do_select(jj_state *st, const jj_node *at, jv in, const jv *args, size_t n, bool attr,
                      bool keep, jv *out) {
    const jj_list *items = jv_iter_list(st, in);
    if (!items) return st->failed ? false : jj_fail(st, at, "select needs a sequence");
    size_t skip = attr ? 1 : 0;
    const jv *attribute = attr && n > 0 ? &args[0] : NULL;
    const char *test = n > skip && args[skip].type == JV_STR ? args[skip].s->s : NULL;
    jj_list *l = jv_list_new(st, items->n);
    if (!l) return false;
    size_t k = 0;
    for (size_t i = 0; i < items->n; i++) {
        jv v = attr_of(items->items[i], attribute);
        bool r;
        if (test) {
            if (!jj_test(st, at, test, v, args + skip + 1, n > skip + 1 ? n - skip - 1 : 0, &r))
                return false;
        } else {
            r = jv_truthy(v);
        }
        if (r == keep) l->items[k++] = items->items[i];
    }
    l->n = k;
    *out = list_value(l);
    return true;
}

static bool to_int(jv v, int64_t *out) {
    switch (v.type) {
    case JV_INT: *out = v.i; return true;
    case JV_BOOL: *out = v.b; return true;
    case JV_FLOAT:
        if (!isfinite(v.f) || fabs(v.f) > 9.2e18) return false;
        *out = (int64_t)v.f;
        return true;
    case JV_STR: { /* the whole string must be the number (a NUL inside is not the end) */
        const char *s = v.s->s, *e = s + v.s->len;
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        bool range = errno == ERANGE;
        while (end < e && (*end == ' ' || *end == '\n' || *end == '\t')) end++;
        if (end == s || end != e) {
            double d = strtod(s, &end);
            if (end == s || end != e || !isfinite(d) || fabs(d) > 9.2e18) return false;
            x = (long long)d;
        } else if (range) {
            return false;
        }
        *out = x;
        return true;
    }
    default: return false;
    }
}

/* ---- filters ---- */

bool jj_filter(jj_state *st, const jj_node *at, const char *name, jv in, const jv *args, size_t n,
               const char **kwn, const jv *kwv, size_t nkw, jv *out) {
    const jv *a0 = n > 0 ? &args[0] : NULL;
    if (!strcmp(name, "trim") || !strcmp(name, "strip"))
        return do_strip(st, in.type == JV_STR ? in : jv_stringify(st, in),
                        arg(args, n, 0, kwn, kwv, nkw, "chars"), true, true, out);
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        switch (in.type) {
        case JV_STR: *out = jv_int((int64_t)str_chars(in.s)); return jj_work(st, in.s->len / 16);
        case JV_LIST: *out = jv_int((int64_t)in.l->n); return true;
        case JV_DICT: *out = jv_int((int64_t)in.d->n); return true;
        case JV_UNDEF: *out = jv_int(0); return true;
        default: return jj_fail(st, at, "a %s has no length", jv_type_name(in));
        }
    }
    if (!strcmp(name, "tojson")) {
        const jv *ind = arg(args, n, 1, kwn, kwv, nkw, "indent");
        const jv *sk = kwarg(kwn, kwv, nkw, "sort_keys");
        int indent = ind && ind->type == JV_INT ? (int)(ind->i < 0    ? 0
                                                        : ind->i > 32 ? 32
                                                                      : ind->i)
                                                : -1;
        pl_strbuf b = JJ_SB;
        if (!jv_to_json(&b, in, indent, sk && jv_truthy(*sk), 0) || b.failed) {
            pl_sb_free(&b);
            return jj_fail(st, at, "tojson: cannot serialise a %s", jv_type_name(in));
        }
        *out = jj_sb_value(st, &b);
        return !st->failed;
    }
    if (!strcmp(name, "string")) return *out = jv_stringify(st, in), !st->failed;
    if (!strcmp(name, "lower")) return map_case(st, in, 0, out);
    if (!strcmp(name, "upper")) return map_case(st, in, 1, out);
    if (!strcmp(name, "title")) return map_case(st, in, 2, out);
    if (!strcmp(name, "capitalize")) return map_case(st, in, 3, out);
    if (!strcmp(name, "safe")) return *out = in, true;
    if (!strcmp(name, "e") || !strcmp(name, "escape") || !strcmp(name, "forceescape")) {
        if (in.type != JV_STR) in = jv_stringify(st, in);
        if (st->failed) return false;
        pl_strbuf b = JJ_SB;
        for (size_t i = 0; i < in.s->len; i++) {
            char c = in.s->s[i];
            const char *e = c == '&'    ? "&amp;"
                            : c == '<'  ? "&lt;"
                            : c == '>'  ? "&gt;"
                            : c == '"'  ? "&#34;"
                            : c == '\'' ? "&#39;"
                                        : NULL;
            if (e)
                pl_sb_puts(&b, e);
            else
                pl_sb_putc(&b, c);
        }
        *out = jj_sb_value(st, &b);
        return !st->failed;
    }
    if (!strcmp(name, "join")) {
        const jv *sep = arg(args, n, 0, kwn, kwv, nkw, "d");
        return do_join(st, in, sep ? *sep : jv_str(st, "", 0),
                       arg(args, n, 1, kwn, kwv, nkw, "attribute"), out);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        const jj_list *l = jv_iter_list(st, in);
        if (!l) return st->failed ? false : jj_fail(st, at, "%s needs a sequence", name);
        *out = l->n ? l->items[name[0] == 'f' ? 0 : l->n - 1] : jv_undef();
        return true;
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const jv *b = arg(args, n, 1, kwn, kwv, nkw, "boolean");
        bool use_default = in.type == JV_UNDEF || (b && jv_truthy(*b) && !jv_truthy(in));
        *out = use_default ? (a0 ? *a0 : jv_str(st, "", 0)) : in;
        return !st->failed;
    }
    if (!strcmp(name, "replace")) {
        if (n < 2) return jj_fail(st, at, "replace needs two arguments");
        const jv *c = arg(args, n, 2, kwn, kwv, nkw, "count");
        return do_replace(st, in.type == JV_STR ? in : jv_stringify(st, in), args[0], args[1],
                          c && c->type == JV_INT ? c->i : -1, out);
    }
    if (!strcmp(name, "items") || !strcmp(name, "dictsort")) {
        if (in.type == JV_UNDEF) return *out = list_value(jv_list_new(st, 0)), !st->failed;
        if (in.type != JV_DICT) return jj_fail(st, at, "%s needs a mapping", name);
        jj_list *l = jv_list_new(st, in.d->n);
        if (!l) return false;
        for (size_t i = 0; i < in.d->n; i++) {
            jj_list *pair = jv_list_new(st, 2);
            if (!pair) return false;
            pair->items[0] = in.d->keys[i], pair->items[1] = in.d->vals[i];
            pair->tuple = true;
            l->items[i] = list_value(pair);
        }
        if (name[0] == 'd') {
            jj_list *sorted;
            if (!sort_list(st, l, false, NULL, &sorted)) return false;
            l = sorted;
        }
        *out = list_value(l);
        return true;
    }
    if (!strcmp(name, "list")) {
        const jj_list *l = jv_iter_list(st, in);
        if (!l)
            return st->failed ? false
                              : jj_fail(st, at, "cannot make a list of a %s", jv_type_name(in));
        *out = list_value((jj_list *)l);
        return true;
    }
    if (!strcmp(name, "int")) {
        int64_t v;
        *out = to_int(in, &v) ? jv_int(v) : (a0 ? *a0 : jv_int(0));
        return true;
    }
    if (!strcmp(name, "float")) {
        if (in.type == JV_FLOAT)
            *out = in;
        else if (in.type == JV_INT || in.type == JV_BOOL)
            *out = jv_float(in.type == JV_INT ? (double)in.i : in.b);
        else if (in.type == JV_STR) {
            char *end;
            double d = strtod(in.s->s, &end);
            bool whole = end != in.s->s && end == in.s->s + in.s->len;
            *out = whole ? jv_float(d) : (a0 ? *a0 : jv_float(0));
        } else
            *out = a0 ? *a0 : jv_float(0);
        return true;
    }
    if (!strcmp(name, "abs")) {
        if (in.type == JV_INT && in.i == INT64_MIN) return jj_fail(st, at, "integer overflow");
        if (in.type == JV_INT) return *out = jv_int(in.i < 0 ? -in.i : in.i), true;
        if (in.type == JV_FLOAT) return *out = jv_float(fabs(in.f)), true;
        return jj_fail(st, at, "abs needs a number");
    }
    if (!strcmp(name, "round")) {
        const jv *pr = arg(args, n, 0, kwn, kwv, nkw, "precision");
        int p = pr && pr->type == JV_INT ? (int)(pr->i > 15 ? 15 : pr->i < 0 ? 0 : pr->i) : 0;
        double x = in.type == JV_FLOAT ? in.f : in.type == JV_INT ? (double)in.i : 0;
        double m = pow(10, p);
        *out = jv_float(round(x * m) / m);
        return true;
    }
    if (!strcmp(name, "reverse")) {
        if (in.type == JV_STR) {
            const jj_list *ch = jv_iter_list(st, in);
            if (!ch) return false;
            pl_strbuf b = JJ_SB;
            for (size_t i = ch->n; i-- > 0;)
                pl_sb_append(&b, ch->items[i].s->s, ch->items[i].s->len);
            *out = jj_sb_value(st, &b);
            return !st->failed;
        }
        const jj_list *l = jv_iter_list(st, in);
        if (!l)
            return st->failed ? false : jj_fail(st, at, "cannot reverse a %s", jv_type_name(in));
        jj_list *r = jv_list_new(st, l->n);
        if (!r) return false;
        for (size_t i = 0; i < l->n; i++) r->items[i] = l->items[l->n - 1 - i];
        *out = list_value(r);
        return true;
    }
    if (!strcmp(name, "sort")) {
        const jj_list *l = jv_iter_list(st, in);
        jj_list *sorted;
        const jv *rev = arg(args, n, 0, kwn, kwv, nkw, "reverse");
        if (!l) return st->failed ? false : jj_fail(st, at, "cannot sort a %s", jv_type_name(in));
        if (!sort_list(st, l, rev && jv_truthy(*rev), kwarg(kwn, kwv, nkw, "attribute"), &sorted))
            return false;
        *out = list_value(sorted);
        return true;
    }
    if (!strcmp(name, "unique")) {
        const jj_list *l = jv_iter_list(st, in);
        if (!l) return st->failed ? false : jj_fail(st, at, "unique needs a sequence");
        jj_list *r = jv_list_new(st, l->n);
        if (!r) return false;
        size_t k = 0;
        for (size_t i = 0; i < l->n; i++) {
            bool seen = false;
            for (size_t j = 0; j < k && !seen; j++) seen = jv_equal(st, r->items[j], l->items[i]);
            if (st->failed) return false;
            if (!seen) r->items[k++] = l->items[i];
        }
        r->n = k;
        *out = list_value(r);
        return true;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) {
        const jj_list *l = jv_iter_list(st, in);
        if (!l) return st->failed ? false : jj_fail(st, at, "%s needs a sequence", name);
        *out = jv_undef();
        for (size_t i = 0; i < l->n; i++) {
            int c;
            if (i == 0) {
                *out = l->items[0];
                continue;
            }
            if (!jv_compare(st, l->items[i], *out, &c))
                return st->failed ? false : jj_fail(st, at, "%s: cannot order", name);
            if (name[1] == 'i' ? c < 0 : c > 0) *out = l->items[i];
        }
        return true;
    }
    if (!strcmp(name, "map")) {
        const jj_list *l = jv_iter_list(st, in);
        if (!l) return st->failed ? false : jj_fail(st, at, "map needs a sequence");
        jj_list *r = jv_list_new(st, l->n);
        if (!r) return false;
        const jv *attribute = kwarg(kwn, kwv, nkw, "attribute");
        const jv *dflt = kwarg(kwn, kwv, nkw, "default");
        for (size_t i = 0; i < l->n; i++) {
            if (attribute) {
                r->items[i] = attr_of(l->items[i], attribute);
                if (r->items[i].type == JV_UNDEF && dflt) r->items[i] = *dflt;
            } else if (a0 && a0->type == JV_STR) {
                if (!jj_filter(st, at, a0->s->s, l->items[i], args + 1, n - 1, NULL, NULL, 0,
                               &r->items[i]))
                    return false;
            } else {
                r->items[i] = l->items[i];
            }
        }
        *out = list_value(r);
        return true;
    }
    if (!strcmp(name, "select")) return do_select(st, at, in, args, n, false, true, out);
    if (!strcmp(name, "reject")) return do_select(st, at, in, args, n, false, false, out);
    if (!strcmp(name, "selectattr")) return do_select(st, at, in, args, n, true, true, out);
    if (!strcmp(name, "rejectattr")) return do_select(st, at, in, args, n, true, false, out);
    if (!strcmp(name, "indent")) {
        const jv *w = arg(args, n, 0, kwn, kwv, nkw, "width");
        const jv *first = arg(args, n, 1, kwn, kwv, nkw, "first");
        const jv *blank = arg(args, n, 2, kwn, kwv, nkw, "blank");
        jv s = in.type == JV_STR ? in : jv_stringify(st, in);
        if (st->failed) return false;
        pl_strbuf pad = {0}, b = JJ_SB;
        if (w && w->type == JV_STR)
            pl_sb_append(&pad, w->s->s, w->s->len);
        else
            for (int64_t i = 0; i < (w && w->type == JV_INT ? (w->i > 64 ? 64 : w->i) : 4); i++)
                pl_sb_putc(&pad, ' ');
        bool line_start = first && jv_truthy(*first);
        for (size_t i = 0; i < s.s->len; i++) {
            char c = s.s->s[i];
            if (line_start && (c != '\n' || (blank && jv_truthy(*blank))))
                pl_sb_append(&b, pad.s ? pad.s : "", pad.len);
            line_start = false;
            pl_sb_putc(&b, c);
            if (c == '\n') line_start = true;
        }
        *out = jj_sb_value(st, &b);
        pl_sb_free(&pad);
        return !st->failed;
    }
    if (!strcmp(name, "wordcount")) {
        jv parts;
        if (!do_split(st, in.type == JV_STR ? in : jv_stringify(st, in), NULL, -1, &parts))
            return false;
        *out = jv_int((int64_t)parts.l->n);
        return true;
    }
    return jj_fail(st, at, "unknown filter '%s'", name);
}

/* ---- tests ---- */

bool jj_test(jj_state *st, const jj_node *at, const char *name, jv in, const jv *args, size_t n,
             bool *out) {
    const jv *a0 = n > 0 ? &args[0] : NULL;
    if (!strcmp(name, "defined"))
        *out = in.type != JV_UNDEF;
    else if (!strcmp(name, "undefined"))
        *out = in.type == JV_UNDEF;
    else if (!strcmp(name, "none"))
        *out = in.type == JV_NONE;
    else if (!strcmp(name, "string"))
        *out = in.type == JV_STR;
    else if (!strcmp(name, "number"))
        *out = in.type == JV_INT || in.type == JV_FLOAT || in.type == JV_BOOL;
    else if (!strcmp(name, "integer"))
        *out = in.type == JV_INT;
    else if (!strcmp(name, "float"))
        *out = in.type == JV_FLOAT;
    else if (!strcmp(name, "boolean"))
        *out = in.type == JV_BOOL;
    else if (!strcmp(name, "true"))
        *out = in.type == JV_BOOL && in.b;
    else if (!strcmp(name, "false"))
        *out = in.type == JV_BOOL && !in.b;
    else if (!strcmp(name, "mapping"))
        *out = in.type == JV_DICT;
    else if (!strcmp(name, "iterable"))
        *out = in.type == JV_LIST || in.type == JV_DICT || in.type == JV_STR || in.type == JV_UNDEF;
    else if (!strcmp(name, "sequence"))
        *out = in.type == JV_LIST || in.type == JV_DICT || in.type == JV_STR || in.type == JV_UNDEF;
    else if (!strcmp(name, "callable"))
        *out = in.type == JV_MACRO || in.type == JV_FUNC || in.type == JV_METHOD;
    else if (!strcmp(name, "even") || !strcmp(name, "odd")) {
        int64_t v;
        if (!to_int(in, &v) || in.type == JV_STR) return jj_fail(st, at, "%s needs a number", name);
        *out = (v % 2 == 0) == (name[0] == 'e');
    } else if (!strcmp(name, "divisibleby")) {
        int64_t v, d;
        if (!a0 || !to_int(in, &v) || !to_int(*a0, &d) || d == 0)
            return jj_fail(st, at, "bad divisibleby");
        *out = v % d == 0;
    } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==") ||
               !strcmp(name, "sameas")) {
        if (!a0) return jj_fail(st, at, "%s needs an argument", name);
        *out = !strcmp(name, "sameas") ? in.type == a0->type && jv_equal(st, in, *a0)
                                       : jv_equal(st, in, *a0);
    } else if (!strcmp(name, "ne")) {
        if (!a0) return jj_fail(st, at, "ne needs an argument");
        *out = !jv_equal(st, in, *a0);
    } else if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "gt") ||
               !strcmp(name, "greaterthan") || !strcmp(name, "le") || !strcmp(name, "ge")) {
        int c;
        if (!a0 || !jv_compare(st, in, *a0, &c))
            return st->failed ? false : jj_fail(st, at, "%s: cannot compare", name);
        *out =
            name[0] == 'l' ? (name[1] == 'e' ? c <= 0 : c < 0) : (name[1] == 'e' ? c >= 0 : c > 0);
    } else if (!strcmp(name, "in")) {
        if (!a0) return jj_fail(st, at, "in needs an argument");
        if (a0->type == JV_STR && in.type == JV_STR)
            *out = jj_work(st, a0->s->len / 16) &&
                   (in.s->len == 0 || memmem(a0->s->s, a0->s->len, in.s->s, in.s->len));
        else if (a0->type == JV_LIST) {
            *out = false;
            for (size_t i = 0; i < a0->l->n && !*out; i++) *out = jv_equal(st, in, a0->l->items[i]);
        } else if (a0->type == JV_DICT)
            *out = jv_dict_find(st, a0->d, in) != NULL;
        else
            return jj_fail(st, at, "in: bad container");
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (in.type != JV_STR) return *out = false, true;
        jv m;
        if (!map_case(st, in, name[0] == 'l' ? 0 : 1, &m)) return false;
        *out = jv_equal(st, m, in);
    } else {
        return jj_fail(st, at, "unknown test '%s'", name);
    }
    return true;
}

/* ---- methods and functions ---- */

enum {
    M_STARTSWITH,
    M_ENDSWITH,
    M_SPLIT,
    M_RSPLIT,
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_UPPER,
    M_LOWER,
    M_TITLE,
    M_CAPITALIZE,
    M_REPLACE,
    M_FIND,
    M_RFIND,
    M_COUNT,
    M_JOIN,
    M_ISDIGIT,
    M_ISALPHA,
    M_ISSPACE,
    M_SPLITLINES,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_GET,
    M_CYCLE,
    M_N_METHODS
};

static const char *const k_str_methods[] = {
    "startswith", "endswith", "split",   "rsplit",     "strip",   "lstrip",     "rstrip",
    "upper",      "lower",    "title",   "capitalize", "replace", "find",       "rfind",
    "count",      "join",     "isdigit", "isalpha",    "isspace", "splitlines",
};

enum { F_RANGE, F_NAMESPACE, F_DICT, F_RAISE, F_STRFTIME, F_LIST_CTOR, F_N };
static const char *const k_funcs[] = {"range",           "namespace",    "dict",
                                      "raise_exception", "strftime_now", "list"};

bool jj_global_lookup(const char *name, jv *out) {
    for (int i = 0; i < F_N; i++)
        if (!strcmp(name, k_funcs[i])) return *out = (jv){.type = JV_FUNC, .func = i}, true;
    return false;
}

bool jj_method_lookup(jj_state *st, jv recv, const char *name, jv *out) {
    int id = -1;
    if (recv.type == JV_STR) {
        for (int i = 0; i < (int)(sizeof k_str_methods / sizeof k_str_methods[0]); i++)
            if (!strcmp(name, k_str_methods[i])) id = i;
    } else if (recv.type == JV_DICT) {
        if (!strcmp(name, "items"))
            id = M_ITEMS;
        else if (!strcmp(name, "keys"))
            id = M_KEYS;
        else if (!strcmp(name, "values"))
            id = M_VALUES;
        else if (!strcmp(name, "get"))
            id = M_GET;
    } else if (recv.type == JV_LOOP) {
        if (!strcmp(name, "cycle")) id = M_CYCLE;
    }
    if (id < 0) return false;
    jv *r = pl_arena_alloc(&st->arena, sizeof *r);
    if (!r) return jj_fail(st, NULL, "template uses too much memory");
    *r = recv;
    *out = (jv){.type = JV_METHOD, .method = {id, r}};
    return true;
}

static bool call_method(jj_state *st, const jj_node *at, int id, jv self, const jv *args, size_t n,
                        const char **kwn, const jv *kwv, size_t nkw, jv *out) {
    const jv *a0 =
        arg(args, n, 0, kwn, kwv, nkw, id == M_SPLIT || id == M_RSPLIT ? "sep" : "chars");
    bool b;
    switch (id) {
    case M_STARTSWITH:
    case M_ENDSWITH:
        if (!a0) return jj_fail(st, at, "startswith/endswith need an argument");
        if (!starts_ends(st, self, *a0, id == M_ENDSWITH, &b)) return false;
        *out = jv_bool(b);
        return true;
    case M_SPLIT:
    case M_RSPLIT: {
        const jv *ms = arg(args, n, 1, kwn, kwv, nkw, "maxsplit");
        int64_t maxsplit = ms && ms->type == JV_INT ? ms->i : -1;
        if (id == M_RSPLIT && maxsplit >= 0)
            return jj_fail(st, at, "rsplit with maxsplit is not supported");
        return do_split(st, self, a0, maxsplit, out);
    }
    case M_STRIP: return do_strip(st, self, a0, true, true, out);
    case M_LSTRIP: return do_strip(st, self, a0, true, false, out);
    case M_RSTRIP: return do_strip(st, self, a0, false, true, out);
    case M_UPPER: return map_case(st, self, 1, out);
    case M_LOWER: return map_case(st, self, 0, out);
    case M_TITLE: return map_case(st, self, 2, out);
    case M_CAPITALIZE: return map_case(st, self, 3, out);
    case M_REPLACE: {
        if (n < 2) return jj_fail(st, at, "replace needs two arguments");
        return do_replace(st, self, args[0], args[1],
                          n > 2 && args[2].type == JV_INT ? args[2].i : -1, out);
    }
    case M_FIND:
    case M_RFIND:
    case M_COUNT: {
        if (!a0 || a0->type != JV_STR) return jj_fail(st, at, "find/count need a string");
        const char *s = self.s->s, *sub = a0->s->s;
        size_t len = self.s->len, sl = a0->s->len;
        int64_t count = 0, pos = -1;
        if (!jj_work(st, len / 16)) return false;
        for (size_t i = 0; i + sl <= len;) {
            const char *hit = sl ? memmem(s + i, len - i, sub, sl) : s + i;
            if (!hit) break;
            i = (size_t)(hit - s);
            if (pos < 0 || id == M_RFIND) pos = (int64_t)i;
            count++;
            if (id == M_FIND) break;
            i += sl ? sl : 1;
        }
        if (!sl && id != M_FIND) count = (int64_t)str_chars(self.s) + 1, pos = (int64_t)len;
        if (pos >= 0) { /* byte offset to character offset */
            int64_t chars = 0;
            for (int64_t i = 0; i < pos; i++) chars += ((uint8_t)s[i] & 0xC0) != 0x80;
            pos = chars;
        }
        *out = jv_int(id == M_COUNT ? count : pos);
        return true;
    }
    case M_JOIN:
        if (!a0) return jj_fail(st, at, "join needs an argument");
        return do_join(st, *a0, self, NULL, out);
    case M_ISDIGIT:
    case M_ISALPHA:
    case M_ISSPACE: {
        bool all = self.s->len > 0;
        if (!jj_work(st, self.s->len / 16)) return false;
        for (size_t i = 0; i < self.s->len && all;) {
            uint32_t cp;
            i += (size_t)pl_utf8_decode(self.s->s + i, self.s->len - i, &cp);
            int c = pl_uni_cat(cp);
            all = id == M_ISDIGIT   ? (c == PL_UC_NUMBER)
                  : id == M_ISALPHA ? c == PL_UC_LETTER
                                    : is_py_space(cp);
        }
        *out = jv_bool(all);
        return true;
    }
    case M_SPLITLINES: {
        jv nl = jv_str(st, "\n", 1);
        if (!do_split(st, self, &nl, -1, out)) return false;
        if (out->l->n && out->l->items[out->l->n - 1].s->len == 0) ((jj_list *)out->l)->n--;
        return true;
    }
    case M_ITEMS: return jj_filter(st, at, "items", self, NULL, 0, NULL, NULL, 0, out);
    case M_KEYS:
    case M_VALUES: {
        jj_list *l = jv_list_new(st, self.d->n);
        if (!l) return false;
        for (size_t i = 0; i < self.d->n; i++)
            l->items[i] = id == M_KEYS ? self.d->keys[i] : self.d->vals[i];
        *out = list_value(l);
        return true;
    }
    case M_GET: {
        if (n < 1) return jj_fail(st, at, "get needs a key");
        const jv *v = jv_dict_find(st, self.d, args[0]);
        if (st->failed) return false;
        *out = v ? *v : n > 1 ? args[1] : jv_none();
        return true;
    }
    case M_CYCLE:
        if (!n) return jj_fail(st, at, "cycle needs arguments");
        *out = args[self.loop->index % n];
        return true;
    }
    return jj_fail(st, at, "bad method");
}

bool jj_call_builtin(jj_state *st, const jj_node *at, jv fn, const jv *args, size_t n,
                     const char **kwn, const jv *kwv, size_t nkw, jv *out) {
    if (fn.type == JV_METHOD)
        return call_method(st, at, fn.method.id, *fn.method.recv, args, n, kwn, kwv, nkw, out);
    switch (fn.func) {
    case F_RANGE: {
        int64_t a = 0, b, step = 1;
        if (n == 1 && args[0].type == JV_INT)
            b = args[0].i;
        else if (n >= 2 && args[0].type == JV_INT && args[1].type == JV_INT) {
            a = args[0].i, b = args[1].i;
            if (n == 3) {
                if (args[2].type != JV_INT || args[2].i == 0)
                    return jj_fail(st, at, "range: bad step");
                step = args[2].i;
            }
        } else {
            return jj_fail(st, at, "range needs integers");
        }
        /* in unsigned arithmetic: the bounds may be anywhere in int64 */
        uint64_t span = step > 0 ? (b > a ? (uint64_t)b - (uint64_t)a : 0)
                                 : (a > b ? (uint64_t)a - (uint64_t)b : 0);
        uint64_t ustep = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
        uint64_t count = span ? (span - 1) / ustep + 1 : 0;
        if (count > JJ_MAX_RANGE)
            return jj_fail(st, at, "range of more than %d items", JJ_MAX_RANGE);
        jj_list *l = jv_list_new(st, (size_t)count);
        if (!l) return false;
        for (uint64_t i = 0; i < count; i++) /* stays between a and b: no overflow */
            l->items[i] = jv_int((int64_t)((uint64_t)a + i * (uint64_t)step));
        *out = list_value(l);
        return true;
    }
    case F_NAMESPACE:
    case F_DICT: {
        jj_dict *d = jv_dict_new(st);
        if (!d) return false;
        d->is_namespace = fn.func == F_NAMESPACE;
        for (size_t i = 0; i < n; i++) /* namespace(dict) copies the dict */
            if (args[i].type == JV_DICT)
                for (size_t k = 0; k < args[i].d->n; k++)
                    if (!jv_dict_set(st, d, args[i].d->keys[k], args[i].d->vals[k])) return false;
        for (size_t i = 0; i < nkw; i++)
            if (!jv_dict_set(st, d, jv_str0(st, kwn[i]), kwv[i])) return false;
        *out = (jv){.type = JV_DICT, .d = d};
        return true;
    }
    case F_RAISE: {
        pl_strbuf b = JJ_SB;
        if (n) jv_to_str(&b, args[0]);
        jj_fail(st, NULL, "%s", b.s ? b.s : "raise_exception");
        pl_sb_free(&b);
        return false;
    }
    case F_STRFTIME: {
        if (n < 1 || args[0].type != JV_STR) return jj_fail(st, at, "strftime_now needs a format");
        if (memchr(args[0].s->s, 0, args[0].s->len))
            return jj_fail(st, at, "strftime_now: the format contains a NUL character");
        char buf[256];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t k = strftime(buf, sizeof buf, args[0].s->s, &tm);
        if (!k && args[0].s->len) /* 0 is also what a result past the buffer gives */
            return jj_fail(st, at, "strftime_now: the result is empty or too long");
        *out = jv_str(st, buf, k);
        return !st->failed;
    }
    case F_LIST_CTOR:
        if (!n) return *out = list_value(jv_list_new(st, 0)), !st->failed;
        return jj_filter(st, at, "list", args[0], NULL, 0, NULL, NULL, 0, out);
    }
    return jj_fail(st, at, "bad function");
}
