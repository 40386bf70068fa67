/* session.h - one conversation with a model: the KV cache it has built and the ids that
 * are in it, reused from one turn to the next.
 *
 * pl_session_set(ids) makes the cache hold exactly `ids`: the longest prefix shared with
 * what is cached is kept and only the rest is run (in batches of n_batch). Because every
 * token's keys and values depend only on the tokens before it, and the backends compute
 * each row independently of the batch it came in, the result is exactly that of a fresh
 * run over the whole text. */
#ifndef PL_RUNTIME_SESSION_H
#define PL_RUNTIME_SESSION_H

#include <stdint.h>

#include "../model/model.h"
#include "sampler.h"

typedef struct pl_session pl_session;

pl_status pl_session_new(const pl_model *m, const pl_state_opts *o, pl_session **out);
void pl_session_free(pl_session *s);

/* Forget the cache (the next set runs everything). */
void pl_session_reset(pl_session *s);

/* Make the cache hold ids[0..n) and leave the logits after the last one ready. At least
 * the last id is always run (its logits are needed). *n_run (may be NULL) gets how many
 * ids were run. n must not exceed the context. */
pl_status pl_session_set(pl_session *s, const int32_t *ids, int64_t n, int64_t *n_run);

/* Append one id (normally the one just generated) and compute the logits after it. */
pl_status pl_session_push(pl_session *s, int32_t id);

/* Choose the next id from the current logits: on the device when the sampler is a plain
 * argmax, else on the host with the cached ids as the penalty context. */
pl_status pl_session_pick(pl_session *s, pl_sampler *smp, int32_t *out);

/* Copy the current logits (n_vocab values) to the host. */
pl_status pl_session_logits(pl_session *s, float *out);

/* The ids in the cache. */
const int32_t *pl_session_ids(const pl_session *s, int64_t *n);
int64_t pl_session_n_ctx(const pl_session *s);
pl_state *pl_session_state(pl_session *s);

#endif
