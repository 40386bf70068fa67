/* grammar.h - JSON Schema compiled into a byte-level matcher, for constrained decoding.
 *
 * pl_grammar_compile turns a schema (the common subset: type object / array / string /
 * number / integer / boolean / null or a list of them, enum, const, properties, required,
 * additionalProperties, items, minItems / maxItems, anyOf; annotations such as title,
 * description, format, default are ignored; validation keywords outside the subset such as
 * $ref, oneOf, allOf, not, pattern, minimum, minLength are refused with one line) into an
 * immutable pl_grammar. pl_grammar_any_object is "any JSON object" (json_object mode).
 *
 * What the grammar generates, so that every output parses and validates:
 *   - compact JSON: no whitespace between tokens;
 *   - an object with properties lists them in the schema's order, each at most once, every
 *     required one present; other keys are not generated (additionalProperties false or
 *     not). An object without properties takes any keys (strings) with additionalProperties'
 *     schema as their values (any value when absent or true, none when false);
 *   - strings are valid UTF-8 (escapes \" \\ \/ \b \f \n \r \t \uXXXX), no control bytes;
 *   - numbers: at most 15 digits before the point, 15 after, 2 in the exponent (integers:
 *     15 digits, no fraction or exponent), so they stay finite doubles and exact integers;
 *   - enum / const values are written exactly as pl_json_write writes them (compact);
 *   - nesting of "any value" stops at PL_GRAMMAR_MAX_FRAMES frames.
 *
 * The matcher (pl_gstate) is a set of at most PL_GRAMMAR_MAX_CONFIGS pushdown
 * configurations (one per live anyOf alternative; duplicates merged), each a stack of at
 * most PL_GRAMMAR_MAX_FRAMES frames, so one byte costs O(configs * frames) and memory is
 * fixed: no exponential blow-up. Every configuration it keeps can still be completed (no
 * dead ends), so a decoder that only takes allowed bytes always ends with a valid value. */
#ifndef PL_GRAMMAR_GRAMMAR_H
#define PL_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/json.h"
#include "../base/status.h"

#define PL_GRAMMAR_MAX_SCHEMA_BYTES (1 << 20) /* schema text */
#define PL_GRAMMAR_MAX_NODES        4096      /* compiled schema nodes (subschemas) */
#define PL_GRAMMAR_MAX_DEPTH        16        /* schema nesting (objects / arrays / anyOf) */
#define PL_GRAMMAR_MAX_LITERALS     65536     /* bytes of all enum / const / key literals */
#define PL_GRAMMAR_MAX_ITEMS        65535     /* minItems / maxItems */
#define PL_GRAMMAR_MAX_FRAMES       48        /* matcher stack (any-value nesting) */
#define PL_GRAMMAR_MAX_CONFIGS      64        /* live configurations of the matcher */

typedef struct pl_grammar pl_grammar;

/* Compile schema text (JSON). One-line error (PL_ERR_ARG) for a schema it refuses. */
pl_status pl_grammar_compile(const char *schema, size_t len, pl_grammar **out);
/* The same from a parsed schema. */
pl_status pl_grammar_compile_json(const pl_json *schema, pl_grammar **out);
/* Any JSON object (OpenAI's response_format json_object). */
pl_status pl_grammar_any_object(pl_grammar **out);
/* Put literal text around g's values (in place): prefix, the value, suffix, e.g. a tool
 * call's "<tool_call>\n" and "\n</tool_call>" (at most 4096 bytes together; either may be
 * empty). Wrapping again wraps the whole. */
pl_status pl_grammar_wrap(pl_grammar *g, const char *prefix, size_t plen, const char *suffix,
                          size_t slen);
void pl_grammar_free(pl_grammar *g);

/* ---- matching ---- */

typedef struct pl_gstate pl_gstate;

/* A matcher at the start of the value. */
pl_status pl_gstate_new(const pl_grammar *g, pl_gstate **out);
void pl_gstate_free(pl_gstate *s);
/* Back to the start. */
void pl_gstate_reset(pl_gstate *s);
/* Take bytes b[0..n): true if they may come next (the state advanced); false if not (the
 * state is unchanged). */
bool pl_gstate_feed(pl_gstate *s, const void *b, size_t n);
/* True when the bytes so far are a whole value (the end may come now). */
bool pl_gstate_complete(const pl_gstate *s);
/* True when the value is complete and nothing may follow it (a closed object, array or
 * string at the top: only the end may come). */
bool pl_gstate_done(const pl_gstate *s);
/* Would bytes b[0..n) be taken? (The state is not changed.) */
bool pl_gstate_accepts(const pl_gstate *s, const void *b, size_t n);

/* ---- internal: the masker (token_mask.c) walks configurations one byte at a time ---- */

/* A packed set of configurations; step writes the set after byte c into out (room for
 * pl_gset_max_bytes) and returns its size in bytes (0: the byte is refused). */
size_t pl_gset_step(const pl_grammar *g, const uint8_t *set, size_t n, uint8_t c, uint8_t *out);
bool pl_gset_complete(const pl_grammar *g, const uint8_t *set, size_t n);
size_t pl_gset_max_bytes(void);
/* Text that leaves a string's body in its body (no closing quote, whole escapes and UTF-8
 * sequences), and whether every configuration of a set is in a string's body: then such
 * text is taken and changes nothing. */
bool pl_grammar_plain_text(const void *b, size_t n);
bool pl_gset_in_string(const uint8_t *set, size_t n);
/* The current set of a matcher, and its grammar. */
const uint8_t *pl_gstate_set(const pl_gstate *s, size_t *n);
const pl_grammar *pl_gstate_grammar(const pl_gstate *s);

#endif
