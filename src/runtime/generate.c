/* generate.c - prompt, then pick / feed until n_predict ids, a stop, or an error. */
#include "generate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double pl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Speculative decoding: first is the id picked from the prompt's logits (already handed
 * to on_token); each verify pass runs the last id with the drafter's guesses. */
static pl_status speculate(pl_session *s, pl_sampler *smp, const pl_gen_opts *o, int32_t first,
                           pl_gen_stats *stats) {
    int64_t n_ctx = pl_session_n_ctx(s), n_have;
    const int32_t *have = pl_session_ids(s, &n_have);
    int32_t *ctx = malloc(sizeof *ctx * (size_t)(n_ctx + 1));
    if (!ctx) return pl_fail(PL_ERR_NOMEM, "out of memory for the drafts");
    memcpy(ctx, have, sizeof *ctx * (size_t)n_have);
    int32_t last = first, drafts[PL_SPEC_MAX], out[PL_SPEC_MAX + 1];
    int kmax = pl_session_spec_max(s);
    pl_status st = PL_OK;
    for (bool more = true; more && stats->n_generated < o->n_predict;) {
        ctx[n_have] = last; /* the drafter sees every id so far, last included */
        int64_t left = o->n_predict - stats->n_generated - 1; /* ids after this pass's own */
        int max = kmax < left ? kmax : (int)left, k = 0, n_out = 0;
        if (max > 0) k = o->drafter->draft(o->drafter, ctx, n_have + 1, drafts, max);
        if ((st = pl_session_spec_step(s, smp, last, drafts, k, out, &n_out))) break;
        if (k > 0 && o->drafter->feedback) o->drafter->feedback(o->drafter, k, n_out - 1);
        stats->n_steps++;
        stats->n_drafted += k;
        stats->n_accepted += n_out - 1;
        stats->n_decoded += n_out; /* last and the accepted drafts were fed */
        n_have += n_out;
        for (int i = 0; i < n_out && more; i++) {
            stats->n_generated++;
            more = o->on_token ? o->on_token(o->ud, out[i]) : true;
            if (i + 1 < n_out) ctx[n_have - n_out + 1 + i] = out[i];
            if (!more && i + 1 < n_out) { /* stopped inside the accepted drafts */
                stats->n_decoded -= n_out - 1 - i;
                st = pl_session_truncate(s, n_have - (n_out - 1 - i));
            }
        }
        last = out[n_out - 1];
    }
    free(ctx);
    return st;
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
    if (o->drafter && !pl_sampler_constrained(smp) && pl_session_spec_max(s) > 0 &&
        o->n_predict > 0) {
        int32_t id;
        if (!(st = pl_session_pick(s, smp, &id))) {
            stats->n_generated++;
            bool more = o->on_token ? o->on_token(o->ud, id) : true;
            if (more) st = speculate(s, smp, o, id, stats);
        }
        stats->t_decode = pl_now() - t0;
        return st;
    }
    if (pl_sampler_is_argmax(smp)) { /* ids stay on the device, a step ahead of the host */
        st = pl_session_greedy(s, o->n_predict, o->on_token, o->ud, &stats->n_generated);
        stats->n_decoded = stats->n_generated > 0 ? stats->n_generated - 1 : 0;
        stats->n_steps = stats->n_decoded; /* one pass each */
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
        stats->n_decoded++, stats->n_steps++;
    }
    stats->t_decode = pl_now() - t0;
    return st;
}
