/* conn.h - the byte movers under a link (internal to room/): one reliable, ordered stream of
 * length-prefixed frames per peer, with timeouts.
 *
 * tcp:// (and later ws://) is NNG's stream API: one connection per peer with the kernel's
 * flow control. NNG's message sockets do not fit a listener with many peers: pair allows one
 * peer per socket, and its polyamorous mode and bus drop messages when a peer is slow.
 * NNG 1.5 has no in-process stream, so inproc:// is a pair of bounded in-memory frame queues
 * here, behind the same calls. */
#ifndef PL_ROOM_CONN_H
#define PL_ROOM_CONN_H

#include <stddef.h>
#include <stdint.h>

typedef struct conn conn;
typedef struct conn_listener conn_listener;

/* Results of the calls below. */
enum { CONN_OK = 0, CONN_TIMEOUT = 1, CONN_DEAD = 2, CONN_ERR = 3 };

/* Frames larger than this kill the connection (the length prefix is not ours). */
#define CONN_MAX_FRAME (4u * 1024 * 1024 + 4096 + 64)

/* Milliseconds on the monotonic clock. */
int64_t conn_now_ms(void);

/* Listen on url; *bound_url gets the URL with the real port. CONN_ERR with why in err. */
int conn_listen(const char *url, conn_listener **out, char *bound_url, size_t cap, char *err,
                size_t errcap);
/* Block until a peer connects or the listener is shut down (NULL then). */
conn *conn_accept(conn_listener *l);
/* Wake conn_accept for good (it returns NULL from then on); then free with conn_listener_free. */
void conn_listener_shutdown(conn_listener *l);
void conn_listener_free(conn_listener *l);

int conn_dial(const char *url, int timeout_ms, conn **out, char *err, size_t errcap);

/* Send one frame (n <= CONN_MAX_FRAME). A timeout or failure leaves the conn dead. */
int conn_send(conn *c, const void *p, size_t n, int timeout_ms);
/* Receive one frame into the conn's buffer (valid until the next recv). A timeout keeps the
 * partial frame for the next call. */
int conn_recv(conn *c, const uint8_t **p, size_t *n, int timeout_ms);
/* Make pending and later calls fail (another thread may be inside one); does not free. */
void conn_abort(conn *c);
void conn_free(conn *c);
/* Whether a call found the conn broken (or it was aborted). */
int conn_dead(conn *c);
const char *conn_peer(const conn *c);
/* Whether a tcp:// conn sends each frame at once (TCP_NODELAY: no wait for the peer's ack
 * of the previous one); 0 for inproc://. */
int conn_nodelay(conn *c);

#endif
