// Scalar reference row kernels (ggml's generic vec_dot_*_q8_* formulas) and
// the per-CPU dispatch.
#include "tensor/vecdot.h"

#include <stdatomic.h>
#include "base/cpu.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "base/half.h"

#include <math.h>
#include <string.h>

static inline float ld_f16(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return f16_to_f32(h); }
static inline float ld_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static inline int16_t ld_i16(const uint8_t *p) { int16_t v; memcpy(&v, p, 2); return v; }

// ---------------------------------------------------------------------------
// float weights, f32 activations

float vecdot_f32_f32(const void *w, const void *x, int n) { return dtype_get(DT_F32)->dot(w, x, n); }
float vecdot_f16_f32(const void *w, const void *x, int n) { return dtype_get(DT_F16)->dot(w, x, n); }
float vecdot_bf16_f32(const void *w, const void *x, int n) { return dtype_get(DT_BF16)->dot(w, x, n); }

// ---------------------------------------------------------------------------
// 32-element blocks against q8_0 activations

float vecdot_q8_0_q8_0(const void *vw, const void *vx, int n) {
    const block_q8_0 *w = vw, *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK; j++) sumi += w[i].qs[j] * x[i].qs[j];
        s += sumi * (ld_f16(w[i].d) * ld_f16(x[i].d));
    }
    return s;
}

float vecdot_q4_0_q8_0(const void *vw, const void *vx, int n) {
    const block_q4_0 *w = vw;
    const block_q8_0 *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++)
            sumi += ((w[i].qs[j] & 15) - 8) * x[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * x[i].qs[j + QK / 2];
        s += sumi * (ld_f16(w[i].d) * ld_f16(x[i].d));
    }
    return s;
}

// x = d q + m: d dx sum(q y) + m dx sum(y), against q8_0 activations
float vecdot_q4_1_q8_0(const void *vw, const void *vx, int n) {
    const block_q4_1 *w = vw;
    const block_q8_0 *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK; i++) {
        int sumi = 0, sumy = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += (w[i].qs[j] & 15) * x[i].qs[j] + (w[i].qs[j] >> 4) * x[i].qs[j + QK / 2];
            sumy += x[i].qs[j] + x[i].qs[j + QK / 2];
        }
        float dx = ld_f16(x[i].d);
        s += sumi * (ld_f16(w[i].d) * dx) + sumy * (ld_f16(w[i].m) * dx);
    }
    return s;
}

float vecdot_q5_0_q8_0(const void *vw, const void *vx, int n) {
    const block_q5_0 *w = vw;
    const block_q8_0 *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (w[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
            int hi = (w[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            sumi += (lo - 16) * x[i].qs[j] + (hi - 16) * x[i].qs[j + QK / 2];
        }
        s += sumi * (ld_f16(w[i].d) * ld_f16(x[i].d));
    }
    return s;
}

// q5_1 (x = d q + m, q 5 bits) as q4_1
float vecdot_q5_1_q8_0(const void *vw, const void *vx, int n) {
    const block_q5_1 *w = vw;
    const block_q8_0 *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        int sumi = 0, sumy = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (w[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
            int hi = (w[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            sumi += lo * x[i].qs[j] + hi * x[i].qs[j + QK / 2];
            sumy += x[i].qs[j] + x[i].qs[j + QK / 2];
        }
        float dx = ld_f16(x[i].d);
        s += sumi * (ld_f16(w[i].d) * dx) + sumy * (ld_f16(w[i].m) * dx);
    }
    return s;
}

float vecdot_mxfp4_q8_0(const void *vw, const void *vx, int n) {
    const block_mxfp4 *w = vw;
    const block_q8_0 *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++)
            sumi += kvalues_mxfp4[w[i].qs[j] & 15] * x[i].qs[j] + kvalues_mxfp4[w[i].qs[j] >> 4] * x[i].qs[j + QK / 2];
        s += sumi * (e8m0_half(w[i].e) * ld_f16(x[i].d));
    }
    return s;
}

// ---------------------------------------------------------------------------
// k-quants against q8_K activations


// q2_K: x = d (sc & 15) q - dmin (sc >> 4) per group of 16; the mins meet
// the activation's group sums (bsums).
float vecdot_q2_K_q8_K(const void *vw, const void *vx, int n) {
    const block_q2_K *w = vw;
    const block_q8_K *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK_K; i++) {
        float dy = ld_f32(x[i].d);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 16; g++) summ += (w[i].scales[g] >> 4) * ld_i16(x[i].bsums + 2 * g);
        for (int h = 0; h < 2; h++)
            for (int sh = 0; sh < 4; sh++)
                for (int k = 0; k < 2; k++) {
                    const uint8_t *q = w[i].qs + 32 * h + 16 * k;
                    const int8_t *y = x[i].qs + 128 * h + 32 * sh + 16 * k;
                    int si = 0;
                    for (int l = 0; l < 16; l++) si += ((q[l] >> 2 * sh) & 3) * y[l];
                    sumi += (w[i].scales[8 * h + 2 * sh + k] & 15) * si;
                }
        s += dy * ld_f16(w[i].d) * sumi - dy * ld_f16(w[i].dmin) * summ;
    }
    return s;
}

// q3_K: x = d (sc - 32) (q - 4 unless the high bit is set) per group of 16.
float vecdot_q3_K_q8_K(const void *vw, const void *vx, int n) {
    const block_q3_K *w = vw;
    const block_q8_K *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int sc[16], sumi = 0;
        q3_K_scales(w[i].scales, sc);
        for (int h = 0; h < 2; h++)
            for (int sh = 0; sh < 4; sh++)
                for (int k = 0; k < 2; k++) {
                    const uint8_t *q = w[i].qs + 32 * h + 16 * k, *hm = w[i].hmask + 16 * k;
                    const int8_t *y = x[i].qs + 128 * h + 32 * sh + 16 * k;
                    int m = 1 << (4 * h + sh), si = 0;
                    for (int l = 0; l < 16; l++) si += (((q[l] >> 2 * sh) & 3) - (hm[l] & m ? 0 : 4)) * y[l];
                    sumi += sc[8 * h + 2 * sh + k] * si;
                }
        s += ld_f32(x[i].d) * ld_f16(w[i].d) * sumi;
    }
    return s;
}

float vecdot_q4_K_q8_K(const void *vw, const void *vx, int n) {
    const block_q4_K *w = vw;
    const block_q8_K *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK_K; i++) {
        float dy = ld_f32(x[i].d);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 8; g++) {
            int sc, m;
            scale_min_k4(g, w[i].scales, &sc, &m);
            summ += m * (ld_i16(x[i].bsums + 4 * g) + ld_i16(x[i].bsums + 4 * g + 2));
            const uint8_t *q = w[i].qs + 32 * (g / 2);
            const int8_t *y = x[i].qs + 32 * g;
            int si = 0;
            for (int l = 0; l < 32; l++) si += ((g & 1) ? q[l] >> 4 : q[l] & 15) * y[l];
            sumi += sc * si;
        }
        s += dy * ld_f16(w[i].d) * sumi - dy * ld_f16(w[i].dmin) * summ;
    }
    return s;
}

float vecdot_q5_K_q8_K(const void *vw, const void *vx, int n) {
    const block_q5_K *w = vw;
    const block_q8_K *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK_K; i++) {
        float dy = ld_f32(x[i].d);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 8; g++) {
            int sc, m;
            scale_min_k4(g, w[i].scales, &sc, &m);
            summ += m * (ld_i16(x[i].bsums + 4 * g) + ld_i16(x[i].bsums + 4 * g + 2));
            const uint8_t *q = w[i].qs + 32 * (g / 2);
            const int8_t *y = x[i].qs + 32 * g;
            int si = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((g & 1) ? q[l] >> 4 : q[l] & 15) | (((w[i].qh[l] >> g) & 1) << 4);
                si += v * y[l];
            }
            sumi += sc * si;
        }
        s += dy * ld_f16(w[i].d) * sumi - dy * ld_f16(w[i].dmin) * summ;
    }
    return s;
}

float vecdot_q6_K_q8_K(const void *vw, const void *vx, int n) {
    const block_q6_K *w = vw;
    const block_q8_K *x = vx;
    float s = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *y = x[i].qs + 128 * h;
            int gs[8] = {0};
            for (int l = 0; l < 32; l++) {
                int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                gs[0 + l / 16] += q1 * y[l];
                gs[2 + l / 16] += q2 * y[l + 32];
                gs[4 + l / 16] += q3 * y[l + 64];
                gs[6 + l / 16] += q4 * y[l + 96];
            }
            for (int g = 0; g < 8; g++) sumi += w[i].scales[8 * h + g] * gs[g];
        }
        s += ld_f32(x[i].d) * ld_f16(w[i].d) * sumi;
    }
    return s;
}

// ---------------------------------------------------------------------------
// activation quantizers

void act_quant_q8_0(const float *x, void *vy, int n) {
    block_q8_0 *y = vy;
    for (int i = 0; i < n / QK; i++, x += QK) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
        uint16_t h = f32_to_f16(d);
        memcpy(y[i].d, &h, 2);
        for (int j = 0; j < QK; j++) { // round half to even; NaN as the x86 path stores it (-128), not a cast out of range
            float v = nearbyintf(x[j] * id);
            y[i].qs[j] = (int8_t)(v >= 127.f ? 127 : v >= -128.f ? (int)v : -128);
        }
    }
}

void act_quant_q8_K(const float *x, void *y, int n) { q8_K_from_float(x, y, n); }

void act_q8_0_group(const void *x, void *y, int n) {
    const block_q8_0 *b = x;
    int nb = n / QK;
    uint8_t *g = y;
    memset(g, 0, ACT_GROUP_BYTES * (size_t)((nb + 3) / 4));
    for (int i = 0; i < nb; i++) {
        uint8_t *gi = g + ACT_GROUP_BYTES * (size_t)(i / 4);
        float d = ld_f16(b[i].d);
        int32_t s = 0;
        for (int j = 0; j < QK; j++) s += b[i].qs[j];
        memcpy(gi + 32 * (i % 4), b[i].qs, QK);
        memcpy(gi + 128 + 4 * (i % 4), &d, 4);
        memcpy(gi + 144 + 4 * (i % 4), &s, 4);
    }
}

size_t act_row_size(const vecdot_kernel *k, int n) {
    return k->grouped ? ACT_GROUP_BYTES * (size_t)((n / QK + 3) / 4) : dtype_row_size(k->act_type, n);
}

// ---------------------------------------------------------------------------


// Tests switch the SIMD kernels off to compare them with their oracles.
static atomic_int g_force_scalar;

const vecdot_kernel *vecdot_get_ref(int t) {
    const dtype_traits *tr = dtype_get(t);
    return tr && tr->ref.dot ? &tr->ref : NULL;
}

const vecdot_kernel *vecdot_get_simd(int t) {
    const dtype_traits *tr = dtype_get(t);
    if (!tr || !cpu_has_avx2()) return NULL;
    return tr->vnni && cpu_has_vnni() ? tr->vnni : tr->avx2;
}

const vecdot_kernel *vecdot_get(int t) {
    const vecdot_kernel *k = atomic_load_explicit(&g_force_scalar, memory_order_relaxed) ? NULL : vecdot_get_simd(t);
    return k ? k : vecdot_get_ref(t);
}

const vecdot_kernel *vecdot_get_ggml(int t) {
    if (t != DT_BF16) return vecdot_get(t);
    if (atomic_load_explicit(&g_force_scalar, memory_order_relaxed) || !cpu_has_avx2()) return &vecdot_ref_bf16_bf16;
    return cpu_has_avx512bf16() ? &vecdot_avx512bf16_bf16 : &vecdot_avx2_bf16_bf16;
}

const vecdot_kernel *vecdot_get_ggml_ref(int t) { return t == DT_BF16 ? &vecdot_ref_bf16_bf16 : vecdot_get_ref(t); }

const char *vecdot_isa(void) {
    if (atomic_load(&g_force_scalar) || !cpu_has_avx2()) return "scalar";
    return cpu_has_vnni() ? "avx512vnni" : "avx2";
}

int vecdot_force_scalar(int on) { return atomic_exchange(&g_force_scalar, on); }
int vecdot_scalar_forced(void) { return atomic_load(&g_force_scalar); }
