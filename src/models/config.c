// config.json -> infer_config. Both spellings are read: transformers 5
// (rope_parameters, layer_types, dtype) and the older one (rope_theta,
// rope_scaling with type/rope_type, rope_local_base_freq,
// sliding_window_pattern, torch_dtype), and a text_config nested inside a
// multimodal config.
#include "models/config.h"
#include "base/error.h"
#include "base/mapfile.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 4096
#define MAX_DIM (1 << 20)
// layers x head dimension: what the rotary tables hold (a 4096-layer header
// with 65,536-wide heads would ask for 512 MB of them)
#define MAX_ROPE_ALL (1 << 22)

// ---------------------------------------------------------------------------
// JSON helpers: a JSON null is the same as an absent key.

static const cJSON *get(const cJSON *o, const char *k) {
    const cJSON *j = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return (j && !cJSON_IsNull(j)) ? j : NULL;
}

typedef struct { const char *path; infer_status st; } ctx;

// Integer field: returns 1 when present; a present non-integer is an error.
static int get_int(ctx *c, const cJSON *o, const char *k, long long lo, long long hi, int *out) {
    const cJSON *j = get(o, k);
    if (!j) return 0;
    if (c->st) return 0;
    // (a boolean is 0 or 1, as Python reads it, and meets the same bounds)
    double v = cJSON_IsBool(j) ? (double)cJSON_IsTrue(j) : j->valuedouble;
    if (!(cJSON_IsNumber(j) || cJSON_IsBool(j)) || v != floor(v) || v < (double)lo || v > (double)hi) {
        c->st = fail(INFER_ERR_FORMAT, "%s: field \"%s\" must be an integer in [%lld, %lld]", c->path, k, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int get_num(ctx *c, const cJSON *o, const char *k, double *out) {
    const cJSON *j = get(o, k);
    if (!j || c->st) return 0;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)) {
        c->st = fail(INFER_ERR_FORMAT, "%s: field \"%s\" must be a number", c->path, k);
        return 0;
    }
    *out = j->valuedouble;
    return 1;
}

static int get_bool(ctx *c, const cJSON *o, const char *k, int *out) {
    const cJSON *j = get(o, k);
    if (!j || c->st) return 0;
    if (!cJSON_IsBool(j)) {
        c->st = fail(INFER_ERR_FORMAT, "%s: field \"%s\" must be true or false", c->path, k);
        return 0;
    }
    *out = cJSON_IsTrue(j);
    return 1;
}

static const char *get_str(ctx *c, const cJSON *o, const char *k) {
    const cJSON *j = get(o, k);
    if (!j || c->st) return NULL;
    if (!cJSON_IsString(j)) {
        c->st = fail(INFER_ERR_FORMAT, "%s: field \"%s\" must be a string", c->path, k);
        return NULL;
    }
    return j->valuestring;
}

// ---------------------------------------------------------------------------
// RoPE parameters

void rope_defaults(rope_params *r, double theta) {
    memset(r, 0, sizeof *r);
    strcpy(r->type, "default");
    r->theta = theta;
    r->factor = 1;
    r->low_freq_factor = 1;
    r->high_freq_factor = 4;
    r->beta_fast = 32;
    r->beta_slow = 1;
    r->attention_factor = -1;
    r->partial = 1;
    r->truncate = 1;
}

// Reads one rope dict (rope_parameters entry, or an old rope_scaling).
static void rope_read(ctx *c, const cJSON *o, rope_params *r) {
    if (!o) return;
    if (!cJSON_IsObject(o)) {
        c->st = fail(INFER_ERR_FORMAT, "%s: rope parameters must be an object", c->path);
        return;
    }
    r->present = 1;
    const char *t = get_str(c, o, "rope_type");
    if (!t) t = get_str(c, o, "type");
    if (t) {
        if (strlen(t) >= sizeof r->type) {
            c->st = fail(INFER_ERR_UNSUPPORTED, "%s: unknown rope type \"%.40s\"", c->path, t);
            return;
        }
        strcpy(r->type, t);
    }
    get_num(c, o, "rope_theta", &r->theta);
    get_num(c, o, "factor", &r->factor);
    get_num(c, o, "low_freq_factor", &r->low_freq_factor);
    get_num(c, o, "high_freq_factor", &r->high_freq_factor);
    get_num(c, o, "beta_fast", &r->beta_fast);
    get_num(c, o, "beta_slow", &r->beta_slow);
    get_num(c, o, "attention_factor", &r->attention_factor);
    get_num(c, o, "original_max_position_embeddings", &r->orig_max_pos);
    get_num(c, o, "partial_rotary_factor", &r->partial);
    get_bool(c, o, "truncate", &r->truncate);
}

static int rope_known(const char *t) {
    static const char *k[] = {"default", "linear", "llama3", "yarn", "proportional"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(t, k[i]) == 0) return 1;
    return 0;
}

// Inverse frequencies for a head_dim, following transformers'
// modeling_rope_utils (computed in float32 as torch does).
infer_status rope_table_build(const rope_params *p, int head_dim, rope_table *t, const char *path) {
    int dim = (int)(head_dim * p->partial);
    if (strcmp(p->type, "proportional") == 0) {
        // Gemma 4: rotate_half over the whole head; only the first pairs turn.
        t->n_pairs = (int)(p->partial * head_dim / 2);
        t->pair_offset = head_dim / 2;
        dim = head_dim;
    } else {
        if (dim < 2 || dim % 2) return fail(INFER_ERR_FORMAT, "%s: rotary dimension %d must be even and positive", path, dim);
        t->n_pairs = dim / 2;
        t->pair_offset = dim / 2;
    }
    if (t->n_pairs < 0 || t->n_pairs > head_dim / 2) return fail(INFER_ERR_FORMAT, "%s: bad partial_rotary_factor", path);
    t->inv_freq = calloc((size_t)(t->n_pairs ? t->n_pairs : 1), sizeof(float));
    if (!t->inv_freq) return fail(INFER_ERR_NOMEM, "out of memory");
    t->mscale = 1;
    t->pair_stride = 1;
    for (int i = 0; i < t->n_pairs; i++) {
        float e = (float)(2 * i) / (float)dim;
        t->inv_freq[i] = (float)(1.0 / pow(p->theta, (double)e));
    }
    if (strcmp(p->type, "linear") == 0 || strcmp(p->type, "proportional") == 0) {
        for (int i = 0; i < t->n_pairs; i++) t->inv_freq[i] = (float)(t->inv_freq[i] / p->factor);
    } else if (strcmp(p->type, "llama3") == 0) {
        double old = p->orig_max_pos;
        double lo_wl = old / p->low_freq_factor, hi_wl = old / p->high_freq_factor;
        for (int i = 0; i < t->n_pairs; i++) {
            double f = t->inv_freq[i], wl = 2 * M_PI / f;
            double nf;
            if (wl < hi_wl) nf = f;
            else if (wl > lo_wl) nf = f / p->factor;
            else {
                double smooth = (old / wl - p->low_freq_factor) / (p->high_freq_factor - p->low_freq_factor);
                nf = (1 - smooth) * f / p->factor + smooth * f;
            }
            t->inv_freq[i] = (float)nf;
        }
    } else if (strcmp(p->type, "yarn") == 0) {
        double factor = p->factor, base = p->theta, omp = p->orig_max_pos;
        double att = p->attention_factor;
        if (att < 0) att = factor <= 1 ? 1.0 : 0.1 * log(factor) + 1.0;
        t->mscale = (float)att;
        double low = (dim * log(omp / (p->beta_fast * 2 * M_PI))) / (2 * log(base));
        double high = (dim * log(omp / (p->beta_slow * 2 * M_PI))) / (2 * log(base));
        if (p->truncate) { low = floor(low); high = ceil(high); }
        if (low < 0) low = 0;
        if (high > dim - 1) high = dim - 1;
        if (low == high) high += 0.001;
        for (int i = 0; i < t->n_pairs; i++) {
            float pos_freq = (float)pow(base, (double)((float)(2 * i) / (float)dim));
            float extra = 1.0f / pos_freq, inter = 1.0f / ((float)factor * pos_freq);
            float ramp = (float)(((double)i - low) / (high - low));
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            float ef = 1 - ramp;
            t->inv_freq[i] = inter * (1 - ef) + extra * ef;
        }
    }
    return INFER_OK;
}

// ---------------------------------------------------------------------------

static int act_parse(const char *s, int *out) {
    if (!strcmp(s, "silu") || !strcmp(s, "swish")) *out = ACT_SILU;
    else if (!strcmp(s, "gelu_pytorch_tanh") || !strcmp(s, "gelu_new") || !strcmp(s, "gelu_tanh") ||
             !strcmp(s, "gelu_fast"))
        *out = ACT_GELU_TANH;
    else if (!strcmp(s, "gelu")) *out = ACT_GELU;
    else if (!strcmp(s, "relu")) *out = ACT_RELU;
    else return 0;
    return 1;
}

const char *act_kind_name(int a) {
    switch (a) {
    case ACT_SILU: return "silu";
    case ACT_GELU_TANH: return "gelu_tanh";
    case ACT_GELU: return "gelu";
    case ACT_RELU: return "relu";
    }
    return "?";
}

// a token id: a whole number in int's range (others are no id)
static int id_value(const cJSON *e, int *v) {
    double d = cJSON_IsNumber(e) ? e->valuedouble : 0.5;
    if (!(d >= -2147483648.0 && d <= 2147483647.0) || d != floor(d)) return 0;
    *v = (int)d;
    return 1;
}

static void read_ids(const cJSON *j, int *ids, int *n, int max) {
    if (!j) return;
    int v;
    if (cJSON_IsNumber(j)) { if (*n < max && id_value(j, &v)) ids[(*n)++] = v; return; }
    if (cJSON_IsArray(j))
        for (const cJSON *e = j->child; e; e = e->next)
            if (*n < max && id_value(e, &v)) {
                int dup = 0;
                for (int i = 0; i < *n; i++) dup |= ids[i] == v;
                if (!dup) ids[(*n)++] = v;
            }
}

infer_status config_parse(infer_config *cf, const char *json, const char *path) {
    memset(cf, 0, sizeof *cf);
    ctx c = {path, INFER_OK};
    cJSON *root = cJSON_Parse(json);
    if (!root) return fail(INFER_ERR_FORMAT, "%s: not valid JSON (near byte %ld)", path,
                           cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - json) : 0L);
    if (!cJSON_IsObject(root)) { cJSON_Delete(root); return fail(INFER_ERR_FORMAT, "%s: not a JSON object", path); }

    const cJSON *o = root;
    const cJSON *tc = get(root, "text_config");
    if (tc && cJSON_IsObject(tc)) o = tc;

    const char *mt = get_str(&c, o, "model_type");
    if (!mt && o != root) mt = get_str(&c, root, "model_type");
    if (c.st) goto out;
    if (!mt) { c.st = fail(INFER_ERR_FORMAT, "%s: missing \"model_type\"", path); goto out; }
    snprintf(cf->model_type, sizeof cf->model_type, "%s", mt);
    cf->fam = family_find(mt);
    if (cf->fam) cf->norm_plus_one = cf->fam->norm_plus_one;
    // A multimodal wrapper (gemma3, gemma4) names its text model in text_config.
    if (!cf->fam) {
        c.st = fail(INFER_ERR_UNSUPPORTED, "%s: unknown architecture \"%s\" (supported: %s)", path, mt, family_list());
        goto out;
    }
    const cJSON *archs = get(root, "architectures");
    if (cJSON_IsArray(archs) && cJSON_IsString(archs->child))
        snprintf(cf->arch_name, sizeof cf->arch_name, "%s", archs->child->valuestring);
    const char *dt = get_str(&c, o, "dtype");
    if (!dt) dt = get_str(&c, o, "torch_dtype");
    if (!dt) dt = get_str(&c, root, "torch_dtype");
    snprintf(cf->dtype, sizeof cf->dtype, "%s", dt ? dt : "");

    const family *fam = cf->fam;
    const int big = MAX_DIM;
    if (!get_int(&c, o, "hidden_size", 1, big, &cf->n_embd)) get_int(&c, o, "n_embd", 1, big, &cf->n_embd);
    if (!get_int(&c, o, "num_hidden_layers", 1, MAX_LAYERS, &cf->n_layer)) get_int(&c, o, "n_layer", 1, MAX_LAYERS, &cf->n_layer);
    if (!get_int(&c, o, "num_attention_heads", 1, 65536, &cf->n_head)) get_int(&c, o, "n_head", 1, 65536, &cf->n_head);
    get_int(&c, o, "vocab_size", 1, 1 << 24, &cf->n_vocab);
    if (c.st) goto out;
    if (!cf->n_embd) { c.st = fail(INFER_ERR_FORMAT, "%s: missing \"hidden_size\"", path); goto out; }
    if (!cf->n_layer) { c.st = fail(INFER_ERR_FORMAT, "%s: missing \"num_hidden_layers\"", path); goto out; }
    if (!cf->n_head) { c.st = fail(INFER_ERR_FORMAT, "%s: missing \"num_attention_heads\"", path); goto out; }
    if (!cf->n_vocab) { c.st = fail(INFER_ERR_FORMAT, "%s: missing \"vocab_size\"", path); goto out; }
    cf->n_kv_head = cf->n_head;
    get_int(&c, o, "num_key_value_heads", 1, 65536, &cf->n_kv_head);
    cf->head_dim = cf->n_embd / cf->n_head;
    get_int(&c, o, "head_dim", 1, 65536, &cf->head_dim);
    cf->n_ff = 4 * cf->n_embd;
    if (!get_int(&c, o, "intermediate_size", 1, big, &cf->n_ff)) get_int(&c, o, "n_inner", 1, big, &cf->n_ff);
    cf->n_ctx_train = 4096;
    if (!get_int(&c, o, "max_position_embeddings", 1, 1 << 30, &cf->n_ctx_train))
        get_int(&c, o, "n_positions", 1, 1 << 30, &cf->n_ctx_train);
    if (c.st) goto out;
    if (cf->n_head % cf->n_kv_head) {
        c.st = fail(INFER_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                    cf->n_head, cf->n_kv_head);
        goto out;
    }

    cf->norm_eps = fam->norm == NORM_RMS ? 1e-6 : 1e-5;
    if (!get_num(&c, o, "rms_norm_eps", &cf->norm_eps) && !get_num(&c, o, "layer_norm_eps", &cf->norm_eps) &&
        !get_num(&c, o, "layer_norm_epsilon", &cf->norm_eps))
        get_num(&c, o, "norm_epsilon", &cf->norm_eps);
    if (!(cf->norm_eps >= 0)) { c.st = fail(INFER_ERR_FORMAT, "%s: norm epsilon must be >= 0", path); goto out; }

    cf->act = fam->default_act;
    const char *an = get_str(&c, o, "hidden_activation");
    if (!an) an = get_str(&c, o, "hidden_act");
    if (!an) an = get_str(&c, o, "activation_function");
    if (an && !act_parse(an, &cf->act)) {
        c.st = fail(INFER_ERR_UNSUPPORTED, "%s: unknown activation \"%s\"", path, an);
        goto out;
    }

    // Scales and caps.
    cf->embed_scale = fam->embed_scale_sqrt ? sqrtf((float)cf->n_embd) : 1.0f;
    cf->residual_scale = 1;
    cf->logit_scale = 1;
    double v;
    if (get_num(&c, o, "embedding_multiplier", &v)) cf->embed_scale = (float)v;
    if (get_num(&c, o, "residual_multiplier", &v)) cf->residual_scale = (float)v;
    if (get_num(&c, o, "logits_scaling", &v)) {
        if (v == 0) { c.st = fail(INFER_ERR_FORMAT, "%s: logits_scaling must not be 0", path); goto out; }
        cf->logit_scale = (float)(1.0 / v);
    }
    if (get_num(&c, o, "logit_scale", &v)) cf->logit_scale = (float)v; // Cohere multiplies
    if (get_num(&c, o, "attn_logit_softcapping", &v)) cf->attn_softcap = (float)v;
    if (get_num(&c, o, "final_logit_softcapping", &v)) cf->final_softcap = (float)v;
    get_int(&c, o, "sliding_window", 0, 1 << 30, &cf->sliding_window);
    cf->attn_bias = fam->ffn == FFN_PLAIN; // starcoder2 (use_bias) and gpt2 carry biases
    get_bool(&c, o, "attention_bias", &cf->attn_bias);
    get_bool(&c, o, "use_bias", &cf->attn_bias);
    if (fam->quirks & Q_QKV_BIAS) cf->attn_bias = 1;
    cf->mlp_bias = fam->ffn == FFN_PLAIN || fam->ffn == FFN_OSS;
    get_bool(&c, o, "mlp_bias", &cf->mlp_bias);

    // Mixture of experts.
    if (fam->moe) {
        if (!get_int(&c, o, "num_local_experts", 1, 65536, &cf->n_expert)) get_int(&c, o, "num_experts", 1, 65536, &cf->n_expert);
        if (!get_int(&c, o, "num_experts_per_tok", 1, 65536, &cf->n_expert_used))
            get_int(&c, o, "top_k_experts", 1, 65536, &cf->n_expert_used);
        cf->n_ff_expert = cf->n_ff;
        get_int(&c, o, "moe_intermediate_size", 1, big, &cf->n_ff_expert);
        cf->moe_norm_topk = (fam->quirks & Q_MOE_RENORM) != 0;
        get_bool(&c, o, "norm_topk_prob", &cf->moe_norm_topk);
        if (c.st) goto out;
        if (!cf->n_expert || !cf->n_expert_used || cf->n_expert_used > cf->n_expert) {
            c.st = fail(INFER_ERR_FORMAT, "%s: MoE needs num_local_experts and num_experts_per_tok <= it", path);
            goto out;
        }
        if (cf->n_expert_used > INFER_MAX_EXPERTS_USED) {
            c.st = fail(INFER_ERR_UNSUPPORTED, "%s: num_experts_per_tok is %d (at most %d supported)", path,
                        cf->n_expert_used, INFER_MAX_EXPERTS_USED);
            goto out;
        }
    }

    // Gemma 4.
    get_int(&c, o, "hidden_size_per_layer_input", 0, big, &cf->ple_dim);
    cf->ple_vocab = cf->n_vocab;
    get_int(&c, o, "vocab_size_per_layer_input", 1, 1 << 24, &cf->ple_vocab);
    get_int(&c, o, "num_kv_shared_layers", 0, MAX_LAYERS, &cf->n_kv_shared);
    get_bool(&c, o, "attention_k_eq_v", &cf->attn_k_eq_v);
    int moe_block = 0;
    get_bool(&c, o, "enable_moe_block", &moe_block);
    if (moe_block) { c.st = fail(INFER_ERR_UNSUPPORTED, "%s: Gemma 4 MoE blocks (enable_moe_block) are not supported yet", path); goto out; }
    if (c.st) goto out;

    // Special tokens (generation_config.json may add more eos ids).
    cf->bos = -1;
    get_int(&c, o, "bos_token_id", 0, 1 << 30, &cf->bos);
    if (!get(o, "bos_token_id")) get_int(&c, root, "bos_token_id", 0, 1 << 30, &cf->bos);
    read_ids(get(o, "eos_token_id"), cf->eos, &cf->n_eos, 8);
    read_ids(get(root, "eos_token_id"), cf->eos, &cf->n_eos, 8);
    if (c.st) goto out;

    // RoPE: rope_parameters (flat, or keyed by layer type), else rope_theta + rope_scaling.
    double theta = 10000;
    get_num(&c, o, "rope_theta", &theta);
    rope_defaults(&cf->rope_local, theta);
    rope_defaults(&cf->rope_global, theta);
    double partial = 1;
    if (get_num(&c, o, "partial_rotary_factor", &partial)) cf->rope_local.partial = cf->rope_global.partial = partial;
    const cJSON *rp = get(o, "rope_parameters");
    if (rp && cJSON_IsObject(rp) && (get(rp, "full_attention") || get(rp, "sliding_attention"))) {
        rope_read(&c, get(rp, "sliding_attention"), &cf->rope_local);
        rope_read(&c, get(rp, "full_attention"), &cf->rope_global);
        if (!get(rp, "sliding_attention")) cf->rope_local = cf->rope_global;
        if (!get(rp, "full_attention")) cf->rope_global = cf->rope_local;
    } else if (rp) {
        rope_read(&c, rp, &cf->rope_local);
        cf->rope_global = cf->rope_local;
    } else {
        const cJSON *rs = get(o, "rope_scaling");
        double local_base;
        if (get_num(&c, o, "rope_local_base_freq", &local_base)) {
            // Gemma 3 (old spelling): rope_scaling applies to global layers only.
            cf->rope_local.theta = local_base;
            rope_read(&c, rs, &cf->rope_global);
        } else {
            rope_read(&c, rs, &cf->rope_local);
            cf->rope_global = cf->rope_local;
        }
    }
    if (c.st) goto out;
    const rope_params *rps[2] = {&cf->rope_local, &cf->rope_global};
    for (int i = 0; i < 2; i++) {
        if (!rope_known(rps[i]->type)) {
            c.st = fail(INFER_ERR_UNSUPPORTED, "%s: rope type \"%s\" is not supported", path, rps[i]->type);
            goto out;
        }
        if (!(rps[i]->theta > 0) || !(rps[i]->factor > 0) || !(rps[i]->partial > 0 && rps[i]->partial <= 1)) {
            c.st = fail(INFER_ERR_FORMAT, "%s: rope_theta, factor and partial_rotary_factor must be positive", path);
            goto out;
        }
        if ((!strcmp(rps[i]->type, "llama3") || !strcmp(rps[i]->type, "yarn")) && !(rps[i]->orig_max_pos > 0)) {
            c.st = fail(INFER_ERR_FORMAT, "%s: rope type %s needs original_max_position_embeddings", path, rps[i]->type);
            goto out;
        }
    }

    // Per-layer configuration.
    int L = cf->n_layer;
    cf->layers = calloc((size_t)L, sizeof *cf->layers);
    if (!cf->layers) { c.st = fail(INFER_ERR_NOMEM, "out of memory"); goto out; }
    const cJSON *lt = get(o, "layer_types");
    if (lt && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != L)) {
        c.st = fail(INFER_ERR_FORMAT, "%s: \"layer_types\" must be an array of %d strings", path, L);
        goto out;
    }
    int pattern = 0;
    if (!get_int(&c, o, "sliding_window_pattern", 1, MAX_LAYERS, &pattern))
        get_int(&c, o, "_sliding_window_pattern", 1, MAX_LAYERS, &pattern);
    int use_sw = 1, max_window_layers = 0;
    int is_qwen = (fam->quirks & Q_SWA_QWEN) != 0;
    if (is_qwen) {
        use_sw = 0;
        get_bool(&c, o, "use_sliding_window", &use_sw);
        get_int(&c, o, "max_window_layers", 0, MAX_LAYERS, &max_window_layers);
    }
    for (int i = 0; i < L; i++) {
        int sliding;
        if (lt) {
            const cJSON *e = cJSON_GetArrayItem(lt, i);
            if (!cJSON_IsString(e)) { c.st = fail(INFER_ERR_FORMAT, "%s: layer_types[%d] is not a string", path, i); goto out; }
            if (!strcmp(e->valuestring, "sliding_attention")) sliding = 1;
            else if (!strcmp(e->valuestring, "full_attention")) sliding = 0;
            else { c.st = fail(INFER_ERR_UNSUPPORTED, "%s: layer_types[%d] \"%s\" is not supported", path, i, e->valuestring); goto out; }
        } else if (fam->swa_period) {
            int p = pattern ? pattern : fam->swa_period;
            sliding = (i + 1) % p != 0;
        } else if (is_qwen) {
            sliding = use_sw && i >= max_window_layers;
        } else {
            sliding = 1; // mistral, mixtral, starcoder2, phi3: sliding_window applies everywhere when set
        }
        layer_config *lc = &cf->layers[i];
        lc->global = !sliding;
        lc->window = sliding ? cf->sliding_window : 0;
        lc->head_dim = cf->head_dim;
        lc->n_kv_head = cf->n_kv_head;
        lc->kv_source = i;
    }
    if (fam->v_norm) {
        // Gemma 4: full-attention layers have their own head_dim (and kv heads).
        const cJSON *plc = get(o, "per_layer_config");
        int ghd = 512, gkv = 0;
        get_int(&c, o, "global_head_dim", 1, 65536, &ghd);
        get_int(&c, o, "num_global_key_value_heads", 1, 65536, &gkv);
        for (int i = 0; i < L; i++) {
            layer_config *lc = &cf->layers[i];
            if (plc) {
                char key[16];
                snprintf(key, sizeof key, "%d", i);
                const cJSON *e = get(plc, key);
                if (e) {
                    get_int(&c, e, "head_dim", 1, 65536, &lc->head_dim);
                    get_int(&c, e, "num_key_value_heads", 1, 65536, &lc->n_kv_head);
                }
            } else if (lc->global) {
                lc->head_dim = ghd;
                if (gkv && cf->attn_k_eq_v) lc->n_kv_head = gkv;
            }
            if (cf->n_head % lc->n_kv_head) {
                c.st = fail(INFER_ERR_FORMAT, "%s: layer %d: %d heads not a multiple of %d kv heads", path, i, cf->n_head, lc->n_kv_head);
                goto out;
            }
        }
        int first_shared = L - cf->n_kv_shared;
        if (first_shared < 1 && cf->n_kv_shared) {
            c.st = fail(INFER_ERR_FORMAT, "%s: num_kv_shared_layers %d leaves no layer to share from", path, cf->n_kv_shared);
            goto out;
        }
        for (int i = first_shared; i < L && cf->n_kv_shared; i++) {
            int src = -1;
            for (int j = first_shared - 1; j >= 0; j--)
                if (cf->layers[j].global == cf->layers[i].global) { src = j; break; }
            if (src < 0) {
                c.st = fail(INFER_ERR_FORMAT, "%s: layer %d shares K/V but no earlier layer has its type", path, i);
                goto out;
            }
            cf->layers[i].kv_source = src;
        }
    }
    if (c.st) goto out;

    // Attention scale per layer is decided in the forward pass from these.
    cf->attn_scale = 0; // 0: 1/sqrt(head_dim)
    if (fam->attn_scale_one) cf->attn_scale = 1;
    if (get_num(&c, o, "attention_multiplier", &v)) cf->attn_scale = (float)v;
    if (fam->quirks & Q_GEMMA_SCALE) {
        double qs = cf->head_dim;
        get_num(&c, o, "query_pre_attn_scalar", &qs);
        if (!(qs > 0)) { c.st = fail(INFER_ERR_FORMAT, "%s: query_pre_attn_scalar must be positive", path); goto out; }
        cf->attn_scale = (float)(1.0 / sqrt(qs));
    }

    for (int i = 0; i < L; i++) { // products the forward pass keeps in an int
        const layer_config *lc = &cf->layers[i];
        if ((int64_t)cf->n_head * lc->head_dim > MAX_DIM || (int64_t)lc->n_kv_head * lc->head_dim > MAX_DIM) {
            c.st = fail(INFER_ERR_FORMAT, "%s: num_attention_heads x head_dim (%d x %d) is above %d", path, cf->n_head,
                        lc->head_dim, MAX_DIM);
            goto out;
        }
    }
    if ((int64_t)cf->n_expert * cf->n_ff_expert > INT32_MAX / 4) {
        c.st = fail(INFER_ERR_FORMAT, "%s: num_local_experts x moe_intermediate_size (%d x %d) is too large", path,
                    cf->n_expert, cf->n_ff_expert);
        goto out;
    }
    int64_t rot_all = 0; // the rotary tables: head_dim / 2 frequencies a layer
    for (int i = 0; i < L; i++) rot_all += cf->layers[i].head_dim;
    if (rot_all > MAX_ROPE_ALL) {
        c.st = fail(INFER_ERR_FORMAT, "%s: num_hidden_layers x head_dim (%d x %d) is above %d", path, L, cf->head_dim, MAX_ROPE_ALL);
        goto out;
    }
    for (int i = 0; i < L; i++) {
        layer_config *lc = &cf->layers[i];
        if (lc->head_dim % 2) { c.st = fail(INFER_ERR_FORMAT, "%s: head_dim %d must be even", path, lc->head_dim); goto out; }
        if (fam->learned_pos) continue;
        c.st = rope_table_build(lc->global ? &cf->rope_global : &cf->rope_local, lc->head_dim, &lc->rope, path);
        if (c.st) goto out;
        if (fam->rope_pairs) lc->rope.pair_stride = 2, lc->rope.pair_offset = 1;
        if (fam->nope_global && lc->global) lc->rope.n_pairs = 0;
    }

out:
    cJSON_Delete(root);
    if (c.st) config_free(cf);
    return c.st;
}

infer_status config_load(infer_config *c, const char *dir) {
    char path[4096], *text = NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    infer_status st = read_text_file(path, 16u << 20, &text, NULL);
    if (st) return st;
    st = config_parse(c, text, path);
    free(text);
    if (st) return st;
    // generation_config.json may list extra end-of-generation ids.
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (read_text_file(path, 1u << 20, &text, NULL) == INFER_OK) {
        cJSON *g = cJSON_Parse(text);
        if (g) read_ids(get(g, "eos_token_id"), c->eos, &c->n_eos, 8);
        cJSON_Delete(g);
        free(text);
    }
    return INFER_OK;
}

void config_free(infer_config *c) {
    if (c->layers)
        for (int i = 0; i < c->n_layer; i++) free(c->layers[i].rope.inv_freq);
    free(c->layers);
    c->layers = NULL;
}

static size_t rope_describe(const rope_params *r, const char *what, char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap,
                            "%s = %s theta=%g factor=%g partial=%g%s", what, r->type, r->theta, r->factor, r->partial,
                            !strcmp(r->type, "llama3") ? " (llama3 low/high freq factors and original context)" :
                            !strcmp(r->type, "yarn") ? " (yarn beta_fast/beta_slow)" : "");
}

#define ADD(...) do { int k_ = snprintf(buf + o, o < cap ? cap - o : 0, __VA_ARGS__); if (k_ > 0) o += (size_t)k_; } while (0)

size_t config_describe(const infer_config *c, char *buf, size_t cap) {
    size_t o = 0;
    if (cap) buf[0] = 0;
    ADD("model_type           = %s\n", c->model_type);
    ADD("architecture         = %s\n", c->arch_name[0] ? c->arch_name : "-");
    ADD("config dtype         = %s\n", c->dtype[0] ? c->dtype : "-");
    ADD("n_vocab              = %d\n", c->n_vocab);
    ADD("n_embd               = %d\n", c->n_embd);
    ADD("n_layer              = %d\n", c->n_layer);
    ADD("n_head               = %d\n", c->n_head);
    ADD("n_kv_head            = %d\n", c->n_kv_head);
    ADD("head_dim             = %d\n", c->head_dim);
    ADD("n_ff                 = %d\n", c->n_ff);
    ADD("n_ctx_train          = %d\n", c->n_ctx_train);
    ADD("norm                 = %s%s eps=%g\n", c->fam->norm == NORM_RMS ? "rmsnorm" : "layernorm",
        c->norm_plus_one ? " (1 + w)" : "", c->norm_eps);
    ADD("activation           = %s\n", act_kind_name(c->act));
    ADD("ffn                  = %s\n", c->fam->ffn == FFN_GATED ? "gated" : c->fam->ffn == FFN_PLAIN ? "plain" : "gpt-oss swiglu");
    ADD("block                = %s\n", c->fam->block == BLOCK_POST ? "post-norm (no norm before attention or FFN)" :
                                      c->fam->block == BLOCK_PARALLEL ? "parallel (attention and FFN off one norm)" :
                                      c->fam->block == BLOCK_ENC_POST ? "post-norm encoder (norm after each residual add)" : "pre-norm");
    ADD("post norms           = %s\n", c->fam->post_norms ? "yes" : "no");
    ADD("attention scale      = %g\n", c->attn_scale ? c->attn_scale : 1.0 / sqrt(c->head_dim));
    ADD("attn softcap         = %g\n", c->attn_softcap);
    ADD("final softcap        = %g\n", c->final_softcap);
    ADD("embedding scale      = %g\n", c->embed_scale);
    ADD("residual scale       = %g\n", c->residual_scale);
    ADD("logit scale          = %g\n", c->logit_scale);
    ADD("attention bias       = %s\n", c->attn_bias ? "yes" : "no");
    ADD("sliding window       = %d\n", c->sliding_window);
    if (c->fam->learned_pos) ADD("positions            = learned\n");
    else {
        char r[256];
        rope_describe(&c->rope_local, "rope", r, sizeof r);
        ADD("%s%s\n", r, c->layers[0].rope.pair_stride == 2 ? " (adjacent pairs, llama.cpp normal mode)" : "");
        if (c->fam->nope_global) ADD("rope (global layers) = none\n");
        else if (memcmp(&c->rope_local, &c->rope_global, sizeof c->rope_local)) {
            rope_describe(&c->rope_global, "rope (global layers)", r, sizeof r);
            ADD("%s\n", r);
        }
    }
    if (c->n_expert) ADD("experts              = %d, %d used per token, n_ff %d%s\n", c->n_expert, c->n_expert_used,
                         c->n_ff_expert, c->moe_norm_topk ? ", top-k renormalized" : "");
    if (c->ple_dim) ADD("per-layer embeddings = %d per layer\n", c->ple_dim);
    if (c->n_kv_shared) ADD("kv shared layers     = %d\n", c->n_kv_shared);
    ADD("bos                  = %d\n", c->bos);
    ADD("eos                  =");
    for (int i = 0; i < c->n_eos; i++) ADD(" %d", c->eos[i]);
    ADD("\nlayers               =");
    for (int i = 0; i < c->n_layer; i++) {
        const layer_config *l = &c->layers[i];
        ADD(" %s", l->window ? "S" : "G");
        if (l->head_dim != c->head_dim) ADD("(hd %d)", l->head_dim);
        if (l->kv_source != i) ADD("(kv<-%d)", l->kv_source);
    }
    ADD("  (S sliding, G global)\n");
    return o;
}
