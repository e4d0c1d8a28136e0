// HF model -> GGUF, following convert_hf_to_gguf.py (llama.cpp's conversion/
// folder) in what it writes:
//   - general.architecture and "<arch>.*" hyperparameters (TextModel and the
//     per-model set_gguf_parameters);
//   - tensor names of gguf-py's constants.py (token_embd, blk.N.attn_q, ...);
//   - Q/K rows permuted from rotate_half order to adjacent pairs for the archs
//     llama.cpp runs with "normal" RoPE (LlamaModel.permute: llama, mistral,
//     mixtral, granite), so the same rotation happens on the same values;
//   - Gemma 2/3 norm weights stored as 1 + w;
//   - GPT-2 Conv1D and gpt-oss expert matrices transposed to [out, in];
//     gpt-oss's interleaved gate_up split into ffn_gate_exps / ffn_up_exps;
//     per-expert matrices stacked into 3-D ffn_*_exps tensors;
//   - gpt-oss's pre-FFN norm named post_attention_norm, as llama.cpp names it;
//   - llama3 RoPE scaling as rope_freqs.weight factors; Gemma 4's proportional
//     RoPE as rope_freqs with 1e30 for the pairs that do not turn.
// The model's slots (weights.c) are the source, so every family we load
// converts without a second name table for Hugging Face names.
#include "models/gguf_convert.h"
#include "models/gguf_write.h"
#include "tensor/dtype.h"
#include "models/quant_mix.h"
#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gguf_arch_of(const char *model_type) {
    const family *f = family_find(model_type);
    return f ? f->gguf_arch : NULL;
}

// ---------------------------------------------------------------------------
// Row sources: output row r of a tensor being written, in float.

typedef struct {
    weight *w;            // one source per expert (n_w), or one
    int n_w;
    int64_t rows_per;     // output rows per expert
    int64_t cols;         // output row length
    int64_t stride, off;  // output row (or element) i reads source row (column, element) i * stride + off
    int perm_hd;          // > 0: rows (elements) go from rotate_half order to adjacent pairs, per head of this size
    float add;            // added to every value (Gemma's 1 + w)
    float *values;        // precomputed rows (owned), or NULL
    float *cache;         // a decoded source tensor (trans matrices and vectors)
    int cache_e;
    const tensor_store *store; // the model's: its fill makes a declared tensor's bytes
    void *made;           // ... into this (owned), for made_t while its rows are read
    const tensor *made_t;
} rows_src;

// Rotate-half order -> adjacent pairs (LlamaModel.permute): output index
// 2i + j of a head reads input index j * hd/2 + i.
static int64_t perm_index(int64_t r, int hd) {
    int64_t h = r / hd, o = r % hd;
    return h * hd + (o % 2) * (hd / 2) + o / 2;
}

static void decode_row(const tensor *t, const void *data, int64_t row, float *out) {
    const dtype_traits *tr = dtype_get(t->type);
    size_t rs = dtype_row_size(t->type, t->ne[0]);
    tr->to_float((const char *)data + rs * (size_t)row, out, t->ne[0]);
}

// The bytes of source tensor t: where it is mapped or, declared without bytes
// (infer_model_spec), made by the store's fill, one tensor at a time: held
// until its last row is read, so memory holds one source tensor, never the model.
static infer_status src_bytes(rows_src *s, const tensor *t, const void **out) {
    if (t->data) { *out = t->data; return INFER_OK; }
    if (s->made_t != t) {
        free(s->made);
        s->made_t = NULL;
        if (!s->store->fill) return fail(INFER_ERR_FORMAT, "tensor %s: no bytes", t->name);
        if (!(s->made = malloc(t->nbytes ? t->nbytes : 1)))
            return fail(INFER_ERR_NOMEM, "tensor %s: out of memory for its %zu bytes", t->name, t->nbytes);
        if (s->store->fill(s->store->fill_user, t->name, s->made, t->nbytes))
            return fail(INFER_ERR_IO, "tensor %s: its values could not be made", t->name);
        s->made_t = t;
    }
    *out = s->made;
    return INFER_OK;
}

static void drop_made(rows_src *s) {
    free(s->made);
    s->made = NULL, s->made_t = NULL;
}

static infer_status src_row(void *u, int64_t r, float *out) {
    rows_src *s = u;
    if (s->values) {
        memcpy(out, s->values + r * s->cols, sizeof(float) * (size_t)s->cols);
        return INFER_OK;
    }
    int64_t e = r / s->rows_per, rr = r % s->rows_per;
    const weight *w = &s->w[s->n_w > 1 ? e : 0];
    const tensor *t = w->w;
    const void *data;
    if (t->nd >= 2 && !w->trans) {
        int64_t sr = (s->perm_hd ? perm_index(rr, s->perm_hd) : rr) * s->stride + s->off;
        infer_status st = src_bytes(s, t, &data);
        if (st) return st;
        decode_row(t, data, sr, out);
        if (rr == s->rows_per - 1) drop_made(s);
    } else {
        if (!s->cache || s->cache_e != e) {
            free(s->cache);
            s->cache = malloc(sizeof(float) * (size_t)tensor_nelem(t));
            if (!s->cache) return fail(INFER_ERR_NOMEM, "tensor %s: out of memory", t->name);
            infer_status st = src_bytes(s, t, &data);
            if (st) return st;
            dtype_get(t->type)->to_float(data, s->cache, tensor_nelem(t));
            drop_made(s);
            s->cache_e = (int)e;
        }
        if (t->nd < 2) {
            for (int64_t i = 0; i < s->cols; i++)
                out[i] = s->cache[(s->perm_hd ? perm_index(i, s->perm_hd) : i) * s->stride + s->off];
        } else {
            // stored [in, out]: output row sr is source column sr
            int64_t sr = (s->perm_hd ? perm_index(rr, s->perm_hd) : rr) * s->stride + s->off;
            for (int64_t i = 0; i < s->cols; i++) out[i] = s->cache[i * t->ne[0] + sr];
        }
        if (rr == s->rows_per - 1) { free(s->cache); s->cache = NULL; }
    }
    if (s->add != 0)
        for (int64_t i = 0; i < s->cols; i++) out[i] += s->add;
    return INFER_OK;
}

// ---------------------------------------------------------------------------

typedef struct {
    const infer_model *m;
    gguf_writer *w;
    int type;
    quant_mix *mix;     // a named mix (q4_k_m, ...) picks per tensor; NULL: every matrix is `type`
    gguf_convert_opts o;
    gguf_file *vocab;   // o.vocab_from, opened
    rows_src **srcs;
    int n_srcs, cap_srcs;
    infer_status st;
} conv;

static rows_src *new_src(conv *c, int n_w) {
    if (c->st) return NULL;
    if (c->n_srcs == c->cap_srcs) {
        int cap = c->cap_srcs ? 2 * c->cap_srcs : 256;
        rows_src **p = realloc(c->srcs, sizeof *p * (size_t)cap);
        if (!p) { c->st = fail(INFER_ERR_NOMEM, "out of memory"); return NULL; }
        c->srcs = p;
        c->cap_srcs = cap;
    }
    rows_src *s = calloc(1, sizeof *s);
    weight *w = s ? calloc((size_t)n_w, sizeof *w) : NULL;
    if (!w) { free(s); c->st = fail(INFER_ERR_NOMEM, "out of memory"); return NULL; }
    s->w = w;
    s->n_w = n_w;
    s->stride = 1;
    s->cache_e = -1;
    s->store = &c->m->store;
    c->srcs[c->n_srcs++] = s;
    return s;
}

// llama.cpp's converter keeps 1-D tensors, the router and position embeddings in f32.
static int pick_type(const conv *c, const char *name, int nd, int64_t ne0, int stored) {
    if (nd < 2 || strstr(name, "ffn_gate_inp") || !strcmp(name, "position_embd.weight")) return DT_F32;
    if (c->o.keep_types && (stored == DT_F32 || stored == DT_F16 || stored == DT_BF16)) return stored;
    if (c->mix) return quant_mix_type(c->mix, name, nd, ne0, DT_F32);
    const dtype_traits *tr = dtype_get(c->type);
    if (!tr || !tr->from_float || ne0 % tr->blck) return DT_F16;
    return c->type;
}

static void add_src(conv *c, const char *name, rows_src *s, int nd, int64_t n_exp) {
    if (c->st || !s) return;
    int64_t ne[3] = {s->cols, s->rows_per, n_exp};
    int type = pick_type(c, name, nd, s->cols, s->w[0].w ? s->w[0].w->type : DT_F32);
    c->st = gguf_add_tensor(c->w, name, type, nd, ne, src_row, s);
}

// A plain tensor (matrix or vector) in its output orientation.
static void put_tensor(conv *c, const char *name, const tensor *t, int trans, int perm_hd, float add) {
    if (!t || c->st) return;
    rows_src *s = new_src(c, 1);
    if (!s) return;
    s->w[0].w = t;
    s->w[0].trans = trans;
    s->perm_hd = perm_hd;
    s->add = add;
    if (t->nd < 2) {
        s->rows_per = 1;
        s->cols = tensor_nelem(t);
        add_src(c, name, s, 1, 1);
    } else {
        s->rows_per = trans ? t->ne[0] : t->ne[1];
        s->cols = trans ? t->ne[1] : t->ne[0];
        add_src(c, name, s, 2, 1);
    }
}

static void put_weight(conv *c, const char *name, const weight *w, int perm_hd) {
    if (w->w) put_tensor(c, name, w->w, w->trans, perm_hd, 0);
}

// Stacks one matrix per expert into [E, rows, cols]; stride/off pick every
// stride-th output row (gpt-oss's interleaved gate_up).
static void put_experts(conv *c, const char *name, const weight *ws, int64_t rows, int64_t stride, int64_t off) {
    const infer_config *cf = &c->m->cfg;
    if (c->st || !ws || !ws[0].w) return;
    rows_src *s = new_src(c, cf->n_expert);
    if (!s) return;
    for (int e = 0; e < cf->n_expert; e++) s->w[e] = ws[e];
    const tensor *t = ws[0].w;
    s->rows_per = rows;
    s->cols = ws[0].trans ? t->ne[1] : t->ne[0];
    s->stride = stride;
    s->off = off;
    add_src(c, name, s, 3, cf->n_expert);
}

// Per-expert bias vectors into [E, n].
static void put_expert_bias(conv *c, const char *name, const tensor *bs, int64_t n, int64_t stride, int64_t off) {
    const infer_config *cf = &c->m->cfg;
    if (c->st || !bs || !bs[0].data) return;
    rows_src *s = new_src(c, cf->n_expert);
    if (!s) return;
    for (int e = 0; e < cf->n_expert; e++) s->w[e].w = &bs[e];
    s->rows_per = 1;
    s->cols = n;
    s->stride = stride;
    s->off = off;
    int64_t ne[2] = {n, cf->n_expert};
    c->st = gguf_add_tensor(c->w, name, DT_F32, 2, ne, src_row, s);
}

static void put_values(conv *c, const char *name, float *v, int64_t n) {
    rows_src *s = new_src(c, 1);
    if (!s) { free(v); return; }
    s->values = v;
    s->rows_per = 1;
    s->cols = n;
    add_src(c, name, s, 1, 1);
}

// ---------------------------------------------------------------------------
// metadata

#define SET(call) do { if (!c->st) c->st = (call); } while (0)

static const char *key(const char *arch, const char *rest) {
    static _Thread_local char buf[4][160];
    static _Thread_local int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s.%s", arch, rest);
    return buf[k];
}

static void put_rope_params(conv *c, const char *a, const rope_params *r) {
    if (!strcmp(r->type, "linear")) {
        SET(gguf_set_str(c->w, key(a, "rope.scaling.type"), "linear"));
        SET(gguf_set_f32(c->w, key(a, "rope.scaling.factor"), (float)r->factor));
    } else if (!strcmp(r->type, "yarn")) {
        SET(gguf_set_str(c->w, key(a, "rope.scaling.type"), "yarn"));
        SET(gguf_set_f32(c->w, key(a, "rope.scaling.factor"), (float)r->factor));
        SET(gguf_set_u32(c->w, key(a, "rope.scaling.original_context_length"), (uint32_t)r->orig_max_pos));
        SET(gguf_set_f32(c->w, key(a, "rope.scaling.yarn_beta_fast"), (float)r->beta_fast));
        SET(gguf_set_f32(c->w, key(a, "rope.scaling.yarn_beta_slow"), (float)r->beta_slow));
        if (r->attention_factor >= 0) SET(gguf_set_f32(c->w, key(a, "rope.scaling.yarn_attn_factor"), (float)r->attention_factor));
        // Not a llama.cpp key (ggml always truncates the correction range);
        // it keeps transformers' truncate=false for our own loader.
        if (!r->truncate) SET(gguf_set_u32(c->w, key(a, "rope.scaling.yarn_truncate"), 0));
    }
}

static void put_metadata(conv *c, const char *a, const char *name) {
    const infer_config *cf = &c->m->cfg;
    const family *f = cf->fam;
    int L = cf->n_layer;
    int ftype = c->mix ? c->mix->ftype : gguf_ftype_of(c->type);
    SET(gguf_set_str(c->w, "general.architecture", a));
    SET(gguf_set_str(c->w, "general.name", name));
    SET(gguf_set_u32(c->w, "general.file_type", (uint32_t)ftype));
    SET(gguf_set_u32(c->w, key(a, "vocab_size"), (uint32_t)cf->n_vocab));
    SET(gguf_set_u32(c->w, key(a, "context_length"), (uint32_t)cf->n_ctx_train));
    SET(gguf_set_u32(c->w, key(a, "embedding_length"), (uint32_t)cf->n_embd));
    SET(gguf_set_u32(c->w, key(a, "block_count"), (uint32_t)L));
    SET(gguf_set_u32(c->w, key(a, "feed_forward_length"), (uint32_t)cf->n_ff));
    SET(gguf_set_u32(c->w, key(a, "attention.head_count"), (uint32_t)cf->n_head));
    int same_kv = 1, hd_global = cf->head_dim, hd_swa = cf->head_dim, any_swa = 0;
    for (int i = 0; i < L; i++) {
        same_kv &= cf->layers[i].n_kv_head == cf->layers[0].n_kv_head;
        if (cf->layers[i].global) hd_global = cf->layers[i].head_dim;
        else { hd_swa = cf->layers[i].head_dim; any_swa = 1; }
    }
    if (same_kv) {
        SET(gguf_set_u32(c->w, key(a, "attention.head_count_kv"), (uint32_t)cf->layers[0].n_kv_head));
    } else {
        uint32_t *kv = malloc(sizeof *kv * (size_t)L);
        if (!kv) { c->st = fail(INFER_ERR_NOMEM, "out of memory"); return; }
        for (int i = 0; i < L; i++) kv[i] = (uint32_t)cf->layers[i].n_kv_head;
        SET(gguf_set_arr(c->w, key(a, "attention.head_count_kv"), GGUF_U32, kv, (uint64_t)L));
        free(kv);
    }
    if (!(f->quirks & Q_NO_KEY_LENGTH)) {
        SET(gguf_set_u32(c->w, key(a, "attention.key_length"), (uint32_t)hd_global));
        SET(gguf_set_u32(c->w, key(a, "attention.value_length"), (uint32_t)hd_global));
    }
    if (f->norm == NORM_RMS) SET(gguf_set_f32(c->w, key(a, "attention.layer_norm_rms_epsilon"), (float)cf->norm_eps));
    else SET(gguf_set_f32(c->w, key(a, "attention.layer_norm_epsilon"), (float)cf->norm_eps));

    // RoPE
    if (!f->learned_pos) {
        const rope_params *rg = &cf->rope_global, *rl = &cf->rope_local;
        int gemma4 = (f->quirks & Q_ROT_SWA_FULL) != 0; // sliding layers with their own head size
        int n_rot = gemma4 ? hd_global : (int)(hd_global * rg->partial);
        SET(gguf_set_u32(c->w, key(a, "rope.dimension_count"), (uint32_t)n_rot));
        SET(gguf_set_f32(c->w, key(a, "rope.freq_base"), (float)rg->theta));
        if (any_swa && rl->theta != rg->theta) SET(gguf_set_f32(c->w, key(a, "rope.freq_base_swa"), (float)rl->theta));
        if (gemma4) {
            SET(gguf_set_u32(c->w, key(a, "attention.key_length_swa"), (uint32_t)hd_swa));
            SET(gguf_set_u32(c->w, key(a, "attention.value_length_swa"), (uint32_t)hd_swa));
            SET(gguf_set_u32(c->w, key(a, "rope.dimension_count_swa"), (uint32_t)(hd_swa * rl->partial)));
        } else {
            put_rope_params(c, a, rg);
        }
    }
    // Sliding window: the window and, for archs that mix layer types, which layers slide.
    if (cf->sliding_window && any_swa) {
        SET(gguf_set_u32(c->w, key(a, "attention.sliding_window"), (uint32_t)cf->sliding_window));
        int all = 1;
        for (int i = 0; i < L; i++) all &= !cf->layers[i].global;
        if (!all) {
            unsigned char *b = malloc((size_t)L);
            if (!b) { c->st = fail(INFER_ERR_NOMEM, "out of memory"); return; }
            for (int i = 0; i < L; i++) b[i] = !cf->layers[i].global;
            SET(gguf_set_arr(c->w, key(a, "attention.sliding_window_pattern"), GGUF_BOOL, b, (uint64_t)L));
            free(b);
        }
    }
    if (f->quirks & Q_ROPE_ORIG_CTX) {
        // Phi3MiniModel: always an original context and a window (0: none)
        double orig = cf->rope_global.orig_max_pos > 0 ? cf->rope_global.orig_max_pos : cf->n_ctx_train;
        SET(gguf_set_u32(c->w, key(a, "rope.scaling.original_context_length"), (uint32_t)orig));
        SET(gguf_set_u32(c->w, key(a, "attention.sliding_window"), (uint32_t)cf->sliding_window));
    }
    // llama.cpp defaults the caps to 50 / 30 when the keys are absent (gemma2
    // both, gemma4 the final one), so a model without them says 0.
    int caps_default = (f->quirks & (Q_ATTN_CAP_50 | Q_FINAL_CAP_30)) != 0;
    if (cf->attn_softcap || f->quirks & Q_ATTN_CAP_50) SET(gguf_set_f32(c->w, key(a, "attn_logit_softcapping"), cf->attn_softcap));
    if (cf->final_softcap || caps_default) SET(gguf_set_f32(c->w, key(a, "final_logit_softcapping"), cf->final_softcap));
    if (f->quirks & Q_LOGIT_MUL) SET(gguf_set_f32(c->w, key(a, "logit_scale"), cf->logit_scale));
    if (f->quirks & Q_GRANITE_SCALES) {
        if (cf->attn_scale) SET(gguf_set_f32(c->w, key(a, "attention.scale"), cf->attn_scale));
        SET(gguf_set_f32(c->w, key(a, "embedding_scale"), cf->embed_scale));
        SET(gguf_set_f32(c->w, key(a, "residual_scale"), cf->residual_scale));
        SET(gguf_set_f32(c->w, key(a, "logit_scale"), 1.0f / cf->logit_scale));
    }
    if (cf->n_expert) {
        SET(gguf_set_u32(c->w, key(a, "expert_count"), (uint32_t)cf->n_expert));
        SET(gguf_set_u32(c->w, key(a, "expert_used_count"), (uint32_t)cf->n_expert_used));
        if (!(f->quirks & Q_EXPERT_FF_IS_FF)) SET(gguf_set_u32(c->w, key(a, "expert_feed_forward_length"), (uint32_t)cf->n_ff_expert));
        // llama.cpp renormalizes the top-k for llama and qwen3moe regardless;
        // this records transformers' norm_topk_prob for loaders that read it.
        if (f->moe == MOE_SOFTMAX_TOPK) SET(gguf_set_bool(c->w, key(a, "expert_weights_norm"), cf->moe_norm_topk));
    }
    if (f->v_norm) {
        SET(gguf_set_u32(c->w, key(a, "embedding_length_per_layer_input"), (uint32_t)cf->ple_dim));
        SET(gguf_set_u32(c->w, key(a, "attention.shared_kv_layers"), (uint32_t)cf->n_kv_shared));
    }
    if (c->vocab) { // another GGUF's vocabulary: its tokenizer.* keys as they are
        for (uint64_t i = 0; i < c->vocab->n_kv; i++)
            if (!strncmp(c->vocab->keys[i], "tokenizer.", 10)) SET(gguf_set_value(c->w, c->vocab->keys[i], &c->vocab->vals[i]));
        return;
    }
    // No vocabulary yet: convert_hf_to_gguf.py's _set_vocab_none. llama.cpp
    // then makes <arch>.vocab_size dummy tokens, so token ids still work.
    SET(gguf_set_str(c->w, "tokenizer.ggml.model", "none"));
    if (cf->bos >= 0) SET(gguf_set_u32(c->w, "tokenizer.ggml.bos_token_id", (uint32_t)cf->bos));
    if (cf->n_eos) SET(gguf_set_u32(c->w, "tokenizer.ggml.eos_token_id", (uint32_t)cf->eos[0]));
}

// ---------------------------------------------------------------------------
// tensors

// llama3 RoPE as llama.cpp wants it: factors that divide base^(-2i/d)
// (LlamaModel.generate_extra_tensors).
static void put_rope_freqs(conv *c, const char *a) {
    const infer_config *cf = &c->m->cfg;
    const rope_params *r = &cf->rope_global;
    if (!strcmp(r->type, "llama3")) {
        int dim = (int)(cf->head_dim * r->partial), n = dim / 2;
        float *v = malloc(sizeof(float) * (size_t)n);
        if (!v) { c->st = fail(INFER_ERR_NOMEM, "out of memory"); return; }
        double lo_wl = r->orig_max_pos / r->low_freq_factor, hi_wl = r->orig_max_pos / r->high_freq_factor;
        for (int i = 0; i < n; i++) {
            float freq = 1.0f / powf((float)r->theta, (float)(2 * i) / (float)dim);
            double wl = 2 * M_PI / freq;
            if (wl < hi_wl) v[i] = 1;
            else if (wl > lo_wl) v[i] = (float)r->factor;
            else {
                double smooth = (r->orig_max_pos / wl - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
                v[i] = (float)(1 / ((1 - smooth) / r->factor + smooth));
            }
        }
        put_values(c, "rope_freqs.weight", v, n);
    } else if (cf->fam->quirks & Q_PROPORTIONAL_ROPE && !strcmp(r->type, "proportional")) {
        int hd = cf->head_dim;
        for (int i = 0; i < cf->n_layer; i++) if (cf->layers[i].global) hd = cf->layers[i].head_dim;
        int n = hd / 2, n_rot = (int)(hd * r->partial / 2);
        float *v = malloc(sizeof(float) * (size_t)n);
        if (!v) { c->st = fail(INFER_ERR_NOMEM, "out of memory"); return; }
        for (int i = 0; i < n; i++) v[i] = i < n_rot ? (float)r->factor : 1e30f;
        put_values(c, "rope_freqs.weight", v, n);
    }
}

static void put_layer(conv *c, int il, int rope_normal) {
    const infer_model *m = c->m;
    const infer_config *cf = &m->cfg;
    const layer_weights *l = &m->layers[il];
    const layer_config *lc = &cf->layers[il];
    float one = cf->norm_plus_one ? 1.0f : 0.0f; // Gemma: store 1 + w
    int hd = rope_normal ? lc->head_dim : 0;
    char n[GGUF_MAX_NAME];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    put_tensor(c, NM("attn_norm.weight"), l->attn_norm, 0, 0, one);
    put_tensor(c, NM("attn_norm.bias"), l->attn_norm_b, 0, 0, 0);
    put_weight(c, NM("attn_qkv.weight"), &l->wqkv, 0);
    put_tensor(c, NM("attn_qkv.bias"), l->bqkv, 0, 0, 0);
    put_weight(c, NM("attn_q.weight"), &l->wq, hd);
    put_weight(c, NM("attn_k.weight"), &l->wk, hd);
    put_weight(c, NM("attn_v.weight"), &l->wv, 0);
    put_tensor(c, NM("attn_q.bias"), l->bq, 0, hd, 0);
    put_tensor(c, NM("attn_k.bias"), l->bk, 0, hd, 0);
    put_tensor(c, NM("attn_v.bias"), l->bv, 0, 0, 0);
    put_weight(c, NM("attn_output.weight"), &l->wo, 0);
    put_tensor(c, NM("attn_output.bias"), l->bo, 0, 0, 0);
    put_tensor(c, NM("attn_q_norm.weight"), l->q_norm, 0, 0, one);
    put_tensor(c, NM("attn_k_norm.weight"), l->k_norm, 0, 0, one);
    put_tensor(c, NM("attn_sinks.weight"), l->sinks, 0, 0, 0);
    put_tensor(c, NM("post_attention_norm.weight"), l->post_attn_norm, 0, 0, one);
    // gpt-oss's pre-FFN norm is llama.cpp's ATTN_POST_NORM (openai-moe.cpp)
    put_tensor(c, cf->fam->ffn == FFN_OSS ? NM("post_attention_norm.weight") : NM("ffn_norm.weight"), l->ffn_norm, 0, 0, one);
    put_tensor(c, NM("ffn_norm.bias"), l->ffn_norm_b, 0, 0, 0);
    put_tensor(c, NM("post_ffw_norm.weight"), l->post_ffn_norm, 0, 0, one);
    if (!c->o.skip_ffn) {
        put_weight(c, NM("ffn_gate.weight"), &l->ffn_gate, 0);
        put_weight(c, NM("ffn_up.weight"), l->ffn_gate_up.w ? &l->ffn_gate_up : &l->ffn_up, 0); // Phi-3: fused [gate; up]
    }
    put_tensor(c, NM("ffn_up.bias"), l->ffn_up_b, 0, 0, 0);
    if (!c->o.skip_ffn) put_weight(c, NM("ffn_down.weight"), &l->ffn_down, 0);
    put_tensor(c, NM("ffn_down.bias"), l->ffn_down_b, 0, 0, 0);
    put_tensor(c, NM("ffn_gate_inp.weight"), l->router, 0, 0, 0);
    put_tensor(c, NM("ffn_gate_inp.bias"), l->router_b, 0, 0, 0);
    if (cf->n_expert) {
        int64_t F = cf->n_ff_expert, E = cf->n_embd;
        if (cf->fam->ffn == FFN_OSS && l->exp_gate_up[0].w) {
            // gpt-oss: even rows of gate_up are the gate, odd rows the up projection
            put_experts(c, NM("ffn_gate_exps.weight"), l->exp_gate_up, F, 2, 0);
            put_experts(c, NM("ffn_up_exps.weight"), l->exp_gate_up, F, 2, 1);
            put_expert_bias(c, NM("ffn_gate_exps.bias"), l->exp_gate_up_b, F, 2, 0);
            put_expert_bias(c, NM("ffn_up_exps.bias"), l->exp_gate_up_b, F, 2, 1);
        } else if (l->exp_gate_up[0].w) {
            put_experts(c, NM("ffn_gate_up_exps.weight"), l->exp_gate_up, 2 * F, 1, 0);
        } else {
            put_experts(c, NM("ffn_gate_exps.weight"), l->exp_gate, F, 1, 0);
            put_experts(c, NM("ffn_up_exps.weight"), l->exp_up, F, 1, 0);
            put_expert_bias(c, NM("ffn_gate_exps.bias"), l->exp_gate_b, F, 1, 0);
            put_expert_bias(c, NM("ffn_up_exps.bias"), l->exp_up_b, F, 1, 0);
        }
        put_experts(c, NM("ffn_down_exps.weight"), l->exp_down, E, 1, 0);
        put_expert_bias(c, NM("ffn_down_exps.bias"), l->exp_down_b, E, 1, 0);
    }
    put_tensor(c, NM("layer_output_scale.weight"), l->layer_scalar, 0, 0, 0);
    put_weight(c, NM("inp_gate.weight"), &l->ple_gate, 0);
    put_weight(c, NM("proj.weight"), &l->ple_proj, 0);
    put_tensor(c, NM("post_norm.weight"), l->ple_norm, 0, 0, one);
#undef NM
}

static infer_status convert(const infer_model *m, const char *out_path, int type, quant_mix *mix, const gguf_convert_opts *o) {
    const infer_config *cf = &m->cfg;
    const char *a = gguf_arch_of(cf->model_type);
    if (!a) return fail(INFER_ERR_UNSUPPORTED, "convert: no GGUF architecture for model type \"%s\"", cf->model_type);
    if (cf->from_gguf) return fail(INFER_ERR_UNSUPPORTED, "convert: the source is already a GGUF file");
    const dtype_traits *tr = dtype_get(type);
    if (!tr || !tr->from_float) return fail(INFER_ERR_UNSUPPORTED, "convert: no encoder for type %d yet", type);
    conv c = {m, gguf_writer_new(), type, mix, {0}, NULL, NULL, 0, 0, INFER_OK};
    if (!c.w) return fail(INFER_ERR_NOMEM, "out of memory");
    if (o) c.o = *o;
    if (c.o.skip_ffn && cf->n_expert) { gguf_writer_free(c.w); return fail(INFER_ERR_UNSUPPORTED, "convert: leaving out the FFN of a mixture of experts"); }
    if (c.o.vocab_from) {
        const gguf_value *tok;
        if ((c.st = gguf_open(&c.vocab, c.o.vocab_from)) == INFER_OK &&
            (c.st = gguf_get_arr(c.vocab, "tokenizer.ggml.tokens", GGUF_STRING, &tok)) == INFER_OK && tok->n != (uint64_t)cf->n_vocab)
            c.st = fail(INFER_ERR_ARG, "convert: %s has a vocabulary of %llu tokens, the model %d", c.o.vocab_from,
                        (unsigned long long)tok->n, cf->n_vocab);
        if (c.st) {
            gguf_close(c.vocab);
            gguf_writer_free(c.w);
            return c.st;
        }
    }

    const char *base = strrchr(m->path, '/');
    base = base && base[1] ? base + 1 : m->path;
    put_metadata(&c, a, base);
    // llama.cpp turns adjacent pairs: rotate_half checkpoints get their Q/K rows permuted
    int rope_normal = cf->fam->rope_normal && !cf->fam->rope_pairs;

    if (!c.o.skip_tok_embd) put_tensor(&c, "token_embd.weight", m->tok_embd, 0, 0, 0);
    put_tensor(&c, "position_embd.weight", m->pos_embd, 0, 0, 0);
    if (!c.st) put_rope_freqs(&c, a);
    put_tensor(&c, "per_layer_token_embd.weight", m->ple_embd, 0, 0, 0);
    put_weight(&c, "per_layer_model_proj.weight", &m->ple_model_proj, 0);
    put_tensor(&c, "per_layer_proj_norm.weight", m->ple_proj_norm, 0, 0, cf->norm_plus_one ? 1.0f : 0.0f);
    for (int il = 0; il < cf->n_layer && !c.st; il++) put_layer(&c, il, rope_normal);
    put_tensor(&c, "output_norm.weight", m->output_norm, 0, 0, cf->norm_plus_one ? 1.0f : 0.0f);
    put_tensor(&c, "output_norm.bias", m->output_norm_b, 0, 0, 0);
    if (m->output.w && m->output.w != m->tok_embd) put_weight(&c, "output.weight", &m->output, 0);

    if (!c.st) c.st = gguf_write_file(c.w, out_path);
    for (int i = 0; i < c.n_srcs; i++) {
        free(c.srcs[i]->w);
        free(c.srcs[i]->values);
        free(c.srcs[i]->cache);
        free(c.srcs[i]->made);
        free(c.srcs[i]);
    }
    free(c.srcs);
    gguf_writer_free(c.w);
    gguf_close(c.vocab);
    return c.st;
}

infer_status gguf_convert(const infer_model *m, const char *out_path, int type) { return convert(m, out_path, type, NULL, NULL); }

infer_status gguf_convert_part(const infer_model *m, const char *out_path, const gguf_convert_opts *o) {
    return convert(m, out_path, DT_F16, NULL, o);
}

infer_status gguf_convert_mix_vocab(const infer_model *m, const char *out_path, const char *mix_name, const char *vocab_from) {
    quant_mix mix;
    int tied = !m->output.w || m->output.w == m->tok_embd;
    if (!quant_mix_init(&mix, mix_name, m->cfg.n_layer, m->cfg.n_expert, tied))
        return fail(INFER_ERR_ARG, "convert: unknown type \"%s\" (%s)", mix_name, quant_mix_names());
    gguf_convert_opts o = {.vocab_from = vocab_from};
    return convert(m, out_path, mix.base, &mix, &o);
}

infer_status gguf_convert_mix(const infer_model *m, const char *out_path, const char *mix_name) {
    return gguf_convert_mix_vocab(m, out_path, mix_name, NULL);
}
