// Attention with a row's positions split over blocks (flash-decoding), for
// decode rows: the two-kernel split, the one-pass kernels (k_dec1, and k_dec2
// on the tensor cores), their launcher.
#include "compute/cuda/attention.cuh"

// ---------------------------------------------------------------------------
// Attention with a row's positions split over blocks (flash-decoding): the
// rows that are each their sequence's only row of the pass (decode steps). A
// row's n positions go in S = ceil(n / C) chunks of C = max(chunk,
// ceil(n / spl)) -- from n alone, so a row's values do not depend on the
// rows beside it (a batch's rows equal their single decodes) -- a block a
// (row, GG query heads of one KV head, chunk), in two kernels: k_as_scores
// writes the chunk's scores and their (max, sum of exp); k_as_values takes
// the row's max and sum from the S pairs, the chunk's probabilities (ggml:
// rounded to f16, as the CPU's) and their values; the last of a (row, head
// group)'s blocks adds the S parts in chunk order, writes the heads' output
// and its quantized blocks. Where every row's n is one chunk, k_as_one does
// both in one block with the same arithmetic (its values are the two
// kernels' for such a row).
//
// The loads: a lane reads 16 bytes of a K or V row (EL elements), LPR lanes a
// row, RPW rows a warp at once, U such rounds in flight: the memory sees
// whole lines and enough of them for its bandwidth. k_as_scores keeps 8
// rounds in flight (a row's score does not depend on which rows are read
// beside it; 4 -> 8 on an H100 at depth 16384: 35 -> 28 us a layer), the
// values kernels 4 (their sums' order follows U; 8 was not faster there).
// The values kernels take a chunk's probabilities AS_PC positions at a time
// through shared memory (a multiple of every layout's STEP, so the sums'
// order is one pass's).
enum { AS_THREADS = 128, AS_NW = AS_THREADS / 32, AS_U_SCORES = 8, AS_PC = 256 };
struct att_split_args { int spl, chunk, z; float *part; float2 *stat; int *cnt; };

template <int HD, int KH, int U_ = 4> struct as_lay {
    typedef typename kvel<KH>::T KT;
    enum { EL = 16 / sizeof(KT), LPR0 = HD / EL, LPR = LPR0 < 32 ? LPR0 : 32, NL = LPR0 / LPR, RPW = 32 / LPR, NE = NL * EL,
           U = U_, STEP = U * RPW * AS_NW };
};

static __device__ __forceinline__ void ld16(const float *p, float *f) {
    float4 v = *(const float4 *)p;
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}
static __device__ __forceinline__ void ld16(const __half *p, float *f) {
    uint4 u = *(const uint4 *)p;
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 x = __half22float2(h[i]);
        f[2 * i] = x.x, f[2 * i + 1] = x.y;
    }
}

static __device__ __forceinline__ int att_chunk_len(int n, int spl, int chunk) {
    int c = (n + spl - 1) / spl;
    return c > chunk ? c : chunk;
}

// the cache rows [a, b) of a KV head asked into L2 (rows before the row a pass writes: read before the wait)
template <int HD, int KH>
static __device__ void as_prefetch(const typename kvel<KH>::T *c, int nkv, int a, int b) {
    enum { LINES = (HD * (int)sizeof(typename kvel<KH>::T) + 127) / 128, EPL = 128 / (int)sizeof(typename kvel<KH>::T) };
    for (int i = threadIdx.x; i < (b - a) * LINES; i += AS_THREADS)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(c + (size_t)(a + i / LINES) * nkv + EPL * (i % LINES)));
}

// The scores of positions [a, b) for the GG heads at qh (one after another),
// into s (a head's at s + g * stride), and each head's (max, sum of exp).
template <int HD, int KH, int GG, int U = 4>
static __device__ void as_scores(const float *qh, const typename kvel<KH>::T *k, int nkv, int a, int b, float scale, float softcap,
                                 float *s, int stride, float2 *st, float *sh) {
    typedef as_lay<HD, KH, U> L;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, sub = lane / L::LPR, li = lane % L::LPR;
    float qv[GG][L::NE], m[GG];
#pragma unroll
    for (int g = 0; g < GG; g++) {
        m[g] = -INFINITY;
#pragma unroll
        for (int l = 0; l < L::NL; l++)
#pragma unroll
            for (int e = 0; e < L::EL; e++) qv[g][l * L::EL + e] = qh[(size_t)g * HD + (l * L::LPR + li) * L::EL + e];
    }
    for (int j0 = a + wp * L::RPW; j0 < b; j0 += L::STEP) {
        float kv[L::U][L::NE], acc[L::U][GG];
#pragma unroll
        for (int u = 0; u < L::U; u++) {
            const int j = min(j0 + u * L::RPW * AS_NW + sub, b - 1);
#pragma unroll
            for (int l = 0; l < L::NL; l++) ld16(k + (size_t)j * nkv + (l * L::LPR + li) * L::EL, kv[u] + l * L::EL);
        }
#pragma unroll
        for (int u = 0; u < L::U; u++)
#pragma unroll
            for (int g = 0; g < GG; g++) {
                float x = 0.0f;
#pragma unroll
                for (int e = 0; e < L::NE; e++) x = fmaf(qv[g][e], kv[u][e], x);
#pragma unroll
                for (int o = L::LPR / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
                acc[u][g] = x;
            }
#pragma unroll
        for (int u = 0; u < L::U; u++) {
            const int j = j0 + u * L::RPW * AS_NW + sub;
#pragma unroll
            for (int g = 0; g < GG; g++) {
                float v = acc[u][g] * scale;
                if (softcap) v = softcap * tanhf(v / softcap);
                if (j < b) {
                    m[g] = fmaxf(m[g], v);
                    if (li == 0) s[(size_t)g * stride + j] = v;
                }
            }
        }
    }
    // the GG heads' maxima and sums together: two barriers in all (the first also makes the scores
    // written visible to the block)
    __shared__ float shm[AS_NW][GG], shl[AS_NW][GG];
    float l[GG];
#pragma unroll
    for (int g = 0; g < GG; g++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m[g] = fmaxf(m[g], __shfl_xor_sync(0xffffffffu, m[g], o));
        if (lane == 0) shm[wp][g] = m[g];
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < GG; g++) {
        m[g] = fmaxf(fmaxf(shm[0][g], shm[1][g]), fmaxf(shm[2][g], shm[3][g]));
        l[g] = 0.0f;
    }
    for (int j = a + (int)threadIdx.x; j < b; j += AS_THREADS)
#pragma unroll
        for (int g = 0; g < GG; g++) l[g] += expf(s[(size_t)g * stride + j] - m[g]);
#pragma unroll
    for (int g = 0; g < GG; g++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
        if (lane == 0) shl[wp][g] = l[g];
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < GG; g++) st[g] = make_float2(m[g], (shl[0][g] + shl[1][g]) + (shl[2][g] + shl[3][g]));
    (void)sh;
}

// The GG heads' probabilities over [a, b) (each head's max M and sum L of the
// whole row) times the values, the block's sums into red[g][x] (x < HD).
template <int HD, int KH, int GG, int U = 4>
static __device__ void as_values(const typename kvel<KH>::T *v, int nkv, int a, int b, const float *M, const float *L, int ggml, float *s,
                                 int stride, float (*red)[AS_NW][HD]) {
    typedef as_lay<HD, KH, U> Y;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, sub = lane / Y::LPR, li = lane % Y::LPR;
    __shared__ float sp[GG][AS_PC]; // (a pass's probabilities: each row's read by its lanes from here, not from memory)
    static_assert(AS_PC % Y::STEP == 0, "a pass of AS_PC positions is whole steps");
    float acc[GG][Y::NE];
#pragma unroll
    for (int g = 0; g < GG; g++)
#pragma unroll
        for (int e = 0; e < Y::NE; e++) acc[g][e] = 0.0f;
    for (int a0 = a; a0 < b; a0 += AS_PC) { // (AS_PC a multiple of STEP: each warp's rows in the order of one pass over [a, b))
        const int b0 = min(b, a0 + AS_PC);
        if (a0 > a) __syncthreads(); // (the pass before is read)
        for (int j = a0 + (int)threadIdx.x; j < b0; j += AS_THREADS)
#pragma unroll
            for (int g = 0; g < GG; g++) {
                const float p = expf(s[(size_t)g * stride + j] - M[g]) / L[g];
                sp[g][j - a0] = ggml ? f16_round(p) : p;
            }
        __syncthreads();
        for (int j0 = a0 + wp * Y::RPW; j0 < b0; j0 += Y::STEP) {
            float vv[Y::U][Y::NE], p[Y::U][GG];
#pragma unroll
            for (int u = 0; u < Y::U; u++) {
                const int j = j0 + u * Y::RPW * AS_NW + sub, jc = min(j, b0 - 1);
#pragma unroll
                for (int l = 0; l < Y::NL; l++) ld16(v + (size_t)jc * nkv + (l * Y::LPR + li) * Y::EL, vv[u] + l * Y::EL);
#pragma unroll
                for (int g = 0; g < GG; g++) p[u][g] = j < b0 ? sp[g][jc - a0] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < Y::U; u++)
#pragma unroll
                for (int g = 0; g < GG; g++)
#pragma unroll
                    for (int e = 0; e < Y::NE; e++) acc[g][e] = fmaf(p[u][g], vv[u][e], acc[g][e]);
        }
    }
    // the warp's row slots added (lanes LPR apart), then the warps' in order
#pragma unroll
    for (int g = 0; g < GG; g++)
#pragma unroll
        for (int e = 0; e < Y::NE; e++)
#pragma unroll
            for (int o = Y::LPR; o < 32; o <<= 1) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
    if (sub == 0)
#pragma unroll
        for (int g = 0; g < GG; g++)
#pragma unroll
            for (int l = 0; l < Y::NL; l++)
#pragma unroll
                for (int e = 0; e < Y::EL; e++) red[g][wp][(l * Y::LPR + li) * Y::EL + e] = acc[g][l * Y::EL + e];
    __syncthreads();
}

static __device__ __forceinline__ float as_sum4(const float *r0, const float *r1, const float *r2, const float *r3, int x) {
    return (r0[x] + r1[x]) + (r2[x] + r3[x]);
}

// a row's span: the window's first position lo and its n positions; this chunk's [a, b) of them and S
struct as_span { int lo, n, S, a, b; };
static __device__ __forceinline__ as_span as_span_of(const int *pos, int t, int window, int c, const att_split_args &sa) {
    as_span r;
    const int hi = pos[t];
    r.lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, r.n = hi - r.lo + 1;
    const int C = att_chunk_len(r.n, sa.spl, sa.chunk);
    r.S = (r.n + C - 1) / C, r.a = c * C, r.b = r.a + C < r.n ? r.a + C : r.n;
    return r;
}

// each head's max and sum of the row from the S chunks' pairs (z apart a
// head): every warp reads them all, a lane every 32nd, and adds them in the
// same tree (one chunk: its pair alone, the sink joined after)
template <int GG>
static __device__ __forceinline__ void as_row_stat(const float2 *st, int S, int z, const float *sinks, int h0, float *M, float *L) {
    const int lane = threadIdx.x % 32;
    float m[GG], l[GG]; // (the GG heads' loads in flight together: two rounds of them in all)
#pragma unroll
    for (int g = 0; g < GG; g++) m[g] = sinks ? sinks[h0 + g] : -INFINITY, l[g] = 0.0f;
    for (int i = lane; i < S; i += 32)
#pragma unroll
        for (int g = 0; g < GG; g++) m[g] = fmaxf(m[g], st[(size_t)g * z + i].x);
#pragma unroll
    for (int g = 0; g < GG; g++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m[g] = fmaxf(m[g], __shfl_xor_sync(0xffffffffu, m[g], o));
    for (int i = lane; i < S; i += 32)
#pragma unroll
        for (int g = 0; g < GG; g++) {
            const float2 x = st[(size_t)g * z + i];
            l[g] += x.y * expf(x.x - m[g]);
        }
#pragma unroll
    for (int g = 0; g < GG; g++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
        if (sinks) l[g] += expf(sinks[h0 + g] - m[g]);
        M[g] = m[g], L[g] = l[g];
    }
}

template <int HD, int KH, int GG, int U>
static __global__ void __launch_bounds__(AS_THREADS) k_as_scores(const float *q, int H, int KV, int window, const int *pos,
                                                                const void *const *kc, float scale, float softcap, float *scores,
                                                                int stride, att_split_args sa) {
    typedef typename kvel<KH>::T KT;
    __shared__ float sh[32];
    const int t = blockIdx.x, h0 = blockIdx.y * GG, c = blockIdx.z, kh = h0 / (H / KV), nkv = KV * HD;
    const as_span r = as_span_of(pos, t, window, c, sa);
    const KT *k = (const KT *)kc[t] + (size_t)kh * HD + (size_t)r.lo * nkv;
    if (c < r.S) as_prefetch<HD, KH>(k, nkv, r.a, min(r.b, r.n - 1)); // (the row's own position: the kernel before writes it)
    PDL_ENTRY();
    if (c >= r.S) return;
    float2 st[GG];
    as_scores<HD, KH, GG, U>(q + (size_t)t * H * HD + (size_t)h0 * HD, k, nkv, r.a, r.b, scale, softcap,
                          scores + ((size_t)t * H + h0) * stride, stride, st, sh);
    if (threadIdx.x == 0)
#pragma unroll
        for (int g = 0; g < GG; g++) sa.stat[((size_t)t * H + h0 + g) * sa.z + c] = st[g];
}

template <int HD, int KH, int GG, int U>
static __global__ void __launch_bounds__(AS_THREADS) k_as_values(float *out, int H, int KV, int window, const int *pos,
                                                                const void *const *vc, const float *sinks, int ggml, float *scores,
                                                                int stride, att_split_args sa, uint8_t *xq, size_t xr, int xk) {
    typedef typename kvel<KH>::T KT;
    __shared__ float red[GG][AS_NW][HD];
    __shared__ int last;
    const int t = blockIdx.x, h0 = blockIdx.y * GG, c = blockIdx.z, kh = h0 / (H / KV), nq = H * HD, nkv = KV * HD;
    const as_span r = as_span_of(pos, t, window, c, sa);
    const KT *v = (const KT *)vc[t] + (size_t)kh * HD + (size_t)r.lo * nkv;
    if (c < r.S) as_prefetch<HD, KH>(v, nkv, r.a, min(r.b, r.n - 1));
    PDL_ENTRY();
    if (c >= r.S) return;
    const size_t rh0 = (size_t)t * H + h0;
    float M[GG], L[GG];
    as_row_stat<GG>(sa.stat + rh0 * sa.z, r.S, sa.z, sinks, h0, M, L);
    as_values<HD, KH, GG, U>(v, nkv, r.a, r.b, M, L, ggml, scores + rh0 * stride, stride, red);
    float *o = out + (size_t)t * nq + (size_t)h0 * HD; // (the GG heads' outputs, one after another)
    if (r.S == 1) {
        for (int i = threadIdx.x; i < GG * HD; i += AS_THREADS) {
            const int g = i / HD, x = i % HD;
            o[i] = as_sum4(red[g][0], red[g][1], red[g][2], red[g][3], x);
        }
    } else {
        for (int i = threadIdx.x; i < GG * HD; i += AS_THREADS) {
            const int g = i / HD, x = i % HD;
            sa.part[((rh0 + g) * sa.z + c) * HD + x] = as_sum4(red[g][0], red[g][1], red[g][2], red[g][3], x);
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(sa.cnt + rh0, 1) == r.S - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        // a thread's EPT elements, MC chunks at a time (their loads in flight together), each summed in chunk order
        enum { EPT = (GG * HD + AS_THREADS - 1) / AS_THREADS, MC = EPT <= 4 ? 16 : EPT <= 8 ? 8 : 4 };
        float a[EPT];
#pragma unroll
        for (int k = 0; k < EPT; k++) a[k] = 0.0f;
        for (int c0 = 0; c0 < r.S; c0 += MC) {
            float b[MC][EPT];
#pragma unroll
            for (int c2 = 0; c2 < MC; c2++)
#pragma unroll
                for (int k = 0; k < EPT; k++) {
                    const int i = threadIdx.x + k * AS_THREADS, g = i / HD, x = i % HD;
                    b[c2][k] = i < GG * HD && c0 + c2 < r.S ? __ldcg(sa.part + ((rh0 + g) * sa.z + c0 + c2) * HD + x) : 0.0f;
                }
#pragma unroll
            for (int c2 = 0; c2 < MC; c2++)
#pragma unroll
                for (int k = 0; k < EPT; k++)
                    if (c0 + c2 < r.S) a[k] += b[c2][k];
        }
#pragma unroll
        for (int k = 0; k < EPT; k++)
            if (threadIdx.x + k * AS_THREADS < GG * HD) o[threadIdx.x + k * AS_THREADS] = a[k];
        if (threadIdx.x == 0) sa.cnt[rh0] = 0; // (for the next launch, and the graph's next replay)
    }
    if (xq) {
        __syncthreads();
        for (int g = 0; g < GG; g++) att_quant_head(o + (size_t)g * HD, xq, xr, xk, t, h0 + g, HD, nq);
    }
}

// Both kernels' work for rows of one chunk each (S = 1), in one block.
template <int HD, int KH, int GG>
static __global__ void __launch_bounds__(AS_THREADS) k_as_one(const float *q, float *out, int H, int KV, int window, const int *pos,
                                                             const void *const *kc, const void *const *vc, float scale, float softcap,
                                                             const float *sinks, int ggml, float *scores, int stride, att_split_args sa,
                                                             uint8_t *xq, size_t xr, int xk) {
    typedef typename kvel<KH>::T KT;
    __shared__ float sh[32];
    __shared__ float red[GG][AS_NW][HD];
    const int t = blockIdx.x, h0 = blockIdx.y * GG, kh = h0 / (H / KV), nq = H * HD, nkv = KV * HD;
    const as_span r = as_span_of(pos, t, window, 0, sa);
    const KT *k = (const KT *)kc[t] + (size_t)kh * HD + (size_t)r.lo * nkv, *v = (const KT *)vc[t] + (size_t)kh * HD + (size_t)r.lo * nkv;
    as_prefetch<HD, KH>(k, nkv, 0, r.n - 1), as_prefetch<HD, KH>(v, nkv, 0, r.n - 1);
    PDL_ENTRY();
    const size_t rh0 = (size_t)t * H + h0;
    float2 st[GG];
    __shared__ float2 sst[GG];
    as_scores<HD, KH, GG>(q + (size_t)t * nq + (size_t)h0 * HD, k, nkv, 0, r.n, scale, softcap, scores + rh0 * stride, stride, st, sh);
    if (threadIdx.x == 0)
#pragma unroll
        for (int g = 0; g < GG; g++) sst[g] = st[g];
    __syncthreads();
    float M[GG], L[GG];
    as_row_stat<GG>(sst, 1, 1, sinks, h0, M, L);
    as_values<HD, KH, GG>(v, nkv, 0, r.n, M, L, ggml, scores + rh0 * stride, stride, red);
    float *o = out + (size_t)t * nq + (size_t)h0 * HD;
    for (int i = threadIdx.x; i < GG * HD; i += AS_THREADS) {
        const int g = i / HD, x = i % HD;
        o[i] = as_sum4(red[g][0], red[g][1], red[g][2], red[g][3], x);
    }
    if (xq) {
        __syncthreads();
        for (int g = 0; g < GG; g++) att_quant_head(o + (size_t)g * HD, xq, xr, xk, t, h0 + g, HD, nq);
    }
}

// The end of a one-pass split block: each warp's max, sum (wm, wl) and values
// (red) of the GG heads met into the chunk's, then written -- the row's output
// where it is one chunk, else the chunk's part, the row's last block merging
// the parts (each chunk's factor from the chunks' pairs; MC chunks' loads in
// flight together, summed in chunk order) -- and quantized where xq asks.
template <int HD, int GG>
static __device__ void dec_finish(float (*red)[AS_NW][HD], float (*wm)[GG], float (*wl)[GG], const as_span &r, int t, int H, int h0,
                                  float *out, const float *sinks, const att_split_args &sa, uint8_t *xq, size_t xr, int xk) {
    __shared__ float sf[GG][AS_NW];
    __shared__ int last;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, c = blockIdx.z, nq = H * HD;
    __syncthreads();
    if (threadIdx.x < GG) { // each head's chunk max and sum, and each warp's factor (a warp without rows: 0)
        const int g = threadIdx.x;
        float M = wm[0][g], Lc = 0.0f;
        for (int w = 1; w < AS_NW; w++) M = fmaxf(M, wm[w][g]);
        for (int w = 0; w < AS_NW; w++) {
            sf[g][w] = wm[w][g] == -INFINITY ? 0.0f : expf(wm[w][g] - M);
            Lc += wl[w][g] * sf[g][w];
        }
        wm[0][g] = M, wl[0][g] = Lc;
        if (r.S > 1) sa.stat[((size_t)t * H + h0 + g) * sa.z + c] = make_float2(M, Lc);
    }
    __syncthreads();
    const size_t rh0 = (size_t)t * H + h0;
    float *o = out + (size_t)t * nq + (size_t)h0 * HD; // (the GG heads' outputs, one after another)
    if (r.S == 1) {
        for (int i = threadIdx.x; i < GG * HD; i += AS_THREADS) {
            const int g = i / HD, x = i % HD;
            float a = red[g][0][x] * sf[g][0];
#pragma unroll
            for (int w = 1; w < AS_NW; w++) a += red[g][w][x] * sf[g][w];
            float M = wm[0][g], Lc = wl[0][g], f = 1.0f;
            if (sinks) {
                const float mn = fmaxf(M, sinks[h0 + g]);
                f = expf(M - mn), Lc = Lc * f + expf(sinks[h0 + g] - mn);
            }
            o[i] = a * f / Lc;
        }
    } else {
        for (int i = threadIdx.x; i < GG * HD; i += AS_THREADS) {
            const int g = i / HD, x = i % HD;
            float a = red[g][0][x] * sf[g][0];
#pragma unroll
            for (int w = 1; w < AS_NW; w++) a += red[g][w][x] * sf[g][w];
            sa.part[((rh0 + g) * sa.z + c) * HD + x] = a;
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(sa.cnt + rh0, 1) == r.S - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        // the row's max and sum from the chunks' pairs (a warp a head), each chunk's factor into red's room
        __shared__ float fac_s[GG * 256]; // (z <= 256: device.cu)
        float *fac = fac_s;
        for (int g = wp; g < GG; g += AS_NW) {
            const float2 *st = sa.stat + (rh0 + g) * sa.z;
            float M = sinks ? sinks[h0 + g] : -INFINITY, Lr = 0.0f;
            for (int i = lane; i < r.S; i += 32) M = fmaxf(M, __ldcg(&st[i].x));
            for (int s2 = 16; s2 > 0; s2 >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, s2));
            for (int i = lane; i < r.S; i += 32) Lr += __ldcg(&st[i].y) * expf(__ldcg(&st[i].x) - M);
            for (int s2 = 16; s2 > 0; s2 >>= 1) Lr += __shfl_xor_sync(0xffffffffu, Lr, s2);
            if (sinks) Lr += expf(sinks[h0 + g] - M);
            for (int i = lane; i < r.S; i += 32) fac[g * sa.z + i] = expf(__ldcg(&st[i].x) - M) / Lr;
        }
        __syncthreads();
        enum { EPT = (GG * HD + AS_THREADS - 1) / AS_THREADS };
        float a[EPT];
#pragma unroll
        for (int k = 0; k < EPT; k++) a[k] = 0.0f;
        enum { MC = EPT <= 4 ? 16 : EPT <= 8 ? 8 : 4 };
        for (int c0 = 0; c0 < r.S; c0 += MC) {
            float b[MC][EPT];
#pragma unroll
            for (int c2 = 0; c2 < MC; c2++)
#pragma unroll
                for (int k = 0; k < EPT; k++) {
                    const int i = threadIdx.x + k * AS_THREADS, g = i / HD, x = i % HD;
                    b[c2][k] = i < GG * HD && c0 + c2 < r.S ? __ldcg(sa.part + ((rh0 + g) * sa.z + c0 + c2) * HD + x) * fac[g * sa.z + c0 + c2] : 0.0f;
                }
#pragma unroll
            for (int c2 = 0; c2 < MC; c2++)
#pragma unroll
                for (int k = 0; k < EPT; k++) a[k] += b[c2][k];
        }
#pragma unroll
        for (int k = 0; k < EPT; k++)
            if (threadIdx.x + k * AS_THREADS < GG * HD) o[threadIdx.x + k * AS_THREADS] = a[k];
        if (threadIdx.x == 0) sa.cnt[rh0] = 0; // (for the next launch, and the graph's next replay)
    }
    if (xq) {
        __syncthreads();
        for (int g = 0; g < GG; g++) att_quant_head(o + (size_t)g * HD, xq, xr, xk, t, h0 + g, HD, nq);
    }
}

// ---------------------------------------------------------------------------
// One-pass flash-decoding (INFER_CUDA_ATT_DEC=1; the chunks as above): a
// block reads its chunk's K and V rows together, U rounds of both in flight a
// lane, each warp keeping its own running max, sum and values (online softmax:
// no scores in memory, no barrier in the loop); the warps' parts then meet in
// shared memory and the chunks' in the last block of the row. Under ggml's
// numerics the unnormalized probabilities are rounded to f16 (as flash
// attention's), not the normalized ones: within the tolerance of the CPU's.
template <int HD, int KH, int GG, int U>
static __global__ void __launch_bounds__(AS_THREADS) k_dec1(const float *q, float *out, int H, int KV, int window, const int *pos,
                                                           const void *const *kc, const void *const *vc, float scale, float softcap,
                                                           const float *sinks, int ggml, att_split_args sa, uint8_t *xq, size_t xr,
                                                           int xk) {
    typedef typename kvel<KH>::T KT;
    typedef as_lay<HD, KH> Y;
    __shared__ float red[GG][AS_NW][HD];
    __shared__ float wm[AS_NW][GG], wl[AS_NW][GG];
    const int t = blockIdx.x, h0 = blockIdx.y * GG, c = blockIdx.z, kh = h0 / (H / KV), nq = H * HD, nkv = KV * HD;
    const as_span r = as_span_of(pos, t, window, c, sa);
    const KT *k = (const KT *)kc[t] + (size_t)kh * HD + (size_t)r.lo * nkv, *v = (const KT *)vc[t] + (size_t)kh * HD + (size_t)r.lo * nkv;
    if (c < r.S) as_prefetch<HD, KH>(k, nkv, r.a, min(r.b, r.n - 1)), as_prefetch<HD, KH>(v, nkv, r.a, min(r.b, r.n - 1));
    PDL_ENTRY();
    if (c >= r.S) return;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, sub = lane / Y::LPR, li = lane % Y::LPR;
    const float *qh = q + (size_t)t * nq + (size_t)h0 * HD;
    float qv[GG][Y::NE], m[GG], l[GG], acc[GG][Y::NE];
#pragma unroll
    for (int g = 0; g < GG; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int x = 0; x < Y::NL; x++)
#pragma unroll
            for (int e = 0; e < Y::EL; e++) qv[g][x * Y::EL + e] = qh[(size_t)g * HD + (x * Y::LPR + li) * Y::EL + e], acc[g][x * Y::EL + e] = 0.0f;
    }
    enum { STEP = U * Y::RPW * AS_NW };
    for (int j0 = r.a + wp * Y::RPW; j0 < r.b; j0 += STEP) {
        float kv[U][Y::NE], vv[U][Y::NE], sc[U][GG];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int j = min(j0 + u * Y::RPW * AS_NW + sub, r.b - 1);
#pragma unroll
            for (int x = 0; x < Y::NL; x++) {
                ld16(k + (size_t)j * nkv + (x * Y::LPR + li) * Y::EL, kv[u] + x * Y::EL);
                ld16(v + (size_t)j * nkv + (x * Y::LPR + li) * Y::EL, vv[u] + x * Y::EL);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int g = 0; g < GG; g++) {
                float a = 0.0f;
#pragma unroll
                for (int e = 0; e < Y::NE; e++) a = fmaf(qv[g][e], kv[u][e], a);
#pragma unroll
                for (int o = Y::LPR / 2; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
                a *= scale;
                if (softcap) a = softcap * tanhf(a / softcap);
                sc[u][g] = j0 + u * Y::RPW * AS_NW + sub < r.b ? a : -INFINITY;
            }
#pragma unroll
        for (int g = 0; g < GG; g++) {
            float mx = sc[0][g];
#pragma unroll
            for (int u = 1; u < U; u++) mx = fmaxf(mx, sc[u][g]);
#pragma unroll
            for (int o = Y::LPR; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float mn = fmaxf(m[g], mx), f = m[g] == -INFINITY ? 0.0f : expf(m[g] - mn); // (mx: the warp's first row is in the chunk)
            m[g] = mn, l[g] *= f;
#pragma unroll
            for (int e = 0; e < Y::NE; e++) acc[g][e] *= f;
#pragma unroll
            for (int u = 0; u < U; u++) {
                float p = expf(sc[u][g] - mn);
                if (ggml) p = f16_round(p);
                l[g] += p;
#pragma unroll
                for (int e = 0; e < Y::NE; e++) acc[g][e] = fmaf(p, vv[u][e], acc[g][e]);
            }
        }
    }
    // the warp's row slots added, then the warps' parts met
#pragma unroll
    for (int g = 0; g < GG; g++) {
#pragma unroll
        for (int o = Y::LPR; o < 32; o <<= 1) {
            l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
            for (int e = 0; e < Y::NE; e++) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
        }
        if (lane == 0) wm[wp][g] = m[g], wl[wp][g] = l[g];
        if (sub == 0)
#pragma unroll
            for (int x = 0; x < Y::NL; x++)
#pragma unroll
                for (int e = 0; e < Y::EL; e++) red[g][wp][(x * Y::LPR + li) * Y::EL + e] = acc[g][x * Y::EL + e];
    }
    dec_finish<HD, GG>(red, wm, wl, r, t, H, h0, out, sinks, sa, xq, xr, xk);
}

// ---------------------------------------------------------------------------
// Flash-decoding on the tensor cores (INFER_CUDA_ATT_DEC=2; f16 caches, heads
// of 64 or 128, where the others take the kernels above): the chunks as
// above, a warp 16 keys a step, S^T = Q K^T and O += P V as m16n8k16 mma
// with the block's GG <= 8 query heads in the first 8 rows of M. No shuffle
// a dot product and no K or V through shared memory: a lane's fragments come
// straight from its loads, the dimensions permuted alike on both sides of
// each product (kdim, vdim: each load instruction's lanes read whole 64- and
// 128-byte pieces of rows; V's values packed two keys a register).
// Lane (g, tq)'s scores are head g's at keys 2tq, 2tq + 1 of each 8: their
// max over the 4 lanes of g, the running max and sum as k_dec1's; P is the
// mma's a operand as the scores' c fragments sit. Outside ggml's numerics q
// and P go in as two halves each (hi + lo: exact to f32's rounding); under
// them q is f16 valued already and P is rounded to f16 unnormalized, as
// k_dec1's and flash attention's. OT (INFER_CUDA_ATT_DEC=3): O^T = V^T P^T
// instead, the dims in M and the heads in N (P^T's b fragment is then the
// scores' c fragment as it sits): half the mma and accumulators of O. NS
// (=4: 3 stages, =5: 2): the keys through a cp.async ring in shared memory.
// k_dec2's permutations of a head's dims: lane tq's K words 2s, 2s + 1 (k-step s; 16 bytes of every 64 its
// own) start at dim kdim(tq, s); lane g's i-th V dim (16 bytes of every 128) is vdim(g, i)
static __device__ __forceinline__ int kdim(int tq, int s) { return 8 * (4 * (s >> 1) + tq) + 4 * (s & 1); }
static __device__ __forceinline__ int vdim(int g, int i) { return 8 * (8 * (i >> 3) + g) + (i & 7); }

template <int HD, int GG, int PREC, int OT, int NS>
static __global__ void __launch_bounds__(AS_THREADS, NS ? 2 : OT && !PREC ? 4 : 1) k_dec2(const float *q, float *out, int H, int KV, int window, const int *pos,
                                                           const void *const *kc, const void *const *vc, float scale, float softcap,
                                                           const float *sinks, int ggml, att_split_args sa, uint8_t *xq, size_t xr,
                                                           int xk) {
    enum { KD = HD / 4, KS = HD / 16, VD = HD / 8 }; // (a lane's dims of a K row; k-steps; a lane's dims of a V row = n-tiles)
    static_assert(GG <= 8 && (HD == 64 || HD == 128), "heads in the mma's first 8 rows, a lane's loads whole 16 bytes");
    __shared__ float red[GG][AS_NW][HD];
    __shared__ float wm[AS_NW][GG], wl[AS_NW][GG];
    const int t = blockIdx.x, h0 = blockIdx.y * GG, c = blockIdx.z, kh = h0 / (H / KV), nq = H * HD, nkv = KV * HD;
    const as_span r = as_span_of(pos, t, window, c, sa);
    const __half *k = (const __half *)kc[t] + (size_t)kh * HD + (size_t)r.lo * nkv, *v = (const __half *)vc[t] + (size_t)kh * HD + (size_t)r.lo * nkv;
    if (c < r.S) as_prefetch<HD, 1>(k, nkv, r.a, min(r.b, r.n - 1)), as_prefetch<HD, 1>(v, nkv, r.a, min(r.b, r.n - 1));
    PDL_ENTRY();
    if (c >= r.S) return;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, g = lane / 4, tq = lane % 4;
    // q's a fragments (row g; k-step s's columns 2tq.. and 2tq + 8.. are the dims of its b fragments' words 2s, 2s + 1), hi and lo
    uint32_t qa[KS][2], ql[KS][2];
    {
        const float *qh = q + (size_t)t * nq + (size_t)(h0 + (g < GG ? g : 0)) * HD;
#pragma unroll
        for (int s = 0; s < KS; s++) {
            float4 x = g < GG ? *(const float4 *)(qh + kdim(tq, s)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            qa[s][0] = h2_bits(x.x, x.y), qa[s][1] = h2_bits(x.z, x.w);
            const __half2 *hh = (const __half2 *)qa[s];
            const float2 a0 = __half22float2(hh[0]), a1 = __half22float2(hh[1]);
            ql[s][0] = h2_bits(x.x - a0.x, x.y - a0.y), ql[s][1] = h2_bits(x.z - a1.x, x.w - a1.y);
        }
    }
    // OT = 0: o[n][0..1] head g, dims vdim(2tq + e, n) ([2..3]: rows 8-15, none). OT = 1 (O^T = V^T P^T: M the
    // dims, N the heads): o[mt][c] heads 2tq + c % 2, dims vdim(g, 2mt + c / 2) -- half the registers and mma
    enum { NO = OT ? HD / 16 : VD };
    float o[NO][4], m = -INFINITY, l = 0.0f;
#pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // NS > 0: a warp's steps through a ring of NS stages in shared memory (cp.async: the next NS - 1 steps' keys
    // in flight while this one computes); a lane copies and reads back only its own pieces, [piece][lane]
    enum { NPK = KD / 8, NPV = VD / 8, NP = 2 * NPK + 4 * NPV };
    extern __shared__ uint4 dsm[];
    uint4 *ring = dsm + (size_t)wp * (NS ? NS : 1) * NP * 32 + lane;
    auto issue = [&](int st, int j) { // (step j's pieces into stage st: the rows of the direct loads below)
        uint4 *sp = ring + (size_t)st * NP * 32;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int x = 0; x < NPK; x++) cp_async16(sp + (h * NPK + x) * 32, k + (size_t)min(j + 8 * h + g, r.b - 1) * nkv + 8 * tq + 32 * x, 16);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int x = 0; x < NPV; x++)
                cp_async16(sp + (2 * NPK + i * NPV + x) * 32, v + (size_t)min(j + 2 * tq + (i & 1) + 8 * (i >> 1), r.b - 1) * nkv + 8 * g + 64 * x, 16);
    };
    if constexpr (NS > 0)
        for (int st = 0; st < NS - 1; st++) {
            const int j = r.a + wp * 16 + st * 16 * AS_NW;
            if (j < r.b) issue(st, j);
            cp_async_commit();
        }
    for (int it = 0, j0 = r.a + wp * 16; j0 < r.b; it++, j0 += 16 * AS_NW) {
        uint32_t kr[2][KD / 2], vr[4][VD / 2];
        if constexpr (NS > 0) {
            const int jn = j0 + (NS - 1) * 16 * AS_NW;
            if (jn < r.b) issue((it + NS - 1) % NS, jn);
            cp_async_commit();
            cp_async_wait<NS ? NS - 1 : 0>(); // (this step's group done; the NS - 1 after it may fly)
            const uint4 *sp = ring + (size_t)(it % NS) * NP * 32;
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int x = 0; x < NPK; x++) *(uint4 *)&kr[h][4 * x] = sp[(h * NPK + x) * 32];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int x = 0; x < NPV; x++) *(uint4 *)&vr[i][4 * x] = sp[(2 * NPK + i * NPV + x) * 32];
        } else {
#pragma unroll
        for (int h = 0; h < 2; h++) { // (key g of each 8: 16 bytes of every 64 a load, the 4 lanes of g 64 in a row)
            const __half *kp = k + (size_t)min(j0 + 8 * h + g, r.b - 1) * nkv + 8 * tq;
#pragma unroll
            for (int x = 0; x < KD / 8; x++) *(uint4 *)&kr[h][4 * x] = *(const uint4 *)(kp + 32 * x);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) { // (keys 2tq, 2tq + 1, 2tq + 8, 2tq + 9: 16 bytes of every 128, the 8 lanes of tq 128 in a row)
            const __half *vp = v + (size_t)min(j0 + 2 * tq + (i & 1) + 8 * (i >> 1), r.b - 1) * nkv + 8 * g;
#pragma unroll
            for (int x = 0; x < VD / 8; x++) *(uint4 *)&vr[i][4 * x] = *(const uint4 *)(vp + 64 * x);
        }
        }
        float sc[2][4];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            sc[h][0] = sc[h][1] = sc[h][2] = sc[h][3] = 0.0f;
#pragma unroll
            for (int s = 0; s < KS; s++) {
                const uint32_t a[4] = {qa[s][0], 0u, qa[s][1], 0u}, al[4] = {ql[s][0], 0u, ql[s][1], 0u};
                mma_16816(sc[h], a, kr[h][2 * s], kr[h][2 * s + 1]);
                if (PREC) mma_16816(sc[h], al, kr[h][2 * s], kr[h][2 * s + 1]); // (under ggml's numerics q is f16 valued)
            }
        }
        float mx = -INFINITY;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float x = sc[h][e] * scale;
                if (softcap) x = softcap * tanhf(x / softcap);
                x = j0 + 8 * h + 2 * tq + e < r.b ? x : -INFINITY;
                sc[h][e] = x, mx = fmaxf(mx, x);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2)); // (the step's first key is in the chunk: mx is finite)
        const float mn = fmaxf(m, mx), f = m == -INFINITY ? 0.0f : expf(m - mn);
        m = mn, l *= f;
        if (OT) { // (heads 2tq and 2tq + 1: their factors from lanes 8tq and 8tq + 4)
            const float fa = __shfl_sync(0xffffffffu, f, 8 * tq), fb = __shfl_sync(0xffffffffu, f, 8 * tq + 4);
#pragma unroll
            for (int n = 0; n < NO; n++) o[n][0] *= fa, o[n][1] *= fb, o[n][2] *= fa, o[n][3] *= fb;
        } else {
#pragma unroll
            for (int n = 0; n < NO; n++) o[n][0] *= f, o[n][1] *= f;
        }
        uint32_t pa[4] = {0u, 0u, 0u, 0u}, pl[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float p0 = expf(sc[h][0] - mn), p1 = expf(sc[h][1] - mn);
            pa[2 * h] = h2_bits(p0, p1);
            const float2 ph = __half22float2(*(const __half2 *)&pa[2 * h]);
            if (PREC) pl[2 * h] = h2_bits(p0 - ph.x, p1 - ph.y), l += p0 + p1;
            else l += ph.x + ph.y;
        }
        if (OT) // (P^T's b fragment is the scores' c fragment: head g, keys 2tq.. and 2tq + 8..)
#pragma unroll
            for (int n = 0; n < NO; n++) {
                const uint32_t a[4] = {__byte_perm(vr[0][n], vr[1][n], 0x5410u), __byte_perm(vr[0][n], vr[1][n], 0x7632u),
                                       __byte_perm(vr[2][n], vr[3][n], 0x5410u), __byte_perm(vr[2][n], vr[3][n], 0x7632u)};
                mma_16816(o[n], a, pa[0], pa[2]);
                if (PREC) mma_16816(o[n], a, pl[0], pl[2]);
            }
        else
#pragma unroll
            for (int n = 0; n < NO; n++) {
                const unsigned sel = n & 1 ? 0x7632u : 0x5410u;
                const uint32_t b0 = __byte_perm(vr[0][n / 2], vr[1][n / 2], sel), b1 = __byte_perm(vr[2][n / 2], vr[3][n / 2], sel);
                mma_16816(o[n], pa, b0, b1);
                if (PREC) mma_16816(o[n], pl, b0, b1);
            }
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (g < GG && tq == 0) wm[wp][g] = m, wl[wp][g] = l;
    if (OT) {
#pragma unroll
        for (int n = 0; n < NO; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (2 * tq + e % 2 < GG) red[2 * tq + e % 2][wp][vdim(g, 2 * n + e / 2)] = o[n][e];
    } else if (g < GG) {
#pragma unroll
        for (int n = 0; n < NO; n++) red[g][wp][vdim(2 * tq, n)] = o[n][0], red[g][wp][vdim(2 * tq + 1, n)] = o[n][1];
    }
    dec_finish<HD, GG>(red, wm, wl, r, t, H, h0, out, sinks, sa, xq, xr, xk);
}

// k_dec2 where it applies (f16 caches, heads of 64 or 128, a block's GG <= 8 heads; tr: O^T's; ns: its stages in
// shared memory, 0: loads into registers); 0 where it does not
template <int HD, int GG, int PREC, int OT, int NS>
static void dec2_go(cuda_dev *d, dim3 grid, const float *q, float *out, int H, int KV, int window, const int *pos, const void *const *k,
                    const void *const *v, float scale, float softcap, const float *sinks, int ggml, const att_split_args &sa, uint8_t *xq,
                    size_t xr, int xk) {
    const size_t sm = (size_t)NS * AS_NW * (HD / 8) * 32 * 16;
    static int big; // (with the static arrays past 48 KiB in all: allowed once, before the first launch)
    if (sm && !big)
        big = cudaFuncSetAttribute(k_dec2<HD, GG, PREC, OT, NS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) == cudaSuccess;
    launch(k_dec2<HD, GG, PREC, OT, NS>, grid, AS_THREADS, sm, d->stream, q, out, H, KV, window, pos, k, v, scale, softcap, sinks, ggml, sa,
           xq, xr, xk);
}
template <int HD, int KH, int GG>
static int dec2_launch(cuda_dev *d, int dec, int r, int H, int z, const float *q, float *out, int KV, int window, const int *pos,
                       const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                       const att_split_args &sa, uint8_t *xq, size_t xr, int xk) {
    if constexpr (KH == 1 && (HD == 64 || HD == 128) && GG <= 8) {
        const dim3 g(r, H / GG, z);
#define DEC2(OT, NS)                                                                                                                 \
    (ggml ? dec2_go<HD, GG, 0, OT, NS>(d, g, q, out, H, KV, window, pos, k, v, scale, softcap, sinks, ggml, sa, xq, xr, xk)          \
          : dec2_go<HD, GG, 1, OT, NS>(d, g, q, out, H, KV, window, pos, k, v, scale, softcap, sinks, ggml, sa, xq, xr, xk))
        if (dec == 2) DEC2(0, 0);
        else if (dec == 3) DEC2(1, 0);
        else if (dec == 4) DEC2(1, 3);
        else DEC2(1, 2);
#undef DEC2
        return 1;
    }
    return 0;
}

static int as_hd_ok(int hd) { return hd == 32 || hd == 64 || hd == 128 || hd == 256 || hd == 512; }

// chunks a row of n positions takes
static int as_chunks(const cuda_dev *d, int n) {
    int c = (n + d->att_split - 1) / d->att_split;
    c = c > d->att_chunk ? c : d->att_chunk;
    return (n + c - 1) / c;
}

extern "C" HIDDEN int cuda_attention_split_z(cuda_dev *d, int n) {
    if (d->att_split <= 0 || n <= 0) return 0;
    int S = as_chunks(d, n), z = 1;
    while (z < S) z *= 2;
    return z < d->att_split ? z : d->att_split;
}

// the split kernels for rows [t0, t0 + T) -- the buffers for AS_ROWS rows at a time
enum { AS_ROWS = 64 };
extern "C" HIDDEN int cuda_att_split_run(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                         const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                         float *scores, int stride, uint8_t *xq, size_t xr, int xk, int kv16, int z) {
    const int rows = T < AS_ROWS ? T : AS_ROWS;
    if (z > 1) {
        size_t need = sizeof(float) * (size_t)rows * H * z * (hd + 2), nc = sizeof(int) * (size_t)rows * H;
        if (grow(d, (void **)&d->ap, &d->ap_cap, need)) return -1;
        if (nc > d->acnt_cap) { // (the counts start at 0: each kernel leaves them so)
            if (grow(d, (void **)&d->acnt, &d->acnt_cap, nc)) return -1;
            if (cudaMemset(d->acnt, 0, nc) != cudaSuccess) return d->acnt_cap = 0, set_status("attention partial sums", cudaGetLastError());
        }
    }
    const size_t nq = (size_t)H * hd;
    const int G = H / KV; // (query heads a KV head: a block takes 8, 4, 2 or 1 of them, fewer for long heads)
    const int gmax = hd >= 512 ? 2 : hd >= 256 ? 4 : 8;
    int gg = 1;
    while (gg * 2 <= gmax && G % (gg * 2) == 0) gg *= 2;
    for (int t0 = 0; t0 < T; t0 += rows) {
        int r = T - t0 < rows ? T - t0 : rows;
        att_split_args sa = {d->att_split, d->att_chunk, z, d->ap, (float2 *)(d->ap + (size_t)rows * H * z * hd), d->acnt};
        const float *qt = q + t0 * nq;
        float *ot = out + t0 * nq, *sc = scores + (size_t)t0 * H * stride;
        uint8_t *xt = xq ? xq + xr * t0 : NULL;
#define AS3(HD, KH, GG)                                                                                                              \
    if (d->att_dec >= 2 && dec2_launch<HD, KH, GG>(d, d->att_dec, r, H, z, qt, ot, KV, window, pos + t0, k + t0, v + t0, scale, softcap, sinks, ggml, \
                                                   sa, xt, xr, xk)) {                                                                \
    } else if (d->att_dec == 1)                                                                                                             \
        launch(k_dec1<HD, KH, GG, (GG >= 8 ? 2 : 4)>, dim3(r, H / GG, z), AS_THREADS, 0, d->stream, qt, ot, H, KV, window, pos + t0,  \
               k + t0, v + t0, scale, softcap, sinks, ggml, sa, xt, xr, xk);                                                         \
    else if (z <= 1)                                                                                                                 \
        launch(k_as_one<HD, KH, GG>, dim3(r, H / GG), AS_THREADS, 0, d->stream, qt, ot, H, KV, window, pos + t0, k + t0, v + t0,    \
               scale, softcap, sinks, ggml, sc, stride, sa, xt, xr, xk);                                                             \
    else {                                                                                                                           \
        launch(k_as_scores<HD, KH, GG, AS_U_SCORES>, dim3(r, H / GG, z), AS_THREADS, 0, d->stream, qt, H, KV, window, pos + t0,      \
               k + t0, scale, softcap, sc, stride, sa);                                                                              \
        launch(k_as_values<HD, KH, GG, 4>, dim3(r, H / GG, z), AS_THREADS, 0, d->stream, ot, H, KV, window, pos + t0, v + t0, sinks,\
               ggml, sc, stride, sa, xt, xr, xk);                                                                                    \
    }
#define AS2(HD, KH)                                                                                                                  \
    if (gg == 8) { AS3(HD, KH, (HD >= 256 ? 1 : 8)) }                                                                              \
    else if (gg == 4) { AS3(HD, KH, (HD >= 512 ? 1 : 4)) }                                                                         \
    else if (gg == 2) { AS3(HD, KH, 2) }                                                                                           \
    else { AS3(HD, KH, 1) }
#define AS(HD)                                                                                                                       \
    if (kv16) { AS2(HD, 1) } else { AS2(HD, 0) }
        switch (hd) {
        case 32: AS(32); break;
        case 64: AS(64); break;
        case 128: AS(128); break;
        case 256: AS(256); break;
        default: AS(512); break;
        }
#undef AS
#undef AS2
#undef AS3
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return set_status("attention", e);
    }
    return 0;
}

extern "C" HIDDEN int cuda_attention_split(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window,
                                           const int *pos, const void *const *k, const void *const *v, float scale, float softcap,
                                           const float *sinks, int ggml, float *scores, int stride, int wtype, void *xq, int kv16,
                                           int z) {
    if (T <= 0) return 0;
    if (!cuda_attention_split_ok(d, H, KV, hd) || z < 1 || z > d->att_split || (xq && !cuda_attention_q_ok(wtype, H, hd))) return -1;
    size_t xr = xq ? cuda_act_row_size(wtype, H * hd) : 0;
    return cuda_att_split_run(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, (uint8_t *)xq, xr,
                         xq && is_k(wtype), kv16, z);
}

extern "C" HIDDEN int cuda_attention_split_ok(cuda_dev *d, int H, int KV, int hd) { return d->att_split > 0 && KV > 0 && H % KV == 0 && as_hd_ok(hd); }
