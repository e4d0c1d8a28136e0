// The vindex's lookups on the CUDA backend (backend.h's knn and lm_topk):
// the gate KNN's scores and top k, and the lm_head's top k over the whole
// head or over the best clusters of its index. The matrices are the host's
// tensors, uploaded on first use and found by address (the backend's owner is
// the vindex or the KNN: its copies live as long as it does); x comes up and
// the results come back through the backend's own scratch.
#ifdef INFER_HAVE_CUDA
#include "compute/cuda/backend_cuda.h"
#include "tensor/dtype.h"

#include <string.h>

// The scratch carved in 16-byte parts, each part's size in bytes; NULL when it cannot grow.
static char *carve(cuda_state *s, const size_t *sizes, int n, char **parts) {
    size_t at[16], total = 0;
    for (int i = 0; i < n; i++) at[i] = total, total += (sizes[i] + 15) & ~(size_t)15;
    char *base = cu_scratch(s, &s->vx, &s->vx_cap, total ? total : 16);
    for (int i = 0; base && i < n; i++) parts[i] = base + at[i];
    return base;
}

int cu_knn(backend *b, const tensor *gate, const float *x, int k, int32_t *idx, float *scores) {
    cuda_state *s = cu_state_flushed(b);
    int n = (int)gate->ne[1], H = (int)gate->ne[0];
    char *p[3];
    if (!s || !carve(s, (size_t[]){sizeof(float) * (size_t)H, sizeof(float) * (size_t)n, sizeof(int) * (size_t)n}, 3, p)) return -1;
    float *dx = (float *)p[0], *ds = (float *)p[1];
    const void *dw = cu_dev_weight(b, gate, H, n), *xq;
    if (!dw || cuda_upload(s->d, dx, x, sizeof(float) * (size_t)H) || !(xq = cu_act_in(s, gate->type, dx, 1, H)) ||
        cuda_matmul(s->d, gate->type, dw, n, H, xq, 1, ds))
        return -1;
    if (!k) return cuda_download(s->d, scores, ds, sizeof(float) * (size_t)n);
    return cuda_topk_abs(s->d, ds, n, k, (int *)p[2]) || cuda_download(s->d, idx, p[2], sizeof(int32_t) * (size_t)k);
}

int cu_lm_topk(backend *b, const lm_topk_desc *d, const float *x, int k, int probes, float *scores, int32_t *ids) {
    cuda_state *s = cu_state_flushed(b);
    const tensor *head = d->head;
    int V = (int)head->ne[1], H = (int)head->ne[0], C = d->clusters, P = probes < C ? probes : C;
    if (!s || k < 1 || k > V || (probes > 0 && !C)) return -1;
    enum { X, S, POS, OS, OID, CS, BEST, CID, DN, XQ, N_PARTS };
    size_t sz[N_PARTS] = {sizeof(float) * (size_t)H, sizeof(float) * (size_t)V, sizeof(int) * (size_t)V, sizeof(float) * (size_t)k,
                          sizeof(int) * (size_t)k, sizeof(float) * (size_t)C, sizeof(int) * (size_t)C, sizeof(int) * (size_t)V,
                          sizeof(int), cuda_act_row_size(DT_Q8_0, H)};
    char *p[N_PARTS];
    if (!carve(s, sz, N_PARTS, p)) return -1;
    float *dx = (float *)p[X], *ds = (float *)p[S];
    if (cuda_upload(s->d, dx, x, sizeof(float) * (size_t)H)) return -1;
    const int *cid = NULL;
    if (probes <= 0) { // the dense head: every row, then the top k of the V scores
        const void *dw = cu_dev_weight(b, head, H, V), *xq = dw ? cu_act_in(s, head->type, dx, 1, H) : NULL;
        if (!xq || cuda_matmul(s->d, head->type, dw, V, H, xq, 1, ds) || cuda_topk_max(s->d, ds, V, NULL, k, (int *)p[POS])) return -1;
    } else { // the centroids' scores, the best P clusters' rows, the top k of those
        const void *dc = cu_dev_weight(b, d->cent, H, C), *rows = cu_dev_of(b, d->rows, d->row_bytes * (size_t)V);
        const void *off = cu_dev_of(b, d->off, sizeof(uint32_t) * ((size_t)C + 1)), *order = cu_dev_of(b, d->order, sizeof(int32_t) * (size_t)V);
        const void *xc = dc ? cu_act_in(s, d->cent->type, dx, 1, H) : NULL, *xr = d->row_type == DT_Q8_0 ? p[XQ] : NULL;
        if (!xc || !rows || !off || !order || cuda_matmul(s->d, d->cent->type, dc, C, H, xc, 1, (float *)p[CS]) ||
            cuda_topk_max(s->d, (float *)p[CS], C, NULL, P, (int *)p[BEST]) || (xr && cuda_quantize(s->d, DT_Q8_0, dx, 1, H, p[XQ])) ||
            cuda_lm_probe(s->d, d->row_type, rows, H, off, order, (int *)p[BEST], P, dx, xr, ds, (int *)p[CID], (int *)p[DN]) ||
            cuda_topk_max(s->d, ds, V, (int *)p[DN], k, (int *)p[POS]))
            return -1;
        cid = (const int *)p[CID];
    }
    return cuda_lm_gather(s->d, (int *)p[POS], k, ds, cid, (float *)p[OS], (int *)p[OID]) ||
           cuda_download(s->d, scores, p[OS], sizeof(float) * (size_t)k) || cuda_download(s->d, ids, p[OID], sizeof(int32_t) * (size_t)k);
}

#else
typedef int backend_vindex_unused; // (ISO C wants a declaration in every file)
#endif
