// y += a * row, the row decoded from its stored type on the fly: the walk
// FFN's accumulation of down vectors. The scalar version decodes a block at
// a time and is the oracle of the AVX2 one.
#include "compute/cpu/vec.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "base/half.h"

#include <immintrin.h>
#include <string.h>

void vec_axpy_row_ref(float *y, float a, const void *row, int type, int n) {
    const dtype_traits *tr = dtype_get(type);
    float buf[256];
    int step = (256 / tr->blck) * tr->blck; // whole blocks (every type's block is at most 256 elements)
    for (int i = 0; i < n; i += step) {
        int m = n - i < step ? n - i : step;
        tr->to_float((const char *)row + dtype_row_size(type, i), buf, m);
        for (int j = 0; j < m; j++) y[i + j] += a * buf[j];
    }
}

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline void acc8(float *y, __m256 a, __m256 v) { _mm256_storeu_ps(y, _mm256_fmadd_ps(a, v, _mm256_loadu_ps(y))); }

// 32 int8 values times scale s into y[0..32)
AVX2 static inline void acc32_i8(float *y, float s, __m256i q) {
    __m256 vs = _mm256_set1_ps(s);
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    acc8(y, vs, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
    acc8(y + 8, vs, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
    acc8(y + 16, vs, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
    acc8(y + 24, vs, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
}

AVX2 static inline float f16_at(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }

// the 32 signed values of a q4_0 / q5_0 block
AVX2 static inline __m256i nib32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

AVX2 static void axpy_row_avx2(float *y, float a, const void *row, int type, int n) {
    const uint8_t *r = row;
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    switch (type) {
    case DT_F32:
        for (; i + 8 <= n; i += 8) acc8(y + i, va, _mm256_loadu_ps((const float *)(r + 4 * i)));
        for (; i < n; i++) { float v; memcpy(&v, r + 4 * i, 4); y[i] += a * v; }
        return;
    case DT_F16:
        for (; i + 8 <= n; i += 8) acc8(y + i, va, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 2 * i))));
        for (; i < n; i++) y[i] += a * f16_at(r + 2 * i);
        return;
    case DT_BF16:
        for (; i + 8 <= n; i += 8)
            acc8(y + i, va, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(r + 2 * i))), 16)));
        for (; i < n; i++) { uint16_t h; memcpy(&h, r + 2 * i, 2); y[i] += a * bf16_to_f32(h); }
        return;
    case DT_Q8_0:
        for (const block_q8_0 *b = row; i < n; i += QK, b++) acc32_i8(y + i, a * f16_at(b->d), _mm256_loadu_si256((const __m256i *)b->qs));
        return;
    case DT_Q4_0:
        for (const block_q4_0 *b = row; i < n; i += QK, b++)
            acc32_i8(y + i, a * f16_at(b->d), _mm256_sub_epi8(nib32(b->qs), _mm256_set1_epi8(8)));
        return;
    case DT_Q5_0: {
        const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
        const __m256i bitm = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
        for (const block_q5_0 *b = row; i < n; i += QK, b++) {
            uint32_t qh;
            memcpy(&qh, b->qh, 4);
            __m256i h = _mm256_cmpeq_epi8(_mm256_or_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf), bitm), _mm256_set1_epi8(-1));
            __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib32(b->qs), _mm256_and_si256(h, _mm256_set1_epi8(16))), _mm256_set1_epi8(16));
            acc32_i8(y + i, a * f16_at(b->d), q);
        }
        return;
    }
    default:
        vec_axpy_row_ref(y, a, row, type, n);
    }
}

void vec_axpy_row(float *y, float a, const void *row, int type, int n) {
    if (cpu_has_avx2()) axpy_row_avx2(y, a, row, type, n);
    else vec_axpy_row_ref(y, a, row, type, n);
}
