/* conn_test.c - the byte movers under the room's links (room/conn.c) over tcp://127.0.0.1:
 * both ends of a connection send every frame at once (TCP_NODELAY), so frames in flight
 * never wait for the peer's delayed acknowledgement of the one before (NNG's streams leave
 * Nagle's algorithm on unless told), and frames of every size arrive whole and in order,
 * several in one direction before the other side reads.
 * A receive whose frame arrives just as its timeout fires, then the conn freed at once, many
 * times: NNG's timer thread may still be cancelling that receive on the stream (it crashed in
 * NNG when the stream went first); and a receive with a long timeout right after one of those
 * gets its frame, not a timeout it never reached (the timer's late cancel of the previous
 * receive ended it). */
#include "test.h"

#include <pthread.h>
#include <time.h>

#include "room/conn.h"

#define T           5000 /* ms: generous for sanitizer builds, never reached when things work */
#define RACE_ROUNDS 300

static void sleep_us(long us) {
    nanosleep(&(struct timespec){us / 1000000, us % 1000000 * 1000}, NULL);
}

typedef struct {
    conn *d;
    long delay_us;
} race_sender;

/* Three frames: one after delay_us, one 2 ms later, one delay_us after that. */
static void *race_send(void *arg) {
    race_sender *s = arg;
    for (int i = 0; i < 3; i++) {
        sleep_us(i == 1 ? 2000 : s->delay_us);
        if (conn_send(s->d, "x", 1, T) != CONN_OK) break;
    }
    return NULL;
}

/* Poll with the shortest timeout (1 ms of NNG's timer) until a frame comes. */
static int poll_frame(conn *c) {
    const uint8_t *p;
    size_t n;
    int rc;
    int64_t end = conn_now_ms() + T;
    while ((rc = conn_recv(c, &p, &n, 0)) == CONN_TIMEOUT && conn_now_ms() < end) {
    }
    return rc;
}

/* Frames that arrive as a receive times out, and a conn freed right after one. */
static void timeout_races(conn_listener *L, const char *url) {
    int bad_poll = 0, early_timeout = 0, rounds = 0;
    for (int r = 0; r < RACE_ROUNDS; r++) {
        char err[256] = "";
        conn *d = NULL;
        if (conn_dial(url, T, &d, err, sizeof err) != CONN_OK) {
            CHECK(0, "round %d: dial %s: %s", r, url, err);
            break;
        }
        conn *a = conn_accept(L);
        race_sender s = {d, (r % 24) * 100}; /* 0 .. 2.3 ms: around the 1 ms timeouts */
        pthread_t th;
        if (!a || pthread_create(&th, NULL, race_send, &s)) {
            CHECK(0, "round %d: accept or thread", r);
            conn_free(a), conn_free(d);
            break;
        }
        bad_poll += poll_frame(a) != CONN_OK;
        const uint8_t *p;
        size_t n;
        early_timeout += conn_recv(a, &p, &n, T) != CONN_OK;
        bad_poll += poll_frame(a) != CONN_OK;
        conn_free(a); /* at once: the timer thread may be cancelling the last receive */
        pthread_join(th, NULL);
        conn_free(d);
        rounds++;
    }
    CHECK(!bad_poll, "%d of %d polled frames did not arrive", bad_poll, 2 * rounds);
    CHECK(!early_timeout, "%d of %d receives with a %d ms timeout did not get their frame",
          early_timeout, rounds, T);
}

static void run_tests(void) {
    conn_listener *L = NULL;
    char url[256], err[256] = "";
    CHECK(conn_listen("tcp://127.0.0.1:0", &L, url, sizeof url, err, sizeof err) == CONN_OK,
          "listen: %s", err);
    if (!L) return;
    conn *d = NULL, *a = NULL;
    CHECK(conn_dial(url, T, &d, err, sizeof err) == CONN_OK, "dial %s: %s", url, err);
    if (d) a = conn_accept(L);
    CHECK(a != NULL, "accept");
    if (a && d) {
        CHECK(conn_nodelay(d), "the dialed end waits for acks before sending (Nagle on)");
        CHECK(conn_nodelay(a), "the accepted end waits for acks before sending (Nagle on)");
        /* 1 byte to 300 KB, all sent before the first is read: whole, in order */
        static uint8_t buf[300000];
        size_t sizes[] = {1, 3, 4, 5, 4096, 65531, 65536, 65541, 300000, 7};
        int n = (int)(sizeof sizes / sizeof *sizes);
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 31 + 7);
        for (int i = 0; i < n; i++) {
            buf[0] = (uint8_t)i;
            CHECK(conn_send(d, buf, sizes[i], T) == CONN_OK, "send %zu bytes", sizes[i]);
        }
        for (int i = 0; i < n; i++) {
            const uint8_t *p = NULL;
            size_t got = 0;
            int rc = conn_recv(a, &p, &got, T);
            CHECK(rc == CONN_OK && got == sizes[i] && p[0] == (uint8_t)i &&
                      !memcmp(p + 1, buf + 1, got - 1),
                  "frame %d of %zu bytes: rc %d, %zu bytes", i, sizes[i], rc, got);
        }
        const uint8_t *p;
        size_t got;
        CHECK(conn_recv(a, &p, &got, 50) == CONN_TIMEOUT, "nothing more");
    }
    conn_free(d);
    conn_free(a);
    timeout_races(L, url);
    conn_listener_free(L);
}
