// Issue 41: does the int8 panels' product keep its speed when every core runs
// it at once? P processes, each pinned to its own CPU, each decodes panels of
// NP x 32 rows of a q4_K matrix (ROWS x N) and runs them against T tokens
// (pn_task's loop: 2 super-blocks of a set's panels at a time against every
// 16-token block), alone and all at once; prints each count's GMAC/s per
// process. If one process's figure falls as the others start, a shared part
// (the L3, the memory) limits the prompt's products, not the tiles; NP (rows
// a set) is the panels' reuse of the tokens' tiles (32 NP int8 MACs a byte).
// Links the engine's library:
//   gcc -O2 -march=native -Isrc -static -o /tmp/panel_scale bench/experiments/panel_scale.c build/libinfer_internal.a -lm -lpthread
//   /tmp/panel_scale N T NP ROWS "1 2 4 8 16"
#define _GNU_SOURCE
#include "base/cpu.h"
#include "tensor/dtype.h"
#include "tensor/panel.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

// one process's figure: the best of 3 runs over the whole matrix
static double run(int n, int T, int np, int rows) {
    const size_t rs = dtype_row_size(DT_Q4_K, n), pb = (panel_bytes(n) + 63) & ~(size_t)63;
    const int blocks = (T + 15) / 16, nk = n / 256;
    unsigned char *w = malloc(rs * rows), *p = aligned_alloc(64, pb * np);
    unsigned char *xb = aligned_alloc(64, (panel_act_bytes(T, n) + 63) & ~(size_t)63);
    float *f = malloc(sizeof(float) * (size_t)T * n), *acc = aligned_alloc(64, sizeof(float) * 512 * np * blocks);
    float *y = aligned_alloc(64, sizeof(float) * (size_t)T * rows);
    srand(1);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) f[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
        dtype_get(DT_Q4_K)->from_float(f, w + rs * r, n);
    }
    for (size_t i = 0; i < (size_t)T * n; i++) f[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
    panel_act(f, n, NULL, T, n, xb, 0, blocks);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = now();
        for (int r0 = 0; r0 + 32 * np <= rows; r0 += 32 * np) {
            for (int q = 0; q < np; q++) panel_decode(DT_Q4_K, w + rs * (size_t)(r0 + 32 * q), rs, 32, n, p + pb * q);
            memset(acc, 0, sizeof(float) * 512 * np * blocks);
            for (int k0 = 0; k0 < nk; k0 += 2)
                for (int q = 0; q < np; q++)
                    for (int b = 0; b < blocks; b++)
                        panel_run_k(p + pb * q, n, xb, T, b, k0, k0 + 2 < nk ? k0 + 2 : nk, acc + 512 * ((size_t)q * blocks + b));
            for (int q = 0; q < np; q++)
                for (int b = 0; b < blocks; b++) panel_store(acc + 512 * ((size_t)q * blocks + b), T, b, NULL, y + r0 + 32 * q, rows, 32, NULL);
        }
        const double t = now() - t0;
        if (t < best) best = t;
    }
    return (double)(rows / (32 * np) * 32 * np) * n * (double)T / best / 1e9;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 4096, T = argc > 2 ? atoi(argv[2]) : 512, np = argc > 3 ? atoi(argv[3]) : 4;
    const int rows = argc > 4 ? atoi(argv[4]) : 1024;
    const char *counts = argc > 5 ? argv[5] : "1 2";
    if (!cpu_has_amx_int8()) {
        fprintf(stderr, "panel_scale: this CPU has no AMX-INT8 (or the kernel does not grant the tile state)\n");
        return 1;
    }
    double *res = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    for (const char *c = counts; *c;) {
        char *e;
        const int P = (int)strtol(c, &e, 10);
        if (e == c) break;
        c = e;
        for (int i = 0; i < P; i++)
            if (fork() == 0) {
                cpu_set_t s;
                CPU_ZERO(&s);
                CPU_SET(i, &s);
                sched_setaffinity(0, sizeof s, &s);
                cpu_has_amx_int8(); // (this process's tile state)
                res[i] = run(n, T, np, rows);
                _exit(0);
            }
        while (wait(NULL) > 0) {}
        double sum = 0, lo = 1e30;
        for (int i = 0; i < P; i++) sum += res[i], lo = res[i] < lo ? res[i] : lo;
        printf("n=%d T=%d np=%d rows=%d, %2d processes: %.0f GMAC/s each (mean; slowest %.0f), %.0f in all\n", n, T, np, rows, P, sum / P, lo, sum);
        fflush(stdout);
    }
    return 0;
}
