// A loaded model: its config, its mapped tensors, and the canonical per-layer
// slots the forward pass reads. Every slot points into the mapped files.
#ifndef INFER_MODELS_MODEL_H
#define INFER_MODELS_MODEL_H

#include <pthread.h>

#include "models/config.h"
#include "models/tensor.h"


typedef struct {
    // attention: x (n_embd) -> q (n_head*hd), k, v (n_kv_head*hd) -> o (n_embd)
    const tensor *attn_norm, *attn_norm_b;   // (n_embd)
    weight wq, wk, wv;                       // (n_head*hd | n_kv*hd, n_embd)
    weight wqkv;                             // fused [q; k; v] rows (Phi-3, GPT-2)
    weight wo;                               // (n_embd, n_head*hd)
    const tensor *bq, *bk, *bv, *bqkv, *bo;  // biases, optional
    const tensor *q_norm, *k_norm;           // (hd) RMSNorm per head, optional
    const tensor *sinks;                     // (n_head) gpt-oss attention sinks
    const tensor *post_attn_norm;            // (n_embd) Gemma
    // feed-forward
    const tensor *ffn_norm, *ffn_norm_b;     // (n_embd)
    const tensor *post_ffn_norm;             // (n_embd) Gemma
    weight ffn_gate, ffn_up, ffn_down;       // (n_ff, n_embd), (n_embd, n_ff)
    weight ffn_gate_up;                      // fused [gate; up] rows (Phi-3)
    const tensor *ffn_up_b, *ffn_down_b;     // optional
    // mixture of experts: views of one expert each, n_expert of them
    const tensor *router, *router_b;         // (n_expert, n_embd), (n_expert)
    weight *exp_gate, *exp_up, *exp_gate_up, *exp_down;
    tensor *exp_gate_up_b, *exp_down_b;      // gpt-oss expert biases (views); gate_up interleaved (HF)
    tensor *exp_gate_b, *exp_up_b;           // gpt-oss gate and up biases, split (GGUF)
    // Gemma 4
    const tensor *layer_scalar;              // (1)
    weight ple_gate, ple_proj;               // (ple, n_embd), (n_embd, ple)
    const tensor *ple_norm;                  // (n_embd)
} layer_weights;

struct gguf_file;

typedef struct infer_model infer_model; // (as infer.h declares it)
struct infer_model {
    infer_config cfg;
    tensor_store store;
    struct gguf_file *gguf;                  // the mapped GGUF file (NULL for safetensors)
    struct tokenizer *tok;                   // built on first use (inference/text.c)
    int tok_loaded;                          // 1 once built
    char *chat_tmpl;                         // a checkpoint's chat template (HF directories)
    int chat_tmpl_loaded;
    struct gvocab *gvocab;                   // the vocabulary's trie for grammars, built on first use (inference/grammar.c)
    pthread_mutex_t lazy_mu;                 // guards the five fields above (contexts on many threads)
    char *path;
    double load_seconds;
    const tensor *tok_embd;                  // (n_vocab, n_embd)
    const tensor *pos_embd;                  // (n_ctx_train, n_embd) GPT-2, BERT
    const tensor *type_embd;                 // (type_vocab_size, n_embd) BERT: row 0 added to every token
    const tensor *embd_norm, *embd_norm_b;   // (n_embd) BERT: LayerNorm of the summed embeddings
    weight output;                           // (n_vocab, n_embd), tied: tok_embd
    const tensor *output_norm, *output_norm_b;
    const tensor *ple_embd;                  // (ple_vocab, n_layer*ple) Gemma 4
    weight ple_model_proj;                   // (n_layer*ple, n_embd)
    const tensor *ple_proj_norm;             // (ple)
    layer_weights *layers;                   // n_layer
    tensor *views;                           // storage of expert views
    int n_views, cap_views;
    int n_unused;                            // tensors no slot took
    void **packs;                            // the weights' packed copies (weight.pack), owned
    int n_packs;
    int packed;                              // 1 once made (model_ensure_packed: at a first CPU pass)
    // Quantized models (activations quantized to q8 as ggml does) also follow
    // ggml's CPU numerics elsewhere: K/V and q.k in f16, f16 attention
    // probabilities, GELU from an f16 table. Float models run exact f32.
    int ggml_numerics;
    // Per-layer feature rows for walk layers (an attached vindex), or NULL.
    struct walk_layer_s *walk;
    int walk_max_features;
    int threads;                             // the threads of its work outside a context (infer_model_set_threads; 0: 1)
    struct infer_vindex *vx;                 // the attached vindex (owned)
    int ffn_external;                        // the FFN is only in the vindex (a model loaded from one, or walk-only)
    // Tensor parallelism (models/shard.c): this process is rank tp_rank of
    // tp_world (1: the whole model); its output rows are [tp_v0, tp_v0 + tp_nv).
    int tp_rank, tp_world, tp_v0, tp_nv;
    int tp_layers;                           // 1: a pipeline split instead (llama.cpp's -sm layer): this rank
    int pp_l0, pp_l1;                        // runs layers [pp_l0, pp_l1) only
    struct comm *comm;                       // the ranks' communicator (owned), NULL when tp_world is 1
    struct nccl *nccl;                       // NCCL for GPU buffers (inference/parallel.c opens it at the first GPU pass, infer_model_free closes it), or NULL
    int nccl_tried;                          // ... and whether that was tried (nccl_why() said why not)
    char tp_transport[160];                  // "nccl 2.21.5", "shared memory (why not NCCL)", "tcp (...)" (infer_model_tp_transport)
    void **tp_keep;                          // the shard's tensors and copies (owned)
    int n_tp_keep, cap_tp_keep;
};

// Fills the slots from the store and checks every shape against the config.
infer_status model_bind(infer_model *m);
// Cuts the bound model to rank `rank` of `world`'s share (tensor parallel;
// shard.c says what each rank keeps); world 1 leaves it whole.
infer_status model_shard(infer_model *m, int rank, int world);
// ... or to its run of layers (a pipeline split): the weights of the others dropped.
infer_status model_split_layers(infer_model *m, int rank, int world);
// Sets each weight's numerics (weight.ggml), at load.
infer_status model_pack(infer_model *m);
// Packs the weights the CPU's packed kernels take (weight.pack; pack.h),
// once, before the first use of any on the CPU (thread-safe).
infer_status model_ensure_packed(infer_model *m);

// A GGUF file into m: metadata -> config (rope_freqs.weight folded into the
// rope tables), tensors -> store; embd: the token embedding to use instead of
// the file's (a vindex keeps it apart), or NULL.
infer_status model_load_gguf(infer_model *m, const char *path, const tensor *embd);
// An infer_model_spec into m: config.json's text -> config, its tensors
// declared without bytes (the store's fill makes them) and bound. Only the
// converter reads such a model (infer_convert_gguf_spec); dense models only.
infer_status model_from_spec(infer_model *m, const infer_model_spec *s);
// Frees what the models part made (store, slots, config, GGUF); not m itself.
void model_release(infer_model *m);

// The threads of a model's work outside a context (infer_model_set_threads).
static inline int model_threads(const infer_model *m) { return m->threads > 1 ? m->threads : 1; }

// What infer.h's infer_model_* report (inference/api_models.c): the file
// type as llama.cpp names it, parameters, bytes of tensor data, a
// description; every element of every tensor finite (else INFER_ERR_FORMAT).
const char *model_ftype(const infer_model *m);
int64_t model_n_params(const infer_model *m);
size_t model_tensor_bytes(const infer_model *m);
size_t model_describe(const infer_model *m, char *buf, size_t cap);
infer_status model_check_tensors(infer_model *m);

#endif

