/* chain.h - one forward pass through a chain of stages (stage.h), for a session over a
 * split model (pl_session_new_chain in session.h):
 *
 *     ids --host embed--> hidden --stage 0--> ... --stage k-1--> hidden --host head--> logits
 *
 * The host model holds the embedding and the head, and may hold layers too: those run on
 * the host's own state, as one more local stage in its place in layer order. The stages
 * must tile [0, n_layer) in order. A batch of ids is embedded at once, then goes through
 * the stages in frames of at most frame_cols columns, up to in_flight frames submitted to
 * a stage before its first result is collected (a remote stage computes while the next
 * frame travels), each frame handed on to the next stage as soon as it comes back; the
 * head runs for the last position only (or every one, all_rows). A host state made to
 * draft (pl_state_opts.draft: the model's MTP block, loaded with the head) absorbs every
 * pass's rows as pl_model_forward's does, so pl_model_draft drafts on the host. */
#ifndef PL_RUNTIME_CHAIN_H
#define PL_RUNTIME_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "../model/model.h"
#include "stage.h"

typedef struct {
    int frame_cols;  /* most columns one frame carries, 1 to PL_CHAIN_MAX_FRAME (default 512;
                        also capped by the host's batch and every stage's max_cols): a
                        prompt goes in as few frames as that allows, since a frame costs a
                        device wait and a read on every stage, and the GPU runs a frame of
                        more than 16 columns as a GEMM, of 16 or fewer column by column */
    bool no_prepare; /* no next pick prepared ahead (pl_chain_forward_ahead's pick_next) */
    int in_flight;   /* most frames submitted to a stage and not yet collected, 1 to
                        PL_CHAIN_MAX_IN_FLIGHT (default 4; also capped by each stage's
                        max_in_flight) */
} pl_chain_opts;

#define PL_CHAIN_MAX_FRAME     4096
#define PL_CHAIN_MAX_IN_FLIGHT 64
#define PL_CHAIN_MAX_STAGES    64 /* stages in one chain, the host's own layers included */

/* 512 columns a frame, 4 frames in flight. */
pl_chain_opts pl_chain_opts_default(void);

typedef struct pl_chain pl_chain;

/* A chain over host (which must hold the embedding and the head) and its state s (the
 * caller's: its ids, hidden and logits buffers are used, and its caches run the host's
 * own layers), then stages[0..n_stages) (borrowed: they must outlive the chain). Fails
 * with one line when the host's layers and the stages do not tile [0, n_layer) in order,
 * or a stage's width, context or limits do not fit. co NULL: the defaults. */
pl_status pl_chain_new(const pl_model *host, pl_state *s, pl_stage *const *stages, int n_stages,
                       const pl_chain_opts *co, pl_chain **out);
void pl_chain_free(pl_chain *c);

/* ids[0..n) at positions pos0.. through every stage; the logits of the last one land in
 * row 0 of the host state's logits, or with all_rows those of every one in rows 0..n-1
 * (n <= the state's n_logits). 1 <= n <= the host state's n_batch. */
pl_status pl_chain_forward(pl_chain *c, const int32_t *ids, int64_t n, int64_t pos0, bool all_rows);

/* Greedy decoding in fewer waits for the device: the pick of the last pass's logits (row
 * 0) and the start of the pass that feeds it, in one submit. pl_chain_pick_ahead records
 * the argmax into the host state's ids, embeds that id and runs the host's own layers on
 * it at pos0, and returns the id (the one wait). Then either pl_chain_forward_ahead runs
 * the rest of that pass (as pl_chain_forward(c, &id, 1, pos0, false) would: the same
 * logits), or pl_chain_drop_ahead takes the host's layers back to pos0 (a caller that
 * stops there). Only where pl_chain_can_pick_ahead says so: the host's own layers must be
 * able to go back one position (attention only), else they run when the id is pushed. */
bool pl_chain_can_pick_ahead(const pl_chain *c, int64_t pos0);
pl_status pl_chain_pick_ahead(pl_chain *c, int64_t pos0, int32_t *id);
/* pick_next: the caller's next call is pl_chain_pick_ahead(c, pos0 + 1) (or drop_ahead,
 * or a plain forward or rewind). Then, on a backend that records (backend.h's prepare),
 * that pick is prepared while the last stage works and run when its column comes back, so
 * the pick itself waits for nothing: the same ids and logits, the host's part of a token
 * recorded off the critical path. */
pl_status pl_chain_forward_ahead(pl_chain *c, int64_t pos0, bool pick_next);
/* Picks that ran through a prepared pass so far (tests, bench). */
int64_t pl_chain_prepared(const pl_chain *c);
pl_status pl_chain_drop_ahead(pl_chain *c, int64_t pos0);

/* Every stage can go back to n_past / make them all do it. A failed rewind sends every
 * stage back to 0 (a fresh start) and returns the failure. */
bool pl_chain_can_rewind(const pl_chain *c, int64_t n_past);
pl_status pl_chain_rewind(pl_chain *c, int64_t n_past);

#endif
