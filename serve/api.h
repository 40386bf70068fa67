/* api.h - a request answered in its API's shape: OpenAI's chat.completion /
 * text_completion objects and their SSE chunks, Anthropic's message object and its event
 * stream, llama.cpp server's tokenize / detokenize, and each API's error object. Runs on
 * the server's worker thread; the HTTP side is behind srv_out. */
#ifndef PL_SERVE_API_H
#define PL_SERVE_API_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "engine.h"
#include "request.h"

typedef struct {
    /* the status and whether the body is an event stream: called once, before any write */
    void (*head)(void *ud, int status, bool sse);
    bool (*write)(void *ud, const char *s, size_t n); /* false: the client is gone */
    void *ud;
    atomic_bool *cancel; /* the client went away or the server stops */
} srv_out;

/* Answer r (already parsed) with the engine. id_no makes the response id unique. */
void srv_api_run(srv_engine *e, const srv_request *r, const char *model_id, uint64_t id_no,
                 const srv_out *o);

/* Answer r as if the model had written pieces (in this order) and ended as g says: the
 * same reply parser and response builder as srv_api_run without a model, for tests of the
 * exact objects and events (tests/serve/api_reply_test.c). fmt: how to split the reply. */
void srv_api_reply(const srv_request *r, const tp_opts *fmt, const char *model_id, uint64_t id_no,
                   long long created, const char *const *pieces, int n_pieces,
                   const srv_gen_result *g, const srv_out *o);

/* The error object of the API (Anthropic's for /v1/messages routes, else OpenAI's) for an
 * HTTP status, appended to b. */
void srv_api_error(pl_strbuf *b, bool anthropic, int status, const char *msg);

#endif
