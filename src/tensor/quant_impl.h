// Byte-level helpers shared by the scalar codecs (quant_q32.c, quant_kq.c):
// little-endian loads and stores of a block's fields, and ggml's rounding.
// Not a public interface.
#ifndef INFER_TENSOR_QUANT_IMPL_H
#define INFER_TENSOR_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

#include "base/half.h"

static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline uint32_t ld32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static inline void st32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static inline float ldh(const uint8_t *p) { return f16_to_f32(ld16(p)); }
static inline void sth(uint8_t *p, float f) { st16(p, f32_to_f16(f)); }

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

// Round to nearest, ties to even, by adding 1.5 * 2^23 (ggml's nearest_int).
// Only meaningful for |f| <= 2^22, as in ggml; no UB outside that range.
static inline int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

// float -> int truncating like a C cast, but defined for every input (NaN,
// inf and out-of-range give 0 or the limit) so hostile floats are not UB.
static inline int trunc_int(float f) {
    if (!(f > -2147483520.f)) return f != f ? 0 : -2147483647;
    if (f >= 2147483520.f) return 2147483647;
    return (int)f;
}

#endif
