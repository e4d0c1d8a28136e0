// The norms (k_norm: RMS, RMS with 1 + w, layer norm) and the fused steps of
// a layer (k_chain, k_chain_reg: norm, residual, the next norm and its
// quantized row in one kernel).
#include "compute/cuda/common.cuh"
#include "compute/cuda/quant.cuh"

// The threads of a row's block in the norms (k_norm, k_chain, k_chain_reg:
// the same count for a row of n in each, so their sums are added in the
// same order and the fused kernels give the plain ones' bits): 256 up to n =
// 512 (k_qkv's per-head norm takes 256 too), then a thread per element up
// to 1024. A decode step's norm is one block: its loads, sums and
// quantization run in fewer serial steps a thread with more threads.
static int norm_threads(int n) { return n <= 512 ? 256 : n >= 1024 ? 1024 : (n + 31) / 32 * 32; }

// kind: 0 rms, 1 rms with (1 + w), 2 layer norm (backend.h's enum norm_op)
static __global__ void k_norm(float *out, const float *x, const float *w, const float *b, int n, float eps, int kind) {
    PDL_ENTRY();
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
    launch(k_norm, rows, norm_threads(n), 0, d->stream, out, x, w, b, n, eps, kind);
    return launched("norm");
}

// the normalized value of element i of a row (k_norm's expression)
static __device__ __forceinline__ float normed(const float *xr, const float *w, float r, int i, int kind) {
    float sc = w ? (kind == 1 ? 1.0f + w[i] : w[i]) : 1.0f;
    return xr[i] * r * sc;
}

// A block's row of n normalized (x * r * w) into orow and quantized into the
// activation row yr: a warp per 32-block (q8_0) or per 256-block (q8_K), as
// k_quant_q8_0 / k_quant_q8_K quantize.
static __device__ void norm_quant_row(const float *x, const float *w, float r, int kind, int n, float *orow, uint8_t *yr, int kq) {
    int lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    if (!kq) {
        for (int b = wp; b < n / QK; b += nw) {
            float v = normed(x, w, r, QK * b + lane, kind);
            orow[QK * b + lane] = v;
            warp_q8_0(v, lane, yr, n / QK, b);
        }
        return;
    }
    for (int b = wp; b < n / QK_K; b += nw) {
        float v[8];
        for (int k = 0; k < 8; k++) {
            int i = QK_K * b + 8 * lane + k;
            orow[i] = v[k] = normed(x, w, r, i, kind);
        }
        warp_q8_K(v, lane, yr, n / QK_K, b);
    }
}

// ---------------------------------------------------------------------------
// fused steps of a layer (the CUDA backend chains the forward pass's
// operations into these; each gives the floats and bytes of the kernels above
// run one after the other: the same threads, sums and expressions)

// One block of norm_threads(n) per row: [o = norm_a(o)] [x += o * s] [xn =
// norm_b(x) [quantized into xq]], the stages present as flagged.
// k_chain with the row in registers (n <= R x the block's threads): thread t
// holds elements t + NT k (NT the block's threads), the elements the loops
// of k_chain give it, so every sum and value is theirs; a q8_0 block is one
// warp's (block b: warp b % (NT / 32) at k = b / (NT / 32)), a q8_K
// super-block goes through shared memory.
enum { CHAIN_REG = 6 };
template <int R>
static __global__ void __launch_bounds__(1024) k_chain_reg(cuda_chain c, size_t xr) {
    PDL_ENTRY();
    __shared__ float sh[32];
    extern __shared__ float row[]; // (q8_K: the normalized row)
    const int n = c.n, t = threadIdx.x, NT = blockDim.x;
    float *o = c.o ? c.o + (size_t)blockIdx.x * n : NULL, *x = c.x ? c.x + (size_t)blockIdx.x * n : NULL;
    float ov[R], xv[R], sa[R], sb[R];
    // every load first (one wait), then the stages
#pragma unroll
    for (int k = 0; k < R; k++) {
        int i = t + NT * k;
        bool in = i < n;
        ov[k] = in && (c.norm_a || c.residual) ? o[i] : 0.0f;
        xv[k] = in && (c.residual || c.norm_b) ? x[i] : 0.0f;
        sa[k] = in && c.wa ? (c.kind_a == 1 ? 1.0f + c.wa[i] : c.wa[i]) : 1.0f;
        sb[k] = in && c.wb ? (c.kind_b == 1 ? 1.0f + c.wb[i] : c.wb[i]) : 1.0f;
    }
    if (c.norm_a) {
        float s = 0;
#pragma unroll
        for (int k = 0; k < R; k++)
            if (t + NT * k < n) s += ov[k] * ov[k];
        float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps_a);
#pragma unroll
        for (int k = 0; k < R; k++)
            if (t + NT * k < n) o[t + NT * k] = ov[k] = ov[k] * r * sa[k];
    }
    if (c.residual) {
#pragma unroll
        for (int k = 0; k < R; k++)
            if (t + NT * k < n) x[t + NT * k] = xv[k] = __fmaf_rn(ov[k], c.s, xv[k]);
    }
    if (!c.norm_b) return;
    float s = 0;
#pragma unroll
    for (int k = 0; k < R; k++)
        if (t + NT * k < n) s += xv[k] * xv[k];
    float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps_b);
    float *xn = c.xn + (size_t)blockIdx.x * n;
    uint8_t *yr = c.xq + xr * blockIdx.x;
    const int lane = t % 32, wp = t / 32, nw = NT / 32;
#pragma unroll
    for (int k = 0; k < R; k++) {
        int i = t + NT * k;
        if (i >= n) break;
        float v = xv[k] * r * sb[k];
        xn[i] = v;
        if (c.quant == 0) { // block nw k + wp: whole in this warp (n is a multiple of 32)
            warp_q8_0(v, lane, yr, n / QK, nw * k + wp);
        } else if (c.quant == 1) {
            row[i] = v;
        }
    }
    if (c.quant != 1) return;
    __syncthreads();
    for (int b = wp; b < n / QK_K; b += nw) {
        float v[8];
        for (int k = 0; k < 8; k++) v[k] = row[QK_K * b + 8 * lane + k];
        warp_q8_K(v, lane, yr, n / QK_K, b);
    }
}

static __global__ void k_chain(cuda_chain c, size_t xr) {
    PDL_ENTRY();
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
    if (c.quant < 0)
        for (int i = threadIdx.x; i < n; i += blockDim.x) xn[i] = normed(x, c.wb, r, i, c.kind_b);
    else
        norm_quant_row(x, c.wb, r, c.kind_b, n, xn, c.xq + xr * blockIdx.x, c.quant);
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
    size_t xr = c->xq ? cuda_act_row_size(wtype, c->n) : 0;
    int nt = norm_threads(c->n), per = (c->n + nt - 1) / nt;
    size_t sm = k.quant == 1 ? sizeof(float) * c->n : 0;
    if (per <= 1) launch(k_chain_reg<1>, rows, nt, sm, d->stream, k, xr);
    else if (per <= 2) launch(k_chain_reg<2>, rows, nt, sm, d->stream, k, xr);
    else if (per <= 3) launch(k_chain_reg<3>, rows, nt, sm, d->stream, k, xr);
    else if (per <= CHAIN_REG) launch(k_chain_reg<CHAIN_REG>, rows, nt, sm, d->stream, k, xr);
    else launch(k_chain, rows, nt, 0, d->stream, k, xr);
    return launched("norm chain");
}
