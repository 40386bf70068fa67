/* server.h - `pooled serve`'s HTTP server (libmicrohttpd, one thread per connection):
 * routes, the API key, the body limit, a bounded queue in front of one worker thread per
 * slot of the engine (each runs one request at a time on it), streams, and a clean stop. */
#ifndef PL_SERVE_SERVER_H
#define PL_SERVE_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include <signal.h>

#include "engine.h"

#define SRV_MAX_BODY        ((size_t)8 << 20)  /* a request body: 8 MiB */
#define SRV_MAX_DISCARD     ((size_t)64 << 20) /* a longer body is read up to this, then cut */
#define SRV_MAX_CONNECTIONS 256                /* open connections (one thread each) */
#define SRV_IDLE_TIMEOUT    60                 /* seconds a connection may send nothing */
#define SRV_MAX_QUEUE       4096               /* --queue at most */
#define SRV_MAX_PARALLEL    64                 /* --parallel at most (slots, each its cache) */

typedef struct {
    const char *host;     /* numeric address or name to listen on */
    int port;             /* 0: a free one */
    const char *api_key;  /* NULL: none asked */
    int queue;            /* requests that may wait while every slot runs one */
    const char *model_id; /* the name /v1/models and responses show */
    /* web pages of other origins allowed to call (comma-separated origins, "*": any; NULL:
     * none but the server's own chat page): serve/origin.h */
    const char *allow_origins;
    /* NULL: the server waits for SIGINT / SIGTERM with sigwait (the caller blocked them in
     * every thread); else it stops once *stop is non-zero (the caller's signal handlers
     * set it: a room's host, whose threads started before it could block them) */
    volatile sig_atomic_t *stop;
} srv_config;

/* Whether host resolves to an address (false after one line on stderr): checked before
 * the model is loaded. */
bool srv_check_host(const char *host);

/* Listen, print "pooled serve: listening on http://HOST:PORT" on stdout, and answer until
 * SIGINT or SIGTERM, which the caller must have blocked in every thread (sigwait takes
 * them here), or until *c->stop. Then the running generations are cancelled (its stream ends
 * properly), queued requests get 503, and the server closes. Returns the exit status (1 after one
 * line on stderr when it cannot listen). */
int srv_serve(srv_engine *e, const srv_config *c);

#endif
