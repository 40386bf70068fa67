/* jinja_parse.c - tokens to syntax tree, by recursive descent with Jinja2's precedence:
 * conditional < or < and < not < comparisons (== != < > <= >= in, not in) < + - < ~ <
 * * / // % < ** < unary - + < primary with postfix (.attr [item] [a:b:c] (call)), then
 * filters (|f(...)) and tests (is [not] t ...). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

typedef struct {
    const jj_token *t;
    size_t n, i;
    pl_arena *arena;
    int depth;
    char err[200];
} parser;

/* Growable temporary list of node pointers, copied into the arena when done. */
typedef struct {
    const jj_node **v;
    size_t n, cap;
} nlist;

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *p, const char *fmt, ...) {
    if (p->err[0]) return false;
    int off = snprintf(p->err, sizeof p->err, "line %d: ", p->t[p->i < p->n ? p->i : p->n - 1].line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + off, sizeof p->err - (size_t)off, fmt, ap);
    va_end(ap);
    return false;
}

static const jj_token *cur(const parser *p) { return &p->t[p->i]; }
static bool is_op(const parser *p, const char *op) {
    return cur(p)->kind == JT_OP && strcmp(cur(p)->text, op) == 0;
}
static bool is_name(const parser *p, const char *name) {
    return cur(p)->kind == JT_NAME && strcmp(cur(p)->text, name) == 0;
}
static void advance(parser *p) {
    if (p->i + 1 < p->n) p->i++;
}
static bool accept_op(parser *p, const char *op) {
    if (!is_op(p, op)) return false;
    advance(p);
    return true;
}
static bool accept_name(parser *p, const char *name) {
    if (!is_name(p, name)) return false;
    advance(p);
    return true;
}
static bool expect_op(parser *p, const char *op) {
    if (accept_op(p, op)) return true;
    return fail(p, "expected '%s'", op);
}

static jj_node *node(parser *p, int kind) {
    jj_node *n = pl_arena_alloc(p->arena, sizeof *n);
    if (!n) {
        fail(p, "out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = cur(p)->line;
    return n;
}

static bool nl_push(parser *p, nlist *l, const jj_node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        const jj_node **v = realloc(l->v, cap * sizeof *v);
        if (!v) return fail(p, "out of memory");
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

/* Move a temporary list into the arena (frees the temporary). */
static const jj_node **nl_take(parser *p, nlist *l, size_t *n) {
    const jj_node **v = pl_arena_alloc(p->arena, (l->n ? l->n : 1) * sizeof *v);
    if (v && l->n) memcpy(v, l->v, l->n * sizeof *v);
    if (!v) fail(p, "out of memory");
    *n = l->n;
    free(l->v);
    l->v = NULL, l->n = l->cap = 0;
    return v;
}

static const char **names_take(parser *p, const char **tmp, size_t n) {
    const char **v = pl_arena_alloc(p->arena, (n ? n : 1) * sizeof *v);
    if (!v) {
        fail(p, "out of memory");
        return NULL;
    }
    if (n) memcpy(v, tmp, n * sizeof *v);
    return v;
}

static const jj_node *parse_expr(parser *p);
static const jj_node *parse_or(parser *p);
static const jj_node *parse_unary(parser *p, bool with_filter);

static bool enter(parser *p) {
    if (++p->depth > JJ_MAX_NEST) return fail(p, "template nested too deep");
    return true;
}

/* Call arguments after '(' up to ')': positional into args, keywords into kw names/values. */
static bool parse_args(parser *p, jj_node *n) {
    nlist args = {0}, kwv = {0};
    const char *kwn[64];
    size_t nkw = 0;
    while (!is_op(p, ")")) {
        if (cur(p)->kind == JT_NAME && p->i + 1 < p->n && p->t[p->i + 1].kind == JT_OP &&
            strcmp(p->t[p->i + 1].text, "=") == 0) {
            if (nkw == 64) goto bad;
            kwn[nkw++] = cur(p)->text;
            advance(p), advance(p);
            const jj_node *v = parse_expr(p);
            if (!v || !nl_push(p, &kwv, v)) goto bad;
        } else {
            if (nkw) {
                fail(p, "positional argument after a keyword argument");
                goto bad;
            }
            const jj_node *v = parse_expr(p);
            if (!v || !nl_push(p, &args, v)) goto bad;
        }
        if (!accept_op(p, ",")) break;
    }
    if (!expect_op(p, ")")) goto bad;
    n->list = nl_take(p, &args, &n->n);
    n->list2 = nl_take(p, &kwv, &n->n2);
    n->names = names_take(p, kwn, nkw);
    n->n_names = nkw;
    return !p->err[0];
bad:
    free(args.v), free(kwv.v);
    return fail(p, "bad arguments");
}

static const jj_node *literal(parser *p, jv v) {
    jj_node *n = node(p, N_LIT);
    if (n) n->lit = v;
    return n;
}

/* ( expr ), (a, b), () */
static const jj_node *parse_paren(parser *p) {
    advance(p);
    nlist items = {0};
    bool tuple = false;
    while (!is_op(p, ")")) {
        const jj_node *e = parse_expr(p);
        if (!e || !nl_push(p, &items, e)) goto bad;
        if (!accept_op(p, ",")) break;
        tuple = true;
    }
    if (!expect_op(p, ")")) goto bad;
    if (items.n == 1 && !tuple) {
        const jj_node *e = items.v[0];
        free(items.v);
        return e;
    }
    jj_node *n = node(p, N_TUPLE);
    if (!n) goto bad;
    n->list = nl_take(p, &items, &n->n);
    return n;
bad:
    free(items.v);
    return NULL;
}

static const jj_node *parse_primary(parser *p) {
    const jj_token *t = cur(p);
    if (t->kind == JT_NAME) {
        const char *s = t->text;
        advance(p);
        if (!strcmp(s, "true") || !strcmp(s, "True")) return literal(p, jv_bool(true));
        if (!strcmp(s, "false") || !strcmp(s, "False")) return literal(p, jv_bool(false));
        if (!strcmp(s, "none") || !strcmp(s, "None")) return literal(p, jv_none());
        jj_node *n = node(p, N_NAME);
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
        jj_node *n = node(p, N_LIT);
        size_t len = b.len;
        char *s = pl_sb_take(&b, NULL);
        jj_str *js = s ? pl_arena_alloc(p->arena, sizeof *js + len + 1) : NULL;
        if (!n || !js) {
            free(s);
            fail(p, "out of memory");
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
        nlist items = {0};
        while (!is_op(p, "]")) {
            const jj_node *e = parse_expr(p);
            if (!e || !nl_push(p, &items, e)) {
                free(items.v);
                return NULL;
            }
            if (!accept_op(p, ",")) break;
        }
        jj_node *n = node(p, N_LIST);
        if (!expect_op(p, "]") || !n) {
            free(items.v);
            return NULL;
        }
        n->list = nl_take(p, &items, &n->n);
        return n;
    }
    if (is_op(p, "{")) {
        advance(p);
        nlist keys = {0}, vals = {0};
        while (!is_op(p, "}")) {
            const jj_node *k = parse_expr(p);
            if (!k || !expect_op(p, ":")) goto bad_dict;
            const jj_node *v = parse_expr(p);
            if (!v || !nl_push(p, &keys, k) || !nl_push(p, &vals, v)) goto bad_dict;
            if (!accept_op(p, ",")) break;
        }
        jj_node *n = node(p, N_DICT);
        if (!expect_op(p, "}") || !n) goto bad_dict;
        n->list = nl_take(p, &keys, &n->n);
        n->list2 = nl_take(p, &vals, &n->n2);
        return n;
    bad_dict:
        free(keys.v), free(vals.v);
        return NULL;
    }
    fail(p, "unexpected %s", t->kind == JT_OP ? t->text : t->kind == JT_EOF ? "end of template"
                                                      : "token");
    return NULL;
}

static const jj_node *parse_postfix(parser *p, const jj_node *e) {
    while (e) {
        if (accept_op(p, ".")) {
            jj_node *n;
            if (cur(p)->kind == JT_INT) { /* x.0 is x[0] */
                n = node(p, N_ITEM);
                const jj_node *k = literal(p, jv_int(cur(p)->i));
                if (!n || !k) return NULL;
                n->a = e, n->b = k;
                advance(p);
            } else if (cur(p)->kind == JT_NAME) {
                n = node(p, N_ATTR);
                if (!n) return NULL;
                n->a = e, n->str = cur(p)->text, n->len = cur(p)->len;
                advance(p);
            } else {
                fail(p, "expected an attribute name");
                return NULL;
            }
            e = n;
        } else if (accept_op(p, "[")) {
            const jj_node *a = NULL, *b = NULL, *c = NULL;
            bool slice = false;
            if (!is_op(p, ":") && !(a = parse_expr(p))) return NULL;
            if (accept_op(p, ":")) {
                slice = true;
                if (!is_op(p, "]") && !is_op(p, ":") && !(b = parse_expr(p))) return NULL;
                if (accept_op(p, ":") && !is_op(p, "]") && !(c = parse_expr(p))) return NULL;
            }
            if (!expect_op(p, "]")) return NULL;
            jj_node *n = node(p, slice ? N_SLICE : N_ITEM);
            if (!n) return NULL;
            if (slice) n->a = e, n->b = a, n->c = b, n->list = NULL;
            else n->a = e, n->b = a;
            if (slice) { /* the step goes in list[0] to keep a/b/c as object/start/stop */
                const jj_node **st = pl_arena_alloc(p->arena, sizeof *st);
                if (!st) return NULL;
                st[0] = c;
                n->list = st, n->n = 1;
            }
            e = n;
        } else if (accept_op(p, "(")) {
            jj_node *n = node(p, N_CALL);
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
static const jj_node *parse_filters(parser *p, const jj_node *e) {
    while (e) {
        if (accept_op(p, "|")) {
            if (cur(p)->kind != JT_NAME) {
                fail(p, "expected a filter name");
                return NULL;
            }
            jj_node *n = node(p, N_FILTER);
            if (!n) return NULL;
            n->a = e, n->str = cur(p)->text;
            advance(p);
            if (accept_op(p, "(") && !parse_args(p, n)) return NULL;
            e = n;
        } else if (accept_name(p, "is")) {
            jj_node *n = node(p, N_TEST);
            if (!n) return NULL;
            n->op = accept_name(p, "not");
            if (cur(p)->kind != JT_NAME && !(cur(p)->kind == JT_OP && !strcmp(cur(p)->text, "=="))) {
                fail(p, "expected a test name");
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

static const jj_node *parse_unary(parser *p, bool with_filter) {
    if (!enter(p)) return NULL;
    const jj_node *e;
    if (is_op(p, "-") || is_op(p, "+")) {
        bool neg = is_op(p, "-");
        advance(p);
        jj_node *n = node(p, neg ? N_NEG : N_POS);
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

static const jj_node *binary(parser *p, int op, const jj_node *a, const jj_node *b) {
    if (!a || !b) return NULL;
    jj_node *n = node(p, N_BIN);
    if (!n) return NULL;
    n->op = (uint8_t)op, n->a = a, n->b = b;
    return n;
}

static const jj_node *parse_pow(parser *p) {
    const jj_node *e = parse_unary(p, true);
    while (e && accept_op(p, "**")) e = binary(p, OP_POW, e, parse_unary(p, true));
    return e;
}

static const jj_node *parse_math2(parser *p) {
    const jj_node *e = parse_pow(p);
    for (;;) {
        int op = is_op(p, "*") ? OP_MUL : is_op(p, "/") ? OP_DIV : is_op(p, "//") ? OP_FLOORDIV
                                        : is_op(p, "%") ? OP_MOD : -1;
        if (op < 0 || !e) return e;
        advance(p);
        e = binary(p, op, e, parse_pow(p));
    }
}

static const jj_node *parse_concat(parser *p) {
    const jj_node *e = parse_math2(p);
    while (e && accept_op(p, "~")) e = binary(p, OP_CONCAT, e, parse_math2(p));
    return e;
}

static const jj_node *parse_math1(parser *p) {
    const jj_node *e = parse_concat(p);
    for (;;) {
        int op = is_op(p, "+") ? OP_ADD : is_op(p, "-") ? OP_SUB : -1;
        if (op < 0 || !e) return e;
        advance(p);
        e = binary(p, op, e, parse_concat(p));
    }
}

static const jj_node *parse_compare(parser *p) {
    const jj_node *first = parse_math1(p);
    if (!first) return NULL;
    nlist rest = {0};
    uint8_t ops[32];
    size_t n_ops = 0;
    for (;;) {
        int op = is_op(p, "==") ? OP_EQ : is_op(p, "!=") ? OP_NE : is_op(p, "<") ? OP_LT
               : is_op(p, ">") ? OP_GT : is_op(p, "<=") ? OP_LE : is_op(p, ">=") ? OP_GE
               : is_name(p, "in") ? OP_IN : -1;
        if (op < 0 && is_name(p, "not") && p->i + 1 < p->n && p->t[p->i + 1].kind == JT_NAME &&
            !strcmp(p->t[p->i + 1].text, "in")) {
            op = OP_NOT_IN;
            advance(p);
        }
        if (op < 0) break;
        advance(p);
        const jj_node *x = parse_math1(p);
        if (!x || n_ops == 32 || !nl_push(p, &rest, x)) {
            free(rest.v);
            if (x && n_ops == 32) fail(p, "comparison chain too long");
            return NULL;
        }
        ops[n_ops++] = (uint8_t)op;
    }
    if (!n_ops) return first;
    jj_node *n = node(p, N_COMPARE);
    uint8_t *o = pl_arena_alloc(p->arena, n_ops);
    if (!n || !o) {
        free(rest.v);
        return NULL;
    }
    memcpy(o, ops, n_ops);
    n->a = first, n->ops = o;
    n->list = nl_take(p, &rest, &n->n);
    return n;
}

static const jj_node *parse_not(parser *p) {
    if (is_name(p, "not") && !(p->i + 1 < p->n && p->t[p->i + 1].kind == JT_NAME &&
                               !strcmp(p->t[p->i + 1].text, "in"))) {
        advance(p);
        if (!enter(p)) return NULL;
        jj_node *n = node(p, N_NOT);
        const jj_node *x = parse_not(p);
        p->depth--;
        if (!n || !x) return NULL;
        n->a = x;
        return n;
    }
    return parse_compare(p);
}

static const jj_node *parse_and(parser *p) {
    const jj_node *e = parse_not(p);
    while (e && accept_name(p, "and")) {
        jj_node *n = node(p, N_AND);
        const jj_node *b = parse_not(p);
        if (!n || !b) return NULL;
        n->a = e, n->b = b;
        e = n;
    }
    return e;
}

static const jj_node *parse_or(parser *p) {
    const jj_node *e = parse_and(p);
    while (e && accept_name(p, "or")) {
        jj_node *n = node(p, N_OR);
        const jj_node *b = parse_and(p);
        if (!n || !b) return NULL;
        n->a = e, n->b = b;
        e = n;
    }
    return e;
}

static const jj_node *parse_expr(parser *p) {
    if (!enter(p)) return NULL;
    const jj_node *e = parse_or(p);
    while (e && accept_name(p, "if")) {
        jj_node *n = node(p, N_COND);
        const jj_node *cond = parse_or(p), *other = NULL;
        if (!n || !cond) return NULL;
        if (accept_name(p, "else") && !(other = parse_expr(p))) return NULL;
        n->a = e, n->b = cond, n->c = other;
        e = n;
    }
    p->depth--;
    return e;
}

/* ---- statements ---- */

static const jj_node *parse_body(parser *p, const char *const *stops, const char **stopped);

static bool end_block(parser *p) {
    if (cur(p)->kind != JT_BLOCK_END) return fail(p, "expected end of tag, got %s",
                                                   cur(p)->kind == JT_NAME || cur(p)->kind == JT_OP
                                                       ? cur(p)->text : "something else");
    advance(p);
    return true;
}

static const jj_node *parse_if(parser *p) {
    jj_node *n = node(p, N_IF);
    nlist conds = {0}, bodies = {0};
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    const char *stopped = NULL;
    if (!n) return NULL;
    for (;;) {
        const jj_node *c = parse_expr(p);
        if (!c || !end_block(p) || !nl_push(p, &conds, c)) goto bad;
        const jj_node *body = parse_body(p, stops, &stopped);
        if (!body || !nl_push(p, &bodies, body)) goto bad;
        if (!strcmp(stopped, "elif")) continue;
        if (!strcmp(stopped, "else")) {
            static const char *const stops2[] = {"endif", NULL};
            if (!end_block(p)) goto bad;
            body = parse_body(p, stops2, &stopped);
            if (!body || !nl_push(p, &bodies, body)) goto bad;
        }
        break;
    }
    if (!end_block(p)) goto bad;
    n->list = nl_take(p, &conds, &n->n);
    n->list2 = nl_take(p, &bodies, &n->n2);
    return n;
bad:
    free(conds.v), free(bodies.v);
    return NULL;
}

static bool parse_targets(parser *p, const char **names, size_t *n) {
    bool paren = accept_op(p, "(");
    *n = 0;
    do {
        if (cur(p)->kind != JT_NAME || *n == 8) return fail(p, "expected a loop variable");
        names[(*n)++] = cur(p)->text;
        advance(p);
    } while (accept_op(p, ","));
    return !paren || expect_op(p, ")");
}

static const jj_node *parse_for(parser *p) {
    jj_node *n = node(p, N_FOR);
    const char *names[8];
    size_t nn;
    if (!n || !parse_targets(p, names, &nn)) return NULL;
    n->names = names_take(p, names, nn);
    n->n_names = nn;
    if (!accept_name(p, "in")) {
        fail(p, "expected 'in'");
        return NULL;
    }
    n->a = parse_or(p);
    if (!n->a) return NULL;
    if (accept_name(p, "if") && !(n->b = parse_expr(p))) return NULL;
    if (is_name(p, "recursive")) {
        fail(p, "recursive loops are not supported");
        return NULL;
    }
    if (!end_block(p)) return NULL;
    static const char *const stops[] = {"else", "endfor", NULL};
    const char *stopped = NULL;
    const jj_node *body = parse_body(p, stops, &stopped);
    if (!body) return NULL;
    n->c = body;
    if (!strcmp(stopped, "else")) {
        static const char *const stops2[] = {"endfor", NULL};
        if (!end_block(p) || !(n->list2 = pl_arena_alloc(p->arena, sizeof *n->list2))) return NULL;
        const jj_node *eb = parse_body(p, stops2, &stopped);
        if (!eb) return NULL;
        n->list2[0] = eb;
        n->n2 = 1;
    }
    return end_block(p) ? n : NULL;
}

static const jj_node *parse_set(parser *p) {
    if (cur(p)->kind != JT_NAME) {
        fail(p, "expected a name after set");
        return NULL;
    }
    const char *name = cur(p)->text;
    advance(p);
    if (accept_op(p, ".")) {
        jj_node *n = node(p, N_SET_ATTR);
        if (!n || cur(p)->kind != JT_NAME) {
            fail(p, "expected an attribute name");
            return NULL;
        }
        n->str = name;
        const char *attr = cur(p)->text;
        n->names = names_take(p, &attr, 1);
        n->n_names = 1;
        advance(p);
        if (!expect_op(p, "=") || !(n->a = parse_expr(p)) || !end_block(p)) return NULL;
        return n;
    }
    const char *names[8] = {name};
    size_t nn = 1;
    while (accept_op(p, ",")) {
        if (cur(p)->kind != JT_NAME || nn == 8) {
            fail(p, "expected a name");
            return NULL;
        }
        names[nn++] = cur(p)->text;
        advance(p);
    }
    if (nn == 1 && cur(p)->kind == JT_BLOCK_END) { /* {% set x %}...{% endset %} */
        advance(p);
        jj_node *n = node(p, N_SET_BLOCK);
        static const char *const stops[] = {"endset", NULL};
        const char *stopped;
        if (!n || !(n->a = parse_body(p, stops, &stopped)) || !end_block(p)) return NULL;
        n->str = name;
        return n;
    }
    jj_node *n = node(p, N_SET);
    if (!n || !expect_op(p, "=")) return NULL;
    n->names = names_take(p, names, nn);
    n->n_names = nn;
    /* `set a = x, y` makes a tuple */
    const jj_node *e = parse_expr(p);
    if (e && is_op(p, ",")) {
        nlist items = {0};
        nl_push(p, &items, e);
        while (accept_op(p, ",")) {
            const jj_node *x = parse_expr(p);
            if (!x || !nl_push(p, &items, x)) {
                free(items.v);
                return NULL;
            }
        }
        jj_node *t = node(p, N_TUPLE);
        if (!t) {
            free(items.v);
            return NULL;
        }
        t->list = nl_take(p, &items, &t->n);
        e = t;
    }
    if (!(n->a = e) || !end_block(p)) return NULL;
    return n;
}

static const jj_node *parse_macro(parser *p) {
    jj_node *n = node(p, N_MACRO);
    if (!n || cur(p)->kind != JT_NAME) {
        fail(p, "expected a macro name");
        return NULL;
    }
    n->str = cur(p)->text;
    advance(p);
    if (!expect_op(p, "(")) return NULL;
    const char *params[32];
    nlist defaults = {0};
    size_t np = 0;
    while (!is_op(p, ")")) {
        if (cur(p)->kind != JT_NAME || np == 32) {
            free(defaults.v);
            fail(p, "expected a parameter name");
            return NULL;
        }
        params[np++] = cur(p)->text;
        advance(p);
        const jj_node *d = NULL;
        if (accept_op(p, "=") && !(d = parse_expr(p))) {
            free(defaults.v);
            return NULL;
        }
        if (!nl_push(p, &defaults, d)) return NULL;
        if (!accept_op(p, ",")) break;
    }
    if (!expect_op(p, ")") || !end_block(p)) {
        free(defaults.v);
        return NULL;
    }
    n->names = names_take(p, params, np);
    n->n_names = np;
    n->list = nl_take(p, &defaults, &n->n);
    static const char *const stops[] = {"endmacro", NULL};
    const char *stopped;
    if (!(n->a = parse_body(p, stops, &stopped))) return NULL;
    if (cur(p)->kind == JT_NAME) advance(p); /* {% endmacro name %} */
    return end_block(p) ? n : NULL;
}

/* A statement after its keyword's BLOCK_BEGIN. */
static const jj_node *parse_statement(parser *p) {
    if (cur(p)->kind != JT_NAME) {
        fail(p, "expected a statement");
        return NULL;
    }
    const char *kw = cur(p)->text;
    advance(p);
    if (!strcmp(kw, "if")) return parse_if(p);
    if (!strcmp(kw, "for")) return parse_for(p);
    if (!strcmp(kw, "set")) return parse_set(p);
    if (!strcmp(kw, "macro")) return parse_macro(p);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        jj_node *n = node(p, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        return n && end_block(p) ? n : NULL;
    }
    if (!strcmp(kw, "generation")) { /* transformers' marker for assistant text: renders as is */
        static const char *const stops[] = {"endgeneration", NULL};
        const char *stopped;
        if (!end_block(p)) return NULL;
        const jj_node *b = parse_body(p, stops, &stopped);
        return b && end_block(p) ? b : NULL;
    }
    if (!strcmp(kw, "call")) { /* {% call macro(args) %}body{% endcall %}: body is caller() */
        jj_node *n = node(p, N_CALL_BLOCK);
        if (!n) return NULL;
        const jj_node *call = parse_expr(p);
        if (!call || call->kind != N_CALL || !end_block(p)) {
            fail(p, "expected a macro call");
            return NULL;
        }
        static const char *const stops[] = {"endcall", NULL};
        const char *stopped;
        n->a = call;
        /* the body becomes a macro without parameters, bound as `caller` in the callee */
        jj_node *m = node(p, N_MACRO);
        if (!m || !(m->a = parse_body(p, stops, &stopped))) return NULL;
        m->str = "caller";
        n->c = m;
        return end_block(p) ? n : NULL;
    }
    fail(p, "unsupported statement '%s'", kw);
    return NULL;
}

/* Statements until a block whose keyword is in stops (left with that keyword consumed; its
 * name in *stopped) or the end of the template (stops must then be NULL). */
static const jj_node *parse_body(parser *p, const char *const *stops, const char **stopped) {
    if (!enter(p)) return NULL;
    jj_node *body = node(p, N_BODY);
    nlist items = {0};
    if (!body) return NULL;
    for (;;) {
        const jj_token *t = cur(p);
        const jj_node *s = NULL;
        if (t->kind == JT_EOF) {
            if (stops) {
                fail(p, "missing {%% %s %%}", stops[0]);
                goto bad;
            }
            break;
        }
        if (t->kind == JT_TEXT) {
            jj_node *n = node(p, N_TEXT);
            if (!n) goto bad;
            n->str = t->text, n->len = t->len;
            advance(p);
            s = n;
        } else if (t->kind == JT_VAR_BEGIN) {
            advance(p);
            jj_node *n = node(p, N_OUT);
            if (!n || !(n->a = parse_expr(p))) goto bad;
            if (cur(p)->kind != JT_VAR_END) {
                fail(p, "expected }}");
                goto bad;
            }
            advance(p);
            s = n;
        } else if (t->kind == JT_BLOCK_BEGIN) {
            advance(p);
            for (size_t k = 0; stops && stops[k]; k++) {
                if (is_name(p, stops[k])) {
                    *stopped = stops[k];
                    advance(p);
                    body->list = nl_take(p, &items, &body->n);
                    p->depth--;
                    return p->err[0] ? NULL : body;
                }
            }
            if (!(s = parse_statement(p))) goto bad;
        } else {
            fail(p, "unexpected token");
            goto bad;
        }
        if (!nl_push(p, &items, s)) goto bad;
    }
    body->list = nl_take(p, &items, &body->n);
    p->depth--;
    return p->err[0] ? NULL : body;
bad:
    free(items.v);
    return NULL;
}

/* The depth of the whole tree, walked without recursion: long chains such as a+b+c+...
 * parse in a loop but would make evaluation recurse as deep as they are long. */
static bool depth_ok(const jj_node *root, size_t limit) {
    typedef struct {
        const jj_node *n;
        size_t depth;
    } item;
    size_t cap = 256, sp = 0;
    item *stack = malloc(cap * sizeof *stack);
    if (!stack) return false;
    stack[sp++] = (item){root, 1};
    bool ok = true;
    while (sp && ok) {
        item it = stack[--sp];
        if (it.depth > limit) {
            ok = false;
            break;
        }
        const jj_node *n = it.n;
        size_t kids = 3 + n->n + n->n2;
        if (sp + kids > cap) {
            while (sp + kids > cap) cap *= 2;
            item *v = realloc(stack, cap * sizeof *v);
            if (!v) {
                ok = false;
                break;
            }
            stack = v;
        }
        const jj_node *abc[3] = {n->a, n->b, n->c};
        for (int k = 0; k < 3; k++)
            if (abc[k]) stack[sp++] = (item){abc[k], it.depth + 1};
        for (size_t k = 0; k < n->n; k++)
            if (n->list[k]) stack[sp++] = (item){n->list[k], it.depth + 1};
        for (size_t k = 0; k < n->n2; k++)
            if (n->list2[k]) stack[sp++] = (item){n->list2[k], it.depth + 1};
    }
    free(stack);
    return ok;
}

pl_status jj_parse(const jj_tokens *toks, pl_arena *arena, const jj_node **root) {
    parser p = {.t = toks->v, .n = toks->n, .arena = arena};
    *root = parse_body(&p, NULL, NULL);
    if (!*root) return pl_fail(PL_ERR_FORMAT, "template: %s", p.err[0] ? p.err : "parse error");
    if (!depth_ok(*root, JJ_MAX_TREE_DEPTH))
        return pl_fail(PL_ERR_FORMAT, "template: expressions or blocks nested too deep");
    return PL_OK;
}
