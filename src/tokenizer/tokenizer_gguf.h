#ifndef INFER_TOKENIZER_GGUF_H
#define INFER_TOKENIZER_GGUF_H

#include "models/gguf.h"
#include "tokenizer/tokenizer.h"

// Builds the tokenizer of a GGUF file; *out stays NULL (and INFER_OK is
// returned) when the file carries no vocabulary (tokenizer.ggml.model absent
// or "none").
infer_status tokenizer_from_gguf(const gguf_file *g, tokenizer **out);

#endif
