// Batched evaluation: many sequences (contexts of one model, each its own KV
// cache and position) advanced in shared passes of the layer loop, so every
// weight is read once per pass for all of them; attention stays per sequence.
//
// A sequence's tokens in one call go through the passes in the chunks that
// infer_eval would use alone (its n_batch tokens from the start of the call), and
// every row is computed as it would be alone, so each sequence's logits are
// bit for bit those of running it alone. A pass takes the next whole chunk of
// each sequence, in order, while the rows fit. The sequences share one
// backend, and the workspace follows them there (a GPU's passes: its memory).
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "inference/context.h"

#define MAX_SEQS 4096

struct infer_batch {
    infer_ctx *ws; // the workspace: scratch, threads; its own KV cache is unused
};

infer_status infer_batch_new(infer_model *m, infer_batch **out) {
    *out = NULL;
    infer_batch *b = calloc(1, sizeof *b);
    if (!b) return fail(INFER_ERR_NOMEM, "batch");
    infer_status st = infer_ctx_new(m, 1, &b->ws);
    if (st) {
        free(b);
        return st;
    }
    *out = b;
    return INFER_OK;
}

void infer_batch_free(infer_batch *b) {
    if (!b) return;
    infer_ctx_free(b->ws);
    free(b);
}

infer_status infer_batch_set_threads(infer_batch *b, int n) { return infer_ctx_set_threads(b->ws, n); }

void infer_batch_profile(infer_batch *b, int on) { b->ws->profiling = on; }

static infer_status check(const infer_batch *b, infer_ctx *const *ctx, int n, const int32_t *const *ids, const int *n_ids) {
    const infer_model *m = b->ws->m;
    if (n < 1 || n > MAX_SEQS) return fail(INFER_ERR_ARG, "batch of %d sequences (1 to %d)", n, MAX_SEQS);
    if (m->cfg.fam->encoder)
        return fail(INFER_ERR_UNSUPPORTED, "model type %s is an encoder: it makes embeddings (infer_embed), not next-token logits",
                    m->cfg.model_type);
    for (int i = 0; i < n; i++) {
        const infer_ctx *c = ctx[i];
        if (!c || !ids || !ids[i] || !n_ids) return fail(INFER_ERR_ARG, "batch: sequence %d has no context or no ids", i);
        if (c->m != m) return fail(INFER_ERR_ARG, "batch: sequence %d is a context of another model", i);
        if (c->split)
            return fail(INFER_ERR_UNSUPPORTED, "batch: sequence %d is split over two devices (-ngl / pipelined); batched passes run on one", i);
        if (c->plan || c->capture)
            return fail(INFER_ERR_UNSUPPORTED, "batch: sequence %d has a layer graph; batched passes run dense layers", i);
        if (n_ids[i] < 1) return fail(INFER_ERR_ARG, "batch: sequence %d has %d tokens", i, n_ids[i]);
        if (n_ids[i] > c->n_ctx - c->n_past)
            return fail(INFER_ERR_ARG, "batch: sequence %d: %d tokens do not fit: %d of its %d positions are used", i,
                        n_ids[i], c->n_past, c->n_ctx);
        for (int k = 0; k < n_ids[i]; k++)
            if (ids[i][k] < 0 || ids[i][k] >= m->cfg.n_vocab)
                return fail(INFER_ERR_ARG, "batch: sequence %d: token id %d (at %d) is outside the vocabulary of %d", i,
                            ids[i][k], k, m->cfg.n_vocab);
        for (int j = 0; j < i; j++)
            if (ctx[j] == c) return fail(INFER_ERR_ARG, "batch: sequences %d and %d are the same context", j, i);
        if (c->kt != ctx[0]->kt || c->vt != ctx[0]->vt)
            return fail(INFER_ERR_ARG, "batch: sequence %d's KV cache is %s / %s, sequence 0's %s / %s; a batch's are of one type", i,
                        kv_type_name(c->kt), kv_type_name(c->vt), kv_type_name(ctx[0]->kt), kv_type_name(ctx[0]->vt));
        if (c->own.be.ops != ctx[0]->own.be.ops)
            return fail(INFER_ERR_ARG, "batch: sequence %d runs on the \"%s\" backend, sequence 0 on \"%s\"; a batch runs on one", i,
                        c->own.be.ops->name, ctx[0]->own.be.ops->name);
    }
    return INFER_OK;
}

infer_status infer_batch_eval(infer_batch *b, infer_ctx *const *ctx, int n, const int32_t *const *ids, const int *n_ids,
                              float *const *logits) {
    return infer_batch_eval_tokens(b, ctx, n, ids, n_ids, logits, NULL);
}

infer_status infer_batch_eval_tokens(infer_batch *b, infer_ctx *const *ctx, int n, const int32_t *const *ids, const int *n_ids,
                                     float *const *logits, int32_t *const *tok) {
    return infer_batch_eval_rows(b, ctx, n, ids, n_ids, logits, tok, NULL);
}

infer_status infer_batch_eval_rows(infer_batch *b, infer_ctx *const *ctx, int n, const int32_t *const *ids, const int *n_ids,
                                   float *const *logits, int32_t *const *tok, const int *all) {
    infer_status st = check(b, ctx, n, ids, n_ids);
    if (!st && b->ws->own.be.ops != ctx[0]->own.be.ops) st = infer_ctx_set_backend(b->ws, ctx[0]->own.be.ops->name); // (the workspace follows)
    if (st) return st;
    b->ws->ex.exact = 0; // (a pass exact where any of its sequences is deterministic)
    for (int i = 0; i < n; i++) b->ws->ex.exact |= ctx[i]->ex.exact;
    int *done = calloc((size_t)n, sizeof *done), *past = malloc(sizeof *past * (size_t)n);
    if (!done || !past) {
        free(done), free(past);
        return fail(INFER_ERR_NOMEM, "batch of %d sequences", n);
    }
    for (int i = 0; i < n; i++) past[i] = ctx[i]->n_past;
    infer_ctx *seq[N_BATCH_MAX];
    int32_t row_ids[N_BATCH_MAX];
    float *dst[N_BATCH_MAX];
    int32_t *tdst[N_BATCH_MAX];
    int cap = b->ws->n_batch;
    for (int left = 1; left && !st;) {
        int T = 0;
        left = 0;
        for (int i = 0; i < n; i++) {
            int rest = n_ids[i] - done[i];
            if (!rest) continue;
            int chunk = rest < ctx[i]->n_batch ? rest : ctx[i]->n_batch;
            if (T + chunk > cap) { // the next pass
                left = 1;
                continue;
            }
            for (int k = 0; k < chunk; k++) {
                seq[T] = ctx[i];
                row_ids[T] = ids[i][done[i] + k];
                int last = done[i] + k == n_ids[i] - 1;
                int every = all && all[i];
                dst[T] = !logits || !logits[i] ? NULL
                         : every             ? logits[i] + (size_t)(done[i] + k) * b->ws->m->cfg.n_vocab
                         : last              ? logits[i]
                                             : NULL;
                tdst[T] = tok && tok[i] && last && !every ? tok[i] : NULL;
                T++;
            }
            done[i] += chunk;
            left |= done[i] < n_ids[i];
        }
        pass_rows_set(b->ws, seq, T);
        st = forward_pass(b->ws, row_ids, T, &(pass_out){.dst = dst, .tok = tok ? tdst : NULL});
    }
    if (st)
        for (int i = 0; i < n; i++) ctx[i]->n_past = past[i]; // nothing of the call counts
    free(done);
    free(past);
    return st;
}

infer_status infer_ctx_copy(infer_ctx *dst, const infer_ctx *src, int n) {
    const infer_config *cf = &src->m->cfg;
    if (dst->m != src->m) return fail(INFER_ERR_ARG, "context copy: the contexts are of different models");
    if (n < 0 || n > src->n_past) return fail(INFER_ERR_ARG, "context copy: %d positions of a context that holds %d", n, src->n_past);
    if (n > dst->n_ctx) return fail(INFER_ERR_ARG, "context copy: %d positions into a context of %d", n, dst->n_ctx);
    if (dst->split || src->split) // (each side's caches would need copying; nothing asks for it yet)
        return fail(INFER_ERR_UNSUPPORTED, "context copy: the %s context is split over two devices (-ngl / pipelined)", src->split ? "source" : "destination");
    if (dst->own.arena_ops != src->own.arena_ops)
        return fail(INFER_ERR_ARG, "context copy: the contexts' caches are in different memories (\"%s\" and \"%s\")",
                    src->own.arena_ops->name, dst->own.arena_ops->name);
    if (dst->kt != src->kt || dst->vt != src->vt)
        return fail(INFER_ERR_ARG, "context copy: the caches' types differ (%s / %s into %s / %s)", kv_type_name(src->kt),
                    kv_type_name(src->vt), kv_type_name(dst->kt), kv_type_name(dst->vt));
    float one;
    if (n && !src->own.arena_ops->host) src->own.be.ops->download((backend *)&src->own.be, &one, src->own.arena, 1); // (src's stream done: its cache is whole)
    // Caches that grow in chunks (kv_chunk, both): each layer's whole chunks of the prefix are src's own,
    // mapped into dst (the memory held once; whichever context writes there later copies them first,
    // kv_own), the rest copied. From each layer, the positions from which it copies.
    const backend_ops *ops = dst->own.arena_ops;
    const int share = n && dst->kv_chunk && dst->kv_chunk == src->kv_chunk && ops->kv_share && ops->kv_private && src->kv_have >= n;
    int *from = calloc((size_t)cf->n_layer, sizeof(int));
    if (!from) return fail(INFER_ERR_NOMEM, "context copy: out of memory");
    infer_status kst = INFER_OK;
    for (int il = 0; il < cf->n_layer && !kst; il++) {
        from[il] = 0;
        if (!share || cf->layers[il].kv_source != il || !dst->own.k_cache[il]) continue;
        const size_t nkv = (size_t)cf->layers[il].n_kv_head * cf->layers[il].head_dim, g = dst->kv_chunk;
        const size_t kb = kv_bytes(src->kt, nkv), vb = kv_bytes(src->vt, nkv);
        if (g % kb || g % vb) continue; // (a position's row across two chunks: copied whole)
        const size_t kn = kv_bytes(src->kt, (size_t)n * nkv) / g * g, vn = kv_bytes(src->vt, (size_t)n * nkv) / g * g;
        const size_t kn_pos = kn / kb, vn_pos = vn / vb;
        from[il] = (int)(kn_pos < vn_pos ? kn_pos : vn_pos);
        const size_t ks = kv_bytes(src->kt, (size_t)from[il] * nkv) / g * g, vs = kv_bytes(src->vt, (size_t)from[il] * nkv) / g * g;
        if (!ks) continue;
        char *da = (char *)dst->own.arena, *sa = (char *)src->own.arena;
        if (ops->kv_share(&dst->own.be, da, (size_t)((char *)dst->own.k_cache[il] - da), sa, (size_t)((char *)src->own.k_cache[il] - sa), ks) ||
            ops->kv_share(&dst->own.be, da, (size_t)((char *)dst->own.v_cache[il] - da), sa, (size_t)((char *)src->own.v_cache[il] - sa), vs))
            from[il] = 0; // (a chunk not mapped: the layer's every position made its own and copied, below)
    }
    if (share) {
        infer_ctx *s = (infer_ctx *)src; // (its chunks now shared too: it copies them before it writes there)
        s->kv_shared = s->kv_shared > n ? s->kv_shared : n;
        dst->kv_shared = dst->kv_shared > n ? dst->kv_shared : n;
        dst->kv_have = 0; // (the chunks a failed share left unbacked backed again)
    }
    kst = kv_ensure(dst, n); // (a cache that grows: the positions backed before they are copied in)
    for (int il = 0; il < cf->n_layer && !kst && share; il++) // (what is copied in: dst's own)
        if (cf->layers[il].kv_source == il && dst->own.k_cache[il]) {
            size_t ko, vo;
            const size_t nkv = kv_layer(dst, il, &ko, &vo);
            const size_t k0 = kv_bytes(dst->kt, (size_t)from[il] * nkv), v0 = kv_bytes(dst->vt, (size_t)from[il] * nkv);
            if (ops->kv_private(&dst->own.be, dst->own.arena, ko + k0, kv_bytes(dst->kt, (size_t)dst->n_ctx * nkv) - k0) ||
                ops->kv_private(&dst->own.be, dst->own.arena, vo + v0, kv_bytes(dst->vt, (size_t)dst->n_ctx * nkv) - v0))
                kst = fail(INFER_ERR_NOMEM, "context copy: no memory for the KV cache's copied positions: %s", backend_gpu_status());
        }
    for (int il = 0; il < cf->n_layer && !kst; il++) {
        if (cf->layers[il].kv_source != il) continue;
        int nkv = cf->layers[il].n_kv_head * cf->layers[il].head_dim, f = from[il];
        if (src->own.arena_ops->host) {
            memcpy(dst->own.k_cache[il], src->own.k_cache[il], kv_bytes(src->kt, (size_t)n * nkv));
            memcpy(dst->own.v_cache[il], src->own.v_cache[il], kv_bytes(src->vt, (size_t)n * nkv));
        } else if (n > f) { // (device memory, f32 or f16 rows: the backend copies each position's bytes as floats)
            size_t kb = kv_bytes(src->kt, (size_t)nkv), vb = kv_bytes(src->vt, (size_t)nkv);
            if (kb % 4 || vb % 4) {
                kst = fail(INFER_ERR_UNSUPPORTED, "context copy: cache rows of %zu / %zu bytes on a device", kb, vb);
                break;
            }
            dst->own.be.ops->copy(&dst->own.be, (float *)dst->own.k_cache[il] + f * kb / 4, kb / 4, (const float *)src->own.k_cache[il] + f * kb / 4,
                                  kb / 4, n - f, (int)(kb / 4));
            dst->own.be.ops->copy(&dst->own.be, (float *)dst->own.v_cache[il] + f * vb / 4, vb / 4, (const float *)src->own.v_cache[il] + f * vb / 4,
                                  vb / 4, n - f, (int)(vb / 4));
        }
    }
    free(from);
    if (kst) {
        if (share) dst->n_past = 0; // (its cache partly src's now: it holds nothing)
        return kst;
    }
    if (n && !dst->own.arena_ops->host) dst->own.be.ops->download(&dst->own.be, &one, dst->own.arena, 1); // (the copies done before src moves on)
    if (dst->ex.oom || src->ex.oom) {
        ((infer_ctx *)src)->ex.oom = 0;
        dst->ex.oom = 0;
        dst->n_past = 0;
        return fail(INFER_ERR_NOMEM, "context copy: the backend's copy failed");
    }
    dst->n_past = n;
    return INFER_OK;
}
