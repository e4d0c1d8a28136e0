// Scalar codecs of ggml's 32-element blocks: q4_0, q4_1, q5_0, q5_1, q8_0
// and mxfp4 (layouts in quant.h; the k-quants' codecs are in quant_kq.c).
//
// to_float follows ggml's dequantize_row_* operation for operation (the same
// float products in the same order), so it is bit-exact with ggml and with
// the gguf Python package. dot works a block at a time straight from the
// stored bytes, with the block's scale factored out of the inner sum.
// from_float repeats the arithmetic of ggml's quantize_row_*_ref
// (ggml-quants.c) in the same order, so the bytes match ggml's on the same
// input. Both rely on plain IEEE float evaluation: no -ffast-math, and no
// contraction of a*b+c into an FMA (which -march with FMA would otherwise do
// under GCC's default -ffp-contract=fast), hence the pragmas below.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "tensor/quant.h"
#include "tensor/quant_impl.h"

#include <math.h>

// ===========================================================================
// q4_0

void q4_0_to_float(const void *vx, float *y, int64_t n) {
    const block_q4_0 *b = vx;
    for (int64_t i = 0; i < n / QK; i++, b++, y += QK) {
        float d = ldh(b->d);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = ((b->qs[j] & 15) - 8) * d;
            y[j + QK / 2] = ((b->qs[j] >> 4) - 8) * d;
        }
    }
}

float q4_0_dot(const void *vw, const float *x, int64_t n) {
    const block_q4_0 *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float sb = 0;
        for (int j = 0; j < QK / 2; j++)
            sb += ((b->qs[j] & 15) - 8) * x[j] + ((b->qs[j] >> 4) - 8) * x[j + QK / 2];
        s += ldh(b->d) * sb;
    }
    return s;
}

// d = (the element of largest |x|) / -8, so that element maps to q = 0 exactly.
void q4_0_from_float(const float *x, void *vy, int64_t n) {
    block_q4_0 *b = vy;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -8;
        float id = d ? 1.0f / d : 0.0f;
        sth(b->d, d);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = imin(15, trunc_int(x[j] * id + 8.5f));
            int q1 = imin(15, trunc_int(x[j + QK / 2] * id + 8.5f));
            b->qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

// ===========================================================================
// q4_1

void q4_1_to_float(const void *vx, float *y, int64_t n) {
    const block_q4_1 *b = vx;
    for (int64_t i = 0; i < n / QK; i++, b++, y += QK) {
        float d = ldh(b->d), m = ldh(b->m);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (b->qs[j] & 15) * d + m;
            y[j + QK / 2] = (b->qs[j] >> 4) * d + m;
        }
    }
}

float q4_1_dot(const void *vw, const float *x, int64_t n) {
    const block_q4_1 *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float sq = 0, sx = 0;
        for (int j = 0; j < QK / 2; j++) {
            sq += (b->qs[j] & 15) * x[j] + (b->qs[j] >> 4) * x[j + QK / 2];
            sx += x[j] + x[j + QK / 2];
        }
        s += ldh(b->d) * sq + ldh(b->m) * sx;
    }
    return s;
}

// d = (max - min) / 15, m = min.
void q4_1_from_float(const float *x, void *vy, int64_t n) {
    block_q4_1 *b = vy;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        float d = (max - min) / 15;
        float id = d ? 1.0f / d : 0.0f;
        sth(b->d, d);
        sth(b->m, min);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = imin(15, trunc_int((x[j] - min) * id + 0.5f));
            int q1 = imin(15, trunc_int((x[j + QK / 2] - min) * id + 0.5f));
            b->qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

// ===========================================================================
// q5_0

void q5_0_to_float(const void *vx, float *y, int64_t n) {
    const block_q5_0 *b = vx;
    for (int64_t i = 0; i < n / QK; i++, b++, y += QK) {
        float d = ldh(b->d);
        uint32_t qh = ld32(b->qh);
        for (int j = 0; j < QK / 2; j++) {
            int h0 = (qh >> j & 1) << 4, h1 = (qh >> (j + QK / 2) & 1) << 4;
            y[j] = (((b->qs[j] & 15) | h0) - 16) * d;
            y[j + QK / 2] = (((b->qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

float q5_0_dot(const void *vw, const float *x, int64_t n) {
    const block_q5_0 *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        uint32_t qh = ld32(b->qh);
        float sb = 0;
        for (int j = 0; j < QK / 2; j++) {
            int h0 = (qh >> j & 1) << 4, h1 = (qh >> (j + QK / 2) & 1) << 4;
            sb += (((b->qs[j] & 15) | h0) - 16) * x[j] + (((b->qs[j] >> 4) | h1) - 16) * x[j + QK / 2];
        }
        s += ldh(b->d) * sb;
    }
    return s;
}

// d = (the element of largest |x|) / -16.
void q5_0_from_float(const float *x, void *vy, int64_t n) {
    block_q5_0 *b = vy;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -16;
        float id = d ? 1.0f / d : 0.0f;
        sth(b->d, d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int q0 = imin(31, trunc_int(x[j] * id + 16.5f));
            int q1 = imin(31, trunc_int(x[j + QK / 2] * id + 16.5f));
            b->qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        st32(b->qh, qh);
    }
}

// ===========================================================================
// q5_1

void q5_1_to_float(const void *vx, float *y, int64_t n) {
    const block_q5_1 *b = vx;
    for (int64_t i = 0; i < n / QK; i++, b++, y += QK) {
        float d = ldh(b->d), m = ldh(b->m);
        uint32_t qh = ld32(b->qh);
        for (int j = 0; j < QK / 2; j++) {
            int h0 = (qh >> j & 1) << 4, h1 = (qh >> (j + QK / 2) & 1) << 4;
            y[j] = ((b->qs[j] & 15) | h0) * d + m;
            y[j + QK / 2] = ((b->qs[j] >> 4) | h1) * d + m;
        }
    }
}

float q5_1_dot(const void *vw, const float *x, int64_t n) {
    const block_q5_1 *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        uint32_t qh = ld32(b->qh);
        float sq = 0, sx = 0;
        for (int j = 0; j < QK / 2; j++) {
            int h0 = (qh >> j & 1) << 4, h1 = (qh >> (j + QK / 2) & 1) << 4;
            sq += ((b->qs[j] & 15) | h0) * x[j] + ((b->qs[j] >> 4) | h1) * x[j + QK / 2];
            sx += x[j] + x[j + QK / 2];
        }
        s += ldh(b->d) * sq + ldh(b->m) * sx;
    }
    return s;
}

// d = (max - min) / 31, m = min. ggml's reference does not clamp q at 31
// (a q of 32 would wrap to 0); we clamp, which changes nothing for finite
// input since (max - min) * id rounds to at most 31.
void q5_1_from_float(const float *x, void *vy, int64_t n) {
    block_q5_1 *b = vy;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        float d = (max - min) / 31;
        float id = d ? 1.0f / d : 0.0f;
        sth(b->d, d);
        sth(b->m, min);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int q0 = imin(31, trunc_int((x[j] - min) * id + 0.5f));
            int q1 = imin(31, trunc_int((x[j + QK / 2] - min) * id + 0.5f));
            b->qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        st32(b->qh, qh);
    }
}

// ===========================================================================
// q8_0

void q8_0_to_float(const void *vx, float *y, int64_t n) {
    const block_q8_0 *b = vx;
    for (int64_t i = 0; i < n / QK; i++, b++, y += QK) {
        float d = ldh(b->d);
        for (int j = 0; j < QK; j++) y[j] = b->qs[j] * d;
    }
}

float q8_0_dot(const void *vw, const float *x, int64_t n) {
    const block_q8_0 *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float sb = 0;
        for (int j = 0; j < QK; j++) sb += b->qs[j] * x[j];
        s += ldh(b->d) * sb;
    }
    return s;
}

// d = max|x| / 127, q = round(x / d) (half away from zero, as roundf).
void q8_0_from_float(const float *x, void *vy, int64_t n) {
    block_q8_0 *b = vy;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        float d = amax / 127;
        float id = d ? 1.0f / d : 0.0f;
        sth(b->d, d);
        for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)imax(-128, imin(127, trunc_int(roundf(x[j] * id))));
    }
}

// ===========================================================================
// mxfp4 (OCP microscaling FP4: e2m1 elements, e8m0 shared exponent)

void mxfp4_to_float(const void *vx, float *y, int64_t n) {
    const block_mxfp4 *b = vx;
    for (int64_t i = 0; i < n / QK; i++, b++, y += QK) {
        float d = e8m0_half(b->e);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = kvalues_mxfp4[b->qs[j] & 15] * d;
            y[j + QK / 2] = kvalues_mxfp4[b->qs[j] >> 4] * d;
        }
    }
}

float mxfp4_dot(const void *vw, const float *x, int64_t n) {
    const block_mxfp4 *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float sb = 0;
        for (int j = 0; j < QK / 2; j++)
            sb += kvalues_mxfp4[b->qs[j] & 15] * x[j] + kvalues_mxfp4[b->qs[j] >> 4] * x[j + QK / 2];
        s += e8m0_half(b->e) * sb;
    }
    return s;
}

// The code whose value * d is nearest x; the first one on a tie.
static int mxfp4_best(float x, float d) {
    int best = 0;
    float err = fabsf(kvalues_mxfp4[0] * d - x);
    for (int k = 1; k < 16; k++) {
        float e = fabsf(kvalues_mxfp4[k] * d - x);
        if (e < err) { best = k; err = e; }
    }
    return best;
}

// e = floor(log2(max|x|)) - 2 + 127: the largest code (6 = 12/2) then spans
// max|x| within a factor of two.
void mxfp4_from_float(const float *x, void *vy, int64_t n) {
    block_mxfp4 *b = vy;
    for (int64_t i = 0; i < n / QK; i++, b++, x += QK) {
        float amax = 0;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        int e = amax > 0.0f ? imax(0, imin(255, trunc_int(floorf(log2f(amax)) - 2 + 127))) : 0;
        b->e = (uint8_t)e;
        float d = e8m0_half(b->e);
        for (int j = 0; j < QK / 2; j++)
            b->qs[j] = (uint8_t)(mxfp4_best(x[j], d) | mxfp4_best(x[j + QK / 2], d) << 4);
    }
}
