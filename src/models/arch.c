// The family table: one row per architecture, the only place that knows
// families by name. config.json parsing (config.c), GGUF metadata
// (config_gguf.c), the converter (gguf_convert.c) and the tensor-name maps
// (weights.c) read a row's fields; adding a family is a row here and, if its
// tensor names differ, entries in weights.c's name maps.
#include "models/config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const family g_families[] = {
    // unset fields are 0: NORM_RMS, FFN_GATED, BLOCK_PRE, MOE_NONE
    {.model_type = "llama", .gguf_arch = "llama", .gguf_loads_as = 1, .default_act = ACT_SILU,
     .rope_normal = 1, .quirks = Q_SWA_EVERY_LAYER | Q_EXPERT_FF_IS_FF},
    {.model_type = "mistral", .gguf_arch = "llama", .default_act = ACT_SILU, .rope_normal = 1,
     .quirks = Q_SWA_EVERY_LAYER},
    {.model_type = "mixtral", .gguf_arch = "llama", .gguf_loads_as = 1, .moe = MOE_SOFTMAX_TOPK,
     .default_act = ACT_SILU, .rope_normal = 1, .quirks = Q_MOE_RENORM | Q_SWA_EVERY_LAYER | Q_EXPERT_FF_IS_FF},
    {.model_type = "granite", .gguf_arch = "granite", .gguf_loads_as = 1, .default_act = ACT_SILU,
     .rope_normal = 1, .quirks = Q_GRANITE_SCALES},
    {.model_type = "qwen2", .gguf_arch = "qwen2", .gguf_loads_as = 1, .default_act = ACT_SILU,
     .quirks = Q_QKV_BIAS | Q_SWA_QWEN},
    {.model_type = "qwen3", .gguf_arch = "qwen3", .gguf_loads_as = 1, .default_act = ACT_SILU, .quirks = Q_SWA_QWEN},
    {.model_type = "qwen3_moe", .gguf_arch = "qwen3moe", .gguf_loads_as = 1, .moe = MOE_SOFTMAX_TOPK,
     .default_act = ACT_SILU, .quirks = Q_SWA_QWEN},
    {.model_type = "phi3", .gguf_arch = "phi3", .gguf_loads_as = 1, .default_act = ACT_SILU,
     .quirks = Q_SWA_IGNORED | Q_ROPE_ORIG_CTX},
    {.model_type = "gemma2", .gguf_arch = "gemma2", .gguf_loads_as = 1, .norm_plus_one = 1, .post_norms = 1,
     .embed_scale_sqrt = 1, .default_act = ACT_GELU_TANH, .swa_period = 2, .big_layers = 46,
     .quirks = Q_SWA_DEFAULT_4096 | Q_ATTN_CAP_50 | Q_FINAL_CAP_30 | Q_GEMMA_SCALE,
     .chat_template = "gemma"},
    {.model_type = "gemma3", .gguf_arch = "gemma3", .gguf_loads_as = 1, .norm_plus_one = 1, .post_norms = 1,
     .embed_scale_sqrt = 1, .default_act = ACT_GELU_TANH, .swa_period = 6, .big_layers = 62,
     .quirks = Q_SWA_THETA_10K | Q_GEMMA_SCALE, .chat_template = "gemma"},
    {.model_type = "gemma3_text", .gguf_arch = "gemma3", .norm_plus_one = 1, .post_norms = 1,
     .embed_scale_sqrt = 1, .default_act = ACT_GELU_TANH, .swa_period = 6, .big_layers = 62,
     .quirks = Q_SWA_THETA_10K | Q_GEMMA_SCALE, .chat_template = "gemma"},
    {.model_type = "gemma4", .gguf_arch = "gemma4", .gguf_loads_as = 1, .post_norms = 1, .embed_scale_sqrt = 1,
     .v_norm = 1, .attn_scale_one = 1, .default_act = ACT_GELU_TANH, .swa_period = 6,
     .quirks = Q_GGUF_NO_SWA_PERIOD | Q_SWA_THETA_10K | Q_ROT_SWA_FULL | Q_ROPE_FREQS_GLOBAL | Q_FINAL_CAP_30 | Q_PROPORTIONAL_ROPE,
     .chat_template = "gemma"},
    {.model_type = "gemma4_text", .gguf_arch = "gemma4", .post_norms = 1, .embed_scale_sqrt = 1, .v_norm = 1,
     .attn_scale_one = 1, .default_act = ACT_GELU_TANH, .swa_period = 6,
     .quirks = Q_GGUF_NO_SWA_PERIOD | Q_SWA_THETA_10K | Q_ROT_SWA_FULL | Q_ROPE_FREQS_GLOBAL | Q_FINAL_CAP_30 | Q_PROPORTIONAL_ROPE,
     .chat_template = "gemma"},
    {.model_type = "starcoder2", .gguf_arch = "starcoder2", .gguf_loads_as = 1, .norm = NORM_LAYER,
     .ffn = FFN_PLAIN, .default_act = ACT_GELU_TANH},
    {.model_type = "gpt2", .gguf_arch = "gpt2", .gguf_loads_as = 1, .norm = NORM_LAYER, .ffn = FFN_PLAIN,
     .learned_pos = 1, .conv1d = 1, .default_act = ACT_GELU_TANH, .quirks = Q_NO_KEY_LENGTH},
    {.model_type = "gpt_oss", .gguf_arch = "gpt-oss", .gguf_loads_as = 1, .ffn = FFN_OSS,
     .moe = MOE_TOPK_SOFTMAX, .default_act = ACT_SILU, .swa_period = 2},
    {.model_type = "olmo2", .gguf_arch = "olmo2", .gguf_loads_as = 1, .block = BLOCK_POST, .post_norms = 1,
     .qk_norm_full = 1, .default_act = ACT_SILU},
    // BERT: embeddings (word + position + token type 0) normed, then post-norm blocks
    {.model_type = "bert", .norm = NORM_LAYER, .ffn = FFN_PLAIN, .block = BLOCK_ENC_POST, .learned_pos = 1,
     .encoder = 1, .default_act = ACT_GELU},
    {.model_type = "cohere2", .gguf_arch = "cohere2", .gguf_loads_as = 1, .norm = NORM_LAYER,
     .block = BLOCK_PARALLEL, .default_act = ACT_SILU, .rope_pairs = 1, .rope_normal = 1, .nope_global = 1,
     .swa_period = 4, .quirks = Q_LOGIT_MUL},
};

#define N_FAMILIES (sizeof g_families / sizeof g_families[0])

const family *family_find(const char *model_type) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strcmp(g_families[i].model_type, model_type) == 0) return &g_families[i];
    return NULL;
}

const family *family_find_gguf(const char *arch, int has_experts) {
    const family *any = NULL;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        const family *f = &g_families[i];
        if (!f->gguf_arch || strcmp(f->gguf_arch, arch) || !f->gguf_loads_as) continue;
        if ((f->moe != MOE_NONE) == (has_experts != 0)) return f;
        if (!any) any = f;
    }
    return any;
}

// The lists for messages, written once (models may load on several threads).
static char g_list[512], g_gguf_list[512];
static pthread_once_t g_lists_once = PTHREAD_ONCE_INIT;

static void lists_init(void) {
    size_t o = 0, og = 0;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        const family *f = &g_families[i];
        o += (size_t)snprintf(g_list + o, sizeof g_list - o, "%s%s", i ? ", " : "", f->model_type);
        if (o >= sizeof g_list) o = sizeof g_list - 1;
        if (f->gguf_arch && f->gguf_loads_as && !strstr(g_gguf_list, f->gguf_arch)) {
            og += (size_t)snprintf(g_gguf_list + og, sizeof g_gguf_list - og, "%s%s", og ? ", " : "", f->gguf_arch);
            if (og >= sizeof g_gguf_list) og = sizeof g_gguf_list - 1;
        }
    }
}

const char *family_list(void) {
    pthread_once(&g_lists_once, lists_init);
    return g_list;
}

const char *family_gguf_list(void) {
    pthread_once(&g_lists_once, lists_init);
    return g_gguf_list;
}
