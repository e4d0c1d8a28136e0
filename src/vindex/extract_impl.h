// The parts of the vindex writer: down_meta's top-K products, weights.gguf,
// and index.json, given where extract.c put everything.
#ifndef INFER_VINDEX_EXTRACT_IMPL_H
#define INFER_VINDEX_EXTRACT_IMPL_H

#include "vindex/extract.h"
#include "vindex/vindex_impl.h"
#include "compute/cpu/ops.h"
#include "models/model.h"

typedef struct {
    uint64_t off, bytes;
} vrange;

// Everything index.json records beyond the model itself.
typedef struct {
    int types[4];             // written: gate, ffn, lm_head, embeddings
    int requested[3];         // asked for: gate, ffn, lm_head
    int gated;
    int down_top;
    int n_layer;
    const int *n_feat;        // (n_layer)
    const vrange *gate, *ffn, *meta; // (n_layer) ranges in their files
    vrange embd, lm;
    uint64_t file_bytes[VF_COUNT];
    char sha256[VF_COUNT][65];
    int opt_present[VF_OPT_COUNT];  // the source's tokenizer files, copied
    uint64_t opt_bytes[VF_OPT_COUNT];
    char opt_sha256[VF_OPT_COUNT][65];
} vindex_layout;

// For F down vectors D (F x H floats, row f = feature f), the K largest
// entries of W d_f over the V rows of W ([V, H], any type matmul takes):
// ids and scores (F x K each), by score descending, ties to the lower id.
// progress(done) is called after each batch of features.
infer_status down_meta_topk(cpu_exec *ex, const weight *head, const float *D, int F, int H, int K, int32_t *ids, float *scores,
                    void (*progress)(void *u, int64_t done), void *u);

// weights.gguf: m's metadata and every tensor but the dense FFN matrices and
// the token embedding, in their source types.
infer_status vindex_write_weights(const infer_model *m, const char *path);

// index.json from the model's config and the layout.
infer_status vindex_write_index(const infer_model *m, const char *path, const vindex_layout *lay);

#endif
