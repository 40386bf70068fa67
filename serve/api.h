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
    char id[64];
    char call_sfx[40]; /* call ids: call_ / toolu_ + this + the call's number */
    long long created;
    /* The model's text goes through the reply parser (tool_parse.c) into text, reasoning
     * and tool calls, each sent in its API's shape. */
    tp_parser *tp;
    pl_strbuf text;      /* the reply so far (whole answers; responses: the open message's) */
    pl_strbuf reasoning; /* whole answers: the reasoning (responses: the open item's) */
    pl_strbuf calls;     /* whole answers: the calls' JSON objects, comma-separated
                          * (responses: every closed output item, streamed or not) */
    int n_calls;
    char block;      /* Anthropic stream: the open content block, 't'ext, 'r'easoning, 0 none */
    int n_blocks;    /* Anthropic stream: content blocks started */
    bool out_failed; /* streaming: the client is gone */
    pl_strbuf lp[4]; /* logprobs not yet sent (chat: lp[0]; completions: tokens, values,
                      * tops, offsets) */
    size_t text_off; /* completions: the text offset of the next id */
    int64_t seq;     /* responses: the next event's sequence_number */
    char item;       /* responses: the open output item, 't' message, 'r' reasoning, 0 none */
    int n_items;     /* responses: output items opened (the next one's output_index) */
} srv_gen_ctx;

/* Send b (one or more events) and empty it; false once the client is gone. */
bool srv_send_event(srv_gen_ctx *j, pl_strbuf *b);

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
