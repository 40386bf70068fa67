/* engine.h - what the server asks of the model, in one place: the prompt of a request as
 * ids (chat template or plain text), tokenize / detokenize, and one generation with
 * sampling, stop strings, a length limit and a cancel flag. engine.c is the only file of
 * serve/ that calls into the model, and it does so through the public API (include/
 * pooled.h) only, as any program embedding libpooled would.
 *
 * Slots: the engine holds N sessions (each its own KV cache) of a model opened with
 * n_parallel N, so that generating sessions share each decode step in one batched pass
 * (continuous batching, pooled.h). Every call may come from any thread; up to N
 * generations run at once, each on the free slot whose cache shares the longest prefix
 * with its prompt if that prefix is at least half the prompt, else on the least recently
 * used free slot (the server runs no more than N). */
#ifndef PL_SERVE_ENGINE_H
#define PL_SERVE_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pooled.h>

#include "request.h"
#include "tool_force.h"
#include "tool_parse.h"

typedef struct srv_engine srv_engine;
struct pooled_model;

/* Over an open model (borrowed: it outlives the engine), n_slots sessions of it. NULL with
 * the reason in err when a session cannot be made or out of memory. */
srv_engine *srv_engine_new(struct pooled_model *m, int n_slots, char *err, size_t cap);
void srv_engine_free(srv_engine *e);
/* on: an end-of-generation id does not end a generation (`pooled serve --ignore-eos`, as
 * `pooled run --ignore-eos`): only max_tokens, the context, a stop string or a cancel do.
 * Set before the first request. */
void srv_engine_set_ignore_eos(srv_engine *e, bool on);
/* --spec: the speculative decoding of every generation (POOLED_SPEC_*; the model opened for
 * it): the same ids in fewer passes. A request with logprobs or a JSON constraint decodes
 * plainly (pooled.h). Set before the first request. */
void srv_engine_set_spec(srv_engine *e, int spec);
int64_t srv_engine_n_ctx(const srv_engine *e);
int srv_engine_n_slots(const srv_engine *e);
/* Whether the slots' decode steps run batched (more than one slot, a model with a batched
 * step: the llama family). */
bool srv_engine_batched(const srv_engine *e);
/* Batched decode steps run so far, and the ids they appended (one per slot and step). */
void srv_engine_batch_stats(srv_engine *e, uint64_t *steps, uint64_t *columns);

/* The ids a request's prompt is: chat / messages / count_tokens through the chat template
 * (with the request's tools and tool calls), a completion's prompt as `pooled run -p`
 * tokenizes it. *ids is malloc'd. fmt (may be NULL): how to split the reply (reasoning,
 * tool calls), from the template and the request. False with the reason in err. */
bool srv_engine_prompt(srv_engine *e, const srv_request *r, int32_t **ids, int64_t *n_ids,
                       tp_opts *fmt, char *err, size_t cap);
/* The conversation of a chat / messages request as the chat template reads it (Hugging
 * Face's apply_chat_template shapes, pooled_chat_render_json's): *msgs a JSON array of
 * messages with role and content, an assistant's tool_calls (arguments as objects) and
 * reasoning_content, a tool message's tool_call_id (malloc'd); *tools the tool list (r's
 * own text, NULL without tools or with tool_choice none). */
bool srv_chat_context(const srv_request *r, char **msgs, const char **tools, char *err, size_t cap);

/* /tokenize: ids of r->prompt (add_special, parse_special); with_pieces also each id's
 * text (*pieces: n malloc'd strings, freed by the caller). */
bool srv_engine_tokenize(srv_engine *e, const srv_request *r, int32_t **ids, int64_t *n_ids,
                         char ***pieces, char *err, size_t cap);
/* /detokenize: the text of ids (each checked against the vocabulary). *text is malloc'd. */
/* The text of one id (special tokens shown), malloc'd in *text (*n bytes); false when out
 * of memory or the id is not in the vocabulary. */
bool srv_engine_piece(srv_engine *e, int32_t id, char **text, size_t *n);
bool srv_engine_detokenize(srv_engine *e, const int32_t *ids, int64_t n, char **text, char *err,
                           size_t cap);

typedef enum {
    SRV_FINISH_EOG,    /* the model ended its turn */
    SRV_FINISH_LENGTH, /* max_tokens or the end of the context */
    SRV_FINISH_STOP,   /* a stop string (not part of the text) */
    SRV_FINISH_CANCEL, /* the client went away, or the server stops */
} srv_finish;

/* One generated id's log-probability (the log-softmax of the logits the sampler chose
 * from: after the penalties, before the temperature) and the most likely ids'. */
typedef pooled_logprob srv_logprob;

typedef struct {
    /* with r->logprobs >= 0: each generated id (the end-of-turn id not included), before
     * its text is emitted; may be NULL */
    void (*logprob)(void *ud, const srv_logprob *lp);
    /* text as it is settled: whole UTF-8, never part of a stop string; false stops */
    bool (*emit)(void *ud, const char *text, size_t n);
    void *ud;
    atomic_bool *cancel; /* checked before each id */
    /* reasoning ids counted (res->n_reasoning): 0 no (the template has no <think>), 1 from
     * a <think> the reply opens, 2 from the start (the prompt ended inside <think>) */
    int think;
} srv_gen_io;

typedef struct {
    srv_finish finish;
    int stop_index;       /* which stop string, for SRV_FINISH_STOP */
    int64_t n_prompt;     /* ids of the prompt */
    int64_t n_cached;     /* of them, found in the slot's cache (not run again) */
    int64_t n_completion; /* ids generated, the end-of-turn id not counted */
    int64_t n_reasoning;  /* of them, ids of <think>...</think> (tags included; io->think) */
    int64_t n_drafted;    /* --spec: drafts verified, and of them accepted */
    int64_t n_accepted;
    double t_first;  /* seconds from the start to the first id (-1: none) */
    double t_decode; /* seconds from the first id to the last */
} srv_gen_result;

/* tool_choice required / named: *call the schema of one call in the model's format and the
 * text around it (call->schema NULL when r forces none; tf_call_free). False (err, for a
 * 400) when it cannot be forced (serve/tool_force.h). */
bool srv_engine_forced_call(srv_engine *e, const srv_request *r, tf_call *call, char *err,
                            size_t cap);
/* Generate after ids[0..n) with r's sampling, max_tokens and stop strings; con (may be NULL
 * or have no schema): the JSON the output keeps to (r->schema, or a forced call's). On a
 * free slot (waits for one while all are busy); the slot keeps what its cache holds, so a
 * conversation's next turn reuses the shared prefix.
 * False (err) when the model fails or the prompt does not fit the context. */
bool srv_engine_generate(srv_engine *e, const srv_request *r, const tf_call *con,
                         const int32_t *ids, int64_t n, const srv_gen_io *io, srv_gen_result *res,
                         char *err, size_t cap);

#endif
