// Weights on the GPU: cuda_weight_upload, which splits the blocks of Q8_0,
// Q4_0, Q5_0 and Q6_K matrices into arrays of their fields (k_split; the
// layout: common.cuh), and the bytes of a row of weights of each type.
#include "compute/cuda/common.cuh"

// one block of a raw matrix into the split arrays (a thread per block)
static __global__ void k_split(const uint8_t *src, uint8_t *dst, int type, size_t nblk) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nblk) return;
    switch (type) {
    case DT_Q8_0: {
        const uint8_t *s = src + i * qtype<DT_Q8_0>::B;
        for (int k = 0; k < 32; k++) dst[32 * i + k] = s[2 + k];
        dst[32 * nblk + 2 * i] = s[0], dst[32 * nblk + 2 * i + 1] = s[1];
        break;
    }
    case DT_Q4_0: {
        const uint8_t *s = src + i * qtype<DT_Q4_0>::B;
        for (int k = 0; k < 16; k++) dst[16 * i + k] = s[2 + k];
        dst[16 * nblk + 2 * i] = s[0], dst[16 * nblk + 2 * i + 1] = s[1];
        break;
    }
    case DT_Q5_0: {
        const uint8_t *s = src + i * qtype<DT_Q5_0>::B;
        for (int k = 0; k < 16; k++) dst[16 * i + k] = s[6 + k];
        for (int k = 0; k < 4; k++) dst[16 * nblk + 4 * i + k] = s[2 + k];
        dst[20 * nblk + 2 * i] = s[0], dst[20 * nblk + 2 * i + 1] = s[1];
        break;
    }
    case DT_Q6_K: {
        const uint8_t *s = src + i * qtype<DT_Q6_K>::B;
        for (int k = 0; k < 128; k++) dst[128 * i + k] = s[k];
        for (int k = 0; k < 64; k++) dst[128 * nblk + 64 * i + k] = s[128 + k];
        for (int k = 0; k < 16; k++) dst[192 * nblk + 16 * i + k] = s[192 + k];
        dst[208 * nblk + 2 * i] = s[208], dst[208 * nblk + 2 * i + 1] = s[209];
        break;
    }
    }
}

// bytes of a row of n weights of a type (tensor/dtype.c's table: the block sizes from qtype)
HIDDEN size_t row_bytes(int t, int n) {
#define Q(ty) case ty: return (size_t)n / qtype<ty>::qk * qtype<ty>::B;
    switch (t) {
    case DT_F32: return 4 * (size_t)n;
    case DT_F16: case DT_BF16: return 2 * (size_t)n;
    Q(DT_Q8_0) Q(DT_Q4_0) Q(DT_Q4_1) Q(DT_Q5_0) Q(DT_Q5_1) Q(DT_MXFP4)
    Q(DT_Q2_K) Q(DT_Q3_K) Q(DT_Q4_K) Q(DT_Q5_K) Q(DT_Q6_K)
    }
#undef Q
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
