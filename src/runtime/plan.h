/* plan.h - the room's plan: which member of a room holds which layers.
 *
 * A pure function of what the members report (memory lent, measured speed, host or not, a
 * forced range) and of the model's sizes (bytes of each layer as loaded plus its KV cache
 * or recurrent state for the session's context, bytes of the embedding and head). No I/O,
 * no clock: the same input gives the same plan, so a host can print it, send it and
 * recompute it after a member leaves.
 *
 * Rules:
 * - The host holds the embedding and the head (ends_bytes) and may hold layers as well.
 * - Without forced ranges, the layers are dealt in proportion to speed, each member at most
 *   what its memory holds (every layer counted at the largest layer's bytes, so any
 *   contiguous range of that many layers fits), the rest shared among the others by speed;
 *   shares are rounded by largest remainder. Ranges are contiguous and go in order of speed
 *   (the fastest gets the first layers; ties by the order given). A member whose share
 *   rounds to 0 layers stays idle.
 * - With forced ranges (a member's --layers A-B, for tests), only they are used: together
 *   they must cover [0, n_layer) exactly, without overlap or gap, each within its member's
 *   memory; members without one stay idle.
 * - A room that cannot hold the model is refused with one line saying how much is lent and
 *   how much is needed. */
#ifndef PL_RUNTIME_PLAN_H
#define PL_RUNTIME_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/status.h"

#define PL_PLAN_MAX_MEMBERS 64

typedef struct {
    const char *id;      /* a name for the table ("host", "w1", an address) */
    const char *backend; /* "cpu", "webgpu", ... (for the table; may be NULL) */
    uint64_t mem_bytes;  /* memory lent */
    double speed;        /* measured speed (layers/s or tokens/s: the same unit for all), > 0 */
    bool host;           /* exactly one member is the host */
    bool forced;         /* hold exactly [first, last) */
    int first, last;
} pl_plan_member;

typedef struct {
    int n_layer;
    const uint64_t *layer_bytes; /* [n_layer]: each layer's tensors as loaded */
    const uint64_t *state_bytes; /* [n_layer]: each layer's KV cache or recurrent state for the
                                    session's n_ctx (NULL: none) */
    uint64_t ends_bytes;         /* embedding + final norm + head (the host's) */
} pl_plan_model;

typedef struct {
    int first, last; /* layers [first, last); first == last: none (idle, or a host with only
                        the ends) */
    uint64_t bytes;  /* memory this member needs for them (and the ends, for the host) */
} pl_plan_range;

/* Deal the layers: out[i] for members[i]. Fails with one line (and out untouched) for bad
 * input (no members, more than PL_PLAN_MAX_MEMBERS, not exactly one host, a speed that is
 * not a positive number, bad layer sizes), a forced range that is outside the model,
 * overlaps another, leaves a gap or does not fit its member, or a room that cannot hold
 * the model. */
pl_status pl_plan_make(const pl_plan_model *model, const pl_plan_member *members, int n,
                       pl_plan_range *out);

/* The plan as a table (device, backend, layers, memory used of lent), one member a line,
 * into a malloc'd string (NULL when out of memory). */
char *pl_plan_format(const pl_plan_member *members, const pl_plan_range *plan, int n);

#endif
