// The tensor layer's plain data: a typed, shaped view of bytes, a weight as
// a product uses it, and a layer's RoPE table. Shapes use ggml's order: ne[0]
// is the innermost (contiguous) dimension, so a PyTorch Linear weight
// [out, in] has ne[0] = in, ne[1] = out. Models fill these; compute reads them.
#ifndef INFER_TENSOR_TENSOR_H
#define INFER_TENSOR_TENSOR_H

#include <stddef.h>
#include <stdint.h>

// Activation functions, as configs name them and the kernels compute them.
enum act_kind { ACT_SILU, ACT_GELU_TANH, ACT_GELU, ACT_RELU };

#define MAX_DIMS 4

typedef struct {
    const char *name;     // owned by the store
    int type;             // enum dtype, or -1 for a known type we do not compute with
    const char *type_name;
    int nd;
    int64_t ne[MAX_DIMS]; // ne[0] innermost
    const void *data;     // into the mapping
    size_t nbytes;
    float *f32;           // 1-D tensors (norms, biases): decoded once at load, else NULL
} tensor;

static inline int64_t tensor_nelem(const tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->nd; i++) n *= t->ne[i];
    return n;
}


// A weight used in a product. trans: stored [in, out] (GPT-2 Conv1D, gpt-oss
// experts) rather than the usual [out, in]. pack: w's rows repacked for the
// CPU's kernels (enum pack_kind in pack.h), or NULL; the model owns it.
// unpacked: never packed by design (infer_cpu_unpacked_products leaves it out).
// ggml: the products follow ggml's CPU numerics (a GGUF file's weights: bf16
// rows meet activations rounded to bf16; vecdot_get_ggml).
typedef struct {
    const tensor *w;
    int trans;
    int pack_kind;
    const void *pack;
    int ggml;
    int unpacked; // kept in the stored layout by design (experts), never counted as a missed pack
} weight;

// RoPE for one layer, resolved for its head_dim: pairs (i * pair_stride,
// i * pair_stride + pair_offset) for i < n_pairs rotate by angle
// pos * inv_freq[i]; cos/sin are scaled by mscale. transformers' rotate_half
// (ggml's NEOX mode) is stride 1, offset n_rot/2; ggml's "normal" mode, used
// by llama.cpp for the archs whose Q/K rows convert_hf_to_gguf.py permutes,
// is stride 2, offset 1 (adjacent pairs).
typedef struct {
    int n_pairs;
    int pair_offset;
    int pair_stride;
    float mscale;
    float *inv_freq; // n_pairs
} rope_table;

#endif
