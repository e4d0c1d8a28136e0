// Gate KNN and the walk FFN (see walk.h).
#include "vindex/walk.h"
#include "compute/cpu/ops.h"
#include "tensor/vecdot.h"
#include "compute/cpu/vec.h"
#include "tensor/dtype.h"
#include "base/pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// Features are summed in chunks of CHUNK: each chunk's partial sum is made
// by one thread, and the partials are added in chunk order, so the result
// does not depend on the number of threads.
enum { CHUNK = 64 };

struct walk_scratch {
    int F, H;
    float *scores;       // F
    float *rank;         // F: the contribution bounds
    int32_t *idx;        // F
    int32_t *cand;       // F: the contribution ranking's candidates
    int k;
    float *partial;      // (F / CHUNK + 1) x H
    unsigned char *xq;   // x in the ffn kernel's activation type
    cpu_exec *ex;        // where it runs (the context's)
    backend be;          // the CPU backend on ex (the gate scores' product)
};

walk_scratch *walk_scratch_new(int F, int H, cpu_exec *ex) {
    walk_scratch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->F = F, w->H = H, w->ex = ex, w->be = walk_host_backend(ex);
    w->scores = malloc(sizeof(float) * (size_t)F);
    w->rank = malloc(sizeof(float) * (size_t)F);
    w->cand = malloc(sizeof(int32_t) * (size_t)F);
    w->idx = malloc(sizeof(int32_t) * (size_t)F);
    w->partial = malloc(sizeof(float) * (size_t)(F / CHUNK + 1) * H);
    w->xq = malloc(sizeof(float) * (size_t)H + 4096); // any activation type is at most f32-sized, plus group padding
    if (!w->scores || !w->rank || !w->cand || !w->idx || !w->partial || !w->xq) { walk_scratch_free(w); return NULL; }
    return w;
}

void walk_scratch_free(walk_scratch *w) {
    if (!w) return;
    free(w->scores), free(w->rank), free(w->cand), free(w->idx), free(w->partial), free(w->xq);
    free(w);
}

void gate_scores(backend *b, const tensor *g, const float *x, float *scores) {
    weight w = {.w = g, .unpacked = 1}; // (the vindex's mapped rows: not packed)
    b->ops->matmul(b, scores, x, &w, NULL, 1, (int)g->ne[0], (int)g->ne[1]);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

// by |s| (or by s), ties broken by index, so the selection is a strict order
static int before(const float *s, int absolute, int32_t a, int32_t b) {
    float x = absolute ? fabsf(s[a]) : s[a], y = absolute ? fabsf(s[b]) : s[b];
    return x > y || (x == y && a < b);
}

// idx[0..k) = the k first indices in `before` order (quickselect), ascending
static void topk(const float *s, int n, int k, int absolute, int32_t *idx) {
    for (int i = 0; i < n; i++) idx[i] = i;
    if (k < n) {
        int lo = 0, hi = n - 1;
        while (lo < hi) {
            int32_t pivot = idx[lo + (hi - lo) / 2];
            int i = lo, j = hi;
            while (i <= j) {
                while (before(s, absolute, idx[i], pivot)) i++;
                while (before(s, absolute, pivot, idx[j])) j--;
                if (i <= j) { int32_t t = idx[i]; idx[i] = idx[j]; idx[j] = t; i++, j--; }
            }
            if (k - 1 <= j) hi = j;
            else if (k - 1 >= i) lo = i;
            else break;
        }
    }
    qsort(idx, (size_t)k, sizeof *idx, cmp_i32);
}

void topk_abs(const float *s, int n, int k, int32_t *idx) { topk(s, n, k, 1, idx); }
void topk_max(const float *s, int n, int k, int32_t *idx) { topk(s, n, k, 0, idx); }

typedef struct {
    const walk_layer *l;
    walk_scratch *w;
    const vecdot_kernel *kern; // NULL: the traits' f32 dot
    const float *x;
    int H, nchunk;
    atomic_int next;
} walk_job;

static float row_dot(const walk_job *j, const void *row) {
    if (!j->kern) return dtype_get(j->l->ffn->type)->dot(row, j->x, j->H);
    return j->kern->dot(row, j->kern->act_type == DT_F32 ? (const void *)j->x : j->w->xq, j->H);
}

static void walk_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    walk_job *j = arg;
    walk_scratch *w = j->w;
    const walk_layer *l = j->l;
    size_t rs = dtype_row_size(l->ffn->type, j->H);
    const char *base = l->ffn->data;
    for (;;) {
        int c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= j->nchunk) break;
        float *y = w->partial + (size_t)c * j->H;
        memset(y, 0, sizeof(float) * (size_t)j->H);
        int e = (c + 1) * CHUNK < w->k ? (c + 1) * CHUNK : w->k;
        for (int i = c * CHUNK; i < e; i++) {
            // the selected features lie anywhere in the layer: fetch the rows
            // of the one after next while this one is computed
            if (i + 2 < e) {
                const char *nx = base + rs * 3 * (size_t)w->idx[i + 2];
                for (size_t o = 0; o < 3 * rs; o += 64) __builtin_prefetch(nx + o, 0, 0);
            }
            const char *f = base + rs * 3 * (size_t)w->idx[i];
            float a = row_dot(j, f) + (l->bias ? l->bias[w->idx[i]] : 0.0f);
            activate(&a, 1, l->act);
            if (l->gated) a *= row_dot(j, f + rs);
            vec_axpy_row(y, a, f + 2 * rs, l->ffn->type, j->H);
        }
    }
}

void walk_norms(const tensor *ffn, float *nu, float *nd) {
    int64_t F = ffn->ne[1] / 3, H = ffn->ne[0];
    const dtype_traits *tr = dtype_get(ffn->type);
    size_t rs = dtype_row_size(ffn->type, H);
    float *row = malloc(sizeof(float) * (size_t)H);
    for (int64_t f = 0; row && f < F; f++)
        for (int r = 0; r < 2; r++) {
            tr->to_float((const char *)ffn->data + rs * (size_t)(3 * f + 1 + r), row, H);
            (r ? nd : nu)[f] = (float)sqrt(vec_sumsq(row, (int)H));
        }
    if (!row) memset(nu, 0, sizeof(float) * (size_t)F), memset(nd, 0, sizeof(float) * (size_t)F); // (out of memory: no ranking)
    free(row);
}

// the exact contributions of the candidates: rank[j] = |act(g) (up . x)| |down| of feature cand[j]
typedef struct {
    const walk_layer *l;
    walk_scratch *w;
    const vecdot_kernel *kern;
    const float *x;
    int H;
} contrib_job;

static void contrib_range(void *arg, int j0, int j1) {
    const contrib_job *c = arg;
    walk_scratch *w = c->w;
    size_t rs = dtype_row_size(c->l->ffn->type, c->H);
    for (int j = j0; j < j1; j++) {
        int f = w->cand[j];
        const char *up = (const char *)c->l->ffn->data + rs * (3 * (size_t)f + 1);
        float u = c->kern ? c->kern->dot(up, c->kern->act_type == DT_F32 ? (const void *)c->x : w->xq, c->H)
                          : dtype_get(c->l->ffn->type)->dot(up, c->x, c->H);
        w->rank[j] = fabsf(w->rank[j] * u) * c->l->norm_down[f];
    }
}

void walk_ffn(const walk_layer *l, const float *x, int k, float *out, walk_scratch *w) {
    walk_ffn_ranked(l, x, k, WALK_BY_GATE, out, w);
}

void walk_ffn_ranked(const walk_layer *l, const float *x, int k, int rank, float *out, walk_scratch *w) {
    int F = (int)l->gate_vectors->ne[1], H = (int)l->ffn->ne[0];
    if (k >= F) {
        k = F;
        for (int i = 0; i < F; i++) w->idx[i] = i;
    } else if (rank == WALK_BY_CONTRIB && l->norm_up && l->norm_down) {
        gate_scores(&w->be, l->gate_vectors, x, w->scores);
        for (int i = 0; i < F; i++) w->rank[i] = w->scores[i] + (l->bias ? l->bias[i] : 0.0f);
        activate(w->rank, F, l->act);
        if (!l->gated) { // (exact already: the gate is up)
            for (int i = 0; i < F; i++) w->rank[i] = fabsf(w->rank[i]) * l->norm_down[i];
            topk_max(w->rank, F, k, w->idx);
        } else {
            int M = (int)((long long)WALK_CANDIDATES * k < F ? (long long)WALK_CANDIDATES * k : F);
            float *act = w->scores; // (the activations, kept while the bounds rank)
            for (int i = 0; i < F; i++) act[i] = w->rank[i], w->rank[i] = fabsf(act[i]) * l->norm_up[i] * l->norm_down[i];
            topk_max(w->rank, F, M, w->cand);
            for (int j = 0; j < M; j++) w->rank[j] = act[w->cand[j]];
            contrib_job cj = {l, w, vecdot_get(l->ffn->type), x, H};
            if (cj.kern && cj.kern->act_type != DT_F32) cj.kern->quant(x, w->xq, H);
            pool_for(w->ex->pool, M, 64, contrib_range, &cj);
            topk_max(w->rank, M, k, w->idx);
            for (int j = 0; j < k; j++) w->idx[j] = w->cand[w->idx[j]]; // (ascending: both orders are)
        }
    } else {
        gate_scores(&w->be, l->gate_vectors, x, w->scores);
        topk_abs(w->scores, F, k, w->idx);
    }
    w->k = k;
    walk_job j = {l, w, vecdot_get(l->ffn->type), x, H, (k + CHUNK - 1) / CHUNK, 0};
    if (j.kern && j.kern->act_type != DT_F32) j.kern->quant(x, w->xq, H);
    atomic_init(&j.next, 0);
    if (j.nchunk == 1) walk_task(&j, 0, 1);
    else pool_run(w->ex->pool, walk_task, &j);
    memcpy(out, w->partial, sizeof(float) * (size_t)H);
    for (int c = 1; c < j.nchunk; c++) vec_axpy(out, 1.0f, w->partial + (size_t)c * H, H);
    if (l->down_bias) vec_axpy(out, 1.0f, l->down_bias, H);
}

const int32_t *walk_selected(const walk_scratch *w, int *k) {
    *k = w->k;
    return w->idx;
}
