// The attention of one KV head's group of query heads over n cached
// positions: scores = q k^T * scale, then o = probabilities v. The group's
// queries meet each key and value row once, and the output accumulates in
// registers over the positions rather than in memory.
#include "compute/cpu/attn.h"
#include "compute/cpu/vec.h"

#include <immintrin.h>

void attn_scores_ref(const float *q, int group, int hd, const void *k, int kt, size_t kstride, int n, float scale, float *s,
                     size_t sstride) {
    for (int p = 0; p < n; p++) {
        const void *kp = (const char *)k + kstride * p;
        for (int g = 0; g < group; g++) {
            const float *qg = q + (size_t)g * hd;
            float d = 0;
            for (int i = 0; i < hd; i++) d += qg[i] * kv_at(kp, kt, i);
            s[(size_t)g * sstride + p] = d * scale;
        }
    }
}

void attn_mix_ref(const float *s, size_t sstride, int group, int n, const void *v, int vt, size_t vstride, int hd, float *o) {
    for (int p = 0; p < n; p++) {
        const void *vp = (const char *)v + vstride * p;
        for (int g = 0; g < group; g++) {
            float a = s[(size_t)g * sstride + p], *og = o + (size_t)g * hd;
            for (int i = 0; i < hd; i++) og[i] += a * kv_at(vp, vt, i);
        }
    }
}

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

// Values i..i+7 of a cache row of type ty (a constant where it is inlined),
// as floats: kv_at's values (a q8_0 block's scale times its integer is exact).
AVX2 INLINE __m256 ld8(const void *row, int i, const int ty) {
    if (ty == KV_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    if (ty == KV_Q8_0) {
        const block_q8_0 *b = (const block_q8_0 *)row + i / 32;
        uint16_t h;
        memcpy(&h, b->d, 2);
        __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + i % 32))));
        return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(h)), q);
    }
    return _mm256_loadu_ps((const float *)row + i);
}

AVX2 static inline __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Four query heads against one key row (hd a multiple of 8).
AVX2 INLINE __m128 dot4q(const float *q, int hd, const void *k, const int ty) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd; i += 8) {
        __m256 kv = ld8(k, i, ty);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + hd + i), kv, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * hd + i), kv, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * hd + i), kv, a3);
    }
    return hsum8x4(a0, a1, a2, a3);
}

// One query head against four key rows, ks bytes apart.
AVX2 INLINE __m128 dot1q4k(const float *q, int hd, const void *k, size_t ks, const int ty) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const char *k0 = k;
    for (int i = 0; i < hd; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
        a0 = _mm256_fmadd_ps(qv, ld8(k0, i, ty), a0);
        a1 = _mm256_fmadd_ps(qv, ld8(k0 + ks, i, ty), a1);
        a2 = _mm256_fmadd_ps(qv, ld8(k0 + 2 * ks, i, ty), a2);
        a3 = _mm256_fmadd_ps(qv, ld8(k0 + 3 * ks, i, ty), a3);
    }
    return hsum8x4(a0, a1, a2, a3);
}

AVX2 INLINE void scores_avx2(const float *q, int group, int hd, const char *k, size_t kstride, int n, float scale,
                             float *s, size_t sstride, const int ty) {
    int g = 0;
    for (; g + 4 <= group; g += 4) {
        const float *qg = q + (size_t)g * hd;
        for (int p = 0; p < n; p++) {
            float r[4];
            _mm_storeu_ps(r, _mm_mul_ps(dot4q(qg, hd, k + kstride * p, ty), _mm_set1_ps(scale)));
            for (int j = 0; j < 4; j++) s[(size_t)(g + j) * sstride + p] = r[j];
        }
    }
    for (; g < group; g++) { // leftover heads: four key rows at a time
        const float *qg = q + (size_t)g * hd;
        float *sg = s + (size_t)g * sstride;
        int p = 0;
        for (; p + 4 <= n; p += 4) _mm_storeu_ps(sg + p, _mm_mul_ps(dot1q4k(qg, hd, k + kstride * p, kstride, ty), _mm_set1_ps(scale)));
        for (; p < n; p++) {
            __m128 r = dot1q4k(qg, hd, k + kstride * p, 0, ty); // the same row four times: same sum as above
            sg[p] = _mm_cvtss_f32(_mm_mul_ss(r, _mm_set_ss(scale)));
        }
    }
}

// o[g] += sum_p s[g][p] v_p for up to 4 heads, 16 floats of the head at a time.
AVX2 INLINE void mix_avx2(const float *s, size_t sstride, int group, int n, const char *v, size_t vstride, int hd, float *o,
                          const int ty) {
    for (int g0 = 0; g0 < group; g0 += 4) {
        int G = group - g0 < 4 ? group - g0 : 4;
        for (int i = 0; i < hd; i += 16) {
            __m256 a[4][2];
            for (int g = 0; g < G; g++) {
                a[g][0] = _mm256_loadu_ps(o + (size_t)(g0 + g) * hd + i);
                a[g][1] = _mm256_loadu_ps(o + (size_t)(g0 + g) * hd + i + 8);
            }
            const char *vp = v;
            if (G == 4)
                for (int p = 0; p < n; p++, vp += vstride) {
                    __m256 v0 = ld8(vp, i, ty), v1 = ld8(vp, i + 8, ty);
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++) {
                        __m256 w = _mm256_broadcast_ss(s + (size_t)(g0 + g) * sstride + p);
                        a[g][0] = _mm256_fmadd_ps(w, v0, a[g][0]);
                        a[g][1] = _mm256_fmadd_ps(w, v1, a[g][1]);
                    }
                }
            else
                for (int p = 0; p < n; p++, vp += vstride) {
                    __m256 v0 = ld8(vp, i, ty), v1 = ld8(vp, i + 8, ty);
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

// one instance of each kernel per cache type
#define KV_KERNELS(T, ty)                                                                                               \
    AVX2 static void scores_##T(const float *q, int group, int hd, const void *k, size_t ks, int n, float scale, float *s, \
                                size_t ss) {                                                                            \
        scores_avx2(q, group, hd, k, ks, n, scale, s, ss, ty);                                                           \
    }                                                                                                                   \
    AVX2 static void mix_##T(const float *s, size_t ss, int group, int n, const void *v, size_t vs, int hd, float *o) {  \
        mix_avx2(s, ss, group, n, v, vs, hd, o, ty);                                                                     \
    }
KV_KERNELS(f32, KV_F32)
KV_KERNELS(f16, KV_F16)
KV_KERNELS(q8_0, KV_Q8_0)

// The same on AVX-512 (16 floats a vector): the scores' per-pair sums fold
// their 16 lanes to 8 (lane i + lane i + 8) and then follow hsum8x4's
// pattern, for four heads or for one head against four keys alike, so a
// head's scores do not depend on its grouping; the mix is each output
// value's chain of fmas over the positions in order, the AVX2 kernel's floats.
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))

AVX512 INLINE __m512 ld16(const void *row, int i, const int ty) {
    if (ty == KV_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
    if (ty == KV_Q8_0) {
        const block_q8_0 *b = (const block_q8_0 *)row + i / 32;
        uint16_t h;
        memcpy(&h, b->d, 2);
        __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + i % 32))));
        return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h)), q);
    }
    return _mm512_loadu_ps((const float *)row + i);
}

AVX512 INLINE __m256 fold16(__m512 a) { return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))); }

AVX512 INLINE __m128 dot4q_512(const float *q, int hd, const void *k, const int ty) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd; i += 16) {
        __m512 kv = ld16(k, i, ty);
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), kv, a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + hd + i), kv, a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 2 * hd + i), kv, a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 3 * hd + i), kv, a3);
    }
    return hsum8x4(fold16(a0), fold16(a1), fold16(a2), fold16(a3));
}

AVX512 INLINE __m128 dot1q4k_512(const float *q, int hd, const void *k, size_t ks, const int ty) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const char *k0 = k;
    for (int i = 0; i < hd; i += 16) {
        __m512 qv = _mm512_loadu_ps(q + i);
        a0 = _mm512_fmadd_ps(qv, ld16(k0, i, ty), a0);
        a1 = _mm512_fmadd_ps(qv, ld16(k0 + ks, i, ty), a1);
        a2 = _mm512_fmadd_ps(qv, ld16(k0 + 2 * ks, i, ty), a2);
        a3 = _mm512_fmadd_ps(qv, ld16(k0 + 3 * ks, i, ty), a3);
    }
    return hsum8x4(fold16(a0), fold16(a1), fold16(a2), fold16(a3));
}

AVX512 INLINE void scores_512(const float *q, int group, int hd, const char *k, size_t kstride, int n, float scale, float *s,
                              size_t sstride, const int ty) {
    int g = 0;
    for (; g + 4 <= group; g += 4) {
        const float *qg = q + (size_t)g * hd;
        for (int p = 0; p < n; p++) {
            float r[4];
            _mm_storeu_ps(r, _mm_mul_ps(dot4q_512(qg, hd, k + kstride * p, ty), _mm_set1_ps(scale)));
            for (int j = 0; j < 4; j++) s[(size_t)(g + j) * sstride + p] = r[j];
        }
    }
    for (; g < group; g++) {
        const float *qg = q + (size_t)g * hd;
        float *sg = s + (size_t)g * sstride;
        int p = 0;
        for (; p + 4 <= n; p += 4) _mm_storeu_ps(sg + p, _mm_mul_ps(dot1q4k_512(qg, hd, k + kstride * p, kstride, ty), _mm_set1_ps(scale)));
        for (; p < n; p++) {
            __m128 r = dot1q4k_512(qg, hd, k + kstride * p, 0, ty);
            sg[p] = _mm_cvtss_f32(_mm_mul_ss(r, _mm_set_ss(scale)));
        }
    }
}

// o[g] += sum_p s[g][p] v_p for up to 4 heads, 32 floats of the head at a time (hd a multiple of 32)
AVX512 INLINE void mix_512(const float *s, size_t sstride, int group, int n, const char *v, size_t vstride, int hd, float *o,
                           const int ty) {
    for (int g0 = 0; g0 < group; g0 += 4) {
        int G = group - g0 < 4 ? group - g0 : 4;
        for (int i = 0; i < hd; i += 32) {
            __m512 a[4][2];
            for (int g = 0; g < G; g++) {
                a[g][0] = _mm512_loadu_ps(o + (size_t)(g0 + g) * hd + i);
                a[g][1] = _mm512_loadu_ps(o + (size_t)(g0 + g) * hd + i + 16);
            }
            const char *vp = v;
            if (G == 4)
                for (int p = 0; p < n; p++, vp += vstride) {
                    __m512 v0 = ld16(vp, i, ty), v1 = ld16(vp, i + 16, ty);
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++) {
                        __m512 w = _mm512_set1_ps(s[(size_t)(g0 + g) * sstride + p]);
                        a[g][0] = _mm512_fmadd_ps(w, v0, a[g][0]);
                        a[g][1] = _mm512_fmadd_ps(w, v1, a[g][1]);
                    }
                }
            else
                for (int p = 0; p < n; p++, vp += vstride) {
                    __m512 v0 = ld16(vp, i, ty), v1 = ld16(vp, i + 16, ty);
                    for (int g = 0; g < G; g++) {
                        __m512 w = _mm512_set1_ps(s[(size_t)(g0 + g) * sstride + p]);
                        a[g][0] = _mm512_fmadd_ps(w, v0, a[g][0]);
                        a[g][1] = _mm512_fmadd_ps(w, v1, a[g][1]);
                    }
                }
            for (int g = 0; g < G; g++) {
                _mm512_storeu_ps(o + (size_t)(g0 + g) * hd + i, a[g][0]);
                _mm512_storeu_ps(o + (size_t)(g0 + g) * hd + i + 16, a[g][1]);
            }
        }
    }
}

#define KV_KERNELS512(T, ty)                                                                                            \
    AVX512 static void scores512_##T(const float *q, int group, int hd, const void *k, size_t ks, int n, float scale,   \
                                     float *s, size_t ss) {                                                             \
        scores_512(q, group, hd, k, ks, n, scale, s, ss, ty);                                                            \
    }                                                                                                                   \
    AVX512 static void mix512_##T(const float *s, size_t ss, int group, int n, const void *v, size_t vs, int hd, float *o) { \
        mix_512(s, ss, group, n, v, vs, hd, o, ty);                                                                      \
    }
KV_KERNELS512(f32, KV_F32)
KV_KERNELS512(f16, KV_F16)
KV_KERNELS512(q8_0, KV_Q8_0)

void attn_scores(const float *q, int group, int hd, const void *k, int kt, size_t kstride, int n, float scale, float *s,
                 size_t sstride) {
    if (!cpu_has_avx2() || hd % 16) attn_scores_ref(q, group, hd, k, kt, kstride, n, scale, s, sstride);
    else if (cpu_has_vnni()) { // (AVX-512)
        if (kt == KV_F16) scores512_f16(q, group, hd, k, kstride, n, scale, s, sstride);
        else if (kt == KV_Q8_0) scores512_q8_0(q, group, hd, k, kstride, n, scale, s, sstride);
        else scores512_f32(q, group, hd, k, kstride, n, scale, s, sstride);
    } else if (kt == KV_F16) scores_f16(q, group, hd, k, kstride, n, scale, s, sstride);
    else if (kt == KV_Q8_0) scores_q8_0(q, group, hd, k, kstride, n, scale, s, sstride);
    else scores_f32(q, group, hd, k, kstride, n, scale, s, sstride);
}

void attn_mix(const float *s, size_t sstride, int group, int n, const void *v, int vt, size_t vstride, int hd, float *o) {
    if (!cpu_has_avx2() || hd % 16) attn_mix_ref(s, sstride, group, n, v, vt, vstride, hd, o);
    else if (cpu_has_vnni() && hd % 32 == 0) { // (AVX-512: the same floats as the AVX2 kernel)
        if (vt == KV_F16) mix512_f16(s, sstride, group, n, v, vstride, hd, o);
        else if (vt == KV_Q8_0) mix512_q8_0(s, sstride, group, n, v, vstride, hd, o);
        else mix512_f32(s, sstride, group, n, v, vstride, hd, o);
    } else if (vt == KV_F16) mix_f16(s, sstride, group, n, v, vstride, hd, o);
    else if (vt == KV_Q8_0) mix_q8_0(s, sstride, group, n, v, vstride, hd, o);
    else mix_f32(s, sstride, group, n, v, vstride, hd, o);
}
