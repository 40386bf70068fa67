/* link.c - the room key handshake, sealed frames, and listeners that accept many peers.
 *
 * Handshake (docs/room-protocol.md has the bytes): the dialer sends a fresh challenge, the
 * listener answers with the room's salt and its own challenge, the dialer proves the key
 * over both, the listener checks that proof before proving the key in turn, and both derive
 * one key per direction from the key and both challenges. A stranger never gets a proof.
 * Frames are ChaCha20-Poly1305 (IETF) sealed under a per-direction counter nonce; the
 * receiver keeps a 64-frame anti-replay window. */
#include "link.h"

#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "wire.h"

#define MAGIC      "PLRM"
#define CHAL_BYTES 32
#define SALT_BYTES crypto_pwhash_SALTBYTES                   /* 16 */
#define M1_BYTES   (4 + 2 + 2 + CHAL_BYTES)                  /* magic, version, 0, challenge */
#define M2_BYTES   (4 + 2 + 1 + 1 + SALT_BYTES + CHAL_BYTES) /* magic, version, status, 0, ... */
#define M3_BYTES   32                                        /* the dialer's proof */
#define M4_BYTES   (1 + 32)                                  /* status, the listener's proof */
#define TAG_BYTES  crypto_aead_chacha20poly1305_ietf_ABYTES
#define SEAL_EXTRA (8 + TAG_BYTES) /* counter + tag around every message */
#define READY      "ready"         /* the dialer's first sealed message: it accepted our proof */

enum { ST_OK = 0, ST_VERSION = 1, ST_KEY = 2 };

static const char KDF_CONTEXT[crypto_kdf_CONTEXTBYTES + 1] = "plroom01";

typedef struct {
    _Atomic uint64_t sent, received, replayed, reordered, forged, malformed;
} link_counters;

struct pl_link {
    conn *c;
    uint8_t k_tx[32], k_rx[32];
    pthread_mutex_t tx_mu, rx_mu;
    uint64_t tx_next;          /* counter of the next sealed frame */
    bool rx_any;               /* a frame was delivered: rx_hi is valid */
    uint64_t rx_hi, rx_window; /* highest delivered counter; bit i: rx_hi - i was seen */
    link_counters st;          /* read without the locks by pl_link_get_stats */
    uint8_t *tx_buf;
    size_t tx_cap;
};

typedef struct {
    pthread_t th;
    conn *c; /* while its handshake runs (under the listener's mu) */
    bool used, done;
} slot;

struct pl_listener {
    conn_listener *cl;
    char url[300];
    uint8_t master[32], salt[SALT_BYTES];
    unsigned version;
    int handshake_ms;
    pthread_t accept_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pl_link *ready[PL_LINK_MAX_PENDING];
    int n_ready;
    slot slots[PL_LINK_MAX_PENDING];
    pl_listener_stats st;
    bool closing;
};

/* ---------------------------------------------------------------- crypto helpers */

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static pl_status crypto_ready(void) {
    if (sodium_init() < 0) return pl_fail(PL_ERR, "room link: libsodium failed to initialise");
    return PL_OK;
}

/* Master keys derived by this process, by salt and key digest: Argon2id costs ~0.2 s and
 * 64 MiB, and a room run inside one process (or a member that rejoins) derives the same key
 * again and again. */
#define KEY_CACHE 4
static struct {
    bool used;
    uint8_t salt[SALT_BYTES], key_digest[32], master[32];
} key_cache[KEY_CACHE];
static int key_cache_next;
static pthread_mutex_t key_cache_mu = PTHREAD_MUTEX_INITIALIZER;

/* The room's master key: Argon2id (libsodium's interactive limits) over the key and salt. */
static pl_status derive_master(const char *key, const uint8_t salt[SALT_BYTES], uint8_t out[32]) {
    uint8_t kd[32];
    crypto_generichash(kd, 32, (const uint8_t *)key, strlen(key), NULL, 0);
    bool hit = false;
    pthread_mutex_lock(&key_cache_mu);
    for (int i = 0; i < KEY_CACHE && !hit; i++)
        if (key_cache[i].used && !memcmp(key_cache[i].salt, salt, SALT_BYTES) &&
            !sodium_memcmp(key_cache[i].key_digest, kd, 32))
            memcpy(out, key_cache[i].master, 32), hit = true;
    pthread_mutex_unlock(&key_cache_mu);
    if (hit) return PL_OK;
    if (crypto_pwhash(out, 32, key, strlen(key), salt, crypto_pwhash_OPSLIMIT_INTERACTIVE,
                      crypto_pwhash_MEMLIMIT_INTERACTIVE, crypto_pwhash_ALG_ARGON2ID13))
        return pl_fail(PL_ERR_NOMEM, "room link: not enough memory to derive the room key");
    pthread_mutex_lock(&key_cache_mu);
    int i = key_cache_next++ % KEY_CACHE;
    key_cache[i].used = true;
    memcpy(key_cache[i].salt, salt, SALT_BYTES);
    memcpy(key_cache[i].key_digest, kd, 32);
    memcpy(key_cache[i].master, out, 32);
    pthread_mutex_unlock(&key_cache_mu);
    return PL_OK;
}

/* BLAKE2b-256 keyed with the master key over a label and up to three handshake messages. */
static void mac(uint8_t out[32], const uint8_t k[32], const char *label, const uint8_t *a,
                size_t na, const uint8_t *b, size_t nb, const uint8_t *c, size_t nc) {
    crypto_generichash_state s;
    crypto_generichash_init(&s, k, 32, 32);
    crypto_generichash_update(&s, (const uint8_t *)label, strlen(label) + 1);
    crypto_generichash_update(&s, a, na);
    crypto_generichash_update(&s, b, nb);
    if (c) crypto_generichash_update(&s, c, nc);
    crypto_generichash_final(&s, out, 32);
}

static pl_status check_args(const char *key, int timeout_ms) {
    if (!key || !*key || strlen(key) > PL_LINK_MAX_KEY)
        return pl_fail(PL_ERR_ARG, "room key must be 1..%d bytes", PL_LINK_MAX_KEY);
    if (timeout_ms < 0 || timeout_ms > PL_LINK_MAX_TIMEOUT_MS)
        return pl_fail(PL_ERR_ARG, "room link: timeout %d ms out of range", timeout_ms);
    return PL_OK;
}

static unsigned opt_version(const pl_link_opts *o) {
    return o && o->version ? o->version : PL_WIRE_VERSION;
}

/* A link over c with the session keys of handshake (m1, m2); dialer: which side we are. */
static pl_link *link_new(conn *c, const uint8_t master[32], const uint8_t *m1, const uint8_t *m2,
                         bool dialer) {
    pl_link *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    uint8_t session[32], d2l[32], l2d[32];
    mac(session, master, "pooled room session", m1, M1_BYTES, m2, M2_BYTES, NULL, 0);
    crypto_kdf_derive_from_key(d2l, 32, 1, KDF_CONTEXT, session);
    crypto_kdf_derive_from_key(l2d, 32, 2, KDF_CONTEXT, session);
    memcpy(l->k_tx, dialer ? d2l : l2d, 32);
    memcpy(l->k_rx, dialer ? l2d : d2l, 32);
    sodium_memzero(session, 32), sodium_memzero(d2l, 32), sodium_memzero(l2d, 32);
    pthread_mutex_init(&l->tx_mu, NULL);
    pthread_mutex_init(&l->rx_mu, NULL);
    l->c = c;
    return l;
}

/* ---------------------------------------------------------------- sealed frames */

/* Forget the handshake's own frames. */
static void link_counters_reset(link_counters *c) {
    atomic_store(&c->sent, 0), atomic_store(&c->received, 0), atomic_store(&c->replayed, 0);
    atomic_store(&c->reordered, 0), atomic_store(&c->forged, 0), atomic_store(&c->malformed, 0);
}

static void nonce_of(uint8_t nonce[12], const uint8_t ctr_le[8]) {
    memset(nonce, 0, 12);
    memcpy(nonce, ctr_le, 8);
}

/* Seal msg as the next frame into l->tx_buf (caller holds tx_mu). */
static pl_status seal(pl_link *l, const void *msg, size_t n, size_t *fn) {
    if (!n || n > PL_LINK_MAX_MSG)
        return pl_fail(PL_ERR_ARG, "room link: message of %zu bytes (1..%u)", n, PL_LINK_MAX_MSG);
    if (l->tx_cap < n + SEAL_EXTRA) {
        uint8_t *b = realloc(l->tx_buf, n + SEAL_EXTRA);
        if (!b) return pl_fail(PL_ERR_NOMEM, "room link: out of memory");
        l->tx_buf = b, l->tx_cap = n + SEAL_EXTRA;
    }
    uint8_t nonce[12];
    put_le(l->tx_buf, l->tx_next++, 8);
    nonce_of(nonce, l->tx_buf);
    unsigned long long clen = 0;
    crypto_aead_chacha20poly1305_ietf_encrypt(l->tx_buf + 8, &clen, msg, n, l->tx_buf, 8, NULL,
                                              nonce, l->k_tx);
    *fn = 8 + (size_t)clen;
    return PL_OK;
}

static pl_status send_frame(pl_link *l, const void *p, size_t n, int timeout_ms) {
    int rc = conn_send(l->c, p, n, timeout_ms);
    if (rc == CONN_OK) return PL_OK;
    if (rc == CONN_ERR && !pl_link_dead(l))
        return pl_fail(PL_ERR_ARG, "room link: a frame of %zu bytes is too large", n);
    return pl_fail(PL_ERR_IO, "room link to %s: %s", conn_peer(l->c),
                   rc == CONN_TIMEOUT ? "the peer did not take a frame in time; link closed"
                                      : "the link is closed (the peer left or vanished)");
}

pl_status pl_link_send(pl_link *l, const void *msg, size_t n, int timeout_ms) {
    if (timeout_ms < 0 || timeout_ms > PL_LINK_MAX_TIMEOUT_MS)
        return pl_fail(PL_ERR_ARG, "room link: timeout %d ms out of range", timeout_ms);
    pthread_mutex_lock(&l->tx_mu);
    size_t fn = 0;
    pl_status st = seal(l, msg, n, &fn);
    if (!st) st = send_frame(l, l->tx_buf, fn, timeout_ms);
    if (!st) l->st.sent++;
    pthread_mutex_unlock(&l->tx_mu);
    return st;
}

pl_status pl_link_seal(pl_link *l, const void *msg, size_t n, uint8_t **frame, size_t *fn) {
    pthread_mutex_lock(&l->tx_mu);
    pl_status st = seal(l, msg, n, fn);
    *frame = st ? NULL : malloc(*fn);
    if (*frame) memcpy(*frame, l->tx_buf, *fn);
    pthread_mutex_unlock(&l->tx_mu);
    if (!st && !*frame) return pl_fail(PL_ERR_NOMEM, "room link: out of memory");
    return st;
}

pl_status pl_link_send_raw(pl_link *l, const void *frame, size_t n, int timeout_ms) {
    pthread_mutex_lock(&l->tx_mu);
    pl_status st = send_frame(l, frame, n, timeout_ms);
    pthread_mutex_unlock(&l->tx_mu);
    return st;
}

/* Open one frame in place; 0 when it is to be delivered, else the counter to bump. */
static _Atomic uint64_t *open_frame(pl_link *l, uint8_t *p, size_t n, size_t *mlen) {
    if (n < SEAL_EXTRA + 1 || n > SEAL_EXTRA + PL_LINK_MAX_MSG) return &l->st.malformed;
    uint8_t nonce[12];
    nonce_of(nonce, p);
    unsigned long long m = 0;
    if (crypto_aead_chacha20poly1305_ietf_decrypt(p + 8, &m, NULL, p + 8, n - 8, p, 8, nonce,
                                                  l->k_rx))
        return &l->st.forged;
    uint64_t ctr = get_le(p, 8);
    if (l->rx_any && ctr <= l->rx_hi) {
        uint64_t back = l->rx_hi - ctr;
        if (back >= 64 || (l->rx_window >> back & 1)) return &l->st.replayed;
        return &l->st.reordered; /* authentic and new, but a later frame was delivered */
    }
    uint64_t shift = l->rx_any ? ctr - l->rx_hi : 64;
    l->rx_window = (shift >= 64 ? 0 : l->rx_window << shift) | 1;
    l->rx_hi = ctr, l->rx_any = true;
    *mlen = (size_t)m;
    return NULL;
}

pl_status pl_link_recv(pl_link *l, const uint8_t **msg, size_t *n, int timeout_ms) {
    *msg = NULL, *n = 0;
    if (timeout_ms < 0 || timeout_ms > PL_LINK_MAX_TIMEOUT_MS)
        return pl_fail(PL_ERR_ARG, "room link: timeout %d ms out of range", timeout_ms);
    pthread_mutex_lock(&l->rx_mu);
    int64_t deadline = conn_now_ms() + timeout_ms;
    pl_status st = PL_OK;
    for (;;) {
        const uint8_t *p;
        size_t fn, mlen = 0;
        int64_t left = deadline - conn_now_ms();
        int rc = conn_recv(l->c, &p, &fn, left > 0 ? (int)left : 0);
        if (rc == CONN_TIMEOUT) {
            st = pl_fail(PL_ERR, "room link: nothing from %s within %d ms", conn_peer(l->c),
                         timeout_ms);
            break;
        }
        if (rc != CONN_OK) {
            if (rc == CONN_ERR) l->st.malformed++; /* an oversized frame: the stream is lost */
            st = pl_fail(PL_ERR_IO, "room link to %s is closed (%s)", conn_peer(l->c),
                         rc == CONN_ERR ? "it sent an oversized frame"
                                        : "the peer left or vanished");
            break;
        }
        /* The conn's buffer is ours until the next conn_recv: decrypt in place. */
        _Atomic uint64_t *drop = open_frame(l, (uint8_t *)p, fn, &mlen);
        if (drop) {
            atomic_fetch_add(drop, 1);
            if (conn_now_ms() < deadline) continue;
            /* a flood of bad frames cannot hold the caller past its timeout */
            st = pl_fail(PL_ERR, "room link: nothing authentic from %s within %d ms",
                         conn_peer(l->c), timeout_ms);
            break;
        }
        l->st.received++;
        *msg = p + 8, *n = mlen;
        break;
    }
    pthread_mutex_unlock(&l->rx_mu);
    return st;
}

int pl_link_dead(pl_link *l) {
    return conn_dead(l->c);
}

const char *pl_link_peer(const pl_link *l) {
    return conn_peer(l->c);
}

void pl_link_get_stats(pl_link *l, pl_link_stats *s) {
    *s = (pl_link_stats){atomic_load(&l->st.sent),     atomic_load(&l->st.received),
                         atomic_load(&l->st.replayed), atomic_load(&l->st.reordered),
                         atomic_load(&l->st.forged),   atomic_load(&l->st.malformed)};
}

void pl_link_close(pl_link *l) {
    if (!l) return;
    conn_free(l->c);
    sodium_memzero(l->k_tx, 32), sodium_memzero(l->k_rx, 32);
    pthread_mutex_destroy(&l->tx_mu);
    pthread_mutex_destroy(&l->rx_mu);
    free(l->tx_buf);
    free(l);
}

/* ---------------------------------------------------------------- handshake: listener side */

static void refuse(pl_listener *L, uint64_t *counter, const char *fmt, const char *peer,
                   const char *why) {
    pthread_mutex_lock(&L->mu);
    ++*counter;
    snprintf(L->st.last_refusal, sizeof L->st.last_refusal, fmt, peer, why);
    pthread_mutex_unlock(&L->mu);
}

/* Run the listener's half on c; the new link, or NULL (refusal recorded, c untouched). */
static pl_link *serve_handshake(pl_listener *L, conn *c) {
    int64_t deadline = conn_now_ms() + L->handshake_ms;
#define LEFT() ((int)(deadline > conn_now_ms() ? deadline - conn_now_ms() : 0))
    const char *peer = conn_peer(c);
    const uint8_t *p;
    size_t n;
    uint8_t m1[M1_BYTES], m2[M2_BYTES], m3[M3_BYTES], m4[M4_BYTES] = {0};
    if (conn_recv(c, &p, &n, LEFT()) != CONN_OK || n != M1_BYTES || memcmp(p, MAGIC, 4)) {
        refuse(L, &L->st.refused_junk, "refused %s: %s", peer,
               "no pooled room handshake (junk, silence or an early close)");
        return NULL;
    }
    memcpy(m1, p, M1_BYTES);
    unsigned peer_version = (unsigned)get_le(m1 + 4, 2);
    memcpy(m2, MAGIC, 4);
    put_le(m2 + 4, L->version, 2);
    m2[6] = peer_version == L->version ? ST_OK : ST_VERSION, m2[7] = 0;
    memcpy(m2 + 8, L->salt, SALT_BYTES);
    randombytes_buf(m2 + 8 + SALT_BYTES, CHAL_BYTES);
    /* Refusals are recorded before the peer hears of them, so the counts are final by the
     * time its dial returns. */
    if (m2[6] == ST_VERSION) {
        char line[160];
        pl_wire_version_line(peer_version, L->version, line, sizeof line);
        refuse(L, &L->st.refused_version, "refused %s: %s", peer, line);
        conn_send(c, m2, M2_BYTES, LEFT());
        return NULL;
    }
    if (conn_send(c, m2, M2_BYTES, LEFT()) != CONN_OK) {
        refuse(L, &L->st.refused_junk, "refused %s: %s", peer, "it left during the handshake");
        return NULL;
    }
    if (conn_recv(c, &p, &n, LEFT()) != CONN_OK || n != M3_BYTES) {
        refuse(L, &L->st.refused_junk, "refused %s: %s", peer, "no key proof");
        return NULL;
    }
    memcpy(m3, p, M3_BYTES);
    uint8_t want[32];
    mac(want, L->master, "pooled room proof: dialer", m1, M1_BYTES, m2, M2_BYTES, NULL, 0);
    if (crypto_verify_32(want, m3) != 0) {
        refuse(L, &L->st.refused_key, "refused %s: %s", peer, "wrong room key");
        m4[0] = ST_KEY; /* says only that the proof failed, which the peer can tell anyway */
        conn_send(c, m4, M4_BYTES, LEFT());
        return NULL;
    }
    m4[0] = ST_OK;
    mac(m4 + 1, L->master, "pooled room proof: listener", m1, M1_BYTES, m2, M2_BYTES, m3, M3_BYTES);
    if (conn_send(c, m4, M4_BYTES, LEFT()) != CONN_OK) {
        refuse(L, &L->st.refused_junk, "refused %s: %s", peer, "it left during the handshake");
        return NULL;
    }
    pl_link *l = link_new(c, L->master, m1, m2, false);
    if (!l) return NULL;
    /* The dialer's first sealed frame says it accepted our proof and holds the same keys. */
    const uint8_t *msg;
    if (pl_link_recv(l, &msg, &n, LEFT()) != PL_OK || n != sizeof READY - 1 ||
        memcmp(msg, READY, n)) {
        refuse(L, &L->st.refused_junk, "refused %s: %s", peer, "no sealed confirmation");
        l->c = NULL; /* the caller frees the conn */
        pl_link_close(l);
        return NULL;
    }
    link_counters_reset(&l->st);
    return l;
#undef LEFT
}

typedef struct {
    pl_listener *L;
    int i;
} slot_arg;

static void *slot_main(void *arg) {
    slot_arg a = *(slot_arg *)arg;
    free(arg);
    pl_listener *L = a.L;
    slot *s = &L->slots[a.i];
    conn *c = s->c;
    pl_link *l = serve_handshake(L, c);
    pthread_mutex_lock(&L->mu);
    s->c = NULL;
    bool keep = l && !L->closing && L->n_ready < PL_LINK_MAX_PENDING;
    if (keep) {
        L->ready[L->n_ready++] = l;
        L->st.accepted++;
        pthread_cond_broadcast(&L->cv);
    } else if (l) {
        L->st.refused_busy++;
    }
    s->done = true; /* from here on this thread never takes mu again */
    pthread_mutex_unlock(&L->mu);
    if (!keep) l ? pl_link_close(l) : conn_free(c);
    return NULL;
}

static void *accept_main(void *arg) {
    pl_listener *L = arg;
    conn *c;
    while ((c = conn_accept(L->cl)) != NULL) {
        int free_slot = -1;
        pthread_mutex_lock(&L->mu);
        for (int i = 0; i < PL_LINK_MAX_PENDING; i++) {
            slot *s = &L->slots[i];
            if (s->used && s->done) pthread_join(s->th, NULL), s->used = false;
            if (!s->used && free_slot < 0) free_slot = i;
        }
        slot_arg *a = free_slot >= 0 ? malloc(sizeof *a) : NULL;
        if (a) {
            *a = (slot_arg){L, free_slot};
            slot *s = &L->slots[free_slot];
            s->c = c, s->done = false;
            s->used = pthread_create(&s->th, NULL, slot_main, a) == 0;
            if (!s->used) free(a), a = NULL, s->c = NULL;
        }
        if (!a) {
            L->st.refused_busy++;
            snprintf(L->st.last_refusal, sizeof L->st.last_refusal,
                     "refused %s: %d handshakes already in progress", conn_peer(c),
                     PL_LINK_MAX_PENDING);
        }
        pthread_mutex_unlock(&L->mu);
        if (!a) conn_free(c);
    }
    return NULL;
}

pl_status pl_link_listen(const char *url, const char *key, const pl_link_opts *opts,
                         pl_listener **out) {
    *out = NULL;
    if (check_args(key, 0) || crypto_ready()) return PL_ERR_ARG;
    if (!url) return pl_fail(PL_ERR_ARG, "room link: no address to listen on");
    pl_listener *L = calloc(1, sizeof *L);
    if (!L) return pl_fail(PL_ERR_NOMEM, "room link: out of memory");
    L->version = opt_version(opts);
    L->handshake_ms = opts && opts->handshake_ms > 0 ? opts->handshake_ms : PL_LINK_HANDSHAKE_MS;
    randombytes_buf(L->salt, SALT_BYTES);
    pl_status st = derive_master(key, L->salt, L->master);
    if (st) {
        free(L);
        return st;
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    char err[300];
    if (conn_listen(url, &L->cl, L->url, sizeof L->url, err, sizeof err) != CONN_OK) {
        pl_listener_close(L);
        return pl_fail(PL_ERR_IO, "room link: %s", err);
    }
    if (pthread_create(&L->accept_thread, NULL, accept_main, L) != 0) {
        conn_listener_free(L->cl), L->cl = NULL;
        pl_listener_close(L);
        return pl_fail(PL_ERR, "room link: cannot start the accepting thread");
    }
    *out = L;
    return PL_OK;
}

const char *pl_listener_url(const pl_listener *L) {
    return L->url;
}

pl_status pl_link_accept(pl_listener *L, int timeout_ms, pl_link **out) {
    *out = NULL;
    if (timeout_ms < 0 || timeout_ms > PL_LINK_MAX_TIMEOUT_MS)
        return pl_fail(PL_ERR_ARG, "room link: timeout %d ms out of range", timeout_ms);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
    pthread_mutex_lock(&L->mu);
    while (!L->n_ready && pthread_cond_timedwait(&L->cv, &L->mu, &t) == 0) {
    }
    if (L->n_ready) {
        *out = L->ready[0];
        memmove(L->ready, L->ready + 1, (size_t)--L->n_ready * sizeof(pl_link *));
    }
    pthread_mutex_unlock(&L->mu);
    if (!*out)
        return pl_fail(PL_ERR, "room link: no peer joined %s within %d ms", L->url, timeout_ms);
    return PL_OK;
}

void pl_listener_get_stats(pl_listener *L, pl_listener_stats *s) {
    pthread_mutex_lock(&L->mu);
    *s = L->st;
    pthread_mutex_unlock(&L->mu);
}

void pl_listener_close(pl_listener *L) {
    if (!L) return;
    if (L->cl) {
        pthread_mutex_lock(&L->mu);
        L->closing = true;
        pthread_mutex_unlock(&L->mu);
        conn_listener_shutdown(L->cl);
        pthread_join(L->accept_thread, NULL);
        for (int i = 0; i < PL_LINK_MAX_PENDING; i++) {
            slot *s = &L->slots[i];
            if (!s->used) continue;
            pthread_mutex_lock(&L->mu);
            if (s->c) conn_abort(s->c); /* cut a handshake short */
            pthread_mutex_unlock(&L->mu);
            pthread_join(s->th, NULL);
        }
        for (int i = 0; i < L->n_ready; i++) pl_link_close(L->ready[i]);
        conn_listener_free(L->cl);
    }
    sodium_memzero(L->master, sizeof L->master);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    free(L);
}

/* ---------------------------------------------------------------- handshake: dialer side */

static pl_status dial_fail(conn *c, pl_status code, const char *url, const char *why) {
    conn_free(c);
    return pl_fail(code, "cannot join the room at %s: %s", url, why);
}

pl_status pl_link_dial(const char *url, const char *key, int timeout_ms, const pl_link_opts *opts,
                       pl_link **out) {
    *out = NULL;
    if (check_args(key, timeout_ms) || crypto_ready()) return PL_ERR_ARG;
    if (!url) return pl_fail(PL_ERR_ARG, "room link: no address to dial");
    int64_t deadline = conn_now_ms() + timeout_ms;
#define LEFT() ((int)(deadline > conn_now_ms() ? deadline - conn_now_ms() : 0))
    unsigned version = opt_version(opts);
    char err[300];
    conn *c = NULL;
    if (conn_dial(url, timeout_ms, &c, err, sizeof err) != CONN_OK)
        return pl_fail(PL_ERR_IO, "room link: %s", err);
    uint8_t m1[M1_BYTES], m2[M2_BYTES], m3[M3_BYTES], m4[M4_BYTES], master[32], want[32];
    const uint8_t *p;
    size_t n;
    memcpy(m1, MAGIC, 4);
    put_le(m1 + 4, version, 2);
    m1[6] = m1[7] = 0;
    randombytes_buf(m1 + 8, CHAL_BYTES);
    if (conn_send(c, m1, M1_BYTES, LEFT()) != CONN_OK)
        return dial_fail(c, PL_ERR_IO, url, "the connection broke");
    int rc = conn_recv(c, &p, &n, LEFT());
    if (rc == CONN_TIMEOUT) return dial_fail(c, PL_ERR_IO, url, "no answer in time");
    if (rc != CONN_OK || n != M2_BYTES || memcmp(p, MAGIC, 4) || p[6] > ST_VERSION)
        return dial_fail(c, PL_ERR_IO, url, "the peer does not speak the pooled room handshake");
    memcpy(m2, p, M2_BYTES);
    unsigned host_version = (unsigned)get_le(m2 + 4, 2);
    if (m2[6] == ST_VERSION || host_version != version) {
        char line[200];
        snprintf(line, sizeof line, "protocol version mismatch: ");
        pl_wire_version_line(host_version, version, line + strlen(line),
                             sizeof line - strlen(line));
        return dial_fail(c, PL_ERR, url, line);
    }
    if (derive_master(key, m2 + 8, master)) {
        conn_free(c);
        return PL_ERR_NOMEM;
    }
    mac(m3, master, "pooled room proof: dialer", m1, M1_BYTES, m2, M2_BYTES, NULL, 0);
    if (conn_send(c, m3, M3_BYTES, LEFT()) != CONN_OK)
        return dial_fail(c, PL_ERR_IO, url, "the connection broke");
    rc = conn_recv(c, &p, &n, LEFT());
    if (rc != CONN_OK || n != M4_BYTES)
        return dial_fail(c, PL_ERR_IO, url,
                         rc == CONN_TIMEOUT ? "no answer in time" : "the connection broke");
    memcpy(m4, p, M4_BYTES);
    if (m4[0] == ST_KEY) {
        sodium_memzero(master, 32);
        return dial_fail(c, PL_ERR, url, "the room refused the key (wrong room key)");
    }
    mac(want, master, "pooled room proof: listener", m1, M1_BYTES, m2, M2_BYTES, m3, M3_BYTES);
    if (m4[0] != ST_OK || crypto_verify_32(want, m4 + 1) != 0) {
        sodium_memzero(master, 32);
        return dial_fail(c, PL_ERR, url, "the host could not prove the room key (not our room)");
    }
    pl_link *l = link_new(c, master, m1, m2, true);
    sodium_memzero(master, 32);
    if (!l) return dial_fail(c, PL_ERR_NOMEM, url, "out of memory");
    if (pl_link_send(l, READY, sizeof READY - 1, LEFT()) != PL_OK) {
        pl_link_close(l);
        return pl_fail(PL_ERR_IO, "cannot join the room at %s: the connection broke", url);
    }
    link_counters_reset(&l->st);
    *out = l;
    return PL_OK;
#undef LEFT
}
