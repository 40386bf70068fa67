/* generate.c - prompt, then pick / feed until n_predict ids, a stop, or an error. */
#include "generate.h"

#include <string.h>
#include <time.h>

double pl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

pl_status pl_generate(pl_session *s, pl_sampler *smp, const int32_t *prompt, int64_t n_prompt,
                      const pl_gen_opts *o, pl_gen_stats *stats) {
    memset(stats, 0, sizeof *stats);
    double t0 = pl_now();
    pl_status st = pl_session_set(s, prompt, n_prompt, &stats->n_prompt_run);
    /* a backend may only have recorded the work (the GPU queue is asynchronous): reading a
     * logit waits for it, so the prompt's time is its own and not the first token's */
    float first;
    if (!st) st = pl_be_read(pl_state_logits(pl_session_state(s)), 0, &first, sizeof first);
    stats->t_prompt = pl_now() - t0;
    if (st) return st;
    t0 = pl_now();
    if (pl_sampler_is_argmax(smp)) { /* ids stay on the device, a step ahead of the host */
        st = pl_session_greedy(s, o->n_predict, o->on_token, o->ud, &stats->n_generated);
        stats->n_decoded = stats->n_generated > 0 ? stats->n_generated - 1 : 0;
        stats->t_decode = pl_now() - t0;
        return st;
    }
    for (int64_t t = 0; t < o->n_predict; t++) {
        int32_t id;
        if ((st = pl_session_pick(s, smp, &id))) break;
        stats->n_generated++;
        bool more = o->on_token ? o->on_token(o->ud, id) : true;
        if (!more || t + 1 == o->n_predict) break;
        if ((st = pl_session_push(s, id))) break;
        stats->n_decoded++;
    }
    stats->t_decode = pl_now() - t0;
    return st;
}
