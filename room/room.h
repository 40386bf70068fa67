/* room.h - the room's members over the link (link.h) and the wire (wire.h): the host's side
 * (gathering workers, the plan, dealing them layers and checking their identity, a remote
 * stage per chain of workers) and the worker's side (probe, join, load the dealt layers,
 * link to the next worker, serve hidden frames).
 *
 * Consecutive workers form a chain: the host sends a frame to the first, each hands its
 * output to the next over their own link, the last sends the result back to the host (a
 * star, every frame through the host, where a worker listens nowhere). The flow of one
 * worker (docs/room-protocol.md, "Room flow"):
 *
 *     worker: probe, dial, hello  ->  host: plan (the worker's own member has id 0) or bye
 *     worker: loads its layers, links to the next worker, ready (identity) or error
 *     host: frames / rewinds -> first worker -> ... -> last worker -> host: results / echo
 *     host: bye  ->  worker exits
 *
 * Every wait has a timeout: a worker that does not answer a frame within the lap timeout
 * (per 16 columns of the frame),
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
#define PL_ROOM_PIECE_BYTES (1u << 20) /* a worker asks for its weights in pieces of this */
#define PL_ROOM_PIECE_MS    30000      /* the host answers each weight request within this */
#define PL_ROOM_PARTS_KEEP  4   /* part files a worker's cache keeps: the most recently used */
#define PL_ROOM_STALE_S     600 /* a download's temporary file untouched this long is stale */

/* ---- the host's side ---- */

typedef struct {
    pl_link *link;
    pl_wire_hello hello;
    int first, last; /* the layers dealt (first == last: none, idle) */
    uint64_t sent;   /* bytes of the model file sent to it (a worker without the file) */
    int pieces;      /* weight pieces sent to it */
} pl_room_worker;

/* Accept joiners on L until n of them proved the key and said a valid hello, waiting up to
 * wait_ms in all (0: without end) and stopping early when *stop becomes non-zero. A joiner
 * with a bad hello, or whose model file's metadata digest differs from meta (NULL: not
 * checked), is told why (an error message) and dropped; refusals are counted by the
 * listener, and each is one line on stderr when verbose; waiting goes on. */
pl_status pl_room_gather(pl_listener *L, int n, int wait_ms, volatile sig_atomic_t *stop,
                         bool verbose, const uint8_t *meta, pl_room_worker *w);

/* What the host knows for the plan and the deal. */
typedef struct {
    const pl_gguf *g;        /* the host's model file (sizes, the identity check) */
    int n_ctx;               /* the session's context: every cache holds it */
    uint32_t kv_type;        /* the cache's type (PL_TYPE_F16, F32, Q8_0), for sizes */
    pl_wire_dtype dtype;     /* hidden frames */
    int load_ms;             /* a worker loading its layers (0: PL_ROOM_LOAD_MS) */
    const char *hash_cache;  /* the host's tensor hash cache file (NULL: none) */
    uint64_t host_lend;      /* memory the host lends (for the plan) */
    double host_speed;       /* its probe speed (0: as slow as can be) */
    const char *host_device; /* for the table */
    const char *host_backend;
    int host_first, host_last; /* --host-layers: exactly these (first == last: the plan
                                  deals the host's share) */
    int n_snap;                /* recurrent snapshots each worker keeps: the host's
                                  n_snap when it speculates (0..PL_WIRE_MAX_SNAP), 0 otherwise;
                                  a worker without PL_CAP_SNAP gets 0 */
    bool verbose;              /* the plan table on stderr */
    bool star;                 /* no chain even where every worker listens (tests) */
    const char *model_path;    /* the host's model file, whose header a worker without the
                                  file receives (NULL: such a worker is refused) */
    int test_bad_piece;        /* tests: answer the first tensor piece asked for with another
                                  tensor's index (1) or one byte more than asked (2) */
} pl_room_deal_opts;

/* Whether w[0..n) can form a chain: every one listens somewhere (its hello's address). Where
 * one does not, the room is a star (every frame through the host), said on stderr when
 * verbose. */
bool pl_room_chain(const pl_room_worker *w, int n, bool verbose);

/* The plan (pl_plan_make over the host and w[0..*n)): each worker's range into w[i].first,
 * .last, the host's into *host_first, *host_last. The plan table goes to stderr when
 * verbose. Workers the plan leaves idle are told bye and removed from w (*n shrinks).
 * Fails with one line for a room that cannot hold the model or ranges that do not fit. */
pl_status pl_room_plan(pl_room_worker *w, int *n, const pl_room_deal_opts *o, int *host_first,
                       int *host_last);

/* Send each worker its plan (w[i].first/last; the host's own [host_first, host_last) among
 * the members); to a worker without the model file (its hello) the plan carries the hashes
 * of its part's tensors and a part message follows, and its requests for the file's header
 * and its tensors are answered from o->model_path in pieces (each checked: its part only,
 * within the tensor, no more in all than the header and the part; w[i].sent counts them);
 * wait up to load_ms for each to load its layers and report their identity
 * (a ready message), and check it against the host's own file for that range: a worker
 * with another file is told so (an error) and the deal fails with one line naming the
 * worker and its layers; so does a worker's own refusal (its line). */
pl_status pl_room_deal(pl_room_worker *w, int n, const pl_room_deal_opts *o, int host_first,
                       int host_last);

/* The identity of layers [first, last) of g (pl_gguf_part_identity), hashing through the
 * cache file cache (NULL: none). */
pl_status pl_room_part_id(const pl_gguf *g, int first, int last, const char *cache,
                          uint8_t out[32]);

/* The cache file of g's tensor hashes for the model file path: $XDG_CACHE_HOME/pooled (or
 * ~/.cache/pooled) /hashes-<digest of the path, size and mtime>, the folder made if need
 * be. false (and no cache: hash every time) where there is no such folder. */
bool pl_room_hash_cache(const char *path, char *out, size_t cap);

/* The folder $XDG_CACHE_HOME/pooled (or ~/.cache/pooled), made if need be; false where
 * there is none. */
bool pl_room_cache_dir(char *out, size_t cap);

/* A stage that runs the layers of w[0..k) (consecutive: w[i].last == w[i + 1].first) over
 * their links: frames go out to w[0] as hidden messages (dtype); with k > 1 the workers
 * form a chain (their plan named each other's addresses: each hands its output to the
 * next) and the results come back from w[k - 1], in order, at most 8 frames in flight, each
 * within lap_ms per 16 of its columns; the others' pongs, errors and byes are heard too. It takes
 * the links (freeing the stage says bye to each and closes it). n_embd, n_layer, n_ctx: the host
 * model's. */
pl_status pl_room_stage_new(pl_room_worker *w, int k, int n_layer, int n_embd, int n_ctx,
                            pl_wire_dtype dtype, int lap_ms, pl_stage **out);

/* How often the workers of st (from pl_room_stage_new) started afresh where a rewind could
 * not go back (a recurrent layer without a snapshot there: the session then runs its context
 * again); 0 for any other stage. */
int64_t pl_room_stage_restarts(const pl_stage *st);

/* Survival: let stage st (from pl_room_stage_new) take its workers' layers over when a
 * worker is lost (in a chain, the whole chain's layers: the others are told bye) (silent for
 * PL_ROOM_SILENT_MS, past its lap, gone, or leaving with bye): it says so on stderr (one line
 * naming the worker and the layers), loads those layers from g on be itself, rebuilds their caches
 * by replaying every frame the worker was sent since the last fresh start (kept on the host: n_ctx
 * * n_embd floats), and goes on as a local stage with the same results (frames rounded to the
 * wire's dtype as before). so: the host's state options (context, cache type). g and be must
 * outlive the stage. Call it before the stage's first frame. */
pl_status pl_room_stage_survive(pl_stage *st, const pl_gguf *g, pl_backend *be,
                                const pl_state_opts *so);

/* Tell a worker bye (best effort) and close its link. */
void pl_room_worker_bye(pl_link *l);

/* ---- the worker's side ---- */

typedef struct {
    const char *url;             /* the host: tcp://ADDR:PORT or inproc://NAME */
    const char *key;             /* the room key */
    const char *model;           /* the worker's own copy of the model file (NULL: fetch
                                    the dealt layers from the host into cache_dir) */
    const char *cache_dir;       /* where fetched parts are kept (part-<identity>.gguf, the
                                    PL_ROOM_PARTS_KEEP most recently used) */
    int test_die_after;          /* tests: a download fails after this many pieces, as a
                                    worker killed mid-download (0: never) */
    const char *backend;         /* auto, cpu, webgpu (NULL: auto) */
    int threads;                 /* 0: one per core */
    uint32_t kv_type;            /* PL_TYPE_F16, F32 (= 0) or Q8_0, as the host's */
    int act_q8;                  /* as the host's --act */
    uint64_t lend;               /* bytes of memory lent (hello), 0: not said */
    int want_first, want_last;   /* --layers: exactly [first, last) (0, 0: as the plan says) */
    const char *hash_cache;      /* the tensor hash cache file (NULL: none) */
    double probe_s;              /* the speed probe's budget (0: probe.h's default) */
    const char *listen;          /* where the previous worker of a chain dials this one
                                    (tcp://ADDR:PORT, port 0: any; inproc://NAME); NULL:
                                    nowhere, the host relays (a star) */
    int dial_ms;                 /* 0: 20 s (the listener's handshake limit + 5 s) */
    int plan_ms;                 /* how long to wait for the plan (0: without end) */
    volatile sig_atomic_t *stop; /* non-zero: say bye and return (may be NULL) */
    bool verbose;                /* what was dealt and loaded, one line each on stderr */
    int mute_after;              /* tests: after serving this many frames go silent (no
                                    answers, no pongs) until bye (0: never) */
    int slow_ms;                 /* tests: take this much longer over the first frame */
    bool no_prepare;             /* measurements: no decode frame's pass prepared ahead (a
                                    GPU's stage records it when the frame comes) */
    struct pl_room_join_counts {
        int64_t frames, prepared; /* frames served; of them, through a pass prepared ahead */
    } * counts;                   /* NULL, or filled as pl_room_join returns */
} pl_room_join_opts;

/* Join the room: open the model's header and the backend, measure the speed (probe.h), say
 * hello (memory lent, speed, metadata digest, --layers), load the dealt layers (without a
 * model: from the cached part file of that range where it matches the host's identity for
 * it, else fetched from the host into the cache first, progress on stderr), report their
 * identity (ready), serve frames until the host says bye (PL_OK) or *stop (PL_OK, after
 * telling the host bye). A host that needs no layers of this device says bye instead of a
 * plan (PL_OK, a line when verbose). Fails with one line: wrong key, another version, no
 * host, a plan this model cannot serve, another model file than the host's, the host gone. */
pl_status pl_room_join(const pl_room_join_opts *o);

#endif
