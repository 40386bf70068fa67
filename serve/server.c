/* server.c - the HTTP side of `pooled serve` over libmicrohttpd (thread per connection):
 * routing and methods, the API key, the body limit, a bounded queue served by one worker
 * thread per slot of the engine, responses whole or streamed (server-sent events), a client's
 * hang-up noticed while it waits or streams (the generation is cancelled at its next id), and a
 * clean stop on SIGINT/SIGTERM. */
#include "server.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api.h"
#include "origin.h"
#include "page.h"
#include "base/json.h"
#include "request.h"

enum { R_HEALTH = 100, R_MODELS, R_METRICS, R_PAGE, R_PAGE_JS, R_PAGE_CSS };

static const struct {
    const char *path, *method;
    int kind; /* srv_kind, or one of the GET routes (R_*) */
} routes[] = {
    {"/health", "GET", R_HEALTH},
    {"/v1/models", "GET", R_MODELS},
    {"/metrics", "GET", R_METRICS},
    {"/", "GET", R_PAGE},
    {"/chat.js", "GET", R_PAGE_JS},
    {"/chat.css", "GET", R_PAGE_CSS},
    {"/v1/responses", "POST", SRV_RESPONSES},
    {"/v1/chat/completions", "POST", SRV_CHAT},
    {"/v1/completions", "POST", SRV_COMPLETION},
    {"/v1/messages", "POST", SRV_MESSAGES},
    {"/v1/messages/count_tokens", "POST", SRV_COUNT_TOKENS},
    {"/tokenize", "POST", SRV_TOKENIZE},
    {"/detokenize", "POST", SRV_DETOKENIZE},
};

/* One request that runs on the engine; shared by its connection's thread and the worker
 * (refs), under the server's lock. */
typedef struct job job;
struct job {
    srv_request req;
    struct server *srv;
    int refs;
    atomic_bool cancel; /* stop generating: the client is gone or the server stops */
    bool gone;          /* the client is gone: nothing more to send */
    int status;
    bool sse, headed, done;
    pl_strbuf out; /* bytes for the client; out_off of them already taken */
    size_t out_off;
    int fd; /* the client's socket: its hang-up cancels */
    uint64_t no;
    job *next;
};

typedef struct server {
    srv_engine *e;
    const srv_config *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail; /* waiting */
    int n_waiting;
    int n_workers; /* one per slot */
    int n_running; /* jobs a worker has taken */
    job **running; /* [n_workers]: each worker's job, or NULL */
    bool stopping;
    uint64_t n_jobs;
    int n_live; /* jobs not yet freed: streams still being sent */
    srv_metrics *metrics;
} server;

/* A connection's request being read. */
typedef struct {
    int route;        /* index in routes, or -1 */
    const char *path; /* the route's path for /metrics ("other": no route) */
    bool anthropic;
    pl_strbuf body;
    bool too_big, answered;
    srv_metrics *metrics; /* where its answer is counted (NULL: counted already) */
    size_t received;      /* body bytes so far */
    const char *cors;     /* another origin the server allows (its answers say so), or NULL */
} conn;

static void job_unref_locked(job *j) {
    if (--j->refs) return;
    j->srv->n_live--;
    pthread_cond_broadcast(&j->srv->cv);
    srv_request_free(&j->req);
    pl_sb_free(&j->out);
    free(j);
}

/* The client closed its side (or the socket failed). Data it sent after the request
 * (pipelining) is not a hang-up. */
static bool hung_up(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void wait_a_little(server *s) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 50 * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->cv, &s->mu, &t);
}

/* ---- the worker's side of srv_out ---- */

static void out_head(void *ud, int status, bool sse) {
    job *j = ud;
    pthread_mutex_lock(&j->srv->mu);
    j->status = status, j->sse = sse, j->headed = true;
    pthread_cond_broadcast(&j->srv->cv);
    pthread_mutex_unlock(&j->srv->mu);
}

static bool out_write(void *ud, const char *p, size_t n) {
    job *j = ud;
    pthread_mutex_lock(&j->srv->mu);
    bool ok = !j->gone;
    if (ok) pl_sb_append(&j->out, p, n);
    ok = ok && !j->out.failed;
    pthread_cond_broadcast(&j->srv->cv);
    pthread_mutex_unlock(&j->srv->mu);
    return ok;
}

typedef struct {
    server *s;
    int no;
} worker_arg;

static void *worker(void *ud) {
    worker_arg *w = ud;
    server *s = w->s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        job *j = s->head;
        if (!j) break; /* stopping, nothing waits */
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->n_waiting--;
        s->n_running++;
        s->running[w->no] = j;
        bool stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        srv_out o = {.head = out_head,
                     .write = out_write,
                     .ud = j,
                     .cancel = &j->cancel,
                     .metrics = s->metrics};
        if (stop) {
            pl_strbuf b = {0};
            srv_api_error(&b, j->req.kind == SRV_MESSAGES || j->req.kind == SRV_COUNT_TOKENS, 503,
                          "the server is stopping");
            out_head(j, 503, false);
            out_write(j, b.s, b.len);
            pl_sb_free(&b);
        } else if (!atomic_load(&j->cancel)) {
            srv_api_run(s->e, &j->req, s->c->model_id, j->no, &o);
        }
        pthread_mutex_lock(&s->mu);
        s->running[w->no] = NULL;
        s->n_running--;
        j->done = true;
        pthread_cond_broadcast(&s->cv);
        job_unref_locked(j);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- responses ---- */

/* The chat page's policy: its own script and style only, requests to this server only. */
#define PAGE_CSP                                                                                   \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src "        \
    "'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static void count(conn *k, int status) {
    srv_metrics_request(k->metrics, k->path ? k->path : "other", status);
}

/* An allowed other origin may read the answer (CORS). */
static void cors_headers(struct MHD_Response *r, const conn *k) {
    if (!k->cors) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", k->cors);
    MHD_add_response_header(r, "Vary", "Origin");
}

static enum MHD_Result send_typed(struct MHD_Connection *c, conn *k, int status, const char *body,
                                  size_t len, const char *allow, const char *type) {
    count(k, status);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (strncmp(type, "application/json", 16)) {
        MHD_add_response_header(r, "Content-Security-Policy", PAGE_CSP);
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    }
    if (allow) MHD_add_response_header(r, "Allow", allow);
    cors_headers(r, k);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_body(struct MHD_Connection *c, conn *k, int status, const char *body,
                                 size_t len, const char *allow) {
    return send_typed(c, k, status, body, len, allow, "application/json");
}

static enum MHD_Result send_error(struct MHD_Connection *c, conn *k, int status, const char *msg,
                                  const char *allow) {
    pl_strbuf b = {0};
    srv_api_error(&b, k->anthropic, status, msg);
    enum MHD_Result ok = send_body(c, k, status, b.s ? b.s : "{}", b.len, allow);
    pl_sb_free(&b);
    k->answered = true;
    return ok;
}

/* OPTIONS: what the route takes; for an allowed other origin, what its page may send. */
static enum MHD_Result send_preflight(struct MHD_Connection *c, conn *k, const char *allow) {
    count(k, 204);
    k->answered = true;
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Allow", allow);
    if (k->cors) {
        cors_headers(r, k);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
        /* the headers its page asks to send (an allowed origin's: the client libraries add
         * their own), else the APIs' */
        const char *want =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                want && *want && strlen(want) < 2048
                                    ? want
                                    : "Authorization, Content-Type, x-api-key, anthropic-version");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    }
    enum MHD_Result ok = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ok;
}

/* A stream: hand out what the worker wrote, wait for more, end when it is done. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    while (j->out_off == j->out.len && !j->done) {
        if (hung_up(j->fd)) {
            j->gone = true;
            atomic_store(&j->cancel, true);
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        wait_a_little(s);
    }
    size_t n = j->out.len - j->out_off;
    if (n > max) n = max;
    if (n) memcpy(buf, j->out.s + j->out_off, n);
    j->out_off += n;
    if (j->out_off == j->out.len) j->out_off = j->out.len = 0;
    pthread_mutex_unlock(&s->mu);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls) {
    job *j = cls;
    server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    j->gone = true; /* sent, or ended early: then stop the generation */
    atomic_store(&j->cancel, true);
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}

static bool key_equal(const char *given, const char *key) {
    size_t n = strlen(key), m = strlen(given);
    unsigned char d = n != m;
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(key[i] ^ given[i < m ? i : 0]);
    return !d;
}

static bool authorised(struct MHD_Connection *c, const server *s, bool anthropic) {
    const char *key = s->c->api_key;
    if (!key) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (a && !strncmp(a, "Bearer ", 7) && key_equal(a + 7, key)) return true;
    const char *x = anthropic ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key") : NULL;
    return x && key_equal(x, key);
}

/* Queue a job for the worker and answer with what it makes. */
static enum MHD_Result run_job(struct MHD_Connection *c, server *s, conn *k) {
    job *j = calloc(1, sizeof *j);
    if (!j) return send_error(c, k, 500, "out of memory", NULL);
    char err[512];
    if (!srv_request_parse(routes[k->route].kind, k->body.s ? k->body.s : "", k->body.len, &j->req,
                           err, sizeof err)) {
        srv_request_free(&j->req);
        free(j);
        return send_error(c, k, 400, err, NULL);
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    j->srv = s;
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->n_waiting + s->n_running >= s->n_workers + s->c->queue) {
        bool stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        srv_request_free(&j->req);
        free(j);
        snprintf(err, sizeof err,
                 stop ? "the server is stopping"
                      : "the server is busy: all slots generate and %d requests already wait "
                        "(--queue); try again later",
                 s->c->queue);
        return send_error(c, k, 503, err, NULL);
    }
    j->refs = 2;
    s->n_live++;
    j->no = ++s->n_jobs;
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->n_waiting++;
    pthread_cond_broadcast(&s->cv);
    /* wait for the status (a stream) or the whole answer */
    while (!j->done && !(j->headed && j->sse)) {
        if (j->fd >= 0 && hung_up(j->fd)) {
            j->gone = true;
            atomic_store(&j->cancel, true);
            job_unref_locked(j);
            pthread_mutex_unlock(&s->mu);
            k->answered = true;
            return MHD_NO; /* nobody to answer: close */
        }
        wait_a_little(s);
    }
    k->answered = true;
    if (!j->headed) { /* (cancelled before it ran) */
        job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;
    }
    if (!j->sse) {
        pl_strbuf out = j->out;
        int status = j->status;
        j->out = (pl_strbuf){0};
        job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        enum MHD_Result ok = send_body(c, k, status, out.s ? out.s : "", out.len, NULL);
        pl_sb_free(&out);
        return ok;
    }
    int status = j->status;
    pthread_mutex_unlock(&s->mu);
    count(k, status);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, stream_read, j, stream_free);
    if (!r) {
        stream_free(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    cors_headers(r, k);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result answer_get(struct MHD_Connection *c, server *s, conn *k) {
    pl_strbuf b = {0};
    int kind = routes[k->route].kind;
    k->answered = true;
    if (kind == R_PAGE)
        return send_typed(c, k, 200, srv_page_html, strlen(srv_page_html), NULL,
                          "text/html; charset=utf-8");
    if (kind == R_PAGE_JS)
        return send_typed(c, k, 200, srv_page_js, strlen(srv_page_js), NULL,
                          "text/javascript; charset=utf-8");
    if (kind == R_PAGE_CSS)
        return send_typed(c, k, 200, srv_page_css, strlen(srv_page_css), NULL,
                          "text/css; charset=utf-8");
    if (kind == R_METRICS) {
        pthread_mutex_lock(&s->mu);
        int queued = s->n_waiting, live = s->n_live;
        pthread_mutex_unlock(&s->mu);
        count(k, 200); /* this answer counts itself */
        srv_metrics_render(s->metrics, &b, queued, live, s->e);
        k->metrics = NULL; /* (counted) */
        enum MHD_Result ok = send_typed(c, k, b.failed ? 500 : 200, b.s ? b.s : "", b.len, NULL,
                                        "text/plain; version=0.0.4; charset=utf-8");
        pl_sb_free(&b);
        return ok;
    }
    if (kind == R_HEALTH) {
        pl_sb_puts(&b, "{\"status\":\"ok\"}");
    } else {
        pl_sb_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
        pl_json_quote(&b, s->c->model_id, strlen(s->c->model_id), false);
        pl_sb_printf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"pooled\"}]}",
                     (long long)time(NULL));
    }
    enum MHD_Result ok = send_body(c, k, 200, b.s ? b.s : "{}", b.len, NULL);
    pl_sb_free(&b);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    server *s = cls;
    conn *k = *con_cls;
    if (!k) { /* the headers: route, method, key, announced size */
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        *con_cls = k;
        k->route = -1;
        k->metrics = s->metrics;
        k->anthropic = !strncmp(url, "/v1/messages", 12);
        k->body.max = SRV_MAX_BODY;
        char why[300];
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        srv_origin v = srv_origin_check(s->c->host, s->c->allow_origins,
                                        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"),
                                        origin, why, sizeof why);
        if (v == SRV_ORIGIN_REFUSED) return send_error(c, k, 403, why, NULL);
        if (v == SRV_ORIGIN_ALLOWED) k->cors = origin;
        const char *allow = NULL;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            if (!strcmp(url, routes[i].path)) {
                allow = routes[i].method;
                k->path = routes[i].path;
                if (!strcmp(method, routes[i].method)) k->route = (int)i;
            }
        char msg[300];
        if (k->route < 0 && !allow) {
            snprintf(msg, sizeof msg, "no route %.200s (see docs/serve.md)", url);
            return send_error(c, k, 404, msg, NULL);
        }
        if (k->route < 0 && !strcmp(method, "OPTIONS")) /* a browser's CORS preflight */
            return send_preflight(c, k, allow);
        if (k->route < 0) {
            snprintf(msg, sizeof msg, "%.200s takes %s, not %.20s", url, allow, method);
            return send_error(c, k, 405, msg, allow);
        }
        int kind = routes[k->route].kind;
        bool open = kind == R_HEALTH || kind == R_PAGE || kind == R_PAGE_JS || kind == R_PAGE_CSS;
        if (!open && !authorised(c, s, k->anthropic))
            return send_error(c, k, 401,
                              k->anthropic ? "a valid API key is needed (x-api-key header)"
                                           : "a valid API key is needed (Authorization: Bearer)",
                              NULL);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > SRV_MAX_BODY) k->too_big = true;
        if (!k->too_big) return MHD_YES;
    }
    if (k->answered) { /* an early answer is queued: drop what is still sent */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!k->too_big) pl_sb_append(&k->body, upload_data, *upload_size);
        if (k->body.failed) k->too_big = true;
        k->received += *upload_size;
        *upload_size = 0;
        /* a body past the limit is read to its end to answer 413 (libmicrohttpd answers
         * only then); an endless one is cut off */
        return k->received > SRV_MAX_DISCARD ? MHD_NO : MHD_YES;
    }
    if (k->too_big) {
        char msg[120];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu MiB",
                 SRV_MAX_BODY >> 20);
        return send_error(c, k, 413, msg, NULL);
    }
    if (routes[k->route].kind >= R_HEALTH) return answer_get(c, s, k);
    return run_job(c, s, k);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn *k = *con_cls;
    if (!k) return;
    pl_sb_free(&k->body);
    free(k);
    *con_cls = NULL;
}

static struct addrinfo *resolve(const char *host, int port) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gr = getaddrinfo(host, ps, &hints, &ai);
    if (gr) fprintf(stderr, "pooled: --host %s: %s\n", host, gai_strerror(gr));
    return gr ? NULL : ai;
}

bool srv_check_host(const char *host) {
    struct addrinfo *ai = resolve(host, 0);
    if (ai) freeaddrinfo(ai);
    return ai != NULL;
}

/* Cancel the running generations (their streams end properly), and wait for the workers:
 * what still waits is answered 503. */
static void stop_workers(server *s, pthread_t *th, int n) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    for (int i = 0; i < s->n_workers; i++)
        if (s->running[i]) atomic_store(&s->running[i]->cancel, true);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

int srv_serve(srv_engine *e, const srv_config *c) {
    struct addrinfo *ai = resolve(c->host, c->port);
    if (!ai) return 1;
    int nw = srv_engine_n_slots(e);
    server s = {.e = e,
                .c = c,
                .metrics = srv_metrics_new(),
                .n_workers = nw,
                .running = calloc((size_t)nw, sizeof(job *))};
    pthread_t *th = calloc((size_t)nw, sizeof *th);
    worker_arg *wa = calloc((size_t)nw, sizeof *wa);
    if (!s.metrics || !s.running || !th || !wa) {
        srv_metrics_free(s.metrics);
        free(s.running), free(th), free(wa);
        freeaddrinfo(ai);
        fprintf(stderr, "pooled: out of memory\n");
        return 1;
    }
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)c->port, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)SRV_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)SRV_IDLE_TIMEOUT, MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        srv_metrics_free(s.metrics);
        free(s.running), free(th), free(wa);
        fprintf(stderr, "pooled: cannot listen on %s port %d: %s\n", c->host, c->port,
                errno ? strerror(errno) : "libmicrohttpd refused");
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int started = 0;
    while (started < nw) {
        wa[started] = (worker_arg){.s = &s, .no = started};
        if (pthread_create(&th[started], NULL, worker, &wa[started])) break;
        started++;
    }
    if (started < nw) {
        fprintf(stderr, "pooled: cannot start %d worker threads (--parallel)\n", nw);
        stop_workers(&s, th, started);
        MHD_stop_daemon(d);
        srv_metrics_free(s.metrics);
        free(s.running), free(th), free(wa);
        return 1;
    }
    bool v6 = strchr(c->host, ':') != NULL;
    printf("pooled serve: listening on http://%s%s%s:%u\n", v6 ? "[" : "", c->host, v6 ? "]" : "",
           di ? (unsigned)di->port : (unsigned)c->port);
    fflush(stdout);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    if (c->stop) { /* the caller's handlers set the flag */
        while (!*c->stop) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        fprintf(stderr, "pooled serve: stopping\n");
    } else {
        while (sigwait(&set, &sig)) {
        }
        fprintf(stderr, "pooled serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    stop_workers(&s, th, nw);
    /* let the streams send their last events (a client that reads nothing: 5 s at most) */
    pthread_mutex_lock(&s.mu);
    time_t until = time(NULL) + 5;
    while (s.n_live && time(NULL) < until) wait_a_little(&s);
    pthread_mutex_unlock(&s.mu);
    MHD_stop_daemon(d);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    srv_metrics_free(s.metrics);
    free(s.running), free(th), free(wa);
    return 0;
}
