// The activation quantizers' warps, the CPU's values (act_quant_q8_0,
// q8_K_from_float): quantize.cu's kernels, and the fused kernels that
// quantize the rows they write (norm.cu, attention.cu).
#ifndef INFER_COMPUTE_CUDA_QUANT_CUH
#define INFER_COMPUTE_CUDA_QUANT_CUH

#include "compute/cuda/common.cuh"

// Activation rows on the GPU hold the CPU quantizers' values (act_quant_q8_0,
// q8_K_from_float) with each field in an array of its own, so that lanes
// read the quants 16 bytes at a time; each row is padded to 16 bytes.
//   q8_0 (the 32-element types): nb x 32 int8, then nb f16 scales
//   q8_K (the k-quants): nb x 256 int8, nb f32 scales, nb x 16 int16 sums of 16

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

#endif
