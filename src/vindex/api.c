// The vindex part of the public API (infer.h): opening, verifying and
// extracting a vindex, walk queries on a model's vindex, gate KNN on its own,
// and lm_head top-K.
#include "vindex/vindex.h"
#include "vindex/extract.h"
#include "vindex/walk.h"
#include "vindex/lm_index.h"
#include "models/model.h"
#include "tensor/dtype.h"
#include "compute/cpu/ops.h"
#include "base/pool.h"
#include "base/error.h"
#include "compute/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// The vindex as a handle

infer_status infer_vindex_verify(const char *dir) { return vindex_verify(dir); }
infer_status infer_vindex_open(const char *dir, infer_vindex **out) { return vindex_open(dir, out); }
void infer_vindex_close(infer_vindex *vx) { vindex_close(vx); }
int infer_vindex_n_layer(const infer_vindex *vx) { return vindex_n_layer(vx); }
int infer_vindex_n_features(const infer_vindex *vx, int layer) { return vindex_n_features(vx, layer); }

int infer_vindex_feature_tokens(const infer_vindex *vx, int layer, int feature, const int32_t **ids, const float **scores) {
    return vindex_down_meta(vx, layer, feature, ids, scores);
}

infer_extract_opts infer_extract_default(void) {
    infer_extract_opts o;
    vindex_extract_defaults(&o);
    return o;
}

infer_status infer_vindex_extract(const infer_model *m, const char *dir, const infer_extract_opts *o, infer_extract_info *info) {
    return vindex_extract(m, dir, o, info);
}

// ---------------------------------------------------------------------------
// Walk queries

static int by_abs_score(const void *a, const void *b) {
    const infer_feature *x = a, *y = b;
    float u = fabsf(x->score), v = fabsf(y->score);
    if (u != v) return (u < v) - (u > v);
    return (x->id > y->id) - (x->id < y->id);
}

infer_status infer_walk_features(const infer_model *m, int layer, const float *x, int k, infer_feature *out) {
    if (!m->walk) return fail(INFER_ERR_ARG, "walk queries need a vindex (attach one, or load the model from one)");
    if (layer < 0 || layer >= m->cfg.n_layer) return fail(INFER_ERR_ARG, "layer %d is outside 0-%d", layer, m->cfg.n_layer - 1);
    const walk_layer *l = &m->walk[layer];
    int F = (int)l->gate_vectors->ne[1], H = m->cfg.n_embd;
    if (k < 1 || k > F) return fail(INFER_ERR_ARG, "%d features asked of layer %d, which has %d", k, layer, F);
    float *scores = malloc(sizeof(float) * (size_t)F);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)F);
    cpu_exec ex = {0}; // one thread: one token, a layer at a time
    backend hb = walk_host_backend(&ex);
    if (scores && idx) gate_scores(&hb, l->gate_vectors, x, scores);
    int oom = !scores || !idx || ex.oom;
    cpu_exec_release(&ex);
    if (oom) {
        free(scores), free(idx);
        return fail(INFER_ERR_NOMEM, "out of memory for the gate scores of %d features", F);
    }
    topk_abs(scores, F, k, idx);
    for (int j = 0; j < k; j++) out[j] = (infer_feature){.id = idx[j], .score = scores[idx[j]]};
    qsort(out, (size_t)k, sizeof *out, by_abs_score);
    // the activation from the feature's own rows: gate row 3f, up row 3f + 1
    const dtype_traits *tr = dtype_get(l->ffn->type);
    size_t rs = dtype_row_size(l->ffn->type, H);
    for (int j = 0; j < k; j++) {
        const char *rows = (const char *)l->ffn->data + rs * 3 * (size_t)out[j].id;
        float a = tr->dot(rows, x, H);
        activate(&a, 1, l->act);
        if (l->gated) a *= tr->dot(rows + rs, x, H);
        out[j].act = a;
        out[j].down = l->norm_down ? l->norm_down[out[j].id] : 0.0f;
    }
    free(scores), free(idx);
    return INFER_OK;
}

// ---------------------------------------------------------------------------
// Gate KNN on its own

struct infer_knn {
    tensor gate;  // [n, n_embd] in its type
    void *data;   // the encoded rows
    pool *pool;   // threads of the scores
    cpu_exec ex;
    float *s;     // (n) host scores for infer_knn_topk
    backend be;   // on a GPU (infer_knn_set_device): the device backend (ops NULL: none), its copy of the vectors this KNN's
    cpu_exec dex; // (its failure flag)
};

infer_status infer_knn_new(int type, const float *rows, int n, int n_embd, infer_knn **out) {
    *out = NULL;
    const dtype_traits *tr = dtype_get(type);
    if (type != DT_F32 && type != DT_F16 && type != DT_Q4_0)
        return fail(INFER_ERR_ARG, "gate KNN: type %d is not f32, f16 or q4_0", type);
    if (n < 1 || n_embd < 1 || n_embd % tr->blck)
        return fail(INFER_ERR_ARG, "gate KNN: %d x %d gate vectors (rows must be whole %s blocks of %d)", n, n_embd, tr->name,
                    tr->blck);
    infer_knn *k = calloc(1, sizeof *k);
    size_t bytes = dtype_row_size(type, n_embd) * (size_t)n;
    if (!k || !(k->data = malloc(bytes))) {
        free(k);
        return fail(INFER_ERR_NOMEM, "out of memory for %d x %d gate vectors", n, n_embd);
    }
    tr->from_float(rows, k->data, (int64_t)n * n_embd);
    k->gate = (tensor){.name = "gate", .type = type, .type_name = tr->name, .nd = 2, .ne = {n_embd, n}, .data = k->data,
                       .nbytes = bytes};
    k->pool = pool_new(1); // NULL (no memory for threads): the caller alone
    k->ex.pool = k->pool;
    *out = k;
    return INFER_OK;
}

infer_status infer_knn_set_threads(infer_knn *k, int n) {
    if (n < 1 || n > 4096) return fail(INFER_ERR_ARG, "gate KNN: thread count %d is outside 1-4096", n);
    pool *p = pool_new(n);
    if (!p) return fail(INFER_ERR_NOMEM, "out of memory for %d threads", n);
    cpu_exec_release(&k->ex);
    pool_free(k->pool);
    k->pool = k->ex.pool = p;
    return INFER_OK;
}

static void knn_release_device(infer_knn *k) {
    if (k->be.ops && k->be.ops->done) k->be.ops->done(&k->be);
    k->be = (backend){0};
}

infer_status infer_knn_set_device(infer_knn *k, const char *device) {
    if (!device || !strcmp(device, "cpu")) {
        knn_release_device(k);
        return INFER_OK;
    }
    if (strcmp(device, "cuda")) return fail(INFER_ERR_ARG, "gate KNN: unknown device \"%s\" (cpu, cuda)", device);
    if (k->be.ops) return INFER_OK;
    int n = (int)k->gate.ne[1], H = (int)k->gate.ne[0];
    const backend_ops *ops = backend_cuda();
    if (!ops) return fail(INFER_ERR_UNSUPPORTED, "gate KNN on cuda: %s", backend_gpu_status());
    k->be = (backend){.ops = ops, .ex = &k->dex, .owner = k};
    float *z = calloc((size_t)H, sizeof(float));
    int32_t i0;
    int bad = !z || ops->knn(&k->be, &k->gate, z, 1, &i0, NULL); // (the vectors go up now, or the reason they cannot is told here)
    free(z);
    if (bad) {
        knn_release_device(k);
        return fail(INFER_ERR_NOMEM, "gate KNN on cuda: no device memory for %d x %d gate vectors (%s)", n, H, backend_gpu_status());
    }
    return INFER_OK;
}

infer_status infer_knn_topk(infer_knn *k, const float *x, int kk, int32_t *idx) {
    int n = (int)k->gate.ne[1];
    if (kk < 1 || kk > n) return fail(INFER_ERR_ARG, "gate KNN: top %d of %d vectors", kk, n);
    if (k->be.ops) {
        if (k->be.ops->knn(&k->be, &k->gate, x, kk, idx, NULL)) return fail(INFER_ERR_NOMEM, "gate KNN on cuda: %s", backend_gpu_status());
        return INFER_OK;
    }
    if (!k->s && !(k->s = malloc(sizeof(float) * (size_t)n))) return fail(INFER_ERR_NOMEM, "out of memory for %d scores", n);
    backend hb = walk_host_backend(&k->ex);
    gate_scores(&hb, &k->gate, x, k->s);
    topk_abs(k->s, n, kk, idx);
    return INFER_OK;
}

void infer_knn_free(infer_knn *k) {
    if (!k) return;
    knn_release_device(k);
    free(k->s);
    cpu_exec_release(&k->ex);
    pool_free(k->pool);
    free(k->data);
    free(k);
}

size_t infer_knn_bytes(const infer_knn *k) { return k->gate.nbytes; }
void infer_knn_scores(infer_knn *k, const float *x, float *scores) {
    if (k->be.ops && !k->be.ops->knn(&k->be, &k->gate, x, 0, NULL, scores)) return;
    backend hb = walk_host_backend(&k->ex);
    gate_scores(&hb, &k->gate, x, scores); // (the CPU's, also when the GPU failed)
}
void infer_topk_abs(const float *s, int n, int k, int32_t *idx) { topk_abs(s, n, k, idx); }
void infer_topk_max(const float *s, int n, int k, int32_t *idx) { topk_max(s, n, k, idx); }

// ---------------------------------------------------------------------------
// lm_head top-K

infer_status infer_lm_head_topk(const infer_model *m, const float *hidden, int k, int32_t *ids) {
    int V = m->cfg.n_vocab, E = m->cfg.n_embd;
    if (!m->vx) return fail(INFER_ERR_ARG, "lm_head top-K needs a vindex (attach one, or load the model from one)");
    if (k < 1 || k > V) return fail(INFER_ERR_ARG, "lm_head top-K: k %d is outside 1-%d", k, V);
    float *logits = malloc(sizeof(float) * (size_t)V);
    if (!logits) return fail(INFER_ERR_NOMEM, "out of memory for %d logits", V);
    weight head = {.w = vindex_lm_head(m->vx), .unpacked = 1}; // (the vindex's mapped rows: not packed)
    cpu_exec ex = {.pool = pool_new(model_threads(m))};
    backend hb = walk_host_backend(&ex);
    hb.ops->matmul(&hb, logits, hidden, &head, NULL, 1, E, V);
    int oom = ex.oom;
    cpu_exec_release(&ex);
    pool_free(ex.pool);
    if (!oom) topk_max(logits, V, k, ids);
    free(logits);
    return oom ? fail(INFER_ERR_NOMEM, "out of memory for the lm_head's scratch") : INFER_OK;
}

infer_status infer_lm_head_topk_index(const infer_model *m, const float *hidden, int k, int probes, int32_t *ids) {
    const lm_index *x = m->vx ? vindex_lm_index(m->vx) : NULL;
    if (!x) return fail(INFER_ERR_ARG, "the lm_head index needs a vindex extracted with one (infer extract --lm-index)");
    (void)x;
    return vindex_lm_topk(m->vx, hidden, k, probes, model_threads(m), ids);
}

infer_status infer_lm_head_index_logits(const infer_model *m, const float *hidden, int k, int probes, int32_t *ids, float *logits) {
    infer_status st = infer_lm_head_topk_index(m, hidden, k, probes, ids);
    if (st) return st;
    st = infer_lm_head_logits(m, hidden, ids, k, logits); // (times the logit scale)
    float cap = m->cfg.final_softcap;
    for (int i = 0; !st && cap && i < k; i++) logits[i] = cap * tanhf(logits[i] / cap);
    return st;
}

int infer_lm_head_index_clusters(const infer_model *m) {
    const lm_index *x = m->vx ? vindex_lm_index(m->vx) : NULL;
    return x ? x->C : 0;
}

infer_status infer_lm_head_dense(const infer_model *m, const float *hidden, float *logits) {
    if (!m->output.w) return fail(INFER_ERR_ARG, "the model has no output head");
    infer_status st = model_ensure_packed((infer_model *)m);
    if (st) return st;
    cpu_exec ex = {.pool = pool_new(model_threads(m))};
    backend hb = walk_host_backend(&ex);
    hb.ops->matmul(&hb, logits, hidden, &m->output, NULL, 1, m->cfg.n_embd, m->cfg.n_vocab);
    int oom = ex.oom;
    cpu_exec_release(&ex);
    pool_free(ex.pool);
    return oom ? fail(INFER_ERR_NOMEM, "out of memory for the lm_head's scratch") : INFER_OK;
}

infer_status infer_lm_head_set_device(infer_model *m, const char *device) {
    if (!m->vx) return fail(INFER_ERR_ARG, "the lm_head on a device needs a vindex (attach one, or load the model from one)");
    if (!m->output.w) return fail(INFER_ERR_ARG, "the model has no output head");
    return vindex_lm_set_device(m->vx, m->output.w, device);
}

infer_status infer_lm_head_topk_dense(const infer_model *m, const float *hidden, int k, int32_t *ids) {
    int V = m->cfg.n_vocab;
    if (k < 1 || k > V) return fail(INFER_ERR_ARG, "lm_head top-k: k %d is outside 1-%d", k, V);
    if (m->vx && vindex_lm_on_device(m->vx)) return vindex_lm_device_topk(m->vx, hidden, k, 0, ids);
    float *logits = malloc(sizeof(float) * (size_t)V), *sc = malloc(sizeof(float) * (size_t)k);
    if (!logits || !sc) return free(logits), free(sc), fail(INFER_ERR_NOMEM, "out of memory for %d logits", V);
    infer_status st = infer_lm_head_dense(m, hidden, logits);
    int n = 0;
    for (int t = 0; !st && t < V; t++) topk_insert(sc, ids, &n, k, logits[t], t);
    for (int t = 0; !st && n < k; t++) { // (NaN logits: the lowest other ids)
        int in = 0;
        for (int i = 0; i < n && !in; i++) in = ids[i] == t;
        if (!in) ids[n++] = t;
    }
    free(logits), free(sc);
    return st;
}

infer_status infer_lm_head_logits(const infer_model *m, const float *hidden, const int32_t *ids, int n, float *logits) {
    const tensor *w = m->output.w;
    int V = m->cfg.n_vocab, E = m->cfg.n_embd;
    if (!w) return fail(INFER_ERR_ARG, "the model has no output head");
    const dtype_traits *tr = dtype_get(w->type);
    size_t rs = dtype_row_size(w->type, E);
    for (int j = 0; j < n; j++) {
        if (ids[j] < 0 || ids[j] >= V) return fail(INFER_ERR_ARG, "token id %d is outside the vocabulary (%d)", ids[j], V);
        logits[j] = tr->dot((const char *)w->data + rs * (size_t)ids[j], hidden, E) * m->cfg.logit_scale;
    }
    return INFER_OK;
}
