/* pool_lab.c - the CPU thread pool's cost per job (pool.c): for each thread count, the wall
 * time of one pl_pool_run of 4 x threads items, back to back (workers spinning between jobs,
 * as in a token's few hundred matmuls), for empty items ("hand-over": the barrier alone)
 * and for items of a few us each ("work": the barrier plus uneven finishing), median of
 * 7 runs of 2000 jobs. With --bw MIB, also the memory read bandwidth those threads reach
 * (a buffer of MIB MiB summed in 4 x threads chunks, best of 5): the ceiling of decode.
 * Build: `make lab`; run: build/pool_lab [--threads 1,2,4,8,16] [--jobs 2000] [--bw 2048].
 * On a loaded machine the numbers say little: threads past the free cores wait for the
 * scheduler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/pool.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void empty_item(void *ctx, int64_t i, int thread) {
    (void)thread;
    (void)ctx, (void)i;
}

static void work_item(void *ctx, int64_t i, int thread) {
    (void)thread;
    volatile double *sink = ctx, x = (double)i;
    for (int k = 0; k < 200; k++) x = x * 0.999 + 1.0; /* a few us */
    *sink += x;
}

typedef struct {
    const uint64_t *buf;
    int64_t words, chunks;
    uint64_t sums[1024];
} bw_job;

static void bw_item(void *ctx, int64_t i, int thread) {
    (void)thread;
    bw_job *j = ctx;
    int64_t per = j->words / j->chunks, a = i * per, b = i + 1 == j->chunks ? j->words : a + per;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t w = a; w + 4 <= b; w += 4)
        s0 += j->buf[w], s1 += j->buf[w + 1], s2 += j->buf[w + 2], s3 += j->buf[w + 3];
    j->sums[i % 1024] = s0 + s1 + s2 + s3;
}

/* GB/s of reading mib MiB through p's threads, best of 5. */
static double bandwidth(pl_pool *p, int64_t mib) {
    bw_job *j = calloc(1, sizeof *j);
    uint64_t *buf = malloc((size_t)mib << 20);
    if (!j || !buf) {
        free(j), free(buf);
        return 0;
    }
    memset(buf, 1, (size_t)mib << 20);
    j->buf = buf, j->words = (mib << 20) / 8, j->chunks = 4 * pl_pool_threads(p);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        pl_pool_run(p, j->chunks, bw_item, j);
        double gbs = (double)(mib << 20) / (now_s() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    free(buf), free(j);
    return best;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over 7 runs of the ns per job. */
static double time_jobs(pl_pool *p, int items, int jobs, pl_pool_fn fn, void *ctx) {
    double t[7];
    for (int r = 0; r < 7; r++) {
        double t0 = now_s();
        for (int j = 0; j < jobs; j++) pl_pool_run(p, items, fn, ctx);
        t[r] = (now_s() - t0) / jobs * 1e9;
    }
    qsort(t, 7, sizeof t[0], cmpd);
    return t[3];
}

int main(int argc, char **argv) {
    const char *list = "1,2,4,8,16";
    int jobs = 2000;
    int64_t bw_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            list = argv[++i];
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bw") && i + 1 < argc)
            bw_mib = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: pool_lab [--threads 1,2,4,8,16] [--jobs N] [--bw MIB]\n");
            return 2;
        }
    }
    if (jobs < 1) jobs = 1;
    printf("%-8s %-8s %16s %16s %12s\n", "threads", "items", "hand-over ns", "work ns/job",
           "read GB/s");
    for (const char *s = list; *s;) {
        int th = atoi(s);
        if (th >= 1) {
            pl_pool *p = NULL;
            if (pl_pool_new(th, &p) != PL_OK) {
                fprintf(stderr, "pool_lab: no pool of %d threads\n", th);
                return 1;
            }
            double sink = 0;
            int items = 4 * th;
            time_jobs(p, items, jobs / 4 + 1, empty_item, NULL); /* warm-up */
            double e = time_jobs(p, items, jobs, empty_item, NULL);
            double w = time_jobs(p, items, jobs / 4 + 1, work_item, &sink);
            double bw = bw_mib > 0 ? bandwidth(p, bw_mib) : 0;
            printf("%-8d %-8d %16.0f %16.0f %12.1f\n", th, items, e, w, bw);
            pl_pool_free(p);
        }
        const char *c = strchr(s, ',');
        s = c ? c + 1 : s + strlen(s);
    }
    return 0;
}
