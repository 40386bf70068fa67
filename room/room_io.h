/* room_io.h - one wire message over a link: encode and send, receive and decode. */
#ifndef PL_ROOM_ROOM_IO_H
#define PL_ROOM_ROOM_IO_H

#include "link.h"
#include "wire.h"

/* Encode m and send it within ms. */
pl_status pl_room_send(pl_link *l, const pl_wire_msg *m, int ms);
/* The next message within ms, decoded into *m (its bulk parts point into the link's buffer
 * until the next recv). PL_ERR: nothing in time (the link still works); PL_ERR_IO: the peer
 * is gone; PL_ERR_FORMAT: a message that does not decode. */
pl_status pl_room_recv(pl_link *l, pl_wire_msg *m, int ms);
/* Measurements only (--emulate-latency-ms): every hidden, result and rewind message is
 * held ms milliseconds once received (0..PL_ROOM_MAX_LATENCY_MS), as if each hop of the
 * link took that much longer one way. Received from when this side takes the message, so
 * frames that waited in a buffer meanwhile are held again: prefill through many frames in
 * flight comes out somewhat slower than over a real link of that latency. Process-wide. */
#define PL_ROOM_MAX_LATENCY_MS 10000
void pl_room_emulate_latency(int ms);
/* text as an error message's line: control bytes as spaces, cut to PL_WIRE_MAX_TEXT. */
void pl_room_error_text(const char *text, char out[PL_WIRE_MAX_TEXT + 1]);
/* Send an error message (best effort, short timeout). */
void pl_room_send_error(pl_link *l, pl_wire_errcode code, const char *text);
/* Send an error, then wait until the peer hangs up (reading and dropping what it sends) or
 * PL_ROOM_LINGER_MS passed, so that closing l next does not lose the error for a peer that
 * was still sending. */
#define PL_ROOM_LINGER_MS 1000
void pl_room_refuse(pl_link *l, pl_wire_errcode code, const char *text);

#endif
