// Prompt products on the tensor cores: Y (T, rows) = X (T, cols) W^T with
// 64 x 64 tiles of (rows, tokens), 32 columns a step: the weights' tile
// decoded to f16 (the CPU's dequantized values, rounded), the activations'
// rounded to f16, WMMA 16 x 16 x 16 products summed in f32. Less exact than
// the q8 products (f16 inputs; test_cuda holds it to the dequantized matrix
// at a documented tolerance), and far faster once there are many tokens.
// Large prompts go to cuBLAS instead (blas_gemm, below).
#include "compute/cuda/common.cuh"
#include "compute/cuda/units.cuh"

enum { GM = 64, GN = 64, GK = 32, GLD = GK + 8, GCL = GM + 4 };

// the 16 weights (half h of 32-block kb) of row r as floats
// 16 bytes at a 16-byte boundary in one load (every field deq reads 16 of is
// so placed: the split arrays, the k-quant blocks of 144 and 176 bytes)
static __device__ __forceinline__ void ld16(const uint8_t *p, uint8_t *o) { *(int4 *)o = *(const int4 *)p; }

template <int T> struct deq;
template <> struct deq<DT_Q8_0> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        size_t blk = (size_t)m.r * m.nb + kb;
        __align__(16) int8_t q[16];
        ld16(m.w + 32 * blk + 16 * h, (uint8_t *)q);
        float d = ld_h2(m.w + (size_t)32 * m.rows * m.nb + 2 * blk);
        for (int k = 0; k < 16; k++) v[k] = d * (float)q[k];
    }
};
template <> struct deq<DT_Q4_0> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        size_t blk = (size_t)m.r * m.nb + kb;
        __align__(16) uint8_t q[16];
        ld16(m.w + 16 * blk, q);
        float d = ld_h2(m.w + (size_t)16 * m.rows * m.nb + 2 * blk);
        for (int k = 0; k < 16; k++) v[k] = d * (float)((h ? q[k] >> 4 : q[k] & 15) - 8);
    }
};
template <> struct deq<DT_Q5_0> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        size_t blk = (size_t)m.r * m.nb + kb, nall = (size_t)m.rows * m.nb;
        __align__(16) uint8_t q[16];
        ld16(m.w + 16 * blk, q);
        uint32_t qh = *(const uint32_t *)(m.w + 16 * nall + 4 * blk);
        float d = ld_h2(m.w + 20 * nall + 2 * blk);
        for (int k = 0; k < 16; k++) v[k] = d * (float)(((h ? q[k] >> 4 : q[k] & 15) | (int)((qh >> (16 * h + k)) & 1) << 4) - 16);
    }
};
template <> struct deq<DT_Q4_K> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        int b = kb / 8, j = kb % 8, sc0, m0, sc1, m1;
        const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * qtype<DT_Q4_K>::B;
        scales_k4(w, j & ~1, &sc0, &m0, &sc1, &m1);
        float d = ld_h2(w) * (float)(j & 1 ? sc1 : sc0), mn = ld_h2(w + 2) * (float)(j & 1 ? m1 : m0);
        __align__(16) uint8_t q[16];
        ld16(w + 16 + 32 * (j / 2) + 16 * h, q);
        for (int k = 0; k < 16; k++) v[k] = __fsub_rn(__fmul_rn(d, (float)(j & 1 ? q[k] >> 4 : q[k] & 15)), mn);
    }
};
template <> struct deq<DT_Q5_K> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        int b = kb / 8, j = kb % 8, sc0, m0, sc1, m1;
        const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * qtype<DT_Q5_K>::B;
        scales_k4(w, j & ~1, &sc0, &m0, &sc1, &m1);
        float d = ld_h2(w) * (float)(j & 1 ? sc1 : sc0), mn = ld_h2(w + 2) * (float)(j & 1 ? m1 : m0);
        __align__(16) uint8_t q[16], qh[16];
        ld16(w + 48 + 32 * (j / 2) + 16 * h, q), ld16(w + 16 + 16 * h, qh);
        for (int k = 0; k < 16; k++) v[k] = __fsub_rn(__fmul_rn(d, (float)((j & 1 ? q[k] >> 4 : q[k] & 15) | ((qh[k] >> j) & 1) << 4)), mn);
    }
};
template <> struct deq<DT_Q6_K> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        int b = kb / 8, j = kb % 8, hh = j / 4, g = j % 4;
        size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        __align__(16) uint8_t ql[16], qh[16];
        ld16(m.w + 128 * blk + 64 * hh + 32 * (g & 1) + 16 * h, ql), ld16(m.w + 128 * nall + 64 * blk + 32 * hh + 16 * h, qh);
        const int8_t *sc = (const int8_t *)(m.w + 192 * nall + 16 * blk);
        float d = ld_h2(m.w + 208 * nall + 2 * blk) * (float)sc[8 * hh + 2 * g + h];
        for (int k = 0; k < 16; k++) v[k] = d * (float)(((g >= 2 ? ql[k] >> 4 : ql[k] & 15) | ((qh[k] >> (2 * g)) & 3) << 4) - 32);
    }
};
template <> struct deq<DT_F16> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        __align__(16) __half p[16]; // (nb: the row's length)
        const uint8_t *src = m.w + 2 * ((size_t)m.r * m.nb + 32 * kb + 16 * h);
        ld16(src, (uint8_t *)p), ld16(src + 16, (uint8_t *)p + 16);
        for (int k = 0; k < 16; k++) v[k] = __half2float(p[k]);
    }
};
template <> struct deq<DT_BF16> {
    static __device__ void get(const wrow &m, int kb, int h, float *v) {
        __align__(16) uint16_t p[16];
        const uint8_t *src = m.w + 2 * ((size_t)m.r * m.nb + 32 * kb + 16 * h);
        ld16(src, (uint8_t *)p), ld16(src + 16, (uint8_t *)p + 16);
        for (int k = 0; k < 16; k++) v[k] = __uint_as_float((uint32_t)p[k] << 16);
    }
};

// The tiles' element type: f16, or bf16 for bf16 weights (their values
// exactly). Float weights (f16, bf16) keep their precision in the product:
// each activation goes in as two parts, x = hi + lo (each rounded to the
// element type), and both are multiplied: about 2^-22 (f16) or 2^-16 (bf16)
// of each activation is lost instead of 2^-11 or 2^-8.
template <int TY> struct gel {
    typedef __half E;
    static __device__ E cv(float v) { return __float2half_rn(v); }
    static __device__ float back(E e) { return __half2float(e); }
};
template <> struct gel<DT_BF16> {
    typedef __nv_bfloat16 E;
    static __device__ E cv(float v) { return __float2bfloat16_rn(v); }
    static __device__ float back(E e) { return __bfloat162float(e); }
};

// One step of K columns of a warp's 32 rows x 32 tokens, on the tensor cores:
// a0 its weight rows (ld elements apart), b0 its tokens' activations (ld
// apart), in NS parts pstride elements apart, the small parts first.
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc_frag;
template <typename E, int NS, int K>
static __device__ __forceinline__ void warp_mma(acc_frag (&acc)[2][2], const E *a0, const E *b0, int ld, size_t pstride) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> a[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major> b[2];
        for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], a0 + 16 * i * ld + kk, ld);
        for (int p = NS - 1; p >= 0; p--) {
            for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], b0 + p * pstride + 16 * j * ld + kk, ld);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
    }
}

template <int TY>
static __global__ void __launch_bounds__(128) k_gemm(const uint8_t *w, int rows, int cols, int nb, const float *x, int T, float *y) {
    PDL_ENTRY();
    using namespace nvcuda;
    typedef typename gel<TY>::E E;
    enum { NS = TY == DT_F16 || TY == DT_BF16 ? 2 : 1 }; // activation parts
    __shared__ __align__(32) E sw[GM][GLD], sx[NS][GN][GLD];
    __shared__ __align__(32) float sc[GN][GCL];
    const int tid = threadIdx.x, warp = tid / 32, r0 = blockIdx.x * GM, t0 = blockIdx.y * GN;
    const int lr = tid / 2, lh = tid % 2; // this thread's tile row (or token) and half of the 32 columns
    const int wr = warp / 2, wt = warp % 2;
    acc_frag acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    const int r = r0 + lr < rows ? r0 + lr : rows - 1, t = t0 + lr;
    const wrow m = {w, rows, r, nb};
    for (int kb = 0; kb < cols / GK; kb++) {
        float v[16];
        deq<TY>::get(m, kb, lh, v);
        for (int k = 0; k < 16; k++) sw[lr][16 * lh + k] = gel<TY>::cv(v[k]);
        if (t < T) {
            const float4 *xp = (const float4 *)(x + (size_t)t * cols + GK * kb + 16 * lh);
            for (int k = 0; k < 4; k++) {
                float4 f4 = xp[k];
                float f[4] = {f4.x, f4.y, f4.z, f4.w};
                for (int e = 0; e < 4; e++) {
                    E hi = gel<TY>::cv(f[e]);
                    sx[0][lr][16 * lh + 4 * k + e] = hi;
                    if (NS == 2) sx[NS - 1][lr][16 * lh + 4 * k + e] = gel<TY>::cv(f[e] - gel<TY>::back(hi));
                }
            }
        } else {
            for (int p = 0; p < NS; p++)
                for (int k = 0; k < 16; k++) sx[p][lr][16 * lh + k] = gel<TY>::cv(0.0f);
        }
        __syncthreads();
        warp_mma<E, NS, GK>(acc, &sw[32 * wr][0], &sx[0][32 * wt][0], GLD, (size_t)GN * GLD);
        __syncthreads();
    }
    // (tile rows i, tokens j) -> sc[token][row], then out with bounds
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::store_matrix_sync(&sc[32 * wt + 16 * j][32 * wr + 16 * i], acc[i][j], GCL, wmma::mem_col_major);
    __syncthreads();
    for (int e = tid; e < GM * GN; e += 128) {
        int tt = e / GM, rr = e % GM;
        if (t0 + tt < T && r0 + rr < rows) y[(size_t)(t0 + tt) * rows + r0 + rr] = sc[tt][rr];
    }
}

// The second tensor-core kernel: a block of 2 GR threads takes GR weight rows
// x 64 tokens (warps of 32 x 32, GR / 32 along the rows, 2 along the tokens),
// 64 columns a step (two 32-blocks: a thread dequantizes one block of one
// row, the tokens' activations go in 16 at a time), so that a block's
// barriers and tile stores are a quarter of k_gemm's per product, its warps
// twice as many. Each warp's results go out through shared memory, a row of
// 32 outputs a store. Columns a multiple of 64 (cuda_gemm falls back to
// k_gemm otherwise). Same arithmetic as k_gemm (the dequantized weights in
// the element type, the activations in NS parts, f32 sums).
enum { G2N = 64, G2K = 64, G2LD = G2K + 8, G2CL = 32 + 4 };
template <int TY, int GR, int XH = 0>
// Split over the columns (blockIdx.z of gridDim.z slices, each a run of whole
// 64-column steps): slice z writes its partial sums to y + z T rows, and
// k_gemm_sum adds the slices in order (the same sums every run). For few
// tokens, where rows / GR x tokens / 64 blocks would leave multiprocessors idle.
// XH: the activations come in as f16 already (k_xparts's, once a product, not
// once a block: a product of few tokens over many row blocks read them from L2
// as floats several times over the weights' bytes), the same values.
static __global__ void __launch_bounds__(2 * GR) k_gemm2(const uint8_t *w, int rows, int cols, int nb, const float *x, int T, float *y) {
    PDL_ENTRY();
    using namespace nvcuda;
    typedef typename gel<TY>::E E;
    enum { NS = TY == DT_F16 || TY == DT_BF16 ? 2 : 1, NT = 2 * GR, NW = NT / 32 };
    enum { LOOP = (GR + NS * G2N) * G2LD * sizeof(E), OUT = NW * 32 * G2CL * sizeof(float) };
    __shared__ __align__(128) unsigned char smem[LOOP > OUT ? LOOP : OUT];
    E(*sw)[G2LD] = (E(*)[G2LD])smem;                                  // [GR][G2LD]
    E(*sx)[G2N][G2LD] = (E(*)[G2N][G2LD])(smem + GR * G2LD * sizeof(E)); // [NS][G2N][G2LD]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, r0 = blockIdx.x * GR, t0 = blockIdx.y * G2N;
    const int wr = warp / 2, wt = warp % 2;
    acc_frag acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    const int lr = tid / 2, kh = tid % 2; // this thread's weight row and 32-block of the step
    const wrow m = {w, rows, r0 + lr < rows ? r0 + lr : rows - 1, nb};
    // activations: EPT columns of one token a thread
    enum { EPT = G2N * G2K / NT };
    const int xt = tid / (G2K / EPT), xc = tid % (G2K / EPT) * EPT;
    const float *xrow = t0 + xt < T ? x + (size_t)(t0 + xt) * cols : NULL;
    const int steps = cols / G2K, per = (steps + gridDim.z - 1) / gridDim.z;
    const int k_lo = (int)blockIdx.z * per * G2K, k_hi = min(cols, k_lo + per * G2K);
    y += (size_t)blockIdx.z * T * rows;
    for (int k0 = k_lo; k0 < k_hi; k0 += G2K) {
        for (int h = 0; h < 2; h++) {
            float v[16];
            __align__(16) E e[16];
            deq<TY>::get(m, k0 / 32 + kh, h, v);
            for (int k = 0; k < 16; k++) e[k] = gel<TY>::cv(v[k]);
            int4 *dst = (int4 *)&sw[lr][32 * kh + 16 * h];
            dst[0] = ((const int4 *)e)[0], dst[1] = ((const int4 *)e)[1];
        }
        if (XH) { // (NS 1: the f16 activations as they are, 16 bytes a load)
            const __half *xh = (const __half *)x + (size_t)(t0 + xt) * cols + k0 + xc;
            for (int c = 0; c < EPT; c += 8)
                *(int4 *)&sx[0][xt][xc + c] = xrow ? *(const int4 *)(xh + c) : make_int4(0, 0, 0, 0);
        } else
        for (int c = 0; c < EPT; c += 8) {
            __align__(16) E hi[8], lo[8];
            float f[8];
            if (xrow) {
                float4 a = *(const float4 *)(xrow + k0 + xc + c), b = *(const float4 *)(xrow + k0 + xc + c + 4);
                f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
            } else {
                for (int k = 0; k < 8; k++) f[k] = 0.0f;
            }
            for (int k = 0; k < 8; k++) hi[k] = gel<TY>::cv(f[k]), lo[k] = gel<TY>::cv(f[k] - gel<TY>::back(hi[k]));
            *(int4 *)&sx[0][xt][xc + c] = *(const int4 *)hi;
            if (NS == 2) *(int4 *)&sx[NS - 1][xt][xc + c] = *(const int4 *)lo;
        }
        __syncthreads();
        warp_mma<E, NS, G2K>(acc, &sw[32 * wr][0], &sx[0][32 * wt][0], G2LD, (size_t)G2N * G2LD);
        __syncthreads();
    }
    // the warp's 32 rows x 32 tokens -> its staging [token][row] -> y
    float(*cs)[G2CL] = (float(*)[G2CL])(smem + (size_t)warp * 32 * G2CL * sizeof(float));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::store_matrix_sync(&cs[16 * j][16 * i], acc[i][j], G2CL, wmma::mem_col_major);
    __syncwarp();
    const int r = r0 + 32 * wr + lane;
    for (int tt = 0; tt < 32; tt++) {
        int t = t0 + 32 * wt + tt;
        if (t < T && r < rows) y[(size_t)t * rows + r] = cs[tt][lane];
    }
}

// y = the sum of n slices of T x rows (slices ys apart), in slice order
static __global__ void k_gemm_sum(float *y, const float *part, size_t ys, int n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ys) return;
    float a = part[i];
    for (int z = 1; z < n; z++) a += part[(size_t)z * ys + i];
    y[i] = a;
}

static int gemm_type(int t) {
    return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K || t == DT_F16 || t == DT_BF16;
}

extern "C" HIDDEN int cuda_gemm_ok(int wtype, int cols, int T) {
    return T >= CUDA_GEMM_MIN_T && gemm_type(wtype) && cols > 0 && cols % (is_k(wtype) ? QK_K : QK) == 0;
}

// ---------------------------------------------------------------------------
// Large prompts through cuBLAS (cublasGemmEx, f32 sums on the tensor cores),
// with k_gemm2's arithmetic: f16 / bf16 weights as they are and the
// activations in two parts (hi + lo, the small part first, as warp_mma);
// quantized weights dequantized to f16 (deq: the CPU's values, rounded) into
// a scratch matrix, the activations rounded to f16. The same product for the
// same rows whatever else the pass holds (a sequence's rows as alone).

// x (n floats) as NS parts of gel<TY>'s element type: part p at out + p n
template <int TY, int NS>
static __global__ void k_xparts(const float *x, size_t n, typename gel<TY>::E *out) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    typename gel<TY>::E hi = gel<TY>::cv(v);
    out[i] = hi;
    if (NS == 2) out[n + i] = gel<TY>::cv(v - gel<TY>::back(hi));
}

// the weights of type TY (rows x cols) in f16: a thread per 16
template <int TY>
static __global__ void k_deq_f16(const uint8_t *w, int rows, int cols, int nb, __half *out) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, per = (size_t)cols / 16;
    if (i >= (size_t)rows * per) return;
    int r = (int)(i / per), c = (int)(i % per);
    const wrow m = {w, rows, r, nb};
    float v[16];
    deq<TY>::get(m, c / 2, c % 2, v);
    // (two 16-byte stores: a row's 16 values sit at a 32-byte boundary, cols % 16 == 0; stores of a half
    // at a time made each warp's write 16 partial-sector passes, ~250 GB/s)
    __align__(16) __half2 h2[8];
    for (int k = 0; k < 8; k++) h2[k] = __halves2half2(__float2half_rn(v[2 * k]), __float2half_rn(v[2 * k + 1]));
    uint4 *o = (uint4 *)(out + (size_t)r * cols + 16 * c);
    o[0] = *(const uint4 *)h2, o[1] = *(const uint4 *)(h2 + 4);
}

// 1 when cuBLAS takes this product: f16 / bf16 weights from 64 tokens, the
// quantized types from 256 (their dequantized copy then costs less than the
// product gains), matrices of 2M weights and more (smaller ones: k_gemm2)
static int blas_wants(cuda_dev *d, int wtype, int rows, int cols, int T) {
    if (d->blas_state < 0 || (long)rows * cols < (1L << 21)) return 0;
    if (T < (is_float(wtype) ? 64 : 256) || cols % 16) return 0;
    cudaStreamCaptureStatus st;
    if (cudaStreamIsCapturing(d->stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) return 0; // (no allocation in a graph)
    return blas_ready(d);
}

static int blas_gemm(cuda_dev *d, int wtype, const uint8_t *w, int rows, int cols, int nb, const float *x, int T, float *y, int lowp) {
    d->n_blas++, d->blas_total++;
    const int fl = is_float(wtype), ns = fl && !lowp ? 2 : 1;
    const size_t n = (size_t)T * cols;
    if (grow(d, &d->gx, &d->gx_cap, 2 * ns * n)) return -1;
    const void *wm = w;
    cudaDataType et = wtype == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    if (wtype == DT_BF16 && ns == 1) launch(k_xparts<DT_BF16, 1>, grid_for(n, 256), 256, 0, d->stream, x, n, (__nv_bfloat16 *)d->gx);
    else if (wtype == DT_BF16) launch(k_xparts<DT_BF16, 2>, grid_for(n, 256), 256, 0, d->stream, x, n, (__nv_bfloat16 *)d->gx);
    else if (fl && ns == 2) launch(k_xparts<DT_F16, 2>, grid_for(n, 256), 256, 0, d->stream, x, n, (__half *)d->gx);
    else launch(k_xparts<DT_F16, 1>, grid_for(n, 256), 256, 0, d->stream, x, n, (__half *)d->gx);
    if (!fl) {
        if (grow(d, &d->gw, &d->gw_cap, 2 * (size_t)rows * cols)) return -1;
        size_t units = (size_t)rows * (cols / 16);
        switch (wtype) {
#define D(t) case t: launch(k_deq_f16<t>, grid_for(units, 256), 256, 0, d->stream, w, rows, cols, nb, (__half *)d->gw); break;
        D(DT_Q8_0) D(DT_Q4_0) D(DT_Q5_0) D(DT_Q4_K) D(DT_Q5_K) D(DT_Q6_K)
#undef D
        default: return -1;
        }
        wm = d->gw;
    }
    if (launched("gemm operands")) return -1;
    const float one = 1.0f, zero = 0.0f;
    for (int p = ns - 1; p >= 0; p--) { // (the small part first)
        const void *xp = (const uint8_t *)d->gx + 2 * (size_t)p * n;
        // column-major: Y^T (rows x T) = (W, cols x rows)^T (X^T, cols x T)
        if (g_blas.gemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, cols, &one, wm, et, cols, xp, et, cols, p == ns - 1 ? &zero : &one, y,
                        CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return set_status("cublasGemmEx", cudaErrorUnknown);
    }
    return 0;
}

extern "C" HIDDEN int cuda_gemm_blas(cuda_dev *d, int wtype, int rows, int cols, int T) {
    return cuda_gemm_ok(wtype, cols, T) && blas_wants(d, wtype, rows, cols, T);
}

extern "C" HIDDEN int cuda_gemm(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y) {
    return cuda_gemm_lowp(d, wtype, w, rows, cols, x, T, y, 0);
}

extern "C" HIDDEN int cuda_gemm_lowp(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y, int lowp) {
    d->n_gemm++;
    if (!cuda_gemm_ok(wtype, cols, T) || rows <= 0) return -1;
    if (blas_wants(d, wtype, rows, cols, T))
        return blas_gemm(d, wtype, (const uint8_t *)w, rows, cols, is_float(wtype) ? cols : cols / (is_k(wtype) ? QK_K : QK), x, T, y,
                         lowp);
    int nb = is_float(wtype) ? cols : cols / (is_k(wtype) ? QK_K : QK);
    const uint8_t *wb = (const uint8_t *)w;
    if (cols % G2K == 0) {
        // 128 rows a block where that still gives two blocks an SM's worth, else 64
        int tiles = (T + G2N - 1) / G2N, big = (long)((rows + 127) / 128) * tiles >= 2L * d->sms;
        const int xh = d->gemm_xh && !is_float(wtype);
        // (XH: 128 rows a block wherever the column split can still make an SM's worth of blocks -- every row
        // block reads the tokens' activations once, twice the weights' bytes a 64-row block at 64 tokens)
        if (xh && !big) big = (long)((rows + 127) / 128) * tiles * 8 >= d->sms && cols / G2K >= 16;
        long blocks = (long)(big ? (rows + 127) / 128 : (rows + 63) / 64) * tiles;
        // few blocks (few tokens): the columns split in up to 8 slices, to two blocks an SM's worth
        int ks = 1, steps = cols / G2K;
        while (d->gemm_split && ks < 8 && ks * 2 <= steps && blocks * ks < 2L * d->sms) ks *= 2;
        float *out = y;
        if (ks > 1) {
            size_t need = sizeof(float) * (size_t)ks * T * rows;
            if (grow(d, (void **)&d->part, &d->part_cap, need)) return -1;
            out = d->part;
        }
        dim3 g(big ? (rows + 127) / 128 : (rows + 63) / 64, tiles, ks);
        // (quantized weights: the activations rounded to f16 once, k_gemm2 reads those; INFER_CUDA_GEMM_XH=0: not)
        const float *xa = x;
        if (xh) {
            size_t n = (size_t)T * cols;
            if (grow(d, &d->gx, &d->gx_cap, 2 * n)) return -1;
            launch(k_xparts<DT_F16, 1>, grid_for(n, 256), 256, 0, d->stream, x, n, (__half *)d->gx);
            xa = (const float *)d->gx;
        }
        switch (wtype) {
#define G(t)                                                                                            \
    case t:                                                                                             \
        if (xh && big) launch(k_gemm2<t, 128, 1>, g, 256, 0, d->stream, wb, rows, cols, nb, xa, T, out);     \
        else if (xh) launch(k_gemm2<t, 64, 1>, g, 128, 0, d->stream, wb, rows, cols, nb, xa, T, out);        \
        else if (big) launch(k_gemm2<t, 128>, g, 256, 0, d->stream, wb, rows, cols, nb, x, T, out);          \
        else launch(k_gemm2<t, 64>, g, 128, 0, d->stream, wb, rows, cols, nb, x, T, out);                    \
        break;
#define GF(t)                                                                                           \
    case t:                                                                                             \
        if (big) launch(k_gemm2<t, 128>, g, 256, 0, d->stream, wb, rows, cols, nb, x, T, out);          \
        else launch(k_gemm2<t, 64>, g, 128, 0, d->stream, wb, rows, cols, nb, x, T, out);                    \
        break;
        G(DT_Q8_0) G(DT_Q4_0) G(DT_Q5_0) G(DT_Q4_K) G(DT_Q5_K) G(DT_Q6_K) GF(DT_F16) GF(DT_BF16)
#undef G
#undef GF
        default: return -1;
        }
        if (ks > 1) {
            size_t ys = (size_t)T * rows;
            launch(k_gemm_sum, grid_for(ys, 256), 256, 0, d->stream, y, d->part, ys, ks);
        }
        return launched("gemm");
    }
    dim3 g((rows + GM - 1) / GM, (T + GN - 1) / GN);
    switch (wtype) {
#define G(t) case t: launch(k_gemm<t>, g, 128, 0, d->stream, wb, rows, cols, nb, x, T, y); break;
    G(DT_Q8_0) G(DT_Q4_0) G(DT_Q5_0) G(DT_Q4_K) G(DT_Q5_K) G(DT_Q6_K) G(DT_F16) G(DT_BF16)
#undef G
    default: return -1;
    }
    return launched("gemm");
}
