#include "models/quant_mix.h"
#include "tensor/dtype.h"

#include <stdio.h>
#include <string.h>

// name, default type, "M" rules, the type use_more_bits picks, LLAMA_FTYPE_*
static const struct { const char *name; int base, k_mixed, more, ftype; } g_mixes[] = {
    {"f32", DT_F32, 0, 0, 0},     {"f16", DT_F16, 0, 0, 1},       {"bf16", DT_BF16, 0, 0, 32},
    {"q8_0", DT_Q8_0, 0, 0, 7},   {"q4_0", DT_Q4_0, 0, 0, 2},     {"q5_0", DT_Q5_0, 0, 0, 8},
    {"q4_1", DT_Q4_1, 0, 0, 3},   {"q5_1", DT_Q5_1, 0, 0, 9},     {"q6_k", DT_Q6_K, 0, 0, 18},
    {"q4_k_m", DT_Q4_K, 1, DT_Q6_K, 15}, {"q5_k_m", DT_Q5_K, 1, DT_Q6_K, 17},
};

const char *llama_ftype_name(int ftype) {
    static const struct { int ftype; const char *name; } names[] = {
        {0, "all F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
        {10, "Q2_K - Medium"}, {11, "Q3_K - Small"}, {12, "Q3_K - Medium"}, {13, "Q3_K - Large"},
        {14, "Q4_K - Small"}, {15, "Q4_K - Medium"}, {16, "Q5_K - Small"}, {17, "Q5_K - Medium"},
        {18, "Q6_K"}, {32, "BF16"}, {38, "MXFP4 MoE"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].ftype == ftype) return names[i].name;
    return NULL;
}

const char *quant_mix_names(void) { return "f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q6_k, q4_k_m, q5_k_m"; }

int gguf_ftype_of(int type) {
    for (size_t i = 0; i < sizeof g_mixes / sizeof g_mixes[0]; i++)
        if (g_mixes[i].base == type && !g_mixes[i].k_mixed) return g_mixes[i].ftype;
    return 1;
}

int quant_mix_init(quant_mix *q, const char *name, int n_layer, int n_expert, int tied) {
    memset(q, 0, sizeof *q);
    for (size_t i = 0; i < sizeof g_mixes / sizeof g_mixes[0]; i++) {
        if (strcasecmp(name, g_mixes[i].name)) continue;
        q->base = g_mixes[i].base;
        q->k_mixed = g_mixes[i].k_mixed;
        q->more_bits_type = g_mixes[i].more;
        q->ftype = g_mixes[i].ftype;
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
int quant_fit(int t, int64_t ne0) {
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
    // what llama.cpp leaves alone: vectors, norms, routers, positions
    if (n_dims < 2) return is_float(stored) ? DT_F32 : stored;
    if (!ends_with(name, "weight") || strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight") ||
        strstr(name, "per_layer_model_proj") || !strcmp(name, "position_embd.weight") || strstr(name, "altup") ||
        strstr(name, "laurel"))
        return stored;
    if (is_float(q->base)) return q->base; // a float mix converts every matrix

    int t = q->base;
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    if (!strcmp(name, "output.weight") || (q->tied && !strcmp(name, "token_embd.weight"))) {
        // the output head: q6_K unless the mix is q8_0 (or the row does not fit 256)
        if (ne0 % 256) t = DT_Q8_0;
        else if (t != DT_Q8_0) t = DT_Q6_K;
        return quant_fit(t, ne0);
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
    return quant_fit(t, ne0);
}
