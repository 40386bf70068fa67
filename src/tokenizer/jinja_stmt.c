/* jinja_stmt.c - template statements to syntax tree: text, {{ }}, if/elif/else, for (targets,
 * filter, else), set (names, namespace attributes, blocks), macro, call, break/continue,
 * generation; and the entry point with its check of the tree's depth. */
#include <stdlib.h>
#include <string.h>

#include "jinja_parser.h"

static const jj_node *parse_body(jj_parser *p, const char *const *stops, const char **stopped);

static bool end_block(jj_parser *p) {
    if (cur(p)->kind != JT_BLOCK_END)
        return jj_pfail(p, "expected end of tag, got %s",
                        cur(p)->kind == JT_NAME || cur(p)->kind == JT_OP ? cur(p)->text
                                                                         : "something else");
    advance(p);
    return true;
}

static const jj_node *parse_if(jj_parser *p) {
    jj_node *n = jj_pnode(p, N_IF);
    jj_nlist conds = {0}, bodies = {0};
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    const char *stopped = NULL;
    if (!n) return NULL;
    for (;;) {
        const jj_node *c = jj_parse_expr(p);
        if (!c || !end_block(p) || !jj_nl_push(p, &conds, c)) goto bad;
        const jj_node *body = parse_body(p, stops, &stopped);
        if (!body || !jj_nl_push(p, &bodies, body)) goto bad;
        if (!strcmp(stopped, "elif")) continue;
        if (!strcmp(stopped, "else")) {
            static const char *const stops2[] = {"endif", NULL};
            if (!end_block(p)) goto bad;
            body = parse_body(p, stops2, &stopped);
            if (!body || !jj_nl_push(p, &bodies, body)) goto bad;
        }
        break;
    }
    if (!end_block(p)) goto bad;
    n->list = jj_nl_take(p, &conds, &n->n);
    n->list2 = jj_nl_take(p, &bodies, &n->n2);
    return n;
bad:
    free(conds.v), free(bodies.v);
    return NULL;
}

static bool parse_targets(jj_parser *p, const char **names, size_t *n) {
    bool paren = accept_op(p, "(");
    *n = 0;
    do {
        if (cur(p)->kind != JT_NAME || *n == 8) return jj_pfail(p, "expected a loop variable");
        names[(*n)++] = cur(p)->text;
        advance(p);
    } while (accept_op(p, ","));
    return !paren || jj_expect_op(p, ")");
}

static const jj_node *parse_for(jj_parser *p) {
    jj_node *n = jj_pnode(p, N_FOR);
    const char *names[8];
    size_t nn;
    if (!n || !parse_targets(p, names, &nn)) return NULL;
    n->names = jj_names_take(p, names, nn);
    n->n_names = nn;
    if (!accept_name(p, "in")) {
        jj_pfail(p, "expected 'in'");
        return NULL;
    }
    n->a = jj_parse_or(p);
    if (!n->a) return NULL;
    if (accept_name(p, "if") && !(n->b = jj_parse_expr(p))) return NULL;
    if (is_name(p, "recursive")) {
        jj_pfail(p, "recursive loops are not supported");
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

static const jj_node *parse_set(jj_parser *p) {
    if (cur(p)->kind != JT_NAME) {
        jj_pfail(p, "expected a name after set");
        return NULL;
    }
    const char *name = cur(p)->text;
    advance(p);
    if (accept_op(p, ".")) {
        jj_node *n = jj_pnode(p, N_SET_ATTR);
        if (!n || cur(p)->kind != JT_NAME) {
            jj_pfail(p, "expected an attribute name");
            return NULL;
        }
        n->str = name;
        const char *attr = cur(p)->text;
        n->names = jj_names_take(p, &attr, 1);
        n->n_names = 1;
        advance(p);
        if (!jj_expect_op(p, "=") || !(n->a = jj_parse_expr(p)) || !end_block(p)) return NULL;
        return n;
    }
    const char *names[8] = {name};
    size_t nn = 1;
    while (accept_op(p, ",")) {
        if (cur(p)->kind != JT_NAME || nn == 8) {
            jj_pfail(p, "expected a name");
            return NULL;
        }
        names[nn++] = cur(p)->text;
        advance(p);
    }
    if (nn == 1 && cur(p)->kind == JT_BLOCK_END) { /* {% set x %}...{% endset %} */
        advance(p);
        jj_node *n = jj_pnode(p, N_SET_BLOCK);
        static const char *const stops[] = {"endset", NULL};
        const char *stopped;
        if (!n || !(n->a = parse_body(p, stops, &stopped)) || !end_block(p)) return NULL;
        n->str = name;
        return n;
    }
    jj_node *n = jj_pnode(p, N_SET);
    if (!n || !jj_expect_op(p, "=")) return NULL;
    n->names = jj_names_take(p, names, nn);
    n->n_names = nn;
    /* `set a = x, y` makes a tuple */
    const jj_node *e = jj_parse_expr(p);
    if (e && is_op(p, ",")) {
        jj_nlist items = {0};
        jj_nl_push(p, &items, e);
        while (accept_op(p, ",")) {
            const jj_node *x = jj_parse_expr(p);
            if (!x || !jj_nl_push(p, &items, x)) {
                free(items.v);
                return NULL;
            }
        }
        jj_node *t = jj_pnode(p, N_TUPLE);
        if (!t) {
            free(items.v);
            return NULL;
        }
        t->list = jj_nl_take(p, &items, &t->n);
        e = t;
    }
    if (!(n->a = e) || !end_block(p)) return NULL;
    return n;
}

static const jj_node *parse_macro(jj_parser *p) {
    jj_node *n = jj_pnode(p, N_MACRO);
    if (!n || cur(p)->kind != JT_NAME) {
        jj_pfail(p, "expected a macro name");
        return NULL;
    }
    n->str = cur(p)->text;
    advance(p);
    if (!jj_expect_op(p, "(")) return NULL;
    const char *params[32];
    jj_nlist defaults = {0};
    size_t np = 0;
    while (!is_op(p, ")")) {
        if (cur(p)->kind != JT_NAME || np == 32) {
            free(defaults.v);
            jj_pfail(p, "expected a parameter name");
            return NULL;
        }
        params[np++] = cur(p)->text;
        advance(p);
        const jj_node *d = NULL;
        if (accept_op(p, "=") && !(d = jj_parse_expr(p))) {
            free(defaults.v);
            return NULL;
        }
        if (!jj_nl_push(p, &defaults, d)) return NULL;
        if (!accept_op(p, ",")) break;
    }
    if (!jj_expect_op(p, ")") || !end_block(p)) {
        free(defaults.v);
        return NULL;
    }
    n->names = jj_names_take(p, params, np);
    n->n_names = np;
    n->list = jj_nl_take(p, &defaults, &n->n);
    static const char *const stops[] = {"endmacro", NULL};
    const char *stopped;
    if (!(n->a = parse_body(p, stops, &stopped))) return NULL;
    if (cur(p)->kind == JT_NAME) advance(p); /* {% endmacro name %} */
    return end_block(p) ? n : NULL;
}

/* A statement after its keyword's BLOCK_BEGIN. */
static const jj_node *parse_statement(jj_parser *p) {
    if (cur(p)->kind != JT_NAME) {
        jj_pfail(p, "expected a statement");
        return NULL;
    }
    const char *kw = cur(p)->text;
    advance(p);
    if (!strcmp(kw, "if")) return parse_if(p);
    if (!strcmp(kw, "for")) return parse_for(p);
    if (!strcmp(kw, "set")) return parse_set(p);
    if (!strcmp(kw, "macro")) return parse_macro(p);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        jj_node *n = jj_pnode(p, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
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
        jj_node *n = jj_pnode(p, N_CALL_BLOCK);
        if (!n) return NULL;
        const jj_node *call = jj_parse_expr(p);
        if (!call || call->kind != N_CALL || !end_block(p)) {
            jj_pfail(p, "expected a macro call");
            return NULL;
        }
        static const char *const stops[] = {"endcall", NULL};
        const char *stopped;
        n->a = call;
        /* the body becomes a macro without parameters, bound as `caller` in the callee */
        jj_node *m = jj_pnode(p, N_MACRO);
        if (!m || !(m->a = parse_body(p, stops, &stopped))) return NULL;
        m->str = "caller";
        n->c = m;
        return end_block(p) ? n : NULL;
    }
    jj_pfail(p, "unsupported statement '%s'", kw);
    return NULL;
}

/* Statements until a block whose keyword is in stops (left with that keyword consumed; its
 * name in *stopped) or the end of the template (stops must then be NULL). */
static const jj_node *parse_body(jj_parser *p, const char *const *stops, const char **stopped) {
    if (!jj_enter(p)) return NULL;
    jj_node *body = jj_pnode(p, N_BODY);
    jj_nlist items = {0};
    if (!body) return NULL;
    for (;;) {
        const jj_token *t = cur(p);
        const jj_node *s = NULL;
        if (t->kind == JT_EOF) {
            if (stops) {
                jj_pfail(p, "missing {%% %s %%}", stops[0]);
                goto bad;
            }
            break;
        }
        if (t->kind == JT_TEXT) {
            jj_node *n = jj_pnode(p, N_TEXT);
            if (!n) goto bad;
            n->str = t->text, n->len = t->len;
            advance(p);
            s = n;
        } else if (t->kind == JT_VAR_BEGIN) {
            advance(p);
            jj_node *n = jj_pnode(p, N_OUT);
            if (!n || !(n->a = jj_parse_expr(p))) goto bad;
            if (cur(p)->kind != JT_VAR_END) {
                jj_pfail(p, "expected }}");
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
                    body->list = jj_nl_take(p, &items, &body->n);
                    p->depth--;
                    return p->err[0] ? NULL : body;
                }
            }
            if (!(s = parse_statement(p))) goto bad;
        } else {
            jj_pfail(p, "unexpected token");
            goto bad;
        }
        if (!jj_nl_push(p, &items, s)) goto bad;
    }
    body->list = jj_nl_take(p, &items, &body->n);
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
    jj_parser p = {.t = toks->v, .n = toks->n, .arena = arena};
    *root = parse_body(&p, NULL, NULL);
    /* an error recorded on the way fails the parse even if a tree came back (a list taken
     * when out of memory is NULL); the only failures that record nothing are allocations */
    if (!*root || p.err[0])
        return pl_fail(PL_ERR_FORMAT, "template: %s", p.err[0] ? p.err : "out of memory");
    if (!depth_ok(*root, JJ_MAX_TREE_DEPTH))
        return pl_fail(PL_ERR_FORMAT, "template: expressions or blocks nested too deep");
    return PL_OK;
}
