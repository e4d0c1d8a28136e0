// AVX2 + FMA + F16C row kernels. Same arithmetic as the scalar references in
// vecdot.c (integer sums per block, then one float multiply-add per block),
// in the style of ggml's x86 kernels: nibbles unpacked with masks, u8 x s8
// products with maddubs, pairs summed with madd.
#include "compute/cpu/vecdot.h"
#include "models/dtype.h"
#include "models/quant.h"
#include "base/half.h"

#include <immintrin.h>
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

AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 32 nibbles of 16 bytes: low nibbles in the low lane, high in the high lane.
AVX2 static inline __m256i nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(15));
}

// sum of x[i]*y[i] over 32 int8 pairs as 8 int32 (x may be negative: the sign
// moves to y so maddubs sees |x| unsigned).
AVX2 static inline __m256i dot_i8(__m256i x, __m256i y) {
    __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

// ---------------------------------------------------------------------------
// float weights x f32 activations

AVX2 static float dot_f32(const void *vw, const void *vx, int n) {
    const char *w = vw;
    const float *x = vx;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch((const char *)vw + 4 * i + PREFETCH_AHEAD, _MM_HINT_NTA);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps((const float *)(w + 4 * i)), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps((const float *)(w + 4 * i + 32)), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += ld_f32((const uint8_t *)w + 4 * i) * x[i];
    return s;
}

AVX2 static float dot_f16(const void *vw, const void *vx, int n) {
    const uint8_t *w = vw;
    const float *x = vx;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch((const char *)vw + 2 * i + PREFETCH_AHEAD, _MM_HINT_NTA);
        __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i)));
        __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i + 16)));
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += ld_f16(w + 2 * i) * x[i];
    return s;
}

AVX2 static inline __m256 bf16x8(const uint8_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AVX2 static float dot_bf16(const void *vw, const void *vx, int n) {
    const uint8_t *w = vw;
    const float *x = vx;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch((const char *)vw + 2 * i + PREFETCH_AHEAD, _MM_HINT_NTA);
        a0 = _mm256_fmadd_ps(bf16x8(w + 2 * i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(bf16x8(w + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, w + 2 * i, 2);
        s += bf16_to_f32(h) * x[i];
    }
    return s;
}

// Four tokens per weight row for float weights (f32 activations): each 16
// weights are widened once; every token keeps the two accumulators and the
// order of dot_*, so the results equal 4 calls of it bit for bit.
#define DOT4_FLOAT(name, load8, tail)                                                          \
    AVX2 static void name(const void *vw, const void *vx, size_t stride, int n, float *s) {   \
        const uint8_t *w = vw;                                                                 \
        __m256 a0[4], a1[4];                                                                   \
        for (int r = 0; r < 4; r++) a0[r] = a1[r] = _mm256_setzero_ps();                       \
        int i = 0;                                                                             \
        for (; i + 16 <= n; i += 16) {                                                         \
            __m256 w0 = load8(w, i), w1 = load8(w, i + 8);                                     \
            _Pragma("GCC unroll 4")                                                            \
            for (int r = 0; r < 4; r++) {                                                      \
                const float *x = (const float *)((const char *)vx + stride * r);               \
                a0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0[r]);                    \
                a1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1[r]);                \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < 4; r++) {                                                          \
            const float *x = (const float *)((const char *)vx + stride * r);                   \
            float acc = hsum8(_mm256_add_ps(a0[r], a1[r]));                                    \
            for (int j = i; j < n; j++) acc += tail(w, j) * x[j];                              \
            s[r] = acc;                                                                        \
        }                                                                                      \
    }

AVX2 static inline __m256 ld8_f32(const uint8_t *w, int i) { return _mm256_loadu_ps((const float *)(w + 4 * i)); }
AVX2 static inline __m256 ld8_f16(const uint8_t *w, int i) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))); }
AVX2 static inline __m256 ld8_bf16(const uint8_t *w, int i) { return bf16x8(w + 2 * i); }
static inline float tail_f32(const uint8_t *w, int j) { return ld_f32(w + 4 * j); }
AVX2 static inline float tail_f16(const uint8_t *w, int j) { return ld_f16(w + 2 * j); }
static inline float tail_bf16(const uint8_t *w, int j) { uint16_t h; memcpy(&h, w + 2 * j, 2); return bf16_to_f32(h); }
DOT4_FLOAT(dot4_f32, ld8_f32, tail_f32)
DOT4_FLOAT(dot4_f16, ld8_f16, tail_f16)
DOT4_FLOAT(dot4_bf16, ld8_bf16, tail_bf16)

// ---------------------------------------------------------------------------
// 32-element blocks x q8_0

AVX2 static float dot_q8_0(const void *vw, const void *vx, int n) {
    const block_q8_0 *w = vw, *x = vx;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        __m256i qw = _mm256_loadu_si256((const __m256i *)w[i].qs);
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 d = _mm256_set1_ps(ld_f16(w[i].d) * ld_f16(x[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(qw, qx)), acc);
    }
    return hsum8(acc);
}

AVX2 static float dot_q4_0(const void *vw, const void *vx, int n) {
    const block_q4_0 *w = vw;
    const block_q8_0 *x = vx;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        __m256i qw = _mm256_sub_epi8(nibbles32(w[i].qs), _mm256_set1_epi8(8));
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 d = _mm256_set1_ps(ld_f16(w[i].d) * ld_f16(x[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(qw, qx)), acc);
    }
    return hsum8(acc);
}

// q4_1 (x = d q + m) against q8_0: d dx sum(q y) + m dx sum(y)
AVX2 static float dot_q4_1(const void *vw, const void *vx, int n) {
    const block_q4_1 *w = vw;
    const block_q8_0 *x = vx;
    const __m256i ones = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        __m256i qw = nibbles32(w[i].qs); // unsigned 0..15
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(qw, qx), ones16);
        __m256i sy = _mm256_madd_epi16(_mm256_maddubs_epi16(ones, qx), ones16);
        float dx = ld_f16(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_f16(w[i].d) * dx), _mm256_cvtepi32_ps(p), acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_f16(w[i].m) * dx), _mm256_cvtepi32_ps(sy), acc);
    }
    return hsum8(acc);
}

AVX2 static float dot_q5_0(const void *vw, const void *vx, int n) {
    const block_q5_0 *w = vw;
    const block_q8_0 *x = vx;
    // byte j of the spread mask selects bit j of qh within its lane's 8 bytes
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000);
    const __m256i bitm = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        // bit j of qh set -> byte j = 0xFF
        __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
        h = _mm256_cmpeq_epi8(_mm256_or_si256(h, bitm), _mm256_set1_epi8(-1));
        // q - 16 where the fifth bit is clear, q where it is set
        __m256i qw = _mm256_or_si256(nibbles32(w[i].qs), _mm256_andnot_si256(h, _mm256_set1_epi8((char)0xF0)));
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 d = _mm256_set1_ps(ld_f16(w[i].d) * ld_f16(x[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(qw, qx)), acc);
    }
    return hsum8(acc);
}

static inline float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

AVX2 static float dot_mxfp4(const void *vw, const void *vx, int n) {
    const block_mxfp4 *w = vw;
    const block_q8_0 *x = vx;
    const __m128i tab = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m256i tab2 = _mm256_set_m128i(tab, tab);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        __m256i qw = _mm256_shuffle_epi8(tab2, nibbles32(w[i].qs));
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 d = _mm256_set1_ps(e8m0_half(w[i].e) * ld_f16(x[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(qw, qx)), acc);
    }
    return hsum8(acc);
}

// ---------------------------------------------------------------------------
// k-quants x q8_K

static inline void scales_mins_k4(const uint8_t *q, int16_t *sc, int *m) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) { sc[j] = q[j] & 63; m[j] = q[j + 4] & 63; }
        else { sc[j] = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4); m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
    }
}

static inline int mins_dot(const uint8_t *bsums, const int *m) {
    int s = 0;
    for (int g = 0; g < 8; g++) {
        int16_t a, b;
        memcpy(&a, bsums + 4 * g, 2);
        memcpy(&b, bsums + 4 * g + 2, 2);
        s += m[g] * (a + b);
    }
    return s;
}

AVX2 static float dot_q4_K(const void *vw, const void *vx, int n) {
    const block_q4_K *w = vw;
    const block_q8_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0;
    for (int i = 0; i < n / QK_K; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        int16_t sc[8];
        int m[8];
        scales_mins_k4(w[i].scales, sc, m);
        float dy = ld_f32(x[i].d);
        accm += dy * ld_f16(w[i].dmin) * mins_dot(x[i].bsums, m);
        const uint8_t *q = w[i].qs;
        const int8_t *y = x[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q += 32, y += 64) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)q);
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
            __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * ld_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc) - accm;
}

AVX2 static float dot_q5_K(const void *vw, const void *vx, int n) {
    const block_q5_K *w = vw;
    const block_q8_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(15), b16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0;
    for (int i = 0; i < n / QK_K; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        int16_t sc[8];
        int m[8];
        scales_mins_k4(w[i].scales, sc, m);
        float dy = ld_f32(x[i].d);
        accm += dy * ld_f16(w[i].dmin) * mins_dot(x[i].bsums, m);
        const uint8_t *q = w[i].qs;
        const int8_t *y = x[i].qs;
        __m256i hb = _mm256_loadu_si256((const __m256i *)w[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q += 32, y += 64) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)q);
            __m256i ml = _mm256_set1_epi8((char)(1 << (2 * j))), mh = _mm256_set1_epi8((char)(1 << (2 * j + 1)));
            __m256i hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, ml), ml), b16);
            __m256i hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, mh), mh), b16);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, m4), hl);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh);
            __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
            __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * ld_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc) - accm;
}

AVX2 static float dot_q6_K(const void *vw, const void *vx, int n) {
    const block_q6_K *w = vw;
    const block_q8_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
        const uint8_t *ql = w[i].ql, *qh = w[i].qh;
        const int8_t *y = x[i].qs, *sc = w[i].scales;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, y += 128, sc += 8) {
            __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                __m256i yk = _mm256_loadu_si256((const __m256i *)(y + 32 * k));
                // (q - 32) . y = q . y - 32 * sum(y)
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], yk), _mm256_maddubs_epi16(m32, yk));
                __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(x[i].d) * ld_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc);
}

// ---------------------------------------------------------------------------
// four activation rows at once (prefill): each weight block is unpacked once

// The signed 32 weights of block i of a 32-element type, and its scale.
AVX2 static inline __m256i unpack_q8_0(const void *w, int i, float *d) {
    const block_q8_0 *b = (const block_q8_0 *)w + i;
    *d = ld_f16(b->d);
    return _mm256_loadu_si256((const __m256i *)b->qs);
}
AVX2 static inline __m256i unpack_q4_0(const void *w, int i, float *d) {
    const block_q4_0 *b = (const block_q4_0 *)w + i;
    *d = ld_f16(b->d);
    return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8));
}
AVX2 static inline __m256i unpack_q5_0(const void *w, int i, float *d) {
    const block_q5_0 *b = (const block_q5_0 *)w + i;
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bitm = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    h = _mm256_cmpeq_epi8(_mm256_or_si256(h, bitm), _mm256_set1_epi8(-1));
    *d = ld_f16(b->d);
    return _mm256_or_si256(nibbles32(b->qs), _mm256_andnot_si256(h, _mm256_set1_epi8((char)0xF0)));
}

#define DOT4_Q8_0(name, unpack)                                                                   \
    AVX2 static void name(const void *w, const void *vx, size_t stride, int n, float *s) {       \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        for (int i = 0; i < n / QK; i++) {                                                       \
            float dw;                                                                            \
            __m256i qw = unpack(w, i, &dw);                                                      \
            __m256i aw = _mm256_sign_epi8(qw, qw);                                               \
            _Pragma("GCC unroll 4")                                                              \
            for (int r = 0; r < 4; r++) {                                                        \
                const block_q8_0 *x = (const block_q8_0 *)((const char *)vx + stride * r) + i;   \
                __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x->qs), qw);   \
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sy), _mm256_set1_epi16(1)); \
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * ld_f16(x->d)), _mm256_cvtepi32_ps(p), acc[r]); \
            }                                                                                    \
        }                                                                                        \
        for (int r = 0; r < 4; r++) s[r] = hsum8(acc[r]);                                        \
    }
DOT4_Q8_0(dot4_q8_0, unpack_q8_0)
DOT4_Q8_0(dot4_q4_0, unpack_q4_0)
DOT4_Q8_0(dot4_q5_0, unpack_q5_0)

// Eight tokens per weight block with unsigned activations (block_q8u): per
// block and token one load, maddubs, madd and the 128-offset correction,
// which depends on the weights only and is made once per block.
#define DOT8U(name, unpack)                                                                         \
    AVX2 static void name(const void *w, const void *vx, size_t stride, int n, float *s) {         \
        __m256 acc[8];                                                                             \
        for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();                                  \
        const __m256i ones16 = _mm256_set1_epi16(1), off = _mm256_set1_epi8((char)0x80);           \
        for (int i = 0; i < n / QK; i++) {                                                         \
            float dw;                                                                              \
            __m256i qw = unpack(w, i, &dw);                                                        \
            __m256i corr = _mm256_madd_epi16(_mm256_maddubs_epi16(off, qw), ones16);               \
            __m256 vdw = _mm256_set1_ps(dw);                                                       \
            _Pragma("GCC unroll 8")                                                                \
            for (int r = 0; r < 8; r++) {                                                          \
                const block_q8u *x = (const block_q8u *)((const char *)vx + stride * r) + i;       \
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)x->qs), qw), ones16); \
                p = _mm256_sub_epi32(p, corr);                                                     \
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(vdw, _mm256_broadcast_ss(&x->d)), _mm256_cvtepi32_ps(p), acc[r]); \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < 8; r++) s[r] = hsum8(acc[r]);                                          \
    }

AVX2 static inline __m256i unpack_mxfp4(const void *w, int i, float *d) {
    const block_mxfp4 *b = (const block_mxfp4 *)w + i;
    const __m128i tab = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    *d = e8m0_half(b->e);
    return _mm256_shuffle_epi8(_mm256_set_m128i(tab, tab), nibbles32(b->qs));
}
DOT8U(dot8u_q4_0, unpack_q4_0)
DOT8U(dot8u_q5_0, unpack_q5_0)
DOT8U(dot8u_mxfp4, unpack_mxfp4)

AVX2 static void dot4_q4_K(const void *vw, const void *vx, size_t stride, int n, float *s) {
    const block_q4_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float accm[4] = {0, 0, 0, 0};
    for (int i = 0; i < n / QK_K; i++) {
        int16_t sc[8];
        int m[8];
        scales_mins_k4(w[i].scales, sc, m);
        float d = ld_f16(w[i].d), dmin = ld_f16(w[i].dmin);
        __m256i lo[4], hi[4];
        for (int j = 0; j < 4; j++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * j));
            lo[j] = _mm256_and_si256(bits, m4);
            hi[j] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            float dy = ld_f32(x->d);
            accm[r] += dy * dmin * mins_dot(x->bsums, m);
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i pl = _mm256_maddubs_epi16(lo[j], _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j)));
                __m256i ph = _mm256_maddubs_epi16(hi[j], _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * d), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) s[r] = hsum8(acc[r]) - accm[r];
}

// Eight tokens per q4_K super-block: the nibbles of each 64-element part are
// unpacked once and multiplied into 8 integer sums.
AVX2 static void dot8_q4_K(const void *vw, const void *vx, size_t stride, int n, float *s) {
    const block_q4_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15);
    // the same operations per token as dot_q4_K, so batched and single-token
    // results are identical
    __m256 acc[8];
    float accm[8] = {0};
    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        int16_t sc[8];
        int m[8];
        scales_mins_k4(w[i].scales, sc, m);
        float d = ld_f16(w[i].d);
        __m256i sumi[8];
        for (int r = 0; r < 8; r++) sumi[r] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            __m256i sl = _mm256_set1_epi16(sc[2 * j]), sh = _mm256_set1_epi16(sc[2 * j + 1]);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 64 * j;
                __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
                __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(pl, sl), _mm256_madd_epi16(ph, sh)));
            }
        }
        for (int r = 0; r < 8; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            float dy = ld_f32(x->d);
            accm[r] += dy * ld_f16(w[i].dmin) * mins_dot(x->bsums, m);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < 8; r++) s[r] = hsum8(acc[r]) - accm[r];
}

AVX2 static void dot4_q6_K(const void *vw, const void *vx, size_t stride, int n, float *s) {
    const block_q6_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n / QK_K; i++) {
        __m256i q[8], sc[8];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *scl = w[i].scales + 8 * h;
            __m256i b1 = _mm256_loadu_si256((const __m256i *)ql), b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
            for (int k = 0; k < 4; k++) sc[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16(scl[2 * k + 1]), _mm_set1_epi16(scl[2 * k]));
        }
        float d = ld_f16(w[i].d);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            __m256i sumi = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {
                __m256i yk = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * k));
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], yk), _mm256_maddubs_epi16(m32, yk));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sc[k]));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(x->d) * d), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) s[r] = hsum8(acc[r]);
}

// act_quant_q8_0 with AVX2: the same max, scales and round-half-to-even as
// the scalar version (and as ggml's x86 quantize_row_q8_0), so the blocks are
// identical.
AVX2 static void act_quant_q8_0_avx2(const float *x, void *vy, int n) {
    block_q8_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < n / QK; i++, x += QK) {
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
        uint16_t h = f32_to_f16(d);
        memcpy(y[i].d, &h, 2);
        __m256 mul = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

const vecdot_kernel vecdot_avx2[DT_COUNT] = {
    [DT_F32] = {DT_F32, dot_f32, NULL, dot4_f32},
    [DT_F16] = {DT_F32, dot_f16, NULL, dot4_f16},
    [DT_BF16] = {DT_F32, dot_bf16, NULL, dot4_bf16},
    [DT_Q8_0] = {DT_Q8_0, dot_q8_0, act_quant_q8_0_avx2, dot4_q8_0},
    [DT_Q4_0] = {DT_Q8_0, dot_q4_0, act_quant_q8_0_avx2, dot4_q4_0, dot8u_q4_0},
    [DT_Q5_0] = {DT_Q8_0, dot_q5_0, act_quant_q8_0_avx2, dot4_q5_0, dot8u_q5_0},
    [DT_Q4_1] = {DT_Q8_0, dot_q4_1, act_quant_q8_0_avx2},
    [DT_MXFP4] = {DT_Q8_0, dot_mxfp4, act_quant_q8_0_avx2, NULL, dot8u_mxfp4},
    [DT_Q4_K] = {DT_Q8_K, dot_q4_K, act_quant_q8_K, dot4_q4_K, NULL, dot8_q4_K},
    [DT_Q5_K] = {DT_Q8_K, dot_q5_K, act_quant_q8_K},
    [DT_Q6_K] = {DT_Q8_K, dot_q6_K, act_quant_q8_K, dot4_q6_K},
};
