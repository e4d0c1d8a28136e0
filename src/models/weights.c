// Tensor names -> canonical slots, and the shape check of every slot.
//
// Hugging Face names are "<prefix>layers.<i>.<suffix>" (or "h.<i>." for GPT-2)
// with prefixes such as "model.", "transformer." or "model.language_model.".
// Other tensors (vision towers, buffers) are counted and left alone.
#include "models/model.h"
#include "tensor/dtype.h"
#include "tensor/pack.h"
#include "models/gguf.h"
#include "base/error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum slot_kind { S_TENSOR, S_WEIGHT };

typedef struct {
    const char *suffix;
    size_t off;
    int kind;
} name_map;

#define T(s, f) {s, offsetof(layer_weights, f), S_TENSOR}
#define W(s, f) {s, offsetof(layer_weights, f), S_WEIGHT}

// Per-layer names shared by every family. "post_attention_layernorm" is the
// pre-FFN norm except in families with post-norms (handled in bind_layer).
static const name_map g_layer_names[] = {
    T("input_layernorm.weight", attn_norm), T("input_layernorm.bias", attn_norm_b),
    T("ln_1.weight", attn_norm), T("ln_1.bias", attn_norm_b),
    W("self_attn.q_proj.weight", wq), W("self_attn.k_proj.weight", wk), W("self_attn.v_proj.weight", wv),
    W("self_attn.o_proj.weight", wo), W("self_attn.qkv_proj.weight", wqkv),
    T("self_attn.q_proj.bias", bq), T("self_attn.k_proj.bias", bk), T("self_attn.v_proj.bias", bv),
    T("self_attn.o_proj.bias", bo),
    W("attn.c_attn.weight", wqkv), T("attn.c_attn.bias", bqkv), W("attn.c_proj.weight", wo), T("attn.c_proj.bias", bo),
    T("self_attn.q_norm.weight", q_norm), T("self_attn.k_norm.weight", k_norm),
    T("self_attn.sinks", sinks),
    T("post_attention_layernorm.bias", ffn_norm_b),
    T("pre_feedforward_layernorm.weight", ffn_norm), T("post_feedforward_layernorm.weight", post_ffn_norm),
    T("ln_2.weight", ffn_norm), T("ln_2.bias", ffn_norm_b),
    W("mlp.gate_proj.weight", ffn_gate), W("mlp.up_proj.weight", ffn_up), W("mlp.down_proj.weight", ffn_down),
    W("mlp.gate_up_proj.weight", ffn_gate_up),
    W("mlp.c_fc.weight", ffn_up), T("mlp.c_fc.bias", ffn_up_b), W("mlp.c_proj.weight", ffn_down),
    T("mlp.c_proj.bias", ffn_down_b), T("mlp.up_proj.bias", ffn_up_b), T("mlp.down_proj.bias", ffn_down_b),
    T("block_sparse_moe.gate.weight", router), T("mlp.gate.weight", router),
    T("mlp.router.weight", router), T("mlp.router.bias", router_b),
    T("layer_scalar", layer_scalar),
    // BERT ("encoder.layer.<i>."): its post-norms are the block's two norms
    W("attention.self.query.weight", wq), W("attention.self.key.weight", wk), W("attention.self.value.weight", wv),
    T("attention.self.query.bias", bq), T("attention.self.key.bias", bk), T("attention.self.value.bias", bv),
    W("attention.output.dense.weight", wo), T("attention.output.dense.bias", bo),
    T("attention.output.LayerNorm.weight", attn_norm), T("attention.output.LayerNorm.bias", attn_norm_b),
    W("intermediate.dense.weight", ffn_up), T("intermediate.dense.bias", ffn_up_b),
    W("output.dense.weight", ffn_down), T("output.dense.bias", ffn_down_b),
    T("output.LayerNorm.weight", ffn_norm), T("output.LayerNorm.bias", ffn_norm_b),
    W("per_layer_input_gate.weight", ple_gate), W("per_layer_projection.weight", ple_proj),
    T("post_per_layer_input_norm.weight", ple_norm),
};

// llama.cpp's per-layer names ("blk.<i>.<name>", gguf-py constants.py).
static const name_map g_gguf_layer_names[] = {
    T("attn_norm.weight", attn_norm), T("attn_norm.bias", attn_norm_b),
    W("attn_q.weight", wq), W("attn_k.weight", wk), W("attn_v.weight", wv), W("attn_output.weight", wo),
    W("attn_qkv.weight", wqkv),
    T("attn_q.bias", bq), T("attn_k.bias", bk), T("attn_v.bias", bv), T("attn_output.bias", bo), T("attn_qkv.bias", bqkv),
    T("attn_q_norm.weight", q_norm), T("attn_k_norm.weight", k_norm), T("attn_sinks.weight", sinks),
    T("post_attention_norm.weight", post_attn_norm),
    T("ffn_norm.weight", ffn_norm), T("ffn_norm.bias", ffn_norm_b), T("post_ffw_norm.weight", post_ffn_norm),
    W("ffn_gate.weight", ffn_gate), W("ffn_up.weight", ffn_up), W("ffn_down.weight", ffn_down),
    T("ffn_up.bias", ffn_up_b), T("ffn_down.bias", ffn_down_b),
    T("ffn_gate_inp.weight", router), T("ffn_gate_inp.bias", router_b),
    T("layer_output_scale.weight", layer_scalar),
    W("inp_gate.weight", ple_gate), W("proj.weight", ple_proj), T("post_norm.weight", ple_norm),
};

static const char *g_prefixes[] = {"model.language_model.", "language_model.model.", "language_model.", "model.",
                                   "transformer.", "bert.", ""};

// Splits "<prefix>layers.<i>.<rest>" (or h.<i>.); returns the layer or -1.
static int split_layer(const char *name, const char **rest) {
    for (size_t p = 0; p < sizeof g_prefixes / sizeof g_prefixes[0]; p++) {
        size_t pl = strlen(g_prefixes[p]);
        if (strncmp(name, g_prefixes[p], pl)) continue;
        const char *s = name + pl;
        if (!strncmp(s, "layers.", 7)) s += 7;
        else if (!strncmp(s, "h.", 2)) s += 2;
        else if (!strncmp(s, "encoder.layer.", 14)) s += 14; // BERT
        else continue;
        char *end;
        long i = strtol(s, &end, 10);
        if (end == s || *end != '.' || i < 0 || i > 1000000) return -1;
        *rest = end + 1;
        return (int)i;
    }
    return -1;
}

// "blk.<i>.<rest>"; returns the layer or -1.
static int split_gguf_layer(const char *name, const char **rest) {
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long i = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || i < 0 || i > 1000000) return -1;
    *rest = end + 1;
    return (int)i;
}

static const char *strip_prefix(const char *name) {
    for (size_t p = 0; p + 1 < sizeof g_prefixes / sizeof g_prefixes[0]; p++) {
        size_t pl = strlen(g_prefixes[p]);
        if (!strncmp(name, g_prefixes[p], pl)) return name + pl;
    }
    return name;
}

// ---------------------------------------------------------------------------
// Experts: per-expert tensors ("experts.<e>.w1.weight") or one 3-D tensor.

// Splits a tensor whose outermost dimension is the expert into one view per
// expert: weights (3-D) into arr, biases (2-D) into barr.
static infer_status expert_views(infer_model *m, const tensor *t, weight *arr, tensor *barr, int trans, int *taken) {
    const infer_config *c = &m->cfg;
    int want_nd = arr ? 3 : 2;
    if (t->nd != want_nd || t->ne[want_nd - 1] != c->n_expert)
        return fail(INFER_ERR_FORMAT, "tensor %s: expected %d dims with %d experts outermost", t->name, want_nd, c->n_expert);
    if (t->type < 0) return fail(INFER_ERR_UNSUPPORTED, "tensor %s: unsupported type %s", t->name, t->type_name);
    if ((arr && arr[0].w) || (barr && barr[0].data)) return fail(INFER_ERR_FORMAT, "tensor %s: expert tensors given more than once", t->name);
    if (m->n_views + c->n_expert > m->cap_views)
        return fail(INFER_ERR_FORMAT, "tensor %s: expert tensors given more than once", t->name);
    size_t per = t->nbytes / (size_t)c->n_expert;
    for (int e = 0; e < c->n_expert; e++) {
        tensor *v = arr ? &m->views[m->n_views++] : &barr[e];
        *v = *t;
        v->f32 = NULL;
        v->nd = want_nd - 1;
        v->ne[want_nd - 1] = 1;
        v->data = (const char *)t->data + per * (size_t)e;
        v->nbytes = per;
        if (arr) { arr[e].w = v; arr[e].trans = trans; arr[e].unpacked = 1; } // (experts are not packed: each_weight)
    }
    *taken = 1;
    return INFER_OK;
}

static infer_status expert_slot(infer_model *m, layer_weights *lw, const char *rest, const tensor *t, int *taken) {
    const infer_config *c = &m->cfg;
    const char *s = NULL;
    if (!strncmp(rest, "block_sparse_moe.experts.", 25)) s = rest + 25;
    else if (!strncmp(rest, "mlp.experts.", 12)) s = rest + 12;
    if (!s) return INFER_OK;
    if (!c->n_expert) return INFER_OK;
    if (*s >= '0' && *s <= '9') {
        char *end;
        long e = strtol(s, &end, 10);
        if (*end != '.' || e < 0 || e >= c->n_expert)
            return fail(INFER_ERR_FORMAT, "tensor %s: expert index outside 0..%d", t->name, c->n_expert - 1);
        const char *w = end + 1;
        weight *dst = NULL;
        if (!strcmp(w, "w1.weight") || !strcmp(w, "gate_proj.weight")) dst = &lw->exp_gate[e];
        else if (!strcmp(w, "w3.weight") || !strcmp(w, "up_proj.weight")) dst = &lw->exp_up[e];
        else if (!strcmp(w, "w2.weight") || !strcmp(w, "down_proj.weight")) dst = &lw->exp_down[e];
        if (dst) { dst->w = t; dst->trans = 0; dst->unpacked = 1; *taken = 1; }
        return INFER_OK;
    }
    // 3-D tensors: [E, out, in] normally; gpt-oss stores [E, in, out].
    int trans = m->cfg.fam->ffn == FFN_OSS;
    if (!strcmp(s, "gate_up_proj")) return expert_views(m, t, lw->exp_gate_up, NULL, trans, taken);
    if (!strcmp(s, "down_proj")) return expert_views(m, t, lw->exp_down, NULL, trans, taken);
    if (!strcmp(s, "gate_up_proj_bias")) return expert_views(m, t, NULL, lw->exp_gate_up_b, 0, taken);
    if (!strcmp(s, "down_proj_bias")) return expert_views(m, t, NULL, lw->exp_down_b, 0, taken);
    return INFER_OK;
}

// GGUF experts: "ffn_{gate,up,down,gate_up}_exps.weight" [E, out, in] and
// gpt-oss biases "ffn_{gate,up,down}_exps.bias" [E, n].
static infer_status gguf_expert_slot(infer_model *m, layer_weights *lw, const char *rest, const tensor *t, int *taken) {
    if (!m->cfg.n_expert) return INFER_OK;
    static const struct { const char *name; size_t woff, boff; } k[] = {
        {"ffn_gate_exps", offsetof(layer_weights, exp_gate), offsetof(layer_weights, exp_gate_b)},
        {"ffn_up_exps", offsetof(layer_weights, exp_up), offsetof(layer_weights, exp_up_b)},
        {"ffn_down_exps", offsetof(layer_weights, exp_down), offsetof(layer_weights, exp_down_b)},
        {"ffn_gate_up_exps", offsetof(layer_weights, exp_gate_up), 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].name);
        if (strncmp(rest, k[i].name, n)) continue;
        if (!strcmp(rest + n, ".weight")) return expert_views(m, t, *(weight **)((char *)lw + k[i].woff), NULL, 0, taken);
        if (!strcmp(rest + n, ".bias") && k[i].boff) return expert_views(m, t, NULL, *(tensor **)((char *)lw + k[i].boff), 0, taken);
    }
    return INFER_OK;
}

// ---------------------------------------------------------------------------
// Shape checks

static infer_status need(const void *slot, const char *what, int layer) {
    if (slot) return INFER_OK;
    if (layer >= 0) return fail(INFER_ERR_FORMAT, "missing tensor: layer %d has no %s", layer, what);
    return fail(INFER_ERR_FORMAT, "missing tensor: %s", what);
}

static infer_status usable(const tensor *t) {
    if (t->type < 0 || !dtype_get(t->type))
        return fail(INFER_ERR_UNSUPPORTED, "tensor %s: unsupported type %s (no kernels for it yet)", t->name, t->type_name);
    if (t->ne[0] % dtype_get(t->type)->blck)
        return fail(INFER_ERR_FORMAT, "tensor %s: row of %lld is not a whole number of %s blocks", t->name,
                    (long long)t->ne[0], dtype_get(t->type)->name);
    return INFER_OK;
}

// A matrix used as y(n_out) = W x(n_in).
// `fields`: the config fields the shape comes from, for the message (or NULL).
static infer_status check_wf(const weight *w, int64_t n_in, int64_t n_out, const char *fields) {
    if (!w->w) return INFER_OK;
    infer_status st = usable(w->w);
    if (st) return st;
    int64_t a = w->trans ? n_out : n_in, b = w->trans ? n_in : n_out;
    if (w->w->nd != 2 || w->w->ne[0] != a || w->w->ne[1] != b)
        return fail(INFER_ERR_FORMAT, "tensor %s: shape [%lld, %lld] but the config implies [%lld, %lld]%s%s%s", w->w->name,
                    (long long)w->w->ne[1], (long long)w->w->ne[0], (long long)b, (long long)a,
                    fields ? " (" : "", fields ? fields : "", fields ? ")" : "");
    return INFER_OK;
}
static infer_status check_w(const weight *w, int64_t n_in, int64_t n_out) { return check_wf(w, n_in, n_out, NULL); }

static infer_status check_v(const tensor *t, int64_t n) {
    if (!t) return INFER_OK;
    infer_status st = usable(t);
    if (st) return st;
    if (tensor_nelem(t) != n)
        return fail(INFER_ERR_FORMAT, "tensor %s: %lld elements but the config implies %lld", t->name,
                    (long long)tensor_nelem(t), (long long)n);
    return INFER_OK;
}

#define TRY(x) do { infer_status st_ = (x); if (st_) return st_; } while (0)

static infer_status check_layer(const infer_model *m, int il) {
    const infer_config *c = &m->cfg;
    const layer_config *lc = &c->layers[il];
    const layer_weights *l = &m->layers[il];
    const family *f = c->fam;
    int64_t E = c->n_embd, hd = lc->head_dim, q = (int64_t)c->n_head * hd, kv = (int64_t)lc->n_kv_head * hd;
    int shared = lc->kv_source != il;
    if (f->block != BLOCK_POST) TRY(need(l->attn_norm, "input_layernorm", il));
    TRY(check_v(l->attn_norm, E));
    TRY(check_v(l->attn_norm_b, E));
    if (l->wqkv.w) {
        TRY(check_w(&l->wqkv, E, q + 2 * kv));
        TRY(check_v(l->bqkv, q + 2 * kv));
    } else {
        TRY(need(l->wq.w, "self_attn.q_proj", il));
        TRY(check_wf(&l->wq, E, q, "hidden_size; num_attention_heads x head_dim"));
        if (!shared) {
            TRY(need(l->wk.w, "self_attn.k_proj", il));
            if (!(c->attn_k_eq_v && lc->global)) TRY(need(l->wv.w, "self_attn.v_proj", il));
        }
        TRY(check_wf(&l->wk, E, kv, "hidden_size; num_key_value_heads x head_dim"));
        TRY(check_wf(&l->wv, E, kv, "hidden_size; num_key_value_heads x head_dim"));
        TRY(check_v(l->bq, q));
        TRY(check_v(l->bk, kv));
        TRY(check_v(l->bv, kv));
    }
    TRY(need(l->wo.w, "self_attn.o_proj", il));
    TRY(check_wf(&l->wo, q, E, "num_attention_heads x head_dim; hidden_size"));
    TRY(check_v(l->bo, E));
    TRY(check_v(l->q_norm, f->qk_norm_full ? q : hd));
    TRY(check_v(l->k_norm, f->qk_norm_full ? kv : hd));
    TRY(check_v(l->sinks, c->n_head));
    if (f->moe == MOE_TOPK_SOFTMAX) TRY(need(l->sinks, "self_attn.sinks", il));
    if (f->post_norms) {
        TRY(need(l->post_attn_norm, "post_attention_layernorm", il));
        TRY(need(l->post_ffn_norm, "post_feedforward_layernorm", il));
        TRY(check_v(l->post_attn_norm, E));
        TRY(check_v(l->post_ffn_norm, E));
    }
    if (f->block == BLOCK_ENC_POST) TRY(need(l->ffn_norm, "output.LayerNorm", il));
    if (f->block == BLOCK_PRE)
        TRY(need(l->ffn_norm, f->post_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm", il));
    TRY(check_v(l->ffn_norm, E));
    TRY(check_v(l->ffn_norm_b, E));
    if (c->n_expert) {
        int64_t F = c->n_ff_expert;
        TRY(need(l->router, "the MoE router (gate)", il));
        if (l->router->nd != 2 || l->router->ne[0] != E || l->router->ne[1] != c->n_expert)
            return fail(INFER_ERR_FORMAT, "tensor %s: router shape does not match %d experts x %lld", l->router->name,
                        c->n_expert, (long long)E);
        TRY(usable(l->router));
        TRY(check_v(l->router_b, c->n_expert));
        for (int e = 0; e < c->n_expert; e++) {
            char what[64];
            snprintf(what, sizeof what, "expert %d down projection", e);
            TRY(need(l->exp_down[e].w, what, il));
            TRY(check_w(&l->exp_down[e], F, E));
            if (l->exp_gate_up[e].w) {
                TRY(check_w(&l->exp_gate_up[e], E, 2 * F));
            } else {
                snprintf(what, sizeof what, "expert %d gate/up projections", e);
                TRY(need(l->exp_gate[e].w && l->exp_up[e].w ? l : NULL, what, il));
                TRY(check_w(&l->exp_gate[e], E, F));
                TRY(check_w(&l->exp_up[e], E, F));
            }
            if (f->ffn == FFN_OSS) {
                TRY(check_v(l->exp_gate_up_b[e].data ? &l->exp_gate_up_b[e] : NULL, 2 * F));
                TRY(check_v(l->exp_gate_b[e].data ? &l->exp_gate_b[e] : NULL, F));
                TRY(check_v(l->exp_up_b[e].data ? &l->exp_up_b[e] : NULL, F));
                TRY(check_v(l->exp_down_b[e].data ? &l->exp_down_b[e] : NULL, E));
            }
        }
    } else if (!m->ffn_external) {
        int64_t F = c->n_ff;
        TRY(need(l->ffn_down.w, "mlp down projection", il));
        TRY(check_w(&l->ffn_down, F, E));
        TRY(check_v(l->ffn_down_b, E));
        if (f->ffn == FFN_GATED) {
            if (l->ffn_gate_up.w) TRY(check_w(&l->ffn_gate_up, E, 2 * F));
            else {
                TRY(need(l->ffn_gate.w, "mlp.gate_proj", il));
                TRY(need(l->ffn_up.w, "mlp.up_proj", il));
                TRY(check_w(&l->ffn_gate, E, F));
                TRY(check_w(&l->ffn_up, E, F));
            }
        } else {
            TRY(need(l->ffn_up.w, "mlp up projection (c_fc)", il));
            TRY(check_w(&l->ffn_up, E, F));
            TRY(check_v(l->ffn_up_b, F));
        }
    }
    TRY(check_v(l->layer_scalar, 1));
    if (c->ple_dim) {
        TRY(need(l->ple_gate.w, "per_layer_input_gate", il));
        TRY(need(l->ple_proj.w, "per_layer_projection", il));
        TRY(need(l->ple_norm, "post_per_layer_input_norm", il));
        TRY(check_w(&l->ple_gate, E, c->ple_dim));
        TRY(check_w(&l->ple_proj, c->ple_dim, E));
        TRY(check_v(l->ple_norm, E));
    }
    return INFER_OK;
}

static infer_status check_model(const infer_model *m) {
    const infer_config *c = &m->cfg;
    int64_t E = c->n_embd;
    TRY(need(m->tok_embd, "embed_tokens (token embeddings)", -1));
    weight te = {.w = m->tok_embd};
    TRY(check_w(&te, E, c->n_vocab));
    TRY(check_w(&m->output, E, c->n_vocab));
    if (!c->fam->encoder) TRY(need(m->output_norm, "final norm (model.norm)", -1));
    else {
        TRY(need(m->embd_norm, "embeddings.LayerNorm", -1));
        TRY(check_v(m->embd_norm, E));
        TRY(check_v(m->embd_norm_b, E));
        if (m->type_embd && (m->type_embd->nd != 2 || m->type_embd->ne[0] != E || m->type_embd->ne[1] < 1))
            return fail(INFER_ERR_FORMAT, "tensor %s: token type embeddings are not rows of hidden_size %lld",
                        m->type_embd->name, (long long)E);
        if (m->type_embd) TRY(usable(m->type_embd));
    }
    TRY(check_v(m->output_norm, E));
    TRY(check_v(m->output_norm_b, E));
    if (c->fam->learned_pos) {
        TRY(need(m->pos_embd, "position embeddings (wpe)", -1));
        weight pe = {.w = m->pos_embd};
        TRY(check_w(&pe, E, c->n_ctx_train));
    }
    if (c->ple_dim) {
        int64_t P = (int64_t)c->n_layer * c->ple_dim;
        TRY(need(m->ple_embd, "embed_tokens_per_layer", -1));
        TRY(need(m->ple_model_proj.w, "per_layer_model_projection", -1));
        TRY(need(m->ple_proj_norm, "per_layer_projection_norm", -1));
        weight pe = {.w = m->ple_embd};
        TRY(check_w(&pe, P, c->ple_vocab));
        TRY(check_w(&m->ple_model_proj, E, P));
        TRY(check_v(m->ple_proj_norm, c->ple_dim));
    }
    for (int il = 0; il < c->n_layer; il++) TRY(check_layer(m, il));
    return INFER_OK;
}

// ---------------------------------------------------------------------------

static infer_status decode_one(tensor *t) {
    const dtype_traits *tr = dtype_get(t->type);
    if (!tr || t->f32 || !t->data) return INFER_OK;
    int64_t n = tensor_nelem(t);
    t->f32 = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!t->f32) return fail(INFER_ERR_NOMEM, "out of memory");
    tr->to_float(t->data, t->f32, n);
    // (a norm's or a bias's inf or NaN spreads to every logit: named here, not met as NaN logits later)
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(t->f32[i]))
            return fail(INFER_ERR_FORMAT, "tensor %s: element %lld is %s: the file's numbers are broken", t->name, (long long)i,
                        isnan(t->f32[i]) ? "NaN" : t->f32[i] > 0 ? "+inf" : "-inf");
    return INFER_OK;
}

// Every tensor's every element finite (llama.cpp's --check-tensors), decoded
// a piece at a time; the small ones were checked at load.
infer_status model_check_tensors(infer_model *m) {
    enum { PIECE = 1 << 16 };
    float *buf = malloc(sizeof(float) * PIECE);
    if (!buf) return fail(INFER_ERR_NOMEM, "out of memory");
    infer_status st = INFER_OK;
    for (int i = 0; i < m->store.n && !st; i++) {
        const tensor *t = &m->store.t[i];
        const dtype_traits *tr = dtype_get(t->type);
        if (!tr || !t->data) continue;
        int64_t n = tensor_nelem(t), step = PIECE - PIECE % tr->blck;
        for (int64_t a = 0; a < n && !st; a += step) {
            int64_t k = n - a < step ? n - a : step;
            tr->to_float((const char *)t->data + (size_t)(a / tr->blck) * tr->size, buf, k);
            for (int64_t j = 0; j < k; j++)
                if (!isfinite(buf[j])) {
                    st = fail(INFER_ERR_FORMAT, "tensor %s: element %lld is %s: the file's numbers are broken", t->name, (long long)(a + j),
                              isnan(buf[j]) ? "NaN" : buf[j] > 0 ? "+inf" : "-inf");
                    break;
                }
        }
    }
    free(buf);
    return st;
}

// Norm weights, biases, scalars and sinks are tiny and read on every token:
// they are decoded to f32 once. Matrices stay in their stored type.
static infer_status decode_small(infer_model *m) {
    for (int i = 0; i < m->store.n; i++)
        if (m->store.t[i].nd <= 1) TRY(decode_one(&m->store.t[i]));
    if (m->cfg.n_expert)
        for (int il = 0; il < m->cfg.n_layer; il++)
            for (int e = 0; e < m->cfg.n_expert; e++) {
                TRY(decode_one(&m->layers[il].exp_gate_up_b[e]));
                TRY(decode_one(&m->layers[il].exp_down_b[e]));
                TRY(decode_one(&m->layers[il].exp_gate_b[e]));
                TRY(decode_one(&m->layers[il].exp_up_b[e]));
            }
    return INFER_OK;
}

infer_status model_bind(infer_model *m) {
    infer_config *c = &m->cfg;
    const family *f = c->fam;
    int L = c->n_layer, E = c->n_expert;
    int gg = c->from_gguf;
    // What is sized from the header's counts is checked against what the file
    // holds first: every layer needs tensors of its own, and every expert of a
    // layer its rows (a fused tensor's outer dimension counts each expert).
    if (L > m->store.n)
        return fail(INFER_ERR_FORMAT, "%s is %d, but the file holds %d tensors (every layer needs its own)",
                    gg ? "block_count" : "num_hidden_layers", L, m->store.n);
    if (E) {
        uint64_t units = 0;
        for (int i = 0; i < m->store.n; i++) {
            const tensor *t = &m->store.t[i];
            units += t->nd >= 3 ? (uint64_t)t->ne[t->nd - 1] : 1;
        }
        if ((uint64_t)L * E > units + 16384)
            return fail(INFER_ERR_FORMAT, "%s x %s is %d x %d, but the file's tensors hold at most %llu experts' rows",
                        gg ? "block_count" : "num_hidden_layers", gg ? "expert_count" : "num_local_experts", L, E,
                        (unsigned long long)units);
    }
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->layers) return fail(INFER_ERR_NOMEM, "out of memory");
    if (E) {
        // Every expert gets views of the fused tensors: at most 4 arrays per layer.
        m->cap_views = L * E * 4;
        m->views = calloc((size_t)m->cap_views, sizeof *m->views);
        if (!m->views) return fail(INFER_ERR_NOMEM, "out of memory");
        for (int il = 0; il < L; il++) {
            layer_weights *l = &m->layers[il];
            l->exp_gate = calloc((size_t)E, sizeof(weight));
            l->exp_up = calloc((size_t)E, sizeof(weight));
            l->exp_gate_up = calloc((size_t)E, sizeof(weight));
            l->exp_down = calloc((size_t)E, sizeof(weight));
            l->exp_gate_up_b = calloc((size_t)E, sizeof(tensor));
            l->exp_down_b = calloc((size_t)E, sizeof(tensor));
            l->exp_gate_b = calloc((size_t)E, sizeof(tensor));
            l->exp_up_b = calloc((size_t)E, sizeof(tensor));
            if (!l->exp_gate || !l->exp_up || !l->exp_gate_up || !l->exp_down || !l->exp_gate_up_b || !l->exp_down_b ||
                !l->exp_gate_b || !l->exp_up_b)
                return fail(INFER_ERR_NOMEM, "out of memory");
        }
    }
    const name_map *names = gg ? g_gguf_layer_names : g_layer_names;
    size_t n_names = gg ? sizeof g_gguf_layer_names / sizeof g_gguf_layer_names[0] : sizeof g_layer_names / sizeof g_layer_names[0];
    int trans = gg ? 0 : f->conv1d; // GGUF stores GPT-2's matrices [out, in]
    for (int i = 0; i < m->store.n; i++) {
        const tensor *t = &m->store.t[i];
        const char *rest;
        int il = gg ? split_gguf_layer(t->name, &rest) : split_layer(t->name, &rest);
        int taken = 0;
        if (il >= 0) {
            if (il >= L)
                return fail(INFER_ERR_FORMAT, "tensor %s: layer %d, but the config has %d layers (%s)", t->name, il, L,
                            gg ? "block_count" : "num_hidden_layers");
            layer_weights *l = &m->layers[il];
            if (!gg && !strcmp(rest, "post_attention_layernorm.weight")) {
                if (f->post_norms) l->post_attn_norm = t;
                else l->ffn_norm = t;
                continue;
            }
            for (size_t k = 0; k < n_names; k++) {
                if (strcmp(rest, names[k].suffix)) continue;
                char *slot = (char *)l + names[k].off;
                // Both kinds of slot start with the tensor pointer.
                if (*(const tensor **)slot)
                    return fail(INFER_ERR_FORMAT, "tensor %s: layer %d already has its %s from %s", t->name, il,
                                names[k].suffix, (*(const tensor **)slot)->name);
                if (names[k].kind == S_TENSOR) *(const tensor **)slot = t;
                else { ((weight *)slot)->w = t; ((weight *)slot)->trans = trans; }
                taken = 1;
                break;
            }
            if (!taken) TRY(gg ? gguf_expert_slot(m, l, rest, t, &taken) : expert_slot(m, l, rest, t, &taken));
        } else if (gg) {
            const char *s = t->name;
            taken = 1;
            if (!strcmp(s, "token_embd.weight")) m->tok_embd = t;
            else if (!strcmp(s, "position_embd.weight")) m->pos_embd = t;
            else if (!strcmp(s, "output_norm.weight")) m->output_norm = t;
            else if (!strcmp(s, "output_norm.bias")) m->output_norm_b = t;
            else if (!strcmp(s, "output.weight")) m->output.w = t;
            else if (!strcmp(s, "per_layer_token_embd.weight")) m->ple_embd = t;
            else if (!strcmp(s, "per_layer_model_proj.weight")) m->ple_model_proj.w = t;
            else if (!strcmp(s, "per_layer_proj_norm.weight")) m->ple_proj_norm = t;
            else if (!strcmp(s, "rope_freqs.weight")) {} // read into the config's rope tables
            else taken = 0;
        } else {
            const char *s = strip_prefix(t->name);
            taken = 1;
            if (!strcmp(s, "embed_tokens.weight") || !strcmp(s, "wte.weight")) m->tok_embd = t;
            else if (!strcmp(s, "wpe.weight") || !strcmp(s, "embeddings.position_embeddings.weight")) m->pos_embd = t;
            else if (!strcmp(s, "embeddings.word_embeddings.weight")) m->tok_embd = t;
            else if (!strcmp(s, "embeddings.token_type_embeddings.weight")) m->type_embd = t;
            else if (!strcmp(s, "embeddings.LayerNorm.weight")) m->embd_norm = t;
            else if (!strcmp(s, "embeddings.LayerNorm.bias")) m->embd_norm_b = t;
            else if (!strcmp(s, "norm.weight") || !strcmp(s, "ln_f.weight")) m->output_norm = t;
            else if (!strcmp(s, "norm.bias") || !strcmp(s, "ln_f.bias")) m->output_norm_b = t;
            else if (!strcmp(s, "lm_head.weight")) m->output.w = t;
            else if (!strcmp(s, "embed_tokens_per_layer.weight")) m->ple_embd = t;
            else if (!strcmp(s, "per_layer_model_projection.weight")) m->ple_model_proj.w = t;
            else if (!strcmp(s, "per_layer_projection_norm.weight")) m->ple_proj_norm = t;
            else taken = 0;
        }
        if (!taken) m->n_unused++;
    }
    for (int il = 0; il < L && gg; il++) {
        layer_weights *l = &m->layers[il];
        // llama.cpp's gpt-oss calls its pre-FFN norm post_attention_norm.
        if (!f->post_norms && l->post_attn_norm && !l->ffn_norm) {
            l->ffn_norm = l->post_attn_norm;
            l->post_attn_norm = NULL;
        }
    }
    // llama.cpp's Phi-3 keeps the fused [gate; up] rows in ffn_up.
    if (gg && f->ffn == FFN_GATED)
        for (int il = 0; il < L; il++) {
            layer_weights *l = &m->layers[il];
            if (!l->ffn_gate.w && l->ffn_up.w && l->ffn_up.w->nd == 2 && l->ffn_up.w->ne[1] == 2 * (int64_t)c->n_ff) {
                l->ffn_gate_up = l->ffn_up;
                l->ffn_up.w = NULL;
            }
        }
    if (!m->output.w) m->output.w = m->tok_embd; // tied embeddings
    TRY(check_model(m));
    for (int i = 0; i < m->store.n; i++) {
        int t = m->store.t[i].type;
        if (m->store.t[i].nd >= 2 && t >= 0 && t != DT_F32 && t != DT_F16 && t != DT_BF16) m->ggml_numerics = 1;
    }
    return decode_small(m);
}

// A GGUF file's products follow ggml's numerics (weight.ggml): its bf16
// weights meet bf16 activations, as in llama.cpp. INFER_BF16_EXACT=1 keeps
// f32 activations (as a safetensors checkpoint's: exact, slower).
static int ggml_weights(const infer_model *m) {
    const char *e = getenv("INFER_BF16_EXACT");
    return m->gguf && !(e && *e && *e != '0');
}

// Repacks the 2-D weights whose type the CPU's packed kernels take (pack.h):
// the products then read the copies; the mapped tensors stay for everything
// else (embedding rows, the vindex). A tensor used by two slots is packed once.
static infer_status pack_one(infer_model *m, weight *w) {
    const tensor *t = w->w;
    if (!t || w->trans || t->nd != 2 || t->type < 0) return INFER_OK;
    int kind = pack_kind_for(t->type, t->ne[0]);
    if (kind == PACK_BF16 && !w->ggml) kind = PACK_NONE; // (bf16 activations: a GGUF file's numerics only)
    if (!kind) return INFER_OK;
    for (int i = 0; i < m->n_packs; i++) // (packs are made in slot order: look for the same tensor's)
        if (m->packs[i] && *(const tensor **)m->packs[i] == t) {
            w->pack_kind = kind, w->pack = (const char *)m->packs[i] + 64;
            return INFER_OK;
        }
    size_t bytes = pack_bytes(kind, t->ne[1], t->ne[0]);
    void **np = realloc(m->packs, sizeof *np * (size_t)(m->n_packs + 1));
    if (!np) return fail(INFER_ERR_NOMEM, "out of memory packing %s", t->name);
    m->packs = np;
    // 64 bytes of header (the tensor it packs, for sharing), then the records; a large one at a 2 MiB
    // boundary, in huge pages where the kernel gives them on request (THP "madvise": a decode step reads every
    // weight once, and 4 KiB pages cost a TLB miss each 4 KiB)
    const size_t all = (64 + bytes + 63) & ~(size_t)63, huge = (size_t)1 << 21;
    char *p = NULL;
    if (all >= 2 * huge) {
        void *q = NULL;
        if (!posix_memalign(&q, huge, all)) p = q, madvise(p, all & ~(huge - 1), MADV_HUGEPAGE);
    } else
        p = aligned_alloc(64, all);
    if (!p) return fail(INFER_ERR_NOMEM, "out of memory packing %s (%zu bytes)", t->name, bytes);
    memcpy(p, &t, sizeof t);
    m->packs[m->n_packs++] = p;
    // The products read the copy: the mapped pages go back to the kernel as
    // each slice of rows is packed (a later use of the tensor, an embedding
    // row, maps its pages in again), so the load holds little more than the copy.
    int mapped = m->gguf && mapfile_holds(&m->gguf->map, t->data, t->nbytes);
    for (int f = 0; f < m->store.n_files && !mapped; f++) mapped = mapfile_holds(&m->store.files[f], t->data, t->nbytes);
    const int64_t rows = t->ne[1], slice = 8192; // (a multiple of 8: slices are whole groups)
    const size_t rs = dtype_row_size(t->type, t->ne[0]);
    for (int64_t r = 0; r < rows; r += slice) {
        int64_t nr = rows - r < slice ? rows - r : slice;
        const char *src = (const char *)t->data + rs * (size_t)r;
        pack_rows(kind, src, nr, t->ne[0], p + 64 + pack_bytes(kind, r, t->ne[0]));
        if (mapped) map_drop_pages(src, rs * (size_t)nr);
    }
    w->pack_kind = kind, w->pack = p + 64;
    return INFER_OK;
}

// The slots' weights, for each of them f(m, w) (experts' too where all)
static infer_status each_weight(infer_model *m, int experts, infer_status (*f)(infer_model *, weight *)) {
    for (int il = 0; il < m->cfg.n_layer; il++) {
        layer_weights *l = &m->layers[il];
        weight *ex[] = {l->exp_gate, l->exp_up, l->exp_gate_up, l->exp_down};
        for (int k = 0; k < 4 && experts; k++)
            for (int e = 0; ex[k] && e < m->cfg.n_expert; e++) TRY(f(m, &ex[k][e]));
        weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wqkv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->ffn_gate_up,
                        &l->ple_gate, &l->ple_proj};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) TRY(f(m, ws[i]));
    }
    TRY(f(m, &m->output));
    return f(m, &m->ple_model_proj);
}

static infer_status set_numerics(infer_model *m, weight *w) {
    w->ggml = ggml_weights(m);
    return INFER_OK;
}

infer_status model_pack(infer_model *m) { return each_weight(m, 1, set_numerics); }

// (packed on first use, once: a model that only runs on a GPU never makes
// the copies, whose memory and time are those of the weights themselves)
infer_status model_ensure_packed(infer_model *m) {
    if (__atomic_load_n(&m->packed, __ATOMIC_ACQUIRE)) return INFER_OK;
    pthread_mutex_lock(&m->lazy_mu);
    infer_status st = INFER_OK;
    if (!m->packed) {
        st = each_weight(m, 0, pack_one);
        if (!st) __atomic_store_n(&m->packed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&m->lazy_mu);
    return st;
}
