/* link_test.c - the room's secure link over inproc:// and tcp://127.0.0.1 (ephemeral port):
 * messages arrive intact both ways and between several peers of one listener; a wrong key
 * and another protocol version are refused on both sides with a clear line; replayed,
 * reordered, bit-flipped, truncated and 10,000 random frames are dropped and counted while
 * the link keeps working; a junk-sending raw TCP client disturbs nothing; a peer killed with
 * SIGKILL is reported within the timeout. */
#include "test.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "room/link.h"
#include "room/wire.h"

#define KEY "correct horse battery staple"
#define T   5000 /* ms: generous for sanitizer builds, never reached when things work */

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static bool got(pl_link *l, const void *want, size_t n) {
    const uint8_t *p;
    size_t pn;
    pl_status st = pl_link_recv(l, &p, &pn, T);
    if (st) fprintf(stderr, "recv: %s\n", pl_last_error());
    return st == PL_OK && pn == n && !memcmp(p, want, n);
}

/* A dialed link and the listener's side of it. */
static void pair(pl_listener *L, pl_link **d, pl_link **a) {
    *d = *a = NULL;
    CHECK(pl_link_dial(pl_listener_url(L), KEY, T, NULL, d) == PL_OK, "dial: %s", pl_last_error());
    CHECK(pl_link_accept(L, T, a) == PL_OK, "accept: %s", pl_last_error());
}

typedef struct {
    pl_link *l;
    const uint8_t *p;
    size_t n;
    pl_status st;
} big_send;
static void *send_big(void *arg) {
    big_send *b = arg;
    b->st = pl_link_send(b->l, b->p, b->n, T);
    return NULL;
}

/* Messages of every size class, both ways, including the largest; several peers at once. */
static void test_traffic(const char *url) {
    pl_listener *L = NULL;
    CHECK(pl_link_listen(url, KEY, NULL, &L) == PL_OK, "listen %s: %s", url, pl_last_error());
    if (!L) return;
    CHECK(strncmp(url, "tcp://", 6) || !strstr(pl_listener_url(L), ":0"), "bound port: %s",
          pl_listener_url(L));
    pl_link *d[3], *a[3];
    for (int i = 0; i < 3; i++) pair(L, &d[i], &a[i]);
    if (!d[0] || !a[0] || !d[2] || !a[2]) return;
    size_t big_n = PL_LINK_MAX_MSG;
    uint8_t *big = malloc(big_n);
    for (size_t i = 0; i < big_n; i++) big[i] = (uint8_t)(i * 31 + (i >> 13));
    CHECK(pl_link_send(d[0], "one", 3, T) == PL_OK, "in test_traffic");
    /* The largest message from a second thread: over TCP a send waits for the reader. */
    pthread_t th;
    big_send job = {a[0], big, big_n, PL_ERR};
    pthread_create(&th, NULL, send_big, &job);
    CHECK(pl_link_send(d[2], "three", 5, T) == PL_OK, "in test_traffic");
    CHECK(got(d[0], big, big_n), "largest message, listener to dialer");
    pthread_join(th, NULL);
    CHECK(job.st == PL_OK, "sending the largest message");
    CHECK(got(a[0], "one", 3), "small message, dialer to listener");
    CHECK(got(a[2], "three", 5), "the third peer's message on its own link");
    for (int k = 0; k < 50; k++) { /* many in a row, both directions */
        char m[32];
        int n = snprintf(m, sizeof m, "frame %d", k);
        CHECK(pl_link_send(d[1], m, (size_t)n, T) == PL_OK &&
                  pl_link_send(a[1], m, (size_t)n, T) == PL_OK,
              "in test_traffic");
        CHECK(got(a[1], m, (size_t)n) && got(d[1], m, (size_t)n), "frame %d", k);
    }
    CHECK(pl_link_send(d[0], big, big_n + 1, T) == PL_ERR_ARG, "a message past the cap is refused");
    CHECK(pl_link_send(d[0], "", 0, T) == PL_ERR_ARG, "an empty message is refused");
    const uint8_t *p;
    size_t n;
    long long t0 = now_ms();
    CHECK(pl_link_recv(a[0], &p, &n, 100) == PL_ERR && !pl_link_dead(a[0]),
          "a silent peer is a timeout, not a death");
    CHECK(now_ms() - t0 < 2000, "the 100 ms timeout took %lld ms", now_ms() - t0);
    pl_link_stats s;
    pl_link_get_stats(a[1], &s);
    CHECK(s.sent == 50 && s.received == 50 && !s.forged && !s.replayed && !s.malformed,
          "in test_traffic");
    /* a clean close is seen at once by the other side */
    pl_link_close(d[2]);
    t0 = now_ms();
    CHECK(pl_link_recv(a[2], &p, &n, T) == PL_ERR_IO && pl_link_dead(a[2]), "closed peer");
    CHECK(now_ms() - t0 < 1000, "closing noticed after %lld ms", now_ms() - t0);
    CHECK(pl_link_send(a[2], "x", 1, T) == PL_ERR_IO, "sending to a closed peer fails");
    pl_listener_stats ls;
    pl_listener_get_stats(L, &ls);
    CHECK(ls.accepted == 3 && !ls.refused_key && !ls.refused_junk, "in test_traffic");
    for (int i = 0; i < 3; i++) {
        if (i != 2) pl_link_close(d[i]);
        pl_link_close(a[i]);
    }
    free(big);
    pl_listener_close(L);
}

/* A wrong key and another protocol version: refused on both sides, the room unharmed. */
static void test_refusals(const char *url) {
    pl_listener *L = NULL;
    CHECK(pl_link_listen(url, KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    if (!L) return;
    pl_link *d = NULL, *a = NULL, *x = NULL;
    pair(L, &d, &a);
    CHECK(pl_link_dial(pl_listener_url(L), "correct horse battery stapler", T, NULL, &x) ==
                  PL_ERR &&
              !x,
          "in test_refusals");
    CHECK(strstr(pl_last_error(), "wrong room key") && !strchr(pl_last_error(), '\n'), "%s",
          pl_last_error());
    pl_listener_stats ls;
    pl_listener_get_stats(L, &ls);
    CHECK(ls.refused_key == 1 && strstr(ls.last_refusal, "wrong room key"), "%s", ls.last_refusal);
    pl_link_opts newer = {.version = PL_WIRE_VERSION + 1};
    CHECK(pl_link_dial(pl_listener_url(L), KEY, T, &newer, &x) == PL_ERR && !x, "in test_refusals");
    CHECK(strstr(pl_last_error(), "the peer must upgrade"), "newer joiner: %s", pl_last_error());
    pl_listener_get_stats(L, &ls);
    CHECK(ls.refused_version == 1 && strstr(ls.last_refusal, "upgrade this side"), "listener: %s",
          ls.last_refusal);
    /* a listener newer than us: the joiner must upgrade */
    pl_listener *L2 = NULL;
    char url2[300];
    snprintf(url2, sizeof url2, "%s",
             strncmp(url, "inproc", 6) ? "tcp://127.0.0.1:0" : "inproc://newer");
    CHECK(pl_link_listen(url2, KEY, &newer, &L2) == PL_OK, "%s", pl_last_error());
    if (L2) {
        CHECK(pl_link_dial(pl_listener_url(L2), KEY, T, NULL, &x) == PL_ERR && !x,
              "in test_refusals");
        CHECK(strstr(pl_last_error(), "upgrade this side"), "older joiner: %s", pl_last_error());
        pl_listener_close(L2);
    }
    CHECK(pl_link_accept(L, 50, &x) == PL_ERR && !x, "no refused peer is handed out");
    CHECK(pl_link_send(d, "still", 5, T) == PL_OK && got(a, "still", 5), "the room keeps working");
    pl_link_close(d), pl_link_close(a);
    pl_listener_close(L);
}

/* Attacks from inside the stream: replay, reorder, bit flips, truncation, random frames. */
static void test_tampering(const char *url) {
    pl_listener *L = NULL;
    CHECK(pl_link_listen(url, KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    if (!L) return;
    pl_link *d = NULL, *a = NULL;
    pair(L, &d, &a);
    if (!d || !a) return;
    uint8_t *f1, *f2, *f3, *f4;
    size_t n1, n2, n3, n4;
    CHECK(pl_link_seal(d, "first", 5, &f1, &n1) == PL_OK &&
              pl_link_seal(d, "second", 6, &f2, &n2) == PL_OK,
          "in test_tampering");
    CHECK(pl_link_seal(d, "third", 5, &f3, &n3) == PL_OK &&
              pl_link_seal(d, "fourth", 6, &f4, &n4) == PL_OK,
          "in test_tampering");
    /* second arrives before first: second delivered, first (late) dropped as reordered */
    pl_link_send_raw(d, f2, n2, T);
    pl_link_send_raw(d, f1, n1, T);
    pl_link_send_raw(d, f2, n2, T); /* replay */
    f3[n3 / 2] ^= 0x10;             /* a bit flip */
    pl_link_send_raw(d, f3, n3, T);
    pl_link_send_raw(d, f4, n4 - 1, T); /* truncated */
    pl_link_send_raw(d, f4, 10, T);     /* shorter than a sealed frame */
    pl_link_send_raw(d, f4, n4, T);
    CHECK(got(a, "second", 6), "the in-order frame is delivered");
    CHECK(got(a, "fourth", 6), "the intact frame after the attacks is delivered");
    pl_link_stats s;
    pl_link_get_stats(a, &s);
    CHECK(s.reordered == 1 && s.replayed == 1 && s.forged == 2 && s.malformed == 1,
          "reordered %llu replayed %llu forged %llu malformed %llu",
          (unsigned long long)s.reordered, (unsigned long long)s.replayed,
          (unsigned long long)s.forged, (unsigned long long)s.malformed);
    /* a flood of bad frames cannot hold a receiver past its timeout */
    uint8_t zero[64] = {0};
    for (int i = 0; i < 100; i++) pl_link_send_raw(d, zero, sizeof zero, T);
    const uint8_t *p;
    size_t pn;
    usleep(100 * 1000);
    CHECK(pl_link_recv(a, &p, &pn, 0) == PL_ERR, "no authentic frame in the flood");
    pl_link_get_stats(a, &s);
    CHECK(s.forged == 2 + 1, "a 0 ms recv stopped after the first bad frame: forged %llu",
          (unsigned long long)s.forged);
    /* 10,000 random frames: all dropped, then the link still works */
    uint64_t x = 0x1234567887654321ull;
    uint8_t junk[200];
    int working = 0;
    for (int i = 0; i < 10000; i++) {
        size_t n = 1 + (x % sizeof junk);
        for (size_t k = 0; k < n; k++)
            x ^= x << 13, x ^= x >> 7, x ^= x << 17, junk[k] = (uint8_t)x;
        if (pl_link_send_raw(d, junk, n, T) != PL_OK) break;
        if (i % 1000 == 999) /* in rounds, so the socket buffers never fill */
            working += pl_link_send(d, "after", 5, T) == PL_OK && got(a, "after", 5);
    }
    CHECK(working == 10, "the link works between the random frames (%d of 10 rounds)", working);
    pl_link_get_stats(a, &s);
    CHECK(s.forged + s.malformed == 2 + 1 + 100 + 10000 && s.received == 2 + 10,
          "forged %llu malformed %llu", (unsigned long long)s.forged,
          (unsigned long long)s.malformed);
    CHECK(pl_link_send(a, "back", 4, T) == PL_OK && got(d, "back", 4), "and the other direction");
    free(f1), free(f2), free(f3), free(f4);
    pl_link_close(d), pl_link_close(a);
    pl_listener_close(L);
}

/* A raw TCP client that sends junk (and one that claims a 4 GB frame) is dropped; an
 * established link and new joiners are not disturbed. */
static void test_junk_client(void) {
    pl_listener *L = NULL;
    CHECK(pl_link_listen("tcp://127.0.0.1:0", KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    if (!L) return;
    pl_link *d = NULL, *a = NULL;
    pair(L, &d, &a);
    int port = atoi(strrchr(pl_listener_url(L), ':') + 1);
    for (int round = 0; round < 2; round++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "in test_junk_client");
        uint8_t junk[4096];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 131 + round);
        if (round == 1) memset(junk, 0xff, 4); /* a frame length of 4 GB */
        CHECK(send(fd, junk, sizeof junk, MSG_NOSIGNAL) > 0, "in test_junk_client");
        CHECK(pl_link_send(d, "during", 6, T) == PL_OK && got(a, "during", 6),
              "in test_junk_client");
        char c;
        struct timeval tv = {T / 1000, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        CHECK(recv(fd, &c, 1, 0) <= 0, "the junk client is disconnected");
        close(fd);
    }
    /* a client that connects and says nothing delays neither a joiner nor the close */
    int silent = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(silent, (struct sockaddr *)&sa, sizeof sa) == 0, "silent client");
    usleep(100 * 1000);
    long long t0 = now_ms();
    pl_link *d2 = NULL, *a2 = NULL;
    pair(L, &d2, &a2);
    CHECK(d2 && a2 && pl_link_send(d2, "new", 3, T) == PL_OK && got(a2, "new", 3),
          "a new peer joins after the junk");
    CHECK(now_ms() - t0 < PL_LINK_HANDSHAKE_MS - 1000, "joining took %lld ms", now_ms() - t0);
    pl_listener_stats ls;
    pl_listener_get_stats(L, &ls);
    CHECK(ls.refused_junk == 2 && ls.accepted == 2, "junk %llu accepted %llu",
          (unsigned long long)ls.refused_junk, (unsigned long long)ls.accepted);
    pl_link_close(d), pl_link_close(a), pl_link_close(d2), pl_link_close(a2);
    t0 = now_ms();
    pl_listener_close(L);
    CHECK(now_ms() - t0 < 1000, "closing with a handshake in progress took %lld ms", now_ms() - t0);
    close(silent);
}

/* A child process dials, says hello and is killed: the listener's side of the link reports
 * it dead within the timeout. Forked before this process starts NNG's threads. */
static pid_t child;
static int child_pipe[2];
static void fork_peer(void) {
    if (pipe(child_pipe)) return;
    child = fork();
    if (child != 0) return;
    close(child_pipe[1]); /* the parent's exit ends the read below */
    char url[300] = {0};
    if (read(child_pipe[0], url, sizeof url - 1) <= 0) _exit(1);
    pl_link *l = NULL;
    if (pl_link_dial(url, KEY, T, NULL, &l) || pl_link_send(l, "alive", 5, T)) _exit(1);
    for (;;) pause();
}

static void test_dead_peer(void) {
    pl_listener *L = NULL;
    CHECK(child > 0 && pl_link_listen("tcp://127.0.0.1:0", KEY, NULL, &L) == PL_OK,
          "in test_dead_peer");
    if (!L || child <= 0) return;
    CHECK(write(child_pipe[1], pl_listener_url(L), strlen(pl_listener_url(L))) > 0,
          "in test_dead_peer");
    pl_link *a = NULL;
    CHECK(pl_link_accept(L, 3 * T, &a) == PL_OK, "%s", pl_last_error());
    if (a) {
        CHECK(got(a, "alive", 5), "in test_dead_peer");
        kill(child, SIGKILL);
        long long t0 = now_ms();
        const uint8_t *p;
        size_t n;
        CHECK(pl_link_recv(a, &p, &n, 3000) == PL_ERR_IO && pl_link_dead(a), "%s", pl_last_error());
        CHECK(strstr(pl_last_error(), "closed") != NULL, "%s", pl_last_error());
        CHECK(now_ms() - t0 < 3000, "death noticed after %lld ms", now_ms() - t0);
        pl_link_close(a);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    pl_listener_close(L);
}

static void test_bad_calls(void) {
    pl_listener *L = NULL;
    pl_link *l = NULL;
    CHECK(pl_link_listen("inproc://a", "", NULL, &L) == PL_ERR_ARG && !L, "empty key");
    CHECK(pl_link_dial("inproc://nobody", KEY, 100, NULL, &l) != PL_OK && !l, "in test_bad_calls");
    CHECK(strstr(pl_last_error(), "nobody listens"), "%s", pl_last_error());
    CHECK(pl_link_dial("tcp://127.0.0.1:1", KEY, 1000, NULL, &l) != PL_OK && !l, "refused port");
    CHECK(pl_link_listen("bogus://x", KEY, NULL, &L) != PL_OK && !L, "in test_bad_calls");
    CHECK(pl_link_listen("inproc://dup", KEY, NULL, &L) == PL_OK, "in test_bad_calls");
    pl_listener *L2 = NULL;
    CHECK(pl_link_listen("inproc://dup", KEY, NULL, &L2) != PL_OK && !L2, "name in use");
    CHECK(pl_link_dial("inproc://dup", KEY, -1, NULL, &l) == PL_ERR_ARG, "negative timeout");
    pl_listener_close(L);
}

static void run_tests(void) {
    fork_peer();
    test_traffic("inproc://traffic");
    test_traffic("tcp://127.0.0.1:0");
    test_refusals("inproc://refusals");
    test_refusals("tcp://127.0.0.1:0");
    test_tampering("inproc://tamper");
    test_tampering("tcp://127.0.0.1:0");
    test_junk_client();
    test_dead_peer();
    test_bad_calls();
}
