/* link.h - a secure, message-oriented link between two room members.
 *
 * URLs: tcp://host:port between machines (port 0 to listen on an ephemeral one), and
 * inproc://name inside one process (tests run a whole room that way); ws:// can come later
 * behind the same calls. A listener accepts many peers, one link each. Joining needs the
 * room key: both sides prove it over fresh challenges, then every message is sealed with
 * per-direction keys and counters (docs/room-protocol.md, "Link"). A replayed, reordered,
 * forged or malformed frame is dropped and counted, never delivered; the link keeps working.
 *
 * Every call that waits takes a timeout in milliseconds (0 .. PL_LINK_MAX_TIMEOUT_MS).
 * One thread may send while another receives on the same link; sends from several threads
 * go out one whole message at a time (the link serialises them), two threads must not both
 * receive at once, and close must not race with anything. */
#ifndef PL_ROOM_LINK_H
#define PL_ROOM_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* The largest message a link carries (the wire's largest message). */
#define PL_LINK_MAX_MSG        (4u * 1024 * 1024 + 4096)
#define PL_LINK_MAX_TIMEOUT_MS (24 * 3600 * 1000)
#define PL_LINK_MAX_KEY        256 /* room key bytes */
#define PL_LINK_HANDSHAKE_MS                                                                       \
    15000                      /* default: a joining peer must finish its proof in time            \
                                * (its key derivation alone takes ~0.1 s idle, seconds             \
                                * on a loaded or sanitised build) */
#define PL_LINK_MAX_PENDING 16 /* handshakes in progress, and links accepted not yet taken */

typedef struct pl_link pl_link;
typedef struct pl_listener pl_listener;

/* Optional settings (NULL: defaults). */
typedef struct {
    unsigned version; /* protocol version to speak (0: PL_WIRE_VERSION); tests only */
    int handshake_ms; /* listener: per-peer handshake limit (0: PL_LINK_HANDSHAKE_MS) */
} pl_link_opts;

/* Frames dropped by a link's receiving side. */
typedef struct {
    uint64_t sent, received; /* messages */
    uint64_t replayed;       /* authentic, but seen before (or older than the 64-frame window) */
    uint64_t reordered;      /* authentic, never seen, but older than one already delivered */
    uint64_t forged;         /* failed authentication: tampered, or not sealed with our key */
    uint64_t malformed;      /* too short to be a sealed frame */
} pl_link_stats;

typedef struct {
    uint64_t accepted;        /* peers that completed the handshake */
    uint64_t refused_key;     /* failed the key proof */
    uint64_t refused_version; /* spoke another protocol version */
    uint64_t refused_junk;    /* not our handshake: junk, silence past the limit, closed early */
    uint64_t refused_busy;    /* PL_LINK_MAX_PENDING handshakes or waiting links already */
    char last_refusal[200];   /* one line about the latest refusal ("" if none) */
} pl_listener_stats;

/* Listen on url with the room key (1..PL_LINK_MAX_KEY bytes). Derives the room's master key
 * once (Argon2id over a fresh random salt, sent to joiners in the clear). */
pl_status pl_link_listen(const char *url, const char *key, const pl_link_opts *opts,
                         pl_listener **out);

/* The URL peers dial (a tcp port 0 replaced by the bound port). */
const char *pl_listener_url(const pl_listener *l);

/* The next peer that proved the key, waiting up to timeout_ms. Handshakes run in the
 * background, so a slow or hostile peer never delays another. PL_ERR on timeout. */
pl_status pl_link_accept(pl_listener *l, int timeout_ms, pl_link **out);

void pl_listener_get_stats(pl_listener *l, pl_listener_stats *s);

/* Stop listening; links already accepted stay open. NULL is fine. */
void pl_listener_close(pl_listener *l);

/* Connect to a listener and prove the key, all within timeout_ms. A wrong key, another
 * protocol version (the line says which side must upgrade) or no listener: PL_ERR. */
pl_status pl_link_dial(const char *url, const char *key, int timeout_ms, const pl_link_opts *opts,
                       pl_link **out);

/* Seal and send one message of 1..PL_LINK_MAX_MSG bytes. A send that cannot finish in
 * timeout_ms leaves the link dead (PL_ERR_IO). */
pl_status pl_link_send(pl_link *l, const void *msg, size_t n, int timeout_ms);

/* The next authentic message: *msg points into the link's buffer, valid until the next
 * recv or close. PL_ERR: nothing within timeout_ms (the link is still usable).
 * PL_ERR_IO: the link is dead (the peer closed or vanished, or the stream is corrupt). */
pl_status pl_link_recv(pl_link *l, const uint8_t **msg, size_t *n, int timeout_ms);

/* Whether the link has died (the peer left, a send timed out, the stream broke). */
int pl_link_dead(pl_link *l);

/* The peer's address, for messages ("127.0.0.1:4242", "inproc"). */
const char *pl_link_peer(const pl_link *l);

void pl_link_get_stats(pl_link *l, pl_link_stats *s);

/* Close and free. NULL is fine. */
void pl_link_close(pl_link *l);

/* For tests (an attacker's view): seal a message as the next frame without sending it
 * (*frame is malloc'd, caller frees), and send raw bytes as one frame of the stream. */
pl_status pl_link_seal(pl_link *l, const void *msg, size_t n, uint8_t **frame, size_t *fn);
pl_status pl_link_send_raw(pl_link *l, const void *frame, size_t n, int timeout_ms);

#endif
