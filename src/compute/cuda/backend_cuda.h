// The CUDA backend's state and the helpers its files share
// (backend_cuda.c: the layer operations; backend_vindex.c: the vindex's).
#ifndef INFER_COMPUTE_CUDA_BACKEND_CUDA_H
#define INFER_COMPUTE_CUDA_BACKEND_CUDA_H

#include "compute/backend.h"
#include "compute/cuda/cuda.h"

enum {
    N_ROWS_MAX = 512,            // rows of a pass (context.h's N_BATCH_DEV)
    SCORES_MAX = 1 << 24,        // attention score floats a launch may use (the rows of a pass go in groups)
    PTAB_MAX = 2048,             // row-pointer tables kept before they are all dropped
    CAPTURE_TRIES = 16,          // graph captures that may fail before a backend captures no more
};

typedef struct wstore wstore;

typedef struct {
    cuda_dev *d;
    wstore *w;                   // the model's weights on the device
    void *xq;                    // quantized activations
    size_t xq_cap;
    float *scores;               // attention scores: T x H x stride
    size_t scores_cap;
    int *pos;                    // per row: position (attention, RoPE, the caches), set by begin_pass
    size_t rows_cap;
    // the pass's rows by how their products run: runs of a sequence of at
    // least CUDA_GEMM_MIN_T rows on the tensor cores, the others as decode
    // rows (q8 products), so a sequence's rows in a batch are computed as
    // they would be alone. seg0[i]..seg0[i+1]: segment i, gemm or not (a
    // gemm segment is one sequence's run).
    int pass_T, n_seg, seg0[N_ROWS_MAX + 1], seg_gemm[N_ROWS_MAX];
    int pass_decode;             // every row of the pass is its sequence's only one (run[t] all set: cuda_attention_d)
    int n_run, run0[N_ROWS_MAX + 1]; // the pass's runs of rows of one sequence: run i is rows run0[i] .. run0[i + 1]
    void *am;                    // argmax's row results
    size_t am_cap;
    void *vx;                    // the vindex lookups' scratch (backend_vindex.c)
    size_t vx_cap;
    void *wk;                    // the walk's scratch: scores, indices, activations, chunk sums, x's q8_0 row
    size_t wk_cap;
    float *host;                 // host staging (embedding rows)
    size_t host_cap;
    // device arrays of row pointers (caches), found by their contents: made
    // once, never moved, so a captured graph may keep reading them
    struct ptab { int n; const void **host; void *dev; } *ptab;
    int n_ptab;
    // the decode graph: its key, the key seen last (captured when seen twice)
    void *exec;
    uint64_t gkey, seen, pending;
    unsigned moved; // the device's scratch reallocations when it was captured (cuda_moved: another since, it is stale)
    int capturing, no_graph, capture_failed; // (captures failed so far: CAPTURE_TRIES of them, and graphs are off)
    int capture_fault, captures; // INFER_CUDA_CAPTURE_FAULT=N (a test seam): every Nth capture is taken as refused
    // fusion (INFER_CUDA_FUSE=0 turns it off): row operations wait and chain
    // (a norm in place, the residual that adds its output, the norm of the
    // sum, the quantization for the product that takes it: cuda_chain_run),
    // and a gate and up product waits for the activation that joins them
    int fuse;
    int gemm;                    // prompt products on the tensor cores (INFER_CUDA_GEMM=0: the q8 products)
    int batch_gemm;              // a pass of 16+ rows one product on the tensor cores, whatever its runs (a batch's
                                 // rows then differ from alone: the products' column split follows the pass's rows):
                                 // -1 (the default) where the context is not deterministic (ex->exact);
                                 // INFER_CUDA_BATCH_GEMM=1 always, =0 never
    unsigned blas_seen;          // cuda_blas_total at the last GRAPH_BEGIN (cu_graph)
    int pass_bg;                 // (the pass begun: batch_gemm's choice for it, a graph key's part)
    int trace;                   // INFER_CUDA_TRACE=1: each pass's product launches by kind on stderr (begin_pass)
    int pass_mmq;                // (the pass begun: 1 a decode step of 2 to cuda_mmq_max rows, not deterministic, whose
                                 // quantized products take k_mmq instead of the tensor cores' f16 product; 2 a
                                 // deterministic pass, whose q8 products of any rows take it split by the shape alone)
    int ch_on, ch_rows;
    cuda_chain ch;
    struct { int on, T, n_in; cuda_mat m[2]; const void *xq; } mm;
    // an attention of one launch waits for the product that reads its output
    // and writes that product's quantized rows itself (cuda_attention_q;
    // INFER_CUDA_ATT_Q=0: a quantizing launch after it)
    int att_q;
    int att_gemm;                // a prompt's runs of rows through cuBLAS (cuda_attention_gemm; INFER_CUDA_ATT_GEMM=0: not)
    int flash_min;               // a run whose rows see this many keys or more: flash attention (cuda_attention_flash;
                                 // INFER_CUDA_FLASH=N: from N keys, 0: never; FLASH_MIN by default, heads of up to 128)
    int flash_set;
    int pos_h[N_ROWS_MAX];       // the pass's positions on the host (begin_pass)
    // a row that is its sequence's only one of the pass and sees more than
    // split_min positions (INFER_CUDA_ATT_SPLIT_MIN; decided by the row's own
    // depth, so a row's values do not depend on the rows beside it): its
    // attention split over blocks, up to split_z chunks (cuda_attention_split_z;
    // the graph's key has it and which rows these are)
    unsigned char single[N_ROWS_MAX];
    int split_min, split_z;
    uint64_t split_key;
    struct {
        int on, T, H, KV, hd, window, ggml, stride, decode, kv16;
        int group;               // rows the scores (sc) hold: the per-row kernel goes through the rows in groups of it
        const float *q, *sinks, *const *tab;
        float *out, *sc, scale, softcap;
        const int *pos;
        const void *k0[N_ROWS_MAX], *v0[N_ROWS_MAX]; // each run's caches (runs of one sequence: one cache)
    } at;
} cuda_state;

// The backend's state (made on first use; NULL when the GPU cannot be opened)
cuda_state *cu_state(backend *b);
// the same with the waiting operations launched (NULL, the pass failed, when that failed)
cuda_state *cu_state_flushed(backend *b);
// the waiting operations launched; 0 on success
int cu_flush(cuda_state *s);
// `bytes` at host address p in device memory (uploaded on first use)
void *cu_dev_of(backend *b, const void *p, size_t bytes);
// a matrix of n_out rows of n_in for the products (cuda_weight_upload's layout), uploaded on first use
const void *cu_dev_weight(backend *b, const tensor *W, int n_in, int n_out);
// a device buffer of at least `bytes`, grown as needed
void *cu_scratch(cuda_state *s, void **p, size_t *cap, size_t bytes);
// x's activations for weights of type wtype (T rows of n), quantized into the scratch or x itself
const void *cu_act_in(cuda_state *s, int wtype, const float *x, int T, int n);

// the vindex's lookups (backend_vindex.c)
int cu_knn(backend *b, const tensor *gate, const float *x, int k, int32_t *idx, float *scores);
int cu_lm_topk(backend *b, const lm_topk_desc *d, const float *x, int k, int probes, float *scores, int32_t *ids);

#endif
