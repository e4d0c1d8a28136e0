// A small persistent thread pool. The calling thread works too: a job of
// n tasks runs fn(arg, i, n_threads) for thread indices 0..n_threads-1 and
// returns when all are done. Workers spin briefly before sleeping, because a
// decode step dispatches hundreds of short jobs per token.
#ifndef INFER_BASE_POOL_H
#define INFER_BASE_POOL_H

typedef void (*pool_fn)(void *arg, int ith, int nth);

// Sets the number of threads (1 = run on the caller only). Not thread-safe
// against a running job; call between jobs.
void pool_set_threads(int n);
int pool_threads(void);
// Runs fn on every thread of the pool (including the caller) and waits.
void pool_run(pool_fn fn, void *arg);

// Splits [0, n) into one contiguous range per thread and runs fn(arg, i0, i1)
// on each; on the caller alone when n < 2 * min_per_thread (not worth a
// wake-up). Each index is handled the same way whatever the split.
typedef void (*pool_range_fn)(void *arg, int i0, int i1);
void pool_for(int n, int min_per_thread, pool_range_fn fn, void *arg);

#endif
