// The attention of one KV head's group of query heads over n cached
// positions: scores = q k^T * scale, then o = probabilities v. The group's
// queries meet each key and value row once, and the output accumulates in
// registers over the positions rather than in memory.
#include "compute/cpu/attn.h"
#include "compute/cpu/vec.h"

#include <immintrin.h>

void attn_scores_ref(const float *q, int group, int hd, const float *k, size_t kstride, int n, float scale,
                     float *s, size_t sstride) {
    for (int p = 0; p < n; p++)
        for (int g = 0; g < group; g++) s[(size_t)g * sstride + p] = vec_dot_ref(q + (size_t)g * hd, k + kstride * p, hd) * scale;
}

void attn_mix_ref(const float *s, size_t sstride, int group, int n, const float *v, size_t vstride, int hd, float *o) {
    for (int p = 0; p < n; p++)
        for (int g = 0; g < group; g++) vec_axpy_ref(o + (size_t)g * hd, s[(size_t)g * sstride + p], v + vstride * p, hd);
}

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Four query heads against one key row (hd a multiple of 8).
AVX2 static inline __m128 dot4q(const float *q, int hd, const float *k) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd; i += 8) {
        __m256 kv = _mm256_loadu_ps(k + i);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + hd + i), kv, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * hd + i), kv, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * hd + i), kv, a3);
    }
    return hsum8x4(a0, a1, a2, a3);
}

// One query head against four key rows.
AVX2 static inline __m128 dot1q4k(const float *q, int hd, const float *k, size_t ks) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + i), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + ks + i), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 2 * ks + i), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 3 * ks + i), a3);
    }
    return hsum8x4(a0, a1, a2, a3);
}

AVX2 static void scores_avx2(const float *q, int group, int hd, const float *k, size_t kstride, int n, float scale,
                             float *s, size_t sstride) {
    int g = 0;
    for (; g + 4 <= group; g += 4) {
        const float *qg = q + (size_t)g * hd;
        for (int p = 0; p < n; p++) {
            float r[4];
            _mm_storeu_ps(r, _mm_mul_ps(dot4q(qg, hd, k + kstride * p), _mm_set1_ps(scale)));
            for (int j = 0; j < 4; j++) s[(size_t)(g + j) * sstride + p] = r[j];
        }
    }
    for (; g < group; g++) { // leftover heads: four key rows at a time
        const float *qg = q + (size_t)g * hd;
        float *sg = s + (size_t)g * sstride;
        int p = 0;
        for (; p + 4 <= n; p += 4) _mm_storeu_ps(sg + p, _mm_mul_ps(dot1q4k(qg, hd, k + kstride * p, kstride), _mm_set1_ps(scale)));
        for (; p < n; p++) {
            __m128 r = dot1q4k(qg, hd, k + kstride * p, 0); // the same row four times: same sum as above
            sg[p] = _mm_cvtss_f32(_mm_mul_ss(r, _mm_set_ss(scale)));
        }
    }
}

// o[g] += sum_p s[g][p] v_p for up to 4 heads, 16 floats of the head at a time.
AVX2 static void mix_avx2(const float *s, size_t sstride, int group, int n, const float *v, size_t vstride, int hd, float *o) {
    for (int g0 = 0; g0 < group; g0 += 4) {
        int G = group - g0 < 4 ? group - g0 : 4;
        for (int i = 0; i < hd; i += 16) {
            __m256 a[4][2];
            for (int g = 0; g < G; g++) {
                a[g][0] = _mm256_loadu_ps(o + (size_t)(g0 + g) * hd + i);
                a[g][1] = _mm256_loadu_ps(o + (size_t)(g0 + g) * hd + i + 8);
            }
            const float *vp = v + i;
            if (G == 4)
                for (int p = 0; p < n; p++, vp += vstride) {
                    __m256 v0 = _mm256_loadu_ps(vp), v1 = _mm256_loadu_ps(vp + 8);
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++) {
                        __m256 w = _mm256_broadcast_ss(s + (size_t)(g0 + g) * sstride + p);
                        a[g][0] = _mm256_fmadd_ps(w, v0, a[g][0]);
                        a[g][1] = _mm256_fmadd_ps(w, v1, a[g][1]);
                    }
                }
            else
                for (int p = 0; p < n; p++, vp += vstride) {
                    __m256 v0 = _mm256_loadu_ps(vp), v1 = _mm256_loadu_ps(vp + 8);
                    for (int g = 0; g < G; g++) {
                        __m256 w = _mm256_broadcast_ss(s + (size_t)(g0 + g) * sstride + p);
                        a[g][0] = _mm256_fmadd_ps(w, v0, a[g][0]);
                        a[g][1] = _mm256_fmadd_ps(w, v1, a[g][1]);
                    }
                }
            for (int g = 0; g < G; g++) {
                _mm256_storeu_ps(o + (size_t)(g0 + g) * hd + i, a[g][0]);
                _mm256_storeu_ps(o + (size_t)(g0 + g) * hd + i + 8, a[g][1]);
            }
        }
    }
}

void attn_scores(const float *q, int group, int hd, const float *k, size_t kstride, int n, float scale, float *s, size_t sstride) {
    if (cpu_has_avx2() && hd % 16 == 0) scores_avx2(q, group, hd, k, kstride, n, scale, s, sstride);
    else attn_scores_ref(q, group, hd, k, kstride, n, scale, s, sstride);
}

void attn_mix(const float *s, size_t sstride, int group, int n, const float *v, size_t vstride, int hd, float *o) {
    if (cpu_has_avx2() && hd % 16 == 0) mix_avx2(s, sstride, group, n, v, vstride, hd, o);
    else attn_mix_ref(s, sstride, group, n, v, vstride, hd, o);
}
