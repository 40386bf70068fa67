/* jinja_internal.h - the Jinja interpreter's insides (jinja_*.c only): tokens, the syntax
 * tree, values, and the render state. */
#ifndef PL_TOKENIZER_JINJA_INTERNAL_H
#define PL_TOKENIZER_JINJA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/arena.h"
#include "../base/strbuf.h"
#include "jinja.h"

/* ---- limits ---- */
#define JJ_MAX_NEST        200          /* statement and expression nesting while parsing */
#define JJ_MAX_TREE_DEPTH  600          /* depth of the syntax tree (long operator chains too) */
#define JJ_MAX_CALL_DEPTH  64           /* macro calls inside macro calls */
#define JJ_MAX_EVAL_DEPTH  1500         /* nested evaluations at run time (bounds the C stack) */
#define JJ_MAX_STEPS       5000000      /* expression evaluations and loop iterations per render */
#define JJ_MAX_OUTPUT      (16u << 20)  /* bytes of rendered text */
#define JJ_MAX_MEMORY      (256u << 20) /* bytes of values made while rendering */
#define JJ_MAX_WORK        (1ll << 25)  /* items compared, bytes searched (/16) per render */
#define JJ_MAX_RANGE       1000000      /* items of one range() */
#define JJ_MAX_VALUE_DEPTH 200          /* lists/dicts inside each other when comparing */
/* Every string built while rendering (str(), ~, joins, filters) is capped like the output. */
#define JJ_SB                                                                                      \
    { .max = JJ_MAX_OUTPUT }

/* ---- tokens ---- */

typedef enum {
    JT_TEXT,      /* template text between tags (whitespace control already applied) */
    JT_VAR_BEGIN, /* {{ */
    JT_VAR_END,   /* }} */
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING, /* text holds the decoded string */
    JT_INT,
    JT_FLOAT,
    JT_OP, /* text holds the operator: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : | */
    JT_EOF,
} jj_tok_kind;

typedef struct {
    jj_tok_kind kind;
    const char *text; /* arena copy, NUL-terminated */
    size_t len;
    int64_t i;
    double f;
    int line;
} jj_token;

typedef struct {
    jj_token *v;
    size_t n, cap;
} jj_tokens;

pl_status jj_lex(const char *src, size_t len, pl_arena *arena, jj_tokens *out);

/* ---- values ---- */

typedef enum {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_MACRO,
    JV_FUNC,   /* a global function (range, namespace, ...) */
    JV_METHOD, /* a method bound to its receiver (s.split, d.items, ...) */
    JV_LOOP,   /* the loop variable */
} jv_type;

typedef struct jj_str jj_str;
typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_node jj_node;
typedef struct jj_loop jj_loop;
typedef struct jv jv;

struct jv {
    uint8_t type;
    union {
        bool b;
        int64_t i;
        double f;
        const jj_str *s;
        const jj_list *l;
        jj_dict *d;
        const jj_node *macro;
        int func;
        struct {
            int id;
            const jv *recv;
        } method;
        const jj_loop *loop;
    };
};

struct jj_str {
    size_t len;
    char s[]; /* NUL-terminated */
};

struct jj_list {
    size_t n;
    bool tuple; /* only changes how it prints: (a, b) */
    jv items[];
};

struct jj_dict {
    size_t n, cap;
    jv *keys, *vals;
    bool is_namespace; /* the only mutable values: {% set ns.x = ... %} */
};

struct jj_loop {
    const jj_list *items;
    size_t index; /* 0-based */
};

/* ---- syntax tree ---- */

typedef enum {
    /* expressions */
    N_LIT,
    N_NAME,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NEG,
    N_POS,
    N_NOT,
    N_BIN,
    N_AND,
    N_OR,
    N_COMPARE,
    N_COND,
    N_LIST,
    N_TUPLE,
    N_DICT,
    /* statements */
    N_TEXT,
    N_OUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SET_ATTR,
    N_SET_BLOCK,
    N_MACRO,
    N_BREAK,
    N_CONTINUE,
    N_BODY,
    N_CALL_BLOCK,
} jj_node_kind;

/* binary operators of N_BIN and N_COMPARE */
enum {
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_CONCAT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
    OP_IN,
    OP_NOT_IN
};

struct jj_node {
    uint8_t kind;
    uint8_t op; /* N_BIN/N_COMPARE op; N_TEST: negated */
    int line;
    const jj_node *a, *b, *c; /* operands / condition / iterable / slice parts */
    const jj_node **list;     /* arguments, items, body statements, compare operands */
    size_t n;
    const jj_node **list2; /* keyword values, else body, dict values, compare ops... */
    size_t n2;
    const char **names; /* keyword names, loop targets, macro parameters */
    size_t n_names;
    const char *str; /* name, attribute, filter/test name, text */
    size_t len;
    jv lit;       /* N_LIT */
    uint8_t *ops; /* N_COMPARE: the operator before each further operand */
};

struct pl_jinja {
    pl_arena arena;
    const jj_node *root; /* N_BODY */
};

pl_status jj_parse(const jj_tokens *toks, pl_arena *arena, const jj_node **root);

/* ---- rendering ---- */

typedef struct jj_frame jj_frame;
struct jj_frame {
    jj_frame *parent;
    jj_dict vars;
};

typedef struct {
    pl_arena arena; /* every value made while rendering */
    pl_strbuf out;
    jj_frame *root; /* the template's top level (its parent holds the context) */
    int64_t steps;
    int64_t work; /* see jj_work */
    int depth;    /* macro calls */
    int eval_depth;
    int loop_ctl;   /* 1 = break, 2 = continue pending */
    size_t emitted; /* bytes of text rendered, into any buffer (capped by JJ_MAX_OUTPUT) */
    char err[256];
    bool failed;
} jj_state;

/* Record an error (first one wins) and return false. */
bool jj_fail(jj_state *st, const jj_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Charge n units of work (items or bytes compared or searched) to the render: false, with
 * the error set, past JJ_MAX_WORK or once the render has failed. st may be NULL. */
bool jj_work(jj_state *st, size_t n);
/* The text built in b as a string value, b freed; JV_UNDEF with the error set when b failed
 * (out of memory, or past JJ_MAX_OUTPUT). */
jv jj_sb_value(jj_state *st, pl_strbuf *b);

/* Values (jinja_value.c). */
jv jv_undef(void);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(jj_state *st, const char *s, size_t n); /* JV_UNDEF if out of memory (st failed) */
jv jv_str0(jj_state *st, const char *s);
jj_list *jv_list_new(jj_state *st, size_t n); /* items to fill; NULL if out of memory */
jj_dict *jv_dict_new(jj_state *st);
bool jv_dict_set(jj_state *st, jj_dict *d, jv key, jv val);
bool jv_dict_append(jj_state *st, jj_dict *d, jv key, jv val); /* no check for the key */
const jv *jv_dict_get(const jj_dict *d, const char *key, size_t len);
/* Equality and order walk the values, charged to st (may be NULL); they answer false once
 * st has failed (deep values, too much work), so callers check st->failed. */
const jv *jv_dict_find(jj_state *st, const jj_dict *d, jv key);
bool jv_truthy(jv v);
bool jv_equal(jj_state *st, jv a, jv b);
/* -1, 0, 1; false if the values cannot be ordered */
bool jv_compare(jj_state *st, jv a, jv b, int *cmp);
/* Stable merge sort of v[0..n), tmp: room for n more. cmp(ctx, a, b, &c) sets c < 0, 0,
 * > 0 or returns false (then the sort stops and returns false). n log n comparisons. */
bool jv_sort(jv *v, jv *tmp, size_t n, bool (*cmp)(void *ctx, jv a, jv b, int *c), void *ctx);
/* Python's str() into b (strings as they are, lists/dicts as repr). */
void jv_to_str(pl_strbuf *b, jv v);
/* Python's repr(). */
void jv_repr(pl_strbuf *b, jv v);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: none), sort_keys) into b. */
bool jv_to_json(pl_strbuf *b, jv v, int indent, bool sort_keys, int depth);
/* str(v) as a string value. */
jv jv_stringify(jj_state *st, jv v);
const char *jv_type_name(jv v);
/* Python float formatting (repr). */
void jv_format_float(pl_strbuf *b, double f);
/* The items of an iterable (list; dict keys; string characters) as a list. */
const jj_list *jv_iter_list(jj_state *st, jv v);
jv jv_from_json(jj_state *st, const pl_json *j);

/* Builtins (jinja_builtins.c). */
bool jj_filter(jj_state *st, const jj_node *at, const char *name, jv in, const jv *args, size_t n,
               const char **kwn, const jv *kwv, size_t nkw, jv *out);
bool jj_test(jj_state *st, const jj_node *at, const char *name, jv in, const jv *args, size_t n,
             bool *out);
/* Attribute that is a method of the value (s.split, d.items, ...); false if none. */
bool jj_method_lookup(jj_state *st, jv recv, const char *name, jv *out);
bool jj_call_builtin(jj_state *st, const jj_node *at, jv fn, const jv *args, size_t n,
                     const char **kwn, const jv *kwv, size_t nkw, jv *out);
/* Global functions by name (range, namespace, raise_exception, ...); false if none. */
bool jj_global_lookup(const char *name, jv *out);

/* Evaluation entry used by builtins that call back (map/select with tests). */
bool jj_eval(jj_state *st, const jj_node *n, jj_frame *f, jv *out);

#endif
