/* pool.c - worker threads for pl_pool_run: one job at a time, items handed out by an
 * atomic counter; the caller works too and then waits for the stragglers.
 *
 * Waiting spins first, then sleeps: a worker that finished a job watches the job
 * generation for up to POOL_SPIN_NS before it sleeps on the condition variable, and the
 * caller watches the busy count as long before it sleeps, so the jobs of one token (a few
 * hundred matmuls and attentions back to back) hand over without a system call.
 *
 * At many threads the hand-over itself costs: every cache line that all threads write
 * bounces between cores. So the job (written once per job by the caller), the item counter,
 * the busy count and the sleeper counts each sit on their own cache line, and the mutex
 * and condition variables are touched only when someone sleeps: a sleeper counts itself
 * in (n_asleep, caller_asleep) before it checks for the job (the done count) under the
 * mutex, and the poster changes the generation (busy count) before it reads that count,
 * both sequentially consistent, so one of the two sees the other: the wake cannot be
 * lost. */
#include "pool.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "../base/thread.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_RELAX() _mm_pause()
#else
#define POOL_RELAX() ((void)0)
#endif

/* How long a waiting thread spins before it sleeps. */
#define POOL_SPIN_NS 100000

typedef struct {
    pl_pool *p;
    int index; /* the thread argument of its calls */
} pool_worker;

struct pl_pool {
    int n_threads; /* including the caller */
    pl_thread *threads;
    pool_worker *workers; /* [n_threads - 1], each worker's argument */
    pl_mutex mu;
    pl_cond wake; /* a new job (or shutdown) */
    pl_cond done; /* the last worker finished the job */
    /* the current job: written by the caller once per job, read by every worker */
    alignas(64) atomic_uint_fast64_t generation; /* bumped once per job, after the job is set */
    atomic_bool quit;
    pl_pool_fn fn;
    void *ctx;
    int64_t n_items;
    alignas(64) atomic_int_fast64_t next; /* every thread bumps it */
    alignas(64) atomic_int n_busy;        /* workers still inside the current job */
    alignas(64) atomic_int n_asleep;      /* workers asleep (or about to be) on wake */
    atomic_int caller_asleep;             /* the caller asleep (or about to be) on done */
    char pad[64 - 2 * sizeof(atomic_int)];
};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spin until done(p, arg) holds or POOL_SPIN_NS pass; whether it holds. */
static bool spin_until(pl_pool *p, bool (*done)(pl_pool *, uint64_t), uint64_t arg) {
    int64_t t0 = 0;
    for (int i = 0;; i++) {
        if (done(p, arg)) return true;
        if ((i & 255) == 255) {
            int64_t t = now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > POOL_SPIN_NS)
                return false;
        }
        POOL_RELAX();
    }
}

/* (sequentially consistent loads: a sleeper's check pairs with the poster's, above) */
static bool new_job(pl_pool *p, uint64_t seen) {
    return atomic_load(&p->generation) != seen || atomic_load(&p->quit);
}

static bool all_done(pl_pool *p, uint64_t unused) {
    (void)unused;
    return atomic_load(&p->n_busy) == 0;
}

static void drain(pl_pool *p, int thread) {
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items) return;
        p->fn(p->ctx, i, thread);
    }
}

static void *worker(void *arg) {
    const pool_worker *me = arg;
    pl_pool *p = me->p;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(p, new_job, seen)) {
            pl_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_asleep, 1);
            while (!new_job(p, seen)) pl_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->n_asleep, 1);
            pl_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load(&p->generation);
        drain(p, me->index);
        if (atomic_fetch_sub(&p->n_busy, 1) == 1 && atomic_load(&p->caller_asleep)) {
            pl_mutex_lock(&p->mu);
            pl_cond_signal(&p->done);
            pl_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

pl_status pl_pool_new(int n_threads, pl_pool **out) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    pl_pool *p = aligned_alloc(64, (sizeof *p + 63) / 64 * 64);
    if (!p) return pl_fail(PL_ERR_NOMEM, "out of memory for the thread pool");
    *p = (pl_pool){.n_threads = 1};
    pl_mutex_init(&p->mu);
    pl_cond_init(&p->wake);
    pl_cond_init(&p->done);
    atomic_init(&p->generation, 0);
    atomic_init(&p->n_busy, 0);
    atomic_init(&p->n_asleep, 0);
    atomic_init(&p->caller_asleep, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->next, 0);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->threads || !p->workers) {
            pl_pool_free(p);
            return pl_fail(PL_ERR_NOMEM, "out of memory for the thread pool");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->workers[i] = (pool_worker){p, i + 1};
            if (pl_thread_start(&p->threads[i], worker, &p->workers[i]) != 0) break;
            p->n_threads++;
        }
    }
    *out = p;
    return PL_OK;
}

void pl_pool_free(pl_pool *p) {
    if (!p) return;
    atomic_store(&p->quit, true);
    pl_mutex_lock(&p->mu);
    pl_cond_broadcast(&p->wake);
    pl_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pl_thread_join(p->threads[i]);
    pl_mutex_destroy(&p->mu);
    pl_cond_destroy(&p->wake);
    pl_cond_destroy(&p->done);
    free(p->threads);
    free(p->workers);
    free(p);
}

int pl_pool_threads(const pl_pool *p) {
    return p->n_threads;
}

void pl_pool_run(pl_pool *p, int64_t n_items, pl_pool_fn fn, void *ctx) {
    if (n_items <= 0) return;
    if (p->n_threads == 1 || n_items == 1) {
        for (int64_t i = 0; i < n_items; i++) fn(ctx, i, 0);
        return;
    }
    /* every worker left the previous job (n_busy was 0), so the job can be rewritten */
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0);
    atomic_store(&p->n_busy, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->n_asleep)) {
        pl_mutex_lock(&p->mu);
        pl_cond_broadcast(&p->wake);
        pl_mutex_unlock(&p->mu);
    }
    drain(p, 0);
    if (!spin_until(p, all_done, 0)) {
        pl_mutex_lock(&p->mu);
        atomic_store(&p->caller_asleep, 1);
        while (!all_done(p, 0)) pl_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_asleep, 0);
        pl_mutex_unlock(&p->mu);
    }
}
