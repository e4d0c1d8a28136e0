// The vindex: a directory made from a model (infer extract) that holds its
// feed-forward weights laid out per feature, so a layer's FFN can be computed
// from a few selected features (a "walk") reading contiguous bytes.
//
// Files (DESIGN.md, "The vindex"; every .bin is raw ggml blocks, each layer's
// part starting at a multiple of VINDEX_ALIGN bytes):
//   index.json        format, version, the model's config, types, per-layer
//                     feature counts and byte ranges, sizes and sha256 of files
//   gate_vectors.bin  per layer: F gate rows of H (the gate type)
//   ffn.bin           per layer: 3F rows of H (the ffn type): row 3f the gate
//                     row of feature f, 3f+1 its up row, 3f+2 its down vector
//                     (column f of ffn_down). A plain (not gated) MLP keeps its
//                     up row in the gate slot and zeros in the up slot.
//   down_meta.bin     per layer, per feature: down_top int32 token ids, then
//                     their down_top f32 scores (lm_head row . down vector),
//                     by score, descending
//   embeddings.bin    the token embedding [V, H] in its stored type
//   lm_head.bin       the output head [V, H], quantized
//   weights.gguf      everything else (metadata, tokenizer, attention, norms,
//                     an untied output weight) in the source's types
//   lm_index.bin      (optional: extract --lm-index) the output head's rows in
//                     k-means clusters, for lookups that score a few clusters
//                     (lm_index.c has the layout)
// Shapes use ggml's order (tensor.h): ne[0] = H innermost, ne[1] = rows.
#ifndef INFER_VINDEX_VINDEX_H
#define INFER_VINDEX_VINDEX_H

#include <stdint.h>
#include "infer.h"
#include "models/tensor.h"

#define VINDEX_FORMAT "infer-vindex"
#define VINDEX_VERSION 1
#define VINDEX_ALIGN 64

typedef struct infer_vindex vindex; // infer.h's infer_vindex

// Opens the vindex directory dir: reads index.json and checks every count,
// type, byte range (in the file, aligned, not overlapping) and file size
// against it, and that every down_meta id is a token; maps the .bin files.
// No hashing. On failure *out is NULL and the message names the file and
// the field at fault.
infer_status vindex_open(const char *dir, vindex **out);

// vindex_open, then the sha256 of every file listed in index.json against the
// digest recorded there, and weights.gguf parsed as a GGUF file. The message
// of a failure names the first file that does not match.
infer_status vindex_verify(const char *dir);

void vindex_close(vindex *v);

int vindex_n_layer(const vindex *v);
int vindex_n_embd(const vindex *v);   // H
int vindex_n_vocab(const vindex *v);  // V
// F of one layer (0 for a layer outside 0..n_layer-1).
int vindex_n_features(const vindex *v, int layer);
// 1: gated FFN, down(act(gate x) * up x); 0: plain, down(act(up x)) with
// the up row in the gate slot.
int vindex_gated(const vindex *v);
// Top tokens stored per feature in down_meta (0: none stored).
int vindex_down_top(const vindex *v);

// [F rows, H] in the gate type (DT_F32, DT_F16 or DT_Q4_0), from gate_vectors.bin.
const tensor *vindex_gate_vectors(const vindex *v, int layer);
// [3F rows, H] in the ffn type: rows 3f, 3f+1, 3f+2 are feature f's gate
// row, up row and down vector, from ffn.bin.
const tensor *vindex_ffn(const vindex *v, int layer);
// [V, H]: the token embedding in its stored type, from embeddings.bin.
const tensor *vindex_embeddings(const vindex *v);
// [V, H]: the quantized output head, from lm_head.bin.
const tensor *vindex_lm_head(const vindex *v);
// lm_index.bin's clusters of the head's rows (lm_index.h), or NULL without one.
const struct lm_index_s *vindex_lm_index(const vindex *v);
// The k best tokens for a final-normed hidden state from the index's
// `probes` best clusters (lm_index_topk), on `threads` threads (kept in the
// vindex between lookups; one lookup at a time uses them, others make their own).
infer_status vindex_lm_topk(vindex *v, const float *hidden, int k, int probes, int threads, int32_t *ids);
// The model's head (and the index, where the vindex has one) on a device:
// "cpu" (none: released) or "cuda" (lm_device.c). On the device, ids (k) =
// the k best rows of the head (probes 0) or of the index's lookup (probes
// clusters), best first (score, then the lower id).
infer_status vindex_lm_set_device(vindex *v, const tensor *head, const char *device);
int vindex_lm_on_device(const vindex *v);
infer_status vindex_lm_device_topk(vindex *v, const float *hidden, int k, int probes, int32_t *ids);
void vindex_lm_release_device(vindex *v);
// Feature f of a layer: the number of top tokens stored (down_top), with
// *ids and *scores pointing at them (sorted by score, descending). 0 and
// NULLs when none are stored or layer/f are out of range.
int vindex_down_meta(const vindex *v, int layer, int f, const int32_t **ids, const float **scores);
// Path of the vindex's weights.gguf.
const char *vindex_model_path(const vindex *v);
// The vindex directory (as given, without trailing slashes).
const char *vindex_dir(const vindex *v);

// A vindex and a model (models/model.h) together (attach.c).
struct infer_model;
// 1 when path is a vindex directory (index.json and weights.gguf).
int vindex_is_dir(const char *path);
// The model's walk layers from v's feature rows, after checking v was made
// from this model's shapes.
infer_status vindex_bind_walk(struct infer_model *m, vindex *v);

#endif
