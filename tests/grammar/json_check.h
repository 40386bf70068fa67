/* json_check.h - a tiny JSON Schema validator for the grammar tests (the subset the grammar
 * compiles), written independently of src/grammar: the tests parse what a constrained
 * generation wrote and check it against the schema with this. Used by tests and
 * tests/fuzz/json_schema_fuzz.c. */
#ifndef PL_TEST_JSON_CHECK_H
#define PL_TEST_JSON_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"

static bool jc_equal(const pl_json *a, const pl_json *b) {
    pl_strbuf x = {0}, y = {0};
    pl_json_write(&x, a);
    pl_json_write(&y, b);
    bool eq = x.len == y.len && x.s && y.s && !memcmp(x.s, y.s, x.len);
    pl_sb_free(&x);
    pl_sb_free(&y);
    return eq;
}

static bool jc_is_type(const pl_json *v, const char *t) {
    if (!strcmp(t, "object")) return v->type == PL_JSON_OBJECT;
    if (!strcmp(t, "array")) return v->type == PL_JSON_ARRAY;
    if (!strcmp(t, "string")) return v->type == PL_JSON_STRING;
    if (!strcmp(t, "number")) return v->type == PL_JSON_NUMBER;
    if (!strcmp(t, "integer"))
        return v->type == PL_JSON_NUMBER && v->n.num == (double)(int64_t)v->n.num;
    if (!strcmp(t, "boolean")) return v->type == PL_JSON_TRUE || v->type == PL_JSON_FALSE;
    if (!strcmp(t, "null")) return v->type == PL_JSON_NULL;
    return false;
}

static bool jc_valid(const pl_json *v, const pl_json *s) {
    if (s->type == PL_JSON_TRUE) return true;
    const pl_json *x;
    if ((x = pl_json_get(s, "const")) && !jc_equal(v, x)) return false;
    if ((x = pl_json_get(s, "enum"))) {
        bool any = false;
        for (size_t i = 0; i < x->arr.count && !any; i++) any = jc_equal(v, x->arr.items[i]);
        if (!any) return false;
    }
    if ((x = pl_json_get(s, "anyOf"))) {
        bool any = false;
        for (size_t i = 0; i < x->arr.count && !any; i++) any = jc_valid(v, x->arr.items[i]);
        if (!any) return false;
    }
    if ((x = pl_json_get(s, "type"))) {
        bool any = false;
        if (x->type == PL_JSON_STRING) any = jc_is_type(v, x->str.s);
        for (size_t i = 0; x->type == PL_JSON_ARRAY && i < x->arr.count; i++)
            any |= jc_is_type(v, x->arr.items[i]->str.s);
        if (!any) return false;
    }
    if (v->type == PL_JSON_OBJECT) {
        const pl_json *props = pl_json_get(s, "properties"), *req = pl_json_get(s, "required");
        const pl_json *add = pl_json_get(s, "additionalProperties");
        for (size_t i = 0; req && i < req->arr.count; i++)
            if (!pl_json_get(v, req->arr.items[i]->str.s)) return false;
        for (size_t i = 0; i < v->obj.count; i++) {
            const pl_json *ps = props ? pl_json_get(props, v->obj.keys[i]) : NULL;
            if (ps) {
                if (!jc_valid(v->obj.vals[i], ps)) return false;
            } else if (add && add->type == PL_JSON_FALSE)
                return false;
            else if (add && !jc_valid(v->obj.vals[i], add))
                return false;
        }
    }
    if (v->type == PL_JSON_ARRAY) {
        const pl_json *items = pl_json_get(s, "items");
        int64_t mn = 0, mx = INT64_MAX;
        if ((x = pl_json_get(s, "minItems"))) pl_json_int(x, &mn);
        if ((x = pl_json_get(s, "maxItems"))) pl_json_int(x, &mx);
        if ((int64_t)v->arr.count < mn || (int64_t)v->arr.count > mx) return false;
        for (size_t i = 0; items && i < v->arr.count; i++)
            if (!jc_valid(v->arr.items[i], items)) return false;
    }
    return true;
}

/* text[0..n) parses and validates against schema text (NULL: any object). */
static bool jc_check(const char *text, size_t n, const char *schema) {
    pl_json_doc *d = NULL, *sd = NULL;
    bool ok = pl_json_parse(text, n, &d) == PL_OK;
    if (ok && schema)
        ok = pl_json_parse(schema, strlen(schema), &sd) == PL_OK &&
             jc_valid(pl_json_root(d), pl_json_root(sd));
    if (ok && !schema) ok = pl_json_root(d)->type == PL_JSON_OBJECT;
    pl_json_doc_free(d);
    pl_json_doc_free(sd);
    return ok;
}

#endif
