// A prompt's attention on the tensor cores (flash attention): the rows of one
// sequence against its f16 cache, no scores in memory. A block takes 64 rows
// of one query head (a warp 16 of them) and walks the keys the rows see, 64 at
// a time: the K and V tiles into shared memory (V read back transposed by
// ldmatrix), S = Q K^T with mma.sync (m16n8k16, f16 in, f32 sums), each row's
// running max and sum (online softmax: softcap, window, causal mask), then
// O += P V with P rounded to f16 -- the unnormalized probabilities, as
// ggml's flash attention rounds them. At the end the sink (if any) joins the
// sum and O is divided by it. q is rounded to f16 on the way in: under ggml's
// numerics it is f16 valued already, so the products are exact and only the
// order of the sums and P's rounding differ from the per-row kernel.
#include "compute/cuda/common.cuh"

#include <limits.h>

enum { FA_BR = 64, FA_BC = 64, FA_WARPS = 4, FA_PAD = 8 };

static __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// four 8x8 b16 matrices of shared memory, transposed: lane i gives the row
// address of matrix i / 8, row i % 8
static __device__ __forceinline__ void ldmatrix_x4_t(uint32_t r[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ uint32_t h2_bits(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}

static __host__ __device__ constexpr size_t fa_smem(int hd) { return sizeof(__half) * (size_t)(FA_BR + 2 * FA_BC) * (hd + FA_PAD); }

template <int HD>
static __global__ void __launch_bounds__(FA_WARPS * 32) k_flash(const float *q, float *out, int T, int H, int KV, int window, const int *pos,
                                                                const __half *kc, const __half *vc, float scale, float softcap,
                                                                const float *sinks) {
    PDL_ENTRY();
    extern __shared__ __align__(16) unsigned char fa_mem[];
    enum { S = HD + FA_PAD, NT = HD / 8 }; // (halves a shared row: the padding spreads a column's rows over the banks)
    __half *sq = (__half *)fa_mem, *sk = sq + FA_BR * S, *sv = sk + FA_BC * S;
    __shared__ int s_lo, s_hi;
    const int r0 = blockIdx.x * FA_BR, h = blockIdx.y, kh = h / (H / KV), nq = H * HD, nkv = KV * HD;
    const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, g = lane >> 2, tq = lane & 3;
    if (tid == 0) s_lo = INT_MAX, s_hi = -1;
    __syncthreads();
    if (tid < FA_BR && r0 + tid < T) { // the keys the block's rows see: [s_lo, s_hi]
        const int p = pos[r0 + tid];
        atomicMin(&s_lo, window && p - window + 1 > 0 ? p - window + 1 : 0);
        atomicMax(&s_hi, p);
    }
    for (int i = tid; i < FA_BR * HD / 4; i += blockDim.x) { // the rows' q, in f16
        const int r = i / (HD / 4), c = i % (HD / 4) * 4;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r0 + r < T) v = *(const float4 *)(q + (size_t)(r0 + r) * nq + (size_t)h * HD + c);
        __half2 *d = (__half2 *)(sq + r * S + c);
        d[0] = __floats2half2_rn(v.x, v.y), d[1] = __floats2half2_rn(v.z, v.w);
    }
    __syncthreads();
    const int klo = s_lo, khi = s_hi;
    // this thread's two rows (the warp's g and g + 8), their last key and first
    int hi[2], lo[2], whi = -1, wlo = INT_MAX;
    for (int i = 0; i < 2; i++) {
        const int r = r0 + w * 16 + g + 8 * i;
        hi[i] = r < T ? pos[r] : -1;
        lo[i] = r < T && window && hi[i] - window + 1 > 0 ? hi[i] - window + 1 : 0;
        whi = max(whi, hi[i]);
        if (r < T) wlo = min(wlo, lo[i]);
    }
    whi = __reduce_max_sync(0xffffffffu, whi), wlo = __reduce_min_sync(0xffffffffu, wlo);
    float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int k0 = klo; k0 <= khi; k0 += FA_BC) {
        __syncthreads(); // (the last tile read)
        for (int i = tid; i < FA_BC * HD / 8; i += blockDim.x) { // the K and V tiles: 16 bytes a thread, zeros past the keys
            const int j = i / (HD / 8), c = i % (HD / 8) * 8;
            int4 a = make_int4(0, 0, 0, 0), b = a;
            if (k0 + j <= khi) {
                const size_t off = (size_t)(k0 + j) * nkv + (size_t)kh * HD + c;
                a = *(const int4 *)(kc + off), b = *(const int4 *)(vc + off);
            }
            *(int4 *)(sk + j * S + c) = a, *(int4 *)(sv + j * S + c) = b;
        }
        __syncthreads();
        if (k0 > whi || k0 + FA_BC <= wlo) continue; // (none of the warp's rows sees these keys)
        float s[FA_BC / 8][4];
#pragma unroll
        for (int n = 0; n < FA_BC / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) { // S = Q K^T
            const __half *qa = sq + (w * 16 + g) * S + kk * 16 + 2 * tq;
            const uint32_t a[4] = {*(const uint32_t *)qa, *(const uint32_t *)(qa + 8 * S), *(const uint32_t *)(qa + 8),
                                   *(const uint32_t *)(qa + 8 * S + 8)};
#pragma unroll
            for (int n = 0; n < FA_BC / 8; n++) {
                const __half *kb = sk + (n * 8 + g) * S + kk * 16 + 2 * tq;
                mma_16816(s[n], a, *(const uint32_t *)kb, *(const uint32_t *)(kb + 8));
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < FA_BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = e >> 1, j = k0 + n * 8 + 2 * tq + (e & 1);
                float v = s[n][e] * scale;
                if (softcap) v = softcap * tanhf(v / softcap);
                if (j > hi[i] || j < lo[i]) v = -INFINITY;
                s[n][e] = v, mx[i] = fmaxf(mx[i], v);
            }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float mn = fmaxf(m[i], mx[i]), f = mn == -INFINITY ? 1.0f : expf(m[i] - mn);
            m[i] = mn, l[i] *= f;
#pragma unroll
            for (int n = 0; n < NT; n++) o[n][2 * i] *= f, o[n][2 * i + 1] *= f;
        }
#pragma unroll
        for (int n = 0; n < FA_BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = e >> 1;
                const float p = m[i] == -INFINITY ? 0.0f : expf(s[n][e] - m[i]);
                s[n][e] = p, l[i] += p;
            }
#pragma unroll
        for (int kk = 0; kk < FA_BC / 16; kk++) { // O += P V
            const uint32_t a[4] = {h2_bits(s[2 * kk][0], s[2 * kk][1]), h2_bits(s[2 * kk][2], s[2 * kk][3]),
                                   h2_bits(s[2 * kk + 1][0], s[2 * kk + 1][1]), h2_bits(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            const int mat = lane >> 3, row = kk * 16 + (mat & 1) * 8 + (lane & 7);
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                uint32_t b[4];
                ldmatrix_x4_t(b, sv + row * S + (n + (mat >> 1)) * 8);
                mma_16816(o[n], a, b[0], b[1]);
                mma_16816(o[n + 1], a, b[2], b[3]);
            }
        }
    }
    const float sink = sinks ? sinks[h] : -INFINITY;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        float f = 1.0f;
        if (sinks) {
            const float mn = fmaxf(m[i], sink);
            f = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
            l[i] = l[i] * f + expf(sink - mn);
        }
        const float inv = l[i] > 0.0f ? f / l[i] : 0.0f;
        const int r = r0 + w * 16 + g + 8 * i;
        if (r >= T) continue;
        float *orow = out + (size_t)r * nq + (size_t)h * HD + 2 * tq;
#pragma unroll
        for (int n = 0; n < NT; n++) *(float2 *)(orow + n * 8) = make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}

extern "C" HIDDEN int cuda_attention_flash_ok(int hd, int ggml, int kv16) { return kv16 && ggml && (hd == 64 || hd == 128 || hd == 256); }

template <int HD>
static int flash_run(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int window, const int *pos, const void *k, const void *v,
                     float scale, float softcap, const float *sinks) {
    const size_t smem = fa_smem(HD);
    if (smem > 48 * 1024) { // (asked for on each launch: the setting is the current device's)
        cudaError_t e = cudaFuncSetAttribute(k_flash<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return set_status("flash attention's shared memory", e);
    }
    dim3 g((T + FA_BR - 1) / FA_BR, H);
    launch(k_flash<HD>, g, FA_WARPS * 32, smem, d->stream, q, out, T, H, KV, window, pos, (const __half *)k, (const __half *)v, scale,
           softcap, sinks);
    return launched("flash attention");
}

extern "C" HIDDEN int cuda_attention_flash(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                           const void *k, const void *v, float scale, float softcap, const float *sinks, int ggml, int wtype,
                                           void *xq, int kv16) {
    if (T <= 0) return 0;
    if (H % KV || !cuda_attention_flash_ok(hd, ggml, kv16) || (xq && !cuda_act_row_size(wtype, H * hd))) return -1;
    int rc = hd == 64    ? flash_run<64>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks)
             : hd == 128 ? flash_run<128>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks)
                         : flash_run<256>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks);
    if (rc) return rc;
    return xq ? cuda_quantize(d, wtype, out, T, H * hd, (uint8_t *)xq) : 0;
}
