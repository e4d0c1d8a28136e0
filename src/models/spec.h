// A model whose weights are made as they are written (infer synth's random
// weights; infer.h's infer_convert_gguf_spec): its tensors' names, types and
// shapes, and the fill that makes one tensor's bytes at a time. include/infer.h
// holds a copy of this definition for applications; the two are one guarded
// block, the same text in both files (tests/public_header.sh compares them).
#ifndef INFER_MODELS_SPEC_H
#define INFER_MODELS_SPEC_H

#include <stddef.h>
#include <stdint.h>

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

#endif
