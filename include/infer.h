// infer: a language-model inference engine.
//
// The public C API: opaque handles, one prefix, errors as values. A model is
// loaded from a Hugging Face directory (config.json + safetensors) or a GGUF
// file; a context holds the KV cache and scratch buffers of one generation
// stream.
#ifndef INFER_H
#define INFER_H

#include <stddef.h>
#include <stdint.h>

// Every function of the API is exported; the engine is built with hidden
// visibility, so nothing else of it is (no clash with other libraries' names).
#ifndef INFER_API
#if defined(__GNUC__) || defined(__clang__)
#define INFER_API __attribute__((visibility("default")))
#else
#define INFER_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

// (the engine's src/base/status.h holds the same block, tests/public_header.sh checks)
#ifndef INFER_STATUS_DEFINED
#define INFER_STATUS_DEFINED
typedef enum {           // append-only
    INFER_OK = 0,
    INFER_ERR_IO,          // a file could not be opened, mapped or read
    INFER_ERR_FORMAT,      // a file's contents are malformed or inconsistent
    INFER_ERR_UNSUPPORTED, // well-formed, but not something we run (architecture, dtype)
    INFER_ERR_ARG,         // a bad argument from the caller (ids out of range, ...)
    INFER_ERR_NOMEM,       // an allocation failed or would be unreasonably large
} infer_status;
#endif

typedef struct infer_model infer_model; // weights (mapped) + config, read-only
typedef struct infer_ctx infer_ctx;     // KV cache + scratch for one sequence

// The message of the last failure on this thread: names the file, tensor or
// field and what is wrong with it.
INFER_API const char *infer_last_error(void);
INFER_API const char *infer_status_name(infer_status st);

// Loads a model from a directory holding config.json and *.safetensors, or
// from a GGUF file (llama.cpp's metadata keys and tensor names).
// Where the environment names a tensor-parallel job (INFER_TP_WORLD > 1,
// INFER_TP_RANK, INFER_TP_ID, as `infer run --tp N` sets them for its
// ranks), it loads this rank's share, as infer_model_load_tp.
// INFER_TP_ADDR=host:port (rank 0's address, the same for every rank) makes
// the ranks meet over TCP instead of one host's shared memory: ranks on
// several hosts (rank 0 listens there, the others connect).
INFER_API infer_status infer_model_load(const char *path, infer_model **out);
// Tensor parallel (Megatron's split; one process a rank): rank `rank` of
// `world` keeps its share of the attention heads, the FFN's features and the
// output's vocabulary rows, and meets the other ranks of job `id` (letters,
// digits, '-', '_') in one host's shared memory (INFER_TP_ADDR set: over
// TCP), where each pass sums the attention's and the FFN's outputs and
// gathers the logits; every rank then holds the whole model's logits.
// world 1: the whole model.
INFER_API infer_status infer_model_load_tp(const char *path, int rank, int world, const char *id, infer_model **out);
// The same with a choice of split: "row" (the above) or "layer" (a pipeline,
// llama.cpp's -sm layer: rank r runs layers [r L/W, (r+1) L/W), the residual
// stream handed from rank to rank, the last rank's logits to all).
// INFER_TP_SPLIT in the environment chooses it for infer_model_load.
INFER_API infer_status infer_model_load_split(const char *path, const char *split, int rank, int world, const char *id,
                                              infer_model **out);
#define INFER_TP_MAX_RANKS 64
// How the ranks meet for a GPU's buffers, once a pass has run there: "nccl
// 2.21.5", or "shared memory (why not NCCL)" ("tcp (why not NCCL)" over
// TCP); "" before that, or for a model that is not split.
INFER_API const char *infer_model_tp_transport(const infer_model *model);
// This process's rank and the job's ranks (0 and 1 for a model not split).
INFER_API int infer_model_tp_rank(const infer_model *model);
INFER_API int infer_model_tp_world(const infer_model *model);
// Rank 0's `bytes` of buf to every rank of the model's job (a collective: each
// rank calls it at the same point; a model not split: nothing to do). For a
// program whose ranks follow rank 0's choices (infer serve: rank 0 takes the
// requests and tells the others what to evaluate).
INFER_API infer_status infer_tp_bcast(infer_model *model, void *buf, size_t bytes);
// A job id not in use on this host (for a launcher of ranks).
INFER_API void infer_tp_new_id(char *out, size_t cap);
INFER_API void infer_model_free(infer_model *model);

INFER_API int infer_model_n_vocab(const infer_model *model);
INFER_API int infer_model_n_layer(const infer_model *model);
INFER_API int infer_model_n_embd(const infer_model *model);
INFER_API const char *infer_model_arch(const infer_model *model);
// The file type as llama.cpp names it ("Q4_K - Medium", "BF16", ...) from a
// GGUF's general.file_type, else the dominant type of the matrices ("bf16").
INFER_API const char *infer_model_ftype(const infer_model *model);
// Threads of the work a model does outside a context: the vindex's lm_head
// lookups (infer_lm_head_*), infer_graph_auto's calibration (default 1).
INFER_API infer_status infer_model_set_threads(infer_model *model, int n);
INFER_API int infer_model_threads(const infer_model *model);
// Number of parameters, and bytes of tensor data.
INFER_API int64_t infer_model_n_params(const infer_model *model);
INFER_API size_t infer_model_tensor_bytes(const infer_model *model);
// End-of-generation token ids from the config (up to max, returns the count).
INFER_API int infer_model_eos(const infer_model *model, int32_t *ids, int max);
// Writes a human-readable description (architecture, config in effect,
// tensors by dtype, parameters, bytes mapped) to buf; returns its length.
INFER_API size_t infer_model_describe(const infer_model *model, char *buf, size_t cap);

// How a context is made (infer_ctx_create): the fields are
// llama_context_params' where llama.cpp has them; the setters below change a
// context's placement before its first evaluation.
typedef struct {
    int n_ctx;              // positions (0: the model's maximum, capped at 4096)
    int n_threads;          // the kernels' threads, the caller's among them (0: 1); each context owns its
                            // threads, so contexts run side by side without sharing them
    const char *backend;    // "cpu" (NULL: the default), "reference" or "cuda" (infer_ctx_set_backend)
    int n_gpu_layers;       // -ngl on a GPU backend (-1, the default: every layer there; infer_ctx_set_gpu_layers)
    const char *type_k;     // the KV cache's keys, "f32", "f16" or "q8_0" (NULL: the default; infer_ctx_set_kv_type)
    const char *type_v;     // its values, the same
    int deterministic;      // 1: a token's logits the same however its sequence's tokens are split into
                            // calls (and batched): on a CPU with AMX, no AMX prompt paths (their products and
                            // attention are not the decode kernels' floats; 2-3x faster prompts); on a GPU, a
                            // batch's sequences each computed as alone (by default a pass's products take all
                            // its rows as one). A CPU's sequences are batch-invariant either way.
                            // (infer_ctx_set_deterministic)
} infer_ctx_params;
// A context on the CPU, 1 thread, the model's maximum positions capped at 4096.
INFER_API infer_ctx_params infer_ctx_default_params(void);
// deterministic (infer_ctx_params); and whether a token's logits are the same however its
// sequence's tokens are split into calls: 1 on a CPU made deterministic or without the AMX
// prompt paths, 0 on a GPU (long runs on the tensor cores) or a CPU's AMX paths.
INFER_API infer_status infer_ctx_set_deterministic(infer_ctx *ctx, int on);
INFER_API int infer_ctx_split_invariant(const infer_ctx *ctx);
// The threads of a context's kernels (n_threads).
INFER_API infer_status infer_ctx_set_threads(infer_ctx *ctx, int n);
INFER_API int infer_ctx_threads(const infer_ctx *ctx);
// The backend that runs the context's forward pass: "cpu" (the default:
// SIMD kernels, threaded), "reference" (the scalar oracles, one thread;
// slow, for checking the others) or "cuda" (the first GPU; the context's KV
// cache moves there, so switch before its first evaluation). INFER_ERR_ARG
// for another name, INFER_ERR_UNSUPPORTED where the backend cannot run here
// or cannot run this model (the message says which).
INFER_API infer_status infer_ctx_set_backend(infer_ctx *ctx, const char *name);
INFER_API const char *infer_ctx_backend(const infer_ctx *ctx);
// Makes now what the context's first evaluation would make where it runs:
// the CPU's packed copies of the model's weights (once a model) when any of
// it runs on the CPU; a model that only runs on a GPU never makes them. For
// timing: call it after placing the context, before the clock starts.
INFER_API infer_status infer_ctx_prepare(infer_ctx *ctx);
// llama.cpp's -ngl: on a GPU backend ("cuda"), the last n layers run there and
// the first n_layer - n on the CPU (each side keeps the KV cache of its
// layers; the residual stream crosses once per pass); the final norm and the
// logits run on the GPU only when n > n_layer (so 99 is everything, as in
// llama.cpp). -1 (the default): everything on the context's backend. On a
// host backend the count is kept and has no effect (everything runs on the
// CPU). Set it before the first evaluation (INFER_ERR_ARG after); either
// before or after infer_ctx_set_backend (before: the device's memory is laid
// out once). INFER_ERR_UNSUPPORTED where a part would land where it cannot
// run (a vindex walk's FFN on the GPU).
INFER_API infer_status infer_ctx_set_gpu_layers(infer_ctx *ctx, int n);
// 1 when the context's layers run on two backends (infer_ctx_set_gpu_layers,
// pipelined layers): batched passes (infer_batch_eval) refuse it.
INFER_API int infer_ctx_split(const infer_ctx *ctx);
// How the KV cache stores keys (k) and values (v), as llama.cpp's -ctk/-ctv:
// "f32", "f16" or "q8_0" (blocks of 32 along each head; heads whose size is a
// multiple of 32); NULL or "" for the default: f16 where the model has
// llama.cpp's numerics (a GGUF: K and V are rounded to f16 before they are
// stored, so f16 holds them exactly and halves the cache), f32 for
// safetensors models (exact against transformers) and on a GPU. Set it
// before the first evaluation (INFER_ERR_ARG after); INFER_ERR_UNSUPPORTED
// for a type the context's backend does not keep (the CUDA backend's cache
// is f32). infer_ctx_kv_type names the type in use (v: 0 keys, 1 values);
// infer_ctx_kv_bytes_per_pos the cache's bytes per position, all layers.
INFER_API infer_status infer_ctx_set_kv_type(infer_ctx *ctx, const char *k, const char *v);
INFER_API const char *infer_ctx_kv_type(const infer_ctx *ctx, int v);
INFER_API size_t infer_ctx_kv_bytes_per_pos(const infer_ctx *ctx);
// Where the CPU kernels' threads run on a machine of several NUMA nodes, as
// llama.cpp's --numa: "distribute" (thread i on node i mod nodes), "isolate"
// (all on the node the call is made from), "numactl" (on the CPUs the process
// was given), "none" (the default: where the scheduler puts them). Process-wide:
// call it before making contexts (their threads are placed as they start).
INFER_API infer_status infer_numa_init(const char *strategy);
// The GPUs this build and machine can use (0: none), and a line saying which
// or why none ("NVIDIA H200", "built without CUDA ...", "no CUDA device: ...").
INFER_API int infer_gpu_count(void);
INFER_API const char *infer_gpu_status(void);
// Host memory for logits: page-locked where a GPU is present, so that the
// GPU's logits land in it at full speed (malloc's otherwise); NULL when none
// is left. Free it with infer_host_free.
INFER_API void *infer_host_alloc(size_t bytes);
INFER_API void infer_host_free(void *p);

// ---------------------------------------------------------------------------
// Text: the model's tokenizer (GGUF tokenizer.ggml.* metadata, or
// tokenizer.json beside a safetensors model), built on first use.

// ids: malloc'd, the caller frees. add_special: BOS/EOS as the vocabulary
// says; parse_special: text of special tokens ("<start_of_turn>") becomes them.
INFER_API infer_status infer_tokenize(infer_model *model, const char *text, size_t len, int add_special, int parse_special,
                            int32_t **ids, int *n_ids);
// text: malloc'd and NUL-terminated; special tokens are written unless skip_special.
INFER_API infer_status infer_detokenize(infer_model *model, const int32_t *ids, int n, int skip_special, char **text, size_t *len);
// End-of-generation ids: the config's eos plus the tokenizer's eos and
// end-of-turn (up to max; returns the count).
INFER_API int infer_model_eog(infer_model *model, int32_t *ids, int max);
// The chat template the model carries, or NULL.
INFER_API const char *infer_model_chat_template(infer_model *model);
// Text of one token (not NUL-terminated), NULL if out of range.
INFER_API const char *infer_token_text(infer_model *model, int32_t id, size_t *len);

// A vocabulary alone, as llama.cpp's vocab_only: a GGUF (one with only
// tokenizer.ggml.* metadata will do), a tokenizer.json, or a directory that
// holds one. Tokenizes as the model's tokenizer would.
typedef struct infer_vocab infer_vocab;
INFER_API infer_status infer_vocab_load(const char *path, infer_vocab **out);
INFER_API void infer_vocab_free(infer_vocab *vocab);
INFER_API infer_status infer_vocab_tokenize(const infer_vocab *vocab, const char *text, size_t len, int add_special,
                                  int parse_special, int32_t **ids, int *n_ids);
INFER_API infer_status infer_vocab_detokenize(const infer_vocab *vocab, const int32_t *ids, int n, int skip_special, char **text,
                                    size_t *len);
INFER_API int32_t infer_vocab_size(const infer_vocab *vocab);
// Text of one token as stored (not NUL-terminated), NULL if out of range.
INFER_API const char *infer_vocab_token(const infer_vocab *vocab, int32_t id, size_t *len);

// How many CPU products so far read a weight in its stored layout although
// its type has packed kernels on this CPU (the packs were not made before
// the product: a slow path taken by mistake). For tests; 0 is right.
INFER_API unsigned long infer_cpu_unpacked_products(void);

// Every element of every tensor finite (llama.cpp's --check-tensors; the
// small vectors -- norms, biases, scales -- are checked at every load):
// INFER_ERR_FORMAT naming the tensor and the element otherwise. Reads the
// whole file.
INFER_API infer_status infer_model_check_tensors(infer_model *model);

// Chat: a conversation rendered with the model's chat template (GGUF
// tokenizer.chat_template or the checkpoint's tokenizer_config.json); a model
// without one gets its family's built-in template (Gemma), else ChatML.
typedef struct {
    const char *role;     // "system", "user", "assistant"
    const char *content;
} infer_chat_message;

// out: malloc'd prompt text. Errors name the template construct, or carry the
// template's own message (e.g. roles that do not alternate).
INFER_API infer_status infer_chat_render(infer_model *model, const infer_chat_message *msgs, int n, int add_generation_prompt,
                               char **out);
// The conversation rendered and tokenized, the messages' content as text:
// only the template's own markup becomes special tokens (a user's
// "<|im_end|>" stays text and cannot close its turn). Otherwise the tokens of
// infer_tokenize(rendered, add_special 0, parse_special 1). INFER_ERR_ARG
// when a message holding a special token's text is one the template changes.
INFER_API infer_status infer_chat_tokenize(infer_model *model, const infer_chat_message *msgs, int n, int add_generation_prompt,
                                 int32_t **ids, int *n_ids);
// The same from OpenAI-style JSON text: messages an array of {"role",
// "content", "tool_calls", "tool_call_id", ...} objects, tools an array of
// {"type": "function", "function": {...}} or NULL, both given to the template
// as transformers' apply_chat_template(messages, tools=tools) does. Strings
// other than the messages' content that hold a special token's text are
// refused (INFER_ERR_ARG).
INFER_API infer_status infer_chat_tokenize_json(infer_model *model, const char *messages, const char *tools, int add_generation_prompt,
                                      int32_t **ids, int *n_ids);
// The template text infer_chat_render uses (the model's or its family's
// built-in one), or NULL for the built-in ChatML.
INFER_API const char *infer_chat_template(infer_model *model);
// Which template infer_chat_render uses: "model", "builtin:gemma" or "builtin:chatml".
INFER_API const char *infer_chat_template_source(infer_model *model);

// Forgets cached positions from n on (n <= n_past), so a conversation can be
// re-fed from where it changed.
INFER_API void infer_ctx_truncate(infer_ctx *ctx, int n);
// The memory a context made with params (NULL: the defaults) takes on the
// CPU: its KV cache, and everything (cache, scratch, attention scores for
// its threads).
INFER_API infer_status infer_ctx_memory(const infer_model *model, const infer_ctx_params *params, size_t *kv_bytes,
                                        size_t *total_bytes);

// dst takes src's first n positions (its KV cache): a shared prompt prefix
// evaluated once, continued by several sequences. Same model; n <= src's.
INFER_API infer_status infer_ctx_copy(infer_ctx *dst, const infer_ctx *src, int n);

// A context's first n positions saved to a file: ids[0, n) (the tokens they
// hold; the context does not keep them) and their KV cache, with the model's
// identity and the cache's types. The file appears whole or not at all
// (written beside it as path.tmp, synced, renamed). *bytes (NULL: unused):
// the file's size. Not for a context split over two devices or ranks.
INFER_API infer_status infer_ctx_state_save(infer_ctx *ctx, const char *path, const int32_t *ids, int n, size_t *bytes);
// Reads such a file into ctx from position 0 (what it held is forgotten):
// the tokens into ids (room for cap), their count into *n, ctx's n_past
// becomes *n. Another model's file, another cache type, a file cut short or
// changed: an error naming why, and ctx holds no positions (*n 0).
INFER_API infer_status infer_ctx_state_load(infer_ctx *ctx, const char *path, int32_t *ids, int cap, int *n, size_t *bytes);

// Batched evaluation: many sequences -- contexts of one model, each with its
// own KV cache and position -- advanced in shared passes that read every
// weight once for all of them (decode steps and prompt chunks may be mixed).
// Each sequence's logits are bit for bit those of infer_eval on it alone.
// Sequences come and go between calls: a context is a sequence (create, free,
// infer_ctx_truncate, infer_ctx_copy). The batch holds the pass's scratch and
// threads (1 until infer_batch_set_threads).
typedef struct infer_batch infer_batch;
INFER_API infer_status infer_batch_new(infer_model *model, infer_batch **out);
INFER_API void infer_batch_free(infer_batch *batch);
INFER_API infer_status infer_batch_set_threads(infer_batch *batch, int n);
// ctx[i] takes ids[i][0 .. n_ids[i]); logits[i]: NULL, or n_vocab floats for
// the logits after ctx[i]'s last token (logits itself may be NULL). On an
// error no sequence has advanced.
INFER_API infer_status infer_batch_eval(infer_batch *batch, infer_ctx *const *ctx, int n, const int32_t *const *ids,
                              const int *n_ids, float *const *logits);
// As infer_batch_eval, and tok[i] (tok itself may be NULL): NULL, or where
// ctx[i]'s greedy next token goes -- the first index of the largest of the
// logits after its last token, or -1 when they hold a NaN (that sequence's
// numbers are broken; the others' are not), picked where the logits are (on
// a GPU only the ids come back; logits[i] may be NULL).
INFER_API infer_status infer_batch_eval_tokens(infer_batch *batch, infer_ctx *const *ctx, int n, const int32_t *const *ids,
                                     const int *n_ids, float *const *logits, int32_t *const *tok);

// As infer_batch_eval_tokens, and where all (itself may be NULL) has all[i]
// set, logits[i] (NULL, or n_ids[i] x n_vocab floats) gets the logits after
// each of ctx[i]'s tokens, each row bit for bit infer_eval's of that token
// alone (tok[i] is then not written): speculative decoding's check of a
// sequence's draft in a step of many sequences.
INFER_API infer_status infer_batch_eval_rows(infer_batch *batch, infer_ctx *const *ctx, int n, const int32_t *const *ids,
                                             const int *n_ids, float *const *logits, int32_t *const *tok, const int *all);

// A context (a sequence's KV cache, scratch and threads) made and placed as
// params say (NULL: infer_ctx_default_params()); INFER_ERR_ARG or
// INFER_ERR_UNSUPPORTED naming what cannot be honoured.
INFER_API infer_status infer_ctx_create(infer_model *model, const infer_ctx_params *params, infer_ctx **out);
// infer_ctx_create with the defaults and n_ctx positions.
INFER_API infer_status infer_ctx_new(infer_model *model, int n_ctx, infer_ctx **out);
INFER_API void infer_ctx_free(infer_ctx *ctx);
INFER_API void infer_ctx_reset(infer_ctx *ctx);   // forget all cached positions
INFER_API int infer_ctx_n_past(const infer_ctx *ctx);
INFER_API int infer_ctx_n_ctx(const infer_ctx *ctx);
// A GPU context's KV cache may take memory as its sequence grows (the CUDA
// backend under INFER_CUDA_KV_VM=1: addresses for n_ctx positions, memory
// 256 positions at a time as passes reach them); elsewhere it holds n_ctx
// positions from the start. infer_ctx_kv_reserve backs the first n positions
// now (INFER_ERR_NOMEM, and nothing lost, where the GPU's memory is taken: a
// server holds the request back); infer_ctx_kv_trim gives back what lies
// past the cached positions (after infer_ctx_reset: all of it);
// infer_ctx_kv_backed, the cache's bytes held now.
INFER_API infer_status infer_ctx_kv_reserve(infer_ctx *ctx, int n);
INFER_API void infer_ctx_kv_trim(infer_ctx *ctx);
INFER_API size_t infer_ctx_kv_backed(const infer_ctx *ctx);

// Runs n tokens after the cached positions and appends them to the cache.
// logits: NULL, or room for n x n_vocab floats (every position), or, with
// last_only, room for n_vocab floats (the last position).
INFER_API infer_status infer_eval(infer_ctx *ctx, const int32_t *ids, int n, float *logits, int last_only);

// As infer_eval, and also records the residual stream at the last position:
// hidden gets (n_layer + 1) x n_embd floats: row 0 the embedding output, row i
// the output of layer i, the last row after the final norm (transformers'
// convention for output_hidden_states). Under a graph with cached layers,
// rows 0..n_cached hold the residual the cached layers hand on.
INFER_API infer_status infer_eval_hidden(infer_ctx *ctx, const int32_t *ids, int n, float *logits, int last_only, float *hidden);

// As infer_eval without logits, and also records what each layer's FFN reads
// at the last position (the residual after its pre-FFN norm): ffn_in gets
// n_layer x n_embd floats (the input infer_walk_features takes).
INFER_API infer_status infer_eval_ffn_input(infer_ctx *ctx, const int32_t *ids, int n, float *ffn_in);

// Embeddings: one vector of n_embd floats for a whole sequence, pooled from
// the states after the final norm of every position (an encoder's, BERT,
// after its last layer). An encoder's contexts make only embeddings: their
// infer_eval refuses (INFER_ERR_UNSUPPORTED).
typedef enum {              // append-only
    INFER_POOLING_MODEL,    // the model's own (infer_model_embed_defaults)
    INFER_POOLING_MEAN,     // the mean over the positions
    INFER_POOLING_CLS,      // the first position's ([CLS])
    INFER_POOLING_LAST,     // the last position's (a decoder's: the one that saw every token)
} infer_pooling;
// 1 when the model is an encoder (BERT): it makes embeddings, not text.
INFER_API int infer_model_is_encoder(const infer_model *model);
// The model's pooling and whether its embeddings are L2-normalized: from
// sentence-transformers' modules.json and 1_Pooling/config.json in a Hugging
// Face directory (mean and normalized when they are absent), for a decoder
// the last position's, normalized (as llama.cpp's llama-embedding).
// INFER_ERR_FORMAT / _UNSUPPORTED naming the file and field otherwise.
INFER_API infer_status infer_model_embed_defaults(infer_model *model, infer_pooling *pooling, int *normalize);
// The embedding of the n tokens ids (the whole sequence, n <= the context's
// positions and at most one pass's 512 rows) into out (n_embd floats),
// pooled, and with normalize divided by its L2 norm. The context's cache is
// reset before and after. INFER_ERR_ARG for n out of range or an id outside
// the vocabulary.
INFER_API infer_status infer_embed(infer_ctx *ctx, const int32_t *ids, int n, infer_pooling pooling, int normalize,
                                   float *out);

// Profiling: where a pass's time goes. While on, a context adds the seconds
// of each phase of its passes (all layers together) to its totals; turning
// it on clears them.
typedef enum {              // append-only
    INFER_PHASE_EMBED,      // the token embedding
    INFER_PHASE_NORM,       // the layers' norms
    INFER_PHASE_QKV,        // Q, K, V projections
    INFER_PHASE_ROPE,
    INFER_PHASE_ATTN,       // scores, softmax, weighted V
    INFER_PHASE_O,          // the attention output projection
    INFER_PHASE_GATE_UP,    // FFN gate and up projections
    INFER_PHASE_ACT,        // the FFN activation
    INFER_PHASE_DOWN,       // the FFN down projection
    INFER_PHASE_RESIDUAL,
    INFER_PHASE_MOE,        // router and experts
    INFER_PHASE_PLE,        // Gemma 4 per-layer inputs
    INFER_PHASE_WALK,       // the walk FFN
    INFER_PHASE_LOGITS,     // final norm and logits
    INFER_PHASE_COUNT
} infer_phase;

INFER_API void infer_ctx_profile(infer_ctx *ctx, int on);
// Seconds spent in a phase since profiling was turned on.
INFER_API double infer_ctx_profile_seconds(const infer_ctx *ctx, infer_phase phase);
// "QKV projection", ...; NULL for a phase out of range.
INFER_API const char *infer_phase_name(infer_phase phase);

// ---------------------------------------------------------------------------
// The vindex (infer extract): the model's FFN laid out per feature.

// Attaches a vindex made from this model: its feature rows serve walk layers.
// (A vindex directory given to infer_model_load is a whole model itself.)
INFER_API infer_status infer_model_attach_vindex(infer_model *model, const char *dir);
// Features per layer that walk layers can use (0 without a vindex).
INFER_API int infer_model_walk_features(const infer_model *model);
// Walk-only: drops the model's own FFN weights (their mapped pages go back
// to the kernel); every layer's FFN then comes from the vindex, dense layers
// walking all features. *dropped: bytes released.
INFER_API infer_status infer_model_walk_only(infer_model *model, size_t *dropped);

// A vindex's own files: index.json, byte ranges and sha256 of every file (the
// message names the first that does not match).
INFER_API infer_status infer_vindex_verify(const char *dir);

// A vindex opened alone (every count, type and byte range checked; files
// mapped, not hashed), or the one a model walks with.
typedef struct infer_vindex infer_vindex;
INFER_API infer_status infer_vindex_open(const char *dir, infer_vindex **out);
INFER_API void infer_vindex_close(infer_vindex *vx);
// The vindex attached to the model, or the one it was loaded from; NULL if none.
INFER_API const infer_vindex *infer_model_vindex(const infer_model *model);
INFER_API int infer_vindex_n_layer(const infer_vindex *vx);
// Features of a layer (0 for a layer out of range).
INFER_API int infer_vindex_n_features(const infer_vindex *vx, int layer);
// The tokens a feature's down vector writes most (down_meta): their count,
// with *ids and *scores (lm_head row . down vector) pointing into the vindex,
// by score, descending. 0 when none are stored or layer/feature are out of range.
INFER_API int infer_vindex_feature_tokens(const infer_vindex *vx, int layer, int feature, const int32_t **ids,
                                          const float **scores);

// Walk queries: which features fire for an FFN input, and how much.
typedef struct {
    int32_t id;  // the feature's index in its layer
    float score; // gate . x with the vindex's gate vectors (what the KNN ranks by |score|)
    float act;   // its activation from its FFN rows: act(gate . x) * (up . x); a plain MLP: act(up . x)
    float down;  // the length of its down vector (|act| * down: the length of what it adds to the output)
} infer_feature;

// The k features of a layer whose gate vectors match x best (x: n_embd, the
// layer's FFN input, see infer_eval_ffn_input), by |score| descending, ties
// by id. 1 <= k <= the layer's features. Needs the model's vindex.
INFER_API infer_status infer_walk_features(const infer_model *model, int layer, const float *x, int k,
                                           infer_feature *out);

// Gate KNN on its own: n gate vectors of n_embd encoded from f32 rows to type
// (INFER_TYPE_F32, _F16 or _Q4_0; n_embd a whole number of its blocks).
// Scores run on one thread until infer_knn_set_threads.
typedef struct infer_knn infer_knn;
INFER_API infer_status infer_knn_new(int type, const float *rows, int n, int n_embd, infer_knn **out);
INFER_API void infer_knn_free(infer_knn *knn);
INFER_API infer_status infer_knn_set_threads(infer_knn *knn, int n);
// Bytes of the encoded gate vectors.
INFER_API size_t infer_knn_bytes(const infer_knn *knn);
// scores (n) = gate vectors . x (n_embd).
INFER_API void infer_knn_scores(infer_knn *knn, const float *x, float *scores);
// Where the gate vectors are scored: "cpu" (the default) or "cuda" (copied to
// the first GPU; the scores and the top-K run there).
INFER_API infer_status infer_knn_set_device(infer_knn *knn, const char *device);
// idx[0..k) = the k vectors of largest |score| for x, ascending (the same as
// infer_knn_scores then infer_topk_abs); idx has room for n.
INFER_API infer_status infer_knn_topk(infer_knn *knn, const float *x, int k, int32_t *idx);
// The k indices of largest |s[i]| (infer_topk_max: largest s[i]) among n,
// ascending by index; ties go to the lower index. k <= n; idx has room for n.
INFER_API void infer_topk_abs(const float *s, int n, int k, int32_t *idx);
INFER_API void infer_topk_max(const float *s, int n, int k, int32_t *idx);

// lm_head top-K: next-token candidates from the vindex's quantized output
// head. hidden: n_embd, after the final norm (infer_eval_hidden's last row).
// ids (room for n_vocab) gets the k ids of largest approximate logits,
// ascending. Needs the model's vindex.
INFER_API infer_status infer_lm_head_topk(const infer_model *model, const float *hidden, int k, int32_t *ids);
// As infer_lm_head_topk from the vindex's lm_head index (lm_index.bin, made
// by extraction with lm_clusters): the centroids scored, then the model's own
// head rows of the `probes` best clusters; ids: the k best by score (then the
// lower id), best first. INFER_ERR_ARG without an index.
INFER_API infer_status infer_lm_head_topk_index(const infer_model *model, const float *hidden, int k, int probes, int32_t *ids);
// The same, and logits[i]: ids[i]'s logit as the model's forward makes it
// from its own head (the logit scale, the final softcap), for sampling among
// the k (the other tokens' logits are then taken as -inf).
INFER_API infer_status infer_lm_head_index_logits(const infer_model *model, const float *hidden, int k, int probes, int32_t *ids,
                                                  float *logits);
// The index's clusters (0: the vindex has none).
INFER_API int infer_lm_head_index_clusters(const infer_model *model);
// logits (n_vocab) = the model's own output head . hidden with the engine's
// kernels and the model's threads (infer_model_set_threads; the product alone: no scale or
// softcap), for timing and checking the index against.
INFER_API infer_status infer_lm_head_dense(const infer_model *model, const float *hidden, float *logits);
// ids (k) = the k rows of the model's own head that score highest against
// hidden, best first (score, then the lower id): the dense head's answer to
// the index's lookup, on the device infer_lm_head_set_device chose.
INFER_API infer_status infer_lm_head_topk_dense(const infer_model *model, const float *hidden, int k, int32_t *ids);
// Where the head's lookups run: "cpu" (the default) or "cuda" (the model's
// head and the vindex's lm_head index copied to the first GPU; the products
// and top-k there, k ids back): infer_lm_head_topk_dense and
// infer_lm_head_topk_index (and _index_logits) then run there. Needs a vindex.
INFER_API infer_status infer_lm_head_set_device(infer_model *model, const char *device);
// The logits of n chosen ids from the model's own output head (scalar dot
// products, times the family's logit scale, before any final softcap).
INFER_API infer_status infer_lm_head_logits(const infer_model *model, const float *hidden, const int32_t *ids, int n,
                                            float *logits);

// Making a vindex (infer extract) from a dense model.
typedef void (*infer_progress_fn)(void *user, const char *stage, int64_t done, int64_t total);
typedef struct {
    int gate_type;              // INFER_TYPE_F32, _F16 (default) or _Q4_0
    int ffn_type;               // any type with an encoder (default INFER_TYPE_Q8_0)
    int lm_head_type;           // any type with an encoder (default INFER_TYPE_Q4_K)
    int down_top;               // top tokens per feature in down_meta (default 10; 0: none)
    int lm_clusters;            // lm_index.bin: the head's rows in this many k-means clusters (0: none, the
                                // default; -1: V / 64), for infer_lm_head_topk_index
    infer_progress_fn progress; // called as work advances: stage ("ffn", "embeddings", "lm_head",
                                // "down_meta", "weights.gguf", "index.json"), done of total; may be NULL
    void *user;
    int threads;                // the kernels' threads (default 1)
} infer_extract_opts;

// What was written: a type whose blocks do not divide a row falls back as
// llama.cpp does (q4_K -> q5_0, ...), so the types may differ from the options.
typedef struct {
    int gate_type, ffn_type, lm_head_type, embd_type;
    double seconds;           // the whole extraction
    double seconds_down_meta; // of which down_meta
    uint64_t bytes;           // all files together
} infer_extract_info;

INFER_API infer_extract_opts infer_extract_default(void);
// Writes the vindex of the model into dir (made if missing; an earlier
// vindex there is replaced, index.json last). info may be NULL.
INFER_API infer_status infer_vindex_extract(const infer_model *model, const char *dir, const infer_extract_opts *opts,
                                            infer_extract_info *info);

// ---------------------------------------------------------------------------
// Layer graphs: how each layer advances the residual stream. "dense" (the
// default) is exact; the others are approximations, measured by the caller
// against dense:
//   walk[:A-B][@K|@P%]   the FFN from the top K features (by |gate . x|) of an
//                        attached vindex (default_k when no @; <= 0: all)
//   cached:0-B           layers 0..B replaced by the residual and K/V that a
//                        template prompt left there (infer_ctx_set_template);
//                        valid only for that template's tokens and positions
//   pipelined[:A-B]      dense, with the attention on the CPU and the FFN on the
//                        GPU (needs a GPU backend, set before the graph; refused
//                        on the CPU; before the first evaluation)
// Items are joined by commas, e.g. "cached:0-12,walk:13-23@10%,dense:24-33".
INFER_API infer_status infer_ctx_set_graph(infer_ctx *ctx, const char *spec, int default_k);
// Records the template for the graph's cached layers (a dense pass over ids);
// the context is left empty.
INFER_API infer_status infer_ctx_set_template(infer_ctx *ctx, const int32_t *ids, int n);
// Layers the graph takes from the template (0: none).
INFER_API int infer_ctx_n_cached(const infer_ctx *ctx);

// Adaptive graphs ("auto:KL"): picks, layer by layer, dense or walk@P% (P
// among 1, 2, 5, 10, 25, 50; by |gate . x|, or by contribution, walkc, with
// by_contrib) for a model with an attached vindex, so that the mean KL(dense
// || graph) of the next-token distributions over the calibration tokens ids
// (teacher-forced, every position) stays within kl_budget. The FFN's decode
// time of each P is measured against dense's (a P no faster is no
// candidate); each layer's KL is measured with that layer alone walking at
// each candidate; layers are moved to faster candidates greedily, the most
// time saved per KL added first, while the sum of their KLs fits the budget;
// then the whole choice is measured, and the layers last moved go back to
// dense until it fits. n * vocabulary is at most 256 MB of floats.
typedef struct {
    char spec[2048];       // the chosen graph, for infer_ctx_set_graph ("dense": no layer walks)
    double kl;             // its mean KL against dense on the calibration tokens, measured
    double kl_sum;         // the sum of its layers' KLs alone (what the choice predicted)
    double dense_ffn_us;   // the FFN's decode time a layer a token, dense (µs)
    double ffn_us;         // the same for the chosen graph (the layers' times from pct_ffn_us)
    int walked;            // layers that walk
    int positions;         // calibration positions compared
    int passes;            // calibration passes run
    int n_pct;             // the percentages tried and each one's FFN time (every layer at P)
    int pct[8];
    double pct_ffn_us[8];
} infer_graph_auto_info;
// layer_kl (may be NULL): n_layer x 6 doubles, [l * 6 + j] layer l's KL
// walking alone at pct[j], -1 where pct[j] was no candidate.
INFER_API infer_status infer_graph_auto(infer_model *model, const int32_t *ids, int n, double kl_budget, int by_contrib,
                                        infer_graph_auto_info *info, double *layer_kl);

// ---------------------------------------------------------------------------
// Storage types, numbered as ggml numbers them (GGUF's tensor types).

enum {                      // append-only
    INFER_TYPE_F32 = 0,
    INFER_TYPE_F16 = 1,
    INFER_TYPE_Q4_0 = 2,
    INFER_TYPE_Q4_1 = 3,
    INFER_TYPE_Q5_0 = 6,
    INFER_TYPE_Q5_1 = 7,
    INFER_TYPE_Q8_0 = 8,
    INFER_TYPE_Q2_K = 10,
    INFER_TYPE_Q3_K = 11,
    INFER_TYPE_Q4_K = 12,
    INFER_TYPE_Q5_K = 13,
    INFER_TYPE_Q6_K = 14,
    INFER_TYPE_BF16 = 30,
    INFER_TYPE_MXFP4 = 39,
};

// ggml's name of a type ("q4_K"), or NULL for one this build does not know.
INFER_API const char *infer_type_name(int type);
// Elements per block (1 for f32, f16, bf16), or 0 for an unknown type.
INFER_API int infer_type_block_size(int type);

// ---------------------------------------------------------------------------
// Writing GGUF files. ftype names a mix of storage types as llama.cpp's tools
// do (f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k, ...): each tensor's
// type as llama-quantize picks it for that file type.

// "f32, f16, ..." (for messages), and whether a name is one of them.
INFER_API const char *infer_ftype_names(void);
INFER_API int infer_ftype_known(const char *ftype);
// The model (normally a Hugging Face checkpoint) as llama.cpp's
// convert_hf_to_gguf.py writes it, matrices in ftype.
INFER_API infer_status infer_convert_gguf(const infer_model *model, const char *path, const char *ftype);
// ... with the tokenizer.* metadata of another GGUF (vocab_from; its token
// count must be the model's), so the file tokenizes text: a vocabulary for
// `infer synth`'s random weights, or for a checkpoint whose tokenizer is elsewhere.
INFER_API infer_status infer_convert_gguf_vocab(const infer_model *model, const char *path, const char *ftype, const char *vocab_from);
// A model whose weights are made as they are written, for files of weights no
// checkpoint holds (infer synth's random weights): a Hugging Face config.json's
// text and its tensors' names, types and shapes, whose bytes fill makes one
// tensor at a time, just before the converter reads it (freed after), so
// neither the disk nor memory ever holds the model. Dense models only.
// (the engine's src/models/spec.h holds the same block, tests/public_header.sh checks)
#ifndef INFER_MODEL_SPEC_DEFINED
#define INFER_MODEL_SPEC_DEFINED
typedef struct {
    const char *name;  // Hugging Face's: "model.layers.0.mlp.up_proj.weight"
    int type;          // INFER_TYPE_BF16, _F16 or _F32
    int nd;            // 1 to 4
    int64_t shape[4];  // outermost first, as PyTorch and safetensors list it
} infer_tensor_spec;
// Writes tensor `name`'s nbytes bytes (its type, row-major) to dst; 0 on success.
typedef int (*infer_fill_fn)(void *user, const char *name, void *dst, size_t nbytes);
typedef struct {
    const char *name;                 // general.name
    const char *config;               // config.json's text
    const infer_tensor_spec *tensors;
    int n_tensors;
    infer_fill_fn fill;
    void *user;                       // fill's
} infer_model_spec;
#endif
// The spec's model written as infer_convert_gguf_vocab writes a checkpoint's:
// the same file, byte for byte, as a checkpoint of those bytes named spec->name.
INFER_API infer_status infer_convert_gguf_spec(const infer_model_spec *spec, const char *path, const char *ftype,
                                               const char *vocab_from);
// A model loaded from a GGUF file, its matrices re-encoded to ftype as
// llama-quantize does.
INFER_API infer_status infer_quantize_gguf(const infer_model *model, const char *path, const char *ftype);
// Files are written whole or not at all: under a temporary name beside the
// destination, renamed into place when complete (a vindex: a staging
// directory). For a signal handler: removes what the writes in progress have
// written so far (async-signal-safe); the destinations keep their old files.
INFER_API void infer_abandon_writes(void);

// ---------------------------------------------------------------------------
// Sampling (llama.cpp's chain and defaults)

typedef struct {
    float temp;              // 0.8; <= 0: greedy (argmax)
    int top_k;               // 40; <= 0: off
    float top_p;             // 0.95; >= 1: off
    float min_p;             // 0.05; <= 0: off
    float repeat_penalty;    // 1.0 (off); > 1 discourages the last repeat_last_n tokens
    int repeat_last_n;       // 64
    float presence_penalty;  // 0.0
    float frequency_penalty; // 0.0
    uint64_t seed;           // random stream
} infer_sampling;

INFER_API infer_sampling infer_sampling_default(void);

typedef struct infer_sampler infer_sampler;
INFER_API infer_status infer_sampler_new(const infer_sampling *params, int n_vocab, infer_sampler **out);
INFER_API void infer_sampler_free(infer_sampler *s);
// Picks the next token from logits (n_vocab) given the tokens so far (for the
// penalties). Does not modify logits. -1 (infer_last_error says why) when
// they hold a NaN, or when every one is -inf; a +inf logit is larger than
// every number (the +inf ones share the draw).
INFER_API int32_t infer_sample(infer_sampler *s, const float *logits, const int32_t *history, int n_history);
// 1 when these settings always pick the largest logit (temperature <= 0, no
// penalties): infer_batch_eval_tokens' greedy tokens are then infer_sample's.
INFER_API int infer_sampling_greedy(const infer_sampling *params);

// ---------------------------------------------------------------------------
// Speculative decoding: draft tokens checked by the model in one pass of
// several rows, the ones it picks kept (src/inference/speculate.c).

// Prompt lookup: the longest suffix of hist[0..n) of n_max down to n_min
// tokens that occurred earlier in hist (its most recent occurrence), and the
// k tokens that followed that occurrence -- copied on into the draft itself
// where they run past n (so a repeating period shorter than k repeats) --
// go to draft (room for k). Returns k, or 0 when no suffix of those lengths
// occurred before (or the arguments make no sense: n_min < 1, ...).
INFER_API int infer_spec_draft_ngram(const int32_t *hist, int n, int n_min, int n_max, int k, int32_t *draft);
// The check: logits holds k + 1 rows of n_vocab, row j the logits after the
// tokens before draft[j] (row 0: after hist's last token, already evaluated
// with the draft in one pass). Row j's token is infer_sample(s, row j, hist,
// n_hist + j), as decoding alone would draw it; draft[j] is accepted while it
// is that token. out (room for k + 1) and hist[n_hist ..] (room for k + 1
// more) get the accepted draft tokens and the token after them (the model's
// own at the first rejection, or the one after the whole draft). Returns
// their count (1 to k + 1), or -1 (infer_last_error) where a row holds NaN.
// Sampled, the draw that lands on d is the rule "accept d with probability
// p(d), else draw from p without d" for a deterministic drafter, and the text
// is the one decoding alone writes with the same seed.
INFER_API int infer_spec_accept(infer_sampler *s, const float *logits, int n_vocab, const int32_t *draft, int k, int32_t *hist,
                                int n_hist, int32_t *out);

// A draft model's drafter: a small model of the same vocabulary (every
// shared token id the same text, at most 128 tokens more or fewer; else
// INFER_ERR_ARG saying where they differ)
// guesses greedily in its own context dctx (of draft, placed as the caller
// likes; the caller frees it after the drafter), which keeps what it has seen
// so each draft evaluates only the tokens new since the last. Greedy guesses
// are a deterministic drafter's, so infer_spec_accept's rule holds as it is.
typedef struct infer_drafter infer_drafter;
INFER_API infer_status infer_drafter_new(infer_model *draft, infer_ctx *dctx, infer_model *target, infer_drafter **out);
INFER_API void infer_drafter_free(infer_drafter *d);
// Up to k tokens after hist[0..n) into draft: the draft model's most likely
// next tokens, ending early where the next one's probability falls under
// p_min (the first is always given) or its id is not the target's. Returns
// their count (0 when the draft context is full), or -1 (infer_last_error).
INFER_API int infer_drafter_draft(infer_drafter *d, const int32_t *hist, int n, int k, float p_min, int32_t *draft);

// ---------------------------------------------------------------------------
// Constrained generation: a grammar the generated text must match (as
// llama.cpp's grammars: GBNF, or a JSON Schema compiled to one). The text is
// the tokens' decoded bytes, one after another; control and other special
// tokens never match, end-of-generation tokens only where the text may end.

typedef struct infer_grammar infer_grammar;
// schema: JSON Schema text, or NULL for any JSON object (response_format
// json_object). INFER_ERR_UNSUPPORTED names a keyword the compiler does not
// handle (e.g. "pattern"), INFER_ERR_ARG a malformed schema.
INFER_API infer_status infer_grammar_from_json_schema(infer_model *model, const char *schema, infer_grammar **out);
// gbnf: llama.cpp's grammar text; root: the start rule (NULL: "root").
INFER_API infer_status infer_grammar_from_gbnf(infer_model *model, const char *gbnf, const char *root, infer_grammar **out);
INFER_API void infer_grammar_free(infer_grammar *g);
// Sets to -INFINITY the logits (n_vocab) of tokens that cannot continue the
// text; returns how many tokens remain (0: none can, the grammar is stuck),
// or -1 when finding them costs more than the grammar's work limit
// (infer_last_error says so). The work of each token is bounded: a grammar
// whose matching would explode is refused when made, or fails here.
INFER_API int infer_grammar_mask(infer_grammar *g, float *logits);
// The costly part of infer_grammar_mask for the text so far, done ahead
// (e.g. on another thread while the model computes the logits): the next
// mask and infer_grammar_allows only look it up. INFER_ERR_ARG past the work
// limit. A grammar is used by one thread at a time.
INFER_API infer_status infer_grammar_prepare(infer_grammar *g);
// 1 when the next mask is known (infer_grammar_prepare has run for the text
// so far, or a mask was made since): infer_grammar_mask then only applies it.
INFER_API int infer_grammar_ready(const infer_grammar *g);
// 1 if `token` may come next (cheap: check the sampled token first, mask
// only when it is rejected, as llama.cpp does).
INFER_API int infer_grammar_allows(infer_grammar *g, int32_t token);
// Advances past a generated token (INFER_ERR_ARG if it is not allowed).
INFER_API infer_status infer_grammar_accept(infer_grammar *g, int32_t token);
// 1 when the text so far is a complete match and nothing but
// end-of-generation may follow.
INFER_API int infer_grammar_complete(const infer_grammar *g);

#ifdef __cplusplus
}
#endif
#endif
