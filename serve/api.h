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
#include "metrics.h"
#include "request.h"

typedef struct {
    /* the status and whether the body is an event stream: called once, before any write */
    void (*head)(void *ud, int status, bool sse);
    bool (*write)(void *ud, const char *s, size_t n); /* false: the client is gone */
    void *ud;
    atomic_bool *cancel;  /* the client went away or the server stops */
    srv_metrics *metrics; /* each generation's ids and timings go there (may be NULL) */
} srv_out;

/* One generation being answered: shared by api.c and responses.c (the Responses API's
 * shapes). */
typedef struct {
    srv_engine *e;
    const srv_request *r;
    const srv_out *o;
    const char *model_id;
    char id[48];
    long long created;
    pl_strbuf text;  /* the reply so far (whole answers, and responses' streams) */
    bool out_failed; /* streaming: the client is gone */
    pl_strbuf lp[4]; /* logprobs not yet sent (chat: lp[0]; completions: tokens, values,
                      * tops, offsets) */
    size_t text_off; /* completions: the text offset of the next id */
    int64_t seq;     /* responses: the next event's sequence_number */
} srv_gen_ctx;

/* Send b (one or more events) and empty it; false once the client is gone. */
bool srv_send_event(srv_gen_ctx *j, pl_strbuf *b);

/* Answer r (already parsed) with the engine. id_no makes the response id unique. */
void srv_api_run(srv_engine *e, const srv_request *r, const char *model_id, uint64_t id_no,
                 const srv_out *o);

/* The error object of the API (Anthropic's for /v1/messages routes, else OpenAI's) for an
 * HTTP status, appended to b. */
void srv_api_error(pl_strbuf *b, bool anthropic, int status, const char *msg);

#endif
