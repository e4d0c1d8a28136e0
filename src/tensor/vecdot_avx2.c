// AVX2 + FMA + F16C row kernels. Same arithmetic as the scalar references in
// vecdot.c (integer sums per block, then one float multiply-add per block),
// in the style of ggml's x86 kernels: nibbles unpacked with masks, u8 x s8
// products with maddubs, pairs summed with madd.
#include "tensor/vecdot.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
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

// sum of x[i]*y[i] over 32 int8 pairs as 8 int32 (x may be negative: the sign
// moves to y so maddubs sees |x| unsigned).
AVX2 static inline __m256i dot_i8(__m256i x, __m256i y) {
    __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

// ---------------------------------------------------------------------------
// float weights x f32 activations

AVX2 static inline __m256 bf16x8(const uint8_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
AVX2 static inline __m256 ld8_f32(const uint8_t *w, int i) { return _mm256_loadu_ps((const float *)(w + 4 * i)); }
AVX2 static inline __m256 ld8_f16(const uint8_t *w, int i) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))); }
AVX2 static inline __m256 ld8_bf16(const uint8_t *w, int i) { return bf16x8(w + 2 * i); }
static inline float tail_f32(const uint8_t *w, int j) { return ld_f32(w + 4 * j); }
AVX2 static inline float tail_f16(const uint8_t *w, int j) { return ld_f16(w + 2 * j); }
static inline float tail_bf16(const uint8_t *w, int j) { uint16_t h; memcpy(&h, w + 2 * j, 2); return bf16_to_f32(h); }

// Float weights against f32 activations: RW weight rows (ws bytes apart) by
// RT tokens (xs bytes apart), one accumulator per (row, token) over 8
// elements at a time, then hsum8 and the tail in order. Every pair sees the
// same operations in every tile shape, so a batch equals one-at-a-time calls
// bit for bit. Decode uses 4 rows x 1 token, prefill 2 rows x 4 tokens.
#define FLOAT_TILE(name, load8, tail, RW, RT, bytes)                                                 \
    AVX2 static void name(const void *vw, size_t ws, const void *vx, size_t xs, int n, float *s) {   \
        const uint8_t *w = vw;                                                                        \
        __m256 acc[RW * RT];                                                                          \
        _Pragma("GCC unroll 8") for (int a = 0; a < RW * RT; a++) acc[a] = _mm256_setzero_ps();      \
        int i = 0;                                                                                    \
        for (; i + 8 <= n; i += 8) {                                                                  \
            __m256 xv[RT];                                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) {                                    \
                xv[r] = _mm256_loadu_ps((const float *)((const char *)vx + xs * r) + i);              \
                if (RW > 1) __asm__("" : "+x"(xv[r])); /* keep it in a register for the RW rows */    \
            }                                                                                         \
            _Pragma("GCC unroll 4") for (int k = 0; k < RW; k++) {                                    \
                if (RT == 1 && i % 16 == 0) _mm_prefetch((const char *)w + ws * k + bytes * i + PREFETCH_AHEAD, _MM_HINT_NTA); \
                __m256 wv = load8(w + ws * k, i);                                                     \
                _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) acc[k * RT + r] = _mm256_fmadd_ps(wv, xv[r], acc[k * RT + r]); \
            }                                                                                         \
        }                                                                                             \
        for (int k = 0; k < RW; k++)                                                                  \
            for (int r = 0; r < RT; r++) {                                                            \
                const float *x = (const float *)((const char *)vx + xs * r);                          \
                float v = hsum8(acc[k * RT + r]);                                                     \
                for (int j = i; j < n; j++) v += tail(w + ws * k, j) * x[j];                          \
                s[k * RT + r] = v;                                                                    \
            }                                                                                         \
    }

#define FLOAT_KERNELS(t, bytes)                                                                                  \
    FLOAT_TILE(tile1_##t, ld8_##t, tail_##t, 1, 1, bytes)                                                        \
    FLOAT_TILE(tile14_##t, ld8_##t, tail_##t, 1, 4, bytes)                                                       \
    FLOAT_TILE(tile41_##t, ld8_##t, tail_##t, 4, 1, bytes)                                                       \
    FLOAT_TILE(tile24_##t, ld8_##t, tail_##t, 2, 4, bytes)                                                       \
    AVX2 static float dot_##t(const void *w, const void *x, int n) { float s; tile1_##t(w, 0, x, 0, n, &s); return s; } \
    AVX2 static void dot4_##t(const void *w, const void *x, size_t st, int n, float *s) { tile14_##t(w, 0, x, st, n, s); } \
    AVX2 static void dotr_##t(const void *w, size_t ws, const void *x, int n, float *s) { tile41_##t(w, ws, x, 0, n, s); }
FLOAT_KERNELS(f32, 4)
FLOAT_KERNELS(f16, 2)
FLOAT_KERNELS(bf16, 2)

// ---------------------------------------------------------------------------
// 32-element blocks x q8_0, four blocks at a time
//
// The activations come in groups of four q8_0 blocks (act_q8_0_group's
// layout): 128 value bytes, the four scales as f32 and the four int32 sums
// of the values, so one pointer per token reaches all of a group. Weights are
// unpacked to unsigned bytes u = w + off (q4_0: 8, q5_0: 16, mxfp4: 12), so
// maddubs(u, y) needs no sign juggling and sum (u - off) y = sum u y - off
// sum y stays exact in integers. The sums of four blocks are reduced by two
// hadds into one vector (lanes j and j + 4 hold the halves of block j) and
// scaled by the four weight scales times the four activation scales at once.
// q4_1 and q5_1 (w = d u + m) add m dy sum y; q8_0 keeps signed weights.
// The 1-token (decode) and R-token (prefill) kernels below run the same
// operations per token, so a batch gives the token-by-token results exactly.

enum { K_Q8_0, K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_MXFP4 };

// bytes of one block of kind K
static inline size_t q32_size(int K) {
    return K == K_Q8_0 ? sizeof(block_q8_0) : K == K_Q4_0 ? sizeof(block_q4_0) : K == K_Q4_1 ? sizeof(block_q4_1)
         : K == K_Q5_0 ? sizeof(block_q5_0) : K == K_Q5_1 ? sizeof(block_q5_1) : sizeof(block_mxfp4);
}

// the kinds with a min (w = d u + m)
static inline int q32_has_min(int K) { return K == K_Q4_1 || K == K_Q5_1; }

// q5_0/q5_1: the 16 nibble bytes with bit 4 of element j from bit j of qh
AVX2 static inline __m256i nibbles32_qh(const uint8_t *qs, const uint8_t *qhp) {
    // byte j of the spread mask selects bit j of qh within its lane's 8 bytes
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bitm = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    h = _mm256_cmpeq_epi8(_mm256_or_si256(h, bitm), _mm256_set1_epi8(-1)); // bit set -> 0xFF
    return _mm256_or_si256(nibbles32(qs), _mm256_and_si256(h, _mm256_set1_epi8(16)));
}

// bytes of block i of row w, and its scale (and the min of q4_1, q5_1)
AVX2 static inline __attribute__((always_inline)) __m256i q32_unpack(int K, const void *w, int i) {
    switch (K) {
    case K_Q8_0: return _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)w)[i].qs);
    case K_Q4_0: return nibbles32(((const block_q4_0 *)w)[i].qs);
    case K_Q4_1: return nibbles32(((const block_q4_1 *)w)[i].qs);
    case K_Q5_0: return nibbles32_qh(((const block_q5_0 *)w)[i].qs, ((const block_q5_0 *)w)[i].qh);
    case K_Q5_1: return nibbles32_qh(((const block_q5_1 *)w)[i].qs, ((const block_q5_1 *)w)[i].qh);
    default: { // mxfp4: the e2m1 values, doubled, plus 12
        const __m128i tab = _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
        return _mm256_shuffle_epi8(_mm256_set_m128i(tab, tab), nibbles32(((const block_mxfp4 *)w)[i].qs));
    }
    }
}

AVX2 static inline __attribute__((always_inline)) float q32_scale(int K, const void *w, int i) {
    switch (K) {
    case K_Q8_0: return ld_f16(((const block_q8_0 *)w)[i].d);
    case K_Q4_0: return ld_f16(((const block_q4_0 *)w)[i].d);
    case K_Q4_1: return ld_f16(((const block_q4_1 *)w)[i].d);
    case K_Q5_0: return ld_f16(((const block_q5_0 *)w)[i].d);
    case K_Q5_1: return ld_f16(((const block_q5_1 *)w)[i].d);
    default: return e8m0_half(((const block_mxfp4 *)w)[i].e);
    }
}

AVX2 static inline __attribute__((always_inline)) __m128 q32_scale4(int K, const void *w, int i) {
    if (K == K_MXFP4) {
        const block_mxfp4 *b = (const block_mxfp4 *)w + i;
        return _mm_setr_ps(e8m0_half(b[0].e), e8m0_half(b[1].e), e8m0_half(b[2].e), e8m0_half(b[3].e));
    }
    size_t bs = q32_size(K);
    const uint8_t *p = (const uint8_t *)w + bs * (size_t)i; // d leads every block
    uint16_t h[4];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) memcpy(&h[j], p + bs * (size_t)j, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

// the mins of blocks i..i+3 (q4_1, q5_1: m follows d in both)
AVX2 static inline __attribute__((always_inline)) __m128 q32_min4(int K, const void *w, int i) {
    size_t bs = q32_size(K);
    const uint8_t *p = (const uint8_t *)w + bs * (size_t)i + 2;
    uint16_t h[4];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) memcpy(&h[j], p + bs * (size_t)j, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

static inline int q32_off(int K) { return K == K_Q4_0 ? 8 : K == K_Q5_0 ? 16 : K == K_MXFP4 ? 12 : 0; }

// activation group g of a row: values, scales, sums
#define XG_QS(x, g) ((const int8_t *)((const char *)(x) + ACT_GROUP_BYTES * (size_t)(g)))
#define XG_D(x, g) ((const float *)((const char *)(x) + ACT_GROUP_BYTES * (size_t)(g) + 128))
#define XG_S(x, g) ((const int32_t *)((const char *)(x) + ACT_GROUP_BYTES * (size_t)(g) + 144))

// integer sum of weight block u (|u| for q8_0, with its signs in w) against y
AVX2 static inline __attribute__((always_inline)) __m256i q32_isum(int K, __m256i u, __m256i w, const int8_t *y) {
    __m256i yv = _mm256_loadu_si256((const __m256i *)y);
    if (K == K_Q8_0) yv = _mm256_sign_epi8(yv, w);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, yv), _mm256_set1_epi16(1));
}

// The integer sums of 4 blocks against 4 activation blocks y: lane j holds
// block j's elements 0..15, lane j + 4 its elements 16..31. Unsigned weights
// of at most 31 keep 8 products of an int16 lane below 2^15 (8 * 31 * 128),
// so they are summed as int16 by two hadds and widened by one madd (5
// multiplies, not 8); q8_0's larger products are widened per block first.
// Either way the sums are exact, so every tile shape gets the same integers.
AVX2 static inline __attribute__((always_inline)) __m256i q32_isum4(int K, const __m256i *u, const __m256i *sg, const int8_t *y) {
    if (K == K_Q8_0) {
        __m256i p0 = q32_isum(K, u[0], sg[0], y), p1 = q32_isum(K, u[1], sg[1], y + 32);
        __m256i p2 = q32_isum(K, u[2], sg[2], y + 64), p3 = q32_isum(K, u[3], sg[3], y + 96);
        return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    }
    __m256i m[4];
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) m[j] = _mm256_maddubs_epi16(u[j], _mm256_loadu_si256((const __m256i *)(y + 32 * j)));
    __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(m[0], m[1]), _mm256_hadd_epi16(m[2], m[3]));
    return _mm256_madd_epi16(h, _mm256_set1_epi16(1));
}

// The kernel for RW weight rows (w + k * ws bytes) by RT tokens (x + r *
// stride bytes): s[k * RT + r] = row k . token r. Decode runs 4 rows of one
// token, prefill one row of 4 or 8 tokens; each (row, token) pair sees the
// same operations either way.
AVX2 static inline __attribute__((always_inline)) void q32_tile(int K, const void *w0, size_t ws, int RW, const void *vx,
                                                                size_t stride, int RT, int n, float *s) {
    const int nb = n / QK, off = q32_off(K);
    const size_t bsz = q32_size(K);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int a = 0; a < RW * RT; a++) acc[a] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        _Pragma("GCC unroll 8")
        for (int k = 0; k < RW; k++) {
            const void *w = (const char *)w0 + ws * k;
            if (RT == 1) // every cache line of the next 4 blocks, PREFETCH_AHEAD bytes on
                for (size_t o = 0; o < 4 * bsz; o += 64) _mm_prefetch((const char *)w + bsz * (size_t)i + PREFETCH_AHEAD + o, _MM_HINT_NTA);
            __m256i u[4], sg[4];
            _Pragma("GCC unroll 8")
            for (int j = 0; j < 4; j++) {
                sg[j] = q32_unpack(K, w, i + j);
                u[j] = K == K_Q8_0 ? _mm256_sign_epi8(sg[j], sg[j]) : sg[j];
            }
            __m128 dw = q32_scale4(K, w, i);
            __m256 dw8 = _mm256_set_m128(dw, dw);
            __m128 m4 = q32_has_min(K) ? q32_min4(K, w, i) : _mm_setzero_ps();
            _Pragma("GCC unroll 8")
            for (int r = 0; r < RT; r++) {
                const void *xr = (const char *)vx + stride * r;
                const int8_t *y = XG_QS(xr, i / 4);
                const float *yd = XG_D(xr, i / 4);
                const int32_t *ys = XG_S(xr, i / 4);
                __m256i p = q32_isum4(K, u, sg, y);
                __m128i ys4 = _mm_loadu_si128((const __m128i *)ys);
                if (off) { // off * ys by shifts where off is a power of two (a multiply costs a mul-port slot)
                    __m128i o = off == 8 ? _mm_slli_epi32(ys4, 3) : off == 16 ? _mm_slli_epi32(ys4, 4) : _mm_mullo_epi32(ys4, _mm_set1_epi32(off));
                    p = _mm256_sub_epi32(p, _mm256_zextsi128_si256(o));
                }
                __m128 dy = _mm_loadu_ps(yd);
                __m256 sc = _mm256_mul_ps(dw8, _mm256_broadcast_ps((const __m128 *)yd)); // dw dy in both halves
                __m256 *ac = &acc[k * RT + r];
                *ac = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(p), *ac);
                if (q32_has_min(K))
                    *ac = _mm256_fmadd_ps(_mm256_zextps128_ps256(m4), _mm256_zextps128_ps256(_mm_mul_ps(dy, _mm_cvtepi32_ps(ys4))), *ac);
            }
        }
    }
    for (; i < nb; i++) {
        for (int k = 0; k < RW; k++) {
            const void *w = (const char *)w0 + ws * k;
            __m256i sg = q32_unpack(K, w, i), u = K == K_Q8_0 ? _mm256_sign_epi8(sg, sg) : sg;
            float dw = q32_scale(K, w, i);
            float m = q32_has_min(K) ? ld_f16((const uint8_t *)w + bsz * (size_t)i + 2) : 0.0f;
            for (int r = 0; r < RT; r++) {
                const void *xr = (const char *)vx + stride * r;
                const int8_t *y = XG_QS(xr, i / 4) + 32 * (i % 4);
                const float *yd = XG_D(xr, i / 4) + i % 4;
                int32_t ys = XG_S(xr, i / 4)[i % 4];
                __m256i p = q32_isum(K, u, sg, y);
                if (off) p = _mm256_sub_epi32(p, _mm256_zextsi128_si256(_mm_cvtsi32_si128(off * ys)));
                __m256 *ac = &acc[k * RT + r];
                *ac = _mm256_fmadd_ps(_mm256_set1_ps(dw * yd[0]), _mm256_cvtepi32_ps(p), *ac);
                if (q32_has_min(K))
                    *ac = _mm256_fmadd_ps(_mm256_zextps128_ps256(_mm_set_ss(m)), _mm256_zextps128_ps256(_mm_set_ss(yd[0] * (float)ys)), *ac);
            }
        }
    }
    if (RW * RT == 4) _mm_storeu_ps(s, hsum8x4(acc[0], acc[1], acc[2], acc[3]));
    else if (RW * RT == 8) {
        _mm_storeu_ps(s, hsum8x4(acc[0], acc[1], acc[2], acc[3]));
        _mm_storeu_ps(s + 4, hsum8x4(acc[4], acc[5], acc[6], acc[7]));
    }
    else
        for (int a = 0; a < RW * RT; a++) s[a] = hsum8(acc[a]);
}

#define Q32_KERNELS(t, K)                                                                                    \
    AVX2 static float dot_##t(const void *w, const void *x, int n) { float s; q32_tile(K, w, 0, 1, x, 0, 1, n, &s); return s; } \
    AVX2 static void dotr_##t(const void *w, size_t ws, const void *x, int n, float *s) { q32_tile(K, w, ws, 4, x, 0, 1, n, s); } \
    AVX2 static void dot4_##t(const void *w, const void *x, size_t st, int n, float *s) { q32_tile(K, w, 0, 1, x, st, 4, n, s); } \
    AVX2 static void dot8_##t(const void *w, const void *x, size_t st, int n, float *s) { q32_tile(K, w, 0, 1, x, st, 8, n, s); }
Q32_KERNELS(q8_0, K_Q8_0)
Q32_KERNELS(q4_0, K_Q4_0)
Q32_KERNELS(q4_1, K_Q4_1)
Q32_KERNELS(q5_0, K_Q5_0)
Q32_KERNELS(q5_1, K_Q5_1)
Q32_KERNELS(mxfp4, K_MXFP4)

// ---------------------------------------------------------------------------
// k-quants x q8_K

static inline void scales_mins_k4(const uint8_t *q, int16_t *sc, int *m) {
    _Pragma("GCC unroll 8")
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

// q4_K: the 6-bit scales and mins of a super-block unpacked with 32-bit
// masks into 8 scale bytes and 8 min bytes (get_scale_min_k4 for all 8 at
// once); each 32-element group's scale is spread to 16-bit lanes by a byte
// shuffle, and the mins meet the activation's 16-element sums in one madd.
AVX2 static inline __m128i q4K_scales_mins(const uint8_t *q) {
    uint32_t u[4];
    memcpy(u, q, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); // mins 4..7
    uint32_t mins03 = u[1] & m6;
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);        // scales 4..7
    u[2] = mins03;
    u[0] &= m6;                                            // scales 0..3
    return _mm_setr_epi32((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
}

// shuffle picking 16-bit lane e of each 128-bit half into all 8 of its lanes
AVX2 static inline __m256i pick16(int e) { return _mm256_set1_epi16((short)((2 * e + 1) << 8 | 2 * e)); }

AVX2 static inline __attribute__((always_inline)) void q4K_tokens(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q4_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1) {
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64, _MM_HINT_NTA);
        }
        __m128i sm = q4K_scales_mins(w[i].scales);
        __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        float d = ld_f16(w[i].d), dmin = ld_f16(w[i].dmin);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int j = 0; j < 4; j++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            __m256i sl = _mm256_shuffle_epi8(sc, pick16(2 * j)), sh = _mm256_shuffle_epi8(sc, pick16(2 * j + 1));
            _Pragma("GCC unroll 8")
            for (int r = 0; r < R; r++) {
                const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 64 * j;
                __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
                __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(pl, sl), _mm256_madd_epi16(ph, sh)));
            }
        }
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            float dy = ld_f32(x->d);
            __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 16)));
            __m128i pm = _mm_madd_epi16(mins, bs);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dy * dmin), _mm256_cvtepi32_ps(_mm256_zextsi128_si256(pm)), acc[r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

AVX2 static float dot_q4_K(const void *w, const void *x, int n) { float s; q4K_tokens(w, x, 0, n, 1, &s); return s; }
AVX2 static void dot4_q4_K(const void *w, const void *x, size_t st, int n, float *s) { q4K_tokens(w, x, st, n, 4, s); }
AVX2 static void dot8_q4_K(const void *w, const void *x, size_t st, int n, float *s) { q4K_tokens(w, x, st, n, 8, s); }

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

// q6_K: 6-bit values q in 0..63 with weight q - 32; sum (q - 32) y per
// 16-element group is sum q y - 32 times the activation's group sum, so the
// offset costs one madd of the 16 scales with the 16 sums per super-block.
AVX2 static inline __attribute__((always_inline)) void q6K_tokens(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q6_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1)
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 3; k++) _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64 * k, _MM_HINT_NTA);
        __m128i sc8 = _mm_loadu_si128((const __m128i *)w[i].scales);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            __m256i b1 = _mm256_loadu_si256((const __m256i *)ql), b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 4; k++) {
                int g = 8 * h + 2 * k; // scales g (elements 0..15 of part k) and g + 1 (16..31)
                __m128i pick = _mm_setr_epi8(g, g, g, g, g, g, g, g, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1);
                __m256i sck = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
                _Pragma("GCC unroll 8")
                for (int r = 0; r < R; r++) {
                    const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)y));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sck));
                }
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        float d = ld_f16(w[i].d);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)x->bsums));
            __m256i t = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(corr, 5));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(x->d) * d), _mm256_cvtepi32_ps(t), acc[r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

AVX2 static float dot_q6_K(const void *w, const void *x, int n) { float s; q6K_tokens(w, x, 0, n, 1, &s); return s; }
AVX2 static void dot4_q6_K(const void *w, const void *x, size_t st, int n, float *s) { q6K_tokens(w, x, st, n, 4, s); }
AVX2 static void dot8_q6_K(const void *w, const void *x, size_t st, int n, float *s) { q6K_tokens(w, x, st, n, 8, s); }

// q2_K and q3_K: 16 groups of 16 with 2 low bits per element, element 128h +
// 32k + l in bits 2k..2k+1 of qs[32h + l]. One 32-byte load per half gives
// its four 32-element chunks by a shift and a mask; chunk (h, k) spans groups
// 8h + 2k (the low 128-bit lane) and 8h + 2k + 1 (the high lane), so its
// scales come from one in-lane shuffle of the half's 8 scales (sch[h], in
// both lanes). Per token: maddubs of the chunk with the activations, madd
// with the scales, and one float multiply-add per super-block.

// shuffle picking 16-bit lane e into every lane of the low half and e + 1
// into every lane of the high half
AVX2 static inline __m256i pick16x2(int e) {
    return _mm256_set_m128i(_mm_set1_epi16((short)((2 * e + 3) << 8 | (2 * e + 2))),
                            _mm_set1_epi16((short)((2 * e + 1) << 8 | 2 * e)));
}

// q2_K: x = d (sc & 15) q - dmin (sc >> 4), q in 0..3; the mins meet the
// activation's 16 group sums in one madd per super-block, as q4_K.
AVX2 static inline __attribute__((always_inline)) void q2K_tokens(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q2_K *w = vw;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(15);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1) {
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64, _MM_HINT_NTA);
        }
        __m128i sm = _mm_loadu_si128((const __m128i *)w[i].scales);
        __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
        __m256i sch[2] = {_mm256_permute4x64_epi64(sc, 0x44), _mm256_permute4x64_epi64(sc, 0xee)};
        float d = ld_f16(w[i].d), dmin = ld_f16(w[i].dmin);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * h));
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 4; k++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                __m256i sck = _mm256_shuffle_epi8(sch[h], pick16x2(2 * k));
                _Pragma("GCC unroll 8")
                for (int r = 0; r < R; r++) {
                    const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sck));
                }
            }
        }
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            float dy = ld_f32(x->d);
            __m256i pm = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)x->bsums));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dy * dmin), _mm256_cvtepi32_ps(pm), acc[r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

AVX2 static float dot_q2_K(const void *w, const void *x, int n) { float s; q2K_tokens(w, x, 0, n, 1, &s); return s; }
AVX2 static void dot4_q2_K(const void *w, const void *x, size_t st, int n, float *s) { q2K_tokens(w, x, st, n, 4, s); }
AVX2 static void dot8_q2_K(const void *w, const void *x, size_t st, int n, float *s) { q2K_tokens(w, x, st, n, 8, s); }

// q3_K's 16 signed 6-bit scales (sc - 32) as bytes, unpacked with 32-bit
// masks (q3_K_scales for all 16 at once): the low 4 bits are the nibbles of
// scales[0..7], the high 2 bits bit pairs of scales[8..11].
AVX2 static inline __m128i q3K_scales(const uint8_t *q) {
    uint32_t a[3];
    memcpy(a, q, 12);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    __m128i v = _mm_setr_epi32((int)((a[0] & m4) | (a[2] & m2) << 4),               // groups 0..3
                               (int)((a[1] & m4) | (a[2] >> 2 & m2) << 4),          // 4..7
                               (int)((a[0] >> 4 & m4) | (a[2] >> 4 & m2) << 4),     // 8..11
                               (int)((a[1] >> 4 & m4) | (a[2] >> 6 & m2) << 4));    // 12..15
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// q3_K: x = d (sc - 32) (q - 4) with q = the 2 low bits | the hmask bit << 2
// (a set high bit is the oracle's "no -4"), so sum (q - 4) y per group is
// sum q y - 4 times the activation's group sum: one maddubs per chunk, and
// the offset one madd of the 16 scales with the 16 bsums per super-block, as
// q6_K. The high bit of element 128h + 32k + l is bit 4h + k of hmask[l].
AVX2 static inline __attribute__((always_inline)) void q3K_tokens(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q3_K *w = vw;
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1) {
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, _MM_HINT_NTA);
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64, _MM_HINT_NTA);
        }
        __m256i sc = _mm256_cvtepi8_epi16(q3K_scales(w[i].scales));
        __m256i sch[2] = {_mm256_permute4x64_epi64(sc, 0x44), _mm256_permute4x64_epi64(sc, 0xee)};
        __m256i hm = _mm256_loadu_si256((const __m256i *)w[i].hmask);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * h));
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 4; k++) {
                // bit b = 4h + k of each hmask byte moved to bit 2: a 16-bit
                // shift by b - 2 keeps bit 2 of each byte within its byte
                int b = 4 * h + k;
                __m256i hb = b < 2 ? _mm256_slli_epi16(hm, 2 - b) : _mm256_srli_epi16(hm, b - 2);
                __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3), _mm256_and_si256(hb, b4));
                __m256i sck = _mm256_shuffle_epi8(sch[h], pick16x2(2 * k));
                _Pragma("GCC unroll 8")
                for (int r = 0; r < R; r++) {
                    const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sck));
                }
            }
        }
        float d = ld_f16(w[i].d);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            __m256i corr = _mm256_madd_epi16(sc, _mm256_loadu_si256((const __m256i *)x->bsums));
            __m256i t = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(corr, 2));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(x->d) * d), _mm256_cvtepi32_ps(t), acc[r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

AVX2 static float dot_q3_K(const void *w, const void *x, int n) { float s; q3K_tokens(w, x, 0, n, 1, &s); return s; }
AVX2 static void dot4_q3_K(const void *w, const void *x, size_t st, int n, float *s) { q3K_tokens(w, x, st, n, 4, s); }
AVX2 static void dot8_q3_K(const void *w, const void *x, size_t st, int n, float *s) { q3K_tokens(w, x, st, n, 8, s); }

// The activation quantizer: the same max, scales and round-half-to-even as
// the scalar act_quant_q8_0 (and as ggml's x86 quantize_row_q8_0), so the
// blocks are identical. One block: its f16 scale, and its 32 values (their
// sum in *sum).
AVX2 static inline __m256i quant_block(const float *x, uint16_t *dh, int32_t *sum) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    *dh = f32_to_f16(d);
    __m256 mul = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (sum) {
        __m256i t = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        *sum = _mm_cvtsi128_si32(h);
    }
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// q8_0 blocks as ggml's x86 quantize_row_q8_0 makes them (scale amax / 127,
// round half to even), in act_q8_0_group's layout.
AVX2 static void act_quant_q8_0x4_avx2(const float *x, void *vy, int n) {
    int nb = n / QK;
    uint8_t *g = vy;
    for (int i = 0; i < nb; i++) {
        uint8_t *gi = g + ACT_GROUP_BYTES * (size_t)(i / 4);
        uint16_t h;
        int32_t sum;
        _mm256_storeu_si256((__m256i *)(gi + 32 * (i % 4)), quant_block(x + QK * i, &h, &sum));
        float d = _cvtsh_ss(h);
        memcpy(gi + 128 + 4 * (i % 4), &d, 4);
        memcpy(gi + 144 + 4 * (i % 4), &sum, 4);
    }
    for (int i = nb; i % 4; i++) { // empty slots of the last group
        uint8_t *gi = g + ACT_GROUP_BYTES * (size_t)(i / 4);
        memset(gi + 32 * (i % 4), 0, 32);
        memset(gi + 128 + 4 * (i % 4), 0, 4);
        memset(gi + 144 + 4 * (i % 4), 0, 4);
    }
}

const vecdot_kernel vecdot_avx2_f32 = {
    .act_type = DT_F32, .dot = dot_f32, .dot4 = dot4_f32, .dotr = dotr_f32, .tile24 = tile24_f32,
};
const vecdot_kernel vecdot_avx2_f16 = {
    .act_type = DT_F32, .dot = dot_f16, .dot4 = dot4_f16, .dotr = dotr_f16, .tile24 = tile24_f16,
};
const vecdot_kernel vecdot_avx2_bf16 = {
    .act_type = DT_F32, .dot = dot_bf16, .dot4 = dot4_bf16, .dotr = dotr_bf16, .tile24 = tile24_bf16,
};
const vecdot_kernel vecdot_avx2_q8_0 = {
    .act_type = DT_Q8_0, .dot = dot_q8_0, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q8_0, .dot8 = dot8_q8_0, .grouped = 1, .dotr = dotr_q8_0,
};
const vecdot_kernel vecdot_avx2_q4_0 = {
    .act_type = DT_Q8_0, .dot = dot_q4_0, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q4_0, .dot8 = dot8_q4_0, .grouped = 1, .dotr = dotr_q4_0,
};
const vecdot_kernel vecdot_avx2_q4_1 = {
    .act_type = DT_Q8_0, .dot = dot_q4_1, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q4_1, .dot8 = dot8_q4_1, .grouped = 1, .dotr = dotr_q4_1,
};
const vecdot_kernel vecdot_avx2_q5_0 = {
    .act_type = DT_Q8_0, .dot = dot_q5_0, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q5_0, .dot8 = dot8_q5_0, .grouped = 1, .dotr = dotr_q5_0,
};
const vecdot_kernel vecdot_avx2_q5_1 = {
    .act_type = DT_Q8_0, .dot = dot_q5_1, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q5_1, .dot8 = dot8_q5_1, .grouped = 1, .dotr = dotr_q5_1,
};
const vecdot_kernel vecdot_avx2_mxfp4 = {
    .act_type = DT_Q8_0, .dot = dot_mxfp4, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_mxfp4, .dot8 = dot8_mxfp4, .grouped = 1, .dotr = dotr_mxfp4,
};
const vecdot_kernel vecdot_avx2_q2_K = {
    .act_type = DT_Q8_K, .dot = dot_q2_K, .quant = act_quant_q8_K, .dot4 = dot4_q2_K, .dot8 = dot8_q2_K,
};
const vecdot_kernel vecdot_avx2_q3_K = {
    .act_type = DT_Q8_K, .dot = dot_q3_K, .quant = act_quant_q8_K, .dot4 = dot4_q3_K, .dot8 = dot8_q3_K,
};
const vecdot_kernel vecdot_avx2_q4_K = {
    .act_type = DT_Q8_K, .dot = dot_q4_K, .quant = act_quant_q8_K, .dot4 = dot4_q4_K, .dot8 = dot8_q4_K,
};
const vecdot_kernel vecdot_avx2_q5_K = {
    .act_type = DT_Q8_K, .dot = dot_q5_K, .quant = act_quant_q8_K,
};
const vecdot_kernel vecdot_avx2_q6_K = {
    .act_type = DT_Q8_K, .dot = dot_q6_K, .quant = act_quant_q8_K, .dot4 = dot4_q6_K, .dot8 = dot8_q6_K,
};
