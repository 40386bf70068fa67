/* guest.h - guests of a room: members that lend nothing and only ask (`pooled room chat`).
 *
 * A guest dials the host like a worker (the room key's proof, sealed frames), says hello
 * with PL_CAP_GUEST, and sends an ask: its whole conversation (the guest keeps it; the host
 * keeps nothing between turns, so a reconnecting guest or a host restart loses nothing).
 * The host answers asks one at a time, in the order they came: text pieces as they are
 * generated, then done. While one is answered at most PL_ROOM_GUEST_QUEUE others wait;
 * an ask beyond that is refused at once with an error (code busy). A guest that leaves
 * mid-reply stops its generation at the next token; the others are not disturbed. */
#ifndef PL_ROOM_GUEST_H
#define PL_ROOM_GUEST_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pooled.h>

#include "link.h"
#include "wire.h"

#define PL_ROOM_MAX_GUESTS  16 /* guests connected at once; beyond, a new one is refused */
#define PL_ROOM_GUEST_QUEUE 4  /* asks waiting while one is answered; beyond: busy */

/* Hand n bytes of the reply to the guest. Non-zero: the guest is gone (stop generating). */
typedef int (*pl_room_emit_fn)(void *ctx, const char *text, size_t n);

/* Answer ask (the host's generation): call emit with the text as it becomes final, and say
 * in *done why it stopped and how many ids it made. A failure (its line is sent to the
 * guest as an error) leaves the service running. */
typedef pl_status (*pl_room_answer_fn)(void *ud, const pl_wire_ask *ask, pl_room_emit_fn emit,
                                       void *ctx, pl_wire_done *done);

typedef struct {
    int asks;          /* answered (or failed) */
    int left;          /* of those, the guest left mid-reply: its generation stopped */
    uint32_t left_gen; /* ids generated for the last guest that left mid-reply */
    int refused;       /* peers dropped for a bad message, and asks refused as busy */
} pl_room_guest_stats;

typedef struct {
    pl_room_answer_fn answer;
    void *ud;
    volatile sig_atomic_t *stop; /* non-zero: return (may be NULL) */
    int max_asks;                /* tests: return after this many asks answered (0: never) */
    bool verbose;                /* one line per guest joining, leaving, refused */
    pl_room_guest_stats *stats;  /* counts, written by the serving thread (may be NULL) */
} pl_room_guest_opts;

/* Serve guests on L until *stop (PL_OK) or max_asks answered. A peer whose first message is
 * not a guest's hello, or that sends a message that does not decode or is not an ask, is
 * told why in one line (an error) and dropped; so is one past PL_ROOM_MAX_GUESTS. */
pl_status pl_room_guests_serve(pl_listener *L, const pl_room_guest_opts *o);

/* The usual answer: the conversation through the model's chat template, generated on ses
 * (its cached prefix reused where it matches), the ask's temperature and seed over sp's
 * other settings, the text streamed as `pooled chat` prints it. ud: a pl_room_answerer. */
typedef struct {
    pooled_model *m;
    pooled_session *ses; /* of m: the caches every answer reuses what it can of */
    pooled_sample_opts sp;
    bool think; /* Qwen3's enable_thinking */
} pl_room_answerer;
pl_status pl_room_answer(void *ud, const pl_wire_ask *ask, pl_room_emit_fn emit, void *ctx,
                         pl_wire_done *done);

/* The guest's side: dial url with key, say hello as a guest. */
pl_status pl_room_guest_dial(const char *url, const char *key, int timeout_ms, pl_link **out);

/* Send ask over l and hand each text piece to fn (non-zero return: stop waiting, PL_ERR)
 * until done (into *done). Fails with one line: the host's error (busy, ...), the host
 * gone, or nothing heard for timeout_ms. */
pl_status pl_room_guest_ask(pl_link *l, const pl_wire_ask *ask,
                            int (*fn)(void *ud, const char *text, size_t n), void *ud,
                            int timeout_ms, pl_wire_done *done);

#endif
