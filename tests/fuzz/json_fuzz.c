/* json_fuzz.c - libFuzzer target for the JSON reader (pl_json_parse from memory).
 *
 * A failure must leave a one-line message. A success is walked completely (every string
 * quoted back, every accessor), written out compactly, and must parse again to text that
 * writes out identically. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "json_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,               \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void walk(const pl_json *v, pl_strbuf *b) {
    double d;
    int64_t i;
    switch (v->type) {
    case PL_JSON_STRING:
        REQUIRE(strlen(pl_json_string(v)) <= v->str.len);
        pl_json_quote(b, v->str.s, v->str.len, true);
        break;
    case PL_JSON_NUMBER:
        REQUIRE(pl_json_number(v, &d));
        if (pl_json_int(v, &i))
            REQUIRE((double)i == d || fabs((double)i - d) <= fabs(d) * 1e-15 + 1);
        break;
    case PL_JSON_ARRAY:
        REQUIRE(pl_json_count(v) == v->arr.count);
        for (size_t k = 0; k < v->arr.count; k++) walk(pl_json_at(v, k), b);
        REQUIRE(pl_json_at(v, v->arr.count) == NULL);
        break;
    case PL_JSON_OBJECT:
        for (size_t k = 0; k < v->obj.count; k++) {
            walk(v->obj.vals[k], b);
            REQUIRE(pl_json_get(v, v->obj.keys[k]) != NULL ||
                    memchr(v->obj.keys[k], 0, v->obj.key_lens[k]));
        }
        break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_json_doc *d = NULL;
    pl_clear_error();
    if (pl_json_parse((const char *)data, size, &d) != PL_OK) {
        const char *e = pl_last_error();
        REQUIRE(e[0] && !strchr(e, '\n'));
        return 0;
    }
    pl_strbuf scratch = {0}, w1 = {0}, w2 = {0};
    walk(pl_json_root(d), &scratch);
    pl_json_write(&w1, pl_json_root(d));
    REQUIRE(!w1.failed);
    pl_json_doc *d2 = NULL;
    REQUIRE(pl_json_parse(w1.s, w1.len, &d2) == PL_OK);
    pl_json_write(&w2, pl_json_root(d2));
    REQUIRE(w1.len == w2.len && memcmp(w1.s, w2.s, w1.len) == 0);
    pl_sb_free(&scratch), pl_sb_free(&w1), pl_sb_free(&w2);
    pl_json_doc_free(d2);
    pl_json_doc_free(d);
    return 0;
}
