/* jinja_value.c - the interpreter's values and their Python behaviour: truth, equality,
 * ordering, str() and repr(), json.dumps, iteration, and conversion from JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "unicode.h"

jv jv_undef(void) {
    return (jv){.type = JV_UNDEF};
}
jv jv_none(void) {
    return (jv){.type = JV_NONE};
}
jv jv_bool(bool b) {
    return (jv){.type = JV_BOOL, .b = b};
}
jv jv_int(int64_t i) {
    return (jv){.type = JV_INT, .i = i};
}
jv jv_float(double f) {
    return (jv){.type = JV_FLOAT, .f = f};
}

jv jv_str(jj_state *st, const char *s, size_t n) {
    jj_str *x = pl_arena_alloc(&st->arena, sizeof *x + n + 1);
    if (!x) {
        jj_fail(st, NULL, "template uses too much memory");
        return jv_undef();
    }
    x->len = n;
    if (n) memcpy(x->s, s, n);
    x->s[n] = 0;
    return (jv){.type = JV_STR, .s = x};
}

jv jv_str0(jj_state *st, const char *s) {
    return jv_str(st, s, strlen(s));
}

jj_list *jv_list_new(jj_state *st, size_t n) {
    jj_list *l = n <= JJ_MAX_MEMORY / sizeof(jv)
                     ? pl_arena_alloc(&st->arena, sizeof *l + n * sizeof(jv))
                     : NULL;
    if (!l) {
        jj_fail(st, NULL, "template uses too much memory");
        return NULL;
    }
    l->n = n;
    l->tuple = false;
    for (size_t i = 0; i < n; i++) l->items[i] = jv_undef();
    return l;
}

jj_dict *jv_dict_new(jj_state *st) {
    jj_dict *d = pl_arena_alloc(&st->arena, sizeof *d);
    if (!d) {
        jj_fail(st, NULL, "template uses too much memory");
        return NULL;
    }
    memset(d, 0, sizeof *d);
    return d;
}

/* Lookups scan from the end: a duplicated key (possible in JSON input) finds its last value. */
const jv *jv_dict_find(jj_state *st, const jj_dict *d, jv key) {
    for (size_t i = d->n; i-- > 0;)
        if (jv_equal(st, d->keys[i], key)) return &d->vals[i];
    return NULL;
}

const jv *jv_dict_get(const jj_dict *d, const char *key, size_t len) {
    for (size_t i = d->n; i-- > 0;) {
        const jv *k = &d->keys[i];
        if (k->type == JV_STR && k->s->len == len && memcmp(k->s->s, key, len) == 0)
            return &d->vals[i];
    }
    return NULL;
}

bool jv_dict_set(jj_state *st, jj_dict *d, jv key, jv val) {
    for (size_t i = 0; i < d->n; i++) {
        if (jv_equal(st, d->keys[i], key)) {
            d->vals[i] = val;
            return true;
        }
    }
    return jv_dict_append(st, d, key, val);
}

bool jv_dict_append(jj_state *st, jj_dict *d, jv key, jv val) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *k = pl_arena_alloc(&st->arena, cap * sizeof *k);
        jv *v = pl_arena_alloc(&st->arena, cap * sizeof *v);
        if (!k || !v) return jj_fail(st, NULL, "template uses too much memory");
        if (d->n) memcpy(k, d->keys, d->n * sizeof *k), memcpy(v, d->vals, d->n * sizeof *v);
        d->keys = k, d->vals = v, d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    return true;
}

bool jv_truthy(jv v) {
    switch (v.type) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0.0;
    case JV_STR: return v.s->len != 0;
    case JV_LIST: return v.l->n != 0;
    case JV_DICT: return v.d->n != 0 || v.d->is_namespace;
    default: return true;
    }
}

static bool is_num(jv v) {
    return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL;
}
static double num(jv v) {
    return v.type == JV_FLOAT ? v.f : v.type == JV_INT ? (double)v.i : (double)v.b;
}

static bool equal(jj_state *st, jv a, jv b, int depth);

static bool too_deep(jj_state *st, int depth) {
    if (depth <= JJ_MAX_VALUE_DEPTH) return false;
    if (st) jj_fail(st, NULL, "values nested too deep to compare");
    return true;
}

bool jv_equal(jj_state *st, jv a, jv b) {
    return equal(st, a, b, 0);
}

static bool equal(jj_state *st, jv a, jv b, int depth) {
    if (!jj_work(st, 1) || too_deep(st, depth)) return false;
    if (is_num(a) && is_num(b)) {
        if (a.type != JV_FLOAT && b.type != JV_FLOAT)
            return (a.type == JV_INT ? a.i : a.b) == (b.type == JV_INT ? b.i : b.b);
        return num(a) == num(b);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR:
        return a.s->len == b.s->len && jj_work(st, a.s->len / 64) &&
               memcmp(a.s->s, b.s->s, a.s->len) == 0;
    case JV_LIST:
        if (a.l == b.l) return true; /* as Python's identity check, also for NaN items */
        if (a.l->n != b.l->n) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!equal(st, a.l->items[i], b.l->items[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.d == b.d) return true;
        /* namespaces are equal only to themselves (and may hold themselves) */
        if (a.d->n != b.d->n || a.d->is_namespace || b.d->is_namespace) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            const jv *v = jv_dict_find(st, b.d, a.d->keys[i]);
            if (!v || !equal(st, a.d->vals[i], *v, depth + 1)) return false;
        }
        return true;
    case JV_MACRO: return a.macro == b.macro;
    case JV_FUNC: return a.func == b.func;
    default: return false;
    }
}

static bool compare(jj_state *st, jv a, jv b, int *cmp, int depth) {
    if (!jj_work(st, 1) || too_deep(st, depth)) return false;
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        *cmp = x < y ? -1 : x > y;
        return true;
    }
    if (a.type == JV_STR && b.type == JV_STR) {
        size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        if (!jj_work(st, n / 64)) return false;
        int c = memcmp(a.s->s, b.s->s, n);
        *cmp = c ? (c < 0 ? -1 : 1) : a.s->len < b.s->len ? -1 : a.s->len > b.s->len;
        return true;
    }
    if (a.type == JV_LIST && b.type == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (equal(st, a.l->items[i], b.l->items[i], depth + 1)) continue;
            return compare(st, a.l->items[i], b.l->items[i], cmp, depth + 1);
        }
        *cmp = a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
        return true;
    }
    return false;
}

bool jv_compare(jj_state *st, jv a, jv b, int *cmp) {
    return compare(st, a, b, cmp, 0);
}

const char *jv_type_name(jv v) {
    static const char *names[] = {"undefined", "none", "bool",  "int",      "float",  "string",
                                  "list",      "dict", "macro", "function", "method", "loop"};
    return v.type < sizeof names / sizeof names[0] ? names[v.type] : "?";
}

void jv_format_float(pl_strbuf *b, double f) {
    if (isnan(f)) {
        pl_sb_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        pl_sb_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    /* shortest digits that read back exactly, laid out like Python's repr */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[24];
    int nd = 0, exp10 = 0;
    bool neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    if (*p == 'e') exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) pl_sb_putc(b, '-');
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) pl_sb_putc(b, i < nd ? digits[i] : '0');
            pl_sb_putc(b, '.');
            if (nd > exp10 + 1)
                pl_sb_append(b, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            else
                pl_sb_putc(b, '0');
        } else {
            pl_sb_puts(b, "0.");
            for (int i = 0; i < -exp10 - 1; i++) pl_sb_putc(b, '0');
            pl_sb_append(b, digits, (size_t)nd);
        }
    } else {
        pl_sb_putc(b, digits[0]);
        if (nd > 1) {
            pl_sb_putc(b, '.');
            pl_sb_append(b, digits + 1, (size_t)(nd - 1));
        }
        pl_sb_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

bool jv_sort(jv *v, jv *tmp, size_t n, bool (*cmp)(void *ctx, jv a, jv b, int *c), void *ctx) {
    jv *src = v, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c;
                if (!cmp(ctx, src[i], src[j], &c)) return false;
                dst[k++] = c > 0 ? src[j++] : src[i++]; /* equal: the left first (stable) */
            }
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        jv *x = src;
        src = dst, dst = x;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
    return true;
}

/* Keys of a dict, given as their indices (json.dumps' sort_keys); keys that cannot be
 * ordered keep their order. */
static bool cmp_key(void *ctx, jv a, jv b, int *c) {
    const jj_dict *d = ctx;
    if (!jv_compare(NULL, d->keys[a.i], d->keys[b.i], c)) *c = 0;
    return true;
}

static void repr_str(pl_strbuf *b, const jj_str *s) {
    bool has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    pl_sb_putc(b, q);
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        if (c == '\\' || c == (unsigned char)q)
            pl_sb_putc(b, '\\'), pl_sb_putc(b, (char)c);
        else if (c == '\n')
            pl_sb_puts(b, "\\n");
        else if (c == '\r')
            pl_sb_puts(b, "\\r");
        else if (c == '\t')
            pl_sb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7F)
            pl_sb_printf(b, "\\x%02x", c);
        else
            pl_sb_putc(b, (char)c);
    }
    pl_sb_putc(b, q);
}

static void to_str(pl_strbuf *b, jv v, bool repr, int depth) {
    if (b->failed) return; /* a huge value stops at the buffer's cap, not after it */
    if (depth > 64) {
        pl_sb_puts(b, "...");
        return;
    }
    switch (v.type) {
    case JV_UNDEF: break;
    case JV_NONE: pl_sb_puts(b, "None"); break;
    case JV_BOOL: pl_sb_puts(b, v.b ? "True" : "False"); break;
    case JV_INT: pl_sb_printf(b, "%lld", (long long)v.i); break;
    case JV_FLOAT: jv_format_float(b, v.f); break;
    case JV_STR:
        if (repr)
            repr_str(b, v.s);
        else
            pl_sb_append(b, v.s->s, v.s->len);
        break;
    case JV_LIST:
        pl_sb_putc(b, v.l->tuple ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) pl_sb_puts(b, ", ");
            to_str(b, v.l->items[i], true, depth + 1);
        }
        if (v.l->tuple && v.l->n == 1) pl_sb_putc(b, ',');
        pl_sb_putc(b, v.l->tuple ? ')' : ']');
        break;
    case JV_DICT:
        if (v.d->is_namespace) pl_sb_puts(b, "<Namespace ");
        pl_sb_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) pl_sb_puts(b, ", ");
            to_str(b, v.d->keys[i], true, depth + 1);
            pl_sb_puts(b, ": ");
            to_str(b, v.d->vals[i], true, depth + 1);
        }
        pl_sb_putc(b, '}');
        if (v.d->is_namespace) pl_sb_putc(b, '>');
        break;
    case JV_LOOP: pl_sb_puts(b, "<LoopContext>"); break;
    default: pl_sb_printf(b, "<%s>", jv_type_name(v)); break;
    }
}

void jv_to_str(pl_strbuf *b, jv v) {
    to_str(b, v, false, 0);
}
void jv_repr(pl_strbuf *b, jv v) {
    to_str(b, v, true, 0);
}

jv jv_stringify(jj_state *st, jv v) {
    if (v.type == JV_STR) return v;
    pl_strbuf b = JJ_SB;
    jv_to_str(&b, v);
    return jj_sb_value(st, &b);
}

static void newline_indent(pl_strbuf *b, int indent, int level) {
    pl_sb_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) pl_sb_putc(b, ' ');
}

static bool to_json(pl_strbuf *b, jv v, int indent, bool sort_keys, int level) {
    if (level > 128 || b->failed) return false;
    switch (v.type) {
    case JV_UNDEF:
    case JV_NONE: pl_sb_puts(b, "null"); return true;
    case JV_BOOL: pl_sb_puts(b, v.b ? "true" : "false"); return true;
    case JV_INT: pl_sb_printf(b, "%lld", (long long)v.i); return true;
    case JV_FLOAT:
        if (isnan(v.f))
            pl_sb_puts(b, "NaN");
        else if (isinf(v.f))
            pl_sb_puts(b, v.f < 0 ? "-Infinity" : "Infinity");
        else
            jv_format_float(b, v.f);
        return true;
    case JV_STR: pl_json_quote(b, v.s->s, v.s->len, false); return true;
    case JV_LIST:
        if (!v.l->n) {
            pl_sb_puts(b, "[]");
            return true;
        }
        pl_sb_putc(b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) pl_sb_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0) newline_indent(b, indent, level + 1);
            if (!to_json(b, v.l->items[i], indent, sort_keys, level + 1)) return false;
        }
        if (indent >= 0) newline_indent(b, indent, level);
        pl_sb_putc(b, ']');
        return true;
    case JV_DICT: {
        size_t n = v.d->n;
        if (!n) {
            pl_sb_puts(b, "{}");
            return true;
        }
        jv order_small[64], *order = n <= 32 ? order_small : malloc(2 * n * sizeof *order);
        if (!order) return false;
        for (size_t i = 0; i < n; i++) order[i] = jv_int((int64_t)i);
        if (sort_keys) jv_sort(order, order + n, n, cmp_key, v.d);
        pl_sb_putc(b, '{');
        bool ok = true;
        for (size_t k = 0; k < n && ok; k++) {
            size_t i = (size_t)order[k].i;
            if (k) pl_sb_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0) newline_indent(b, indent, level + 1);
            jv key = v.d->keys[i];
            if (key.type == JV_STR) {
                pl_json_quote(b, key.s->s, key.s->len, false);
            } else { /* json.dumps turns int/float/bool/None keys into strings */
                pl_sb_putc(b, '"');
                ok = to_json(b, key, -1, false, level + 1);
                pl_sb_putc(b, '"');
            }
            pl_sb_puts(b, ": ");
            ok = ok && to_json(b, v.d->vals[i], indent, sort_keys, level + 1);
        }
        if (order != order_small) free(order);
        if (!ok) return false;
        if (indent >= 0) newline_indent(b, indent, level);
        pl_sb_putc(b, '}');
        return true;
    }
    default: return false;
    }
}

bool jv_to_json(pl_strbuf *b, jv v, int indent, bool sort_keys, int depth) {
    return to_json(b, v, indent, sort_keys, depth);
}

const jj_list *jv_iter_list(jj_state *st, jv v) {
    switch (v.type) {
    case JV_LIST: return v.l;
    case JV_UNDEF: return jv_list_new(st, 0);
    case JV_DICT: {
        jj_list *l = jv_list_new(st, v.d->n);
        if (l)
            for (size_t i = 0; i < v.d->n; i++) l->items[i] = v.d->keys[i];
        return l;
    }
    case JV_STR: {
        size_t n = 0;
        for (size_t i = 0; i < v.s->len; n++) i += (size_t)pl_utf8_lead_len((uint8_t)v.s->s[i]);
        jj_list *l = jv_list_new(st, n);
        if (!l) return NULL;
        size_t k = 0;
        for (size_t i = 0; i < v.s->len && k < n; k++) {
            size_t cl = (size_t)pl_utf8_lead_len((uint8_t)v.s->s[i]);
            if (cl > v.s->len - i) cl = v.s->len - i;
            l->items[k] = jv_str(st, v.s->s + i, cl);
            i += cl;
        }
        return l;
    }
    default: return NULL;
    }
}

jv jv_from_json(jj_state *st, const pl_json *j) {
    switch (j->type) {
    case PL_JSON_NULL: return jv_none();
    case PL_JSON_TRUE: return jv_bool(true);
    case PL_JSON_FALSE: return jv_bool(false);
    case PL_JSON_NUMBER: return j->n.is_int ? jv_int(j->n.i) : jv_float(j->n.num);
    case PL_JSON_STRING: return jv_str(st, j->str.s, j->str.len);
    case PL_JSON_ARRAY: {
        jj_list *l = jv_list_new(st, j->arr.count);
        if (!l) return jv_undef();
        for (size_t i = 0; i < j->arr.count; i++) l->items[i] = jv_from_json(st, j->arr.items[i]);
        return (jv){.type = JV_LIST, .l = l};
    }
    case PL_JSON_OBJECT: {
        jj_dict *d = jv_dict_new(st);
        if (!d) return jv_undef();
        for (size_t i = 0; i < j->obj.count && !st->failed; i++)
            jv_dict_append(st, d, jv_str(st, j->obj.keys[i], j->obj.key_lens[i]),
                           jv_from_json(st, j->obj.vals[i]));
        return (jv){.type = JV_DICT, .d = d};
    }
    }
    return jv_undef();
}
