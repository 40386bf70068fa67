/* bench_streams.c - `pooled bench --streams N[,N...]`: what a server's continuous batching
 * gets out of the library, without a server. For each count N, N sessions of the model
 * (each its own KV cache of --ctx positions) are a server's N requests arriving at once:
 *
 *  - each reads its own prompt of -p ids (stream j's are the bench's pseudo-random ids
 *    from a seed of its own, so no two streams' caches would match) one after another,
 *    as a server that prefills one request at a time does, and picks its first id; the
 *    time to first id of stream j counts from the start of the round to its pick (the
 *    median and the max over the N are reported; the max is all N prefills);
 *  - then -n steps, each appending every stream's last id in one pooled_sessions_step
 *    (the weights read once for all N) and picking each stream's next id greedily (its
 *    own argmax, all read back at once). Aggregate tok/s = N * n / the steps' time.
 *
 * The streams' model is opened again for them, with n_parallel the largest count (its
 * sessions are slots of one batch); the caller's is closed first. A family without a
 * batched step (the Qwen3.5 hybrids) still runs, one pass per stream and step, and says so.
 * Each count runs -r times after a short warm-up (a few ids of prompt and two steps); the
 * medians are reported. */
#include "bench_streams.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "base/json_write.h"
#include "model_args.h"

/* One count's medians. */
typedef struct {
    int n;                     /* streams */
    double tok_s, step_ms;     /* aggregate decode speed; one step of all n streams */
    double ttft_med, ttft_max; /* ms from the round's start to a stream's first id */
    int64_t appended;          /* ids the steps put in the caches, all streams (n * -n) */
} count_result;

struct bench_streams {
    const bench_opts *bo;
    int n_max;           /* the largest count */
    bool batched;        /* one pass a step, else a pass per stream */
    int n_ctx;           /* each stream's context */
    int64_t state_bytes; /* one stream's state: its KV cache and activations */
    pooled_model *m;
    pooled_session **ss;           /* [n_max] */
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

static int largest(const bench_opts *bo) {
    int n = 0;
    for (int k = 0; k < bo->n_streams; k++)
        if (bo->streams[k] > n) n = bo->streams[k];
    return n;
}

/* (the GPU's states are counted against the host's memory too: WebGPU says nothing of a
 * device's memory, and the H200's is about the host's) */
int bench_streams_check(const bench_opts *bo, const pooled_model_info *info, int64_t state_bytes) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    int n_max = largest(bo);
    double mem = machine_bytes();
    if (mem <= 0) return 0;
    mem -= (double)info->loaded_bytes + (double)state_bytes;
    double need = (double)n_max * (double)state_bytes;
    if (need <= mem) return 0;
    return die("bench: --streams %d: %d states of %.1f MiB (a KV cache of %d positions and "
               "activations) need %.1f GiB, more than the %.1f GiB of this machine's memory the "
               "weights leave (%.0f streams at most; a smaller --ctx helps)",
               n_max, n_max, (double)state_bytes / (1024.0 * 1024.0), info->n_ctx, need / gib,
               mem > 0 ? mem / gib : 0.0, mem > 0 ? mem / (double)state_bytes : 0.0);
}

void bench_streams_free(bench_streams *b) {
    if (!b) return;
    for (int j = 0; b->ss && j < b->n_max; j++) pooled_session_free(b->ss[j]);
    pooled_model_close(b->m);
    free(b->ss);
    free(b->prompts);
    free(b->next);
    free(b->ttft);
    free(b->t_dec);
    free(b->t_med);
    free(b->t_max);
    free(b);
}

/* The streams' model and sessions, or NULL after one error line. */
static bench_streams *streams_new(const model_args *ma, const bench_opts *bo) {
    bench_streams *b = calloc(1, sizeof *b);
    if (!b) return die("bench: out of memory"), NULL;
    b->bo = bo;
    b->n_max = largest(bo);
    int64_t p = bo->n_prompt, reps = bo->reps;
    b->ss = calloc((size_t)b->n_max, sizeof *b->ss);
    b->prompts = malloc(sizeof *b->prompts * (size_t)(b->n_max * p));
    b->next = calloc((size_t)b->n_max, sizeof *b->next);
    b->ttft = calloc((size_t)b->n_max, sizeof *b->ttft);
    b->t_dec = calloc((size_t)reps, sizeof *b->t_dec);
    b->t_med = calloc((size_t)reps, sizeof *b->t_med);
    b->t_max = calloc((size_t)reps, sizeof *b->t_max);
    if (!b->ss || !b->prompts || !b->next || !b->ttft || !b->t_dec || !b->t_med || !b->t_max) {
        bench_streams_free(b);
        return die("bench: out of memory"), NULL;
    }
    /* plain sessions: a prompt in one pass, no drafting; slots of one batch */
    model_args a = *ma;
    a.spec = MODEL_SPEC_OFF, a.verify = false, a.n_batch = p;
    if (!(b->m = model_open(&a, b->n_max))) return bench_streams_free(b), NULL;
    pooled_model_info in = {.size = sizeof in};
    pooled_model_stats stats = {.size = sizeof stats};
    pooled_model_get_info(b->m, &in);
    pooled_model_get_stats(b->m, &stats);
    b->batched = stats.batched, b->n_ctx = in.n_ctx;
    for (int j = 0; j < b->n_max; j++) {
        if (pooled_session_new(b->m, &b->ss[j])) {
            die("bench: %s", pooled_last_error());
            return bench_streams_free(b), NULL;
        }
        /* stream 0 reads the bench's own prompt */
        bench_prompt(12345u + 7919u * (uint32_t)j, in.n_vocab, b->prompts + j * p, p);
    }
    b->state_bytes = pooled_session_bytes(b->ss[0]);
    return b;
}

/* One decode step of streams [0, n): every next id appended (one pass when batched),
 * every stream's next id picked. */
static int step(bench_streams *b, int n) {
    return pooled_sessions_step(b->ss, b->next, (size_t)n, b->next);
}

/* Keeps a generation's first id. */
static int first_id(void *user, int32_t id, const char *text, size_t len) {
    (void)text, (void)len;
    if (id >= 0) *(int32_t *)user = id;
    return 0;
}

/* Streams [0, n) read their prompts' first m ids one after another and pick their first
 * id; b->ttft[j] gets the seconds from the start to stream j's pick. */
static int prefill(bench_streams *b, int n, int64_t m) {
    int64_t p = b->bo->n_prompt;
    for (int j = 0; j < n; j++) pooled_session_reset(b->ss[j]);
    pooled_sample_opts o = bench_greedy(1, POOLED_SPEC_OFF);
    double t0 = bench_now();
    int rc = 0;
    for (int j = 0; j < n && !rc; j++) {
        rc = pooled_generate(b->ss[j], b->prompts + j * p, (size_t)m, &o, first_id, &b->next[j],
                             NULL);
        b->ttft[j] = bench_now() - t0;
    }
    return rc;
}

/* "ids N=3 stream 1: PROMPT | GENERATED" for each of streams [0, n): the prompt and the
 * generated ids (the first after the prompt, then one per step: -n + 1). */
static void print_ids(const bench_streams *b, int n, FILE *f) {
    int64_t p = b->bo->n_prompt;
    for (int j = 0; j < n; j++) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        pooled_session_ids(b->ss[j], &ids, &n_ids);
        fprintf(f, "ids        N=%d stream %d:", n, j);
        for (size_t i = 0; i < n_ids; i++) fprintf(f, "%s %d", (int64_t)i == p ? " |" : "", ids[i]);
        fprintf(f, " %d\n", b->next[j]);
        pooled_free(ids);
    }
}

static int run_count(bench_streams *b, count_result *r, FILE *ids_out) {
    const bench_opts *bo = b->bo;
    int n = r->n;
    int64_t p = bo->n_prompt, reps = bo->reps;
    /* warm-up: a few ids of prompt, two steps (the batched pass of n columns first made) */
    int rc = prefill(b, n, p < 8 ? p : 8);
    for (int i = 0; i < 2 && !rc; i++) rc = step(b, n);
    for (int64_t rep = 0; rep < reps && !rc; rep++) {
        rc = prefill(b, n, p);
        double t_max = b->ttft[n - 1];
        b->t_med[rep] = bench_median(b->ttft, n), b->t_max[rep] = t_max;
        double t0 = bench_now();
        for (int64_t i = 0; i < bo->n_gen && !rc; i++) rc = step(b, n);
        b->t_dec[rep] = bench_now() - t0;
    }
    if (rc) return rc;
    r->appended = 0;
    for (int j = 0; j < n; j++) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        pooled_session_ids(b->ss[j], &ids, &n_ids);
        pooled_free(ids);
        r->appended += (int64_t)n_ids - p;
    }
    double dec = bench_median(b->t_dec, (int)reps);
    r->tok_s = (double)n * (double)bo->n_gen / dec;
    r->step_ms = 1e3 * dec / (double)bo->n_gen;
    r->ttft_med = 1e3 * bench_median(b->t_med, (int)reps);
    r->ttft_max = 1e3 * bench_median(b->t_max, (int)reps);
    if (bo->print_ids) print_ids(b, n, ids_out);
    return 0;
}

int bench_streams_run(const model_args *ma, const bench_opts *bo, FILE *ids_out,
                      bench_streams **out) {
    *out = NULL;
    bench_streams *b = streams_new(ma, bo);
    if (!b) return 1;
    for (int k = 0; k < bo->n_streams; k++) {
        b->res[k].n = bo->streams[k];
        if (run_count(b, &b->res[k], ids_out)) {
            die("bench: %s", pooled_last_error());
            bench_streams_free(b);
            return 1;
        }
    }
    *out = b;
    return 0;
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
            (long long)b->bo->n_prompt, (long long)b->bo->n_gen, b->n_ctx, mib, step_kind(b));
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
           b->batched ? "true" : "false", b->batched ? "batched" : "sequential", b->n_ctx,
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
