/* fetch.h - a room worker without the model file (internal to room/): its layers' part
 * fetched from the host into the cache, or taken from the cache (docs/room-protocol.md,
 * "Weights over the link"); and the host's side, answering the requests. */
#ifndef PL_ROOM_FETCH_H
#define PL_ROOM_FETCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "room.h"

typedef struct {
    pl_link *link;               /* the host */
    const pl_wire_plan *plan;    /* with the hashes of the part's tensors */
    const pl_wire_part *part;    /* header bytes, part bytes, part identity */
    int first, last;             /* the layers dealt */
    const char *cache_dir;       /* where part files live */
    bool verbose;                /* progress and what was done on stderr */
    int die_after;               /* tests: fail after this many pieces (0: never) */
    volatile sig_atomic_t *stop; /* non-zero: give up (PL_ERR_ARG) */
} pl_room_fetch_opts;

/* The path of a part file for layers [first, last) that matches the host's identity of
 * them: the cached one (checked by hashing its tensors: one that fails is said so on
 * stderr and fetched again), else fetched (the header, then every tensor of the part in
 * pieces of PL_ROOM_PIECE_BYTES, each piece checked against what was asked and each tensor
 * against its hash; written to a temporary name, renamed when complete). Then the cache
 * keeps only the PL_ROOM_PARTS_KEEP most recently used part files. id gets the part
 * identity of the file's layers (pl_room_part_id). */
pl_status pl_room_fetch_part(const pl_room_fetch_opts *o, char *path, size_t cap, uint8_t id[32]);

/* The host: what a worker without the file needs for the part [first, last) of g: the plan's
 * hash list (n_tensors x 32 bytes, malloc'd into *hashes: the part's tensors' hashes, zero
 * for the others) and the part message. */
pl_status pl_room_part_offer(const pl_gguf *g, int first, int last, const char *hash_cache,
                             uint8_t **hashes, uint32_t *n_tensors, pl_wire_part *part);

/* The host: answer worker w's request q for a piece of the header of the file at path or of
 * a tensor of its part (refused with one line otherwise, the worker told why). */
pl_status pl_room_serve_piece(pl_room_worker *w, const pl_gguf *g, const char *path,
                              const pl_wire_part *part, const pl_wire_weight_req *q, int bad);

#endif
