// A prompt's attention through cuBLAS (the rows of one sequence): for a chunk
// of R rows that see keys [klo, klo + N) of the cache, S = scale Q K^T per
// query head (strided batched products over the KV heads, one call for each
// of a KV head's G query heads; one call in all when KV is 1), each row's
// softmax in its own window (softcap, sink; ggml: probabilities rounded to
// f16, the type of V) into P with zeros outside it, then O = P V. Scores and
// probabilities are [row][head][key], so each call's outputs land in place
// through their leading dimensions. The products are the per-row kernel's
// (f16 x f16 or f32 x f32, f32 sums: under ggml's numerics q is f16 valued,
// so its f16 copy is exact; an f16 cache without them goes to the per-row
// kernel), only the order of the sums differs.
#include "compute/cuda/common.cuh"

template <typename PT>
static __global__ void k_att_softmax(const float *S, PT *P, int H, int N, int klo, int window, const int *pos, float softcap,
                                     const float *sinks, int ggml) {
    PDL_ENTRY();
    __shared__ float sh[32];
    const int t = blockIdx.x, h = blockIdx.y;
    const size_t o = ((size_t)t * H + h) * N;
    const float *s = S + o;
    PT *p = P + o;
    const int hi = pos[t] - klo, lo = (window && pos[t] - window + 1 > klo ? pos[t] - window + 1 : klo) - klo;
    float m = -INFINITY;
    for (int j = lo + threadIdx.x; j <= hi; j += blockDim.x) {
        float v = s[j];
        if (softcap) v = softcap * tanhf(v / softcap);
        m = fmaxf(m, v);
    }
    const float sink = sinks ? sinks[h] : -INFINITY;
    m = fmaxf(block_max(m, sh), sink);
    float sum = 0.0f;
    for (int j = lo + threadIdx.x; j <= hi; j += blockDim.x) {
        float v = s[j];
        if (softcap) v = softcap * tanhf(v / softcap);
        sum += expf(v - m);
    }
    sum = block_sum(sum, sh);
    if (sinks) sum += expf(sink - m);
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float e = 0.0f;
        if (j >= lo && j <= hi) {
            float v = s[j];
            if (softcap) v = softcap * tanhf(v / softcap);
            e = expf(v - m) / sum;
            if (ggml) e = f16_round(e);
        }
        p[j] = (PT)e;
    }
}

static __global__ void k_to_half(const float *x, size_t n, __half *y) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half_rn(x[i]);
}

extern "C" HIDDEN int cuda_attention_gemm_ok(cuda_dev *d, int ggml, int kv16) {
    if (kv16 && !ggml) return 0;
    cudaStreamCaptureStatus st; // (its scratch grows: not in a graph)
    if (cudaStreamIsCapturing(d->stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) return 0;
    return blas_ready(d) && g_blas.gemm_sb;
}

extern "C" HIDDEN int cuda_attention_gemm(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window,
                                          const int *pos, const int *pos_host, const void *k, const void *v, float scale, float softcap,
                                          const float *sinks, int ggml, int wtype, void *xq, int kv16) {
    if (T <= 0) return 0;
    if (H % KV || !cuda_attention_gemm_ok(d, ggml, kv16) || (xq && !cuda_act_row_size(wtype, H * hd))) return -1;
    const int G = H / KV, nq = H * hd, nkv = KV * hd;
    const size_t es = kv16 ? 2 : 4, xr = xq ? cuda_act_row_size(wtype, nq) : 0;
    const cudaDataType et = kv16 ? CUDA_R_16F : CUDA_R_32F;
    const float zero = 0.0f, one = 1.0f;
    int lo_all = 0x7fffffff, hi_all = -1;
    for (int t = 0; t < T; t++) {
        int p = pos_host[t], lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
        lo_all = lo < lo_all ? lo : lo_all, hi_all = p > hi_all ? p : hi_all;
    }
    const size_t per_row = (size_t)H * (hi_all - lo_all + 1) * (4 + es); // (an upper bound of a row's share)
    int R = (int)(d->ag_bytes / per_row);
    R = R < 1 ? 1 : R > T ? T : R;
    if (grow(d, &d->ag_s, &d->ag_s_cap, 4 * (size_t)R * H * (hi_all - lo_all + 1)) ||
        grow(d, &d->ag_p, &d->ag_p_cap, es * (size_t)R * H * (hi_all - lo_all + 1)) || (kv16 && grow(d, &d->ag_q, &d->ag_q_cap, 2 * (size_t)R * nq)))
        return -1;
    for (int t0 = 0; t0 < T; t0 += R) {
        const int r = T - t0 < R ? T - t0 : R;
        int klo = 0x7fffffff, khi = -1;
        for (int t = t0; t < t0 + r; t++) {
            int p = pos_host[t], lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
            klo = lo < klo ? lo : klo, khi = p > khi ? p : khi;
        }
        const int N = khi - klo + 1;
        const float *qt = q + (size_t)t0 * nq;
        const void *qb = qt;
        if (kv16) {
            size_t n = (size_t)r * nq;
            launch(k_to_half, grid_for(n, 256), 256, 0, d->stream, qt, n, (__half *)d->ag_q);
            qb = d->ag_q;
        }
        const uint8_t *kb = (const uint8_t *)k + es * (size_t)klo * nkv, *vb = (const uint8_t *)v + es * (size_t)klo * nkv;
        float *S = (float *)d->ag_s, *ot = out + (size_t)t0 * nq;
        // column-major: S^T (N x cols) = (K^T, hd x N)^T (Q^T, hd x cols); O^T (hd x cols) = (V^T, hd x N) (P^T, N x cols)
        int bad = 0;
        if (KV == 1) { // (every head's rows against the one K: a column a (row, head))
            bad |= g_blas.gemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, r * H, hd, &scale, kb, et, nkv, qb, et, hd, &zero, S, CUDA_R_32F, N,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        } else {
            for (int j = 0; j < G; j++) // (query heads g G + j of KV heads g)
                bad |= g_blas.gemm_sb(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, r, hd, &scale, kb, et, nkv, hd, (const uint8_t *)qb + es * j * hd,
                                      et, nq, (long long)G * hd, &zero, S + (size_t)j * N, CUDA_R_32F, H * N, (long long)G * N, KV,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        }
        if (bad) return set_status("cublasGemmEx (attention scores)", cudaErrorUnknown);
        dim3 g(r, H);
        if (kv16) launch(k_att_softmax<__half>, g, 128, 0, d->stream, (const float *)S, (__half *)d->ag_p, H, N, klo, window, pos + t0, softcap, sinks, ggml);
        else launch(k_att_softmax<float>, g, 128, 0, d->stream, (const float *)S, (float *)d->ag_p, H, N, klo, window, pos + t0, softcap, sinks, ggml);
        if (launched("attention softmax")) return -1;
        if (KV == 1) {
            bad |= g_blas.gemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, r * H, N, &one, vb, et, nkv, d->ag_p, et, N, &zero, ot, CUDA_R_32F, hd,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        } else {
            for (int j = 0; j < G; j++)
                bad |= g_blas.gemm_sb(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, r, N, &one, vb, et, nkv, hd, (const uint8_t *)d->ag_p + es * j * N,
                                      et, H * N, (long long)G * N, &zero, ot + (size_t)j * hd, CUDA_R_32F, nq, (long long)G * hd, KV,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
        }
        if (bad) return set_status("cublasGemmEx (attention values)", cudaErrorUnknown);
        if (xq && cuda_quantize(d, wtype, ot, r, nq, (uint8_t *)xq + xr * t0)) return -1;
    }
    return 0;
}
