// Whether floats hold a NaN, at the memory's pace: SSE2 (every x86-64 has
// it) four lanes at a time in four accumulators, else a scalar loop. The
// engine builds at -O2 for any x86-64, where the compiler leaves such a loop
// scalar: a 262k-entry vocabulary's logits then cost a quarter of a
// millisecond a row, 4% of a small model's decode step.
#ifndef INFER_BASE_NAN_H
#define INFER_BASE_NAN_H

#include <stddef.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline int has_nan(const float *x, size_t n) {
    size_t i = 0;
    int any = 0;
#if defined(__SSE2__)
    __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 16 <= n; i += 16) {
        __m128 v0 = _mm_loadu_ps(x + i), v1 = _mm_loadu_ps(x + i + 4), v2 = _mm_loadu_ps(x + i + 8), v3 = _mm_loadu_ps(x + i + 12);
        a0 = _mm_or_ps(a0, _mm_cmpunord_ps(v0, v0)), a1 = _mm_or_ps(a1, _mm_cmpunord_ps(v1, v1));
        a2 = _mm_or_ps(a2, _mm_cmpunord_ps(v2, v2)), a3 = _mm_or_ps(a3, _mm_cmpunord_ps(v3, v3));
    }
    any = _mm_movemask_ps(_mm_or_ps(_mm_or_ps(a0, a1), _mm_or_ps(a2, a3))) != 0;
#endif
    for (; i < n; i++) any |= x[i] != x[i];
    return any;
}

#endif
