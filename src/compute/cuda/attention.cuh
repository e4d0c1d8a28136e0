// What the attention kernels share (attention.cu's per-row kernel,
// attention_split.cu's split ones): the cache's element types, the
// quantized output of a head.
#pragma once
#include "compute/cuda/common.cuh"
#include "compute/cuda/quant.cuh"

// The KV cache's elements: f32, or f16 (KH; ggml numerics' caches, whose values are f16 already)
template <int KH> struct kvel { typedef float T; };
template <> struct kvel<1> { typedef __half T; };
static __device__ __forceinline__ float kvf(float x) { return x; }
static __device__ __forceinline__ float kvf(__half x) { return __half2float(x); }

// the head's output o (global, this block's writes) as the next product's quantized blocks
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

// the split kernels for rows [0, T) over z chunks (attention_split.cu; cuda_attention_kv's INFER_CUDA_ATT_SPLIT=N)
extern "C" HIDDEN int cuda_att_split_run(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                         const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                                         float *scores, int stride, uint8_t *xq, size_t xr, int xk, int kv16, int z);
