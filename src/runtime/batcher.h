/* batcher.h - several sessions of one model generating at once, each from its own thread:
 * one model pass at a time on the shared backend (the turn, handed straight to the first
 * in line, so generations advance id by id in turns), and the decode steps of every
 * session that is decoding run as one batched pass (continuous batching: a generation
 * joins and leaves between steps). Each session's ids are those it would get alone
 * (pl_session_push_batch keeps every column's bits). Used by the public API and by
 * `pooled serve`'s slots. */
#ifndef PL_RUNTIME_BATCHER_H
#define PL_RUNTIME_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "generate.h"
#include "session.h"

typedef struct pl_batcher pl_batcher;

/* batch (borrowed; NULL: no batched steps, only the turn): the scratch - and maybe the
 * cache slots - of steps of up to n_max sessions (pl_batch_new / pl_batch_new_slots). */
pl_status pl_batcher_new(pl_batch *batch, int n_max, pl_batcher **out);
void pl_batcher_free(pl_batcher *b);
/* Batched steps run so far, and the ids they appended. */
void pl_batcher_stats(pl_batcher *b, uint64_t *steps, uint64_t *columns);

/* The turn: hold it for any pass or buffer call on the backend. */
void pl_batcher_take(pl_batcher *b);
void pl_batcher_give(pl_batcher *b);

/* pl_generate on ses (called holding the turn; returns holding it) with go's on_token
 * called WITHOUT the turn, so that other generations run between this one's ids. With a
 * batch and no drafter, the prompt runs in this turn and each decode step (the append of
 * the last id and the pick of the next) in a batched pass with the other decoding
 * sessions'; else pl_generate itself, the turn given up around each id. */
pl_status pl_batcher_generate(pl_batcher *b, pl_session *ses, pl_sampler *smp,
                              const int32_t *prompt, int64_t n_prompt, const pl_gen_opts *go,
                              pl_gen_stats *stats);

#endif
