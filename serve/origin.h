/* origin.h - who may call the server from a web browser. Any page the user opens can send
 * requests to 127.0.0.1; without a check it could use the model behind the user's back (or,
 * through a DNS name it points at 127.0.0.1, read the answers). So a request whose Origin
 * is another site's is refused unless the server allows that origin (--allow-origin), and a
 * server that listens on loopback refuses a Host header that names anything but loopback.
 * Programs (client libraries, curl) send no Origin and are not affected. Pure: no network. */
#ifndef PL_SERVE_ORIGIN_H
#define PL_SERVE_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    SRV_ORIGIN_SAME,    /* no Origin, or the server's own (its chat page) */
    SRV_ORIGIN_ALLOWED, /* another origin the server allows: answer with CORS headers */
    SRV_ORIGIN_REFUSED, /* 403, the reason in err */
} srv_origin;

/* Whether name (a host, as in a Host header or --host: "localhost", "127.0.0.1", "[::1]",
 * "::1", with or without ":port") is a loopback address. */
bool srv_is_loopback(const char *name);

/* The verdict on a request to a server listening on listen_host (--host), allowing the
 * origins in allow (comma-separated, "*" for any; NULL: none but its own), with the
 * request's Host and Origin headers (each NULL when absent). */
srv_origin srv_origin_check(const char *listen_host, const char *allow, const char *host,
                            const char *origin, char *err, size_t cap);

#endif
