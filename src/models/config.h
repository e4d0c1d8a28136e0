// The model description every other part reads: one infer_config, filled from
// config.json (and later GGUF metadata), plus the per-family table row.
#ifndef INFER_MODELS_CONFIG_H
#define INFER_MODELS_CONFIG_H

#include "tensor/tensor.h"

// The most experts a token may be routed to: moe() keeps their ids and weights
// on the stack. A config asking for more is refused at load.
#define INFER_MAX_EXPERTS_USED 64

#include "infer.h"

enum norm_kind { NORM_RMS, NORM_LAYER };
enum moe_kind {
    MOE_NONE,
    MOE_SOFTMAX_TOPK, // softmax over all experts, keep the top k (Mixtral, Qwen3-MoE)
    MOE_TOPK_SOFTMAX, // keep the top k logits, softmax over them (gpt-oss)
};
enum ffn_kind {
    FFN_GATED,        // down(act(gate(x)) * up(x))
    FFN_PLAIN,        // down(act(up(x)))
    FFN_OSS,          // gpt-oss: clamped, interleaved gate/up, (up + 1) * gate * sigmoid(1.702 gate)
};

// One row of the family table: everything that differs between architectures
// and is not a number in config.json.
typedef struct {
    const char *model_type;  // config.json "model_type"
    int norm;                // enum norm_kind
    int norm_plus_one;       // RMSNorm scales by (1 + w) (Gemma 2/3)
    int ffn;                 // enum ffn_kind
    int post_norms;          // norms after attention and after the FFN (Gemma)
    int embed_scale_sqrt;    // embeddings times sqrt(n_embd) (Gemma)
    int learned_pos;         // learned absolute positions, no RoPE (GPT-2)
    int conv1d;              // 2-D weights stored [in, out] (GPT-2 Conv1D)
    int moe;                 // enum moe_kind
    int v_norm;              // unscaled RMSNorm on values (Gemma 4)
    int attn_scale_one;      // attention scores are not scaled (Gemma 4: q/k norms do it)
    int default_act;         // enum act_kind when config.json names none
} family;

const family *family_find(const char *model_type);
const char *act_kind_name(int act); // "silu", "gelu_tanh", ...
const char *family_list(void); // "llama, mistral, ..." for messages


typedef struct {
    int head_dim;
    int n_kv_head;
    int window;       // 0: full causal attention; else keys in (pos - window, pos]
    int kv_source;    // the layer whose K/V this layer attends to (itself unless shared)
    int global;       // "full_attention" layer (chooses the rope parameters)
    rope_table rope;
} layer_config;

// RoPE parameters as written in the config (one set per layer type).
typedef struct {
    int present;
    char type[24];         // default, linear, llama3, yarn, proportional
    double theta;
    double factor;
    double low_freq_factor, high_freq_factor; // llama3
    double beta_fast, beta_slow;              // yarn
    double attention_factor;                  // yarn; < 0 when not given
    double orig_max_pos;
    double partial;                           // partial_rotary_factor
    int truncate;                             // yarn
} rope_params;

typedef struct infer_config {
    char model_type[32];
    char arch_name[64];        // "architectures"[0]
    char dtype[16];            // stored dtype named by the config
    const family *fam;
    int from_gguf;             // loaded from GGUF metadata (llama.cpp's conventions)
    int norm_plus_one;         // RMSNorm scales by (1 + w): the family's, off for GGUF (folded in)
    int n_vocab, n_embd, n_layer, n_head, n_kv_head, head_dim, n_ff;
    int n_ctx_train;           // max_position_embeddings
    double norm_eps;
    int act;                   // enum act_kind
    float attn_scale;          // multiplies q.k
    float attn_softcap;        // 0: none
    float final_softcap;       // 0: none
    float embed_scale;         // multiplies the token embeddings
    float residual_scale;      // multiplies each block's output before the residual add
    float logit_scale;         // multiplies the logits
    int sliding_window;        // 0: none
    int attn_bias, mlp_bias;
    int n_expert, n_expert_used, n_ff_expert, moe_norm_topk;
    int ple_dim, ple_vocab;    // Gemma 4 per-layer embeddings (0: none)
    int n_kv_shared;           // Gemma 4: the last n layers reuse earlier K/V
    int attn_k_eq_v;           // Gemma 4: global layers use K as V
    int bos;                   // -1: none
    int eos[8], n_eos;
    rope_params rope_local;    // sliding layers (or all layers)
    rope_params rope_global;   // full-attention layers when they differ
    layer_config *layers;      // n_layer
} infer_config;

// Parses <dir>/config.json. Every error names the file and the field.
infer_status config_load(infer_config *c, const char *dir);
// Parses config JSON text (path only for messages).
infer_status config_parse(infer_config *c, const char *json, const char *path);
void config_free(infer_config *c);

// Fills t (inverse frequencies, pairs) for one layer's head_dim from p.
infer_status rope_table_build(const rope_params *p, int head_dim, rope_table *t, const char *path);
void rope_defaults(rope_params *r, double theta);

struct gguf_file;
// GGUF metadata (llama.cpp's key names) -> config. rope_freqs: the file's
// rope_freqs.weight values (n_freqs of them) or NULL. Errors name the file and key.
infer_status config_from_gguf(infer_config *c, const struct gguf_file *g, const float *rope_freqs, int n_freqs,
                              int64_t n_vocab_tensor);

// Writes "key = value" lines of every field in effect; returns the length.
size_t config_describe(const infer_config *c, char *buf, size_t cap);

#endif
