// The CPU backend: the SIMD kernels (chosen at run time), threaded over the
// context's pool. Element-wise work over many tokens is split by rows, each
// row computed as it would be alone, so batches equal token-by-token runs.
#include "compute/backend.h"
#include "compute/cpu/attn.h"
#include "compute/cpu/vec.h"
#include "base/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PAR_ROWS = 4, PAR_ELEMS = 8192 };

static void cpu_matmul(backend *b, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    matmul(b->ex, y, x, w, bias, T, n_in, n_out);
}

static void cpu_matmul_multi(backend *b, int n, float *const *y, const float *x, const weight *const *w,
                             const float *const *bias, int T, int n_in, const int *n_out) {
    matmul_multi(b->ex, n, y, x, w, bias, T, n_in, n_out);
}

typedef struct { float *out; const float *x, *w, *b; int n, kind; float eps; } norm_job;
static void norm_range(void *a, int i0, int i1) {
    norm_job *j = a;
    float *o = j->out + (size_t)i0 * j->n;
    const float *x = j->x + (size_t)i0 * j->n;
    if (j->kind == NORM_OP_LAYER) layernorm(o, x, j->w, j->b, i1 - i0, j->n, j->eps);
    else rmsnorm(o, x, j->w, i1 - i0, j->n, j->eps, j->kind == NORM_OP_RMS_PLUS_ONE);
}
static void cpu_norm(backend *b, float *out, const float *x, const float *w, const float *bias, int rows, int n, float eps,
                     int kind) {
    norm_job j = {out, x, w, bias, n, kind, eps};
    pool_for(b->ex->pool, rows, PAR_ROWS, norm_range, &j);
}

typedef struct { float *x; int heads, hd; const int *pos; const rope_table *r; } rope_job;
static void rope_range(void *a, int t0, int t1) {
    rope_job *j = a;
    for (int t = t0; t < t1; t++) rope(j->x + (size_t)t * j->heads * j->hd, j->heads, j->hd, j->pos[t], j->r);
}
static void cpu_rope(backend *b, float *x, int rows, int heads, int hd, const int *pos, const rope_table *r) {
    rope_job j = {x, heads, hd, pos, r};
    pool_for(b->ex->pool, rows, PAR_ROWS, rope_range, &j);
}

typedef struct { float *g; const float *u; int n, act, ggml; } glu_job;
static void glu_range(void *a, int i0, int i1) {
    glu_job *j = a;
    float *g = j->g + (size_t)i0 * j->n;
    size_t n = (size_t)(i1 - i0) * j->n;
    if (j->ggml) activate_ggml(g, (int)n, j->act);
    else activate(g, (int)n, j->act);
    if (j->u)
        for (size_t i = 0; i < n; i++) g[i] *= j->u[(size_t)i0 * j->n + i];
}
static void cpu_glu(backend *b, float *g, const float *u, int rows, int n, int act, int ggml) {
    glu_job j = {g, u, n, act, ggml};
    pool_for(b->ex->pool, rows, PAR_ROWS, glu_range, &j);
}
static void cpu_act(backend *b, float *x, int rows, int n, int act, int ggml) { cpu_glu(b, x, NULL, rows, n, act, ggml); }

typedef struct { float *x; const float *o; float s; int n; } resid_job;
static void resid_range(void *a, int i0, int i1) {
    resid_job *j = a;
    for (size_t i = (size_t)i0 * j->n; i < (size_t)i1 * j->n; i++) j->x[i] += j->o[i] * j->s;
}
static void cpu_residual(backend *b, float *x, const float *o, float s, int rows, int n) {
    resid_job j = {x, o, s, n};
    pool_for(b->ex->pool, rows, PAR_ROWS, resid_range, &j);
}

typedef struct { float *x; size_t n; } round_job;
static void round_range(void *a, int i0, int i1) {
    round_job *j = a;
    size_t s = (size_t)i0 * PAR_ELEMS, e = (size_t)i1 * PAR_ELEMS < j->n ? (size_t)i1 * PAR_ELEMS : j->n;
    vec_round_f16(j->x + s, e - s);
}
static void cpu_round_f16(backend *b, float *x, size_t n) {
    round_job j = {x, n};
    pool_for(b->ex->pool, (int)((n + PAR_ELEMS - 1) / PAR_ELEMS), 1, round_range, &j);
}

static void cpu_softmax(backend *b, float *x, int n) { (void)b; softmax(x, n); }

// ---------------------------------------------------------------------------
// attention: one task per (block, kv head), which reads that head's cached
// keys and values once for all the query heads of its group. Keys and
// values are met in chunks of ATTN_CHUNK positions, which stay in the L1
// cache while every query token of the block uses them.

enum { ATTN_CHUNK = 16 };

static void attn_task(void *arg, int ith, int nth) {
    const attn_desc *d = arg;
    int H = d->H, KV = d->KV, hd = d->hd, group = H / KV, nq = H * hd, nkv = KV * hd, stride = d->stride;
    // this thread's scores: (B tokens, group heads, stride), row r of token b at S + (b * group + r) * stride
    float *S = d->scores + (size_t)ith * d->B * group * stride;
    for (int task = ith; task < d->n_blk * KV; task += nth) {
        int t0 = d->blk0[task / KV], kh = task % KV, nt = d->blk_n[task / KV];
        int lo[8], hi[8], p0 = INT32_MAX, p1 = 0;
        for (int b = 0; b < nt; b++) { // token b sees positions [lo, hi] of the cache
            hi[b] = d->pos[t0 + b];
            lo[b] = d->window && hi[b] - d->window + 1 > 0 ? hi[b] - d->window + 1 : 0;
            p0 = lo[b] < p0 ? lo[b] : p0;
            p1 = hi[b] > p1 ? hi[b] : p1;
        }
        // this head's keys and values: rows of the caches' types, ks and vs bytes apart
        size_t ks = kv_bytes(d->kt, (size_t)nkv), vs = kv_bytes(d->vt, (size_t)nkv);
        const char *kh_k = (const char *)d->k[t0] + kv_bytes(d->kt, (size_t)kh * hd);
        const char *kh_v = (const char *)d->v[t0] + kv_bytes(d->vt, (size_t)kh * hd);
        // scores, a chunk of keys at a time for all the tokens
        for (int c0 = p0; c0 <= p1; c0 += ATTN_CHUNK)
            for (int b = 0; b < nt; b++) {
                int a0 = c0 > lo[b] ? c0 : lo[b], a1 = c0 + ATTN_CHUNK - 1 < hi[b] ? c0 + ATTN_CHUNK - 1 : hi[b];
                if (a0 > a1) continue;
                const float *q = d->q + (size_t)(t0 + b) * nq + (size_t)kh * group * hd;
                attn_scores(q, group, hd, kh_k + (size_t)a0 * ks, d->kt, ks, a1 - a0 + 1, d->scale,
                            S + (size_t)b * group * stride + (a0 - lo[b]), stride);
            }
        for (int b = 0; b < nt; b++) {
            int n = hi[b] - lo[b] + 1;
            for (int g = 0; g < group; g++) {
                float *s = S + (size_t)(b * group + g) * stride;
                if (d->softcap) softcap(s, n, d->softcap);
                if (d->sinks) {
                    s[n] = d->sinks[kh * group + g];
                    softmax(s, n + 1); // the sink takes its share, then is dropped
                } else {
                    softmax(s, n);
                }
                if (d->ggml_numerics) vec_round_f16(s, (size_t)n); // ggml multiplies V by f16 probabilities
            }
            memset(d->out + (size_t)(t0 + b) * nq + (size_t)kh * group * hd, 0, sizeof(float) * (size_t)group * hd);
        }
        // o += probabilities v, a chunk of values at a time for all the tokens
        for (int c0 = p0; c0 <= p1; c0 += ATTN_CHUNK)
            for (int b = 0; b < nt; b++) {
                int a0 = c0 > lo[b] ? c0 : lo[b], a1 = c0 + ATTN_CHUNK - 1 < hi[b] ? c0 + ATTN_CHUNK - 1 : hi[b];
                if (a0 > a1) continue;
                attn_mix(S + (size_t)b * group * stride + (a0 - lo[b]), stride, group, a1 - a0 + 1, kh_v + (size_t)a0 * vs, d->vt,
                         vs, hd, d->out + (size_t)(t0 + b) * nq + (size_t)kh * group * hd);
            }
    }
}

static void cpu_attention(backend *b, const attn_desc *d) { pool_run(b->ex->pool, attn_task, (void *)d); }

void *backend_host_alloc(backend *b, size_t bytes) {
    (void)b;
    size_t n = (bytes + 63) & ~(size_t)63; // aligned_alloc wants a multiple of the alignment
    void *p = aligned_alloc(64, n ? n : 64);
    if (p) memset(p, 0, n);
    return p;
}

void backend_host_release(backend *b, void *p) { (void)b; free(p); }

const backend_ops backend_cpu_ops = {
    .name = "cpu",
    .matmul = cpu_matmul,
    .matmul_multi = cpu_matmul_multi,
    .norm = cpu_norm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .act = cpu_act,
    .glu = cpu_glu,
    .residual = cpu_residual,
    .round_f16 = cpu_round_f16,
    .softmax = cpu_softmax,
    .alloc = backend_host_alloc,
    .release = backend_host_release,
    HOST_DATA_OPS,
    .host = 1,
};

const backend_ops *backend_find(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, backend_cpu_ops.name)) return &backend_cpu_ops;
    if (!strcmp(name, backend_ref_ops.name)) return &backend_ref_ops;
    if (!strcmp(name, "cuda")) return backend_cuda();
    return NULL;
}
