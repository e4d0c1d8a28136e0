// down_meta: for every feature, the tokens its down vector writes most, i.e.
// the top entries of W d_f with W the output head [V, H]. For Gemma 3 270M
// that is 36,864 features x 262,144 tokens x 640, so the products go through
// the engine's matmul (its multi-token kernels) in tiles shaped for it: the
// matmul walks weight rows and, for each, every token of the call, so a call
// of TB features keeps its quantized activations in L1, and a block of VB
// output rows stays in L2 while every feature of the layer passes over it.
// Each block's scores (F x VB) are then folded into per-feature top-K lists
// on the thread pool; no V-long score row is ever stored.
#include "vindex/extract_impl.h"
#include "base/error.h"
#include "compute/cpu/ops.h"
#include "tensor/dtype.h"
#include "base/pool.h"

#include <math.h>
#include <stdlib.h>

// Measured on Gemma 3 270M (q8_0 head, 2 threads): 32 x 2048 runs at the
// kernel's speed (~35 GMAC/s here); TB from 8 to 256 and VB from 512 to
// 16384 were all within 10% of it.
enum {
    TB = 32,   // features per matmul call
    VB = 2048, // output rows per block: F x VB scores (16 MiB for F = 2048)
};

typedef struct {
    const float *y;      // (F, n) scores of this block
    int F, n, v0;        // F features, tokens v0 .. v0+n
    int K;
    int32_t *ids;        // (F, K)
    float *scores;
    int *count;          // (F) entries filled so far
} topk_job;

// Folds a block's scores into the lists: a token enters when it beats the
// K-th score (strictly, so among equal scores the lower id stays).
static void topk_task(void *arg, int ith, int nth) {
    const topk_job *a = arg;
    int t0 = a->F * ith / nth, t1 = a->F * (ith + 1) / nth, K = a->K;
    for (int t = t0; t < t1; t++) {
        const float *row = a->y + (size_t)t * a->n;
        int32_t *id = a->ids + (size_t)t * K;
        float *sc = a->scores + (size_t)t * K;
        int n = a->count[t];
        float thr = n == K ? sc[K - 1] : -INFINITY;
        for (int j = 0; j < a->n; j++) {
            float s = row[j];
            if (!(s > thr) && (n == K || isnan(s))) continue;
            int i = n < K ? n++ : K - 1;
            while (i > 0 && sc[i - 1] < s) { sc[i] = sc[i - 1]; id[i] = id[i - 1]; i--; }
            sc[i] = s;
            id[i] = a->v0 + j;
            if (n == K) thr = sc[K - 1];
        }
        a->count[t] = n;
    }
}

infer_status down_meta_topk(cpu_exec *ex, const tensor *W, const float *D, int F, int H, int K, int32_t *ids, float *scores,
                    void (*progress)(void *u, int64_t done), void *u) {
    int V = (int)W->ne[1];
    size_t rs = dtype_row_size(W->type, H);
    int vb = V < VB ? V : VB;
    float *y = malloc(sizeof(float) * (size_t)F * (size_t)vb);
    int *count = calloc((size_t)F, sizeof *count);
    if (!y || !count) {
        free(y);
        free(count);
        return fail(INFER_ERR_NOMEM, "down_meta: %d x %d scores", F, vb);
    }
    for (int v0 = 0; v0 < V; v0 += vb) {
        int n = V - v0 < vb ? V - v0 : vb;
        // rows v0 .. v0+n of W as a tensor of their own
        tensor part = *W;
        part.data = (const char *)W->data + rs * (size_t)v0;
        part.ne[1] = n;
        part.nbytes = rs * (size_t)n;
        weight w = {.w = &part};
        for (int f0 = 0; f0 < F; f0 += TB) {
            int T = F - f0 < TB ? F - f0 : TB;
            matmul(ex, y + (size_t)f0 * n, D + (size_t)f0 * H, &w, NULL, T, H, n);
        }
        topk_job job = {y, F, n, v0, K, ids, scores, count};
        pool_run(ex->pool, topk_task, &job);
        if (progress) progress(u, (int64_t)F * (v0 + n) / V);
    }
    free(y);
    free(count);
    return ex->oom ? fail(INFER_ERR_NOMEM, "down_meta: kernel scratch") : INFER_OK;
}
