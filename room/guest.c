/* guest.c - guests of a room: the host's service of their asks and the guest's side
 * (guest.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "guest.h"
#include "room.h"
#include "room_io.h"

typedef struct {
    pl_link *link;
    bool guest;       /* said its hello */
    int64_t hello_by; /* ms: a hello must come by then */
    uint8_t *ask;     /* a waiting ask's bytes (NULL: none) */
    size_t n;
    uint64_t order; /* when it asked: first come, first served */
} slot;

typedef struct {
    pl_listener *L;
    const pl_room_guest_opts *o;
    slot s[PL_ROOM_MAX_GUESTS];
    int n;
    uint64_t tick;
    pl_room_guest_stats st;
    int serving; /* the slot being answered (-1: none) */
    bool gone;   /* it left mid-reply */
} service;

static void say(const service *sv, const char *what, const pl_link *l, const char *why) {
    if (sv->o->verbose)
        fprintf(stderr, "room: %s %s%s%s\n", what, pl_link_peer(l), why ? ": " : "",
                why ? why : "");
}

static void drop(service *sv, int i) {
    if (i == sv->serving) sv->gone = true, sv->serving = -1;
    pl_link_close(sv->s[i].link);
    free(sv->s[i].ask);
    sv->s[i] = sv->s[--sv->n];
    if (sv->serving == sv->n) sv->serving = i; /* it moved */
}

static void refuse(service *sv, int i, pl_wire_errcode code, const char *line) {
    say(sv, "dropped the guest at", sv->s[i].link, line);
    sv->st.refused++;
    pl_room_send_error(sv->s[i].link, code, line);
    drop(sv, i);
}

static int waiting(const service *sv) {
    int k = 0;
    for (int i = 0; i < sv->n; i++) k += sv->s[i].ask != NULL;
    return k;
}

/* One message from slot i, if any. */
static void hear(service *sv, int i) {
    slot *g = &sv->s[i];
    const uint8_t *buf;
    size_t n;
    pl_status s = pl_link_recv(g->link, &buf, &n, 0);
    if (s == PL_ERR) {
        if (!g->guest && conn_now_ms() > g->hello_by)
            refuse(sv, i, PL_WERR_PROTOCOL, "said no hello in time");
        return;
    }
    if (s) {
        say(sv, "the guest left:", g->link, NULL);
        drop(sv, i);
        return;
    }
    pl_wire_msg m;
    if (pl_wire_decode(buf, n, &m)) {
        char line[PL_WIRE_MAX_TEXT + 1];
        pl_room_error_text(pl_last_error(), line);
        refuse(sv, i, PL_WERR_PROTOCOL, line);
        return;
    }
    if (!g->guest) {
        if (m.type != PL_MSG_HELLO || !(m.hello.caps & PL_CAP_GUEST)) {
            refuse(sv, i, PL_WERR_PROTOCOL,
                   "this room takes guests only now (its workers joined before): join with "
                   "`pooled room chat`");
            return;
        }
        g->guest = true;
        say(sv, "a guest joined from", g->link, NULL);
        return;
    }
    if (m.type == PL_MSG_BYE) {
        say(sv, "the guest left:", g->link, NULL);
        drop(sv, i);
        return;
    }
    if (m.type != PL_MSG_ASK) {
        char line[80];
        snprintf(line, sizeof line, "a guest sent a %s where an ask was due",
                 pl_wire_type_name(m.type));
        refuse(sv, i, PL_WERR_PROTOCOL, line);
        return;
    }
    if (g->ask || i == sv->serving || waiting(sv) >= PL_ROOM_GUEST_QUEUE) {
        char line[96];
        snprintf(line, sizeof line, "the host is busy (%d asks wait): ask again later",
                 waiting(sv));
        pl_room_send_error(g->link, PL_WERR_BUSY, line);
        sv->st.refused++;
        return;
    }
    g->ask = malloc(n);
    if (!g->ask) {
        refuse(sv, i, PL_WERR_INTERNAL, "the host is out of memory");
        return;
    }
    memcpy(g->ask, buf, n), g->n = n, g->order = ++sv->tick;
}

/* New guests (waiting up to ms for one) and every guest's messages. */
static void poll_all(service *sv, int ms) {
    pl_link *l = NULL;
    if (!pl_link_accept(sv->L, ms, &l)) {
        if (sv->n == PL_ROOM_MAX_GUESTS) {
            pl_room_refuse(l, PL_WERR_BUSY, "the room has as many guests as it takes");
            pl_link_close(l);
        } else {
            sv->s[sv->n++] = (slot){.link = l, .hello_by = conn_now_ms() + PL_ROOM_HELLO_MS};
        }
    }
    for (int i = sv->n - 1; i >= 0; i--) hear(sv, i);
}

static int emit(void *ctx, const char *text, size_t n) {
    service *sv = ctx;
    poll_all(sv, 0); /* others ask meanwhile; a guest that left is noticed here */
    if (sv->gone || (sv->o->stop && *sv->o->stop)) return 1; /* the host stops: so does this */
    while (n) {
        size_t k = n < PL_WIRE_MAX_TEXT_PIECE ? n : PL_WIRE_MAX_TEXT_PIECE;
        pl_wire_msg m = {.type = PL_MSG_TEXT, .text = {.n = (uint32_t)k, .data = text}};
        if (pl_room_send(sv->s[sv->serving].link, &m, PL_ROOM_SEND_MS)) {
            say(sv, "the guest left mid-reply:", sv->s[sv->serving].link, NULL);
            drop(sv, sv->serving);
            return 1;
        }
        text += k, n -= k;
    }
    return 0;
}

pl_status pl_room_guests_serve(pl_listener *L, const pl_room_guest_opts *o) {
    service *sv = calloc(1, sizeof *sv);
    if (!sv) return pl_fail(PL_ERR_NOMEM, "out of memory for the guests");
    sv->L = L, sv->o = o, sv->serving = -1;
    int answered = 0;
    while (!(o->stop && *o->stop) && !(o->max_asks && answered >= o->max_asks)) {
        int next = -1;
        for (int i = 0; i < sv->n; i++)
            if (sv->s[i].ask && (next < 0 || sv->s[i].order < sv->s[next].order)) next = i;
        if (next < 0) {
            poll_all(sv, 50);
            continue;
        }
        uint8_t *buf = sv->s[next].ask;
        sv->s[next].ask = NULL;
        pl_wire_msg m;
        pl_wire_decode(buf, sv->s[next].n, &m); /* decoded once already */
        sv->serving = next, sv->gone = false;
        pl_wire_done done = {.reason = PL_DONE_STOPPED};
        pl_status s = o->answer(o->ud, &m.ask, emit, sv, &done);
        answered++;
        sv->st.asks++, sv->st.left += sv->gone;
        if (sv->gone) sv->st.left_gen = done.n_gen;
        if (o->stats) *o->stats = sv->st;
        if (sv->serving >= 0) {
            pl_link *gl = sv->s[sv->serving].link;
            if (s) {
                char line[PL_WIRE_MAX_TEXT + 1];
                pl_room_error_text(pl_last_error(), line);
                pl_room_send_error(gl, PL_WERR_INTERNAL, line);
            } else {
                pl_wire_msg d = {.type = PL_MSG_DONE, .done = done};
                if (pl_room_send(gl, &d, PL_ROOM_SEND_MS)) drop(sv, sv->serving);
            }
        }
        sv->serving = -1;
        free(buf);
    }
    while (sv->n) {
        pl_wire_msg b = {.type = PL_MSG_BYE, .bye = PL_BYE_SHUTDOWN};
        pl_room_send(sv->s[0].link, &b, 1000);
        drop(sv, 0);
    }
    free(sv);
    return PL_OK;
}

pl_status pl_room_guest_dial(const char *url, const char *key, int timeout_ms, pl_link **out) {
    pl_status s = pl_link_dial(url, key, timeout_ms, NULL, out);
    if (s) return s;
    pl_wire_msg m = {.type = PL_MSG_HELLO,
                     .hello = {.caps = PL_CAP_GUEST, .backend = "guest", .device = ""}};
    s = pl_room_send(*out, &m, PL_ROOM_SEND_MS);
    if (s) {
        pl_link_close(*out);
        *out = NULL;
        return pl_fail(PL_ERR_IO, "cannot greet the host: %s", pl_last_error());
    }
    return PL_OK;
}

pl_status pl_room_guest_ask(pl_link *l, const pl_wire_ask *ask,
                            int (*fn)(void *ud, const char *text, size_t n), void *ud,
                            int timeout_ms, pl_wire_done *done) {
    pl_wire_msg m = {.type = PL_MSG_ASK, .ask = *ask};
    pl_status s = pl_room_send(l, &m, PL_ROOM_SEND_MS);
    if (s) return pl_fail(PL_ERR_IO, "cannot ask the host: %s", pl_last_error());
    for (;;) {
        s = pl_room_recv(l, &m, timeout_ms);
        if (s == PL_ERR) return pl_fail(PL_ERR, "the host said nothing for %d ms", timeout_ms);
        if (s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "the host left the room");
        if (s) return pl_fail(s, "the host: %s", pl_last_error());
        if (m.type == PL_MSG_TEXT) {
            if (fn && fn(ud, m.text.data, m.text.n)) return pl_fail(PL_ERR, "stopped");
        } else if (m.type == PL_MSG_DONE) {
            *done = m.done;
            return PL_OK;
        } else if (m.type == PL_MSG_ERROR) {
            return pl_fail(PL_ERR, "the host: %s", m.error.text);
        } else if (m.type == PL_MSG_BYE) {
            return pl_fail(PL_ERR_IO, "the host closed the room");
        } else if (m.type != PL_MSG_PING && m.type != PL_MSG_PONG) {
            return pl_fail(PL_ERR_FORMAT, "the host sent a %s where text was due",
                           pl_wire_type_name(m.type));
        }
    }
}

typedef struct {
    pl_room_emit_fn emit;
    void *ctx;
    bool gone;
} answering;

/* pooled_generate's callback: the text that became final with each id, to the guest. */
static int on_text(void *ud, int32_t id, const char *text, size_t len) {
    (void)id;
    answering *a = ud;
    if (!a->gone && len) a->gone = a->emit(a->ctx, text, len) != 0;
    return a->gone;
}

/* Through pooled.h: the conversation's ids as `pooled chat` makes them (or, raw, as `pooled
 * run` tokenizes -p), one pooled_generate on the host's session. */
pl_status pl_room_answer(void *ud, const pl_wire_ask *ask, pl_room_emit_fn emit, void *ctx,
                         pl_wire_done *done) {
    static const char *const roles[] = {"system", "user", "assistant"};
    pl_room_answerer *r = ud;
    pooled_message msgs[PL_WIRE_MAX_TURNS];
    int n = 0, rc = 0;
    for (; n < ask->n_turns && !rc; n++) {
        char *t = malloc(ask->turns[n].n + 1);
        if (!t) {
            rc = (int)pl_fail(PL_ERR_NOMEM, "out of memory for the conversation");
            break;
        }
        memcpy(t, ask->turns[n].text, ask->turns[n].n), t[ask->turns[n].n] = 0;
        msgs[n] = (pooled_message){.role = roles[ask->turns[n].role], .content = t};
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    pooled_model_info in = {.size = sizeof in};
    pooled_model_get_info(r->m, &in);
    if (!rc && (ask->flags & PL_ASK_RAW)) { /* as `pooled run` tokenizes -p */
        rc = pooled_tokenize(r->m, msgs[0].content, ask->turns[0].n, 1, 0, &ids, &n_ids);
        if (!rc && !n_ids)
            rc = (int)pl_fail(PL_ERR_ARG, "the prompt is empty (and the model has no BOS)");
    } else if (!rc) {
        pooled_chat_opts co = pooled_chat_opts_default();
        co.no_think = !r->think;
        rc = pooled_chat_tokenize(r->m, msgs, (size_t)n, &co, &ids, &n_ids);
    }
    if (!rc && n_ids >= (size_t)in.n_ctx)
        rc = (int)pl_fail(PL_ERR_ARG, "the conversation takes %zu tokens, the context holds %d",
                          n_ids, in.n_ctx);
    pooled_sample_opts o = r->sp;
    o.temperature = ask->temp, o.seed = ask->seed;
    o.max_tokens = ask->n_predict ? (int64_t)ask->n_predict : -1; /* -1: to the context's end */
    answering a = {.emit = emit, .ctx = ctx};
    pooled_result res = {.size = sizeof res};
    if (!rc) rc = pooled_generate(r->ses, ids, n_ids, &o, on_text, &a, &res);
    *done = (pl_wire_done){.reason = a.gone                               ? PL_DONE_STOPPED
                                     : res.stop_reason == POOLED_STOP_EOG ? PL_DONE_EOG
                                                                          : PL_DONE_LENGTH,
                           .n_gen = (uint32_t)res.n_gen};
    pooled_free(ids);
    while (n--) free((char *)msgs[n].content);
    return (pl_status)rc;
}
