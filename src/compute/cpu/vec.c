#include "compute/cpu/vec.h"


#include <immintrin.h>
#include "base/half.h"

#include <math.h>

float vec_dot_ref(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void vec_axpy_ref(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static float dot_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float s = _mm_cvtss_f32(h);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

AVX2 static void axpy_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

float vec_dot(const float *a, const float *b, int n) { return cpu_has_avx2() ? dot_avx2(a, b, n) : vec_dot_ref(a, b, n); }
void vec_axpy(float *y, float a, const float *x, int n) { if (cpu_has_avx2()) axpy_avx2(y, a, x, n); else vec_axpy_ref(y, a, x, n); }

void vec_round_f16_ref(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

__attribute__((target("avx2,f16c"))) static void round_f16_avx2(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

void vec_round_f16(float *x, size_t n) {
    if (cpu_has_avx2()) round_f16_avx2(x, n);
    else vec_round_f16_ref(x, n);
}

__attribute__((target("avx2,f16c"))) static void to_f16_avx2(uint16_t *dst, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = f32_to_f16(x[i]);
}

__attribute__((target("avx2,f16c"))) static void from_f16_avx2(float *dst, const uint16_t *h, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) dst[i] = f16_to_f32(h[i]);
}

void vec_to_f16(uint16_t *dst, const float *x, size_t n) {
    if (cpu_has_avx2()) to_f16_avx2(dst, x, n);
    else
        for (size_t i = 0; i < n; i++) dst[i] = f32_to_f16(x[i]);
}

void vec_from_f16(float *dst, const uint16_t *h, size_t n) {
    if (cpu_has_avx2()) from_f16_avx2(dst, h, n);
    else
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(h[i]);
}

// ---------------------------------------------------------------------------
// softmax with a vectorized exp (as ggml's soft_max uses its SIMD expf)

float vec_softmax_ref(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    float s = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - m); s += x[i]; }
    for (int i = 0; i < n; i++) x[i] /= s;
    return s;
}

// e^x for 8 lanes: x = k ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf
// polynomial (about 1 ulp), times 2^k built in the exponent bits. Below
// -87.3 (where e^x leaves the normal floats) the result is 0; above 88 it
// stays e^88.
__attribute__((target("avx2,fma"))) static inline __m256 exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.0f), lo = _mm256_set1_ps(-87.3365447504f); // 2^k needs k <= 127
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(x, hi);
    x = _mm256_max_ps(x, lo);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

__attribute__((target("avx2,fma"))) static float softmax_avx2(float *x, int n) {
    int i = 0;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float m = _mm_cvtss_f32(h);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    __m256 sum = _mm256_setzero_ps(), mm = _mm256_set1_ps(m);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mm));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) { // the tail through the same exp, padded with -inf (exp 0)
        float t[8];
        for (int j = 0; j < 8; j++) t[j] = i + j < n ? x[i + j] - m : -INFINITY;
        __m256 e = exp8(_mm256_loadu_ps(t));
        _mm256_storeu_ps(t, e);
        sum = _mm256_add_ps(sum, e);
        for (int j = 0; i + j < n; j++) x[i + j] = t[j];
    }
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    float s = _mm_cvtss_f32(s4);
    __m256 vs = _mm256_set1_ps(s);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++) x[i] /= s;
    return s;
}

float vec_softmax(float *x, int n) { return cpu_has_avx2() ? softmax_avx2(x, n) : vec_softmax_ref(x, n); }

// sum of x[i]^2, each square in float, summed in double (as ggml's rms_norm)
double vec_sumsq_ref(const float *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)(x[i] * x[i]);
    return s;
}

__attribute__((target("avx2,fma"))) static double sumsq_avx2(const float *x, int n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 sq = _mm256_mul_ps(v, v);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
    __m256d a = _mm256_add_pd(a0, a1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    double s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++) s += (double)(x[i] * x[i]);
    return s;
}

double vec_sumsq(const float *x, int n) { return cpu_has_avx2() ? sumsq_avx2(x, n) : vec_sumsq_ref(x, n); }

// ---------------------------------------------------------------------------
// activations with the vectorized exp (about 1e-7 absolute in tanh and the
// sigmoid; the scalar formulas are the oracle)

void vec_silu_ref(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

// 0.5 (1 + tanh u) computed as 1 / (1 + e^-2u), which does not cancel where tanh nears -1
void vec_gelu_tanh_ref(float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        x[i] = v / (1.0f + expf(-2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

__attribute__((target("avx2,fma"))) static void silu_avx2(float *x, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, v)))));
    }
    vec_silu_ref(x + i, n - i);
}

// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)): no cancellation where tanh nears -1
__attribute__((target("avx2,fma"))) static void gelu_tanh_avx2(float *x, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), m2c = _mm256_set1_ps(-2.0f * 0.7978845608028654f), c3 = _mm256_set1_ps(0.044715f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 m2u = _mm256_mul_ps(m2c, _mm256_fmadd_ps(_mm256_mul_ps(c3, v), _mm256_mul_ps(v, v), v));
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, exp8(m2u))));
    }
    vec_gelu_tanh_ref(x + i, n - i);
}

void vec_silu(float *x, int n) { if (cpu_has_avx2()) silu_avx2(x, n); else vec_silu_ref(x, n); }
void vec_gelu_tanh(float *x, int n) { if (cpu_has_avx2()) gelu_tanh_avx2(x, n); else vec_gelu_tanh_ref(x, n); }

int vec_first_above_ref(const float *x, int n, float thr) {
    int i = 0;
    while (i < n && !(x[i] > thr)) i++;
    return i;
}

__attribute__((target("avx2"))) static int first_above_avx2(const float *x, int n, float thr) {
    __m256 t = _mm256_set1_ps(thr);
    int i = 0;
    for (; i + 32 <= n; i += 32) { // (an ordered compare: NaN is false)
        __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ), b = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), t, _CMP_GT_OQ);
        __m256 c = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), t, _CMP_GT_OQ), d = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), t, _CMP_GT_OQ);
        if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(a, b), _mm256_or_ps(c, d)))) break;
    }
    return i + vec_first_above_ref(x + i, n - i, thr);
}

int vec_first_above(const float *x, int n, float thr) {
    return cpu_has_avx2() ? first_above_avx2(x, n, thr) : vec_first_above_ref(x, n, thr);
}
