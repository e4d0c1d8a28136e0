// Scalar codecs of ggml's k-quants, the 256-element super-blocks: q2_K,
// q3_K, q4_K, q5_K, q6_K and q8_K (layouts in quant.h; the 32-element
// blocks' codecs are in quant_q32.c).
//
// to_float follows ggml's dequantize_row_* operation for operation, so it is
// bit-exact with ggml and with the gguf Python package; dot works a block at
// a time from the stored bytes, the scales factored out of the inner sums.
// from_float repeats ggml's quantize_row_*_ref (ggml-quants.c): the same
// searches for each group's scale and min (make_qkx2_quants and its kin,
// below) in the same order, so the bytes match ggml's on the same input.
// Both rely on plain IEEE float evaluation: no -ffast-math, and no
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
#include <string.h>

// ===========================================================================
// q2_K

void q2_K_to_float(const void *vx, float *y, int64_t n) {
    const block_q2_K *b = vx;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = ldh(b->d), dmin = ldh(b->dmin);
        for (int h = 0; h < 2; h++) {
            const uint8_t *q = b->qs + 32 * h;
            for (int s = 0; s < 4; s++)
                for (int k = 0; k < 2; k++) {
                    uint8_t sc = b->scales[8 * h + 2 * s + k];
                    float dl = d * (sc & 15), ml = dmin * (sc >> 4);
                    for (int l = 16 * k; l < 16 * k + 16; l++) *y++ = dl * (q[l] >> 2 * s & 3) - ml;
                }
        }
    }
}

float q2_K_dot(const void *vw, const float *x, int64_t n) {
    const block_q2_K *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float sd = 0, sm = 0;  // sum of scale * (q . x), sum of min * sum(x)
        for (int h = 0; h < 2; h++) {
            const uint8_t *q = b->qs + 32 * h;
            for (int sh = 0; sh < 4; sh++)
                for (int k = 0; k < 2; k++, x += 16) {
                    uint8_t sc = b->scales[8 * h + 2 * sh + k];
                    float sq = 0, sx = 0;
                    for (int l = 0; l < 16; l++) {
                        sq += (q[16 * k + l] >> 2 * sh & 3) * x[l];
                        sx += x[l];
                    }
                    sd += (sc & 15) * sq;
                    sm += (sc >> 4) * sx;
                }
        }
        s += ldh(b->d) * sd - ldh(b->dmin) * sm;
    }
    return s;
}

// ===========================================================================
// q3_K

void q3_K_to_float(const void *vx, float *y, int64_t n) {
    const block_q3_K *b = vx;
    int sc[16];
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = ldh(b->d);
        q3_K_scales(b->scales, sc);
        for (int h = 0; h < 2; h++) {
            const uint8_t *q = b->qs + 32 * h;
            for (int s = 0; s < 4; s++) {
                uint8_t m = (uint8_t)(1 << (4 * h + s));
                for (int k = 0; k < 2; k++) {
                    float dl = d * sc[8 * h + 2 * s + k];
                    for (int l = 16 * k; l < 16 * k + 16; l++)
                        *y++ = dl * ((q[l] >> 2 * s & 3) - (b->hmask[l] & m ? 0 : 4));
                }
            }
        }
    }
}

float q3_K_dot(const void *vw, const float *x, int64_t n) {
    const block_q3_K *b = vw;
    int sc[16];
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        q3_K_scales(b->scales, sc);
        float sb = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *q = b->qs + 32 * h;
            for (int sh = 0; sh < 4; sh++) {
                uint8_t m = (uint8_t)(1 << (4 * h + sh));
                for (int k = 0; k < 2; k++, x += 16) {
                    float sq = 0;
                    for (int l = 0; l < 16; l++) {
                        int j = 16 * k + l;
                        sq += ((q[j] >> 2 * sh & 3) - (b->hmask[j] & m ? 0 : 4)) * x[l];
                    }
                    sb += sc[8 * h + 2 * sh + k] * sq;
                }
            }
        }
        s += ldh(b->d) * sb;
    }
    return s;
}

// ===========================================================================
// q4_K, q5_K: 8 groups of 32, 6-bit scales and mins in 12 bytes

void q4_K_to_float(const void *vx, float *y, int64_t n) {
    const block_q4_K *b = vx;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = ldh(b->d), dmin = ldh(b->dmin);
        for (int s = 0; s < 4; s++) {
            const uint8_t *q = b->qs + 32 * s;
            int sc, m;
            scale_min_k4(2 * s, b->scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(2 * s + 1, b->scales, &sc, &m);
            float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 15) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

float q4_K_dot(const void *vw, const float *x, int64_t n) {
    const block_q4_K *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float sd = 0, sm = 0;
        for (int s4 = 0; s4 < 4; s4++) {
            const uint8_t *q = b->qs + 32 * s4;
            float sq1 = 0, sq2 = 0, sx1 = 0, sx2 = 0;
            for (int l = 0; l < 32; l++) {
                sq1 += (q[l] & 15) * x[l];
                sq2 += (q[l] >> 4) * x[l + 32];
                sx1 += x[l];
                sx2 += x[l + 32];
            }
            int sc, m;
            scale_min_k4(2 * s4, b->scales, &sc, &m);
            sd += sc * sq1;
            sm += m * sx1;
            scale_min_k4(2 * s4 + 1, b->scales, &sc, &m);
            sd += sc * sq2;
            sm += m * sx2;
            x += 64;
        }
        s += ldh(b->d) * sd - ldh(b->dmin) * sm;
    }
    return s;
}

void q5_K_to_float(const void *vx, float *y, int64_t n) {
    const block_q5_K *b = vx;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = ldh(b->d), dmin = ldh(b->dmin);
        for (int s = 0; s < 4; s++) {
            const uint8_t *q = b->qs + 32 * s;
            uint8_t u1 = (uint8_t)(1 << 2 * s), u2 = (uint8_t)(2 << 2 * s);
            int sc, m;
            scale_min_k4(2 * s, b->scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(2 * s + 1, b->scales, &sc, &m);
            float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((q[l] & 15) + (b->qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((q[l] >> 4) + (b->qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

float q5_K_dot(const void *vw, const float *x, int64_t n) {
    const block_q5_K *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float sd = 0, sm = 0;
        for (int s4 = 0; s4 < 4; s4++) {
            const uint8_t *q = b->qs + 32 * s4;
            uint8_t u1 = (uint8_t)(1 << 2 * s4), u2 = (uint8_t)(2 << 2 * s4);
            float sq1 = 0, sq2 = 0, sx1 = 0, sx2 = 0;
            for (int l = 0; l < 32; l++) {
                sq1 += ((q[l] & 15) + (b->qh[l] & u1 ? 16 : 0)) * x[l];
                sq2 += ((q[l] >> 4) + (b->qh[l] & u2 ? 16 : 0)) * x[l + 32];
                sx1 += x[l];
                sx2 += x[l + 32];
            }
            int sc, m;
            scale_min_k4(2 * s4, b->scales, &sc, &m);
            sd += sc * sq1;
            sm += m * sx1;
            scale_min_k4(2 * s4 + 1, b->scales, &sc, &m);
            sd += sc * sq2;
            sm += m * sx2;
            x += 64;
        }
        s += ldh(b->d) * sd - ldh(b->dmin) * sm;
    }
    return s;
}

// ===========================================================================
// q6_K

void q6_K_to_float(const void *vx, float *y, int64_t n) {
    const block_q6_K *b = vx;
    for (int64_t i = 0; i < n / QK_K; i++, b++, y += QK_K) {
        float d = ldh(b->d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *sc = b->scales + 8 * h;
            float *yh = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int g = l / 16;
                int q1 = ((ql[l] & 15) | (qh[l] & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | (qh[l] >> 6) << 4) - 32;
                yh[l] = d * sc[g] * q1;
                yh[l + 32] = d * sc[g + 2] * q2;
                yh[l + 64] = d * sc[g + 4] * q3;
                yh[l + 96] = d * sc[g + 6] * q4;
            }
        }
    }
}

float q6_K_dot(const void *vw, const float *x, int64_t n) {
    const block_q6_K *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        float sb = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *sc = b->scales + 8 * h;
            const float *xh = x + 128 * h;
            for (int g = 0; g < 2; g++) {  // 16 l per scale; 4 quarters share ql/qh
                float s1 = 0, s2 = 0, s3 = 0, s4 = 0;
                for (int l = 16 * g; l < 16 * g + 16; l++) {
                    s1 += (((ql[l] & 15) | (qh[l] & 3) << 4) - 32) * xh[l];
                    s2 += (((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4) - 32) * xh[l + 32];
                    s3 += (((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32) * xh[l + 64];
                    s4 += (((ql[l + 32] >> 4) | (qh[l] >> 6) << 4) - 32) * xh[l + 96];
                }
                sb += sc[g] * s1 + sc[g + 2] * s2 + sc[g + 4] * s3 + sc[g + 6] * s4;
            }
        }
        s += ldh(b->d) * sb;
    }
    return s;
}

// ===========================================================================
// q8_K

void q8_K_to_float(const void *vx, float *y, int64_t n) {
    const block_q8_K *b = vx;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = bits_to_f32(ld32(b->d));
        for (int j = 0; j < QK_K; j++) *y++ = d * b->qs[j];
    }
}

float q8_K_dot(const void *vw, const float *x, int64_t n) {
    const block_q8_K *b = vw;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        float sb = 0;
        for (int j = 0; j < QK_K; j++) sb += b->qs[j] * x[j];
        s += bits_to_f32(ld32(b->d)) * sb;
    }
    return s;
}

// quantize_row_q8_K_ref: d = max / -127 over the element of largest |x|.
void q8_K_from_float(const float *x, void *vy, int64_t n) {
    block_q8_K *b = vy;
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        if (!amax) {
            memset(b, 0, sizeof *b);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) b->qs[j] = (int8_t)imax(-128, imin(127, nearest_int(iscale * x[j])));
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b->qs[16 * g + l];
            st16(b->bsums + 2 * g, (uint16_t)(int16_t)sum);
        }
        st32(b->d, f32_to_bits(1 / iscale));
    }
}

// ===========================================================================
// k-quant encoders: ggml's quantize_row_q{2,3,4,5,6}_K_ref.

#define GROUP_MAX_EPS 1e-15f

// Asymmetric fit x ~ scale * L - min with L in [0, nmax], min >= 0, minimizing
// the weighted error sum w * (scale*L - min - x)^2, or w * |scale*L - min - x|
// when mad (ggml's make_qkx2_quants): start from the min/max fit, then try nstep+1 rescalings
// iscale = (nmax + rmin + rdelta*is) / (max - min), each followed by the
// weighted least-squares scale and offset for the rounded L. Returns scale,
// sets *the_min = -offset. Laux is scratch of n.
static float make_qkx2_quants(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep, int mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (mad ? fabsf(diff) : diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                err += w[i] * (mad ? fabsf(diff) : diff * diff);
            }
            if (err < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// Symmetric fit x ~ scale * (L - nmax), L in [0, 2*nmax), weights x^2 (ggml's
// make_qx_quants with rmse_type 1 and no importance weights): the scale from
// the element of largest |x| (so it maps to -nmax), then 18 nearby scales
// -(nmax + 0.1*is) / max, keeping the best weighted least-squares fit.
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Shared by q4_K and q5_K: fit each group of 32 with make_qkx2_quants
// (weights rms(x) + |x|), quantize the 8 scales and 8 mins to 6 bits against
// their maxima (d = max_scale/63, dmin = max_min/63), then requantize every
// element against the stored scales, L in [0, nmax]. Fills d, dmin, scales
// (12 bytes) and L[256].
static void qkx_block(const float *x, int nmax, float rmin, int nstep, uint8_t *dd, uint8_t *dmin,
                      uint8_t *scales, uint8_t L[QK_K]) {
    uint8_t Laux[32];
    float w[32], mins[QK_K / 32], sc[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xg = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xg[l] * xg[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xg[l]);
        sc[j] = make_qkx2_quants(32, nmax, xg, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, 0);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        // nearest_int's result is truncated to a byte first, as ggml's uint8_t does
        uint8_t ls = (uint8_t)nearest_int(inv_scale * sc[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    sth(dd, max_scale / 63.f);
    sth(dmin, max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        int s, m;
        scale_min_k4(j, scales, &s, &m);
        float d = ldh(dd) * s;
        if (!d) continue;  // keeps the L of the fit, as ggml does
        float dm = ldh(dmin) * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)imax(0, imin(nmax, nearest_int((x[32 * j + l] + dm) / d)));
    }
}

void q4_K_from_float(const float *x, void *vy, int64_t n) {
    block_q4_K *b = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        memset(b->scales, 0, sizeof b->scales);
        qkx_block(x, 15, -1.f, 20, b->d, b->dmin, b->scales, L);
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) b->qs[32 * s + l] = (uint8_t)(L[64 * s + l] | L[64 * s + 32 + l] << 4);
    }
}

void q5_K_from_float(const float *x, void *vy, int64_t n) {
    block_q5_K *b = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        memset(b->scales, 0, sizeof b->scales);
        qkx_block(x, 31, -0.5f, 15, b->d, b->dmin, b->scales, L);
        memset(b->qh, 0, sizeof b->qh);
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                int l1 = L[64 * s + l], l2 = L[64 * s + 32 + l];
                if (l1 > 15) { l1 -= 16; b->qh[l] |= (uint8_t)(1 << 2 * s); }
                if (l2 > 15) { l2 -= 16; b->qh[l] |= (uint8_t)(2 << 2 * s); }
                b->qs[32 * s + l] = (uint8_t)(l1 | l2 << 4);
            }
    }
}

// Each group of 16 fit by make_qx_quants (nmax 32), the 16 scales quantized to
// int8 against the one of largest |scale| (d = max_scale / -128), then every
// element requantized against its stored scale, q in [-32, 31].
void q6_K_from_float(const float *x, void *vy, int64_t n) {
    block_q6_K *b = vy;
    int8_t L[QK_K];
    float sc[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        float max_scale = 0, max_abs = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            sc[g] = make_qx_quants(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(sc[g]) > max_abs) { max_abs = fabsf(sc[g]); max_scale = sc[g]; }
        }
        if (max_abs < GROUP_MAX_EPS) {
            memset(b, 0, sizeof *b);
            continue;
        }
        float iscale = -128.f / max_scale;
        sth(b->d, 1 / iscale);
        for (int g = 0; g < QK_K / 16; g++) b->scales[g] = (int8_t)imax(-128, imin(127, nearest_int(iscale * sc[g])));
        for (int g = 0; g < QK_K / 16; g++) {
            float d = ldh(b->d) * b->scales[g];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(imax(-32, imin(31, nearest_int(x[16 * g + l] / d))) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = (uint8_t)((q1 & 15) | (q3 & 15) << 4);
                ql[l + 32] = (uint8_t)((q2 & 15) | (q4 & 15) << 4);
                qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
    }
}

// Symmetric fit x ~ scale * L, L in [-nmax, nmax), weights x^2 (ggml's
// make_q3_quants with do_rmse): round against the element of largest |x|,
// then up to 5 passes of moving single L to their best value given the rest,
// kept when the fit sum(w x L)^2 / sum(w L^2) improves. Returns the
// least-squares scale; L is stored offset by nmax.
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int l = imax(-nmax, imin(nmax - 1, nearest_int(x[i] * sl2 / slx)));
                if (l != L[i]) {
                    slx += w * x[i] * l;
                    sl2 += w * l * l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 2-bit L[256] as q2_K/q3_K store them (layout in quant.h).
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *Lh = L + 128 * h;
            qs[32 * h + l] = (uint8_t)(Lh[l] | Lh[l + 32] << 2 | Lh[l + 64] << 4 | Lh[l + 96] << 6);
        }
}

// Each group of 16 fit by make_qkx2_quants (nmax 3, weights |x|, absolute
// error); the 16 scales and 16 mins quantized to 4 bits against their maxima
// (d = max_scale / 15, dmin = max_min / 15); elements requantized against the
// stored values.
void q2_K_from_float(const float *x, void *vy, int64_t n) {
    block_q2_K *b = vy;
    uint8_t L[QK_K], Laux[16];
    float w[16], mins[QK_K / 16], sc[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * g + l]);
            sc[g] = make_qkx2_quants(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], Laux, -0.5f, 0.1f, 15, 1);
            if (sc[g] > max_scale) max_scale = sc[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        memset(b->scales, 0, sizeof b->scales);
        if (max_scale > 0) {
            float iscale = 15.f / max_scale;
            for (int g = 0; g < QK_K / 16; g++) b->scales[g] = (uint8_t)nearest_int(iscale * sc[g]);
            sth(b->d, max_scale / 15.f);
        } else {
            sth(b->d, 0.f);
        }
        if (max_min > 0) {
            float iscale = 15.f / max_min;
            for (int g = 0; g < QK_K / 16; g++) b->scales[g] |= (uint8_t)(nearest_int(iscale * mins[g]) << 4);
            sth(b->dmin, max_min / 15.f);
        } else {
            sth(b->dmin, 0.f);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            float d = ldh(b->d) * (b->scales[g] & 15);
            if (!d) continue;
            float dm = ldh(b->dmin) * (b->scales[g] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)imax(0, imin(3, nearest_int((x[16 * g + l] + dm) / d)));
        }
        pack_2bit(L, b->qs);
    }
}

// Each group of 16 fit by make_q3_quants (nmax 4); the 16 signed scales
// quantized to 6 bits against the one of largest |scale| (d = max_scale / -32);
// elements requantized to [-4, 3], the top bit going to hmask.
void q3_K_from_float(const float *x, void *vy, int64_t n) {
    block_q3_K *b = vy;
    int8_t L[QK_K];
    float sc[QK_K / 16];
    int isc[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            sc[g] = make_q3_quants(16, 4, x + 16 * g, L + 16 * g);
            if (fabsf(sc[g]) > amax) { amax = fabsf(sc[g]); max_scale = sc[g]; }
        }
        memset(b->scales, 0, sizeof b->scales);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int g = 0; g < QK_K / 16; g++) {
                int l = imax(-32, imin(31, nearest_int(iscale * sc[g]))) + 32;
                if (g < 8) b->scales[g] = (uint8_t)(l & 15);
                else b->scales[g - 8] |= (uint8_t)((l & 15) << 4);
                b->scales[8 + g % 4] |= (uint8_t)((l >> 4) << 2 * (g / 4));
            }
            sth(b->d, 1 / iscale);
        } else {
            sth(b->d, 0.f);
        }
        q3_K_scales(b->scales, isc);
        for (int g = 0; g < QK_K / 16; g++) {
            float d = ldh(b->d) * isc[g];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(imax(-4, imin(3, nearest_int(x[16 * g + l] / d))) + 4);
        }
        // high bit of element j goes to bit j/32 of hmask[j%32]
        memset(b->hmask, 0, sizeof b->hmask);
        uint8_t L2[QK_K];
        for (int j = 0; j < QK_K; j++) {
            int l = L[j];
            if (l > 3) {
                b->hmask[j % 32] |= (uint8_t)(1 << j / 32);
                l -= 4;
            }
            L2[j] = (uint8_t)l;
        }
        pack_2bit(L2, b->qs);
    }
}
