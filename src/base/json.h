/* json.h - a JSON (RFC 8259) reader into a read-only tree, and a string escaper.
 *
 * pl_json_parse builds the whole document in one arena owned by a pl_json_doc; values are
 * valid until pl_json_doc_free. Input is untrusted: nesting is limited (PL_JSON_MAX_DEPTH),
 * invalid UTF-8 and bad escapes are errors with the byte offset, lone surrogates in \u
 * escapes become U+FFFD, and a NUL written as \u0000 is kept (strings carry their length).
 * Objects keep their members in order; duplicate keys are kept, and lookups find the last. */
#ifndef PL_BASE_JSON_H
#define PL_BASE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "strbuf.h"

#define PL_JSON_MAX_DEPTH 128 /* levels of arrays/objects inside each other */

typedef enum {
    PL_JSON_NULL,
    PL_JSON_FALSE,
    PL_JSON_TRUE,
    PL_JSON_NUMBER,
    PL_JSON_STRING,
    PL_JSON_ARRAY,
    PL_JSON_OBJECT,
} pl_json_type;

typedef struct pl_json pl_json;
struct pl_json {
    pl_json_type type;
    union {
        struct {
            double num;
            bool is_int; /* written without fraction or exponent and fits int64 */
            int64_t i;
        } n;
        struct {
            const char *s; /* NUL-terminated (may also contain NULs: use len) */
            size_t len;
        } str;
        struct {
            pl_json **items;
            size_t count;
        } arr;
        struct {
            const char **keys;
            size_t *key_lens;
            pl_json **vals;
            size_t count;
        } obj;
    };
};

typedef struct pl_json_doc pl_json_doc;

pl_status pl_json_parse(const char *text, size_t len, pl_json_doc **out);
const pl_json *pl_json_root(const pl_json_doc *d);
void pl_json_doc_free(pl_json_doc *d);

/* Accessors; each is NULL/false/0 on a value of the wrong type. */
const pl_json *pl_json_get(const pl_json *obj, const char *key); /* last member named key */
const pl_json *pl_json_at(const pl_json *arr, size_t i);
size_t pl_json_count(const pl_json *v); /* items of an array, members of an object */
const char *pl_json_string(const pl_json *v);
bool pl_json_number(const pl_json *v, double *out);
bool pl_json_int(const pl_json *v, int64_t *out); /* integral numbers only */

/* Append v as compact JSON (integers as written, other numbers with 17 significant digits
 * and always a fraction or exponent, so parsing the text back gives the same tree). */
void pl_json_write(pl_strbuf *b, const pl_json *v);

/* Append s[0..n) as a JSON string literal (quotes included). Control characters and " \ are
 * escaped; other bytes are copied (ascii_only: non-ASCII as \uXXXX, surrogate pairs above
 * U+FFFF). Invalid UTF-8 bytes become U+FFFD. */
void pl_json_quote(pl_strbuf *b, const char *s, size_t n, bool ascii_only);

#endif
