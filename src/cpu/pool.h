/* pool.h - a small fixed pool of worker threads that split one loop between them.
 *
 * pl_pool_run(p, n, fn, ctx) calls fn(ctx, i, thread) for every i in [0, n) across the
 * pool's threads (the caller's thread included) and returns when all calls are done. Each
 * thread starts on a contiguous range of the items, its own, and then takes what is left
 * of the others' ranges, so uneven items (or a thread the machine delays) balance out; the
 * order in which items run is not fixed.
 * thread (0 for the caller, 1 .. pl_pool_threads - 1 for the workers) says which thread runs
 * the call: no two calls running at once have the same one, so it can pick per-thread
 * scratch memory. */
#ifndef PL_CPU_POOL_H
#define PL_CPU_POOL_H

#include <stdint.h>

#include "../base/status.h"

typedef struct pl_pool pl_pool;
typedef void (*pl_pool_fn)(void *ctx, int64_t item, int thread);

/* n_threads counts the caller: 1 starts no thread at all. Threads that cannot be started
 * (none ever can on wasm32, base/thread.h) are left out: pl_pool_threads says how many run. */
pl_status pl_pool_new(int n_threads, pl_pool **out);
void pl_pool_free(pl_pool *p);
int pl_pool_threads(const pl_pool *p);
void pl_pool_run(pl_pool *p, int64_t n_items, pl_pool_fn fn, void *ctx);

#endif
