// All tensors of a checkpoint: the mapped files and their tensors (typed
// views, tensor/tensor.h), from safetensors or GGUF.
#ifndef INFER_MODELS_TENSOR_H
#define INFER_MODELS_TENSOR_H

#include "base/mapfile.h"
#include "models/spec.h"
#include "tensor/tensor.h"

// All tensors of a checkpoint (one or several mapped files), sorted by name.
typedef struct {
    mapfile *files;
    int n_files;
    tensor *t;
    int n;
    char **names;  // owned copies
    size_t bytes_mapped;
    // Declared tensors (store_declare) have no bytes (data NULL): fill makes
    // one's when it is read (the converter, gguf_convert.c), and nothing else reads them.
    infer_fill_fn fill;
    void *fill_user;
} tensor_store;

// Loads every *.safetensors of a directory: model.safetensors.index.json when
// present (shards), else model.safetensors.
infer_status store_open_safetensors(tensor_store *s, const char *dir);
// Opens one safetensors file and appends its tensors (used for shards and tests).
infer_status store_add_safetensors(tensor_store *s, const char *path);
// The tensors of an infer_model_spec, without bytes (their fill makes them); sorted.
infer_status store_declare(tensor_store *s, const infer_tensor_spec *t, int n, infer_fill_fn fill, void *user);
void store_sort(tensor_store *s);
const tensor *store_find(const tensor_store *s, const char *name);
void store_close(tensor_store *s);

#endif
