/* responses.h - OpenAI's Responses API (POST /v1/responses: text and function calls): the
 * response object and its stream of events, for api.c's generation loop. */
#ifndef PL_SERVE_RESPONSES_H
#define PL_SERVE_RESPONSES_H

#include "api.h"

/* response.created, response.in_progress, response.output_item.added,
 * response.content_part.added */
void srv_responses_start(srv_gen_ctx *j);
/* response.output_text.delta */
bool srv_responses_delta(srv_gen_ctx *j, const char *s, size_t n);
/* response.output_text.done, response.content_part.done, response.output_item.done,
 * response.completed (or response.incomplete at the length limit); response.failed with
 * the failure */
void srv_responses_end(srv_gen_ctx *j, const srv_gen_result *g, const char *failure);
/* A tool call: a function_call item (call_id, name, arguments: compact JSON args[0..n)),
 * kept for the response object and, streaming, sent as response.output_item.added,
 * response.function_call_arguments.delta and .done, response.output_item.done. */
bool srv_responses_call(srv_gen_ctx *j, const char *call_id, const char *name, const char *args,
                        size_t n);
/* The whole response object (not streamed). */
void srv_responses_object(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g);

#endif
