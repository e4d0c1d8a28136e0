#include "models/quant_mix.h"
#include "models/dtype.h"

#include <stdio.h>
#include <string.h>

static const struct { const char *name; int base, k_mixed, more; } g_mixes[] = {
    {"f32", DT_F32, 0, 0},     {"f16", DT_F16, 0, 0},       {"bf16", DT_BF16, 0, 0},
    {"q8_0", DT_Q8_0, 0, 0},   {"q4_0", DT_Q4_0, 0, 0},     {"q5_0", DT_Q5_0, 0, 0},
    {"q4_1", DT_Q4_1, 0, 0},   {"q5_1", DT_Q5_1, 0, 0},     {"q6_k", DT_Q6_K, 0, 0},
    {"q4_k_m", DT_Q4_K, 1, DT_Q6_K}, {"q5_k_m", DT_Q5_K, 1, DT_Q6_K},
};

int quant_mix_init(quant_mix *q, const char *name, int n_layer, int n_expert, int tied) {
    memset(q, 0, sizeof *q);
    for (size_t i = 0; i < sizeof g_mixes / sizeof g_mixes[0]; i++) {
        if (strcasecmp(name, g_mixes[i].name)) continue;
        q->base = g_mixes[i].base;
        q->k_mixed = g_mixes[i].k_mixed;
        q->more_bits_type = g_mixes[i].more;
        q->n_layer = n_layer;
        q->n_expert = n_expert;
        q->tied = tied;
        return 1;
    }
    return 0;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every
// third one between.
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int is_float(int t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

// A type whose block does not divide the row falls back as llama.cpp does.
static int fit(int t, int64_t ne0) {
    const dtype_traits *tr = dtype_get(t);
    if (ne0 % tr->blck == 0) return t;
    switch (t) {
    case DT_Q4_K: t = DT_Q5_0; break;
    case DT_Q5_K: t = DT_Q5_1; break;
    case DT_Q6_K: t = DT_Q8_0; break;
    case DT_Q2_K: case DT_Q3_K: t = DT_Q4_0; break;
    default: break;
    }
    return ne0 % dtype_get(t)->blck == 0 ? t : DT_F16;
}

int quant_mix_type(quant_mix *q, const char *name, int n_dims, int64_t ne0, int stored) {
    if (is_float(q->base)) {
        // a float mix converts every float tensor, keeping 1-D ones in f32
        if (n_dims < 2) return DT_F32;
        return is_float(stored) ? q->base : stored;
    }
    // what llama.cpp leaves alone
    if (n_dims < 2 || !ends_with(name, "weight") || strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight") ||
        strstr(name, "per_layer_model_proj") || !strcmp(name, "position_embd.weight") || strstr(name, "altup") ||
        strstr(name, "laurel"))
        return stored == DT_F32 || stored == DT_F16 || stored == DT_BF16 ? (n_dims < 2 ? DT_F32 : stored) : stored;

    int t = q->base;
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    if (!strcmp(name, "output.weight") || (q->tied && !strcmp(name, "token_embd.weight"))) {
        // the output head: q6_K unless the mix is q8_0 (or the row does not fit 256)
        if (ne0 % 256) t = DT_Q8_0;
        else if (t != DT_Q8_0) t = DT_Q6_K;
        return fit(t, ne0);
    }
    if (strstr(name, "attn_v.weight")) {
        if (q->k_mixed && more_bits(q->i_attn_v, q->n_layer)) t = q->more_bits_type;
        if (q->n_expert == 8) t = DT_Q8_0;
        q->i_attn_v++;
    } else if (strstr(name, "attn_k.weight")) {
        if (q->n_expert == 8) t = DT_Q8_0;
    } else if (strstr(name, "ffn_down")) {
        if (q->k_mixed && layer >= 0 && more_bits(layer, q->n_layer)) t = q->more_bits_type;
    } else if (strstr(name, "attn_qkv.weight")) {
        if (q->k_mixed) t = q->base == DT_Q4_K ? DT_Q5_K : DT_Q6_K;
    }
    return fit(t, ne0);
}
