/* worker.c - the worker's side of a room: join, load the dealt layers from its own copy of
 * the model, serve hidden frames until the host says bye (room.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch.h"
#include "room.h"
#include "room_io.h"
#include "format/gguf_hash.h"
#include "runtime/backend_open.h"
#include "runtime/probe.h"

/* Answers go out on their own thread, in order, so the worker keeps reading frames while
 * the host is busy sending: neither side can wait on the other with both TCP buffers full.
 * At most OUTQ answers wait (the host keeps at most 8 frames in flight). */
#define OUTQ 32
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    uint8_t *buf[OUTQ];
    size_t n[OUTQ];
    bool to_next[OUTQ]; /* for the next worker of the chain, not the host */
    bool next_dead;     /* the next worker is gone: what was for it is dropped */
    int head, count;
    bool closing, failed, running, muted;
    bool busy; /* a frame is being computed: the sender beats (pongs) */
    char why[256];
} outq;

typedef struct {
    const pl_room_join_opts *o;
    outq q;
    pl_link *link;       /* the host: control (plan, ping, bye, errors, beats) */
    pl_listener *lis;    /* where the previous worker of the chain dials (NULL: none) */
    pl_link *prev;       /* frames from the previous worker (NULL: from the host) */
    pl_link *next;       /* results to the next worker (NULL: to the host) */
    int64_t host_polled; /* when the host's link was last read (ms, monotonic) */
    pl_gguf *g;
    pl_backend *be;
    pl_model *m;
    pl_state *s;
    int first, last, n_ctx;
    int cols_max;     /* the most columns of a frame (its state's batch, its buffers) */
    const char *note; /* the backend's remark */
    char path[1200];  /* the model file: -m, or the part fetched into the cache */
    float *cols;      /* one frame's columns, f32 */
    int64_t prep_pos; /* the position of the one-column pass prepared for the next frame (-1:
                         none; backend.h's prepare) */
    int64_t n_frames, n_prepared; /* frames served; of them, through a prepared pass */
    void *out;                    /* one result's payload */
} worker;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool stopped(const worker *w) {
    return w->o->stop && *w->o->stop;
}

/* The next PL_ROOM_BEAT_MS from now, for pthread_cond_timedwait (CLOCK_REALTIME). */
static struct timespec beat_deadline(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += PL_ROOM_BEAT_MS / 1000;
    t.tv_nsec += (long)(PL_ROOM_BEAT_MS % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    return t;
}

/* Sends the queued answers in order, and while a frame is computed a pong whenever nothing
 * went out for PL_ROOM_BEAT_MS, so the host hears a worker that computes a long frame
 * (room.h). An idle worker says nothing: pongs would pile up while the host is idle. */
static void *sender(void *ud) {
    worker *w = ud;
    outq *q = &w->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        struct timespec until = beat_deadline();
        bool beat = false;
        while (!q->count && !q->closing && !beat)
            beat = pthread_cond_timedwait(&q->cv, &q->mu, &until) == ETIMEDOUT;
        if (beat && !q->count && !q->closing) {
            bool quiet = q->failed || q->muted || !q->busy;
            pthread_mutex_unlock(&q->mu);
            pl_wire_msg p = {.type = PL_MSG_PONG};
            if (!quiet) pl_room_send(w->link, &p, PL_ROOM_SEND_MS);
            pthread_mutex_lock(&q->mu);
            continue;
        }
        if (!q->count) break;
        uint8_t *buf = q->buf[q->head];
        size_t n = q->n[q->head];
        bool next = q->to_next[q->head];
        bool failed = q->failed || q->muted || (next && q->next_dead);
        pthread_mutex_unlock(&q->mu);
        pl_status s =
            failed ? PL_OK : pl_link_send(next ? w->next : w->link, buf, n, PL_ROOM_SEND_MS);
        free(buf);
        pthread_mutex_lock(&q->mu);
        if (s && next) {
            /* the next worker is gone: the host notices, takes the chain's layers over and
             * tells this worker bye; until then its frames go nowhere */
            q->next_dead = true;
        } else if (s && !q->failed) {
            q->failed = true;
            snprintf(q->why, sizeof q->why, "%s", pl_last_error());
        }
        q->head = (q->head + 1) % OUTQ;
        q->count--;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Queue one message for the sender thread: to the next worker of the chain (to_next) or
 * to the host. */
static pl_status post_to(worker *w, const pl_wire_msg *m, bool to_next) {
    outq *q = &w->q;
    uint8_t *buf;
    size_t n;
    pl_status s = pl_wire_encode(m, &buf, &n);
    if (s) return s;
    pthread_mutex_lock(&q->mu);
    while (q->count == OUTQ && !q->failed) pthread_cond_wait(&q->cv, &q->mu);
    if (q->failed) {
        pthread_mutex_unlock(&q->mu);
        free(buf);
        return pl_fail(PL_ERR_IO, "cannot answer the host: %s", q->why);
    }
    int t = (q->head + q->count) % OUTQ;
    q->buf[t] = buf;
    q->n[t] = n;
    q->to_next[t] = to_next;
    q->count++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return PL_OK;
}

/* A one-column answer (a decode frame's, a tail frame's) goes out from this thread when nothing
 * waits in the queue: in order still (only this thread queues), and without the hand-off to the
 * sender thread (a wake-up, and on a busy machine a wait to be scheduled) on every token.
 * One column is far less than a socket's buffer, so this send cannot block on a peer that
 * is itself blocked sending to this worker. Else, and when the queue is muted or failed,
 * as post_to. */
static pl_status post_now(worker *w, const pl_wire_msg *m, bool to_next) {
    outq *q = &w->q;
    pthread_mutex_lock(&q->mu);
    bool direct = !q->count && !q->failed && !q->muted && !(to_next && q->next_dead);
    pthread_mutex_unlock(&q->mu);
    if (!direct) return post_to(w, m, to_next);
    pl_status s = pl_room_send(to_next ? w->next : w->link, m, PL_ROOM_SEND_MS);
    if (!s) return PL_OK;
    pthread_mutex_lock(&q->mu);
    if (to_next) { /* as the sender: the host takes the chain over and says bye */
        q->next_dead = true;
        s = PL_OK;
    } else if (!q->failed) {
        q->failed = true;
        snprintf(q->why, sizeof q->why, "%s", pl_last_error());
    }
    pthread_mutex_unlock(&q->mu);
    return s ? pl_fail(PL_ERR_IO, "cannot answer the host: %s", q->why) : PL_OK;
}

static pl_status post(worker *w, const pl_wire_msg *m) {
    return post_to(w, m, false);
}

/* Send what is queued, then end the sender thread. */
static void sender_stop(worker *w) {
    outq *q = &w->q;
    if (!q->running) return;
    pthread_mutex_lock(&q->mu);
    q->closing = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    q->running = false;
}

/* Wait for one message, a short recv at a time so *stop is seen. wait_ms 0: without end. */
static pl_status wait_msg(worker *w, pl_wire_msg *m, int wait_ms, const char *what) {
    for (int waited = 0; !wait_ms || waited < wait_ms; waited += 200) {
        if (stopped(w)) return PL_ERR_ARG; /* not a failure: the caller says bye */
        /* in a chain the host says little (ping, bye): it is heard every 100 ms, since
         * even a recv without waiting takes a timer's tick */
        int64_t t = now_ms();
        bool host = !w->prev || t - w->host_polled >= 100;
        if (host) w->host_polled = t;
        pl_status s = host ? pl_room_recv(w->link, m, w->prev ? 0 : 200) : PL_ERR;
        if (s == PL_ERR && w->prev) { /* frames and rewinds from the previous worker */
            s = pl_room_recv(w->prev, m, 100);
            if (!s && (m->type == PL_MSG_HIDDEN || m->type == PL_MSG_REWIND)) return PL_OK;
            if (s == PL_ERR_IO) { /* gone: the host takes the chain over and says bye */
                pl_link_close(w->prev);
                w->prev = NULL;
            }
            continue; /* anything else from it is the host's business */
        }
        if (s == PL_ERR) continue;
        if (s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "the host left the room");
        if (s) return pl_fail(s, "the host sent a bad message: %s", pl_last_error());
        if (m->type == PL_MSG_ERROR)
            return pl_fail(PL_ERR, "the host refused this worker: %s", m->error.text);
        return PL_OK;
    }
    return pl_fail(PL_ERR, "no %s from the host within %d ms", what, wait_ms);
}

/* A worker without the model file: the host's part message after the plan, then the part
 * file of its layers into w->path (fetch.h) and its identity into id. */
static pl_status take_part(worker *w, const pl_wire_plan *p, uint8_t id[32]) {
    if (p->id_kind != PL_MODEL_ID_TENSORS)
        return pl_fail(PL_ERR_FORMAT, "the plan has no tensor hashes: the host cannot send layers");
    pl_wire_plan plan = *p; /* the hashes point into the link's buffer: keep a copy */
    size_t hn = (size_t)p->n_tensors * 32;
    uint8_t *hashes = malloc(hn);
    if (!hashes) return pl_fail(PL_ERR_NOMEM, "out of memory for %u tensor hashes", p->n_tensors);
    memcpy(hashes, p->hashes, hn);
    plan.hashes = hashes;
    pl_wire_msg m;
    pl_status s = wait_msg(w, &m, PL_ROOM_PIECE_MS, "part message");
    if (!s && m.type != PL_MSG_PART)
        s = pl_fail(PL_ERR_FORMAT, "the host sent a %s where the part message was due",
                    pl_wire_type_name(m.type));
    if (!s) {
        pl_room_fetch_opts fo = {.link = w->link,
                                 .plan = &plan,
                                 .part = &m.part,
                                 .first = w->first,
                                 .last = w->last,
                                 .cache_dir = w->o->cache_dir,
                                 .verbose = w->o->verbose,
                                 .die_after = w->o->test_die_after,
                                 .stop = w->o->stop};
        s = pl_room_fetch_part(&fo, w->path, sizeof w->path, id);
    }
    free(hashes);
    return s;
}

/* Load layers [first, last) as the plan says and report their identity (ready); on failure
 * the host is told why. */
static pl_status take_plan(worker *w, const pl_wire_plan *p) {
    const pl_room_join_opts *o = w->o;
    const pl_wire_member *me = NULL;
    for (uint32_t i = 0; i < p->n_members; i++)
        if (p->members[i].id == 0) me = &p->members[i];
    pl_status s = PL_OK;
    pl_wire_msg ready = {.type = PL_MSG_READY};
    bool have_id = false;
    if (!me) s = pl_fail(PL_ERR_FORMAT, "the plan deals this worker no layers");
    if (!s) {
        w->first = (int)me->first, w->last = (int)me->last, w->n_ctx = (int)p->n_ctx;
        ready.ready.first = me->first, ready.ready.last = me->last;
    }
    if (!s && !w->g) { /* no model file: the part from the cache, or fetched from the host */
        s = take_part(w, p, ready.ready.part_id);
        have_id = !s;
        if (!s && (s = pl_gguf_open(w->path, &w->g)))
            s = pl_fail(s, "the part fetched into %s: %s", w->path, pl_last_error());
    }
    if (!s) {
        pl_model_opts mo = {
            .prefault = true, .layer_first = w->first, .layer_last = w->last, .ends = PL_ENDS_NONE};
        int n_layer;
        s = pl_model_load(w->g, w->be, &mo, &w->m);
        if (!s && (n_layer = pl_model_get_info(w->m)->n_layer) != (int)p->n_layers)
            s = pl_fail(PL_ERR_FORMAT, "the room's model has %u layers, %s has %d", p->n_layers,
                        w->path, n_layer);
    }
    if (!s && !have_id)
        s = pl_room_part_id(w->g, w->first, w->last, o->hash_cache, ready.ready.part_id);
    /* the chain: the next member's address (a worker) gets this worker's output; the
     * previous one's (a worker) dials this one. Empty addresses: a star through the host. */
    int at = (int)(me - p->members);
    const pl_wire_member *next = at + 1 < (int)p->n_members ? &p->members[at + 1] : NULL;
    bool from_worker = at > 0 && p->members[at - 1].addr[0];
    if (!s && next && next->addr[0] &&
        (s = pl_link_dial(next->addr, o->key, PL_ROOM_SEND_MS, NULL, &w->next)))
        s = pl_fail(s, "cannot reach the next worker of the chain at %s: %s", next->addr,
                    pl_last_error());
    if (!s && from_worker && (!w->lis || (s = pl_link_accept(w->lis, PL_ROOM_HELLO_MS, &w->prev))))
        s = pl_fail(PL_ERR, "the previous worker of the chain did not reach %s within %d ms",
                    w->lis ? pl_listener_url(w->lis) : "this worker (it listens nowhere)",
                    PL_ROOM_HELLO_MS);
    if (!s) {
        w->cols_max = pl_wire_frame_cols(pl_model_get_info(w->m)->n_embd, p->dtype, true);
        if (w->cols_max > w->n_ctx) w->cols_max = w->n_ctx;
        pl_state_opts so = pl_state_opts_default(w->m);
        so.n_ctx = w->n_ctx;
        /* the widest frame the host may send (PL_CAP_WIDE in the hello) */
        so.n_batch = w->cols_max;
        /* the snapshots the host asks for when it speculates (the plan's n_snap, at most
         * the batch): a rewind into a verify frame's columns then needs no fresh start
         * (without them a hybrid's worker starts afresh: remote_stage.c) */
        so.n_snap = p->n_snap < so.n_batch ? p->n_snap : so.n_batch;
        so.kv_type = o->kv_type;
        s = pl_state_new(w->m, &so, &w->s);
    }
    int64_t frame = (int64_t)w->cols_max * (w->m ? pl_model_get_info(w->m)->n_embd : 0);
    if (!s && (!(w->cols = malloc((size_t)frame * sizeof(float))) ||
               !(w->out = malloc((size_t)frame * sizeof(float)))))
        s = pl_fail(PL_ERR_NOMEM, "out of memory for frames");
    if (s) {
        char line[PL_WIRE_MAX_TEXT + 1];
        snprintf(line, sizeof line, "%s", pl_last_error());
        pl_room_send_error(w->link, PL_WERR_MODEL, line);
        return pl_fail(s, "%s", line);
    }
    if (o->verbose)
        fprintf(stderr,
                "room: serving layers %d..%d of %u (ctx %d, %s frames, %d snapshots) on %s; %s%s\n",
                w->first, w->last, p->n_layers, w->n_ctx, p->dtype == PL_WIRE_F16 ? "f16" : "f32",
                pl_state_get_opts(w->s)->n_snap, w->be->device,
                w->next ? "results to the next worker at " : "results to the host",
                w->next ? next->addr : "");
    return pl_room_send(w->link, &ready, PL_ROOM_SEND_MS);
}

/* Before joining: the model's header and metadata digest, the backend, the speed probe. */
static pl_status prepare(worker *w, pl_wire_hello *h) {
    const pl_room_join_opts *o = w->o;
    const char *note = NULL;
    pl_status s = o->model ? pl_gguf_open(o->model, &w->g) : PL_OK;
    if (o->model) snprintf(w->path, sizeof w->path, "%s", o->model);
    if (!s) s = pl_backend_open(o->backend ? o->backend : "auto", o->threads, &w->be, &note);
    if (s) return s;
    w->be->act_q8 = o->act_q8;
    w->note = note;
    *h = (pl_wire_hello){.caps = PL_CAP_F16_WIRE | PL_CAP_WIDE | PL_CAP_SNAP |
                                 (o->model ? 0 : PL_CAP_WEIGHT_FETCH),
                         .mem_lent = o->lend,
                         .has_model = o->model != NULL,
                         .want_first = (uint32_t)o->want_first,
                         .want_last = (uint32_t)o->want_last};
    if (w->g && (s = pl_gguf_meta_digest(w->g, h->model_id))) return s;
    if (o->listen && (s = pl_link_listen(o->listen, o->key, NULL, &w->lis)))
        return pl_fail(s, "cannot listen on %s for the chain: %s", o->listen, pl_last_error());
    if (w->lis) snprintf(h->addr, sizeof h->addr, "%.128s", pl_listener_url(w->lis));
    pl_probe_opts po = {.budget_s = o->probe_s};
    pl_probe_result pr;
    if (w->g && pl_probe_speed(w->g, w->be, &po, &pr) == PL_OK &&
        pr.layers_per_s < PL_WIRE_MAX_SPEED)
        h->speed = (float)pr.layers_per_s;
    else
        pl_clear_error(); /* no speed: the plan counts this device as the slowest */
    snprintf(h->backend, sizeof h->backend, "%s", w->be->name ? w->be->name : "?");
    snprintf(h->device, sizeof h->device, "%.64s", w->be->device);
    for (char *c = h->device; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    return PL_OK;
}

/* While the host works on the token just answered, record and encode this worker's layers
 * for the next one (a decode frame at pos), to run the moment its column arrives: the GPU
 * then waits a write and a submit for it, not the recording of every layer (backend.h's
 * prepare). Only where nothing is left to undo if the frame that comes is another (a KV
 * cache: the pass, dropped, never ran); any failure just leaves the next frame to the plain
 * path. */
static void prepare_next(worker *w, int64_t pos) {
    if (!w->be->can_prepare || w->o->no_prepare || pos + 1 > w->n_ctx ||
        !pl_state_rewinds_free(w->s))
        return;
    pl_buf *x = pl_state_hidden(w->s);
    int64_t d = pl_model_get_info(w->m)->n_embd;
    pl_read_range r = {x, 0, w->cols, d * (int64_t)sizeof(float)};
    if (pl_model_layers(w->m, w->s, 1, pos, w->first, w->last) || pl_be_prepare(x, &r, 1)) {
        pl_clear_error();
        return;
    }
    w->prep_pos = pos;
}

/* Run the layers over one frame and send its result back. */
static pl_status serve_frame(worker *w, const pl_wire_hidden *h) {
    int64_t d = pl_model_get_info(w->m)->n_embd, count = (int64_t)h->n_cols * d;
    if (h->n_embd != (uint32_t)d)
        return pl_fail(PL_ERR_FORMAT, "a frame of width %u for a model of width %lld", h->n_embd,
                       (long long)d);
    if (h->n_cols > w->cols_max)
        return pl_fail(PL_ERR_ARG, "a frame of %u columns: this worker takes at most %d", h->n_cols,
                       w->cols_max);
    if ((int64_t)h->pos0 + h->n_cols > w->n_ctx)
        return pl_fail(PL_ERR_ARG, "a frame at positions past the context of %d", w->n_ctx);
    if (h->dtype == PL_WIRE_F16) {
        memcpy(w->out, h->data, (size_t)count * 2);
        pl_hidden_from_f16(w->out, w->cols, count);
    } else {
        memcpy(w->cols, h->data, (size_t)count * sizeof(float));
    }
    pl_buf *x = pl_state_hidden(w->s);
    int64_t bytes = count * (int64_t)sizeof(float);
    /* the last worker answers a tail frame with its last column alone (read back alone) */
    int64_t skip = (h->flags & PL_HID_TAIL) && !w->next ? h->n_cols - 1 : 0;
    pl_status s = PL_OK;
    count -= skip * d;
    if (h->n_cols == 1 && h->pos0 == w->prep_pos && pl_be_has_prepared(w->be)) {
        s = pl_be_run_prepared(w->be, w->cols, bytes); /* its read fills w->cols */
        w->n_prepared++;
    } else {
        s = pl_be_write(x, 0, w->cols, bytes);
        if (!s) s = pl_model_layers(w->m, w->s, h->n_cols, h->pos0, w->first, w->last);
        if (!s)
            s = pl_be_read(x, skip * d * (int64_t)sizeof(float), w->cols,
                           count * (int64_t)sizeof(float));
    }
    w->prep_pos = -1;
    w->n_frames++;
    if (s) return s;
    /* down the chain as the next worker's frame, or back to the host as the result */
    pl_wire_msg r = {.type = w->next ? PL_MSG_HIDDEN : PL_MSG_RESULT, .hidden = *h};
    r.hidden.pos0 = h->pos0 + (uint32_t)skip, r.hidden.n_cols = (uint16_t)(h->n_cols - skip);
    r.hidden.data = w->cols;
    if (h->dtype == PL_WIRE_F16) {
        pl_hidden_to_f16(w->cols, w->out, count);
        r.hidden.data = w->out;
    }
    pl_status s2 =
        r.hidden.n_cols == 1 ? post_now(w, &r, w->next != NULL) : post_to(w, &r, w->next != NULL);
    if (!s2 && h->n_cols == 1) prepare_next(w, h->pos0 + 1);
    return s2;
}

static void set_busy(worker *w, bool busy) {
    pthread_mutex_lock(&w->q.mu);
    w->q.busy = busy;
    pthread_mutex_unlock(&w->q.mu);
}

/* Frames and rewinds until bye. A frame or rewind that fails is answered with an error
 * (the host fails its turn) and serving goes on. */
static pl_status serve(worker *w) {
    int served = 0;
    for (;;) {
        pl_wire_msg m;
        pl_status s = wait_msg(w, &m, 0, "frame");
        if (s == PL_ERR_ARG) return s; /* stopped */
        if (s) return s;
        if (w->q.muted && m.type != PL_MSG_BYE) continue; /* tests: silent until bye */
        switch (m.type) {
        case PL_MSG_HIDDEN:
            set_busy(w, true);
            if (!served && w->o->slow_ms)
                nanosleep(&(struct timespec){w->o->slow_ms / 1000,
                                             (long)(w->o->slow_ms % 1000) * 1000000L},
                          NULL);
            s = serve_frame(w, &m.hidden);
            set_busy(w, false);
            if (!s && ++served == w->o->mute_after) {
                pthread_mutex_lock(&w->q.mu);
                w->q.muted = true;
                pthread_mutex_unlock(&w->q.mu);
            }
            break;
        case PL_MSG_REWIND:
            /* the echo, with n_past 0 where the state could not go back and starts afresh */
            if (pl_state_rewind(w->s, m.rewind.n_past)) {
                pl_state_rewind(w->s, 0);
                m.rewind.n_past = 0;
            }
            s = post_to(w, &m, w->next != NULL); /* down the chain: the last one echoes it */
            break;
        case PL_MSG_PING: {
            pl_wire_msg p = {.type = PL_MSG_PONG};
            p.ping.t_ping = m.ping.t_ping;
            s = post(w, &p);
            break;
        }
        case PL_MSG_BYE:
            if (w->o->counts)
                w->o->counts->frames = w->n_frames, w->o->counts->prepared = w->n_prepared;
            if (w->o->verbose && w->n_frames)
                fprintf(stderr, "room: %lld frames served, %lld through a pass prepared ahead\n",
                        (long long)w->n_frames, (long long)w->n_prepared);
            return PL_OK;
        default:
            s = pl_fail(PL_ERR_FORMAT, "a %s message while serving", pl_wire_type_name(m.type));
        }
        if (s == PL_ERR_IO || (s && pl_link_dead(w->link)))
            return pl_fail(PL_ERR_IO, "the host left the room");
        if (s) {
            pl_wire_msg e = {.type = PL_MSG_ERROR};
            e.error.code = PL_WERR_INTERNAL;
            pl_room_error_text(pl_last_error(), e.error.text);
            if (post(w, &e)) return pl_fail(PL_ERR_IO, "the host left the room");
        }
    }
}

pl_status pl_room_join(const pl_room_join_opts *o) {
    worker w = {.o = o, .prep_pos = -1};
    pl_wire_msg m = {.type = PL_MSG_HELLO};
    pl_status s = prepare(&w, &m.hello);
    if (!s)
        s = pl_link_dial(o->url, o->key, o->dial_ms ? o->dial_ms : PL_LINK_HANDSHAKE_MS + 5000,
                         NULL, &w.link);
    if (!s && o->verbose) { /* in the room: what this device brings */
        if (w.note) fprintf(stderr, "%s\n", w.note);
        fprintf(stderr, "room: this device: %s, lends %.0f MiB, speed %.1f layers/s\n",
                m.hello.device, (double)o->lend / (1 << 20), m.hello.speed);
    }
    if (!s) s = pl_room_send(w.link, &m, PL_ROOM_SEND_MS);
    if (!s) s = wait_msg(&w, &m, o->plan_ms, "plan");
    bool idle = !s && m.type == PL_MSG_BYE;
    if (idle && o->verbose)
        fprintf(stderr, "room: the plan needs no layers of this device: it stays idle\n");
    if (!s && !idle && m.type != PL_MSG_PLAN)
        s = pl_fail(PL_ERR_FORMAT, "the host sent a %s where the plan was due",
                    pl_wire_type_name(m.type));
    if (!s && !idle) s = take_plan(&w, &m.plan);
    if (!s && !idle) {
        pthread_mutex_init(&w.q.mu, NULL);
        pthread_cond_init(&w.q.cv, NULL);
        if (pthread_create(&w.q.th, NULL, sender, &w))
            s = pl_fail(PL_ERR_NOMEM, "cannot start a thread");
        w.q.running = !s;
        if (!s) s = serve(&w);
        sender_stop(&w);
        pthread_cond_destroy(&w.q.cv);
        pthread_mutex_destroy(&w.q.mu);
    }
    if (s == PL_ERR_ARG && stopped(&w)) { /* Ctrl-C, kill: a clean leave */
        pl_wire_msg bye = {.type = PL_MSG_BYE, .bye = PL_BYE_LEAVE};
        pl_room_send(w.link, &bye, 1000);
        s = PL_OK;
    }
    if (w.link) pl_link_close(w.link);
    pl_link_close(w.prev);
    pl_link_close(w.next);
    pl_listener_close(w.lis);
    free(w.cols);
    free(w.out);
    pl_state_free(w.s);
    pl_model_free(w.m);
    if (w.be) pl_be_destroy(w.be);
    pl_gguf_free(w.g);
    return s;
}
