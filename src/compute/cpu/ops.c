#include "compute/cpu/ops.h"
#include "tensor/dtype.h"
#include "compute/cpu/vec.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include "base/half.h"
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
        float mean = (float)(vec_sumsq(xt, n) / n);
        float r = 1.0f / sqrtf(mean + eps);
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
        float ang = (float)pos * r->inv_freq[i];
        float c = cosf(ang) * r->mscale, s = sinf(ang) * r->mscale;
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

void softmax(float *x, int n) { vec_softmax(x, n); }

void activate(float *x, int n, int act) {
    switch (act) {
    case ACT_SILU:
        vec_silu(x, n);
        break;
    case ACT_GELU_TANH:
        vec_gelu_tanh(x, n);
        break;
    case ACT_GELU:
        for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
        break;
    case ACT_RELU:
        for (int i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        break;
    }
}

// GELU (tanh form) as ggml's CPU backend computes it: the input rounded to
// f16 and looked up in a table of f16 results; beyond +-10 the limits.
static uint16_t *g_gelu_table;

static void gelu_table_init(void) {
    uint16_t *t = malloc(sizeof(uint16_t) << 16);
    if (!t) return;
    for (uint32_t i = 0; i < 1u << 16; i++) {
        float v = f16_to_f32((uint16_t)i);
        t[i] = f32_to_f16(0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))));
    }
    g_gelu_table = t;
}

// 8 at a time: F16C rounds to f16 (round half to even, as f32_to_f16) and
// widens the looked-up results.
__attribute__((target("avx2,f16c"))) static int gelu_table_avx2(float *x, int n) {
    int i = 0;
    uint16_t h[8], r[8];
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        for (int k = 0; k < 8; k++) r[k] = g_gelu_table[h[k]];
        __m256 g = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)r));
        g = _mm256_blendv_ps(g, v, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
        g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(v, lo, _CMP_LE_OQ));
        _mm256_storeu_ps(x + i, g);
    }
    return i;
}

void activate_ref(float *x, int n, int act) {
    if (act == ACT_SILU) vec_silu_ref(x, n);
    else if (act == ACT_GELU_TANH) vec_gelu_tanh_ref(x, n);
    else activate(x, n, act); // scalar already
}

static void activate_ggml_impl(float *x, int n, int act, int simd) {
    if (act != ACT_GELU_TANH) { simd ? activate(x, n, act) : activate_ref(x, n, act); return; }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, gelu_table_init);
    if (!g_gelu_table) { simd ? activate(x, n, act) : activate_ref(x, n, act); return; }
    int i0 = simd && cpu_has_avx2() ? gelu_table_avx2(x, n) : 0; // (AVX2, FMA and F16C)
    for (int i = i0; i < n; i++) {
        float v = x[i];
        if (v <= -10.0f) x[i] = 0.0f;
        else if (v < 10.0f) x[i] = f16_to_f32(g_gelu_table[f32_to_f16(v)]);
    }
}

void activate_ggml(float *x, int n, int act) { activate_ggml_impl(x, n, act, 1); }
void activate_ggml_ref(float *x, int n, int act) { activate_ggml_impl(x, n, act, 0); }

void softcap(float *x, int n, float cap) {
    for (int i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}
