/* grammar.c - JSON Schema to schema nodes, and the byte matcher that walks them (the
 * rules of what is generated are in grammar.h).
 *
 * A configuration is a stack of frames, one per value being written (the innermost on
 * top). A frame starts as START (a value of its node, not begun) and becomes the machine
 * its first byte picks: OBJ, ARR, STR, NUM, LIT (enum / const / true / false / null) or KEY
 * (a declared property name, matched against the object's sorted keys). Numbers and
 * literals end lazily: a byte that cannot continue them pops them and goes to the parent.
 * anyOf forks one configuration per alternative when its value begins. */
#include "grammar.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { K_ANY, K_OBJECT, K_ARRAY, K_STRING, K_NUMBER, K_INTEGER, K_LIT, K_ANYOF, K_WRAP };

typedef struct {
    uint8_t kind;
    uint32_t n, first; /* OBJECT: props[first..+n); LIT: lits[first..+n); ANYOF: alts[..];
                          WRAP: the lits of the prefix (first) and the suffix (n) */
    int32_t sub;       /* ARRAY: items; OBJECT: additionalProperties (-1: none); WRAP: value */
    uint32_t min, max; /* ARRAY: minItems, maxItems */
} gnode;

typedef struct {
    uint32_t off, len; /* in bytes */
} glit;

typedef struct {
    uint32_t key; /* lits index of the quoted name */
    int32_t node;
    bool required;
} gprop;

struct pl_grammar {
    gnode *nodes;
    int n_nodes, cap_nodes;
    glit *lits;
    uint32_t n_lits, cap_lits;
    gprop *props;
    uint32_t *korder; /* per object: prop numbers in the order of their sorted keys */
    uint32_t n_props, cap_props;
    uint32_t *alts;
    uint32_t n_alts, cap_alts;
    pl_strbuf bytes;
    int root;
};

/* built-in nodes */
enum { N_ANY = 0, N_STR = 1, N_WORDS = 2, N_NUM = 3, N_BUILTIN = 4 };

enum { M_START, M_OBJ, M_ARR, M_STR, M_NUM, M_LIT, M_KEY, M_WRAP };
enum { WX_PREFIX, WX_VALUE_NEXT, WX_VALUE, WX_SUFFIX };
enum { OX_OPEN, OX_KEY, OX_COLON, OX_AFTER_COLON, OX_VAL, OX_NEXT, OX_COMMA };
enum { AX_OPEN, AX_VAL, AX_NEXT, AX_COMMA };
enum { S_BODY, S_ESC, S_HEX, S_UTF };
enum { NX_MINUS, NX_ZERO, NX_INT, NX_DOT, NX_FRAC, NX_E, NX_ESIGN, NX_EXP };

#define MAX_INT_DIGITS  15
#define MAX_FRAC_DIGITS 15
#define MAX_EXP_DIGITS  2

typedef struct {
    uint16_t node;
    uint8_t mode, x;
    uint16_t a, b, c, pad;
} gframe;

typedef struct {
    uint8_t depth;
    gframe f[PL_GRAMMAR_MAX_FRAMES];
} gcfg;

#define CFG_BYTES(d) (offsetof(gcfg, f) + (size_t)(d) * sizeof(gframe))
#define SET_BYTES    (PL_GRAMMAR_MAX_CONFIGS * CFG_BYTES(PL_GRAMMAR_MAX_FRAMES))

size_t pl_gset_max_bytes(void) {
    return SET_BYTES;
}

/* ---- building ---- */

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static int new_node(pl_grammar *g, gnode n) {
    if (g->n_nodes >= PL_GRAMMAR_MAX_NODES) return -1;
    uint32_t cap = (uint32_t)g->cap_nodes;
    if (!grow((void **)&g->nodes, &cap, (uint32_t)g->n_nodes + 1, sizeof *g->nodes)) return -2;
    g->cap_nodes = (int)cap;
    g->nodes[g->n_nodes] = n;
    return g->n_nodes++;
}

static const uint8_t *lit_bytes(const pl_grammar *g, uint32_t i) {
    return (const uint8_t *)g->bytes.s + g->lits[i].off;
}

/* A literal set: the texts texts[0..n), sorted and without duplicates. */
typedef struct {
    char *s;
    size_t len;
} text;

static int cmp_text(const void *a, const void *b) {
    const text *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static pl_status add_lits(pl_grammar *g, text *t, size_t n, uint32_t *first, uint32_t *count) {
    qsort(t, n, sizeof *t, cmp_text);
    *first = g->n_lits;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && !cmp_text(&t[i - 1], &t[i])) continue;
        if (g->bytes.len + t[i].len > PL_GRAMMAR_MAX_LITERALS)
            return pl_fail(PL_ERR_ARG, "schema: enum, const and property names exceed %d bytes",
                           PL_GRAMMAR_MAX_LITERALS);
        if (!grow((void **)&g->lits, &g->cap_lits, g->n_lits + 1, sizeof *g->lits))
            return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
        g->lits[g->n_lits++] = (glit){(uint32_t)g->bytes.len, (uint32_t)t[i].len};
        pl_sb_append(&g->bytes, t[i].s, t[i].len);
        if (g->bytes.failed) return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
        (*count)++;
    }
    return PL_OK;
}

static void free_texts(text *t, size_t n) {
    for (size_t i = 0; i < n; i++) free(t[i].s);
    free(t);
}

static bool finite_json(const pl_json *v) {
    if (v->type == PL_JSON_NUMBER) return isfinite(v->n.num);
    for (size_t i = 0; v->type == PL_JSON_ARRAY && i < v->arr.count; i++)
        if (!finite_json(v->arr.items[i])) return false;
    for (size_t i = 0; v->type == PL_JSON_OBJECT && i < v->obj.count; i++)
        if (!finite_json(v->obj.vals[i])) return false;
    return true;
}

/* A LIT node for the JSON values vals[0..n) written compactly. */
static pl_status lit_node(pl_grammar *g, const pl_json *const *vals, size_t n, int *out) {
    text *t = calloc(n ? n : 1, sizeof *t);
    if (!t) return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
    for (size_t i = 0; i < n; i++) {
        pl_strbuf b = {0};
        pl_json_write(&b, vals[i]);
        if (b.failed) {
            pl_sb_free(&b);
            free_texts(t, n);
            return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
        }
        t[i].s = pl_sb_take(&b, &t[i].len);
        if (!t[i].s || !finite_json(vals[i])) { /* a literal is never inf or nan */
            free_texts(t, n);
            return pl_fail(PL_ERR_ARG, "schema: an enum or const value is not finite JSON");
        }
    }
    gnode nd = {.kind = K_LIT, .sub = -1};
    pl_status st = add_lits(g, t, n, &nd.first, &nd.n);
    free_texts(t, n);
    if (st) return st;
    int id = new_node(g, nd);
    if (id < 0)
        return id == -1
                   ? pl_fail(PL_ERR_ARG, "schema: more than %d subschemas", PL_GRAMMAR_MAX_NODES)
                   : pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
    *out = id;
    return PL_OK;
}

static pl_status words_node(pl_grammar *g, const char *const *w, size_t n, int *out) {
    pl_json v[3];
    const pl_json *pv[3];
    for (size_t i = 0; i < n; i++) {
        v[i].type = !strcmp(w[i], "true")    ? PL_JSON_TRUE
                    : !strcmp(w[i], "false") ? PL_JSON_FALSE
                                             : PL_JSON_NULL;
        pv[i] = &v[i];
    }
    return lit_node(g, pv, n, out);
}

static pl_status node_fail(int id) {
    return id == -1 ? pl_fail(PL_ERR_ARG, "schema: more than %d subschemas", PL_GRAMMAR_MAX_NODES)
                    : pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
}

static pl_status compile(pl_grammar *g, const pl_json *s, int depth, int *out);

static const char *const refused[] = {"$ref",
                                      "$defs",
                                      "definitions",
                                      "allOf",
                                      "oneOf",
                                      "not",
                                      "if",
                                      "then",
                                      "else",
                                      "pattern",
                                      "minLength",
                                      "maxLength",
                                      "minimum",
                                      "maximum",
                                      "exclusiveMinimum",
                                      "multipleOf",
                                      "exclusiveMaximum",
                                      "patternProperties",
                                      "propertyNames",
                                      "minProperties",
                                      "maxProperties",
                                      "uniqueItems",
                                      "prefixItems",
                                      "contains",
                                      "dependentRequired",
                                      "dependentSchemas",
                                      "unevaluatedProperties",
                                      "unevaluatedItems",
                                      "additionalItems",
                                      "minContains",
                                      "maxContains",
                                      "dependencies"};

static pl_status get_count(const pl_json *s, const char *key, uint32_t dflt, uint32_t *out) {
    const pl_json *v = pl_json_get(s, key);
    *out = dflt;
    if (!v) return PL_OK;
    int64_t i;
    if (!pl_json_int(v, &i) || i < 0 || i > PL_GRAMMAR_MAX_ITEMS)
        return pl_fail(PL_ERR_ARG, "schema: %s must be an integer from 0 to %d", key,
                       PL_GRAMMAR_MAX_ITEMS);
    *out = (uint32_t)i;
    return PL_OK;
}

static pl_status object_node(pl_grammar *g, const pl_json *s, int depth, int *out) {
    const pl_json *props = pl_json_get(s, "properties"), *req = pl_json_get(s, "required");
    const pl_json *add = pl_json_get(s, "additionalProperties");
    if (props && props->type != PL_JSON_OBJECT)
        return pl_fail(PL_ERR_ARG, "schema: properties must be an object");
    if (req && req->type != PL_JSON_ARRAY)
        return pl_fail(PL_ERR_ARG, "schema: required must be an array of names");
    size_t n = props ? props->obj.count : 0;
    gnode nd = {.kind = K_OBJECT, .sub = N_ANY};
    if (add && add->type == PL_JSON_FALSE)
        nd.sub = -1;
    else if (add && add->type != PL_JSON_TRUE) {
        pl_status st = compile(g, add, depth + 1, &nd.sub);
        if (st) return st;
    }
    for (size_t i = 0; req && i < req->arr.count; i++) {
        const pl_json *r = req->arr.items[i];
        if (r->type != PL_JSON_STRING)
            return pl_fail(PL_ERR_ARG, "schema: required must be an array of names");
        bool found = false;
        for (size_t k = 0; k < n && !found; k++)
            found = props->obj.key_lens[k] == r->str.len &&
                    !memcmp(props->obj.keys[k], r->str.s, r->str.len);
        if (!found)
            return pl_fail(PL_ERR_ARG, "schema: required names a property not in properties");
    }
    /* the value nodes first (they add props of their own), then this object's props */
    int *vals = calloc(n ? n : 1, sizeof *vals);
    text *keys = calloc(n ? n : 1, sizeof *keys);
    pl_status st = vals && keys ? PL_OK : pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
    for (size_t i = 0; i < n && !st; i++) {
        if (memchr(props->obj.keys[i], 0, props->obj.key_lens[i]))
            st = pl_fail(PL_ERR_ARG, "schema: a property name holds a NUL character");
        for (size_t k = 0; k < i && !st; k++)
            if (props->obj.key_lens[k] == props->obj.key_lens[i] &&
                !memcmp(props->obj.keys[k], props->obj.keys[i], props->obj.key_lens[i]))
                st = pl_fail(PL_ERR_ARG, "schema: a property is named twice");
        if (!st) st = compile(g, props->obj.vals[i], depth + 1, &vals[i]);
        pl_strbuf b = {0};
        if (!st) pl_json_quote(&b, props->obj.keys[i], props->obj.key_lens[i], false);
        if (!st && (b.failed || !b.s)) st = pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
        if (!st) keys[i].s = pl_sb_take(&b, &keys[i].len);
        pl_sb_free(&b);
    }
    if (!st && !grow((void **)&g->props, &g->cap_props, g->n_props + (uint32_t)n, sizeof *g->props))
        st = pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
    if (!st) {
        /* never realloc to 0 bytes: glibc frees the block and returns NULL, which would
         * leave korder dangling (a schema of objects without properties) */
        uint32_t cap = g->cap_props ? g->cap_props : 1;
        void *k = realloc(g->korder, (size_t)cap * sizeof *g->korder);
        if (!k)
            st = pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
        else
            g->korder = k;
    }
    nd.first = g->n_props;
    nd.n = (uint32_t)n;
    for (size_t i = 0; i < n && !st; i++) {
        text one = {keys[i].s, keys[i].len};
        uint32_t f, c;
        keys[i].s = NULL;
        st = add_lits(g, &one, 1, &f, &c);
        free(one.s);
        bool required = false;
        for (size_t r = 0; req && r < req->arr.count; r++) {
            const pl_json *rv = req->arr.items[r];
            required |= rv->str.len == props->obj.key_lens[i] &&
                        !memcmp(rv->str.s, props->obj.keys[i], rv->str.len);
        }
        if (!st) g->props[nd.first + i] = (gprop){f, vals[i], required};
    }
    if (!st) {
        /* korder: insertion sort of the prop numbers by key bytes (n is small) */
        uint32_t *ko = g->korder + nd.first;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t j = i;
            const glit *li = &g->lits[g->props[nd.first + i].key];
            while (j > 0) {
                const glit *lj = &g->lits[g->props[nd.first + ko[j - 1]].key];
                text a = {(char *)g->bytes.s + lj->off, lj->len},
                     b = {(char *)g->bytes.s + li->off, li->len};
                if (cmp_text(&a, &b) <= 0) break;
                ko[j] = ko[j - 1];
                j--;
            }
            ko[j] = i;
        }
        g->n_props += (uint32_t)n;
    }
    free(vals);
    if (keys) free_texts(keys, n);
    if (st) return st;
    int id = new_node(g, nd);
    if (id < 0) return node_fail(id);
    *out = id;
    return PL_OK;
}

static pl_status type_node(pl_grammar *g, const pl_json *s, const char *type, int depth, int *out) {
    if (!strcmp(type, "object")) return object_node(g, s, depth, out);
    gnode nd = {.sub = -1};
    if (!strcmp(type, "array")) {
        const pl_json *items = pl_json_get(s, "items");
        nd.kind = K_ARRAY;
        nd.sub = N_ANY;
        pl_status st;
        if ((st = get_count(s, "minItems", 0, &nd.min)) ||
            (st = get_count(s, "maxItems", UINT32_MAX, &nd.max)))
            return st;
        if (nd.min > nd.max) return pl_fail(PL_ERR_ARG, "schema: minItems is above maxItems");
        if (items && items->type == PL_JSON_ARRAY)
            return pl_fail(PL_ERR_ARG, "schema: items as a list (tuples) is not supported");
        if (items && items->type == PL_JSON_FALSE) {
            if (nd.min > 0) return pl_fail(PL_ERR_ARG, "schema: items false with minItems > 0");
            nd.max = 0;
        } else if (items && (st = compile(g, items, depth + 1, &nd.sub)))
            return st;
    } else if (!strcmp(type, "string"))
        nd.kind = K_STRING;
    else if (!strcmp(type, "number"))
        nd.kind = K_NUMBER;
    else if (!strcmp(type, "integer"))
        nd.kind = K_INTEGER;
    else if (!strcmp(type, "boolean")) {
        static const char *const w[] = {"true", "false"};
        return words_node(g, w, 2, out);
    } else if (!strcmp(type, "null")) {
        static const char *const w[] = {"null"};
        return words_node(g, w, 1, out);
    } else
        return pl_fail(PL_ERR_ARG, "schema: unknown type (object, array, string, number, "
                                   "integer, boolean or null)");
    int id = new_node(g, nd);
    if (id < 0) return node_fail(id);
    *out = id;
    return PL_OK;
}

/* An ANYOF node over ids[0..n), nested anyOf flattened into it. */
static pl_status anyof_node(pl_grammar *g, const int *ids, size_t n, int *out) {
    gnode nd = {.kind = K_ANYOF, .sub = -1, .first = g->n_alts};
    for (size_t i = 0; i < n; i++) {
        const gnode *c = &g->nodes[ids[i]];
        uint32_t cn = c->kind == K_ANYOF ? c->n : 1;
        if (!grow((void **)&g->alts, &g->cap_alts, g->n_alts + cn, sizeof *g->alts))
            return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
        c = &g->nodes[ids[i]];
        if (c->kind == K_ANYOF)
            for (uint32_t k = 0; k < cn; k++) g->alts[g->n_alts++] = g->alts[c->first + k];
        else
            g->alts[g->n_alts++] = (uint32_t)ids[i];
    }
    nd.n = g->n_alts - nd.first;
    if (nd.n > PL_GRAMMAR_MAX_CONFIGS)
        return pl_fail(PL_ERR_ARG, "schema: more than %d alternatives in one anyOf",
                       PL_GRAMMAR_MAX_CONFIGS);
    int id = new_node(g, nd);
    if (id < 0) return node_fail(id);
    *out = id;
    return PL_OK;
}

static bool same_json(const pl_json *a, const pl_json *b) {
    pl_strbuf x = {0}, y = {0};
    pl_json_write(&x, a);
    pl_json_write(&y, b);
    bool eq = !x.failed && !y.failed && x.len == y.len && (!x.len || !memcmp(x.s, y.s, x.len));
    pl_sb_free(&x);
    pl_sb_free(&y);
    return eq;
}

static bool of_type(const pl_json *v, const char *t) {
    if (!strcmp(t, "integer"))
        return v->type == PL_JSON_NUMBER && fabs(v->n.num) < 9e15 && v->n.num == floor(v->n.num);
    static const char *const names[] = {"null",   "boolean", "boolean", "number",
                                        "string", "array",   "object"};
    return !strcmp(names[v->type], t);
}

/* enum / const: the values that are also in enum (beside const) and of the type (beside
 * type); other constraints beside them are refused rather than half applied. */
static pl_status literal_schema(pl_grammar *g, const pl_json *s, const pl_json *cv,
                                const pl_json *ev, const pl_json *type, int *out) {
    static const char *const beside[] = {
        "properties", "items", "anyOf", "required", "minItems", "maxItems", "additionalProperties"};
    for (size_t i = 0; i < sizeof beside / sizeof *beside; i++)
        if (pl_json_get(s, beside[i]))
            return pl_fail(PL_ERR_ARG, "schema: enum or const beside '%s' is not supported",
                           beside[i]);
    if (ev && (ev->type != PL_JSON_ARRAY || ev->arr.count == 0))
        return pl_fail(PL_ERR_ARG, "schema: enum must be a non-empty array");
    size_t n = cv ? 1 : ev->arr.count, k = 0;
    const pl_json **vals = calloc(n, sizeof *vals);
    if (!vals) return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
    for (size_t i = 0; i < n; i++) {
        const pl_json *v = cv ? cv : ev->arr.items[i];
        bool in_enum = !cv || !ev, typed = !type;
        for (size_t j = 0; !in_enum && j < ev->arr.count; j++)
            in_enum = same_json(v, ev->arr.items[j]);
        if (type && type->type == PL_JSON_STRING) typed = of_type(v, type->str.s);
        for (size_t j = 0; type && type->type == PL_JSON_ARRAY && j < type->arr.count; j++)
            typed |=
                type->arr.items[j]->type == PL_JSON_STRING && of_type(v, type->arr.items[j]->str.s);
        if (in_enum && typed) vals[k++] = v;
    }
    pl_status st = k ? lit_node(g, vals, k, out)
                     : pl_fail(PL_ERR_ARG, "schema: no enum or const value fits the schema");
    free(vals);
    return st;
}

static pl_status compile(pl_grammar *g, const pl_json *s, int depth, int *out) {
    if (depth > PL_GRAMMAR_MAX_DEPTH)
        return pl_fail(PL_ERR_ARG, "schema: nested deeper than %d levels", PL_GRAMMAR_MAX_DEPTH);
    if (s->type == PL_JSON_TRUE) return *out = N_ANY, PL_OK;
    if (s->type == PL_JSON_FALSE)
        return pl_fail(PL_ERR_ARG, "schema: false (no value) is only supported as "
                                   "additionalProperties or items");
    if (s->type != PL_JSON_OBJECT) return pl_fail(PL_ERR_ARG, "schema: a schema must be an object");
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (pl_json_get(s, refused[i]))
            return pl_fail(PL_ERR_ARG, "schema: '%s' is not supported", refused[i]);
    const pl_json *cv = pl_json_get(s, "const"), *ev = pl_json_get(s, "enum");
    const pl_json *any = pl_json_get(s, "anyOf"), *type = pl_json_get(s, "type");
    if (cv || ev) return literal_schema(g, s, cv, ev, type, out);
    if (any) {
        if (any->type != PL_JSON_ARRAY || any->arr.count == 0)
            return pl_fail(PL_ERR_ARG, "schema: anyOf must be a non-empty array");
        if (type || pl_json_get(s, "properties") || pl_json_get(s, "items"))
            return pl_fail(PL_ERR_ARG, "schema: anyOf beside type, properties or items is not "
                                       "supported");
        if (any->arr.count > PL_GRAMMAR_MAX_CONFIGS)
            return pl_fail(PL_ERR_ARG, "schema: more than %d alternatives in one anyOf",
                           PL_GRAMMAR_MAX_CONFIGS);
        int ids[PL_GRAMMAR_MAX_CONFIGS];
        for (size_t i = 0; i < any->arr.count; i++) {
            pl_status st = compile(g, any->arr.items[i], depth + 1, &ids[i]);
            if (st) return st;
        }
        return anyof_node(g, ids, any->arr.count, out);
    }
    if (!type) {
        if (pl_json_get(s, "properties") || pl_json_get(s, "required") ||
            pl_json_get(s, "additionalProperties"))
            return type_node(g, s, "object", depth, out);
        if (pl_json_get(s, "items") || pl_json_get(s, "minItems") || pl_json_get(s, "maxItems"))
            return type_node(g, s, "array", depth, out);
        return *out = N_ANY, PL_OK;
    }
    if (type->type == PL_JSON_STRING) return type_node(g, s, type->str.s, depth, out);
    if (type->type != PL_JSON_ARRAY || type->arr.count == 0 || type->arr.count > 7)
        return pl_fail(PL_ERR_ARG, "schema: type must be a name or a list of 1 to 7 names");
    int ids[7];
    for (size_t i = 0; i < type->arr.count; i++) {
        const char *t = pl_json_string(type->arr.items[i]);
        if (!t) return pl_fail(PL_ERR_ARG, "schema: type must be a name or a list of names");
        pl_status st = type_node(g, s, t, depth, &ids[i]);
        if (st) return st;
    }
    if (type->arr.count == 1) return *out = ids[0], PL_OK;
    return anyof_node(g, ids, type->arr.count, out);
}

static pl_status grammar_new(pl_grammar **out) {
    pl_grammar *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return pl_fail(PL_ERR_NOMEM, "out of memory for the schema");
    static const char *const w[] = {"true", "false", "null"};
    int id;
    pl_status st = node_fail(-2);
    if (new_node(g, (gnode){.kind = K_ANY, .sub = N_ANY}) == N_ANY &&
        new_node(g, (gnode){.kind = K_STRING, .sub = -1}) == N_STR &&
        !(st = words_node(g, w, 3, &id)) &&
        new_node(g, (gnode){.kind = K_NUMBER, .sub = -1}) == N_NUM) {
        *out = g;
        return PL_OK;
    }
    pl_grammar_free(g);
    return st ? st : node_fail(-2);
}

pl_status pl_grammar_compile_json(const pl_json *schema, pl_grammar **out) {
    pl_grammar *g;
    pl_status st = grammar_new(&g);
    if (st) return st;
    if ((st = compile(g, schema, 0, &g->root))) {
        pl_grammar_free(g);
        return st;
    }
    *out = g;
    return PL_OK;
}

pl_status pl_grammar_compile(const char *schema, size_t len, pl_grammar **out) {
    *out = NULL;
    if (len > PL_GRAMMAR_MAX_SCHEMA_BYTES)
        return pl_fail(PL_ERR_ARG, "schema: longer than %d bytes", PL_GRAMMAR_MAX_SCHEMA_BYTES);
    pl_json_doc *d;
    if (pl_json_parse(schema, len, &d)) return pl_fail(PL_ERR_ARG, "schema: %s", pl_last_error());
    pl_status st = pl_grammar_compile_json(pl_json_root(d), out);
    pl_json_doc_free(d);
    return st;
}

pl_status pl_grammar_any_object(pl_grammar **out) {
    pl_grammar *g;
    pl_status st = grammar_new(&g);
    if (st) return st;
    int id = new_node(g, (gnode){.kind = K_OBJECT, .sub = N_ANY});
    if (id < 0) {
        pl_grammar_free(g);
        return node_fail(id);
    }
    g->root = id;
    *out = g;
    return PL_OK;
}

pl_status pl_grammar_wrap(pl_grammar *g, const char *prefix, size_t plen, const char *suffix,
                          size_t slen) {
    if (plen + slen > 4096) return pl_fail(PL_ERR_ARG, "grammar: a wrap's text is over 4096 bytes");
    text t[2] = {{(char *)(plen ? prefix : ""), plen}, {(char *)(slen ? suffix : ""), slen}};
    uint32_t pf, sf, c;
    pl_status st = add_lits(g, &t[0], 1, &pf, &c);
    if (!st) st = add_lits(g, &t[1], 1, &sf, &c);
    if (st) return st;
    int id = new_node(g, (gnode){.kind = K_WRAP, .first = pf, .n = sf, .sub = g->root});
    if (id < 0) return node_fail(id);
    g->root = id;
    return PL_OK;
}

void pl_grammar_free(pl_grammar *g) {
    if (!g) return;
    free(g->nodes);
    free(g->lits);
    free(g->props);
    free(g->korder);
    free(g->alts);
    pl_sb_free(&g->bytes);
    free(g);
}

/* ---- matching one configuration ---- */

typedef struct {
    uint8_t *buf;
    size_t len;
    int count;
} gout;

static void emit(gout *o, const gcfg *c) {
    size_t n = CFG_BYTES(c->depth);
    if (o->count >= PL_GRAMMAR_MAX_CONFIGS) return; /* the set is full: drop (still sound) */
    for (size_t p = 0; p < o->len; p += CFG_BYTES(o->buf[p]))
        if (o->buf[p] == c->depth && !memcmp(o->buf + p, c, n)) return;
    memcpy(o->buf + o->len, c, n);
    o->len += n;
    o->count++;
}

static bool required_left(const pl_grammar *g, const gnode *n, uint32_t i) {
    if (n->kind != K_OBJECT) return false;
    for (uint32_t k = i; k < n->n; k++)
        if (g->props[n->first + k].required) return true;
    return false;
}

/* The declared properties an object may name next: [i, lim] (lim: the first required). */
static uint32_t key_limit(const pl_grammar *g, const gnode *n, uint32_t i) {
    for (uint32_t k = i; k < n->n; k++)
        if (g->props[n->first + k].required) return k;
    return n->n - 1;
}

/* Narrow a literal range [lo, hi) at offset off by byte ch; window: the prop numbers a key
 * may have (NULL: any). False if no literal in the range continues with ch. */
static bool lit_narrow(const pl_grammar *g, const gnode *n, gframe *t, uint8_t ch, uint32_t wlo,
                       uint32_t whi, bool keys) {
    uint32_t lo = t->a, hi = t->b, off = t->c, nlo = hi, nhi = hi;
    for (uint32_t r = lo; r < hi; r++) {
        uint32_t li = keys ? g->props[n->first + g->korder[n->first + r]].key : n->first + r;
        if (g->lits[li].len > off && lit_bytes(g, li)[off] == ch) {
            if (nlo == hi) nlo = r;
            nhi = r + 1;
        } else if (nlo != hi)
            break;
    }
    if (nlo == hi) return false;
    if (keys) {
        bool ok = false;
        for (uint32_t r = nlo; r < nhi && !ok; r++) {
            uint32_t j = g->korder[n->first + r];
            ok = j >= wlo && j <= whi;
        }
        if (!ok) return false;
    }
    t->a = (uint16_t)nlo, t->b = (uint16_t)nhi, t->c = (uint16_t)(off + 1);
    return true;
}

static bool lit_done(const pl_grammar *g, const gnode *n, const gframe *t, bool keys) {
    uint32_t li = keys ? g->props[n->first + g->korder[n->first + t->a]].key : n->first + t->a;
    return g->lits[li].len == t->c;
}

static bool num_accepting(const gframe *t) {
    return t->x == NX_ZERO || t->x == NX_INT || t->x == NX_FRAC || t->x == NX_EXP;
}

static bool is_digit(uint8_t c) {
    return c >= '0' && c <= '9';
}

static bool num_byte(gframe *t, bool integer, uint8_t ch) {
    bool digit = is_digit(ch), e = (ch == 'e' || ch == 'E') && !integer;
    bool dot = ch == '.' && !integer;
    switch (t->x) {
    case NX_MINUS:
        if (ch == '0') return t->x = NX_ZERO, true;
        if (digit) return t->x = NX_INT, t->a = 1, true;
        return false;
    case NX_ZERO:
    case NX_INT:
        if (digit && t->x == NX_INT && t->a < MAX_INT_DIGITS) return t->a++, true;
        if (dot) return t->x = NX_DOT, true;
        if (e) return t->x = NX_E, true;
        return false;
    case NX_DOT:
        if (digit) return t->x = NX_FRAC, t->a = 1, true;
        return false;
    case NX_FRAC:
        if (digit && t->a < MAX_FRAC_DIGITS) return t->a++, true;
        if (e) return t->x = NX_E, true;
        return false;
    case NX_E:
        if (ch == '+' || ch == '-') return t->x = NX_ESIGN, true;
        /* fallthrough */
    case NX_ESIGN:
        if (digit) return t->x = NX_EXP, t->a = 1, true;
        return false;
    case NX_EXP:
        if (digit && t->a < MAX_EXP_DIGITS) return t->a++, true;
        return false;
    }
    return false;
}

static bool hex(uint8_t c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* One byte of a string's body (after the opening quote); *end when it closed it. */
static bool str_byte(gframe *t, uint8_t ch, bool *end) {
    *end = false;
    switch (t->x) {
    case S_BODY:
        if (ch == '"') return *end = true, true;
        if (ch == '\\') return t->x = S_ESC, true;
        if (ch < 0x20) return false;
        if (ch < 0x80) return true;
        t->x = S_UTF;
        t->b = 0x80 | 0xBF << 8;
        if (ch >= 0xC2 && ch <= 0xDF)
            t->a = 1;
        else if (ch == 0xE0)
            t->a = 2, t->b = 0xA0 | 0xBF << 8;
        else if (ch == 0xED)
            t->a = 2, t->b = 0x80 | 0x9F << 8;
        else if (ch >= 0xE1 && ch <= 0xEF)
            t->a = 2;
        else if (ch == 0xF0)
            t->a = 3, t->b = 0x90 | 0xBF << 8;
        else if (ch >= 0xF1 && ch <= 0xF3)
            t->a = 3;
        else if (ch == 0xF4)
            t->a = 3, t->b = 0x80 | 0x8F << 8;
        else
            return false;
        return true;
    case S_ESC:
        if (ch == 'u') return t->x = S_HEX, t->a = 0, true;
        if (!strchr("\"\\/bfnrt", ch) || !ch) return false;
        return t->x = S_BODY, true;
    case S_HEX:
        if (!hex(ch)) return false;
        if (++t->a == 4) t->x = S_BODY, t->a = 0;
        return true;
    case S_UTF:
        if (ch < (t->b & 0xFF) || ch > (t->b >> 8)) return false;
        t->b = 0x80 | 0xBF << 8;
        if (--t->a == 0) t->x = S_BODY, t->b = 0;
        return true;
    }
    return false;
}

/* The top frame's value is done: pop it and move its parent on. */
static void child_done(const pl_grammar *g, gcfg *c) {
    gframe p = c->f[--c->depth];
    if (c->depth == 0) return;
    gframe *t = &c->f[c->depth - 1];
    if (t->mode == M_OBJ) {
        if (t->x == OX_KEY) {
            if (p.mode == M_KEY) {
                const gnode *n = &g->nodes[t->node];
                uint32_t j = g->korder[n->first + p.a];
                t->b = (uint16_t)j, t->a = (uint16_t)(j + 1);
            }
            t->x = OX_COLON;
        } else
            t->x = OX_NEXT;
    } else if (t->mode == M_ARR) {
        if (t->a < 0xFFFF) t->a++;
        t->x = AX_NEXT;
    } else if (t->mode == M_WRAP) {
        t->x = WX_SUFFIX, t->c = 0;
        if (g->lits[g->nodes[t->node].n].len == 0) child_done(g, c); /* no suffix: done */
    }
}

static void step(const pl_grammar *g, gcfg *c, uint8_t ch, gout *o);

/* The frame a value of node starts with. */
static gframe wrap_or_start(const pl_grammar *g, int node) {
    const gnode *n = &g->nodes[node];
    if (n->kind != K_WRAP) return (gframe){.node = (uint16_t)node, .mode = M_START};
    return (gframe){.node = (uint16_t)node,
                    .mode = M_WRAP,
                    .x = g->lits[n->first].len ? WX_PREFIX : WX_VALUE_NEXT};
}

/* A value of node begins with ch: push it (one configuration per anyOf alternative). */
static void push_value(const pl_grammar *g, gcfg *c, int node, uint8_t ch, gout *o) {
    if (c->depth >= PL_GRAMMAR_MAX_FRAMES) return;
    const gnode *n = &g->nodes[node];
    if (n->kind != K_ANYOF) {
        c->f[c->depth++] = wrap_or_start(g, node);
        step(g, c, ch, o);
        return;
    }
    for (uint32_t i = 0; i < n->n; i++) {
        gcfg d;
        memcpy(&d, c, CFG_BYTES(c->depth));
        d.f[d.depth++] = (gframe){.node = (uint16_t)g->alts[n->first + i], .mode = M_START};
        step(g, &d, ch, o);
    }
}

/* The first byte of a value of t's node. */
static bool start(const pl_grammar *g, gcfg *c, gframe *t, uint8_t ch) {
    const gnode *n = &g->nodes[t->node];
    bool any = n->kind == K_ANY, room = c->depth < PL_GRAMMAR_MAX_FRAMES;
    if (ch == '{' && (n->kind == K_OBJECT || (any && room)))
        return t->mode = M_OBJ, t->x = OX_OPEN, t->a = 0, true;
    if (ch == '[' && (n->kind == K_ARRAY || (any && room)))
        return t->mode = M_ARR, t->x = AX_OPEN, t->a = 0, true;
    if (ch == '"' && (n->kind == K_STRING || any)) return t->mode = M_STR, t->x = S_BODY, true;
    if ((ch == '-' || is_digit(ch)) && (n->kind == K_NUMBER || n->kind == K_INTEGER || any)) {
        t->mode = M_NUM;
        t->x = ch == '-' ? NX_MINUS : ch == '0' ? NX_ZERO : NX_INT;
        t->a = 1;
        if (any) t->node = N_NUM;
        return true;
    }
    if (n->kind == K_LIT || any) {
        if (any) t->node = N_WORDS, n = &g->nodes[N_WORDS];
        t->mode = M_LIT, t->a = 0, t->b = (uint16_t)n->n, t->c = 0;
        return lit_narrow(g, n, t, ch, 0, 0, false);
    }
    return false;
}

static void step(const pl_grammar *g, gcfg *c, uint8_t ch, gout *o) {
    while (c->depth > 0) {
        gframe *t = &c->f[c->depth - 1];
        const gnode *n = &g->nodes[t->node];
        bool declared = n->kind == K_OBJECT && n->n > 0, end;
        switch (t->mode) {
        case M_START:
            if (start(g, c, t, ch)) emit(o, c);
            return;
        case M_STR:
            if (!str_byte(t, ch, &end)) return;
            if (end) child_done(g, c);
            emit(o, c);
            return;
        case M_NUM:
            if (num_byte(t, n->kind == K_INTEGER, ch)) return emit(o, c);
            if (!num_accepting(t)) return;
            child_done(g, c);
            continue;
        case M_LIT:
        case M_KEY: {
            bool keys = t->mode == M_KEY;
            uint32_t wlo = 0, whi = 0;
            if (keys) {
                wlo = c->f[c->depth - 2].a;
                whi = key_limit(g, n, wlo);
            }
            gframe save = *t;
            if (lit_narrow(g, n, t, ch, wlo, whi, keys)) return emit(o, c);
            if (!lit_done(g, n, &save, keys)) return;
            child_done(g, c);
            continue;
        }
        case M_OBJ:
            switch (t->x) {
            case OX_OPEN:
            case OX_COMMA:
                if (ch == '}' && t->x == OX_OPEN && !required_left(g, n, t->a)) {
                    child_done(g, c);
                    return emit(o, c);
                }
                if (c->depth >= PL_GRAMMAR_MAX_FRAMES) return;
                t->x = OX_KEY;
                if (declared) {
                    if (t->a >= n->n) return;
                    c->f[c->depth++] =
                        (gframe){.node = t->node, .mode = M_KEY, .b = (uint16_t)n->n};
                    continue;
                }
                if (n->sub < 0 || ch != '"') return;
                c->f[c->depth++] = (gframe){.node = N_STR, .mode = M_STR, .x = S_BODY};
                return emit(o, c);
            case OX_COLON:
                if (ch == ':') t->x = OX_AFTER_COLON, emit(o, c);
                return;
            case OX_AFTER_COLON:
                t->x = OX_VAL;
                push_value(g, c, declared ? g->props[n->first + t->b].node : n->sub, ch, o);
                return;
            case OX_NEXT:
                if (ch == ',' && (!declared || t->a < n->n))
                    t->x = OX_COMMA, emit(o, c);
                else if (ch == '}' && !required_left(g, n, t->a))
                    child_done(g, c), emit(o, c);
                return;
            }
            return;
        case M_WRAP: {
            const glit *l = &g->lits[t->x == WX_PREFIX ? n->first : n->n];
            if (t->x == WX_VALUE_NEXT) {
                t->x = WX_VALUE;
                push_value(g, c, n->sub, ch, o);
                return;
            }
            if (t->x == WX_VALUE || t->c >= l->len ||
                lit_bytes(g, t->x == WX_PREFIX ? n->first : n->n)[t->c] != ch)
                return;
            if (++t->c == l->len) {
                if (t->x == WX_PREFIX)
                    t->x = WX_VALUE_NEXT, t->c = 0;
                else
                    child_done(g, c); /* the suffix closes the wrap */
            }
            return emit(o, c);
        }
        case M_ARR: {
            uint32_t max = n->kind == K_ARRAY ? n->max : UINT32_MAX;
            uint32_t min = n->kind == K_ARRAY ? n->min : 0;
            int items = n->kind == K_ARRAY ? n->sub : N_ANY;
            switch (t->x) {
            case AX_OPEN:
            case AX_COMMA:
                if (t->x == AX_OPEN && ch == ']') {
                    if (min == 0) child_done(g, c), emit(o, c);
                    return;
                }
                if (t->x == AX_OPEN && max == 0) return;
                t->x = AX_VAL;
                push_value(g, c, items, ch, o);
                return;
            case AX_NEXT:
                if (ch == ',' && t->a < max)
                    t->x = AX_COMMA, emit(o, c);
                else if (ch == ']' && t->a >= min)
                    child_done(g, c), emit(o, c);
                return;
            }
            return;
        }
        }
        return;
    }
}

static bool cfg_complete(const pl_grammar *g, const gcfg *c) {
    int d = c->depth;
    if (d == 0) return true;
    const gframe *t = &c->f[d - 1];
    /* a number or literal on top ends with the next byte, or the end */
    if ((t->mode == M_NUM && num_accepting(t)) ||
        (t->mode == M_LIT && lit_done(g, &g->nodes[t->node], t, false)))
        d--;
    /* then wraps without a suffix around it end with it */
    while (d > 0 && d < c->depth && c->f[d - 1].mode == M_WRAP && c->f[d - 1].x == WX_VALUE &&
           g->lits[g->nodes[c->f[d - 1].node].n].len == 0)
        d--;
    return d == 0;
}

/* ---- sets ---- */

size_t pl_gset_step(const pl_grammar *g, const uint8_t *set, size_t n, uint8_t ch, uint8_t *out) {
    gout o = {.buf = out};
    gcfg c;
    for (size_t p = 0; p < n; p += CFG_BYTES(set[p])) {
        memcpy(&c, set + p, CFG_BYTES(set[p]));
        step(g, &c, ch, &o);
    }
    return o.len;
}

bool pl_gset_complete(const pl_grammar *g, const uint8_t *set, size_t n) {
    gcfg c;
    for (size_t p = 0; p < n; p += CFG_BYTES(set[p])) {
        memcpy(&c, set + p, CFG_BYTES(set[p]));
        if (cfg_complete(g, &c)) return true;
    }
    return false;
}

struct pl_gstate {
    const pl_grammar *g;
    size_t len;
    uint8_t *set, *tmp;
};

void pl_gstate_reset(pl_gstate *s) {
    gcfg c = {.depth = 0};
    gout o = {.buf = s->set};
    const gnode *n = &s->g->nodes[s->g->root];
    for (uint32_t i = 0; i < (n->kind == K_ANYOF ? n->n : 1); i++) {
        int node = n->kind == K_ANYOF ? (int)s->g->alts[n->first + i] : s->g->root;
        c.depth = 1;
        c.f[0] = wrap_or_start(s->g, node);
        emit(&o, &c);
    }
    s->len = o.len;
}

pl_status pl_gstate_new(const pl_grammar *g, pl_gstate **out) {
    pl_gstate *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s) s->set = malloc(SET_BYTES), s->tmp = malloc(SET_BYTES);
    if (!s || !s->set || !s->tmp) {
        pl_gstate_free(s);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the grammar state");
    }
    s->g = g;
    pl_gstate_reset(s);
    *out = s;
    return PL_OK;
}

void pl_gstate_free(pl_gstate *s) {
    if (!s) return;
    free(s->set);
    free(s->tmp);
    free(s);
}

bool pl_gstate_accepts(const pl_gstate *s, const void *b, size_t n) {
    const uint8_t *p = b;
    uint8_t *buf[2] = {malloc(SET_BYTES), malloc(SET_BYTES)};
    bool ok = false;
    if (buf[0] && buf[1]) {
        const uint8_t *cur = s->set;
        size_t len = s->len;
        for (size_t i = 0; i < n && len; i++) {
            len = pl_gset_step(s->g, cur, len, p[i], buf[i & 1]);
            cur = buf[i & 1];
        }
        ok = len > 0;
    }
    free(buf[0]);
    free(buf[1]);
    return ok;
}

bool pl_gstate_feed(pl_gstate *s, const void *b, size_t n) {
    const uint8_t *p = b;
    /* byte by byte into tmp, swapping; on refusal go back to a saved copy */
    uint8_t *save = malloc(s->len ? s->len : 1);
    if (!save) return false;
    memcpy(save, s->set, s->len);
    size_t save_len = s->len;
    for (size_t i = 0; i < n; i++) {
        size_t len = pl_gset_step(s->g, s->set, s->len, p[i], s->tmp);
        if (!len) {
            memcpy(s->set, save, save_len);
            s->len = save_len;
            free(save);
            return false;
        }
        uint8_t *x = s->set;
        s->set = s->tmp;
        s->tmp = x;
        s->len = len;
    }
    free(save);
    return true;
}

bool pl_gstate_done(const pl_gstate *s) {
    for (size_t p = 0; p < s->len; p += CFG_BYTES(s->set[p]))
        if (s->set[p] != 0) return false;
    return s->len > 0;
}

bool pl_gstate_complete(const pl_gstate *s) {
    return pl_gset_complete(s->g, s->set, s->len);
}

const uint8_t *pl_gstate_set(const pl_gstate *s, size_t *n) {
    *n = s->len;
    return s->set;
}

const pl_grammar *pl_gstate_grammar(const pl_gstate *s) {
    return s->g;
}

bool pl_grammar_plain_text(const void *b, size_t n) {
    gframe t = {.mode = M_STR, .x = S_BODY};
    const uint8_t *p = b;
    bool end;
    for (size_t i = 0; i < n; i++)
        if (!str_byte(&t, p[i], &end) || end) return false;
    return t.x == S_BODY;
}

bool pl_gset_in_string(const uint8_t *set, size_t n) {
    if (n == 0) return false;
    for (size_t p = 0; p < n; p += CFG_BYTES(set[p])) {
        gframe t;
        if (set[p] == 0) return false;
        memcpy(&t, set + p + CFG_BYTES(set[p] - 1), sizeof t);
        if (t.mode != M_STR || t.x != S_BODY) return false;
    }
    return true;
}
