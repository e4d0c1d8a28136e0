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
#include "compute/cpu/vec.h"
#include "vindex/walk.h"
#include "tensor/dtype.h"
#include "tensor/pack.h"
#include "base/pool.h"

#include <math.h>
#include <stdatomic.h>
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
        for (int j = 0; j < a->n; j++) topk_insert(sc, id, &a->count[t], K, row[j], a->v0 + j);
    }
}

// ---------------------------------------------------------------------------
// A packed head (pack.h: the kernels the engine's own logits use on a VNNI
// CPU): the F down vectors are quantized once, as matmul quantizes
// activations, and blocks of PB rows go to the threads, each computing its
// block's F x PB scores with the kernels (a panel of groups in L2 against
// features in L1, as matmul walks them) and folding them into lists of its
// own; the threads' lists are merged at the end. A list keeps the K best by
// score, then by the lower id, which is the whole fold's order whatever the
// split, so the result is the same for any thread count (and the same as the
// single-stream fold below, and as the top K of each feature's own logits).

enum { PB = 1024 }; // rows per block (128 groups of 8)

typedef struct {
    int32_t *ids;  // (F, K)
    float *sc;
    int *n;        // (F)
} tlist;

typedef struct {
    const weight *head;
    const pack_kernel *pk;
    const unsigned char *xq; // (F rows of xrow bytes)
    size_t xrow, gbytes;
    int F, H, V, K;
    float *y;                // per thread: F x PB scores
    tlist *lists;            // per thread
    atomic_int next;         // the next block
} pk_job;

static void pk_task(void *arg, int ith, int nth) {
    pk_job *a = arg;
    (void)nth;
    float *y = a->y + (size_t)ith * a->F * PB;
    tlist *l = &a->lists[ith];
    int tb = (int)(24576 / a->xrow), panel = (int)(131072 / a->gbytes);
    tb = tb < 1 ? 1 : tb, panel = panel < 1 ? 1 : panel;
    if (a->pk->tokens > 1) tb = tb < a->pk->tokens ? a->pk->tokens : tb / a->pk->tokens * a->pk->tokens; // (AMX: whole tiles)
    for (int b; (b = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed)) * PB < a->V;) {
        int v0 = b * PB, n = a->V - v0 < PB ? a->V - v0 : PB, ng = (n + 7) / 8; // (the last group's padding rows: columns past n)
        for (int p0 = 0; p0 < ng; p0 += panel) {
            int p1 = p0 + panel < ng ? p0 + panel : ng;
            for (int t0 = 0; t0 < a->F; t0 += tb) {
                int tn = a->F - t0 < tb ? a->F - t0 : tb;
                for (int g = p0; g < p1; g++) {
                    const unsigned char *pg = (const unsigned char *)a->head->pack + a->gbytes * (size_t)(v0 / 8 + g), *xt = a->xq + a->xrow * (size_t)t0;
                    float *yt = y + (size_t)t0 * PB + 8 * g;
                    if (a->pk->tile2 && g + 1 < p1) a->pk->tile2(pg, a->gbytes, xt, a->xrow, tn, a->H, yt, PB), g++; // (two groups at once)
                    else a->pk->tile(pg, xt, a->xrow, tn, a->H, yt, PB);
                }
            }
        }
        for (int f = 0; f < a->F; f++) {
            const float *row = y + (size_t)f * PB;
            float *sc = l->sc + (size_t)f * a->K;
            int32_t *id = l->ids + (size_t)f * a->K;
            int j = 0;
            while (l->n[f] < a->K && j < n) topk_insert(sc, id, &l->n[f], a->K, row[j], v0 + j), j++; // (until the list is full)
            while (j < n) { // (then only what beats the K-th score; an equal one has a higher id)
                j += vec_first_above(row + j, n - j, sc[a->K - 1]);
                if (j < n) topk_insert(sc, id, &l->n[f], a->K, row[j], v0 + j), j++;
            }
        }
    }
}

typedef struct { pk_job *a; int nth; int32_t *ids; float *scores; } merge_job;

static void merge_range(void *arg, int f0, int f1) {
    merge_job *m = arg;
    const pk_job *a = m->a;
    int K = a->K;
    for (int f = f0; f < f1; f++) {
        float *sc = m->scores + (size_t)f * K;
        int32_t *id = m->ids + (size_t)f * K;
        int cnt = 0;
        for (int t = 0; t < m->nth; t++) {
            const tlist *l = &a->lists[t];
            for (int k = 0; k < l->n[f]; k++) topk_insert(sc, id, &cnt, K, l->sc[(size_t)f * K + k], l->ids[(size_t)f * K + k]);
        }
        for (int k = cnt; k < K; k++) id[k] = -1, sc[k] = -INFINITY; // (fewer than K numbers)
    }
}

static infer_status down_meta_packed(cpu_exec *ex, const weight *head, const float *D, int F, int H, int K, int32_t *ids,
                                     float *scores) {
    int nth = pool_size(ex->pool), V = (int)head->w->ne[1];
    pk_job a = {.head = head, .pk = pack_kernel_get(head->pack_kind), .F = F, .H = H, .V = V, .K = K};
    a.xrow = pack_act_row_size(head->pack_kind, H);
    a.gbytes = pack_group_bytes(head->pack_kind, H);
    unsigned char *xq = malloc(a.xrow * (size_t)F);
    a.y = malloc(sizeof(float) * (size_t)nth * F * PB);
    a.lists = calloc((size_t)nth, sizeof *a.lists);
    int ok = xq && a.y && a.lists && a.pk;
    for (int t = 0; ok && t < nth; t++) {
        a.lists[t].ids = malloc(sizeof(int32_t) * (size_t)F * K);
        a.lists[t].sc = malloc(sizeof(float) * (size_t)F * K);
        a.lists[t].n = calloc((size_t)F, sizeof(int));
        ok = a.lists[t].ids && a.lists[t].sc && a.lists[t].n;
    }
    if (ok) {
        for (int f = 0; f < F; f++) a.pk->quant(D + (size_t)f * H, xq + a.xrow * (size_t)f, H);
        a.xq = xq;
        atomic_init(&a.next, 0);
        pool_run(ex->pool, pk_task, &a);
        merge_job m = {&a, nth, ids, scores};
        pool_for(ex->pool, F, 64, merge_range, &m);
    }
    for (int t = 0; a.lists && t < nth; t++) free(a.lists[t].ids), free(a.lists[t].sc), free(a.lists[t].n);
    free(a.lists), free(a.y), free(xq);
    return ok ? INFER_OK : fail(INFER_ERR_NOMEM, "down_meta: %d threads x %d x %d scores", nth, F, PB);
}

infer_status down_meta_topk(cpu_exec *ex, const weight *head, const float *D, int F, int H, int K, int32_t *ids, float *scores,
                    void (*progress)(void *u, int64_t done), void *u) {
    if (head->pack && !head->trans && K > 0) {
        infer_status st = down_meta_packed(ex, head, D, F, H, K, ids, scores);
        if (progress) progress(u, F);
        return st;
    }
    const tensor *W = head->w;
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
            backend hb = walk_host_backend(ex);
            hb.ops->matmul(&hb, y + (size_t)f0 * n, D + (size_t)f0 * H, &w, NULL, T, H, n);
        }
        topk_job job = {y, F, n, v0, K, ids, scores, count};
        pool_run(ex->pool, topk_task, &job);
        if (progress) progress(u, (int64_t)F * (v0 + n) / V);
    }
    free(y);
    free(count);
    return ex->oom ? fail(INFER_ERR_NOMEM, "down_meta: kernel scratch") : INFER_OK;
}
