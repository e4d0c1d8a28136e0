#ifndef INFER_MODELS_GGUF_QUANTIZE_H
#define INFER_MODELS_GGUF_QUANTIZE_H

#include "models/model.h"

// Writes the GGUF model m (loaded from a .gguf) to out_path with its matrices
// re-encoded to a named mix (q8_0, q4_k_m, ...; see quant_mix.h).
infer_status gguf_quantize(const infer_model *m, const char *out_path, const char *mix);

#endif
