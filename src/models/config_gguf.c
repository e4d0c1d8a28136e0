// GGUF metadata -> infer_config, with llama.cpp's key names and conventions
// (src/llama-model.cpp load_hparams and the per-arch load_arch_hparams):
//   - "<arch>.context_length", ".embedding_length", ".block_count",
//     ".feed_forward_length" and ".attention.head_count(_kv)" (a number or a
//     per-layer array), ".attention.key_length(_swa)", ".rope.dimension_count(_swa)",
//     ".rope.freq_base(_swa)", ".rope.scaling.*", norm epsilons, softcaps,
//     Granite's scales, expert counts, sliding window and its pattern;
//   - RoPE mode per arch as llama_model_rope_type(): "normal" (adjacent pairs)
//     for llama and granite, whose Q/K rows convert_hf_to_gguf.py permutes;
//     NEOX (rotate_half) for the others;
//   - Gemma norm weights already hold 1 + w; GPT-2 matrices are stored [out, in];
//   - rope_freqs.weight divides the frequencies (llama3 scaling, Gemma 4's
//     proportional RoPE on global layers).
#include "models/config.h"
#include "models/gguf.h"
#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 4096
#define MAX_DIM (1 << 20)
#define MAX_ROPE_ALL (1 << 22) // layers x head dimension (config.c)


typedef struct {
    const gguf_file *g;
    const char *arch;
    infer_status st;
} kctx;

// "<arch>.<rest>"
static const char *K(kctx *c, const char *rest) {
    static _Thread_local char buf[2][160];
    static _Thread_local int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s.%s", c->arch, rest);
    return buf[k];
}

static int has(kctx *c, const char *key) { return gguf_find(c->g, key) != NULL; }

static void get_i(kctx *c, const char *key, int64_t lo, int64_t hi, int *out) {
    if (c->st) return;
    int64_t v = *out;
    c->st = gguf_get_int(c->g, key, lo, hi, &v);
    if (!c->st) *out = (int)v;
}

static void get_f(kctx *c, const char *key, double *out) {
    if (c->st) return;
    c->st = gguf_get_f64(c->g, key, out);
    if (!c->st && !isfinite(*out)) c->st = fail(INFER_ERR_FORMAT, "%s: key \"%s\" is not finite", c->g->path, key);
}

static void need(kctx *c, const char *key) {
    if (!c->st && !has(c, key)) c->st = fail(INFER_ERR_FORMAT, "%s: missing key \"%s\"", c->g->path, key);
}

infer_status config_from_gguf(infer_config *cf, const gguf_file *g, const float *rope_freqs, int n_freqs, int64_t n_vocab_tensor) {
    memset(cf, 0, sizeof *cf);
    const char *path = g->path;
    char arch[32] = "";
    if (!gguf_find(g, "general.architecture")) return fail(INFER_ERR_FORMAT, "%s: missing key \"general.architecture\"", path);
    infer_status st = gguf_get_str_copy(g, "general.architecture", arch, sizeof arch);
    if (st) return st;
    if (!family_find_gguf(arch, 0))
        return fail(INFER_ERR_UNSUPPORTED, "%s: GGUF architecture \"%s\" is not supported (supported: %s)", path, arch,
                    family_gguf_list());
    kctx c = {g, arch, INFER_OK};
    int *tmp = NULL;

    cf->from_gguf = 1;
    snprintf(cf->arch_name, sizeof cf->arch_name, "%s", arch);
    snprintf(cf->dtype, sizeof cf->dtype, "gguf");
    need(&c, K(&c, "embedding_length"));
    need(&c, K(&c, "block_count"));
    need(&c, K(&c, "attention.head_count"));
    get_i(&c, K(&c, "embedding_length"), 1, MAX_DIM, &cf->n_embd);
    get_i(&c, K(&c, "block_count"), 1, MAX_LAYERS, &cf->n_layer);
    get_i(&c, K(&c, "expert_count"), 0, 65536, &cf->n_expert);
    if (c.st) return c.st;
    const family *fam = cf->fam = family_find_gguf(arch, cf->n_expert > 0); // Mixtral is llama with experts
    snprintf(cf->model_type, sizeof cf->model_type, "%s", fam->model_type);
    int L = cf->n_layer;

    // Head and FFN counts: a number, or one per layer.
    int *heads = NULL, *kvh = NULL, *ff = NULL;
    tmp = calloc((size_t)L * 3, sizeof *tmp);
    if (!tmp) return fail(INFER_ERR_NOMEM, "out of memory");
    heads = tmp, kvh = tmp + L, ff = tmp + 2 * L;
    int found = 0;
    if (!c.st) c.st = gguf_get_int_or_arr(g, K(&c, "attention.head_count"), L, 1, 65536, heads, &found);
    for (int i = 0; i < L && !c.st; i++) kvh[i] = heads[i];
    if (!c.st) c.st = gguf_get_int_or_arr(g, K(&c, "attention.head_count_kv"), L, 1, 65536, kvh, &found);
    for (int i = 0; i < L && !c.st; i++) ff[i] = 4 * cf->n_embd;
    if (!c.st) c.st = gguf_get_int_or_arr(g, K(&c, "feed_forward_length"), L, 0, MAX_DIM, ff, &found);
    if (c.st) goto out;
    for (int i = 1; i < L; i++)
        if (heads[i] != heads[0] || ff[i] != ff[0]) {
            c.st = fail(INFER_ERR_UNSUPPORTED, "%s: per-layer head counts or FFN sizes that differ are not supported", path);
            goto out;
        }
    cf->n_head = heads[0];
    cf->n_kv_head = kvh[0];
    cf->n_ff = ff[0];

    cf->n_ctx_train = 4096;
    get_i(&c, K(&c, "context_length"), 1, 1 << 30, &cf->n_ctx_train);
    cf->head_dim = cf->n_embd / cf->n_head;
    get_i(&c, K(&c, "attention.key_length"), 1, 65536, &cf->head_dim);
    int v_len = cf->head_dim;
    get_i(&c, K(&c, "attention.value_length"), 1, 65536, &v_len);
    int hd_swa = cf->head_dim;
    get_i(&c, K(&c, "attention.key_length_swa"), 1, 65536, &hd_swa);
    int n_rot = cf->head_dim, n_rot_swa;
    get_i(&c, K(&c, "rope.dimension_count"), 0, 65536, &n_rot);
    n_rot_swa = fam->quirks & Q_ROT_SWA_FULL ? hd_swa : n_rot;
    get_i(&c, K(&c, "rope.dimension_count_swa"), 0, 65536, &n_rot_swa);
    if (c.st) goto out;
    if (v_len != cf->head_dim) {
        c.st = fail(INFER_ERR_UNSUPPORTED, "%s: attention.value_length %d differs from key_length %d", path, v_len, cf->head_dim);
        goto out;
    }

    cf->norm_eps = 1e-5;
    get_f(&c, K(&c, fam->norm == NORM_RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon"), &cf->norm_eps);

    // Vocabulary: the key, else the token list, else the embedding rows.
    int64_t nv = n_vocab_tensor;
    const gguf_value *toks = NULL;
    if (!c.st) c.st = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &toks);
    if (toks) nv = (int64_t)toks->n;
    if (!c.st) c.st = gguf_get_int(g, K(&c, "vocab_size"), 1, 1 << 24, &nv);
    if (c.st) goto out;
    if (nv < 1 || nv > (1 << 24)) { c.st = fail(INFER_ERR_FORMAT, "%s: cannot tell the vocabulary size", path); goto out; }
    cf->n_vocab = (int)nv;

    cf->act = fam->default_act;
    cf->norm_plus_one = 0; // convert_hf_to_gguf.py folds Gemma's 1 + w into the weights
    cf->embed_scale = fam->embed_scale_sqrt ? sqrtf((float)cf->n_embd) : 1.0f;
    cf->residual_scale = 1;
    cf->logit_scale = 1;
    double v;
    v = cf->embed_scale; get_f(&c, K(&c, "embedding_scale"), &v); cf->embed_scale = (float)v;
    v = 1; get_f(&c, K(&c, "residual_scale"), &v); cf->residual_scale = (float)v;
    v = 1; get_f(&c, K(&c, "logit_scale"), &v);
    if (!c.st && v == 0) { c.st = fail(INFER_ERR_FORMAT, "%s: %s must not be 0", path, K(&c, "logit_scale")); goto out; }
    cf->logit_scale = (float)(fam->quirks & Q_LOGIT_MUL ? v : 1.0 / v); // llama.cpp divides the logits by it (Granite)
    v = 0; get_f(&c, K(&c, "attn_logit_softcapping"), &v); cf->attn_softcap = (float)v;
    v = 0; get_f(&c, K(&c, "final_logit_softcapping"), &v); cf->final_softcap = (float)v;
    // llama.cpp's defaults
    if (fam->quirks & Q_ATTN_CAP_50 && !has(&c, K(&c, "attn_logit_softcapping"))) cf->attn_softcap = 50.0f;
    if (fam->quirks & Q_FINAL_CAP_30 && !has(&c, K(&c, "final_logit_softcapping"))) cf->final_softcap = 30.0f;
    get_i(&c, K(&c, "attention.sliding_window"), 0, 1 << 30, &cf->sliding_window);
    if (c.st) goto out;

    cf->attn_bias = fam->ffn == FFN_PLAIN || fam->quirks & Q_QKV_BIAS;
    cf->mlp_bias = fam->ffn == FFN_PLAIN || fam->ffn == FFN_OSS;
    if (fam->moe) {
        get_i(&c, K(&c, "expert_used_count"), 1, 65536, &cf->n_expert_used);
        cf->n_ff_expert = cf->n_ff;
        get_i(&c, K(&c, "expert_feed_forward_length"), 1, MAX_DIM, &cf->n_ff_expert);
        // llama.cpp renormalizes the top-k weights for llama (Mixtral) and qwen3moe;
        // expert_weights_norm (written by infer convert) records transformers' choice.
        cf->moe_norm_topk = fam->moe == MOE_SOFTMAX_TOPK;
        get_i(&c, K(&c, "expert_weights_norm"), 0, 1, &cf->moe_norm_topk);
        if (c.st) goto out;
        if (!cf->n_expert || !cf->n_expert_used || cf->n_expert_used > cf->n_expert ||
            cf->n_expert_used > INFER_MAX_EXPERTS_USED) {
            c.st = fail(INFER_ERR_FORMAT, "%s: experts need %s and %s (at most %d and at most the count)", path,
                        K(&c, "expert_count"), K(&c, "expert_used_count"), INFER_MAX_EXPERTS_USED);
            goto out;
        }
    } else if (cf->n_expert) {
        c.st = fail(INFER_ERR_UNSUPPORTED, "%s: experts in a %s model are not supported", path, arch);
        goto out;
    }
    if (fam->v_norm) {
        get_i(&c, K(&c, "embedding_length_per_layer_input"), 0, MAX_DIM, &cf->ple_dim);
        cf->ple_vocab = cf->n_vocab;
        get_i(&c, K(&c, "attention.shared_kv_layers"), 0, MAX_LAYERS, &cf->n_kv_shared);
    }

    cf->bos = -1;
    get_i(&c, "tokenizer.ggml.bos_token_id", 0, 1 << 30, &cf->bos);
    const char *eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
    for (int i = 0; i < 3 && !c.st; i++) {
        int e = -1;
        get_i(&c, eos_keys[i], 0, 1 << 30, &e);
        int dup = 0;
        for (int j = 0; j < cf->n_eos; j++) dup |= cf->eos[j] == e;
        if (e >= 0 && !dup) cf->eos[cf->n_eos++] = e;
    }
    if (c.st) goto out;

    // RoPE. Global (or all) layers: freq_base and the scaling keys. Sliding
    // layers: freq_base_swa; their scaling is the global one for gemma2 and
    // gpt-oss, none for gemma3/gemma4 (llama.cpp's rope_freq_scale_train_swa).
    double theta = 10000, theta_swa;
    get_f(&c, K(&c, "rope.freq_base"), &theta);
    theta_swa = fam->quirks & Q_SWA_THETA_10K ? 10000 : theta;
    get_f(&c, K(&c, "rope.freq_base_swa"), &theta_swa);
    rope_params *rg = &cf->rope_global, *rl = &cf->rope_local;
    rope_defaults(rg, theta);
    char stype[24] = "none";
    if (!c.st && has(&c, K(&c, "rope.scaling.type"))) c.st = gguf_get_str_copy(g, K(&c, "rope.scaling.type"), stype, sizeof stype);
    double factor = 0;
    get_f(&c, K(&c, "rope.scaling.factor"), &factor);
    if (factor == 0) get_f(&c, K(&c, "rope.scale_linear"), &factor);
    if (c.st) goto out;
    if (factor < 0) { c.st = fail(INFER_ERR_FORMAT, "%s: %s must be positive", path, K(&c, "rope.scaling.factor")); goto out; }
    if (factor == 0) factor = 1;
    if (!strcmp(stype, "none") || (!strcmp(stype, "linear") && factor == 1)) {
        // default
    } else if (!strcmp(stype, "linear")) {
        strcpy(rg->type, "linear");
        rg->factor = factor;
    } else if (!strcmp(stype, "yarn")) {
        strcpy(rg->type, "yarn");
        rg->factor = factor;
        rg->orig_max_pos = cf->n_ctx_train;
        get_f(&c, K(&c, "rope.scaling.original_context_length"), &rg->orig_max_pos);
        get_f(&c, K(&c, "rope.scaling.yarn_beta_fast"), &rg->beta_fast);
        get_f(&c, K(&c, "rope.scaling.yarn_beta_slow"), &rg->beta_slow);
        get_f(&c, K(&c, "rope.scaling.yarn_attn_factor"), &rg->attention_factor);
        rg->truncate = 1; // ggml_rope_yarn_corr_dims floors and ceils
        get_i(&c, K(&c, "rope.scaling.yarn_truncate"), 0, 1, &rg->truncate);
        if (!c.st && !(rg->orig_max_pos > 0)) { c.st = fail(INFER_ERR_FORMAT, "%s: yarn needs an original context length", path); goto out; }
    } else {
        c.st = fail(INFER_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported", path, K(&c, "rope.scaling.type"), stype);
        goto out;
    }
    if (c.st) goto out;
    *rl = *rg;
    rl->theta = theta_swa;
    if (fam->quirks & Q_SWA_THETA_10K) rope_defaults(rl, theta_swa);
    if (!(theta > 0) || !(theta_swa > 0)) { c.st = fail(INFER_ERR_FORMAT, "%s: rope.freq_base must be positive", path); goto out; }

    // Which layers slide: attention.sliding_window_pattern (a period, or one
    // bool per layer), else the arch's default period. llama.cpp's rule for a
    // period n: layer il slides when il % n < n - 1.
    cf->layers = calloc((size_t)L, sizeof *cf->layers);
    if (!cf->layers) { c.st = fail(INFER_ERR_NOMEM, "out of memory"); goto out; }
    int *sliding = heads; // reuse
    int period = fam->quirks & Q_GGUF_NO_SWA_PERIOD ? 0 : fam->swa_period;
    const gguf_value *pat = gguf_find(g, K(&c, "attention.sliding_window_pattern"));
    if (pat && pat->type == GGUF_ARRAY) {
        if (pat->elem_type != GGUF_BOOL || pat->n != (uint64_t)L) {
            c.st = fail(INFER_ERR_FORMAT, "%s: %s must be %d bools or a number", path, K(&c, "attention.sliding_window_pattern"), L);
            goto out;
        }
        for (int i = 0; i < L; i++) sliding[i] = gguf_arr_int(pat, (uint64_t)i) != 0;
        period = -1;
    } else if (pat) {
        get_i(&c, K(&c, "attention.sliding_window_pattern"), 0, MAX_LAYERS, &period);
        if (c.st) goto out;
    }
    if (period >= 0)
        for (int i = 0; i < L; i++) {
            if (period > 0) sliding[i] = i % period < period - 1;
            // llama-arch files (Mistral) written by infer convert carry a window for every layer;
            // llama.cpp itself ignores it there.
            else sliding[i] = fam->quirks & Q_SWA_EVERY_LAYER && cf->sliding_window > 0;
        }
    if (fam->quirks & Q_SWA_IGNORED) for (int i = 0; i < L; i++) sliding[i] = 0; // llama.cpp disables Phi-3's window
    if (!cf->sliding_window) for (int i = 0; i < L; i++) sliding[i] = 0;
    if (fam->quirks & Q_SWA_DEFAULT_4096 && !cf->sliding_window) {
        cf->sliding_window = 4096; // llama.cpp's default for Gemma 2
        for (int i = 0; i < L; i++) sliding[i] = i % 2 < 1;
    }

    for (int i = 0; i < L; i++) {
        layer_config *lc = &cf->layers[i];
        lc->global = !sliding[i];
        lc->window = sliding[i] ? cf->sliding_window : 0;
        lc->head_dim = sliding[i] ? hd_swa : cf->head_dim;
        lc->n_kv_head = kvh[i];
        lc->kv_source = i;
        if (cf->n_head % lc->n_kv_head) {
            c.st = fail(INFER_ERR_FORMAT, "%s: layer %d: %d heads not a multiple of %d kv heads", path, i, cf->n_head, lc->n_kv_head);
            goto out;
        }
        if (lc->head_dim % 2) { c.st = fail(INFER_ERR_FORMAT, "%s: head dimension %d must be even", path, lc->head_dim); goto out; }
    }
    cf->head_dim = cf->layers[0].head_dim;
    cf->n_kv_head = cf->layers[0].n_kv_head;
    if (cf->n_kv_shared) {
        int first = L - cf->n_kv_shared;
        if (first < 1) { c.st = fail(INFER_ERR_FORMAT, "%s: shared_kv_layers %d leaves no layer to share from", path, cf->n_kv_shared); goto out; }
        for (int i = first; i < L; i++) {
            int src = -1;
            for (int j = first - 1; j >= 0; j--)
                if (cf->layers[j].global == cf->layers[i].global) { src = j; break; }
            if (src < 0) { c.st = fail(INFER_ERR_FORMAT, "%s: layer %d shares K/V but no earlier layer has its type", path, i); goto out; }
            cf->layers[i].kv_source = src;
        }
    }

    // Attention scale (llama.cpp's f_attention_scale).
    cf->attn_scale = 0;
    if (fam->attn_scale_one) cf->attn_scale = 1;
    v = 0;
    get_f(&c, K(&c, "attention.scale"), &v);
    if (v) cf->attn_scale = (float)v;
    if (fam->quirks & Q_GEMMA_SCALE) {
        int big = L == fam->big_layers; // the 27B models
        cf->attn_scale = (float)(1.0 / sqrt(big ? (double)cf->n_embd / cf->n_head : (double)cf->head_dim));
    }
    if (c.st) goto out;

    for (int i = 0; i < L; i++) // products the forward pass keeps in an int
        if ((int64_t)cf->n_head * cf->layers[i].head_dim > MAX_DIM || (int64_t)cf->layers[i].n_kv_head * cf->layers[i].head_dim > MAX_DIM) {
            c.st = fail(INFER_ERR_FORMAT, "%s: %s x %s (%d x %d) is above %d", path, K(&c, "attention.head_count"),
                        K(&c, "attention.key_length"), cf->n_head, cf->layers[i].head_dim, MAX_DIM);
            goto out;
        }
    if ((int64_t)cf->n_expert * cf->n_ff_expert > INT32_MAX / 4) {
        c.st = fail(INFER_ERR_FORMAT, "%s: %s x %s is too large", path, K(&c, "expert_count"), K(&c, "expert_feed_forward_length"));
        goto out;
    }
    int64_t rot_all = 0; // the rotary tables: key_length / 2 frequencies a layer
    for (int i = 0; i < L; i++) rot_all += cf->layers[i].head_dim;
    if (rot_all > MAX_ROPE_ALL) {
        c.st = fail(INFER_ERR_FORMAT, "%s: %s x %s (%d x %d) is above %d", path, K(&c, "block_count"), K(&c, "attention.key_length"),
                    L, cf->head_dim, MAX_ROPE_ALL);
        goto out;
    }
    for (int i = 0; i < L && !fam->learned_pos; i++) {
        layer_config *lc = &cf->layers[i];
        rope_params p = lc->global ? *rg : *rl;
        int rot = lc->global ? n_rot : n_rot_swa;
        if (rot < 2 || rot > lc->head_dim || rot % 2) {
            c.st = fail(INFER_ERR_FORMAT, "%s: rope dimension %d does not fit head dimension %d", path, rot, lc->head_dim);
            goto out;
        }
        p.partial = (double)rot / lc->head_dim;
        c.st = rope_table_build(&p, lc->head_dim, &lc->rope, path);
        if (c.st) goto out;
        if (fam->rope_normal) { lc->rope.pair_stride = 2; lc->rope.pair_offset = 1; }
        if (fam->nope_global && lc->global) lc->rope.n_pairs = 0; // Cohere 2
        // rope_freqs divides the frequencies: every layer, or only global ones (Gemma 4)
        int use = rope_freqs && (!(fam->quirks & Q_ROPE_FREQS_GLOBAL) || lc->global);
        if (use) {
            if (n_freqs < lc->rope.n_pairs) {
                c.st = fail(INFER_ERR_FORMAT, "%s: rope_freqs.weight has %d values but layer %d rotates %d pairs", path, n_freqs, i, lc->rope.n_pairs);
                goto out;
            }
            for (int k = 0; k < lc->rope.n_pairs; k++) {
                if (!(rope_freqs[k] > 0)) { c.st = fail(INFER_ERR_FORMAT, "%s: rope_freqs.weight[%d] must be positive", path, k); goto out; }
                lc->rope.inv_freq[k] /= rope_freqs[k];
            }
        }
    }

out:
    free(tmp);
    if (c.st) config_free(cf);
    return c.st;
}
