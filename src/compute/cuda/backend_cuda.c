// The CUDA backend (backend.h's seam on an NVIDIA GPU): the context's KV
// cache and scratch in device memory, every layer operation a kernel of the
// CUDA layer (cuda.h; a kernel family a .cu file) on the device's stream.
//
// Weights come as the model's host tensors; each is uploaded the first time
// an operation meets it (matrices in the products' layout) and then found by
// its host address (a hash map shared by every context of the model: one
// copy of the weights however many sequences run), so the forward pass is
// the CPU's. Operations wait and join where a fused kernel covers them (a
// norm, the residual and the next norm with the quantization; gate and up
// with their activation; q/k/v's norms, RoPE and cache rows), and a one-token
// pass is captured as a CUDA graph and replayed.
#ifdef INFER_HAVE_CUDA
#include "compute/backend.h"
#include "compute/cpu/ops.h"
#include "compute/cuda/backend_cuda.h"
#include "tensor/dtype.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const void *host;
    void *dev;
} dev_entry;

// The device copies of one model's weights (found by host address), shared
// by the model's contexts: made by the first, freed with the last.
struct wstore {
    const void *owner;
    int refs;
    pthread_mutex_t mu;
    dev_entry *map;              // open addressing on the host address
    size_t cap, n;
    struct wstore *next;
};
static pthread_mutex_t g_stores_mu = PTHREAD_MUTEX_INITIALIZER;
static wstore *g_stores;

static wstore *store_get(const void *owner) {
    pthread_mutex_lock(&g_stores_mu);
    wstore *w = owner ? g_stores : NULL;
    while (w && w->owner != owner) w = w->next;
    if (!w && (w = calloc(1, sizeof *w))) {
        w->owner = owner;
        pthread_mutex_init(&w->mu, NULL);
        if (owner) w->next = g_stores, g_stores = w;
    }
    if (w) w->refs++;
    pthread_mutex_unlock(&g_stores_mu);
    return w;
}

static void store_put(wstore *w, cuda_dev *d) {
    if (!w) return;
    pthread_mutex_lock(&g_stores_mu);
    int last = --w->refs == 0;
    if (last)
        for (wstore **p = &g_stores; *p; p = &(*p)->next)
            if (*p == w) { *p = w->next; break; }
    pthread_mutex_unlock(&g_stores_mu);
    if (!last) return;
    for (size_t i = 0; i < w->cap; i++)
        if (w->map[i].host) cuda_free(d, w->map[i].dev);
    free(w->map);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

enum {
    GEMM_MIN_ROWS = 32, // (a run of fewer rows: the per-row kernel)
    FLASH_MIN = 1024,   // (a run whose rows see this many keys: flash attention where it takes the cache, heads of up to 128)
    SPLIT_MIN = 512,    // (a single row that sees more positions than this: split attention)
};

// The rows a .. a + n in groups of the rows the scores hold (one after
// another on the stream: each group reuses them): the rows that are each
// their sequence's only one with their positions split over blocks, the
// others through the per-row kernel.
static int attention_rows(cuda_state *s, int a, int n, int wtype, void *xq) {
    const size_t nq = (size_t)s->at.H * s->at.hd, xr = xq ? cuda_act_row_size(wtype, (int)nq) : 0;
    const void *const *tab = (const void *const *)s->at.tab;
    const int split = s->split_z > 0 && cuda_attention_split_ok(s->d, s->at.H, s->at.KV, s->at.hd), w = s->at.window;
#define SPLIT_ROW(t) (split && s->single[t] && (!w || w > s->split_min)) // (a window's rows see at most it)
    for (int g = a; g < a + n; g += s->at.group) {
        const int ge = a + n - g < s->at.group ? a + n : g + s->at.group;
        for (int t = g, e; t < ge; t = e) { // (a stretch of split rows, or of the others)
            const int one = SPLIT_ROW(t);
            for (e = t + 1; e < ge && SPLIT_ROW(e) == one;) e++;
            const int m = e - t;
            uint8_t *xt = xq ? (uint8_t *)xq + xr * t : NULL;
            float *sc = s->at.sc + (size_t)(t - g) * s->at.H * s->at.stride;
            int rc = one ? cuda_attention_split(s->d, s->at.q + t * nq, s->at.out + t * nq, m, s->at.H, s->at.KV, s->at.hd, s->at.window,
                                                s->at.pos + t, tab + t, tab + s->at.T + t, s->at.scale, s->at.softcap, s->at.sinks,
                                                s->at.ggml, sc, s->at.stride, wtype, xt, s->at.kv16, s->split_z)
                         : cuda_attention_kv(s->d, s->at.q + t * nq, s->at.out + t * nq, m, s->at.H, s->at.KV, s->at.hd, s->at.window,
                                             s->at.pos + t, tab + t, tab + s->at.T + t, s->at.scale, s->at.softcap, s->at.sinks,
                                             s->at.ggml, sc, s->at.stride, wtype, xt, s->at.decode, s->at.kv16);
            if (rc) return rc;
        }
    }
#undef SPLIT_ROW
    return 0;
}

// A whole prompt's pass whose runs go through cuBLAS or flash attention
// (neither keeps every row's scores: any depth goes in one launch).
static int attention_fast(const cuda_state *s, int hd, int ggml, int kv16) {
    return (s->att_gemm && cuda_attention_gemm_ok(s->d, ggml, kv16)) || (s->flash_min > 0 && cuda_attention_flash_ok(hd, ggml, kv16));
}

static int attention_run(cuda_state *s, int wtype, void *xq) {
    s->at.on = 0;
    const int whole = !s->at.decode && s->at.T == s->pass_T;
    const int flash = whole && s->flash_min > 0 && cuda_attention_flash_ok(s->at.hd, s->at.ggml, s->at.kv16);
    const int gemm = whole && s->att_gemm && cuda_attention_gemm_ok(s->d, s->at.ggml, s->at.kv16);
    if (!flash && !gemm) return attention_rows(s, 0, s->at.T, wtype, xq);
    // a run of one sequence's rows at a time
    const size_t nq = (size_t)s->at.H * s->at.hd, xr = xq ? cuda_act_row_size(wtype, (int)nq) : 0;
    for (int i = 0; i < s->n_run; i++) {
        const int a = s->run0[i], n = s->run0[i + 1] - a;
        uint8_t *xb = xq ? (uint8_t *)xq + xr * a : NULL;
        int keys = 0; // (the most any row of the run sees)
        for (int t = a; t < a + n; t++) {
            const int p = s->pos_h[t], k = s->at.window && s->at.window < p + 1 ? s->at.window : p + 1;
            keys = k > keys ? k : keys;
        }
        int rc;
        if (n >= GEMM_MIN_ROWS && flash && keys >= s->flash_min && (s->flash_set || s->at.hd <= 128))
            rc = cuda_attention_flash(s->d, s->at.q + a * nq, s->at.out + a * nq, n, s->at.H, s->at.KV, s->at.hd, s->at.window,
                                      s->at.pos + a, s->at.k0[i], s->at.v0[i], s->at.scale, s->at.softcap, s->at.sinks, s->at.ggml,
                                      wtype, xb, s->at.kv16);
        else if (n >= GEMM_MIN_ROWS && gemm)
            rc = cuda_attention_gemm(s->d, s->at.q + a * nq, s->at.out + a * nq, n, s->at.H, s->at.KV, s->at.hd, s->at.window,
                                     s->at.pos + a, s->pos_h + a, s->at.k0[i], s->at.v0[i], s->at.scale, s->at.softcap, s->at.sinks,
                                     s->at.ggml, wtype, xb, s->at.kv16);
        else
            rc = attention_rows(s, a, n, wtype, xq);
        if (rc) return rc;
    }
    return 0;
}

// The waiting operations, launched (every operation but one that joins them
// calls this first, so the order of the work is the forward pass's).
int cu_flush(cuda_state *s) {
    if (!s) return 0;
    int rc = 0;
    if (s->at.on) rc |= attention_run(s, 0, NULL);
    if (s->mm.on) {
        s->mm.on = 0;
        rc |= cuda_matmul_multi(s->d, 2, s->mm.m, s->mm.n_in, s->mm.xq, s->mm.T, -1, 0);
    }
    if (s->ch_on) {
        s->ch_on = 0;
        s->ch.xq = NULL;
        rc |= cuda_chain_run(s->d, &s->ch, s->ch_rows, 0);
    }
    return rc;
}

// what a captured graph points at moved: it is dropped (made again later)
static void graph_drop(cuda_state *s) {
    if (s->exec) cuda_graph_free(s->exec);
    s->exec = NULL;
    s->gkey = s->seen = 0;
}

cuda_state *cu_state(backend *b) {
    if (b->dev) return b->dev;
    cuda_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (!(s->d = cuda_open(b->gpu))) {
        free(s);
        return NULL;
    }
    if (!(s->w = store_get(b->owner))) {
        cuda_close(s->d);
        free(s);
        return NULL;
    }
    const char *fz = getenv("INFER_CUDA_FUSE");
    s->fuse = !fz || !*fz || *fz != '0';
    const char *az = getenv("INFER_CUDA_ATT_Q");
    s->att_q = s->fuse && !(az && *az == '0');
    const char *gz = getenv("INFER_CUDA_GEMM");
    s->gemm = !gz || !*gz || *gz != '0';
    const char *bz = getenv("INFER_CUDA_BATCH_GEMM");
    s->batch_gemm = bz && *bz ? *bz == '1' : -1;
    const char *tz = getenv("INFER_CUDA_ATT_GEMM");
    s->att_gemm = !tz || !*tz || *tz != '0';
    const char *tr = getenv("INFER_CUDA_TRACE");
    s->trace = tr && *tr == '1';
    const char *cf = getenv("INFER_CUDA_CAPTURE_FAULT"); // (a test seam: every Nth capture taken as refused)
    s->capture_fault = cf && *cf ? atoi(cf) : 0;
    const char *fl = getenv("INFER_CUDA_FLASH");
    s->flash_min = fl && *fl ? atoi(fl) : FLASH_MIN, s->flash_set = fl && *fl; // (heads of 256: slower than cuBLAS where unasked)
    const char *sm = getenv("INFER_CUDA_ATT_SPLIT_MIN");
    s->split_min = sm && *sm ? atoi(sm) : SPLIT_MIN;
    b->dev = s;
    return s;
}

static void fail_op(backend *b) { b->ex->oom = 1; } // (the pass's results are not to be used)

// the state, with any waiting norm launched
cuda_state *cu_state_flushed(backend *b) {
    cuda_state *s = cu_state(b);
    if (s && cu_flush(s)) fail_op(b), s = NULL;
    return s;
}

static size_t hash_ptr(const void *p, size_t cap) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static int map_grow(wstore *w) {
    size_t cap = w->cap ? 2 * w->cap : 1024;
    dev_entry *m = calloc(cap, sizeof *m);
    if (!m) return -1;
    for (size_t i = 0; i < w->cap; i++)
        if (w->map[i].host) {
            size_t h = hash_ptr(w->map[i].host, cap);
            while (m[h].host) h = (h + 1) & (cap - 1);
            m[h] = w->map[i];
        }
    free(w->map);
    w->map = m, w->cap = cap;
    return 0;
}

// The device copy of host memory p: found by its address, else made by
// `up` (the first use; never inside a captured graph).
static void *dev_find(backend *b, const void *p, void *(*up)(cuda_dev *, const void *, size_t, int, int), size_t bytes, int type, int cols) {
    cuda_state *s = cu_state(b);
    if (!s || !p) return NULL;
    wstore *w = s->w;
    void *dv = NULL;
    pthread_mutex_lock(&w->mu);
    if (2 * (w->n + 1) > w->cap && map_grow(w)) goto out;
    size_t h = hash_ptr(p, w->cap);
    while (w->map[h].host) {
        if (w->map[h].host == p) { dv = w->map[h].dev; goto out; }
        h = (h + 1) & (w->cap - 1);
    }
    if (s->capturing) goto out; // (no uploads inside a capture: GRAPH_END runs the pass again, plainly)
    // (the upload is complete when `up` returns: other contexts' streams may read it at once)
    if ((dv = up(s->d, p, bytes, type, cols))) w->map[h] = (dev_entry){p, dv}, w->n++;
out:
    pthread_mutex_unlock(&w->mu);
    return dv;
}

static void *up_bytes(cuda_dev *d, const void *p, size_t bytes, int type, int cols) {
    (void)type, (void)cols;
    void *dv = cuda_alloc(d, bytes);
    if (dv && cuda_upload(d, dv, p, bytes)) cuda_free(d, dv), dv = NULL;
    return dv;
}

static void *up_weight(cuda_dev *d, const void *p, size_t rows, int type, int cols) {
    return cuda_weight_upload(d, type, p, (int)rows, cols);
}

// `bytes` at host address p in device memory (uploaded on first use)
void *cu_dev_of(backend *b, const void *p, size_t bytes) { return dev_find(b, p, up_bytes, bytes, 0, 0); }

// a matrix of n_out rows of n_in for the products (cuda_weight_upload's layout)
const void *cu_dev_weight(backend *b, const tensor *W, int n_in, int n_out) {
    return dev_find(b, W->data, up_weight, (size_t)n_out, W->type, n_in);
}

// a device buffer of at least `bytes`, grown as needed
void *cu_scratch(cuda_state *s, void **p, size_t *cap, size_t bytes) {
    if (bytes > *cap) {
        if (s->capturing) return NULL;
        graph_drop(s);
        cuda_free(s->d, *p);
        *p = cuda_alloc(s->d, bytes);
        *cap = *p ? bytes : 0;
    }
    return *p;
}

static int is_float_type(int t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

// The activations of x for weights of type wtype (T rows of n): quantized
// into the scratch (by the waiting chain's kernel when x is its output), or
// x itself for float weights. NULL on failure.
const void *cu_act_in(cuda_state *s, int wtype, const float *x, int T, int n) {
    size_t xr = cuda_act_row_size(wtype, n);
    if (!xr) return NULL;
    if (s->at.on && s->at.out == x && s->at.T == T && s->at.H * s->at.hd == n && cuda_attention_q_ok(wtype, s->at.H, s->at.hd)) {
        void *xq = cu_scratch(s, &s->xq, &s->xq_cap, xr * (size_t)T); // (the waiting attention writes the rows)
        return xq && !attention_run(s, wtype, xq) ? xq : NULL;
    }
    if (s->ch_on && s->ch.norm_b && s->ch.xn == x && s->ch_rows == T && s->ch.n == n && !is_float_type(wtype)) {
        void *xq = cu_scratch(s, &s->xq, &s->xq_cap, xr * (size_t)T);
        if (!xq) return NULL;
        s->ch.xq = xq;
        s->ch_on = 0;
        return cuda_chain_run(s->d, &s->ch, s->ch_rows, wtype) ? NULL : xq;
    }
    if (cu_flush(s)) return NULL;
    if (is_float_type(wtype)) return x;
    void *xq = cu_scratch(s, &s->xq, &s->xq_cap, xr * (size_t)T);
    return xq && !cuda_quantize(s->d, wtype, x, T, n, xq) ? xq : NULL;
}

// How the products of T rows run: 1 all on the tensor cores, 0 all as q8
// (decode) products, -1 segment by segment (a batch's pass of prompt runs and
// decode rows). Rows other than the pass's (the gathered rows of the logits:
// each a sequence's last) are decode rows.
static int rows_gemm(const cuda_state *s, int wtype, int n_in, int T) {
    if (!s->gemm || T != s->pass_T || !cuda_gemm_ok(wtype, n_in, CUDA_GEMM_MIN_T) || (s->pass_mmq == 1 && cuda_mmq_type(wtype))) return 0;
    return s->n_seg == 1 ? s->seg_gemm[0] : -1;
}

// The products of a pass's segments, each as its rows would run alone: n
// matrices of one input (their activations of one format) in one launch a
// q8 segment, as the pass of those rows alone would group them (the threads a
// row follow the launch's rows: k_mv's order); sep: each its own launch (a
// gate and up pair, whose glu launch counts the gate's rows).
static int matmul_segments(cuda_state *s, int n, const cuda_mat *m, const int *lowp, const float *x, int n_in, int sep) {
    if (cu_flush(s)) return -1;
    size_t xr = cuda_act_row_size(m[0].type, n_in);
    for (int i = 0; i < s->n_seg; i++) {
        int a = s->seg0[i], r = s->seg0[i + 1] - a;
        const float *xa = x + (size_t)a * n_in;
        cuda_mat ma[4];
        for (int j = 0; j < n; j++) ma[j] = m[j], ma[j].y = m[j].y + (size_t)a * m[j].rows;
        if (s->seg_gemm[i]) {
            for (int j = 0; j < n; j++)
                if (cuda_gemm_lowp(s->d, ma[j].type, ma[j].w, ma[j].rows, n_in, xa, r, ma[j].y, lowp[j])) return -1;
            continue;
        }
        const void *xq = xa;
        if (!is_float_type(m[0].type)) {
            void *q = cu_scratch(s, &s->xq, &s->xq_cap, xr * (size_t)r);
            if (!q || cuda_quantize(s->d, m[0].type, xa, r, n_in, q)) return -1;
            xq = q;
        }
        for (int j = 0; j < (sep ? n : 1); j++)
            if (cuda_matmul_multi(s->d, sep ? 1 : n, ma + j, n_in, xq, r, -1, 0)) return -1;
    }
    return 0;
}

static void cu_matmul(backend *b, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    cuda_state *s = cu_state(b);
    const tensor *W = w->w;
    if (!s) { fail_op(b); return; }
    if (w->trans) {
        if (cu_flush(s)) { fail_op(b); return; }
        size_t bytes = dtype_row_size(W->type, n_out) * (size_t)n_in;
        const void *dw = cu_dev_of(b, W->data, bytes);
        if (!dw || cuda_matmul_trans(s->d, W->type, dw, n_in, n_out, x, T, y)) { fail_op(b); return; }
    } else if (rows_gemm(s, W->type, n_in, T) == 1) { // (a prompt: the tensor cores)
        const void *dw = cu_dev_weight(b, W, n_in, n_out);
        if (!dw || cu_flush(s) || cuda_gemm_lowp(s->d, W->type, dw, n_out, n_in, x, T, y, w->ggml)) { fail_op(b); return; }
    } else if (rows_gemm(s, W->type, n_in, T) < 0) {
        cuda_mat m = {W->type, cu_dev_weight(b, W, n_in, n_out), n_out, y};
        if (!m.w || matmul_segments(s, 1, &m, &w->ggml, x, n_in, 0)) { fail_op(b); return; }
    } else {
        const void *dw = cu_dev_weight(b, W, n_in, n_out);
        const void *xq = dw ? cu_act_in(s, W->type, x, T, n_in) : NULL;
        if (!xq || cuda_matmul(s->d, W->type, dw, n_out, n_in, xq, T, y)) { fail_op(b); return; }
    }
    if (bias) {
        const float *db = cu_dev_of(b, bias, sizeof(float) * (size_t)n_out);
        if (!db || cuda_bias(s->d, y, db, T, n_out)) fail_op(b);
    }
}

// Products of one input in one launch when they take the same activation
// format (the formats' row sizes differ, so equal sizes mean the same one);
// a pair without biases waits for a gated activation to join it.
static void cu_matmul_multi(backend *b, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias, int T,
                            int n_in, const int *n_out) {
    cuda_state *s = cu_state(b);
    size_t xr = cuda_act_row_size(w[0]->w->type, n_in);
    int same = s && xr && !w[0]->trans, biased = 0;
    for (int i = 1; i < n && same; i++) same = !w[i]->trans && cuda_act_row_size(w[i]->w->type, n_in) == xr;
    for (int i = 0; i < n; i++) biased |= bias[i] != NULL;
    int rg = same ? rows_gemm(s, w[0]->w->type, n_in, T) : 1;
    for (int i = 1; i < n && same; i++) same = rows_gemm(s, w[i]->w->type, n_in, T) == rg;
    if (!same || rg > 0) { // (prompts: one by one, on the tensor cores)
        for (int i = 0; i < n; i++) cu_matmul(b, y[i], x, w[i], bias[i], T, n_in, n_out[i]);
        return;
    }
    cuda_mat m[4];
    int lowp[4] = {0};
    for (int i = 0; i < n; i++) {
        const tensor *W = w[i]->w;
        m[i] = (cuda_mat){W->type, cu_dev_weight(b, W, n_in, n_out[i]), n_out[i], y[i]}, lowp[i] = w[i]->ggml;
        if (!m[i].w) { fail_op(b); return; }
    }
    const int glu = s->fuse && n == 2 && !biased && n_out[0] == n_out[1];
    if (rg < 0) { // (a pass of prompt runs and decode rows: segment by segment, each grouped as alone)
        if (matmul_segments(s, n, m, lowp, x, n_in, glu)) { fail_op(b); return; }
    } else {
        const void *xq = cu_act_in(s, w[0]->w->type, x, T, n_in);
        if (!xq) { fail_op(b); return; }
        if (glu) { // (waits for a glu)
            s->mm.on = 1, s->mm.T = T, s->mm.n_in = n_in, s->mm.m[0] = m[0], s->mm.m[1] = m[1], s->mm.xq = xq;
            return;
        }
        if (cuda_matmul_multi(s->d, n, m, n_in, xq, T, -1, 0)) { fail_op(b); return; }
    }
    for (int i = 0; i < n; i++)
        if (bias[i]) {
            const float *db = cu_dev_of(b, bias[i], sizeof(float) * (size_t)n_out[i]);
            if (!db || cuda_bias(s->d, y[i], db, T, n_out[i])) { fail_op(b); return; }
        }
}

// A norm waits to chain (cuda_chain_run): in place, for the residual that
// adds it; of the residual's sum, for the product that takes it.
static void cu_norm(backend *b, float *out, const float *x, const float *w, const float *bias, int rows, int n, float eps, int kind) {
    cuda_state *s = cu_state(b);
    const float *dw = w ? cu_dev_of(b, w, sizeof(float) * (size_t)n) : NULL, *db = bias ? cu_dev_of(b, bias, sizeof(float) * (size_t)n) : NULL;
    int k = kind == NORM_OP_LAYER ? 2 : kind == NORM_OP_RMS_PLUS_ONE ? 1 : 0;
    if (!s || (w && !dw) || (bias && !db)) { fail_op(b); return; }
    cuda_chain *c = &s->ch;
    if (s->fuse && k < 2 && !bias && s->ch_on && c->residual && !c->norm_b && c->x == x && out != x && s->ch_rows == rows && c->n == n) {
        c->norm_b = 1, c->xn = out, c->wb = dw, c->kind_b = k, c->eps_b = eps;
        return;
    }
    if (cu_flush(s)) { fail_op(b); return; }
    if (s->fuse && k < 2 && !bias) {
        memset(c, 0, sizeof *c);
        s->ch_on = 1, s->ch_rows = rows, c->n = n;
        if (out == x) c->norm_a = 1, c->o = out, c->wa = dw, c->kind_a = k, c->eps_a = eps;
        else c->norm_b = 1, c->x = (float *)x, c->xn = out, c->wb = dw, c->kind_b = k, c->eps_b = eps; // (x only read)
        return;
    }
    if (cuda_norm(s->d, out, x, dw, db, rows, n, eps, k)) fail_op(b);
}

// Every row-pointer table dropped, with the graph that may read them.
static void ptab_drop(cuda_state *s) {
    graph_drop(s);
    for (int i = 0; i < s->n_ptab; i++) free(s->ptab[i].host), cuda_free(s->d, s->ptab[i].dev);
    free(s->ptab);
    s->ptab = NULL, s->n_ptab = 0;
}

// The device array holding the n host pointers p (made on first use).
static void *ptr_table(cuda_state *s, const void *const *p, int n) {
    for (int i = 0; i < s->n_ptab; i++)
        if (s->ptab[i].n == n && !memcmp(s->ptab[i].host, p, sizeof(void *) * (size_t)n)) return s->ptab[i].dev;
    if (s->capturing) return NULL;
    struct ptab *t = realloc(s->ptab, sizeof *t * (size_t)(s->n_ptab + 1));
    if (!t) return NULL;
    s->ptab = t;
    const void **h = malloc(sizeof(void *) * (size_t)n);
    void *dv = cuda_alloc(s->d, sizeof(void *) * (size_t)n);
    if (!h || !dv || cuda_upload(s->d, dv, p, sizeof(void *) * (size_t)n)) {
        free(h), cuda_free(s->d, dv);
        return NULL;
    }
    memcpy(h, p, sizeof(void *) * (size_t)n);
    s->ptab[s->n_ptab++] = (struct ptab){n, h, dv};
    return dv;
}

static void ptab_drop(cuda_state *s);

// A pass's positions go up once, before its operations (and outside a graph);
// its rows fall into segments by how their products run.
static void cu_begin_pass(backend *b, const int *pos, const int *run, int T) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || T > N_ROWS_MAX) { fail_op(b); return; }
    if (s->n_ptab > PTAB_MAX) ptab_drop(s); // (a server's changing batches would grow them without end)
    if (s->trace) { // INFER_CUDA_TRACE=1: the last pass's products by kind (none: a graph's replay), then this pass
        unsigned c[4];
        cuda_counts(s->d, c);
        fprintf(stderr, "cuda trace: products mmq %u gemm %u blas %u q8 %u; pass T %d\n", c[0], c[1], c[2], c[3], T);
    }
    s->pass_T = T, s->n_seg = 0, s->pass_decode = 1, s->n_run = 0;
    for (int t = 0; t < T; t++) {
        s->pass_decode &= run[t] != 0;
        if (run[t] || !t) s->run0[s->n_run++] = t;
    }
    s->run0[s->n_run] = T;
    int deep = 0; // (the most positions a split row sees)
    s->split_key = 0;
    for (int t = 0; t < T; t++) {
        s->single[t] = run[t] && (t + 1 == T || run[t + 1]) && pos[t] + 1 > s->split_min;
        if (s->single[t] && pos[t] + 1 > deep) deep = pos[t] + 1;
        s->split_key = (s->split_key ^ s->single[t]) * 0x100000001b3ull;
    }
    s->split_z = cuda_attention_split_z(s->d, deep);
    int exact = b->ex && b->ex->exact;
    s->pass_bg = s->gemm && T >= CUDA_GEMM_MIN_T && (s->batch_gemm >= 0 ? s->batch_gemm : !exact);
    // k_mmq: a deterministic pass's q8 products of any rows (its split by the matrix alone: a row as alone),
    // a decode step of 2 to cuda_mmq_max rows otherwise (INFER_CUDA_MMQ_MAX=0: neither)
    s->pass_mmq = cuda_mmq_max(s->d) <= 0 ? 0 : exact ? 2 : s->batch_gemm < 0 && s->pass_decode && T > 1 && T <= cuda_mmq_max(s->d);
    cuda_mmq_pass(s->d, s->pass_mmq);
    if (s->pass_bg) // (the whole pass one product on the tensor cores)
        s->seg0[s->n_seg] = 0, s->seg_gemm[s->n_seg++] = 1, T = 0;
    for (int t = 0; t < T;) {
        int e = t + 1;
        while (e < T && !run[e]) e++;
        int g = s->gemm && e - t >= CUDA_GEMM_MIN_T;
        // (decode rows join the segment before them; a tensor-core run stays its own, as its product's
        // column split follows its row count)
        if (!s->n_seg || g || s->seg_gemm[s->n_seg - 1]) s->seg0[s->n_seg] = t, s->seg_gemm[s->n_seg++] = g;
        t = e;
    }
    T = s->pass_T;
    s->seg0[s->n_seg] = T;
    if ((size_t)T > s->rows_cap) {
        graph_drop(s);
        cuda_free(s->d, s->pos);
        s->pos = cuda_alloc(s->d, sizeof(int) * (size_t)T);
        s->rows_cap = s->pos ? (size_t)T : 0;
    }
    if (!s->pos || cuda_upload_async(s->d, s->pos, pos, sizeof(int) * (size_t)T)) fail_op(b);
    memcpy(s->pos_h, pos, sizeof(int) * (size_t)T);
}

static void cu_kv_store(backend *b, void *const *cache, int type, const int *pos, const float *src, int T, int n) {
    cuda_state *s = cu_state_flushed(b);
    void *tab = s && (type == KV_F32 || type == KV_F16) ? ptr_table(s, (const void *const *)cache, T) : NULL; // (f32 or f16: context.c)
    (void)pos; // (the pass's positions are on the device: begin_pass)
    if (!tab || cuda_kv_store(s->d, tab, s->pos, src, T, n, type == KV_F16)) fail_op(b);
}

// Each head's norm, RoPE, rounding and the cache rows in one kernel where it
// covers the layer (per-head norms, heads of up to 512), else op by op.
static void cu_qkv_prep(backend *b, const qkv_desc *q) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || (q->k && (q->kt != q->vt || (q->kt != KV_F32 && q->kt != KV_F16)))) { fail_op(b); return; } // (f32 or f16 caches: context.c)
    const rope_table *r = q->rope;
    if (!s->fuse || q->qn != q->hd || q->kn != q->hd || q->hd > 512 || q->norm_kind == NORM_OP_LAYER ||
        (r && (r->n_pairs < 1 || r->n_pairs > 256 || (r->n_pairs - 1) * r->pair_stride + r->pair_offset >= q->hd))) {
        qkv_prep_ops(b, q);
        return;
    }
    cuda_qkv c = {
        .q = q->q, .k = q->k, .v = q->v, .H = q->H, .KV = q->KV, .hd = q->hd, .kind = q->norm_kind == NORM_OP_RMS_PLUS_ONE,
        .v_norm = q->v_norm, .round = q->round, .eps = q->eps, .kv16 = q->kt == KV_F16,
        .q_norm = q->q_norm ? cu_dev_of(b, q->q_norm, sizeof(float) * (size_t)q->hd) : NULL,
        .k_norm = q->k_norm ? cu_dev_of(b, q->k_norm, sizeof(float) * (size_t)q->hd) : NULL,
    };
    if (r) {
        c.inv_freq = cu_dev_of(b, r->inv_freq, sizeof(float) * (size_t)r->n_pairs);
        c.n_pairs = r->n_pairs, c.pair_offset = r->pair_offset, c.pair_stride = r->pair_stride, c.mscale = r->mscale;
    }
    if (q->k) {
        c.k_cache = (void *const *)ptr_table(s, (const void *const *)q->k_cache, q->T);
        c.v_cache = (void *const *)ptr_table(s, (const void *const *)q->v_cache, q->T);
    }
    if ((q->q_norm && !c.q_norm) || (q->k_norm && !c.k_norm) || (r && !c.inv_freq) || (q->k && (!c.k_cache || !c.v_cache)) ||
        cuda_qkv_prep(s->d, &c, q->T, s->pos))
        fail_op(b);
}



static int cu_graph(backend *b, int phase, uint64_t key) {
    cuda_state *s = cu_state(b);
    if (!s) return -1;
    if (cu_flush(s)) fail_op(b); // (at the END of a capture: a refusal, the capture still ended below)
    if (phase == GRAPH_BEGIN) {
        key ^= ((uint64_t)s->split_z << 40) ^ (s->split_key & ~1ull) ^ ((uint64_t)s->pass_bg << 39) ^ ((uint64_t)s->pass_mmq << 36); // (the split attention's rows
        // and grid follow their depth; a pass in one product is not the pass in runs)
        if (s->no_graph || b->ex->oom) return -1; // (a pass failing already: no capture, whose END would take it for a refusal)
        if (s->exec && s->moved != cuda_moved(s->d)) graph_drop(s); // (a scratch it writes was reallocated since)
        if (s->exec && s->gkey == key) return 1;
        // (a pass whose products went to cuBLAS, as the last one did, runs plainly: captured, they could not --
        // no allocation inside a capture -- and k_gemm2 in their place is the slower at 256 rows: 12822
        // against 20046 t/s, 8-layer Llama 8B shape, H100)
        const unsigned bt = cuda_blas_total(s->d);
        const int blas = bt != s->blas_seen;
        s->blas_seen = bt;
        if (s->seen == key && !blas && !cuda_graph_begin(s->d)) { // the second pass of this shape: capture it
            if (s->exec) cuda_graph_free(s->exec), s->exec = NULL;
            s->capturing = 1, s->pending = key;
            return 0;
        }
        s->seen = key;
        return -1;
    }
    if (phase == GRAPH_END) {
        s->capturing = 0;
        void *x = NULL;
        // An operation that refused inside the capture (an upload, a scratch or a row table that would
        // grow: not allowed there) or a capture that broke: nothing ran, so the pass runs again plainly,
        // the capture's error dropped (the next launch's check would report it as its own).
        const int refused = b->ex->oom || (s->capture_fault > 0 && ++s->captures % s->capture_fault == 0);
        if (cuda_graph_end(s->d, &x) || refused) {
            cuda_graph_free(x);
            cuda_error_clear();
            if (getenv("INFER_CUDA_GRAPH_DEBUG"))
                fprintf(stderr, "infer: cuda graph capture failed (%s; %s): the pass runs again without it\n",
                        refused ? "an operation refused inside it" : "the capture broke", cuda_status());
            b->ex->oom = 0;
            s->seen = 0;
            if (++s->capture_failed >= CAPTURE_TRIES) s->no_graph = 1; // (captures that keep failing: none any more)
            return 1;
        }
        if (cuda_graph_launch(s->d, x)) {
            cuda_graph_free(x);
            s->no_graph = 1;
            fail_op(b);
            return -1;
        }
        s->exec = x, s->gkey = s->pending, s->moved = cuda_moved(s->d);
        return 0;
    }
    if (cuda_graph_launch(s->d, s->exec)) fail_op(b);
    return 0;
}

static void cu_rope(backend *b, float *x, int rows, int heads, int hd, const int *pos, const rope_table *r) {
    cuda_state *s = cu_state_flushed(b);
    const float *f = s ? cu_dev_of(b, r->inv_freq, sizeof(float) * (size_t)r->n_pairs) : NULL;
    (void)pos; // (the pass's positions are on the device: begin_pass)
    if (!f || cuda_rope(s->d, x, rows, heads, hd, s->pos, f, r->n_pairs, r->pair_offset, r->pair_stride, r->mscale)) fail_op(b);
}

static void cu_attention(backend *b, const attn_desc *a) {
    size_t per_row = (size_t)a->H * a->stride;
    int group = SCORES_MAX / per_row > 0 ? (int)(SCORES_MAX / per_row) : 1; // rows a launch (the scores' memory)
    group = group < a->T ? group : a->T;
    cuda_state *s = cu_state_flushed(b);
    if (!s || a->kt != a->vt || (a->kt != KV_F32 && a->kt != KV_F16)) { fail_op(b); return; } // (f32 or f16 caches: context.c)
    const float *sinks = a->sinks ? cu_dev_of(b, a->sinks, sizeof(float) * (size_t)a->H) : NULL;
    float *sc = cu_scratch(s, (void **)&s->scores, &s->scores_cap, sizeof(float) * (size_t)group * per_row);
    const void *kv[2 * N_ROWS_MAX];
    if (a->T > N_ROWS_MAX) { fail_op(b); return; }
    memcpy(kv, a->k, sizeof(void *) * (size_t)a->T);
    memcpy(kv + a->T, a->v, sizeof(void *) * (size_t)a->T);
    const float *const *tab = ptr_table(s, kv, 2 * a->T);
    if (!sc || !tab || (a->sinks && !sinks)) { fail_op(b); return; }
    s->at.T = a->T, s->at.group = group, s->at.H = a->H, s->at.KV = a->KV, s->at.hd = a->hd, s->at.window = a->window;
    s->at.ggml = a->ggml_numerics, s->at.stride = a->stride, s->at.q = a->q, s->at.sinks = sinks, s->at.tab = tab;
    s->at.out = a->out, s->at.sc = sc, s->at.scale = a->scale, s->at.softcap = a->softcap, s->at.pos = s->pos;
    s->at.decode = s->pass_decode, s->at.kv16 = a->kt == KV_F16;
    // one launch (att_q: it waits for the product of its output) where the scores of every row fit, or where
    // the runs need none of them (a deep prompt: cuBLAS or flash attention, the per-row kernel for short runs)
    if (group == a->T || (!s->pass_decode && a->T == s->pass_T && attention_fast(s, a->hd, a->ggml_numerics, a->kt == KV_F16))) {
        s->at.on = 1;
        for (int i = 0; i < s->n_run; i++) s->at.k0[i] = a->k[s->run0[i]], s->at.v0[i] = a->v[s->run0[i]];
        if (!s->att_q && attention_run(s, 0, NULL)) fail_op(b); // (unfused: now, the same kernels)
        return;
    }
    s->at.on = 0, s->at.decode = 0; // (groups of rows now, each a launch of the per-row kernel)
    if (attention_rows(s, 0, a->T, 0, NULL)) fail_op(b);
}

static void cu_glu(backend *b, float *g, const float *u, int rows, int n, int act, int ggml) {
    cuda_state *s = cu_state(b);
    if (s && s->mm.on && u && s->mm.m[0].y == g && s->mm.m[1].y == u && s->mm.T == rows && s->mm.m[0].rows == n) {
        s->mm.on = 0; // the waiting gate and up products, with this activation
        if (cuda_matmul_multi(s->d, 2, s->mm.m, s->mm.n_in, s->mm.xq, rows, act, ggml)) fail_op(b);
        return;
    }
    s = cu_state_flushed(b);
    if (!s || cuda_act(s->d, g, u, (size_t)rows * n, act, ggml)) fail_op(b);
}
static void cu_act(backend *b, float *x, int rows, int n, int act, int ggml) { cu_glu(b, x, NULL, rows, n, act, ggml); }

static void cu_glu_oss(backend *b, float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_glu_oss(s->d, out, gate, gs, up, us, n)) fail_op(b);
}

static void cu_residual(backend *b, float *x, const float *o, float sc, int rows, int n) {
    cuda_state *s = cu_state(b);
    if (!s) { fail_op(b); return; }
    cuda_chain *c = &s->ch;
    if (s->ch_on && c->norm_a && !c->residual && !c->norm_b && c->o == o && s->ch_rows == rows && c->n == n) {
        c->residual = 1, c->x = x, c->s = sc;
        return;
    }
    if (cu_flush(s)) { fail_op(b); return; }
    if (s->fuse) { // (waits for the norm of the sum)
        memset(c, 0, sizeof *c);
        s->ch_on = 1, s->ch_rows = rows, c->n = n, c->residual = 1, c->o = (float *)o, c->x = x, c->s = sc; // (o only read)
        return;
    }
    if (cuda_axpy(s->d, x, o, sc, (size_t)rows * n)) fail_op(b);
}

static void cu_round_f16(backend *b, float *x, size_t n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_round_f16(s->d, x, n)) fail_op(b);
}

static void cu_softmax(backend *b, float *x, int n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_softmax(s->d, x, n)) fail_op(b);
}

// embedding rows: decoded on the host from the mapped table, then uploaded
static void cu_embed(backend *b, float *out, const tensor *table, const int32_t *ids, int T, float scale) {
    cuda_state *s = cu_state_flushed(b);
    size_t n = (size_t)table->ne[0] * (size_t)T;
    if (s && n > s->host_cap) {
        float *h = realloc(s->host, sizeof(float) * n);
        if (h) s->host = h, s->host_cap = n;
    }
    if (!s || n > s->host_cap) { fail_op(b); return; }
    backend hb = {0};
    host_embed(&hb, s->host, table, ids, T, scale);
    if (cuda_upload_async(s->d, out, s->host, sizeof(float) * n)) fail_op(b);
}

static void cu_copy(backend *b, float *dst, size_t ds, const float *src, size_t ss, int rows, int n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_copy2d(s->d, dst, ds, src, ss, rows, n)) fail_op(b);
}

static void cu_scale(backend *b, float *x, size_t n, float sc) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_scale(s->d, x, n, sc)) fail_op(b);
}

static void cu_mul(backend *b, float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_mul(s->d, x, xs, y, ys, rows, n)) fail_op(b);
}

static void cu_softcap(backend *b, float *x, size_t n, float cap) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_softcap(s->d, x, n, cap)) fail_op(b);
}

void *backend_cuda_stream(backend *b) {
    if (b->ops->host || strcmp(b->ops->name, "cuda")) return NULL;
    cuda_state *s = cu_state_flushed(b);
    return s ? cuda_stream(s->d) : NULL;
}

static void cu_download(backend *b, float *host, const float *src, size_t n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_download(s->d, host, src, sizeof(float) * n)) fail_op(b);
}

static void cu_upload(backend *b, float *dst, const float *host, size_t n) {
    cuda_state *s = cu_state_flushed(b);
    if (!s || cuda_upload(s->d, dst, host, sizeof(float) * n)) fail_op(b);
}

// The vindex walk FFN of each row: the gate vectors' scores (a product of
// their type), the top k by magnitude on the GPU (k < F), then cuda_walk over
// the raw feature rows.
static void cu_walk(backend *b, float *out, const float *x, const walk_layer *l, int k, int T) {
    cuda_state *s = cu_state(b);
    const tensor *gv = l->gate_vectors, *ffn = l->ffn;
    int F = (int)gv->ne[1], H = (int)gv->ne[0], all = k >= F;
    if (all) k = F;
    size_t nc = ((size_t)k + 63) / 64, xr = ffn->type == DT_Q8_0 ? cuda_act_row_size(DT_Q8_0, H) : 0;
    size_t at_idx = sizeof(float) * (size_t)F, at_a = at_idx + sizeof(int) * (size_t)F, at_part = at_a + sizeof(float) * (size_t)F;
    size_t at_xq = (at_part + sizeof(float) * nc * H + 15) & ~(size_t)15;
    char *wk = s && !cu_flush(s) ? cu_scratch(s, &s->wk, &s->wk_cap, at_xq + xr) : NULL;
    const void *dg = all ? NULL : cu_dev_weight(b, gv, H, F), *df = wk ? cu_dev_of(b, ffn->data, ffn->nbytes) : NULL;
    const float *bias = l->bias ? cu_dev_of(b, l->bias, sizeof(float) * (size_t)F) : NULL;
    const float *db = l->down_bias ? cu_dev_of(b, l->down_bias, sizeof(float) * (size_t)H) : NULL;
    if (!wk || !df || (!all && !dg) || (l->bias && !bias) || (l->down_bias && !db)) { fail_op(b); return; }
    float *sc = (float *)wk, *a = (float *)(wk + at_a), *part = (float *)(wk + at_part);
    int *idx = all ? NULL : (int *)(wk + at_idx);
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * H;
        if (!all) {
            const void *xq = cu_act_in(s, gv->type, xt, 1, H);
            if (!xq || cuda_matmul(s->d, gv->type, dg, F, H, xq, 1, sc) || cuda_topk_abs(s->d, sc, F, k, idx)) { fail_op(b); return; }
        }
        if ((xr && cuda_quantize(s->d, DT_Q8_0, xt, 1, H, wk + at_xq)) ||
            cuda_walk(s->d, ffn->type, df, H, idx, k, xt, xr ? wk + at_xq : NULL, bias, db, l->gated, l->act, a, part, out + (size_t)t * H)) {
            fail_op(b);
            return;
        }
    }
}

static void cu_argmax(backend *b, int32_t *out, const float *x, int rows, int n) {
    cuda_state *s = cu_state_flushed(b);
    int *d = s ? cu_scratch(s, &s->am, &s->am_cap, sizeof(int) * (size_t)rows) : NULL;
    if (!d || cuda_argmax(s->d, x, rows, n, d) || cuda_download(s->d, out, d, sizeof(int) * (size_t)rows)) fail_op(b);
}

static void *cu_alloc(backend *b, size_t bytes) {
    cuda_state *s = cu_state_flushed(b);
    if (s) graph_drop(s);
    void *p = s ? cuda_alloc(s->d, bytes) : NULL;
    if (p && cuda_zero(s->d, p, bytes)) {
        cuda_free(s->d, p);
        p = NULL;
    }
    return p;
}

static void cu_release(backend *b, void *p) {
    cuda_state *s = b->dev;
    if (s) cu_flush(s);
    if (s) {
        graph_drop(s);
        if (cuda_vm_is(p)) cuda_vm_free(s->d, p);
        else cuda_free(s->d, p);
    }
}

// A context's KV cache backed as it grows (INFER_CUDA_KV_VM=1 for now: vmem.cu)
static void *cu_kv_reserve(backend *b, size_t bytes, size_t *chunk) {
    const char *e = getenv("INFER_CUDA_KV_VM"); // (read at each context's cache: a test turns it on for some)
    const int on = e && *e && atoi(e) != 0;
    cuda_state *s = on ? cu_state_flushed(b) : NULL;
    size_t g = s ? cuda_vm_granularity(s->d) : 0;
    void *p = g ? cuda_vm_reserve(s->d, bytes) : NULL;
    if (p) graph_drop(s), *chunk = g;
    return p;
}

static int cu_kv_commit(backend *b, void *p, size_t off, size_t len) {
    cuda_state *s = cu_state_flushed(b);
    return s ? cuda_vm_commit(s->d, p, off, len) : -1;
}

static void cu_kv_trim(backend *b, void *p, size_t off, size_t len) {
    cuda_state *s = cu_state_flushed(b);
    if (s) cuda_vm_trim(s->d, p, off, len);
}

static int cu_kv_share(backend *b, void *p, size_t off, void *src, size_t soff, size_t len) {
    cuda_state *s = cu_state_flushed(b);
    return s ? cuda_vm_share(s->d, p, off, src, soff, len) : -1;
}

static int cu_kv_private(backend *b, void *p, size_t off, size_t len) {
    cuda_state *s = cu_state_flushed(b);
    return s ? cuda_vm_private(s->d, p, off, len) : -1;
}

static void cu_done(backend *b) {
    cuda_state *s = b->dev;
    if (!s) return;
    cuda_sync(s->d);
    store_put(s->w, s->d);
    ptab_drop(s);
    cuda_free(s->d, s->xq), cuda_free(s->d, s->scores), cuda_free(s->d, s->pos), cuda_free(s->d, s->wk), cuda_free(s->d, s->am);
    cuda_free(s->d, s->vx);
    free(s->host);
    cuda_close(s->d);
    free(s);
    b->dev = NULL;
}

static const backend_ops cuda_ops = {
    .name = "cuda",
    .matmul = cu_matmul,
    .matmul_multi = cu_matmul_multi,
    .norm = cu_norm,
    .rope = cu_rope,
    .attention = cu_attention,
    .qkv_prep = cu_qkv_prep,
    .act = cu_act,
    .glu = cu_glu,
    .glu_oss = cu_glu_oss,
    .residual = cu_residual,
    .round_f16 = cu_round_f16,
    .softmax = cu_softmax,
    .embed = cu_embed,
    .copy = cu_copy,
    .scale = cu_scale,
    .mul = cu_mul,
    .softcap = cu_softcap,
    .download = cu_download,
    .upload = cu_upload,
    .kv_store = cu_kv_store,
    .begin_pass = cu_begin_pass,
    .walk = cu_walk,
    .walk_takes = cuda_walk_ok,
    .knn = cu_knn,
    .lm_topk = cu_lm_topk,
    .argmax = cu_argmax,
    .graph = cu_graph,
    .alloc = cu_alloc,
    .release = cu_release,
    .kv_reserve = cu_kv_reserve,
    .kv_commit = cu_kv_commit,
    .kv_trim = cu_kv_trim,
    .kv_share = cu_kv_share,
    .kv_private = cu_kv_private,
    .done = cu_done,
    .host = 0,
};

const backend_ops *backend_cuda(void) { return cuda_device_count() > 0 ? &cuda_ops : NULL; }

int backend_gpu_count(void) { return cuda_device_count(); }
const char *backend_gpu_status(void) { return cuda_status(); }

// (GPU 0's name: a handle opened and closed again, once)
static char g_gpu_name[256];
static pthread_once_t g_gpu_name_once = PTHREAD_ONCE_INIT;
static void gpu_name_read(void) {
    cuda_dev *d = cuda_device_count() > 0 ? cuda_open(0) : NULL;
    if (d) snprintf(g_gpu_name, sizeof g_gpu_name, "%s", cuda_name(d)), cuda_close(d);
}
const char *backend_gpu_name(void) {
    pthread_once(&g_gpu_name_once, gpu_name_read);
    return *g_gpu_name ? g_gpu_name : NULL;
}

void *backend_pinned_alloc(size_t bytes) { return cuda_device_count() > 0 ? cuda_host_alloc(bytes) : NULL; }
void backend_pinned_free(void *p) { cuda_host_free(p); }

#else
typedef int backend_cuda_unused; // (ISO C wants a declaration in every file)
#endif
