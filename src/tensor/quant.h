// ggml's quantized block formats, bit-compatible: block layouts, and the
// scalar codecs the traits table in dtype.c points at.
//
// Layouts and formulas follow ggml (ggml-common.h for the blocks,
// ggml-quants.c for dequantize_row_* and quantize_row_*_ref). Every multi-byte
// field is little-endian and kept as bytes, so a block has alignment 1 and a
// row may start at any address. f16 fields are IEEE half.
#ifndef INFER_TENSOR_QUANT_H
#define INFER_TENSOR_QUANT_H

#include <stdint.h>
#include <string.h>

#define QK 32     // elements per block of the 32-element types
#define QK_K 256  // elements per super-block of the k-quants

// x = d * (q - 8), q 4 bits; qs[j] holds element j (low nibble) and j+16 (high).
typedef struct { uint8_t d[2]; uint8_t qs[QK / 2]; } block_q4_0;
// x = d * q + m, q 4 bits; nibbles as q4_0.
typedef struct { uint8_t d[2], m[2]; uint8_t qs[QK / 2]; } block_q4_1;
// x = d * (q - 16), q 5 bits: low 4 as q4_0, bit 4 of element j is bit j of qh (u32).
typedef struct { uint8_t d[2]; uint8_t qh[4]; uint8_t qs[QK / 2]; } block_q5_0;
// x = d * q + m, q 5 bits packed as q5_0.
typedef struct { uint8_t d[2], m[2]; uint8_t qh[4]; uint8_t qs[QK / 2]; } block_q5_1;
// x = d * q, q int8.
typedef struct { uint8_t d[2]; int8_t qs[QK]; } block_q8_0;
// x = kvalues_mxfp4[q] * 2^(e-128), q 4-bit e2m1 code (table holds 2x the e2m1
// value, hence the -128), e an e8m0 exponent; nibbles as q4_0.
typedef struct { uint8_t e; uint8_t qs[QK / 2]; } block_mxfp4;

// 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q 2 bits.
// Element 128*h + 32*s + l (s = 0..3, l < 32) is bits 2s..2s+1 of qs[32*h + l];
// its group is 8*h + 2*s + l/16.
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint8_t d[2], dmin[2]; } block_q2_K;
// 16 groups of 16: x = d * (sc[g] - 32) * (q - (hbit ? 0 : 4)), q 2 low bits packed
// as q2_K, the high bit of element 128*h + 32*s + l is bit 4*h + s of hmask[l].
// sc[g] is 6 bits: low 4 in scales[g] (g < 8) or scales[g-8] >> 4, high 2 in
// bits 2*(g/4).. of scales[8 + g%4].
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint8_t d[2]; } block_q3_K;
// 8 groups of 32: x = d * sc[g] * q - dmin * m[g], q 4 bits, sc/m 6 bits packed
// in scales[12] (see scale_min_k4 below). Element 64*s + l (l < 32) is the
// low nibble of qs[32*s + l], element 64*s + 32 + l the high nibble.
typedef struct { uint8_t d[2], dmin[2]; uint8_t scales[12]; uint8_t qs[QK_K / 2]; } block_q4_K;
// As q4_K with a fifth bit: element 64*s + l has its bit 4 at bit 2s of qh[l],
// element 64*s + 32 + l at bit 2s+1.
typedef struct { uint8_t d[2], dmin[2]; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
// 16 groups of 16: x = d * scales[g] * (q - 32), q 6 bits. For half h and l < 32:
// elements 128h + l, +32, +64, +96 take low 4 bits from ql[64h + l] (lo),
// ql[64h + 32 + l] (lo), ql[64h + l] (hi), ql[64h + 32 + l] (hi) and high 2 bits
// from bits 0-1, 2-3, 4-5, 6-7 of qh[32h + l].
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint8_t d[2]; } block_q6_K;
// x = d * q with d an f32; bsums[g] = sum of the 16 q of group g (int16). ggml
// uses it for activations only.
typedef struct { uint8_t d[4]; int8_t qs[QK_K]; uint8_t bsums[2 * QK_K / 16]; } block_q8_K;

// (C++ spells it static_assert: the CUDA layer takes its block sizes from
// these structs, compute/cuda/common.cuh)
#ifdef __cplusplus
#define QUANT_STATIC_ASSERT static_assert
#else
#define QUANT_STATIC_ASSERT _Static_assert
#endif
QUANT_STATIC_ASSERT(sizeof(block_q4_0) == 18, "q4_0 block");
QUANT_STATIC_ASSERT(sizeof(block_q4_1) == 20, "q4_1 block");
QUANT_STATIC_ASSERT(sizeof(block_q5_0) == 22, "q5_0 block");
QUANT_STATIC_ASSERT(sizeof(block_q5_1) == 24, "q5_1 block");
QUANT_STATIC_ASSERT(sizeof(block_q8_0) == 34, "q8_0 block");
QUANT_STATIC_ASSERT(sizeof(block_mxfp4) == 17, "mxfp4 block");
QUANT_STATIC_ASSERT(sizeof(block_q2_K) == 84, "q2_K block");
QUANT_STATIC_ASSERT(sizeof(block_q3_K) == 110, "q3_K block");
QUANT_STATIC_ASSERT(sizeof(block_q4_K) == 144, "q4_K block");
QUANT_STATIC_ASSERT(sizeof(block_q5_K) == 176, "q5_K block");
QUANT_STATIC_ASSERT(sizeof(block_q6_K) == 210, "q6_K block");
QUANT_STATIC_ASSERT(sizeof(block_q8_K) == 292, "q8_K block");
#undef QUANT_STATIC_ASSERT

// Shared by the codecs and the dot kernels:

// mxfp4: 2x the e2m1 values (codes 0-7 are 0, .5, 1, 1.5, 2, 3, 4, 6; 8-15
// negated), and 2^(e-128), half the e8m0 scale, absorbing the 2x of the
// table; e < 2 gives the f32 subnormals 2^-128 and 2^-127
// (ggml_e8m0_to_fp32_half).
static const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
static inline float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// q4_K/q5_K group j's 6-bit scale and min (ggml's get_scale_min_k4): groups
// 0-3 in the low 6 bits of bytes j and j+4; groups 4-7 keep their low 4 bits
// in byte j+4 and their high 2 bits in the top bits of bytes j-4 (scale) and
// j (min).
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

// The 16 signed 6-bit group scales (sc - 32) of a q3_K block.
static inline void q3_K_scales(const uint8_t *p, int sc[16]) {
    for (int g = 0; g < 16; g++) {
        int lo = g < 8 ? p[g] & 15 : p[g - 8] >> 4;
        int hi = p[8 + g % 4] >> 2 * (g / 4) & 3;
        sc[g] = (lo | hi << 4) - 32;
    }
}

// Per type: y = decoded x (to_float), the dot of a stored row with an f32
// vector (dot), and the encoder (from_float), each over n elements, n a
// multiple of the block size. Same contracts as dtype_traits.
#define QUANT_CODEC(t)                                          \
    void t##_to_float(const void *x, float *y, int64_t n);      \
    float t##_dot(const void *w, const float *x, int64_t n);
QUANT_CODEC(q4_0)
QUANT_CODEC(q4_1)
QUANT_CODEC(q5_0)
QUANT_CODEC(q5_1)
QUANT_CODEC(q8_0)
QUANT_CODEC(mxfp4)
QUANT_CODEC(q2_K)
QUANT_CODEC(q3_K)
QUANT_CODEC(q4_K)
QUANT_CODEC(q5_K)
QUANT_CODEC(q6_K)
QUANT_CODEC(q8_K)
#undef QUANT_CODEC

// Encoders: the same arithmetic as ggml's quantize_row_*_ref, so the bytes match.
void q4_0_from_float(const float *x, void *y, int64_t n);
void q4_1_from_float(const float *x, void *y, int64_t n);
void q5_0_from_float(const float *x, void *y, int64_t n);
void q5_1_from_float(const float *x, void *y, int64_t n);
void q8_0_from_float(const float *x, void *y, int64_t n);
void mxfp4_from_float(const float *x, void *y, int64_t n);
void q2_K_from_float(const float *x, void *y, int64_t n);
void q3_K_from_float(const float *x, void *y, int64_t n);
void q4_K_from_float(const float *x, void *y, int64_t n);
void q5_K_from_float(const float *x, void *y, int64_t n);
void q6_K_from_float(const float *x, void *y, int64_t n);
void q8_K_from_float(const float *x, void *y, int64_t n);

#endif
