// The forward pass: one layer function for every family, driven by the
// family row and the config. Read it top to bottom: embed, then per layer
// attention and feed-forward blocks, then the final norm and the logits.
#include "inference/context.h"
#include "compute/cpu/ops.h"
#include "compute/cpu/attn.h"
#include "vindex/walk.h"
#include "compute/cpu/vec.h"
#include "base/pool.h"
#include "base/half.h"
#include "base/error.h"

#include <math.h>
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

// Quantized models run with ggml's CPU numerics (see model.h: ggml_numerics).
static void act(const infer_ctx *c, float *x, int n) {
    if (c->m->ggml_numerics) activate_ggml(x, n, c->m->cfg.act);
    else activate(x, n, c->m->cfg.act);
}

// Element-wise work over many tokens is split across the pool by rows (each
// row computed as it would be alone, so batches equal token-by-token runs).
enum { PAR_ROWS = 4, PAR_ELEMS = 8192 };

typedef struct { float *x; size_t n; } round_job;
static void round_range(void *a, int i0, int i1) {
    round_job *j = a;
    size_t b = (size_t)i0 * PAR_ELEMS, e = (size_t)i1 * PAR_ELEMS < j->n ? (size_t)i1 * PAR_ELEMS : j->n;
    vec_round_f16(j->x + b, e - b);
}
static void round_f16(pool *p, float *x, size_t n) {
    round_job j = {x, n};
    pool_for(p, (int)((n + PAR_ELEMS - 1) / PAR_ELEMS), 1, round_range, &j);
}

// RMSNorm (optionally 1 + w) or LayerNorm of `rows` rows of n.
typedef struct { float *out; const float *x, *w, *b; int n, layer, plus_one; float eps; } norm_job;
static void norm_range(void *a, int i0, int i1) {
    norm_job *j = a;
    float *o = j->out + (size_t)i0 * j->n;
    const float *x = j->x + (size_t)i0 * j->n;
    if (j->layer) layernorm(o, x, j->w, j->b, i1 - i0, j->n, j->eps);
    else rmsnorm(o, x, j->w, i1 - i0, j->n, j->eps, j->plus_one);
}
static void par_rmsnorm(pool *p, float *out, const float *x, const float *w, int rows, int n, float eps, int plus_one) {
    norm_job j = {out, x, w, NULL, n, 0, plus_one, eps};
    pool_for(p, rows, PAR_ROWS, norm_range, &j);
}

// The family's norm of T rows of n_embd.
static void norm(pool *p, const infer_model *m, float *out, const float *x, const tensor *w, const tensor *b, int T) {
    const infer_config *c = &m->cfg;
    norm_job j = {out, x, f32_or_null(w), f32_or_null(b), c->n_embd, c->fam->norm == NORM_LAYER, c->norm_plus_one, (float)c->norm_eps};
    pool_for(p, T, PAR_ROWS, norm_range, &j);
}

// x += o * s over T rows of n
typedef struct { float *x; const float *o; float s; int n; } resid_job;
static void resid_range(void *a, int i0, int i1) {
    resid_job *j = a;
    for (size_t i = (size_t)i0 * j->n; i < (size_t)i1 * j->n; i++) j->x[i] += j->o[i] * j->s;
}
static void residual(pool *p, float *x, const float *o, float s, int T, int n) {
    resid_job j = {x, o, s, n};
    pool_for(p, T, PAR_ROWS, resid_range, &j);
}

// g = act(g) * u over T rows of F (u NULL: act only)
typedef struct { const infer_ctx *c; float *g; const float *u; int F; } glu_job;
static void glu_range(void *a, int i0, int i1) {
    glu_job *j = a;
    float *g = j->g + (size_t)i0 * j->F;
    size_t n = (size_t)(i1 - i0) * j->F;
    act(j->c, g, (int)n);
    if (j->u)
        for (size_t i = 0; i < n; i++) g[i] *= j->u[(size_t)i0 * j->F + i];
}
static void glu(const infer_ctx *c, float *g, const float *u, int T, int F) {
    glu_job j = {c, g, u, F};
    pool_for(c->ex.pool, T, PAR_ROWS, glu_range, &j);
}

// ---------------------------------------------------------------------------
// embeddings

static void embed(infer_ctx *c, const int32_t *ids, int T) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    int E = cf->n_embd;
    for (int t = 0; t < T; t++) {
        float *x = c->x + (size_t)t * E;
        tensor_row(m->tok_embd, ids[t], x);
        for (int i = 0; i < E; i++) x[i] *= cf->embed_scale;
        if (m->pos_embd) {
            tensor_row(m->pos_embd, c->rows.pos[t], c->row);
            for (int i = 0; i < E; i++) x[i] += c->row[i];
        }
    }
}

// Gemma 4 per-layer inputs: (ple_embd[id] * sqrt(P) + norm(proj(x) / sqrt(E))) / sqrt(2),
// one P-vector per layer per token.
static void per_layer_inputs(infer_ctx *c, const int32_t *ids, int T) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    int P = cf->ple_dim, LP = cf->n_layer * P;
    matmul(&c->ex, c->ple, c->x, &m->ple_model_proj, NULL, T, cf->n_embd, LP);
    float s = 1.0f / sqrtf((float)cf->n_embd);
    for (size_t i = 0; i < (size_t)T * LP; i++) c->ple[i] *= s;
    rmsnorm(c->ple, c->ple, m->ple_proj_norm->f32, T * cf->n_layer, P, (float)cf->norm_eps, 0);
    float es = sqrtf((float)P), r2 = 1.0f / sqrtf(2.0f);
    for (int t = 0; t < T; t++) {
        tensor_row(m->ple_embd, ids[t], c->ple_tmp);
        float *p = c->ple + (size_t)t * LP;
        for (int i = 0; i < LP; i++) p[i] = (p[i] + c->ple_tmp[i] * es) * r2;
    }
}

// ---------------------------------------------------------------------------
// attention

typedef struct { infer_ctx *c; int il; } attn_job;

// Keys and values are met in chunks of ATTN_CHUNK positions, which stay in
// the L1 cache while every query token of the task uses them.
enum { ATTN_CHUNK = 16 };

static void attn_task(void *arg, int ith, int nth) {
    const attn_job *j = arg;
    infer_ctx *c = j->c;
    const infer_config *cf = &c->m->cfg;
    const layer_config *lc = &cf->layers[j->il];
    const layer_weights *l = &c->m->layers[j->il];
    const pass_rows *R = &c->rows;
    int H = cf->n_head, KV = lc->n_kv_head, hd = lc->head_dim, group = H / KV;
    int nq = H * hd, nkv = KV * hd, stride = R->stride;
    float scale = cf->attn_scale ? cf->attn_scale : 1.0f / sqrtf((float)hd);
    // this thread's scores: (B tokens, group heads, stride), row r of token b at S + (b * group + r) * stride
    float *S = c->scores + (size_t)ith * R->B * group * stride;
    for (int task = ith; task < R->n_blk * KV; task += nth) {
        int t0 = R->blk0[task / KV], kh = task % KV, nt = R->blk_n[task / KV];
        const infer_ctx *sq = R->seq[t0]; // the block's sequence: its cache
        const float *kc = sq->k_cache[lc->kv_source], *vc = sq->v_cache[lc->kv_source];
        int lo[8], hi[8], p0 = INT32_MAX, p1 = 0;
        for (int b = 0; b < nt; b++) { // token b sees positions [lo, hi] of the cache
            hi[b] = R->pos[t0 + b];
            lo[b] = lc->window && hi[b] - lc->window + 1 > 0 ? hi[b] - lc->window + 1 : 0;
            p0 = lo[b] < p0 ? lo[b] : p0;
            p1 = hi[b] > p1 ? hi[b] : p1;
        }
        const float *kh_k = kc + (size_t)kh * hd, *kh_v = vc + (size_t)kh * hd;
        // scores, a chunk of keys at a time for all the tokens
        for (int c0 = p0; c0 <= p1; c0 += ATTN_CHUNK)
            for (int b = 0; b < nt; b++) {
                int a0 = c0 > lo[b] ? c0 : lo[b], a1 = c0 + ATTN_CHUNK - 1 < hi[b] ? c0 + ATTN_CHUNK - 1 : hi[b];
                if (a0 > a1) continue;
                const float *q = c->q + (size_t)(t0 + b) * nq + (size_t)kh * group * hd;
                attn_scores(q, group, hd, kh_k + (size_t)a0 * nkv, nkv, a1 - a0 + 1, scale,
                            S + (size_t)b * group * stride + (a0 - lo[b]), stride);
            }
        for (int b = 0; b < nt; b++) {
            int n = hi[b] - lo[b] + 1;
            for (int g = 0; g < group; g++) {
                float *s = S + (size_t)(b * group + g) * stride;
                if (cf->attn_softcap) softcap(s, n, cf->attn_softcap);
                if (l->sinks) {
                    s[n] = l->sinks->f32[kh * group + g];
                    softmax(s, n + 1); // the sink takes its share, then is dropped
                } else {
                    softmax(s, n);
                }
                if (c->m->ggml_numerics) vec_round_f16(s, (size_t)n); // ggml multiplies V by f16 probabilities
            }
            memset(c->att + (size_t)(t0 + b) * nq + (size_t)kh * group * hd, 0, sizeof(float) * (size_t)group * hd);
        }
        // o += probabilities v, a chunk of values at a time for all the tokens
        for (int c0 = p0; c0 <= p1; c0 += ATTN_CHUNK)
            for (int b = 0; b < nt; b++) {
                int a0 = c0 > lo[b] ? c0 : lo[b], a1 = c0 + ATTN_CHUNK - 1 < hi[b] ? c0 + ATTN_CHUNK - 1 : hi[b];
                if (a0 > a1) continue;
                attn_mix(S + (size_t)b * group * stride + (a0 - lo[b]), stride, group, a1 - a0 + 1, kh_v + (size_t)a0 * nkv, nkv,
                         hd, c->att + (size_t)(t0 + b) * nq + (size_t)kh * group * hd);
            }
    }
}

// RoPE of the query (and key) heads of tokens [t0, t1) at their positions
typedef struct { float *q, *k; int H, KV, hd; const int *pos; const rope_table *r; } rope_job;
static void rope_range(void *a, int t0, int t1) {
    rope_job *j = a;
    for (int t = t0; t < t1; t++) {
        rope(j->q + (size_t)t * j->H * j->hd, j->H, j->hd, j->pos[t], j->r);
        if (j->k) rope(j->k + (size_t)t * j->KV * j->hd, j->KV, j->hd, j->pos[t], j->r);
    }
}

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
        matmul(&c->ex, c->qkv, c->xn, &l->wqkv, f32_or_null(l->bqkv), T, E, n);
        for (int t = 0; t < T; t++) {
            const float *r = c->qkv + (size_t)t * n;
            memcpy(c->q + (size_t)t * nq, r, sizeof(float) * nq);
            memcpy(c->k + (size_t)t * nkv, r + nq, sizeof(float) * nkv);
            memcpy(c->v + (size_t)t * nkv, r + nq + nkv, sizeof(float) * nkv);
        }
    } else if (T == 1 && own_kv && l->wv.w) { // decode: the three products in one job
        float *ys[] = {c->q, c->k, c->v};
        const weight *ws[] = {&l->wq, &l->wk, &l->wv};
        const float *bs[] = {f32_or_null(l->bq), f32_or_null(l->bk), f32_or_null(l->bv)};
        int ns[] = {nq, nkv, nkv};
        matmul_multi(&c->ex, 3, ys, c->xn, ws, bs, E, ns);
    } else {
        matmul(&c->ex, c->q, c->xn, &l->wq, f32_or_null(l->bq), T, E, nq);
        if (own_kv) {
            matmul(&c->ex, c->k, c->xn, &l->wk, f32_or_null(l->bk), T, E, nkv);
            if (l->wv.w) matmul(&c->ex, c->v, c->xn, &l->wv, f32_or_null(l->bv), T, E, nkv);
            else memcpy(c->v, c->k, sizeof(float) * (size_t)T * nkv); // Gemma 4 attention_k_eq_v
        }
    }
    if (c->profiling) c->prof[PH_QKV] += now_s() - t0;
    // per-head norms, then RoPE at each token's position
    float eps = (float)cf->norm_eps;
    t0 = c->profiling ? now_s() : 0;
    // (OLMo 2 norms each token's whole q and k rather than each head)
    int qn = f->qk_norm_full ? nq : hd, kn = f->qk_norm_full ? nkv : hd;
    if (l->q_norm) par_rmsnorm(c->ex.pool, c->q, c->q, l->q_norm->f32, T * nq / qn, qn, eps, cf->norm_plus_one);
    if (own_kv) {
        if (l->k_norm) par_rmsnorm(c->ex.pool, c->k, c->k, l->k_norm->f32, T * nkv / kn, kn, eps, cf->norm_plus_one);
        if (f->v_norm) par_rmsnorm(c->ex.pool, c->v, c->v, NULL, T * KV, hd, eps, 0);
    }
    if (c->profiling) c->prof[PH_NORM] += now_s() - t0;
    if (!f->learned_pos)
        TIMED(PH_ROPE, {
            rope_job rj = {c->q, own_kv ? c->k : NULL, H, KV, hd, c->rows.pos, &lc->rope};
            pool_for(c->ex.pool, T, PAR_ROWS, rope_range, &rj);
        });
    t0 = c->profiling ? now_s() : 0;
    if (m->ggml_numerics) {
        // ggml keeps K and V in f16 and rounds q to f16 for the q.k products
        round_f16(c->ex.pool, c->q, (size_t)T * nq);
        if (own_kv) round_f16(c->ex.pool, c->k, (size_t)T * nkv), round_f16(c->ex.pool, c->v, (size_t)T * nkv);
    }
    if (own_kv) // each row into its sequence's cache
        for (int t = 0; t < T; t++) {
            infer_ctx *sq = c->rows.seq[t];
            size_t at = (size_t)c->rows.pos[t] * nkv;
            memcpy(sq->k_cache[il] + at, c->k + (size_t)t * nkv, sizeof(float) * nkv);
            memcpy(sq->v_cache[il] + at, c->v + (size_t)t * nkv, sizeof(float) * nkv);
        }

    // softmax(q k^T * scale [softcapped] [+ sink]) v, over the window of each
    // position: one task per (token, kv head), which reads that head's cached
    // keys and values once for all the query heads of its group.
    attn_job j = {c, il};
    pool_run(c->ex.pool, attn_task, &j);
    if (c->profiling) c->prof[PH_ATTN] += now_s() - t0;
    TIMED(PH_O, matmul(&c->ex, c->o, c->att, &l->wo, f32_or_null(l->bo), T, nq, E));
}

// ---------------------------------------------------------------------------
// feed-forward

// One gated or plain MLP over T rows of xn into out.
static void mlp(infer_ctx *c, const layer_weights *l, const float *xn, float *out, int T) {
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd, F = cf->n_ff;
    if (cf->fam->ffn == FFN_PLAIN) {
        TIMED(PH_GATE_UP, matmul(&c->ex, c->ff, xn, &l->ffn_up, f32_or_null(l->ffn_up_b), T, E, F));
        TIMED(PH_ACT, glu(c, c->ff, NULL, T, F));
    } else if (l->ffn_gate_up.w) {
        // fused [gate; up] rows (Phi-3): split each token's 2F outputs
        TIMED(PH_GATE_UP, matmul(&c->ex, c->ff2, xn, &l->ffn_gate_up, NULL, T, E, 2 * F));
        TIMED(PH_ACT, for (int t = 0; t < T; t++) {
            float *g = c->ff2 + (size_t)t * 2 * F, *u = g + F, *o = c->ff + (size_t)t * F;
            act(c, g, F);
            for (int i = 0; i < F; i++) o[i] = g[i] * u[i];
        });
    } else {
        TIMED(PH_GATE_UP, {
            if (T == 1) {
                float *ys[] = {c->ff, c->ff2};
                const weight *ws[] = {&l->ffn_gate, &l->ffn_up};
                const float *bs[] = {NULL, NULL};
                int ns[] = {F, F};
                matmul_multi(&c->ex, 2, ys, xn, ws, bs, E, ns);
            } else {
                matmul(&c->ex, c->ff, xn, &l->ffn_gate, NULL, T, E, F);
                matmul(&c->ex, c->ff2, xn, &l->ffn_up, NULL, T, E, F);
            }
        });
        TIMED(PH_ACT, glu(c, c->ff, c->ff2, T, F));
    }
    TIMED(PH_DOWN, matmul(&c->ex, out, c->ff, &l->ffn_down, f32_or_null(l->ffn_down_b), T, F, E));
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
    for (int t = 0; t < T; t++) walk_ffn(wl, c->xn + (size_t)t * E, k, c->o + (size_t)t * E, c->ws);
}

// One expert on one token: out = down(act(gate x) * up x).
static void expert(infer_ctx *c, const layer_weights *l, int e, const float *x, float *out) {
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd, F = cf->n_ff_expert;
    float *g = c->ff, *u = c->ff + F;
    if (cf->fam->ffn == FFN_OSS) {
        // gpt-oss: gate/up with biases (interleaved in one matrix in HF files,
        // split in GGUF), clamped, (up + 1) * gate * sigmoid(1.702 gate)
        int fused = l->exp_gate_up[e].w != NULL;
        if (fused) {
            matmul(&c->ex, c->ff2, x, &l->exp_gate_up[e], l->exp_gate_up_b[e].f32, 1, E, 2 * F);
        } else {
            matmul(&c->ex, c->ff2, x, &l->exp_gate[e], l->exp_gate_b[e].f32, 1, E, F);
            matmul(&c->ex, c->ff2 + F, x, &l->exp_up[e], l->exp_up_b[e].f32, 1, E, F);
        }
        for (int i = 0; i < F; i++) {
            float gv = fused ? c->ff2[2 * i] : c->ff2[i], uv = fused ? c->ff2[2 * i + 1] : c->ff2[F + i];
            gv = gv > 7.0f ? 7.0f : gv;
            uv = uv > 7.0f ? 7.0f : uv < -7.0f ? -7.0f : uv;
            g[i] = (uv + 1.0f) * gv / (1.0f + expf(-1.702f * gv));
        }
        matmul(&c->ex, out, g, &l->exp_down[e], l->exp_down_b[e].f32, 1, F, E);
        return;
    }
    if (l->exp_gate_up[e].w) {
        matmul(&c->ex, c->ff2, x, &l->exp_gate_up[e], NULL, 1, E, 2 * F);
        memcpy(g, c->ff2, sizeof(float) * F);
        memcpy(u, c->ff2 + F, sizeof(float) * F);
    } else {
        matmul(&c->ex, g, x, &l->exp_gate[e], NULL, 1, E, F);
        matmul(&c->ex, u, x, &l->exp_up[e], NULL, 1, E, F);
    }
    act(c, g, F);
    for (int i = 0; i < F; i++) g[i] *= u[i];
    matmul(&c->ex, out, g, &l->exp_down[e], NULL, 1, F, E);
}

// Mixture of experts: route each token to its top-k experts, sum their
// outputs weighted by the router.
static void moe(infer_ctx *c, const layer_weights *l, const float *xn, float *out, int T) {
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd, NE = cf->n_expert, K = cf->n_expert_used;
    weight router = {l->router, 0};
    int sel[INFER_MAX_EXPERTS_USED]; // the config loaders refuse more
    float w[INFER_MAX_EXPERTS_USED];
    for (int t = 0; t < T; t++) {
        const float *x = xn + (size_t)t * E;
        float *o = out + (size_t)t * E;
        float *logit = c->row;
        matmul(&c->ex, logit, x, &router, f32_or_null(l->router_b), 1, E, NE);
        if (cf->fam->moe == MOE_SOFTMAX_TOPK) softmax(logit, NE);
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
        if (cf->fam->moe == MOE_TOPK_SOFTMAX) softmax(w, K);
        else if (cf->moe_norm_topk) {
            float s = 0;
            for (int k = 0; k < K; k++) s += w[k];
            for (int k = 0; k < K; k++) w[k] /= s;
        }
        memset(o, 0, sizeof(float) * E);
        for (int k = 0; k < K; k++) {
            expert(c, l, sel[k], x, c->eo);
            for (int i = 0; i < E; i++) o[i] += w[k] * c->eo[i];
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
    if (block == BLOCK_POST) memcpy(c->xn, c->x, sizeof(float) * TE);
    else TIMED(PH_NORM, norm(c->ex.pool, m, c->xn, c->x, l->attn_norm, l->attn_norm_b, T));
    attention(c, il, T);
    if (l->post_attn_norm) TIMED(PH_NORM, norm(c->ex.pool, m, c->o, c->o, l->post_attn_norm, NULL, T));
    TIMED(PH_RESIDUAL, residual(c->ex.pool, c->x, c->o, cf->residual_scale, T, E));

    // x = x + post_norm(ffn(norm(x))) * residual_scale; a parallel block
    // (Cohere) feeds the FFN the attention's input: (x + attn) + ffn
    if (block == BLOCK_POST) memcpy(c->xn, c->x, sizeof(float) * TE);
    else if (block == BLOCK_PRE) TIMED(PH_NORM, norm(c->ex.pool, m, c->xn, c->x, l->ffn_norm, l->ffn_norm_b, T));
    if (c->ffn_in) memcpy(c->ffn_in + (size_t)il * E, c->xn + (size_t)(T - 1) * E, sizeof(float) * E);
    const layer_plan *lp = c->plan ? &c->plan[il] : NULL;
    if (cf->n_expert) TIMED(PH_MOE, moe(c, l, c->xn, c->o, T));
    else if ((lp && lp->kind == G_WALK) || (!l->ffn_down.w && m->walk)) TIMED(PH_WALK, walk(c, il, T));
    else mlp(c, l, c->xn, c->o, T);
    if (l->post_ffn_norm) TIMED(PH_NORM, norm(c->ex.pool, m, c->o, c->o, l->post_ffn_norm, NULL, T));
    TIMED(PH_RESIDUAL, residual(c->ex.pool, c->x, c->o, cf->residual_scale, T, E));

    // Gemma 4: x = x + norm(proj(act(gate(x)) * per_layer_input))
    double t0 = c->profiling ? now_s() : 0;
    if (cf->ple_dim) {
        int P = cf->ple_dim, LP = cf->n_layer * P;
        matmul(&c->ex, c->ple_tmp, c->x, &l->ple_gate, NULL, T, E, P);
        act(c, c->ple_tmp, T * P);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < P; i++) c->ple_tmp[(size_t)t * P + i] *= c->ple[(size_t)t * LP + (size_t)il * P + i];
        matmul(&c->ex, c->o, c->ple_tmp, &l->ple_proj, NULL, T, P, E);
        norm(c->ex.pool, m, c->o, c->o, l->ple_norm, NULL, T);
        for (size_t i = 0; i < TE; i++) c->x[i] += c->o[i];
    }
    if (l->layer_scalar) {
        float s = l->layer_scalar->f32[0];
        for (size_t i = 0; i < TE; i++) c->x[i] *= s;
    }
    if (c->profiling) c->prof[PH_PLE] += now_s() - t0;
}

// ---------------------------------------------------------------------------

// The kernels' scratch could not grow during the pass: its results are not to be used.
static infer_status oom_check(infer_ctx *c) {
    if (!c->ex.oom) return INFER_OK;
    c->ex.oom = 0;
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
        if (run % sq->attn_tokens == 0) R->blk0[R->n_blk] = t, R->blk_n[R->n_blk++] = 0;
        R->blk_n[R->n_blk - 1]++;
        if (sq->attn_tokens > R->B) R->B = sq->attn_tokens;
        if (sq->n_ctx + 1 > R->stride) R->stride = sq->n_ctx + 1;
    }
}

infer_status forward(infer_ctx *c, const int32_t *ids, int T, float *logits, int last_only, float *hidden) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    int E = cf->n_embd, V = cf->n_vocab, pos0 = c->n_past;
    infer_ctx *self[N_BATCH];
    for (int t = 0; t < T; t++) self[t] = c;
    pass_rows_set(c, self, T);

    int first_layer = 0;
    if (c->plan && c->n_cached > 0) {
        // cached layers: the template's residual and K/V at these positions
        if (!c->tmpl_x || c->tmpl_layers != c->n_cached)
            return fail(INFER_ERR_ARG, "the graph's cached layers 0-%d need a template recorded for them", c->n_cached - 1);
        if (pos0 + T > c->tmpl_n)
            return fail(INFER_ERR_ARG, "cached layers: positions up to %d are beyond the template's %d tokens", pos0 + T - 1, c->tmpl_n);
        memcpy(c->x, c->tmpl_x + (size_t)pos0 * E, sizeof(float) * (size_t)T * E);
        for (int il = 0; il < c->n_cached; il++) {
            if (!c->tmpl_k[il]) continue;
            size_t nkv = (size_t)cf->layers[il].n_kv_head * cf->layers[il].head_dim;
            memcpy(c->k_cache[il] + (size_t)pos0 * nkv, c->tmpl_k[il] + (size_t)pos0 * nkv, sizeof(float) * T * nkv);
            memcpy(c->v_cache[il] + (size_t)pos0 * nkv, c->tmpl_v[il] + (size_t)pos0 * nkv, sizeof(float) * T * nkv);
        }
        first_layer = c->n_cached;
        if (cf->ple_dim) TIMED(PH_PLE, per_layer_inputs(c, ids, T));
    } else {
        TIMED(PH_EMBED, embed(c, ids, T));
        if (cf->ple_dim) TIMED(PH_PLE, per_layer_inputs(c, ids, T));
    }
    if (hidden)
        for (int il = 0; il <= first_layer; il++) memcpy(hidden + (size_t)il * E, c->x + (size_t)(T - 1) * E, sizeof(float) * E);
    for (int il = first_layer; il < cf->n_layer; il++) {
        layer(c, il, T);
        if (c->capture && il == c->tmpl_layers - 1) memcpy(c->capture + (size_t)pos0 * E, c->x, sizeof(float) * (size_t)T * E);
        if (hidden && il < cf->n_layer - 1) memcpy(hidden + (size_t)(il + 1) * E, c->x + (size_t)(T - 1) * E, sizeof(float) * E);
    }
    c->n_past += T;

    // logits = final_norm(x) W_out^T * logit_scale, softcapped
    int first = last_only ? T - 1 : 0, n = T - first;
    double t0 = c->profiling ? now_s() : 0;
    norm(c->ex.pool, m, c->xn, c->x + (size_t)first * E, m->output_norm, m->output_norm_b, n);
    if (hidden) memcpy(hidden + (size_t)cf->n_layer * E, c->xn + (size_t)(n - 1) * E, sizeof(float) * E);
    if (!logits) {
        if (c->profiling) c->prof[PH_LOGITS] += now_s() - t0;
        return oom_check(c);
    }
    matmul(&c->ex, logits, c->xn, &m->output, NULL, n, E, V);
    for (size_t i = 0; i < (size_t)n * V; i++) logits[i] *= cf->logit_scale;
    if (cf->final_softcap) softcap(logits, n * V, cf->final_softcap);
    if (c->profiling) c->prof[PH_LOGITS] += now_s() - t0;
    return oom_check(c);
}

infer_status forward_rows(infer_ctx *c, const int32_t *ids, int T, float *const *dst) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    int E = cf->n_embd, V = cf->n_vocab;
    const pass_rows *R = &c->rows;
    size_t need = (size_t)pool_size(c->pool) * R->B * cf->n_head * R->stride;
    if (need > c->scores_cap) { // the batch's sequences may hold more positions than the workspace
        float *sc = realloc(c->scores, sizeof(float) * need);
        if (!sc) return fail(INFER_ERR_NOMEM, "out of memory for attention scores");
        c->scores = sc, c->scores_cap = need;
    }
    int n_out = 0;
    for (int t = 0; t < T; t++) n_out += dst[t] != NULL;
    if ((size_t)n_out * V > c->logit_cap) {
        float *lb = realloc(c->logit_buf, sizeof(float) * (size_t)n_out * V);
        if (!lb) return fail(INFER_ERR_NOMEM, "out of memory for %d rows of logits", n_out);
        c->logit_buf = lb, c->logit_cap = (size_t)n_out * V;
    }
    TIMED(PH_EMBED, embed(c, ids, T));
    if (cf->ple_dim) TIMED(PH_PLE, per_layer_inputs(c, ids, T));
    for (int il = 0; il < cf->n_layer; il++) layer(c, il, T);
    for (int t = 0; t < T; t++) R->seq[t]->n_past++;
    if (!n_out) return oom_check(c);
    // logits of the rows that want them: gathered, one product for all
    double t0 = c->profiling ? now_s() : 0;
    for (int t = 0, k = 0; t < T; t++)
        if (dst[t]) memcpy(c->o + (size_t)k++ * E, c->x + (size_t)t * E, sizeof(float) * E);
    norm(c->ex.pool, m, c->xn, c->o, m->output_norm, m->output_norm_b, n_out);
    matmul(&c->ex, c->logit_buf, c->xn, &m->output, NULL, n_out, E, V);
    for (int t = 0, k = 0; t < T; t++) {
        if (!dst[t]) continue;
        float *lg = c->logit_buf + (size_t)k++ * V;
        for (int i = 0; i < V; i++) lg[i] *= cf->logit_scale;
        if (cf->final_softcap) softcap(lg, V, cf->final_softcap);
        memcpy(dst[t], lg, sizeof(float) * V);
    }
    if (c->profiling) c->prof[PH_LOGITS] += now_s() - t0;
    return oom_check(c);
}
