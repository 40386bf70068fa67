/* json_schema_fuzz.c - libFuzzer target for the JSON Schema compiler (src/grammar).
 *
 * Any bytes as a schema: refused with one non-empty line, or compiled. A compiled grammar
 * is walked at random through the bytes it allows (each checked by stepping the matcher):
 * it never reaches a dead end (some byte may follow, or the value is complete), and a
 * complete value parses as JSON and validates against the schema (tests/grammar's
 * independent validator). Inputs of odd length wrap the grammar in "<t>" ... "</t>"
 * (pl_grammar_wrap, as a tool call's tags), stripped before the check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../grammar/json_check.h"
#include "grammar/grammar.h"

#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "json_schema_fuzz: %s failed (line %d): ", #cond, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_TEXT 600

static uint64_t rng;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    rng = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < size; i++) rng = (rng ^ data[i]) * 0x100000001b3ull;
    rng |= 1;
    pl_grammar *g = NULL;
    pl_clear_error();
    if (pl_grammar_compile((const char *)data, size, &g)) {
        const char *e = pl_last_error();
        REQUIRE(!g && *e && !strchr(e, '\n'), "refusal '%s'", e);
        return 0;
    }
    bool wrap = size % 2;
    if (wrap) REQUIRE(pl_grammar_wrap(g, "<t>", 3, "</t>", 4) == PL_OK, "%s", pl_last_error());
    pl_gstate *s = NULL;
    uint8_t *next = malloc(pl_gset_max_bytes());
    REQUIRE(pl_gstate_new(g, &s) == PL_OK && next, "%s", pl_last_error());
    char text[MAX_TEXT];
    for (int w = 0; w < 3; w++) {
        pl_gstate_reset(s);
        size_t n = 0;
        bool complete = pl_gstate_complete(s);
        while (n < MAX_TEXT) {
            uint8_t allowed[256], closing[256];
            int na = 0, nc = 0;
            size_t len;
            const uint8_t *set = pl_gstate_set(s, &len);
            for (int c = 0; c < 256; c++)
                if (pl_gset_step(g, set, len, (uint8_t)c, next)) {
                    allowed[na++] = (uint8_t)c;
                    if (strchr("\"]},0", c) && c) closing[nc++] = (uint8_t)c;
                }
            REQUIRE(na > 0 || complete, "a dead end after %.*s", (int)n, text);
            if (complete && (na == 0 || rnd() % 4 == 0)) break;
            /* lean towards bytes that close values, so that walks end */
            uint8_t c = nc && rnd() % 2 ? closing[rnd() % nc] : allowed[rnd() % na];
            REQUIRE(pl_gstate_feed(s, &c, 1), "byte %d refused after %.*s", c, (int)n, text);
            text[n++] = (char)c;
            complete = pl_gstate_complete(s);
        }
        if (complete) {
            pl_json_doc *d = NULL, *sd = NULL;
            char *v = text;
            if (wrap) {
                REQUIRE(n >= 7 && !memcmp(text, "<t>", 3) && !memcmp(text + n - 4, "</t>", 4),
                        "'%.*s' is not wrapped", (int)n, text);
                v += 3, n -= 7;
            }
            REQUIRE(pl_json_parse(v, n, &d) == PL_OK, "'%.*s' is no JSON: %s", (int)n, v,
                    pl_last_error());
            REQUIRE(pl_json_parse((const char *)data, size, &sd) == PL_OK, "schema");
            REQUIRE(jc_valid(pl_json_root(d), pl_json_root(sd)), "'%.*s' does not validate", (int)n,
                    v);
            pl_json_doc_free(d);
            pl_json_doc_free(sd);
        }
    }
    free(next);
    pl_gstate_free(s);
    pl_grammar_free(g);
    return 0;
}
