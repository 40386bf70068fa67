/* pool_test.c - the thread pool (pool.c): every item of every job runs exactly once and the
 * job is over when pl_pool_run returns, for jobs back to back (workers still spinning),
 * after pauses longer than the spin (workers asleep), with more threads than items and
 * items of uneven cost, each call's thread index in range and held by no other call running
 * at once; and a pool freed while its workers sleep or spin. A thread's range of items that
 * it cannot get to (its first item waits for all the others) is taken over by the rest.
 * On wasm32 (make wasm-test) every pool has the caller's thread alone, whatever was asked
 * for. */
#include <stdatomic.h>
#include <time.h>

#include "cpu/pool.h"
#include "test.h"

typedef struct {
    atomic_int *hits; /* per item */
    int job;
    atomic_int late; /* an item that saw another job's number */
    int *seen_job;   /* written by each item: must be this job when pl_pool_run returns */
    int n_threads;
    atomic_int *busy;      /* per thread index: a call holding it runs */
    atomic_int bad_thread; /* calls whose index was out of range or held by another call */
} job_ctx;

static void item(void *ctx, int64_t i, int thread) {
    job_ctx *j = ctx;
    /* the thread index: in range, and no other call running at once holds it */
    if (thread < 0 || thread >= j->n_threads || atomic_exchange(&j->busy[thread], 1))
        atomic_fetch_add(&j->bad_thread, 1);
    if (i % 7 == 0) { /* uneven items */
        volatile int x = 0;
        for (int k = 0; k < 2000; k++) x += k;
        (void)x;
    }
    atomic_fetch_add(&j->hits[i], 1);
    j->seen_job[i] = j->job;
    if (thread >= 0 && thread < j->n_threads) atomic_store(&j->busy[thread], 0);
}

static void sleep_us(long us) {
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

/* Item 0 (the caller's first: the caller's range starts the job) waits, up to 5 s, until
 * every other item has run: only threads that take over the rest of the caller's range
 * let it finish early. */
typedef struct {
    int64_t n;
    atomic_int ran;
    atomic_int timed_out;
} wait_ctx;

static void waiting_item(void *ctx, int64_t i, int thread) {
    (void)thread;
    wait_ctx *w = ctx;
    if (i == 0) {
        for (int k = 0; k < 50000 && atomic_load(&w->ran) < w->n - 1; k++) sleep_us(100);
        if (atomic_load(&w->ran) < w->n - 1) atomic_store(&w->timed_out, 1);
        return;
    }
    atomic_fetch_add(&w->ran, 1);
}

static void check_taken_over(void) {
    for (int threads = 2; threads <= 4; threads++) {
        pl_pool *p = NULL;
        CHECK(pl_pool_new(threads, &p) == PL_OK, "%s", pl_last_error());
        if (!p || pl_pool_threads(p) < 2) { /* wasm32: no workers to take anything over */
            pl_pool_free(p);
            return;
        }
        for (int job = 0; job < 3; job++) {
            wait_ctx w = {.n = 4 * threads + job};
            atomic_init(&w.ran, 0);
            atomic_init(&w.timed_out, 0);
            pl_pool_run(p, w.n, waiting_item, &w);
            CHECK(!atomic_load(&w.timed_out) && atomic_load(&w.ran) == w.n - 1,
                  "%d threads, %lld items: %d of the others ran while item 0 waited", threads,
                  (long long)w.n, atomic_load(&w.ran));
        }
        pl_pool_free(p);
    }
}

static void run_tests(void) {
    check_taken_over();
    for (int threads = 1; threads <= 4; threads++) {
        pl_pool *p = NULL;
        CHECK(pl_pool_new(threads, &p) == PL_OK, "%s", pl_last_error());
        if (!p) return;
#ifdef __wasi__ /* no threads there (base/thread.h): the caller alone, and the pool says so */
        const int want = 1;
#else
        const int want = threads;
#endif
        CHECK(pl_pool_threads(p) == want, "%d threads, not %d", pl_pool_threads(p), want);
        enum { MAXN = 97 };
        atomic_int hits[MAXN];
        int seen_job[MAXN];
        int bad_count = 0, bad_job = 0, bad_thread = 0;
        atomic_int busy[4];
        for (int t = 0; t < 4; t++) atomic_init(&busy[t], 0);
        for (int job = 0; job < 400; job++) {
            int n = 1 + job % MAXN;
            for (int i = 0; i < n; i++) atomic_init(&hits[i], 0), seen_job[i] = -1;
            job_ctx j = {.hits = hits,
                         .job = job,
                         .seen_job = seen_job,
                         .n_threads = pl_pool_threads(p),
                         .busy = busy};
            atomic_init(&j.bad_thread, 0);
            pl_pool_run(p, n, item, &j);
            bad_thread += atomic_load(&j.bad_thread);
            for (int i = 0; i < n; i++) {
                bad_count += atomic_load(&hits[i]) != 1;
                bad_job += seen_job[i] != job;
            }
            if (job % 50 == 49) sleep_us(1000); /* past the spin: the workers sleep */
        }
        CHECK(bad_count == 0, "%d threads: %d items ran other than once", threads, bad_count);
        CHECK(bad_job == 0, "%d threads: %d items unfinished at return", threads, bad_job);
        CHECK(bad_thread == 0, "%d threads: %d items with a thread index out of range or in use",
              threads, bad_thread);
        if (threads & 1) sleep_us(2000); /* free a sleeping pool, or a spinning one */
        pl_pool_free(p);
    }
}
