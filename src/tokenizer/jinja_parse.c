/* jinja_parse.c - template expressions to syntax tree, by recursive descent with Jinja2's
 * precedence (statements are in jinja_stmt.c):
 * conditional < or < and < not < comparisons (== != < > <= >= in, not in) < + - < ~ <
 * * / // % < ** < unary - + < primary with postfix (.attr [item] [a:b:c] (call)), then
 * filters (|f(...)) and tests (is [not] t ...). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_parser.h"

bool jj_pfail(jj_parser *p, const char *fmt, ...) {
    if (p->err[0]) return false;
    int off =
        snprintf(p->err, sizeof p->err, "line %d: ", p->t[p->i < p->n ? p->i : p->n - 1].line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + off, sizeof p->err - (size_t)off, fmt, ap);
    va_end(ap);
    return false;
}

bool jj_expect_op(jj_parser *p, const char *op) {
    if (accept_op(p, op)) return true;
    return jj_pfail(p, "expected '%s'", op);
}

jj_node *jj_pnode(jj_parser *p, int kind) {
    jj_node *n = pl_arena_alloc(p->arena, sizeof *n);
    if (!n) {
        jj_pfail(p, "out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = cur(p)->line;
    return n;
}

bool jj_nl_push(jj_parser *p, jj_nlist *l, const jj_node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        const jj_node **v = realloc(l->v, cap * sizeof *v);
        if (!v) return jj_pfail(p, "out of memory");
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

const jj_node **jj_nl_take(jj_parser *p, jj_nlist *l, size_t *n) {
    const jj_node **v = pl_arena_alloc(p->arena, (l->n ? l->n : 1) * sizeof *v);
    if (v && l->n) memcpy(v, l->v, l->n * sizeof *v);
    if (!v) jj_pfail(p, "out of memory");
    *n = l->n;
    free(l->v);
    l->v = NULL, l->n = l->cap = 0;
    return v;
}

const char **jj_names_take(jj_parser *p, const char **tmp, size_t n) {
    const char **v = pl_arena_alloc(p->arena, (n ? n : 1) * sizeof *v);
    if (!v) {
        jj_pfail(p, "out of memory");
        return NULL;
    }
    if (n) memcpy(v, tmp, n * sizeof *v);
    return v;
}

static const jj_node *parse_unary(jj_parser *p, bool with_filter);

bool jj_enter(jj_parser *p) {
    if (++p->depth > JJ_MAX_NEST) return jj_pfail(p, "template nested too deep");
    return true;
}

/* Call arguments after '(' up to ')': positional into args, keywords into kw names/values. */
static bool parse_args(jj_parser *p, jj_node *n) {
    jj_nlist args = {0}, kwv = {0};
    const char *kwn[64];
    size_t nkw = 0;
    while (!is_op(p, ")")) {
        if (cur(p)->kind == JT_NAME && p->i + 1 < p->n && p->t[p->i + 1].kind == JT_OP &&
            strcmp(p->t[p->i + 1].text, "=") == 0) {
            if (nkw == 64) goto bad;
            kwn[nkw++] = cur(p)->text;
            advance(p), advance(p);
            const jj_node *v = jj_parse_expr(p);
            if (!v || !jj_nl_push(p, &kwv, v)) goto bad;
        } else {
            if (nkw) {
                jj_pfail(p, "positional argument after a keyword argument");
                goto bad;
            }
            const jj_node *v = jj_parse_expr(p);
            if (!v || !jj_nl_push(p, &args, v)) goto bad;
        }
        if (!accept_op(p, ",")) break;
    }
    if (!jj_expect_op(p, ")")) goto bad;
    n->list = jj_nl_take(p, &args, &n->n);
    n->list2 = jj_nl_take(p, &kwv, &n->n2);
    n->names = jj_names_take(p, kwn, nkw);
    n->n_names = nkw;
    return !p->err[0];
bad:
    free(args.v), free(kwv.v);
    return jj_pfail(p, "bad arguments");
}

static const jj_node *literal(jj_parser *p, jv v) {
    jj_node *n = jj_pnode(p, N_LIT);
    if (n) n->lit = v;
    return n;
}

/* ( expr ), (a, b), () */
static const jj_node *parse_paren(jj_parser *p) {
    advance(p);
    jj_nlist items = {0};
    bool tuple = false;
    while (!is_op(p, ")")) {
        const jj_node *e = jj_parse_expr(p);
        if (!e || !jj_nl_push(p, &items, e)) goto bad;
        if (!accept_op(p, ",")) break;
        tuple = true;
    }
    if (!jj_expect_op(p, ")")) goto bad;
    if (items.n == 1 && !tuple) {
        const jj_node *e = items.v[0];
        free(items.v);
        return e;
    }
    jj_node *n = jj_pnode(p, N_TUPLE);
    if (!n) goto bad;
    n->list = jj_nl_take(p, &items, &n->n);
    return n;
bad:
    free(items.v);
    return NULL;
}

static const jj_node *parse_primary(jj_parser *p) {
    const jj_token *t = cur(p);
    if (t->kind == JT_NAME) {
        const char *s = t->text;
        advance(p);
        if (!strcmp(s, "true") || !strcmp(s, "True")) return literal(p, jv_bool(true));
        if (!strcmp(s, "false") || !strcmp(s, "False")) return literal(p, jv_bool(false));
        if (!strcmp(s, "none") || !strcmp(s, "None")) return literal(p, jv_none());
        jj_node *n = jj_pnode(p, N_NAME);
        if (n) n->str = s, n->len = t->len;
        return n;
    }
    if (t->kind == JT_STRING) {
        /* adjacent literals concatenate */
        pl_strbuf b = {0};
        while (cur(p)->kind == JT_STRING) {
            pl_sb_append(&b, cur(p)->text, cur(p)->len);
            advance(p);
        }
        jj_node *n = jj_pnode(p, N_LIT);
        size_t len = b.len;
        char *s = pl_sb_take(&b, NULL);
        jj_str *js = s ? pl_arena_alloc(p->arena, sizeof *js + len + 1) : NULL;
        if (!n || !js) {
            free(s);
            jj_pfail(p, "out of memory");
            return NULL;
        }
        js->len = len;
        memcpy(js->s, s, len + 1);
        free(s);
        n->lit.type = JV_STR;
        n->lit.s = js;
        return n;
    }
    if (t->kind == JT_INT) {
        advance(p);
        return literal(p, jv_int(t->i));
    }
    if (t->kind == JT_FLOAT) {
        advance(p);
        return literal(p, jv_float(t->f));
    }
    if (is_op(p, "(")) return parse_paren(p);
    if (is_op(p, "[")) {
        advance(p);
        jj_nlist items = {0};
        while (!is_op(p, "]")) {
            const jj_node *e = jj_parse_expr(p);
            if (!e || !jj_nl_push(p, &items, e)) {
                free(items.v);
                return NULL;
            }
            if (!accept_op(p, ",")) break;
        }
        jj_node *n = jj_pnode(p, N_LIST);
        if (!jj_expect_op(p, "]") || !n) {
            free(items.v);
            return NULL;
        }
        n->list = jj_nl_take(p, &items, &n->n);
        return n;
    }
    if (is_op(p, "{")) {
        advance(p);
        jj_nlist keys = {0}, vals = {0};
        while (!is_op(p, "}")) {
            const jj_node *k = jj_parse_expr(p);
            if (!k || !jj_expect_op(p, ":")) goto bad_dict;
            const jj_node *v = jj_parse_expr(p);
            if (!v || !jj_nl_push(p, &keys, k) || !jj_nl_push(p, &vals, v)) goto bad_dict;
            if (!accept_op(p, ",")) break;
        }
        jj_node *n = jj_pnode(p, N_DICT);
        if (!jj_expect_op(p, "}") || !n) goto bad_dict;
        n->list = jj_nl_take(p, &keys, &n->n);
        n->list2 = jj_nl_take(p, &vals, &n->n2);
        return n;
    bad_dict:
        free(keys.v), free(vals.v);
        return NULL;
    }
    jj_pfail(p, "unexpected %s",
             t->kind == JT_OP    ? t->text
             : t->kind == JT_EOF ? "end of template"
                                 : "token");
    return NULL;
}

static const jj_node *parse_postfix(jj_parser *p, const jj_node *e) {
    while (e) {
        if (accept_op(p, ".")) {
            jj_node *n;
            if (cur(p)->kind == JT_INT) { /* x.0 is x[0] */
                n = jj_pnode(p, N_ITEM);
                const jj_node *k = literal(p, jv_int(cur(p)->i));
                if (!n || !k) return NULL;
                n->a = e, n->b = k;
                advance(p);
            } else if (cur(p)->kind == JT_NAME) {
                n = jj_pnode(p, N_ATTR);
                if (!n) return NULL;
                n->a = e, n->str = cur(p)->text, n->len = cur(p)->len;
                advance(p);
            } else {
                jj_pfail(p, "expected an attribute name");
                return NULL;
            }
            e = n;
        } else if (accept_op(p, "[")) {
            const jj_node *a = NULL, *b = NULL, *c = NULL;
            bool slice = false;
            if (!is_op(p, ":") && !(a = jj_parse_expr(p))) return NULL;
            if (accept_op(p, ":")) {
                slice = true;
                if (!is_op(p, "]") && !is_op(p, ":") && !(b = jj_parse_expr(p))) return NULL;
                if (accept_op(p, ":") && !is_op(p, "]") && !(c = jj_parse_expr(p))) return NULL;
            }
            if (!jj_expect_op(p, "]")) return NULL;
            jj_node *n = jj_pnode(p, slice ? N_SLICE : N_ITEM);
            if (!n) return NULL;
            if (slice)
                n->a = e, n->b = a, n->c = b, n->list = NULL;
            else
                n->a = e, n->b = a;
            if (slice) { /* the step goes in list[0] to keep a/b/c as object/start/stop */
                const jj_node **st = pl_arena_alloc(p->arena, sizeof *st);
                if (!st) return NULL;
                st[0] = c;
                n->list = st, n->n = 1;
            }
            e = n;
        } else if (accept_op(p, "(")) {
            jj_node *n = jj_pnode(p, N_CALL);
            if (!n) return NULL;
            n->a = e;
            if (!parse_args(p, n)) return NULL;
            e = n;
        } else {
            break;
        }
    }
    return e;
}

/* |filter(args) and `is [not] test args` after a unary expression. */
static const jj_node *parse_filters(jj_parser *p, const jj_node *e) {
    while (e) {
        if (accept_op(p, "|")) {
            if (cur(p)->kind != JT_NAME) {
                jj_pfail(p, "expected a filter name");
                return NULL;
            }
            jj_node *n = jj_pnode(p, N_FILTER);
            if (!n) return NULL;
            n->a = e, n->str = cur(p)->text;
            advance(p);
            if (accept_op(p, "(") && !parse_args(p, n)) return NULL;
            e = n;
        } else if (accept_name(p, "is")) {
            jj_node *n = jj_pnode(p, N_TEST);
            if (!n) return NULL;
            n->op = accept_name(p, "not");
            if (cur(p)->kind != JT_NAME &&
                !(cur(p)->kind == JT_OP && !strcmp(cur(p)->text, "=="))) {
                jj_pfail(p, "expected a test name");
                return NULL;
            }
            n->a = e;
            n->str = cur(p)->kind == JT_NAME ? cur(p)->text : "eq";
            advance(p);
            const jj_token *t = cur(p);
            if (accept_op(p, "(")) {
                if (!parse_args(p, n)) return NULL;
            } else if ((t->kind == JT_NAME || t->kind == JT_STRING || t->kind == JT_INT ||
                        t->kind == JT_FLOAT || is_op(p, "[") || is_op(p, "{")) &&
                       !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and") &&
                       !is_name(p, "if") && !is_name(p, "is")) {
                /* one argument without parentheses: `is divisibleby 3`, `is sameas none` */
                const jj_node *arg = parse_postfix(p, parse_primary(p));
                const jj_node **l = pl_arena_alloc(p->arena, sizeof *l);
                if (!arg || !l) return NULL;
                l[0] = arg;
                n->list = l, n->n = 1;
            }
            e = n;
        } else {
            break;
        }
    }
    return e;
}

static const jj_node *parse_unary(jj_parser *p, bool with_filter) {
    if (!jj_enter(p)) return NULL;
    const jj_node *e;
    if (is_op(p, "-") || is_op(p, "+")) {
        bool neg = is_op(p, "-");
        advance(p);
        jj_node *n = jj_pnode(p, neg ? N_NEG : N_POS);
        const jj_node *x = parse_unary(p, false);
        if (!n || !x) return NULL;
        n->a = x;
        e = n;
    } else {
        e = parse_postfix(p, parse_primary(p));
    }
    if (with_filter) e = parse_filters(p, e);
    p->depth--;
    return e;
}

static const jj_node *binary(jj_parser *p, int op, const jj_node *a, const jj_node *b) {
    if (!a || !b) return NULL;
    jj_node *n = jj_pnode(p, N_BIN);
    if (!n) return NULL;
    n->op = (uint8_t)op, n->a = a, n->b = b;
    return n;
}

static const jj_node *parse_pow(jj_parser *p) {
    const jj_node *e = parse_unary(p, true);
    while (e && accept_op(p, "**")) e = binary(p, OP_POW, e, parse_unary(p, true));
    return e;
}

static const jj_node *parse_math2(jj_parser *p) {
    const jj_node *e = parse_pow(p);
    for (;;) {
        int op = is_op(p, "*")    ? OP_MUL
                 : is_op(p, "/")  ? OP_DIV
                 : is_op(p, "//") ? OP_FLOORDIV
                 : is_op(p, "%")  ? OP_MOD
                                  : -1;
        if (op < 0 || !e) return e;
        advance(p);
        e = binary(p, op, e, parse_pow(p));
    }
}

static const jj_node *parse_concat(jj_parser *p) {
    const jj_node *e = parse_math2(p);
    while (e && accept_op(p, "~")) e = binary(p, OP_CONCAT, e, parse_math2(p));
    return e;
}

static const jj_node *parse_math1(jj_parser *p) {
    const jj_node *e = parse_concat(p);
    for (;;) {
        int op = is_op(p, "+") ? OP_ADD : is_op(p, "-") ? OP_SUB : -1;
        if (op < 0 || !e) return e;
        advance(p);
        e = binary(p, op, e, parse_concat(p));
    }
}

static const jj_node *parse_compare(jj_parser *p) {
    const jj_node *first = parse_math1(p);
    if (!first) return NULL;
    jj_nlist rest = {0};
    uint8_t ops[32];
    size_t n_ops = 0;
    for (;;) {
        int op = is_op(p, "==")     ? OP_EQ
                 : is_op(p, "!=")   ? OP_NE
                 : is_op(p, "<")    ? OP_LT
                 : is_op(p, ">")    ? OP_GT
                 : is_op(p, "<=")   ? OP_LE
                 : is_op(p, ">=")   ? OP_GE
                 : is_name(p, "in") ? OP_IN
                                    : -1;
        if (op < 0 && is_name(p, "not") && p->i + 1 < p->n && p->t[p->i + 1].kind == JT_NAME &&
            !strcmp(p->t[p->i + 1].text, "in")) {
            op = OP_NOT_IN;
            advance(p);
        }
        if (op < 0) break;
        advance(p);
        const jj_node *x = parse_math1(p);
        if (!x || n_ops == 32 || !jj_nl_push(p, &rest, x)) {
            free(rest.v);
            if (x && n_ops == 32) jj_pfail(p, "comparison chain too long");
            return NULL;
        }
        ops[n_ops++] = (uint8_t)op;
    }
    if (!n_ops) return first;
    jj_node *n = jj_pnode(p, N_COMPARE);
    uint8_t *o = pl_arena_alloc(p->arena, n_ops);
    if (!n || !o) {
        free(rest.v);
        return NULL;
    }
    memcpy(o, ops, n_ops);
    n->a = first, n->ops = o;
    n->list = jj_nl_take(p, &rest, &n->n);
    return n;
}

static const jj_node *parse_not(jj_parser *p) {
    if (is_name(p, "not") && !(p->i + 1 < p->n && p->t[p->i + 1].kind == JT_NAME &&
                               !strcmp(p->t[p->i + 1].text, "in"))) {
        advance(p);
        if (!jj_enter(p)) return NULL;
        jj_node *n = jj_pnode(p, N_NOT);
        const jj_node *x = parse_not(p);
        p->depth--;
        if (!n || !x) return NULL;
        n->a = x;
        return n;
    }
    return parse_compare(p);
}

static const jj_node *parse_and(jj_parser *p) {
    const jj_node *e = parse_not(p);
    while (e && accept_name(p, "and")) {
        jj_node *n = jj_pnode(p, N_AND);
        const jj_node *b = parse_not(p);
        if (!n || !b) return NULL;
        n->a = e, n->b = b;
        e = n;
    }
    return e;
}

const jj_node *jj_parse_or(jj_parser *p) {
    const jj_node *e = parse_and(p);
    while (e && accept_name(p, "or")) {
        jj_node *n = jj_pnode(p, N_OR);
        const jj_node *b = parse_and(p);
        if (!n || !b) return NULL;
        n->a = e, n->b = b;
        e = n;
    }
    return e;
}

const jj_node *jj_parse_expr(jj_parser *p) {
    if (!jj_enter(p)) return NULL;
    const jj_node *e = jj_parse_or(p);
    while (e && accept_name(p, "if")) {
        jj_node *n = jj_pnode(p, N_COND);
        const jj_node *cond = jj_parse_or(p), *other = NULL;
        if (!n || !cond) return NULL;
        if (accept_name(p, "else") && !(other = jj_parse_expr(p))) return NULL;
        n->a = e, n->b = cond, n->c = other;
        e = n;
    }
    p->depth--;
    return e;
}
