// RoPE (k_rope), the per-head preparation of q, k and v (k_qkv: the head's
// norm, RoPE, the f16 rounding, the cache rows), and the KV cache's store
// (k_kv_store).
#include "compute/cuda/common.cuh"

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
