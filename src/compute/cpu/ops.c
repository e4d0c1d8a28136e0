#include "compute/cpu/ops.h"
#include "models/dtype.h"

#include <math.h>
#include <string.h>

void tensor_row(const tensor *t, int64_t row, float *out) {
    const dtype_traits *tr = dtype_get(t->type);
    size_t rs = dtype_row_size(t->type, t->ne[0]);
    tr->to_float((const char *)t->data + rs * (size_t)row, out, t->ne[0]);
}

// ---------------------------------------------------------------------------
// norms

void rmsnorm(float *out, const float *x, const float *w, int T, int n, float eps, int plus_one) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n;
        float *ot = out + (size_t)t * n;
        float ss = 0;
        for (int i = 0; i < n; i++) ss += xt[i] * xt[i];
        float r = 1.0f / sqrtf(ss / (float)n + eps);
        for (int i = 0; i < n; i++) {
            float s = w ? (plus_one ? 1.0f + w[i] : w[i]) : 1.0f;
            ot[i] = xt[i] * r * s;
        }
    }
}

void layernorm(float *out, const float *x, const float *w, const float *b, int T, int n, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n;
        float *ot = out + (size_t)t * n;
        float mean = 0, var = 0;
        for (int i = 0; i < n; i++) mean += xt[i];
        mean /= (float)n;
        for (int i = 0; i < n; i++) var += (xt[i] - mean) * (xt[i] - mean);
        var /= (float)n;
        float r = 1.0f / sqrtf(var + eps);
        for (int i = 0; i < n; i++) ot[i] = (xt[i] - mean) * r * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

// ---------------------------------------------------------------------------
// RoPE: pairs (i * stride, i * stride + off) turn by pos * inv_freq[i]
// (stride 1, off n/2: transformers' rotate_half; stride 2, off 1: ggml's normal mode).
// The angle is a float32 product, as torch computes it.

void rope(float *x, int n_heads, int head_dim, int pos, const rope_table *r) {
    for (int i = 0; i < r->n_pairs; i++) {
        float a = (float)pos * r->inv_freq[i];
        float c = cosf(a) * r->mscale, s = sinf(a) * r->mscale;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * head_dim;
            int a = i * r->pair_stride, b = a + r->pair_offset;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x1 * c + x0 * s;
        }
    }
}

// ---------------------------------------------------------------------------

void softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    float s = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - m); s += x[i]; }
    for (int i = 0; i < n; i++) x[i] /= s;
}

void activate(float *x, int n, int act) {
    switch (act) {
    case ACT_SILU:
        for (int i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
        break;
    case ACT_GELU_TANH:
        for (int i = 0; i < n; i++) {
            float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        break;
    case ACT_GELU:
        for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
        break;
    case ACT_RELU:
        for (int i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        break;
    }
}

void softcap(float *x, int n, float cap) {
    for (int i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}
