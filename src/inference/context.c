// Contexts: the KV cache and scratch of one sequence, and infer_eval.
#include "compute/cpu/ops.h"
#include "compute/cpu/attn.h"
#include "tensor/panel.h"
#include "inference/context.h"
#include "vindex/walk.h"
#include "tensor/dtype.h"
#include "base/error.h"
#include "base/numa.h"
#include "base/cpu.h"
#include "base/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CTX_BYTES ((size_t)64 << 30) // refuse caches larger than 64 GiB

static float *alloc_f(size_t n, int *ok) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) *ok = 0;
    return p;
}

// A side's buffers are one allocation, carved by this layout (floats, each
// part 64-byte aligned): the KV cache of every layer that keeps its own (of
// those kv_here marks, where it is not NULL; K rows of type kt, V rows of
// vt), then the layer loop's scratch for n_batch rows. With sd NULL it only
// sums the sizes. The attention scores (they follow the thread count) and a
// template's copies live beside it.
enum { ALIGN_FLOATS = 16 };

// A tensor-parallel rank's GPU: its rank, where the machine has a GPU for
// each rank (each process sees them all: CUDA_VISIBLE_DEVICES unset), else 0.
static int tp_gpu(const infer_model *m) {
    return m->tp_world > 1 && backend_gpu_count() >= m->tp_world ? m->tp_rank : 0;
}

// parts: LAY_KV, LAY_SCRATCH or both (a device context's scratch is its own
// allocation, made at its first pass: a server's slots, whose passes run in
// a batch's workspace, never make one).
// LAY_CHUNK: each cache a whole number of g_chunk bytes (a cache backed as it grows, chunk by chunk).
enum { LAY_KV = 1, LAY_SCRATCH = 2, LAY_ALL = 3, LAY_CHUNK = 4 };
static size_t ctx_layout_al(const infer_config *cf, int n_ctx, int n_batch, const unsigned char *kv_here, int kt, int vt, side *sd,
                            float *arena, size_t *kv_floats, int parts, size_t chunk) {
    size_t at = 0, kv = 0, al = parts & LAY_CHUNK ? chunk / sizeof(float) : ALIGN_FLOATS;
#define PART(dst, count)                                     \
    do {                                                     \
        if (sd) (dst) = arena + at;                          \
        at += ((size_t)(count) + al - 1) / al * al;          \
    } while (0)
    int hd_max = 0, kv_max = 0;
    for (int i = 0; i < cf->n_layer; i++) {
        const layer_config *lc = &cf->layers[i];
        if (lc->head_dim > hd_max) hd_max = lc->head_dim;
        if (lc->n_kv_head > kv_max) kv_max = lc->n_kv_head;
        if (!(parts & LAY_KV)) continue;
        if (sd) sd->k_cache[i] = sd->v_cache[i] = NULL;
        if (lc->kv_source != i || (kv_here && !kv_here[i])) continue;
        size_t n = (size_t)n_ctx * lc->n_kv_head * lc->head_dim;
        size_t kf = (kv_bytes(kt, n) + 3) / 4, vf = (kv_bytes(vt, n) + 3) / 4; // (in floats)
        PART(sd->k_cache[i], kf);
        PART(sd->v_cache[i], vf);
        kv += kf + vf;
    }
    size_t T = (size_t)n_batch, E = (size_t)cf->n_embd, H = (size_t)cf->n_head;
    size_t nq = H * hd_max, nkv = (size_t)kv_max * hd_max;
    // (a mixture of experts' layers have no dense FFN: its n_ff, which no tensor is checked against, sizes nothing --
    // a file's feed_forward_length of 655392 beside 32-wide experts asked 5 GB of scratch)
    size_t F = (size_t)(cf->n_expert ? cf->n_ff_expert : cf->n_ff > cf->n_ff_expert ? cf->n_ff : cf->n_ff_expert);
    size_t LP = (size_t)cf->n_layer * cf->ple_dim;
    size_t nrow = E > (size_t)cf->n_expert ? E : (size_t)cf->n_expert;
    if (!(parts & LAY_SCRATCH)) {
        if (kv_floats) *kv_floats = kv;
        return at;
    }
    al = ALIGN_FLOATS;
    scratch *s = sd ? &sd->s : NULL;
    PART(s->x, T * E);
    PART(s->xn, T * E);
    PART(s->q, T * nq);
    PART(s->k, T * nkv);
    PART(s->v, T * nkv);
    PART(s->qkv, T * (nq + 2 * nkv));
    PART(s->att, T * nq);
    PART(s->o, T * E);
    PART(s->ff, T * 2 * F);
    PART(s->ff2, T * 2 * F);
    PART(s->ple, T * LP);
    PART(s->ple_tmp, T * LP + E);
    PART(s->row, nrow);
    PART(s->eo, E);
#undef PART
    if (kv_floats) *kv_floats = kv;
    return at;
}
static size_t ctx_layout(const infer_config *cf, int n_ctx, int n_batch, const unsigned char *kv_here, int kt, int vt, side *sd,
                         float *arena, size_t *kv_floats, int parts) {
    return ctx_layout_al(cf, n_ctx, n_batch, kv_here, kt, vt, sd, arena, kv_floats, parts, 0);
}

static int default_n_ctx(const infer_config *cf) { return cf->n_ctx_train < 4096 ? cf->n_ctx_train : 4096; }

int kv_default(const infer_model *m) { return m->ggml_numerics ? KV_F16 : KV_F32; }

infer_ctx_params infer_ctx_default_params(void) { return (infer_ctx_params){.n_threads = 1, .n_gpu_layers = -1}; }

// a cache type's number from its name (NULL or "": the default, -1), or -2 for an unknown name
static int kv_type_of(const char *name) {
    if (!name || !*name) return -1;
    for (int t = 0; t < KV_TYPES; t++)
        if (!strcmp(name, kv_type_name(t))) return t;
    return -2;
}

infer_status infer_ctx_memory(const infer_model *m, const infer_ctx_params *p, size_t *kv_bytes, size_t *total_bytes) {
    const infer_config *cf = &m->cfg;
    infer_ctx_params d = infer_ctx_default_params();
    if (!p) p = &d;
    int n_ctx = p->n_ctx, kt = kv_type_of(p->type_k), vt = kv_type_of(p->type_v);
    if (n_ctx < 0) return fail(INFER_ERR_ARG, "context size %d must not be negative", n_ctx);
    if (kt == -2 || vt == -2)
        return fail(INFER_ERR_ARG, "KV cache type \"%s\" for %s: the types are f32, f16 and q8_0", kt == -2 ? p->type_k : p->type_v,
                    kt == -2 ? "K" : "V");
    if (n_ctx == 0) n_ctx = default_n_ctx(cf);
    if (kt < 0) kt = kv_default(m);
    if (vt < 0) vt = kv_default(m);
    size_t kv, all = ctx_layout(cf, n_ctx, N_BATCH, NULL, kt, vt, NULL, NULL, &kv, LAY_ALL);
    int tokens = (int)((1 << 22) / ((size_t)cf->n_head * ((size_t)n_ctx + 1)));
    tokens = tokens < 1 ? 1 : tokens > 8 ? 8 : tokens;
    size_t threads = p->n_threads > 1 ? (size_t)p->n_threads : 1;
    all += threads * tokens * cf->n_head * ((size_t)n_ctx + 1); // attention scores
    if (kv_bytes) *kv_bytes = kv * sizeof(float);
    if (total_bytes) *total_bytes = all * sizeof(float);
    return INFER_OK;
}

// A side's arena of fd floats (ctx_layout's), or, where it holds the KV cache alone (kv_only) and the
// backend has a cache that grows (kv_reserve), one backed as the sequence grows (kv_ensure): each layer's
// caches then a whole number of its chunks (*chunk, else 0), so that a position's rows are backed together.
// NULL: no memory.
static float *arena_new(backend *b, const infer_config *cf, int n_ctx, int n_batch, int kt, int vt, int kv_only, size_t fd, size_t *chunk) {
    const backend_ops *ops = b->ops;
    size_t fv = 0;
    float *da = NULL;
    *chunk = 0;
    if (kv_only && ops->kv_reserve) {
        size_t g = 0;
        void *probe = ops->kv_reserve(b, 1, &g); // (the chunk's size first)
        if (probe) ops->release(b, probe);
        if (g) fv = ctx_layout_al(cf, n_ctx, n_batch, NULL, kt, vt, NULL, NULL, NULL, LAY_KV | LAY_CHUNK, g);
        if (fv && (da = ops->kv_reserve(b, sizeof(float) * fv, chunk)) && *chunk != g) ops->release(b, da), da = NULL;
        if (!da) *chunk = 0;
    }
    return da ? da : ops->alloc(b, sizeof(float) * fd);
}

// A context on the CPU backend with every layer there and the default cache types (infer_ctx_create places it).
static infer_status ctx_new(infer_model *m, int n_ctx, int threads, infer_ctx **out) {
    *out = NULL;
    const infer_config *cf = &m->cfg;
    if (n_ctx < 0) return fail(INFER_ERR_ARG, "context size %d must not be negative", n_ctx);
    if (n_ctx == 0) n_ctx = default_n_ctx(cf);
    if (cf->fam->learned_pos && n_ctx > cf->n_ctx_train)
        return fail(INFER_ERR_ARG, "context size %d exceeds the model's %d learned positions", n_ctx, cf->n_ctx_train);
    int L = cf->n_layer, kt = kv_default(m);
    size_t kv, floats = ctx_layout(cf, n_ctx, N_BATCH, NULL, kt, kt, NULL, NULL, &kv, LAY_ALL);
    if (kv * sizeof(float) > MAX_CTX_BYTES)
        return fail(INFER_ERR_NOMEM, "a KV cache of %d positions needs %zu MiB; use a smaller context", n_ctx,
                    kv * sizeof(float) >> 20);
    // (refused here with the numbers rather than failing, or being killed, later; the KV cache is
    // backed as it grows, within the budget of host_mem.c: a context asks for its rest at once)
    size_t avail = mem_available();
    if (avail && (floats - kv) * sizeof(float) > avail)
        return fail(INFER_ERR_NOMEM, "a context of %d positions needs %.2f GiB (its KV cache %.2f GiB), but %.2f GiB of memory is "
                    "available; use a smaller context (-c)", n_ctx, floats * sizeof(float) / 1073741824.0,
                    kv * sizeof(float) / 1073741824.0, avail / 1073741824.0);

    infer_ctx *c = calloc(1, sizeof *c);
    if (!c) return fail(INFER_ERR_NOMEM, "out of memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = N_BATCH;
    c->kt = c->vt = kt;
    c->kv_req[0] = c->kv_req[1] = -1;
    int ok = 1;
    if (!(c->pool = pool_new(threads))) ok = 0;
    c->ex.pool = c->pool;
    cpu_exec_profile(&c->ex);
    c->own.be = (backend){&backend_cpu_ops, &c->ex, NULL, m, tp_gpu(m)};
    c->own.k_cache = calloc((size_t)L, sizeof(void *));
    c->own.v_cache = calloc((size_t)L, sizeof(void *));
    c->host.k_cache = calloc((size_t)L, sizeof(void *));
    c->host.v_cache = calloc((size_t)L, sizeof(void *));
    // every layer on the context's backend until told otherwise
    c->gpu_layers = -1, c->out_dev = 1, c->on_dev = 1, c->cur = &c->own;
    if ((c->att_dev = malloc(2 * (size_t)L))) memset(c->att_dev, 1, 2 * (size_t)L), c->ffn_dev = c->att_dev + L;
    c->own.arena_ops = c->own.be.ops; // the KV cache and scratch are the backend's memory
    // (the KV cache now, backed as it grows; the scratch at the first pass, scratch_ensure: a batch's
    // sequences never make one)
    size_t kvl = ctx_layout(cf, n_ctx, N_BATCH, NULL, kt, kt, NULL, NULL, NULL, LAY_KV), chunk = 0;
    c->own.arena = arena_new(&c->own.be, cf, n_ctx, N_BATCH, kt, kt, 1, kvl > ALIGN_FLOATS ? kvl : ALIGN_FLOATS, &chunk);
    c->scr_lazy = 1;
    if (!c->own.k_cache || !c->own.v_cache || !c->host.k_cache || !c->host.v_cache || !c->att_dev || !c->own.arena) ok = 0;
    else {
        ctx_layout_al(cf, n_ctx, c->n_batch, NULL, kt, kt, &c->own, c->own.arena, NULL, chunk ? LAY_KV | LAY_CHUNK : LAY_KV, chunk);
        c->kv_chunk = chunk;
    }
    size_t H = (size_t)cf->n_head;
    c->attn_tokens = (int)((1 << 22) / (H * ((size_t)n_ctx + 1)));
    c->attn_tokens = c->attn_tokens < 1 ? 1 : c->attn_tokens > 8 ? 8 : c->attn_tokens;
    c->scores_cap = (size_t)pool_size(c->pool) * c->attn_tokens * H * ((size_t)n_ctx + 1);
    c->scores = alloc_f(c->scores_cap, &ok);
    c->hrow = alloc_f((size_t)(cf->n_embd > cf->n_expert ? cf->n_embd : cf->n_expert), &ok);
    if (m->walk && !(c->ws = walk_scratch_new(m->walk_max_features, cf->n_embd, &c->ex))) ok = 0;
    if (!ok) {
        infer_ctx_free(c);
        return fail(INFER_ERR_NOMEM, "out of memory allocating a context of %d positions", n_ctx);
    }
    *out = c;
    return INFER_OK;
}

infer_status infer_ctx_create(infer_model *m, const infer_ctx_params *p, infer_ctx **out) {
    infer_ctx_params d = infer_ctx_default_params();
    if (!p) p = &d;
    *out = NULL;
    if (p->n_threads < 0 || p->n_threads > 4096) return fail(INFER_ERR_ARG, "thread count %d is outside 1-4096 (0: 1)", p->n_threads);
    infer_ctx *c;
    infer_status st = ctx_new(m, p->n_ctx, p->n_threads ? p->n_threads : 1, &c);
    if (st) return st;
    // the cache's types and the layers' placement before the backend, so that a device's memory is laid out once
    if (((p->type_k && *p->type_k) || (p->type_v && *p->type_v)) && (st = infer_ctx_set_kv_type(c, p->type_k, p->type_v))) goto bad;
    if (p->n_gpu_layers != -1 && (st = infer_ctx_set_gpu_layers(c, p->n_gpu_layers))) goto bad;
    if (p->backend && *p->backend && (st = infer_ctx_set_backend(c, p->backend))) goto bad;
    c->ex.exact = p->deterministic != 0;
    *out = c;
    return INFER_OK;
bad:
    infer_ctx_free(c);
    return st;
}

infer_status infer_ctx_new(infer_model *m, int n_ctx, infer_ctx **out) {
    infer_ctx_params p = infer_ctx_default_params();
    p.n_ctx = n_ctx;
    return infer_ctx_create(m, &p, out);
}

static void free_template(infer_ctx *c);
static infer_status eval(infer_ctx *c, const int32_t *ids, int n, float *logits, int last_only, float *hidden);

void infer_ctx_free(infer_ctx *c) {
    if (!c) return;
    free(c->own.k_cache);
    free(c->own.v_cache);
    free(c->host.k_cache);
    free(c->host.v_cache);
    free(c->att_dev);
    if (c->own.arena) c->own.arena_ops->release(&c->own.be, c->own.arena);
    if (c->own.scr) c->own.arena_ops->release(&c->own.be, c->own.scr);
    if (c->dev_logits) c->own.arena_ops->release(&c->own.be, c->dev_logits);
    if (c->tp_part) c->own.arena_ops->release(&c->own.be, c->tp_part);
    free(c->tp_host);
    if (c->own.be.ops->done) c->own.be.ops->done(&c->own.be);
    if (c->host.arena) c->host.arena_ops->release(&c->host.be, c->host.arena);
    if (c->host.be.ops && c->host.be.ops->done) c->host.be.ops->done(&c->host.be);
    free(c->scores);
    free(c->hrow);
    free_template(c);
    free(c->plan);
    free(c->logit_buf);
    walk_scratch_free(c->ws);
    cpu_exec_release(&c->ex);
    pool_free(c->pool);
    free(c);
}

infer_status infer_ctx_set_threads(infer_ctx *c, int n) {
    if (n < 1) return fail(INFER_ERR_ARG, "thread count %d must be at least 1", n);
    if (n == pool_size(c->pool)) return INFER_OK;
    const infer_config *cf = &c->m->cfg;
    pool *p = pool_new(n);
    size_t per = (size_t)c->attn_tokens * cf->n_head * ((size_t)c->n_ctx + 1);
    float *s = p ? realloc(c->scores, sizeof(float) * per * (size_t)pool_size(p)) : NULL;
    if (!p || !s) {
        pool_free(p);
        return fail(INFER_ERR_NOMEM, "out of memory for %d threads", n);
    }
    c->scores = s;
    c->scores_cap = per * (size_t)pool_size(p);
    pool_free(c->pool);
    c->pool = c->ex.pool = p;
    return INFER_OK;
}

int infer_ctx_threads(const infer_ctx *c) { return pool_size(c->pool); }

// ---------------------------------------------------------------------------
// Where the layers run: the context's backend, or a host side beside it

// The FFN of layer il is the vindex walk (forward.c's choice).
static int ffn_walks(const infer_model *m, const layer_plan *plan, int il) {
    return !m->cfg.n_expert && ((plan && plan[il].kind == G_WALK) || (m->walk && !m->layers[il].ffn_down.w));
}

// Makes ops the context's backend under the layer plan, gpu_layers and the
// host side pick (NULL: the default), after checking that each part runs
// where it lands; the memory is laid out again where that changes (only on
// a fresh context). what names the request in errors. On an error nothing
// changes.
static infer_status arrange(infer_ctx *c, const backend_ops *ops, const layer_plan *plan, int gpu_layers,
                            const backend_ops *pick, const char *what) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    int L = cf->n_layer;
    // the host side: the one picked, else the CPU beside a device
    const backend_ops *hs = pick ? pick : ops->host ? NULL : &backend_cpu_ops;
    unsigned char *att = malloc(4 * (size_t)L); // att, ffn, then the KV caches each side holds
    if (!att) return fail(INFER_ERR_NOMEM, "out of memory");
    unsigned char *ffn = att + L, *kv_dev = att + 2 * L, *kv_host = att + 3 * L;
    // llama.cpp's -ngl N: the last N layers on the device, the output too when N > n_layer
    int out = !hs || gpu_layers < 0 || gpu_layers > L, split = !out, piped = 0, cached = 0;
    for (int il = 0; il < L; il++) {
        int kind = plan ? plan[il].kind : G_DENSE, dev = gpu_layers < 0 || il >= L - gpu_layers;
        piped |= kind == G_PIPELINED, cached |= kind == G_CACHED;
        // pipelined: the attention on the host side, the FFN on the device
        att[il] = !hs || (dev && kind != G_PIPELINED);
        ffn[il] = !hs || dev || kind == G_PIPELINED;
        split |= !att[il] || !ffn[il];
    }
    // a layer's K/V cache lives where the attention of the layers reading it runs (both sides, when shared across)
    memset(kv_dev, 0, 2 * (size_t)L);
    for (int il = 0; il < L; il++) (att[il] ? kv_dev : kv_host)[cf->layers[il].kv_source] = 1;
    infer_status st = INFER_OK;
    if (piped && !hs)
        st = fail(INFER_ERR_UNSUPPORTED,
                  "%s: pipelined layers (attention on the CPU, FFN on a GPU) need a GPU backend; the context runs on \"%s\" (set its backend to cuda first)",
                  what, ops->name);
    else if (cached && !ops->host)
        st = fail(INFER_ERR_UNSUPPORTED, "%s: backend \"%s\" does not run cached layers yet", what, ops->name);
    else if (cached && split)
        st = fail(INFER_ERR_UNSUPPORTED, "%s: cached layers do not run on a context split over two backends (GPU layers, pipelined)", what);
    for (int il = 0; !st && il < L; il++) {
        const backend_ops *fo = ffn[il] ? ops : hs;
        if (!ffn_walks(m, plan, il) || fo->host) continue;
        int ty = m->walk[il].ffn->type;
        if (!fo->walk)
            st = fail(INFER_ERR_UNSUPPORTED, "%s: backend \"%s\" does not run the vindex walk (layer %d's FFN; on the CPU it does)", what,
                      fo->name, il);
        else if (plan && plan[il].kind == G_WALK && plan[il].rank)
            st = fail(INFER_ERR_UNSUPPORTED, "%s: backend \"%s\" walks by |gate . x| only (layer %d's walkc runs on the CPU)", what,
                      fo->name, il);
        else if (fo->walk_takes && !fo->walk_takes(ty))
            st = fail(INFER_ERR_UNSUPPORTED, "%s: backend \"%s\" walks f32, f16, bf16 or q8_0 feature rows; this vindex's are %s (layer %d; "
                      "on the CPU it runs)", what, fo->name, dtype_get(ty) ? dtype_get(ty)->name : "of an unknown type", il);
    }
    // the KV cache's types: those asked for, else the default (f16 under ggml's numerics, whose cache rows
    // are f16 values, else f32; a device keeps both caches in one of the two)
    int kt = c->kv_req[0] >= 0 ? c->kv_req[0] : kv_default(m);
    int vt = c->kv_req[1] >= 0 ? c->kv_req[1] : kv_default(m);
    if (!st && !ops->host && (kt != vt || (kt != KV_F32 && kt != KV_F16)))
        st = fail(INFER_ERR_UNSUPPORTED, "%s: backend \"%s\" keeps its K and V caches both in f32 or both in f16 (a cache of %s / %s runs "
                  "on the CPU)", what, ops->name, kv_type_name(kt), kv_type_name(vt));
    // the memory: laid out again where its kind, the split or the cache's types change
    int same_mem = ops == c->own.arena_ops || (ops->host && c->own.arena_ops->host);
    int relay = !same_mem || split != c->split || (split && memcmp(att, c->att_dev, (size_t)L)) || kt != c->kt || vt != c->vt;
    if (!st && relay && c->n_past)
        st = fail(INFER_ERR_ARG, "%s: the context holds %d positions laid out for another placement; set where it runs before the first evaluation",
                  what, c->n_past);
    if (!st && relay) {
        int n_batch = ops->host ? N_BATCH : N_BATCH_DEV;
        int keep = ops == c->own.be.ops; // (a device backend keeps its state: its copies of the weights)
        backend nb = keep ? c->own.be : (backend){ops, &c->ex, NULL, m, tp_gpu(m)}, hb = {hs, &c->ex, NULL, m, 0};
        const int lazy = !split; // (the scratch at the first pass, scratch_ensure; a split context's two sides: now)
        size_t fd = ctx_layout(cf, c->n_ctx, n_batch, split ? kv_dev : NULL, kt, vt, NULL, NULL, NULL, lazy ? LAY_KV : LAY_ALL);
        size_t fh = split ? ctx_layout(cf, c->n_ctx, n_batch, kv_host, kt, vt, NULL, NULL, NULL, LAY_ALL) : 0;
        fd = fd > ALIGN_FLOATS ? fd : ALIGN_FLOATS; // (a model without a cache: still an arena)
        size_t chunk = 0;
        float *da = arena_new(&nb, cf, c->n_ctx, n_batch, kt, vt, lazy, fd, &chunk);
        float *ha = da && split ? hs->alloc(&hb, sizeof(float) * fh) : NULL;
        if (!da || (split && !ha)) {
            if (da) ops->release(&nb, da);
            if (!keep && ops->done) ops->done(&nb);
            free(att);
            return fail(INFER_ERR_NOMEM, "%s: no memory for a context of %d positions (%zu MiB)%s%s", what, c->n_ctx,
                        sizeof(float) * (fd + fh) >> 20, ops->host ? "" : ": ", ops->host ? "" : backend_gpu_status());
        }
        c->own.arena_ops->release(&c->own.be, c->own.arena);
        if (c->own.scr) c->own.arena_ops->release(&c->own.be, c->own.scr);
        c->own.scr = NULL, c->scr_lazy = lazy;
        memset(&c->own.s, 0, sizeof c->own.s);
        if (c->host.arena) c->host.arena_ops->release(&c->host.be, c->host.arena);
        if (c->host.be.ops && c->host.be.ops->done) c->host.be.ops->done(&c->host.be);
        if (!keep) {
            if (c->dev_logits) c->own.arena_ops->release(&c->own.be, c->dev_logits);
            if (c->tp_part) c->own.arena_ops->release(&c->own.be, c->tp_part);
            if (c->own.be.ops->done) c->own.be.ops->done(&c->own.be);
            c->dev_logits = NULL, c->dev_logit_cap = 0, c->tp_part = NULL, c->tp_part_cap = 0;
        }
        c->own.be = nb, c->own.arena_ops = ops, c->own.arena = da, c->n_batch = n_batch, c->kt = kt, c->vt = vt;
        ctx_layout_al(cf, c->n_ctx, n_batch, split ? kv_dev : NULL, kt, vt, &c->own, da, NULL,
                      chunk ? LAY_KV | LAY_CHUNK : lazy ? LAY_KV : LAY_ALL, chunk);
        c->kv_chunk = chunk, c->kv_have = 0, c->kv_shared = 0;
        c->host = (side){hb, hs, ha, NULL, c->host.k_cache, c->host.v_cache, {0}};
        if (split) ctx_layout(cf, c->n_ctx, n_batch, kv_host, kt, vt, &c->host, ha, NULL, LAY_ALL);
        else {
            c->host.arena_ops = NULL, c->host.be.ops = NULL;
            memset(c->host.k_cache, 0, sizeof(void *) * (size_t)L);
            memset(c->host.v_cache, 0, sizeof(void *) * (size_t)L);
        }
    }
    if (!st) {
        c->own.be.ops = ops;
        if (split) c->host.be.ops = hs; // (a host backend for another: the same memory)
        memcpy(c->att_dev, att, 2 * (size_t)L); // (att, then ffn)
        c->out_dev = out, c->split = split, c->gpu_layers = gpu_layers, c->host_pick = pick;
    }
    free(att);
    return st;
}

infer_status scratch_ensure(infer_ctx *c) {
    if (!c->scr_lazy || c->own.scr) return INFER_OK;
    const infer_config *cf = &c->m->cfg;
    size_t n = ctx_layout(cf, c->n_ctx, c->n_batch, NULL, c->kt, c->vt, NULL, NULL, NULL, LAY_SCRATCH);
    float *a = c->own.arena_ops->alloc(&c->own.be, sizeof(float) * n);
    if (!a)
        return fail(INFER_ERR_NOMEM, "no memory for a pass's scratch of %d rows (%zu MiB)%s%s", c->n_batch, sizeof(float) * n >> 20,
                    c->own.arena_ops->host ? "" : ": ", c->own.arena_ops->host ? "" : backend_gpu_status());
    c->own.scr = a;
    ctx_layout(cf, c->n_ctx, c->n_batch, NULL, c->kt, c->vt, &c->own, a, NULL, LAY_SCRATCH);
    return INFER_OK;
}

size_t kv_layer(const infer_ctx *c, int il, size_t *ko, size_t *vo) {
    *ko = (size_t)((char *)c->own.k_cache[il] - (char *)c->own.arena), *vo = (size_t)((char *)c->own.v_cache[il] - (char *)c->own.arena);
    return (size_t)c->m->cfg.layers[il].n_kv_head * c->m->cfg.layers[il].head_dim;
}

static void kv_give_back(infer_ctx *c, int keep);

// why a cache's memory was refused: the device's state, or the host caches' budget
static const char *kv_nomem_why(const backend_ops *ops) {
    static _Thread_local char why[160];
    if (!ops->host) return backend_gpu_status();
    size_t budget, used = backend_host_kv_used(&budget);
    snprintf(why, sizeof why, "the KV caches hold %.1f of their %.1f MiB (INFER_KV_MEM=MiB sets it; 90%% of MemAvailable otherwise)",
             used / 1048576.0, budget / 1048576.0);
    return why;
}

// Positions [0, n) of every layer's caches backed (a cache that grows: kv_chunk set), in steps of
// KV_STEP positions
enum { KV_STEP = 256 };
infer_status kv_ensure(infer_ctx *c, int n) {
    if (!c->kv_chunk || n <= c->kv_have) return INFER_OK;
    const infer_config *cf = &c->m->cfg;
    int want = (n + KV_STEP - 1) / KV_STEP * KV_STEP;
    want = want < c->n_ctx ? want : c->n_ctx;
    const backend_ops *ops = c->own.arena_ops;
    for (int il = 0; il < cf->n_layer; il++) {
        if (!c->own.k_cache[il]) continue;
        size_t ko, vo;
        const size_t nkv = kv_layer(c, il, &ko, &vo);
        if (ops->kv_commit(&c->own.be, c->own.arena, ko, kv_bytes(c->kt, (size_t)want * nkv)) ||
            ops->kv_commit(&c->own.be, c->own.arena, vo, kv_bytes(c->vt, (size_t)want * nkv))) {
            kv_give_back(c, c->kv_have); // (the layers backed before this one: as they were)
            return fail(INFER_ERR_NOMEM, "no memory for %d positions of the KV cache (%.1f MiB): %s", want,
                        (double)infer_ctx_kv_bytes_per_pos(c) * want / 1048576.0, kv_nomem_why(ops));
        }
    }
    c->kv_have = want;
    return INFER_OK;
}

infer_status kv_own(infer_ctx *c, int from) {
    if (!c->kv_chunk || from >= c->kv_shared) return INFER_OK;
    from = from > 0 ? from : 0;
    const infer_config *cf = &c->m->cfg;
    const backend_ops *ops = c->own.arena_ops;
    for (int il = 0; il < cf->n_layer; il++) {
        if (!c->own.k_cache[il]) continue;
        size_t ko, vo;
        const size_t nkv = kv_layer(c, il, &ko, &vo);
        const size_t k0 = kv_bytes(c->kt, (size_t)from * nkv), v0 = kv_bytes(c->vt, (size_t)from * nkv);
        if (ops->kv_private(&c->own.be, c->own.arena, ko + k0, kv_bytes(c->kt, (size_t)c->kv_shared * nkv) - k0) ||
            ops->kv_private(&c->own.be, c->own.arena, vo + v0, kv_bytes(c->vt, (size_t)c->kv_shared * nkv) - v0))
            return fail(INFER_ERR_NOMEM, "no memory for a copy of the KV cache's shared positions %d-%d: %s", from, c->kv_shared - 1,
                        kv_nomem_why(ops));
    }
    c->kv_shared = from;
    return INFER_OK;
}

infer_status infer_ctx_kv_reserve(infer_ctx *c, int n) {
    if (!c) return fail(INFER_ERR_ARG, "infer_ctx_kv_reserve: no context");
    if (n < 0 || n > c->n_ctx) return fail(INFER_ERR_ARG, "KV reserve of %d positions in a context of %d", n, c->n_ctx);
    return kv_ensure(c, n);
}

// Every layer's chunks past position keep given back (each layer's caches whole chunks: a trim stays
// inside its own); kv_have then keep.
static void kv_give_back(infer_ctx *c, int keep) {
    const infer_config *cf = &c->m->cfg;
    const backend_ops *ops = c->own.arena_ops;
    for (int il = 0; il < cf->n_layer; il++) {
        if (!c->own.k_cache[il]) continue;
        size_t ko, vo;
        const size_t nkv = kv_layer(c, il, &ko, &vo);
        const size_t kk = kv_bytes(c->kt, (size_t)keep * nkv), vk = kv_bytes(c->vt, (size_t)keep * nkv), g = c->kv_chunk;
        const size_t kr = (kv_bytes(c->kt, (size_t)c->n_ctx * nkv) + g - 1) / g * g, vr = (kv_bytes(c->vt, (size_t)c->n_ctx * nkv) + g - 1) / g * g;
        ops->kv_trim(&c->own.be, c->own.arena, ko + kk, kr - kk);
        ops->kv_trim(&c->own.be, c->own.arena, vo + vk, vr - vk);
    }
    c->kv_have = keep;
}

void infer_ctx_kv_trim(infer_ctx *c) {
    if (!c || !c->kv_chunk) return;
    int keep = (c->n_past + KV_STEP - 1) / KV_STEP * KV_STEP;
    keep = keep < c->n_ctx ? keep : c->n_ctx;
    if (keep < c->kv_have) kv_give_back(c, keep);
}

size_t infer_ctx_kv_backed(const infer_ctx *c) {
    if (!c) return 0;
    const infer_config *cf = &c->m->cfg;
    size_t b = 0;
    for (int il = 0; il < cf->n_layer; il++) {
        if (!c->own.k_cache[il]) continue;
        const size_t nkv = (size_t)cf->layers[il].n_kv_head * cf->layers[il].head_dim;
        const size_t n = (size_t)(c->kv_chunk ? c->kv_have : c->n_ctx);
        b += kv_bytes(c->kt, n * nkv) + kv_bytes(c->vt, n * nkv);
    }
    return b;
}

infer_status infer_ctx_set_backend(infer_ctx *c, const char *name) {
    const backend_ops *ops = backend_find(name);
    if (!ops && name && !strcmp(name, "cuda")) return fail(INFER_ERR_UNSUPPORTED, "backend \"cuda\": %s", backend_gpu_status());
    if (!ops) return fail(INFER_ERR_ARG, "unknown backend \"%s\" (backends: cpu, reference, cuda)", name ? name : "(null)");
    if (ops == c->own.be.ops) return INFER_OK;
    char what[64];
    snprintf(what, sizeof what, "backend \"%s\"", ops->name);
    return arrange(c, ops, c->plan, c->gpu_layers, c->host_pick, what);
}

infer_status infer_ctx_set_gpu_layers(infer_ctx *c, int n) {
    if (n < -1) return fail(INFER_ERR_ARG, "GPU layers %d: a count of layers (0 or more), or -1 for all", n);
    char what[64];
    snprintf(what, sizeof what, "%d GPU layers", n);
    return arrange(c, c->own.be.ops, c->plan, n, c->host_pick, what);
}

int infer_ctx_split(const infer_ctx *c) { return c->split; }

infer_status ctx_set_host_side(infer_ctx *c, const char *name) {
    const backend_ops *ops = backend_find(name);
    if (!ops || !ops->host) return fail(INFER_ERR_ARG, "host side \"%s\": not a host backend (cpu, reference)", name ? name : "(null)");
    char what[64];
    snprintf(what, sizeof what, "host side \"%s\"", ops->name);
    return arrange(c, c->own.be.ops, c->plan, c->gpu_layers, ops, what);
}

const char *infer_ctx_backend(const infer_ctx *c) { return c->own.be.ops->name; }

infer_status infer_ctx_prepare(infer_ctx *c) {
    return c->own.be.ops->host || c->split ? model_ensure_packed((infer_model *)c->m) : INFER_OK;
}

infer_status infer_ctx_set_kv_type(infer_ctx *c, const char *k, const char *v) {
    const infer_config *cf = &c->m->cfg;
    const char *name[2] = {k, v};
    int req[2];
    for (int i = 0; i < 2; i++) {
        req[i] = kv_type_of(name[i]);
        if (req[i] == -1) continue; // (the default)
        if (req[i] < 0)
            return fail(INFER_ERR_ARG, "KV cache type \"%s\" for %s: the types are f32, f16 and q8_0", name[i], i ? "V" : "K");
        for (int il = 0; req[i] == KV_Q8_0 && il < cf->n_layer; il++)
            if (cf->layers[il].head_dim % 32)
                return fail(INFER_ERR_UNSUPPORTED, "KV cache type q8_0 for %s: layer %d's heads of %d values are not whole blocks of 32",
                            i ? "V" : "K", il, cf->layers[il].head_dim);
    }
    int old[2] = {c->kv_req[0], c->kv_req[1]};
    c->kv_req[0] = req[0], c->kv_req[1] = req[1];
    char what[96];
    snprintf(what, sizeof what, "KV cache %s / %s", name[0] && *name[0] ? name[0] : "default", name[1] && *name[1] ? name[1] : "default");
    infer_status st = arrange(c, c->own.be.ops, c->plan, c->gpu_layers, c->host_pick, what);
    if (st) c->kv_req[0] = old[0], c->kv_req[1] = old[1];
    return st;
}

const char *infer_ctx_kv_type(const infer_ctx *c, int v) { return kv_type_name(v ? c->vt : c->kt); }

size_t infer_ctx_kv_bytes_per_pos(const infer_ctx *c) {
    const infer_config *cf = &c->m->cfg;
    size_t n = 0;
    for (int il = 0; il < cf->n_layer; il++) {
        if (cf->layers[il].kv_source != il) continue;
        size_t nkv = (size_t)cf->layers[il].n_kv_head * cf->layers[il].head_dim;
        n += kv_bytes(c->kt, nkv) + kv_bytes(c->vt, nkv);
    }
    return n;
}

static void free_template(infer_ctx *c) {
    for (int i = 0; i < c->tmpl_layers; i++) {
        if (c->tmpl_k) free(c->tmpl_k[i]);
        if (c->tmpl_v) free(c->tmpl_v[i]);
    }
    free(c->tmpl_k), free(c->tmpl_v), free(c->tmpl_x);
    c->tmpl_k = c->tmpl_v = NULL, c->tmpl_x = NULL;
    c->tmpl_n = c->tmpl_layers = 0;
}

infer_status infer_ctx_set_graph(infer_ctx *c, const char *spec, int default_k) {
    const infer_model *m = c->m;
    int L = m->cfg.n_layer;
    layer_plan *plan = malloc(sizeof *plan * (size_t)L);
    if (!plan) return fail(INFER_ERR_NOMEM, "out of memory");
    char err[256];
    if (!graph_parse(spec, L, default_k, plan, err, sizeof err)) { free(plan); return fail(INFER_ERR_ARG, "%s", err); }
    int n_cached = 0, walks = 0;
    for (int i = 0; i < L; i++) n_cached += plan[i].kind == G_CACHED, walks += plan[i].kind == G_WALK;
    if (walks && !m->walk) { free(plan); return fail(INFER_ERR_ARG, "graph \"%s\": walk layers need a vindex (-x)", spec); }
    if (walks && m->cfg.n_expert) { free(plan); return fail(INFER_ERR_UNSUPPORTED, "graph \"%s\": walk layers of a mixture of experts are not supported", spec); }
    if ((walks || m->walk) && !c->ws) {
        c->ws = walk_scratch_new(m->walk_max_features, m->cfg.n_embd, &c->ex);
        if (!c->ws) { free(plan); return fail(INFER_ERR_NOMEM, "out of memory for the walk"); }
    }
    char what[300];
    snprintf(what, sizeof what, "graph \"%s\"", spec);
    infer_status st = arrange(c, c->own.be.ops, plan, c->gpu_layers, c->host_pick, what);
    if (st) { free(plan); return st; }
    free(c->plan);
    c->plan = plan;
    c->n_cached = n_cached;
    return INFER_OK;
}

infer_status infer_ctx_set_template(infer_ctx *c, const int32_t *ids, int n) {
    const infer_config *cf = &c->m->cfg;
    if (!c->plan || c->n_cached == 0) return fail(INFER_ERR_ARG, "the graph has no cached layers to record a template for");
    if (n <= 0 || n > c->n_ctx) return fail(INFER_ERR_ARG, "a template of %d tokens does not fit a context of %d", n, c->n_ctx);
    free_template(c);
    int E = cf->n_embd, nc = c->n_cached;
    c->tmpl_x = malloc(sizeof(float) * (size_t)n * E);
    c->tmpl_k = calloc((size_t)nc, sizeof(void *));
    c->tmpl_v = calloc((size_t)nc, sizeof(void *));
    if (!c->tmpl_x || !c->tmpl_k || !c->tmpl_v) { free_template(c); return fail(INFER_ERR_NOMEM, "out of memory for the template"); }
    c->tmpl_layers = nc; // forward copies the residual after layer nc - 1 into capture
    // the template's own pass is dense
    layer_plan *plan = c->plan;
    c->plan = NULL;
    c->capture = c->tmpl_x;
    c->n_past = 0;
    infer_status st = eval(c, ids, n, NULL, 0, NULL);
    c->plan = plan;
    c->capture = NULL;
    for (int il = 0; !st && il < nc; il++) {
        if (cf->layers[il].kv_source != il) continue;
        size_t nv = (size_t)n * cf->layers[il].n_kv_head * cf->layers[il].head_dim;
        size_t kb = kv_bytes(c->kt, nv), vb = kv_bytes(c->vt, nv);
        c->tmpl_k[il] = malloc(kb), c->tmpl_v[il] = malloc(vb);
        if (!c->tmpl_k[il] || !c->tmpl_v[il]) { st = fail(INFER_ERR_NOMEM, "out of memory for the template"); break; }
        memcpy(c->tmpl_k[il], c->own.k_cache[il], kb);
        memcpy(c->tmpl_v[il], c->own.v_cache[il], vb);
    }
    c->n_past = 0;
    if (st) { free_template(c); return st; }
    c->tmpl_n = n;
    return INFER_OK;
}

void infer_ctx_reset(infer_ctx *c) { c->n_past = 0; }
void infer_ctx_truncate(infer_ctx *c, int n) { if (n >= 0 && n < c->n_past) c->n_past = n; }
int infer_ctx_n_past(const infer_ctx *c) { return c->n_past; }
int infer_ctx_n_ctx(const infer_ctx *c) { return c->n_ctx; }

static infer_status eval(infer_ctx *c, const int32_t *ids, int n, float *logits, int last_only, float *hidden) {
    const infer_config *cf = &c->m->cfg;
    if (n <= 0) return fail(INFER_ERR_ARG, "no tokens to evaluate");
    if (cf->fam->encoder)
        return fail(INFER_ERR_UNSUPPORTED, "model type %s is an encoder: it makes embeddings (infer_embed), not next-token logits",
                    cf->model_type);
    if (n > c->n_ctx - c->n_past)
        return fail(INFER_ERR_ARG, "%d tokens do not fit: %d of the context's %d positions are used", n, c->n_past, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= cf->n_vocab)
            return fail(INFER_ERR_ARG, "token id %d (at %d) is outside the vocabulary of %d", ids[i], i, cf->n_vocab);
    for (int i = 0; i < n; i += c->n_batch) {
        int T = n - i < c->n_batch ? n - i : c->n_batch;
        int last = i + T == n;
        float *lg = NULL;
        if (logits) {
            if (!last_only) lg = logits + (size_t)i * cf->n_vocab;
            else if (last) lg = logits;
        }
        infer_status st = forward(c, ids + i, T, lg, last_only, last ? hidden : NULL);
        if (st) return st;
    }
    return INFER_OK;
}

infer_status infer_eval(infer_ctx *c, const int32_t *ids, int n, float *logits, int last_only) {
    return eval(c, ids, n, logits, last_only, NULL);
}

infer_status infer_eval_hidden(infer_ctx *c, const int32_t *ids, int n, float *logits, int last_only, float *hidden) {
    return eval(c, ids, n, logits, last_only, hidden);
}

int infer_ctx_n_cached(const infer_ctx *c) { return c->plan ? c->n_cached : 0; }

infer_status infer_model_set_threads(infer_model *m, int n) {
    if (n < 1 || n > 4096) return fail(INFER_ERR_ARG, "thread count %d is outside 1-4096", n);
    m->threads = n;
    return INFER_OK;
}

int infer_model_threads(const infer_model *m) { return model_threads(m); }

int infer_gpu_count(void) { return backend_gpu_count(); }

infer_status infer_ctx_set_deterministic(infer_ctx *ctx, int on) {
    if (!ctx) return fail(INFER_ERR_ARG, "infer_ctx_set_deterministic: no context");
    ctx->ex.exact = on != 0;
    return INFER_OK;
}

int infer_ctx_split_invariant(const infer_ctx *ctx) {
    if (!ctx) return 0;
    if (strcmp(ctx->own.be.ops->name, "cpu")) return !strcmp(ctx->own.be.ops->name, "reference");
    return ctx->ex.exact || (!panel_enabled() && !attn_flash_enabled());
}

infer_status infer_numa_init(const char *strategy) {
    static const char *names[] = {"none", "distribute", "isolate", "numactl"}; // (numa.h's order)
    for (int i = 0; strategy && i < 4; i++)
        if (!strcmp(strategy, names[i]))
            return numa_set(i) ? fail(INFER_ERR_IO, "--numa %s: the CPUs this process may use could not be read", strategy) : INFER_OK;
    return fail(INFER_ERR_ARG, "numa strategy \"%s\": expected distribute, isolate, numactl or none", strategy ? strategy : "(null)");
}

const char *infer_gpu_status(void) {
    const char *name = backend_gpu_count() > 0 ? backend_gpu_name() : NULL;
    return name ? name : backend_gpu_status();
}

// Each block: a 64-byte header saying how it was made (1: page-locked), then the bytes.
enum { HOST_HDR = 64 };
void *infer_host_alloc(size_t bytes) {
    if (bytes > SIZE_MAX - HOST_HDR) return NULL;
    unsigned char *p = backend_pinned_alloc(bytes + HOST_HDR);
    int pinned = p != NULL;
    if (!p && !(p = malloc(bytes + HOST_HDR))) return NULL;
    p[0] = (unsigned char)pinned;
    return p + HOST_HDR;
}

void infer_host_free(void *ptr) {
    if (!ptr) return;
    unsigned char *p = (unsigned char *)ptr - HOST_HDR;
    if (p[0]) backend_pinned_free(p);
    else free(p);
}

unsigned long infer_cpu_unpacked_products(void) { return matmul_unpacked_count(); }
