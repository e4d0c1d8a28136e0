// --numa (base/numa.h): a pool's worker threads pinned as each strategy says,
// on a made-up machine of two nodes (a sysfs tree in a scratch folder: node0
// the first CPU this process may use, node1 the second, node2 memory alone,
// node3 a malformed list), and infer_numa_init's names and errors.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "infer.h"
#include "base/numa.h"
#include "base/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N = 4 };
static cpu_set_t g_seen[N];

static void record(void *arg, int ith, int nth) {
    (void)arg, (void)nth;
    if (ith < N) sched_getaffinity(0, sizeof g_seen[ith], &g_seen[ith]);
}

// each worker's affinity (threads 1..N-1) equals want[ith] (the caller, thread 0, is not pinned)
static int workers_pinned(const cpu_set_t *want, const char *what) {
    pool *p = pool_new(N);
    CHECK(p && pool_size(p) == N, "%s: a pool of %d threads", what, N);
    if (!p) return 0;
    memset(g_seen, 0, sizeof g_seen);
    pool_run(p, record, NULL);
    int ok = 1;
    for (int i = 1; i < N; i++) {
        int same = CPU_EQUAL(&g_seen[i], &want[i]);
        CHECK(same, "%s: thread %d's CPUs (%d of them) are not the strategy's (%d)", what, i, CPU_COUNT(&g_seen[i]), CPU_COUNT(&want[i]));
        ok &= same;
    }
    pool_free(p);
    return ok;
}

static void put(const char *dir, int node, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/node%d", dir, node);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/node%d/cpulist", dir, node);
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

int main(void) {
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    int cpus[2] = {-1, -1}, k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &allowed)) cpus[k++] = c;

    // the public names
    CHECK(infer_numa_init("bogus") == INFER_ERR_ARG && strstr(infer_last_error(), "\"bogus\""),
          "infer_numa_init(\"bogus\"): an argument error naming it (%s)", infer_last_error());
    CHECK(infer_numa_init(NULL) == INFER_ERR_ARG, "infer_numa_init(NULL): an argument error");
    CHECK(infer_numa_init("isolate") == INFER_OK && numa_strategy() == NUMA_ISOLATE, "infer_numa_init(\"isolate\")");
    CHECK(infer_numa_init("none") == INFER_OK && numa_strategy() == NUMA_NONE, "infer_numa_init(\"none\")");

    char dir[] = "/tmp/infer-numa-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a scratch folder");
    char l0[32], l1[32];
    snprintf(l0, sizeof l0, "%d\n", cpus[0]);
    snprintf(l1, sizeof l1, "%d\n", cpus[1] >= 0 ? cpus[1] : cpus[0]);
    put(dir, 0, l0), put(dir, 1, l1), put(dir, 2, "\n"), put(dir, 3, "3-1,x\n");
    cpu_set_t node[2], want[N];
    CPU_ZERO(&node[0]);
    CPU_ZERO(&node[1]);
    CPU_SET(cpus[0], &node[0]);
    CPU_SET(cpus[1] >= 0 ? cpus[1] : cpus[0], &node[1]);

    // distribute: thread i on node i % 2 (nodes 2 and 3 have no CPUs of ours: not counted)
    CHECK(numa_set_from(NUMA_DISTRIBUTE, dir) == 0 && numa_node_count() == 2, "distribute: %d nodes with CPUs (want 2)", numa_node_count());
    for (int i = 0; i < N; i++) want[i] = node[i % 2];
    workers_pinned(want, "distribute");
    if (cpus[1] < 0) printf("numa: one CPU allowed: the two made-up nodes share it\n");

    // isolate: every thread on the node of the CPU numa_set ran on
    pthread_setaffinity_np(pthread_self(), sizeof node[1], &node[1]); // (the setter on node 1's CPU)
    CHECK(numa_set_from(NUMA_ISOLATE, dir) == 0, "isolate");
    pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
    for (int i = 0; i < N; i++) want[i] = node[1];
    workers_pinned(want, "isolate (set from node 1)");

    // numactl: the CPUs the process was given; none: where the caller's threads may run
    CHECK(numa_set_from(NUMA_NUMACTL, dir) == 0, "numactl");
    for (int i = 0; i < N; i++) want[i] = allowed;
    workers_pinned(want, "numactl");
    CHECK(numa_set_from(NUMA_NONE, dir) == 0, "none");
    workers_pinned(want, "none");

    // no sysfs tree: one node of every allowed CPU
    CHECK(numa_set_from(NUMA_DISTRIBUTE, "/nonexistent-numa-dir") == 0 && numa_node_count() == 1, "no node files: one node");
    workers_pinned(want, "distribute over no node files");
    numa_set(NUMA_NONE);

    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/node%d/cpulist", dir, i), unlink(path);
        snprintf(path, sizeof path, "%s/node%d", dir, i), rmdir(path);
    }
    rmdir(dir);
    return check_summary("numa");
}
