#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256
#define SPIN 20000 // polls before a worker sleeps

static struct {
    int n;                        // threads including the caller
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint gen;              // bumped for every job
    atomic_int pending;           // workers still running the job
    atomic_int quit;
    pool_fn fn;
    void *arg;
    int started;
    unsigned start_gen;           // gen when the workers were made
} P = {.n = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void *worker(void *p) {
    int ith = (int)(size_t)p;
    // not atomic_load(&P.gen): a job may already have been posted
    unsigned seen = P.start_gen;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&P.gen, memory_order_acquire) == seen) {
            if (atomic_load(&P.quit)) return NULL;
            if (++spins > SPIN) {
                pthread_mutex_lock(&P.mu);
                while (atomic_load(&P.gen) == seen && !atomic_load(&P.quit)) pthread_cond_wait(&P.wake, &P.mu);
                pthread_mutex_unlock(&P.mu);
            }
        }
        if (atomic_load(&P.quit)) return NULL;
        seen = atomic_load(&P.gen);
        P.fn(P.arg, ith, P.n);
        atomic_fetch_sub_explicit(&P.pending, 1, memory_order_release);
    }
}

static void stop(void) {
    if (!P.started) return;
    pthread_mutex_lock(&P.mu);
    atomic_store(&P.quit, 1);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    for (int i = 1; i < P.n; i++) pthread_join(P.tid[i], NULL);
    atomic_store(&P.quit, 0);
    P.started = 0;
}

void pool_set_threads(int n) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (n == P.n && (P.started || n == 1)) return;
    stop();
    P.n = n;
    P.start_gen = atomic_load(&P.gen);
    for (int i = 1; i < n; i++)
        if (pthread_create(&P.tid[i], NULL, worker, (void *)(size_t)i) != 0) { P.n = i; break; }
    P.started = P.n > 1;
    static int registered;
    if (!registered) { atexit(stop); registered = 1; }
}

int pool_threads(void) { return P.n; }

void pool_run(pool_fn fn, void *arg) {
    if (P.n == 1) { fn(arg, 0, 1); return; }
    P.fn = fn;
    P.arg = arg;
    atomic_store(&P.pending, P.n - 1);
    pthread_mutex_lock(&P.mu);
    atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    fn(arg, 0, P.n);
    while (atomic_load_explicit(&P.pending, memory_order_acquire) > 0) {}
}

typedef struct { pool_range_fn fn; void *arg; int n; } for_job;

static void for_task(void *a, int ith, int nth) {
    const for_job *j = a;
    int per = (j->n + nth - 1) / nth, i0 = ith * per, i1 = i0 + per > j->n ? j->n : i0 + per;
    if (i0 < i1) j->fn(j->arg, i0, i1);
}

void pool_for(int n, int min_per_thread, pool_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (P.n == 1 || n < 2 * min_per_thread) { fn(arg, 0, n); return; }
    for_job j = {fn, arg, n};
    pool_run(for_task, &j);
}
