// NUMA placement of pool threads (numa.h).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/numa.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_NODES = 64 };

static int g_strategy = NUMA_NONE, g_nodes = 1, g_home; // (g_home: isolate's node)
static cpu_set_t g_node[MAX_NODES], g_allowed;

// "0-3,8,10-11" into set (CPUs beyond CPU_SETSIZE ignored); 0, or -1 when malformed
static int parse_cpulist(const char *s, cpu_set_t *set) {
    CPU_ZERO(set);
    while (*s && *s != '\n') {
        char *e;
        long a = strtol(s, &e, 10), b = a;
        if (e == s || a < 0) return -1;
        s = e;
        if (*s == '-') {
            b = strtol(s + 1, &e, 10);
            if (e == s + 1 || b < a) return -1;
            s = e;
        }
        for (long c = a; c <= b && c < CPU_SETSIZE; c++) CPU_SET((int)c, set);
        if (*s == ',') s++;
        else if (*s && *s != '\n') return -1;
    }
    return 0;
}

int numa_set(int strategy) { return numa_set_from(strategy, "/sys/devices/system/node"); }

int numa_set_from(int strategy, const char *dir) {
    if (sched_getaffinity(0, sizeof g_allowed, &g_allowed)) return -1;
    int n = 0;
    g_home = 0;
    const int cpu = sched_getcpu();
    for (int node = 0; node < 1024 && n < MAX_NODES; node++) {
        char path[4096], line[4096];
        snprintf(path, sizeof path, "%s/node%d/cpulist", dir, node);
        FILE *f = fopen(path, "r");
        if (!f) {
            if (node > 0 && n > 0) break; // (nodes are numbered from 0, without gaps on the machines we know)
            continue;
        }
        int ok = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        cpu_set_t s;
        if (!ok || parse_cpulist(line, &s)) continue;
        CPU_AND(&s, &s, &g_allowed);
        if (!CPU_COUNT(&s)) continue; // (a node of memory alone, or none of ours)
        if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &s)) g_home = n;
        g_node[n++] = s;
        if (node == 1023) break;
    }
    if (!n) g_node[0] = g_allowed, n = 1; // (no /sys: one node of the allowed CPUs)
    g_nodes = n, g_strategy = strategy;
    return 0;
}

int numa_strategy(void) { return g_strategy; }
int numa_node_count(void) { return g_nodes; }

int numa_pin(int ith) {
    const cpu_set_t *s;
    switch (g_strategy) {
    case NUMA_DISTRIBUTE: s = &g_node[(ith < 0 ? 0 : ith) % g_nodes]; break;
    case NUMA_ISOLATE: s = &g_node[g_home]; break;
    case NUMA_NUMACTL: s = &g_allowed; break;
    default: return 0;
    }
    return pthread_setaffinity_np(pthread_self(), sizeof *s, s) ? -1 : 0;
}
