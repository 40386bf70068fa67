/* room.h - the room's members over the link (link.h) and the wire (wire.h): the host's side
 * (gathering workers, dealing them layers, a remote stage per worker) and the worker's side
 * (join, load the dealt layers, serve hidden frames).
 *
 * This first slice is a star: every worker talks only to the host, and the host's chain
 * (chain.h) hands each frame from one worker's stage to the next, several frames in
 * flight per worker. The flow of one worker (docs/room-protocol.md, "Room flow"):
 *
 *     worker: dial, hello  ->  host: plan (the worker's own member has id 0)
 *     worker: loads its layers, pong (ready) or error
 *     host: hidden frames / rewinds ->  worker: results (seq echoed) / the rewind echoed
 *     host: bye  ->  worker exits
 *
 * Every wait has a timeout: a worker that does not answer a frame within the lap timeout,
 * or says nothing (not even a pong: a serving worker sends one every PL_ROOM_BEAT_MS) for
 * PL_ROOM_SILENT_MS, is lost: its stage fails the turn with one line naming it, or, where
 * the host can load its layers (pl_room_stage_survive), the host takes them over. */
#ifndef PL_ROOM_ROOM_H
#define PL_ROOM_ROOM_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "link.h"
#include "runtime/stage.h"
#include "wire.h"

#define PL_ROOM_LAP_MS      30000  /* default: one frame's answer from a worker */
#define PL_ROOM_LOAD_MS     600000 /* default: a worker loading its layers after the plan */
#define PL_ROOM_HELLO_MS    10000  /* a joined worker must say hello within this */
#define PL_ROOM_SEND_MS     10000  /* one send */
#define PL_ROOM_MAX_WORKERS (PL_WIRE_MAX_MEMBERS - 1)
#define PL_ROOM_SILENT_MS   3000 /* a worker silent this long (no result, no pong) is lost */
#define PL_ROOM_BEAT_MS     1000 /* a serving worker says something (a pong) at least this often */

/* ---- the host's side ---- */

typedef struct {
    pl_link *link;
    pl_wire_hello hello;
    int first, last; /* the layers dealt */
} pl_room_worker;

/* Accept joiners on L until n of them proved the key and said a valid hello, waiting up to
 * wait_ms in all (0: without end) and stopping early when *stop becomes non-zero. A joiner
 * with a bad hello is told why (an error message) and dropped; refusals are counted by the
 * listener, and each is one line on stderr when verbose; waiting goes on. */
pl_status pl_room_gather(pl_listener *L, int n, int wait_ms, volatile sig_atomic_t *stop,
                         bool verbose, pl_room_worker *w);

/* Deal the layers of an n_layer model to w[0..n) in equal shares, in layer order, around
 * the host's own [host_first, host_last) (empty: none), send each its plan (contexts of
 * n_ctx, frames of dtype), and wait up to load_ms for every worker to load (a pong) or
 * refuse (its error line). */
pl_status pl_room_deal(pl_room_worker *w, int n, int n_layer, int host_first, int host_last,
                       int n_ctx, pl_wire_dtype dtype, int load_ms);

/* A stage that runs w's layers over its link: frames go out as hidden messages (dtype),
 * results come back in order, at most 8 in flight, each within lap_ms. It takes the link
 * (freeing the stage says bye and closes it). n_embd, n_layer, n_ctx: the host model's. */
pl_status pl_room_stage_new(pl_room_worker *w, int n_layer, int n_embd, int n_ctx,
                            pl_wire_dtype dtype, int lap_ms, pl_stage **out);

/* Survival: let stage st (from pl_room_stage_new) take its worker's layers over when the
 * worker is lost (silent for PL_ROOM_SILENT_MS, past its lap, gone, or leaving with bye):
 * it says so on stderr (one line naming the worker and the layers), loads those layers
 * from g on be itself, rebuilds their caches by replaying every frame the worker was sent
 * since the last fresh start (kept on the host: n_ctx * n_embd floats), and goes on as a
 * local stage with the same results (frames rounded to the wire's dtype as before). so:
 * the host's state options (context, cache type). g and be must outlive the stage. Call it
 * before the stage's first frame. */
pl_status pl_room_stage_survive(pl_stage *st, const pl_gguf *g, pl_backend *be,
                                const pl_state_opts *so);

/* Tell a worker bye (best effort) and close its link. */
void pl_room_worker_bye(pl_link *l);

/* ---- the worker's side ---- */

typedef struct {
    const char *url;             /* the host: tcp://ADDR:PORT or inproc://NAME */
    const char *key;             /* the room key */
    const char *model;           /* the worker's own copy of the model file */
    const char *backend;         /* auto, cpu, webgpu (NULL: auto) */
    int threads;                 /* 0: one per core */
    uint32_t kv_type;            /* PL_TYPE_F16 (0: f16) or PL_TYPE_F32, as the host's */
    int act_q8;                  /* as the host's --act */
    uint64_t lend;               /* bytes of memory lent (hello), 0: not said */
    int dial_ms;                 /* 0: 10 s */
    int plan_ms;                 /* how long to wait for the plan (0: without end) */
    volatile sig_atomic_t *stop; /* non-zero: say bye and return (may be NULL) */
    bool verbose;                /* what was dealt and loaded, one line each on stderr */
    int mute_after;              /* tests: after serving this many frames go silent (no
                                    answers, no pongs) until bye (0: never) */
    int slow_ms;                 /* tests: take this much longer over the first frame */
} pl_room_join_opts;

/* Join the room, serve frames until the host says bye (PL_OK) or *stop (PL_OK, after
 * telling the host bye). Fails with one line: wrong key, another version, no host, a plan
 * this model cannot serve, the host gone. */
pl_status pl_room_join(const pl_room_join_opts *o);

#endif
