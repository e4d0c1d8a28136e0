// The quantized types' units on the tensor cores: what k_mmv (mmv.cu) and
// k_mmq (mmq.cu) share -- each type's int8 weights of a unit, where its
// activations start, its scales and value (k_mv's), and the int8 mma.
#ifndef INFER_COMPUTE_CUDA_MQ_CUH
#define INFER_COMPUTE_CUDA_MQ_CUH

#include "compute/cuda/common.cuh"
#include "compute/cuda/units.cuh"

// mq<T>: a unit's G groups of 16 weights: aw = the packed int8 weights
// 4 tig .. 4 tig + 3 of group j (row m.r), xo = where group j's 16
// activations start in the token's quants, val = the unit's value (k_mv's).
template <int T> struct mq;
template <> struct mq<DT_Q8_0> {
    enum { UPB = 2, G = 1 };
    struct W { float d; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        aw[0] = *(const int *)(m.w + 32 * ((size_t)m.r * m.nb + (u >> 1)) + 16 * (u & 1) + 4 * tig);
    }
    static __device__ int xo(int u, int j) { return 16 * u; }
    static __device__ W w(const wrow &m, int u) { return {ld_h2(m.w + (size_t)32 * m.rows * m.nb + 2 * ((size_t)m.r * m.nb + (u >> 1)))}; }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {ld_h2(row + 32 * nb + 2 * (u >> 1))}; }
    static __device__ float val(const W &w, const X &x, const int *sg) { return v_q32(w.d, x.d, sg[0]); }
};
template <> struct mq<DT_Q4_0> {
    enum { UPB = 1, G = 2 };
    struct W { float d; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int q = *(const int *)(m.w + 16 * ((size_t)m.r * m.nb + u) + 4 * tig);
        aw[0] = vsub4(q & 0x0f0f0f0f, 0x08080808), aw[1] = vsub4((q >> 4) & 0x0f0f0f0f, 0x08080808);
    }
    static __device__ int xo(int u, int j) { return 32 * u + 16 * j; }
    static __device__ W w(const wrow &m, int u) { return {ld_h2(m.w + (size_t)16 * m.rows * m.nb + 2 * ((size_t)m.r * m.nb + u))}; }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {ld_h2(row + 32 * nb + 2 * u)}; }
    static __device__ float val(const W &w, const X &x, const int *sg) { return v_q32(w.d, x.d, sg[0] + sg[1]); }
};
template <> struct mq<DT_Q5_0> {
    enum { UPB = 1, G = 2 };
    struct W { float d; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        size_t blk = (size_t)m.r * m.nb + u, nall = (size_t)m.rows * m.nb;
        int q = *(const int *)(m.w + 16 * blk + 4 * tig);
        uint32_t qh = *(const uint32_t *)(m.w + 16 * nall + 4 * blk);
        aw[0] = vsub4((q & 0x0f0f0f0f) | spread4(qh >> (4 * tig)), 0x10101010);
        aw[1] = vsub4(((q >> 4) & 0x0f0f0f0f) | spread4(qh >> (16 + 4 * tig)), 0x10101010);
    }
    static __device__ int xo(int u, int j) { return 32 * u + 16 * j; }
    static __device__ W w(const wrow &m, int u) { return {ld_h2(m.w + 20 * (size_t)m.rows * m.nb + 2 * ((size_t)m.r * m.nb + u))}; }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {ld_h2(row + 32 * nb + 2 * u)}; }
    static __device__ float val(const W &w, const X &x, const int *sg) { return v_q32(w.d, x.d, sg[0] + sg[1]); }
};
// q4_K / q5_K: unit (b, p, h) as u_q4_K's; groups: sub-block 2p's 16 weights, then 2p + 1's
struct k4_w { float d, dmin; int sc0, m0, sc1, m1; };
struct k4_x { float d; int b0, b1; };
static __device__ __forceinline__ k4_w k4_scales(const uint8_t *blk, int u) {
    k4_w w;
    w.d = ld_h2(blk), w.dmin = ld_h2(blk + 2);
    scales_k4(blk, 2 * ((u & 7) >> 1), &w.sc0, &w.m0, &w.sc1, &w.m1);
    return w;
}
static __device__ __forceinline__ k4_x k4_act(const uint8_t *row, int nb, int u) {
    int b = u >> 3, p = (u & 7) >> 1, h = u & 1;
    const int16_t *bs = (const int16_t *)(row + 260 * nb) + 16 * b;
    return {((const float *)(row + 256 * nb))[b], bs[4 * p + h], bs[4 * p + 2 + h]};
}
static __device__ __forceinline__ float k4_val(const k4_w &w, const k4_x &x, const int *sg) {
    return v_k4(x.d, w.d, w.dmin, w.sc0 * sg[0] + w.sc1 * sg[1], w.m0 * x.b0 + w.m1 * x.b1);
}
// what q4_K and q5_K units share: blocks of BB bytes with ggml's header (d, dmin, 12 scale bytes)
template <int BB> struct mq_k4 {
    enum { UPB = 8, G = 2 };
    typedef k4_w W;
    typedef k4_x X;
    static __device__ int xo(int u, int j) { return 256 * (u >> 3) + 64 * ((u & 7) >> 1) + 16 * (u & 1) + 32 * j; }
    static __device__ W w(const wrow &m, int u) { return k4_scales(m.w + ((size_t)m.r * m.nb + (u >> 3)) * BB, u); }
    static __device__ X x(const uint8_t *row, int nb, int u) { return k4_act(row, nb, u); }
    static __device__ float val(const W &w, const X &x, const int *sg) { return k4_val(w, x, sg); }
};
template <> struct mq<DT_Q4_K> : mq_k4<qtype<DT_Q4_K>::B> {
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int b = u >> 3, i = u & 7;
        int q = *(const int *)(m.w + ((size_t)m.r * m.nb + b) * qtype<DT_Q4_K>::B + 16 + 32 * (i >> 1) + 16 * (i & 1) + 4 * tig);
        aw[0] = q & 0x0f0f0f0f, aw[1] = (q >> 4) & 0x0f0f0f0f;
    }
};
template <> struct mq<DT_Q5_K> : mq_k4<qtype<DT_Q5_K>::B> {
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int b = u >> 3, i = u & 7, p = i >> 1, h = i & 1;
        const uint8_t *w = m.w + ((size_t)m.r * m.nb + b) * qtype<DT_Q5_K>::B;
        int q = *(const int *)(w + 48 + 32 * p + 16 * h + 4 * tig), qh = *(const int *)(w + 16 + 16 * h + 4 * tig);
        aw[0] = (q & 0x0f0f0f0f) | (((qh >> (2 * p)) & 0x01010101) << 4);
        aw[1] = ((q >> 4) & 0x0f0f0f0f) | (((qh >> (2 * p + 1)) & 0x01010101) << 4);
    }
};
// q6_K: unit (b, i) as u_q6_K's; groups: rows A, B of ql (low nibbles with qh bits 0-1, 2-3), then their high nibbles (4-5, 6-7)
template <> struct mq<DT_Q6_K> {
    enum { UPB = 4, G = 4 };
    struct W { float d; int s0, s1, s2, s3; };
    struct X { float d; };
    static __device__ void a(const wrow &m, int u, int tig, int *aw) {
        int b = u >> 2, i = u & 3, h = i >> 1, l0 = 16 * (i & 1);
        size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        const uint8_t *ql = m.w + 128 * blk + 64 * h + l0 + 4 * tig;
        int A = *(const int *)ql, B = *(const int *)(ql + 32), C = *(const int *)(m.w + 128 * nall + 64 * blk + 32 * h + l0 + 4 * tig);
        aw[0] = vsub4((A & 0x0f0f0f0f) | ((C & 0x03030303) << 4), 0x20202020);
        aw[1] = vsub4((B & 0x0f0f0f0f) | (((C >> 2) & 0x03030303) << 4), 0x20202020);
        aw[2] = vsub4(((A >> 4) & 0x0f0f0f0f) | (((C >> 4) & 0x03030303) << 4), 0x20202020);
        aw[3] = vsub4(((B >> 4) & 0x0f0f0f0f) | (((C >> 6) & 0x03030303) << 4), 0x20202020);
    }
    static __device__ int xo(int u, int j) { return 256 * (u >> 2) + 128 * ((u & 3) >> 1) + 16 * (u & 1) + 32 * j; }
    static __device__ W w(const wrow &m, int u) {
        int b = u >> 2, i = u & 3;
        size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        const int8_t *sc = (const int8_t *)(m.w + 192 * nall + 16 * blk) + 8 * (i >> 1) + (i & 1);
        return {ld_h2(m.w + 208 * nall + 2 * blk), sc[0], sc[2], sc[4], sc[6]};
    }
    static __device__ X x(const uint8_t *row, int nb, int u) { return {((const float *)(row + 256 * nb))[u >> 2]}; }
    static __device__ float val(const W &w, const X &x, const int *sg) {
        return v_q6K(x.d, w.d, w.s0 * sg[0] + w.s1 * sg[1] + w.s2 * sg[2] + w.s3 * sg[3]);
    }
};

// c (16 x 8, s32) += a (16 x 16, s8, rows g and g + 8) b (16 x 8, s8, token g), g = lane / 4
static __device__ __forceinline__ void mma_s8(int (&c)[4], int a0, int a1, int b0) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

#endif
