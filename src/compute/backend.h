// The backend seam: the forward pass (inference/forward.c) runs every layer
// operation through a backend's ops table, and nothing else in it computes.
//
// Two backends exist: "cpu" (SIMD kernels chosen at run time, threaded over
// the context's pool; compute/cpu/backend_cpu.c) and "reference" (the scalar
// oracles, one thread, written for reading; compute/ref/backend_ref.c). The
// fixture tests run every family through both: the reference against
// transformers, the CPU backend against the reference.
//
// Buffers are host floats in row-major rows for now; a device backend will
// own its KV cache and scratch behind the same calls.
#ifndef INFER_COMPUTE_BACKEND_H
#define INFER_COMPUTE_BACKEND_H

#include <stddef.h>
#include "compute/cpu/ops.h"
#include "tensor/tensor.h"

enum { GRAPH_BEGIN, GRAPH_END, GRAPH_LAUNCH };

// How a KV cache holds its rows (layer l's K or V: a row of KV * hd values
// per position): f32; f16 (ggml's default: exact for models with ggml
// numerics, whose K and V are rounded to f16 before they are stored); q8_0
// (llama.cpp's -ctk/-ctv q8_0: blocks of 32 values along each head, so hd is
// a multiple of 32).
enum kv_type { KV_F32, KV_F16, KV_Q8_0, KV_TYPES };

// Bytes of n values of a cache row (n a multiple of 32 for q8_0).
static inline size_t kv_bytes(int type, size_t n) {
    return type == KV_F16 ? 2 * n : type == KV_Q8_0 ? n / 32 * 34 : 4 * n;
}

// "f32", "f16", "q8_0" (llama.cpp's names)
const char *kv_type_name(int type);

enum norm_op {
    NORM_OP_RMS,          // x / rms(x) * w
    NORM_OP_RMS_PLUS_ONE, // x / rms(x) * (1 + w) (Gemma 2/3)
    NORM_OP_LAYER,        // (x - mean) / std * w + b
};

// Attention of one layer for T query rows, in blocks of rows of one sequence
// each: row t is at position pos[t] of its sequence and attends to positions
// (pos - window, pos] (all up to pos when window is 0) of that sequence's
// cache (k[t], v[t]: rows of KV * hd). Query head h uses kv head h / (H / KV).
typedef struct {
    const float *q;          // T rows of H * hd
    float *out;              // T rows of H * hd
    int T, H, KV, hd, window;
    const int *pos;
    const void *const *k, *const *v;      // per row: its sequence's cache of this layer
    int kt, vt;                           // their types (enum kv_type)
    const int *blk0, *blk_n; int n_blk;   // blocks: first row and row count
    float scale;             // multiplies q.k
    float softcap;           // 0: none
    const float *sinks;      // per query head, or NULL (gpt-oss)
    int ggml_numerics;       // probabilities rounded to f16 before meeting V, as ggml does
    float *scores;           // workspace: per thread, B * (H / KV) rows of `stride` floats
    int B, stride;
} attn_desc;

// q, k and v of T rows after their products, prepared for attention: each
// head's norm (q_norm / k_norm over qn / kn values: hd, or the whole row for
// OLMo 2; v_norm: RMS without weight), RoPE (rope NULL: none), the f16
// rounding (round), and k and v into the caches at pos (k NULL: q only).
typedef struct {
    float *q, *k, *v;
    int T, H, KV, hd, qn, kn, v_norm, norm_kind, round;
    const float *q_norm, *k_norm;
    float eps;
    const rope_table *rope;
    const int *pos;
    void *const *k_cache, *const *v_cache;
    int kt, vt;              // the caches' types (enum kv_type)
} qkv_desc;

typedef struct backend backend;

// One layer of the vindex walk FFN (vindex/walk.h): feature f is rows 3f,
// 3f + 1, 3f + 2 of ffn (gate, up, down), scored by gate_vectors row f.
typedef struct walk_layer_s {
    const tensor *gate_vectors; // [F, H]: the KNN's gate rows (f32, f16 or q4_0)
    const tensor *ffn;          // [3F, H]: rows 3f, 3f + 1, 3f + 2 = gate, up, down of feature f
    int gated;                  // 0: plain MLP (rows 3f hold the up row; act(up . x) * down)
    int act;                    // enum act_kind
    const float *bias;          // (F) added to row 3f's product (a plain MLP's up bias), or NULL
    const float *down_bias;     // (H) added once to the output, or NULL
    const float *norm_up, *norm_down; // (F) each feature's |up_f| (gated) and |down_f|, for the walk by
                                // contribution (walk.h), or NULL
} walk_layer;

// The lm_head's top k on a device (vindex/lm_index.h's lookup): the head
// (V rows of H) and, where clusters is not 0, the index over its rows: the
// centroids (clusters rows of H, a tensor of their type), the rows in cluster
// order (raw bytes of type row_type, row_bytes each), the clusters' first
// rows (clusters + 1) and the rows' token ids.
typedef struct {
    const tensor *head;
    int clusters;
    const tensor *cent;
    const void *rows;
    int row_type;
    size_t row_bytes;
    const uint32_t *off;
    const int32_t *order;
} lm_topk_desc;

typedef struct {
    const char *name;
    // y (T, n_out) = x (T, n_in) @ W^T (+ bias), W in its stored type.
    void (*matmul)(backend *b, float *y, const float *x, const weight *w, const float *bias, int T, int n_in,
                   int n_out);
    // n <= 4 products of the same T tokens: y[i] = x W_i^T (+ bias[i]).
    void (*matmul_multi)(backend *b, int n, float *const *y, const float *x, const weight *const *w,
                         const float *const *bias, int T, int n_in, const int *n_out);
    // rows of n: out = norm(x) (enum norm_op; w, b may be NULL).
    void (*norm)(backend *b, float *out, const float *x, const float *w, const float *bias, int rows, int n,
                 float eps, int kind);
    // Rotates the heads of each of `rows` rows (heads * hd) at pos[row].
    void (*rope)(backend *b, float *x, int rows, int heads, int hd, const int *pos, const rope_table *r);
    void (*attention)(backend *b, const attn_desc *d);
    void (*qkv_prep)(backend *b, const qkv_desc *d);
    // In place: x = act(x) over rows of n (ggml: as ggml's CPU backend computes it).
    void (*act)(backend *b, float *x, int rows, int n, int act, int ggml);
    // g = act(g) * u over rows of n (u NULL: act only).
    void (*glu)(backend *b, float *g, const float *u, int rows, int n, int act, int ggml);
    // x += o * s over rows of n.
    void (*residual)(backend *b, float *x, const float *o, float s, int rows, int n);
    // x rounded to f16 (ggml's K/V and q).
    void (*round_f16)(backend *b, float *x, size_t n);
    // In place over n values.
    void (*softmax)(backend *b, float *x, int n);
    // The data movement and elementwise steps between the products, so that
    // the forward pass never touches activations itself (a device backend's
    // live in its memory):
    // out (T, n) = rows ids[t] of table (a 2-D tensor of any stored type, rows of n) * scale
    void (*embed)(backend *b, float *out, const tensor *table, const int32_t *ids, int T, float scale);
    // dst row r = src row r, n floats each, rows dst_stride / src_stride floats apart
    void (*copy)(backend *b, float *dst, size_t dst_stride, const float *src, size_t src_stride, int rows, int n);
    // x *= s over n floats (s == 0 writes zeros)
    void (*scale)(backend *b, float *x, size_t n, float s);
    // x row r *= y row r elementwise (strides as copy)
    void (*mul)(backend *b, float *x, size_t x_stride, const float *y, size_t y_stride, int rows, int n);
    // x = cap * tanh(x / cap) over n floats
    void (*softcap)(backend *b, float *x, size_t n, float cap);
    // n floats from the backend's memory to the host's, and back
    void (*download)(backend *b, float *host, const float *src, size_t n);
    void (*upload)(backend *b, float *dst, const float *host, size_t n);
    // gpt-oss's expert activation over n: out[i] = (clamp(up, -7, 7) + 1) *
    // min(gate, 7) * sigmoid(1.702 min(gate, 7)), gate[i * gs], up[i * us]
    void (*glu_oss)(backend *b, float *out, const float *gate, size_t gs, const float *up, size_t us, int n);
    // K or V rows into the caches: row t (n floats of src) to row pos[t] of
    // cache[t], as type (enum kv_type) holds it
    void (*kv_store)(backend *b, void *const *cache, int type, const int *pos, const float *src, int T, int n);
    // A pass over T rows at positions pos begins (a device backend takes the
    // positions up once for all the layers); run[t] is 1 where a sequence's
    // rows begin (a batch's pass holds runs of several sequences, and a run's
    // rows are computed as that sequence alone would compute them); NULL where
    // nothing is needed.
    void (*begin_pass)(backend *b, const int *pos, const int *run, int T);
    // Replaying a pass (a device backend's captured graph); NULL where there
    // is none. GRAPH_BEGIN: 1 = a graph of this key is ready (launch it and
    // skip the operations), 0 = capturing the operations that follow (end
    // with GRAPH_END, which launches), -1 = run them plainly. GRAPH_END: 0 =
    // launched; 1 = the capture failed (an operation refused inside it, or
    // the capture broke), nothing ran and nothing failed: run the operations
    // again, plainly; -1 = failed (the pass's results are not to be used).
    int (*graph)(backend *b, int phase, uint64_t key);
    // out[r] (host memory) = the first index of the largest of row r's n
    // values (NaN counts as below every number), for each of `rows` rows of x
    // (greedy tokens without the logits leaving a device's memory)
    void (*argmax)(backend *b, int32_t *out, const float *x, int rows, int n); // -1: the row holds a NaN
    // The vindex walk FFN (vindex/walk.h's walk_ffn) of T rows of x into out
    // over the k features of layer l whose gate scores are largest in
    // magnitude (k at least its features: all of them); NULL where the host's
    // walk_ffn runs it on the backend's memory.
    void (*walk)(backend *b, float *out, const float *x, const walk_layer *l, int k, int T);
    // The feature-row types walk takes (NULL: every type).
    int (*walk_takes)(int type);
    // The vindex's lookups on the backend's memory, host arrays in and out,
    // 0 on success (NULL where the host's code runs them):
    // knn: the gate rows' scores s[i] = gate row i . x (x: H floats; gate
    // n rows of H), then idx = the k largest |s| (walk.h's topk_abs; k 0:
    // scores, n floats, instead)
    int (*knn)(backend *b, const tensor *gate, const float *x, int k, int32_t *idx, float *scores);
    // lm_topk: the k best (score, id) of the head's scores against x (H
    // floats), or of the rows of the probes best-scoring clusters when
    // probes > 0 (d->clusters at least 1); an id -1 where fewer rows were
    // probed than k. Scores and ids in no particular order.
    int (*lm_topk)(backend *b, const lm_topk_desc *d, const float *x, int k, int probes, float *scores, int32_t *ids);
    // A context's memory: its KV cache and scratch, one zeroed block of the
    // backend's (NULL when it cannot), and its release.
    void *(*alloc)(backend *b, size_t bytes);
    void (*release)(backend *b, void *p);
    // A KV cache that takes memory as its sequence grows (NULL where the backend has none): kv_reserve,
    // addresses for bytes and nothing behind them (NULL: none here; alloc then), *chunk its unit of
    // memory; kv_commit, [off, off + len) of it backed and zeroed (0, or -1: no memory); kv_trim, the
    // chunks wholly inside [off, off + len) given back. release frees it as any. kv_share maps the
    // chunks of src's [soff, soff + len) in place of p's [off, off + len) (whole chunks; the memory then
    // held once, by both); kv_private gives the shared chunks of p's [off, off + len) copies of their own
    // (copy on write: a shared part is made private before it is written); each 0, or -1.
    void *(*kv_reserve)(backend *b, size_t bytes, size_t *chunk);
    int (*kv_commit)(backend *b, void *p, size_t off, size_t len);
    void (*kv_trim)(backend *b, void *p, size_t off, size_t len);
    int (*kv_share)(backend *b, void *p, size_t off, void *src, size_t soff, size_t len);
    int (*kv_private)(backend *b, void *p, size_t off, size_t len);
    void (*done)(backend *b); // frees the backend's own state (b->dev), or NULL
    int host;                // that memory is the CPU's: contexts may switch between such backends
} backend_ops;

struct backend {
    const backend_ops *ops;
    cpu_exec *ex;            // threads and scratch of the CPU backends (ex->oom: a failed pass)
    void *dev;               // a device backend's state (made on first use), or NULL
    const void *owner;       // the model: a device backend's copies of its weights are shared by its contexts
    int gpu;                 // the GPU a device backend opens (a tensor-parallel rank's own; else 0)
};

// The CUDA backend (compute/cuda/backend_cuda.c): NULL in a build without
// CUDA or on a machine without a usable GPU (backend_gpu_status() says why).
const backend_ops *backend_cuda(void);
// The machine's GPUs as the CUDA backend finds them: their count (0 without
// CUDA in the build, a driver or a device), the last word on them (why there
// is none, or the last failure's text: "ok" while there was none), GPU 0's
// name (NULL where there is none).
int backend_gpu_count(void);
const char *backend_gpu_status(void);
const char *backend_gpu_name(void);
// Page-locked host memory where a GPU is there (copies to it run at full
// speed), else NULL; backend_pinned_free frees it.
void *backend_pinned_alloc(size_t bytes);
void backend_pinned_free(void *p);
// The CUDA stream (a cudaStream_t) of b, a CUDA backend, once the work it
// holds back is queued (for NCCL's collectives in the stream's order); NULL
// for another backend or on a failure.
void *backend_cuda_stream(backend *b);

// The data-movement ops of the host backends (memory the CPU reads): plain
// loops, shared by the CPU and reference backends (compute/host_ops.c).
void host_embed(backend *b, float *out, const tensor *table, const int32_t *ids, int T, float scale);
void host_copy(backend *b, float *dst, size_t dst_stride, const float *src, size_t src_stride, int rows, int n);
void host_scale(backend *b, float *x, size_t n, float s);
void host_mul(backend *b, float *x, size_t x_stride, const float *y, size_t y_stride, int rows, int n);
void host_softcap(backend *b, float *x, size_t n, float cap);
void host_download(backend *b, float *host, const float *src, size_t n);
void host_upload(backend *b, float *dst, const float *host, size_t n);
void host_kv_store(backend *b, void *const *cache, int type, const int *pos, const float *src, int T, int n);
void host_glu_oss(backend *b, float *out, const float *gate, size_t gs, const float *up, size_t us, int n);
void host_argmax(backend *b, int32_t *out, const float *x, int rows, int n);
// qkv_prep as the backend's norm, rope, round_f16 and kv_store in turn
void qkv_prep_ops(backend *b, const qkv_desc *d);
#define HOST_DATA_OPS                                                                               \
    .qkv_prep = qkv_prep_ops, .embed = host_embed, .copy = host_copy, .scale = host_scale, .mul = host_mul, .softcap = host_softcap, \
    .download = host_download, .upload = host_upload, .kv_store = host_kv_store, .glu_oss = host_glu_oss, \
    .argmax = host_argmax

extern const backend_ops backend_cpu_ops, backend_ref_ops;

// Host memory for the CPU backends (host_mem.c): 64-byte aligned, zeroed;
// a KV cache that grows, charged to one budget of the process (INFER_KV_MEM,
// else 90% of MemAvailable): backend_host_kv_budget sets it (bytes; tests),
// backend_host_kv_used gives what is charged and the budget.
void *backend_host_alloc(backend *b, size_t bytes);
void backend_host_release(backend *b, void *p);
void *backend_host_kv_reserve(backend *b, size_t bytes, size_t *chunk);
int backend_host_kv_commit(backend *b, void *p, size_t off, size_t len);
void backend_host_kv_trim(backend *b, void *p, size_t off, size_t len);
void backend_host_kv_budget(size_t bytes);
size_t backend_host_kv_used(size_t *budget);
#define HOST_MEM_OPS                                                                                \
    .alloc = backend_host_alloc, .release = backend_host_release, .kv_reserve = backend_host_kv_reserve, \
    .kv_commit = backend_host_kv_commit, .kv_trim = backend_host_kv_trim

// The ops table of a backend by name ("cpu", "reference"), or NULL.
const backend_ops *backend_find(const char *name);

#endif
