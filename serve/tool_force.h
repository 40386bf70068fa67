/* tool_force.h - tool_choice required / named enforced: the JSON Schema of one tool call in
 * the model's own format and the literal text around it, for the engine's constrained
 * decoding (pooled_sample_opts.json_schema, json_prefix, json_suffix).
 * Pure (no model, no network). Formats: Qwen's <tool_call>\n{"name", "arguments"}\n</tool_call>
 * and Llama 3's reply that is one {"name", "parameters"} object; Qwen3.5's XML calls
 * (<function=...>) are refused. */
#ifndef PL_SERVE_TOOL_FORCE_H
#define PL_SERVE_TOOL_FORCE_H

#include <stdbool.h>
#include <stddef.h>

#include "request.h"
#include "tool_parse.h"

#define TF_MAX_TOOLS 64 /* tools a required call chooses from (one anyOf of the schema) */

/* What a generation's output keeps to: prefix, one JSON value under schema, suffix. */
typedef struct {
    char *schema;                /* malloc'd JSON Schema text; NULL: free text */
    const char *prefix, *suffix; /* static text or NULL */
} tf_call;

/* The calls format of a chat template (NULL: none), and whether its calls are Qwen3.5's
 * XML rather than JSON. */
tp_calls tf_calls_format(const char *chat_template, bool *xml);
/* Whether r asks for a forced call (tool_choice required / named with tools). */
bool tf_forced(const srv_request *r);
/* *call: r's forced call in this template's format (call->schema NULL when r does not force
 * one). False with one line in err (for a 400) when it cannot be forced. */
bool tf_schema(const srv_request *r, const char *chat_template, tf_call *call, char *err,
               size_t cap);
void tf_call_free(tf_call *call);

#endif
