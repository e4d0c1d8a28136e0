// A small persistent thread pool, an object: each context owns one, so any
// number of contexts run at once without sharing threads. The calling thread
// works too: a job runs fn(arg, i, n) for thread indices 0..n-1 and returns
// when all are done. Workers spin briefly before sleeping, because a decode
// step dispatches hundreds of short jobs per token. A NULL pool runs
// everything on the caller.
#ifndef INFER_BASE_POOL_H
#define INFER_BASE_POOL_H

typedef struct pool pool;
typedef void (*pool_fn)(void *arg, int ith, int nth);

// A pool of n threads including the caller (n = 1: no extra thread); NULL
// when out of memory. Fewer threads than asked when the system refuses some.
pool *pool_new(int n);
void pool_free(pool *p);
int pool_size(const pool *p); // 1 for NULL

// Runs fn on every thread of the pool (including the caller) and waits. One
// job at a time per pool: a pool belongs to one caller thread.
void pool_run(pool *p, pool_fn fn, void *arg);

// Splits [0, n) into one contiguous range per thread and runs fn(arg, i0, i1)
// on each; on the caller alone when n < 2 * min_per_thread (not worth a
// wake-up). Each index is handled the same way whatever the split.
typedef void (*pool_range_fn)(void *arg, int i0, int i1);
void pool_for(pool *p, int n, int min_per_thread, pool_range_fn fn, void *arg);

#endif
