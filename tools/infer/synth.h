// Random-weight checkpoints of Gemma 3's and Llama 3's shapes (synth.c).
#ifndef INFER_TOOLS_SYNTH_H
#define INFER_TOOLS_SYNTH_H

#include <stddef.h>

#include "infer.h"

typedef struct {
    const char *arch, *name; // "gemma3" "1b", "llama" "8b"
    int vocab, hidden, ffn, layers, heads, kv_heads, head_dim;
    int window;        // Gemma's sliding window (0: every layer attends to all)
    int max_pos;       // max_position_embeddings
    double rope_theta; // Llama's (Gemma's two are its family's: 1e6 global, 1e4 sliding)
} synth_shape;

// The archs, "gemma3, llama".
const char *synth_archs(void);
// The model family an arch is shapes of ("Gemma 3", "Llama 3"), or NULL for an unknown arch.
const char *synth_title(const char *arch);
// The shape names of a known arch, ", "-separated, into buf: "270m, 1b, 4b, 12b, 27b".
void synth_shape_names(const char *arch, char *buf, size_t n);
// The shape `name` of arch ("gemma3": 270m 1b 4b 12b 27b; "llama": 8b 70b), or NULL.
const synth_shape *synth_find(const char *arch, const char *name);
// The shape, with `layers` and `vocab` instead of the shape's where positive,
// as a model whose values are made one tensor at a time as the converter reads
// them (infer_convert_gguf_spec), named "synth-ARCH-SHAPE"; 1 on success.
// Free it with synth_spec_free.
int synth_spec(infer_model_spec *spec, const synth_shape *sh, int layers, int vocab);
void synth_spec_free(infer_model_spec *spec);
// Writes config.json and model.safetensors (bf16) of the same model, the same
// values, in dir; 1 on success. The values are made as they are written:
// memory does not grow with the shape. (infer convert of a directory named as
// synth_spec names the model writes synth's file, byte for byte.)
int synth_write(const char *dir, const synth_shape *sh, int layers, int vocab);
// Removes what synth_write wrote, and dir.
void synth_remove(const char *dir);

#endif
