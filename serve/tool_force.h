/* tool_force.h - tool_choice required / named enforced: the grammar (src/grammar) of one tool
 * call in the model's own format, for the engine's constrained decoding.
 * Pure (no model, no network). Formats: Qwen's <tool_call>\n{"name", "arguments"}\n</tool_call>
 * and Llama 3's reply that is one {"name", "parameters"} object; Qwen3.5's XML calls
 * (<function=...>) are refused. */
#ifndef PL_SERVE_TOOL_FORCE_H
#define PL_SERVE_TOOL_FORCE_H

#include <stdbool.h>
#include <stddef.h>

#include "request.h"
#include "tool_parse.h"

#define TF_MAX_TOOLS 64 /* tools a required call chooses from (one anyOf of the grammar) */

struct pl_grammar;

/* The calls format of a chat template (NULL: none), and whether its calls are Qwen3.5's
 * XML rather than JSON. */
tp_calls tf_calls_format(const char *chat_template, bool *xml);
/* Whether r asks for a forced call (tool_choice required / named with tools). */
bool tf_forced(const srv_request *r);
/* *g: r's forced call in this template's format (NULL when r does not force one). False
 * with one line in err (for a 400) when it cannot be forced. */
bool tf_grammar(const srv_request *r, const char *chat_template, struct pl_grammar **g, char *err,
                size_t cap);

#endif
