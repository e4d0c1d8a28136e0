// IEEE half and bfloat16 <-> float conversions (scalar, exact).
#ifndef INFER_BASE_HALF_H
#define INFER_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

// Round to nearest even, NaN kept quiet (as torch does).
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return bits_to_f32(sign);
        // subnormal: value = man * 2^-24
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_to_f32(sign | 0x7f800000 | (man << 13));
    return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t u = f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);          // NaN
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);         // overflow -> inf
    if (a < 0x38800000) {                                           // subnormal or zero
        // value / 2^-24, rounded to nearest even
        float v = bits_to_f32(a) * 16777216.0f;
        uint32_t m = (uint32_t)v;
        float r = v - (float)m;
        if (r > 0.5f || (r == 0.5f && (m & 1))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t e = ((a >> 23) - 112) << 10;
    uint32_t m = (a >> 13) & 0x3ff;
    uint32_t rest = a & 0x1fff;
    uint32_t h = e | m;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

#endif
