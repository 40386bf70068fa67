/* metrics.h - what `GET /metrics` shows, in Prometheus' text format: requests by route and
 * status, prompt and generated ids, the decode speed of the last generations, the time to
 * the first id, and the queue and in-flight counts the server passes in. Thread-safe. */
#ifndef PL_SERVE_METRICS_H
#define PL_SERVE_METRICS_H

#include "base/strbuf.h"
#include "engine.h"

#define SRV_METRICS_ROWS 64 /* distinct (route, status) pairs kept; more go to route "other" */
#define SRV_METRICS_LAST 16 /* generations the decode speed is averaged over */

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_new(void); /* NULL when out of memory */
void srv_metrics_free(srv_metrics *m);
/* One answered request; route is a static string (the route's path, or "other"). */
void srv_metrics_request(srv_metrics *m, const char *route, int status);
/* One finished generation's ids and timings. */
void srv_metrics_generation(srv_metrics *m, const srv_gen_result *g);
/* The exposition, with the server's queue length and requests in flight, and e's batched
 * decode steps (e may be NULL). */
void srv_metrics_render(srv_metrics *m, pl_strbuf *b, int queued, int in_flight, srv_engine *e);

#endif
