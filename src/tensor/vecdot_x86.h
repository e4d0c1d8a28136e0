// Helpers shared by the x86 kernel files (vecdot_avx2.c, vecdot_vnni.c):
// loads, horizontal sums, nibble and 32-element block unpacking (static
// inline: each file gets its own copies).
#ifndef INFER_TENSOR_VECDOT_X86_H
#define INFER_TENSOR_VECDOT_X86_H

#include "tensor/vecdot.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "base/half.h"

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

// Weight rows stream from memory once per token: fetch this many bytes ahead,
// non-temporally (they are not read again until the next token).
// (the hint: PREFETCH_HINT_NTA=1 builds the non-temporal one)
#if PREFETCH_HINT_NTA
#define PREFETCH_HINT _MM_HINT_NTA
#else
#define PREFETCH_HINT _MM_HINT_T0
#endif
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
// 32-element blocks: unpacking and scales (the kernels: vecdot_q32.h)

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

// ---------------------------------------------------------------------------
// k-quants (the kernels of q4_K and q6_K: vecdot_kq.h)

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
// acc[r] += d_w d_x (sumi[r] - (sc16 . bsums) << shift) for R tokens: a
// k-quant's constant offset (q3_K's 4, q6_K's 32) taken out through the
// activations' 16-element group sums, once per super-block i.
AVX2 static inline __attribute__((always_inline)) void kq_offset_fma(__m256 *acc, const __m256i *sumi, __m256i sc16, float d,
                                                                    const void *vx, size_t stride, int i, int R, int shift) {
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) {
        const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
        __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)x->bsums));
        __m256i t = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(corr, shift));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_f32(x->d) * d), _mm256_cvtepi32_ps(t), acc[r]);
    }
}

AVX2 static inline __m256i pick16(int e) { return _mm256_set1_epi16((short)((2 * e + 1) << 8 | 2 * e)); }

// The activation quantizer: the same max, scales and round-half-to-even as
// the scalar act_quant_q8_0 (and as ggml's x86 quantize_row_q8_0), so the
// blocks are identical. One block: its f16 scale, and its 32 values (their
// sum in *sum).
AVX2 static inline __attribute__((unused)) __m256i quant_block(const float *x, uint16_t *dh, int32_t *sum) {
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
    // a non-finite activation converts to INT_MIN: clamp to the int8 range
    // the packed bytes saturate to, so the sum stays the sum of the stored
    // values (bounded by 32 * 128; finite inputs are within +-127 already)
    for (int k = 0; k < 4; k++) q[k] = _mm256_max_epi32(_mm256_min_epi32(q[k], _mm256_set1_epi32(127)), _mm256_set1_epi32(-128));
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

// The AVX2 q8_0 activation quantizer (grouped), which the VNNI kernels share.
void act_quant_q8_0x4_avx2(const float *x, void *vy, int n);
// The AVX2 1-token q4_K kernel, which the VNNI row keeps.
float dot_q4_K_avx2(const void *w, const void *x, int n);

#endif
