/* room_io.c - one wire message over a link (room_io.h). */
#include "room_io.h"

#include "conn.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int latency_ms; /* --emulate-latency-ms */

void pl_room_emulate_latency(int ms) {
    latency_ms = ms < 0 ? 0 : ms > PL_ROOM_MAX_LATENCY_MS ? PL_ROOM_MAX_LATENCY_MS : ms;
}

pl_status pl_room_send(pl_link *l, const pl_wire_msg *m, int ms) {
    uint8_t *buf;
    size_t n;
    pl_status s = pl_wire_encode(m, &buf, &n);
    if (s) return s;
    s = pl_link_send(l, buf, n, ms);
    free(buf);
    return s;
}

pl_status pl_room_recv(pl_link *l, pl_wire_msg *m, int ms) {
    const uint8_t *buf;
    size_t n;
    pl_status s = pl_link_recv(l, &buf, &n, ms);
    if (!s) s = pl_wire_decode(buf, n, m);
    if (!s && latency_ms &&
        (m->type == PL_MSG_HIDDEN || m->type == PL_MSG_RESULT || m->type == PL_MSG_REWIND))
        nanosleep(&(struct timespec){latency_ms / 1000, (long)(latency_ms % 1000) * 1000000L},
                  NULL);
    return s;
}

void pl_room_error_text(const char *text, char out[PL_WIRE_MAX_TEXT + 1]) {
    size_t n = 0;
    for (const char *p = text; *p && n < PL_WIRE_MAX_TEXT; p++)
        out[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
    if (!n) out[n++] = '?';
    out[n] = 0;
}

void pl_room_send_error(pl_link *l, pl_wire_errcode code, const char *text) {
    pl_wire_msg m = {.type = PL_MSG_ERROR};
    m.error.code = (uint16_t)code;
    pl_room_error_text(text, m.error.text);
    pl_room_send(l, &m, 1000);
}

void pl_room_refuse(pl_link *l, pl_wire_errcode code, const char *text) {
    pl_room_send_error(l, code, text);
    /* Closing with the peer's bytes unread makes TCP answer with a reset, and a reset can
     * destroy the error in the peer's receive buffer before it reads it (a guest sends its
     * hello and its ask back to back). So read and drop until the peer, told, hangs up. */
    int64_t end = conn_now_ms() + PL_ROOM_LINGER_MS;
    for (;;) {
        int64_t left = end - conn_now_ms();
        const uint8_t *buf;
        size_t n;
        if (left <= 0 || pl_link_recv(l, &buf, &n, (int)left) != PL_OK) break;
    }
}
