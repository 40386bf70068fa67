/* bench_streams.c - `pooled bench --streams N[,N...]`: what a server's continuous batching
 * gets out of the library, without a server. For each count N, N sessions of the model
 * (each its own KV cache of --ctx positions) are a server's N requests arriving at once:
 *
 *  - each reads its own prompt of -p ids (stream j's are the bench's pseudo-random ids
 *    from a seed of its own, so no two streams' caches would match) one after another,
 *    as a server that prefills one request at a time does, and picks its first id; the
 *    time to first id of stream j counts from the start of the round to its pick (the
 *    median and the max over the N are reported; the max is all N prefills);
 *  - then -n steps, each appending every stream's last id in one pl_session_push_batch
 *    (the weights read once for all N) and picking each stream's next id greedily (its
 *    own argmax, read back as serve's slots do). Aggregate tok/s = N * n / the steps' time.
 *
 * A family without a batched step (pl_model_can_batch false: the Qwen3.5 hybrids) still
 * runs, one pl_session_push per stream and step, and says so. Each count runs -r times
 * after a short warm-up (a few ids of prompt and two steps); the medians are reported. */
#include "bench_streams.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json_write.h"
#include "runtime/generate.h"

/* One count's medians. */
typedef struct {
    int n;                     /* streams */
    double tok_s, step_ms;     /* aggregate decode speed; one step of all n streams */
    double ttft_med, ttft_max; /* ms from the round's start to a stream's first id */
    int64_t appended;          /* ids the steps put in the caches, all streams (n * -n) */
} count_result;

struct bench_streams {
    const pl_model_parts *lm;
    const bench_opts *bo;
    int n_max;           /* the largest count */
    bool batched;        /* one pass a step (pl_model_can_batch), else a push per stream */
    int64_t state_bytes; /* one stream's state: its KV cache and activations */
    pl_session **ss;     /* [n_max] */
    pl_batch *batch;     /* NULL when not batched or n_max is 1 */
    pl_sampler *greedy;
    int32_t *prompts;              /* [n_max][n_prompt] */
    int32_t *next;                 /* [n_max]: each stream's id to append next */
    double *ttft;                  /* [n_max]: this round's times to first id */
    double *t_dec, *t_med, *t_max; /* [reps]: each repetition's decode s, ttft median, max */
    count_result res[BENCH_STREAMS_MAX];
};

/* Bytes of memory this machine has (0 where unknown). */
static double machine_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* n_max states of state_bytes each must fit in the machine's memory less the weights and
 * the caller's own state (the GPU's states are counted against it too: WebGPU says
 * nothing of a device's memory, and the H200's is about the host's). */
static pl_status check_memory(const bench_streams *b, int64_t other_bytes) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    double mem = machine_bytes();
    if (mem <= 0) return PL_OK;
    mem -= (double)pl_model_get_info(b->lm->m)->loaded_bytes + (double)other_bytes;
    double need = (double)b->n_max * (double)b->state_bytes;
    if (need <= mem) return PL_OK;
    return pl_fail(PL_ERR_ARG,
                   "--streams %d: %d states of %.1f MiB (a KV cache of %d positions and "
                   "activations) need %.1f GiB, more than the %.1f GiB of this machine's "
                   "memory the weights leave (%.0f streams at most; a smaller --ctx helps)",
                   b->n_max, b->n_max, (double)b->state_bytes / (1024.0 * 1024.0), b->lm->so.n_ctx,
                   need / gib, mem > 0 ? mem / gib : 0.0,
                   mem > 0 ? mem / (double)b->state_bytes : 0.0);
}

pl_status bench_streams_new(const pl_model_parts *lm, const bench_opts *bo, int64_t other_bytes,
                            bench_streams **out) {
    *out = NULL;
    bench_streams *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->lm = lm, b->bo = bo;
    for (int k = 0; k < bo->n_streams; k++)
        if (bo->streams[k] > b->n_max) b->n_max = bo->streams[k];
    const pl_model_info *info = pl_model_get_info(lm->m);
    int64_t p = bo->n_prompt, reps = bo->reps;
    b->ss = calloc((size_t)b->n_max, sizeof *b->ss);
    b->prompts = malloc(sizeof *b->prompts * (size_t)(b->n_max * p));
    b->next = calloc((size_t)b->n_max, sizeof *b->next);
    b->ttft = calloc((size_t)b->n_max, sizeof *b->ttft);
    b->t_dec = calloc((size_t)reps, sizeof *b->t_dec);
    b->t_med = calloc((size_t)reps, sizeof *b->t_med);
    b->t_max = calloc((size_t)reps, sizeof *b->t_max);
    pl_status st = PL_OK;
    if (!b->ss || !b->prompts || !b->next || !b->ttft || !b->t_dec || !b->t_med || !b->t_max)
        st = pl_fail(PL_ERR_NOMEM, "out of memory");
    for (int j = 0; !st && j < b->n_max; j++) /* stream 0 reads the bench's own prompt */
        bench_prompt(12345u + 7919u * (uint32_t)j, info->n_vocab, b->prompts + j * p, p);
    /* plain states: a prompt in one batch, the last row's logits, no drafting */
    pl_state_opts so = lm->so;
    so.n_batch = (int)p, so.n_logits = 1, so.n_snap = 0, so.draft = false;
    if (!st) st = pl_session_new(lm->m, &so, &b->ss[0]);
    if (!st) b->state_bytes = pl_state_bytes(pl_session_state(b->ss[0]));
    if (!st) st = check_memory(b, other_bytes);
    /* batched: the streams' caches are slots of the batch's (one attention for all) */
    b->batched = pl_model_can_batch(lm->m);
    if (!st && b->batched && b->n_max > 1) {
        pl_session_free(b->ss[0]);
        b->ss[0] = NULL;
        st = pl_batch_new_slots(lm->m, b->n_max, &so, &b->batch);
    }
    for (int j = 0; !st && j < b->n_max; j++)
        if (!b->ss[j])
            st = b->batch ? pl_batch_session_new(b->batch, j, &so, &b->ss[j])
                          : pl_session_new(lm->m, &so, &b->ss[j]);
    pl_sampler_params gp = pl_sampler_defaults();
    gp.temp = 0;
    if (!st) st = pl_sampler_new(&gp, info->n_vocab, &b->greedy);
    if (st) {
        bench_streams_free(b);
        return st;
    }
    *out = b;
    return PL_OK;
}

void bench_streams_free(bench_streams *b) {
    if (!b) return;
    for (int j = 0; b->ss && j < b->n_max; j++) pl_session_free(b->ss[j]);
    pl_batch_free(b->batch);
    pl_sampler_free(b->greedy);
    free(b->ss);
    free(b->prompts);
    free(b->next);
    free(b->ttft);
    free(b->t_dec);
    free(b->t_med);
    free(b->t_max);
    free(b);
}

/* One decode step of streams [0, n): every next id appended (one pass when batched),
 * then every stream's next id picked. */
static pl_status step(bench_streams *b, int n) {
    pl_status st = PL_OK;
    bool picked = false;
    if (b->batch && n > 1) { /* every stream's greedy id in one read */
        st = pl_session_push_batch(b->batch, b->ss, b->next, n);
        picked = !st && !pl_batch_argmax(b->batch, n, b->next);
        for (int j = 0; picked && j < n; j++) picked = b->next[j] >= 0;
    } else {
        for (int j = 0; j < n && !st; j++) st = pl_session_push(b->ss[j], b->next[j]);
    }
    for (int j = 0; j < n && !st && !picked; j++)
        st = pl_session_pick(b->ss[j], b->greedy, &b->next[j]);
    return st;
}

/* Streams [0, n) read their prompts' first m ids one after another and pick their first
 * id; b->ttft[j] gets the seconds from the start to stream j's pick. */
static pl_status prefill(bench_streams *b, int n, int64_t m) {
    int64_t p = b->bo->n_prompt;
    for (int j = 0; j < n; j++) pl_session_reset(b->ss[j]);
    double t0 = pl_now();
    pl_status st = PL_OK;
    for (int j = 0; j < n && !st; j++) {
        st = pl_session_set(b->ss[j], b->prompts + j * p, m, NULL);
        if (!st) st = pl_session_pick(b->ss[j], b->greedy, &b->next[j]);
        b->ttft[j] = pl_now() - t0;
    }
    return st;
}

/* "ids N=3 stream 1: PROMPT | GENERATED" for each of streams [0, n): the prompt and the
 * generated ids (the first after the prompt, then one per step: -n + 1). */
static void print_ids(const bench_streams *b, int n, FILE *f) {
    int64_t p = b->bo->n_prompt;
    for (int j = 0; j < n; j++) {
        int64_t n_ids;
        const int32_t *ids = pl_session_ids(b->ss[j], &n_ids);
        fprintf(f, "ids        N=%d stream %d:", n, j);
        for (int64_t i = 0; i < n_ids; i++) fprintf(f, "%s %d", i == p ? " |" : "", ids[i]);
        fprintf(f, " %d\n", b->next[j]);
    }
}

static pl_status run_count(bench_streams *b, count_result *r, FILE *ids_out) {
    const bench_opts *bo = b->bo;
    int n = r->n;
    int64_t p = bo->n_prompt, reps = bo->reps;
    /* warm-up: a few ids of prompt, two steps (the batched pass of n columns first made) */
    pl_status st = prefill(b, n, p < 8 ? p : 8);
    for (int i = 0; i < 2 && !st; i++) st = step(b, n);
    for (int64_t rep = 0; rep < reps && !st; rep++) {
        st = prefill(b, n, p);
        double t_max = b->ttft[n - 1];
        b->t_med[rep] = bench_median(b->ttft, n), b->t_max[rep] = t_max;
        double t0 = pl_now();
        for (int64_t i = 0; i < bo->n_gen && !st; i++) st = step(b, n);
        b->t_dec[rep] = pl_now() - t0;
    }
    if (st) return st;
    r->appended = 0;
    for (int j = 0; j < n; j++) {
        int64_t n_ids;
        pl_session_ids(b->ss[j], &n_ids);
        r->appended += n_ids - p;
    }
    double dec = bench_median(b->t_dec, (int)reps);
    r->tok_s = (double)n * (double)bo->n_gen / dec;
    r->step_ms = 1e3 * dec / (double)bo->n_gen;
    r->ttft_med = 1e3 * bench_median(b->t_med, (int)reps);
    r->ttft_max = 1e3 * bench_median(b->t_max, (int)reps);
    if (bo->print_ids) print_ids(b, n, ids_out);
    return PL_OK;
}

pl_status bench_streams_run(bench_streams *b, FILE *ids_out) {
    pl_status st = PL_OK;
    for (int k = 0; k < b->bo->n_streams && !st; k++) {
        b->res[k].n = b->bo->streams[k];
        st = run_count(b, &b->res[k], ids_out);
    }
    return st;
}

/* Aggregate tok/s over that of one stream (0 when 1 is not among the counts). */
static double ratio_to_one(const bench_streams *b, const count_result *r) {
    for (int k = 0; k < b->bo->n_streams; k++)
        if (b->res[k].n == 1) return r->tok_s / b->res[k].tok_s;
    return 0;
}

static const char *step_kind(const bench_streams *b) {
    return b->batched ? "batched step" : "(no batched step: sequential)";
}

void bench_streams_print(const bench_streams *b, FILE *f) {
    double mib = (double)b->state_bytes / (1024.0 * 1024.0);
    fprintf(f, "streams    pp%lld then tg%lld each; ctx %d, %.1f MiB of state per stream; %s\n",
            (long long)b->bo->n_prompt, (long long)b->bo->n_gen, b->lm->so.n_ctx, mib,
            step_kind(b));
    fprintf(f, "streams      N   agg tok/s    ms/step   x N=1   first id median / max ms\n");
    for (int k = 0; k < b->bo->n_streams; k++) {
        const count_result *r = &b->res[k];
        double x = ratio_to_one(b, r);
        char xs[16] = "    -";
        if (x > 0) snprintf(xs, sizeof xs, "%7.2f", x);
        fprintf(f, "streams    %3d %11.1f %10.2f %7s %15.1f / %.1f\n", r->n, r->tok_s, r->step_ms,
                xs, r->ttft_med, r->ttft_max);
    }
}

void bench_streams_json(const bench_streams *b) {
    printf(",\"streams_batched\":%s,\"streams_step\":\"%s\",\"streams_ctx\":%d,"
           "\"streams_state_bytes\":%lld,\"streams\":[",
           b->batched ? "true" : "false", b->batched ? "batched" : "sequential", b->lm->so.n_ctx,
           (long long)b->state_bytes);
    for (int k = 0; k < b->bo->n_streams; k++) {
        const count_result *r = &b->res[k];
        double x = ratio_to_one(b, r);
        printf("%s{\"n\":%d,\"tok_s\":", k ? "," : "", r->n);
        pl_json_num(stdout, r->tok_s, 0);
        printf(",\"ms_per_step\":");
        pl_json_num(stdout, r->step_ms, 0);
        printf(",\"ratio_to_1\":");
        if (x > 0)
            pl_json_num(stdout, x, 0);
        else
            printf("null");
        printf(",\"ttft_ms_median\":");
        pl_json_num(stdout, r->ttft_med, 0);
        printf(",\"ttft_ms_max\":");
        pl_json_num(stdout, r->ttft_max, 0);
        printf(",\"ids_appended\":%lld}", (long long)r->appended);
    }
    printf("]");
}
