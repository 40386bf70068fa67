/* responses.h - OpenAI's Responses API (POST /v1/responses: reasoning, text and function
 * calls as output items): the response object and its stream of events, for api.c's
 * generation loop. */
#ifndef PL_SERVE_RESPONSES_H
#define PL_SERVE_RESPONSES_H

#include "api.h"

/* Streaming: response.created, response.in_progress. */
void srv_responses_start(srv_gen_ctx *j);
/* A piece of text (kind 't', the message item's) or reasoning ('r', the reasoning item's):
 * kept; a piece of the other kind than the open item's closes it and opens the next.
 * Streaming, an item is opened with response.output_item.added and
 * response.content_part.added, a piece sent as response.output_text.delta (or
 * response.reasoning_text.delta), an item closed with response.output_text.done (or
 * reasoning_text), response.content_part.done and response.output_item.done. False when
 * memory ran out or the client is gone. */
bool srv_responses_piece(srv_gen_ctx *j, char kind, const char *s, size_t n);
/* Streaming, the end: the open item closed (an empty message item when the reply had no
 * item), then response.completed (or response.incomplete at the length limit), or
 * response.failed with the failure. */
void srv_responses_end(srv_gen_ctx *j, const srv_gen_result *g, const char *failure);
/* A tool call: the open item closed, a function_call item (call_id, name, arguments:
 * compact JSON args[0..n)) kept for the response object and, streaming, sent as
 * response.output_item.added, response.function_call_arguments.delta and .done,
 * response.output_item.done. */
bool srv_responses_call(srv_gen_ctx *j, const char *call_id, const char *name, const char *args,
                        size_t n);
/* The whole response object (not streamed), its open item closed as srv_responses_end does. */
void srv_responses_object(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g);

#endif
