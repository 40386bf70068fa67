/* pool.c - worker threads for pl_pool_run: one job at a time, items handed out by an
 * atomic counter; the caller works too and then waits for the stragglers. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct pl_pool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a new job (or shutdown) */
    pthread_cond_t done; /* a worker finished the job */
    uint64_t generation; /* bumped once per job */
    int n_busy;          /* workers still inside the current job */
    bool quit;
    /* the current job */
    pl_pool_fn fn;
    void *ctx;
    int64_t n_items;
    atomic_int_fast64_t next;
};

static void drain(pl_pool *p) {
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items) return;
        p->fn(p->ctx, i);
    }
}

static void *worker(void *arg) {
    pl_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p);
        pthread_mutex_lock(&p->mu);
        if (--p->n_busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pl_status pl_pool_new(int n_threads, pl_pool **out) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    pl_pool *p = calloc(1, sizeof *p);
    if (!p) return pl_fail(PL_ERR_NOMEM, "out of memory for the thread pool");
    p->n_threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            pl_pool_free(p);
            return pl_fail(PL_ERR_NOMEM, "out of memory for the thread pool");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker, p) != 0) break;
            p->n_threads++;
        }
    }
    *out = p;
    return PL_OK;
}

void pl_pool_free(pl_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int pl_pool_threads(const pl_pool *p) {
    return p->n_threads;
}

void pl_pool_run(pl_pool *p, int64_t n_items, pl_pool_fn fn, void *ctx) {
    if (n_items <= 0) return;
    if (p->n_threads == 1 || n_items == 1) {
        for (int64_t i = 0; i < n_items; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0);
    p->n_busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p);
    pthread_mutex_lock(&p->mu);
    while (p->n_busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
