/* remote_stage.c - the host's stage for one worker: frames out as hidden messages, results
 * back in submit order, rewinds echoed (room.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "room.h"
#include "room_io.h"

#define RS_MAX_IN_FLIGHT 8

typedef struct {
    pl_link *link; /* frames and rewinds go to the first worker of the chain ... */
    pl_link *out;  /* ... and the results and echoes come back from the last one */
    pl_link *links[PL_ROOM_MAX_WORKERS]; /* every worker of the chain, in layer order: their
                                            pongs, errors and byes */
    char whos[PL_ROOM_MAX_WORKERS][96];  /* "the worker at PEER (layers A..B)" */
    int n_links;
    pl_wire_dtype dtype;
    int lap_ms;
    char who[200]; /* the worker, or "the chain of N workers at PEER .. PEER (layers A..B)" */
    uint32_t seq;  /* the next frame's number */
    /* the frames in flight, oldest first: their seq, width and tag */
    uint32_t q_seq[RS_MAX_IN_FLIGHT];
    int64_t q_n[RS_MAX_IN_FLIGHT];
    uint64_t q_tag[RS_MAX_IN_FLIGHT];
    bool q_tail[RS_MAX_IN_FLIGHT]; /* answered with its last column alone (PL_HID_TAIL) */
    int q_head, q_count;
    bool wide;            /* every worker of the chain has PL_CAP_WIDE */
    int64_t n_pos;        /* positions the worker holds once every frame sent is done */
    int64_t restarts;     /* rewinds the chain answered by starting afresh */
    char lost[300];       /* why the worker is gone or out of step ("" while it works): every
                             later call fails at once with this line */
    void *wire_buf;       /* one frame's columns as they travel */
    int64_t heard;        /* when the worker last said anything (ms, monotonic) */
    int64_t heard_others; /* when the chain's other links were last read */
    /* survival (pl_room_stage_survive): where the host loads the layers itself, and the
     * frames sent since the last fresh start, to replay them there */
    const pl_gguf *g;
    pl_backend *be;
    pl_state_opts so;
    float *hist;    /* [n_ctx][n_embd] the columns sent, as the worker read them */
    int32_t *log_n; /* [n_ctx] the widths of the frames sent, in order, from position 0 */
    int n_log;      /* frames in the log; they hold positions [0, logged) */
    int64_t logged;
    pl_model *own_m; /* once taken over: the layers, and the stage the calls go to */
    pl_stage *own;
} remote;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The log keeps positions [0, n_past) only (a frame across n_past is cut there). */
static void log_cut(remote *R, int64_t n_past) {
    if (!R->hist) return;
    while (R->n_log && R->logged - R->log_n[R->n_log - 1] >= n_past)
        R->logged -= R->log_n[--R->n_log];
    if (R->logged > n_past) {
        R->log_n[R->n_log - 1] -= (int32_t)(R->logged - n_past);
        R->logged = n_past;
    }
}

/* What the other side reads of a frame of count values: the same, or rounded through f16. */
static void as_on_wire(const remote *R, const float *x, float *out, int64_t count) {
    if (R->dtype == PL_WIRE_F16) {
        pl_hidden_to_f16(x, R->wire_buf, count);
        pl_hidden_from_f16(R->wire_buf, out, count);
    } else if (out != x) {
        memcpy(out, x, (size_t)count * sizeof(float));
    }
}

static pl_status take_over(pl_stage *st);

static pl_status remote_submit(pl_stage *st, const float *hidden, int64_t n, int64_t pos0,
                               uint64_t tag) {
    remote *R = st->impl;
    if (R->lost[0] && R->g && !R->own) take_over(st);
    if (R->own) {
        int64_t count = n * st->n_embd;
        float *x = (float *)R->wire_buf + (int64_t)st->max_cols * st->n_embd;
        as_on_wire(R, hidden, x, count);
        return pl_stage_submit(R->own, x, n, pos0, tag);
    }
    if (R->lost[0]) return pl_fail(PL_ERR_IO, "%s", R->lost);
    int64_t count = n * st->n_embd;
    if (R->hist) { /* kept for a replay */
        log_cut(R, pos0);
        if (R->logged == pos0) {
            as_on_wire(R, hidden, R->hist + pos0 * st->n_embd, count);
            R->log_n[R->n_log++] = (int32_t)n;
            R->logged += n;
        }
    }
    bool tail = st->tail && R->wide && n > 1;
    pl_wire_msg m = {.type = PL_MSG_HIDDEN};
    m.hidden = (pl_wire_hidden){.seq = R->seq,
                                .pos0 = (uint32_t)pos0,
                                .n_cols = (uint16_t)n,
                                .flags = n == 1 ? PL_HID_DECODE
                                                : PL_HID_PREFILL | (tail ? PL_HID_TAIL : 0),
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
        if (R->g) { /* the frame is logged: the replay runs it, as if in flight */
            int t = (R->q_head + R->q_count) % RS_MAX_IN_FLIGHT;
            R->q_tag[t] = tag;
            R->q_count++;
            return take_over(st);
        }
        return pl_fail(PL_ERR_IO, "%s", R->lost);
    }
    int t = (R->q_head + R->q_count) % RS_MAX_IN_FLIGHT;
    R->q_seq[t] = R->seq++;
    R->q_n[t] = n;
    R->q_tail[t] = tail;
    R->q_tag[t] = tag;
    R->q_count++;
    R->n_pos = pos0 + n;
    return PL_OK;
}

/* What the workers before the last one of a chain said to the host: their beats count as
 * the chain alive; an error (unless draining) or a bye or a dropped link ends the wait. */
static pl_status hear_others(remote *R, bool draining) {
    for (int i = 0; i + 1 < R->n_links; i++) {
        pl_wire_msg m;
        pl_status s;
        while ((s = pl_room_recv(R->links[i], &m, 0)) == PL_OK) {
            R->heard = now_ms();
            if (m.type == PL_MSG_ERROR && !draining)
                return pl_fail(PL_ERR, "%s failed: %s", R->whos[i], m.error.text);
            if (m.type == PL_MSG_BYE) break;
        }
        if (s == PL_ERR) continue;
        if (s == PL_OK || s == PL_ERR_IO) {
            snprintf(R->lost, sizeof R->lost, "%s left the room", R->whos[i]);
            return pl_fail(PL_ERR_IO, "%s", R->lost);
        }
        return pl_fail(s, "%s sent a bad message: %s", R->whos[i], pl_last_error());
    }
    return PL_OK;
}

/* The next message from the last worker that is not a pong (a worker may answer a late
 * ping); an error message fails unless draining (a rewind drops whatever frames in flight
 * left behind). */
static pl_status next_msg(remote *R, pl_wire_msg *m, const char *what, bool draining,
                          int64_t lap_ms) {
    int64_t start = now_ms();
    if (R->heard < start) R->heard = start; /* silence counts while the host listens */
    for (;;) {
        /* a lap ends at lap_ms; silence (not even a pong) at PL_ROOM_SILENT_MS */
        int64_t t = now_ms(), lap_left = start + lap_ms - t,
                quiet_left = R->heard + PL_ROOM_SILENT_MS - t;
        int wait = (int)(lap_left < quiet_left ? lap_left : quiet_left);
        if (R->n_links > 1) { /* a chain: hear the others every 100 ms (even a recv that
                                 does not wait takes a timer's tick) */
            if (t - R->heard_others >= 100) {
                R->heard_others = t;
                pl_status h = hear_others(R, draining);
                if (h) return h;
            }
            int64_t next = R->heard_others + 100 - t;
            if (wait > next) wait = (int)next;
        }
        pl_status s = pl_room_recv(R->out, m, wait > 1 ? wait : 1);
        if (s == PL_ERR && now_ms() - R->heard >= PL_ROOM_SILENT_MS)
            snprintf(R->lost, sizeof R->lost, "%s said nothing for %d ms", R->who,
                     PL_ROOM_SILENT_MS);
        else if (s == PL_ERR && now_ms() - start < lap_ms)
            continue;
        else if (s == PL_ERR)
            snprintf(R->lost, sizeof R->lost, "%s did not answer %s within %lld ms: the turn fails",
                     R->who, what, (long long)lap_ms);
        else if (s == PL_ERR_IO)
            snprintf(R->lost, sizeof R->lost, "%s left the room", R->whos[R->n_links - 1]);
        if (s == PL_ERR || s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "%s", R->lost);
        if (s) return pl_fail(s, "%s sent a bad message: %s", R->who, pl_last_error());
        R->heard = now_ms();
        if (m->type == PL_MSG_ERROR && !draining)
            return pl_fail(PL_ERR, "%s failed: %s", R->who, m->error.text);
        if (m->type == PL_MSG_BYE) {
            snprintf(R->lost, sizeof R->lost, "%s left the room", R->whos[R->n_links - 1]);
            return pl_fail(PL_ERR_IO, "%s", R->lost);
        }
        if (m->type != PL_MSG_PONG) return PL_OK;
    }
}

/* The worker is lost (R->lost says why) and frames [n_log - q_count, n_log) of the log are
 * in flight: load its layers here, replay the frames before those (their results are
 * dropped) and submit those, so collect goes on where the worker stopped. */
static pl_status take_over(pl_stage *st) {
    remote *R = st->impl;
    int64_t t0 = now_ms(), silent = t0 - R->heard; /* since the host last heard it */
    fprintf(stderr, "room: %s; the host takes layers %d..%d over%s\n", R->lost, st->first, st->last,
            R->n_links > 1 ? " (the whole chain's)" : "");
    for (int i = 0; i < R->n_links; i++) pl_room_worker_bye(R->links[i]), R->links[i] = NULL;
    R->link = R->out = NULL, R->n_links = 0;
    pl_model_opts mo = {
        .prefault = true, .layer_first = st->first, .layer_last = st->last, .ends = PL_ENDS_NONE};
    pl_state_opts so = R->so;
    so.n_ctx = st->n_ctx;
    so.n_batch = st->max_cols < st->n_ctx ? st->max_cols : st->n_ctx;
    pl_status s = pl_model_load(R->g, R->be, &mo, &R->own_m);
    if (!s) s = pl_stage_local_new(R->own_m, &so, st->first, st->last, &R->own);
    int64_t d = st->n_embd, pos = 0;
    int keep = R->n_log - R->q_count;
    float *out = (float *)R->wire_buf + (int64_t)st->max_cols * d;
    for (int i = 0; !s && i < R->n_log; i++) {
        int64_t n = R->log_n[i], got;
        uint64_t tag = i < keep ? 0 : R->q_tag[(R->q_head + i - keep) % RS_MAX_IN_FLIGHT];
        s = pl_stage_submit(R->own, R->hist + pos * d, n, pos, tag);
        if (!s && i < keep) s = pl_stage_collect(R->own, out, &got, &tag);
        pos += n;
    }
    R->q_head = R->q_count = 0;
    if (s) {
        char line[300];
        snprintf(line, sizeof line, "%s", pl_last_error());
        pl_stage_free(R->own);
        pl_model_free(R->own_m);
        R->own = NULL, R->own_m = NULL, R->g = NULL;
        return pl_fail(s, "%s; the host cannot take layers %d..%d over: %s", R->lost, st->first,
                       st->last, line);
    }
    fprintf(stderr,
            "room: recovered in %lld ms (replayed %lld positions; the worker last heard %lld ms "
            "before)\n",
            (long long)(now_ms() - t0), (long long)pos, (long long)silent);
    return PL_OK;
}

static pl_status remote_collect(pl_stage *st, float *hidden_out, int64_t *n, uint64_t *tag) {
    remote *R = st->impl;
    if (R->own) {
        pl_status s = pl_stage_collect(R->own, hidden_out, n, tag);
        if (!s) as_on_wire(R, hidden_out, hidden_out, *n * st->n_embd);
        return s;
    }
    int h = R->q_head;
    uint32_t want = R->q_seq[h];
    int64_t want_n = R->q_n[h], cols = R->q_tail[h] ? 1 : want_n;
    *tag = R->q_tag[h];
    /* the lap is per 16 columns: a wide prefill frame gets the time its 16-column frames had */
    int64_t lap = (int64_t)R->lap_ms * (1 + (want_n - 1) / PL_WIRE_NARROW_COLS);
    pl_wire_msg m;
    pl_status s =
        R->lost[0] ? pl_fail(PL_ERR_IO, "%s", R->lost) : next_msg(R, &m, "a frame", false, lap);
    if (s == PL_ERR_IO && R->g) { /* lost: the host takes over, this frame still in flight */
        s = take_over(st);
        return s ? s : remote_collect(st, hidden_out, n, tag);
    }
    R->q_head = (h + 1) % RS_MAX_IN_FLIGHT;
    R->q_count--;
    if (s) return s;
    const pl_wire_hidden *r = &m.hidden;
    if (m.type != PL_MSG_RESULT || r->seq != want || r->n_cols != cols ||
        r->n_embd != (uint32_t)st->n_embd || r->dtype != R->dtype) { /* out of step */
        snprintf(R->lost, sizeof R->lost,
                 "%s answered frame %u with a %s (frame %u, %u columns), not its result", R->who,
                 want, pl_wire_type_name(m.type), r->seq, r->n_cols);
        return pl_fail(PL_ERR, "%s", R->lost);
    }
    /* a tail result is the frame's last column: into its place, the others left alone */
    int64_t count = cols * st->n_embd;
    float *to = hidden_out + (want_n - cols) * st->n_embd;
    if (R->dtype == PL_WIRE_F16) {
        memcpy(R->wire_buf, r->data, (size_t)count * 2);
        pl_hidden_from_f16(R->wire_buf, to, count);
    } else {
        memcpy(to, r->data, (size_t)count * sizeof(float));
    }
    *n = want_n;
    return PL_OK;
}

/* Any position it holds: a KV cache can always go back. A recurrent layer (qwen35) goes
 * back only to a position its last frame kept a snapshot of (the plan's n_snap: the host
 * speculates); elsewhere its worker starts afresh and echoes n_past 0, the rewind fails,
 * and the session starts every stage afresh (session.c), with the same results. */
static bool remote_can_rewind(const pl_stage *st, int64_t n_past) {
    const remote *R = st->impl;
    if (R->own) return pl_stage_can_rewind(R->own, n_past);
    return n_past <= R->n_pos;
}

/* Send the rewind and wait for its echo, dropping the results of frames still in flight. */
static pl_status remote_rewind(pl_stage *st, int64_t n_past) {
    remote *R = st->impl;
    if (R->own) return pl_stage_rewind(R->own, n_past);
    if (R->lost[0]) return pl_fail(PL_ERR_IO, "%s", R->lost);
    if (!remote_can_rewind(st, n_past))
        return pl_fail(PL_ERR_ARG, "%s cannot go back to position %lld", R->who, (long long)n_past);
    uint32_t seq = R->seq++;
    pl_wire_msg m = {.type = PL_MSG_REWIND};
    m.rewind = (pl_wire_rewind){.seq = seq, .n_past = (uint32_t)n_past};
    pl_status s = pl_room_send(R->link, &m, PL_ROOM_SEND_MS);
    if (s)
        snprintf(R->lost, sizeof R->lost, "%s: cannot send it a rewind: %s", R->who,
                 pl_last_error());
    R->q_head = R->q_count = 0;
    for (;;) {
        s = s ? pl_fail(PL_ERR_IO, "%s", R->lost) : next_msg(R, &m, "a rewind", true, R->lap_ms);
        if (s == PL_ERR_IO && R->g) { /* lost: the host takes over at n_past */
            log_cut(R, n_past);
            s = take_over(st);
            return s ? s : pl_stage_rewind(R->own, n_past);
        }
        if (s) return s;
        if (m.type == PL_MSG_REWIND && m.rewind.seq == seq) break;
        /* results and errors of frames sent before it, and echoes of older rewinds */
        if (m.type != PL_MSG_RESULT && m.type != PL_MSG_ERROR && m.type != PL_MSG_REWIND)
            return pl_fail(PL_ERR, "%s answered a rewind with a %s", R->who,
                           pl_wire_type_name(m.type));
    }
    /* a worker that cannot go back there (a recurrent layer) starts afresh and says so */
    R->n_pos = m.rewind.n_past;
    log_cut(R, R->n_pos);
    if (m.rewind.n_past != n_past) {
        R->restarts++;
        return pl_fail(PL_ERR_ARG, "%s cannot go back to position %lld", R->who, (long long)n_past);
    }
    return PL_OK;
}

static void remote_free(pl_stage *st) {
    remote *R = st->impl;
    if (R) {
        for (int i = 0; i < R->n_links; i++) pl_room_worker_bye(R->links[i]);
        pl_stage_free(R->own);
        pl_model_free(R->own_m);
        free(R->hist);
        free(R->log_n);
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

pl_status pl_room_stage_new(pl_room_worker *w, int k, int n_layer, int n_embd, int n_ctx,
                            pl_wire_dtype dtype, int lap_ms, pl_stage **out) {
    *out = NULL;
    if (k < 1 || k > PL_ROOM_MAX_WORKERS)
        return pl_fail(PL_ERR_ARG, "a chain of %d workers (1..%d)", k, PL_ROOM_MAX_WORKERS);
    for (int i = 1; i < k; i++)
        if (w[i].first != w[i - 1].last)
            return pl_fail(PL_ERR_ARG, "a chain of workers with a gap at layer %d", w[i - 1].last);
    /* prefill in wide frames where every worker of the chain takes them (the GPU runs a
     * frame of more than 16 columns as a GEMM, 16 or fewer column by column) */
    bool wide = true;
    for (int i = 0; i < k; i++) wide = wide && (w[i].hello.caps & PL_CAP_WIDE);
    int cols = pl_wire_frame_cols(n_embd, dtype, wide);
    pl_stage *st = calloc(1, sizeof *st);
    remote *R = calloc(1, sizeof *R);
    /* one frame on the wire, then one frame of f32 columns */
    void *buf = malloc(2 * (size_t)cols * (size_t)n_embd * sizeof(float));
    if (!st || !R || !buf) {
        free(st), free(R), free(buf);
        return pl_fail(PL_ERR_NOMEM, "out of memory for a remote stage");
    }
    *R = (remote){.link = w[0].link,
                  .out = w[k - 1].link,
                  .n_links = k,
                  .dtype = dtype,
                  .lap_ms = lap_ms,
                  .wire_buf = buf,
                  .wide = wide,
                  .heard = now_ms()};
    for (int i = 0; i < k; i++) {
        R->links[i] = w[i].link;
        snprintf(R->whos[i], sizeof R->whos[i], "the worker at %.48s (layers %d..%d)",
                 pl_link_peer(w[i].link), w[i].first, w[i].last);
        w[i].link = NULL; /* the stage has it now */
    }
    if (k == 1)
        snprintf(R->who, sizeof R->who, "%s", R->whos[0]);
    else
        snprintf(R->who, sizeof R->who, "the chain of %d workers at %.48s .. %.48s (layers %d..%d)",
                 k, pl_link_peer(R->link), pl_link_peer(R->out), w[0].first, w[k - 1].last);
    *st = (pl_stage){.m = &remote_methods,
                     .first = w[0].first,
                     .last = w[k - 1].last,
                     .n_layer = n_layer,
                     .n_embd = n_embd,
                     .n_ctx = n_ctx,
                     .max_cols = cols,
                     .max_in_flight = RS_MAX_IN_FLIGHT,
                     .impl = R};
    *out = st;
    return PL_OK;
}

int64_t pl_room_stage_restarts(const pl_stage *st) {
    return st->m == &remote_methods ? ((const remote *)st->impl)->restarts : 0;
}

pl_status pl_room_stage_survive(pl_stage *st, const pl_gguf *g, pl_backend *be,
                                const pl_state_opts *so) {
    remote *R = st->impl;
    if (st->m != &remote_methods) return pl_fail(PL_ERR_ARG, "survival is for remote stages");
    if (R->n_pos) return pl_fail(PL_ERR_ARG, "survival must be asked before the first frame");
    if (!R->hist) {
        R->hist = malloc((size_t)st->n_ctx * (size_t)st->n_embd * sizeof(float));
        R->log_n = malloc((size_t)st->n_ctx * sizeof *R->log_n);
        if (!R->hist || !R->log_n) {
            free(R->hist), free(R->log_n);
            R->hist = NULL, R->log_n = NULL;
            return pl_fail(PL_ERR_NOMEM, "out of memory for the replay of %s", R->who);
        }
        R->n_log = 0, R->logged = 0;
    }
    R->g = g, R->be = be, R->so = *so;
    return PL_OK;
}
