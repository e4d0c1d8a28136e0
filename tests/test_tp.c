// Tensor parallelism (models/shard.c, base/comm.c) on one host without a
// GPU: two processes, ranks 0 and 1 of a job, each with its share of every
// fixture family's heads, features (each expert's, in a mixture of experts)
// and vocabulary (or, the layer split, its
// half of the layers), must give the logits of
// the whole model at every position of a prompt in two passes and of decode
// steps (within the CPU backend's tolerance against the reference: the sums
// over the ranks round differently), and both ranks the same bits; greedy
// tokens identical. A world of one is the whole model bit for bit. Then what
// is refused or fails with a message rather than a hang: a layer split whose
// rank would read another's K/V cache, ranks out of range, a job whose other
// rank never comes, a rank that dies mid-run. A two-node run simulated: four
// ranks over TCP (check_two_hosts). Where a GPU is, the same with each rank's
// model on it (see check_gpu), and NCCL's calls.
#include "check.h"
#include "net.h"
#include "infer.h"
#include "base/comm.h"
#include "inference/context.h"
#include "compute/backend.h"
#include "compute/nccl.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { NP1 = 7, NP2 = 5, ND = 3, NT = NP1 + NP2 + ND };

static void fill(int32_t *ids, int n, int V, unsigned seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((seed = seed * 1103515245u + 12345u) >> 8) % V;
}

// The prompt in two passes (logits at every position), then ND decode steps
// of the greedy token: NT rows of logits into out.
static const char *g_backend = "cpu"; // (the GPU's checks: "cuda")
static int g_vocab;                   // the last family's vocabulary
static int g_cross;                   // ... and whether its layer split is refused

static int run(infer_model *m, int32_t *ids, float *out, int V) {
    infer_ctx *c = NULL;
    int ok = infer_ctx_new(m, 32, &c) == INFER_OK && infer_ctx_set_threads(c, 2) == INFER_OK &&
             infer_ctx_set_backend(c, g_backend) == INFER_OK;
    ok = ok && infer_eval(c, ids, NP1, out, 0) == INFER_OK;
    ok = ok && infer_eval(c, ids + NP1, NP2, out + (size_t)NP1 * V, 0) == INFER_OK;
    for (int i = NP1 + NP2; ok && i < NT; i++) {
        const float *prev = out + (size_t)(i - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++) best = prev[v] > prev[best] ? v : best;
        ids[i] = best;
        ok = infer_eval(c, ids + i, 1, out + (size_t)i * V, 1) == INFER_OK;
    }
    infer_ctx_free(c);
    return ok;
}

// Rank `rank` of a job of two: its logits against want; the count of
// failures (the child's exit status), its logits into got.
static int rank_run(const char *dir, const char *split, const char *id, int rank, const float *want, float *got, int V, const char *name) {
    infer_model *m = NULL;
    int32_t ids[NT];
    fill(ids, NT, V, 7);
    if (infer_model_load_split(dir, split, rank, 2, id, &m)) {
        fprintf(stderr, "FAIL %s (%s split) rank %d: %s\n", name, split, rank, infer_last_error());
        return 1;
    }
    int bad = 0;
    if (!run(m, ids, got, V)) {
        fprintf(stderr, "FAIL %s rank %d: %s\n", name, rank, infer_last_error());
        bad++;
    } else
        for (int r = 0; r < NT; r++) {
            double e = test_rel_err(got + (size_t)r * V, want + (size_t)r * V, (size_t)V);
            if (e > 1e-4) fprintf(stderr, "FAIL %s rank %d row %d: max error %.3g of the RMS from the whole model\n", name, rank, r, e), bad++;
        }
    infer_model_free(m);
    return bad;
}

static void check_family(const char *name, const char *dir) {
    infer_model *m;
    if (infer_model_load(dir, &m)) {
        CHECK(0, "%s: %s", name, infer_last_error());
        return;
    }
    int V = infer_model_n_vocab(m), m_layers = m->cfg.n_layer;
    int *kv_src = malloc(sizeof(int) * m_layers);
    for (int il = 0; il < m_layers; il++) kv_src[il] = m->cfg.layers[il].kv_source;
    g_vocab = V;
    float *want = malloc(sizeof(float) * NT * V), *got = malloc(sizeof(float) * NT * V);
    int32_t ids[NT], ids1[NT];
    fill(ids, NT, V, 7);
    memcpy(ids1, ids, sizeof ids);
    CHECK(run(m, ids, want, V), "%s: the whole model: %s", name, infer_last_error());
    infer_model_free(m);

    // a world of one: the whole model, bit for bit
    CHECK(infer_model_load_tp(dir, 0, 1, NULL, &m) == INFER_OK, "%s: world 1: %s", name, infer_last_error());
    if (m) {
        CHECK(run(m, ids1, got, V) && !memcmp(got, want, sizeof(float) * NT * V), "%s: world 1 differs from the whole model", name);
        infer_model_free(m);
    }

    // each split: refused where it cannot cut the model, else two ranks
    int L = m_layers, cross = 0; // (a layer of rank 1's run reading a K/V cache of rank 0's)
    for (int il = L / 2; il < L; il++) cross |= kv_src[il] < L / 2;
    g_cross = cross;
    // (the third: the layer split's passes in micro-batches of 2 rows, 3 and 2 steps' worth)
    const char *splits[] = {"row", "layer", "layer"};
    for (int si = 0; si < 3; si++) {
        const char *split = splits[si], *why = NULL;
        if (si >= 1 && cross) why = "on another rank";
        if (si == 2) setenv("INFER_PP_ROWS", "2", 1);
        else unsetenv("INFER_PP_ROWS");
        char id[64];
        comm_new_id(id, sizeof id);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0 && why) {
            infer_model *m1 = NULL;
            _exit(infer_model_load_split(dir, split, 1, 2, id, &m1) == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), why) ? 0 : 1);
        }
        if (pid == 0) {
            float *g1 = malloc(sizeof(float) * NT * V);
            int bad = rank_run(dir, split, id, 1, want, g1, V, name);
            // rank 1's bits for rank 0 to compare: through a file beside the job
            char path[128];
            snprintf(path, sizeof path, "/tmp/%s.rank1", id);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(g1, sizeof(float), (size_t)NT * V, f) != (size_t)NT * V) bad++;
            if (f) fclose(f);
            _exit(bad > 100 ? 100 : bad);
        }
        if (why) {
            m = NULL;
            CHECK(infer_model_load_split(dir, split, 0, 2, id, &m) == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), why),
                  "%s: %s split: %s", name, split, m ? "loaded" : infer_last_error());
            int status = 0;
            waitpid(pid, &status, 0);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s split: rank 1 not refused so", name, split);
            infer_model_free(m);
            continue;
        }
        int bad = rank_run(dir, split, id, 0, want, got, V, name);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(bad == 0, "%s: %s split%s, rank 0 of 2: %d rows off the whole model's logits", name, split, si == 2 ? " (micro-batches)" : "", bad);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s split, rank 1 of 2 failed (status %d)", name, split, status);
        char path[128];
        snprintf(path, sizeof path, "/tmp/%s.rank1", id);
        float *g1 = malloc(sizeof(float) * NT * V);
        FILE *f = fopen(path, "rb");
        int same = f && fread(g1, sizeof(float), (size_t)NT * V, f) == (size_t)NT * V && !memcmp(g1, got, sizeof(float) * NT * V);
        if (f) fclose(f);
        unlink(path);
        CHECK(same, "%s: %s split%s: ranks 0 and 1 hold different logits", name, split, si == 2 ? " (micro-batches)" : "");
        free(g1);
    }
    unsetenv("INFER_PP_ROWS");
    free(kv_src), free(want), free(got);
}

// The CPU's packed copies of the weights: none at load, made by the first
// context placed on the CPU (infer_ctx_prepare, or its first pass), once.
static void check_packs(const char *dir) {
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    if (infer_model_load(dir, &m)) {
        CHECK(0, "packs: %s", infer_last_error());
        return;
    }
    CHECK(!m->packed && m->n_packs == 0, "packs: made at load (%d)", m->n_packs);
    CHECK(infer_ctx_new(m, 16, &c) == INFER_OK && !m->packed, "packs: made by a context's creation");
    CHECK(c && infer_ctx_prepare(c) == INFER_OK && m->packed, "packs: not made by infer_ctx_prepare on the CPU");
    int n = m->n_packs;
    infer_ctx *c2 = NULL;
    CHECK(infer_ctx_new(m, 16, &c2) == INFER_OK && infer_ctx_prepare(c2) == INFER_OK && m->n_packs == n, "packs: made twice");
    infer_ctx_free(c2);
    infer_ctx_free(c);
    infer_model_free(m);
}

// What fails, and says so, rather than hanging.
static void check_errors(const char *dir) {
    infer_model *m = NULL;
    CHECK(infer_model_load_tp(dir, 2, 2, "x", &m) == INFER_ERR_ARG && !m, "rank 2 of 2 accepted");
    CHECK(infer_model_load_tp(dir, 0, 0, "x", &m) == INFER_ERR_ARG && !m, "world 0 accepted");
    CHECK(infer_model_load_tp(dir, 0, 2, "bad/id", &m) != INFER_OK && !m && strstr(infer_last_error(), "job id"),
          "a job id with '/': %s", infer_last_error());
    // the other rank never comes
    char id[64];
    comm_new_id(id, sizeof id);
    setenv("INFER_TP_TIMEOUT", "1", 1);
    CHECK(infer_model_load_tp(dir, 0, 2, id, &m) == INFER_ERR_IO && !m && strstr(infer_last_error(), "1 of 2 ranks joined"),
          "a job whose rank 1 never comes: %s", infer_last_error());
    unsetenv("INFER_TP_TIMEOUT");
    // the environment's job, with a bad number
    setenv("INFER_TP_WORLD", "two", 1);
    CHECK(infer_model_load(dir, &m) == INFER_ERR_ARG && !m && strstr(infer_last_error(), "INFER_TP_WORLD"),
          "INFER_TP_WORLD=two: %s", infer_last_error());
    unsetenv("INFER_TP_WORLD");
    // rank 1 loads, then dies before the first pass: rank 0's pass fails with a message
    comm_new_id(id, sizeof id);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        infer_model *m1 = NULL;
        if (infer_model_load_tp(dir, 1, 2, id, &m1)) _exit(1);
        _exit(0); // (dies with the job open)
    }
    int ok = infer_model_load_tp(dir, 0, 2, id, &m) == INFER_OK;
    CHECK(ok, "rank 0 beside a rank that dies: load: %s", infer_last_error());
    int status;
    waitpid(pid, &status, 0);
    if (ok) {
        infer_ctx *c = NULL;
        int V = infer_model_n_vocab(m);
        float *lg = malloc(sizeof(float) * V);
        int32_t t = 1;
        CHECK(infer_ctx_new(m, 8, &c) == INFER_OK, "ctx: %s", infer_last_error());
        infer_status st = c ? infer_eval(c, &t, 1, lg, 1) : INFER_OK;
        CHECK(st == INFER_ERR_IO && strstr(infer_last_error(), "has exited"), "a pass beside a dead rank: %s",
              st ? infer_last_error() : "succeeded");
        infer_ctx_free(c);
        free(lg);
    }
    infer_model_free(m);
}

// Where a GPU is, every family: two ranks sharing it (NCCL refuses two ranks on one GPU,
// so their sums go through the host's shared memory) against the whole model
// on it, and NCCL itself in a job of one rank on the GPU's stream
// (INFER_TEST_NCCL=1: it must be found). Each run is a process of its own,
// started by exec (CUDA does not survive a fork): `test_tp --gpu RANK WORLD
// ID DIR OUT SPLIT` writes its NT rows of logits to OUT.
static int gpu_rank(char **a) {
    int rank = atoi(a[0]), world = atoi(a[1]);
    g_backend = "cuda";
    infer_model *m = NULL;
    if (infer_model_load_split(a[3], a[5], rank, world, world > 1 ? a[2] : NULL, &m)) {
        fprintf(stderr, "FAIL rank %d: %s\n", rank, infer_last_error());
        return 1;
    }
    int V = infer_model_n_vocab(m);
    int32_t ids[NT];
    fill(ids, NT, V, 7);
    float *out = malloc(sizeof(float) * NT * V);
    int ok = run(m, ids, out, V);
    if (!ok) fprintf(stderr, "FAIL rank %d: %s\n", rank, infer_last_error());
    if (ok && rank == 0 && world > 1) printf("cuda, %d ranks, %s split: %s\n", world, a[5], infer_model_tp_transport(m));
    FILE *f = ok ? fopen(a[4], "wb") : NULL;
    ok = f && fwrite(out, sizeof(float), (size_t)NT * V, f) == (size_t)NT * V;
    if (f) fclose(f);
    free(out);
    infer_model_free(m);
    return !ok;
}

static pid_t spawn(char **args) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", args);
        _exit(127);
    }
    return pid;
}

static int done_ok(pid_t pid) {
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static float *read_rows(const char *path, size_t n) {
    float *x = malloc(sizeof(float) * n);
    FILE *f = fopen(path, "rb");
    int ok = f && fread(x, sizeof(float), n, f) == n;
    if (f) fclose(f);
    unlink(path);
    if (!ok) free(x);
    return ok ? x : NULL;
}

static void check_gpu(const char *name, const char *dir, int V, const char *split) {
    char id[64], w0[128], r0[128], r1[128];
    comm_new_id(id, sizeof id);
    snprintf(w0, sizeof w0, "/tmp/%s.whole", id), snprintf(r0, sizeof r0, "/tmp/%s.r0", id), snprintf(r1, sizeof r1, "/tmp/%s.r1", id);
    char *sp = (char *)split;
    char *whole[] = {"test_tp", "--gpu", "0", "1", id, (char *)dir, w0, sp, NULL};
    CHECK(done_ok(spawn(whole)), "%s on cuda: the whole model failed", name);
    char *a0[] = {"test_tp", "--gpu", "0", "2", id, (char *)dir, r0, sp, NULL}, *a1[] = {"test_tp", "--gpu", "1", "2", id, (char *)dir, r1, sp, NULL};
    pid_t p0 = spawn(a0), p1 = spawn(a1);
    int ok0 = done_ok(p0), ok1 = done_ok(p1);
    CHECK(ok0 && ok1, "%s on cuda, 2 ranks, %s split: rank 0 %s, rank 1 %s", name, split, ok0 ? "ok" : "failed", ok1 ? "ok" : "failed");
    float *want = read_rows(w0, (size_t)NT * V), *g0 = read_rows(r0, (size_t)NT * V), *g1 = read_rows(r1, (size_t)NT * V);
    if (want && g0 && g1) {
        double worst = 0;
        for (int r = 0; r < NT; r++) {
            double e = test_rel_err(g0 + (size_t)r * V, want + (size_t)r * V, (size_t)V);
            worst = e > worst ? e : worst;
        }
        CHECK(worst <= 1e-4, "%s on cuda, 2 ranks, %s split: max error %.3g of the RMS from one GPU's logits", name, split, worst);
        CHECK(!memcmp(g0, g1, sizeof(float) * NT * V), "%s on cuda, %s split: ranks 0 and 1 hold different logits", name, split);
        printf("%s on cuda, 2 ranks, %s split%s, against one: max error %.3g of the RMS\n", name, split,
               getenv("INFER_PP_ROWS") ? " (micro-batches)" : "", worst);
    }
    free(want), free(g0), free(g1);
}

static int nccl_unit(void) {
    comm *k = comm_open(NULL, 0, 1, 1);
    nccl *g = k ? nccl_open(k) : NULL;
    const char *e = getenv("INFER_TEST_NCCL");
    if (!g) {
        printf("nccl: %s\n", nccl_why());
        comm_close(k);
        return e && *e == '1';
    }
    printf("nccl %s\n", nccl_version());
    const backend_ops *cu = backend_cuda();
    cpu_exec ex = {0};
    backend b = {cu, &ex, NULL, NULL, 0};
    enum { N = 1000 };
    static float h[2 * N], back[2 * N];
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.5f - 3.0f;
    float *d = cu->alloc(&b, sizeof(float) * 2 * N);
    void *st = d ? backend_cuda_stream(&b) : NULL;
    int bad = !(d && st);
    if (!bad) {
        cu->upload(&b, d, h, N);
        bad |= nccl_allreduce(g, d, N, st) != 0;
        bad |= nccl_allgather(g, d, d + N, N, st) != 0;
        cu->download(&b, back, d, 2 * N);
        bad |= memcmp(back, h, sizeof(float) * N) || memcmp(back + N, h, sizeof(float) * N) || ex.oom;
        if (bad) fprintf(stderr, "FAIL nccl, one rank: %s\n", nccl_why());
        // a point-to-point hand-over (the layer split's): to itself, the first half into the second
        cu->scale(&b, d + N, N, 0.0f);
        int p2p = nccl_sendrecv(g, d, N, 0, d + N, N, 0, st) != 0;
        cu->download(&b, back, d, 2 * N);
        p2p |= memcmp(back + N, h, sizeof(float) * N) != 0 || ex.oom;
        if (p2p) fprintf(stderr, "FAIL nccl, send/recv to itself: %s\n", nccl_why());
        // captured in the backend's graph with a kernel after it, then replayed: x = 2 (sum x) each launch
        int cap = 0, captured = 0, launched = 0;
        if (cu->graph) {
            for (int pass = 0; pass < 3; pass++) { // (the second pass of a key is captured, the third launched)
                int gr = cu->graph(&b, GRAPH_BEGIN, 77);
                captured += gr == 0, launched += gr == 1;
                if (gr == 1) cu->graph(&b, GRAPH_LAUNCH, 0);
                else {
                    cap |= nccl_allreduce(g, d, N, backend_cuda_stream(&b)) != 0;
                    cu->scale(&b, d, N, 2.0f);
                    if (gr == 0) cu->graph(&b, GRAPH_END, 0), cap |= pass != 1;
                }
            }
            cu->download(&b, back, d, N);
            for (int i = 0; i < N; i++) cap |= back[i] != h[i] * 8.0f;
            cap |= ex.oom || captured != 1 || launched != 1;
            if (cap) fprintf(stderr, "FAIL nccl in a captured graph: %s (%g, want %g)\n", nccl_why(), back[1], h[1] * 8.0f);
            else printf("nccl: all-reduce captured in a graph and replayed\n");
        }
        bad |= p2p | cap;
        cu->release(&b, d);
    }
    if (cu->done) cu->done(&b);
    nccl_close(g);
    comm_close(k);
    return bad;
}

// The simulation of a two-node run: four ranks, "host" A's ranks 0 and 1 and
// "host" B's 2 and 3, each a process started as a launch across hosts starts
// one -- by the environment (INFER_TP_WORLD, INFER_TP_RANK, INFER_TP_ID,
// INFER_TP_SPLIT, and INFER_TP_ADDR: rank 0's address) and infer_model_load
// -- meeting over TCP on 127.0.0.1. Each split's logits against the whole
// model's (the row split within rounding, the layer split bit for bit), the
// four ranks' the same bits, and the same bits as four ranks' over shared
// memory.
static int env_rank(const char *dir, int rank, const char *out) {
    infer_model *m = NULL;
    if (infer_model_load(dir, &m)) {
        fprintf(stderr, "FAIL rank %d: %s\n", rank, infer_last_error());
        return 1;
    }
    int V = infer_model_n_vocab(m);
    int32_t ids[NT];
    fill(ids, NT, V, 7);
    float *lg = malloc(sizeof(float) * NT * V);
    int ok = infer_model_tp_world(m) == 4 && infer_model_tp_rank(m) == rank && run(m, ids, lg, V);
    if (!ok) fprintf(stderr, "FAIL rank %d of %d: %s\n", infer_model_tp_rank(m), infer_model_tp_world(m), infer_last_error());
    FILE *f = ok ? fopen(out, "wb") : NULL;
    ok = f && fwrite(lg, sizeof(float), (size_t)NT * V, f) == (size_t)NT * V;
    if (f) fclose(f);
    free(lg);
    infer_model_free(m);
    return !ok;
}

// A job of four ranks (addr NULL: over shared memory): rank 0's NT rows of
// logits, after checking that the others hold the same bits; NULL on failure.
static float *job_of_four(const char *name, const char *dir, const char *split, const char *addr, int V) {
    char id[64], path[4][128];
    comm_new_id(id, sizeof id);
    pid_t pid[4];
    fflush(NULL);
    for (int r = 0; r < 4; r++) {
        snprintf(path[r], sizeof path[r], "/tmp/%s.r%d", id, r);
        if ((pid[r] = fork()) == 0) {
            alarm(120); // (a hang: a failure, not a stopped test)
            char num[8];
            snprintf(num, sizeof num, "%d", r);
            setenv("INFER_TP_WORLD", "4", 1), setenv("INFER_TP_RANK", num, 1), setenv("INFER_TP_ID", id, 1);
            setenv("INFER_TP_SPLIT", split, 1), setenv("INFER_TP_TIMEOUT", "60", 1);
            if (addr) setenv("INFER_TP_ADDR", addr, 1);
            int bad = env_rank(dir, r, path[r]);
            fflush(NULL);
            _exit(bad);
        }
    }
    int ok = 1;
    for (int r = 0; r < 4; r++) ok &= done_ok(pid[r]);
    const char *how = addr ? "tcp" : "shared memory";
    CHECK(ok, "%s, 4 ranks over %s, %s split: a rank failed", name, how, split);
    float *g[4];
    for (int r = 0; r < 4; r++) g[r] = read_rows(path[r], (size_t)NT * V);
    for (int r = 1; r < 4 && ok; r++)
        CHECK(g[0] && g[r] && !memcmp(g[0], g[r], sizeof(float) * NT * V), "%s, 4 ranks over %s, %s split: ranks 0 and %d differ", name, how,
              split, r);
    for (int r = 1; r < 4; r++) free(g[r]);
    if (!ok) free(g[0]);
    return ok ? g[0] : NULL;
}

static void check_two_hosts(const char *name, const char *dir) {
    infer_model *m;
    if (infer_model_load(dir, &m)) {
        CHECK(0, "%s: %s", name, infer_last_error());
        return;
    }
    int V = infer_model_n_vocab(m);
    float *want = malloc(sizeof(float) * NT * V);
    int32_t ids[NT];
    fill(ids, NT, V, 7);
    CHECK(run(m, ids, want, V), "%s: the whole model: %s", name, infer_last_error());
    infer_model_free(m);
    const char *splits[] = {"row", "layer"};
    for (int si = 0; si < 2; si++) {
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
        float *tcp = job_of_four(name, dir, splits[si], addr, V), *shm = job_of_four(name, dir, splits[si], NULL, V);
        if (tcp) {
            double worst = 0;
            for (int r = 0; r < NT; r++) {
                double e = test_rel_err(tcp + (size_t)r * V, want + (size_t)r * V, (size_t)V);
                worst = e > worst ? e : worst;
            }
            if (si == 0) CHECK(worst <= 1e-4, "%s, 2 hosts x 2 ranks over tcp, row split: max error %.3g of the RMS", name, worst);
            else CHECK(!memcmp(tcp, want, sizeof(float) * NT * V), "%s, 2 hosts x 2 ranks over tcp, layer split: not the whole model's bits", name);
            printf("%s, 2 hosts x 2 ranks over tcp (%s), %s split: max error %.3g of the RMS from one process\n", name, addr, splits[si], worst);
        }
        CHECK(tcp && shm && !memcmp(tcp, shm, sizeof(float) * NT * V), "%s, 4 ranks, %s split: tcp's logits are not shared memory's bits", name,
              splits[si]);
        free(tcp), free(shm);
    }
    free(want);
}

int main(int argc, char **argv) {
    if (argc == 8 && !strcmp(argv[1], "--gpu")) return gpu_rank(argv + 2);
    if (argc == 2 && !strcmp(argv[1], "--gpu-probe")) return backend_cuda() ? 0 : 1;
    if (argc == 2 && !strcmp(argv[1], "--nccl")) return nccl_unit();
    // (this process never starts CUDA: its children fork)
    char *probe[] = {"test_tp", "--gpu-probe", NULL};
    int gpu = done_ok(spawn(probe));
    char **dirs;
    int n = test_fixture_dirs(&dirs, argc > 1 ? argv[1] : NULL);
    CHECK(n > 0, "no fixture families under %s", FIXTURES_DIR);
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(dirs[i], '/') + 1;
        check_family(name, dirs[i]);
        if (!strcmp(name, "llama")) check_errors(dirs[i]), check_packs(dirs[i]);
        if (!strcmp(name, "llama") || !strcmp(name, "gemma3")) check_two_hosts(name, dirs[i]);
        if (gpu) {
            check_gpu(name, dirs[i], g_vocab, "row");
            if (!g_cross) {
                check_gpu(name, dirs[i], g_vocab, "layer");
                setenv("INFER_PP_ROWS", "2", 1); // (micro-batches: the device's rows of each)
                check_gpu(name, dirs[i], g_vocab, "layer");
                unsetenv("INFER_PP_ROWS");
            }
        }
        free(dirs[i]);
    }
    free(dirs);
    char *nc[] = {"test_tp", "--nccl", NULL};
    if (gpu) CHECK(done_ok(spawn(nc)), "NCCL on the GPU (INFER_TEST_NCCL=1: the library must be there)");
    return check_summary("test_tp");
}
