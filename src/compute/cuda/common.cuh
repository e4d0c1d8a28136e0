// The CUDA device layer (cuda.h): device memory, the activation quantizers
// and the matrix products of every stored type, a kernel family a file:
//   device.cu          the device, memory, uploads, streams, graphs, cuBLAS
//   weights.cu         weight upload (the split layouts), a row's bytes
//   quantize.cu        the activation quantizers, their rows (quant.cuh)
//   matvec.cu          one-token products (k_mv; units.cuh: what k_mmv shares)
//   mmv.cu             batched decode products on the tensor cores (k_mmv)
//   mmq.cu             the same, integer sums a scale block (k_mmq: the default pass)
//   gemm.cu            prompt products: tensor cores, cuBLAS
//   attention.cu       attention a block a (row, head), and split (flash-decoding)
//   attention_gemm.cu  a prompt's attention through cuBLAS
//   attention_flash.cu a prompt's attention on the tensor cores (flash attention)
//   norm.cu            norms and the fused norm / residual / quantize chains
//   rope.cu            RoPE, the per-head q, k, v preparation, the KV store
//   elementwise.cu     bias, activations, residual, scale, softmax, ...
//   topk.cu            top-k and argmax
//   vindex.cu          the vindex walk FFN, the lm_head index's probe
// This header holds what they share: the device, the launch, the status,
// the block layouts (tensor/quant.h's, one traits struct a type), the byte
// loaders, the warp and block sums, the activation functions.
//
// No relocatable device code: a kernel and every device function it calls
// are compiled in one file, so a device function several files call is
// defined in a header, static (each file its copy); a host helper several
// files call is declared here and defined once (HIDDEN).
#ifndef INFER_COMPUTE_CUDA_COMMON_CUH
#define INFER_COMPUTE_CUDA_COMMON_CUH

#include "compute/cuda/cuda.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cuda_runtime.h>
#include <cublas_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIDDEN __attribute__((visibility("hidden")))

struct cuda_dev {
    int ordinal;
    int sms;             // multiprocessors
    int mmv;             // products of 2+ tokens on the tensor cores (k_mmv; INFER_CUDA_MMV=0: k_mv's groups)
    int mmq_max, mmq_on; // a pass's products through k_mmq (cuda_mmq_pass): 1, of 2 to mmq_max tokens; 2, of any
                         // (deterministic: the split by the shape alone). INFER_CUDA_MMQ_MAX=N, 0: never
    int mmq_ks;          // (the split of mmq_run's last launch: tests)
    int mmq_nt, mmq_min; // k_mmq's token tiles of 8 a block at most (INFER_CUDA_MMQ_NT=1/2/4/8, 8 by default); q4_K /
                         // q5_K's mins through int8 mma (INFER_CUDA_MMQ_MIN=1; the same integers: measuring switches)
    unsigned n_mmq, n_gemm, n_blas, n_mv; // launches of each product kind since the last cuda_counts (INFER_CUDA_TRACE)
    unsigned blas_total;                  // cuBLAS products ever (cuda_blas_total: a pass that ran some is not captured)
    int mv_narrow;       // more threads a row where a product has few blocks (matmul_multi; INFER_CUDA_MV_NARROW=0: not)
    int gemm_split;      // k_gemm2 may split the columns of a product of few blocks (INFER_CUDA_GEMM_SPLIT=0: never)
    int gemm_xh;         // k_gemm2's activations rounded to f16 once a product, quantized weights (INFER_CUDA_GEMM_XH=0: not)
    int prefetch;        // the products' weights asked into L2 before they wait (mv_prefetch; INFER_CUDA_PREFETCH=0: not)
    int mv_spec;         // one-token products in a kernel of their type (k_mv's TY; INFER_CUDA_MV_SPEC=0: the kernel of any type)
    int att_pf;          // decode rows' attention reads its cache before it waits (k_attention's PRE; INFER_CUDA_ATT_PF=0: not)
    int att_split, att_chunk; // single rows' positions split over up to att_split blocks of att_chunk+ (INFER_CUDA_ATT_SPLIT=0: one block)
    int att_split_all;   // every row's (INFER_CUDA_ATT_SPLIT=N set: tests, comparisons)
    int att_dec;         // INFER_CUDA_ATT_DEC=1: the one-pass kernel (k_dec1) for them
    float *ap;           // their partial values and (max, sum) pairs, and each (row, head)'s count of blocks done
    int *acnt;
    size_t ap_cap, acnt_cap;
    float *part;         // its partial sums
    size_t part_cap;
    unsigned moved;      // scratch reallocations so far (grow): a captured graph made before one points at freed memory
    cudaStream_t stream;
    char name[256];
    unsigned char *ring; // pinned staging for cuda_upload_async
    size_t ring_at;
    cublasHandle_t blas; // cuBLAS (cuda_gemm's large prompts: blas_gemm), made on first use
    int blas_state;      // 0 not tried, 1 made, -1 none
    void *gx, *gw;       // blas_gemm's scratch: the activations' parts, a matrix's weights in f16
    size_t gx_cap, gw_cap;
    void *ag_s, *ag_p, *ag_q; // cuda_attention_gemm's scratch: scores, probabilities, q in f16
    size_t ag_s_cap, ag_p_cap, ag_q_cap, ag_bytes; // (ag_bytes: its scores and probabilities at most; INFER_CUDA_ATT_GEMM_BYTES for tests)
    int gt_on, gt_pending, gt_n; // INFER_CUDA_GRAPH_TIME (cuda_graph_launch)
    double gt_ms;
    cudaEvent_t gt_a, gt_b;
};

// cuBLAS, loaded when first wanted (dlopen: a build with CUDA needs no CUDA
// library to run, and runs on without cuBLAS where it is missing)
typedef cublasStatus_t (*blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*blas_destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*blas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*blas_gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *,
                                       cudaDataType, int, const void *, cudaDataType, int, const void *, void *, cudaDataType, int,
                                       cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*blas_gemm_sb_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *,
                                          cudaDataType, int, long long, const void *, cudaDataType, int, long long, const void *, void *,
                                          cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);
struct blas_api {
    void *lib;
    blas_create_fn create;
    blas_destroy_fn destroy;
    blas_stream_fn stream;
    blas_gemm_fn gemm;
    blas_gemm_sb_fn gemm_sb; // (cublasGemmStridedBatchedEx: cuda_attention_gemm; NULL where missing)
};
extern HIDDEN blas_api g_blas; // (device.cu)
// 1 when cuBLAS is loaded and this device's handle made (on first use)
HIDDEN int blas_ready(cuda_dev *d);
// *p holds at least `bytes` of device memory (grown, its contents dropped); -1 when it cannot
HIDDEN int grow(cuda_dev *d, void **p, size_t *cap, size_t bytes);

// Programmatic dependent launch (Hopper): each kernel of a captured graph
// (decode steps: hundreds of small kernels a token) is launched as allowed to
// begin while the kernel before it in the stream is still running -- its
// blocks are scheduled early, then wait at PDL_ENTRY for that kernel to
// finish and its writes to be visible -- which hides most of the gap between
// one small kernel and the next. Every kernel starts with PDL_ENTRY, before
// any early return, so a kernel never ends before the one it depends on
// (which makes the chain transitive); it then lets the next one be
// scheduled. Without the attribute the two instructions do nothing. Kernels
// launched outside a capture (prompts: large grids, whose waiting blocks
// would hold SMs the running kernel needs) go without it; INFER_CUDA_PDL=0
// turns it off, INFER_CUDA_PDL=2 uses it for every launch.
#define PDL_ENTRY() asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory")

// whether launches on this stream go with the attribute (device.cu)
HIDDEN int pdl_for(cudaStream_t stream);

template <typename... KArgs, typename... Args>
static void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
    if (!pdl_for(stream)) {
        kernel<<<grid, block, smem, stream>>>(args...);
        return;
    }
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cfg.attrs = at, cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, kernel, ((KArgs)args)...);
}

// sets cuda_status()'s message ("what: the error"), returns -1
HIDDEN int set_status(const char *what, cudaError_t e);

static inline int launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : set_status(what, e);
}

static inline unsigned grid_for(size_t n, int block) { return (unsigned)((n + block - 1) / block); }

// ---------------------------------------------------------------------------
// The block layouts: tensor/quant.h's structs (QK, QK_K elements a block),
// one traits struct a quantized type: qk elements, B bytes a block.

template <int T> struct qtype;
#define QTYPE(t, block, n)                                                                     \
    template <> struct qtype<t> {                                                              \
        enum { qk = n, B = sizeof(block) };                                                    \
    }
QTYPE(DT_Q8_0, block_q8_0, QK);
QTYPE(DT_Q4_0, block_q4_0, QK);
QTYPE(DT_Q4_1, block_q4_1, QK);
QTYPE(DT_Q5_0, block_q5_0, QK);
QTYPE(DT_Q5_1, block_q5_1, QK);
QTYPE(DT_MXFP4, block_mxfp4, QK);
QTYPE(DT_Q2_K, block_q2_K, QK_K);
QTYPE(DT_Q3_K, block_q3_K, QK_K);
QTYPE(DT_Q4_K, block_q4_K, QK_K);
QTYPE(DT_Q5_K, block_q5_K, QK_K);
QTYPE(DT_Q6_K, block_q6_K, QK_K);
QTYPE(DT_Q8_K, block_q8_K, QK_K); // (the k-quants' activations)
#undef QTYPE

static inline int is_k(int t) { return t == DT_Q2_K || t == DT_Q3_K || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }
static inline int is_q32(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q4_1 || t == DT_Q5_0 || t == DT_Q5_1 || t == DT_MXFP4; }
static inline int is_float(int t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }
static inline size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

// ---------------------------------------------------------------------------
// Weights on the GPU: Q8_0, Q4_0, Q5_0 and Q6_K matrices are split at upload
// (cuda_weight_upload) into arrays of their fields, matrix-wide, in this
// order: Q8_0 quants (32 bytes a block), f16 scales; Q4_0 quants (16), scales;
// Q5_0 quants (16), high bits (4), scales; Q6_K low bits (128), high bits
// (64), sub-block scales (16), f16 scale. Block i of the matrix (row r, block
// b: i = r nb + b) has its field at offset i x its size in each array. The
// other types keep ggml's blocks, rows one after the other.

static inline int is_split(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q6_K; }

// bytes of a row of n weights of a type (weights.cu)
HIDDEN size_t row_bytes(int t, int n);

static __device__ __forceinline__ float ld_h(const uint8_t *p) { return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8))); }
static __device__ __forceinline__ float ld_f(const uint8_t *p) { return __uint_as_float((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24); }
static __device__ __forceinline__ uint32_t ld_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static __device__ __forceinline__ float ld_h2(const uint8_t *p) { return __half2float(*(const __half *)p); } // 2-aligned

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ float block_sum(float v, float *sh) {
    v = warp_sum(v);
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = threadIdx.x < nw ? sh[threadIdx.x] : 0.0f;
    if (w == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

static __device__ float block_max(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = threadIdx.x < nw ? sh[threadIdx.x] : -INFINITY;
    if (w == 0)
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

// f32 -> f16 bits, round to nearest even: base/half.h's f32_to_f16, step for step
static __device__ uint32_t f32_to_f16(float f) {
    uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return sign | 0x7e00;
    if (a >= 0x477ff000) return sign | 0x7c00;
    if (a < 0x38800000) {
        float v = __fmul_rn(__uint_as_float(a), 16777216.0f);
        uint32_t m = (uint32_t)v;
        float r = __fsub_rn(v, (float)m);
        if (r > 0.5f || (r == 0.5f && (m & 1))) m++;
        return sign | m;
    }
    uint32_t h = (((a >> 23) - 112) << 10) | ((a >> 13) & 0x3ff), rest = a & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | h;
}

static __device__ float f16_round(float v) { return __half2float(__ushort_as_half((unsigned short)f32_to_f16(v))); }

// c += a b on the tensor cores: m16n8k16, f16 in, f32 sums (a: 4 registers of 2 halves, b: 2)
static __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared without the registers (bytes < 16: the rest zeros); the groups of them
// committed, and waited for until at most N groups are in flight
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, int bytes) {
    unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(src), "r"(bytes));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// two floats as the halves of one register (lo first), rounded to nearest
static __device__ __forceinline__ uint32_t h2_bits(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}

// act (tensor.h's enum act_kind: 0 silu, 1 gelu tanh, 2 gelu, 3 relu); ggml:
// GELU tanh on the f16-rounded input, rounded to f16, the limits beyond +-10
static __device__ float act1(float v, int act, int ggml) {
    switch (act) {
    case 0: return v / (1.0f + expf(-v));
    case 1:
        if (ggml) {
            if (v <= -10.0f) return 0.0f;
            if (v >= 10.0f) return v;
            float x = f16_round(v);
            return f16_round(0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))));
        }
        return v / (1.0f + expf(-2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case 2: return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    default: return v > 0 ? v : 0;
    }
}

#endif
