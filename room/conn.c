/* conn.c - length-prefixed frames over NNG streams (tcp://) or in-memory queues (inproc://).
 *
 * A frame on a stream is a u32 little-endian length and that many bytes. Receiving keeps a
 * partial frame across timeouts, so a timeout never desynchronises the stream. */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KIND_NNG, KIND_MEM };

/* ---------------------------------------------------------------- in-memory frame queues */

#define MEMQ_MAX_BYTES  (16u << 20) /* a sender waits while this much is queued */
#define MEM_MAX_PENDING 16          /* dials waiting for conn_accept */

typedef struct mframe {
    struct mframe *next;
    size_t n;
    uint8_t data[];
} mframe;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mframe *head, *tail;
    size_t bytes;
    bool closed;
    int refs; /* the two conns sharing it */
} memq;

struct conn {
    int kind;
    char peer[80];
    atomic_bool dead;
    /* NNG */
    nng_stream *s;
    nng_stream_dialer *dialer;
    nng_aio *rx, *tx;
    uint8_t hdr[4];
    size_t hdr_have, need, have, cap;
    bool in_body;
    uint8_t *buf;
    /* in-memory */
    memq *in, *out;
    mframe *last; /* the frame conn_recv returned last */
};

struct conn_listener {
    int kind;
    nng_stream_listener *nl;
    nng_aio *aio;
    char name[200]; /* inproc:// name */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    conn *pending[MEM_MAX_PENDING];
    int n_pending;
    atomic_bool shut;
    struct conn_listener *next;
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static conn_listener *registry; /* inproc listeners by name */

int64_t conn_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Wait on cv until deadline_ms (monotonic); false once it has passed. */
static bool cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms) {
    if (conn_now_ms() >= deadline_ms) return false;
    struct timespec t = {(time_t)(deadline_ms / 1000), (long)(deadline_ms % 1000) * 1000000};
    pthread_cond_timedwait(cv, mu, &t);
    return true;
}

static memq *memq_new(void) {
    memq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    cond_init_mono(&q->cv);
    q->refs = 2;
    return q;
}

static void memq_close(memq *q) {
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void memq_unref(memq *q) {
    pthread_mutex_lock(&q->mu);
    int left = --q->refs;
    pthread_mutex_unlock(&q->mu);
    if (left) return;
    for (mframe *f = q->head, *next; f; f = next) next = f->next, free(f);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

static int memq_put(memq *q, const void *p, size_t n, int64_t deadline) {
    mframe *f = malloc(sizeof *f + n);
    if (!f) return CONN_ERR;
    f->next = NULL, f->n = n;
    memcpy(f->data, p, n);
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->bytes && q->bytes + n > MEMQ_MAX_BYTES)
        if (!cond_wait_until(&q->cv, &q->mu, deadline)) break;
    int rc = q->closed ? CONN_DEAD : q->bytes && q->bytes + n > MEMQ_MAX_BYTES ? CONN_TIMEOUT : 0;
    if (rc == CONN_OK) {
        if (q->tail)
            q->tail->next = f;
        else
            q->head = f;
        q->tail = f, q->bytes += n;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    if (rc) free(f);
    return rc;
}

static int memq_get(memq *q, mframe **out, int64_t deadline) {
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->closed)
        if (!cond_wait_until(&q->cv, &q->mu, deadline)) break;
    int rc = CONN_OK;
    if (q->head) { /* frames sent before a close are still delivered, as TCP does */
        *out = q->head;
        q->head = q->head->next;
        if (!q->head) q->tail = NULL;
        q->bytes -= (*out)->n;
        pthread_cond_broadcast(&q->cv);
    } else {
        rc = q->closed ? CONN_DEAD : CONN_TIMEOUT;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* ---------------------------------------------------------------- listen, accept, dial */

static bool is_inproc(const char *url) {
    return strncmp(url, "inproc://", 9) == 0;
}

static void peer_name(conn *c) {
    nng_sockaddr sa;
    snprintf(c->peer, sizeof c->peer, "?");
    if (nng_stream_get_addr(c->s, NNG_OPT_REMADDR, &sa) != 0) return;
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa.s_family == NNG_AF_INET) {
        inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(sa.s_in.sa_port));
    } else if (sa.s_family == NNG_AF_INET6) {
        inet_ntop(AF_INET6, sa.s_in6.sa_addr, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(sa.s_in6.sa_port));
    }
}

static conn *conn_from_stream(nng_stream *s, nng_stream_dialer *d) {
    conn *c = calloc(1, sizeof *c);
    if (!c || nng_aio_alloc(&c->rx, NULL, NULL) || nng_aio_alloc(&c->tx, NULL, NULL)) {
        if (c && c->rx) nng_aio_free(c->rx);
        free(c);
        nng_stream_free(s);
        if (d) nng_stream_dialer_free(d);
        return NULL;
    }
    c->kind = KIND_NNG, c->s = s, c->dialer = d;
    peer_name(c);
    return c;
}

int conn_listen(const char *url, conn_listener **out, char *bound_url, size_t cap, char *err,
                size_t errcap) {
    *out = NULL;
    conn_listener *l = calloc(1, sizeof *l);
    if (!l) return snprintf(err, errcap, "out of memory"), CONN_ERR;
    pthread_mutex_init(&l->mu, NULL);
    cond_init_mono(&l->cv);
    if (is_inproc(url)) {
        l->kind = KIND_MEM;
        snprintf(l->name, sizeof l->name, "%s", url + 9);
        pthread_mutex_lock(&registry_mu);
        for (conn_listener *o = registry; o; o = o->next)
            if (!strcmp(o->name, l->name)) {
                pthread_mutex_unlock(&registry_mu);
                snprintf(err, errcap, "%s is already in use", url);
                conn_listener_free(l);
                return CONN_ERR;
            }
        l->next = registry, registry = l;
        pthread_mutex_unlock(&registry_mu);
        snprintf(bound_url, cap, "%s", url);
        *out = l;
        return CONN_OK;
    }
    l->kind = KIND_NNG;
    int rv = nng_stream_listener_alloc(&l->nl, url);
    if (!rv) nng_stream_listener_set_bool(l->nl, NNG_OPT_TCP_KEEPALIVE, true);
    if (!rv) nng_stream_listener_set_bool(l->nl, NNG_OPT_TCP_NODELAY, true); /* see conn_dial */
    if (!rv) rv = nng_stream_listener_listen(l->nl);
    if (!rv) rv = nng_aio_alloc(&l->aio, NULL, NULL);
    if (rv) {
        snprintf(err, errcap, "cannot listen on %s: %s", url, nng_strerror(rv));
        conn_listener_free(l);
        return CONN_ERR;
    }
    int port = 0;
    snprintf(bound_url, cap, "%s", url);
    char *colon = strrchr(bound_url, ':');
    if (!strncmp(url, "tcp://", 6) && colon &&
        !nng_stream_listener_get_int(l->nl, NNG_OPT_TCP_BOUND_PORT, &port))
        snprintf(colon + 1, cap - (size_t)(colon + 1 - bound_url), "%d", port);
    *out = l;
    return CONN_OK;
}

conn *conn_accept(conn_listener *l) {
    while (!atomic_load(&l->shut)) {
        if (l->kind == KIND_MEM) {
            pthread_mutex_lock(&l->mu);
            while (!l->n_pending && !atomic_load(&l->shut)) pthread_cond_wait(&l->cv, &l->mu);
            conn *c = NULL;
            if (l->n_pending && !atomic_load(&l->shut)) {
                c = l->pending[0];
                memmove(l->pending, l->pending + 1, (size_t)--l->n_pending * sizeof(conn *));
            }
            pthread_mutex_unlock(&l->mu);
            return c;
        }
        nng_aio_set_timeout(l->aio, NNG_DURATION_INFINITE);
        nng_stream_listener_accept(l->nl, l->aio);
        nng_aio_wait(l->aio);
        int rv = nng_aio_result(l->aio);
        if (rv == 0) return conn_from_stream(nng_aio_get_output(l->aio, 0), NULL);
        if (!atomic_load(&l->shut)) nng_msleep(10); /* a failed accept (ECONNABORTED): retry */
    }
    return NULL;
}

void conn_listener_shutdown(conn_listener *l) {
    if (!l || atomic_exchange(&l->shut, true)) return;
    if (l->kind == KIND_MEM) {
        pthread_mutex_lock(&registry_mu);
        for (conn_listener **p = &registry; *p; p = &(*p)->next)
            if (*p == l) {
                *p = l->next;
                break;
            }
        pthread_mutex_unlock(&registry_mu);
        pthread_mutex_lock(&l->mu);
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    } else if (l->nl) {
        nng_stream_listener_close(l->nl);
    }
}

void conn_listener_free(conn_listener *l) {
    if (!l) return;
    conn_listener_shutdown(l);
    for (int i = 0; i < l->n_pending; i++) conn_free(l->pending[i]);
    if (l->aio) nng_aio_free(l->aio);
    if (l->nl) nng_stream_listener_free(l->nl);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

static int dial_inproc(const char *url, conn **out, char *err, size_t errcap) {
    conn *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    memq *q1 = memq_new(), *q2 = memq_new();
    if (!a || !b || !q1 || !q2) {
        free(a), free(b), free(q1), free(q2);
        return snprintf(err, errcap, "out of memory"), CONN_ERR;
    }
    a->kind = b->kind = KIND_MEM;
    a->out = b->in = q1, a->in = b->out = q2;
    snprintf(a->peer, sizeof a->peer, "inproc");
    snprintf(b->peer, sizeof b->peer, "inproc");
    int rc = CONN_ERR;
    pthread_mutex_lock(&registry_mu);
    conn_listener *l = registry;
    while (l && strcmp(l->name, url + 9)) l = l->next;
    if (!l) {
        snprintf(err, errcap, "nobody listens at %s", url);
    } else {
        pthread_mutex_lock(&l->mu);
        if (l->n_pending < MEM_MAX_PENDING) {
            l->pending[l->n_pending++] = b;
            pthread_cond_broadcast(&l->cv);
            rc = CONN_OK;
        } else {
            snprintf(err, errcap, "%s is busy: too many peers joining at once", url);
        }
        pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_unlock(&registry_mu);
    if (rc) {
        conn_free(a), conn_free(b);
        return rc;
    }
    *out = a;
    return CONN_OK;
}

int conn_dial(const char *url, int timeout_ms, conn **out, char *err, size_t errcap) {
    *out = NULL;
    if (is_inproc(url)) return dial_inproc(url, out, err, errcap);
    nng_stream_dialer *d = NULL;
    nng_aio *aio = NULL;
    int rv = nng_stream_dialer_alloc(&d, url);
    if (!rv) nng_stream_dialer_set_bool(d, NNG_OPT_TCP_KEEPALIVE, true);
    /* NNG's streams leave Nagle's algorithm on (its sockets do not): then a frame sent while
     * the previous one is unacknowledged waits for the peer's delayed ack, ~40 ms, and a
     * prefill with frames in flight stalls on every one of them */
    if (!rv) nng_stream_dialer_set_bool(d, NNG_OPT_TCP_NODELAY, true);
    if (!rv) rv = nng_aio_alloc(&aio, NULL, NULL);
    if (!rv) {
        nng_aio_set_timeout(aio, timeout_ms > 0 ? timeout_ms : 1);
        nng_stream_dialer_dial(d, aio);
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
    }
    nng_stream *s = rv ? NULL : nng_aio_get_output(aio, 0);
    if (aio) nng_aio_free(aio);
    if (rv) {
        snprintf(err, errcap, "cannot reach %s: %s", url, nng_strerror(rv));
        if (d) nng_stream_dialer_free(d);
        return rv == NNG_ETIMEDOUT ? CONN_TIMEOUT : CONN_ERR;
    }
    *out = conn_from_stream(s, d);
    if (!*out) return snprintf(err, errcap, "out of memory"), CONN_ERR;
    return CONN_OK;
}

/* ---------------------------------------------------------------- send, recv */

static int remaining(int64_t deadline) {
    int64_t r = deadline - conn_now_ms();
    return r < 1 ? 1 : (int)r;
}

/* Whether an operation that ended with a timeout and moved nothing is simply tried again:
 * before the deadline the timeout was not its own. NNG 1.5's timer thread takes an expired
 * operation's cancel routine, drops its lock and calls it later; when that operation
 * completed meanwhile and the aio went on to the next one, the late cancel ends the next
 * operation with the previous one's timeout (a receive with 5 s left timed out at once). */
static bool stale_timeout(int rv, size_t got, int64_t deadline) {
    return rv == NNG_ETIMEDOUT && !got && conn_now_ms() < deadline;
}

static int dead(conn *c, int rc) {
    atomic_store(&c->dead, true);
    return rc;
}

int conn_send(conn *c, const void *p, size_t n, int timeout_ms) {
    if (atomic_load(&c->dead)) return CONN_DEAD;
    if (n > CONN_MAX_FRAME) return CONN_ERR;
    int64_t deadline = conn_now_ms() + timeout_ms;
    if (c->kind == KIND_MEM) {
        int rc = memq_put(c->out, p, n, deadline);
        return rc == CONN_OK || rc == CONN_ERR ? rc : dead(c, rc);
    }
    uint8_t hdr[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    size_t total = 4 + n, sent = 0;
    while (sent < total) {
        nng_iov iov[2];
        unsigned k = 0;
        if (sent < 4) iov[k++] = (nng_iov){hdr + sent, 4 - sent};
        size_t body = sent < 4 ? 0 : sent - 4;
        if (n > body) iov[k++] = (nng_iov){(uint8_t *)p + body, n - body};
        nng_aio_set_iov(c->tx, k, iov);
        nng_aio_set_timeout(c->tx, remaining(deadline));
        nng_stream_send(c->s, c->tx);
        nng_aio_wait(c->tx);
        int rv = nng_aio_result(c->tx);
        size_t got = nng_aio_count(c->tx);
        if (stale_timeout(rv, got, deadline)) continue;
        /* A half-sent frame cannot be taken back: any failure ends the stream. */
        if (rv || !got) return dead(c, rv == NNG_ETIMEDOUT ? CONN_TIMEOUT : CONN_DEAD);
        sent += got;
    }
    return CONN_OK;
}

static int recv_mem(conn *c, const uint8_t **p, size_t *n, int64_t deadline) {
    free(c->last);
    c->last = NULL;
    int rc = memq_get(c->in, &c->last, deadline);
    if (rc == CONN_DEAD) return dead(c, rc);
    if (rc == CONN_OK) *p = c->last->data, *n = c->last->n;
    return rc;
}

int conn_recv(conn *c, const uint8_t **p, size_t *n, int timeout_ms) {
    if (atomic_load(&c->dead)) return CONN_DEAD;
    int64_t deadline = conn_now_ms() + timeout_ms;
    if (c->kind == KIND_MEM) return recv_mem(c, p, n, deadline);
    for (;;) {
        if (c->in_body && c->have == c->need) break;
        nng_iov iov = c->in_body ? (nng_iov){c->buf + c->have, c->need - c->have}
                                 : (nng_iov){c->hdr + c->hdr_have, 4 - c->hdr_have};
        nng_aio_set_iov(c->rx, 1, &iov);
        nng_aio_set_timeout(c->rx, remaining(deadline));
        nng_stream_recv(c->s, c->rx);
        nng_aio_wait(c->rx);
        int rv = nng_aio_result(c->rx);
        size_t got = nng_aio_count(c->rx);
        if (stale_timeout(rv, got, deadline)) continue;
        if (rv == NNG_ETIMEDOUT) return CONN_TIMEOUT;
        if (rv || !got) return dead(c, CONN_DEAD);
        if (c->in_body) {
            c->have += got;
            continue;
        }
        if ((c->hdr_have += got) < 4) continue;
        c->need =
            c->hdr[0] | (size_t)c->hdr[1] << 8 | (size_t)c->hdr[2] << 16 | (size_t)c->hdr[3] << 24;
        if (c->need > CONN_MAX_FRAME) return dead(c, CONN_ERR);
        if (c->need > c->cap) {
            uint8_t *b = realloc(c->buf, c->need);
            if (!b) return dead(c, CONN_ERR);
            c->buf = b, c->cap = c->need;
        }
        c->in_body = true, c->have = 0;
    }
    *p = c->buf, *n = c->need;
    c->in_body = false, c->hdr_have = 0;
    return CONN_OK;
}

void conn_abort(conn *c) {
    atomic_store(&c->dead, true);
    if (c->kind == KIND_MEM) {
        memq_close(c->in), memq_close(c->out);
    } else {
        nng_stream_close(c->s);
    }
}

void conn_free(conn *c) {
    if (!c) return;
    if (c->kind == KIND_MEM) {
        if (c->in) memq_close(c->in), memq_unref(c->in);
        if (c->out) memq_close(c->out), memq_unref(c->out);
        free(c->last);
    } else {
        /* The aios before the stream: NNG's timer thread may still be cancelling an
         * operation that completed as its timeout fired (nng_aio_wait has returned, the
         * cancel, which locks the stream, has not run yet). nng_aio_free waits for it;
         * nng_aio_stop does not (NNG 1.5), and a stream freed first crashes NNG. */
        nng_aio_free(c->rx), nng_aio_free(c->tx);
        nng_stream_free(c->s);
        if (c->dialer) nng_stream_dialer_free(c->dialer);
    }
    free(c->buf);
    free(c);
}

int conn_nodelay(conn *c) {
    bool on = false;
    return c->kind == KIND_NNG && !nng_stream_get_bool(c->s, NNG_OPT_TCP_NODELAY, &on) && on;
}

int conn_dead(conn *c) {
    return atomic_load(&c->dead);
}

const char *conn_peer(const conn *c) {
    return c->peer;
}
