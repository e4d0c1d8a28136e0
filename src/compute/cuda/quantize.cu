// The activation quantizers (cuda_quantize): each row the CPU's values, in
// the split rows of quant.cuh, and their size (cuda_act_row_size).
#include "compute/cuda/common.cuh"
#include "compute/cuda/quant.cuh"

extern "C" HIDDEN size_t cuda_act_row_size(int wtype, int n) {
    if (is_float(wtype)) return sizeof(float) * (size_t)n;
    if (is_q32(wtype) && n % QK == 0) return round16((size_t)(n / QK) * qtype<DT_Q8_0>::B);
    if (is_k(wtype) && n % QK_K == 0) return round16((size_t)(n / QK_K) * qtype<DT_Q8_K>::B);
    return 0;
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
