/* pool.c - worker threads for pl_pool_run: one job at a time, its items dealt out in
 * contiguous ranges, one a thread; a thread that runs out of its own takes what is left of
 * the others'; the caller works too and then waits for the stragglers.
 *
 * Waiting spins first, then sleeps: a worker that finished a job watches the job
 * generation for up to POOL_SPIN_NS before it sleeps on the condition variable, and the
 * caller watches the workers' done marks as long before it sleeps, so the jobs of one token
 * (a few hundred matmuls and attentions back to back) hand over without a system call.
 *
 * At many threads the hand-over itself costs: every cache line that all threads write
 * bounces between cores, one owner at a time. One shared item counter took about 5 atomic
 * increments a thread a job (4 items and the one that finds none) and a shared busy count
 * one more, all on two lines: at 16 threads ~100 transfers of a line in a row, a few us a
 * job. So each thread has a line of its own - its range's next item, the range's end and
 * its done mark - written by others only when they take from a range they have finished
 * theirs before (a thread late to wake, or slowed by the machine, has its range shared out
 * that way). The job (written once per job by the caller) and the sleeper counts each sit
 * on their own cache line, and the mutex and condition variables are touched only when
 * someone sleeps: a sleeper counts itself in (n_asleep, caller_asleep) before it checks
 * for what it waits for under the mutex, and the other side changes that (the generation,
 * a done mark) before it reads the count, both sequentially consistent, so one of the two
 * sees the other: the wake cannot be lost. */
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

/* A thread's share of the current job, on a cache line of its own: items next .. end - 1
 * (next taken by the owner, and by others once they finished their own), and the owner's
 * done mark (workers: the generation of the last job they left). */
typedef struct {
    alignas(64) atomic_int_fast64_t next;
    int64_t end;
    atomic_uint_fast64_t done;
} pool_share;

struct pl_pool {
    int n_threads; /* including the caller */
    pl_thread *threads;
    pool_worker *workers; /* [n_threads - 1], each worker's argument */
    pool_share *shares;   /* [n_threads], thread t's at t */
    pl_mutex mu;
    pl_cond wake; /* a new job (or shutdown) */
    pl_cond done; /* a worker finished the job while the caller slept */
    /* the current job: written by the caller once per job, read by every worker */
    alignas(64) atomic_uint_fast64_t generation; /* bumped once per job, after the job is set */
    atomic_bool quit;
    pl_pool_fn fn;
    void *ctx;
    alignas(64) atomic_int n_asleep; /* workers asleep (or about to be) on wake */
    atomic_int caller_asleep;        /* the caller asleep (or about to be) on done */
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

/* every worker left job gen */
static bool all_done(pl_pool *p, uint64_t gen) {
    for (int t = 1; t < p->n_threads; t++)
        if (atomic_load(&p->shares[t].done) != gen) return false;
    return true;
}

/* The items of share s until none is left. */
static void take(pl_pool *p, pool_share *s, int thread) {
    while (atomic_load_explicit(&s->next, memory_order_relaxed) < s->end) {
        int64_t i = atomic_fetch_add(&s->next, 1);
        if (i >= s->end) return;
        p->fn(p->ctx, i, thread);
    }
}

/* The thread's own range, then what is left of the others', the next thread's first. */
static void drain(pl_pool *p, int thread) {
    for (int k = 0; k < p->n_threads; k++) {
        int t = thread + k < p->n_threads ? thread + k : thread + k - p->n_threads;
        take(p, &p->shares[t], thread);
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
        atomic_store(&p->shares[me->index].done, seen);
        if (atomic_load(&p->caller_asleep)) {
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
    atomic_init(&p->n_asleep, 0);
    atomic_init(&p->caller_asleep, 0);
    atomic_init(&p->quit, false);
    p->shares = aligned_alloc(64, sizeof *p->shares * (size_t)n_threads);
    if (!p->shares) {
        pl_pool_free(p);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the thread pool");
    }
    for (int t = 0; t < n_threads; t++) {
        atomic_init(&p->shares[t].next, 0);
        p->shares[t].end = 0;
        atomic_init(&p->shares[t].done, 0);
    }
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
    free(p->shares);
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
    /* every worker left the previous job (its done mark), so the job can be rewritten */
    p->fn = fn;
    p->ctx = ctx;
    int T = p->n_threads;
    for (int t = 0; t < T; t++) {
        atomic_store_explicit(&p->shares[t].next, n_items * t / T, memory_order_relaxed);
        p->shares[t].end = n_items * (t + 1) / T;
    }
    uint64_t gen = atomic_fetch_add(&p->generation, 1) + 1;
    if (atomic_load(&p->n_asleep)) {
        pl_mutex_lock(&p->mu);
        pl_cond_broadcast(&p->wake);
        pl_mutex_unlock(&p->mu);
    }
    drain(p, 0);
    if (!spin_until(p, all_done, gen)) {
        pl_mutex_lock(&p->mu);
        atomic_store(&p->caller_asleep, 1);
        while (!all_done(p, gen)) pl_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_asleep, 0);
        pl_mutex_unlock(&p->mu);
    }
}
