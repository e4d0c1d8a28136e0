// Which type each tensor gets when a model is quantized to a named mix
// ("q8_0", "q4_k_m", ...), following llama.cpp's llama_tensor_get_type for
// the same ftype, so our files match what llama-quantize writes.
#ifndef INFER_MODELS_QUANT_MIX_H
#define INFER_MODELS_QUANT_MIX_H

#include <stdint.h>

typedef struct {
    int base;          // the mix's default type (enum dtype)
    int k_mixed;       // q4_k_m / q5_k_m: the "M" rules below
    int more_bits_type;// type of the layers that use_more_bits picks (q4_k_m: q6_K)
    int n_layer, n_expert;
    int tied;          // token_embd doubles as the output head
    int i_attn_v;      // running counter of attn_v tensors seen
    int ftype;         // llama.cpp's general.file_type (LLAMA_FTYPE_*)
} quant_mix;

// llama.cpp's name of a general.file_type ("Q4_K - Medium"), or NULL.
const char *llama_ftype_name(int ftype);
// "f32, f16, ..." for messages.
const char *quant_mix_names(void);
// general.file_type for a file whose matrices are all of one type.
int gguf_ftype_of(int type);

// t when its blocks divide a row of ne0, else llama.cpp's fallback for it
// (q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0, q2_K/q3_K -> q4_0), else f16.
int quant_fit(int t, int64_t ne0);

// Parses a mix name (f32, f16, bf16, q4_0, q8_0, q4_k_m, q5_k_m, q6_k, ...);
// returns 0 for an unknown name.
int quant_mix_init(quant_mix *q, const char *name, int n_layer, int n_expert, int tied);
// The type for one tensor given its GGUF name, dims and row length ne0.
// Tensors that are not quantized keep `stored` (norms, routers, positions,
// 1-D tensors), and float stored types other than f32 are kept when the mix
// is a float type.
int quant_mix_type(quant_mix *q, const char *name, int n_dims, int64_t ne0, int stored);

#endif
