// The forward pass: one layer function for every family, driven by the
// family row and the config. Read it top to bottom: embed, then per layer
// attention and feed-forward blocks, then the final norm and the logits.
#include "inference/context.h"
#include "inference/parallel.h"
#include "compute/backend.h"
#include "vindex/walk.h"
#include "compute/cpu/vec.h"
#include "base/pool.h"
#include "base/half.h"
#include "base/error.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const float *f32_or_null(const tensor *t) { return t ? t->f32 : NULL; }

const char *const phase_names[PH_COUNT] = {
    "embedding", "norms", "QKV projection", "RoPE", "attention (scores+softmax+V)", "O projection",
    "FFN gate+up", "activation", "FFN down", "residual", "MoE (router+experts)", "per-layer inputs", "walk FFN", "final norm+logits",
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Runs the statements, adding their time to phase ph when the context profiles.
#define TIMED(ph, ...)                                      \
    do {                                                    \
        double t0_ = c->profiling ? now_s() : 0;            \
        __VA_ARGS__;                                        \
        if (c->profiling) c->prof[ph] += now_s() - t0_;     \
    } while (0)

// Every computation goes through the backend of the side the pass is on
// (compute/backend.h; OPS and BE in parallel.h).

static void mm(infer_ctx *c, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    OPS->matmul(BE, y, x, w, bias, T, n_in, n_out);
}

// Quantized models run with ggml's CPU numerics (see model.h: ggml_numerics).
static void act(infer_ctx *c, float *x, int rows, int n) { OPS->act(BE, x, rows, n, c->m->cfg.act, c->m->ggml_numerics); }

// The family's norm of T rows of n_embd.
static void norm(infer_ctx *c, float *out, const float *x, const tensor *w, const tensor *b, int T) {
    const infer_config *cf = &c->m->cfg;
    int kind = cf->fam->norm == NORM_LAYER ? NORM_OP_LAYER : cf->norm_plus_one ? NORM_OP_RMS_PLUS_ONE : NORM_OP_RMS;
    OPS->norm(BE, out, x, f32_or_null(w), f32_or_null(b), T, cf->n_embd, (float)cf->norm_eps, kind);
}

// ---------------------------------------------------------------------------
// a context split over two backends (context.h): the pass moves between them

// n floats from src in from's memory to dst in to's: a copy between host
// memories, else the device's download or upload (the host side is always
// a host backend, so never two devices).
static void move(backend *to, float *dst, backend *from, const float *src, size_t n) {
    if (to->ops->host && from->ops->host) memcpy(dst, src, sizeof(float) * n);
    else if (to->ops->host) from->ops->download(from, dst, src, n);
    else to->ops->upload(to, dst, src, n);
}

// Makes side dev the active one (1: the context's backend, 0: the host
// side); 1 when it changed, and the buffers the pass needs there are to be
// carried over (CARRY).
// bytes of KV cache rows from one side to the other (a device's cache is f32:
// whole floats)
static void move_rows(backend *to, void *dst, backend *from, const void *src, size_t bytes) {
    if (to->ops->host && from->ops->host) memcpy(dst, src, bytes);
    else move(to, dst, from, src, bytes / sizeof(float));
}

// the side the pass is not on
#define OTHER(c) ((c)->cur == &(c)->own ? &(c)->host : &(c)->own)

static int go(infer_ctx *c, int dev) {
    if (c->on_dev == dev) return 0;
    c->cur = dev ? &c->own : &c->host, c->on_dev = dev;
    return 1;
}

// n floats at offset at of scratch buffer buf, from the side just left to the active one
#define CARRY(buf, at, n) move(BE, c->cur->s.buf + (at), &OTHER(c)->be, OTHER(c)->s.buf + (at), (n))

// The pass moves to side dev with the residual stream's T rows, and the
// per-layer inputs where the side has not had this pass's yet.
static void go_with_x(infer_ctx *c, int dev, int T) {
    const infer_config *cf = &c->m->cfg;
    if (go(c, dev)) CARRY(x, 0, (size_t)T * cf->n_embd);
    if (cf->ple_dim && !(c->ple_sides & 1 << c->on_dev)) {
        CARRY(ple, 0, (size_t)T * cf->n_layer * cf->ple_dim);
        c->ple_sides |= 1 << c->on_dev;
    }
}

// n rows of logits (lg, rows of V in the backend's memory) = the output head
// of c->cur->s.xn's n rows (over ranks: parallel.c's)
static void head(infer_ctx *c, float *lg, int n) {
    const infer_model *m = c->m;
    if (m->comm) tp_head(c, lg, n);
    else mm(c, lg, c->cur->s.xn, &m->output, NULL, n, m->cfg.n_embd, m->cfg.n_vocab);
}

// ---------------------------------------------------------------------------
// embeddings

static void embed(infer_ctx *c, const int32_t *ids, int T) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    OPS->embed(BE, c->cur->s.x, m->tok_embd, ids, T, cf->embed_scale);
    if (m->pos_embd) { // GPT-2: x += the learned position rows
        OPS->embed(BE, c->cur->s.xn, m->pos_embd, c->rows.pos, T, 1.0f);
        OPS->residual(BE, c->cur->s.x, c->cur->s.xn, 1.0f, T, cf->n_embd);
    }
    if (m->type_embd) { // BERT: x += token type 0's row (one sentence), then LayerNorm
        static const int32_t type0[N_BATCH_MAX];
        OPS->embed(BE, c->cur->s.xn, m->type_embd, type0, T, 1.0f);
        OPS->residual(BE, c->cur->s.x, c->cur->s.xn, 1.0f, T, cf->n_embd);
    }
    if (m->embd_norm) norm(c, c->cur->s.x, c->cur->s.x, m->embd_norm, m->embd_norm_b, T);
}

// Gemma 4 per-layer inputs: (ple_embd[id] * sqrt(P) + norm(proj(x) / sqrt(E))) / sqrt(2),
// one P-vector per layer per token.
static void per_layer_inputs(infer_ctx *c, const int32_t *ids, int T) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    int P = cf->ple_dim, LP = cf->n_layer * P;
    mm(c, c->cur->s.ple, c->cur->s.x, &m->ple_model_proj, NULL, T, cf->n_embd, LP);
    OPS->scale(BE, c->cur->s.ple, (size_t)T * LP, 1.0f / sqrtf((float)cf->n_embd));
    OPS->norm(BE, c->cur->s.ple, c->cur->s.ple, m->ple_proj_norm->f32, NULL, T * cf->n_layer, P, (float)cf->norm_eps, NORM_OP_RMS);
    // (p + row * sqrt(P)) / sqrt(2), one operation at a time
    OPS->embed(BE, c->cur->s.ple_tmp, m->ple_embd, ids, T, sqrtf((float)P));
    OPS->residual(BE, c->cur->s.ple, c->cur->s.ple_tmp, 1.0f, T, LP);
    OPS->scale(BE, c->cur->s.ple, (size_t)T * LP, 1.0f / sqrtf(2.0f));
}

// ---------------------------------------------------------------------------
// attention

static void attention(infer_ctx *c, int il, int T) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    const layer_config *lc = &cf->layers[il];
    const layer_weights *l = &m->layers[il];
    const family *f = cf->fam;
    int E = cf->n_embd, H = cf->n_head, KV = lc->n_kv_head, hd = lc->head_dim;
    int nq = H * hd, nkv = KV * hd;
    int own_kv = lc->kv_source == il;

    // q, k, v = x Wq, x Wk, x Wv (+ biases), from one fused matrix or three
    double t0 = c->profiling ? now_s() : 0;
    if (l->wqkv.w) {
        int n = nq + 2 * nkv;
        mm(c, c->cur->s.qkv, c->cur->s.xn, &l->wqkv, f32_or_null(l->bqkv), T, E, n);
        OPS->copy(BE, c->cur->s.q, nq, c->cur->s.qkv, n, T, nq);
        OPS->copy(BE, c->cur->s.k, nkv, c->cur->s.qkv + nq, n, T, nkv);
        OPS->copy(BE, c->cur->s.v, nkv, c->cur->s.qkv + nq + nkv, n, T, nkv);
    } else if (own_kv && l->wv.w) { // the three products in one job
        float *ys[] = {c->cur->s.q, c->cur->s.k, c->cur->s.v};
        const weight *ws[] = {&l->wq, &l->wk, &l->wv};
        const float *bs[] = {f32_or_null(l->bq), f32_or_null(l->bk), f32_or_null(l->bv)};
        int ns[] = {nq, nkv, nkv};
        OPS->matmul_multi(BE, 3, ys, c->cur->s.xn, ws, bs, T, E, ns);
    } else {
        mm(c, c->cur->s.q, c->cur->s.xn, &l->wq, f32_or_null(l->bq), T, E, nq);
        if (own_kv) {
            mm(c, c->cur->s.k, c->cur->s.xn, &l->wk, f32_or_null(l->bk), T, E, nkv);
            if (l->wv.w) mm(c, c->cur->s.v, c->cur->s.xn, &l->wv, f32_or_null(l->bv), T, E, nkv);
            else OPS->copy(BE, c->cur->s.v, 0, c->cur->s.k, 0, 1, T * nkv); // Gemma 4 attention_k_eq_v
        }
    }
    if (c->profiling) c->prof[PH_QKV] += now_s() - t0;
    // (OLMo 2's norms of whole q and k rows, on a rank of a row split: over every rank's heads)
    int rows_norm = f->qk_norm_full && m->comm && !m->tp_layers;
    if (rows_norm && l->q_norm) tp_norm_rows(c, c->cur->s.q, T, nq, l->q_norm->f32);
    if (rows_norm && l->k_norm && own_kv) tp_norm_rows(c, c->cur->s.k, T, nkv, l->k_norm->f32);
    // per-head norms, RoPE at each token's position, ggml's f16 rounding (it
    // keeps K and V in f16 and rounds q for the q.k products), each K/V row
    // into its sequence's cache
    t0 = c->profiling ? now_s() : 0;
    void *kd[N_BATCH_MAX], *vd[N_BATCH_MAX];
    for (int t = 0; t < T && own_kv; t++) kd[t] = c->rows.seq[t]->cur->k_cache[il], vd[t] = c->rows.seq[t]->cur->v_cache[il];
    qkv_desc qd = {
        .q = c->cur->s.q, .k = own_kv ? c->cur->s.k : NULL, .v = c->cur->s.v, .T = T, .H = H, .KV = KV, .hd = hd,
        // (OLMo 2 norms each token's whole q and k rather than each head)
        .qn = f->qk_norm_full ? nq : hd, .kn = f->qk_norm_full ? nkv : hd, .v_norm = f->v_norm,
        .norm_kind = cf->norm_plus_one ? NORM_OP_RMS_PLUS_ONE : NORM_OP_RMS, .round = m->ggml_numerics,
        .q_norm = rows_norm ? NULL : f32_or_null(l->q_norm), .k_norm = rows_norm ? NULL : f32_or_null(l->k_norm), .eps = (float)cf->norm_eps,
        .rope = f->learned_pos ? NULL : &lc->rope, .pos = c->rows.pos, .k_cache = kd, .v_cache = vd,
        .kt = c->rows.seq[0]->kt, .vt = c->rows.seq[0]->vt, // (a batch's sequences share their caches' types)
    };
    OPS->qkv_prep(BE, &qd);
    if (c->profiling) c->prof[PH_ROPE] += now_s() - t0;

    // softmax(q k^T * scale [softcapped] [+ sink]) v over the window of each
    // position, in blocks of rows of one sequence (each its own cache)
    const pass_rows *R = &c->rows;
    const void *kc[N_BATCH_MAX], *vc[N_BATCH_MAX];
    for (int t = 0; t < T; t++) kc[t] = R->seq[t]->cur->k_cache[lc->kv_source], vc[t] = R->seq[t]->cur->v_cache[lc->kv_source];
    // an encoder's row attends to every row of its sequence: as if at the
    // position of the run's last row (the whole sequence is one run, its K/V
    // all stored above)
    int apos[N_BATCH_MAX];
    const int *qpos = R->pos;
    if (f->encoder) {
        for (int t = T - 1; t >= 0; t--) apos[t] = t + 1 < T && !R->run[t + 1] ? apos[t + 1] : R->pos[t];
        qpos = apos;
    }
    attn_desc d = {
        .q = c->cur->s.q, .out = c->cur->s.att, .T = T, .H = H, .KV = KV, .hd = hd, .window = lc->window, .pos = qpos,
        .k = kc, .v = vc, .kt = R->seq[0]->kt, .vt = R->seq[0]->vt, .blk0 = R->blk0, .blk_n = R->blk_n, .n_blk = R->n_blk,
        .scale = cf->attn_scale ? cf->attn_scale : 1.0f / sqrtf((float)hd), .softcap = cf->attn_softcap,
        .sinks = l->sinks ? l->sinks->f32 : NULL, .ggml_numerics = m->ggml_numerics,
        .scores = c->scores, .B = R->B, .stride = R->stride,
    };
    OPS->attention(BE, &d);
    if (c->profiling) c->prof[PH_ATTN] += now_s() - t0;
    TIMED(PH_O, mm(c, c->cur->s.o, c->cur->s.att, &l->wo, f32_or_null(l->bo), T, nq, E));
}

// ---------------------------------------------------------------------------
// feed-forward

// One gated or plain MLP over T rows of xn into out.
static void mlp(infer_ctx *c, const layer_weights *l, const float *xn, float *out, int T) {
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd, F = cf->n_ff;
    if (cf->fam->ffn == FFN_PLAIN) {
        TIMED(PH_GATE_UP, mm(c, c->cur->s.ff, xn, &l->ffn_up, f32_or_null(l->ffn_up_b), T, E, F));
        TIMED(PH_ACT, act(c, c->cur->s.ff, T, F));
    } else if (l->ffn_gate_up.w) {
        // fused [gate; up] rows (Phi-3): split each token's 2F outputs
        TIMED(PH_GATE_UP, mm(c, c->cur->s.ff2, xn, &l->ffn_gate_up, NULL, T, E, 2 * F));
        TIMED(PH_ACT, {
            float *u = c->cur->s.ff + (size_t)T * F; // (ff holds 2F per token: gate rows, then up rows)
            OPS->copy(BE, c->cur->s.ff, F, c->cur->s.ff2, 2 * F, T, F);
            OPS->copy(BE, u, F, c->cur->s.ff2 + F, 2 * F, T, F);
            OPS->glu(BE, c->cur->s.ff, u, T, F, cf->act, c->m->ggml_numerics);
        });
    } else {
        TIMED(PH_GATE_UP, {
            float *ys[] = {c->cur->s.ff, c->cur->s.ff2};
            const weight *ws[] = {&l->ffn_gate, &l->ffn_up};
            const float *bs[] = {NULL, NULL};
            int ns[] = {F, F};
            OPS->matmul_multi(BE, 2, ys, xn, ws, bs, T, E, ns);
        });
        TIMED(PH_ACT, OPS->glu(BE, c->cur->s.ff, c->cur->s.ff2, T, F, cf->act, c->m->ggml_numerics));
    }
    TIMED(PH_DOWN, mm(c, out, c->cur->s.ff, &l->ffn_down, f32_or_null(l->ffn_down_b), T, F, E));
}

// The walk FFN of each token over the plan's top-K features of the layer
// (all of them for a dense layer whose FFN lives only in the vindex).
static void walk(infer_ctx *c, int il, int T) {
    const walk_layer *wl = &c->m->walk[il];
    int E = c->m->cfg.n_embd, F = (int)wl->gate_vectors->ne[1], k = F;
    const layer_plan *lp = c->plan ? &c->plan[il] : NULL;
    if (lp && lp->kind == G_WALK && lp->k > 0) {
        k = lp->pct ? (int)((long long)F * lp->k / 100) : lp->k;
        k = k < 1 ? 1 : k > F ? F : k;
    }
    int rank = lp && lp->kind == G_WALK ? lp->rank : WALK_BY_GATE;
    if (OPS->walk) { // (a device backend's own: by |gate . x|; context.c keeps the others on the host)
        OPS->walk(BE, c->cur->s.o, c->cur->s.xn, wl, k, T);
        return;
    }
    for (int t = 0; t < T; t++) walk_ffn_ranked(wl, c->cur->s.xn + (size_t)t * E, k, rank, c->cur->s.o + (size_t)t * E, c->ws);
}

// One expert on one token: out = down(act(gate x) * up x).
static void expert(infer_ctx *c, const layer_weights *l, int e, const float *x, float *out) {
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd, F = cf->n_ff_expert;
    float *g = c->cur->s.ff, *u = c->cur->s.ff + F;
    if (cf->fam->ffn == FFN_OSS) {
        // gpt-oss: gate/up with biases (interleaved in one matrix in HF files,
        // split in GGUF), clamped, (up + 1) * gate * sigmoid(1.702 gate)
        int fused = l->exp_gate_up[e].w != NULL;
        if (fused) {
            mm(c, c->cur->s.ff2, x, &l->exp_gate_up[e], l->exp_gate_up_b[e].f32, 1, E, 2 * F);
        } else {
            mm(c, c->cur->s.ff2, x, &l->exp_gate[e], l->exp_gate_b[e].f32, 1, E, F);
            mm(c, c->cur->s.ff2 + F, x, &l->exp_up[e], l->exp_up_b[e].f32, 1, E, F);
        }
        if (fused) OPS->glu_oss(BE, g, c->cur->s.ff2, 2, c->cur->s.ff2 + 1, 2, F); // (interleaved gate, up)
        else OPS->glu_oss(BE, g, c->cur->s.ff2, 1, c->cur->s.ff2 + F, 1, F);
        mm(c, out, g, &l->exp_down[e], l->exp_down_b[e].f32, 1, F, E);
        return;
    }
    if (l->exp_gate_up[e].w) {
        mm(c, c->cur->s.ff2, x, &l->exp_gate_up[e], NULL, 1, E, 2 * F);
        OPS->copy(BE, g, 0, c->cur->s.ff2, 0, 1, F);
        OPS->copy(BE, u, 0, c->cur->s.ff2 + F, 0, 1, F);
    } else {
        mm(c, g, x, &l->exp_gate[e], NULL, 1, E, F);
        mm(c, u, x, &l->exp_up[e], NULL, 1, E, F);
    }
    OPS->glu(BE, g, u, 1, F, cf->act, c->m->ggml_numerics);
    mm(c, out, g, &l->exp_down[e], NULL, 1, F, E);
}

// Mixture of experts: route each token to its top-k experts, sum their
// outputs weighted by the router.
static void moe(infer_ctx *c, const layer_weights *l, const float *xn, float *out, int T) {
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd, NE = cf->n_expert, K = cf->n_expert_used;
    weight router = {.w = l->router};
    int sel[INFER_MAX_EXPERTS_USED]; // the config loaders refuse more
    float w[INFER_MAX_EXPERTS_USED];
    for (int t = 0; t < T; t++) {
        const float *x = xn + (size_t)t * E;
        float *o = out + (size_t)t * E;
        mm(c, c->cur->s.row, x, &router, f32_or_null(l->router_b), 1, E, NE);
        if (cf->fam->moe == MOE_SOFTMAX_TOPK) OPS->softmax(BE, c->cur->s.row, NE);
        float *logit = c->hrow; // (the routing is decided on the host)
        OPS->download(BE, logit, c->cur->s.row, NE);
        // top-k, ties to the lower index (as torch.topk on distinct values)
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < NE; e++) {
                int used = 0;
                for (int j = 0; j < k; j++) used |= sel[j] == e;
                if (!used && (best < 0 || logit[e] > logit[best])) best = e;
            }
            sel[k] = best;
            w[k] = logit[best];
        }
        if (cf->fam->moe == MOE_TOPK_SOFTMAX) {
            backend hb = {&backend_cpu_ops, &c->ex, NULL, c->m, 0}; // (w is the host's: a device's pass takes the CPU's op)
            if (OPS->host) OPS->softmax(BE, w, K);
            else hb.ops->softmax(&hb, w, K);
        }
        else if (cf->moe_norm_topk) {
            float s = 0;
            for (int k = 0; k < K; k++) s += w[k];
            for (int k = 0; k < K; k++) w[k] /= s;
        }
        OPS->scale(BE, o, (size_t)E, 0.0f);
        for (int k = 0; k < K; k++) {
            expert(c, l, sel[k], x, c->cur->s.eo);
            OPS->residual(BE, o, c->cur->s.eo, w[k], 1, E);
        }
    }
}

// ---------------------------------------------------------------------------
// one layer

static void layer(infer_ctx *c, int il, int T) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    const layer_weights *l = &m->layers[il];
    int E = cf->n_embd;
    size_t TE = (size_t)T * E;

    // x = x + post_norm(attn(norm(x))) * residual_scale; blocks without a
    // norm in front (OLMo 2) read x itself
    int block = cf->fam->block;
    // (BERT's blocks: x = norm(x + attn(x)), the norm after the residual)
    if (block == BLOCK_POST || block == BLOCK_ENC_POST) OPS->copy(BE, c->cur->s.xn, 0, c->cur->s.x, 0, 1, (int)TE);
    else TIMED(PH_NORM, norm(c, c->cur->s.xn, c->cur->s.x, l->attn_norm, l->attn_norm_b, T));
    attention(c, il, T);
    side *other = OTHER(c);
    if (c->split && cf->layers[il].kv_source == il && other->k_cache[il]) {
        // a layer on the other side reads this layer's K/V: the new rows (one
        // sequence's, at consecutive positions) to its copy there
        size_t nkv = (size_t)cf->layers[il].n_kv_head * cf->layers[il].head_dim;
        size_t kb = kv_bytes(c->kt, nkv), vb = kv_bytes(c->vt, nkv), at = (size_t)c->rows.pos[0];
        move_rows(&other->be, (char *)other->k_cache[il] + at * kb, BE, (char *)c->cur->k_cache[il] + at * kb, T * kb);
        move_rows(&other->be, (char *)other->v_cache[il] + at * vb, BE, (char *)c->cur->v_cache[il] + at * vb, T * vb);
    }
    tp_sum(c, c->cur->s.o, TE); // (each rank's heads' share of the output product)
    if (l->post_attn_norm) TIMED(PH_NORM, norm(c, c->cur->s.o, c->cur->s.o, l->post_attn_norm, NULL, T));
    TIMED(PH_RESIDUAL, OPS->residual(BE, c->cur->s.x, c->cur->s.o, cf->residual_scale, T, E));
    if (block == BLOCK_ENC_POST) TIMED(PH_NORM, norm(c, c->cur->s.x, c->cur->s.x, l->attn_norm, l->attn_norm_b, T));

    // x = x + post_norm(ffn(norm(x))) * residual_scale; a parallel block
    // (Cohere) feeds the FFN the attention's input: (x + attn) + ffn
    if (block == BLOCK_POST || block == BLOCK_ENC_POST) OPS->copy(BE, c->cur->s.xn, 0, c->cur->s.x, 0, 1, (int)TE);
    else if (block == BLOCK_PRE) TIMED(PH_NORM, norm(c, c->cur->s.xn, c->cur->s.x, l->ffn_norm, l->ffn_norm_b, T));
    if (c->ffn_in) OPS->download(BE, c->ffn_in + (size_t)il * E, c->cur->s.xn + (size_t)(T - 1) * E, E);
    // (the FFN on the other side of a split context: its input there, its output back)
    int home = c->on_dev;
    if (go(c, c->ffn_dev[il])) CARRY(xn, 0, TE);
    const layer_plan *lp = c->plan ? &c->plan[il] : NULL;
    if (cf->n_expert) TIMED(PH_MOE, moe(c, l, c->cur->s.xn, c->cur->s.o, T));
    else if ((lp && lp->kind == G_WALK) || (!l->ffn_down.w && m->walk)) TIMED(PH_WALK, walk(c, il, T));
    else mlp(c, l, c->cur->s.xn, c->cur->s.o, T);
    tp_sum(c, c->cur->s.o, TE); // (each rank's features' share)
    if (l->post_ffn_norm) TIMED(PH_NORM, norm(c, c->cur->s.o, c->cur->s.o, l->post_ffn_norm, NULL, T));
    if (go(c, home)) CARRY(o, 0, TE);
    TIMED(PH_RESIDUAL, OPS->residual(BE, c->cur->s.x, c->cur->s.o, cf->residual_scale, T, E));
    if (block == BLOCK_ENC_POST) TIMED(PH_NORM, norm(c, c->cur->s.x, c->cur->s.x, l->ffn_norm, l->ffn_norm_b, T));

    // Gemma 4: x = x + norm(proj(act(gate(x)) * per_layer_input))
    double t0 = c->profiling ? now_s() : 0;
    if (cf->ple_dim) {
        int P = cf->ple_dim, LP = cf->n_layer * P;
        mm(c, c->cur->s.ple_tmp, c->cur->s.x, &l->ple_gate, NULL, T, E, P);
        act(c, c->cur->s.ple_tmp, T, P);
        OPS->mul(BE, c->cur->s.ple_tmp, P, c->cur->s.ple + (size_t)il * P, LP, T, P);
        mm(c, c->cur->s.o, c->cur->s.ple_tmp, &l->ple_proj, NULL, T, P, E);
        norm(c, c->cur->s.o, c->cur->s.o, l->ple_norm, NULL, T);
        OPS->residual(BE, c->cur->s.x, c->cur->s.o, 1.0f, T, E);
    }
    if (l->layer_scalar) OPS->scale(BE, c->cur->s.x, TE, l->layer_scalar->f32[0]);
    if (c->profiling) c->prof[PH_PLE] += now_s() - t0;
}

// ---------------------------------------------------------------------------

// The kernels' scratch could not grow during the pass, or a device backend's
// operation failed: its results are not to be used.
static infer_status oom_check(infer_ctx *c) {
    if (c->tp_failed) {
        c->tp_failed = 0, c->ex.oom = 0;
        return fail(INFER_ERR_IO, "tensor parallel, rank %d of %d: %s", c->m->tp_rank, c->m->tp_world, tp_why(c));
    }
    if (!c->ex.oom) return INFER_OK;
    c->ex.oom = 0;
    if (!OPS->host) return fail(INFER_ERR_NOMEM, "backend \"%s\": an operation failed (%s)", OPS->name, backend_gpu_status());
    return fail(INFER_ERR_NOMEM, "out of memory for the kernels' scratch");
}

void pass_rows_set(infer_ctx *c, infer_ctx *const *seq, int T) {
    pass_rows *R = &c->rows;
    R->n_blk = 0, R->B = 1, R->stride = 1;
    for (int t = 0, run = 0; t < T; t++) {
        infer_ctx *sq = seq[t];
        run = t && seq[t - 1] == sq ? run + 1 : 0; // rows of this sequence so far in its run
        R->seq[t] = sq;
        R->pos[t] = sq->n_past + run;
        R->run[t] = run == 0;
        if (run % sq->attn_tokens == 0) R->blk0[R->n_blk] = t, R->blk_n[R->n_blk++] = 0;
        R->blk_n[R->n_blk - 1]++;
        if (sq->attn_tokens > R->B) R->B = sq->attn_tokens;
        if (sq->n_ctx + 1 > R->stride) R->stride = sq->n_ctx + 1;
    }
}

// Logit rows in the backend's memory (a device backend's; grown, kept).
static float *device_logits(infer_ctx *c, size_t floats) {
    if (floats > c->dev_logit_cap) {
        if (c->dev_logits) c->own.arena_ops->release(&c->own.be, c->dev_logits);
        c->dev_logits = c->own.arena_ops->alloc(&c->own.be, sizeof(float) * floats);
        c->dev_logit_cap = c->dev_logits ? floats : 0;
    }
    return c->dev_logits;
}

// The model's CPU copies of its weights, made before a pass that runs on the CPU
static infer_status host_packs(infer_ctx *c) { return infer_ctx_prepare(c); }

// The pass: rows c->rows (pass_rows_set) of ids through the cached
// template's layers or the embedding, every layer, the final norm and the
// head; the logits (and greedy tokens) of the rows that want them.
// A test seam: INFER_FAULT_TOKEN=id makes every pass that holds token id
// fail as a device's failed operation fails it (the server's tests of a
// failed step; -1: none).
static int g_fault_token = -1;
static pthread_once_t g_fault_once = PTHREAD_ONCE_INIT;
static void fault_read(void) {
    const char *e = getenv("INFER_FAULT_TOKEN");
    g_fault_token = e && *e ? atoi(e) : -1;
}

infer_status forward_pass(infer_ctx *c, const int32_t *ids, int T, const pass_out *out) {
    const infer_model *m = c->m;
    pthread_once(&g_fault_once, fault_read);
    for (int t = 0; t < T && g_fault_token >= 0; t++)
        if (ids[t] == g_fault_token) return fail(INFER_ERR_IO, "a pass holding token %d failed (INFER_FAULT_TOKEN)", g_fault_token);
    infer_status pst = host_packs(c);
    if (!pst) pst = scratch_ensure(c);
    if (pst) return pst;
    const infer_config *cf = &m->cfg;
    int E = cf->n_embd, V = cf->n_vocab, pos0 = c->n_past;
    const pass_rows *R = &c->rows;
    for (int t = 0, t0 = 0; t < T; t++) { // (a cache that grows: its rows backed, and its own where shared, before the pass)
        if (t && R->seq[t] != R->seq[t - 1]) t0 = t;
        if ((t + 1 == T || R->seq[t + 1] != R->seq[t]) && ((pst = kv_ensure(R->seq[t], R->pos[t] + 1)) || (pst = kv_own(R->seq[t], R->pos[t0]))))
            return pst;
    }
    size_t need = (size_t)pool_size(c->pool) * R->B * cf->n_head * R->stride;
    if (need > c->scores_cap) { // (a batch's sequences may hold more positions than its workspace)
        float *sc = realloc(c->scores, sizeof(float) * need);
        if (!sc) return fail(INFER_ERR_NOMEM, "out of memory for attention scores");
        c->scores = sc, c->scores_cap = need;
    }
    // the rows whose final norm runs (n of them, from `first` on where they
    // are the pass's last rows, else gathered), and whose logits are made
    unsigned char want[N_BATCH_MAX];
    int n = 0, n_tok = 0, first = out->dst ? T : out->first;
    for (int t = 0; t < T; t++) {
        want[t] = out->dst ? out->dst[t] || (out->tok && out->tok[t]) : t >= out->first;
        n += want[t], n_tok += out->tok && out->tok[t];
        if (want[t] && t < first) first = t;
    }
    int tail = first + n == T, logits = out->dst ? n > 0 : out->logits != NULL;
    // where they go: the caller's buffer (the host's, the rows one after the
    // other), else the backend's own (a device's; a batch's rows on the host)
    const backend_ops *out_ops = c->out_dev ? c->own.be.ops : c->host.be.ops;
    float *lg = NULL;
    if (logits && out_ops->host && out->logits) lg = out->logits;
    else if (logits && !out_ops->host) lg = device_logits(c, (size_t)n * V);
    else if (logits) {
        if ((size_t)n * V > c->logit_cap) {
            float *lb = realloc(c->logit_buf, sizeof(float) * (size_t)n * V);
            if (lb) c->logit_buf = lb, c->logit_cap = (size_t)n * V;
        }
        lg = (size_t)n * V <= c->logit_cap ? c->logit_buf : NULL;
    }
    if (logits && !lg) return fail(INFER_ERR_NOMEM, "out of memory for %d rows of logits", n);
    if (OPS->begin_pass) OPS->begin_pass(BE, R->pos, R->run, T);
    if (c->split && c->host.be.ops->begin_pass) c->host.be.ops->begin_pass(&c->host.be, R->pos, R->run, T);

    int first_layer = 0;
    if (c->plan && c->n_cached > 0) {
        // cached layers: the template's residual and K/V at these positions
        if (!c->tmpl_x || c->tmpl_layers != c->n_cached)
            return fail(INFER_ERR_ARG, "the graph's cached layers 0-%d need a template recorded for them", c->n_cached - 1);
        if (pos0 + T > c->tmpl_n)
            return fail(INFER_ERR_ARG, "cached layers: positions up to %d are beyond the template's %d tokens", pos0 + T - 1, c->tmpl_n);
        memcpy(c->cur->s.x, c->tmpl_x + (size_t)pos0 * E, sizeof(float) * (size_t)T * E);
        for (int il = 0; il < c->n_cached; il++) {
            if (!c->tmpl_k[il]) continue;
            size_t nkv = (size_t)cf->layers[il].n_kv_head * cf->layers[il].head_dim;
            size_t kb = kv_bytes(c->kt, nkv), vb = kv_bytes(c->vt, nkv);
            memcpy((char *)c->cur->k_cache[il] + (size_t)pos0 * kb, (char *)c->tmpl_k[il] + (size_t)pos0 * kb, T * kb);
            memcpy((char *)c->cur->v_cache[il] + (size_t)pos0 * vb, (char *)c->tmpl_v[il] + (size_t)pos0 * vb, T * vb);
        }
        first_layer = c->n_cached;
        if (cf->ple_dim) TIMED(PH_PLE, per_layer_inputs(c, ids, T));
    } else {
        // (a split context embeds on the side of the first layer's attention)
        go(c, c->att_dev[0]);
        TIMED(PH_EMBED, embed(c, ids, T));
        if (cf->ple_dim) TIMED(PH_PLE, per_layer_inputs(c, ids, T));
    }
    c->ple_sides = 1 << c->on_dev;
    // A decode step on a device backend with a graph (every row a sequence's
    // one token, each with logits): the same kernels each step while the
    // pass's sequences stay the same (positions and tokens come up before),
    // captured once and replayed. Not a mixture of experts (its routing is
    // read on the host mid-pass), not a split context (the host side's work
    // is no kernel), nothing recorded on the way.
    int g = -1, all = n == T && logits;
    for (int t = 0; t < T && all; t++) all = R->run[t] && (t + 1 == T || R->run[t + 1]);
    if (OPS->graph && all && !out->hidden && !c->capture && !c->ffn_in && !c->plan && !c->profiling && !first_layer && !cf->n_expert &&
        !c->split && tp_graph_ok(c, T, n)) {
        uint64_t key = 0xcbf29ce484222325ull ^ (uint64_t)T ^ ((uint64_t)(uintptr_t)lg << 16);
        key = (key ^ (uint64_t)(uintptr_t)c->tp_part) * 0x100000001b3ull;
        for (int t = 0; t < T; t++) key = (key ^ (uint64_t)(uintptr_t)R->seq[t]) * 0x100000001b3ull;
        g = OPS->graph(BE, GRAPH_BEGIN, key | 1); // (never 0)
    }
    double t0 = 0;
again:
    if (g != 1) {
        float *hidden = out->hidden;
        if (hidden)
            for (int il = 0; il <= first_layer; il++) OPS->download(BE, hidden + (size_t)il * E, c->cur->s.x + (size_t)(T - 1) * E, E);
        if (m->tp_layers && m->comm) pipeline_layers(c, T, layer);
        else for (int il = first_layer; il < cf->n_layer; il++) {
            go_with_x(c, c->att_dev[il], T); // (the residual stream lives where the layer's attention runs)
            layer(c, il, T);
            if (c->capture && il == c->tmpl_layers - 1) OPS->download(BE, c->capture + (size_t)pos0 * E, c->cur->s.x, (size_t)T * E);
            if (hidden && il < cf->n_layer - 1) OPS->download(BE, hidden + (size_t)(il + 1) * E, c->cur->s.x + (size_t)(T - 1) * E, E);
        }
        // logits = final_norm(x) W_out^T * logit_scale, softcapped, of the
        // rows that want them: in place where they are the last rows, else
        // gathered; one product for all
        t0 = c->profiling ? now_s() : 0;
        if (n) {
            if (go(c, c->out_dev)) CARRY(x, (size_t)first * E, (size_t)(tail ? n : T - first) * E);
            const float *xs = c->cur->s.x + (size_t)first * E;
            if (!tail) {
                for (int t = first, k = 0; t < T; t++)
                    if (want[t]) OPS->copy(BE, c->cur->s.o + (size_t)k++ * E, 0, c->cur->s.x + (size_t)t * E, 0, 1, E);
                xs = c->cur->s.o;
            }
            if (m->output_norm) norm(c, c->cur->s.xn, xs, m->output_norm, m->output_norm_b, n);
            else OPS->copy(BE, c->cur->s.xn, 0, xs, 0, 1, n * E); // (an encoder: its last layer's output)
            if (out->embd) OPS->download(BE, out->embd, c->cur->s.xn, (size_t)n * E);
            if (hidden) OPS->download(BE, hidden + (size_t)cf->n_layer * E, c->cur->s.xn + (size_t)(n - 1) * E, E);
            if (lg) {
                head(c, lg, n);
                if (cf->logit_scale != 1.0f) OPS->scale(BE, lg, (size_t)n * V, cf->logit_scale); // (a scale of 1 changes nothing)
                if (cf->final_softcap) OPS->softcap(BE, lg, (size_t)n * V, cf->final_softcap);
            }
        }
        if (g == 0 && OPS->graph(BE, GRAPH_END, 0) == 1) { // (the capture failed and nothing ran: again, plainly)
            g = -1;
            goto again;
        }
    } else
        OPS->graph(BE, GRAPH_LAUNCH, 0);
    for (int t = 0; t < T; t++) R->seq[t]->n_past++;
    if (lg && !out->dst) {
        if (lg != out->logits) OPS->download(BE, out->logits, lg, (size_t)n * V);
    } else if (lg) {
        int32_t best[N_BATCH_MAX];
        if (n_tok) OPS->argmax(BE, best, lg, n, V); // (greedy tokens: only the ids leave a device)
        for (int t = 0, k = 0, sent = 0; t < T; t++) {
            if (!want[t]) continue;
            if (out->dst[t] && t >= sent) { // (the wanted rows after it whose logits follow its in the caller's memory: one copy)
                int u = t + 1;
                while (u < T && want[u] && out->dst[u] == out->dst[t] + (size_t)(u - t) * V) u++;
                OPS->download(BE, out->dst[t], lg + (size_t)k * V, (size_t)(u - t) * V);
                sent = u;
            }
            if (out->tok && out->tok[t]) *out->tok[t] = best[k]; // (-1: its logits hold a NaN; the other rows are whole)
            k++;
        }
    }
    go(c, 1); // (between passes the context is on its own side)
    if (c->profiling) c->prof[PH_LOGITS] += now_s() - t0;
    return oom_check(c);
}

infer_status forward(infer_ctx *c, const int32_t *ids, int T, float *logits, int last_only, float *hidden) {
    infer_ctx *self[N_BATCH_MAX];
    for (int t = 0; t < T; t++) self[t] = c;
    pass_rows_set(c, self, T);
    pass_out out = {.logits = logits, .first = last_only ? T - 1 : 0, .hidden = hidden};
    return forward_pass(c, ids, T, &out);
}
