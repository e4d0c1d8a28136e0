// Element-wise operations of a layer: bias, activation (and its GLU), the
// gpt-oss GLU, residual, f16 rounding, softmax, scale, product, softcap.
#include "compute/cuda/common.cuh"

static __global__ void k_bias(float *y, const float *b, int T, int n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * n) y[i] += b[i % n];
}
extern "C" HIDDEN int cuda_bias(cuda_dev *d, float *y, const float *b, int T, int n) {
    launch(k_bias, grid_for((size_t)T * n, 256), 256, 0, d->stream, y, b, T, n);
    return launched("bias");
}

static __global__ void k_act(float *g, const float *u, size_t n, int act, int ggml) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = act1(g[i], act, ggml);
    g[i] = u ? a * u[i] : a;
}
extern "C" HIDDEN int cuda_act(cuda_dev *d, float *g, const float *u, size_t n, int act, int ggml) {
    if (!n) return 0;
    launch(k_act, grid_for(n, 256), 256, 0, d->stream, g, u, n, act, ggml);
    return launched("activation");
}

// host_glu_oss's expression: gate capped at 7, up clamped to +-7, (up + 1) gate sigmoid(1.702 gate)
static __global__ void k_glu_oss(float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    PDL_ENTRY();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gv = gate[(size_t)i * gs], uv = up[(size_t)i * us];
    gv = gv > 7.0f ? 7.0f : gv;
    uv = uv > 7.0f ? 7.0f : uv < -7.0f ? -7.0f : uv;
    out[i] = (uv + 1.0f) * gv / (1.0f + expf(-1.702f * gv));
}
extern "C" HIDDEN int cuda_glu_oss(cuda_dev *d, float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    if (n <= 0) return 0;
    launch(k_glu_oss, grid_for((size_t)n, 256), 256, 0, d->stream, out, gate, gs, up, us, n);
    return launched("gpt-oss activation");
}

static __global__ void k_axpy(float *x, const float *o, float s, size_t n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fmaf_rn(o[i], s, x[i]); // (k_chain's expression)
}
extern "C" HIDDEN int cuda_axpy(cuda_dev *d, float *x, const float *o, float s, size_t n) {
    if (!n) return 0;
    launch(k_axpy, grid_for(n, 256), 256, 0, d->stream, x, o, s, n);
    return launched("residual");
}

static __global__ void k_round_f16(float *x, size_t n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = f16_round(x[i]);
}
extern "C" HIDDEN int cuda_round_f16(cuda_dev *d, float *x, size_t n) {
    if (!n) return 0;
    launch(k_round_f16, grid_for(n, 256), 256, 0, d->stream, x, n);
    return launched("round_f16");
}

static __global__ void k_softmax(float *x, int n) {
    PDL_ENTRY();
    __shared__ float sh[32];
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_max(m, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += (x[j] = expf(x[j] - m));
    s = block_sum(s, sh);
    for (int j = threadIdx.x; j < n; j += blockDim.x) x[j] /= s;
}
extern "C" HIDDEN int cuda_softmax(cuda_dev *d, float *x, int n) {
    if (n <= 0) return 0;
    launch(k_softmax, 1, 256, 0, d->stream, x, n);
    return launched("softmax");
}

static __global__ void k_scale(float *x, size_t n, float s) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = s == 0.0f ? 0.0f : x[i] * s;
}
extern "C" HIDDEN int cuda_scale(cuda_dev *d, float *x, size_t n, float s) {
    if (!n) return 0;
    launch(k_scale, grid_for(n, 256), 256, 0, d->stream, x, n, s);
    return launched("scale");
}

static __global__ void k_mul(float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * n) return;
    size_t r = i / n, c = i % n;
    x[r * xs + c] *= y[r * ys + c];
}
extern "C" HIDDEN int cuda_mul(cuda_dev *d, float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    if (rows <= 0 || n <= 0) return 0;
    launch(k_mul, grid_for((size_t)rows * n, 256), 256, 0, d->stream, x, xs, y, ys, rows, n);
    return launched("mul");
}

static __global__ void k_softcap(float *x, size_t n, float cap) {
    PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}
extern "C" HIDDEN int cuda_softcap(cuda_dev *d, float *x, size_t n, float cap) {
    if (!n) return 0;
    launch(k_softcap, grid_for(n, 256), 256, 0, d->stream, x, n, cap);
    return launched("softcap");
}
