// Where a one-row chain kernel's microseconds go (an experiment; nvcc -arch=sm_90 -O3 chain_exp.cu):
// variants of the norm/residual/norm/quantize chain, each launched 200 times in a captured graph.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>

struct ch { float *o, *x, *xn; const float *wa, *wb; uint8_t *xq; int n; float eps; };

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ float block_sum(float v, float *sh) {
    v = warp_sum(v);
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = threadIdx.x < nw ? sh[threadIdx.x] : 0.0f;
    if (w == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}
static __device__ void q8(float v, int lane, uint8_t *row, int nb, int b) {
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    if (lane == 0) ((__half *)(row + 32 * nb))[b] = __float2half(d);
    row[32 * b + lane] = (uint8_t)(int8_t)rintf(__fmul_rn(v, id));
}

#define PDL() asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory")

enum { R = 24 };
// mode bits: 1 norm_a, 2 residual, 4 norm_b, 8 quantize
template <int NT>
__global__ void k_full(ch c, int mode) {
    PDL();
    __shared__ float sh[32];
    const int n = c.n, t = threadIdx.x;
    float ov[R], xv[R], sa[R], sb[R];
#pragma unroll
    for (int k = 0; k < R; k++) {
        int i = t + NT * k;
        bool in = i < n;
        ov[k] = in ? c.o[i] : 0.f;
        xv[k] = in ? c.x[i] : 0.f;
        sa[k] = in ? c.wa[i] : 1.f;
        sb[k] = in ? c.wb[i] : 1.f;
    }
    if (mode & 1) {
        float s = 0;
#pragma unroll
        for (int k = 0; k < R; k++) if (t + NT * k < n) s += ov[k] * ov[k];
        float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps);
#pragma unroll
        for (int k = 0; k < R; k++) if (t + NT * k < n) c.o[t + NT * k] = ov[k] = ov[k] * r * sa[k];
    }
    if (mode & 2) {
#pragma unroll
        for (int k = 0; k < R; k++) if (t + NT * k < n) c.x[t + NT * k] = xv[k] = __fmaf_rn(ov[k], 1.0f, xv[k]);
    }
    if (!(mode & 4)) return;
    float s = 0;
#pragma unroll
    for (int k = 0; k < R; k++) if (t + NT * k < n) s += xv[k] * xv[k];
    float r = 1.0f / sqrtf(block_sum(s, sh) / (float)n + c.eps);
    const int lane = t % 32, wp = t / 32;
#pragma unroll
    for (int k = 0; k < R; k++) {
        int i = t + NT * k;
        if (i >= n) break;
        float v = xv[k] * r * sb[k];
        c.xn[i] = v;
        if (mode & 8) q8(v, lane, c.xq, n / 32, (NT / 32) * k + wp);
    }
}

__global__ void k_null(ch c, int mode) { PDL(); if (mode == 99) c.o[0] = 0; }
__global__ void k_copy(ch c, int mode) { PDL(); for (int i = threadIdx.x; i < c.n; i += blockDim.x) c.xn[i] = c.x[i]; }
__global__ void k_sum(ch c, int mode) { // loads and one block sum
    PDL();
    __shared__ float sh[32];
    float s = 0;
    for (int i = threadIdx.x; i < c.n; i += blockDim.x) s += c.x[i] * c.x[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) c.xn[0] = s;
}
__global__ void k_sum2(ch c, int mode) { // two dependent block sums
    PDL();
    __shared__ float sh[32];
    float s = 0;
    for (int i = threadIdx.x; i < c.n; i += blockDim.x) s += c.x[i] * c.x[i];
    s = block_sum(s, sh);
    float s2 = block_sum(s * c.x[threadIdx.x], sh);
    if (threadIdx.x == 0) c.xn[0] = s2;
}
__global__ void k_sqrt(ch c, int mode) { // a division and a square root on a loaded value
    PDL();
    float v = c.x[threadIdx.x];
    float r = 1.0f / sqrtf(v * v / (float)c.n + c.eps);
    c.xn[threadIdx.x] = r;
}

static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

template <typename K>
static double time_k(K k, int threads, ch c, int mode, int pdl, cudaStream_t st) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = 1, cfg.blockDim = threads, cfg.stream = st, cfg.attrs = at, cfg.numAttrs = pdl;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaError_t e0 = cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    if (e0) { printf("capture: %s\n", cudaGetErrorString(e0)); return -1; }
    for (int i = 0; i < 200; i++) {
        cudaError_t e1 = cudaLaunchKernelEx(&cfg, k, c, mode);
        if (e1) { printf("launch: %s\n", cudaGetErrorString(e1)); break; }
    }
    e0 = cudaStreamEndCapture(st, &g);
    if (e0) { printf("end capture: %s\n", cudaGetErrorString(e0)); return -1; }
    e0 = cudaGraphInstantiate(&ge, g, 0);
    if (e0) { printf("instantiate: %s\n", cudaGetErrorString(e0)); return -1; }
    cudaGraphLaunch(ge, st);
    cudaStreamSynchronize(st);
    double t0 = now();
    for (int r = 0; r < 20; r++) cudaGraphLaunch(ge, st);
    cudaStreamSynchronize(st);
    double us = (now() - t0) * 1e6 / 4000;
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("error %s\n", cudaGetErrorString(e));
    return us;
}

int main() {
    cudaStream_t st;
    cudaError_t e = cudaStreamCreate(&st);
    if (e) { printf("stream: %s\n", cudaGetErrorString(e)); return 1; }
    setvbuf(stdout, NULL, _IONBF, 0);
    float *buf;
    cudaMalloc(&buf, 6 * 8192 * sizeof(float));
    cudaMemset(buf, 0, 6 * 8192 * sizeof(float));
    uint8_t *xq;
    cudaMalloc(&xq, 16384);
    int ns[] = {640, 1152, 2560};
    for (int pdl = 0; pdl < 2; pdl++)
        for (int ni = 0; ni < 3; ni++) {
            ch c = {buf, buf + 8192, buf + 16384, buf + 24576, buf + 32768, xq, ns[ni], 1e-6f};
            printf("pdl %d n %4d | null %.2f | copy %.2f | sum %.2f | sum2 %.2f | sqrt %.2f | full256: a %.2f ab %.2f abn %.2f abnq %.2f | full128 abnq %.2f | full512 abnq %.2f | full1024 abnq %.2f\n",
                   pdl, ns[ni], time_k(k_null, 256, c, 0, pdl, st), time_k(k_copy, 256, c, 0, pdl, st), time_k(k_sum, 256, c, 0, pdl, st),
                   time_k(k_sum2, 256, c, 0, pdl, st), time_k(k_sqrt, 256, c, 0, pdl, st),
                   time_k(k_full<256>, 256, c, 1, pdl, st), time_k(k_full<256>, 256, c, 3, pdl, st), time_k(k_full<256>, 256, c, 7, pdl, st),
                   time_k(k_full<256>, 256, c, 15, pdl, st), time_k(k_full<128>, 128, c, 15, pdl, st), time_k(k_full<512>, 512, c, 15, pdl, st),
                   time_k(k_full<1024>, 1024, c, 15, pdl, st));
        }
    return 0;
}
