/* jinja_parser.h - the parser state and helpers shared by the expression parser
 * (jinja_parse.c) and the statement parser (jinja_stmt.c). */
#ifndef PL_TOKENIZER_JINJA_PARSER_H
#define PL_TOKENIZER_JINJA_PARSER_H

#include <string.h>

#include "jinja_internal.h"

typedef struct {
    const jj_token *t;
    size_t n, i;
    pl_arena *arena;
    int depth;
    char err[200];
} jj_parser;

/* Growable temporary list of node pointers, copied into the arena when done. */
typedef struct {
    const jj_node **v;
    size_t n, cap;
} jj_nlist;

static inline const jj_token *cur(const jj_parser *p) {
    return &p->t[p->i];
}
static inline bool is_op(const jj_parser *p, const char *op) {
    return cur(p)->kind == JT_OP && strcmp(cur(p)->text, op) == 0;
}
static inline bool is_name(const jj_parser *p, const char *name) {
    return cur(p)->kind == JT_NAME && strcmp(cur(p)->text, name) == 0;
}
static inline void advance(jj_parser *p) {
    if (p->i + 1 < p->n) p->i++;
}
static inline bool accept_op(jj_parser *p, const char *op) {
    if (!is_op(p, op)) return false;
    advance(p);
    return true;
}
static inline bool accept_name(jj_parser *p, const char *name) {
    if (!is_name(p, name)) return false;
    advance(p);
    return true;
}

/* Record the first error (with its line) and return false. */
bool jj_pfail(jj_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool jj_expect_op(jj_parser *p, const char *op);
/* A zeroed node in the arena (NULL, error set, when out of memory). */
jj_node *jj_pnode(jj_parser *p, int kind);
bool jj_nl_push(jj_parser *p, jj_nlist *l, const jj_node *x);
/* Move a temporary list into the arena (frees the temporary). */
const jj_node **jj_nl_take(jj_parser *p, jj_nlist *l, size_t *n);
const char **jj_names_take(jj_parser *p, const char **tmp, size_t n);
/* Count one level of nesting; false (error set) past JJ_MAX_NEST. */
bool jj_enter(jj_parser *p);

/* Expressions (jinja_parse.c): a whole expression, and one without the conditional. */
const jj_node *jj_parse_expr(jj_parser *p);
const jj_node *jj_parse_or(jj_parser *p);

#endif
