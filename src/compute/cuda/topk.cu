// Top-k (by |s| or by s) and argmax, a block a selection.
#include "compute/cuda/common.cuh"

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
