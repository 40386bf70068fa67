/* conn_test.c - the byte movers under the room's links (room/conn.c) over tcp://127.0.0.1:
 * both ends of a connection send every frame at once (TCP_NODELAY), so frames in flight
 * never wait for the peer's delayed acknowledgement of the one before (NNG's streams leave
 * Nagle's algorithm on unless told), and frames of every size arrive whole and in order,
 * several in one direction before the other side reads. */
#include "test.h"

#include "room/conn.h"

#define T 5000 /* ms: generous for sanitizer builds, never reached when things work */

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
    conn_listener_free(L);
}
