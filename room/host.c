/* host.c - the host's side of a room: gather workers, deal them layers (room.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "room.h"
#include "room_io.h"

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A joined peer's hello, within PL_ROOM_HELLO_MS. PL_OK with *h filled, else the reason
 * (the peer has been told it). */
static pl_status take_hello(pl_link *l, pl_wire_hello *h) {
    pl_wire_msg m;
    pl_status s = pl_room_recv(l, &m, PL_ROOM_HELLO_MS);
    if (s == PL_ERR) return pl_fail(PL_ERR, "said no hello within %d ms", PL_ROOM_HELLO_MS);
    if (s == PL_ERR_IO) return pl_fail(PL_ERR, "left before its hello");
    if (!s && m.type != PL_MSG_HELLO)
        s = pl_fail(PL_ERR_FORMAT, "sent a %s where a hello was due", pl_wire_type_name(m.type));
    if (s) {
        char line[PL_WIRE_MAX_TEXT + 1];
        snprintf(line, sizeof line, "%s", pl_last_error());
        pl_room_send_error(l, PL_WERR_PROTOCOL, line);
        return pl_fail(s, "%s", line);
    }
    /* TODO(plan branch): compare m.hello.model_id with the host's identity
     * (src/format/gguf_hash.h) and offer weights to a worker without the model. */
    *h = m.hello;
    return PL_OK;
}

/* Drop the gathered workers that left (or spoke out of turn) while the room fills. */
static int drop_leavers(pl_room_worker *w, int got, bool verbose) {
    int kept = 0;
    for (int i = 0; i < got; i++) {
        pl_wire_msg m;
        pl_status s = pl_room_recv(w[i].link, &m, 0);
        if (s == PL_ERR) { /* nothing: still waiting, as it should */
            w[kept++] = w[i];
            continue;
        }
        if (verbose)
            fprintf(stderr, "room: the worker at %s left before the deal\n",
                    pl_link_peer(w[i].link));
        pl_link_close(w[i].link);
    }
    return kept;
}

pl_status pl_room_gather(pl_listener *L, int n, int wait_ms, volatile sig_atomic_t *stop,
                         bool verbose, pl_room_worker *w) {
    int64_t end = wait_ms ? now_ms() + wait_ms : 0;
    uint64_t refused = 0;
    int got = 0;
    while (got < n) {
        if (stop && *stop) return pl_fail(PL_ERR, "stopped while waiting for workers");
        if (end && now_ms() >= end)
            return pl_fail(PL_ERR, "%d of %d workers joined within %d ms", got, n, wait_ms);
        pl_link *l = NULL;
        pl_status s = pl_link_accept(L, 200, &l);
        pl_listener_stats ls;
        pl_listener_get_stats(L, &ls);
        uint64_t r = ls.refused_key + ls.refused_version + ls.refused_junk + ls.refused_busy;
        if (r != refused && verbose)
            fprintf(stderr, "room: refused a joiner: %s\n", ls.last_refusal);
        refused = r;
        got = drop_leavers(w, got, verbose);
        if (s) continue;
        memset(&w[got], 0, sizeof w[got]);
        if (take_hello(l, &w[got].hello)) {
            if (verbose)
                fprintf(stderr, "room: dropped the joiner at %s: %s\n", pl_link_peer(l),
                        pl_last_error());
            pl_link_close(l);
            continue;
        }
        w[got].link = l;
        if (verbose)
            fprintf(stderr, "room: worker %d of %d joined from %s (%s)\n", got + 1, n,
                    pl_link_peer(l), w[got].hello.backend);
        got++;
    }
    return PL_OK;
}

/* Equal shares of [a, b) to w[0..k). */
static void share(pl_room_worker *w, int k, int a, int b) {
    for (int i = 0; i < k; i++) {
        w[i].first = a + (int)((int64_t)i * (b - a) / k);
        w[i].last = a + (int)((int64_t)(i + 1) * (b - a) / k);
    }
}

pl_status pl_room_deal(pl_room_worker *w, int n, int n_layer, int host_first, int host_last,
                       int n_ctx, pl_wire_dtype dtype, int load_ms) {
    if (host_first >= host_last) host_first = host_last = 0;
    /* the workers' layers: [0, host_first) and [host_last, n_layer), shared in proportion */
    int len1 = host_first, len2 = n_layer - host_last, total = len1 + len2;
    int k1 = total ? (int)((int64_t)n * len1 / total) : 0;
    if (len1 && !k1) k1 = 1;
    if (len2 && k1 == n) k1 = n - 1;
    if (n < 1 || n > PL_ROOM_MAX_WORKERS || k1 > len1 || n - k1 > len2 || (len1 && k1 < 1) ||
        (len2 && n - k1 < 1))
        return pl_fail(PL_ERR_ARG,
                       "%d workers cannot share the %d layers the host leaves (each needs one)", n,
                       total);
    share(w, k1, 0, host_first);
    share(w + k1, n - k1, host_last, n_layer);
    for (int i = 0; i < n; i++) {
        pl_wire_msg m = {.type = PL_MSG_PLAN};
        pl_wire_plan *p = &m.plan;
        *p = (pl_wire_plan){.n_layers = (uint32_t)n_layer,
                            .n_ctx = (uint32_t)n_ctx,
                            .dtype = (uint8_t)dtype,
                            .id_kind = PL_MODEL_ID_DIGEST};
        /* members in layer order; the receiver's own is id 0, the others 1, 2, ... and
         * the host's (when it keeps layers) among them. No addresses: the host relays. */
        uint32_t next_id = 1;
        for (int j = 0; j <= n; j++) {
            if (j == k1 && host_first < host_last)
                p->members[p->n_members++] = (pl_wire_member){
                    .id = next_id++, .first = (uint32_t)host_first, .last = (uint32_t)host_last};
            if (j < n)
                p->members[p->n_members++] = (pl_wire_member){.id = j == i ? 0 : next_id++,
                                                              .first = (uint32_t)w[j].first,
                                                              .last = (uint32_t)w[j].last};
        }
        pl_status s = pl_room_send(w[i].link, &m, PL_ROOM_SEND_MS);
        if (s)
            return pl_fail(PL_ERR_IO, "the worker at %s: cannot send its plan: %s",
                           pl_link_peer(w[i].link), pl_last_error());
    }
    int64_t end = now_ms() + load_ms;
    for (int i = 0; i < n; i++) {
        pl_wire_msg m;
        int64_t left = end - now_ms();
        pl_status s = pl_room_recv(w[i].link, &m, left > 0 ? (int)left : 0);
        const char *peer = pl_link_peer(w[i].link);
        if (s == PL_ERR)
            return pl_fail(PL_ERR, "the worker at %s did not load layers %d..%d within %d ms", peer,
                           w[i].first, w[i].last, load_ms);
        if (s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "the worker at %s left the room", peer);
        if (s) return pl_fail(s, "the worker at %s: %s", peer, pl_last_error());
        if (m.type == PL_MSG_ERROR)
            return pl_fail(PL_ERR, "the worker at %s cannot serve layers %d..%d: %s", peer,
                           w[i].first, w[i].last, m.error.text);
        if (m.type != PL_MSG_PONG)
            return pl_fail(PL_ERR, "the worker at %s answered its plan with a %s", peer,
                           pl_wire_type_name(m.type));
    }
    return PL_OK;
}
