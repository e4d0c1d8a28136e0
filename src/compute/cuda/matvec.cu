// The products of one token (or a few) against a matrix of any stored type
// (k_mv; cuda_matmul and cuda_matmul_multi choose its threads a row, or hand
// a batch to k_mmv, mmv.cu), and the transposed float product
// (k_matmul_trans).
//
// The products: a warp per output row, the row cut into units of 16 to 64
// weights that the lanes take in turn (16-byte loads, __dp4a on the packed
// integers), each lane keeping its float sum, one warp sum at the end. The
// integer sums and the per-block scalings are the CPU oracle's
// (tensor/vecdot_ref.c); the order of the float additions is the lanes'.
#include "compute/cuda/common.cuh"
#include "compute/cuda/units.cuh"

// an activation row (quant.cuh: the layout) as the units read it
struct xrow {
    const int8_t *qs;
    const uint8_t *d;
    const int16_t *bs;
};
static __device__ __forceinline__ xrow x_q8_0(const uint8_t *row, int nb) { return {(const int8_t *)row, row + 32 * nb, NULL}; }
static __device__ __forceinline__ xrow x_q8_K(const uint8_t *row, int nb) {
    return {(const int8_t *)row, row + 256 * nb, (const int16_t *)(row + 260 * nb)};
}
static __device__ __forceinline__ float xd0(const xrow &x, int b) { return ld_h2(x.d + 2 * b); }
static __device__ __forceinline__ float xdK(const xrow &x, int b) { return ((const float *)x.d)[b]; }

// q8_0 (split): unit (block b, half i): 16 quants
static __device__ __forceinline__ float u_q8_0(const wrow &m, const xrow &x, int u) {
    int b = u >> 1, i = u & 1;
    size_t blk = (size_t)m.r * m.nb + b;
    int4 q = *(const int4 *)(m.w + 32 * blk + 16 * i), y = *(const int4 *)(x.qs + 32 * b + 16 * i);
    int s = __dp4a(q.x, y.x, 0);
    s = __dp4a(q.y, y.y, s), s = __dp4a(q.z, y.z, s), s = __dp4a(q.w, y.w, s);
    return v_q32(ld_h2(m.w + (size_t)32 * m.rows * m.nb + 2 * blk), xd0(x, b), s);
}

// q4_0 (split): unit = block b: byte l holds element l (low) and 16 + l (high)
static __device__ __forceinline__ float u_q4_0(const wrow &m, const xrow &x, int b) {
    size_t blk = (size_t)m.r * m.nb + b;
    int4 q = *(const int4 *)(m.w + 16 * blk), y0 = *(const int4 *)(x.qs + 32 * b), y1 = *(const int4 *)(x.qs + 32 * b + 16);
    int qv[4] = {q.x, q.y, q.z, q.w}, lo[4] = {y0.x, y0.y, y0.z, y0.w}, hi[4] = {y1.x, y1.y, y1.z, y1.w}, s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s = __dp4a(vsub4(qv[k] & 0x0f0f0f0f, 0x08080808), lo[k], s);
        s = __dp4a(vsub4((qv[k] >> 4) & 0x0f0f0f0f, 0x08080808), hi[k], s);
    }
    return v_q32(ld_h2(m.w + (size_t)16 * m.rows * m.nb + 2 * blk), xd0(x, b), s);
}

// q5_0 (split): as q4_0 with the fifth bits (qh bit l: element l, bit 16 + l: element 16 + l)
static __device__ __forceinline__ float u_q5_0(const wrow &m, const xrow &x, int b) {
    size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
    int4 q = *(const int4 *)(m.w + 16 * blk), y0 = *(const int4 *)(x.qs + 32 * b), y1 = *(const int4 *)(x.qs + 32 * b + 16);
    uint32_t qh = *(const uint32_t *)(m.w + 16 * nall + 4 * blk);
    int qv[4] = {q.x, q.y, q.z, q.w}, lo[4] = {y0.x, y0.y, y0.z, y0.w}, hi[4] = {y1.x, y1.y, y1.z, y1.w}, s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s = __dp4a(vsub4((qv[k] & 0x0f0f0f0f) | spread4(qh >> (4 * k)), 0x10101010), lo[k], s);
        s = __dp4a(vsub4(((qv[k] >> 4) & 0x0f0f0f0f) | spread4(qh >> (16 + 4 * k)), 0x10101010), hi[k], s);
    }
    return v_q32(ld_h2(m.w + 20 * nall + 2 * blk), xd0(x, b), s);
}

// q6_K (split): unit (super-block b, quarter i): half h = i / 2 of the
// super-block, its bytes l0..l0+15 (l0 = 16 (i % 2)) of both 32-byte rows of
// ql and of qh: 64 weights in four groups of 16, each with its scale
static __device__ __forceinline__ float u_q6_K(const wrow &m, const xrow &x, int u) {
    int b = u >> 2, i = u & 3, h = i >> 1, l0 = 16 * (i & 1);
    size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
    const uint8_t *ql = m.w + 128 * blk + 64 * h + l0;
    int4 A = *(const int4 *)ql, B = *(const int4 *)(ql + 32), C = *(const int4 *)(m.w + 128 * nall + 64 * blk + 32 * h + l0);
    const int8_t *sc = (const int8_t *)(m.w + 192 * nall + 16 * blk) + 8 * h + (i & 1);
    const int8_t *xs = x.qs + 256 * b + 128 * h + l0;
    int4 X1 = *(const int4 *)xs, X2 = *(const int4 *)(xs + 32), X3 = *(const int4 *)(xs + 64), X4 = *(const int4 *)(xs + 96);
    int av[4] = {A.x, A.y, A.z, A.w}, bv[4] = {B.x, B.y, B.z, B.w}, cv[4] = {C.x, C.y, C.z, C.w};
    int x1[4] = {X1.x, X1.y, X1.z, X1.w}, x2[4] = {X2.x, X2.y, X2.z, X2.w}, x3[4] = {X3.x, X3.y, X3.z, X3.w}, x4[4] = {X4.x, X4.y, X4.z, X4.w};
    int s1 = 0, s2 = 0, s3 = 0, s4 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int a = av[k], bb = bv[k], c = cv[k];
        s1 = __dp4a(vsub4((a & 0x0f0f0f0f) | ((c & 0x03030303) << 4), 0x20202020), x1[k], s1);
        s2 = __dp4a(vsub4((bb & 0x0f0f0f0f) | (((c >> 2) & 0x03030303) << 4), 0x20202020), x2[k], s2);
        s3 = __dp4a(vsub4(((a >> 4) & 0x0f0f0f0f) | (((c >> 4) & 0x03030303) << 4), 0x20202020), x3[k], s3);
        s4 = __dp4a(vsub4(((bb >> 4) & 0x0f0f0f0f) | (((c >> 6) & 0x03030303) << 4), 0x20202020), x4[k], s4);
    }
    int sumi = sc[0] * s1 + sc[2] * s2 + sc[4] * s3 + sc[6] * s4;
    return v_q6K(xdK(x, b), ld_h2(m.w + 208 * nall + 2 * blk), sumi);
}

// q4_K (ggml blocks): unit (b, part i of 8): 16 quant bytes, the low nibbles
// elements 16h..16h+15 of sub-block 2p, the high ones of 2p + 1 (p = i / 2,
// h = i % 2)
static __device__ __forceinline__ float u_q4_K(const wrow &m, const xrow &x, int u) {
    int b = u >> 3, i = u & 7, p = i >> 1, h = i & 1;
    const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * qtype<DT_Q4_K>::B;
    int4 q = *(const int4 *)(w + 16 + 32 * p + 16 * h);
    const int8_t *xs = x.qs + 256 * b + 64 * p + 16 * h;
    int4 X0 = *(const int4 *)xs, X1 = *(const int4 *)(xs + 32);
    int qv[4] = {q.x, q.y, q.z, q.w}, x0[4] = {X0.x, X0.y, X0.z, X0.w}, x1[4] = {X1.x, X1.y, X1.z, X1.w}, s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s0 = __dp4a(qv[k] & 0x0f0f0f0f, x0[k], s0);
        s1 = __dp4a((qv[k] >> 4) & 0x0f0f0f0f, x1[k], s1);
    }
    int sc0, m0, sc1, m1;
    scales_k4(w, 2 * p, &sc0, &m0, &sc1, &m1);
    const int16_t *bs = x.bs + 16 * b;
    int sumi = sc0 * s0 + sc1 * s1, summ = m0 * bs[4 * p + h] + m1 * bs[4 * p + 2 + h];
    return v_k4(xdK(x, b), ld_h2(w), ld_h2(w + 2), sumi, summ);
}

// q5_K (ggml blocks): as q4_K, the fifth bits from qh (bits 2p and 2p + 1 of bytes 16h..)
static __device__ __forceinline__ float u_q5_K(const wrow &m, const xrow &x, int u) {
    int b = u >> 3, i = u & 7, p = i >> 1, h = i & 1;
    const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * qtype<DT_Q5_K>::B;
    int4 q = *(const int4 *)(w + 48 + 32 * p + 16 * h), qh = *(const int4 *)(w + 16 + 16 * h);
    const int8_t *xs = x.qs + 256 * b + 64 * p + 16 * h;
    int4 X0 = *(const int4 *)xs, X1 = *(const int4 *)(xs + 32);
    int qv[4] = {q.x, q.y, q.z, q.w}, hv[4] = {qh.x, qh.y, qh.z, qh.w}, x0[4] = {X0.x, X0.y, X0.z, X0.w}, x1[4] = {X1.x, X1.y, X1.z, X1.w};
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        s0 = __dp4a((qv[k] & 0x0f0f0f0f) | (((hv[k] >> (2 * p)) & 0x01010101) << 4), x0[k], s0);
        s1 = __dp4a(((qv[k] >> 4) & 0x0f0f0f0f) | (((hv[k] >> (2 * p + 1)) & 0x01010101) << 4), x1[k], s1);
    }
    int sc0, m0, sc1, m1;
    scales_k4(w, 2 * p, &sc0, &m0, &sc1, &m1);
    const int16_t *bs = x.bs + 16 * b;
    int sumi = sc0 * s0 + sc1 * s1, summ = m0 * bs[4 * p + h] + m1 * bs[4 * p + 2 + h];
    return v_k4(xdK(x, b), ld_h2(w), ld_h2(w + 2), sumi, summ);
}

// mxfp4's scale and values (tensor/quant.h's e8m0_half, kvalues_mxfp4)
static __device__ __forceinline__ float e8m0_half_d(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return __uint_as_float(bits);
}

__constant__ int8_t c_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The other block types, a block per lane (q4_1, q5_1, mxfp4: the oracle's
// loops) or a warp per super-block (q2_K, q3_K: lane l takes elements
// 8l..8l+7; the integer sums are added across the warp).
template <int T> struct blk;
template <> struct blk<DT_Q4_1> : qtype<DT_Q4_1> {
    static __device__ float dot(const uint8_t *w, const int8_t *y, float dx) {
        int s = 0, sy = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[4 + j] & 15) * y[j] + (w[4 + j] >> 4) * y[j + 16];
            sy += y[j] + y[j + 16];
        }
        return s * (ld_h(w) * dx) + sy * (ld_h(w + 2) * dx);
    }
};
template <> struct blk<DT_Q5_1> : qtype<DT_Q5_1> {
    static __device__ float dot(const uint8_t *w, const int8_t *y, float dx) {
        uint32_t qh = ld_u32(w + 4);
        int s = 0, sy = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[8 + j] & 15) | ((qh >> j) & 1) << 4, hi = (w[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
            s += lo * y[j] + hi * y[j + 16];
            sy += y[j] + y[j + 16];
        }
        return s * (ld_h(w) * dx) + sy * (ld_h(w + 2) * dx);
    }
};
template <> struct blk<DT_MXFP4> : qtype<DT_MXFP4> {
    static __device__ float dot(const uint8_t *w, const int8_t *y, float dx) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += c_mxfp4[w[1 + j] & 15] * y[j] + c_mxfp4[w[1 + j] >> 4] * y[j + 16];
        return s * (e8m0_half_d(w[0]) * dx);
    }
};

template <int T> struct kq;
template <> struct kq<DT_Q2_K> : qtype<DT_Q2_K> {
    static __device__ void part(const uint8_t *w, const int8_t *y, const int16_t *bs, int l, int *si, int *sm) {
        int s = 0, e0 = 8 * l, g = e0 / 16, h = e0 / 128, r = e0 % 128, sh = r / 32;
        for (int k = 0; k < 8; k++) s += ((w[16 + 32 * h + (r % 32) + k] >> (2 * sh)) & 3) * y[e0 + k];
        *si = (w[g] & 15) * s;
        *sm = l % 2 == 0 ? (w[g] >> 4) * bs[g] : 0;
    }
    static __device__ float scale(const uint8_t *w, float dy, int si, int sm) {
        return __fsub_rn(__fmul_rn(__fmul_rn(dy, ld_h(w + 80)), (float)si), __fmul_rn(__fmul_rn(dy, ld_h(w + 82)), (float)sm));
    }
};
template <> struct kq<DT_Q3_K> : qtype<DT_Q3_K> {
    static __device__ void part(const uint8_t *w, const int8_t *y, const int16_t *bs, int l, int *si, int *sm) {
        const uint8_t *p = w + 96;
        int e0 = 8 * l, g = e0 / 16, h = e0 / 128, r = e0 % 128, sh = r / 32, rr = r % 32, s = 0, m = 1 << (4 * h + sh);
        for (int k = 0; k < 8; k++) s += (((w[32 + 32 * h + rr + k] >> (2 * sh)) & 3) - (w[rr + k] & m ? 0 : 4)) * y[e0 + k];
        int lo = g < 8 ? p[g] & 15 : p[g - 8] >> 4, hi = (p[8 + g % 4] >> (2 * (g / 4))) & 3;
        *si = ((lo | hi << 4) - 32) * s;
        *sm = 0;
        (void)bs;
    }
    static __device__ float scale(const uint8_t *w, float dy, int si, int sm) { (void)sm; return __fmul_rn(__fmul_rn(dy, ld_h(w + 108)), (float)si); }
};

// A row is taken by TPR threads (8, 32 or 128: more for fewer rows, so that
// a product has enough warps to keep the memory busy): slot s of them takes
// the row's units s, s + TPR, ... With TPR <= 32 a warp holds 32 / TPR rows,
// lane l on row l % (32 / TPR) as slot l / (32 / TPR).
static __device__ __forceinline__ int gisum8(int v) { // the 8 lanes of a row at TPR 8
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    return v + __shfl_xor_sync(0xffffffffu, v, 16);
}

static __device__ __forceinline__ float mv_row_f32(const uint8_t *wr, const float *xt, int cols, int s, int st) {
    float acc = 0.0f;
    for (int u = s; u < cols / 4; u += st) {
        float4 a = ((const float4 *)wr)[u], b = ((const float4 *)xt)[u];
        acc = fmaf(a.x, b.x, acc), acc = fmaf(a.y, b.y, acc), acc = fmaf(a.z, b.z, acc), acc = fmaf(a.w, b.w, acc);
    }
    return acc;
}
// f16 / bf16 rows of a multiple of 8: 8 weights a unit
template <int T>
static __device__ __forceinline__ float u_f(const uint8_t *wr, const float *xt, int u) {
    int4 q = ((const int4 *)wr)[u];
    float4 b0 = ((const float4 *)xt)[2 * u], b1 = ((const float4 *)xt)[2 * u + 1];
    uint32_t qv[4] = {(uint32_t)q.x, (uint32_t)q.y, (uint32_t)q.z, (uint32_t)q.w};
    float f[8];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (T == DT_F16) {
            float2 p = __half22float2(*(const __half2 *)&qv[k]);
            f[2 * k] = p.x, f[2 * k + 1] = p.y;
        } else {
            f[2 * k] = __uint_as_float(qv[k] << 16), f[2 * k + 1] = __uint_as_float(qv[k] & 0xffff0000u);
        }
    }
    float acc = f[0] * b0.x;
    acc = fmaf(f[1], b0.y, acc), acc = fmaf(f[2], b0.z, acc), acc = fmaf(f[3], b0.w, acc);
    acc = fmaf(f[4], b1.x, acc), acc = fmaf(f[5], b1.y, acc), acc = fmaf(f[6], b1.z, acc), acc = fmaf(f[7], b1.w, acc);
    return acc;
}
template <int T>
static __device__ __forceinline__ float mv_row_f(const uint8_t *wr, const float *xt, int cols, int s, int st) {
    const int nu = cols / 8;
    float acc = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int u = s;
    for (; u + 3 * st < nu; u += 4 * st) {
        acc += u_f<T>(wr, xt, u), a1 += u_f<T>(wr, xt, u + st);
        a2 += u_f<T>(wr, xt, u + 2 * st), a3 += u_f<T>(wr, xt, u + 3 * st);
    }
    for (; u < nu; u += st) acc += u_f<T>(wr, xt, u);
    return (acc + a1) + (a2 + a3);
}
// float rows of any length: an element a lane
template <int T>
static __device__ float mv_row_e(const uint8_t *wr, const float *xt, int cols, int s, int st) {
    float acc = 0.0f;
    for (int i = s; i < cols; i += st) acc = fmaf(elt<T>::get(wr + (size_t)i * elt<T>::B), xt[i], acc);
    return acc;
}

// A thread's units of one row, added in order into one sum: four at a time
// with no bound checked between them, so that their loads are all in flight
// at once, then the rest. (One sum, not four: k_mmv keeps a sum per token
// and slot in registers, as few as possible.)
#define UNITS(fn, per_block)                                                   \
    {                                                                          \
        const int nu = m.nb * (per_block);                                     \
        int u = s;                                                             \
        for (; u + 3 * st < nu; u += 4 * st) {                                 \
            acc += fn(m, x, u), acc += fn(m, x, u + st);                       \
            acc += fn(m, x, u + 2 * st), acc += fn(m, x, u + 3 * st);          \
        }                                                                      \
        for (; u < nu; u += st) acc += fn(m, x, u);                            \
        return acc;                                                            \
    }

// The thread's part (slot s of st) of row m.r against one token's
// activations xt, to be added across the row's threads; the q2_K / q3_K path
// (st = 8 only) adds across them itself: slot 0 carries the row's sum.
static __device__ __forceinline__ float row_part_i(int type, const wrow &m, const uint8_t *xt, int cols, int s, int st) {
    float acc = 0.0f;
    if (type == DT_F32 || type == DT_F16 || type == DT_BF16) {
        const uint8_t *wr = m.w + (size_t)m.r * cols * (type == DT_F32 ? 4 : 2);
        const float *xf = (const float *)xt;
        if (type == DT_F32) return cols % 4 ? mv_row_e<DT_F32>(wr, xf, cols, s, st) : mv_row_f32(wr, xf, cols, s, st);
        if (type == DT_F16) return cols % 8 ? mv_row_e<DT_F16>(wr, xf, cols, s, st) : mv_row_f<DT_F16>(wr, xf, cols, s, st);
        return cols % 8 ? mv_row_e<DT_BF16>(wr, xf, cols, s, st) : mv_row_f<DT_BF16>(wr, xf, cols, s, st);
    }
    if (type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K || type == DT_Q2_K || type == DT_Q3_K) {
        const xrow x = x_q8_K(xt, m.nb);
        switch (type) {
        case DT_Q4_K: UNITS(u_q4_K, 8)
        case DT_Q5_K: UNITS(u_q5_K, 8)
        case DT_Q6_K: UNITS(u_q6_K, 4)
        }
        // q2_K, q3_K: the row's 8 lanes share each super-block (parts s, s + 8, s + 16, s + 24 of 32)
#define KQ(t)                                                                                          \
    case t: {                                                                                          \
        const uint8_t *wr = m.w + (size_t)m.r * m.nb * kq<t>::B;                                        \
        for (int b = 0; b < m.nb; b++) {                                                               \
            int si = 0, sm = 0;                                                                        \
            for (int j = 0; j < 4; j++) {                                                              \
                int a1, a2;                                                                            \
                kq<t>::part(wr + (size_t)b * kq<t>::B, x.qs + 256 * b, x.bs + 16 * b, s + 8 * j, &a1, &a2); \
                si += a1, sm += a2;                                                                    \
            }                                                                                          \
            si = gisum8(si), sm = gisum8(sm);                                                            \
            acc = __fadd_rn(acc, kq<t>::scale(wr + (size_t)b * kq<t>::B, xdK(x, b), si, sm));          \
        }                                                                                              \
        return s == 0 ? acc : 0.0f;                                                                    \
    }
        switch (type) { KQ(DT_Q2_K) KQ(DT_Q3_K) }
#undef KQ
        return 0.0f;
    }
    const xrow x = x_q8_0(xt, m.nb);
    switch (type) {
    case DT_Q8_0: UNITS(u_q8_0, 2)
    case DT_Q4_0: UNITS(u_q4_0, 1)
    case DT_Q5_0: UNITS(u_q5_0, 1)
    }
#define BLK(t)                                                                                                \
    case t: {                                                                                                 \
        const uint8_t *wr = m.w + (size_t)m.r * m.nb * blk<t>::B;                                              \
        for (int b = s; b < m.nb; b += st) acc += blk<t>::dot(wr + (size_t)b * blk<t>::B, x.qs + 32 * b, xd0(x, b)); \
        return acc;                                                                                           \
    }
    switch (type) { BLK(DT_Q4_1) BLK(DT_Q5_1) BLK(DT_MXFP4) }
#undef BLK
    return 0.0f;
}
#undef UNITS
// (out of line: the kernels that take any type; a kernel of one type inlines
// row_part_i with that type, its other types' code folded away)
static __device__ float row_part(int type, const wrow &m, const uint8_t *xt, int cols, int s, int st) {
    return row_part_i(type, m, xt, cols, s, st);
}

// row_part for nt <= NT tokens at once (their activations xrow bytes apart):
// each token's sum is row_part's, operation for operation, while the unit's
// weights are loaded and unpacked once for all of them (the loads and the
// unpacking are the same expressions in each token's step: the compiler
// keeps one of each). Other types: row_part a token at a time.
// (a compiler barrier: one unit's loads are not hoisted above the previous
// unit's arithmetic, which with 8 tokens took every register and spilled)
#define UNIT_FENCE() asm volatile("" ::: "memory")
#define UNITS_N(fn, per_block, mk)                                                       \
    {                                                                                    \
        const int nu = m.nb * (per_block);                                               \
        xrow x[NT];                                                                      \
        float a0[NT];                                                                    \
        _Pragma("unroll") for (int t = 0; t < NT; t++) {                                 \
            x[t] = mk(xt + xr * (size_t)(t < nt ? t : 0), m.nb);                          \
            a0[t] = 0.0f;                                                                \
        }                                                                                \
        int u = s;                                                                       \
        for (; u + 3 * st < nu; u += 4 * st) { /* (a unit at a time: the tokens are the loads in flight) */ \
            _Pragma("unroll") for (int q = 0; q < 4; q++) {                              \
                _Pragma("unroll") for (int t = 0; t < NT; t++) a0[t] += fn(m, x[t], u + q * st); \
                UNIT_FENCE();                                                            \
            }                                                                            \
        }                                                                                \
        for (; u < nu; u += st) {                                                        \
            _Pragma("unroll") for (int t = 0; t < NT; t++) a0[t] += fn(m, x[t], u);      \
        }                                                                                \
        _Pragma("unroll") for (int t = 0; t < NT; t++) out[t] = a0[t];                   \
        return;                                                                          \
    }
template <int NT>
static __device__ void row_part_n(int type, const wrow &m, const uint8_t *xt, size_t xr, int nt, int cols, int s, int st, float *out) {
    switch (type) {
    case DT_Q4_K: UNITS_N(u_q4_K, 8, x_q8_K)
    case DT_Q5_K: UNITS_N(u_q5_K, 8, x_q8_K)
    case DT_Q6_K: UNITS_N(u_q6_K, 4, x_q8_K)
    case DT_Q8_0: UNITS_N(u_q8_0, 2, x_q8_0)
    case DT_Q4_0: UNITS_N(u_q4_0, 1, x_q8_0)
    case DT_Q5_0: UNITS_N(u_q5_0, 1, x_q8_0)
    }
#pragma unroll
    for (int t = 0; t < NT; t++) out[t] = row_part(type, m, xt + xr * (size_t)(t < nt ? t : 0), cols, s, st);
}
#undef UNITS_N
#undef UNIT_FENCE


// the sum over a row's TPR threads (every thread of the block calls it)
template <int TPR>
static __device__ __forceinline__ float row_sum(float v, float *sh) {
    if (TPR <= 32) {
        for (int o = 32 / TPR; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    }
    v = warp_sum(v);
    __syncthreads(); // (sh free from the last call)
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    return sh[0] + sh[1] + sh[2] + sh[3];
}

// NT > 1: the tokens in groups of NT, each group's weights read once
// (row_part_n); each token's value is the NT = 1 kernel's, bit for bit.
// TY >= 0: every matrix of d is of that type (one-token products of the
// common quantized types: a kernel of one type's code, without the others'
// instructions to fetch; the same arithmetic as TY = -1's, bit for bit).
template <int TPR, int NT, int TY = -1>
static __global__ void __launch_bounds__(MV_THREADS) k_mv(const mv_desc d, const uint8_t *xq) {
    mv_prefetch(d);
    PDL_ENTRY();
    __shared__ float sh[4];
    int mi = 0;
    while (mi + 1 < d.n && (int)blockIdx.x >= d.m[mi + 1].blk0) mi++;
    const mv_mat m = d.m[mi];
    const int RPW = TPR <= 32 ? 32 / TPR : 1, lane = threadIdx.x % 32, wp = threadIdx.x / 32;
    const int s = TPR <= 32 ? lane / RPW : (int)threadIdx.x;
    const int rw = ((int)blockIdx.x - m.blk0) * (MV_THREADS / TPR) + (TPR <= 32 ? wp * RPW : 0); // the warp's first row
    if (rw >= m.rows) return; // (the whole warp, or block at TPR 128: the sums need every thread)
    const int r = rw + (TPR <= 32 ? lane % RPW : 0), rr = r < m.rows ? r : m.rows - 1;
    const wrow wr = {m.w, m.rows, rr, m.nb};
    if (NT == 1) {
        for (int t = 0; t < d.T; t++) {
            const uint8_t *xt = xq + d.xrow * t;
            float acc = row_sum<TPR>(TY >= 0 ? row_part_i(TY, wr, xt, d.cols, s, TPR) : row_part(m.type, wr, xt, d.cols, s, TPR), sh);
            if (d.glu) {
                const mv_mat u = d.m[1];
                const wrow ur = {u.w, u.rows, rr, u.nb};
                float up = row_sum<TPR>(TY >= 0 ? row_part_i(TY, ur, xt, d.cols, s, TPR) : row_part(u.type, ur, xt, d.cols, s, TPR), sh);
                acc = act1(acc, d.act, d.ggml) * up;
            }
            if (s == 0 && r < m.rows) m.y[(size_t)t * m.rows + r] = acc;
        }
    } else
    for (int t0 = 0; t0 < d.T; t0 += NT) {
        const uint8_t *xt = xq + d.xrow * t0;
        const int nt = d.T - t0 < NT ? d.T - t0 : NT;
        float acc[NT], up[NT];
        row_part_n<NT>(m.type, wr, xt, d.xrow, nt, d.cols, s, TPR, acc);
        if (d.glu) {
            const mv_mat u = d.m[1];
            const wrow ur = {u.w, u.rows, rr, u.nb};
            row_part_n<NT>(u.type, ur, xt, d.xrow, nt, d.cols, s, TPR, up);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break; // (the same for every thread: the sums' barriers stay whole)
            float a = row_sum<TPR>(acc[t], sh);
            if (d.glu) a = act1(a, d.act, d.ggml) * row_sum<TPR>(up[t], sh);
            if (s == 0 && r < m.rows) m.y[(size_t)(t0 + t) * m.rows + r] = a;
        }
    }
}

// one-token products of one type (TY; -1: any) at tpr threads a row
template <int TY>
static void mv1_launch(cuda_dev *d, int tpr, int blocks, const mv_desc &k, const uint8_t *xb) {
    if (tpr == 8) launch(k_mv<8, 1, TY>, blocks, MV_THREADS, 0, d->stream, k, xb);
    else if (tpr == 32) launch(k_mv<32, 1, TY>, blocks, MV_THREADS, 0, d->stream, k, xb);
    else launch(k_mv<128, 1, TY>, blocks, MV_THREADS, 0, d->stream, k, xb);
}

extern "C" HIDDEN int cuda_matmul_multi(cuda_dev *d, int n, const cuda_mat *m, int cols, const void *xq, int T, int glu_act, int ggml) {
    if (n < 1 || n > MV_MAX || T <= 0 || (glu_act >= 0 && (n != 2 || m[0].rows != m[1].rows))) return -1;
    size_t xr = cuda_act_row_size(m[0].type, cols);
    // threads a row: enough warps for the memory (q2_K / q3_K: 8, their path's)
    int total = 0, tpr, kq23 = 0;
    for (int i = 0; i < (glu_act >= 0 ? 1 : n); i++) total += m[i].rows;
    for (int i = 0; i < n; i++) kq23 |= m[i].type == DT_Q2_K || m[i].type == DT_Q3_K;
    tpr = kq23 || total >= 2048 || cols < 2048 ? 8 : total >= 1024 || cols < 4096 ? 32 : 128;
    // float rows of 4 KB and more: a warp a row (Gemma 3 27B's BF16 decode 50.8 -> 67.2 tokens/s, 4B's
    // 331 -> 336; 1B's rows of 2.3 KB are faster at 8: 791 against 763)
    int flt = m[0].type == DT_F32 || m[0].type == DT_F16 || m[0].type == DT_BF16;
    if (flt && tpr == 8 && row_bytes(m[0].type, cols) >= 4096) tpr = 32;
    // (mv_narrow: while the blocks are fewer than two an SM and each thread would still have a unit of 32
    // weights, 4x the threads a row; from the shape alone, so a batch's rows keep the one-token order)
    while (d->mv_narrow && !kq23 && tpr < 128 && (total + MV_THREADS / tpr - 1) / (MV_THREADS / tpr) < 2 * d->sms &&
           4 * tpr <= cols / 32)
        tpr *= 4;
    // few rows, each long (1B's down: 1152 rows of 5.7 KB): a block a row, its whole row read in one round
    // (4.98 against 8.39 us at 32 threads a row, from memory, bench_cuda_ops cold)
    if (!kq23 && total < 2048 && row_bytes(m[0].type, cols) >= 4096) tpr = 128;
    const int rpb = MV_THREADS / tpr;
    mv_desc k;
    memset(&k, 0, sizeof k);
    int blocks = 0;
    size_t pf_bytes = 0;
    for (int i = 0; i < n; i++) {
        if (!xr || cuda_act_row_size(m[i].type, cols) != xr || m[i].rows <= 0) return -1;
        int nb = is_float(m[i].type) ? cols : cols / (is_k(m[i].type) ? QK_K : QK);
        k.m[i] = (mv_mat){(const uint8_t *)m[i].w, m[i].y, m[i].rows, m[i].type, blocks, nb, row_bytes(m[i].type, cols) * (size_t)m[i].rows};
        pf_bytes += k.m[i].bytes;
        if (glu_act < 0 || i == 0) blocks += (m[i].rows + rpb - 1) / rpb;
    }
    if (glu_act >= 0) k.m[1].blk0 = blocks; // (the gate's threads take the up rows)
    k.n = n, k.cols = cols, k.T = T, k.glu = glu_act >= 0, k.act = glu_act, k.ggml = ggml, k.xrow = xr;
    k.pf = d->prefetch && pf_bytes <= PF_MAX; // (not the output head: more than L2 holds, read in waves)
    const uint8_t *xb = (const uint8_t *)xq;
    d->n_mv++;
    int mmq = (d->mmq_on == 1 && T > 1 && T <= d->mmq_max) || d->mmq_on == 2, same1 = 1;
    for (int i = 0; i < n && mmq; i++) mmq = mmq_type(m[i].type), same1 &= m[i].type == m[0].type;
    if (mmq && (same1 || glu_act < 0)) { // (not deterministic: k_mmq, a launch a weight type)
        int rc = 0;
        if (same1) rc = mmq_run(d, m[0].type, k, xb);
        else
            for (int i = 0; i < n && !rc; i++) {
                mv_desc ki = k;
                ki.n = 1, ki.m[0] = k.m[i];
                rc = mmq_run(d, m[i].type, ki, xb);
            }
        cudaError_t e = cudaGetLastError();
        return rc ? -1 : e == cudaSuccess ? 0 : set_status("matmul", e);
    }
    int mmv = T > 1 && d->mmv, same = 1;
    for (int i = 0; i < n && mmv; i++) mmv = mmv_type(m[i].type), same &= m[i].type == m[0].type;
    if (glu_act >= 0 && !same) mmv = 0;
    if (mmv) { // the same values on the tensor cores: blocks of 16 rows x 16, 32 or 64 tokens, a launch a weight type
        if (same) {
            int nblk = 0;
            for (int i = 0; i < n; i++) {
                k.m[i].blk0 = nblk;
                if (glu_act < 0 || i == 0) nblk += (m[i].rows + MMV_ROWS - 1) / MMV_ROWS;
            }
            if (glu_act >= 0) k.m[1].blk0 = nblk;
            mmv_run(d, m[0].type, tpr, T, nblk, k, xb);
        } else
            for (int i = 0; i < n; i++) {
                mv_desc ki = k;
                ki.n = 1, ki.m[0] = k.m[i], ki.m[0].blk0 = 0;
                mmv_run(d, m[i].type, tpr, T, (m[i].rows + MMV_ROWS - 1) / MMV_ROWS, ki, xb);
            }
    } else if (T == 1 || !MV_GROUP) {
        int ty = d->mv_spec ? k.m[0].type : -1;
        for (int i = 1; i < n; i++) ty = k.m[i].type == ty ? ty : -1;
        switch (ty) {
        case DT_Q4_K: mv1_launch<DT_Q4_K>(d, tpr, blocks, k, xb); break;
        case DT_Q5_K: mv1_launch<DT_Q5_K>(d, tpr, blocks, k, xb); break;
        case DT_Q6_K: mv1_launch<DT_Q6_K>(d, tpr, blocks, k, xb); break;
        case DT_Q8_0: mv1_launch<DT_Q8_0>(d, tpr, blocks, k, xb); break;
        case DT_Q4_0: mv1_launch<DT_Q4_0>(d, tpr, blocks, k, xb); break;
        case DT_Q5_0: mv1_launch<DT_Q5_0>(d, tpr, blocks, k, xb); break;
        // (f16 / bf16 stay with the kernel of any type: their own kernels decoded 13% slower on the H200, 4B shape,
        // 284.5 against 328.2 t/s; the quantized types' 3-5% faster)
        default: mv1_launch<-1>(d, tpr, blocks, k, xb);
        }
    } else {
        if (tpr == 8) launch(k_mv<8, MV_GROUP>, blocks, MV_THREADS, 0, d->stream, k, xb);
        else if (tpr == 32) launch(k_mv<32, MV_GROUP>, blocks, MV_THREADS, 0, d->stream, k, xb);
        else launch(k_mv<128, MV_GROUP>, blocks, MV_THREADS, 0, d->stream, k, xb);
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : set_status("matmul", e);
}

extern "C" HIDDEN int cuda_matmul(cuda_dev *d, int wtype, const void *w, int rows, int cols, const void *xq, int T, float *y) {
    cuda_mat m = {wtype, w, rows, y};
    return cuda_matmul_multi(d, 1, &m, cols, xq, T, -1, 0);
}

// W stored [n_in, n_out] (GPT-2's Conv1D), float types: y[t][j] = sum_i x[t][i] W[i][j]
template <int T>
static __global__ void k_matmul_trans(const uint8_t *w, int n_in, int n_out, const float *x, int ntok, float *y) {
    PDL_ENTRY();
    int j = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (j >= n_out || t >= ntok) return;
    float acc = 0.0f;
    for (int i = 0; i < n_in; i++) acc = fmaf(x[(size_t)t * n_in + i], elt<T>::get(w + ((size_t)i * n_out + j) * elt<T>::B), acc);
    y[(size_t)t * n_out + j] = acc;
}
extern "C" HIDDEN int cuda_matmul_trans(cuda_dev *d, int wtype, const void *w, int n_in, int n_out, const float *x, int T, float *y) {
    dim3 g(grid_for((size_t)n_out, 128), T);
    const uint8_t *wb = (const uint8_t *)w;
    switch (wtype) {
    case DT_F32: launch(k_matmul_trans<DT_F32>, g, 128, 0, d->stream, wb, n_in, n_out, x, T, y); break;
    case DT_F16: launch(k_matmul_trans<DT_F16>, g, 128, 0, d->stream, wb, n_in, n_out, x, T, y); break;
    case DT_BF16: launch(k_matmul_trans<DT_BF16>, g, 128, 0, d->stream, wb, n_in, n_out, x, T, y); break;
    default: return -1;
    }
    return launched("matmul (transposed)");
}
