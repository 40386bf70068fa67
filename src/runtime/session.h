/* session.h - one conversation with a model: the KV cache it has built and the ids that
 * are in it, reused from one turn to the next.
 *
 * pl_session_set(ids) makes the cache hold exactly `ids`: the longest prefix shared with
 * what is cached is kept and only the rest is run (in batches of n_batch). Because every
 * token's keys and values depend only on the tokens before it, and the backends compute
 * each row independently of the batch it came in, the result is exactly that of a fresh
 * run over the whole text. The same holds for a session over a chain of stages
 * (pl_session_new_chain: a split model, the room), bit for bit. */
#ifndef PL_RUNTIME_SESSION_H
#define PL_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "../model/model.h"
#include "chain.h"
#include "sampler.h"
#include "stage.h"

typedef struct pl_session pl_session;

pl_status pl_session_new(const pl_model *m, const pl_state_opts *o, pl_session **out);

/* A session over a split model: host holds the embedding and the head (pl_model_opts.ends)
 * and some or none of the layers, stages[0..n_stages) the others, together tiling
 * [0, n_layer) in layer order (chain.h; co NULL: 16-column frames, 4 in flight). The
 * stages are borrowed: they must outlive the session, and serve no other meanwhile. Every
 * call below behaves as for one whole model, with the same logits and ids: the shared
 * prefix is kept by rewinding every stage (pl_stage_rewind), and where one cannot go back
 * the session starts over from 0. pl_session_new(m) is this with m whole and no stages. */
pl_status pl_session_new_chain(const pl_model *host, const pl_state_opts *o,
                               pl_stage *const *stages, int n_stages, const pl_chain_opts *co,
                               pl_session **out);
void pl_session_free(pl_session *s);

/* Forget the cache (the next set runs everything); a chain's stages go back to 0. */
void pl_session_reset(pl_session *s);

/* Make the cache hold ids[0..n) and leave the logits after the last one ready. At least
 * the last id is always run (its logits are needed). *n_run (may be NULL) gets how many
 * ids were run. n must not exceed the context. */
pl_status pl_session_set(pl_session *s, const int32_t *ids, int64_t n, int64_t *n_run);

/* Append one id (normally the one just generated) and compute the logits after it. */
pl_status pl_session_push(pl_session *s, int32_t id);

/* ---- continuous batching ----
 *
 * Several sessions of one model each append one id in one pass (pl_model_forward_batch):
 * the weights are read once for all of them, each id attends over its own session's cache
 * at its own position. A pl_batch is the scratch of such a pass (a small state of the
 * model without a cache), for up to n_max sessions. */
typedef struct pl_batch pl_batch;
pl_status pl_batch_new(const pl_model *m, int n_max, pl_batch **out);
/* A batch that also holds the caches of its sessions (n_max slots of o's n_ctx and
 * kv_type: pl_state_opts.n_slots), where the model's family keeps slots and the cache is
 * f16 or f32; else as pl_batch_new. Sessions made by pl_batch_session_new then take one
 * RoPE, cache store and attention for all of them per layer (instead of one per session). */
pl_status pl_batch_new_slots(const pl_model *m, int n_max, const pl_state_opts *o, pl_batch **out);
/* A session of slot `slot` (0 .. n_max - 1, each for one session at a time) of a batch
 * made by pl_batch_new_slots, with opts o (the batch's n_ctx and kv_type): its cache lives
 * in the batch, which must outlive it. A batch without slots gives a session of its own. */
pl_status pl_batch_session_new(pl_batch *b, int slot, const pl_state_opts *o, pl_session **out);
void pl_batch_free(pl_batch *b);
/* pl_session_push(ss[i], ids[i]) for i in [0, n), in one pass: the same ids in the caches
 * and the logits ready, as after n pushes. Each session must be whole (no chain) and of the
 * batch's model, none twice; a batch of one is exactly pl_session_push. On failure every
 * session's cache is cut back to the ids it held before. */
pl_status pl_session_push_batch(pl_batch *b, pl_session *const *ss, const int32_t *ids, int n);
/* After a pl_session_push_batch of n > 1 sessions (and before the next): the largest
 * logit's id of each of its n columns, in its order, found on the device and read back at
 * once - what pl_session_pick gives each session with a plain argmax sampler, in one read
 * instead of n. An id outside the vocabulary (-1) marks a column without a finite logit:
 * pl_session_pick then gives its error. Fails after any other call. */
pl_status pl_batch_argmax(pl_batch *b, int n, int32_t *ids);

/* Choose the next id from the current logits: on the device when the sampler is a plain
 * argmax, else on the host with the cached ids as the penalty context. */
pl_status pl_session_pick(pl_session *s, pl_sampler *smp, int32_t *out);

/* Greedy decoding with the ids kept on the device: each step's argmax is written where
 * the next step's embedding reads it, and the host reads every id one step late, so a
 * backend that records its work (the GPU) runs step t while the host records step t+1.
 * Generates up to n ids from the current logits; on_token (may be NULL) gets each one and
 * returns false to stop after it. The ids are those of pl_session_pick + pl_session_push
 * with an argmax sampler, and so is the cache after it (every generated id but the last
 * is in it); the logits are left ready only if no step was recorded past the last id.
 * *n_gen gets how many ids were generated. Over a chain of stages the ids cross the host
 * anyway: each step is an argmax on the device and a push, never a step ahead. */
pl_status pl_session_greedy(pl_session *s, int64_t n, bool (*on_token)(void *ud, int32_t id),
                            void *ud, int64_t *n_gen);

/* ---- speculative decoding ----
 *
 * A verify pass runs [last, d1..dk] (last: the id just chosen, not yet in the cache; d:
 * drafts of what follows it) as one batch with logits for every column, then chooses the
 * id at each position with the sampler exactly as plain decoding would (the same
 * penalty context, the same counter-based draw). Drafts are accepted while they equal the
 * choice; the first mismatch (or the end of the drafts) ends the step with the model's
 * own choice. The cache then holds last and the accepted drafts, and equals the cache of
 * plain decoding: rejected KV rows are dropped by position, a recurrent state goes back
 * to the snapshot its layers call kept. Needs the state's n_logits, n_batch and (for
 * recurrent models) n_snap to be at least 1 + k; k is cut to what they allow. */

/* The most drafts one verify pass can check: min(n_logits, n_batch, n_snap) - 1, at most
 * PL_SPEC_MAX (0: the state was not sized for speculation). */
#define PL_SPEC_MAX 15
int pl_session_spec_max(const pl_session *s);

/* One verify pass. out (room for k + 1) gets the accepted drafts and then the model's own
 * id, *n_out their count (1 to k + 1); that last id is not in the cache (like an id from
 * pl_session_pick: pass it as the next step's last). The logits are not left ready. */
pl_status pl_session_spec_step(pl_session *s, pl_sampler *smp, int32_t last, const int32_t *drafts,
                               int k, int32_t *out, int *n_out);

/* Up to max drafts (max <= PL_SPEC_MAX) from the model's own draft block (pl_model_draft)
 * of the ids after last (the id just chosen, not yet run) into out; returns how many. 0
 * when the session cannot: a state not made with opts.draft, or its last position not
 * run by the last forward pass (drafts only: the output never depends on them). Over a
 * chain the block runs on the host, which holds it with the head. */
int pl_session_draft_model(pl_session *s, int32_t last, int max, int32_t *out);

/* Keep only the first n cached ids (a caller that stops inside accepted drafts); a
 * recurrent state that cannot go back there runs them again from 0. */
pl_status pl_session_truncate(pl_session *s, int64_t n);

/* Run ids[0..n) after the cached ids (in passes of the state's n_batch) and leave the logits
 * after the last one ready. Fails when they do not fit in the context. */
pl_status pl_session_append(pl_session *s, const int32_t *ids, int64_t n);

/* Run ids[0..n) (1 to pl_session_spec_max + 1 of them) after the cached ids in one pass,
 * as a verify pass does, and give in next[j] the largest logit's id after ids[j] (what a
 * plain step's argmax picks there). The cache keeps all n (pl_session_truncate drops what
 * the caller rejects); the logits are not left ready. */
pl_status pl_session_verify(pl_session *s, const int32_t *ids, int n, int32_t *next);

/* Copy the current logits (n_vocab values) to the host. */
pl_status pl_session_logits(pl_session *s, float *out);
/* Whether logits are ready (what pl_session_logits and pl_session_pick need). */
bool pl_session_has_logits(const pl_session *s);

/* The ids in the cache. */
const int32_t *pl_session_ids(const pl_session *s, int64_t *n);
/* The chain a session over stages runs (NULL: one over the whole model). */
const pl_chain *pl_session_chain(const pl_session *s);
int64_t pl_session_n_ctx(const pl_session *s);
/* The state whose logits (and ids buffer) the session uses: over a chain, the host's. */
pl_state *pl_session_state(pl_session *s);

#endif
