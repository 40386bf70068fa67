/* thread.h - the library's one seam to threads: mutexes, condition variables and worker
 * threads, POSIX threads natively.
 *
 * On wasm32-wasi (PL_NO_THREADS: the browser build, whose wasi-libc has no pthreads) the
 * locks do nothing, since only one thread exists, and pl_thread_start always fails, so every
 * caller takes the path it already has for "no thread to be had": the work runs on the
 * calling thread (the CPU pool then has 1 thread and pl_pool_threads says so; quantize and
 * synth convert their shares one after the other). pl_cond_wait is never reached there:
 * only a thread that was started waits, or waits for one. */
#ifndef PL_BASE_THREAD_H
#define PL_BASE_THREAD_H

#if defined(__wasi__) && !defined(_REENTRANT)
#define PL_NO_THREADS 1
#endif

#ifndef PL_NO_THREADS
#include <pthread.h>
#include <time.h>

typedef pthread_mutex_t pl_mutex;
typedef pthread_cond_t pl_cond;
typedef pthread_t pl_thread;

static inline void pl_mutex_init(pl_mutex *m) {
    pthread_mutex_init(m, NULL);
}
static inline void pl_mutex_destroy(pl_mutex *m) {
    pthread_mutex_destroy(m);
}
static inline void pl_mutex_lock(pl_mutex *m) {
    pthread_mutex_lock(m);
}
static inline void pl_mutex_unlock(pl_mutex *m) {
    pthread_mutex_unlock(m);
}
static inline void pl_cond_init(pl_cond *c) {
    pthread_cond_init(c, NULL);
}
static inline void pl_cond_destroy(pl_cond *c) {
    pthread_cond_destroy(c);
}
static inline void pl_cond_wait(pl_cond *c, pl_mutex *m) {
    pthread_cond_wait(c, m);
}
static inline void pl_cond_signal(pl_cond *c) {
    pthread_cond_signal(c);
}
static inline void pl_cond_broadcast(pl_cond *c) {
    pthread_cond_broadcast(c);
}
/* Wait at most until `until` (CLOCK_REALTIME): non-zero when the time came first. */
static inline int pl_cond_timedwait(pl_cond *c, pl_mutex *m, const struct timespec *until) {
    return pthread_cond_timedwait(c, m, until);
}
/* 0 when fn(arg) runs on a new thread, non-zero when no thread could be started. */
static inline int pl_thread_start(pl_thread *t, void *(*fn)(void *), void *arg) {
    return pthread_create(t, NULL, fn, arg);
}
static inline void pl_thread_join(pl_thread t) {
    pthread_join(t, NULL);
}

#else /* one thread: nothing to lock, nothing to start */
#include <stdlib.h>
#include <time.h>

typedef struct {
    char unused;
} pl_mutex, pl_cond;
typedef int pl_thread;

static inline void pl_mutex_init(pl_mutex *m) {
    (void)m;
}
static inline void pl_mutex_destroy(pl_mutex *m) {
    (void)m;
}
static inline void pl_mutex_lock(pl_mutex *m) {
    (void)m;
}
static inline void pl_mutex_unlock(pl_mutex *m) {
    (void)m;
}
static inline void pl_cond_init(pl_cond *c) {
    (void)c;
}
static inline void pl_cond_destroy(pl_cond *c) {
    (void)c;
}
static inline void pl_cond_wait(pl_cond *c, pl_mutex *m) {
    (void)c, (void)m;
    abort(); /* would wait forever: no other thread exists to signal it */
}
static inline void pl_cond_signal(pl_cond *c) {
    (void)c;
}
static inline void pl_cond_broadcast(pl_cond *c) {
    (void)c;
}
static inline int pl_cond_timedwait(pl_cond *c, pl_mutex *m, const struct timespec *until) {
    (void)c, (void)m, (void)until;
    return 1; /* no other thread to signal it: the time has come */
}
static inline int pl_thread_start(pl_thread *t, void *(*fn)(void *), void *arg) {
    (void)t, (void)fn, (void)arg;
    return -1;
}
static inline void pl_thread_join(pl_thread t) {
    (void)t;
}
#endif

#endif
