// The CUDA device layer (cuda.h): device memory, the activation quantizers
// and the matrix products of every stored type.
//
// A product runs one warp per output row; each lane takes blocks lane,
// lane + 32, ... of the row, computes each block's contribution exactly as
// the CPU oracle does (integer sums of the stored values against the q8
// activations, then the oracle's float scaling), and the warp adds the
// lanes' sums in a tree. The block layouts are ggml's (tensor/quant.h); they
// are restated here as byte offsets because that header is C.
#include "compute/cuda/cuda.h"
#include "tensor/dtype.h"

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
    int mv_group;        // tokens whose products share their weight loads (INFER_CUDA_MV_GROUP: 4 or 8)
    int gemm_kernel;     // the tensor-core kernel: 2 k_gemm2 (default), 1 k_gemm (INFER_CUDA_GEMM_KERNEL=1)
    int sms;             // multiprocessors
    int mmv;             // products of 2+ tokens on the tensor cores (k_mmv; INFER_CUDA_MMV=0: k_mv's groups)
    int mv_tpr;          // INFER_CUDA_MV_TPR=8|32|128: every k_mv product's threads a row (for measurement; 0: by shape)
    int mv_narrow;       // more threads a row where a product has few blocks (matmul_multi; INFER_CUDA_MV_NARROW=0: not)
    int gemm_split;      // k_gemm2 may split the columns of a product of few blocks (INFER_CUDA_GEMM_SPLIT=0: never)
    int prefetch;        // the products' weights asked into L2 before they wait (mv_prefetch; INFER_CUDA_PREFETCH=0: not)
    int mv_spec;         // one-token products in a kernel of their type (k_mv's TY; INFER_CUDA_MV_SPEC=0: the kernel of any type)
    int att_pf;          // decode rows' attention reads its cache before it waits (k_attention's PRE; INFER_CUDA_ATT_PF=0: not)
    int att_split, att_chunk; // attention's positions split over up to att_split blocks of att_chunk+ (INFER_CUDA_ATT_SPLIT=0: one block)
    float *ap;           // their partial values and (max, sum) pairs, and each (row, head)'s count of blocks done
    int *acnt;
    size_t ap_cap, acnt_cap;
    float *part;         // its partial sums
    size_t part_cap;
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

enum { RING_BYTES = 4 << 20, RING_MAX_COPY = 64 << 10 };
enum { AG_BYTES = 96 << 20 }; // (cuda_attention_gemm's scores and probabilities of a chunk of rows at most)

static char g_status[256] = "not probed";

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
static struct {
    void *lib;
    blas_create_fn create;
    blas_destroy_fn destroy;
    blas_stream_fn stream;
    blas_gemm_fn gemm;
    blas_gemm_sb_fn gemm_sb; // (cublasGemmStridedBatchedEx: cuda_attention_gemm; NULL where missing)
} g_blas;
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;
static void blas_load(void) {
    const char *e = getenv("INFER_CUDA_CUBLAS");
    if (e && *e == '0') return;
    static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                                  "/usr/local/cuda/lib64/libcublas.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !g_blas.lib; i++) g_blas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g_blas.lib) return;
    g_blas.create = (blas_create_fn)dlsym(g_blas.lib, "cublasCreate_v2");
    g_blas.destroy = (blas_destroy_fn)dlsym(g_blas.lib, "cublasDestroy_v2");
    g_blas.stream = (blas_stream_fn)dlsym(g_blas.lib, "cublasSetStream_v2");
    g_blas.gemm = (blas_gemm_fn)dlsym(g_blas.lib, "cublasGemmEx");
    g_blas.gemm_sb = (blas_gemm_sb_fn)dlsym(g_blas.lib, "cublasGemmStridedBatchedEx");
    if (!g_blas.create || !g_blas.destroy || !g_blas.stream || !g_blas.gemm) g_blas.gemm = NULL, g_blas.gemm_sb = NULL;
}

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

static int g_pdl = -1;
static int pdl_mode(void) {
    if (g_pdl < 0) {
        const char *e = getenv("INFER_CUDA_PDL");
        g_pdl = e && *e == '0' ? 0 : e && *e == '2' ? 2 : 1;
    }
    return g_pdl;
}

static int pdl_for(cudaStream_t stream) {
    int m = pdl_mode();
    if (m != 1) return m == 2;
    cudaStreamCaptureStatus st;
    return cudaStreamIsCapturing(stream, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
}

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

static int set_status(const char *what, cudaError_t e) {
    snprintf(g_status, sizeof g_status, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

extern "C" HIDDEN int cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        set_status("no CUDA device", e);
        return 0;
    }
    if (n == 0) snprintf(g_status, sizeof g_status, "no CUDA device");
    else snprintf(g_status, sizeof g_status, "ok");
    return n;
}

extern "C" HIDDEN const char *cuda_status(void) { return g_status; }

extern "C" HIDDEN cuda_dev *cuda_open(int ordinal) {
    if (ordinal < 0 || ordinal >= cuda_device_count()) {
        if (!strcmp(g_status, "ok")) snprintf(g_status, sizeof g_status, "no CUDA device %d", ordinal);
        return NULL;
    }
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess) { set_status("cudaSetDevice", e); return NULL; }
    cuda_dev *d = (cuda_dev *)calloc(1, sizeof *d);
    if (!d) return NULL;
    d->ordinal = ordinal, d->gt_on = -1;
    const char *pf = getenv("INFER_CUDA_PREFETCH");
    d->prefetch = !(pf && *pf == '0');
    const char *ms = getenv("INFER_CUDA_MV_SPEC");
    d->mv_spec = !(ms && *ms == '0');
    const char *ap = getenv("INFER_CUDA_ATT_PF");
    d->att_pf = !(ap && *ap == '0');
    const char *g = getenv("INFER_CUDA_MV_GROUP");
    d->mv_group = g && atoi(g) == 4 ? 4 : 8; // (k_mv's MV_GROUP)
    const char *gk = getenv("INFER_CUDA_GEMM_KERNEL");
    d->gemm_kernel = gk && atoi(gk) == 1 ? 1 : 2;
    const char *gs = getenv("INFER_CUDA_GEMM_SPLIT");
    d->gemm_split = !gs || *gs != '0';
    const char *mm = getenv("INFER_CUDA_MMV");
    d->mmv = !mm || *mm != '0';
    const char *nw = getenv("INFER_CUDA_MV_NARROW");
    d->mv_narrow = !(nw && *nw == '0');
    const char *tp = getenv("INFER_CUDA_MV_TPR");
    d->mv_tpr = tp && (atoi(tp) == 8 || atoi(tp) == 32 || atoi(tp) == 128) ? atoi(tp) : 0;
    const char *as = getenv("INFER_CUDA_ATT_SPLIT"), *ac = getenv("INFER_CUDA_ATT_CHUNK");
    d->att_split = as ? atoi(as) : 0, d->att_chunk = ac && atoi(ac) > 0 ? atoi(ac) : 16;
    d->att_split = d->att_split < 0 ? 0 : d->att_split > 64 ? 64 : d->att_split;
    const char *ab = getenv("INFER_CUDA_ATT_GEMM_BYTES");
    d->ag_bytes = ab && atol(ab) > 0 ? (size_t)atol(ab) : (size_t)AG_BYTES;
    if (cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, ordinal) != cudaSuccess || d->sms < 1) d->sms = 1;
    if ((e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        set_status("cudaStreamCreate", e);
        free(d);
        return NULL;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, ordinal) == cudaSuccess) snprintf(d->name, sizeof d->name, "%s", p.name);
    if ((e = cudaMallocHost((void **)&d->ring, RING_BYTES)) != cudaSuccess) {
        set_status("cudaMallocHost", e);
        cudaStreamDestroy(d->stream);
        free(d);
        return NULL;
    }
    return d;
}

extern "C" HIDDEN void cuda_close(cuda_dev *d) {
    if (!d) return;
    cudaSetDevice(d->ordinal);
    cudaStreamSynchronize(d->stream);
    if (d->blas_state > 0) g_blas.destroy(d->blas);
    cudaFree(d->gx), cudaFree(d->gw), cudaFree(d->ag_s), cudaFree(d->ag_p), cudaFree(d->ag_q);
    if (d->gt_on > 0) {
        if (d->gt_n) fprintf(stderr, "cuda: %d graph replays, %.2f us of GPU time each\n", d->gt_n, 1000.0 * d->gt_ms / d->gt_n);
        cudaEventDestroy(d->gt_a), cudaEventDestroy(d->gt_b);
    }
    cudaStreamDestroy(d->stream);
    cudaFreeHost(d->ring);
    cudaFree(d->part), cudaFree(d->ap), cudaFree(d->acnt);
    free(d);
}

extern "C" HIDDEN const char *cuda_name(const cuda_dev *d) { return d->name; }

extern "C" HIDDEN void *cuda_alloc(cuda_dev *d, size_t bytes) {
    void *p = NULL;
    cudaSetDevice(d->ordinal);
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) { set_status("cudaMalloc", e); return NULL; }
    return p;
}

extern "C" HIDDEN void cuda_free(cuda_dev *d, void *p) {
    if (!p) return;
    cudaSetDevice(d->ordinal);
    cudaFree(p);
}

extern "C" HIDDEN int cuda_upload(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream); // (src may be freed after)
    return e == cudaSuccess ? 0 : set_status("upload", e);
}

extern "C" HIDDEN int cuda_upload_async(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    if (bytes > RING_MAX_COPY) return cuda_upload(d, dst, src, bytes);
    size_t at = (d->ring_at + 255) & ~(size_t)255;
    if (at + bytes > RING_BYTES) at = 0;
    memcpy(d->ring + at, src, bytes);
    d->ring_at = at + bytes;
    cudaError_t e = cudaMemcpyAsync(dst, d->ring + at, bytes, cudaMemcpyHostToDevice, d->stream);
    return e == cudaSuccess ? 0 : set_status("upload", e);
}

extern "C" HIDDEN void *cuda_stream(cuda_dev *d) { return (void *)d->stream; }

extern "C" HIDDEN int cuda_download(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("download", e);
}

extern "C" HIDDEN void *cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    return cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) == cudaSuccess ? p : NULL;
}

extern "C" HIDDEN void cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" HIDDEN int cuda_sync(cuda_dev *d) {
    cudaError_t e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("kernel", e);
}

// ---------------------------------------------------------------------------
// block layouts (bytes), as tensor/quant.h

enum { QK = 32, QK_K = 256 };
enum { Q8_0_B = 34, Q4_0_B = 18, Q4_1_B = 20, Q5_0_B = 22, Q5_1_B = 24, MXFP4_B = 17 };
enum { Q2_K_B = 84, Q3_K_B = 110, Q4_K_B = 144, Q5_K_B = 176, Q6_K_B = 210, Q8_K_B = 292 };

static __device__ __forceinline__ float ld_h(const uint8_t *p) { return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8))); }
static __device__ __forceinline__ float ld_f(const uint8_t *p) { return __uint_as_float((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24); }
static __device__ __forceinline__ uint32_t ld_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static __device__ __forceinline__ float ld_h2(const uint8_t *p) { return __half2float(*(const __half *)p); } // 2-aligned

static __device__ __forceinline__ float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return __uint_as_float(bits);
}

__constant__ int8_t c_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static int is_k(int t) { return t == DT_Q2_K || t == DT_Q3_K || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }
static int is_q32(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q4_1 || t == DT_Q5_0 || t == DT_Q5_1 || t == DT_MXFP4; }
static int is_float(int t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }
static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

// ---------------------------------------------------------------------------
// Activation rows on the GPU hold the CPU quantizers' values (act_quant_q8_0,
// q8_K_from_float) with each field in an array of its own, so that lanes
// read the quants 16 bytes at a time; each row is padded to 16 bytes.
//   q8_0 (the 32-element types): nb x 32 int8, then nb f16 scales
//   q8_K (the k-quants): nb x 256 int8, nb f32 scales, nb x 16 int16 sums of 16

struct xrow {
    const int8_t *qs;
    const uint8_t *d;
    const int16_t *bs;
};
static __device__ __forceinline__ xrow x_q8_0(const uint8_t *row, int nb) { return {(const int8_t *)row, row + 32 * nb, NULL}; }
static __device__ __forceinline__ xrow x_q8_K(const uint8_t *row, int nb) {
    return {(const int8_t *)row, row + 256 * nb, (const int16_t *)(row + 260 * nb)};
}
static __device__ __forceinline__ float xd0(const xrow &x, int b) { return ld_h2(x.d + 2 * b); }
static __device__ __forceinline__ float xdK(const xrow &x, int b) { return ((const float *)x.d)[b]; }

extern "C" HIDDEN size_t cuda_act_row_size(int wtype, int n) {
    if (is_float(wtype)) return sizeof(float) * (size_t)n;
    if (is_q32(wtype) && n % QK == 0) return round16((size_t)(n / QK) * Q8_0_B);
    if (is_k(wtype) && n % QK_K == 0) return round16((size_t)(n / QK_K) * Q8_K_B);
    return 0;
}

// ---------------------------------------------------------------------------
// Weights on the GPU: Q8_0, Q4_0, Q5_0 and Q6_K matrices are split at upload
// (cuda_weight_upload) into arrays of their fields, matrix-wide, in this
// order: Q8_0 quants (32 bytes a block), f16 scales; Q4_0 quants (16), scales;
// Q5_0 quants (16), high bits (4), scales; Q6_K low bits (128), high bits
// (64), sub-block scales (16), f16 scale. Block i of the matrix (row r, block
// b: i = r nb + b) has its field at offset i x its size in each array. The
// other types keep ggml's blocks, rows one after the other.

static int is_split(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q6_K; }

// one block of a raw matrix into the split arrays (a thread per block)
static __global__ void k_split(const uint8_t *src, uint8_t *dst, int type, size_t nblk) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nblk) return;
    switch (type) {
    case DT_Q8_0: {
        const uint8_t *s = src + i * Q8_0_B;
        for (int k = 0; k < 32; k++) dst[32 * i + k] = s[2 + k];
        dst[32 * nblk + 2 * i] = s[0], dst[32 * nblk + 2 * i + 1] = s[1];
        break;
    }
    case DT_Q4_0: {
        const uint8_t *s = src + i * Q4_0_B;
        for (int k = 0; k < 16; k++) dst[16 * i + k] = s[2 + k];
        dst[16 * nblk + 2 * i] = s[0], dst[16 * nblk + 2 * i + 1] = s[1];
        break;
    }
    case DT_Q5_0: {
        const uint8_t *s = src + i * Q5_0_B;
        for (int k = 0; k < 16; k++) dst[16 * i + k] = s[6 + k];
        for (int k = 0; k < 4; k++) dst[16 * nblk + 4 * i + k] = s[2 + k];
        dst[20 * nblk + 2 * i] = s[0], dst[20 * nblk + 2 * i + 1] = s[1];
        break;
    }
    case DT_Q6_K: {
        const uint8_t *s = src + i * Q6_K_B;
        for (int k = 0; k < 128; k++) dst[128 * i + k] = s[k];
        for (int k = 0; k < 64; k++) dst[128 * nblk + 64 * i + k] = s[128 + k];
        for (int k = 0; k < 16; k++) dst[192 * nblk + 16 * i + k] = s[192 + k];
        dst[208 * nblk + 2 * i] = s[208], dst[208 * nblk + 2 * i + 1] = s[209];
        break;
    }
    }
}

// bytes of a row of n weights of a type (tensor/dtype.c's table, restated)
static size_t row_bytes(int t, int n) {
    switch (t) {
    case DT_F32: return 4 * (size_t)n;
    case DT_F16: case DT_BF16: return 2 * (size_t)n;
    case DT_Q8_0: return (size_t)n / QK * Q8_0_B;
    case DT_Q4_0: return (size_t)n / QK * Q4_0_B;
    case DT_Q4_1: return (size_t)n / QK * Q4_1_B;
    case DT_Q5_0: return (size_t)n / QK * Q5_0_B;
    case DT_Q5_1: return (size_t)n / QK * Q5_1_B;
    case DT_MXFP4: return (size_t)n / QK * MXFP4_B;
    case DT_Q2_K: return (size_t)n / QK_K * Q2_K_B;
    case DT_Q3_K: return (size_t)n / QK_K * Q3_K_B;
    case DT_Q4_K: return (size_t)n / QK_K * Q4_K_B;
    case DT_Q5_K: return (size_t)n / QK_K * Q5_K_B;
    case DT_Q6_K: return (size_t)n / QK_K * Q6_K_B;
    }
    return 0;
}

extern "C" HIDDEN void *cuda_weight_upload(cuda_dev *d, int type, const void *host, int rows, int cols) {
    size_t bytes = row_bytes(type, cols) * (size_t)rows;
    if (!bytes || rows <= 0 || (!is_float(type) && !cuda_act_row_size(type, cols))) return NULL;
    void *p = cuda_alloc(d, bytes);
    if (!p) return NULL;
    if (!is_split(type)) {
        if (cuda_upload(d, p, host, bytes)) cuda_free(d, p), p = NULL;
        return p;
    }
    void *raw = cuda_alloc(d, bytes);
    size_t nblk = (size_t)rows * (cols / (type == DT_Q6_K ? QK_K : QK));
    int ok = raw && !cuda_upload(d, raw, host, bytes);
    if (ok) {
        launch(k_split, (unsigned)((nblk + 255) / 256), 256, 0, d->stream, (const uint8_t *)raw, (uint8_t *)p, type, nblk);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
        ok = e == cudaSuccess || set_status("weight layout", e);
    }
    cuda_free(d, raw);
    if (!ok) cuda_free(d, p), p = NULL;
    return p;
}

// ---------------------------------------------------------------------------
// The products: a warp per output row, the row cut into units of 16 to 64
// weights that the lanes take in turn (16-byte loads, __dp4a on the packed
// integers), each lane keeping its float sum, one warp sum at the end. The
// integer sums and the per-block scalings are the CPU oracle's
// (tensor/vecdot_ref.c); the order of the float additions is the lanes'.

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// bytes of a minus bytes of b, saturated (signed)
static __device__ __forceinline__ int vsub4(int a, int b) { return (int)__vsubss4((unsigned)a, (unsigned)b); }

// the 4 bits of b (bits 0-3) as bit 4 of bytes 0-3
static __device__ __forceinline__ int spread4(uint32_t b) { return (int)(((b & 1) | (b & 2) << 7 | (b & 4) << 14 | (b & 8) << 21) << 4); }

struct wrow { const uint8_t *w; int rows, r, nb; }; // matrix, its row count, the row, blocks a row

// A unit's value from its integer sums and scales. Every rounding is
// explicit (no multiply-add contraction), so that the batched tensor-core
// product (k_mmv) computes each unit's value exactly as k_mv does.
// the 32-element types: s * (d_w * d_x)
static __device__ __forceinline__ float v_q32(float dw, float dx, int s) { return __fmul_rn((float)s, __fmul_rn(dw, dx)); }
// q4_K / q5_K: d_x * (d sumi - dmin summ)
static __device__ __forceinline__ float v_k4(float dx, float d, float dmin, int sumi, int summ) {
    return __fmul_rn(dx, __fsub_rn(__fmul_rn(d, (float)sumi), __fmul_rn(dmin, (float)summ)));
}
// q6_K: (d_x d) sumi
static __device__ __forceinline__ float v_q6K(float dx, float d, int sumi) { return __fmul_rn(__fmul_rn(dx, d), (float)sumi); }

// q8_0 (split): unit (block b, half i): 16 quants
static __device__ __forceinline__ float u_q8_0(const wrow &m, const xrow &x, int u) {
    int b = u >> 1, i = u & 1;
    size_t blk = (size_t)m.r * m.nb + b;
    int4 q = *(const int4 *)(m.w + 32 * blk + 16 * i), y = *(const int4 *)(x.qs + 32 * b + 16 * i);
    int s = __dp4a(q.x, y.x, 0);
    s = __dp4a(q.y, y.y, s), s = __dp4a(q.z, y.z, s), s = __dp4a(q.w, y.w, s);
    return v_q32(ld_h2(m.w + (size_t)32 * m.rows * m.nb + 2 * blk), xd0(x, b), s);
}

// q4_0 (split): unit = block b: byte l holds element l (low) and 16 + l (high)
static __device__ __forceinline__ float u_q4_0(const wrow &m, const xrow &x, int b) {
    size_t blk = (size_t)m.r * m.nb + b;
    int4 q = *(const int4 *)(m.w + 16 * blk), y0 = *(const int4 *)(x.qs + 32 * b), y1 = *(const int4 *)(x.qs + 32 * b + 16);
    int qv[4] = {q.x, q.y, q.z, q.w}, lo[4] = {y0.x, y0.y, y0.z, y0.w}, hi[4] = {y1.x, y1.y, y1.z, y1.w}, s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s = __dp4a(vsub4(qv[k] & 0x0f0f0f0f, 0x08080808), lo[k], s);
        s = __dp4a(vsub4((qv[k] >> 4) & 0x0f0f0f0f, 0x08080808), hi[k], s);
    }
    return v_q32(ld_h2(m.w + (size_t)16 * m.rows * m.nb + 2 * blk), xd0(x, b), s);
}

// q5_0 (split): as q4_0 with the fifth bits (qh bit l: element l, bit 16 + l: element 16 + l)
static __device__ __forceinline__ float u_q5_0(const wrow &m, const xrow &x, int b) {
    size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
    int4 q = *(const int4 *)(m.w + 16 * blk), y0 = *(const int4 *)(x.qs + 32 * b), y1 = *(const int4 *)(x.qs + 32 * b + 16);
    uint32_t qh = *(const uint32_t *)(m.w + 16 * nall + 4 * blk);
    int qv[4] = {q.x, q.y, q.z, q.w}, lo[4] = {y0.x, y0.y, y0.z, y0.w}, hi[4] = {y1.x, y1.y, y1.z, y1.w}, s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s = __dp4a(vsub4((qv[k] & 0x0f0f0f0f) | spread4(qh >> (4 * k)), 0x10101010), lo[k], s);
        s = __dp4a(vsub4(((qv[k] >> 4) & 0x0f0f0f0f) | spread4(qh >> (16 + 4 * k)), 0x10101010), hi[k], s);
    }
    return v_q32(ld_h2(m.w + 20 * nall + 2 * blk), xd0(x, b), s);
}

// q6_K (split): unit (super-block b, quarter i): half h = i / 2 of the
// super-block, its bytes l0..l0+15 (l0 = 16 (i % 2)) of both 32-byte rows of
// ql and of qh: 64 weights in four groups of 16, each with its scale
static __device__ __forceinline__ float u_q6_K(const wrow &m, const xrow &x, int u) {
    int b = u >> 2, i = u & 3, h = i >> 1, l0 = 16 * (i & 1);
    size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
    const uint8_t *ql = m.w + 128 * blk + 64 * h + l0;
    int4 A = *(const int4 *)ql, B = *(const int4 *)(ql + 32), C = *(const int4 *)(m.w + 128 * nall + 64 * blk + 32 * h + l0);
    const int8_t *sc = (const int8_t *)(m.w + 192 * nall + 16 * blk) + 8 * h + (i & 1);
    const int8_t *xs = x.qs + 256 * b + 128 * h + l0;
    int4 X1 = *(const int4 *)xs, X2 = *(const int4 *)(xs + 32), X3 = *(const int4 *)(xs + 64), X4 = *(const int4 *)(xs + 96);
    int av[4] = {A.x, A.y, A.z, A.w}, bv[4] = {B.x, B.y, B.z, B.w}, cv[4] = {C.x, C.y, C.z, C.w};
    int x1[4] = {X1.x, X1.y, X1.z, X1.w}, x2[4] = {X2.x, X2.y, X2.z, X2.w}, x3[4] = {X3.x, X3.y, X3.z, X3.w}, x4[4] = {X4.x, X4.y, X4.z, X4.w};
    int s1 = 0, s2 = 0, s3 = 0, s4 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int a = av[k], bb = bv[k], c = cv[k];
        s1 = __dp4a(vsub4((a & 0x0f0f0f0f) | ((c & 0x03030303) << 4), 0x20202020), x1[k], s1);
        s2 = __dp4a(vsub4((bb & 0x0f0f0f0f) | (((c >> 2) & 0x03030303) << 4), 0x20202020), x2[k], s2);
        s3 = __dp4a(vsub4(((a >> 4) & 0x0f0f0f0f) | (((c >> 4) & 0x03030303) << 4), 0x20202020), x3[k], s3);
        s4 = __dp4a(vsub4(((bb >> 4) & 0x0f0f0f0f) | (((c >> 6) & 0x03030303) << 4), 0x20202020), x4[k], s4);
    }
    int sumi = sc[0] * s1 + sc[2] * s2 + sc[4] * s3 + sc[6] * s4;
    return v_q6K(xdK(x, b), ld_h2(m.w + 208 * nall + 2 * blk), sumi);
}

// scale and min of sub-blocks j and j + 1 (j even) from the 12 scale bytes (3 words)
static __device__ __forceinline__ void scales_k4(const uint8_t *w, int j, int *sc0, int *m0, int *sc1, int *m1) {
    const uint32_t *p = (const uint32_t *)(w + 4);
    uint32_t s0 = p[0], s1 = p[1], s2 = p[2];
    int sc[2], mn[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int jj = j + k, sh = 8 * (jj & 3);
        if (jj < 4) {
            sc[k] = (s0 >> sh) & 63, mn[k] = (s1 >> sh) & 63;
        } else {
            sc[k] = ((s2 >> sh) & 15) | ((s0 >> (sh + 6)) & 3) << 4;
            mn[k] = ((s2 >> (sh + 4)) & 15) | ((s1 >> (sh + 6)) & 3) << 4;
        }
    }
    *sc0 = sc[0], *m0 = mn[0], *sc1 = sc[1], *m1 = mn[1];
}

// q4_K (ggml blocks): unit (b, part i of 8): 16 quant bytes, the low nibbles
// elements 16h..16h+15 of sub-block 2p, the high ones of 2p + 1 (p = i / 2,
// h = i % 2)
static __device__ __forceinline__ float u_q4_K(const wrow &m, const xrow &x, int u) {
    int b = u >> 3, i = u & 7, p = i >> 1, h = i & 1;
    const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * Q4_K_B;
    int4 q = *(const int4 *)(w + 16 + 32 * p + 16 * h);
    const int8_t *xs = x.qs + 256 * b + 64 * p + 16 * h;
    int4 X0 = *(const int4 *)xs, X1 = *(const int4 *)(xs + 32);
    int qv[4] = {q.x, q.y, q.z, q.w}, x0[4] = {X0.x, X0.y, X0.z, X0.w}, x1[4] = {X1.x, X1.y, X1.z, X1.w}, s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s0 = __dp4a(qv[k] & 0x0f0f0f0f, x0[k], s0);
        s1 = __dp4a((qv[k] >> 4) & 0x0f0f0f0f, x1[k], s1);
    }
    int sc0, m0, sc1, m1;
    scales_k4(w, 2 * p, &sc0, &m0, &sc1, &m1);
    const int16_t *bs = x.bs + 16 * b;
    int sumi = sc0 * s0 + sc1 * s1, summ = m0 * bs[4 * p + h] + m1 * bs[4 * p + 2 + h];
    return v_k4(xdK(x, b), ld_h2(w), ld_h2(w + 2), sumi, summ);
}

// q5_K (ggml blocks): as q4_K, the fifth bits from qh (bits 2p and 2p + 1 of bytes 16h..)
static __device__ __forceinline__ float u_q5_K(const wrow &m, const xrow &x, int u) {
    int b = u >> 3, i = u & 7, p = i >> 1, h = i & 1;
    const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * Q5_K_B;
    int4 q = *(const int4 *)(w + 48 + 32 * p + 16 * h), qh = *(const int4 *)(w + 16 + 16 * h);
    const int8_t *xs = x.qs + 256 * b + 64 * p + 16 * h;
    int4 X0 = *(const int4 *)xs, X1 = *(const int4 *)(xs + 32);
    int qv[4] = {q.x, q.y, q.z, q.w}, hv[4] = {qh.x, qh.y, qh.z, qh.w}, x0[4] = {X0.x, X0.y, X0.z, X0.w}, x1[4] = {X1.x, X1.y, X1.z, X1.w};
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s0 = __dp4a((qv[k] & 0x0f0f0f0f) | (((hv[k] >> (2 * p)) & 0x01010101) << 4), x0[k], s0);
        s1 = __dp4a(((qv[k] >> 4) & 0x0f0f0f0f) | (((hv[k] >> (2 * p + 1)) & 0x01010101) << 4), x1[k], s1);
    }
    int sc0, m0, sc1, m1;
    scales_k4(w, 2 * p, &sc0, &m0, &sc1, &m1);
    const int16_t *bs = x.bs + 16 * b;
    int sumi = sc0 * s0 + sc1 * s1, summ = m0 * bs[4 * p + h] + m1 * bs[4 * p + 2 + h];
    return v_k4(xdK(x, b), ld_h2(w), ld_h2(w + 2), sumi, summ);
}

// The other block types, a block per lane (q4_1, q5_1, mxfp4: the oracle's
// loops) or a warp per super-block (q2_K, q3_K: lane l takes elements
// 8l..8l+7; the integer sums are added across the warp).
template <int T> struct blk;
template <> struct blk<DT_Q4_1> {
    enum { B = Q4_1_B };
    static __device__ float dot(const uint8_t *w, const int8_t *y, float dx) {
        int s = 0, sy = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[4 + j] & 15) * y[j] + (w[4 + j] >> 4) * y[j + 16];
            sy += y[j] + y[j + 16];
        }
        return s * (ld_h(w) * dx) + sy * (ld_h(w + 2) * dx);
    }
};
template <> struct blk<DT_Q5_1> {
    enum { B = Q5_1_B };
    static __device__ float dot(const uint8_t *w, const int8_t *y, float dx) {
        uint32_t qh = ld_u32(w + 4);
        int s = 0, sy = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[8 + j] & 15) | ((qh >> j) & 1) << 4, hi = (w[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
            s += lo * y[j] + hi * y[j + 16];
            sy += y[j] + y[j + 16];
        }
        return s * (ld_h(w) * dx) + sy * (ld_h(w + 2) * dx);
    }
};
template <> struct blk<DT_MXFP4> {
    enum { B = MXFP4_B };
    static __device__ float dot(const uint8_t *w, const int8_t *y, float dx) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += c_mxfp4[w[1 + j] & 15] * y[j] + c_mxfp4[w[1 + j] >> 4] * y[j + 16];
        return s * (e8m0_half(w[0]) * dx);
    }
};

template <int T> struct kq;
template <> struct kq<DT_Q2_K> {
    enum { B = Q2_K_B };
    static __device__ void part(const uint8_t *w, const int8_t *y, const int16_t *bs, int l, int *si, int *sm) {
        int s = 0, e0 = 8 * l, g = e0 / 16, h = e0 / 128, r = e0 % 128, sh = r / 32;
        for (int k = 0; k < 8; k++) s += ((w[16 + 32 * h + (r % 32) + k] >> (2 * sh)) & 3) * y[e0 + k];
        *si = (w[g] & 15) * s;
        *sm = l % 2 == 0 ? (w[g] >> 4) * bs[g] : 0;
    }
    static __device__ float scale(const uint8_t *w, float dy, int si, int sm) {
        return __fsub_rn(__fmul_rn(__fmul_rn(dy, ld_h(w + 80)), (float)si), __fmul_rn(__fmul_rn(dy, ld_h(w + 82)), (float)sm));
    }
};
template <> struct kq<DT_Q3_K> {
    enum { B = Q3_K_B };
    static __device__ void part(const uint8_t *w, const int8_t *y, const int16_t *bs, int l, int *si, int *sm) {
        const uint8_t *p = w + 96;
        int e0 = 8 * l, g = e0 / 16, h = e0 / 128, r = e0 % 128, sh = r / 32, rr = r % 32, s = 0, m = 1 << (4 * h + sh);
        for (int k = 0; k < 8; k++) s += (((w[32 + 32 * h + rr + k] >> (2 * sh)) & 3) - (w[rr + k] & m ? 0 : 4)) * y[e0 + k];
        int lo = g < 8 ? p[g] & 15 : p[g - 8] >> 4, hi = (p[8 + g % 4] >> (2 * (g / 4))) & 3;
        *si = ((lo | hi << 4) - 32) * s;
        *sm = 0;
        (void)bs;
    }
    static __device__ float scale(const uint8_t *w, float dy, int si, int sm) { (void)sm; return __fmul_rn(__fmul_rn(dy, ld_h(w + 108)), (float)si); }
};

// float weights against f32 activations
template <int T> struct elt;
template <> struct elt<DT_F32> { enum { B = 4 }; static __device__ float get(const uint8_t *w) { return ld_f(w); } };
template <> struct elt<DT_F16> { enum { B = 2 }; static __device__ float get(const uint8_t *w) { return ld_h(w); } };
template <> struct elt<DT_BF16> { enum { B = 2 }; static __device__ float get(const uint8_t *w) { return __uint_as_float((uint32_t)(w[0] | w[1] << 8) << 16); } };

// A row is taken by TPR threads (8, 32 or 128: more for fewer rows, so that
// a product has enough warps to keep the memory busy): slot s of them takes
// the row's units s, s + TPR, ... With TPR <= 32 a warp holds 32 / TPR rows,
// lane l on row l % (32 / TPR) as slot l / (32 / TPR).
static __device__ __forceinline__ int gisum8(int v) { // the 8 lanes of a row at TPR 8
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    return v + __shfl_xor_sync(0xffffffffu, v, 16);
}

static __device__ __forceinline__ float mv_row_f32(const uint8_t *wr, const float *xt, int cols, int s, int st) {
    float acc = 0.0f;
    for (int u = s; u < cols / 4; u += st) {
        float4 a = ((const float4 *)wr)[u], b = ((const float4 *)xt)[u];
        acc = fmaf(a.x, b.x, acc), acc = fmaf(a.y, b.y, acc), acc = fmaf(a.z, b.z, acc), acc = fmaf(a.w, b.w, acc);
    }
    return acc;
}
// f16 / bf16 rows of a multiple of 8: 8 weights a unit
template <int T>
static __device__ __forceinline__ float u_f(const uint8_t *wr, const float *xt, int u) {
    int4 q = ((const int4 *)wr)[u];
    float4 b0 = ((const float4 *)xt)[2 * u], b1 = ((const float4 *)xt)[2 * u + 1];
    uint32_t qv[4] = {(uint32_t)q.x, (uint32_t)q.y, (uint32_t)q.z, (uint32_t)q.w};
    float f[8];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (T == DT_F16) {
            float2 p = __half22float2(*(const __half2 *)&qv[k]);
            f[2 * k] = p.x, f[2 * k + 1] = p.y;
        } else {
            f[2 * k] = __uint_as_float(qv[k] << 16), f[2 * k + 1] = __uint_as_float(qv[k] & 0xffff0000u);
        }
    }
    float acc = f[0] * b0.x;
    acc = fmaf(f[1], b0.y, acc), acc = fmaf(f[2], b0.z, acc), acc = fmaf(f[3], b0.w, acc);
    acc = fmaf(f[4], b1.x, acc), acc = fmaf(f[5], b1.y, acc), acc = fmaf(f[6], b1.z, acc), acc = fmaf(f[7], b1.w, acc);
    return acc;
}
template <int T>
static __device__ __forceinline__ float mv_row_f(const uint8_t *wr, const float *xt, int cols, int s, int st) {
    const int nu = cols / 8;
    float acc = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int u = s;
    for (; u + 3 * st < nu; u += 4 * st) {
        acc += u_f<T>(wr, xt, u), a1 += u_f<T>(wr, xt, u + st);
        a2 += u_f<T>(wr, xt, u + 2 * st), a3 += u_f<T>(wr, xt, u + 3 * st);
    }
    for (; u < nu; u += st) acc += u_f<T>(wr, xt, u);
    return (acc + a1) + (a2 + a3);
}
// float rows of any length: an element a lane
template <int T>
static __device__ float mv_row_e(const uint8_t *wr, const float *xt, int cols, int s, int st) {
    float acc = 0.0f;
    for (int i = s; i < cols; i += st) acc = fmaf(elt<T>::get(wr + (size_t)i * elt<T>::B), xt[i], acc);
    return acc;
}

// A thread's units of one row, added in order into one sum: four at a time
// with no bound checked between them, so that their loads are all in flight
// at once, then the rest. (One sum, not four: k_mmv keeps a sum per token
// and slot in registers, as few as possible.)
#define UNITS(fn, per_block)                                                   \
    {                                                                          \
        const int nu = m.nb * (per_block);                                     \
        int u = s;                                                             \
        for (; u + 3 * st < nu; u += 4 * st) {                                 \
            acc += fn(m, x, u), acc += fn(m, x, u + st);                       \
            acc += fn(m, x, u + 2 * st), acc += fn(m, x, u + 3 * st);          \
        }                                                                      \
        for (; u < nu; u += st) acc += fn(m, x, u);                            \
        return acc;                                                            \
    }

// The thread's part (slot s of st) of row m.r against one token's
// activations xt, to be added across the row's threads; the q2_K / q3_K path
// (st = 8 only) adds across them itself: slot 0 carries the row's sum.
static __device__ __forceinline__ float row_part_i(int type, const wrow &m, const uint8_t *xt, int cols, int s, int st) {
    float acc = 0.0f;
    if (type == DT_F32 || type == DT_F16 || type == DT_BF16) {
        const uint8_t *wr = m.w + (size_t)m.r * cols * (type == DT_F32 ? 4 : 2);
        const float *xf = (const float *)xt;
        if (type == DT_F32) return cols % 4 ? mv_row_e<DT_F32>(wr, xf, cols, s, st) : mv_row_f32(wr, xf, cols, s, st);
        if (type == DT_F16) return cols % 8 ? mv_row_e<DT_F16>(wr, xf, cols, s, st) : mv_row_f<DT_F16>(wr, xf, cols, s, st);
        return cols % 8 ? mv_row_e<DT_BF16>(wr, xf, cols, s, st) : mv_row_f<DT_BF16>(wr, xf, cols, s, st);
    }
    if (type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K || type == DT_Q2_K || type == DT_Q3_K) {
        const xrow x = x_q8_K(xt, m.nb);
        switch (type) {
        case DT_Q4_K: UNITS(u_q4_K, 8)
        case DT_Q5_K: UNITS(u_q5_K, 8)
        case DT_Q6_K: UNITS(u_q6_K, 4)
        }
        // q2_K, q3_K: the row's 8 lanes share each super-block (parts s, s + 8, s + 16, s + 24 of 32)
#define KQ(t)                                                                                          \
    case t: {                                                                                          \
        const uint8_t *wr = m.w + (size_t)m.r * m.nb * kq<t>::B;                                        \
        for (int b = 0; b < m.nb; b++) {                                                               \
            int si = 0, sm = 0;                                                                        \
            for (int j = 0; j < 4; j++) {                                                              \
                int a1, a2;                                                                            \
                kq<t>::part(wr + (size_t)b * kq<t>::B, x.qs + 256 * b, x.bs + 16 * b, s + 8 * j, &a1, &a2); \
                si += a1, sm += a2;                                                                    \
            }                                                                                          \
            si = gisum8(si), sm = gisum8(sm);                                                            \
            acc = __fadd_rn(acc, kq<t>::scale(wr + (size_t)b * kq<t>::B, xdK(x, b), si, sm));          \
        }                                                                                              \
        return s == 0 ? acc : 0.0f;                                                                    \
    }
        switch (type) { KQ(DT_Q2_K) KQ(DT_Q3_K) }
#undef KQ
        return 0.0f;
    }
    const xrow x = x_q8_0(xt, m.nb);
    switch (type) {
    case DT_Q8_0: UNITS(u_q8_0, 2)
    case DT_Q4_0: UNITS(u_q4_0, 1)
    case DT_Q5_0: UNITS(u_q5_0, 1)
    }
#define BLK(t)                                                                                                \
    case t: {                                                                                                 \
        const uint8_t *wr = m.w + (size_t)m.r * m.nb * blk<t>::B;                                              \
        for (int b = s; b < m.nb; b += st) acc += blk<t>::dot(wr + (size_t)b * blk<t>::B, x.qs + 32 * b, xd0(x, b)); \
        return acc;                                                                                           \
    }
    switch (type) { BLK(DT_Q4_1) BLK(DT_Q5_1) BLK(DT_MXFP4) }
#undef BLK
    return 0.0f;
}
#undef UNITS
// (out of line: the kernels that take any type; a kernel of one type inlines
// row_part_i with that type, its other types' code folded away)
static __device__ float row_part(int type, const wrow &m, const uint8_t *xt, int cols, int s, int st) {
    return row_part_i(type, m, xt, cols, s, st);
}

// row_part for nt <= NT tokens at once (their activations xrow bytes apart):
// each token's sum is row_part's, operation for operation, while the unit's
// weights are loaded and unpacked once for all of them (the loads and the
// unpacking are the same expressions in each token's step: the compiler
// keeps one of each). Other types: row_part a token at a time.
// (a compiler barrier: one unit's loads are not hoisted above the previous
// unit's arithmetic, which with 8 tokens took every register and spilled)
#define UNIT_FENCE() asm volatile("" ::: "memory")
#define UNITS_N(fn, per_block, mk)                                                       \
    {                                                                                    \
        const int nu = m.nb * (per_block);                                               \
        xrow x[NT];                                                                      \
        float a0[NT];                                                                    \
        _Pragma("unroll") for (int t = 0; t < NT; t++) {                                 \
            x[t] = mk(xt + xr * (size_t)(t < nt ? t : 0), m.nb);                          \
            a0[t] = 0.0f;                                                                \
        }                                                                                \
        int u = s;                                                                       \
        for (; u + 3 * st < nu; u += 4 * st) { /* (a unit at a time: the tokens are the loads in flight) */ \
            _Pragma("unroll") for (int q = 0; q < 4; q++) {                              \
                _Pragma("unroll") for (int t = 0; t < NT; t++) a0[t] += fn(m, x[t], u + q * st); \
                UNIT_FENCE();                                                            \
            }                                                                            \
        }                                                                                \
        for (; u < nu; u += st) {                                                        \
            _Pragma("unroll") for (int t = 0; t < NT; t++) a0[t] += fn(m, x[t], u);      \
        }                                                                                \
        _Pragma("unroll") for (int t = 0; t < NT; t++) out[t] = a0[t];                   \
        return;                                                                          \
    }
template <int NT>
static __device__ void row_part_n(int type, const wrow &m, const uint8_t *xt, size_t xr, int nt, int cols, int s, int st, float *out) {
    switch (type) {
    case DT_Q4_K: UNITS_N(u_q4_K, 8, x_q8_K)
    case DT_Q5_K: UNITS_N(u_q5_K, 8, x_q8_K)
    case DT_Q6_K: UNITS_N(u_q6_K, 4, x_q8_K)
    case DT_Q8_0: UNITS_N(u_q8_0, 2, x_q8_0)
    case DT_Q4_0: UNITS_N(u_q4_0, 1, x_q8_0)
    case DT_Q5_0: UNITS_N(u_q5_0, 1, x_q8_0)
    }
#pragma unroll
    for (int t = 0; t < NT; t++) out[t] = row_part(type, m, xt + xr * (size_t)(t < nt ? t : 0), cols, s, st);
}
#undef UNITS_N
#undef UNIT_FENCE

// Up to 4 products of the same activations in one launch: blocks of 128
// threads, 128 / TPR rows a block, the blocks of matrix i from m[i].blk0 on.
// glu: the threads of matrix 0 (gate) also take the same row of matrix 1 (up)
// and write act(gate) * up (k_act's expression) to matrix 0's output.
enum { MV_THREADS = 128, MV_MAX = 4, MV_GROUP = 8 };
enum { PF_MAX = 24 << 20 }; // (bytes of weights a product prefetches at most: well inside the H200's 50 MB of L2) // (MV_GROUP: tokens whose products share the weights' loads)
struct mv_mat { const uint8_t *w; float *y; int rows, type, blk0, nb; size_t bytes; };
struct mv_desc { mv_mat m[MV_MAX]; int n, cols, T, glu, act, ggml, pf; size_t xrow; };

// The products' weights do not depend on the kernel before them: pf set, a
// product's blocks ask for all of its matrices' bytes to be brought into L2
// (128-byte lines, spread over the grid's threads) before they wait for that
// kernel (PDL_ENTRY), so under programmatic dependent launch the weights come
// from memory while it runs. A hint only: nothing read changes.
static __device__ __forceinline__ void mv_prefetch(const mv_desc &d) {
    if (!d.pf) return;
    const size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x, G = (size_t)gridDim.x * blockDim.x;
    if (blockIdx.y) return;
    for (int i = 0; i < d.n; i++) {
        const uint8_t *w = d.m[i].w;
        for (size_t l = g; l < (d.m[i].bytes + 127) / 128; l += G) asm volatile("prefetch.global.L2 [%0];" ::"l"(w + 128 * l));
    }
}

static __device__ float act1(float v, int act, int ggml);

// the sum over a row's TPR threads (every thread of the block calls it)
template <int TPR>
static __device__ __forceinline__ float row_sum(float v, float *sh) {
    if (TPR <= 32) {
        for (int o = 32 / TPR; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    }
    v = warp_sum(v);
    __syncthreads(); // (sh free from the last call)
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    return sh[0] + sh[1] + sh[2] + sh[3];
}

// NT > 1: the tokens in groups of NT, each group's weights read once
// (row_part_n); each token's value is the NT = 1 kernel's, bit for bit.
// TY >= 0: every matrix of d is of that type (one-token products of the
// common quantized types: a kernel of one type's code, without the others'
// instructions to fetch; the same arithmetic as TY = -1's, bit for bit).
template <int TPR, int NT, int TY = -1>
static __global__ void __launch_bounds__(MV_THREADS) k_mv(const mv_desc d, const uint8_t *xq) {
    mv_prefetch(d);
    PDL_ENTRY();
    __shared__ float sh[4];
    int mi = 0;
    while (mi + 1 < d.n && (int)blockIdx.x >= d.m[mi + 1].blk0) mi++;
    const mv_mat m = d.m[mi];
    const int RPW = TPR <= 32 ? 32 / TPR : 1, lane = threadIdx.x % 32, wp = threadIdx.x / 32;
    const int s = TPR <= 32 ? lane / RPW : (int)threadIdx.x;
    const int rw = ((int)blockIdx.x - m.blk0) * (MV_THREADS / TPR) + (TPR <= 32 ? wp * RPW : 0); // the warp's first row
    if (rw >= m.rows) return; // (the whole warp, or block at TPR 128: the sums need every thread)
    const int r = rw + (TPR <= 32 ? lane % RPW : 0), rr = r < m.rows ? r : m.rows - 1;
    const wrow wr = {m.w, m.rows, rr, m.nb};
    if (NT == 1) {
        for (int t = 0; t < d.T; t++) {
            const uint8_t *xt = xq + d.xrow * t;
            float acc = row_sum<TPR>(TY >= 0 ? row_part_i(TY, wr, xt, d.cols, s, TPR) : row_part(m.type, wr, xt, d.cols, s, TPR), sh);
            if (d.glu) {
                const mv_mat u = d.m[1];
                const wrow ur = {u.w, u.rows, rr, u.nb};
                float up = row_sum<TPR>(TY >= 0 ? row_part_i(TY, ur, xt, d.cols, s, TPR) : row_part(u.type, ur, xt, d.cols, s, TPR), sh);
                acc = act1(acc, d.act, d.ggml) * up;
            }
            if (s == 0 && r < m.rows) m.y[(size_t)t * m.rows + r] = acc;
        }
    } else
    for (int t0 = 0; t0 < d.T; t0 += NT) {
        const uint8_t *xt = xq + d.xrow * t0;
        const int nt = d.T - t0 < NT ? d.T - t0 : NT;
        float acc[NT], up[NT];
        row_part_n<NT>(m.type, wr, xt, d.xrow, nt, d.cols, s, TPR, acc);
        if (d.glu) {
            const mv_mat u = d.m[1];
            const wrow ur = {u.w, u.rows, rr, u.nb};
            row_part_n<NT>(u.type, ur, xt, d.xrow, nt, d.cols, s, TPR, up);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break; // (the same for every thread: the sums' barriers stay whole)
            float a = row_sum<TPR>(acc[t], sh);
            if (d.glu) a = act1(a, d.act, d.ggml) * row_sum<TPR>(up[t], sh);
            if (s == 0 && r < m.rows) m.y[(size_t)(t0 + t) * m.rows + r] = a;
        }
    }
}

// ---------------------------------------------------------------------------
// Batched decode products on the tensor cores: k_mmv computes what k_mv
// computes for each token, bit for bit, with the integer sums of the units
// made by int8 mma.sync (m16n8k16: 16 rows x 8 tokens x 16 weights, exact)
// instead of __dp4a. The float part is k_mv's, operation for operation: slot
// s of a row's TPR slots takes units s, s + TPR, ... into four sums (UNITS'
// pattern), a slot's value is (a0 + a1) + (a2 + a3), and the slots are
// added in row_sum's tree. A block is 8 warps over 16 rows x 16 tokens; warp
// w takes slots w, w + 8, ... of a group of up to 32 slots at a time, whose
// values meet in shared memory.
//
// mq<T>: a unit's G groups of 16 weights: aw = the packed int8 weights
// 4 tig .. 4 tig + 3 of group j (row m.r), xo = where group j's 16
// activations start in the token's quants, val = the unit's value (k_mv's).
template <int T> struct mq;
template <> struct mq<DT_Q8_0> {
    enum { UPB = 2, G = 1 };
    struct W { float d; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        aw[0] = *(const int *)(m.w + 32 * ((size_t)m.r * m.nb + (u >> 1)) + 16 * (u & 1) + 4 * tig);
    }
    static __device__ int xo(int u, int j) { return 16 * u; }
    static __device__ W w(const wrow &m, int u) { return {ld_h2(m.w + (size_t)32 * m.rows * m.nb + 2 * ((size_t)m.r * m.nb + (u >> 1)))}; }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {ld_h2(row + 32 * nb + 2 * (u >> 1))}; }
    static __device__ float val(const W &w, const X &x, const int *sg) { return v_q32(w.d, x.d, sg[0]); }
};
template <> struct mq<DT_Q4_0> {
    enum { UPB = 1, G = 2 };
    struct W { float d; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int q = *(const int *)(m.w + 16 * ((size_t)m.r * m.nb + u) + 4 * tig);
        aw[0] = vsub4(q & 0x0f0f0f0f, 0x08080808), aw[1] = vsub4((q >> 4) & 0x0f0f0f0f, 0x08080808);
    }
    static __device__ int xo(int u, int j) { return 32 * u + 16 * j; }
    static __device__ W w(const wrow &m, int u) { return {ld_h2(m.w + (size_t)16 * m.rows * m.nb + 2 * ((size_t)m.r * m.nb + u))}; }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {ld_h2(row + 32 * nb + 2 * u)}; }
    static __device__ float val(const W &w, const X &x, const int *sg) { return v_q32(w.d, x.d, sg[0] + sg[1]); }
};
template <> struct mq<DT_Q5_0> {
    enum { UPB = 1, G = 2 };
    struct W { float d; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        size_t blk = (size_t)m.r * m.nb + u, nall = (size_t)m.rows * m.nb;
        int q = *(const int *)(m.w + 16 * blk + 4 * tig);
        uint32_t qh = *(const uint32_t *)(m.w + 16 * nall + 4 * blk);
        aw[0] = vsub4((q & 0x0f0f0f0f) | spread4(qh >> (4 * tig)), 0x10101010);
        aw[1] = vsub4(((q >> 4) & 0x0f0f0f0f) | spread4(qh >> (16 + 4 * tig)), 0x10101010);
    }
    static __device__ int xo(int u, int j) { return 32 * u + 16 * j; }
    static __device__ W w(const wrow &m, int u) { return {ld_h2(m.w + 20 * (size_t)m.rows * m.nb + 2 * ((size_t)m.r * m.nb + u))}; }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {ld_h2(row + 32 * nb + 2 * u)}; }
    static __device__ float val(const W &w, const X &x, const int *sg) { return v_q32(w.d, x.d, sg[0] + sg[1]); }
};
// q4_K / q5_K: unit (b, p, h) as u_q4_K's; groups: sub-block 2p's 16 weights, then 2p + 1's
struct k4_w { float d, dmin; int sc0, m0, sc1, m1; };
struct k4_x { float d; int b0, b1; };
static __device__ __forceinline__ k4_w k4_scales(const uint8_t *blk, int u) {
    k4_w w;
    w.d = ld_h2(blk), w.dmin = ld_h2(blk + 2);
    scales_k4(blk, 2 * ((u & 7) >> 1), &w.sc0, &w.m0, &w.sc1, &w.m1);
    return w;
}
static __device__ __forceinline__ k4_x k4_act(const uint8_t *row, int nb, int u) {
    int b = u >> 3, p = (u & 7) >> 1, h = u & 1;
    const int16_t *bs = (const int16_t *)(row + 260 * nb) + 16 * b;
    return {((const float *)(row + 256 * nb))[b], bs[4 * p + h], bs[4 * p + 2 + h]};
}
static __device__ __forceinline__ float k4_val(const k4_w &w, const k4_x &x, const int *sg) {
    return v_k4(x.d, w.d, w.dmin, w.sc0 * sg[0] + w.sc1 * sg[1], w.m0 * x.b0 + w.m1 * x.b1);
}
// what q4_K and q5_K units share: blocks of BB bytes with ggml's header (d, dmin, 12 scale bytes)
template <int BB> struct mq_k4 {
    enum { UPB = 8, G = 2 };
    typedef k4_w W;
    typedef k4_x X;
    static __device__ int xo(int u, int j) { return 256 * (u >> 3) + 64 * ((u & 7) >> 1) + 16 * (u & 1) + 32 * j; }
    static __device__ W w(const wrow &m, int u) { return k4_scales(m.w + ((size_t)m.r * m.nb + (u >> 3)) * BB, u); }
    static __device__ X x(const uint8_t *row, int nb, int u) { return k4_act(row, nb, u); }
    static __device__ float val(const W &w, const X &x, const int *sg) { return k4_val(w, x, sg); }
};
template <> struct mq<DT_Q4_K> : mq_k4<Q4_K_B> {
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int b = u >> 3, i = u & 7;
        int q = *(const int *)(m.w + ((size_t)m.r * m.nb + b) * Q4_K_B + 16 + 32 * (i >> 1) + 16 * (i & 1) + 4 * tig);
        aw[0] = q & 0x0f0f0f0f, aw[1] = (q >> 4) & 0x0f0f0f0f;
    }
};
template <> struct mq<DT_Q5_K> : mq_k4<Q5_K_B> {
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int b = u >> 3, i = u & 7, p = i >> 1, h = i & 1;
        const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * Q5_K_B;
        int q = *(const int *)(w + 48 + 32 * p + 16 * h + 4 * tig), qh = *(const int *)(w + 16 + 16 * h + 4 * tig);
        aw[0] = (q & 0x0f0f0f0f) | (((qh >> (2 * p)) & 0x01010101) << 4);
        aw[1] = ((q >> 4) & 0x0f0f0f0f) | (((qh >> (2 * p + 1)) & 0x01010101) << 4);
    }
};
// q6_K: unit (b, i) as u_q6_K's; groups: rows A, B of ql (low nibbles with qh bits 0-1, 2-3), then their high nibbles (4-5, 6-7)
template <> struct mq<DT_Q6_K> {
    enum { UPB = 4, G = 4 };
    struct W { float d; int s0, s1, s2, s3; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int b = u >> 2, i = u & 3, h = i >> 1, l0 = 16 * (i & 1);
        size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        const uint8_t *ql = m.w + 128 * blk + 64 * h + l0 + 4 * tig;
        int A = *(const int *)ql, B = *(const int *)(ql + 32), C = *(const int *)(m.w + 128 * nall + 64 * blk + 32 * h + l0 + 4 * tig);
        aw[0] = vsub4((A & 0x0f0f0f0f) | ((C & 0x03030303) << 4), 0x20202020);
        aw[1] = vsub4((B & 0x0f0f0f0f) | (((C >> 2) & 0x03030303) << 4), 0x20202020);
        aw[2] = vsub4(((A >> 4) & 0x0f0f0f0f) | (((C >> 4) & 0x03030303) << 4), 0x20202020);
        aw[3] = vsub4(((B >> 4) & 0x0f0f0f0f) | (((C >> 6) & 0x03030303) << 4), 0x20202020);
    }
    static __device__ int xo(int u, int j) { return 256 * (u >> 2) + 128 * ((u & 3) >> 1) + 16 * (u & 1) + 32 * j; }
    static __device__ W w(const wrow &m, int u) {
        int b = u >> 2, i = u & 3;
        size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        const int8_t *sc = (const int8_t *)(m.w + 192 * nall + 16 * blk) + 8 * (i >> 1) + (i & 1);
        return {ld_h2(m.w + 208 * nall + 2 * blk), sc[0], sc[2], sc[4], sc[6]};
    }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {((const float *)(row + 256 * nb))[u >> 2]}; }
    static __device__ float val(const W &w, const X &x, const int *sg) {
        return v_q6K(x.d, w.d, w.s0 * sg[0] + w.s1 * sg[1] + w.s2 * sg[2] + w.s3 * sg[3]);
    }
};

// c (16 x 8, s32) += a (16 x 16, s8, rows g and g + 8) b (16 x 8, s8, token g), g = lane / 4
static __device__ __forceinline__ void mma_s8(int (&c)[4], int a0, int a1, int b0) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

enum { MMV_ROWS = 16, MMV_WARPS = 8 };

// unit u of rows w0 (g) and w1 (g + 8) against the warp's 8 NN tokens, added into a
// (ob: the byte offsets of the tokens' rows in xq that the lane loads, plus
// 4 tig; oc: those of the tokens whose sums it holds)
template <int TY, int NN>
static __device__ __forceinline__ void mmv_unit(const wrow &w0, const wrow &w1, const uint8_t *xq, const uint32_t (&ob)[NN],
                                                const uint32_t (&oc)[NN][2], int u, int tig, float (&a)[NN][4]) {
    typedef mq<TY> Q;
    int A0[Q::G], A1[Q::G];
    Q::a(w0, u, tig, A0), Q::a(w1, u, tig, A1);
    const typename Q::W W0 = Q::w(w0, u), W1 = Q::w(w1, u);
#pragma unroll
    for (int n = 0; n < NN; n++) {
        int acc[Q::G][4];
#pragma unroll
        for (int j = 0; j < Q::G; j++) {
            acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
            mma_s8(acc[j], A0[j], A1[j], *(const int *)(xq + ob[n] + Q::xo(u, j)));
        }
        const typename Q::X X0 = Q::x(xq + oc[n][0], w0.nb, u), X1 = Q::x(xq + oc[n][1], w0.nb, u);
#pragma unroll
        for (int c = 0; c < 4; c++) {
            int sg[Q::G];
#pragma unroll
            for (int j = 0; j < Q::G; j++) sg[j] = acc[j][c];
            a[n][c] = __fadd_rn(a[n][c], Q::val(c >> 1 ? W1 : W0, c & 1 ? X1 : X0, sg));
        }
    }
}

// One slot's value (k_mv's sum of its units in order) for the warp's 16 rows
// x 8 NN tokens: a[n][c] = row g + 8 (c >> 1), token 8 n + 2 tig + (c & 1).
template <int TY, int NN>
static __device__ void mmv_slot(const mv_mat &mt, int r0, const uint8_t *xq, size_t xr, int t0, int T, int s, int st, float (&a)[NN][4]) {
    const int lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
    const int rows = mt.rows;
    const wrow w0 = {mt.w, rows, min(r0 + g, rows - 1), mt.nb}, w1 = {mt.w, rows, min(r0 + g + 8, rows - 1), mt.nb};
    // the tokens this lane loads (b: token g of each tile) and scales (c: 2 tig, 2 tig + 1), as offsets (fewer registers)
    uint32_t ob[NN], oc[NN][2];
#pragma unroll
    for (int n = 0; n < NN; n++) {
        ob[n] = (uint32_t)(xr * min(t0 + 8 * n + g, T - 1)) + 4 * tig;
#pragma unroll
        for (int k = 0; k < 2; k++) oc[n][k] = (uint32_t)(xr * min(t0 + 8 * n + 2 * tig + k, T - 1));
    }
#pragma unroll
    for (int n = 0; n < NN; n++)
#pragma unroll
        for (int c = 0; c < 4; c++) a[n][c] = 0.0f;
    const int nu = mt.nb * mq<TY>::UPB;
    for (int u = s; u < nu; u += st) mmv_unit<TY, NN>(w0, w1, xq, ob, oc, u, tig, a);
}

template <int NN>
static __device__ __forceinline__ void mmv_add(float (&a)[NN][4], const float (&b)[NN][4]) {
#pragma unroll
    for (int n = 0; n < NN; n++)
#pragma unroll
        for (int c = 0; c < 4; c++) a[n][c] = __fadd_rn(a[n][c], b[n][c]);
}

// Blocks of 16 rows x 8 NN tokens. The slots' values are added in row_sum's
// order: at TPR <= 32 the lanes' xor tree from slot bit 0 up, at TPR 128 (a
// group of 32 slots a warp, the groups' sums then in order) from bit 4 down.
// Warp w takes the slots whose first levels it can add itself (TPR 8: slot
// w; 32: 4w .. 4w + 3; 128: w + 8j of each group), and the warps' values
// meet in shared memory for the levels over w. One weight type a kernel (the
// fewer registers, the more warps an SM keeps).
template <int TY, int TPR, int NN>
static __global__ void __launch_bounds__(MMV_WARPS * 32) k_mmv(const mv_desc d, const uint8_t *xq) {
    mv_prefetch(d);
    PDL_ENTRY();
    enum { TOK = 8 * NN, OUTS = MMV_ROWS * TOK, PER = OUTS / (MMV_WARPS * 32), UP = TPR <= 32 };
    __shared__ float red[MMV_WARPS * OUTS];
    int mi = 0;
    while (mi + 1 < d.n && (int)blockIdx.x >= d.m[mi + 1].blk0) mi++;
    const int r0 = ((int)blockIdx.x - d.m[mi].blk0) * MMV_ROWS, t0 = (int)blockIdx.y * TOK;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
    float res[2][PER];
    for (int k = 0; k <= d.glu; k++) {
        const mv_mat mt = d.m[k ? 1 : mi];
        float total[PER];
        for (int g0 = 0; g0 < TPR; g0 += 32) {
            float r[NN][4];
            if (TPR == 8) {
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, w, TPR, r);
            } else { // four slots: (v0 + v1) + (v2 + v3) of slots 4w + j (32), (v0 + v2) + (v1 + v3) of w + 8j (128)
                float p[NN][4], q[NN][4];
                const int s0 = UP ? 4 * w : g0 + w, ds = UP ? 1 : 8;
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0, TPR, p);
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0 + (UP ? 1 : 2) * ds, TPR, q);
                mmv_add<NN>(p, q);
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0 + (UP ? 2 : 1) * ds, TPR, q);
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0 + 3 * ds, TPR, r);
                mmv_add<NN>(q, r);
                mmv_add<NN>(p, q);
#pragma unroll
                for (int n = 0; n < NN; n++)
#pragma unroll
                    for (int c = 0; c < 4; c++) r[n][c] = p[n][c];
            }
#pragma unroll
            for (int n = 0; n < NN; n++)
#pragma unroll
                for (int c = 0; c < 4; c++) red[w * OUTS + (g + 8 * (c >> 1)) * TOK + 8 * n + 2 * tig + (c & 1)] = r[n][c];
            __syncthreads();
#pragma unroll
            for (int i = 0; i < PER; i++) { // the levels over w: steps 1, 2, 4 (up) or 4, 2, 1
                const int o = (int)threadIdx.x + i * MMV_WARPS * 32;
                float v[MMV_WARPS];
#pragma unroll
                for (int j = 0; j < MMV_WARPS; j++) v[j] = red[j * OUTS + o];
                if (UP) {
#pragma unroll
                    for (int step = 1; step < MMV_WARPS; step <<= 1)
#pragma unroll
                        for (int j = 0; j < MMV_WARPS; j += 2 * step) v[j] = __fadd_rn(v[j], v[j + step]);
                } else {
#pragma unroll
                    for (int step = MMV_WARPS / 2; step >= 1; step >>= 1)
#pragma unroll
                        for (int j = 0; j < step; j++) v[j] = __fadd_rn(v[j], v[j + step]);
                }
                total[i] = g0 == 0 ? v[0] : __fadd_rn(total[i], v[0]); // (TPR 128: the warps' sums in order, as row_sum)
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < PER; i++) res[k][i] = total[i];
    }
    const mv_mat m = d.m[mi];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int o = (int)threadIdx.x + i * MMV_WARPS * 32, r = r0 + o / TOK, t = t0 + o % TOK;
        float a = res[0][i];
        if (d.glu) a = act1(a, d.act, d.ggml) * res[1][i];
        if (r < m.rows && t < d.T) m.y[(size_t)t * m.rows + r] = a;
    }
}

// k_mmv of type TY for tpr threads a row, 8 nn tokens a block
template <int TY>
static void mmv_launch(cuda_dev *dv, int tpr, int nn, dim3 grid, const mv_desc &k, const uint8_t *xb) {
    dim3 blk(MMV_WARPS * 32);
    if (tpr == 8) {
        if (nn == 8) launch(k_mmv<TY, 8, 8>, grid, blk, 0, dv->stream, k, xb);
        else if (nn == 4) launch(k_mmv<TY, 8, 4>, grid, blk, 0, dv->stream, k, xb);
        else launch(k_mmv<TY, 8, 2>, grid, blk, 0, dv->stream, k, xb);
    } else if (tpr == 32) {
        if (nn == 4) launch(k_mmv<TY, 32, 4>, grid, blk, 0, dv->stream, k, xb);
        else launch(k_mmv<TY, 32, 2>, grid, blk, 0, dv->stream, k, xb);
    } else {
        if (nn == 4) launch(k_mmv<TY, 128, 4>, grid, blk, 0, dv->stream, k, xb);
        else launch(k_mmv<TY, 128, 2>, grid, blk, 0, dv->stream, k, xb);
    }
}

static void mmv_run(cuda_dev *dv, int ty, int tpr, int T, int rows_blocks, const mv_desc &k, const uint8_t *xb) {
    int nn = T > 32 && tpr == 8 ? 8 : T > 16 ? 4 : 2; // (tokens a block: 8 nn; at 32 and 128 a warp holds three sets)
    dim3 grid((unsigned)rows_blocks, (unsigned)((T + 8 * nn - 1) / (8 * nn)));
    switch (ty) {
    case DT_Q8_0: mmv_launch<DT_Q8_0>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q4_0: mmv_launch<DT_Q4_0>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q5_0: mmv_launch<DT_Q5_0>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q4_K: mmv_launch<DT_Q4_K>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q5_K: mmv_launch<DT_Q5_K>(dv, tpr, nn, grid, k, xb); break;
    default: mmv_launch<DT_Q6_K>(dv, tpr, nn, grid, k, xb); break;
    }
}

static int mmv_type(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }

// ---------------------------------------------------------------------------
// activation quantizers: the CPU's values (act_quant_q8_0, q8_K_from_float),
// in the split rows above

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

// A warp quantizes q8_0 block b of a row of nb blocks: lane l holds element l (v).
static __device__ void warp_q8_0(float v, int lane, uint8_t *row, int nb, int b) {
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    if (lane == 0) ((uint16_t *)(row + 32 * nb))[b] = (uint16_t)f32_to_f16(d);
    row[32 * b + lane] = (uint8_t)(int8_t)rintf(__fmul_rn(v, id));
}

// A warp quantizes q8_K super-block b of a row of nb: lane l holds elements
// 8l..8l+7 (v). The first of the largest magnitudes sets the scale, as
// q8_K_from_float.
static __device__ void warp_q8_K(const float *v, int lane, uint8_t *row, int nb, int b) {
    float am = 0.0f, mx = 0.0f;
    int at = 0;
    for (int k = 0; k < 8; k++)
        if (fabsf(v[k]) > am) am = fabsf(v[k]), mx = v[k], at = 8 * lane + k;
    for (int o = 16; o > 0; o >>= 1) {
        float a2 = __shfl_xor_sync(0xffffffffu, am, o), m2 = __shfl_xor_sync(0xffffffffu, mx, o);
        int t2 = __shfl_xor_sync(0xffffffffu, at, o);
        if (a2 > am || (a2 == am && t2 < at)) am = a2, at = t2, mx = m2;
    }
    int8_t *q = (int8_t *)row + 256 * b;
    float *d = (float *)(row + 256 * nb) + b;
    int16_t *bs = (int16_t *)(row + 260 * nb) + 16 * b;
    if (am == 0.0f) {
        for (int k = 0; k < 8; k++) q[8 * lane + k] = 0;
        if (lane < 16) bs[lane] = 0;
        if (lane == 0) *d = 0.0f;
        return;
    }
    float iscale = -127.f / mx;
    int s = 0;
    for (int k = 0; k < 8; k++) {
        int r = (int)rintf(__fmul_rn(iscale, v[k]));
        r = r < -128 ? -128 : r > 127 ? 127 : r;
        q[8 * lane + k] = (int8_t)r;
        s += r;
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1); // lanes 2g and 2g+1 hold group g of 16
    if (lane % 2 == 0) bs[lane / 2] = (int16_t)s;
    if (lane == 0) *d = 1.0f / iscale;
}

static __global__ void k_quant_q8_0(const float *x, int n, int nblk, size_t xr, uint8_t *y) {
    PDL_ENTRY();
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32; // a warp per block of 32
    if (i >= nblk) return;
    int nb = n / QK, t = i / nb, b = i % nb;
    warp_q8_0(x[(size_t)t * n + (size_t)b * QK + lane], lane, y + xr * t, nb, b);
}

static __global__ void k_quant_q8_K(const float *x, int n, int nblk, size_t xr, uint8_t *y) {
    PDL_ENTRY();
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32; // a warp per super-block of 256
    if (i >= nblk) return;
    int nb = n / QK_K, t = i / nb, b = i % nb;
    const float *xb = x + (size_t)t * n + (size_t)b * QK_K;
    float v[8];
    for (int k = 0; k < 8; k++) v[k] = xb[8 * lane + k];
    warp_q8_K(v, lane, y + xr * t, nb, b);
}

extern "C" HIDDEN int cuda_quantize(cuda_dev *d, int wtype, const float *x, int T, int n, void *xq) {
    size_t xr = cuda_act_row_size(wtype, n);
    if (!xr || T <= 0) return -1;
    if (is_float(wtype)) {
        cudaError_t e = cudaMemcpyAsync(xq, x, sizeof(float) * (size_t)T * n, cudaMemcpyDeviceToDevice, d->stream);
        return e == cudaSuccess ? 0 : set_status("copy", e);
    }
    int nblk = T * (n / (is_k(wtype) ? QK_K : QK));
    if (is_k(wtype)) launch(k_quant_q8_K, (nblk + 3) / 4, 128, 0, d->stream, x, n, nblk, xr, (uint8_t *)xq);
    else launch(k_quant_q8_0, (nblk + 3) / 4, 128, 0, d->stream, x, n, nblk, xr, (uint8_t *)xq);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : set_status("quantize", e);
}

// one-token products of one type (TY; -1: any) at tpr threads a row
template <int TY>
static void mv1_launch(cuda_dev *d, int tpr, int blocks, const mv_desc &k, const uint8_t *xb) {
    if (tpr == 8) launch(k_mv<8, 1, TY>, blocks, MV_THREADS, 0, d->stream, k, xb);
    else if (tpr == 32) launch(k_mv<32, 1, TY>, blocks, MV_THREADS, 0, d->stream, k, xb);
    else launch(k_mv<128, 1, TY>, blocks, MV_THREADS, 0, d->stream, k, xb);
}

extern "C" HIDDEN int cuda_matmul_multi(cuda_dev *d, int n, const cuda_mat *m, int cols, const void *xq, int T, int glu_act, int ggml) {
    if (n < 1 || n > MV_MAX || T <= 0 || (glu_act >= 0 && (n != 2 || m[0].rows != m[1].rows))) return -1;
    size_t xr = cuda_act_row_size(m[0].type, cols);
    // threads a row: enough warps for the memory (q2_K / q3_K: 8, their path's)
    int total = 0, tpr, kq23 = 0;
    for (int i = 0; i < (glu_act >= 0 ? 1 : n); i++) total += m[i].rows;
    for (int i = 0; i < n; i++) kq23 |= m[i].type == DT_Q2_K || m[i].type == DT_Q3_K;
    tpr = kq23 || total >= 2048 || cols < 2048 ? 8 : total >= 1024 || cols < 4096 ? 32 : 128;
    // float rows of 4 KB and more: a warp a row (Gemma 3 27B's BF16 decode 50.8 -> 67.2 tokens/s, 4B's
    // 331 -> 336; 1B's rows of 2.3 KB are faster at 8: 791 against 763)
    int flt = m[0].type == DT_F32 || m[0].type == DT_F16 || m[0].type == DT_BF16;
    if (flt && tpr == 8 && row_bytes(m[0].type, cols) >= 4096) tpr = 32;
    // (mv_narrow: while the blocks are fewer than two an SM and each thread would still have a unit of 32
    // weights, 4x the threads a row; from the shape alone, so a batch's rows keep the one-token order)
    while (d->mv_narrow && !kq23 && tpr < 128 && (total + MV_THREADS / tpr - 1) / (MV_THREADS / tpr) < 2 * d->sms &&
           4 * tpr <= cols / 32)
        tpr *= 4;
    // few rows, each long (1B's down: 1152 rows of 5.7 KB): a block a row, its whole row read in one round
    // (4.98 against 8.39 us at 32 threads a row, from memory, bench_cuda_ops cold)
    if (!kq23 && total < 2048 && row_bytes(m[0].type, cols) >= 4096) tpr = 128;
    if (d->mv_tpr && !kq23) tpr = d->mv_tpr;
    const int rpb = MV_THREADS / tpr;
    mv_desc k;
    memset(&k, 0, sizeof k);
    int blocks = 0;
    size_t pf_bytes = 0;
    for (int i = 0; i < n; i++) {
        if (!xr || cuda_act_row_size(m[i].type, cols) != xr || m[i].rows <= 0) return -1;
        int nb = is_float(m[i].type) ? cols : cols / (is_k(m[i].type) ? QK_K : QK);
        k.m[i] = (mv_mat){(const uint8_t *)m[i].w, m[i].y, m[i].rows, m[i].type, blocks, nb, row_bytes(m[i].type, cols) * (size_t)m[i].rows};
        pf_bytes += k.m[i].bytes;
        if (glu_act < 0 || i == 0) blocks += (m[i].rows + rpb - 1) / rpb;
    }
    if (glu_act >= 0) k.m[1].blk0 = blocks; // (the gate's threads take the up rows)
    k.n = n, k.cols = cols, k.T = T, k.glu = glu_act >= 0, k.act = glu_act, k.ggml = ggml, k.xrow = xr;
    k.pf = d->prefetch && pf_bytes <= PF_MAX; // (not the output head: more than L2 holds, read in waves)
    const uint8_t *xb = (const uint8_t *)xq;
    int mmv = T > 1 && d->mmv, same = 1;
    for (int i = 0; i < n && mmv; i++) mmv = mmv_type(m[i].type), same &= m[i].type == m[0].type;
    if (glu_act >= 0 && !same) mmv = 0;
    if (mmv) { // the same values on the tensor cores: blocks of 16 rows x 16, 32 or 64 tokens, a launch a weight type
        if (same) {
            int nblk = 0;
            for (int i = 0; i < n; i++) {
                k.m[i].blk0 = nblk;
                if (glu_act < 0 || i == 0) nblk += (m[i].rows + MMV_ROWS - 1) / MMV_ROWS;
            }
            if (glu_act >= 0) k.m[1].blk0 = nblk;
            mmv_run(d, m[0].type, tpr, T, nblk, k, xb);
        } else
            for (int i = 0; i < n; i++) {
                mv_desc ki = k;
                ki.n = 1, ki.m[0] = k.m[i], ki.m[0].blk0 = 0;
                mmv_run(d, m[i].type, tpr, T, (m[i].rows + MMV_ROWS - 1) / MMV_ROWS, ki, xb);
            }
    } else if (T > 1 && d->mv_group == 4) {
        if (tpr == 8) launch(k_mv<8, 4>, blocks, MV_THREADS, 0, d->stream, k, xb);
        else if (tpr == 32) launch(k_mv<32, 4>, blocks, MV_THREADS, 0, d->stream, k, xb);
        else launch(k_mv<128, 4>, blocks, MV_THREADS, 0, d->stream, k, xb);
    } else if (T == 1 || !MV_GROUP) {
        int ty = d->mv_spec ? k.m[0].type : -1;
        for (int i = 1; i < n; i++) ty = k.m[i].type == ty ? ty : -1;
        switch (ty) {
        case DT_Q4_K: mv1_launch<DT_Q4_K>(d, tpr, blocks, k, xb); break;
        case DT_Q5_K: mv1_launch<DT_Q5_K>(d, tpr, blocks, k, xb); break;
        case DT_Q6_K: mv1_launch<DT_Q6_K>(d, tpr, blocks, k, xb); break;
        case DT_Q8_0: mv1_launch<DT_Q8_0>(d, tpr, blocks, k, xb); break;
        case DT_Q4_0: mv1_launch<DT_Q4_0>(d, tpr, blocks, k, xb); break;
        case DT_Q5_0: mv1_launch<DT_Q5_0>(d, tpr, blocks, k, xb); break;
        // (f16 / bf16 stay with the kernel of any type: their own kernels decoded 13% slower on the H200, 4B shape,
        // 284.5 against 328.2 t/s; the quantized types' 3-5% faster)
        default: mv1_launch<-1>(d, tpr, blocks, k, xb);
        }
    } else {
        if (tpr == 8) launch(k_mv<8, MV_GROUP>, blocks, MV_THREADS, 0, d->stream, k, xb);
        else if (tpr == 32) launch(k_mv<32, MV_GROUP>, blocks, MV_THREADS, 0, d->stream, k, xb);
        else launch(k_mv<128, MV_GROUP>, blocks, MV_THREADS, 0, d->stream, k, xb);
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : set_status("matmul", e);
}

extern "C" HIDDEN int cuda_matmul(cuda_dev *d, int wtype, const void *w, int rows, int cols, const void *xq, int T, float *y) {
    cuda_mat m = {wtype, w, rows, y};
    return cuda_matmul_multi(d, 1, &m, cols, xq, T, -1, 0);
}

// ---------------------------------------------------------------------------
// the layer operations

static int launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : set_status(what, e);
}

static unsigned grid_for(size_t n, int block) { return (unsigned)((n + block - 1) / block); }

static __global__ void k_bias(float *y, const float *b, int T, int n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * n) y[i] += b[i % n];
}
extern "C" HIDDEN int cuda_bias(cuda_dev *d, float *y, const float *b, int T, int n) {
    launch(k_bias, grid_for((size_t)T * n, 256), 256, 0, d->stream, y, b, T, n);
    return launched("bias");
}

// W stored [n_in, n_out] (GPT-2's Conv1D), float types: y[t][j] = sum_i x[t][i] W[i][j]
template <int T>
static __global__ void k_matmul_trans(const uint8_t *w, int n_in, int n_out, const float *x, int ntok, float *y) {
    PDL_ENTRY();
    int j = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (j >= n_out || t >= ntok) return;
    float acc = 0.0f;
    for (int i = 0; i < n_in; i++) acc = fmaf(x[(size_t)t * n_in + i], elt<T>::get(w + ((size_t)i * n_out + j) * elt<T>::B), acc);
    y[(size_t)t * n_out + j] = acc;
}
extern "C" HIDDEN int cuda_matmul_trans(cuda_dev *d, int wtype, const void *w, int n_in, int n_out, const float *x, int T, float *y) {
    dim3 g(grid_for((size_t)n_out, 128), T);
    const uint8_t *wb = (const uint8_t *)w;
    switch (wtype) {
    case DT_F32: launch(k_matmul_trans<DT_F32>, g, 128, 0, d->stream, wb, n_in, n_out, x, T, y); break;
    case DT_F16: launch(k_matmul_trans<DT_F16>, g, 128, 0, d->stream, wb, n_in, n_out, x, T, y); break;
    case DT_BF16: launch(k_matmul_trans<DT_BF16>, g, 128, 0, d->stream, wb, n_in, n_out, x, T, y); break;
    default: return -1;
    }
    return launched("matmul (transposed)");
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

// The threads of a row's block in the norms (k_norm, k_chain, k_chain_reg:
// the same count for a row of n in each, so their sums are added in the
// same order and the fused kernels give the plain ones' bits): 256 up to n =
// 512 (k_qkv's per-head norm takes 256 too), then a thread per element up
// to 1024. A decode step's norm is one block: its loads, sums and
// quantization run in fewer serial steps a thread with more threads.
// INFER_CUDA_NORM_WIDE=0: 256 for every n (the earlier kernels' sums).
static int g_norm_wide = -1;
static int norm_threads(int n) {
    if (g_norm_wide < 0) {
        const char *e = getenv("INFER_CUDA_NORM_WIDE");
        g_norm_wide = !(e && *e == '0');
    }
    return !g_norm_wide || n <= 512 ? 256 : n >= 1024 ? 1024 : (n + 31) / 32 * 32;
}

// kind: 0 rms, 1 rms with (1 + w), 2 layer norm (backend.h's enum norm_op)
static __global__ void k_norm(float *out, const float *x, const float *w, const float *b, int n, float eps, int kind) {
    PDL_ENTRY();
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *orow = out + (size_t)blockIdx.x * n;
    if (kind == 2) {
        float s = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
        float mean = block_sum(s, sh) / (float)n, v = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) v += (xr[i] - mean) * (xr[i] - mean);
        float r = 1.0f / sqrtf(block_sum(v, sh) / (float)n + eps);
        for (int i = threadIdx.x; i < n; i += blockDim.x) orow[i] = (xr[i] - mean) * r * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
        return;
    }
    float s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
    float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float sc = w ? (kind == 1 ? 1.0f + w[i] : w[i]) : 1.0f;
        orow[i] = xr[i] * r * sc;
    }
}
extern "C" HIDDEN int cuda_norm(cuda_dev *d, float *out, const float *x, const float *w, const float *b, int rows, int n, float eps, int kind) {
    if (rows <= 0) return 0;
    launch(k_norm, rows, norm_threads(n), 0, d->stream, out, x, w, b, n, eps, kind);
    return launched("norm");
}

// one pair rotated, uncontracted (the same floats in k_rope and k_qkv)
static __device__ __forceinline__ void rot(float *a, float *b, float c, float s) {
    float x0 = *a, x1 = *b;
    *a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    *b = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

static __global__ void k_rope(float *x, int rows, int heads, int hd, const int *pos, const float *inv_freq, int n_pairs, int off,
                              int stride, float mscale) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * heads * n_pairs) return;
    int p = (int)(i % n_pairs), h = (int)(i / n_pairs % heads), t = (int)(i / n_pairs / heads);
    float ang = (float)pos[t] * inv_freq[p];
    float c = cosf(ang) * mscale, s = sinf(ang) * mscale;
    float *v = x + ((size_t)t * heads + h) * hd;
    int a = p * stride, b = a + off;
    rot(v + a, v + b, c, s);
}
extern "C" HIDDEN int cuda_rope(cuda_dev *d, float *x, int rows, int heads, int hd, const int *pos, const float *inv_freq, int n_pairs,
                                int off, int stride, float mscale) {
    size_t n = (size_t)rows * heads * n_pairs;
    if (!n) return 0;
    launch(k_rope, grid_for(n, 256), 256, 0, d->stream, x, rows, heads, hd, pos, inv_freq, n_pairs, off, stride, mscale);
    return launched("rope");
}

static __device__ float f16_round(float v) { return __half2float(__ushort_as_half((unsigned short)f32_to_f16(v))); }

// the head's output o (global, this block's writes) as the next product's quantized blocks
extern "C" HIDDEN int cuda_attention_q_ok(int wtype, int H, int hd);
// The KV cache's elements: f32, or f16 (KH; ggml numerics' caches, whose values are f16 already)
template <int KH> struct kvel { typedef float T; };
template <> struct kvel<1> { typedef __half T; };
static __device__ __forceinline__ float kvf(float x) { return x; }
static __device__ __forceinline__ float kvf(__half x) { return __half2float(x); }

static __device__ void att_quant_head(const float *o, uint8_t *xq, size_t xr, int xk, int t, int h, int hd, int nq) {
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    uint8_t *row = xq + xr * t;
    if (xk)
        for (int b = wp; b < hd / QK_K; b += nw) {
            float v8[8];
            for (int e = 0; e < 8; e++) v8[e] = o[QK_K * b + 8 * lane + e];
            warp_q8_K(v8, lane, row, nq / QK_K, h * (hd / QK_K) + b);
        }
    else
        for (int b = wp; b < hd / QK; b += nw) warp_q8_0(o[QK * b + lane], lane, row, nq / QK, h * (hd / QK) + b);
}

// One block per (row, query head): scores over the row's window of its
// cache, softmax (with a sink, softcap), then the values. scores: stride
// floats per (row, head). NE = hd / 32 (a head of 32 NE): each warp takes 4
// positions at a time, the lanes NE values of each, the loads of the 4 in
// flight together (positions past the window read the last one and are
// dropped); NE = 0: any hd, a position at a time.
enum { ATT_THREADS = 512 }; // (16 warps: a decode row's positions in fewer rounds)

template <int NE, int PRE, int KH>
static __global__ void __launch_bounds__(ATT_THREADS) k_attention(const float *q, float *out, int H, int KV, int hd, int window, const int *pos,
                                                          const void *const *kc, const void *const *vc, float scale, float softcap,
                                                          const float *sinks, int ggml, float *scores, int stride, uint8_t *xq, size_t xr,
                                                          int xk) {
    __shared__ float sh[32];
    __shared__ float part[ATT_THREADS / 32][512];
    const int t = blockIdx.x, h = blockIdx.y, kh = h / (H / KV), nq = H * hd, nkv = KV * hd;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    // PRE (decode rows, each its sequence's only row of the pass): the cache
    // rows before position hi are no kernel's of this pass, so the first
    // round's K rows are read, its V rows asked into L1 and the rest into L2
    // before the wait for the kernel before (which writes q and row hi)
    const int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    typedef typename kvel<KH>::T KT;
    const KT *k = (const KT *)kc[t] + (size_t)kh * hd + (size_t)lo * nkv, *v = (const KT *)vc[t] + (size_t)kh * hd + (size_t)lo * nkv;
    enum { NK = PRE && NE > 0 && NE <= 8 ? NE : 1, EPL = 128 / sizeof(KT) }; // (EPL: elements a 128-byte line)
    float k0[4][NK];
    if (PRE && NE > 0 && NE <= 8) {
#pragma unroll
        for (int g = 0; g < 4; g++) {
            const int j = wp + g * nw;
            if (j < n - 1) {
#pragma unroll
                for (int e = 0; e < NK; e++) k0[g][e] = kvf(k[(size_t)j * nkv + lane + 32 * e]);
                if (lane < (hd + EPL - 1) / EPL) asm volatile("prefetch.global.L1 [%0];" ::"l"(v + (size_t)j * nkv + EPL * lane));
            }
        }
        const int G = H / KV, lines = (hd + EPL - 1) / EPL, first = 4 * nw;
        for (int i = (h % G) * blockDim.x + threadIdx.x; i < (n - 1 - first) * lines; i += G * blockDim.x) {
            const size_t o = (size_t)(first + i / lines) * nkv + EPL * (i % lines);
            asm volatile("prefetch.global.L2 [%0];" ::"l"(k + o));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(v + o));
        }
    }
    PDL_ENTRY();
    const float *qh = q + (size_t)t * nq + (size_t)h * hd;
    float *s = scores + ((size_t)t * H + h) * stride;
    if (NE) {
        float qv[NE > 0 ? NE : 1];
#pragma unroll
        for (int e = 0; e < NE; e++) qv[e] = qh[lane + 32 * e];
        for (int j0 = wp; j0 < n; j0 += 4 * nw) {
            float a[4];
#pragma unroll
            for (int g = 0; g < 4; g++) {
                int j = min(j0 + g * nw, n - 1);
                const KT *kr = k + (size_t)j * nkv;
                a[g] = 0.0f;
                if (PRE && NE <= 8 && j0 == wp && j < n - 1) {
#pragma unroll
                    for (int e = 0; e < NK; e++) a[g] = fmaf(qv[e], k0[g][e], a[g]);
                } else {
#pragma unroll
                    for (int e = 0; e < NE; e++) a[g] = fmaf(qv[e], kvf(kr[lane + 32 * e]), a[g]);
                }
            }
#pragma unroll
            for (int g = 0; g < 4; g++) {
                float acc = warp_sum(a[g]) * scale;
                if (softcap) acc = softcap * tanhf(acc / softcap);
                if (lane == 0 && j0 + g * nw < n) s[j0 + g * nw] = acc;
            }
        }
    } else {
        for (int j = wp; j < n; j += nw) { // a warp per position, the lanes along the head
            const KT *kr = k + (size_t)j * nkv;
            float acc = 0.0f;
            for (int i = lane; i < hd; i += 32) acc = fmaf(qh[i], kvf(kr[i]), acc);
            acc = warp_sum(acc) * scale;
            if (softcap) acc = softcap * tanhf(acc / softcap);
            if (lane == 0) s[j] = acc;
        }
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, s[j]);
    float sink = sinks ? sinks[h] : -INFINITY;
    m = fmaxf(block_max(m, sh), sink);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float e = expf(s[j] - m);
        s[j] = e;
        sum += e;
    }
    sum = block_sum(sum, sh);
    if (sinks) sum += expf(sink - m);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float p = s[j] / sum;
        s[j] = ggml ? f16_round(p) : p;
    }
    __syncthreads();
    // the values: each warp its positions, the lanes along the head; the
    // warps' sums added in order
    float acc[16];
#pragma unroll
    for (int e = 0; e < 16; e++) acc[e] = 0.0f;
    if (NE) {
        for (int j0 = wp; j0 < n; j0 += 4 * nw) {
            float vv[4][NE > 0 ? NE : 1], p[4];
#pragma unroll
            for (int g = 0; g < 4; g++) {
                int j = min(j0 + g * nw, n - 1);
                p[g] = j0 + g * nw < n ? s[j] : 0.0f;
#pragma unroll
                for (int e = 0; e < NE; e++) vv[g][e] = kvf(v[(size_t)j * nkv + lane + 32 * e]);
            }
#pragma unroll
            for (int g = 0; g < 4; g++)
#pragma unroll
                for (int e = 0; e < NE; e++) acc[e] = fmaf(p[g], vv[g][e], acc[e]);
        }
    } else {
        for (int j = wp; j < n; j += nw) {
            const KT *vr = v + (size_t)j * nkv;
            float p = s[j];
#pragma unroll
            for (int e = 0; e < 16; e++)
                if (lane + 32 * e < hd) acc[e] = fmaf(p, kvf(vr[lane + 32 * e]), acc[e]);
        }
    }
#pragma unroll
    for (int e = 0; e < 16; e++)
        if (lane + 32 * e < hd) part[wp][lane + 32 * e] = acc[e];
    __syncthreads();
    float *o = out + (size_t)t * nq + (size_t)h * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < nw; w++) a += part[w][i];
        o[i] = a;
    }
    if (xq) { // the head's blocks of the row the next product reads, from the values just written (cuda_quantize's)
        __syncthreads();
        att_quant_head(o, xq, xr, xk, t, h, hd, nq);
    }
}
// ---------------------------------------------------------------------------
// Decode attention with a row's positions split over blocks (flash-decoding):
// few rows and heads would otherwise leave one SM to read a head's whole K
// and V. A row's n positions go in S = ceil(n / C) chunks of C = max(chunk,
// ceil(n / spl)) (from n alone: a row's values do not depend on the rows
// beside it, so a batch's rows equal their single decodes), a block a (row,
// head, chunk), in two kernels: k_att_scores writes the chunk's scores and
// their (max, sum of exp); k_att_values takes the row's max and sum from the
// S pairs, the chunk's probabilities (ggml: rounded to f16, as the CPU's) and
// their values; the last of a (row, head)'s blocks adds the S parts in
// chunk order, writes the head's output and its quantized blocks.
enum { AS_THREADS = 128 };
struct att_split_args { int spl, chunk; float *part; float2 *stat; int *cnt; };

static __device__ __forceinline__ int att_chunk_len(int n, int spl, int chunk) {
    int c = (n + spl - 1) / spl;
    return c > chunk ? c : chunk;
}

template <int NE, int KH>
static __global__ void __launch_bounds__(AS_THREADS) k_att_scores(const float *q, int H, int KV, int hd, int window, const int *pos,
                                                                 const void *const *kc, float scale, float softcap, float *scores,
                                                                 int stride, att_split_args sa) {
    PDL_ENTRY();
    __shared__ float sh[32];
    int t = blockIdx.x, h = blockIdx.y, c = blockIdx.z, kh = h / (H / KV), nq = H * hd, nkv = KV * hd;
    int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    int C = att_chunk_len(n, sa.spl, sa.chunk), S = (n + C - 1) / C;
    if (c >= S) return;
    int a = c * C, b = a + C < n ? a + C : n;
    typedef typename kvel<KH>::T KT;
    const float *qh = q + (size_t)t * nq + (size_t)h * hd;
    const KT *k = (const KT *)kc[t] + (size_t)kh * hd + (size_t)lo * nkv;
    float *s = scores + ((size_t)t * H + h) * stride;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = AS_THREADS / 32;
    float qv[NE];
#pragma unroll
    for (int e = 0; e < NE; e++) qv[e] = qh[lane + 32 * e];
    float m = -INFINITY;
    for (int j0 = a + wp; j0 < b; j0 += 4 * nw) {
        float acc[4];
#pragma unroll
        for (int g = 0; g < 4; g++) {
            const KT *kr = k + (size_t)min(j0 + g * nw, b - 1) * nkv;
            acc[g] = 0.0f;
#pragma unroll
            for (int e = 0; e < NE; e++) acc[g] = fmaf(qv[e], kvf(kr[lane + 32 * e]), acc[g]);
        }
#pragma unroll
        for (int g = 0; g < 4; g++) {
            float v = warp_sum(acc[g]) * scale;
            if (softcap) v = softcap * tanhf(v / softcap);
            if (j0 + g * nw < b) {
                m = fmaxf(m, v);
                if (lane == 0) s[j0 + g * nw] = v;
            }
        }
    }
    m = block_max(m, sh); // (its barriers also make the scores written visible to the block)
    float l = 0.0f;
    for (int j = a + (int)threadIdx.x; j < b; j += AS_THREADS) l += expf(s[j] - m);
    l = block_sum(l, sh);
    if (threadIdx.x == 0) sa.stat[((size_t)t * H + h) * sa.spl + c] = make_float2(m, l);
}

template <int NE, int KH>
static __global__ void __launch_bounds__(AS_THREADS) k_att_values(float *out, int H, int KV, int hd, int window, const int *pos,
                                                                 const void *const *vc, const float *sinks, int ggml,
                                                                 const float *scores, int stride, att_split_args sa, uint8_t *xq,
                                                                 size_t xr, int xk) {
    PDL_ENTRY();
    __shared__ float red[AS_THREADS / 32][NE * 32];
    __shared__ int last;
    int t = blockIdx.x, h = blockIdx.y, c = blockIdx.z, kh = h / (H / KV), nq = H * hd, nkv = KV * hd;
    int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    int C = att_chunk_len(n, sa.spl, sa.chunk), S = (n + C - 1) / C;
    if (c >= S) return;
    int a = c * C, b = a + C < n ? a + C : n;
    const size_t rh = (size_t)t * H + h;
    // the row's max and sum from the chunks' pairs, in chunk order
    const float2 *st = sa.stat + rh * sa.spl;
    float M = sinks ? sinks[h] : -INFINITY, L = 0.0f;
    for (int i = 0; i < S; i++) M = fmaxf(M, st[i].x);
    for (int i = 0; i < S; i++) L += st[i].y * expf(st[i].x - M);
    if (sinks) L += expf(sinks[h] - M);
    const float *s = scores + rh * stride;
    const typename kvel<KH>::T *v = (const typename kvel<KH>::T *)vc[t] + (size_t)kh * hd + (size_t)lo * nkv;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = AS_THREADS / 32;
    float acc[NE];
#pragma unroll
    for (int e = 0; e < NE; e++) acc[e] = 0.0f;
    for (int j0 = a + wp; j0 < b; j0 += 4 * nw) {
        float vv[4][NE], p[4];
#pragma unroll
        for (int g = 0; g < 4; g++) {
            int j = min(j0 + g * nw, b - 1);
            float pj = expf(s[j] - M) / L;
            p[g] = j0 + g * nw < b ? (ggml ? f16_round(pj) : pj) : 0.0f;
#pragma unroll
            for (int e = 0; e < NE; e++) vv[g][e] = kvf(v[(size_t)j * nkv + lane + 32 * e]);
        }
#pragma unroll
        for (int g = 0; g < 4; g++)
#pragma unroll
            for (int e = 0; e < NE; e++) acc[e] = fmaf(p[g], vv[g][e], acc[e]);
    }
#pragma unroll
    for (int e = 0; e < NE; e++) red[wp][lane + 32 * e] = acc[e];
    __syncthreads();
    float *o = out + (size_t)t * nq + (size_t)h * hd;
    if (S == 1) {
        for (int i = threadIdx.x; i < hd; i += AS_THREADS) o[i] = (red[0][i] + red[1][i]) + (red[2][i] + red[3][i]);
    } else {
        float *part = sa.part + rh * sa.spl * hd;
        for (int i = threadIdx.x; i < hd; i += AS_THREADS) part[(size_t)c * hd + i] = (red[0][i] + red[1][i]) + (red[2][i] + red[3][i]);
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(sa.cnt + rh, 1) == S - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        for (int i = threadIdx.x; i < hd; i += AS_THREADS) {
            float r = 0.0f;
            for (int k = 0; k < S; k++) r += __ldcg(part + (size_t)k * hd + i);
            o[i] = r;
        }
        if (threadIdx.x == 0) sa.cnt[rh] = 0; // (for the next launch, and the graph's next replay)
    }
    if (xq) {
        __syncthreads();
        att_quant_head(o, xq, xr, xk, t, h, hd, nq);
    }
}

// the split kernels for rows [t0, t0 + T) -- the buffers for AS_ROWS rows at a time
enum { AS_ROWS = 64 };
static int att_split_run(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                         const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                         float *scores, int stride, uint8_t *xq, size_t xr, int xk, int kv16) {
    const int spl = d->att_split, rows = T < AS_ROWS ? T : AS_ROWS;
    size_t need = sizeof(float) * (size_t)rows * H * spl * (hd + 2), nc = sizeof(int) * (size_t)rows * H;
    if (need > d->ap_cap || nc > d->acnt_cap) {
        cudaStreamCaptureStatus cs;
        if (cudaStreamIsCapturing(d->stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return -1;
        cudaStreamSynchronize(d->stream);
        cudaFree(d->ap), cudaFree(d->acnt);
        d->ap = NULL, d->acnt = NULL, d->ap_cap = d->acnt_cap = 0;
        if (cudaMalloc((void **)&d->ap, need) != cudaSuccess || cudaMalloc((void **)&d->acnt, nc) != cudaSuccess ||
            cudaMemset(d->acnt, 0, nc) != cudaSuccess)
            return set_status("attention partial sums", cudaGetLastError());
        d->ap_cap = need, d->acnt_cap = nc;
    }
    const size_t nq = (size_t)H * hd;
    for (int t0 = 0; t0 < T; t0 += rows) {
        int r = T - t0 < rows ? T - t0 : rows;
        att_split_args sa = {spl, d->att_chunk, d->ap, (float2 *)(d->ap + (size_t)rows * H * spl * hd), d->acnt};
        dim3 g(r, H, spl);
        const float *qt = q + t0 * nq;
        float *ot = out + t0 * nq, *sc = scores + (size_t)t0 * H * stride;
        uint8_t *xt = xq ? xq + xr * t0 : NULL;
#define AS2(ne, kh)                                                                                                            \
    launch(k_att_scores<ne, kh>, g, AS_THREADS, 0, d->stream, qt, H, KV, hd, window, pos + t0, k + t0, scale, softcap, sc, stride, sa); \
    launch(k_att_values<ne, kh>, g, AS_THREADS, 0, d->stream, ot, H, KV, hd, window, pos + t0, v + t0, sinks, ggml,             \
           (const float *)sc, stride, sa, xt, xr, xk)
#define AS(ne)                                                                                                                 \
    if (kv16) { AS2(ne, 1); } else { AS2(ne, 0); }
        switch (hd) {
        case 32: AS(1); break;
        case 64: AS(2); break;
        case 96: AS(3); break;
        case 128: AS(4); break;
        case 256: AS(8); break;
        default: AS(16); break;
        }
#undef AS
#undef AS2
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return set_status("attention", e);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// A prompt's attention through cuBLAS (the rows of one sequence): for a chunk
// of R rows that see keys [klo, klo + N) of the cache, S = scale Q K^T per
// query head (strided batched products over the KV heads, one call for each
// of a KV head's G query heads; one call in all when KV is 1), each row's
// softmax in its own window (softcap, sink; ggml: probabilities rounded to
// f16, the type of V) into P with zeros outside it, then O = P V. Scores and
// probabilities are [row][head][key], so each call's outputs land in place
// through their leading dimensions. The products are the per-row kernel's
// (f16 x f16 or f32 x f32, f32 sums: under ggml's numerics q is f16 valued,
// so its f16 copy is exact; an f16 cache without them goes to the per-row
// kernel), only the order of the sums differs.

template <typename PT>
static __global__ void k_att_softmax(const float *S, PT *P, int H, int N, int klo, int window, const int *pos, float softcap,
                                     const float *sinks, int ggml) {
    PDL_ENTRY();
    __shared__ float sh[32];
    const int t = blockIdx.x, h = blockIdx.y;
    const size_t o = ((size_t)t * H + h) * N;
    const float *s = S + o;
    PT *p = P + o;
    const int hi = pos[t] - klo, lo = (window && pos[t] - window + 1 > klo ? pos[t] - window + 1 : klo) - klo;
    float m = -INFINITY;
    for (int j = lo + threadIdx.x; j <= hi; j += blockDim.x) {
        float v = s[j];
        if (softcap) v = softcap * tanhf(v / softcap);
        m = fmaxf(m, v);
    }
    const float sink = sinks ? sinks[h] : -INFINITY;
    m = fmaxf(block_max(m, sh), sink);
    float sum = 0.0f;
    for (int j = lo + threadIdx.x; j <= hi; j += blockDim.x) {
        float v = s[j];
        if (softcap) v = softcap * tanhf(v / softcap);
        sum += expf(v - m);
    }
    sum = block_sum(sum, sh);
    if (sinks) sum += expf(sink - m);
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float e = 0.0f;
        if (j >= lo && j <= hi) {
            float v = s[j];
            if (softcap) v = softcap * tanhf(v / softcap);
            e = expf(v - m) / sum;
            if (ggml) e = f16_round(e);
        }
        p[j] = (PT)e;
    }
}

static __global__ void k_to_half(const float *x, size_t n, __half *y) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half_rn(x[i]);
}

static int blas_ready(cuda_dev *d);
static int grow(void **p, size_t *cap, size_t bytes);

extern "C" HIDDEN int cuda_attention_gemm_ok(cuda_dev *d, int ggml, int kv16) {
    if (kv16 && !ggml) return 0;
    cudaStreamCaptureStatus st; // (its scratch grows: not in a graph)
    if (cudaStreamIsCapturing(d->stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) return 0;
    return blas_ready(d) && g_blas.gemm_sb;
}

extern "C" HIDDEN int cuda_attention_gemm(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window,
                                          const int *pos, const int *pos_host, const void *k, const void *v, float scale, float softcap,
                                          const float *sinks, int ggml, int wtype, void *xq, int kv16) {
    if (T <= 0) return 0;
    if (H % KV || !cuda_attention_gemm_ok(d, ggml, kv16) || (xq && !cuda_act_row_size(wtype, H * hd))) return -1;
    const int G = H / KV, nq = H * hd, nkv = KV * hd;
    const size_t es = kv16 ? 2 : 4, xr = xq ? cuda_act_row_size(wtype, nq) : 0;
    const cudaDataType et = kv16 ? CUDA_R_16F : CUDA_R_32F;
    const float zero = 0.0f, one = 1.0f;
    int lo_all = 0x7fffffff, hi_all = -1;
    for (int t = 0; t < T; t++) {
        int p = pos_host[t], lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
        lo_all = lo < lo_all ? lo : lo_all, hi_all = p > hi_all ? p : hi_all;
    }
    const size_t per_row = (size_t)H * (hi_all - lo_all + 1) * (4 + es); // (an upper bound of a row's share)
    int R = (int)(d->ag_bytes / per_row);
    R = R < 1 ? 1 : R > T ? T : R;
    if (grow(&d->ag_s, &d->ag_s_cap, 4 * (size_t)R * H * (hi_all - lo_all + 1)) ||
        grow(&d->ag_p, &d->ag_p_cap, es * (size_t)R * H * (hi_all - lo_all + 1)) || (kv16 && grow(&d->ag_q, &d->ag_q_cap, 2 * (size_t)R * nq)))
        return set_status("attention scratch", cudaErrorMemoryAllocation);
    for (int t0 = 0; t0 < T; t0 += R) {
        const int r = T - t0 < R ? T - t0 : R;
        int klo = 0x7fffffff, khi = -1;
        for (int t = t0; t < t0 + r; t++) {
            int p = pos_host[t], lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
            klo = lo < klo ? lo : klo, khi = p > khi ? p : khi;
        }
        const int N = khi - klo + 1;
        const float *qt = q + (size_t)t0 * nq;
        const void *qb = qt;
        if (kv16) {
            size_t n = (size_t)r * nq;
            launch(k_to_half, grid_for(n, 256), 256, 0, d->stream, qt, n, (__half *)d->ag_q);
            qb = d->ag_q;
        }
        const uint8_t *kb = (const uint8_t *)k + es * (size_t)klo * nkv, *vb = (const uint8_t *)v + es * (size_t)klo * nkv;
        float *S = (float *)d->ag_s, *ot = out + (size_t)t0 * nq;
        // column-major: S^T (N x cols) = (K^T, hd x N)^T (Q^T, hd x cols); O^T (hd x cols) = (V^T, hd x N) (P^T, N x cols)
        int bad = 0;
        if (KV == 1) { // (every head's rows against the one K: a column a (row, head))
            bad |= g_blas.gemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, r * H, hd, &scale, kb, et, nkv, qb, et, hd, &zero, S, CUDA_R_32F, N,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        } else {
            for (int j = 0; j < G; j++) // (query heads g G + j of KV heads g)
                bad |= g_blas.gemm_sb(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, r, hd, &scale, kb, et, nkv, hd, (const uint8_t *)qb + es * j * hd,
                                      et, nq, (long long)G * hd, &zero, S + (size_t)j * N, CUDA_R_32F, H * N, (long long)G * N, KV,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        }
        if (bad) return set_status("cublasGemmEx (attention scores)", cudaErrorUnknown);
        dim3 g(r, H);
        if (kv16) launch(k_att_softmax<__half>, g, 128, 0, d->stream, (const float *)S, (__half *)d->ag_p, H, N, klo, window, pos + t0, softcap, sinks, ggml);
        else launch(k_att_softmax<float>, g, 128, 0, d->stream, (const float *)S, (float *)d->ag_p, H, N, klo, window, pos + t0, softcap, sinks, ggml);
        if (launched("attention softmax")) return -1;
        if (KV == 1) {
            bad |= g_blas.gemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, r * H, N, &one, vb, et, nkv, d->ag_p, et, N, &zero, ot, CUDA_R_32F, hd,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        } else {
            for (int j = 0; j < G; j++)
                bad |= g_blas.gemm_sb(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, r, N, &one, vb, et, nkv, hd, (const uint8_t *)d->ag_p + es * j * N,
                                      et, H * N, (long long)G * N, &zero, ot + (size_t)j * hd, CUDA_R_32F, nq, (long long)G * hd, KV,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        }
        if (bad) return set_status("cublasGemmEx (attention values)", cudaErrorUnknown);
        if (xq && cuda_quantize(d, wtype, ot, r, nq, (uint8_t *)xq + xr * t0)) return -1;
    }
    return 0;
}

extern "C" HIDDEN int cuda_attention_q_ok(int wtype, int H, int hd) {
    return !is_float(wtype) && cuda_act_row_size(wtype, H * hd) && hd % (is_k(wtype) ? QK_K : QK) == 0;
}

static int att_hd_ok(int hd) { return hd == 32 || hd == 64 || hd == 96 || hd == 128 || hd == 256 || hd == 512; }

extern "C" HIDDEN int cuda_attention_kv(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                        const void *const *k, const void *const *v, float scale, float softcap, const float *sinks,
                                        int ggml, float *scores, int stride, int wtype, void *xq, int decode, int kv16) {
    if (T <= 0) return 0;
    if (hd > 512 || (xq && !cuda_attention_q_ok(wtype, H, hd))) return -1;
    size_t xr = xq ? cuda_act_row_size(wtype, H * hd) : 0;
    int xk = xq && is_k(wtype);
    if (d->att_split > 0 && att_hd_ok(hd))
        return att_split_run(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, (uint8_t *)xq, xr, xk,
                             kv16);
    dim3 g(T, H);
    const int pre = decode && d->att_pf;
#define ATT(ne)                                                                                                                       \
    launch(kv16 ? (pre ? k_attention<ne, 1, 1> : k_attention<ne, 0, 1>) : pre ? k_attention<ne, 1, 0> : k_attention<ne, 0, 0>, g,     \
           ATT_THREADS, 0, d->stream, q, out, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, (uint8_t *)xq, xr, xk)
    switch (hd) {
    case 32: ATT(1); break;
    case 64: ATT(2); break;
    case 96: ATT(3); break;
    case 128: ATT(4); break;
    case 256: ATT(8); break;
    case 512: ATT(16); break;
    default: ATT(0);
    }
#undef ATT
    return launched("attention");
}

extern "C" HIDDEN int cuda_attention_d(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                       const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                       int ggml, float *scores, int stride, int wtype, void *xq, int decode) {
    return cuda_attention_kv(d, q, out, T, H, KV, hd, window, pos, (const void *const *)k, (const void *const *)v, scale, softcap, sinks,
                             ggml, scores, stride, wtype, xq, decode, 0);
}

extern "C" HIDDEN int cuda_attention_q(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                       const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                       int ggml, float *scores, int stride, int wtype, void *xq) {
    return cuda_attention_d(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, wtype, xq, 0);
}

extern "C" HIDDEN int cuda_attention(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                     int ggml, float *scores, int stride) {
    return cuda_attention_d(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, 0, NULL, 0);
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
static __global__ void k_act(float *g, const float *u, size_t n, int act, int ggml) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = act1(g[i], act, ggml);
    g[i] = u ? a * u[i] : a;
}
extern "C" HIDDEN int cuda_act(cuda_dev *d, float *g, const float *u, size_t n, int act, int ggml) {
    if (!n) return 0;
    launch(k_act, grid_for(n, 256), 256, 0, d->stream, g, u, n, act, ggml);
    return launched("activation");
}

// Top k by |s| in one block: a radix select of the k-th largest key (|s|'s
// bits: their order is the values'), 8 bits a round from the top, then the
// indices in order, those above the key and the first of those equal to it
// (ties to the lower index), each chunk of the block's width compacted by
// warp ballots.
enum { TOPK_THREADS = 1024 };
static __device__ int block_excl_scan(int flag, int *warp_tot, int *total) { // (every thread calls it)
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    unsigned m = __ballot_sync(0xffffffffu, flag);
    int in_warp = __popc(m & ((1u << lane) - 1));
    __syncthreads();
    if (lane == 0) warp_tot[wp] = __popc(m);
    __syncthreads();
    if (wp == 0) {
        int v = lane < nw ? warp_tot[lane] : 0, s = v;
        for (int o = 1; o < 32; o <<= 1) {
            int u = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += u;
        }
        if (lane < nw) warp_tot[lane] = s - v; // exclusive
        if (lane == 31) *total = s;
    }
    __syncthreads();
    return warp_tot[wp] + in_warp;
}
// The key whose order is the order of |s| (ABS) or of s: |s|'s bits, or s's
// with the sign flipped for positives and all bits for negatives.
template <int ABS> static __device__ __forceinline__ unsigned topk_key(float v) {
    unsigned u = __float_as_uint(ABS ? fabsf(v) : v);
    return ABS ? u : u & 0x80000000u ? ~u : u | 0x80000000u;
}
// n read from dn when given (at most n); k > n: the n indices, then -1s.
template <int ABS> static __global__ void __launch_bounds__(TOPK_THREADS) k_topk(const float *s, int n, const int *dn, int k, int *idx) {
    PDL_ENTRY();
    __shared__ unsigned hist[256];
    __shared__ unsigned sh_pre, sh_msk;
    __shared__ int sh_kk, warp_tot[32], total;
    const int tid = threadIdx.x;
    if (dn) n = *dn < n ? *dn : n;
    for (int i = n + tid; i < k; i += blockDim.x) idx[i] = -1;
    if (k > n) k = n;
    if (k < 1) return;
    if (tid == 0) sh_pre = 0, sh_msk = 0, sh_kk = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        unsigned pre = sh_pre, msk = sh_msk;
        for (int i = tid; i < n; i += blockDim.x) {
            unsigned key = topk_key<ABS>(s[i]);
            if ((key & msk) == pre) atomicAdd(&hist[(key >> shift) & 255], 1u);
        }
        __syncthreads();
        if (tid == 0) {
            int kk = sh_kk, cum = 0, b = 255;
            for (; b > 0; b--) {
                if (cum + (int)hist[b] >= kk) break;
                cum += (int)hist[b];
            }
            sh_kk = kk - cum, sh_pre = pre | (unsigned)b << shift, sh_msk = msk | 255u << shift;
        }
        __syncthreads();
    }
    const unsigned key_k = sh_pre;
    const int take_eq = sh_kk; // of the keys equal to the k-th, the first take_eq
    int base = 0, eq_before = 0;
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
        int i = i0 + tid;
        unsigned key = i < n ? topk_key<ABS>(s[i]) : 0;
        int gt = i < n && key > key_k, eq = i < n && key == key_k;
        int eq_rank = block_excl_scan(eq, warp_tot, &total), eq_total = total;
        int take = gt || (eq && eq_before + eq_rank < take_eq);
        int pos = block_excl_scan(take, warp_tot, &total);
        if (take) idx[base + pos] = i;
        base += total, eq_before += eq_total;
        __syncthreads(); // (total is read before the next chunk writes it)
    }
}
// ---------------------------------------------------------------------------
// The vindex walk FFN (cuda.h's cuda_walk): a warp a feature for its
// activation, then the down vectors summed over chunks of 64 features (a
// thread an output element, the features in order), then the chunks in
// order: walk.c's order of additions.

enum { WALK_CHUNK = 64 };

// row . x of a raw row (f32, f16, or q8_0 blocks against x's q8_0 row: the CPU kernel's integer sums), a warp
static __device__ float walk_dot(int type, const uint8_t *row, const float *x, const uint8_t *xq, int H, int lane) {
    float acc = 0.0f;
    if (type == DT_F32) {
        for (int i = lane; i < H; i += 32) acc = fmaf(ld_f(row + 4 * (size_t)i), x[i], acc);
    } else if (type == DT_F16) {
        for (int i = lane; i < H; i += 32) acc = fmaf(ld_h(row + 2 * (size_t)i), x[i], acc);
    } else if (type == DT_BF16) {
        for (int i = lane; i < H; i += 32) acc = fmaf(elt<DT_BF16>::get(row + 2 * (size_t)i), x[i], acc);
    } else { // q8_0: a block a lane; x's row: nb x 32 quants, then nb f16 scales
        const int nb = H / QK;
        for (int b = lane; b < nb; b += 32) {
            const uint8_t *w = row + (size_t)b * Q8_0_B;
            const int8_t *q = (const int8_t *)(xq + 32 * b);
            int s = 0;
            for (int j = 0; j < 32; j++) s += (int8_t)w[2 + j] * q[j];
            acc += v_q32(ld_h(w), ld_h2(xq + 32 * nb + 2 * b), s);
        }
    }
    return warp_sum(acc);
}

static __device__ __forceinline__ float walk_elt(int type, const uint8_t *row, int h) {
    if (type == DT_F32) return ld_f(row + 4 * (size_t)h);
    if (type == DT_F16) return ld_h(row + 2 * (size_t)h);
    if (type == DT_BF16) return elt<DT_BF16>::get(row + 2 * (size_t)h);
    const uint8_t *w = row + (size_t)(h / QK) * Q8_0_B;
    return ld_h(w) * (float)(int8_t)w[2 + h % QK];
}

static __global__ void k_walk_act(int type, const uint8_t *ffn, size_t rb, int H, const int *idx, int k, const float *x, const uint8_t *xq,
                                  const float *bias, int gated, int act, float *a) {
    PDL_ENTRY();
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (i >= k) return;
    int f = idx ? idx[i] : i;
    const uint8_t *r = ffn + rb * 3 * (size_t)f;
    float g = walk_dot(type, r, x, xq, H, lane) + (bias ? bias[f] : 0.0f);
    g = act1(g, act, 0);
    if (gated) g *= walk_dot(type, r + rb, x, xq, H, lane);
    if (lane == 0) a[i] = g;
}

static __global__ void k_walk_down(int type, const uint8_t *ffn, size_t rb, int H, const int *idx, int k, const float *a, float *part) {
    PDL_ENTRY();
    int h = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (h >= H) return;
    float acc = 0.0f;
    int e = (c + 1) * WALK_CHUNK < k ? (c + 1) * WALK_CHUNK : k;
    for (int i = c * WALK_CHUNK; i < e; i++) {
        int f = idx ? idx[i] : i;
        acc = fmaf(a[i], walk_elt(type, ffn + rb * (3 * (size_t)f + 2), h), acc);
    }
    part[(size_t)c * H + h] = acc;
}

static __global__ void k_walk_sum(const float *part, int nc, int H, const float *db, float *out) {
    PDL_ENTRY();
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    float s = part[h];
    for (int c = 1; c < nc; c++) s += part[(size_t)c * H + h];
    out[h] = db ? s + db[h] : s;
}

// (v, i) before (w, j): larger, a NaN above every number (a row holding one has no largest: -1), the lower index among equals
static __device__ __forceinline__ int am_before(float v, int i, float w, int j) {
    if (v != v) return w == w || i < j;
    if (w != w) return 0;
    return v > w || (v == w && i < j);
}

// a block a row: each thread the best of its elements, then the block's
static __global__ void k_argmax(const float *x, int n, int *out) {
    PDL_ENTRY();
    __shared__ float sv[256];
    __shared__ int si[256];
    const float *r = x + (size_t)blockIdx.x * n;
    float bv = r[0];
    int bi = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (am_before(r[i], i, bv, bi)) bv = r[i], bi = i;
    sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s && am_before(sv[threadIdx.x + s], si[threadIdx.x + s], sv[threadIdx.x], si[threadIdx.x]))
            sv[threadIdx.x] = sv[threadIdx.x + s], si[threadIdx.x] = si[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = sv[0] != sv[0] ? -1 : si[0];
}

extern "C" HIDDEN int cuda_argmax(cuda_dev *d, const float *x, int rows, int n, int *out) {
    if (rows < 1 || n < 1) return -1;
    launch(k_argmax, rows, 256, 0, d->stream, x, n, out);
    return launched("argmax");
}

extern "C" HIDDEN int cuda_walk_ok(int type) { return type == DT_F32 || type == DT_F16 || type == DT_BF16 || type == DT_Q8_0; }

extern "C" HIDDEN int cuda_walk(cuda_dev *d, int type, const void *ffn, int H, const int *idx, int k, const float *x, const void *xq,
                                const float *bias, const float *down_bias, int gated, int act, float *a, float *part, float *out) {
    if (!cuda_walk_ok(type) || k < 1 || H < 1 || (type == DT_Q8_0 && (H % QK || !xq))) return -1;
    size_t rb = row_bytes(type, H);
    const uint8_t *w = (const uint8_t *)ffn;
    launch(k_walk_act, (k + 7) / 8, 256, 0, d->stream, type, w, rb, H, idx, k, x, (const uint8_t *)xq, bias, gated, act, a);
    int nc = (k + WALK_CHUNK - 1) / WALK_CHUNK;
    launch(k_walk_down, dim3((unsigned)((H + 127) / 128), (unsigned)nc), 128, 0, d->stream, type, w, rb, H, idx, k, a, part);
    launch(k_walk_sum, (H + 127) / 128, 128, 0, d->stream, part, nc, H, down_bias, out);
    return launched("walk");
}

extern "C" HIDDEN int cuda_topk_abs(cuda_dev *d, const float *s, int n, int k, int *idx) {
    if (n < 1 || k < 1 || k > n) return -1;
    launch(k_topk<1>, 1, TOPK_THREADS, 0, d->stream, s, n, (const int *)NULL, k, idx);
    return launched("top-k");
}
extern "C" HIDDEN int cuda_topk_max(cuda_dev *d, const float *s, int n, const int *dn, int k, int *idx) {
    if (n < 1 || k < 1 || (!dn && k > n)) return -1;
    launch(k_topk<0>, 1, TOPK_THREADS, 0, d->stream, s, n, dn, k, idx);
    return launched("top-k");
}

// The lm_head index's probed clusters (cuda.h's cuda_lm_probe): a block a
// cluster, its place among the candidates the sum of the clusters before
// it, a warp a row.
static __global__ void k_lm_probe(int type, const uint8_t *rows, size_t rs, int H, const unsigned *off, const int *order,
                                  const int *best, int P, const float *x, const uint8_t *xq, float *cs, int *cid, int *dn) {
    PDL_ENTRY();
    __shared__ int part[32];
    const int b = blockIdx.x, lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    int base = 0;
    for (int j = threadIdx.x; j < b; j += blockDim.x) base += (int)(off[best[j] + 1] - off[best[j]]);
    for (int o = 16; o; o >>= 1) base += __shfl_xor_sync(0xffffffffu, base, o);
    if (lane == 0) part[wp] = base;
    __syncthreads();
    base = 0;
    for (int w = 0; w < nw; w++) base += part[w];
    const int c = best[b], c0 = (int)off[c], len = (int)off[c + 1] - c0;
    if (b == P - 1 && threadIdx.x == 0) *dn = base + len;
    for (int i = wp; i < len; i += nw) {
        float v = walk_dot(type, rows + rs * (size_t)(c0 + i), x, xq, H, lane);
        if (lane == 0) cs[base + i] = v, cid[base + i] = order[c0 + i];
    }
}
extern "C" HIDDEN int cuda_lm_probe(cuda_dev *d, int type, const void *rows, int H, const unsigned *off, const int *order, const int *best,
                                    int P, const float *x, const void *xq, float *cs, int *cid, int *dn) {
    if (!cuda_walk_ok(type) || P < 1 || H < 1 || (type == DT_Q8_0 && (H % QK || !xq))) return -1;
    launch(k_lm_probe, P, 256, 0, d->stream, type, (const uint8_t *)rows, row_bytes(type, H), H, off, order, best, P, x,
           (const uint8_t *)xq, cs, cid, dn);
    return launched("lm_head index");
}
// out_s[i], out_id[i] = s[pos[i]], id[pos[i]] (id NULL: pos[i] itself; pos[i] < 0: -inf, -1)
static __global__ void k_lm_gather(const int *pos, int k, const float *s, const int *id, float *out_s, int *out_id) {
    PDL_ENTRY();
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        int p = pos[i];
        out_s[i] = p < 0 ? -INFINITY : s[p], out_id[i] = p < 0 ? -1 : id ? id[p] : p;
    }
}
extern "C" HIDDEN int cuda_lm_gather(cuda_dev *d, const int *pos, int k, const float *s, const int *id, float *out_s, int *out_id) {
    if (k < 1) return -1;
    launch(k_lm_gather, 1, 256, 0, d->stream, pos, k, s, id, out_s, out_id);
    return launched("gather");
}

// host_glu_oss's expression: gate capped at 7, up clamped to +-7, (up + 1) gate sigmoid(1.702 gate)
static __global__ void k_glu_oss(float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    PDL_ENTRY();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gv = gate[(size_t)i * gs], uv = up[(size_t)i * us];
    gv = gv > 7.0f ? 7.0f : gv;
    uv = uv > 7.0f ? 7.0f : uv < -7.0f ? -7.0f : uv;
    out[i] = (uv + 1.0f) * gv / (1.0f + expf(-1.702f * gv));
}
extern "C" HIDDEN int cuda_glu_oss(cuda_dev *d, float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    if (n <= 0) return 0;
    launch(k_glu_oss, grid_for((size_t)n, 256), 256, 0, d->stream, out, gate, gs, up, us, n);
    return launched("gpt-oss activation");
}

static __global__ void k_axpy(float *x, const float *o, float s, size_t n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fmaf_rn(o[i], s, x[i]); // (k_chain's expression)
}
extern "C" HIDDEN int cuda_axpy(cuda_dev *d, float *x, const float *o, float s, size_t n) {
    if (!n) return 0;
    launch(k_axpy, grid_for(n, 256), 256, 0, d->stream, x, o, s, n);
    return launched("residual");
}

static __global__ void k_round_f16(float *x, size_t n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = f16_round(x[i]);
}
extern "C" HIDDEN int cuda_round_f16(cuda_dev *d, float *x, size_t n) {
    if (!n) return 0;
    launch(k_round_f16, grid_for(n, 256), 256, 0, d->stream, x, n);
    return launched("round_f16");
}

static __global__ void k_softmax(float *x, int n) {
    PDL_ENTRY();
    __shared__ float sh[32];
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_max(m, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += (x[j] = expf(x[j] - m));
    s = block_sum(s, sh);
    for (int j = threadIdx.x; j < n; j += blockDim.x) x[j] /= s;
}
extern "C" HIDDEN int cuda_softmax(cuda_dev *d, float *x, int n) {
    if (n <= 0) return 0;
    launch(k_softmax, 1, 256, 0, d->stream, x, n);
    return launched("softmax");
}

static __global__ void k_scale(float *x, size_t n, float s) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = s == 0.0f ? 0.0f : x[i] * s;
}
extern "C" HIDDEN int cuda_scale(cuda_dev *d, float *x, size_t n, float s) {
    if (!n) return 0;
    launch(k_scale, grid_for(n, 256), 256, 0, d->stream, x, n, s);
    return launched("scale");
}

static __global__ void k_mul(float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * n) return;
    size_t r = i / n, c = i % n;
    x[r * xs + c] *= y[r * ys + c];
}
extern "C" HIDDEN int cuda_mul(cuda_dev *d, float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    if (rows <= 0 || n <= 0) return 0;
    launch(k_mul, grid_for((size_t)rows * n, 256), 256, 0, d->stream, x, xs, y, ys, rows, n);
    return launched("mul");
}

static __global__ void k_softcap(float *x, size_t n, float cap) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}
extern "C" HIDDEN int cuda_softcap(cuda_dev *d, float *x, size_t n, float cap) {
    if (!n) return 0;
    launch(k_softcap, grid_for(n, 256), 256, 0, d->stream, x, n, cap);
    return launched("softcap");
}

extern "C" HIDDEN int cuda_copy2d(cuda_dev *d, float *dst, size_t ds, const float *src, size_t ss, int rows, int n) {
    if (rows <= 0 || n <= 0) return 0;
    size_t w = sizeof(float) * (size_t)n;
    cudaError_t e = rows == 1 ? cudaMemcpyAsync(dst, src, w, cudaMemcpyDeviceToDevice, d->stream)
                              : cudaMemcpy2DAsync(dst, sizeof(float) * ds, src, sizeof(float) * ss, w, rows, cudaMemcpyDeviceToDevice, d->stream);
    return e == cudaSuccess ? 0 : set_status("copy", e);
}

extern "C" HIDDEN int cuda_zero(cuda_dev *d, void *p, size_t bytes) {
    cudaError_t e = cudaMemsetAsync(p, 0, bytes, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("memset", e);
}

static __global__ void k_kv_store(void *const *cache, const int *pos, const float *src, int T, int n, int kv16) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * n) return;
    int t = (int)(i / n), c = (int)(i % n);
    size_t at = (size_t)pos[t] * n + c;
    if (kv16) ((__half *)cache[t])[at] = __float2half_rn(src[i]);
    else ((float *)cache[t])[at] = src[i];
}
extern "C" HIDDEN int cuda_kv_store(cuda_dev *d, void *const *cache, const int *pos, const float *src, int T, int n, int kv16) {
    if (T <= 0 || n <= 0) return 0;
    launch(k_kv_store, grid_for((size_t)T * n, 256), 256, 0, d->stream, cache, pos, src, T, n, kv16);
    return launched("kv store");
}

extern "C" HIDDEN int cuda_graph_begin(cuda_dev *d) {
    cudaError_t e = cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? 0 : set_status("graph capture", e);
}

extern "C" HIDDEN int cuda_graph_end(cuda_dev *d, void **exec) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    *exec = NULL;
    cudaError_t e = cudaStreamEndCapture(d->stream, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (g) cudaGraphDestroy(g);
    if (e != cudaSuccess) return set_status("graph", e);
    *exec = (void *)x;
    return 0;
}

// INFER_CUDA_GRAPH_TIME=1: each replay's GPU time (events around it, read at
// the next replay), printed when the device closes -- a decode step's kernels
// alone, against the step's wall time (bench: the host's share of a token).
extern "C" HIDDEN int cuda_graph_launch(cuda_dev *d, void *exec) {
    if (d->gt_on < 0) {
        const char *e = getenv("INFER_CUDA_GRAPH_TIME");
        d->gt_on = e && *e == '1' && cudaEventCreate(&d->gt_a) == cudaSuccess && cudaEventCreate(&d->gt_b) == cudaSuccess;
    }
    if (d->gt_on && d->gt_pending) {
        float ms = 0;
        if (cudaEventSynchronize(d->gt_b) == cudaSuccess && cudaEventElapsedTime(&ms, d->gt_a, d->gt_b) == cudaSuccess)
            d->gt_ms += ms, d->gt_n++;
        d->gt_pending = 0;
    }
    if (d->gt_on) cudaEventRecord(d->gt_a, d->stream);
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, d->stream);
    if (d->gt_on && e == cudaSuccess) cudaEventRecord(d->gt_b, d->stream), d->gt_pending = 1;
    return e == cudaSuccess ? 0 : set_status("graph launch", e);
}

extern "C" HIDDEN void cuda_graph_free(void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

// the normalized value of element i of a row (k_norm's expression)
static __device__ __forceinline__ float normed(const float *xr, const float *w, float r, int i, int kind) {
    float sc = w ? (kind == 1 ? 1.0f + w[i] : w[i]) : 1.0f;
    return xr[i] * r * sc;
}

// A block's row of n normalized (x * r * w) into orow and quantized into the
// activation row yr: a warp per 32-block (q8_0) or per 256-block (q8_K), as
// k_quant_q8_0 / k_quant_q8_K quantize.
static __device__ void norm_quant_row(const float *x, const float *w, float r, int kind, int n, float *orow, uint8_t *yr, int kq) {
    int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    if (!kq) {
        for (int b = wp; b < n / QK; b += nw) {
            float v = normed(x, w, r, QK * b + lane, kind);
            orow[QK * b + lane] = v;
            warp_q8_0(v, lane, yr, n / QK, b);
        }
        return;
    }
    for (int b = wp; b < n / QK_K; b += nw) {
        float v[8];
        for (int k = 0; k < 8; k++) {
            int i = QK_K * b + 8 * lane + k;
            orow[i] = v[k] = normed(x, w, r, i, kind);
        }
        warp_q8_K(v, lane, yr, n / QK_K, b);
    }
}

// ---------------------------------------------------------------------------
// fused steps of a layer (the CUDA backend chains the forward pass's
// operations into these; each gives the floats and bytes of the kernels above
// run one after the other: the same threads, sums and expressions)

// One block of norm_threads(n) per row: [o = norm_a(o)] [x += o * s] [xn =
// norm_b(x) [quantized into xq]], the stages present as flagged.
// k_chain with the row in registers (n <= R x the block's threads): thread t
// holds elements t + NT k (NT the block's threads), the elements the loops
// of k_chain give it, so every sum and value is theirs; a q8_0 block is one
// warp's (block b: warp b % (NT / 32) at k = b / (NT / 32)), a q8_K
// super-block goes through shared memory.
enum { CHAIN_REG = 6 };
template <int R>
static __global__ void __launch_bounds__(1024) k_chain_reg(cuda_chain c, size_t xr) {
    PDL_ENTRY();
    __shared__ float sh[32];
    extern __shared__ float row[]; // (q8_K: the normalized row)
    const int n = c.n, t = threadIdx.x, NT = blockDim.x;
    float *o = c.o ? c.o + (size_t)blockIdx.x * n : NULL, *x = c.x ? c.x + (size_t)blockIdx.x * n : NULL;
    float ov[R], xv[R], sa[R], sb[R];
    // every load first (one wait), then the stages
#pragma unroll
    for (int k = 0; k < R; k++) {
        int i = t + NT * k;
        bool in = i < n;
        ov[k] = in && (c.norm_a || c.residual) ? o[i] : 0.0f;
        xv[k] = in && (c.residual || c.norm_b) ? x[i] : 0.0f;
        sa[k] = in && c.wa ? (c.kind_a == 1 ? 1.0f + c.wa[i] : c.wa[i]) : 1.0f;
        sb[k] = in && c.wb ? (c.kind_b == 1 ? 1.0f + c.wb[i] : c.wb[i]) : 1.0f;
    }
    if (c.norm_a) {
        float s = 0;
#pragma unroll
        for (int k = 0; k < R; k++)
            if (t + NT * k < n) s += ov[k] * ov[k];
        float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps_a);
#pragma unroll
        for (int k = 0; k < R; k++)
            if (t + NT * k < n) o[t + NT * k] = ov[k] = ov[k] * r * sa[k];
    }
    if (c.residual) {
#pragma unroll
        for (int k = 0; k < R; k++)
            if (t + NT * k < n) x[t + NT * k] = xv[k] = __fmaf_rn(ov[k], c.s, xv[k]);
    }
    if (!c.norm_b) return;
    float s = 0;
#pragma unroll
    for (int k = 0; k < R; k++)
        if (t + NT * k < n) s += xv[k] * xv[k];
    float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps_b);
    float *xn = c.xn + (size_t)blockIdx.x * n;
    uint8_t *yr = c.xq + xr * blockIdx.x;
    const int lane = t % 32, wp = t / 32, nw = NT / 32;
#pragma unroll
    for (int k = 0; k < R; k++) {
        int i = t + NT * k;
        if (i >= n) break;
        float v = xv[k] * r * sb[k];
        xn[i] = v;
        if (c.quant == 0) { // block nw k + wp: whole in this warp (n is a multiple of 32)
            warp_q8_0(v, lane, yr, n / QK, nw * k + wp);
        } else if (c.quant == 1) {
            row[i] = v;
        }
    }
    if (c.quant != 1) return;
    __syncthreads();
    for (int b = wp; b < n / QK_K; b += nw) {
        float v[8];
        for (int k = 0; k < 8; k++) v[k] = row[QK_K * b + 8 * lane + k];
        warp_q8_K(v, lane, yr, n / QK_K, b);
    }
}

static __global__ void k_chain(cuda_chain c, size_t xr) {
    PDL_ENTRY();
    __shared__ float sh[32];
    const int n = c.n;
    float *o = c.o ? c.o + (size_t)blockIdx.x * n : NULL, *x = c.x ? c.x + (size_t)blockIdx.x * n : NULL;
    if (c.norm_a) { // k_norm in place
        float s = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += o[i] * o[i];
        float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps_a);
        for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = normed(o, c.wa, r, i, c.kind_a);
    }
    if (c.residual) // k_axpy
        for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = __fmaf_rn(o[i], c.s, x[i]);
    if (!c.norm_b) return;
    float s = 0; // k_norm / k_norm_quant on x (block_sum's barriers make the writes above visible)
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i] * x[i];
    float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps_b);
    float *xn = c.xn + (size_t)blockIdx.x * n;
    if (c.quant < 0)
        for (int i = threadIdx.x; i < n; i += blockDim.x) xn[i] = normed(x, c.wb, r, i, c.kind_b);
    else
        norm_quant_row(x, c.wb, r, c.kind_b, n, xn, c.xq + xr * blockIdx.x, c.quant);
}

extern "C" HIDDEN int cuda_chain_run(cuda_dev *d, const cuda_chain *c, int rows, int wtype) {
    cuda_chain k = *c;
    k.quant = -1;
    if (rows <= 0 || ((c->norm_a || c->residual) && !c->o) || ((c->residual || c->norm_b) && !c->x) || (c->norm_b && !c->xn)) return -1;
    if (c->kind_a > 1 || c->kind_b > 1) return -1;
    if (c->xq) {
        if (!c->norm_b || is_float(wtype) || !cuda_act_row_size(wtype, c->n)) return -1;
        k.quant = is_k(wtype);
    }
    size_t xr = c->xq ? cuda_act_row_size(wtype, c->n) : 0;
    int nt = norm_threads(c->n), per = (c->n + nt - 1) / nt;
    size_t sm = k.quant == 1 ? sizeof(float) * c->n : 0;
    if (per <= 1) launch(k_chain_reg<1>, rows, nt, sm, d->stream, k, xr);
    else if (per <= 2) launch(k_chain_reg<2>, rows, nt, sm, d->stream, k, xr);
    else if (per <= 3) launch(k_chain_reg<3>, rows, nt, sm, d->stream, k, xr);
    else if (per <= CHAIN_REG) launch(k_chain_reg<CHAIN_REG>, rows, nt, sm, d->stream, k, xr);
    else launch(k_chain, rows, nt, 0, d->stream, k, xr);
    return launched("norm chain");
}

// One block of 256 per (row, head) of q, k and v: the head's norm, its RoPE,
// the f16 rounding, written back and (k, v) into the row's cache.
static __global__ void k_qkv(cuda_qkv c, const int *pos) {
    // before the wait, what is not the kernel before's work: this thread's
    // RoPE angle (pair threadIdx.x), norm weights (elements threadIdx.x + 256 k)
    // and cache row
    const int t = blockIdx.x, j = blockIdx.y, hd = c.hd;
    const int kind = j < c.H ? 0 : j < c.H + c.KV ? 1 : 2, h = kind == 0 ? j : kind == 1 ? j - c.H : j - c.H - c.KV;
    const float *w = kind == 0 ? c.q_norm : kind == 1 ? c.k_norm : NULL;
    const int pt = pos[t], nk = kind == 2 ? 0 : c.kind;
    float cs0 = 0.0f, sn0 = 0.0f, sc[2] = {1.0f, 1.0f};
    if (c.inv_freq && (int)threadIdx.x < c.n_pairs) {
        float ang = (float)pt * c.inv_freq[threadIdx.x];
        cs0 = cosf(ang) * c.mscale, sn0 = sinf(ang) * c.mscale;
    }
    for (int k = 0; k < 2; k++) {
        int i = threadIdx.x + 256 * k;
        if (w && i < hd) sc[k] = nk == 1 ? 1.0f + w[i] : w[i]; // (normed's)
    }
    const size_t at = ((size_t)pt * c.KV + h) * hd; // (the row's first element in its cache, f32 or f16: kv16)
    void *cache = kind == 0 || !c.k_cache ? NULL : (kind == 1 ? c.k_cache : c.v_cache)[t];
    PDL_ENTRY();
    __shared__ float sh[32], buf[512];
    float *base = kind == 0 ? c.q : kind == 1 ? c.k : c.v;
    int heads = kind == 0 ? c.H : c.KV;
    float *p = base + ((size_t)t * heads + h) * hd;
    if (kind == 0 ? c.q_norm != NULL : kind == 1 ? c.k_norm != NULL : c.v_norm) { // k_norm over the head
        float s = 0;
        for (int i = threadIdx.x; i < hd; i += 256) s += p[i] * p[i];
        float r = 1.0f / sqrtf(block_sum(s, sh) / (float)hd + c.eps);
        for (int k = 0; k < 2; k++) {
            int i = threadIdx.x + 256 * k;
            if (i < hd) buf[i] = p[i] * r * sc[k];
        }
    } else {
        for (int i = threadIdx.x; i < hd; i += 256) buf[i] = p[i];
    }
    __syncthreads();
    if (kind < 2 && c.inv_freq) { // k_rope (n_pairs <= hd / 2 <= 256: a pair a thread at most)
        if ((int)threadIdx.x < c.n_pairs) {
            int a = threadIdx.x * c.pair_stride;
            rot(buf + a, buf + a + c.pair_offset, cs0, sn0);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < hd; i += 256) {
        float v = c.round ? f16_round(buf[i]) : buf[i];
        p[i] = v;
        if (cache && c.kv16) ((__half *)cache)[at + i] = __float2half_rn(v);
        else if (cache) ((float *)cache)[at + i] = v;
    }
}

extern "C" HIDDEN int cuda_qkv_prep(cuda_dev *d, const cuda_qkv *c, int T, const int *pos) {
    if (T <= 0) return 0;
    if (c->hd > 512 || c->kind > 1 || (c->inv_freq && (c->n_pairs < 1 || c->n_pairs > 256 || (c->n_pairs - 1) * c->pair_stride + c->pair_offset >= c->hd)))
        return -1;
    int heads = c->H + (c->k ? 2 * c->KV : 0);
    launch(k_qkv, dim3(T, heads), 256, 0, d->stream, *c, pos);
    return launched("q, k, v");
}

// ---------------------------------------------------------------------------
// Prompt products on the tensor cores: Y (T, rows) = X (T, cols) W^T with
// 64 x 64 tiles of (rows, tokens), 32 columns a step: the weights' tile
// decoded to f16 (the CPU's dequantized values, rounded), the activations'
// rounded to f16, WMMA 16 x 16 x 16 products summed in f32. Less exact than
// the q8 products (f16 inputs; test_cuda holds it to the dequantized matrix
// at a documented tolerance), and far faster once there are many tokens.


enum { GM = 64, GN = 64, GK = 32, GLD = GK + 8, GCL = GM + 4 };

// the 16 weights (half h of 32-block kb) of row r as floats
// 16 bytes at a 16-byte boundary in one load (every field deq reads 16 of is
// so placed: the split arrays, the k-quant blocks of 144 and 176 bytes)
static __device__ __forceinline__ void ld16(const uint8_t *p, uint8_t *o) { *(int4 *)o = *(const int4 *)p; }

template <int T> struct deq;
template <> struct deq<DT_Q8_0> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        size_t blk = (size_t)m.r * m.nb + kb;
        __align__(16) int8_t q[16];
        ld16(m.w + 32 * blk + 16 * h, (uint8_t *)q);
        float d = ld_h2(m.w + (size_t)32 * m.rows * m.nb + 2 * blk);
        for (int k = 0; k < 16; k++) v[k] = d * (float)q[k];
    }
};
template <> struct deq<DT_Q4_0> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        size_t blk = (size_t)m.r * m.nb + kb;
        __align__(16) uint8_t q[16];
        ld16(m.w + 16 * blk, q);
        float d = ld_h2(m.w + (size_t)16 * m.rows * m.nb + 2 * blk);
        for (int k = 0; k < 16; k++) v[k] = d * (float)((h ? q[k] >> 4 : q[k] & 15) - 8);
    }
};
template <> struct deq<DT_Q5_0> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        size_t blk = (size_t)m.r * m.nb + kb, nall = (size_t)m.rows * m.nb;
        __align__(16) uint8_t q[16];
        ld16(m.w + 16 * blk, q);
        uint32_t qh = *(const uint32_t *)(m.w + 16 * nall + 4 * blk);
        float d = ld_h2(m.w + 20 * nall + 2 * blk);
        for (int k = 0; k < 16; k++) v[k] = d * (float)(((h ? q[k] >> 4 : q[k] & 15) | (int)((qh >> (16 * h + k)) & 1) << 4) - 16);
    }
};
template <> struct deq<DT_Q4_K> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        int b = kb / 8, j = kb % 8, sc0, m0, sc1, m1;
        const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * Q4_K_B;
        scales_k4(w, j & ~1, &sc0, &m0, &sc1, &m1);
        float d = ld_h2(w) * (float)(j & 1 ? sc1 : sc0), mn = ld_h2(w + 2) * (float)(j & 1 ? m1 : m0);
        __align__(16) uint8_t q[16];
        ld16(w + 16 + 32 * (j / 2) + 16 * h, q);
        for (int k = 0; k < 16; k++) v[k] = __fsub_rn(__fmul_rn(d, (float)(j & 1 ? q[k] >> 4 : q[k] & 15)), mn);
    }
};
template <> struct deq<DT_Q5_K> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        int b = kb / 8, j = kb % 8, sc0, m0, sc1, m1;
        const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * Q5_K_B;
        scales_k4(w, j & ~1, &sc0, &m0, &sc1, &m1);
        float d = ld_h2(w) * (float)(j & 1 ? sc1 : sc0), mn = ld_h2(w + 2) * (float)(j & 1 ? m1 : m0);
        __align__(16) uint8_t q[16], qh[16];
        ld16(w + 48 + 32 * (j / 2) + 16 * h, q), ld16(w + 16 + 16 * h, qh);
        for (int k = 0; k < 16; k++) v[k] = __fsub_rn(__fmul_rn(d, (float)((j & 1 ? q[k] >> 4 : q[k] & 15) | ((qh[k] >> j) & 1) << 4)), mn);
    }
};
template <> struct deq<DT_Q6_K> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        int b = kb / 8, j = kb % 8, hh = j / 4, g = j % 4;
        size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        __align__(16) uint8_t ql[16], qh[16];
        ld16(m.w + 128 * blk + 64 * hh + 32 * (g & 1) + 16 * h, ql), ld16(m.w + 128 * nall + 64 * blk + 32 * hh + 16 * h, qh);
        const int8_t *sc = (const int8_t *)(m.w + 192 * nall + 16 * blk);
        float d = ld_h2(m.w + 208 * nall + 2 * blk) * (float)sc[8 * hh + 2 * g + h];
        for (int k = 0; k < 16; k++) v[k] = d * (float)(((g >= 2 ? ql[k] >> 4 : ql[k] & 15) | ((qh[k] >> (2 * g)) & 3) << 4) - 32);
    }
};
template <> struct deq<DT_F16> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        __align__(16) __half p[16]; // (nb: the row's length)
        const uint8_t *src = m.w + 2 * ((size_t)m.r * m.nb + 32 * kb + 16 * h);
        ld16(src, (uint8_t *)p), ld16(src + 16, (uint8_t *)p + 16);
        for (int k = 0; k < 16; k++) v[k] = __half2float(p[k]);
    }
};
template <> struct deq<DT_BF16> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        __align__(16) uint16_t p[16];
        const uint8_t *src = m.w + 2 * ((size_t)m.r * m.nb + 32 * kb + 16 * h);
        ld16(src, (uint8_t *)p), ld16(src + 16, (uint8_t *)p + 16);
        for (int k = 0; k < 16; k++) v[k] = __uint_as_float((uint32_t)p[k] << 16);
    }
};

// The tiles' element type: f16, or bf16 for bf16 weights (their values
// exactly). Float weights (f16, bf16) keep their precision in the product:
// each activation goes in as two parts, x = hi + lo (each rounded to the
// element type), and both are multiplied: about 2^-22 (f16) or 2^-16 (bf16)
// of each activation is lost instead of 2^-11 or 2^-8.
template <int TY> struct gel {
    typedef __half E;
    static __device__ E cv(float v) { return __float2half_rn(v); }
    static __device__ float back(E e) { return __half2float(e); }
};
template <> struct gel<DT_BF16> {
    typedef __nv_bfloat16 E;
    static __device__ E cv(float v) { return __float2bfloat16_rn(v); }
    static __device__ float back(E e) { return __bfloat162float(e); }
};

// One step of K columns of a warp's 32 rows x 32 tokens, on the tensor cores:
// a0 its weight rows (ld elements apart), b0 its tokens' activations (ld
// apart), in NS parts pstride elements apart, the small parts first.
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc_frag;
template <typename E, int NS, int K>
static __device__ __forceinline__ void warp_mma(acc_frag (&acc)[2][2], const E *a0, const E *b0, int ld, size_t pstride) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> a[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major> b[2];
        for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], a0 + 16 * i * ld + kk, ld);
        for (int p = NS - 1; p >= 0; p--) {
            for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], b0 + p * pstride + 16 * j * ld + kk, ld);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
    }
}

template <int TY>
static __global__ void __launch_bounds__(128) k_gemm(const uint8_t *w, int rows, int cols, int nb, const float *x, int T, float *y) {
    PDL_ENTRY();
    using namespace nvcuda;
    typedef typename gel<TY>::E E;
    enum { NS = TY == DT_F16 || TY == DT_BF16 ? 2 : 1 }; // activation parts
    __shared__ __align__(32) E sw[GM][GLD], sx[NS][GN][GLD];
    __shared__ __align__(32) float sc[GN][GCL];
    const int tid = threadIdx.x, warp = tid / 32, r0 = blockIdx.x * GM, t0 = blockIdx.y * GN;
    const int lr = tid / 2, lh = tid % 2; // this thread's tile row (or token) and half of the 32 columns
    const int wr = warp / 2, wt = warp % 2;
    acc_frag acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    const int r = r0 + lr < rows ? r0 + lr : rows - 1, t = t0 + lr;
    const wrow m = {w, rows, r, nb};
    for (int kb = 0; kb < cols / GK; kb++) {
        float v[16];
        deq<TY>::get(m, kb, lh, v);
        for (int k = 0; k < 16; k++) sw[lr][16 * lh + k] = gel<TY>::cv(v[k]);
        if (t < T) {
            const float4 *xp = (const float4 *)(x + (size_t)t * cols + GK * kb + 16 * lh);
            for (int k = 0; k < 4; k++) {
                float4 f4 = xp[k];
                float f[4] = {f4.x, f4.y, f4.z, f4.w};
                for (int e = 0; e < 4; e++) {
                    E hi = gel<TY>::cv(f[e]);
                    sx[0][lr][16 * lh + 4 * k + e] = hi;
                    if (NS == 2) sx[NS - 1][lr][16 * lh + 4 * k + e] = gel<TY>::cv(f[e] - gel<TY>::back(hi));
                }
            }
        } else {
            for (int p = 0; p < NS; p++)
                for (int k = 0; k < 16; k++) sx[p][lr][16 * lh + k] = gel<TY>::cv(0.0f);
        }
        __syncthreads();
        warp_mma<E, NS, GK>(acc, &sw[32 * wr][0], &sx[0][32 * wt][0], GLD, (size_t)GN * GLD);
        __syncthreads();
    }
    // (tile rows i, tokens j) -> sc[token][row], then out with bounds
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::store_matrix_sync(&sc[32 * wt + 16 * j][32 * wr + 16 * i], acc[i][j], GCL, wmma::mem_col_major);
    __syncthreads();
    for (int e = tid; e < GM * GN; e += 128) {
        int tt = e / GM, rr = e % GM;
        if (t0 + tt < T && r0 + rr < rows) y[(size_t)(t0 + tt) * rows + r0 + rr] = sc[tt][rr];
    }
}

// The second tensor-core kernel: a block of 2 GR threads takes GR weight rows
// x 64 tokens (warps of 32 x 32, GR / 32 along the rows, 2 along the tokens),
// 64 columns a step (two 32-blocks: a thread dequantizes one block of one
// row, the tokens' activations go in 16 at a time), so that a block's
// barriers and tile stores are a quarter of k_gemm's per product, its warps
// twice as many. Each warp's results go out through shared memory, a row of
// 32 outputs a store. Columns a multiple of 64 (cuda_gemm falls back to
// k_gemm otherwise). Same arithmetic as k_gemm (the dequantized weights in
// the element type, the activations in NS parts, f32 sums).
enum { G2N = 64, G2K = 64, G2LD = G2K + 8, G2CL = 32 + 4 };
template <int TY, int GR>
// Split over the columns (blockIdx.z of gridDim.z slices, each a run of whole
// 64-column steps): slice z writes its partial sums to y + z T rows, and
// k_gemm_sum adds the slices in order (the same sums every run). For few
// tokens, where rows / GR x tokens / 64 blocks would leave multiprocessors idle.
static __global__ void __launch_bounds__(2 * GR) k_gemm2(const uint8_t *w, int rows, int cols, int nb, const float *x, int T, float *y) {
    PDL_ENTRY();
    using namespace nvcuda;
    typedef typename gel<TY>::E E;
    enum { NS = TY == DT_F16 || TY == DT_BF16 ? 2 : 1, NT = 2 * GR, NW = NT / 32 };
    enum { LOOP = (GR + NS * G2N) * G2LD * sizeof(E), OUT = NW * 32 * G2CL * sizeof(float) };
    __shared__ __align__(128) unsigned char smem[LOOP > OUT ? LOOP : OUT];
    E(*sw)[G2LD] = (E(*)[G2LD])smem;                                  // [GR][G2LD]
    E(*sx)[G2N][G2LD] = (E(*)[G2N][G2LD])(smem + GR * G2LD * sizeof(E)); // [NS][G2N][G2LD]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, r0 = blockIdx.x * GR, t0 = blockIdx.y * G2N;
    const int wr = warp / 2, wt = warp % 2;
    acc_frag acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    const int lr = tid / 2, kh = tid % 2; // this thread's weight row and 32-block of the step
    const wrow m = {w, rows, r0 + lr < rows ? r0 + lr : rows - 1, nb};
    // activations: EPT columns of one token a thread
    enum { EPT = G2N * G2K / NT };
    const int xt = tid / (G2K / EPT), xc = tid % (G2K / EPT) * EPT;
    const float *xrow = t0 + xt < T ? x + (size_t)(t0 + xt) * cols : NULL;
    const int steps = cols / G2K, per = (steps + gridDim.z - 1) / gridDim.z;
    const int k_lo = (int)blockIdx.z * per * G2K, k_hi = min(cols, k_lo + per * G2K);
    y += (size_t)blockIdx.z * T * rows;
    for (int k0 = k_lo; k0 < k_hi; k0 += G2K) {
        for (int h = 0; h < 2; h++) {
            float v[16];
            __align__(16) E e[16];
            deq<TY>::get(m, k0 / 32 + kh, h, v);
            for (int k = 0; k < 16; k++) e[k] = gel<TY>::cv(v[k]);
            int4 *dst = (int4 *)&sw[lr][32 * kh + 16 * h];
            dst[0] = ((const int4 *)e)[0], dst[1] = ((const int4 *)e)[1];
        }
        for (int c = 0; c < EPT; c += 8) {
            __align__(16) E hi[8], lo[8];
            float f[8];
            if (xrow) {
                float4 a = *(const float4 *)(xrow + k0 + xc + c), b = *(const float4 *)(xrow + k0 + xc + c + 4);
                f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
            } else {
                for (int k = 0; k < 8; k++) f[k] = 0.0f;
            }
            for (int k = 0; k < 8; k++) hi[k] = gel<TY>::cv(f[k]), lo[k] = gel<TY>::cv(f[k] - gel<TY>::back(hi[k]));
            *(int4 *)&sx[0][xt][xc + c] = *(const int4 *)hi;
            if (NS == 2) *(int4 *)&sx[NS - 1][xt][xc + c] = *(const int4 *)lo;
        }
        __syncthreads();
        warp_mma<E, NS, G2K>(acc, &sw[32 * wr][0], &sx[0][32 * wt][0], G2LD, (size_t)G2N * G2LD);
        __syncthreads();
    }
    // the warp's 32 rows x 32 tokens -> its staging [token][row] -> y
    float(*cs)[G2CL] = (float(*)[G2CL])(smem + (size_t)warp * 32 * G2CL * sizeof(float));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::store_matrix_sync(&cs[16 * j][16 * i], acc[i][j], G2CL, wmma::mem_col_major);
    __syncwarp();
    const int r = r0 + 32 * wr + lane;
    for (int tt = 0; tt < 32; tt++) {
        int t = t0 + 32 * wt + tt;
        if (t < T && r < rows) y[(size_t)t * rows + r] = cs[tt][lane];
    }
}

// y = the sum of n slices of T x rows (slices ys apart), in slice order
static __global__ void k_gemm_sum(float *y, const float *part, size_t ys, int n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ys) return;
    float a = part[i];
    for (int z = 1; z < n; z++) a += part[(size_t)z * ys + i];
    y[i] = a;
}

static int gemm_type(int t) {
    return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K || t == DT_F16 || t == DT_BF16;
}

extern "C" HIDDEN int cuda_gemm_ok(int wtype, int cols, int T) {
    return T >= CUDA_GEMM_MIN_T && gemm_type(wtype) && cols > 0 && cols % (is_k(wtype) ? QK_K : QK) == 0;
}

// ---------------------------------------------------------------------------
// Large prompts through cuBLAS (cublasGemmEx, f32 sums on the tensor cores),
// with k_gemm2's arithmetic: f16 / bf16 weights as they are and the
// activations in two parts (hi + lo, the small part first, as warp_mma);
// quantized weights dequantized to f16 (deq: the CPU's values, rounded) into
// a scratch matrix, the activations rounded to f16. The same product for the
// same rows whatever else the pass holds (a sequence's rows as alone).

// x (n floats) as NS parts of gel<TY>'s element type: part p at out + p n
template <int TY, int NS>
static __global__ void k_xparts(const float *x, size_t n, typename gel<TY>::E *out) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    typename gel<TY>::E hi = gel<TY>::cv(v);
    out[i] = hi;
    if (NS == 2) out[n + i] = gel<TY>::cv(v - gel<TY>::back(hi));
}

// the weights of type TY (rows x cols) in f16: a thread per 16
template <int TY>
static __global__ void k_deq_f16(const uint8_t *w, int rows, int cols, int nb, __half *out) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, per = (size_t)cols / 16;
    if (i >= (size_t)rows * per) return;
    int r = (int)(i / per), c = (int)(i % per);
    const wrow m = {w, rows, r, nb};
    float v[16];
    deq<TY>::get(m, c / 2, c % 2, v);
    // (two 16-byte stores: a row's 16 values sit at a 32-byte boundary, cols % 16 == 0; stores of a half
    // at a time made each warp's write 16 partial-sector passes, ~250 GB/s)
    __align__(16) __half2 h2[8];
    for (int k = 0; k < 8; k++) h2[k] = __halves2half2(__float2half_rn(v[2 * k]), __float2half_rn(v[2 * k + 1]));
    uint4 *o = (uint4 *)(out + (size_t)r * cols + 16 * c);
    o[0] = *(const uint4 *)h2, o[1] = *(const uint4 *)(h2 + 4);
}

static int grow(void **p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return 0;
    cudaFree(*p);
    *p = NULL, *cap = 0;
    if (cudaMalloc(p, bytes) != cudaSuccess) return (void)cudaGetLastError(), -1;
    *cap = bytes;
    return 0;
}

// 1 when cuBLAS takes this product: f16 / bf16 weights from 64 tokens, the
// quantized types from 256 (their dequantized copy then costs less than the
// product gains), matrices of 2M weights and more (smaller ones: k_gemm2)
static int blas_wants(cuda_dev *d, int wtype, int rows, int cols, int T) {
    if (d->blas_state < 0 || (long)rows * cols < (1L << 21)) return 0;
    if (T < (is_float(wtype) ? 64 : 256) || cols % 16) return 0;
    cudaStreamCaptureStatus st;
    if (cudaStreamIsCapturing(d->stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) return 0; // (no allocation in a graph)
    return blas_ready(d);
}

// 1 when cuBLAS is loaded and this device's handle made (on first use)
static int blas_ready(cuda_dev *d) {
    if (d->blas_state == 0) {
        pthread_once(&g_blas_once, blas_load);
        d->blas_state = g_blas.gemm && g_blas.create(&d->blas) == CUBLAS_STATUS_SUCCESS ? 1 : -1;
        if (d->blas_state > 0 && g_blas.stream(d->blas, d->stream) != CUBLAS_STATUS_SUCCESS) g_blas.destroy(d->blas), d->blas_state = -1;
    }
    return d->blas_state > 0;
}

static int blas_gemm(cuda_dev *d, int wtype, const uint8_t *w, int rows, int cols, int nb, const float *x, int T, float *y, int lowp) {
    const int fl = is_float(wtype), ns = fl && !lowp ? 2 : 1;
    const size_t n = (size_t)T * cols;
    if (grow(&d->gx, &d->gx_cap, 2 * ns * n)) return -1;
    const void *wm = w;
    cudaDataType et = wtype == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    if (wtype == DT_BF16 && ns == 1) launch(k_xparts<DT_BF16, 1>, grid_for(n, 256), 256, 0, d->stream, x, n, (__nv_bfloat16 *)d->gx);
    else if (wtype == DT_BF16) launch(k_xparts<DT_BF16, 2>, grid_for(n, 256), 256, 0, d->stream, x, n, (__nv_bfloat16 *)d->gx);
    else if (fl && ns == 2) launch(k_xparts<DT_F16, 2>, grid_for(n, 256), 256, 0, d->stream, x, n, (__half *)d->gx);
    else launch(k_xparts<DT_F16, 1>, grid_for(n, 256), 256, 0, d->stream, x, n, (__half *)d->gx);
    if (!fl) {
        if (grow(&d->gw, &d->gw_cap, 2 * (size_t)rows * cols)) return -1;
        size_t units = (size_t)rows * (cols / 16);
        switch (wtype) {
#define D(t) case t: launch(k_deq_f16<t>, grid_for(units, 256), 256, 0, d->stream, w, rows, cols, nb, (__half *)d->gw); break;
        D(DT_Q8_0) D(DT_Q4_0) D(DT_Q5_0) D(DT_Q4_K) D(DT_Q5_K) D(DT_Q6_K)
#undef D
        default: return -1;
        }
        wm = d->gw;
    }
    if (launched("gemm operands")) return -1;
    const float one = 1.0f, zero = 0.0f;
    for (int p = ns - 1; p >= 0; p--) { // (the small part first)
        const void *xp = (const uint8_t *)d->gx + 2 * (size_t)p * n;
        // column-major: Y^T (rows x T) = (W, cols x rows)^T (X^T, cols x T)
        if (g_blas.gemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, cols, &one, wm, et, cols, xp, et, cols, p == ns - 1 ? &zero : &one, y,
                        CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return set_status("cublasGemmEx", cudaErrorUnknown);
    }
    return 0;
}

extern "C" HIDDEN int cuda_gemm_blas(cuda_dev *d, int wtype, int rows, int cols, int T) {
    return cuda_gemm_ok(wtype, cols, T) && blas_wants(d, wtype, rows, cols, T);
}

extern "C" HIDDEN int cuda_gemm(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y) {
    return cuda_gemm_lowp(d, wtype, w, rows, cols, x, T, y, 0);
}

extern "C" HIDDEN int cuda_gemm_lowp(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y, int lowp) {
    if (!cuda_gemm_ok(wtype, cols, T) || rows <= 0) return -1;
    if (blas_wants(d, wtype, rows, cols, T))
        return blas_gemm(d, wtype, (const uint8_t *)w, rows, cols, is_float(wtype) ? cols : cols / (is_k(wtype) ? QK_K : QK), x, T, y,
                         lowp);
    int nb = is_float(wtype) ? cols : cols / (is_k(wtype) ? QK_K : QK);
    const uint8_t *wb = (const uint8_t *)w;
    if (d->gemm_kernel == 2 && cols % G2K == 0) {
        // 128 rows a block where that still gives two blocks an SM's worth, else 64
        int tiles = (T + G2N - 1) / G2N, big = (long)((rows + 127) / 128) * tiles >= 2L * d->sms;
        long blocks = (long)(big ? (rows + 127) / 128 : (rows + 63) / 64) * tiles;
        // few blocks (few tokens): the columns split in up to 8 slices, to two blocks an SM's worth
        int ks = 1, steps = cols / G2K;
        while (d->gemm_split && ks < 8 && ks * 2 <= steps && blocks * ks < 2L * d->sms) ks *= 2;
        float *out = y;
        if (ks > 1) {
            size_t need = sizeof(float) * (size_t)ks * T * rows;
            if (need > d->part_cap) {
                cudaFree(d->part);
                d->part = NULL, d->part_cap = 0;
                if (cudaMalloc((void **)&d->part, need) != cudaSuccess) return set_status("gemm partial sums", cudaGetLastError());
                d->part_cap = need;
            }
            out = d->part;
        }
        dim3 g(big ? (rows + 127) / 128 : (rows + 63) / 64, tiles, ks);
        switch (wtype) {
#define G(t)                                                                                   \
    case t:                                                                                    \
        if (big) launch(k_gemm2<t, 128>, g, 256, 0, d->stream, wb, rows, cols, nb, x, T, out);      \
        else launch(k_gemm2<t, 64>, g, 128, 0, d->stream, wb, rows, cols, nb, x, T, out);          \
        break;
        G(DT_Q8_0) G(DT_Q4_0) G(DT_Q5_0) G(DT_Q4_K) G(DT_Q5_K) G(DT_Q6_K) G(DT_F16) G(DT_BF16)
#undef G
        default: return -1;
        }
        if (ks > 1) {
            size_t ys = (size_t)T * rows;
            launch(k_gemm_sum, grid_for(ys, 256), 256, 0, d->stream, y, d->part, ys, ks);
        }
        return launched("gemm");
    }
    dim3 g((rows + GM - 1) / GM, (T + GN - 1) / GN);
    switch (wtype) {
#define G(t) case t: launch(k_gemm<t>, g, 128, 0, d->stream, wb, rows, cols, nb, x, T, y); break;
    G(DT_Q8_0) G(DT_Q4_0) G(DT_Q5_0) G(DT_Q4_K) G(DT_Q5_K) G(DT_Q6_K) G(DT_F16) G(DT_BF16)
#undef G
    default: return -1;
    }
    return launched("gemm");
}
