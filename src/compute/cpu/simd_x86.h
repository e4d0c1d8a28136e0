// Helpers shared by the x86 SIMD kernel files (vecdot_avx2.c,
// vecdot_avx512.c): loads, horizontal sums, nibble unpacking.
#ifndef INFER_COMPUTE_CPU_SIMD_X86_H
#define INFER_COMPUTE_CPU_SIMD_X86_H

#include "base/half.h"
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

// Weight rows stream from memory once per token: fetch this many bytes ahead,
// non-temporally (they are not read again until the next token).
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

// one vcvtph2ps (F16C) rather than the portable bit manipulation
AVX2 static inline float ld_f16(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }
static inline float ld_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }

// The sum of 8 lanes as ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)),
// the order hsum8x4 keeps, so 1-row and 4-row kernels agree bit for bit.
AVX2 static inline float hsum8(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

// hsum8 of four vectors at once
AVX2 static inline __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// 32 nibbles of 16 bytes: low nibbles in the low lane, high in the high lane.
AVX2 static inline __m256i nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(15));
}

#endif
