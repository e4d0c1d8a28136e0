// The lm_head on a GPU (infer_lm_head_set_device): the model's own head and
// the vindex's lm_head index uploaded once, and each lookup there: the dense
// head's product and its top k, or the index's centroids, the best clusters'
// rows and their top k; k ids and scores come back (best first).
#include "vindex/vindex_impl.h"
#include "base/error.h"
#include "compute/backend.h"
#include "tensor/dtype.h"

#include <stdlib.h>
#include <string.h>

struct lm_gpu_s {
    backend be;            // the device backend (its copies of the head and the index: this vindex's)
    cpu_exec ex;           // (its failure flag)
    tensor cent;           // the index's centroids as a tensor
    lm_topk_desc d;
};

void vindex_lm_release_device(vindex *v) {
    struct lm_gpu_s *g = v->lmg;
    if (!g) return;
    if (g->be.ops->done) g->be.ops->done(&g->be);
    free(g);
    v->lmg = NULL;
}

infer_status vindex_lm_set_device(vindex *v, const tensor *head, const char *device) {
    if (!device || !strcmp(device, "cpu")) {
        vindex_lm_release_device(v);
        return INFER_OK;
    }
    if (strcmp(device, "cuda")) return fail(INFER_ERR_ARG, "lm_head: unknown device \"%s\" (cpu, cuda)", device);
    if (v->lmg) return INFER_OK;
    int V = v->n_vocab, H = v->n_embd;
    if (!head || head->ne[0] != H || head->ne[1] != V) return fail(INFER_ERR_ARG, "lm_head on cuda: the model's head is not %d x %d", V, H);
    const lm_index *x = &v->lmi;
    const backend_ops *ops = backend_cuda();
    if (!ops) return fail(INFER_ERR_UNSUPPORTED, "lm_head on cuda: %s", backend_gpu_status());
    if (x->C && ops->walk_takes && !ops->walk_takes(x->type))
        return fail(INFER_ERR_UNSUPPORTED, "lm_head index on cuda: rows of %s (f32, f16, bf16 and q8_0 are scored there)", dtype_get(x->type)->name);
    struct lm_gpu_s *g = calloc(1, sizeof *g);
    if (!g) return fail(INFER_ERR_NOMEM, "out of memory");
    g->be = (backend){.ops = ops, .ex = &g->ex, .owner = g};
    g->cent = (tensor){.name = "lm_index.centroids", .type = x->cent_type, .nd = 2, .ne = {H, x->C}, .data = (void *)x->cent};
    g->d = (lm_topk_desc){.head = head, .clusters = x->C, .cent = &g->cent, .rows = x->rows, .row_type = x->type, .row_bytes = x->rs,
                          .off = x->off, .order = x->order};
    v->lmg = g;
    // a lookup of each kind now: the head and the index go up, or the reason they cannot is told here
    float *z = calloc((size_t)H, sizeof(float)), s;
    int32_t id;
    int bad = !z || ops->lm_topk(&g->be, &g->d, z, 1, 0, &s, &id) || (x->C && ops->lm_topk(&g->be, &g->d, z, 1, 1, &s, &id));
    free(z);
    if (bad) {
        vindex_lm_release_device(v);
        return fail(INFER_ERR_NOMEM, "lm_head on cuda: the head (%d x %d %s) and its index do not fit (%s)", V, H, dtype_get(head->type)->name,
                    backend_gpu_status());
    }
    return INFER_OK;
}

int vindex_lm_on_device(const vindex *v) { return v->lmg != NULL; }

// best first: score, then the lower id
static int by_score(const void *a, const void *b) {
    const float *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    int32_t i, j;
    memcpy(&i, x + 1, 4), memcpy(&j, y + 1, 4);
    return (i > j) - (i < j);
}

static infer_status device_topk(vindex *v, const float *hidden, int k, int probes, int32_t *ids) {
    struct lm_gpu_s *g = v->lmg;
    int V = v->n_vocab;
    if (k < 1 || k > V) return fail(INFER_ERR_ARG, "lm_head top-k: k %d is outside 1-%d", k, V);
    if (probes > 0 && !g->d.clusters) return fail(INFER_ERR_ARG, "%s: no lm_head index (extract with --lm-index)", v->dir);
    float *hs = malloc(sizeof(float) * 2 * (size_t)k);
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)k);
    if (!hs || !hi) return free(hs), free(hi), fail(INFER_ERR_NOMEM, "out of memory");
    if (g->be.ops->lm_topk(&g->be, &g->d, hidden, k, probes, hs, hi)) {
        free(hs), free(hi);
        return fail(INFER_ERR_IO, "lm_head on cuda: %s", backend_gpu_status());
    }
    // (score, id) pairs sorted best first; fewer candidates than k (-1s): the lowest other ids, as the CPU's lookup
    float *pr = malloc(sizeof(float) * 2 * (size_t)k);
    if (!pr) return free(hs), free(hi), fail(INFER_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < k; i++)
        if (hi[i] >= 0) pr[2 * n] = hs[i], memcpy(pr + 2 * n + 1, hi + i, 4), n++;
    qsort(pr, (size_t)n, 2 * sizeof(float), by_score);
    for (int i = 0; i < n; i++) memcpy(ids + i, pr + 2 * i + 1, 4);
    for (int t = 0, c = n; c < k && t < V; t++) {
        int in = 0;
        for (int i = 0; i < n && !in; i++) in = ids[i] == t;
        if (!in) ids[c++] = t;
    }
    free(pr), free(hs), free(hi);
    return INFER_OK;
}

infer_status vindex_lm_device_topk(vindex *v, const float *hidden, int k, int probes, int32_t *ids) {
    pthread_mutex_lock(&v->lmg_mu); // (one lookup at a time: the buffers are the vindex's)
    infer_status st = device_topk(v, hidden, k, probes, ids);
    pthread_mutex_unlock(&v->lmg_mu);
    return st;
}
