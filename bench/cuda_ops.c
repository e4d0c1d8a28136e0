// Per-kernel times of the CUDA device layer (`bench/device ops` runs it on
// the H200): each operation launched 200 times inside one captured CUDA graph,
// the graph replayed 20 times, wall time per launch (so the figure includes
// what a node of the decode graph costs beyond its kernel). The products also
// give the bytes of weights read per second. Shapes: Gemma 3's (270M, 1B, 4B);
// `att`: decode attention at depth at the Llama 8B shape, each split kernel.
#include "compute/cuda/cuda.h"
#include "tensor/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { PER_GRAPH = 200, REPLAYS = 20 };
typedef int (*op_fn)(cuda_dev *d, void *arg);

// microseconds per launch of op inside a graph (-1 on failure)
static double time_op(cuda_dev *d, op_fn op, void *arg) {
    void *g = NULL;
    if (op(d, arg) || cuda_sync(d) || cuda_graph_begin(d)) return -1;
    int bad = 0;
    for (int i = 0; i < PER_GRAPH; i++) bad |= op(d, arg);
    if (cuda_graph_end(d, &g) || bad) return -1;
    cuda_graph_launch(d, g), cuda_sync(d);
    double t0 = now();
    for (int r = 0; r < REPLAYS; r++) cuda_graph_launch(d, g);
    if (cuda_sync(d)) return -1;
    double us = (now() - t0) * 1e6 / (REPLAYS * PER_GRAPH);
    cuda_graph_free(g);
    return us;
}

static void *zeros(cuda_dev *d, size_t bytes) {
    void *p = cuda_alloc(d, bytes);
    if (p && cuda_zero(d, p, bytes)) { cuda_free(d, p); p = NULL; }
    return p;
}

typedef struct { int type, rows, cols; void *w, *xq; float *y, *x; } mm_arg;
static int op_mm(cuda_dev *d, void *a) { mm_arg *m = a; return cuda_matmul(d, m->type, m->w, m->rows, m->cols, m->xq, 1, m->y); }
typedef struct { cuda_chain c; int wtype; } chain_arg;
static int op_chain(cuda_dev *d, void *a) { chain_arg *c = a; return cuda_chain_run(d, &c->c, 1, c->wtype); }
static int op_quant(cuda_dev *d, void *a) { mm_arg *m = a; return cuda_quantize(d, m->type, m->x, 1, m->cols, m->xq); }
typedef struct { cuda_qkv c; const int *pos; } qkv_arg;
static int op_qkv(cuda_dev *d, void *a) { qkv_arg *q = a; return cuda_qkv_prep(d, &q->c, 1, q->pos); }
typedef struct { float *q, *out, *sc; int H, KV, hd, P; const int *pos; float *const *tab; } att_arg;
static int op_att(cuda_dev *d, void *a) {
    att_arg *t = a;
    return cuda_attention(d, t->q, t->out, 1, t->H, t->KV, t->hd, 0, t->pos, (const float *const *)t->tab, (const float *const *)t->tab + 1,
                          0.0625f, 0.0f, NULL, 1, t->sc, t->P + 1);
}
static int op_attd(cuda_dev *d, void *a) {
    att_arg *t = a;
    return cuda_attention_d(d, t->q, t->out, 1, t->H, t->KV, t->hd, 0, t->pos, (const float *const *)t->tab, (const float *const *)t->tab + 1,
                            0.0625f, 0.0f, NULL, 1, t->sc, t->P + 1, 0, NULL, 1);
}
static int op_scale(cuda_dev *d, void *a) { return cuda_scale(d, a, 32, 1.0f); }

static void matmul_row(cuda_dev *d, const char *name, int type, int rows, int cols) {
    size_t rs = dtype_row_size(type, cols);
    unsigned char *h = calloc(rs, (size_t)rows); // (zero weights: the time does not depend on the values)
    mm_arg m = {type, rows, cols, NULL, zeros(d, cuda_act_row_size(type, cols)), zeros(d, sizeof(float) * (size_t)rows), zeros(d, sizeof(float) * cols)};
    m.w = h ? cuda_weight_upload(d, type, h, rows, cols) : NULL;
    double us = m.w && m.xq && m.y ? time_op(d, op_mm, &m) : -1;
    printf("| matmul %-14s | %s %d x %d | %8.2f | %7.0f |\n", name, dtype_get(type)->name, rows, cols, us, us > 0 ? rs * rows / us / 1e3 : 0);
    double uq = time_op(d, op_quant, &m);
    printf("| quantize for %-8s | %d | %8.2f | |\n", dtype_get(type)->name, cols, uq);
    cuda_free(d, m.w), cuda_free(d, m.xq), cuda_free(d, m.y), cuda_free(d, m.x), free(h);
}

// The same product over NC copies of the matrix in turn (NC x its bytes well past the 50 MB of L2): each
// launch reads its weights from memory, as a decode step does (its prefetch into L2 overlapping the launch
// before it). glu: gate and up of rows x cols each, joined by their activation (cuda_matmul_multi's).
enum { NC = 8 };
typedef struct { int type, rows, cols, glu, i; void *w[2 * NC], *xq; float *y[2]; } cold_arg;
static int op_cold(cuda_dev *d, void *a) {
    cold_arg *m = a;
    int i = m->i++ % NC;
    if (!m->glu) return cuda_matmul(d, m->type, m->w[i], m->rows, m->cols, m->xq, 1, m->y[0]);
    cuda_mat mm[2] = {{m->type, m->w[2 * i], m->rows, m->y[0]}, {m->type, m->w[2 * i + 1], m->rows, m->y[1]}};
    return cuda_matmul_multi(d, 2, mm, m->cols, m->xq, 1, 1, 1);
}
static int g_only = -1, g_at; // (cold N: the N-th of those products alone, for a profiler)
static void matmul_cold(cuda_dev *d, const char *name, int type, int rows, int cols, int glu) {
    if (g_only >= 0 && g_at++ != g_only) return;
    size_t rs = dtype_row_size(type, cols);
    unsigned char *h = calloc(rs, (size_t)rows);
    cold_arg m = {type, rows, cols, glu, 0, {0}, zeros(d, cuda_act_row_size(type, cols)), {zeros(d, sizeof(float) * rows), zeros(d, sizeof(float) * rows)}};
    int ok = h && m.xq && m.y[0] && m.y[1];
    for (int i = 0; i < (glu ? 2 : 1) * NC && ok; i++) ok = (m.w[i] = cuda_weight_upload(d, type, h, rows, cols)) != NULL;
    double us = ok ? time_op(d, op_cold, &m) : -1, bytes = (double)rs * rows * (glu ? 2 : 1);
    printf("| matmul %-14s from memory (%d copies in turn) | %s %d x %d%s | %8.2f | %7.0f |\n", name, NC, dtype_get(type)->name, rows, cols,
           glu ? " x 2 (glu)" : "", us, us > 0 ? bytes / us / 1e3 : 0);
    for (int i = 0; i < 2 * NC; i++) cuda_free(d, m.w[i]);
    cuda_free(d, m.xq), cuda_free(d, m.y[0]), cuda_free(d, m.y[1]), free(h);
}

// Decode attention at depth P, the Llama 8B shape (32 query heads on 8 KV heads of 128, f16 cache, ggml's
// numerics), T rows (sequences) each at position P - 1: NL layers' caches in turn (each ~P x 4 KiB, well past L2
// together), as a decode step reads them. `bench_cuda_ops att [P ...]`: each setting of INFER_CUDA_ATT_DEC
// (0: the two split kernels; 1: k_dec1; 3, 4, 5: k_dec2, 4 and 5 its cp.async ring) on a device of its own, us a launch and the cache's GB/s.
enum { ANL = 4 };
typedef struct { float *q, *out, *sc; int T, P, z; const int *pos; const void *const *tab[ANL]; int i; } dec_arg;
static int op_dec(cuda_dev *d, void *a) {
    dec_arg *t = a;
    const void *const *tb = t->tab[t->i++ % ANL];
    return cuda_attention_split(d, t->q, t->out, t->T, 32, 8, 128, 0, t->pos, tb, tb + t->T, 0.0884f, 0.0f, NULL, 1, t->sc, t->P, 0, NULL, 1,
                                t->z);
}
static void att_dec(int np, char **ps) {
    static const char *decs[] = {"0", "1", "3", "4", "5"};
    for (int di = 0; di < 5; di++) {
        setenv("INFER_CUDA_ATT_DEC", decs[di], 1);
        cuda_dev *d = cuda_open(0);
        if (!d) { printf("bench_cuda_ops: %s\n", cuda_status()); return; }
        for (int pi = 0; pi < np; pi++)
            for (int T = 1; T <= 16; T *= 16) {
                const int P = atoi(ps[pi]), nkv = 8 * 128;
                if (P < 2) continue;
                const size_t cb = (size_t)P * nkv * 2; // (a layer's K or V: f16)
                dec_arg t = {zeros(d, sizeof(float) * T * 4096), zeros(d, sizeof(float) * T * 4096), zeros(d, sizeof(float) * T * 32 * (size_t)P),
                             T, P, cuda_attention_split_z(d, P), NULL, {0}, 0};
                int *hp = malloc(sizeof(int) * T), ok = t.q && t.out && t.sc && hp;
                void *cache[2 * ANL] = {0}, **tabs[ANL] = {0};
                for (int l = 0; l < 2 * ANL && ok; l++) ok = (cache[l] = zeros(d, cb)) != NULL;
                const void **h = malloc(sizeof(void *) * 2 * T);
                for (int l = 0; l < ANL && ok && h; l++) {
                    for (int r = 0; r < T; r++) h[r] = cache[2 * l], h[T + r] = cache[2 * l + 1]; // (every row the same cache)
                    ok = (tabs[l] = zeros(d, sizeof(void *) * 2 * T)) != NULL && !cuda_upload(d, tabs[l], h, sizeof(void *) * 2 * T);
                    t.tab[l] = (const void *const *)tabs[l];
                }
                for (int r = 0; ok && r < T; r++) hp[r] = P - 1;
                int *dp = ok ? zeros(d, sizeof(int) * T) : NULL;
                ok = ok && dp && !cuda_upload(d, dp, hp, sizeof(int) * T);
                t.pos = dp;
                double us = ok ? time_op(d, op_dec, &t) : -1;
                printf("| decode attention, INFER_CUDA_ATT_DEC=%s, %d row%s | 8B shape, depth %d, %d chunks | %8.2f | %7.0f |\n", decs[di], T,
                       T > 1 ? "s (one cache)" : "", P, t.z, us, us > 0 ? 2.0 * cb / us / 1e3 : 0);
                for (int l = 0; l < 2 * ANL; l++) cuda_free(d, cache[l]);
                for (int l = 0; l < ANL; l++) cuda_free(d, tabs[l]);
                cuda_free(d, t.q), cuda_free(d, t.out), cuda_free(d, t.sc), cuda_free(d, dp), free(hp), free(h);
            }
        cuda_close(d);
    }
    unsetenv("INFER_CUDA_ATT_DEC");
}

int main(int argc, char **argv) {
    if (!cuda_device_count()) { printf("bench_cuda_ops: no GPU: %s\n", cuda_status()); return 0; }
    cuda_dev *d = cuda_open(0);
    if (!d) { printf("bench_cuda_ops: %s\n", cuda_status()); return 1; }
    printf("%s: microseconds a launch inside a captured graph (%d launches, %d replays)\n\n", cuda_name(d), PER_GRAPH, REPLAYS);
    printf("| operation | shape | us | GB/s |\n| --- | --- | ---: | ---: |\n");
    if (argc > 1 && !strcmp(argv[1], "att")) { // (decode attention at depth: `att 4096 16384`)
        cuda_close(d);
        char *def[] = {"4096", "16384", "32768"};
        att_dec(argc > 2 ? argc - 2 : 3, argc > 2 ? argv + 2 : def);
        return 0;
    }
    float *one = zeros(d, 4096);
    if (argc > 1 && !strcmp(argv[1], "cold")) { // (the decode products at the 1B and 4B shapes from memory, alone)
        if (argc > 2) g_only = atoi(argv[2]);
        matmul_cold(d, "1b ffn gate+up", DT_Q5_0, 6912, 1152, 1), matmul_cold(d, "1b ffn down", DT_Q6_K, 1152, 6912, 0);
        matmul_cold(d, "4b ffn gate+up", DT_Q4_K, 10240, 2560, 1), matmul_cold(d, "4b ffn down", DT_Q6_K, 2560, 10240, 0);
        matmul_cold(d, "4b ffn down", DT_Q4_K, 2560, 10240, 0), matmul_cold(d, "4b qkv", DT_Q4_K, 4096, 2560, 0);
        matmul_cold(d, "4b o", DT_Q4_K, 2560, 2048, 0);
        matmul_cold(d, "4b ffn gate+up", DT_F16, 10240, 2560, 1), matmul_cold(d, "4b ffn down", DT_F16, 2560, 10240, 0);
        matmul_cold(d, "4b ffn gate+up", DT_BF16, 10240, 2560, 1), matmul_cold(d, "4b head", DT_Q6_K, 262144, 2560, 0);
        cuda_free(d, one);
        cuda_close(d);
        return 0;
    }
    printf("| scale (32 floats: the floor) | | %8.2f | |\n", time_op(d, op_scale, one));
    int E[3] = {640, 1152, 2560}, F[3] = {2048, 6912, 10240}, H[3] = {4, 4, 8}, KV[3] = {1, 1, 4};
    const char *nm[3] = {"270m", "1b", "4b"};
    for (int s = 0; s < 3; s++) {
        int e = E[s];
        float *o = zeros(d, sizeof(float) * e), *x = zeros(d, sizeof(float) * e), *xn = zeros(d, sizeof(float) * e), *w = zeros(d, sizeof(float) * e);
        void *xq = zeros(d, cuda_act_row_size(DT_Q8_0, e) + cuda_act_row_size(DT_Q4_K, e));
        chain_arg c = {{.o = o, .x = x, .xn = xn, .wa = w, .wb = w, .norm_a = 1, .residual = 1, .norm_b = 1, .n = e, .eps_a = 1e-6f,
                        .eps_b = 1e-6f, .s = 1.0f, .xq = xq}, e % 256 ? DT_Q8_0 : DT_Q4_K};
        printf("| chain: norm, residual, norm, quantize (%s) | %s n %d | %8.2f | |\n", dtype_get(c.wtype)->name, nm[s], e, time_op(d, op_chain, &c));
        chain_arg c2 = c;
        c2.c.xq = NULL;
        printf("| chain: norm, residual, norm | %s n %d | %8.2f | |\n", nm[s], e, time_op(d, op_chain, &c2));
        c2.c.norm_a = c2.c.residual = 0;
        printf("| chain: norm alone | %s n %d | %8.2f | |\n", nm[s], e, time_op(d, op_chain, &c2));
        c2.c.xq = xq;
        printf("| chain: norm, quantize | %s n %d | %8.2f | |\n", nm[s], e, time_op(d, op_chain, &c2));
        cuda_free(d, o), cuda_free(d, x), cuda_free(d, xn), cuda_free(d, w), cuda_free(d, xq);
        int hd = 256, nq = H[s] * hd, nkv = KV[s] * hd, P = 4096; // (the cache's positions; attention timed at several)
        float *q = zeros(d, sizeof(float) * nq), *k = zeros(d, sizeof(float) * nkv), *v = zeros(d, sizeof(float) * nkv), *nw = zeros(d, sizeof(float) * hd);
        float *inv = zeros(d, sizeof(float) * hd / 2), *kc = zeros(d, sizeof(float) * (P + 1) * nkv), *vc = zeros(d, sizeof(float) * (P + 1) * nkv);
        float *out = zeros(d, sizeof(float) * nq), *sc = zeros(d, sizeof(float) * H[s] * (P + 1));
        int *pos = zeros(d, sizeof(int));
        int hp = P;
        float **tab = zeros(d, 2 * sizeof(float *));
        float *th[2] = {kc, vc};
        cuda_upload(d, pos, &hp, sizeof hp), cuda_upload(d, tab, th, sizeof th);
        qkv_arg qa = {{.q = q, .k = k, .v = v, .H = H[s], .KV = KV[s], .hd = hd, .kind = 1, .round = 1, .n_pairs = hd / 2, .pair_offset = hd / 2,
                       .pair_stride = 1, .q_norm = nw, .k_norm = nw, .inv_freq = inv, .eps = 1e-6f, .mscale = 1.0f, .k_cache = (void *const *)tab, .v_cache = (void *const *)tab + 1}, pos};
        printf("| q/k/v norms, RoPE, cache rows | %s %d+%d heads of %d | %8.2f | |\n", nm[s], H[s], KV[s], hd, time_op(d, op_qkv, &qa));
        int at[4] = {16, 128, 1024, 4096};
        for (int i = 0; i < 4; i++) {
            cuda_upload(d, pos, &at[i], sizeof at[i]);
            att_arg aa = {q, out, sc, H[s], KV[s], hd, P, pos, tab};
            printf("| attention, one row at position %d | %s | %8.2f | |\n", at[i], nm[s], time_op(d, op_att, &aa));
            printf("| attention, one decode row at position %d (its cache read before the wait) | %s | %8.2f | |\n", at[i], nm[s],
                   time_op(d, op_attd, &aa));
        }
        float *all[] = {q, k, v, nw, inv, kc, vc, out, sc};
        for (int i = 0; i < 9; i++) cuda_free(d, all[i]);
        cuda_free(d, pos), cuda_free(d, tab);
        char b[64];
        snprintf(b, sizeof b, "%s ffn up", nm[s]);
        matmul_row(d, b, s == 2 ? DT_Q4_K : DT_Q5_0, F[s], e);
        snprintf(b, sizeof b, "%s ffn down", nm[s]);
        matmul_row(d, b, DT_Q6_K, e, F[s]);
        snprintf(b, sizeof b, "%s q proj", nm[s]);
        matmul_row(d, b, s == 2 ? DT_Q4_K : DT_Q5_0, nq, e);
        snprintf(b, sizeof b, "%s head", nm[s]);
        matmul_row(d, b, s == 2 ? DT_Q6_K : DT_Q8_0, 262144, e);
        if (s == 2) matmul_row(d, "4b ffn up f16", DT_F16, F[s], e), matmul_row(d, "4b ffn up bf16", DT_BF16, F[s], e);
    }
    cuda_free(d, one);
    cuda_close(d);
    return 0;
}
