// Attention over the KV cache: a block a (row, query head) (k_attention),
// or for decode rows a row's positions split over blocks (k_att_scores,
// k_att_values: flash-decoding), as cuda_attention_kv chooses; either may
// write the head's output quantized for the next product.
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

// One block per (row, query head): scores over the row's window of its
// cache, softmax (with a sink, softcap), then the values. scores: stride
// floats per (row, head). NE = hd / 32 (a head of 32 NE): each warp takes 4
// positions at a time, the lanes NE values of each, the loads of the 4 in
// flight together (positions past the window read the last one and are
// dropped); NE = 0: any hd, a position at a time.
enum { ATT_THREADS = 512 }; // (16 warps: a decode row's positions in fewer rounds)

template <int NE, int PRE, int KH>
static __global__ void __launch_bounds__(ATT_THREADS) k_attention(const float *q, float *out, int H, int KV, int hd, int window, const int *pos,
                                                          const void *const *kc, const void *const *vc, float scale, float softcap,
                                                          const float *sinks, int ggml, float *scores, int stride, uint8_t *xq, size_t xr,
                                                          int xk) {
    __shared__ float sh[32];
    __shared__ float part[ATT_THREADS / 32][512];
    const int t = blockIdx.x, h = blockIdx.y, kh = h / (H / KV), nq = H * hd, nkv = KV * hd;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    // PRE (decode rows, each its sequence's only row of the pass): the cache
    // rows before position hi are no kernel's of this pass, so the first
    // round's K rows are read, its V rows asked into L1 and the rest into L2
    // before the wait for the kernel before (which writes q and row hi)
    const int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    typedef typename kvel<KH>::T KT;
    const KT *k = (const KT *)kc[t] + (size_t)kh * hd + (size_t)lo * nkv, *v = (const KT *)vc[t] + (size_t)kh * hd + (size_t)lo * nkv;
    enum { NK = PRE && NE > 0 && NE <= 8 ? NE : 1, EPL = 128 / sizeof(KT) }; // (EPL: elements a 128-byte line)
    float k0[4][NK];
    if (PRE && NE > 0 && NE <= 8) {
#pragma unroll
        for (int g = 0; g < 4; g++) {
            const int j = wp + g * nw;
            if (j < n - 1) {
#pragma unroll
                for (int e = 0; e < NK; e++) k0[g][e] = kvf(k[(size_t)j * nkv + lane + 32 * e]);
                if (lane < (hd + EPL - 1) / EPL) asm volatile("prefetch.global.L1 [%0];" ::"l"(v + (size_t)j * nkv + EPL * lane));
            }
        }
        const int G = H / KV, lines = (hd + EPL - 1) / EPL, first = 4 * nw;
        for (int i = (h % G) * blockDim.x + threadIdx.x; i < (n - 1 - first) * lines; i += G * blockDim.x) {
            const size_t o = (size_t)(first + i / lines) * nkv + EPL * (i % lines);
            asm volatile("prefetch.global.L2 [%0];" ::"l"(k + o));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(v + o));
        }
    }
    PDL_ENTRY();
    const float *qh = q + (size_t)t * nq + (size_t)h * hd;
    float *s = scores + ((size_t)t * H + h) * stride;
    if (NE) {
        float qv[NE > 0 ? NE : 1];
#pragma unroll
        for (int e = 0; e < NE; e++) qv[e] = qh[lane + 32 * e];
        for (int j0 = wp; j0 < n; j0 += 4 * nw) {
            float a[4];
#pragma unroll
            for (int g = 0; g < 4; g++) {
                int j = min(j0 + g * nw, n - 1);
                const KT *kr = k + (size_t)j * nkv;
                a[g] = 0.0f;
                if (PRE && NE <= 8 && j0 == wp && j < n - 1) {
#pragma unroll
                    for (int e = 0; e < NK; e++) a[g] = fmaf(qv[e], k0[g][e], a[g]);
                } else {
#pragma unroll
                    for (int e = 0; e < NE; e++) a[g] = fmaf(qv[e], kvf(kr[lane + 32 * e]), a[g]);
                }
            }
#pragma unroll
            for (int g = 0; g < 4; g++) {
                float acc = warp_sum(a[g]) * scale;
                if (softcap) acc = softcap * tanhf(acc / softcap);
                if (lane == 0 && j0 + g * nw < n) s[j0 + g * nw] = acc;
            }
        }
    } else {
        for (int j = wp; j < n; j += nw) { // a warp per position, the lanes along the head
            const KT *kr = k + (size_t)j * nkv;
            float acc = 0.0f;
            for (int i = lane; i < hd; i += 32) acc = fmaf(qh[i], kvf(kr[i]), acc);
            acc = warp_sum(acc) * scale;
            if (softcap) acc = softcap * tanhf(acc / softcap);
            if (lane == 0) s[j] = acc;
        }
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
    // the values: each warp its positions, the lanes along the head; the
    // warps' sums added in order
    float acc[16];
#pragma unroll
    for (int e = 0; e < 16; e++) acc[e] = 0.0f;
    if (NE) {
        for (int j0 = wp; j0 < n; j0 += 4 * nw) {
            float vv[4][NE > 0 ? NE : 1], p[4];
#pragma unroll
            for (int g = 0; g < 4; g++) {
                int j = min(j0 + g * nw, n - 1);
                p[g] = j0 + g * nw < n ? s[j] : 0.0f;
#pragma unroll
                for (int e = 0; e < NE; e++) vv[g][e] = kvf(v[(size_t)j * nkv + lane + 32 * e]);
            }
#pragma unroll
            for (int g = 0; g < 4; g++)
#pragma unroll
                for (int e = 0; e < NE; e++) acc[e] = fmaf(p[g], vv[g][e], acc[e]);
        }
    } else {
        for (int j = wp; j < n; j += nw) {
            const KT *vr = v + (size_t)j * nkv;
            float p = s[j];
#pragma unroll
            for (int e = 0; e < 16; e++)
                if (lane + 32 * e < hd) acc[e] = fmaf(p, kvf(vr[lane + 32 * e]), acc[e]);
        }
    }
#pragma unroll
    for (int e = 0; e < 16; e++)
        if (lane + 32 * e < hd) part[wp][lane + 32 * e] = acc[e];
    __syncthreads();
    float *o = out + (size_t)t * nq + (size_t)h * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < nw; w++) a += part[w][i];
        o[i] = a;
    }
    if (xq) { // the head's blocks of the row the next product reads, from the values just written (cuda_quantize's)
        __syncthreads();
        att_quant_head(o, xq, xr, xk, t, h, hd, nq);
    }
}
// ---------------------------------------------------------------------------
// Decode attention with a row's positions split over blocks (flash-decoding):
// few rows and heads would otherwise leave one SM to read a head's whole K
// and V. A row's n positions go in S = ceil(n / C) chunks of C = max(chunk,
// ceil(n / spl)) (from n alone: a row's values do not depend on the rows
// beside it, so a batch's rows equal their single decodes), a block a (row,
// head, chunk), in two kernels: k_att_scores writes the chunk's scores and
// their (max, sum of exp); k_att_values takes the row's max and sum from the
// S pairs, the chunk's probabilities (ggml: rounded to f16, as the CPU's) and
// their values; the last of a (row, head)'s blocks adds the S parts in
// chunk order, writes the head's output and its quantized blocks.
enum { AS_THREADS = 128 };
struct att_split_args { int spl, chunk; float *part; float2 *stat; int *cnt; };

static __device__ __forceinline__ int att_chunk_len(int n, int spl, int chunk) {
    int c = (n + spl - 1) / spl;
    return c > chunk ? c : chunk;
}

// GG heads a block: the query heads h0 .. h0 + GG - 1 of one KV head read
// each K and V row of the chunk once for all of them (GQA: G = H / KV query
// heads share a KV head; GG the largest of 8, 4, 2, 1 dividing G). Each
// head's arithmetic is the one-head block's, in the same order: its results
// do not depend on GG.
template <int NE, int KH, int GG>
static __global__ void __launch_bounds__(AS_THREADS) k_att_scores(const float *q, int H, int KV, int hd, int window, const int *pos,
                                                                 const void *const *kc, float scale, float softcap, float *scores,
                                                                 int stride, att_split_args sa) {
    PDL_ENTRY();
    __shared__ float sh[32];
    int t = blockIdx.x, h0 = blockIdx.y * GG, c = blockIdx.z, kh = h0 / (H / KV), nq = H * hd, nkv = KV * hd;
    int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    int C = att_chunk_len(n, sa.spl, sa.chunk), S = (n + C - 1) / C;
    if (c >= S) return;
    int a = c * C, b = a + C < n ? a + C : n;
    typedef typename kvel<KH>::T KT;
    const float *qh = q + (size_t)t * nq + (size_t)h0 * hd;
    const KT *k = (const KT *)kc[t] + (size_t)kh * hd + (size_t)lo * nkv;
    float *s = scores + ((size_t)t * H + h0) * stride;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = AS_THREADS / 32;
    float qv[GG][NE], m[GG];
#pragma unroll
    for (int g = 0; g < GG; g++) {
        m[g] = -INFINITY;
#pragma unroll
        for (int e = 0; e < NE; e++) qv[g][e] = qh[(size_t)g * hd + lane + 32 * e];
    }
    for (int j0 = a + wp; j0 < b; j0 += 4 * nw) {
        float acc[4][GG];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const KT *kr = k + (size_t)min(j0 + r * nw, b - 1) * nkv;
            float kv[NE];
#pragma unroll
            for (int e = 0; e < NE; e++) kv[e] = kvf(kr[lane + 32 * e]);
#pragma unroll
            for (int g = 0; g < GG; g++) {
                acc[r][g] = 0.0f;
#pragma unroll
                for (int e = 0; e < NE; e++) acc[r][g] = fmaf(qv[g][e], kv[e], acc[r][g]);
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int g = 0; g < GG; g++) {
                float v = warp_sum(acc[r][g]) * scale;
                if (softcap) v = softcap * tanhf(v / softcap);
                if (j0 + r * nw < b) {
                    m[g] = fmaxf(m[g], v);
                    if (lane == 0) s[(size_t)g * stride + j0 + r * nw] = v;
                }
            }
    }
#pragma unroll
    for (int g = 0; g < GG; g++) {
        float mg = block_max(m[g], sh); // (its barriers also make the scores written visible to the block)
        float l = 0.0f;
        for (int j = a + (int)threadIdx.x; j < b; j += AS_THREADS) l += expf(s[(size_t)g * stride + j] - mg);
        l = block_sum(l, sh);
        if (threadIdx.x == 0) sa.stat[((size_t)t * H + h0 + g) * sa.spl + c] = make_float2(mg, l);
    }
}

template <int NE, int KH, int GG>
static __global__ void __launch_bounds__(AS_THREADS) k_att_values(float *out, int H, int KV, int hd, int window, const int *pos,
                                                                 const void *const *vc, const float *sinks, int ggml,
                                                                 const float *scores, int stride, att_split_args sa, uint8_t *xq,
                                                                 size_t xr, int xk) {
    PDL_ENTRY();
    __shared__ float red[GG][AS_THREADS / 32][NE * 32];
    __shared__ int last;
    int t = blockIdx.x, h0 = blockIdx.y * GG, c = blockIdx.z, kh = h0 / (H / KV), nq = H * hd, nkv = KV * hd;
    int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
    int C = att_chunk_len(n, sa.spl, sa.chunk), S = (n + C - 1) / C;
    if (c >= S) return;
    int a = c * C, b = a + C < n ? a + C : n;
    const size_t rh0 = (size_t)t * H + h0;
    // each head's max and sum from the chunks' pairs, in chunk order
    float M[GG], L[GG];
#pragma unroll
    for (int g = 0; g < GG; g++) {
        const float2 *st = sa.stat + (rh0 + g) * sa.spl;
        M[g] = sinks ? sinks[h0 + g] : -INFINITY, L[g] = 0.0f;
        for (int i = 0; i < S; i++) M[g] = fmaxf(M[g], st[i].x);
        for (int i = 0; i < S; i++) L[g] += st[i].y * expf(st[i].x - M[g]);
        if (sinks) L[g] += expf(sinks[h0 + g] - M[g]);
    }
    const float *s = scores + rh0 * stride;
    const typename kvel<KH>::T *v = (const typename kvel<KH>::T *)vc[t] + (size_t)kh * hd + (size_t)lo * nkv;
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = AS_THREADS / 32;
    float acc[GG][NE];
#pragma unroll
    for (int g = 0; g < GG; g++)
#pragma unroll
        for (int e = 0; e < NE; e++) acc[g][e] = 0.0f;
    for (int j0 = a + wp; j0 < b; j0 += 4 * nw) {
        float vv[4][NE], p[4][GG];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int j = min(j0 + r * nw, b - 1);
#pragma unroll
            for (int g = 0; g < GG; g++) {
                float pj = expf(s[(size_t)g * stride + j] - M[g]) / L[g];
                p[r][g] = j0 + r * nw < b ? (ggml ? f16_round(pj) : pj) : 0.0f;
            }
#pragma unroll
            for (int e = 0; e < NE; e++) vv[r][e] = kvf(v[(size_t)j * nkv + lane + 32 * e]);
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int g = 0; g < GG; g++)
#pragma unroll
                for (int e = 0; e < NE; e++) acc[g][e] = fmaf(p[r][g], vv[r][e], acc[g][e]);
    }
#pragma unroll
    for (int g = 0; g < GG; g++)
#pragma unroll
        for (int e = 0; e < NE; e++) red[g][wp][lane + 32 * e] = acc[g][e];
    __syncthreads();
    float *o = out + (size_t)t * nq + (size_t)h0 * hd; // (the GG heads' outputs, one after another)
    if (S == 1) {
        for (int i = threadIdx.x; i < GG * hd; i += AS_THREADS) {
            const int g = i / hd, x = i % hd;
            o[i] = (red[g][0][x] + red[g][1][x]) + (red[g][2][x] + red[g][3][x]);
        }
    } else {
        for (int i = threadIdx.x; i < GG * hd; i += AS_THREADS) {
            const int g = i / hd, x = i % hd;
            sa.part[((rh0 + g) * sa.spl + c) * hd + x] = (red[g][0][x] + red[g][1][x]) + (red[g][2][x] + red[g][3][x]);
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(sa.cnt + rh0, 1) == S - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        for (int i = threadIdx.x; i < GG * hd; i += AS_THREADS) {
            const int g = i / hd, x = i % hd;
            const float *part = sa.part + (rh0 + g) * sa.spl * hd;
            float r = 0.0f;
            for (int k = 0; k < S; k++) r += __ldcg(part + (size_t)k * hd + x);
            o[i] = r;
        }
        if (threadIdx.x == 0) sa.cnt[rh0] = 0; // (for the next launch, and the graph's next replay)
    }
    if (xq) {
        __syncthreads();
        for (int g = 0; g < GG; g++) att_quant_head(o + (size_t)g * hd, xq, xr, xk, t, h0 + g, hd, nq);
    }
}

// the split kernels for rows [t0, t0 + T) -- the buffers for AS_ROWS rows at a time
enum { AS_ROWS = 64 };
static int att_split_run(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                         const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml,
                         float *scores, int stride, uint8_t *xq, size_t xr, int xk, int kv16) {
    const int spl = d->att_split, rows = T < AS_ROWS ? T : AS_ROWS;
    size_t need = sizeof(float) * (size_t)rows * H * spl * (hd + 2), nc = sizeof(int) * (size_t)rows * H;
    if (need > d->ap_cap || nc > d->acnt_cap) {
        cudaStreamCaptureStatus cs;
        if (cudaStreamIsCapturing(d->stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return -1;
        cudaStreamSynchronize(d->stream);
        cudaFree(d->ap), cudaFree(d->acnt);
        d->ap = NULL, d->acnt = NULL, d->ap_cap = d->acnt_cap = 0;
        if (cudaMalloc((void **)&d->ap, need) != cudaSuccess || cudaMalloc((void **)&d->acnt, nc) != cudaSuccess ||
            cudaMemset(d->acnt, 0, nc) != cudaSuccess)
            return set_status("attention partial sums", cudaGetLastError());
        d->ap_cap = need, d->acnt_cap = nc;
    }
    const size_t nq = (size_t)H * hd;
    const int G = H / KV; // (query heads a KV head: the blocks take 8, 4, 2 or 1 of them)
    for (int t0 = 0; t0 < T; t0 += rows) {
        int r = T - t0 < rows ? T - t0 : rows;
        att_split_args sa = {spl, d->att_chunk, d->ap, (float2 *)(d->ap + (size_t)rows * H * spl * hd), d->acnt};
        const float *qt = q + t0 * nq;
        float *ot = out + t0 * nq, *sc = scores + (size_t)t0 * H * stride;
        uint8_t *xt = xq ? xq + xr * t0 : NULL;
#define AS3(ne, kh, gg)                                                                                                              \
    do {                                                                                                                             \
        dim3 g(r, H / gg, spl);                                                                                                      \
        launch(k_att_scores<ne, kh, gg>, g, AS_THREADS, 0, d->stream, qt, H, KV, hd, window, pos + t0, k + t0, scale, softcap, sc, stride, \
               sa);                                                                                                                  \
        launch(k_att_values<ne, kh, gg>, g, AS_THREADS, 0, d->stream, ot, H, KV, hd, window, pos + t0, v + t0, sinks, ggml,        \
               (const float *)sc, stride, sa, xt, xr, xk);                                                                           \
    } while (0)
#define AS2(ne, kh)                                                                                                                  \
    if (ne > 8 || G % 2) AS3(ne, kh, 1); /* (a head of 512: one a block) */                                                     \
    else if (G % 4) AS3(ne, kh, (ne > 8 ? 1 : 2));                                                                                     \
    else if (G % 8) AS3(ne, kh, (ne > 8 ? 1 : 4));                                                                                     \
    else AS3(ne, kh, (ne > 8 ? 1 : 8))
#define AS(ne)                                                                                                                       \
    if (kv16) { AS2(ne, 1); } else { AS2(ne, 0); }
        switch (hd) {
        case 32: AS(1); break;
        case 64: AS(2); break;
        case 96: AS(3); break;
        case 128: AS(4); break;
        case 256: AS(8); break;
        default: AS(16); break;
        }
#undef AS
#undef AS2
#undef AS3
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return set_status("attention", e);
    }
    return 0;
}

extern "C" HIDDEN int cuda_attention_q_ok(int wtype, int H, int hd) {
    return !is_float(wtype) && cuda_act_row_size(wtype, H * hd) && hd % (is_k(wtype) ? QK_K : QK) == 0;
}

static int att_hd_ok(int hd) { return hd == 32 || hd == 64 || hd == 96 || hd == 128 || hd == 256 || hd == 512; }

extern "C" HIDDEN int cuda_attention_kv(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                        const void *const *k, const void *const *v, float scale, float softcap, const float *sinks,
                                        int ggml, float *scores, int stride, int wtype, void *xq, int decode, int kv16) {
    if (T <= 0) return 0;
    if (hd > 512 || (xq && !cuda_attention_q_ok(wtype, H, hd))) return -1;
    size_t xr = xq ? cuda_act_row_size(wtype, H * hd) : 0;
    int xk = xq && is_k(wtype);
    if (d->att_split > 0 && att_hd_ok(hd))
        return att_split_run(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, (uint8_t *)xq, xr, xk,
                             kv16);
    dim3 g(T, H);
    const int pre = decode && d->att_pf;
#define ATT(ne)                                                                                                                       \
    launch(kv16 ? (pre ? k_attention<ne, 1, 1> : k_attention<ne, 0, 1>) : pre ? k_attention<ne, 1, 0> : k_attention<ne, 0, 0>, g,     \
           ATT_THREADS, 0, d->stream, q, out, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, (uint8_t *)xq, xr, xk)
    switch (hd) {
    case 32: ATT(1); break;
    case 64: ATT(2); break;
    case 96: ATT(3); break;
    case 128: ATT(4); break;
    case 256: ATT(8); break;
    case 512: ATT(16); break;
    default: ATT(0);
    }
#undef ATT
    return launched("attention");
}

extern "C" HIDDEN int cuda_attention_d(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                       const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                       int ggml, float *scores, int stride, int wtype, void *xq, int decode) {
    return cuda_attention_kv(d, q, out, T, H, KV, hd, window, pos, (const void *const *)k, (const void *const *)v, scale, softcap, sinks,
                             ggml, scores, stride, wtype, xq, decode, 0);
}

extern "C" HIDDEN int cuda_attention_q(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                       const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                       int ggml, float *scores, int stride, int wtype, void *xq) {
    return cuda_attention_d(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, wtype, xq, 0);
}

extern "C" HIDDEN int cuda_attention(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks,
                                     int ggml, float *scores, int stride) {
    return cuda_attention_d(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, 0, NULL, 0);
}
