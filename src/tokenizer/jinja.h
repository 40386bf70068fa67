/* jinja.h - a small Jinja2 interpreter for chat templates (tokenizer.chat_template).
 *
 * It covers what real chat templates use (Qwen3, Qwen3.5, Llama 3, SmolLM2, ...): text,
 * {{ }}, {% %}, {# #} with `-` whitespace control and transformers' settings (trim_blocks,
 * lstrip_blocks); if/elif/else, for (tuple targets, `if` filter, else, loop.*, break and
 * continue), set (names, namespace attributes, blocks), macro with defaults, call of
 * macros; expressions with Python-like values, filters, tests, string/dict methods, slicing
 * and namespace(). Values are immutable except namespaces, as in transformers' sandbox.
 *
 * Templates and contexts are untrusted: parsing and rendering are bounded (nesting depth,
 * macro recursion, steps, output size, memory), and every failure is a one-line error. */
#ifndef PL_TOKENIZER_JINJA_H
#define PL_TOKENIZER_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/json.h"
#include "../base/status.h"

typedef struct pl_jinja pl_jinja;

pl_status pl_jinja_parse(const char *src, size_t len, pl_jinja **out);
void pl_jinja_free(pl_jinja *t);

/* The variables a template sees. Build one, add variables, render, free. Values given as
 * JSON keep JSON's types (integral numbers are ints). */
typedef struct pl_jinja_ctx pl_jinja_ctx;
pl_jinja_ctx *pl_jinja_ctx_new(void);
void pl_jinja_ctx_free(pl_jinja_ctx *c);
pl_status pl_jinja_set_json(pl_jinja_ctx *c, const char *name, const pl_json *v);
pl_status pl_jinja_set_str(pl_jinja_ctx *c, const char *name, const char *s);
pl_status pl_jinja_set_bool(pl_jinja_ctx *c, const char *name, bool b);

/* Render; *out is malloc'd and NUL-terminated. A raise_exception() in the template fails
 * with its message. */
pl_status pl_jinja_render(const pl_jinja *t, const pl_jinja_ctx *c, char **out, size_t *out_len);

#endif
