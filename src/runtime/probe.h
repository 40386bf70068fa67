/* probe.h - how fast a backend runs a model's layers: the speed a room's member reports in
 * its hello, so the plan can deal layers in proportion to it.
 *
 * The probe times matrix-vector products (one decode step's kind of work) of the model's
 * largest layer matrix, in the model's format and shape, with zero weights made here: only
 * the header is needed, so a member without the model file can probe too. Decoding is
 * bound by reading weights, so layers per second = products per second x (that matrix's
 * bytes / the bytes one token reads of a layer: every 2-D weight of layer 0, and of a
 * mixture of experts the share of the expert tensors a token runs). The number is
 * comparable across devices for the same model; it is an estimate, not a benchmark.
 *
 * Bounded: the matrix is cut to at most PL_PROBE_MAX_BYTES (rows dropped, the ratio kept),
 * and the timing stops after opts budget_s (default 0.25 s) or PL_PROBE_MAX_CALLS products,
 * whichever comes first (each batch of products ends with a read back, so a GPU's queue is
 * counted). */
#ifndef PL_RUNTIME_PROBE_H
#define PL_RUNTIME_PROBE_H

#include "../backend/backend.h"
#include "../format/gguf.h"

#define PL_PROBE_MAX_BYTES (UINT64_C(64) << 20)
#define PL_PROBE_MAX_CALLS 100000
#define PL_PROBE_MAX_S     2.0 /* the most budget_s may ask */

typedef struct {
    double budget_s; /* 0: 0.25 s; at most PL_PROBE_MAX_S */
} pl_probe_opts;

typedef struct {
    double layers_per_s; /* the speed, > 0 and finite on success */
    double seconds;      /* time the timed products took */
    int calls;           /* products timed */
    char matrix[64];     /* the tensor whose shape was used */
} pl_probe_result;

/* Probe be with g's largest matrix of layer 0. opts may be NULL. Fails with one line for a
 * missing backend, a header without layer weights, or a backend that cannot run the
 * product. */
pl_status pl_probe_speed(const pl_gguf *g, pl_backend *be, const pl_probe_opts *opts,
                         pl_probe_result *out);

#endif
