// The CUDA device layer: device memory, the activation quantizers and the
// matrix products of every stored type on an NVIDIA GPU (sm_90 builds).
//
// Built from the kernel families' .cu files (common.cuh lists what they
// share) when nvcc is found at configure time (INFER_HAVE_CUDA); only the
// backend (backend_cuda.c, backend_vindex.c) calls it, and a build without
// CUDA has no CUDA layer at all (none.c: no backend). A build with CUDA runs on a
// machine without a GPU or driver too: cuda_device_count() is then 0 and
// cuda_status() says why. Pointers named d_* are device memory.
//
// The products follow the CPU's oracles (tensor/vecdot_ref.c): quantized
// weights meet activations quantized as the CPU quantizes them (q8_0 blocks,
// or q8_K for the k-quants: the same bytes), each block's integer sum is
// scaled as the oracle scales it, and only the order in which the blocks'
// float contributions are added differs (a warp's tree).
#ifndef INFER_COMPUTE_CUDA_H
#define INFER_COMPUTE_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_dev cuda_dev;

// GPUs usable here (0 without a driver, a device, or CUDA in the build).
int cuda_device_count(void);
// Why cuda_device_count() is 0 (or "ok").
const char *cuda_status(void);
// Opens GPU `ordinal` with a stream of its own; NULL (and cuda_status says
// why) when it cannot.
cuda_dev *cuda_open(int ordinal);
void cuda_close(cuda_dev *d);
// The device's name, e.g. "NVIDIA H200".
const char *cuda_name(const cuda_dev *d);

void *cuda_alloc(cuda_dev *d, size_t bytes); // NULL on failure
void cuda_free(cuda_dev *d, void *p);
// Memory backed as it is used (vmem.cu): the driver's chunk size (0: no virtual memory management here);
// addresses for bytes, nothing backed (NULL on failure); [off, off + len) backed and zeroed (0, or -1:
// no memory, cuda_status says why); the chunks wholly inside [off, off + len) given back; all of it freed; whether p is such a
// range; the bytes backed in all (a shared chunk once); another range's chunks mapped in place of a range's own (whole
// chunks); a range's shared chunks made its own copies (copy on write); how many chunks of a part are shared.
size_t cuda_vm_granularity(cuda_dev *d);
void *cuda_vm_reserve(cuda_dev *d, size_t bytes);
int cuda_vm_commit(cuda_dev *d, void *va, size_t off, size_t len);
void cuda_vm_trim(cuda_dev *d, void *va, size_t off, size_t len);
void cuda_vm_free(cuda_dev *d, void *va);
int cuda_vm_is(const void *p);
size_t cuda_vm_mapped(void);
int cuda_vm_share(cuda_dev *d, void *dst, size_t doff, void *src, size_t soff, size_t len);
int cuda_vm_private(cuda_dev *d, void *va, size_t off, size_t len);
int cuda_vm_shared(const void *va, size_t off, size_t len);
int cuda_upload(cuda_dev *d, void *d_dst, const void *src, size_t bytes);   // 0 on success
int cuda_download(cuda_dev *d, void *dst, const void *d_src, size_t bytes); // waits for the stream
int cuda_sync(cuda_dev *d);
// The device's stream (a cudaStream_t), for a library that queues work on it (NCCL).
void *cuda_stream(cuda_dev *d);
// Copies `bytes` (at most 64 KiB) from the host to d_dst in the stream's
// order without waiting: src is staged in a pinned ring that is reused only
// after 4 MiB of later staging (a pass synchronizes long before that).
int cuda_upload_async(cuda_dev *d, void *d_dst, const void *src, size_t bytes);
// Page-locked host memory (the GPU copies into it at full speed), or NULL;
// cuda_host_free frees it.
void *cuda_host_alloc(size_t bytes);
void cuda_host_free(void *p);

// Bytes of one token's activations for weights of type wtype (n columns):
// the CPU quantizer's values (q8_0 blocks for the 32-element types, q8_K for
// the k-quants) with each field in an array of its own (quants, scales, the
// q8_K sums of 16), padded to 16 bytes; f32 for float weights; 0 for a type
// without a GPU product.
size_t cuda_act_row_size(int wtype, int n);
// Quantizes T rows of n floats (d_x) for weights of type wtype into d_xq
// (rows of cuda_act_row_size bytes); float types copy.
int cuda_quantize(cuda_dev *d, int wtype, const float *d_x, int T, int n, void *d_xq);
// A matrix of `rows` rows of `cols` weights of type `type` (the mapped
// bytes, host memory) in device memory as the products read it (some types'
// blocks split into arrays of their fields); NULL on failure. cuda_free frees it.
void *cuda_weight_upload(cuda_dev *d, int type, const void *host, int rows, int cols);
// d_y (T, rows) = activations (T, cols) @ W^T, W `rows` rows of `cols` in
// its stored type wtype (as cuda_weight_upload put it there), the
// activations as cuda_quantize made them.
int cuda_matmul(cuda_dev *d, int wtype, const void *d_w, int rows, int cols, const void *d_xq, int T, float *d_y);
// Up to 4 products of the same activations in one launch (their types take
// the same activation format); glu_act >= 0 (tensor.h's act kinds): two
// products of the same rows, gate and up, and y of the first gets
// act(gate) * up (cuda_act's floats; ggml: its numerics), the second's y
// untouched.
typedef struct { int type; const void *w; int rows; float *y; } cuda_mat;
int cuda_matmul_multi(cuda_dev *d, int n, const cuda_mat *m, int cols, const void *d_xq, int T, int glu_act, int ggml);

// Prompt products on the tensor cores (WMMA, f16 inputs, f32 sums): d_y (T,
// rows) = d_x (T, cols, f32) @ W^T, W as cuda_weight_upload put it. For
// passes of at least CUDA_GEMM_MIN_T tokens and the types cuda_gemm_ok
// accepts (q8_0, q4_0, q5_0, the q4/5/6_K, f16, bf16); the weights' values
// and the activations rounded to f16, so less exact than cuda_matmul.
enum { CUDA_GEMM_MIN_T = 16 };
int cuda_gemm_ok(int wtype, int cols, int T);
int cuda_gemm(cuda_dev *d, int wtype, const void *d_w, int rows, int cols, const float *d_x, int T, float *d_y);
// The same; lowp: where cuBLAS takes an f16 / bf16 product, the activations in one part (rounded to the
// weights' type, as ggml's products round them) instead of two: one cuBLAS product instead of two.
int cuda_gemm_lowp(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y, int lowp);
// 1 when cuda_gemm gives this product to cuBLAS (loaded at run time when
// present; INFER_CUDA_CUBLAS=0: never): f16 / bf16 weights from 64 tokens,
// the quantized types (dequantized to f16 first) from 256, matrices of 2M
// weights and more; the same arithmetic as the tensor-core kernel's.
int cuda_gemm_blas(cuda_dev *d, int wtype, int rows, int cols, int T);

// The layer operations' kernels (the CUDA backend, backend_cuda.c, calls
// them; every pointer is device memory except where named host_). Each
// enqueues on the device's stream; 0 on success.
int cuda_bias(cuda_dev *d, float *y, const float *bias, int T, int n);          // y row += bias
int cuda_matmul_trans(cuda_dev *d, int wtype, const void *w, int n_in, int n_out, const float *x, int T, float *y);
int cuda_norm(cuda_dev *d, float *out, const float *x, const float *w, const float *b, int rows, int n, float eps, int kind);
int cuda_rope(cuda_dev *d, float *x, int rows, int heads, int hd, const int *pos, const float *inv_freq, int n_pairs,
              int pair_offset, int pair_stride, float mscale);
// attention of T rows (backend.h's attn_desc with device k/v row pointers and positions)
int cuda_attention(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                   const float *const *k, const float *const *v, float scale, float softcap, const float *sinks, int ggml,
                   float *scores, int stride);
// The same, also writing out's rows quantized for weights of type wtype
// into d_xq (cuda_quantize's bytes; each head's blocks by its own block of
// threads), where cuda_attention_q_ok: a quantized type whose blocks (32, or
// 256 for the k-quants) tile a head.
int cuda_attention_q_ok(int wtype, int H, int hd);
int cuda_attention_q(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks, int ggml,
                     float *scores, int stride, int wtype, void *d_xq);
// The same for decode rows (decode set: each row its sequence's only row of
// the pass, so that its cache rows before its position are no kernel's of
// the pass): those are read before the kernel waits for the one before it.
int cuda_attention_d(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks, int ggml,
                     float *scores, int stride, int wtype, void *d_xq, int decode);
// A prompt's rows of one sequence (T rows at device positions pos, the same
// on the host at pos_host; one cache: k, v) through cuBLAS: cuda_attention_kv's
// values up to the order of the f32 sums, its output quantized for the next
// product into d_xq when given (cuda_quantize's rows). _ok: cuBLAS is there
// (with its strided batched product), no graph is being captured and the
// cache is f32 or, under ggml's numerics (q f16 valued), f16.
int cuda_attention_gemm_ok(cuda_dev *d, int ggml, int kv16);
int cuda_attention_gemm(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                        const int *pos_host, const void *k, const void *v, float scale, float softcap, const float *sinks, int ggml,
                        int wtype, void *d_xq, int kv16);
// The same on the tensor cores without the scores in memory (attention_flash.cu):
// one f16 cache under ggml's numerics (q f16 valued), heads of 64, 128 or 256;
// the per-row kernel's values up to the order of the sums and the f16
// rounding of the unnormalized probabilities. Graph capture allowed.
int cuda_attention_flash_ok(int hd, int ggml, int kv16);
int cuda_attention_flash(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                         const void *k, const void *v, float scale, float softcap, const float *sinks, int ggml, int wtype,
                         void *d_xq, int kv16);
// The same over caches of f16 (kv16: each row's k and v rows __half, the f32 ones' values rounded) or f32.
int cuda_attention_kv(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                      const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                      float *scores, int stride, int wtype, void *d_xq, int decode, int kv16);
// The same for rows that are each their sequence's only row of the pass (decode
// steps), their positions split over blocks (flash-decoding: up to z chunks a
// row, z from cuda_attention_split_z of the most positions a row sees; a row's
// chunks from its own positions alone, so its values do not depend on the
// rows beside it). _ok: split attention is on (INFER_CUDA_ATT_SPLIT, not 0)
// and takes these heads (32, 64, 128, 256 or 512; H a multiple of KV); _z: 0
// where it is off.
int cuda_attention_split_ok(cuda_dev *d, int H, int KV, int hd);
int cuda_attention_split_z(cuda_dev *d, int n);
int cuda_attention_split(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                         const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                         float *scores, int stride, int wtype, void *d_xq, int kv16, int z);
int cuda_act(cuda_dev *d, float *g, const float *u, size_t n, int act, int ggml); // g = act(g) (* u)
// idx[0..k) (device ints) = the k indices of largest |s[i]| among n, ascending,
// ties to the lower index: walk.c's topk_abs, on the GPU (one block).
int cuda_topk_abs(cuda_dev *d, const float *d_s, int n, int k, int *d_idx);
// The same for the k largest s[i]; d_n (device int, or NULL): n read there
// (at most n), and where k exceeds it the indices past it are -1.
int cuda_topk_max(cuda_dev *d, const float *d_s, int n, const int *d_n, int k, int *d_idx);
// The lm_head index (vindex/lm_index.h) on the GPU: the rows (rows of type,
// cluster order, raw bytes; f32, f16, bf16 or q8_0 as cuda_walk takes them) of the
// P clusters best[] (device ints; off: C + 1 offsets, order: token ids) scored
// against x (H floats; xq: its q8_0 row for q8_0 rows), into the candidates
// cs / cid (scores, token ids; room for the probed rows), *dn their count.
int cuda_lm_probe(cuda_dev *d, int type, const void *rows, int H, const unsigned *off, const int *order, const int *best, int P,
                  const float *x, const void *xq, float *cs, int *cid, int *dn);
// out_s[i], out_id[i] = s[pos[i]], id[pos[i]] for i < k (id NULL: pos[i]; pos[i] -1: -inf, -1)
int cuda_lm_gather(cuda_dev *d, const int *pos, int k, const float *s, const int *id, float *out_s, int *out_id);
// The vindex walk FFN (vindex/walk.h) of one row x (H floats; xq: x as the
// q8_0 activation row when ffn is q8_0) over k features: feature i is idx[i]
// (device ints; NULL: i itself), ffn the raw [3F, H] rows (gate, up, down of
// each feature; f32, f16, bf16 or q8_0 blocks). out (H) = sum over the features of
// act(gate . x + bias[f]) (* up . x when gated) * down, added in chunks of 64
// features in order (part: (k + 63) / 64 x H floats), + down_bias.
// cuda_walk_ok: the types it takes.
int cuda_walk_ok(int type);
// out[r] (device ints) = the first index of the largest of row r's n values,
// -1 for a row holding a NaN (host_argmax's), for rows rows of x
int cuda_argmax(cuda_dev *d, const float *x, int rows, int n, int *out);
int cuda_walk(cuda_dev *d, int type, const void *ffn, int H, const int *idx, int k, const float *x, const void *xq, const float *bias,
              const float *down_bias, int gated, int act, float *a, float *part, float *out);
// gpt-oss's expert activation (backend.h's glu_oss): out[i] from gate[i gs], up[i us]
int cuda_glu_oss(cuda_dev *d, float *out, const float *gate, size_t gs, const float *up, size_t us, int n);
int cuda_axpy(cuda_dev *d, float *x, const float *o, float s, size_t n);          // x += o * s
int cuda_round_f16(cuda_dev *d, float *x, size_t n);
int cuda_softmax(cuda_dev *d, float *x, int n);
int cuda_scale(cuda_dev *d, float *x, size_t n, float s);                         // s == 0: zeros
int cuda_mul(cuda_dev *d, float *x, size_t xs, const float *y, size_t ys, int rows, int n);
int cuda_softcap(cuda_dev *d, float *x, size_t n, float cap);
int cuda_copy2d(cuda_dev *d, float *dst, size_t dst_stride, const float *src, size_t src_stride, int rows, int n);
int cuda_zero(cuda_dev *d, void *p, size_t bytes);
// A chain of row operations in one kernel, rows of n: [o = norm_a(o)]
// [x += o * s] [xn = norm_b(x) [quantized into xq for weights of type
// wtype]] (norm kinds 0 and 1 of cuda_norm): the floats and bytes of
// cuda_norm, cuda_axpy, cuda_norm and cuda_quantize one after the other.
typedef struct {
    float *o, *x, *xn;
    const float *wa, *wb;
    int norm_a, residual, norm_b, kind_a, kind_b, n, quant;
    float eps_a, eps_b, s;
    unsigned char *xq; // NULL: no quantization
} cuda_chain;
int cuda_chain_run(cuda_dev *d, const cuda_chain *c, int rows, int wtype);
// q (T rows of H heads), k and v (T rows of KV heads; k NULL: q only) of hd
// each, in place: each head's RMS norm (q_norm / k_norm weights, NULL: none;
// v_norm: v's without weight), RoPE at pos (inv_freq NULL: none), rounding
// to f16 (round), and k and v rows into k_cache[t] / v_cache[t] (device
// arrays of T cache pointers; NULL: none) at pos[t]. The floats of cuda_norm,
// cuda_rope, cuda_round_f16 and cuda_kv_store in turn. hd <= 512.
typedef struct {
    float *q, *k, *v;
    int H, KV, hd, kind, v_norm, round, n_pairs, pair_offset, pair_stride;
    const float *q_norm, *k_norm, *inv_freq;
    float eps, mscale;
    void *const *k_cache, *const *v_cache;
    int kv16; // the caches' rows are f16 (the values rounded to nearest), else f32
} cuda_qkv;
int cuda_qkv_prep(cuda_dev *d, const cuda_qkv *c, int T, const int *pos);
// row t of src (n floats) to cache[t] + pos[t] * n (cache and pos device arrays; kv16: the cache f16)
int cuda_kv_store(cuda_dev *d, void *const *cache, const int *pos, const float *src, int T, int n, int kv16);
// CUDA graphs of the stream's work: capture, instantiate, launch, free
int cuda_graph_begin(cuda_dev *d);
int cuda_graph_end(cuda_dev *d, void **exec);
// A pass's q8 products of the quantized types (cuda_mmq_type) through k_mmq (integer sums a scale
// block, mmq.cu): on 1, those of 2 to cuda_mmq_max rows (a pass that need not equal its rows alone);
// on 2, those of any rows, the columns split by the matrix's shape alone (each row as alone: deterministic)
int cuda_mmq_max(cuda_dev *d);
void cuda_mmq_pass(cuda_dev *d, int on);
int cuda_mmq_type(int wtype);
// k_mmq's measuring switches (INFER_CUDA_MMQ_NT, INFER_CUDA_MMQ_MIN), for tests: token tiles of 8 a block at
// most (1, 2, 4; else 8), q4_K / q5_K's mins through int8 mma (the same integers)
void cuda_mmq_tune(cuda_dev *d, int nt, int min);
// the product launches since the last call, by kind: k_mmq runs, tensor-core products (cuda_gemm), cuBLAS
// ones, q8 products (cuda_matmul_multi, k_mmq's included) -- host calls, so a graph's replays count none
void cuda_counts(cuda_dev *d, unsigned *c);
unsigned cuda_blas_total(cuda_dev *d); // cuBLAS products so far
unsigned cuda_moved(cuda_dev *d); // scratch reallocations so far: a graph captured before one is stale
// a failed capture's error dropped (the runtime's last error, which the next launch's check would report)
void cuda_error_clear(void);
int cuda_graph_launch(cuda_dev *d, void *exec);
void cuda_graph_free(void *exec);

#ifdef __cplusplus
}
#endif

#endif
