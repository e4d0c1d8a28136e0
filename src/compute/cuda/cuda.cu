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

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIDDEN __attribute__((visibility("hidden")))

struct cuda_dev {
    int ordinal;
    cudaStream_t stream;
    char name[256];
    unsigned char *ring; // pinned staging for cuda_upload_async
    size_t ring_at;
};

enum { RING_BYTES = 4 << 20, RING_MAX_COPY = 64 << 10 };

static char g_status[256] = "not probed";

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
    d->ordinal = ordinal;
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
    cudaStreamDestroy(d->stream);
    cudaFreeHost(d->ring);
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

extern "C" HIDDEN int cuda_download(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("download", e);
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
static __device__ __forceinline__ int ld_i16(const uint8_t *p) { return (int16_t)(uint16_t)(p[0] | p[1] << 8); }
static __device__ __forceinline__ uint32_t ld_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static __device__ __forceinline__ float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return __uint_as_float(bits);
}

__constant__ int8_t c_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static __device__ __forceinline__ void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

// ---------------------------------------------------------------------------
// one block's contribution, as the CPU oracle computes it (vecdot_ref.c)

template <int T> struct blk;

template <> struct blk<DT_Q8_0> {
    enum { B = Q8_0_B, XB = Q8_0_B, N = QK };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        int s = 0;
        for (int j = 0; j < QK; j++) s += (int8_t)w[2 + j] * (int8_t)x[2 + j];
        return s * (ld_h(w) * ld_h(x));
    }
};
template <> struct blk<DT_Q4_0> {
    enum { B = Q4_0_B, XB = Q8_0_B, N = QK };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += ((w[2 + j] & 15) - 8) * (int8_t)x[2 + j] + ((w[2 + j] >> 4) - 8) * (int8_t)x[2 + j + 16];
        return s * (ld_h(w) * ld_h(x));
    }
};
template <> struct blk<DT_Q4_1> {
    enum { B = Q4_1_B, XB = Q8_0_B, N = QK };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        int s = 0, sy = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[4 + j] & 15) * (int8_t)x[2 + j] + (w[4 + j] >> 4) * (int8_t)x[2 + j + 16];
            sy += (int8_t)x[2 + j] + (int8_t)x[2 + j + 16];
        }
        float dx = ld_h(x);
        return s * (ld_h(w) * dx) + sy * (ld_h(w + 2) * dx);
    }
};
template <> struct blk<DT_Q5_0> {
    enum { B = Q5_0_B, XB = Q8_0_B, N = QK };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        uint32_t qh = ld_u32(w + 2);
        int s = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[6 + j] & 15) | ((qh >> j) & 1) << 4, hi = (w[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
            s += (lo - 16) * (int8_t)x[2 + j] + (hi - 16) * (int8_t)x[2 + j + 16];
        }
        return s * (ld_h(w) * ld_h(x));
    }
};
template <> struct blk<DT_Q5_1> {
    enum { B = Q5_1_B, XB = Q8_0_B, N = QK };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        uint32_t qh = ld_u32(w + 4);
        int s = 0, sy = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[8 + j] & 15) | ((qh >> j) & 1) << 4, hi = (w[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
            s += lo * (int8_t)x[2 + j] + hi * (int8_t)x[2 + j + 16];
            sy += (int8_t)x[2 + j] + (int8_t)x[2 + j + 16];
        }
        float dx = ld_h(x);
        return s * (ld_h(w) * dx) + sy * (ld_h(w + 2) * dx);
    }
};
template <> struct blk<DT_MXFP4> {
    enum { B = MXFP4_B, XB = Q8_0_B, N = QK };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += c_mxfp4[w[1 + j] & 15] * (int8_t)x[2 + j] + c_mxfp4[w[1 + j] >> 4] * (int8_t)x[2 + j + 16];
        return s * (e8m0_half(w[0]) * ld_h(x));
    }
};

// q8_K activation block: d (f32) at 0, qs at 4, bsums (int16 x 16) at 260
template <> struct blk<DT_Q2_K> {
    enum { B = Q2_K_B, XB = Q8_K_B, N = QK_K };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        const uint8_t *sc = w, *qs = w + 16;
        float dy = ld_f(x);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 16; g++) summ += (sc[g] >> 4) * ld_i16(x + 260 + 2 * g);
        for (int h = 0; h < 2; h++)
            for (int sh = 0; sh < 4; sh++)
                for (int k = 0; k < 2; k++) {
                    const uint8_t *q = qs + 32 * h + 16 * k;
                    const int8_t *y = (const int8_t *)x + 4 + 128 * h + 32 * sh + 16 * k;
                    int si = 0;
                    for (int l = 0; l < 16; l++) si += ((q[l] >> 2 * sh) & 3) * y[l];
                    sumi += (sc[8 * h + 2 * sh + k] & 15) * si;
                }
        return dy * ld_h(w + 80) * sumi - dy * ld_h(w + 82) * summ;
    }
};
template <> struct blk<DT_Q3_K> {
    enum { B = Q3_K_B, XB = Q8_K_B, N = QK_K };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        const uint8_t *hmask = w, *qs = w + 32, *p = w + 96;
        int sc[16], sumi = 0;
        for (int g = 0; g < 16; g++) {
            int lo = g < 8 ? p[g] & 15 : p[g - 8] >> 4;
            int hi = (p[8 + g % 4] >> (2 * (g / 4))) & 3;
            sc[g] = (lo | hi << 4) - 32;
        }
        for (int h = 0; h < 2; h++)
            for (int sh = 0; sh < 4; sh++)
                for (int k = 0; k < 2; k++) {
                    const uint8_t *q = qs + 32 * h + 16 * k, *hm = hmask + 16 * k;
                    const int8_t *y = (const int8_t *)x + 4 + 128 * h + 32 * sh + 16 * k;
                    int m = 1 << (4 * h + sh), si = 0;
                    for (int l = 0; l < 16; l++) si += (((q[l] >> 2 * sh) & 3) - (hm[l] & m ? 0 : 4)) * y[l];
                    sumi += sc[8 * h + 2 * sh + k] * si;
                }
        return ld_f(x) * ld_h(w + 108) * sumi;
    }
};
template <> struct blk<DT_Q4_K> {
    enum { B = Q4_K_B, XB = Q8_K_B, N = QK_K };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        const uint8_t *scales = w + 4, *qs = w + 16;
        float dy = ld_f(x);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 8; g++) {
            int sc, m;
            scale_min_k4(g, scales, &sc, &m);
            summ += m * (ld_i16(x + 260 + 4 * g) + ld_i16(x + 260 + 4 * g + 2));
            const uint8_t *q = qs + 32 * (g / 2);
            const int8_t *y = (const int8_t *)x + 4 + 32 * g;
            int si = 0;
            for (int l = 0; l < 32; l++) si += ((g & 1) ? q[l] >> 4 : q[l] & 15) * y[l];
            sumi += sc * si;
        }
        return dy * ld_h(w) * sumi - dy * ld_h(w + 2) * summ;
    }
};
template <> struct blk<DT_Q5_K> {
    enum { B = Q5_K_B, XB = Q8_K_B, N = QK_K };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        const uint8_t *scales = w + 4, *qh = w + 16, *qs = w + 48;
        float dy = ld_f(x);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 8; g++) {
            int sc, m;
            scale_min_k4(g, scales, &sc, &m);
            summ += m * (ld_i16(x + 260 + 4 * g) + ld_i16(x + 260 + 4 * g + 2));
            const uint8_t *q = qs + 32 * (g / 2);
            const int8_t *y = (const int8_t *)x + 4 + 32 * g;
            int si = 0;
            for (int l = 0; l < 32; l++) si += (((g & 1) ? q[l] >> 4 : q[l] & 15) | ((qh[l] >> g) & 1) << 4) * y[l];
            sumi += sc * si;
        }
        return dy * ld_h(w) * sumi - dy * ld_h(w + 2) * summ;
    }
};
template <> struct blk<DT_Q6_K> {
    enum { B = Q6_K_B, XB = Q8_K_B, N = QK_K };
    static __device__ float dot(const uint8_t *w, const uint8_t *x) {
        const uint8_t *qlb = w, *qhb = w + 128;
        const int8_t *scales = (const int8_t *)(w + 192);
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = qlb + 64 * h, *qh = qhb + 32 * h;
            const int8_t *y = (const int8_t *)x + 4 + 128 * h;
            int gs[8] = {0};
            for (int l = 0; l < 32; l++) {
                int q1 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                gs[0 + l / 16] += q1 * y[l];
                gs[2 + l / 16] += q2 * y[l + 32];
                gs[4 + l / 16] += q3 * y[l + 64];
                gs[6 + l / 16] += q4 * y[l + 96];
            }
            for (int g = 0; g < 8; g++) sumi += scales[8 * h + g] * gs[g];
        }
        return ld_f(x) * ld_h(w + 208) * sumi;
    }
};

// float weights against f32 activations: one element
template <int T> struct elt;
template <> struct elt<DT_F32> { enum { B = 4 }; static __device__ float get(const uint8_t *w) { return ld_f(w); } };
template <> struct elt<DT_F16> { enum { B = 2 }; static __device__ float get(const uint8_t *w) { return ld_h(w); } };
template <> struct elt<DT_BF16> { enum { B = 2 }; static __device__ float get(const uint8_t *w) { return __uint_as_float((uint32_t)(w[0] | w[1] << 8) << 16); } };

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// k-quants: the 32 lanes share each super-block (lane l: elements 8l..8l+7),
// each its part of the sub-block sums times their scales (and the mins); the
// integer sums are added across the warp and lane 0 scales them and adds the
// super-blocks in order, with the oracle's float operations, uncontracted.
template <int T> struct kq;
template <> struct kq<DT_Q2_K> {
    enum { B = Q2_K_B };
    static __device__ void part(const uint8_t *w, const uint8_t *x, int l, int *si, int *sm) {
        int s = 0, e0 = 8 * l, g = e0 / 16, h = e0 / 128, r = e0 % 128, sh = r / 32;
        for (int k = 0; k < 8; k++) s += ((w[16 + 32 * h + (r % 32) + k] >> (2 * sh)) & 3) * (int8_t)x[4 + e0 + k];
        *si = (w[g] & 15) * s;
        *sm = l % 2 == 0 ? (w[g] >> 4) * ld_i16(x + 260 + 2 * g) : 0;
    }
    static __device__ float scale(const uint8_t *w, const uint8_t *x, int si, int sm) {
        float dy = ld_f(x);
        return __fsub_rn(__fmul_rn(__fmul_rn(dy, ld_h(w + 80)), (float)si), __fmul_rn(__fmul_rn(dy, ld_h(w + 82)), (float)sm));
    }
};
template <> struct kq<DT_Q3_K> {
    enum { B = Q3_K_B };
    static __device__ void part(const uint8_t *w, const uint8_t *x, int l, int *si, int *sm) {
        const uint8_t *p = w + 96;
        int e0 = 8 * l, g = e0 / 16, h = e0 / 128, r = e0 % 128, sh = r / 32, rr = r % 32, s = 0, m = 1 << (4 * h + sh);
        for (int k = 0; k < 8; k++) s += (((w[32 + 32 * h + rr + k] >> (2 * sh)) & 3) - (w[rr + k] & m ? 0 : 4)) * (int8_t)x[4 + e0 + k];
        int lo = g < 8 ? p[g] & 15 : p[g - 8] >> 4, hi = (p[8 + g % 4] >> (2 * (g / 4))) & 3;
        *si = ((lo | hi << 4) - 32) * s;
        *sm = 0;
    }
    static __device__ float scale(const uint8_t *w, const uint8_t *x, int si, int sm) { return __fmul_rn(__fmul_rn(ld_f(x), ld_h(w + 108)), (float)si); }
};
template <> struct kq<DT_Q4_K> {
    enum { B = Q4_K_B };
    static __device__ void part(const uint8_t *w, const uint8_t *x, int l, int *si, int *sm) {
        int j = l / 4, o = 8 * (l % 4), sc, m, s = 0;
        scale_min_k4(j, w + 4, &sc, &m);
        const uint8_t *q = w + 16 + 32 * (j / 2) + o;
        for (int k = 0; k < 8; k++) s += ((j & 1) ? q[k] >> 4 : q[k] & 15) * (int8_t)x[4 + 32 * j + o + k];
        *si = sc * s;
        *sm = l % 4 == 0 ? m * (ld_i16(x + 260 + 4 * j) + ld_i16(x + 262 + 4 * j)) : 0;
    }
    static __device__ float scale(const uint8_t *w, const uint8_t *x, int si, int sm) {
        float dy = ld_f(x);
        return __fsub_rn(__fmul_rn(__fmul_rn(dy, ld_h(w)), (float)si), __fmul_rn(__fmul_rn(dy, ld_h(w + 2)), (float)sm));
    }
};
template <> struct kq<DT_Q5_K> {
    enum { B = Q5_K_B };
    static __device__ void part(const uint8_t *w, const uint8_t *x, int l, int *si, int *sm) {
        int j = l / 4, o = 8 * (l % 4), sc, m, s = 0;
        scale_min_k4(j, w + 4, &sc, &m);
        const uint8_t *q = w + 48 + 32 * (j / 2) + o, *qh = w + 16 + o;
        for (int k = 0; k < 8; k++) s += (((j & 1) ? q[k] >> 4 : q[k] & 15) | ((qh[k] >> j) & 1) << 4) * (int8_t)x[4 + 32 * j + o + k];
        *si = sc * s;
        *sm = l % 4 == 0 ? m * (ld_i16(x + 260 + 4 * j) + ld_i16(x + 262 + 4 * j)) : 0;
    }
    static __device__ float scale(const uint8_t *w, const uint8_t *x, int si, int sm) {
        float dy = ld_f(x);
        return __fsub_rn(__fmul_rn(__fmul_rn(dy, ld_h(w)), (float)si), __fmul_rn(__fmul_rn(dy, ld_h(w + 2)), (float)sm));
    }
};
template <> struct kq<DT_Q6_K> {
    enum { B = Q6_K_B };
    static __device__ void part(const uint8_t *w, const uint8_t *x, int l, int *si, int *sm) {
        int e0 = 8 * l, h = e0 / 128, r = e0 % 128, qq = r / 32, li = r % 32, s = 0;
        const uint8_t *ql = w + 64 * h + li + 32 * (qq & 1), *qh = w + 128 + 32 * h + li;
        for (int k = 0; k < 8; k++) {
            int v = ((qq >= 2 ? ql[k] >> 4 : ql[k] & 15) | ((qh[k] >> (2 * qq)) & 3) << 4) - 32;
            s += v * (int8_t)x[4 + e0 + k];
        }
        *si = (int8_t)w[192 + e0 / 16] * s;
        *sm = 0;
    }
    static __device__ float scale(const uint8_t *w, const uint8_t *x, int si, int sm) { return __fmul_rn(__fmul_rn(ld_f(x), ld_h(w + 208)), (float)si); }
};

static __device__ __forceinline__ int warp_isum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ---------------------------------------------------------------------------
// The matrix-vector products of decode: a warp per output row, the row cut
// into units of 8 to 32 weights that the lanes take in turn (wide loads,
// __dp4a on the packed integers), each lane keeping its float sum, one warp
// sum at the end. The integer sums and per-block scalings are the oracle's;
// the order of the float additions is the lanes'. Types without a unit here
// take the per-block paths above.

static __device__ __forceinline__ int ld_i32(const uint8_t *p) { return *(const int *)p; }                // 4-aligned
static __device__ __forceinline__ int ld_i32_2(const uint8_t *p) {                                       // 2-aligned
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[0] | (uint32_t)h[1] << 16);
}
static __device__ __forceinline__ float ld_h2(const uint8_t *p) { return __half2float(*(const __half *)p); } // 2-aligned

template <int T> struct mv;

// q4_K: unit (super-block b, part i of 8): 16 bytes of quants, the low
// nibbles elements 16h..16h+15 of sub-block 2p, the high ones of 2p + 1
// (p = i / 2, h = i % 2); q8_K activations
template <> struct mv<DT_Q4_K> {
    enum { U = 8 };
    static __device__ float unit(const uint8_t *w, const uint8_t *x, int i) {
        int p = i >> 1, h = i & 1;
        int4 q = *(const int4 *)(w + 16 + 32 * p + 16 * h);
        const uint8_t *x0 = x + 4 + 64 * p + 16 * h, *x1 = x0 + 32;
        int qv[4] = {q.x, q.y, q.z, q.w}, s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s0 = __dp4a(qv[k] & 0x0f0f0f0f, ld_i32(x0 + 4 * k), s0);
            s1 = __dp4a((qv[k] >> 4) & 0x0f0f0f0f, ld_i32(x1 + 4 * k), s1);
        }
        int sc0, m0, sc1, m1;
        scale_min_k4(2 * p, w + 4, &sc0, &m0);
        scale_min_k4(2 * p + 1, w + 4, &sc1, &m1);
        const int16_t *bs = (const int16_t *)(x + 260);
        int sumi = sc0 * s0 + sc1 * s1, summ = m0 * bs[4 * p + h] + m1 * bs[4 * p + 2 + h];
        float dy = *(const float *)x;
        return dy * (ld_h2(w) * (float)sumi - ld_h2(w + 2) * (float)summ);
    }
};

// q5_K: as q4_K, the fifth bits from qh (bit 2p and 2p + 1 of bytes 16h..)
template <> struct mv<DT_Q5_K> {
    enum { U = 8 };
    static __device__ float unit(const uint8_t *w, const uint8_t *x, int i) {
        int p = i >> 1, h = i & 1;
        int4 q = *(const int4 *)(w + 48 + 32 * p + 16 * h), qh = *(const int4 *)(w + 16 + 16 * h);
        const uint8_t *x0 = x + 4 + 64 * p + 16 * h, *x1 = x0 + 32;
        int qv[4] = {q.x, q.y, q.z, q.w}, hv[4] = {qh.x, qh.y, qh.z, qh.w}, s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int lo = (qv[k] & 0x0f0f0f0f) | (((hv[k] >> (2 * p)) & 0x01010101) << 4);
            int hi = ((qv[k] >> 4) & 0x0f0f0f0f) | (((hv[k] >> (2 * p + 1)) & 0x01010101) << 4);
            s0 = __dp4a(lo, ld_i32(x0 + 4 * k), s0);
            s1 = __dp4a(hi, ld_i32(x1 + 4 * k), s1);
        }
        int sc0, m0, sc1, m1;
        scale_min_k4(2 * p, w + 4, &sc0, &m0);
        scale_min_k4(2 * p + 1, w + 4, &sc1, &m1);
        const int16_t *bs = (const int16_t *)(x + 260);
        int sumi = sc0 * s0 + sc1 * s1, summ = m0 * bs[4 * p + h] + m1 * bs[4 * p + 2 + h];
        float dy = *(const float *)x;
        return dy * (ld_h2(w) * (float)sumi - ld_h2(w + 2) * (float)summ);
    }
};

// q6_K: unit (b, i of 8): half h = i / 4 of the super-block, its bytes
// l0..l0+7 (l0 = 8 (i % 4)) of ql (both 32-byte rows) and qh: 32 weights,
// four groups of 8 with their scales; blocks are 210 bytes (2-aligned)
template <> struct mv<DT_Q6_K> {
    enum { U = 8 };
    static __device__ float unit(const uint8_t *w, const uint8_t *x, int i) {
        int h = i >> 2, l0 = 8 * (i & 3);
        const uint8_t *ql = w + 64 * h + l0, *qh = w + 128 + 32 * h + l0;
        const int8_t *sc = (const int8_t *)(w + 192) + 8 * h + l0 / 16;
        const uint8_t *xs = x + 4 + 128 * h + l0;
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int a = ld_i32_2(ql + 4 * k), b = ld_i32_2(ql + 32 + 4 * k), c = ld_i32_2(qh + 4 * k);
            int q1 = __vsubss4((a & 0x0f0f0f0f) | ((c & 0x03030303) << 4), 0x20202020);
            int q2 = __vsubss4((b & 0x0f0f0f0f) | (((c >> 2) & 0x03030303) << 4), 0x20202020);
            int q3 = __vsubss4(((a >> 4) & 0x0f0f0f0f) | (((c >> 4) & 0x03030303) << 4), 0x20202020);
            int q4 = __vsubss4(((b >> 4) & 0x0f0f0f0f) | (((c >> 6) & 0x03030303) << 4), 0x20202020);
            sumi += sc[0] * __dp4a(q1, ld_i32(xs + 4 * k), 0) + sc[2] * __dp4a(q2, ld_i32(xs + 32 + 4 * k), 0) +
                    sc[4] * __dp4a(q3, ld_i32(xs + 64 + 4 * k), 0) + sc[6] * __dp4a(q4, ld_i32(xs + 96 + 4 * k), 0);
        }
        return *(const float *)x * ld_h2(w + 208) * (float)sumi;
    }
};

// q8_0: unit (block b, quarter i): 8 weights; q8_0 activations (34-byte
// blocks, 2-aligned)
template <> struct mv<DT_Q8_0> {
    enum { U = 4 };
    static __device__ float unit(const uint8_t *w, const uint8_t *x, int i) {
        const uint8_t *q = w + 2 + 8 * i, *y = x + 2 + 8 * i;
        int s = __dp4a(ld_i32_2(q), ld_i32_2(y), 0);
        s = __dp4a(ld_i32_2(q + 4), ld_i32_2(y + 4), s);
        return (float)s * (ld_h2(w) * ld_h2(x));
    }
};

// q4_0: unit (b, i of 4): quant bytes 4i..4i+3, elements 4i.. (low nibbles)
// and 16 + 4i.. (high)
template <> struct mv<DT_Q4_0> {
    enum { U = 4 };
    static __device__ float unit(const uint8_t *w, const uint8_t *x, int i) {
        int q = ld_i32_2(w + 2 + 4 * i);
        int lo = __vsubss4(q & 0x0f0f0f0f, 0x08080808), hi = __vsubss4((q >> 4) & 0x0f0f0f0f, 0x08080808);
        int s = __dp4a(lo, ld_i32_2(x + 2 + 4 * i), 0);
        s = __dp4a(hi, ld_i32_2(x + 18 + 4 * i), s);
        return (float)s * (ld_h2(w) * ld_h2(x));
    }
};

// q5_0: as q4_0 with the fifth bits (qh bits 4i.. and 4i + 16..)
template <> struct mv<DT_Q5_0> {
    enum { U = 4 };
    static __device__ float unit(const uint8_t *w, const uint8_t *x, int i) {
        uint32_t qh = (uint32_t)ld_i32_2(w + 2);
        int q = ld_i32_2(w + 6 + 4 * i);
        uint32_t bl = qh >> (4 * i), bh = qh >> (4 * i + 16);
        int hl = (int)(((bl & 1) | (bl & 2) << 7 | (bl & 4) << 14 | (bl & 8) << 21) << 4);
        int hh = (int)(((bh & 1) | (bh & 2) << 7 | (bh & 4) << 14 | (bh & 8) << 21) << 4);
        int lo = __vsubss4((q & 0x0f0f0f0f) | hl, 0x10101010), hi = __vsubss4(((q >> 4) & 0x0f0f0f0f) | hh, 0x10101010);
        int s = __dp4a(lo, ld_i32_2(x + 2 + 4 * i), 0);
        s = __dp4a(hi, ld_i32_2(x + 18 + 4 * i), s);
        return (float)s * (ld_h2(w) * ld_h2(x));
    }
};

// the block's bytes and its units, for the row loop
template <int T> struct mvb;
template <> struct mvb<DT_Q4_K> { enum { B = Q4_K_B, XB = Q8_K_B, N = QK_K }; };
template <> struct mvb<DT_Q5_K> { enum { B = Q5_K_B, XB = Q8_K_B, N = QK_K }; };
template <> struct mvb<DT_Q6_K> { enum { B = Q6_K_B, XB = Q8_K_B, N = QK_K }; };
template <> struct mvb<DT_Q8_0> { enum { B = Q8_0_B, XB = Q8_0_B, N = QK }; };
template <> struct mvb<DT_Q4_0> { enum { B = Q4_0_B, XB = Q8_0_B, N = QK }; };
template <> struct mvb<DT_Q5_0> { enum { B = Q5_0_B, XB = Q8_0_B, N = QK }; };

// lane's part of one row against one token's activations
template <int T>
static __device__ __forceinline__ float mv_row(const uint8_t *wr, const uint8_t *xt, int cols, int lane) {
    const int nu = cols / mvb<T>::N * mv<T>::U;
    float acc = 0.0f;
#pragma unroll 2
    for (int u = lane; u < nu; u += 32) {
        int b = u / mv<T>::U, i = u % mv<T>::U;
        acc += mv<T>::unit(wr + (size_t)b * mvb<T>::B, xt + (size_t)b * mvb<T>::XB, i);
    }
    return acc;
}

// float weights against f32 activations, 8 (4 for f32) elements a unit
static __device__ __forceinline__ float mv_row_f32(const uint8_t *wr, const float *xt, int cols, int lane) {
    float acc = 0.0f;
    for (int u = lane; u < cols / 4; u += 32) {
        float4 a = ((const float4 *)wr)[u], b = ((const float4 *)xt)[u];
        acc = fmaf(a.x, b.x, acc), acc = fmaf(a.y, b.y, acc), acc = fmaf(a.z, b.z, acc), acc = fmaf(a.w, b.w, acc);
    }
    return acc;
}
template <int T>
static __device__ __forceinline__ float mv_row_f(const uint8_t *wr, const float *xt, int cols, int lane) {
    float acc = 0.0f;
#pragma unroll 2
    for (int u = lane; u < cols / 8; u += 32) {
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
        acc = fmaf(f[0], b0.x, acc), acc = fmaf(f[1], b0.y, acc), acc = fmaf(f[2], b0.z, acc), acc = fmaf(f[3], b0.w, acc);
        acc = fmaf(f[4], b1.x, acc), acc = fmaf(f[5], b1.y, acc), acc = fmaf(f[6], b1.z, acc), acc = fmaf(f[7], b1.w, acc);
    }
    return acc;
}

// float rows of any length: an element a lane
template <int T>
static __device__ float mv_row_e(const uint8_t *wr, const float *xt, int cols, int lane) {
    float acc = 0.0f;
    for (int i = lane; i < cols; i += 32) acc = fmaf(elt<T>::get(wr + (size_t)i * elt<T>::B), xt[i], acc);
    return acc;
}

// The lane's part of row wr (of type `type`) against token activations xt,
// to be added across the warp; the per-block paths for the other types
// (their k-quant path sums across the warp itself: lane 0 carries it).
static __device__ float row_part(int type, const uint8_t *wr, const uint8_t *xt, int cols, int lane) {
    switch (type) {
    case DT_Q4_K: return mv_row<DT_Q4_K>(wr, xt, cols, lane);
    case DT_Q5_K: return mv_row<DT_Q5_K>(wr, xt, cols, lane);
    case DT_Q6_K: return mv_row<DT_Q6_K>(wr, xt, cols, lane);
    case DT_Q8_0: return mv_row<DT_Q8_0>(wr, xt, cols, lane);
    case DT_Q4_0: return mv_row<DT_Q4_0>(wr, xt, cols, lane);
    case DT_Q5_0: return mv_row<DT_Q5_0>(wr, xt, cols, lane);
    case DT_F16: return cols % 8 ? mv_row_e<DT_F16>(wr, (const float *)xt, cols, lane) : mv_row_f<DT_F16>(wr, (const float *)xt, cols, lane);
    case DT_BF16: return cols % 8 ? mv_row_e<DT_BF16>(wr, (const float *)xt, cols, lane) : mv_row_f<DT_BF16>(wr, (const float *)xt, cols, lane);
    case DT_F32: return cols % 8 ? mv_row_e<DT_F32>(wr, (const float *)xt, cols, lane) : mv_row_f32(wr, (const float *)xt, cols, lane);
    }
    float acc = 0.0f;
#define BLK(t)                                                                                                   \
    case t:                                                                                                      \
        for (int b = lane; b < cols / blk<t>::N; b += 32) acc += blk<t>::dot(wr + (size_t)b * blk<t>::B, xt + (size_t)b * blk<t>::XB); \
        return acc;
#define KQ(t)                                                                                                    \
    case t:                                                                                                      \
        for (int b = 0; b < cols / QK_K; b++) {                                                                  \
            int si, sm;                                                                                          \
            kq<t>::part(wr + (size_t)b * kq<t>::B, xt + (size_t)b * Q8_K_B, lane, &si, &sm);                     \
            si = warp_isum(si), sm = warp_isum(sm);                                                              \
            acc = __fadd_rn(acc, kq<t>::scale(wr + (size_t)b * kq<t>::B, xt + (size_t)b * Q8_K_B, si, sm));      \
        }                                                                                                        \
        return lane == 0 ? acc : 0.0f;
    switch (type) {
        BLK(DT_Q4_1) BLK(DT_Q5_1) BLK(DT_MXFP4) KQ(DT_Q2_K) KQ(DT_Q3_K)
    }
#undef BLK
#undef KQ
    return 0.0f;
}

// Up to 4 products of the same activations in one launch: a warp per row,
// MV_WARPS rows a block, the blocks of matrix i from m[i].blk0 on. glu: the
// warps of matrix 0 (gate) also take the same row of matrix 1 (up) and write
// act(gate) * up (k_act's expression) to matrix 0's output.
enum { MV_WARPS = 4, MV_MAX = 4 };
struct mv_mat { const uint8_t *w; float *y; size_t rs; int rows, type, blk0; };
struct mv_desc { mv_mat m[MV_MAX]; int n, cols, T, glu, act, ggml; size_t xrow; };

static __device__ float act1(float v, int act, int ggml);

static __global__ void __launch_bounds__(32 * MV_WARPS) k_mv(const mv_desc d, const uint8_t *xq) {
    int mi = 0;
    while (mi + 1 < d.n && (int)blockIdx.x >= d.m[mi + 1].blk0) mi++;
    const mv_mat &m = d.m[mi];
    int r = ((int)blockIdx.x - m.blk0) * MV_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= m.rows) return;
    const uint8_t *wr = m.w + m.rs * r;
    for (int t = 0; t < d.T; t++) {
        const uint8_t *xt = xq + d.xrow * t;
        float acc = warp_sum(row_part(m.type, wr, xt, d.cols, lane));
        if (d.glu) {
            const mv_mat &u = d.m[1];
            float up = warp_sum(row_part(u.type, u.w + u.rs * r, xt, d.cols, lane));
            acc = act1(acc, d.act, d.ggml) * up;
        }
        if (lane == 0) m.y[(size_t)t * m.rows + r] = acc;
    }
}


// ---------------------------------------------------------------------------
// activation quantizers: the CPU's bytes (act_quant_q8_0, q8_K_from_float)

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

// A warp quantizes one q8_0 block: lane l holds element l (v).
static __device__ void warp_q8_0(float v, int lane, uint8_t *yb) {
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    if (lane == 0) {
        uint32_t h = f32_to_f16(d);
        yb[0] = (uint8_t)(h & 255);
        yb[1] = (uint8_t)(h >> 8);
    }
    yb[2 + lane] = (uint8_t)(int8_t)rintf(__fmul_rn(v, id));
}

// A warp quantizes one q8_K super-block: lane l holds elements 8l..8l+7 (v).
// The first of the largest magnitudes sets the scale, as q8_K_from_float.
static __device__ void warp_q8_K(const float *v, int lane, uint8_t *yb) {
    float am = 0.0f, mx = 0.0f;
    int at = 0;
    for (int k = 0; k < 8; k++)
        if (fabsf(v[k]) > am) am = fabsf(v[k]), mx = v[k], at = 8 * lane + k;
    for (int o = 16; o > 0; o >>= 1) {
        float a2 = __shfl_xor_sync(0xffffffffu, am, o), m2 = __shfl_xor_sync(0xffffffffu, mx, o);
        int t2 = __shfl_xor_sync(0xffffffffu, at, o);
        if (a2 > am || (a2 == am && t2 < at)) am = a2, at = t2, mx = m2;
    }
    if (am == 0.0f) {
        for (int j = lane; j < Q8_K_B; j += 32) yb[j] = 0;
        return;
    }
    float iscale = -127.f / mx;
    int8_t *q = (int8_t *)yb + 4;
    int s = 0;
    for (int k = 0; k < 8; k++) {
        int r = (int)rintf(__fmul_rn(iscale, v[k]));
        r = r < -128 ? -128 : r > 127 ? 127 : r;
        q[8 * lane + k] = (int8_t)r;
        s += r;
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1); // lanes 2g and 2g+1 hold group g of 16
    if (lane % 2 == 0) yb[260 + lane] = (uint8_t)(s & 255), yb[261 + lane] = (uint8_t)((uint16_t)(int16_t)s >> 8);
    if (lane == 0) {
        uint32_t db = __float_as_uint(1.0f / iscale);
        for (int k = 0; k < 4; k++) yb[k] = (uint8_t)(db >> (8 * k));
    }
}

static __global__ void k_quant_q8_0(const float *x, int n, int nblk, uint8_t *y) {
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32; // a warp per block of 32
    if (i >= nblk) return;
    int t = i / (n / QK), b = i % (n / QK);
    warp_q8_0(x[(size_t)t * n + (size_t)b * QK + lane], lane, y + (size_t)i * Q8_0_B);
}

static __global__ void k_quant_q8_K(const float *x, int n, int nblk, uint8_t *y) {
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32; // a warp per super-block of 256
    if (i >= nblk) return;
    int t = i / (n / QK_K), b = i % (n / QK_K);
    const float *xb = x + (size_t)t * n + (size_t)b * QK_K;
    float v[8];
    for (int k = 0; k < 8; k++) v[k] = xb[8 * lane + k];
    warp_q8_K(v, lane, y + (size_t)i * Q8_K_B);
}

static int is_k(int t) { return t == DT_Q2_K || t == DT_Q3_K || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }
static int is_q32(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q4_1 || t == DT_Q5_0 || t == DT_Q5_1 || t == DT_MXFP4; }
static int is_float(int t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

extern "C" HIDDEN size_t cuda_act_row_size(int wtype, int n) {
    if (is_float(wtype)) return sizeof(float) * (size_t)n;
    if (is_q32(wtype) && n % QK == 0) return (size_t)(n / QK) * Q8_0_B;
    if (is_k(wtype) && n % QK_K == 0) return (size_t)(n / QK_K) * Q8_K_B;
    return 0;
}

extern "C" HIDDEN int cuda_quantize(cuda_dev *d, int wtype, const float *x, int T, int n, void *xq) {
    if (!cuda_act_row_size(wtype, n) || T <= 0) return -1;
    if (is_float(wtype)) {
        cudaError_t e = cudaMemcpyAsync(xq, x, sizeof(float) * (size_t)T * n, cudaMemcpyDeviceToDevice, d->stream);
        return e == cudaSuccess ? 0 : set_status("copy", e);
    }
    int nblk = T * (n / (is_k(wtype) ? QK_K : QK));
    if (is_k(wtype)) k_quant_q8_K<<<(nblk + 3) / 4, 128, 0, d->stream>>>(x, n, nblk, (uint8_t *)xq);
    else k_quant_q8_0<<<(nblk + 3) / 4, 128, 0, d->stream>>>(x, n, nblk, (uint8_t *)xq);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : set_status("quantize", e);
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

extern "C" HIDDEN int cuda_matmul_multi(cuda_dev *d, int n, const cuda_mat *m, int cols, const void *xq, int T, int glu_act, int ggml) {
    if (n < 1 || n > MV_MAX || T <= 0 || (glu_act >= 0 && (n != 2 || m[0].rows != m[1].rows))) return -1;
    size_t xr = cuda_act_row_size(m[0].type, cols);
    mv_desc k;
    memset(&k, 0, sizeof k);
    int blocks = 0;
    for (int i = 0; i < n; i++) {
        if (!xr || cuda_act_row_size(m[i].type, cols) != xr || m[i].rows <= 0) return -1;
        k.m[i] = (mv_mat){(const uint8_t *)m[i].w, m[i].y, row_bytes(m[i].type, cols), m[i].rows, m[i].type, blocks};
        if (glu_act < 0 || i == 0) blocks += (m[i].rows + MV_WARPS - 1) / MV_WARPS;
    }
    if (glu_act >= 0) k.m[1].blk0 = blocks; // (the gate's warps take the up rows)
    k.n = n, k.cols = cols, k.T = T, k.glu = glu_act >= 0, k.act = glu_act, k.ggml = ggml, k.xrow = xr;
    k_mv<<<blocks, 32 * MV_WARPS, 0, d->stream>>>(k, (const uint8_t *)xq);
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
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * n) y[i] += b[i % n];
}
extern "C" HIDDEN int cuda_bias(cuda_dev *d, float *y, const float *b, int T, int n) {
    k_bias<<<grid_for((size_t)T * n, 256), 256, 0, d->stream>>>(y, b, T, n);
    return launched("bias");
}

// W stored [n_in, n_out] (GPT-2's Conv1D), float types: y[t][j] = sum_i x[t][i] W[i][j]
template <int T>
static __global__ void k_matmul_trans(const uint8_t *w, int n_in, int n_out, const float *x, int ntok, float *y) {
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
    case DT_F32: k_matmul_trans<DT_F32><<<g, 128, 0, d->stream>>>(wb, n_in, n_out, x, T, y); break;
    case DT_F16: k_matmul_trans<DT_F16><<<g, 128, 0, d->stream>>>(wb, n_in, n_out, x, T, y); break;
    case DT_BF16: k_matmul_trans<DT_BF16><<<g, 128, 0, d->stream>>>(wb, n_in, n_out, x, T, y); break;
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

// kind: 0 rms, 1 rms with (1 + w), 2 layer norm (backend.h's enum norm_op)
static __global__ void k_norm(float *out, const float *x, const float *w, const float *b, int n, float eps, int kind) {
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
    k_norm<<<rows, 256, 0, d->stream>>>(out, x, w, b, n, eps, kind);
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
    k_rope<<<grid_for(n, 256), 256, 0, d->stream>>>(x, rows, heads, hd, pos, inv_freq, n_pairs, off, stride, mscale);
    return launched("rope");
}

static __device__ float f16_round(float v) { return __half2float(__ushort_as_half((unsigned short)f32_to_f16(v))); }

// One block per (row, query head): scores over the row's window of its
// cache, softmax (with a sink, softcap), then the values. scores: stride
// floats per (row, head).
static __global__ void k_attention(const float *q, float *out, int H, int KV, int hd, int window, const int *pos,
                                   const float *const *kc, const float *const *vc, float scale, float softcap, const float *sinks,
                                   int ggml, float *scores, int stride) {
    __shared__ float sh[32];
    int t = blockIdx.x, h = blockIdx.y, kh = h / (H / KV), nq = H * hd, nkv = KV * hd;
    int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    const float *qh = q + (size_t)t * nq + (size_t)h * hd;
    const float *k = kc[t] + (size_t)kh * hd, *v = vc[t] + (size_t)kh * hd;
    float *s = scores + ((size_t)t * H + h) * stride;
    const int lane = threadIdx.x % 32, nw = blockDim.x / 32;
    for (int j = threadIdx.x / 32; j < n; j += nw) { // a warp per position, the lanes along the head
        const float *kr = k + (size_t)(lo + j) * nkv;
        float acc = 0.0f;
        for (int i = lane; i < hd; i += 32) acc = fmaf(qh[i], kr[i], acc);
        acc = warp_sum(acc) * scale;
        if (softcap) acc = softcap * tanhf(acc / softcap);
        if (lane == 0) s[j] = acc;
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
    float *o = out + (size_t)t * nq + (size_t)h * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) acc = fmaf(s[j], v[(size_t)(lo + j) * nkv + i], acc);
        o[i] = acc;
    }
}
extern "C" HIDDEN int cuda_attention(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                     int ggml, float *scores, int stride) {
    if (T <= 0) return 0;
    k_attention<<<dim3(T, H), 256, 0, d->stream>>>(q, out, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride);
    return launched("attention");
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
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = act1(g[i], act, ggml);
    g[i] = u ? a * u[i] : a;
}
extern "C" HIDDEN int cuda_act(cuda_dev *d, float *g, const float *u, size_t n, int act, int ggml) {
    if (!n) return 0;
    k_act<<<grid_for(n, 256), 256, 0, d->stream>>>(g, u, n, act, ggml);
    return launched("activation");
}

static __global__ void k_axpy(float *x, const float *o, float s, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fmaf_rn(o[i], s, x[i]); // (k_chain's expression)
}
extern "C" HIDDEN int cuda_axpy(cuda_dev *d, float *x, const float *o, float s, size_t n) {
    if (!n) return 0;
    k_axpy<<<grid_for(n, 256), 256, 0, d->stream>>>(x, o, s, n);
    return launched("residual");
}

static __global__ void k_round_f16(float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = f16_round(x[i]);
}
extern "C" HIDDEN int cuda_round_f16(cuda_dev *d, float *x, size_t n) {
    if (!n) return 0;
    k_round_f16<<<grid_for(n, 256), 256, 0, d->stream>>>(x, n);
    return launched("round_f16");
}

static __global__ void k_softmax(float *x, int n) {
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
    k_softmax<<<1, 256, 0, d->stream>>>(x, n);
    return launched("softmax");
}

static __global__ void k_scale(float *x, size_t n, float s) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = s == 0.0f ? 0.0f : x[i] * s;
}
extern "C" HIDDEN int cuda_scale(cuda_dev *d, float *x, size_t n, float s) {
    if (!n) return 0;
    k_scale<<<grid_for(n, 256), 256, 0, d->stream>>>(x, n, s);
    return launched("scale");
}

static __global__ void k_mul(float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * n) return;
    size_t r = i / n, c = i % n;
    x[r * xs + c] *= y[r * ys + c];
}
extern "C" HIDDEN int cuda_mul(cuda_dev *d, float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    if (rows <= 0 || n <= 0) return 0;
    k_mul<<<grid_for((size_t)rows * n, 256), 256, 0, d->stream>>>(x, xs, y, ys, rows, n);
    return launched("mul");
}

static __global__ void k_softcap(float *x, size_t n, float cap) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}
extern "C" HIDDEN int cuda_softcap(cuda_dev *d, float *x, size_t n, float cap) {
    if (!n) return 0;
    k_softcap<<<grid_for(n, 256), 256, 0, d->stream>>>(x, n, cap);
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

static __global__ void k_kv_store(float *const *cache, const int *pos, const float *src, int T, int n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * n) return;
    int t = (int)(i / n), c = (int)(i % n);
    cache[t][(size_t)pos[t] * n + c] = src[i];
}
extern "C" HIDDEN int cuda_kv_store(cuda_dev *d, float *const *cache, const int *pos, const float *src, int T, int n) {
    if (T <= 0 || n <= 0) return 0;
    k_kv_store<<<grid_for((size_t)T * n, 256), 256, 0, d->stream>>>(cache, pos, src, T, n);
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

extern "C" HIDDEN int cuda_graph_launch(cuda_dev *d, void *exec) {
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, d->stream);
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

// One block of 256 per row: k_norm's sum (the same threads and order, so the
// same r), then a warp per 32-block (q8_0) or per 256-block (q8_K) writes the
// normalized floats and quantizes them as k_quant_q8_0 / k_quant_q8_K do.
static __global__ void k_norm_quant(float *out, const float *x, const float *w, int n, float eps, int kind, int kq, uint8_t *xq) {
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *orow = out + (size_t)blockIdx.x * n;
    float s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
    float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + eps);
    int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    if (!kq) {
        uint8_t *yr = xq + (size_t)blockIdx.x * (n / QK) * Q8_0_B;
        for (int b = wp; b < n / QK; b += nw) {
            float v = normed(xr, w, r, QK * b + lane, kind);
            orow[QK * b + lane] = v;
            warp_q8_0(v, lane, yr + (size_t)b * Q8_0_B);
        }
        return;
    }
    uint8_t *yr = xq + (size_t)blockIdx.x * (n / QK_K) * Q8_K_B;
    for (int b = wp; b < n / QK_K; b += nw) {
        float v[8];
        for (int k = 0; k < 8; k++) {
            int i = QK_K * b + 8 * lane + k;
            orow[i] = v[k] = normed(xr, w, r, i, kind);
        }
        warp_q8_K(v, lane, yr + (size_t)b * Q8_K_B);
    }
}

extern "C" HIDDEN int cuda_norm_quant(cuda_dev *d, float *out, const float *x, const float *w, int rows, int n, float eps, int kind, int wtype,
                                      void *xq) {
    if (rows <= 0 || kind > 1 || is_float(wtype) || !cuda_act_row_size(wtype, n)) return -1;
    k_norm_quant<<<rows, 256, 0, d->stream>>>(out, x, w, n, eps, kind, is_k(wtype), (uint8_t *)xq);
    return launched("norm + quantize");
}

// ---------------------------------------------------------------------------
// fused steps of a layer (the CUDA backend chains the forward pass's
// operations into these; each gives the floats and bytes of the kernels above
// run one after the other: the same threads, sums and expressions)

// One block of 256 per row: [o = norm_a(o)] [x += o * s] [xn = norm_b(x)
// [quantized into xq]], the stages present as flagged.
static __global__ void k_chain(cuda_chain c) {
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
    int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    if (c.quant < 0) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) xn[i] = normed(x, c.wb, r, i, c.kind_b);
    } else if (c.quant == 0) {
        uint8_t *yr = c.xq + (size_t)blockIdx.x * (n / QK) * Q8_0_B;
        for (int b = wp; b < n / QK; b += nw) {
            float v = normed(x, c.wb, r, QK * b + lane, c.kind_b);
            xn[QK * b + lane] = v;
            warp_q8_0(v, lane, yr + (size_t)b * Q8_0_B);
        }
    } else {
        uint8_t *yr = c.xq + (size_t)blockIdx.x * (n / QK_K) * Q8_K_B;
        for (int b = wp; b < n / QK_K; b += nw) {
            float v[8];
            for (int k = 0; k < 8; k++) {
                int i = QK_K * b + 8 * lane + k;
                xn[i] = v[k] = normed(x, c.wb, r, i, c.kind_b);
            }
            warp_q8_K(v, lane, yr + (size_t)b * Q8_K_B);
        }
    }
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
    k_chain<<<rows, 256, 0, d->stream>>>(k);
    return launched("norm chain");
}

// One block of 256 per (row, head) of q, k and v: the head's norm, its RoPE,
// the f16 rounding, written back and (k, v) into the row's cache.
static __global__ void k_qkv(cuda_qkv c, const int *pos) {
    __shared__ float sh[32], buf[512];
    const int t = blockIdx.x, j = blockIdx.y, hd = c.hd;
    const int kind = j < c.H ? 0 : j < c.H + c.KV ? 1 : 2, h = kind == 0 ? j : kind == 1 ? j - c.H : j - c.H - c.KV;
    float *base = kind == 0 ? c.q : kind == 1 ? c.k : c.v;
    int heads = kind == 0 ? c.H : c.KV;
    float *p = base + ((size_t)t * heads + h) * hd;
    const float *w = kind == 0 ? c.q_norm : kind == 1 ? c.k_norm : NULL;
    if (kind == 0 ? c.q_norm != NULL : kind == 1 ? c.k_norm != NULL : c.v_norm) { // k_norm over the head
        float s = 0;
        for (int i = threadIdx.x; i < hd; i += blockDim.x) s += p[i] * p[i];
        float r = 1.0f / sqrtf(block_sum(s, sh) / (float)hd + c.eps);
        for (int i = threadIdx.x; i < hd; i += blockDim.x) buf[i] = normed(p, w, r, i, kind == 2 ? 0 : c.kind);
    } else {
        for (int i = threadIdx.x; i < hd; i += blockDim.x) buf[i] = p[i];
    }
    __syncthreads();
    if (kind < 2 && c.inv_freq) { // k_rope
        for (int q = threadIdx.x; q < c.n_pairs; q += blockDim.x) {
            float ang = (float)pos[t] * c.inv_freq[q];
            float cs = cosf(ang) * c.mscale, sn = sinf(ang) * c.mscale;
            int a = q * c.pair_stride;
            rot(buf + a, buf + a + c.pair_offset, cs, sn);
        }
        __syncthreads();
    }
    float *cache = kind == 0 || !c.k_cache ? NULL : (kind == 1 ? c.k_cache : c.v_cache)[t] + ((size_t)pos[t] * c.KV + h) * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float v = c.round ? f16_round(buf[i]) : buf[i];
        p[i] = v;
        if (cache) cache[i] = v;
    }
}

extern "C" HIDDEN int cuda_qkv_prep(cuda_dev *d, const cuda_qkv *c, int T, const int *pos) {
    if (T <= 0) return 0;
    if (c->hd > 512 || c->kind > 1 || (c->inv_freq && (c->n_pairs < 1 || (c->n_pairs - 1) * c->pair_stride + c->pair_offset >= c->hd))) return -1;
    int heads = c->H + (c->k ? 2 * c->KV : 0);
    k_qkv<<<dim3(T, heads), 256, 0, d->stream>>>(*c, pos);
    return launched("q, k, v");
}
