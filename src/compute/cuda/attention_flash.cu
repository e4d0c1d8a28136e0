// A prompt's attention on the tensor cores (flash attention): the rows of one
// sequence against its f16 cache, no scores in memory. A block takes 64 (row,
// query head) pairs -- 64 / G rows of G query heads that share one KV head, a
// warp 16 pairs, row-major (the K and V tiles serve 64 pairs either way; G
// heads fill a block where a run has fewer than 64 rows) -- and walks the keys
// its rows see, 64 at a time: the K and V tiles into shared memory (V read
// back transposed by ldmatrix), S = Q K^T with mma.sync (m16n8k16, f16 in, f32 sums), each row's
// running max and sum (online softmax: softcap, window, causal mask), then
// O += P V with P rounded to f16 -- the unnormalized probabilities, as
// ggml's flash attention rounds them. At the end the sink (if any) joins the
// sum and O is divided by it. q is rounded to f16 on the way in: under ggml's
// numerics it is f16 valued already, so the products are exact and only the
// order of the sums and P's rounding differ from the per-row kernel. Outside
// ggml's numerics (X: a 16-bit model's f16 cache, `-ctk f16 -ctv f16`) q and P
// go in as two halves each, hi = f16(x) and lo = f16(x - hi), each product as
// two mma: x to about 22 bits, the per-row kernel's values within the sums'
// order.
#include "compute/cuda/common.cuh"

#include <limits.h>

enum { FA_BR = 64, FA_BC = 64, FA_WARPS = 4, FA_PAD = 8 };

// four 8x8 b16 matrices of shared memory: lane i gives the row address of
// matrix i / 8, row i % 8 (_t: each transposed)
static __device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void ldmatrix_x4_t(uint32_t r[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// 2^x in one instruction (results below 2^-126 flush to 0: a probability too small to count)
static __device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Q's fragments stay in registers for heads of up to 128 (in shared memory
// for 256); K and V tiles in two stages: the next tile's cp.async copies fly
// while the current one's products run.
// (X: q's two halves in shared memory, hi then lo)
template <int HD, int QR, int X> struct fa_cfg {
    enum { S = HD + FA_PAD, QREG = QR && !X, TILE = FA_BC * S };
};
static __host__ __device__ constexpr size_t fa_smem(int hd, int qr, int x) {
    return sizeof(__half) * ((size_t)4 * FA_BC * (hd + FA_PAD) + (qr && !x ? 0 : (size_t)(x ? 2 : 1) * FA_BR * (hd + FA_PAD)));
}

// x as hi = f16(x) and lo = f16(x - hi), two values a register each (lo first)
static __device__ __forceinline__ void h2_split(float a, float b, uint32_t *hi, uint32_t *lo) {
    const __half2 h = __floats2half2_rn(a, b);
    const __half2 l = __floats2half2_rn(a - __low2float(h), b - __high2float(h));
    *hi = *(const uint32_t *)&h, *lo = *(const uint32_t *)&l;
}

// an m16n8k16 a fragment of a row-major f16 tile (row stride S halves) at p: the lane's rows g and g + 8, columns
// 2 tq and 2 tq + 8 (p already at row g, column 2 tq)
static __device__ __forceinline__ void a_frag(uint32_t a[4], const __half *p, int S) {
    a[0] = *(const uint32_t *)p, a[1] = *(const uint32_t *)(p + 8 * S);
    a[2] = *(const uint32_t *)(p + 8), a[3] = *(const uint32_t *)(p + 8 * S + 8);
}

// the K and V rows k0 .. k0 + FA_BC - 1 (zeros past khi) into a stage
template <int HD>
static __device__ __forceinline__ void fa_load(__half *sk, __half *sv, const __half *kc, const __half *vc, int k0, int khi, int nkv, int kh) {
    enum { S = HD + FA_PAD };
    for (int i = threadIdx.x; i < FA_BC * HD / 8; i += FA_WARPS * 32) {
        const int j = i / (HD / 8), c = i % (HD / 8) * 8, in = k0 + j <= khi;
        const size_t off = in ? (size_t)(k0 + j) * nkv + (size_t)kh * HD + c : 0;
        cp_async16(sk + j * S + c, kc + off, in ? 16 : 0), cp_async16(sv + j * S + c, vc + off, in ? 16 : 0);
    }
}

template <int HD, int QR, int X>
static __global__ void __launch_bounds__(FA_WARPS * 32) k_flash(const float *q, float *out, int T, int H, int KV, int window, const int *pos,
                                                                const __half *kc, const __half *vc, float scale, float softcap,
                                                                const float *sinks, int gs) {
    PDL_ENTRY();
    extern __shared__ __align__(16) unsigned char fa_mem[];
    typedef fa_cfg<HD, QR, X> C;
    enum { S = C::S, NT = HD / 8, NK = HD / 16 };
    __half *sk = (__half *)fa_mem, *sv = sk + 2 * C::TILE, *sq = C::QREG ? sk + C::TILE : sv + 2 * C::TILE; // (QREG: Q staged in K's stage 1)
    __half *sql = sq + FA_BR * S; // (X: q's lo halves)
    __shared__ int s_lo, s_hi;
    // the deepest rows first: their blocks have the most keys to walk. A pair e of the block is row
    // r0 + (e >> gs) of query head h0 + (e & G - 1), G = 1 << gs.
    const int gm = (1 << gs) - 1, r0 = (gridDim.x - 1 - blockIdx.x) * (FA_BR >> gs), h0 = blockIdx.y << gs, kh = h0 / (H / KV);
    const int nq = H * HD, nkv = KV * HD;
    const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, g = lane >> 2, tq = lane & 3;
    const float L2E = 1.4426950408889634f;
    if (tid == 0) s_lo = INT_MAX, s_hi = -1;
    __syncthreads();
    if (tid < (FA_BR >> gs) && r0 + tid < T) { // the keys the block's rows see: [s_lo, s_hi]
        const int p = pos[r0 + tid];
        atomicMin(&s_lo, window && p - window + 1 > 0 ? p - window + 1 : 0);
        atomicMax(&s_hi, p);
    }
    __syncthreads();
    const int klo = s_lo, khi = s_hi, nt = khi >= klo ? (khi - klo) / FA_BC + 1 : 0;
    if (nt) fa_load<HD>(sk, sv, kc, vc, klo, khi, nkv, kh); // (tile 0 in flight while q is read)
    cp_async_commit();
    for (int i = tid; i < FA_BR * HD / 4; i += blockDim.x) { // the pairs' q, in f16
        const int r = i / (HD / 4), c = i % (HD / 4) * 4, t = r0 + (r >> gs);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t < T) v = *(const float4 *)(q + (size_t)t * nq + (size_t)(h0 + (r & gm)) * HD + c);
        uint32_t *d = (uint32_t *)(sq + r * S + c);
        if (X) {
            uint32_t *dl = (uint32_t *)(sql + r * S + c);
            h2_split(v.x, v.y, &d[0], &dl[0]), h2_split(v.z, v.w, &d[1], &dl[1]);
        } else
            d[0] = h2_bits(v.x, v.y), d[1] = h2_bits(v.z, v.w);
    }
    __syncthreads();
    uint32_t qa[C::QREG ? NK : 1][4];
    if (C::QREG) {
#pragma unroll
        for (int kk = 0; kk < (C::QREG ? NK : 1); kk++) {
            a_frag(qa[kk], sq + (w * 16 + g) * S + kk * 16 + 2 * tq, S);
        }
        __syncthreads(); // (stage 1 is K's again)
    }
    // this thread's two pairs' rows (the warp's pairs g and g + 8), their last key and first
    int hi[2], lo[2], whi = -1, wlo = INT_MAX;
    for (int i = 0; i < 2; i++) {
        const int r = r0 + ((w * 16 + g + 8 * i) >> gs);
        hi[i] = r < T ? pos[r] : -1;
        lo[i] = r < T && window && hi[i] - window + 1 > 0 ? hi[i] - window + 1 : 0;
        whi = max(whi, hi[i]);
        if (r < T) wlo = min(wlo, lo[i]);
    }
    // a tile of keys every row of the warp sees whole takes no mask: [wlo_all, whi_all]
    int whi_all = INT_MAX, wlo_all = 0;
    for (int i = 0; i < 2; i++)
        if (hi[i] >= 0) whi_all = min(whi_all, hi[i]), wlo_all = max(wlo_all, lo[i]);
    whi = __reduce_max_sync(0xffffffffu, whi), wlo = __reduce_min_sync(0xffffffffu, wlo);
    whi_all = __reduce_min_sync(0xffffffffu, whi_all), wlo_all = __reduce_max_sync(0xffffffffu, wlo_all);
    const float sl2 = scale * L2E; // (the scores in log2 units at once where there is no softcap)
    const int kmat = lane >> 3, krow = (kmat >> 1) * 8 + (lane & 7), kcol = (kmat & 1) * 8; // (ldmatrix: K's b fragments, two n-tiles)
    float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int it = 0; it < nt; it++) {
        const int k0 = klo + it * FA_BC, st = it & 1;
        if (it + 1 < nt) fa_load<HD>(sk + (st ^ 1) * C::TILE, sv + (st ^ 1) * C::TILE, kc, vc, k0 + FA_BC, khi, nkv, kh);
        cp_async_commit();
        cp_async_wait<1>(); // (this tile's copies are done; the next one's may fly)
        __syncthreads();
        const __half *tk = sk + st * C::TILE, *tv = sv + st * C::TILE;
        if (k0 <= whi && k0 + FA_BC > wlo) { // (else none of the warp's rows sees these keys)
            float s[FA_BC / 8][4];
#pragma unroll
            for (int n = 0; n < FA_BC / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < NK; kk++) { // S = Q K^T
                uint32_t a[4];
                if (C::QREG) {
                    a[0] = qa[C::QREG ? kk : 0][0], a[1] = qa[C::QREG ? kk : 0][1], a[2] = qa[C::QREG ? kk : 0][2], a[3] = qa[C::QREG ? kk : 0][3];
                } else
                    a_frag(a, sq + (w * 16 + g) * S + kk * 16 + 2 * tq, S);
                uint32_t al[4];
                if (X) a_frag(al, sql + (w * 16 + g) * S + kk * 16 + 2 * tq, S);
#pragma unroll
                for (int n = 0; n < FA_BC / 8; n += 2) {
                    uint32_t b[4];
                    ldmatrix_x4(b, tk + (n * 8 + krow) * S + kk * 16 + kcol);
                    mma_16816(s[n], a, b[0], b[1]);
                    mma_16816(s[n + 1], a, b[2], b[3]);
                    if (X) mma_16816(s[n], al, b[0], b[1]), mma_16816(s[n + 1], al, b[2], b[3]);
                }
            }
            float mx[2] = {-INFINITY, -INFINITY}; // (the scores in log2 units from here)
            if (!softcap && k0 + FA_BC - 1 <= whi_all && k0 >= wlo_all) {
#pragma unroll
                for (int n = 0; n < FA_BC / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) s[n][e] *= sl2, mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
            } else {
#pragma unroll
                for (int n = 0; n < FA_BC / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int i = e >> 1, j = k0 + n * 8 + 2 * tq + (e & 1);
                        float v = s[n][e];
                        if (softcap) v = softcap * tanhf(v * scale / softcap) * L2E;
                        else v *= sl2;
                        v = j > hi[i] || j < lo[i] ? -INFINITY : v;
                        s[n][e] = v, mx[i] = fmaxf(mx[i], v);
                    }
            }
            float f[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                const float mn = fmaxf(m[i], mx[i]);
                f[i] = mn == -INFINITY ? 1.0f : ex2(m[i] - mn);
                m[i] = mn, l[i] *= f[i];
            }
            if (__any_sync(0xffffffffu, f[0] != 1.0f || f[1] != 1.0f)) // (a row's max rose: its sums so far scaled down)
#pragma unroll
                for (int n = 0; n < NT; n++) o[n][0] *= f[0], o[n][1] *= f[0], o[n][2] *= f[1], o[n][3] *= f[1];
#pragma unroll
            for (int n = 0; n < FA_BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = e >> 1;
                    const float p = m[i] == -INFINITY ? 0.0f : ex2(s[n][e] - m[i]);
                    s[n][e] = p, l[i] += p;
                }
#pragma unroll
            for (int kk = 0; kk < FA_BC / 16; kk++) { // O += P V
                uint32_t a[4], al[4];
                if (X) {
                    h2_split(s[2 * kk][0], s[2 * kk][1], &a[0], &al[0]), h2_split(s[2 * kk][2], s[2 * kk][3], &a[1], &al[1]);
                    h2_split(s[2 * kk + 1][0], s[2 * kk + 1][1], &a[2], &al[2]), h2_split(s[2 * kk + 1][2], s[2 * kk + 1][3], &a[3], &al[3]);
                } else {
                    a[0] = h2_bits(s[2 * kk][0], s[2 * kk][1]), a[1] = h2_bits(s[2 * kk][2], s[2 * kk][3]);
                    a[2] = h2_bits(s[2 * kk + 1][0], s[2 * kk + 1][1]), a[3] = h2_bits(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                }
                const int mat = lane >> 3, row = kk * 16 + (mat & 1) * 8 + (lane & 7);
#pragma unroll
                for (int n = 0; n < NT; n += 2) {
                    uint32_t b[4];
                    ldmatrix_x4_t(b, tv + row * S + (n + (mat >> 1)) * 8);
                    mma_16816(o[n], a, b[0], b[1]);
                    mma_16816(o[n + 1], a, b[2], b[3]);
                    if (X) mma_16816(o[n], al, b[0], b[1]), mma_16816(o[n + 1], al, b[2], b[3]);
                }
            }
        }
        __syncthreads(); // (every warp done with this stage before the next iteration refills it)
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int e = w * 16 + g + 8 * i, r = r0 + (e >> gs), h = h0 + (e & gm);
        const float sink = sinks ? sinks[h] * L2E : -INFINITY;
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        float f = 1.0f;
        if (sinks) {
            const float mn = fmaxf(m[i], sink);
            f = m[i] == -INFINITY ? 0.0f : exp2f(m[i] - mn);
            l[i] = l[i] * f + exp2f(sink - mn);
        }
        const float inv = l[i] > 0.0f ? f / l[i] : 0.0f;
        if (r >= T) continue;
        float *orow = out + (size_t)r * nq + (size_t)h * HD + 2 * tq;
#pragma unroll
        for (int n = 0; n < NT; n++) *(float2 *)(orow + n * 8) = make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}

// (outside ggml's numerics -- an f16 cache a 16-bit model was given, `-ctk f16 -ctv f16` -- under INFER_CUDA_FLASH_X=1
// for now: not yet run on a GPU; test_cuda turns it on)
extern "C" HIDDEN int cuda_attention_flash_ok(int hd, int ggml, int kv16) {
    static int x = -1;
    if (x < 0) {
        const char *e = getenv("INFER_CUDA_FLASH_X");
        x = e && *e == '1';
    }
    return kv16 && (ggml || x) && (hd == 64 || hd == 128 || hd == 256);
}

// QR: q's fragments in registers (INFER_CUDA_FLASH_QREG=0: in shared memory; 1: for every head size;
// by default for heads of up to 128)
// gs: log2 of the query heads a block (its K and V tiles read once for them)
template <int HD, int QR, int X>
static int flash_run(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int window, const int *pos, const void *k, const void *v,
                     float scale, float softcap, const float *sinks, int gs) {
    const size_t smem = fa_smem(HD, QR, X);
    if (smem > 48 * 1024) { // (asked for on each launch: the setting is the current device's)
        cudaError_t e = cudaFuncSetAttribute(k_flash<HD, QR, X>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return set_status("flash attention's shared memory", e);
    }
    const int rb = FA_BR >> gs;
    dim3 g((T + rb - 1) / rb, H >> gs);
    launch(k_flash<HD, QR, X>, g, FA_WARPS * 32, smem, d->stream, q, out, T, H, KV, window, pos, (const __half *)k, (const __half *)v, scale,
           softcap, sinks, gs);
    return launched("flash attention");
}

template <int HD>
static int flash_pick(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int window, const int *pos, const void *k, const void *v,
                      float scale, float softcap, const float *sinks, int ggml) {
    static int qreg = -2, gmax = -1;
    if (qreg == -2) {
        const char *e = getenv("INFER_CUDA_FLASH_QREG"), *g = getenv("INFER_CUDA_FLASH_GQA");
        qreg = e && *e ? atoi(e) != 0 : -1;
        gmax = g && *g ? atoi(g) : 8; // (the most query heads a block: 1 takes one head a block)
    }
    int gs = 0; // the most heads of one KV head, up to 8 (and gmax), that divide its H / KV
    while (gs < 3 && (2 << gs) <= gmax && (H / KV) % (2 << gs) == 0) gs++;
    if (!ggml) return flash_run<HD, 0, 1>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks, gs);
    return (qreg < 0 ? HD <= 128 : qreg) ? flash_run<HD, 1, 0>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks, gs)
                                         : flash_run<HD, 0, 0>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks, gs);
}

extern "C" HIDDEN int cuda_attention_flash(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                           const void *k, const void *v, float scale, float softcap, const float *sinks, int ggml, int wtype,
                                           void *xq, int kv16) {
    if (T <= 0) return 0;
    if (H % KV || !cuda_attention_flash_ok(hd, ggml, kv16) || (xq && !cuda_act_row_size(wtype, H * hd))) return -1;
    int rc = hd == 64    ? flash_pick<64>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks, ggml)
             : hd == 128 ? flash_pick<128>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks, ggml)
                         : flash_pick<256>(d, q, out, T, H, KV, window, pos, k, v, scale, softcap, sinks, ggml);
    if (rc) return rc;
    return xq ? cuda_quantize(d, wtype, out, T, H * hd, (uint8_t *)xq) : 0;
}
