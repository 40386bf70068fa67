/* responses.h - OpenAI's Responses API (POST /v1/responses, text only): the response
 * object and its stream of events, for api.c's generation loop. */
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
/* The whole response object (not streamed). */
void srv_responses_object(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g);

#endif
