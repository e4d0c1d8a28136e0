// Tensor parallelism (Megatron's split): a model cut to one rank's share,
// after model_bind and before model_pack. Rank r of W keeps
//   - query heads [r H/W, (r+1) H/W) and the key/value heads they read (all
//     of one head, copied on every rank, where there are fewer KV heads than
//     ranks): the rows of wq, wk, wv and their biases, the columns of wo;
//   - FFN features [r F/W, (r+1) F/W) (in whole blocks of down's type: shares
//     may differ by a block): the rows of gate and up, the columns of down;
//     in a mixture of experts, each expert's (every rank routes alike);
//   - output rows (the vocabulary) [r V/W, (r+1) V/W).
// The config then says what this rank computes (n_head, n_kv_head, n_ff are
// its share), so the forward pass runs unchanged but for a sum over the ranks
// after the attention's output product and after the FFN (the biases of
// those two are added on rank 0 only) and the logits' columns gathered
// (inference/forward.c; OLMo 2's norms of whole q and k rows gather them
// first). Row slices are views into the mapped file; column
// slices are copies, so a rank maps and holds about its share.
#include "models/model.h"
#include "tensor/dtype.h"
#include "base/error.h"
#include "base/mapfile.h"
#include "models/gguf.h"

#include <stdlib.h>
#include <string.h>

// A tensor made by the shard (and the buffer it owns, or NULL), kept with the model.
static tensor *keep(infer_model *m, const tensor *like, void *owned) {
    if (m->n_tp_keep + 2 > m->cap_tp_keep) {
        int cap = 2 * m->cap_tp_keep + 64;
        void **p = realloc(m->tp_keep, sizeof *p * (size_t)cap);
        if (!p) return NULL;
        m->tp_keep = p, m->cap_tp_keep = cap;
    }
    tensor *t = malloc(sizeof *t);
    if (!t) return NULL;
    *t = *like;
    m->tp_keep[m->n_tp_keep++] = t;
    if (owned) m->tp_keep[m->n_tp_keep++] = owned;
    return t;
}

// Rows [r0, r0 + n) of a 2-D tensor stored [out, in] (a view), or of a 1-D one.
static const tensor *rows_of(infer_model *m, const tensor *t, int64_t r0, int64_t n) {
    if (!t) return NULL;
    if (t->nd == 1) {
        if (r0 + n > t->ne[0]) return NULL;
        tensor v = *t;
        v.ne[0] = n;
        if (v.f32) v.f32 = t->f32 + r0;
        size_t es = dtype_row_size(t->type, 1);
        v.data = (const char *)t->data + es * (size_t)r0, v.nbytes = es * (size_t)n;
        return keep(m, &v, NULL);
    }
    if (t->nd != 2 || r0 + n > t->ne[1]) return NULL;
    size_t rs = dtype_row_size(t->type, t->ne[0]);
    tensor v = *t;
    v.ne[1] = n;
    v.data = (const char *)t->data + rs * (size_t)r0, v.nbytes = rs * (size_t)n;
    return keep(m, &v, NULL);
}

// Columns [c0, c0 + n) of a 2-D tensor (a copy; whole blocks of its type).
static const tensor *cols_of(infer_model *m, const tensor *t, int64_t c0, int64_t n) {
    if (!t || t->nd != 2 || c0 + n > t->ne[0]) return NULL;
    int blk = dtype_get(t->type)->blck;
    if (c0 % blk || n % blk) return NULL;
    size_t rs = dtype_row_size(t->type, t->ne[0]), ns = dtype_row_size(t->type, n), at = dtype_row_size(t->type, c0);
    char *p = malloc(ns * (size_t)t->ne[1] + 1);
    if (!p) return NULL;
    for (int64_t r = 0; r < t->ne[1]; r++) memcpy(p + ns * r, (const char *)t->data + rs * r + at, ns);
    // (the copy read every row of the mapped tensor: its pages go back to the
    // kernel, so a rank holds its share, not the whole)
    int mapped = m->gguf && mapfile_holds(&m->gguf->map, t->data, t->nbytes);
    for (int f = 0; f < m->store.n_files && !mapped; f++) mapped = mapfile_holds(&m->store.files[f], t->data, t->nbytes);
    if (mapped) map_drop_pages(t->data, t->nbytes);
    tensor v = *t;
    v.ne[0] = n, v.data = p, v.nbytes = ns * (size_t)t->ne[1], v.f32 = NULL;
    tensor *k = keep(m, &v, p);
    if (!k) free(p);
    return k;
}

// y = W x's outputs [o0, o0 + n) (rows, or a transposed weight's columns).
static infer_status out_slice(infer_model *m, weight *w, int64_t o0, int64_t n) {
    if (!w->w) return INFER_OK;
    const tensor *t = w->trans ? cols_of(m, w->w, o0, n) : rows_of(m, w->w, o0, n);
    if (!t) return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: %s: cannot take outputs %lld..%lld", w->w->name, (long long)o0,
                        (long long)(o0 + n));
    w->w = t;
    return INFER_OK;
}

// its inputs [i0, i0 + n)
static infer_status in_slice(infer_model *m, weight *w, int64_t i0, int64_t n) {
    if (!w->w) return INFER_OK;
    const tensor *t = w->trans ? rows_of(m, w->w, i0, n) : cols_of(m, w->w, i0, n);
    if (!t)
        return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: %s: cannot take inputs %lld..%lld (%s blocks of %d%s)", w->w->name,
                    (long long)i0, (long long)(i0 + n), dtype_get(w->w->type)->name, dtype_get(w->w->type)->blck,
                    " must not straddle ranks, or out of memory");
    w->w = t;
    return INFER_OK;
}

static infer_status vec_slice(infer_model *m, const tensor **b, int64_t r0, int64_t n) {
    if (!*b) return INFER_OK;
    const tensor *t = rows_of(m, *b, r0, n);
    if (!t) return fail(INFER_ERR_NOMEM, "tensor parallel: %s: cannot take %lld..%lld", (*b)->name, (long long)r0, (long long)(r0 + n));
    *b = t;
    return INFER_OK;
}

// A decoded bias of an expert (owned by its array, freed with the model):
// elements [r0, r0 + n) moved to its front.
static void bias_slice(tensor *b, int64_t r0, int64_t n) {
    if (!b->f32) return;
    memmove(b->f32, b->f32 + r0, sizeof(float) * (size_t)n);
    size_t es = dtype_row_size(b->type, 1);
    b->ne[0] = n, b->data = (const char *)b->data + es * (size_t)r0, b->nbytes = es * (size_t)n;
}

// the features [f0, f0 + n) of f in whole blocks of blk, as evenly as they go
// (Gemma 3 1B's 6912 are 27 blocks of 256: 14 and 13)
static void share(int64_t F, int blk, int rank, int world, int64_t *f0, int64_t *n) {
    int64_t nb = F / blk;
    *f0 = blk * (nb * rank / world), *n = blk * (nb * (rank + 1) / world) - *f0;
}

// the largest block of the types of the inputs of a down product (its columns are cut)
static int down_block(const weight *w) {
    const tensor *d = w->w;
    return d && d->type >= 0 && !w->trans ? dtype_get(d->type)->blck : 1;
}

#define TRY(x) do { infer_status st_ = (x); if (st_) return st_; } while (0)

// Each expert's features [f0, f0 + nf) of F (the router stays whole: every
// rank routes a token alike, its x being the same bits on every rank).
static infer_status shard_experts(infer_model *m, layer_weights *l, int rank, int64_t F, int64_t f0, int64_t nf) {
    const infer_config *c = &m->cfg;
    int oss = c->fam->ffn == FFN_OSS;
    for (int e = 0; e < c->n_expert; e++) {
        if (l->exp_gate_up[e].w && oss) { // gpt-oss's interleaved (gate, up) rows: feature i at 2i, 2i + 1
            TRY(out_slice(m, &l->exp_gate_up[e], 2 * f0, 2 * nf));
            bias_slice(&l->exp_gate_up_b[e], 2 * f0, 2 * nf);
        } else if (l->exp_gate_up[e].w) { // [gate; up] rows
            l->exp_gate[e] = l->exp_up[e] = l->exp_gate_up[e];
            TRY(out_slice(m, &l->exp_gate[e], f0, nf));
            TRY(out_slice(m, &l->exp_up[e], F + f0, nf));
            l->exp_gate_up[e].w = NULL;
        } else {
            TRY(out_slice(m, &l->exp_gate[e], f0, nf));
            TRY(out_slice(m, &l->exp_up[e], f0, nf));
        }
        bias_slice(&l->exp_gate_b[e], f0, nf);
        bias_slice(&l->exp_up_b[e], f0, nf);
        TRY(in_slice(m, &l->exp_down[e], f0, nf));
        if (rank) { // (the down product's bias: added once, rank 0's)
            free(l->exp_down_b[e].f32);
            memset(&l->exp_down_b[e], 0, sizeof l->exp_down_b[e]);
        }
    }
    return INFER_OK;
}

infer_status model_shard(infer_model *m, int rank, int world) {
    m->tp_rank = rank, m->tp_world = world;
    m->tp_v0 = 0, m->tp_nv = m->cfg.n_vocab;
    if (world == 1) return INFER_OK;
    infer_config *c = &m->cfg;
    const family *f = c->fam;
    if (m->vx || m->ffn_external) return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: a vindex is not split");
    int H = c->n_head, F = c->n_ff;
    if (H % world) return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: %d attention heads do not split over %d ranks", H, world);
    if (m->output.trans) return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: a transposed output head is not split");
    int hq = H / world, q0 = rank * hq;
    // the features in whole blocks of the down products' types
    int blk = 1, xblk = 1, FX = c->n_ff_expert;
    for (int il = 0; il < c->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        int b = down_block(&l->ffn_down);
        blk = b > blk ? b : blk;
        for (int e = 0; e < c->n_expert; e++) {
            b = down_block(&l->exp_down[e]);
            xblk = b > xblk ? b : xblk;
        }
    }
    if (!c->n_expert && (F % blk || F / blk < world))
        return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: an FFN of %d features in blocks of %d does not split over %d ranks", F, blk,
                    world);
    if (c->n_expert && (FX % xblk || FX / xblk < world))
        return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: experts of %d features in blocks of %d do not split over %d ranks", FX, xblk,
                    world);
    int64_t f0 = 0, nf = F, x0 = 0, nx = FX;
    if (!c->n_expert) share(F, blk, rank, world, &f0, &nf);
    else share(FX, xblk, rank, world, &x0, &nx);
    for (int il = 0; il < c->n_layer; il++) {
        layer_config *lc = &c->layers[il];
        layer_weights *l = &m->layers[il];
        int KV = lc->n_kv_head, hd = lc->head_dim, g = H / KV;
        int kv0 = q0 / g, nkv = (q0 + hq - 1) / g + 1 - kv0;
        if (!(hq % g == 0 || g % hq == 0))
            return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: layer %d: %d query heads a rank do not share whole groups of %d (%d KV heads)",
                        il, hq, g, KV);
        if (f->qk_norm_full && nkv * world != KV) // (the k rows are gathered whole for their norm: forward.c)
            return fail(INFER_ERR_UNSUPPORTED, "tensor parallel: %s norms each token's whole k row: layer %d's %d KV heads do not split over %d ranks",
                        c->model_type, il, KV, world);
        if (l->wqkv.w) { // fused [q; k; v] rows: three views
            const tensor *b = l->bqkv;
            l->wq = l->wk = l->wv = l->wqkv;
            int64_t nq = (int64_t)H * hd, nk = (int64_t)KV * hd;
            TRY(out_slice(m, &l->wq, (int64_t)q0 * hd, (int64_t)hq * hd));
            TRY(out_slice(m, &l->wk, nq + (int64_t)kv0 * hd, (int64_t)nkv * hd));
            TRY(out_slice(m, &l->wv, nq + nk + (int64_t)kv0 * hd, (int64_t)nkv * hd));
            l->bq = l->bk = l->bv = b;
            TRY(vec_slice(m, &l->bq, (int64_t)q0 * hd, (int64_t)hq * hd));
            TRY(vec_slice(m, &l->bk, nq + (int64_t)kv0 * hd, (int64_t)nkv * hd));
            TRY(vec_slice(m, &l->bv, nq + nk + (int64_t)kv0 * hd, (int64_t)nkv * hd));
            l->wqkv.w = NULL, l->bqkv = NULL;
        } else {
            TRY(out_slice(m, &l->wq, (int64_t)q0 * hd, (int64_t)hq * hd));
            TRY(out_slice(m, &l->wk, (int64_t)kv0 * hd, (int64_t)nkv * hd));
            TRY(out_slice(m, &l->wv, (int64_t)kv0 * hd, (int64_t)nkv * hd));
            TRY(vec_slice(m, &l->bq, (int64_t)q0 * hd, (int64_t)hq * hd));
            TRY(vec_slice(m, &l->bk, (int64_t)kv0 * hd, (int64_t)nkv * hd));
            TRY(vec_slice(m, &l->bv, (int64_t)kv0 * hd, (int64_t)nkv * hd));
        }
        TRY(in_slice(m, &l->wo, (int64_t)q0 * hd, (int64_t)hq * hd));
        TRY(vec_slice(m, &l->sinks, q0, hq));
        if (rank) l->bo = NULL, l->ffn_down_b = NULL; // (added once: rank 0's)
        if (l->ffn_gate_up.w) { // fused [gate; up] rows
            l->ffn_gate = l->ffn_up = l->ffn_gate_up;
            TRY(out_slice(m, &l->ffn_gate, f0, nf));
            TRY(out_slice(m, &l->ffn_up, F + f0, nf));
            l->ffn_gate_up.w = NULL;
        } else {
            TRY(out_slice(m, &l->ffn_gate, f0, nf));
            TRY(out_slice(m, &l->ffn_up, f0, nf));
        }
        TRY(vec_slice(m, &l->ffn_up_b, f0, nf));
        TRY(in_slice(m, &l->ffn_down, f0, nf));
        if (c->n_expert) TRY(shard_experts(m, l, rank, FX, x0, nx));
        lc->n_kv_head = nkv;
    }
    c->n_head = hq, c->n_ff = (int)nf, c->n_ff_expert = (int)nx;
    if (c->n_kv_head > 0) c->n_kv_head = c->layers[0].n_kv_head;
    int64_t V = c->n_vocab, v0 = V * rank / world, v1 = V * (rank + 1) / world;
    TRY(out_slice(m, &m->output, v0, v1 - v0));
    m->tp_v0 = (int)v0, m->tp_nv = (int)(v1 - v0);
    return INFER_OK;
}

// The pipeline split (llama.cpp's -sm layer): rank r of W runs layers
// [r L/W, (r+1) L/W); the residual stream goes from each run to the next and
// the last rank's logits to every rank (inference/forward.c). The other
// layers' products are dropped (never packed or uploaded; their mapped pages
// never read) and so are their K/V caches; every rank keeps the embedding, the
// last the output head.
infer_status model_split_layers(infer_model *m, int rank, int world) {
    int L = m->cfg.n_layer;
    m->tp_rank = rank, m->tp_world = world, m->tp_layers = 1;
    m->tp_v0 = 0, m->tp_nv = m->cfg.n_vocab;
    m->pp_l0 = (int)((int64_t)L * rank / world), m->pp_l1 = (int)((int64_t)L * (rank + 1) / world);
    if (world == 1) return INFER_OK;
    if (L < world) return fail(INFER_ERR_UNSUPPORTED, "layer split: %d layers over %d ranks", L, world);
    if (m->vx || m->ffn_external) return fail(INFER_ERR_UNSUPPORTED, "layer split: a vindex is not split");
    for (int il = m->pp_l0; il < m->pp_l1; il++) {
        int src = m->cfg.layers[il].kv_source;
        if (src < m->pp_l0)
            return fail(INFER_ERR_UNSUPPORTED, "layer split: layer %d reads layer %d's K/V, on another rank", il, src);
    }
    if (rank < world - 1) m->output.w = NULL; // (the last rank's logits go to all: the others need no head)
    for (int il = 0; il < L; il++) {
        if (il >= m->pp_l0 && il < m->pp_l1) continue;
        layer_weights *l = &m->layers[il];
        weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wqkv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->ffn_gate_up,
                        &l->ple_gate, &l->ple_proj};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) ws[i]->w = NULL;
        m->cfg.layers[il].kv_source = m->pp_l0; // (a layer that owns no K/V cache: contexts keep none for it)
    }
    return INFER_OK;
}
