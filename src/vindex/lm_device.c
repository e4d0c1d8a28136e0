// The lm_head on a GPU (infer_lm_head_set_device): the model's own head and
// the vindex's lm_head index uploaded once, and each lookup there: the dense
// head's product and its top k, or the index's centroids, the best clusters'
// rows and their top k; k ids and scores come back (best first).
#include "vindex/vindex_impl.h"
#include "base/error.h"
#include "compute/cuda/cuda.h"
#include "tensor/dtype.h"

#include <stdlib.h>
#include <string.h>

struct lm_gpu_s {
    cuda_dev *d;
    int V, H, C, head_type;
    void *head;            // the model's head, as cuda_weight_upload puts it
    void *cent, *rows;     // the index's centroids (cuda_weight_upload) and rows (raw, cluster order); NULL: no index
    unsigned *off;         // (C + 1)
    int *order;            // (V)
    float *x, *s, *cs;     // hidden (H); scores (V: the head's, or the candidates'); centroid scores (C)
    void *xq_head, *xq_cent, *xq_rows;
    int *best, *cid, *dn, *pos, *oid; // probed clusters (C), candidates' ids (V), their count, top-k places, ids (V)
    float *os;             // top-k scores (V)
};

void vindex_lm_release_device(vindex *v) {
    struct lm_gpu_s *g = v->lmg;
    if (!g) return;
    void *p[] = {g->head, g->cent, g->rows, g->off, g->order, g->x, g->s, g->cs, g->xq_head, g->xq_cent, g->xq_rows, g->best,
                 g->cid, g->dn, g->pos, g->oid, g->os};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cuda_free(g->d, p[i]);
    cuda_close(g->d);
    free(g);
    v->lmg = NULL;
}

static void *upload(cuda_dev *d, const void *src, size_t bytes) {
    void *p = cuda_alloc(d, bytes);
    if (p && cuda_upload(d, p, src, bytes)) cuda_free(d, p), p = NULL;
    return p;
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
    if (x->C && !cuda_walk_ok(x->type))
        return fail(INFER_ERR_UNSUPPORTED, "lm_head index on cuda: rows of %s (f32, f16, bf16 and q8_0 are scored there)", dtype_get(x->type)->name);
    if (cuda_device_count() <= 0) return fail(INFER_ERR_UNSUPPORTED, "lm_head on cuda: %s", cuda_status());
    struct lm_gpu_s *g = calloc(1, sizeof *g);
    if (!g) return fail(INFER_ERR_NOMEM, "out of memory");
    if (!(g->d = cuda_open(0))) {
        free(g);
        return fail(INFER_ERR_UNSUPPORTED, "lm_head on cuda: %s", cuda_status());
    }
    v->lmg = g;
    g->V = V, g->H = H, g->C = x->C, g->head_type = head->type;
    size_t ah = cuda_act_row_size(head->type, H);
    int ok = ah && (g->head = cuda_weight_upload(g->d, head->type, head->data, V, H)) && (g->x = cuda_alloc(g->d, sizeof(float) * H)) &&
             (g->xq_head = cuda_alloc(g->d, ah)) && (g->s = cuda_alloc(g->d, sizeof(float) * (size_t)V)) &&
             (g->pos = cuda_alloc(g->d, sizeof(int) * (size_t)V)) && (g->oid = cuda_alloc(g->d, sizeof(int) * (size_t)V)) &&
             (g->os = cuda_alloc(g->d, sizeof(float) * (size_t)V));
    if (ok && x->C) {
        size_t ac = cuda_act_row_size(x->cent_type, H);
        ok = ac && (g->cent = cuda_weight_upload(g->d, x->cent_type, x->cent, x->C, H)) && (g->xq_cent = cuda_alloc(g->d, ac)) &&
             (g->rows = upload(g->d, x->rows, x->rs * (size_t)V)) && (g->off = upload(g->d, x->off, sizeof(unsigned) * (x->C + 1))) &&
             (g->order = upload(g->d, x->order, sizeof(int) * (size_t)V)) && (g->cs = cuda_alloc(g->d, sizeof(float) * x->C)) &&
             (g->best = cuda_alloc(g->d, sizeof(int) * x->C)) && (g->cid = cuda_alloc(g->d, sizeof(int) * (size_t)V)) &&
             (g->dn = cuda_alloc(g->d, sizeof(int))) &&
             (x->type != DT_Q8_0 || (g->xq_rows = cuda_alloc(g->d, cuda_act_row_size(DT_Q8_0, H))));
    }
    if (!ok) {
        vindex_lm_release_device(v);
        return fail(INFER_ERR_NOMEM, "lm_head on cuda: the head (%d x %d %s) and its index do not fit (%s)", V, H, dtype_get(head->type)->name,
                    cuda_status());
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
    int V = g->V, H = g->H;
    if (k < 1 || k > V) return fail(INFER_ERR_ARG, "lm_head top-k: k %d is outside 1-%d", k, V);
    if (probes > 0 && !g->C) return fail(INFER_ERR_ARG, "%s: no lm_head index (extract with --lm-index)", v->dir);
    float *hs = malloc(sizeof(float) * 2 * (size_t)k);
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)k);
    if (!hs || !hi) return free(hs), free(hi), fail(INFER_ERR_NOMEM, "out of memory");
    int bad = cuda_upload(g->d, g->x, hidden, sizeof(float) * H);
    if (probes <= 0) { // the dense head: every row, then the top k of the V scores
        bad = bad || cuda_quantize(g->d, g->head_type, g->x, 1, H, g->xq_head) || cuda_matmul(g->d, g->head_type, g->head, V, H, g->xq_head, 1, g->s) ||
              cuda_topk_max(g->d, g->s, V, NULL, k, g->pos) || cuda_lm_gather(g->d, g->pos, k, g->s, NULL, g->os, g->oid);
    } else {
        const lm_index *x = &v->lmi;
        int P = probes < g->C ? probes : g->C;
        const void *xq = g->xq_rows;
        bad = bad || cuda_quantize(g->d, x->cent_type, g->x, 1, H, g->xq_cent) ||
              cuda_matmul(g->d, x->cent_type, g->cent, g->C, H, g->xq_cent, 1, g->cs) || cuda_topk_max(g->d, g->cs, g->C, NULL, P, g->best) ||
              (xq && cuda_quantize(g->d, DT_Q8_0, g->x, 1, H, g->xq_rows)) ||
              cuda_lm_probe(g->d, x->type, g->rows, H, g->off, g->order, g->best, P, g->x, xq, g->s, g->cid, g->dn) ||
              cuda_topk_max(g->d, g->s, V, g->dn, k, g->pos) || cuda_lm_gather(g->d, g->pos, k, g->s, g->cid, g->os, g->oid);
    }
    bad = bad || cuda_download(g->d, hs, g->os, sizeof(float) * k) || cuda_download(g->d, hi, g->oid, sizeof(int32_t) * k);
    if (bad) {
        free(hs), free(hi);
        return fail(INFER_ERR_IO, "lm_head on cuda: %s", cuda_status());
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
