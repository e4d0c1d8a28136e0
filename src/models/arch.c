// The family table: one row per architecture. Adding a family is a row here
// and, if its tensor names differ, a few entries in the name map (weights.c).
#include "models/config.h"

#include <stdio.h>
#include <string.h>

static const family g_families[] = {
    //  model_type     norm        +1 ffn         post emb  pos  c1d moe               vnorm s1 act
    {"llama",        NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_SILU},
    {"mistral",      NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_SILU},
    {"qwen2",        NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_SILU},
    {"qwen3",        NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_SILU},
    {"granite",      NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_SILU},
    {"phi3",         NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_SILU},
    {"gemma2",       NORM_RMS,   1, FFN_GATED, 1,   1,   0,   0,  MOE_NONE,         0,    0, ACT_GELU_TANH},
    {"gemma3",       NORM_RMS,   1, FFN_GATED, 1,   1,   0,   0,  MOE_NONE,         0,    0, ACT_GELU_TANH},
    {"gemma3_text",  NORM_RMS,   1, FFN_GATED, 1,   1,   0,   0,  MOE_NONE,         0,    0, ACT_GELU_TANH},
    {"gemma4",       NORM_RMS,   0, FFN_GATED, 1,   1,   0,   0,  MOE_NONE,         1,    1, ACT_GELU_TANH},
    {"gemma4_text",  NORM_RMS,   0, FFN_GATED, 1,   1,   0,   0,  MOE_NONE,         1,    1, ACT_GELU_TANH},
    {"starcoder2",   NORM_LAYER, 0, FFN_PLAIN, 0,   0,   0,   0,  MOE_NONE,         0,    0, ACT_GELU_TANH},
    {"gpt2",         NORM_LAYER, 0, FFN_PLAIN, 0,   0,   1,   1,  MOE_NONE,         0,    0, ACT_GELU_TANH},
    {"mixtral",      NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_SOFTMAX_TOPK, 0,    0, ACT_SILU},
    {"qwen3_moe",    NORM_RMS,   0, FFN_GATED, 0,   0,   0,   0,  MOE_SOFTMAX_TOPK, 0,    0, ACT_SILU},
    {"gpt_oss",      NORM_RMS,   0, FFN_OSS,   0,   0,   0,   0,  MOE_TOPK_SOFTMAX, 0,    0, ACT_SILU},
};

const family *family_find(const char *model_type) {
    for (size_t i = 0; i < sizeof g_families / sizeof g_families[0]; i++)
        if (strcmp(g_families[i].model_type, model_type) == 0) return &g_families[i];
    return NULL;
}

const char *family_list(void) {
    static char buf[512];
    if (!buf[0]) {
        size_t o = 0;
        for (size_t i = 0; i < sizeof g_families / sizeof g_families[0]; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "", g_families[i].model_type);
    }
    return buf;
}
