// A loaded model (normally a Hugging Face checkpoint) -> a GGUF file laid out
// the way llama.cpp's convert_hf_to_gguf.py writes it, so llama.cpp loads it.
#ifndef INFER_MODELS_GGUF_CONVERT_H
#define INFER_MODELS_GGUF_CONVERT_H

#include "models/model.h"

// type: the storage type of matrices (DT_F32, DT_F16, DT_BF16; any dtype with
// a from_float encoder once quantizers exist). 1-D tensors, the MoE router and
// GPT-2's position embeddings stay f32, as llama.cpp's converter keeps them;
// a matrix whose rows are not whole blocks of `type` falls back to f16.
infer_status gguf_convert(const infer_model *m, const char *out_path, int type);

// As gguf_convert with a named mix (f32, f16, bf16, q8_0, q4_0, q4_k_m,
// q5_k_m, ...): each tensor's type as llama-quantize picks it for that ftype.
infer_status gguf_convert_mix(const infer_model *m, const char *out_path, const char *mix);
// ... with the vocabulary of the GGUF vocab_from (NULL: none, as gguf_convert_mix)
infer_status gguf_convert_mix_vocab(const infer_model *m, const char *out_path, const char *mix, const char *vocab_from);

// A partial conversion: matrices keep their stored float type (f32, f16,
// bf16; anything else becomes f16) and the parts a vindex holds can be left out.
typedef struct {
    int keep_types;    // every matrix in its stored type, not converted
    int skip_ffn;      // no dense FFN matrices (ffn_gate, ffn_up, ffn_down); biases stay
    int skip_tok_embd; // no token_embd.weight (a tied output head goes with it)
    const char *vocab_from; // a GGUF whose tokenizer.* metadata the file takes (its token count the model's), or NULL
} gguf_convert_opts;

infer_status gguf_convert_part(const infer_model *m, const char *out_path, const gguf_convert_opts *o);

// llama.cpp's general.architecture for one of our model types, or NULL.
const char *gguf_arch_of(const char *model_type);

#endif
