/* generate.h - the generation loop: run the prompt, then pick and feed one id at a time. */
#ifndef PL_RUNTIME_GENERATE_H
#define PL_RUNTIME_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "draft.h"
#include "sampler.h"
#include "session.h"

typedef struct {
    int64_t n_predict; /* most ids to generate */
    /* Called with each generated id before it is fed back; return false to stop after it
     * (an end-of-generation id, a stop the user asked for). May be NULL. */
    bool (*on_token)(void *ud, int32_t id);
    void *ud;
    /* Speculative decoding (session.h): drafts from this drafter are verified in batches,
     * with the very same ids as without it. NULL: one id per pass. The session's state
     * must be sized for it (pl_session_spec_max > 0), else it decodes plainly. */
    pl_drafter *drafter;
} pl_gen_opts;

typedef struct {
    int64_t n_prompt_run; /* prompt ids actually run (the rest was reused from the cache) */
    int64_t n_generated;  /* ids generated (handed to on_token) */
    int64_t n_decoded;    /* generated ids fed back through the model */
    double t_prompt;      /* seconds running the prompt */
    double t_decode;      /* seconds picking and feeding generated ids */
    int64_t n_steps;      /* decode passes of the model (verify passes with a drafter) */
    int64_t n_drafted;    /* drafts verified */
    int64_t n_accepted;   /* drafts accepted */
    int64_t n_shared;     /* decode passes shared with other sessions' (batcher.h) */
} pl_gen_stats;

/* Continue the session with prompt[0..n_prompt) (which normally repeats the session's
 * history plus new ids: the shared prefix is reused) and generate. The last generated id
 * is not fed back (nothing needs its logits); the next pl_session_set picks it up.
 * Running out of context is an error ("context full ..."); stats then say how far it got. */
pl_status pl_generate(pl_session *s, pl_sampler *smp, const int32_t *prompt, int64_t n_prompt,
                      const pl_gen_opts *o, pl_gen_stats *stats);

/* Monotonic seconds, for timings. */
double pl_now(void);

#endif
