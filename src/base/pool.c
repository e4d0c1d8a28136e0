#include "base/pool.h"
#include "base/numa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 256
#define SPIN 20000 // polls before a worker sleeps

// A worker's mark of the last job it finished, on a cache line of its own:
// the caller reads them all rather than the workers counting down one shared
// counter (sixteen threads' read-modify-writes of one line queue up).
typedef struct {
    _Alignas(64) atomic_uint done;
} done_mark;

struct pool {
    int n;                        // threads including the caller
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t wake;
    _Alignas(64) atomic_uint gen; // bumped for every job
    atomic_int quit;
    atomic_int sleepers;          // workers waiting on wake (the caller signals only when some are)
    pool_fn fn;                   // the job: written before gen is bumped
    void *arg;
    done_mark mark[MAX_THREADS];
};

typedef struct {
    pool *p;
    int ith;
} worker_arg;

static void *worker(void *a) {
    worker_arg wa = *(worker_arg *)a;
    free(a);
    pool *p = wa.p;
    numa_pin(wa.ith); // (numa.h: nothing unless a strategy was set)
    unsigned seen = 0; // the pool starts at gen 0, before any job
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen) {
            if (atomic_load(&p->quit)) return NULL;
            if (++spins > SPIN) {
                // (sleepers is raised before gen is read again: a caller that bumps gen after that read sees it)
                pthread_mutex_lock(&p->mu);
                atomic_fetch_add(&p->sleepers, 1);
                while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->wake, &p->mu);
                atomic_fetch_sub(&p->sleepers, 1);
                pthread_mutex_unlock(&p->mu);
            }
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        p->fn(p->arg, wa.ith, p->n);
        atomic_store_explicit(&p->mark[wa.ith].done, seen, memory_order_release);
    }
}

pool *pool_new(int n) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    size_t bytes = (sizeof(pool) + 63) & ~(size_t)63; // (its done marks want 64-byte lines)
    pool *p = aligned_alloc(64, bytes);
    if (!p) return NULL;
    memset(p, 0, bytes);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->n = 1;
    for (int i = 1; i < n; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) break;
        *a = (worker_arg){p, i};
        if (pthread_create(&p->tid[i], NULL, worker, a) != 0) {
            free(a);
            break;
        }
        p->n = i + 1;
    }
    return p;
}

void pool_free(pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int pool_size(const pool *p) { return p ? p->n : 1; }

void pool_run(pool *p, pool_fn fn, void *arg) {
    if (!p || p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    unsigned g = atomic_fetch_add(&p->gen, 1) + 1;
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n);
    for (int i = 1; i < p->n; i++)
        while (atomic_load_explicit(&p->mark[i].done, memory_order_acquire) != g) {}
}

typedef struct {
    pool_range_fn fn;
    void *arg;
    int n;
} for_job;

static void for_task(void *a, int ith, int nth) {
    const for_job *j = a;
    int per = (j->n + nth - 1) / nth, i0 = ith * per, i1 = i0 + per > j->n ? j->n : i0 + per;
    if (i0 < i1) j->fn(j->arg, i0, i1);
}

void pool_for(pool *p, int n, int min_per_thread, pool_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (pool_size(p) == 1 || n < 2 * min_per_thread) {
        fn(arg, 0, n);
        return;
    }
    for_job j = {fn, arg, n};
    pool_run(p, for_task, &j);
}
