#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MAX_THREADS 256
#define SPIN 20000 // polls before a worker sleeps

struct pool {
    int n;                        // threads including the caller
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint gen;              // bumped for every job
    atomic_int pending;           // workers still running the job
    atomic_int quit;
    pool_fn fn;                   // the job: written before gen is bumped
    void *arg;
};

typedef struct {
    pool *p;
    int ith;
} worker_arg;

static void *worker(void *a) {
    worker_arg wa = *(worker_arg *)a;
    free(a);
    pool *p = wa.p;
    unsigned seen = 0; // the pool starts at gen 0, before any job
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen) {
            if (atomic_load(&p->quit)) return NULL;
            if (++spins > SPIN) {
                pthread_mutex_lock(&p->mu);
                while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->wake, &p->mu);
                pthread_mutex_unlock(&p->mu);
            }
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        p->fn(p->arg, wa.ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

pool *pool_new(int n) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
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
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {}
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
