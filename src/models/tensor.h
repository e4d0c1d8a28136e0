// A tensor: a typed, shaped view of bytes in a mapped file. Shapes use ggml's
// order: ne[0] is the innermost (contiguous) dimension, so a PyTorch Linear
// weight [out, in] has ne[0] = in, ne[1] = out.
#ifndef INFER_MODELS_TENSOR_H
#define INFER_MODELS_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "base/mapfile.h"

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

// All tensors of a checkpoint (one or several mapped files), sorted by name.
typedef struct {
    mapfile *files;
    int n_files;
    tensor *t;
    int n;
    char **names;  // owned copies
    size_t bytes_mapped;
} tensor_store;

// Loads every *.safetensors of a directory: model.safetensors.index.json when
// present (shards), else model.safetensors.
infer_status store_open_safetensors(tensor_store *s, const char *dir);
// Opens one safetensors file and appends its tensors (used for shards and tests).
infer_status store_add_safetensors(tensor_store *s, const char *path);
void store_sort(tensor_store *s);
const tensor *store_find(const tensor_store *s, const char *name);
void store_close(tensor_store *s);

#endif
