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

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {           // append-only
    INFER_OK = 0,
    INFER_ERR_IO,          // a file could not be opened, mapped or read
    INFER_ERR_FORMAT,      // a file's contents are malformed or inconsistent
    INFER_ERR_UNSUPPORTED, // well-formed, but not something we run (architecture, dtype)
    INFER_ERR_ARG,         // a bad argument from the caller (ids out of range, ...)
    INFER_ERR_NOMEM,       // an allocation failed or would be unreasonably large
} infer_status;

typedef struct infer_model infer_model; // weights (mapped) + config, read-only
typedef struct infer_ctx infer_ctx;     // KV cache + scratch for one sequence

// The message of the last failure on this thread: names the file, tensor or
// field and what is wrong with it.
const char *infer_last_error(void);
const char *infer_status_name(infer_status st);

// Loads a model from a directory holding config.json and *.safetensors, or
// from a GGUF file (llama.cpp's metadata keys and tensor names).
infer_status infer_model_load(const char *path, infer_model **out);
void infer_model_free(infer_model *model);

int infer_model_n_vocab(const infer_model *model);
int infer_model_n_layer(const infer_model *model);
int infer_model_n_embd(const infer_model *model);
const char *infer_model_arch(const infer_model *model);
// The file type as llama.cpp names it ("Q4_K - Medium", "BF16", ...) from a
// GGUF's general.file_type, else the dominant type of the matrices ("bf16").
const char *infer_model_ftype(const infer_model *model);
// Number of parameters, and bytes of tensor data.
int64_t infer_model_n_params(const infer_model *model);
size_t infer_model_tensor_bytes(const infer_model *model);
// End-of-generation token ids from the config (up to max, returns the count).
int infer_model_eos(const infer_model *model, int32_t *ids, int max);
// Writes a human-readable description (architecture, config in effect,
// tensors by dtype, parameters, bytes mapped) to buf; returns its length.
size_t infer_model_describe(const infer_model *model, char *buf, size_t cap);

// Threads used by the kernels (default 1); the caller's thread is one of them.
// infer_set_threads sets the count contexts (and extractions) start with; each
// context owns its threads, so contexts run side by side without sharing them.
void infer_set_threads(int n);
int infer_get_threads(void);
infer_status infer_ctx_set_threads(infer_ctx *ctx, int n);
int infer_ctx_threads(const infer_ctx *ctx);

// ---------------------------------------------------------------------------
// Text: the model's tokenizer (GGUF tokenizer.ggml.* metadata, or
// tokenizer.json beside a safetensors model), built on first use.

// ids: malloc'd, the caller frees. add_special: BOS/EOS as the vocabulary
// says; parse_special: text of special tokens ("<start_of_turn>") becomes them.
infer_status infer_tokenize(infer_model *model, const char *text, size_t len, int add_special, int parse_special,
                            int32_t **ids, int *n_ids);
// text: malloc'd and NUL-terminated; special tokens are written unless skip_special.
infer_status infer_detokenize(infer_model *model, const int32_t *ids, int n, int skip_special, char **text, size_t *len);
// End-of-generation ids: the config's eos plus the tokenizer's eos and
// end-of-turn (up to max; returns the count).
int infer_model_eog(infer_model *model, int32_t *ids, int max);
// The chat template the model carries, or NULL.
const char *infer_model_chat_template(infer_model *model);
// Text of one token (not NUL-terminated), NULL if out of range.
const char *infer_token_text(infer_model *model, int32_t id, size_t *len);

// A vocabulary alone, as llama.cpp's vocab_only: a GGUF (one with only
// tokenizer.ggml.* metadata will do), a tokenizer.json, or a directory that
// holds one. Tokenizes as the model's tokenizer would.
typedef struct infer_vocab infer_vocab;
infer_status infer_vocab_load(const char *path, infer_vocab **out);
void infer_vocab_free(infer_vocab *vocab);
infer_status infer_vocab_tokenize(const infer_vocab *vocab, const char *text, size_t len, int add_special,
                                  int parse_special, int32_t **ids, int *n_ids);
infer_status infer_vocab_detokenize(const infer_vocab *vocab, const int32_t *ids, int n, int skip_special, char **text,
                                    size_t *len);
int32_t infer_vocab_size(const infer_vocab *vocab);
// Text of one token as stored (not NUL-terminated), NULL if out of range.
const char *infer_vocab_token(const infer_vocab *vocab, int32_t id, size_t *len);

// Chat: a conversation rendered with the model's chat template (GGUF
// tokenizer.chat_template or the checkpoint's tokenizer_config.json); a model
// without one gets its family's built-in template (Gemma), else ChatML.
typedef struct {
    const char *role;     // "system", "user", "assistant"
    const char *content;
} infer_chat_message;

// out: malloc'd prompt text. Errors name the template construct, or carry the
// template's own message (e.g. roles that do not alternate).
infer_status infer_chat_render(infer_model *model, const infer_chat_message *msgs, int n, int add_generation_prompt,
                               char **out);
// Which template infer_chat_render uses: "model", "builtin:gemma" or "builtin:chatml".
const char *infer_chat_template_source(infer_model *model);

// Forgets cached positions from n on (n <= n_past), so a conversation can be
// re-fed from where it changed.
void infer_ctx_truncate(infer_ctx *ctx, int n);
// The memory a context of n_ctx positions takes (0: the default): its KV
// cache, and everything (cache, scratch, attention scores for
// infer_get_threads() threads).
infer_status infer_ctx_memory(const infer_model *model, int n_ctx, size_t *kv_bytes, size_t *total_bytes);

// dst takes src's first n positions (its KV cache): a shared prompt prefix
// evaluated once, continued by several sequences. Same model; n <= src's.
infer_status infer_ctx_copy(infer_ctx *dst, const infer_ctx *src, int n);

// Batched evaluation: many sequences -- contexts of one model, each with its
// own KV cache and position -- advanced in shared passes that read every
// weight once for all of them (decode steps and prompt chunks may be mixed).
// Each sequence's logits are bit for bit those of infer_eval on it alone.
// Sequences come and go between calls: a context is a sequence (create, free,
// infer_ctx_truncate, infer_ctx_copy). The batch holds the pass's scratch and
// threads (infer_set_threads' count at creation).
typedef struct infer_batch infer_batch;
infer_status infer_batch_new(infer_model *model, infer_batch **out);
void infer_batch_free(infer_batch *batch);
infer_status infer_batch_set_threads(infer_batch *batch, int n);
// ctx[i] takes ids[i][0 .. n_ids[i]); logits[i]: NULL, or n_vocab floats for
// the logits after ctx[i]'s last token (logits itself may be NULL). On an
// error no sequence has advanced.
infer_status infer_batch_eval(infer_batch *batch, infer_ctx *const *ctx, int n, const int32_t *const *ids,
                              const int *n_ids, float *const *logits);

// A context of n_ctx positions (0: the model's maximum, capped at 4096).
infer_status infer_ctx_new(infer_model *model, int n_ctx, infer_ctx **out);
void infer_ctx_free(infer_ctx *ctx);
void infer_ctx_reset(infer_ctx *ctx);   // forget all cached positions
int infer_ctx_n_past(const infer_ctx *ctx);
int infer_ctx_n_ctx(const infer_ctx *ctx);

// Runs n tokens after the cached positions and appends them to the cache.
// logits: NULL, or room for n x n_vocab floats (every position), or, with
// last_only, room for n_vocab floats (the last position).
infer_status infer_eval(infer_ctx *ctx, const int32_t *ids, int n, float *logits, int last_only);

// As infer_eval, and also records the residual stream at the last position:
// hidden gets (n_layer + 1) x n_embd floats: row 0 the embedding output, row i
// the output of layer i, the last row after the final norm (transformers'
// convention for output_hidden_states). Under a graph with cached layers,
// rows 0..n_cached hold the residual the cached layers hand on.
infer_status infer_eval_hidden(infer_ctx *ctx, const int32_t *ids, int n, float *logits, int last_only, float *hidden);

// ---------------------------------------------------------------------------
// The vindex (infer extract): the model's FFN laid out per feature.

// Attaches a vindex made from this model: its feature rows serve walk layers.
// (A vindex directory given to infer_model_load is a whole model itself.)
infer_status infer_model_attach_vindex(infer_model *model, const char *dir);
// Features per layer that walk layers can use (0 without a vindex).
int infer_model_walk_features(const infer_model *model);
// Walk-only: drops the model's own FFN weights (their mapped pages go back
// to the kernel); every layer's FFN then comes from the vindex, dense layers
// walking all features. *dropped: bytes released.
infer_status infer_model_walk_only(infer_model *model, size_t *dropped);

// ---------------------------------------------------------------------------
// Layer graphs: how each layer advances the residual stream. "dense" (the
// default) is exact; the others are approximations, measured by the caller
// against dense:
//   walk[:A-B][@K|@P%]   the FFN from the top K features (by |gate . x|) of an
//                        attached vindex (default_k when no @; <= 0: all)
//   cached:0-B           layers 0..B replaced by the residual and K/V that a
//                        template prompt left there (infer_ctx_set_template);
//                        valid only for that template's tokens and positions
//   pipelined[:A-B]      attention and FFN on two devices (needs a GPU backend;
//                        refused by a CPU-only build)
// Items are joined by commas, e.g. "cached:0-12,walk:13-23@10%,dense:24-33".
infer_status infer_ctx_set_graph(infer_ctx *ctx, const char *spec, int default_k);
// Records the template for the graph's cached layers (a dense pass over ids);
// the context is left empty.
infer_status infer_ctx_set_template(infer_ctx *ctx, const int32_t *ids, int n);
// Layers the graph takes from the template (0: none).
int infer_ctx_n_cached(const infer_ctx *ctx);

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

infer_sampling infer_sampling_default(void);

typedef struct infer_sampler infer_sampler;
infer_status infer_sampler_new(const infer_sampling *params, int n_vocab, infer_sampler **out);
void infer_sampler_free(infer_sampler *s);
// Picks the next token from logits (n_vocab) given the tokens so far (for the
// penalties). Does not modify logits.
int32_t infer_sample(infer_sampler *s, const float *logits, const int32_t *history, int n_history);

#ifdef __cplusplus
}
#endif
#endif
