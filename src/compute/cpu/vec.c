#include "compute/cpu/vec.h"

#include <immintrin.h>
#include "base/half.h"

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

static int use_avx2(void) {
    static int v = -1;
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return v;
}

float vec_dot(const float *a, const float *b, int n) { return use_avx2() ? dot_avx2(a, b, n) : vec_dot_ref(a, b, n); }
void vec_axpy(float *y, float a, const float *x, int n) { if (use_avx2()) axpy_avx2(y, a, x, n); else vec_axpy_ref(y, a, x, n); }

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
    if (use_avx2()) round_f16_avx2(x, n);
    else vec_round_f16_ref(x, n);
}
