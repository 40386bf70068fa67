/* remote_stage.c - the host's stage for one worker: frames out as hidden messages, results
 * back in submit order, rewinds echoed (room.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "room.h"
#include "room_io.h"

#define RS_MAX_IN_FLIGHT 8

typedef struct {
    pl_link *link;
    pl_wire_dtype dtype;
    int lap_ms;
    char who[160]; /* "the worker at PEER (layers A..B)" */
    uint32_t seq;  /* the next frame's number */
    /* the frames in flight, oldest first: their seq, width and tag */
    uint32_t q_seq[RS_MAX_IN_FLIGHT];
    int64_t q_n[RS_MAX_IN_FLIGHT];
    uint64_t q_tag[RS_MAX_IN_FLIGHT];
    int q_head, q_count;
    int64_t n_pos;  /* positions the worker holds once every frame sent is done */
    char lost[300]; /* why the worker is gone or out of step ("" while it works): every
                       later call fails at once with this line */
    void *wire_buf; /* one frame's columns as they travel */
} remote;

static pl_status remote_submit(pl_stage *st, const float *hidden, int64_t n, int64_t pos0,
                               uint64_t tag) {
    remote *R = st->impl;
    if (R->lost[0]) return pl_fail(PL_ERR_IO, "%s", R->lost);
    int64_t count = n * st->n_embd;
    pl_wire_msg m = {.type = PL_MSG_HIDDEN};
    m.hidden = (pl_wire_hidden){.seq = R->seq,
                                .pos0 = (uint32_t)pos0,
                                .n_cols = (uint16_t)n,
                                .flags = n == 1 ? PL_HID_DECODE : PL_HID_PREFILL,
                                .n_embd = (uint32_t)st->n_embd,
                                .dtype = (uint8_t)R->dtype,
                                .data = hidden};
    if (R->dtype == PL_WIRE_F16) {
        pl_hidden_to_f16(hidden, R->wire_buf, count);
        m.hidden.data = R->wire_buf;
    }
    pl_status s = pl_room_send(R->link, &m, PL_ROOM_SEND_MS);
    if (s) {
        snprintf(R->lost, sizeof R->lost, "%s: cannot send it a frame: %s", R->who,
                 pl_last_error());
        return pl_fail(PL_ERR_IO, "%s", R->lost);
    }
    int t = (R->q_head + R->q_count) % RS_MAX_IN_FLIGHT;
    R->q_seq[t] = R->seq++;
    R->q_n[t] = n;
    R->q_tag[t] = tag;
    R->q_count++;
    R->n_pos = pos0 + n;
    return PL_OK;
}

/* The next message that is not a pong (a worker may answer a late ping); an error message
 * fails unless draining (a rewind drops whatever frames in flight left behind). */
static pl_status next_msg(remote *R, pl_wire_msg *m, const char *what, bool draining) {
    for (;;) {
        pl_status s = pl_room_recv(R->link, m, R->lap_ms);
        /* HOOK (the next slice: survival): a silent or gone worker fails the turn here;
         * re-dealing its layers to the others would start from this point. */
        if (s == PL_ERR)
            snprintf(R->lost, sizeof R->lost, "%s did not answer %s within %d ms: the turn fails",
                     R->who, what, R->lap_ms);
        else if (s == PL_ERR_IO)
            snprintf(R->lost, sizeof R->lost, "%s left the room", R->who);
        if (s == PL_ERR || s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "%s", R->lost);
        if (s) return pl_fail(s, "%s sent a bad message: %s", R->who, pl_last_error());
        if (m->type == PL_MSG_ERROR && !draining)
            return pl_fail(PL_ERR, "%s failed: %s", R->who, m->error.text);
        if (m->type == PL_MSG_BYE) {
            snprintf(R->lost, sizeof R->lost, "%s left the room", R->who);
            return pl_fail(PL_ERR_IO, "%s", R->lost);
        }
        if (m->type != PL_MSG_PONG) return PL_OK;
    }
}

static pl_status remote_collect(pl_stage *st, float *hidden_out, int64_t *n, uint64_t *tag) {
    remote *R = st->impl;
    int h = R->q_head;
    uint32_t want = R->q_seq[h];
    int64_t want_n = R->q_n[h];
    *tag = R->q_tag[h];
    R->q_head = (h + 1) % RS_MAX_IN_FLIGHT;
    R->q_count--;
    if (R->lost[0]) return pl_fail(PL_ERR_IO, "%s", R->lost);
    pl_wire_msg m;
    pl_status s = next_msg(R, &m, "a frame", false);
    if (s) return s;
    const pl_wire_hidden *r = &m.hidden;
    if (m.type != PL_MSG_RESULT || r->seq != want || r->n_cols != want_n ||
        r->n_embd != (uint32_t)st->n_embd || r->dtype != R->dtype) { /* out of step */
        snprintf(R->lost, sizeof R->lost,
                 "%s answered frame %u with a %s (frame %u, %u columns), not its result", R->who,
                 want, pl_wire_type_name(m.type), r->seq, r->n_cols);
        return pl_fail(PL_ERR, "%s", R->lost);
    }
    int64_t count = want_n * st->n_embd;
    if (R->dtype == PL_WIRE_F16) {
        memcpy(R->wire_buf, r->data, (size_t)count * 2);
        pl_hidden_from_f16(R->wire_buf, hidden_out, count);
    } else {
        memcpy(hidden_out, r->data, (size_t)count * sizeof(float));
    }
    *n = want_n;
    return PL_OK;
}

/* Any position it holds: a KV cache can always go back. A recurrent layer (qwen35) cannot
 * (workers keep no snapshots): its worker starts afresh instead and echoes n_past 0, the
 * rewind fails, and the session starts every stage afresh (session.c), with the same
 * results. */
static bool remote_can_rewind(const pl_stage *st, int64_t n_past) {
    const remote *R = st->impl;
    return n_past <= R->n_pos;
}

/* Send the rewind and wait for its echo, dropping the results of frames still in flight. */
static pl_status remote_rewind(pl_stage *st, int64_t n_past) {
    remote *R = st->impl;
    if (R->lost[0]) return pl_fail(PL_ERR_IO, "%s", R->lost);
    if (!remote_can_rewind(st, n_past))
        return pl_fail(PL_ERR_ARG, "%s cannot go back to position %lld", R->who, (long long)n_past);
    uint32_t seq = R->seq++;
    pl_wire_msg m = {.type = PL_MSG_REWIND};
    m.rewind = (pl_wire_rewind){.seq = seq, .n_past = (uint32_t)n_past};
    pl_status s = pl_room_send(R->link, &m, PL_ROOM_SEND_MS);
    if (s) return pl_fail(PL_ERR_IO, "%s: cannot send it a rewind: %s", R->who, pl_last_error());
    R->q_head = R->q_count = 0;
    for (;;) {
        s = next_msg(R, &m, "a rewind", true);
        if (s) return s;
        if (m.type == PL_MSG_REWIND && m.rewind.seq == seq) break;
        /* results and errors of frames sent before it, and echoes of older rewinds */
        if (m.type != PL_MSG_RESULT && m.type != PL_MSG_ERROR && m.type != PL_MSG_REWIND)
            return pl_fail(PL_ERR, "%s answered a rewind with a %s", R->who,
                           pl_wire_type_name(m.type));
    }
    /* a worker that cannot go back there (a recurrent layer) starts afresh and says so */
    R->n_pos = m.rewind.n_past;
    if (m.rewind.n_past != n_past)
        return pl_fail(PL_ERR_ARG, "%s cannot go back to position %lld", R->who, (long long)n_past);
    return PL_OK;
}

static void remote_free(pl_stage *st) {
    remote *R = st->impl;
    if (R) {
        pl_room_worker_bye(R->link);
        free(R->wire_buf);
        free(R);
    }
    free(st);
}

static const pl_stage_methods remote_methods = {.kind = "remote",
                                                .submit = remote_submit,
                                                .collect = remote_collect,
                                                .can_rewind = remote_can_rewind,
                                                .rewind = remote_rewind,
                                                .free = remote_free};

void pl_room_worker_bye(pl_link *l) {
    if (!l) return;
    pl_wire_msg m = {.type = PL_MSG_BYE, .bye = PL_BYE_SHUTDOWN};
    if (!pl_link_dead(l)) pl_room_send(l, &m, 1000);
    pl_link_close(l);
}

pl_status pl_room_stage_new(pl_room_worker *w, int n_layer, int n_embd, int n_ctx,
                            pl_wire_dtype dtype, int lap_ms, pl_stage **out) {
    *out = NULL;
    pl_stage *st = calloc(1, sizeof *st);
    remote *R = calloc(1, sizeof *R);
    void *buf = malloc((size_t)PL_WIRE_MAX_COLS * (size_t)n_embd * sizeof(float));
    if (!st || !R || !buf) {
        free(st), free(R), free(buf);
        return pl_fail(PL_ERR_NOMEM, "out of memory for a remote stage");
    }
    *R = (remote){.link = w->link, .dtype = dtype, .lap_ms = lap_ms, .wire_buf = buf};
    snprintf(R->who, sizeof R->who, "the worker at %s (layers %d..%d)", pl_link_peer(w->link),
             w->first, w->last);
    *st = (pl_stage){.m = &remote_methods,
                     .first = w->first,
                     .last = w->last,
                     .n_layer = n_layer,
                     .n_embd = n_embd,
                     .n_ctx = n_ctx,
                     .max_cols = PL_WIRE_MAX_COLS,
                     .max_in_flight = RS_MAX_IN_FLIGHT,
                     .impl = R};
    w->link = NULL; /* the stage has it now */
    *out = st;
    return PL_OK;
}
