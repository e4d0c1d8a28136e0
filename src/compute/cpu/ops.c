#include "compute/cpu/ops.h"
#include "models/dtype.h"

#include <math.h>
#include <string.h>

// ---------------------------------------------------------------------------
// matmul: the hot loop. Each weight row is read once for all T tokens.

static void matmul_rows(float *y, const float *x, const tensor *W, const float *bias, int T, int n_in, int n_out) {
    const dtype_traits *tr = dtype_get(W->type);
    size_t rs = dtype_row_size(W->type, n_in);
    const char *base = W->data;
    for (int j = 0; j < n_out; j++) {
        const void *row = base + rs * (size_t)j;
        float b = bias ? bias[j] : 0.0f;
        for (int t = 0; t < T; t++) y[(size_t)t * n_out + j] = tr->dot(row, x + (size_t)t * n_in, n_in) + b;
    }
}

// W stored [n_in, n_out] (GPT-2 Conv1D): y[t] = sum_i x[t][i] * W[i], a row at a time.
static void matmul_trans(float *y, const float *x, const tensor *W, const float *bias, int T, int n_in, int n_out) {
    const dtype_traits *tr = dtype_get(W->type);
    size_t rs = dtype_row_size(W->type, n_out);
    enum { CH = 256 };
    float buf[CH];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < n_out; j++) y[(size_t)t * n_out + j] = bias ? bias[j] : 0.0f;
    for (int i = 0; i < n_in; i++) {
        const char *row = (const char *)W->data + rs * (size_t)i;
        for (int j0 = 0; j0 < n_out; j0 += CH) {
            int n = n_out - j0 < CH ? n_out - j0 : CH;
            // float types only have 1-element blocks, so any chunk boundary works
            tr->to_float(row + (size_t)j0 * tr->size, buf, n);
            for (int t = 0; t < T; t++) {
                float xi = x[(size_t)t * n_in + i];
                float *yt = y + (size_t)t * n_out + j0;
                for (int j = 0; j < n; j++) yt[j] += xi * buf[j];
            }
        }
    }
}

void matmul(float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    if (w->trans) matmul_trans(y, x, w->w, bias, T, n_in, n_out);
    else matmul_rows(y, x, w->w, bias, T, n_in, n_out);
}

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
