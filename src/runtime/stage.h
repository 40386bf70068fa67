/* stage.h - a stage: something that runs layers [first, last) of a model over columns of
 * hidden state, owning those layers' KV caches and recurrent states. A session drives a
 * chain of them (session.h, pl_session_new_chain): embed on the host, stage 0, stage 1,
 * ..., head on the host. A stage is local (a pl_model holding the layers, and its own
 * pl_state) or remote (the room: the same calls over a link).
 *
 * The methods are shaped so a remote stage can pipeline: submit hands over a frame of
 * n columns and may return before they are computed; collect returns the frames' results
 * in submit order, waiting for the next one if need be. A local stage computes in submit
 * and queues the result. At the boundary the hidden state is host f32 [n][n_embd]:
 * hidden[i * n_embd + j] is value j of column i (the token at position pos0 + i).
 *
 * The struct is public so another file (room/) can make its own kind of stage: fill the
 * fields and the methods table; pl_stage_* check the arguments before calling it. */
#ifndef PL_RUNTIME_STAGE_H
#define PL_RUNTIME_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "../model/model.h"

typedef struct pl_stage pl_stage;

typedef struct {
    const char *kind; /* "local", "remote", ... for messages */
    /* Run the layers over hidden[0..n) at positions pos0..pos0+n-1 (the columns are copied
     * before it returns). tag comes back with the result. 1 <= n <= max_cols, at most
     * max_in_flight frames submitted and not collected. pos0 == 0 starts afresh (as
     * pl_model_layers); otherwise every position before pos0 must be in the stage's caches
     * and its recurrent states at pos0. */
    pl_status (*submit)(pl_stage *st, const float *hidden, int64_t n, int64_t pos0, uint64_t tag);
    /* The oldest submitted frame's result: its n columns into hidden_out (room for the n
     * it was submitted with), *n and *tag as submitted. Fails when nothing is in flight, or
     * with the frame's own error (a failed frame is still taken off the queue). */
    pl_status (*collect)(pl_stage *st, float *hidden_out, int64_t *n, uint64_t *tag);
    /* Whether the stage can go back to holding exactly positions [0, n_past), and doing
     * it, with pl_state_rewind's rules (0: a fresh start, always possible). Frames not yet
     * collected are dropped. rewind fails with a one-line reason, the stage unchanged,
     * where can_rewind says no. */
    bool (*can_rewind)(const pl_stage *st, int64_t n_past);
    pl_status (*rewind)(pl_stage *st, int64_t n_past);
    void (*free)(pl_stage *st);
} pl_stage_methods;

struct pl_stage {
    const pl_stage_methods *m;
    int first, last;   /* the layers it runs, [first, last) of n_layer */
    int n_layer;       /* the model's whole depth */
    int n_embd;        /* hidden values per column */
    int n_ctx;         /* positions its caches hold */
    int max_cols;      /* most columns one submit takes */
    int max_in_flight; /* most frames submitted before one is collected */
    int in_flight;     /* frames submitted, not collected (kept by pl_stage_*) */
    bool tail;         /* set by the chain: of the frames submitted while it is set, only each
                          one's last column of results is used, and collect may leave the
                          others as they were (a remote stage then gets only that one back) */
    void *impl;        /* the implementation's own data */
};

/* A local stage: layers [first, last) of m (which must hold them) with its own state made
 * from o, less its draft (o->n_batch columns a submit, at most PL_STAGE_MAX_IN_FLIGHT frames
 * queued, the queue holding only what is in flight). The model must outlive the stage. */
#define PL_STAGE_MAX_IN_FLIGHT 8
pl_status pl_stage_local_new(const pl_model *m, const pl_state_opts *o, int first, int last,
                             pl_stage **out);
/* The same over a state someone else owns (a host's session running its own layers):
 * the stage writes the state's hidden rows, and freeing it leaves the state alone. */
pl_status pl_stage_local_wrap(const pl_model *m, pl_state *s, int first, int last, pl_stage **out);

/* The checked calls (arguments against the fields above; one-line errors). */
pl_status pl_stage_submit(pl_stage *st, const float *hidden, int64_t n, int64_t pos0, uint64_t tag);
pl_status pl_stage_collect(pl_stage *st, float *hidden_out, int64_t *n, uint64_t *tag);
bool pl_stage_can_rewind(const pl_stage *st, int64_t n_past);
pl_status pl_stage_rewind(pl_stage *st, int64_t n_past);
void pl_stage_free(pl_stage *st);

/* Hidden state on the wire: n f32 values to IEEE half and back, with the CPU backend's
 * rounding (pl_f32_to_f16: to nearest even; overflow to infinity, NaN kept). */
void pl_hidden_to_f16(const float *x, uint16_t *out, int64_t n);
void pl_hidden_from_f16(const uint16_t *x, float *out, int64_t n);

#endif
