/* metrics.c - counters behind GET /metrics and their Prometheus text exposition
 * (https://prometheus.io/docs/instrumenting/exposition_formats/). */
#include "metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct srv_metrics {
    pthread_mutex_t mu;
    struct {
        const char *route;
        int status;
        unsigned long long n;
    } rows[SRV_METRICS_ROWS];
    int n_rows;
    unsigned long long prompt_ids, generated_ids, generations;
    double ttft_sum;
    unsigned long long ttft_count;
    struct {
        double ids, seconds;
    } last[SRV_METRICS_LAST]; /* decode: ids after the first, and their seconds */
    int n_last, next_last;
};

srv_metrics *srv_metrics_new(void) {
    srv_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void srv_metrics_free(srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void srv_metrics_request(srv_metrics *m, const char *route, int status) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->n_rows && !(m->rows[i].status == status && !strcmp(m->rows[i].route, route))) i++;
    if (i == m->n_rows && m->n_rows < SRV_METRICS_ROWS) {
        m->rows[m->n_rows].route = route, m->rows[m->n_rows].status = status;
        m->n_rows++;
    }
    if (i < m->n_rows) m->rows[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_generation(srv_metrics *m, const srv_gen_result *g) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->generations++;
    m->prompt_ids += (unsigned long long)g->n_prompt;
    m->generated_ids += (unsigned long long)g->n_completion;
    if (g->t_first >= 0) m->ttft_sum += g->t_first, m->ttft_count++;
    if (g->n_completion > 1 && g->t_decode > 0) {
        m->last[m->next_last].ids = (double)(g->n_completion - 1);
        m->last[m->next_last].seconds = g->t_decode;
        m->next_last = (m->next_last + 1) % SRV_METRICS_LAST;
        if (m->n_last < SRV_METRICS_LAST) m->n_last++;
    }
    pthread_mutex_unlock(&m->mu);
}

static void head(pl_strbuf *b, const char *name, const char *type, const char *help) {
    pl_sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void srv_metrics_render(srv_metrics *m, pl_strbuf *b, int queued, int in_flight, srv_engine *e) {
    pthread_mutex_lock(&m->mu);
    head(b, "pooled_requests_total", "counter", "Requests answered, by route and HTTP status.");
    for (int i = 0; i < m->n_rows; i++)
        pl_sb_printf(b, "pooled_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                     m->rows[i].route, m->rows[i].status, m->rows[i].n);
    head(b, "pooled_generations_total", "counter", "Generations run.");
    pl_sb_printf(b, "pooled_generations_total %llu\n", m->generations);
    head(b, "pooled_prompt_tokens_total", "counter", "Prompt ids of the generations.");
    pl_sb_printf(b, "pooled_prompt_tokens_total %llu\n", m->prompt_ids);
    head(b, "pooled_generated_tokens_total", "counter",
         "Ids generated (the end-of-turn id not counted).");
    pl_sb_printf(b, "pooled_generated_tokens_total %llu\n", m->generated_ids);
    double ids = 0, sec = 0;
    for (int i = 0; i < m->n_last; i++) ids += m->last[i].ids, sec += m->last[i].seconds;
    head(b, "pooled_decode_tokens_per_second", "gauge",
         "Decode speed of the last generations (at most 16), after their first id.");
    pl_sb_printf(b, "pooled_decode_tokens_per_second %.6g\n", sec > 0 ? ids / sec : 0.0);
    head(b, "pooled_time_to_first_token_seconds", "summary",
         "Seconds from the start of a generation (prompt included) to its first id.");
    pl_sb_printf(b,
                 "pooled_time_to_first_token_seconds_sum %.6g\n"
                 "pooled_time_to_first_token_seconds_count %llu\n",
                 m->ttft_sum, m->ttft_count);
    pthread_mutex_unlock(&m->mu);
    head(b, "pooled_queue_length", "gauge", "Requests waiting for the model.");
    pl_sb_printf(b, "pooled_queue_length %d\n", queued);
    head(b, "pooled_requests_in_flight", "gauge",
         "Requests queued, generating or still sending their answer.");
    pl_sb_printf(b, "pooled_requests_in_flight %d\n", in_flight);
    if (!e || !srv_engine_batched(e)) return;
    uint64_t steps, cols;
    srv_engine_batch_stats(e, &steps, &cols);
    head(b, "pooled_batch_steps_total", "counter",
         "Decode passes that appended the next id of several slots at once.");
    pl_sb_printf(b, "pooled_batch_steps_total %llu\n", (unsigned long long)steps);
    head(b, "pooled_batch_tokens_total", "counter", "Ids those passes appended, all slots.");
    pl_sb_printf(b, "pooled_batch_tokens_total %llu\n", (unsigned long long)cols);
}
