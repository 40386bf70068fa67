/* jinja_eval.c - render a parsed template: expression evaluation, statements, scopes,
 * macros, and the public parse/context/render entry points of jinja.h.
 *
 * Scopes follow Jinja2: `if` shares its frame, each loop iteration and each macro call gets
 * its own (a macro sees the template's top level, not its caller), so `set` inside a loop
 * does not leak out; namespaces carry values out. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "unicode.h"

bool jj_fail(jj_state *st, const jj_node *at, const char *fmt, ...) {
    if (st->failed) return false;
    st->failed = true;
    int off = at ? snprintf(st->err, sizeof st->err, "line %d: ", at->line) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err + off, sizeof st->err - (size_t)off, fmt, ap);
    va_end(ap);
    return false;
}

bool jj_work(jj_state *st, size_t n) {
    if (!st) return true;
    if (st->failed) return false;
    st->work += (int64_t)(n < (size_t)JJ_MAX_WORK ? n : (size_t)JJ_MAX_WORK);
    return st->work <= JJ_MAX_WORK || jj_fail(st, NULL, "template takes too long");
}

jv jj_sb_value(jj_state *st, pl_strbuf *b) {
    jv r = jv_undef();
    if (b->failed)
        jj_fail(st, NULL, "template makes a string longer than %u bytes (or runs out of memory)",
                JJ_MAX_OUTPUT);
    else
        r = jv_str(st, b->s ? b->s : "", b->len);
    pl_sb_free(b);
    return r;
}

/* ---- scopes ---- */

static jj_frame *frame_new(jj_state *st, jj_frame *parent) {
    jj_frame *f = pl_arena_alloc(&st->arena, sizeof *f);
    if (!f) {
        jj_fail(st, NULL, "template uses too much memory");
        return NULL;
    }
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static bool frame_set(jj_state *st, jj_frame *f, const char *name, jv v) {
    jv key = jv_str0(st, name);
    return !st->failed && jv_dict_set(st, &f->vars, key, v);
}

static jv lookup(const jj_frame *f, const char *name, size_t len) {
    for (; f; f = f->parent) {
        const jv *v = jv_dict_get(&f->vars, name, len);
        if (v) return *v;
    }
    jv g;
    if (jj_global_lookup(name, &g)) return g;
    return jv_undef();
}

/* ---- expressions ---- */

static bool exec_body(jj_state *st, const jj_node *n, jj_frame *f);

/* Python slice indices for a sequence of n elements. */
static void slice_range(int64_t n, const jv *a, const jv *b, int64_t step, int64_t *start,
                        int64_t *stop) {
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    if (!a || a->type != JV_INT)
        *start = step < 0 ? hi : lo;
    else {
        *start = a->i < 0 ? a->i + n : a->i;
        if (*start < lo) *start = lo;
        if (*start > hi) *start = hi;
    }
    if (!b || b->type != JV_INT)
        *stop = step < 0 ? lo : hi;
    else {
        *stop = b->i < 0 ? b->i + n : b->i;
        if (*stop < lo) *stop = lo;
        if (*stop > hi) *stop = hi;
    }
}

static bool eval_slice(jj_state *st, const jj_node *n, jj_frame *f, jv *out) {
    jv obj, a = jv_none(), b = jv_none(), c = jv_none();
    if (!jj_eval(st, n->a, f, &obj)) return false;
    if (n->b && !jj_eval(st, n->b, f, &a)) return false;
    if (n->c && !jj_eval(st, n->c, f, &b)) return false;
    if (n->n && n->list[0] && !jj_eval(st, n->list[0], f, &c)) return false;
    int64_t step = c.type == JV_INT ? c.i : 1;
    if (step == 0) return jj_fail(st, n, "slice step cannot be zero");
    const jj_list *items;
    if (obj.type == JV_LIST)
        items = obj.l;
    else if (obj.type == JV_STR)
        items = jv_iter_list(st, obj);
    else if (obj.type == JV_UNDEF)
        return *out = jv_undef(), true;
    else
        return jj_fail(st, n, "cannot slice a %s", jv_type_name(obj));
    if (!items) return false;
    int64_t start, stop, len = (int64_t)items->n;
    /* a step longer than the sequence takes one item at most: clamp it so that the index
     * arithmetic below cannot overflow */
    if (step > len + 1) step = len + 1;
    if (step < -(len + 1)) step = -(len + 1);
    slice_range(len, &a, &b, step, &start, &stop);
    int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop - step - 1) / -step : 0);
    if (obj.type == JV_STR) {
        pl_strbuf sb = JJ_SB;
        for (int64_t i = 0, k = start; i < count; i++, k += step)
            pl_sb_append(&sb, items->items[k].s->s, items->items[k].s->len);
        *out = jj_sb_value(st, &sb);
        return !st->failed;
    }
    jj_list *l = jv_list_new(st, (size_t)count);
    if (!l) return false;
    for (int64_t i = 0, k = start; i < count; i++, k += step) l->items[i] = items->items[k];
    *out = (jv){.type = JV_LIST, .l = l};
    return true;
}

static bool loop_attr(jj_state *st, const jj_loop *lp, const char *name, jv *out) {
    size_t i = lp->index, n = lp->items->n;
    if (!strcmp(name, "index"))
        *out = jv_int((int64_t)i + 1);
    else if (!strcmp(name, "index0"))
        *out = jv_int((int64_t)i);
    else if (!strcmp(name, "revindex"))
        *out = jv_int((int64_t)(n - i));
    else if (!strcmp(name, "revindex0"))
        *out = jv_int((int64_t)(n - i - 1));
    else if (!strcmp(name, "first"))
        *out = jv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(i + 1 == n);
    else if (!strcmp(name, "length"))
        *out = jv_int((int64_t)n);
    else if (!strcmp(name, "depth"))
        *out = jv_int(1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int(0);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 ? lp->items->items[i - 1] : jv_undef();
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? lp->items->items[i + 1] : jv_undef();
    else
        return jj_method_lookup(st, (jv){.type = JV_LOOP, .loop = lp}, name, out) ||
               (*out = jv_undef(), true);
    return true;
}

/* obj.name, Jinja2-style: a dict's methods first (d.items), then its keys. */
static bool get_attr(jj_state *st, jv obj, const char *name, size_t len, jv *out) {
    switch (obj.type) {
    case JV_DICT:
        if (!obj.d->is_namespace && jj_method_lookup(st, obj, name, out)) return true;
        {
            if (!jj_work(st, obj.d->n / 16)) return false; /* a lookup scans the keys */
            const jv *v = jv_dict_get(obj.d, name, len);
            *out = v ? *v : jv_undef();
        }
        return true;
    case JV_LOOP: return loop_attr(st, obj.loop, name, out);
    case JV_UNDEF: return jj_fail(st, NULL, "undefined value has no attribute '%s'", name);
    case JV_STR:
    case JV_LIST:
        if (jj_method_lookup(st, obj, name, out)) return true;
        *out = jv_undef();
        return true;
    default: *out = jv_undef(); return true;
    }
}

static bool get_item(jj_state *st, const jj_node *at, jv obj, jv key, jv *out) {
    if (obj.type == JV_LIST || obj.type == JV_STR) {
        if (key.type != JV_INT && key.type != JV_BOOL) {
            if (key.type == JV_STR) return get_attr(st, obj, key.s->s, key.s->len, out);
            return jj_fail(st, at, "index must be an integer, not %s", jv_type_name(key));
        }
        const jj_list *items = obj.type == JV_LIST ? obj.l : jv_iter_list(st, obj);
        if (!items) return false;
        int64_t i = key.type == JV_INT ? key.i : key.b, n = (int64_t)items->n;
        if (i < 0) i += n;
        *out = i >= 0 && i < n ? items->items[i] : jv_undef();
        return true;
    }
    if (obj.type == JV_DICT) {
        const jv *v = jv_dict_find(st, obj.d, key);
        if (v) return *out = *v, true;
        if (st->failed) return false;
        if (key.type == JV_STR && !obj.d->is_namespace)
            return get_attr(st, obj, key.s->s, key.s->len, out);
        return *out = jv_undef(), true;
    }
    if (obj.type == JV_LOOP && key.type == JV_STR) return loop_attr(st, obj.loop, key.s->s, out);
    if (obj.type == JV_UNDEF) return jj_fail(st, at, "undefined value has no items");
    *out = jv_undef();
    return true;
}

static bool call_macro(jj_state *st, const jj_node *at, const jj_node *m, const jv *args, size_t n,
                       const char **kwn, const jv *kwv, size_t nkw, const jj_node *caller,
                       jv *out) {
    if (st->depth >= JJ_MAX_CALL_DEPTH) return jj_fail(st, at, "macros nested too deep");
    jj_frame *f = frame_new(st, st->root);
    if (!f) return false;
    for (size_t i = 0; i < m->n_names; i++) {
        jv v = jv_undef();
        bool set = false;
        if (i < n) v = args[i], set = true;
        for (size_t k = 0; k < nkw && !set; k++)
            if (!strcmp(kwn[k], m->names[i])) v = kwv[k], set = true;
        if (!set && i < m->n && m->list[i] && !jj_eval(st, m->list[i], f, &v)) return false;
        if (!frame_set(st, f, m->names[i], v)) return false;
    }
    if (caller && !frame_set(st, f, "caller", (jv){.type = JV_MACRO, .macro = caller}))
        return false;
    pl_strbuf saved = st->out;
    st->out = (pl_strbuf){0};
    st->depth++;
    bool ok = exec_body(st, m->a, f);
    st->depth--;
    st->loop_ctl = 0;
    pl_strbuf body = st->out;
    st->out = saved;
    if (ok && body.failed) ok = jj_fail(st, at, "out of memory");
    if (ok) *out = jv_str(st, body.s ? body.s : "", body.len);
    pl_sb_free(&body);
    return ok && !st->failed;
}

#define MAX_ARGS 32

static bool eval_args(jj_state *st, const jj_node *n, jj_frame *f, jv *args, jv *kwv) {
    if (n->n > MAX_ARGS || n->n2 > MAX_ARGS) return jj_fail(st, n, "too many arguments");
    for (size_t i = 0; i < n->n; i++)
        if (!jj_eval(st, n->list[i], f, &args[i])) return false;
    for (size_t i = 0; i < n->n2; i++)
        if (!jj_eval(st, n->list2[i], f, &kwv[i])) return false;
    return true;
}

static __attribute__((noinline)) bool eval_call(jj_state *st, const jj_node *n, jj_frame *f,
                                                const jj_node *caller, jv *out) {
    jv fn, args[MAX_ARGS], kwv[MAX_ARGS];
    if (!jj_eval(st, n->a, f, &fn) || !eval_args(st, n, f, args, kwv)) return false;
    if (fn.type == JV_MACRO)
        return call_macro(st, n, fn.macro, args, n->n, n->names, kwv, n->n2, caller, out);
    if (fn.type == JV_FUNC || fn.type == JV_METHOD)
        return jj_call_builtin(st, n, fn, args, n->n, n->names, kwv, n->n2, out);
    if (fn.type == JV_UNDEF)
        return jj_fail(st, n, "'%s' is undefined",
                       n->a->kind == N_NAME   ? n->a->str
                       : n->a->kind == N_ATTR ? n->a->str
                                              : "value");
    return jj_fail(st, n, "a %s is not callable", jv_type_name(fn));
}

static bool arith(jj_state *st, const jj_node *n, int op, jv a, jv b, jv *out) {
    if (op == OP_CONCAT) {
        pl_strbuf sb = JJ_SB;
        jv_to_str(&sb, a);
        jv_to_str(&sb, b);
        *out = jj_sb_value(st, &sb);
        return !st->failed;
    }
    if (op == OP_ADD && a.type == JV_STR && b.type == JV_STR) {
        jj_str *s = pl_arena_alloc(&st->arena, sizeof *s + a.s->len + b.s->len + 1);
        if (!s) return jj_fail(st, n, "template uses too much memory");
        s->len = a.s->len + b.s->len;
        memcpy(s->s, a.s->s, a.s->len);
        memcpy(s->s + a.s->len, b.s->s, b.s->len + 1);
        *out = (jv){.type = JV_STR, .s = s};
        return true;
    }
    if (op == OP_ADD && a.type == JV_LIST && b.type == JV_LIST) {
        jj_list *l = jv_list_new(st, a.l->n + b.l->n);
        if (!l) return false;
        memcpy(l->items, a.l->items, a.l->n * sizeof(jv));
        memcpy(l->items + a.l->n, b.l->items, b.l->n * sizeof(jv));
        *out = (jv){.type = JV_LIST, .l = l};
        return true;
    }
    if (op == OP_MUL &&
        ((a.type == JV_STR && b.type == JV_INT) || (a.type == JV_INT && b.type == JV_STR))) {
        jv s = a.type == JV_STR ? a : b;
        int64_t k = a.type == JV_INT ? a.i : b.i;
        if (k <= 0 || !s.s->len) return *out = jv_str(st, "", 0), !st->failed;
        if ((uint64_t)k > JJ_MAX_OUTPUT / s.s->len)
            return jj_fail(st, n, "string too long (over %u bytes)", JJ_MAX_OUTPUT);
        pl_strbuf sb = JJ_SB;
        for (int64_t i = 0; i < k; i++) pl_sb_append(&sb, s.s->s, s.s->len);
        *out = jj_sb_value(st, &sb);
        return !st->failed;
    }
    bool an = a.type == JV_INT || a.type == JV_FLOAT || a.type == JV_BOOL;
    bool bn = b.type == JV_INT || b.type == JV_FLOAT || b.type == JV_BOOL;
    if (!an || !bn) {
        static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
        return jj_fail(st, n, "cannot apply %s to %s and %s", op <= OP_POW ? names[op] : "?",
                       jv_type_name(a), jv_type_name(b));
    }
    bool ints = a.type != JV_FLOAT && b.type != JV_FLOAT && op != OP_DIV;
    int64_t x = a.type == JV_INT ? a.i : a.type == JV_BOOL ? a.b : 0;
    int64_t y = b.type == JV_INT ? b.i : b.type == JV_BOOL ? b.b : 0;
    double fx = a.type == JV_FLOAT ? a.f : (double)x, fy = b.type == JV_FLOAT ? b.f : (double)y;
    if ((op == OP_DIV || op == OP_FLOORDIV || op == OP_MOD) && fy == 0.0)
        return jj_fail(st, n, "division by zero");
    if (ints) {
        int64_t r;
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r)) goto ovf;
            break;
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) goto ovf;
            break;
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) goto ovf;
            break;
        case OP_FLOORDIV:
            if (x == INT64_MIN && y == -1) goto ovf;
            r = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
            break;
        case OP_MOD:
            if (y == -1) {
                r = 0;
                break;
            }
            r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            break;
        case OP_POW:
            if (y < 0) {
                *out = jv_float(pow(fx, fy));
                return true;
            }
            /* by squaring: y may be huge when x is 0 or +-1. A square that overflows is
             * needed only if a higher bit of y is left, and then the result overflows too. */
            r = 1;
            for (int64_t base = x, e = y; e; e >>= 1) {
                if ((e & 1) && __builtin_mul_overflow(r, base, &r)) goto ovf;
                if (e > 1 && __builtin_mul_overflow(base, base, &base)) goto ovf;
            }
            break;
        default: return jj_fail(st, n, "bad operator");
        }
        *out = jv_int(r);
        return true;
    ovf:
        return jj_fail(st, n, "integer overflow");
    }
    double r;
    switch (op) {
    case OP_ADD: r = fx + fy; break;
    case OP_SUB: r = fx - fy; break;
    case OP_MUL: r = fx * fy; break;
    case OP_DIV: r = fx / fy; break;
    case OP_FLOORDIV: r = floor(fx / fy); break;
    case OP_MOD:
        r = fmod(fx, fy);
        if (r != 0 && ((r < 0) != (fy < 0))) r += fy;
        break;
    case OP_POW: r = pow(fx, fy); break;
    default: return jj_fail(st, n, "bad operator");
    }
    *out = jv_float(r);
    return true;
}

static bool contains(jj_state *st, const jj_node *n, jv item, jv container, bool *out) {
    switch (container.type) {
    case JV_STR:
        if (item.type != JV_STR) return jj_fail(st, n, "'in <string>' needs a string on the left");
        if (!jj_work(st, container.s->len / 16)) return false;
        *out = item.s->len == 0 || memmem(container.s->s, container.s->len, item.s->s, item.s->len);
        return true;
    case JV_LIST:
        *out = false;
        for (size_t i = 0; i < container.l->n && !*out; i++)
            *out = jv_equal(st, item, container.l->items[i]);
        return !st->failed;
    case JV_DICT: *out = jv_dict_find(st, container.d, item) != NULL; return !st->failed;
    case JV_UNDEF: *out = false; return true;
    default:
        return jj_fail(st, n, "'in' needs a string, list or dict, not %s", jv_type_name(container));
    }
}

static bool compare(jj_state *st, const jj_node *n, int op, jv a, jv b, bool *out) {
    int c;
    switch (op) {
    case OP_EQ: *out = jv_equal(st, a, b); return !st->failed;
    case OP_NE: *out = !jv_equal(st, a, b); return !st->failed;
    case OP_IN: return contains(st, n, a, b, out);
    case OP_NOT_IN:
        if (!contains(st, n, a, b, out)) return false;
        *out = !*out;
        return true;
    }
    if (!jv_compare(st, a, b, &c))
        return st->failed
                   ? false
                   : jj_fail(st, n, "cannot order %s and %s", jv_type_name(a), jv_type_name(b));
    *out = op == OP_LT ? c < 0 : op == OP_GT ? c > 0 : op == OP_LE ? c <= 0 : c >= 0;
    return true;
}

/* Filters and tests keep their argument arrays out of eval's frame (it recurses deeply). */
static __attribute__((noinline)) bool eval_filter(jj_state *st, const jj_node *n, jj_frame *f,
                                                  jv *out) {
    jv a, args[MAX_ARGS], kwv[MAX_ARGS];
    if (!jj_eval(st, n->a, f, &a) || !eval_args(st, n, f, args, kwv)) return false;
    return jj_filter(st, n, n->str, a, args, n->n, n->names, kwv, n->n2, out);
}

static __attribute__((noinline)) bool eval_test(jj_state *st, const jj_node *n, jj_frame *f,
                                                jv *out) {
    jv a, args[MAX_ARGS], kwv[MAX_ARGS];
    bool r;
    if (!jj_eval(st, n->a, f, &a) || !eval_args(st, n, f, args, kwv)) return false;
    if (!jj_test(st, n, n->str, a, args, n->n, &r)) return false;
    *out = jv_bool(n->op ? !r : r);
    return true;
}

static bool eval_node(jj_state *st, const jj_node *n, jj_frame *f, jv *out);

bool jj_eval(jj_state *st, const jj_node *n, jj_frame *f, jv *out) {
    if (st->failed) return false;
    if (++st->steps > JJ_MAX_STEPS) return jj_fail(st, n, "template takes too long");
    if (++st->eval_depth > JJ_MAX_EVAL_DEPTH) {
        st->eval_depth--;
        return jj_fail(st, n, "template recursion too deep");
    }
    bool ok = eval_node(st, n, f, out);
    st->eval_depth--;
    return ok;
}

static bool eval_node(jj_state *st, const jj_node *n, jj_frame *f, jv *out) {
    jv a, b;
    switch (n->kind) {
    case N_LIT: *out = n->lit; return true;
    case N_NAME: *out = lookup(f, n->str, n->len); return true;
    case N_ATTR: return jj_eval(st, n->a, f, &a) && get_attr(st, a, n->str, n->len, out);
    case N_ITEM:
        return jj_eval(st, n->a, f, &a) && jj_eval(st, n->b, f, &b) && get_item(st, n, a, b, out);
    case N_SLICE: return eval_slice(st, n, f, out);
    case N_CALL: return eval_call(st, n, f, NULL, out);
    case N_FILTER: return eval_filter(st, n, f, out);
    case N_TEST: return eval_test(st, n, f, out);
    case N_NEG:
    case N_POS:
        if (!jj_eval(st, n->a, f, &a)) return false;
        if (a.type == JV_INT && n->kind == N_NEG && a.i == INT64_MIN)
            return jj_fail(st, n, "integer overflow");
        if (a.type == JV_INT) return *out = jv_int(n->kind == N_NEG ? -a.i : a.i), true;
        if (a.type == JV_FLOAT) return *out = jv_float(n->kind == N_NEG ? -a.f : a.f), true;
        if (a.type == JV_BOOL) return *out = jv_int(n->kind == N_NEG ? -(int64_t)a.b : a.b), true;
        return jj_fail(st, n, "bad operand for unary minus: %s", jv_type_name(a));
    case N_NOT:
        if (!jj_eval(st, n->a, f, &a)) return false;
        *out = jv_bool(!jv_truthy(a));
        return true;
    case N_AND:
        if (!jj_eval(st, n->a, f, &a)) return false;
        return jv_truthy(a) ? jj_eval(st, n->b, f, out) : (*out = a, true);
    case N_OR:
        if (!jj_eval(st, n->a, f, &a)) return false;
        return jv_truthy(a) ? (*out = a, true) : jj_eval(st, n->b, f, out);
    case N_BIN:
        return jj_eval(st, n->a, f, &a) && jj_eval(st, n->b, f, &b) &&
               arith(st, n, n->op, a, b, out);
    case N_COMPARE: {
        if (!jj_eval(st, n->a, f, &a)) return false;
        for (size_t i = 0; i < n->n; i++) {
            bool r = false;
            if (!jj_eval(st, n->list[i], f, &b) || !compare(st, n, n->ops[i], a, b, &r))
                return false;
            if (!r) return *out = jv_bool(false), true;
            a = b;
        }
        *out = jv_bool(true);
        return true;
    }
    case N_COND:
        if (!jj_eval(st, n->b, f, &a)) return false;
        if (jv_truthy(a)) return jj_eval(st, n->a, f, out);
        if (n->c) return jj_eval(st, n->c, f, out);
        *out = jv_undef();
        return true;
    case N_LIST:
    case N_TUPLE: {
        jj_list *l = jv_list_new(st, n->n);
        if (!l) return false;
        for (size_t i = 0; i < n->n; i++)
            if (!jj_eval(st, n->list[i], f, &l->items[i])) return false;
        l->tuple = n->kind == N_TUPLE;
        *out = (jv){.type = JV_LIST, .l = l};
        return true;
    }
    case N_DICT: {
        jj_dict *d = jv_dict_new(st);
        if (!d) return false;
        for (size_t i = 0; i < n->n; i++) {
            if (!jj_eval(st, n->list[i], f, &a) || !jj_eval(st, n->list2[i], f, &b)) return false;
            if (!jv_dict_set(st, d, a, b)) return false;
        }
        *out = (jv){.type = JV_DICT, .d = d};
        return true;
    }
    default: return jj_fail(st, n, "not an expression");
    }
}

/* ---- statements ---- */

static void emit(jj_state *st, const char *s, size_t n) {
    st->emitted += n;
    if (st->emitted > JJ_MAX_OUTPUT) {
        jj_fail(st, NULL, "template output too large");
        return;
    }
    pl_sb_append(&st->out, s, n);
    if (st->out.failed) jj_fail(st, NULL, "out of memory");
}

static bool bind_targets(jj_state *st, const jj_node *at, jj_frame *f, const char **names, size_t n,
                         jv v) {
    if (n == 1) return frame_set(st, f, names[0], v);
    const jj_list *items = v.type == JV_LIST ? v.l : NULL;
    if (!items || items->n != n)
        return jj_fail(st, at, "cannot unpack %s into %zu names", jv_type_name(v), n);
    for (size_t i = 0; i < n; i++)
        if (!frame_set(st, f, names[i], items->items[i])) return false;
    return true;
}

static bool exec_for(jj_state *st, const jj_node *n, jj_frame *f) {
    jv seq;
    if (!jj_eval(st, n->a, f, &seq)) return false;
    const jj_list *items = jv_iter_list(st, seq);
    if (!items)
        return st->failed ? false : jj_fail(st, n, "cannot loop over a %s", jv_type_name(seq));
    if (n->b) { /* `for x in xs if cond`: the loop sees only the items that pass */
        jj_list *kept = jv_list_new(st, items->n);
        if (!kept) return false;
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            jj_frame *tf = frame_new(st, f);
            jv c;
            if (!tf || !bind_targets(st, n, tf, n->names, n->n_names, items->items[i]) ||
                !jj_eval(st, n->b, tf, &c))
                return false;
            if (jv_truthy(c)) kept->items[k++] = items->items[i];
        }
        kept->n = k;
        items = kept;
    }
    jj_loop *lp = pl_arena_alloc(&st->arena, sizeof *lp);
    if (!lp) return jj_fail(st, n, "template uses too much memory");
    lp->items = items;
    for (size_t i = 0; i < items->n; i++) {
        if (++st->steps > JJ_MAX_STEPS) return jj_fail(st, n, "template takes too long");
        /* each iteration sees its own loop state */
        jj_loop *it = pl_arena_alloc(&st->arena, sizeof *it);
        jj_frame *lf = frame_new(st, f);
        if (!it || !lf) return jj_fail(st, n, "template uses too much memory");
        it->items = items, it->index = i;
        if (!bind_targets(st, n, lf, n->names, n->n_names, items->items[i]) ||
            !frame_set(st, lf, "loop", (jv){.type = JV_LOOP, .loop = it}))
            return false;
        if (!exec_body(st, n->c, lf)) return false;
        int ctl = st->loop_ctl;
        st->loop_ctl = 0;
        if (ctl == 1) break;
    }
    if (!items->n && n->n2) return exec_body(st, n->list2[0], f);
    return true;
}

static bool exec_node(jj_state *st, const jj_node *n, jj_frame *f);

static bool exec_stmt(jj_state *st, const jj_node *n, jj_frame *f) {
    if (++st->eval_depth > JJ_MAX_EVAL_DEPTH) {
        st->eval_depth--;
        return jj_fail(st, n, "template recursion too deep");
    }
    bool ok = exec_node(st, n, f);
    st->eval_depth--;
    return ok;
}

static bool exec_node(jj_state *st, const jj_node *n, jj_frame *f) {
    jv v;
    switch (n->kind) {
    case N_TEXT: emit(st, n->str, n->len); return !st->failed;
    case N_OUT: {
        if (!jj_eval(st, n->a, f, &v)) return false;
        if (v.type == JV_STR) {
            emit(st, v.s->s, v.s->len);
        } else {
            jv s = jv_stringify(st, v);
            if (s.type == JV_STR) emit(st, s.s->s, s.s->len);
        }
        return !st->failed;
    }
    case N_IF:
        for (size_t i = 0; i < n->n; i++) {
            if (!jj_eval(st, n->list[i], f, &v)) return false;
            if (jv_truthy(v)) return exec_body(st, n->list2[i], f);
        }
        return n->n2 > n->n ? exec_body(st, n->list2[n->n], f) : true;
    case N_FOR: return exec_for(st, n, f);
    case N_SET: return jj_eval(st, n->a, f, &v) && bind_targets(st, n, f, n->names, n->n_names, v);
    case N_SET_ATTR: {
        jv ns = lookup(f, n->str, strlen(n->str));
        if (ns.type != JV_DICT || !ns.d->is_namespace)
            return jj_fail(st, n, "'%s' is not a namespace", n->str);
        return jj_eval(st, n->a, f, &v) && jv_dict_set(st, ns.d, jv_str0(st, n->names[0]), v);
    }
    case N_SET_BLOCK: {
        pl_strbuf saved = st->out;
        st->out = (pl_strbuf){0};
        bool ok = exec_body(st, n->a, f);
        pl_strbuf body = st->out;
        st->out = saved;
        if (ok) ok = frame_set(st, f, n->str, jv_str(st, body.s ? body.s : "", body.len));
        pl_sb_free(&body);
        return ok;
    }
    case N_MACRO: return frame_set(st, f, n->str, (jv){.type = JV_MACRO, .macro = n});
    case N_BREAK: st->loop_ctl = 1; return true;
    case N_CONTINUE: st->loop_ctl = 2; return true;
    case N_BODY: return exec_body(st, n, f);
    case N_CALL_BLOCK:
        if (!eval_call(st, n->a, f, n->c, &v)) return false;
        if (v.type == JV_STR) emit(st, v.s->s, v.s->len);
        return !st->failed;
    default: return jj_fail(st, n, "not a statement");
    }
}

static bool exec_body(jj_state *st, const jj_node *n, jj_frame *f) {
    for (size_t i = 0; i < n->n; i++) {
        if (!exec_stmt(st, n->list[i], f)) return false;
        if (st->loop_ctl) return true;
    }
    return true;
}

/* ---- the public API ---- */

pl_status pl_jinja_parse(const char *src, size_t len, pl_jinja **out) {
    *out = NULL;
    pl_jinja *t = calloc(1, sizeof *t);
    if (!t) return pl_fail(PL_ERR_NOMEM, "template: out of memory");
    t->arena.max = JJ_MAX_MEMORY;
    jj_tokens toks = {0};
    pl_status st = jj_lex(src, len, &t->arena, &toks);
    if (st == PL_OK) st = jj_parse(&toks, &t->arena, &t->root);
    free(toks.v);
    if (st != PL_OK) {
        pl_jinja_free(t);
        return st;
    }
    *out = t;
    return PL_OK;
}

void pl_jinja_free(pl_jinja *t) {
    if (!t) return;
    pl_arena_free(&t->arena);
    free(t);
}

typedef struct {
    char *name;
    int kind; /* 0 json, 1 string, 2 bool */
    const pl_json *json;
    char *str;
    bool b;
} ctx_var;

struct pl_jinja_ctx {
    ctx_var *v;
    size_t n;
};

pl_jinja_ctx *pl_jinja_ctx_new(void) {
    return calloc(1, sizeof(pl_jinja_ctx));
}

void pl_jinja_ctx_free(pl_jinja_ctx *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->v[i].name), free(c->v[i].str);
    free(c->v);
    free(c);
}

static pl_status ctx_add(pl_jinja_ctx *c, const char *name, ctx_var v) {
    ctx_var *nv = realloc(c->v, (c->n + 1) * sizeof *nv);
    if (!nv) return pl_fail(PL_ERR_NOMEM, "out of memory");
    c->v = nv;
    v.name = strdup(name);
    if (!v.name) return pl_fail(PL_ERR_NOMEM, "out of memory");
    c->v[c->n++] = v;
    return PL_OK;
}

pl_status pl_jinja_set_json(pl_jinja_ctx *c, const char *name, const pl_json *v) {
    return ctx_add(c, name, (ctx_var){.kind = 0, .json = v});
}

pl_status pl_jinja_set_str(pl_jinja_ctx *c, const char *name, const char *s) {
    char *copy = strdup(s);
    if (!copy) return pl_fail(PL_ERR_NOMEM, "out of memory");
    pl_status st = ctx_add(c, name, (ctx_var){.kind = 1, .str = copy});
    if (st != PL_OK) free(copy);
    return st;
}

pl_status pl_jinja_set_bool(pl_jinja_ctx *c, const char *name, bool b) {
    return ctx_add(c, name, (ctx_var){.kind = 2, .b = b});
}

pl_status pl_jinja_render(const pl_jinja *t, const pl_jinja_ctx *c, char **out, size_t *out_len) {
    *out = NULL;
    jj_state st = {0};
    st.arena.max = JJ_MAX_MEMORY;
    jj_frame *globals = frame_new(&st, NULL);
    st.root = globals ? frame_new(&st, globals) : NULL;
    for (size_t i = 0; c && st.root && i < c->n; i++) {
        const ctx_var *v = &c->v[i];
        jv val = v->kind == 0   ? jv_from_json(&st, v->json)
                 : v->kind == 1 ? jv_str0(&st, v->str)
                                : jv_bool(v->b);
        frame_set(&st, globals, v->name, val);
    }
    if (st.root && !st.failed && !exec_body(&st, t->root, st.root) && !st.failed)
        jj_fail(&st, NULL, "internal error: evaluation failed without a reason");
    pl_status rc = PL_OK;
    if (st.failed) {
        rc = pl_fail(PL_ERR_FORMAT, "template: %s", st.err);
    } else {
        size_t len = st.out.len;
        *out = pl_sb_take(&st.out, NULL);
        if (!*out)
            rc = pl_fail(PL_ERR_NOMEM, "template: out of memory");
        else if (out_len)
            *out_len = len;
    }
    pl_sb_free(&st.out);
    pl_arena_free(&st.arena);
    return rc;
}
