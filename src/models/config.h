// The model description every other part reads: one infer_config, filled from
// config.json (and later GGUF metadata), plus the per-family table row.
#ifndef INFER_MODELS_CONFIG_H
#define INFER_MODELS_CONFIG_H

#include "tensor/tensor.h"

// The most experts a token may be routed to: moe() keeps their ids and weights
// on the stack. A config asking for more is refused at load.
#define INFER_MAX_EXPERTS_USED 64

#include "base/status.h"

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

enum block_kind {
    BLOCK_PRE,        // x += attn(norm(x)); x += ffn(norm(x)) (post_norms: each output normed too)
    BLOCK_POST,       // x += norm(attn(x)); x += norm(ffn(x)): no norm before (OLMo 2)
    BLOCK_PARALLEL,   // x += attn(norm(x)) + ffn(norm(x)), one norm (Cohere)
    BLOCK_ENC_POST,   // x = norm(x + attn(x)); x = norm(x + ffn(x)) (BERT: attn_norm, then ffn_norm)
};

// What llama.cpp does differently per architecture on the GGUF path, and
// conventions of a family that are not numbers in config.json.
enum family_quirk {
    Q_QKV_BIAS = 1 << 0,          // q/k/v always have biases (Qwen2)
    Q_MOE_RENORM = 1 << 1,        // top-k expert weights renormalized by default (Mixtral)
    Q_SWA_QWEN = 1 << 2,          // windows only with use_sliding_window, from max_window_layers on (Qwen)
    Q_SWA_EVERY_LAYER = 1 << 3,   // GGUF: a window without a pattern slides every layer (Mistral as llama)
    Q_SWA_IGNORED = 1 << 4,       // GGUF: llama.cpp ignores the window (Phi-3)
    Q_SWA_DEFAULT_4096 = 1 << 5,  // GGUF: no window means 4096 on alternate layers (Gemma 2)
    Q_SWA_THETA_10K = 1 << 6,     // GGUF: sliding layers turn at base 10000, unscaled (Gemma 3/4)
    Q_ROT_SWA_FULL = 1 << 7,      // GGUF: sliding layers rotate their whole head by default (Gemma 4)
    Q_ROPE_FREQS_GLOBAL = 1 << 8, // GGUF: rope_freqs applies to global layers only (Gemma 4)
    Q_ATTN_CAP_50 = 1 << 9,       // GGUF: attention softcap defaults to 50 (Gemma 2)
    Q_FINAL_CAP_30 = 1 << 10,     // GGUF: final softcap defaults to 30 (Gemma 2/4)
    Q_GEMMA_SCALE = 1 << 11,      // scale 1/sqrt(query_pre_attn_scalar); GGUF: 1/sqrt(head_dim),
                                  // 1/sqrt(n_embd/n_head) for the 27B (Gemma 2/3)
    Q_GRANITE_SCALES = 1 << 12,   // GGUF: embedding/residual/attention/logit scales (Granite)
    Q_LOGIT_MUL = 1 << 13,        // GGUF: logit_scale multiplies (Cohere) rather than divides (Granite)
    Q_NO_KEY_LENGTH = 1 << 14,    // GGUF: no attention.key_length keys (GPT-2)
    Q_ROPE_ORIG_CTX = 1 << 15,    // GGUF: always an original context length and a window key (Phi-3)
    Q_EXPERT_FF_IS_FF = 1 << 16,  // GGUF: expert FFN size is feed_forward_length (llama's Mixtral)
    Q_PROPORTIONAL_ROPE = 1 << 17,// proportional RoPE of global layers as rope_freqs (Gemma 4)
    Q_GGUF_NO_SWA_PERIOD = 1 << 18, // GGUF: no default sliding period (Gemma 4 files carry the pattern)
};

// One row of the family table (arch.c): everything that differs between
// architectures and is not a number in config.json, and their names in
// llama.cpp's GGUF files. No code outside the table compares family names.
typedef struct {
    const char *model_type;  // config.json "model_type"
    const char *gguf_arch;   // llama.cpp's general.architecture (NULL: none)
    int gguf_loads_as;       // a GGUF of gguf_arch loads as this row (one per arch and MoE-ness)
    int norm;                // enum norm_kind
    int norm_plus_one;       // RMSNorm scales by (1 + w) (Gemma 2/3)
    int ffn;                 // enum ffn_kind
    int block;               // enum block_kind
    int post_norms;          // norms after attention and after the FFN (Gemma, OLMo 2)
    int qk_norm_full;        // q/k norms span the whole projection, not a head (OLMo 2)
    int embed_scale_sqrt;    // embeddings times sqrt(n_embd) (Gemma)
    int learned_pos;         // learned absolute positions, no RoPE (GPT-2)
    int conv1d;              // 2-D weights stored [in, out] (GPT-2 Conv1D)
    int moe;                 // enum moe_kind
    int v_norm;              // unscaled RMSNorm on values (Gemma 4)
    int attn_scale_one;      // attention scores are not scaled (Gemma 4: q/k norms do it)
    int default_act;         // enum act_kind when config.json names none
    int rope_pairs;          // the checkpoint rotates adjacent pairs (Cohere); else rotate_half
    int rope_normal;         // llama.cpp rotates adjacent pairs (its "normal" mode): GGUF Q/K rows
                             // are permuted from rotate_half order on conversion (llama, granite)
    int nope_global;         // full-attention layers have no RoPE (Cohere 2)
    int encoder;             // bidirectional attention over the whole sequence in one pass, no
                             // output head: the model makes embeddings, not text (BERT)
    int swa_period;          // without layer_types, layer i slides unless (i + 1) % period == 0
                             // (sliding_window_pattern overrides; 0: every layer has the window)
    int big_layers;          // GGUF, Q_GEMMA_SCALE: the 27B's layer count
    unsigned quirks;         // enum family_quirk
    const char *chat_template; // built-in chat template when the model has none (NULL: ChatML)
} family;

const family *family_find(const char *model_type);
// The row a GGUF of llama.cpp architecture `arch` loads as (with experts or
// not); NULL if none.
const family *family_find_gguf(const char *arch, int has_experts);
const char *family_gguf_list(void); // "llama, granite, ..." for messages
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
