// Attention over the KV cache: a block a (row, query head) (k_attention),
// or for decode rows a row's positions split over blocks (attention_split.cu:
// flash-decoding), as cuda_attention_kv chooses; either may write the head's
// output quantized for the next product.
#include "compute/cuda/attention.cuh"

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
extern "C" HIDDEN int cuda_attention_q_ok(int wtype, int H, int hd) {
    return !is_float(wtype) && cuda_act_row_size(wtype, H * hd) && hd % (is_k(wtype) ? QK_K : QK) == 0;
}

extern "C" HIDDEN int cuda_attention_kv(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                                        const void *const *k, const void *const *v, float scale, float softcap, const float *sinks,
                                        int ggml, float *scores, int stride, int wtype, void *xq, int decode, int kv16) {
    if (T <= 0) return 0;
    if (hd > 512 || (xq && !cuda_attention_q_ok(wtype, H, hd))) return -1;
    size_t xr = xq ? cuda_act_row_size(wtype, H * hd) : 0;
    int xk = xq && is_k(wtype);
    if (d->att_split_all && cuda_attention_split_ok(d, H, KV, hd)) // (INFER_CUDA_ATT_SPLIT=N: every row's positions split)
        return cuda_att_split_run(d, q, out, T, H, KV, hd, window, pos, k, v, scale, softcap, sinks, ggml, scores, stride, (uint8_t *)xq, xr, xk,
                             kv16, d->att_split);
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
