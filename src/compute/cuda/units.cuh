// What the products share: a weight row, the units' values (their
// roundings explicit, so that k_mv (matvec.cu) and k_mmv (mmv.cu) give the
// same bits), the q4_K / q5_K scales (also gemm.cu's dequantization), the
// float weights' elements (also vindex.cu's walk), and the descriptor of a
// launch of up to 4 products.
#ifndef INFER_COMPUTE_CUDA_UNITS_CUH
#define INFER_COMPUTE_CUDA_UNITS_CUH

#include "compute/cuda/common.cuh"

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

// float weights against f32 activations
template <int T> struct elt;
template <> struct elt<DT_F32> { enum { B = 4 }; static __device__ float get(const uint8_t *w) { return ld_f(w); } };
template <> struct elt<DT_F16> { enum { B = 2 }; static __device__ float get(const uint8_t *w) { return ld_h(w); } };
template <> struct elt<DT_BF16> { enum { B = 2 }; static __device__ float get(const uint8_t *w) { return __uint_as_float((uint32_t)(w[0] | w[1] << 8) << 16); } };

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

enum { MMV_ROWS = 16, MMV_WARPS = 8 }; // (k_mmv's block: 16 rows, 8 warps)

// k_mmv (mmv.cu) for the products of k of type ty at tpr threads a row
// (k_mv's), T tokens, rows_blocks blocks of MMV_ROWS rows
HIDDEN void mmv_run(cuda_dev *dv, int ty, int tpr, int T, int rows_blocks, const mv_desc &k, const uint8_t *xb);
// the types k_mmv takes
HIDDEN int mmv_type(int t);
// k_mmq (mmq.cu) for the products of k, all of type ty: blk0 and the split its own
HIDDEN int mmq_run(cuda_dev *dv, int ty, const mv_desc &k, const uint8_t *xb);
HIDDEN int mmq_type(int t);

#endif
