// The cost of the row split's sums: microseconds per all-reduce of one
// decode token's residual row (the hidden sizes of Gemma 3 270M .. 27B and
// Llama 3 70B), W ranks, each a process. Through the host communicator
// (shared memory, base/comm.c) always; with --gpu also NCCL on the CUDA
// backend's stream (each rank its own GPU where there is one per rank), both
// launched back to back and in a captured graph of 100 (as a decode graph
// would hold them). A row-split decode step makes 2 L of them: L layers.
//   bench_allreduce [--world 2] [--gpu] [--iters 2000]
// (the launcher execs itself once per rank: CUDA does not survive a fork)
#include "base/comm.h"
#include "compute/backend.h"
#include "compute/nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const struct { const char *shape; int n; } g_rows[] = {
    {"270m", 640}, {"1b", 1152}, {"4b", 2560}, {"12b", 3840}, {"27b", 5376}, {"70b", 8192},
};
enum { N_ROWS = sizeof g_rows / sizeof g_rows[0], PER_GRAPH = 100 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int rank_main(int rank, int world, const char *id, int gpu, int iters) {
    comm *k = comm_open(id, rank, world, 60);
    if (!k) {
        fprintf(stderr, "rank %d: %s\n", rank, comm_last_error());
        return 1;
    }
    float *x = malloc(sizeof(float) * 8192);
    for (int i = 0; i < 8192; i++) x[i] = 1e-3f * (float)(i % 97);
    double host_us[N_ROWS], gpu_us[N_ROWS], graph_us[N_ROWS];
    for (int s = 0; s < N_ROWS; s++) {
        comm_barrier(k);
        double t0 = now();
        for (int i = 0; i < iters; i++)
            if (comm_allreduce(k, x, (size_t)g_rows[s].n)) {
                fprintf(stderr, "rank %d: %s\n", rank, comm_error(k));
                return 1;
            }
        host_us[s] = (now() - t0) / iters * 1e6;
        gpu_us[s] = graph_us[s] = -1;
    }
    const char *how = "no GPU asked for";
    if (gpu) {
        const backend_ops *cu = backend_cuda();
        cpu_exec ex = {0};
        backend b = {cu, &ex, NULL, NULL, 0};
        int n_gpu = cu ? backend_gpu_count() : 0;
        b.gpu = n_gpu >= world ? rank : 0;
        float *d = cu ? cu->alloc(&b, sizeof(float) * 8192) : NULL;
        void *st = d ? backend_cuda_stream(&b) : NULL;
        nccl *g = st ? nccl_open(k) : NULL;
        how = !cu ? "no CUDA" : !st ? "no GPU memory" : !g ? nccl_why() : nccl_version();
        if (g) {
            cu->upload(&b, d, x, 8192);
            for (int s = 0; s < N_ROWS; s++) {
                size_t n = (size_t)g_rows[s].n;
                for (int i = 0; i < 20; i++) nccl_allreduce(g, d, n, st); // (warm)
                cu->download(&b, x, d, 1);
                comm_barrier(k);
                double t0 = now();
                int bad = 0;
                for (int i = 0; i < iters; i++) bad |= nccl_allreduce(g, d, n, st);
                cu->download(&b, x, d, 1); // (waits for the stream)
                gpu_us[s] = bad ? -1 : (now() - t0) / iters * 1e6;
                // captured: PER_GRAPH of them in one graph, replayed (its second pass of a key is captured)
                int reps = iters / PER_GRAPH > 0 ? iters / PER_GRAPH : 1, ok = cu->graph != NULL;
                for (int pass = 0; pass < 2 && ok; pass++) {
                    int gr = cu->graph(&b, GRAPH_BEGIN, 1000 + (uint64_t)s);
                    for (int i = 0; i < PER_GRAPH && gr != 1; i++) nccl_allreduce(g, d, n, st);
                    if (gr == 0) cu->graph(&b, GRAPH_END, 0);
                    ok = pass == 0 || gr == 0;
                }
                cu->download(&b, x, d, 1);
                comm_barrier(k);
                t0 = now();
                for (int r = 0; r < reps && ok; r++) {
                    cu->graph(&b, GRAPH_BEGIN, 1000 + (uint64_t)s);
                    cu->graph(&b, GRAPH_LAUNCH, 0);
                }
                cu->download(&b, x, d, 1);
                graph_us[s] = ok && !ex.oom ? (now() - t0) / (reps * PER_GRAPH) * 1e6 : -1;
            }
            nccl_close(g);
        }
        if (d) cu->release(&b, d);
        if (cu && cu->done) cu->done(&b);
    }
    if (rank == 0) {
        printf("%d ranks; NCCL: %s\n", world, how);
        printf("| shape | floats | shared memory, us | NCCL, us | NCCL in a graph, us |\n| --- | ---: | ---: | ---: | ---: |\n");
        for (int s = 0; s < N_ROWS; s++) {
            printf("| %s | %d | %.2f |", g_rows[s].shape, g_rows[s].n, host_us[s]);
            if (gpu_us[s] >= 0) printf(" %.2f |", gpu_us[s]);
            else printf(" - |");
            if (graph_us[s] >= 0) printf(" %.2f |\n", graph_us[s]);
            else printf(" - |\n");
        }
    }
    comm_close(k);
    free(x);
    return 0;
}

int main(int argc, char **argv) {
    int world = 2, gpu = 0, iters = 2000, rank = -1;
    const char *id = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--world") && i + 1 < argc) world = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gpu")) gpu = 1;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rank") && i + 2 < argc) rank = atoi(argv[++i]), id = argv[++i];
        else {
            fprintf(stderr, "usage: bench_allreduce [--world N] [--gpu] [--iters N]\n");
            return 2;
        }
    }
    if (world < 1 || world > COMM_MAX_RANKS || iters < 1) {
        fprintf(stderr, "bench_allreduce: --world 1..%d, --iters >= 1\n", COMM_MAX_RANKS);
        return 2;
    }
    if (rank >= 0) return rank_main(rank, world, id, gpu, iters);
    char job[96], w[16], it[16], r[16];
    comm_new_id(job, sizeof job);
    snprintf(w, sizeof w, "%d", world), snprintf(it, sizeof it, "%d", iters);
    pid_t pids[COMM_MAX_RANKS];
    for (int q = 0; q < world; q++) {
        snprintf(r, sizeof r, "%d", q);
        char *args[] = {argv[0], "--world", w, "--iters", it, "--rank", r, job, gpu ? "--gpu" : NULL, NULL};
        fflush(NULL);
        if ((pids[q] = fork()) == 0) {
            execv("/proc/self/exe", args);
            _exit(127);
        }
    }
    int bad = 0;
    for (int q = 0; q < world; q++) {
        int st = 0;
        waitpid(pids[q], &st, 0);
        bad |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    return bad;
}
