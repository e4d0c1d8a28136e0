// Batched decode products on the tensor cores: k_mmv computes what k_mv
// computes for each token, bit for bit, with the integer sums of the units
// made by int8 mma.sync (m16n8k16: 16 rows x 8 tokens x 16 weights, exact)
// instead of __dp4a. The float part is k_mv's, operation for operation: slot
// s of a row's TPR slots takes units s, s + TPR, ... into four sums (UNITS'
// pattern), a slot's value is (a0 + a1) + (a2 + a3), and the slots are
// added in row_sum's tree. A block is 8 warps over 16 rows x 16 tokens; warp
// w takes slots w, w + 8, ... of a group of up to 32 slots at a time, whose
// values meet in shared memory.
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

// unit u of rows w0 (g) and w1 (g + 8) against the warp's 8 NN tokens, added into a
// (ob: the byte offsets of the tokens' rows in xq that the lane loads, plus
// 4 tig; oc: those of the tokens whose sums it holds)
template <int TY, int NN>
static __device__ __forceinline__ void mmv_unit(const wrow &w0, const wrow &w1, const uint8_t *xq, const uint32_t (&ob)[NN],
                                                const uint32_t (&oc)[NN][2], int u, int tig, float (&a)[NN][4]) {
    typedef mq<TY> Q;
    int A0[Q::G], A1[Q::G];
    Q::a(w0, u, tig, A0), Q::a(w1, u, tig, A1);
    const typename Q::W W0 = Q::w(w0, u), W1 = Q::w(w1, u);
#pragma unroll
    for (int n = 0; n < NN; n++) {
        int acc[Q::G][4];
#pragma unroll
        for (int j = 0; j < Q::G; j++) {
            acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
            mma_s8(acc[j], A0[j], A1[j], *(const int *)(xq + ob[n] + Q::xo(u, j)));
        }
        const typename Q::X X0 = Q::x(xq + oc[n][0], w0.nb, u), X1 = Q::x(xq + oc[n][1], w0.nb, u);
#pragma unroll
        for (int c = 0; c < 4; c++) {
            int sg[Q::G];
#pragma unroll
            for (int j = 0; j < Q::G; j++) sg[j] = acc[j][c];
            a[n][c] = __fadd_rn(a[n][c], Q::val(c >> 1 ? W1 : W0, c & 1 ? X1 : X0, sg));
        }
    }
}

// One slot's value (k_mv's sum of its units in order) for the warp's 16 rows
// x 8 NN tokens: a[n][c] = row g + 8 (c >> 1), token 8 n + 2 tig + (c & 1).
template <int TY, int NN>
static __device__ void mmv_slot(const mv_mat &mt, int r0, const uint8_t *xq, size_t xr, int t0, int T, int s, int st, float (&a)[NN][4]) {
    const int lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
    const int rows = mt.rows;
    const wrow w0 = {mt.w, rows, min(r0 + g, rows - 1), mt.nb}, w1 = {mt.w, rows, min(r0 + g + 8, rows - 1), mt.nb};
    // the tokens this lane loads (b: token g of each tile) and scales (c: 2 tig, 2 tig + 1), as offsets (fewer registers)
    uint32_t ob[NN], oc[NN][2];
#pragma unroll
    for (int n = 0; n < NN; n++) {
        ob[n] = (uint32_t)(xr * min(t0 + 8 * n + g, T - 1)) + 4 * tig;
#pragma unroll
        for (int k = 0; k < 2; k++) oc[n][k] = (uint32_t)(xr * min(t0 + 8 * n + 2 * tig + k, T - 1));
    }
#pragma unroll
    for (int n = 0; n < NN; n++)
#pragma unroll
        for (int c = 0; c < 4; c++) a[n][c] = 0.0f;
    const int nu = mt.nb * mq<TY>::UPB;
    for (int u = s; u < nu; u += st) mmv_unit<TY, NN>(w0, w1, xq, ob, oc, u, tig, a);
}

template <int NN>
static __device__ __forceinline__ void mmv_add(float (&a)[NN][4], const float (&b)[NN][4]) {
#pragma unroll
    for (int n = 0; n < NN; n++)
#pragma unroll
        for (int c = 0; c < 4; c++) a[n][c] = __fadd_rn(a[n][c], b[n][c]);
}

// Blocks of 16 rows x 8 NN tokens. The slots' values are added in row_sum's
// order: at TPR <= 32 the lanes' xor tree from slot bit 0 up, at TPR 128 (a
// group of 32 slots a warp, the groups' sums then in order) from bit 4 down.
// Warp w takes the slots whose first levels it can add itself (TPR 8: slot
// w; 32: 4w .. 4w + 3; 128: w + 8j of each group), and the warps' values
// meet in shared memory for the levels over w. One weight type a kernel (the
// fewer registers, the more warps an SM keeps).
template <int TY, int TPR, int NN>
static __global__ void __launch_bounds__(MMV_WARPS * 32) k_mmv(const mv_desc d, const uint8_t *xq) {
    mv_prefetch(d);
    PDL_ENTRY();
    enum { TOK = 8 * NN, OUTS = MMV_ROWS * TOK, PER = OUTS / (MMV_WARPS * 32), UP = TPR <= 32 };
    __shared__ float red[MMV_WARPS * OUTS];
    int mi = 0;
    while (mi + 1 < d.n && (int)blockIdx.x >= d.m[mi + 1].blk0) mi++;
    const int r0 = ((int)blockIdx.x - d.m[mi].blk0) * MMV_ROWS, t0 = (int)blockIdx.y * TOK;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
    float res[2][PER];
    for (int k = 0; k <= d.glu; k++) {
        const mv_mat mt = d.m[k ? 1 : mi];
        float total[PER];
        for (int g0 = 0; g0 < TPR; g0 += 32) {
            float r[NN][4];
            if (TPR == 8) {
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, w, TPR, r);
            } else { // four slots: (v0 + v1) + (v2 + v3) of slots 4w + j (32), (v0 + v2) + (v1 + v3) of w + 8j (128)
                float p[NN][4], q[NN][4];
                const int s0 = UP ? 4 * w : g0 + w, ds = UP ? 1 : 8;
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0, TPR, p);
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0 + (UP ? 1 : 2) * ds, TPR, q);
                mmv_add<NN>(p, q);
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0 + (UP ? 2 : 1) * ds, TPR, q);
                mmv_slot<TY, NN>(mt, r0, xq, d.xrow, t0, d.T, s0 + 3 * ds, TPR, r);
                mmv_add<NN>(q, r);
                mmv_add<NN>(p, q);
#pragma unroll
                for (int n = 0; n < NN; n++)
#pragma unroll
                    for (int c = 0; c < 4; c++) r[n][c] = p[n][c];
            }
#pragma unroll
            for (int n = 0; n < NN; n++)
#pragma unroll
                for (int c = 0; c < 4; c++) red[w * OUTS + (g + 8 * (c >> 1)) * TOK + 8 * n + 2 * tig + (c & 1)] = r[n][c];
            __syncthreads();
#pragma unroll
            for (int i = 0; i < PER; i++) { // the levels over w: steps 1, 2, 4 (up) or 4, 2, 1
                const int o = (int)threadIdx.x + i * MMV_WARPS * 32;
                float v[MMV_WARPS];
#pragma unroll
                for (int j = 0; j < MMV_WARPS; j++) v[j] = red[j * OUTS + o];
                if (UP) {
#pragma unroll
                    for (int step = 1; step < MMV_WARPS; step <<= 1)
#pragma unroll
                        for (int j = 0; j < MMV_WARPS; j += 2 * step) v[j] = __fadd_rn(v[j], v[j + step]);
                } else {
#pragma unroll
                    for (int step = MMV_WARPS / 2; step >= 1; step >>= 1)
#pragma unroll
                        for (int j = 0; j < step; j++) v[j] = __fadd_rn(v[j], v[j + step]);
                }
                total[i] = g0 == 0 ? v[0] : __fadd_rn(total[i], v[0]); // (TPR 128: the warps' sums in order, as row_sum)
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < PER; i++) res[k][i] = total[i];
    }
    const mv_mat m = d.m[mi];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int o = (int)threadIdx.x + i * MMV_WARPS * 32, r = r0 + o / TOK, t = t0 + o % TOK;
        float a = res[0][i];
        if (d.glu) a = act1(a, d.act, d.ggml) * res[1][i];
        if (r < m.rows && t < d.T) m.y[(size_t)t * m.rows + r] = a;
    }
}

// k_mmv of type TY for tpr threads a row, 8 nn tokens a block
template <int TY>
static void mmv_launch(cuda_dev *dv, int tpr, int nn, dim3 grid, const mv_desc &k, const uint8_t *xb) {
    dim3 blk(MMV_WARPS * 32);
    if (tpr == 8) {
        if (nn == 8) launch(k_mmv<TY, 8, 8>, grid, blk, 0, dv->stream, k, xb);
        else if (nn == 4) launch(k_mmv<TY, 8, 4>, grid, blk, 0, dv->stream, k, xb);
        else launch(k_mmv<TY, 8, 2>, grid, blk, 0, dv->stream, k, xb);
    } else if (tpr == 32) {
        if (nn == 4) launch(k_mmv<TY, 32, 4>, grid, blk, 0, dv->stream, k, xb);
        else launch(k_mmv<TY, 32, 2>, grid, blk, 0, dv->stream, k, xb);
    } else {
        if (nn == 4) launch(k_mmv<TY, 128, 4>, grid, blk, 0, dv->stream, k, xb);
        else launch(k_mmv<TY, 128, 2>, grid, blk, 0, dv->stream, k, xb);
    }
}

HIDDEN void mmv_run(cuda_dev *dv, int ty, int tpr, int T, int rows_blocks, const mv_desc &k, const uint8_t *xb) {
    int nn = T > 32 && tpr == 8 ? 8 : T > 16 ? 4 : 2; // (tokens a block: 8 nn; at 32 and 128 a warp holds three sets)
    dim3 grid((unsigned)rows_blocks, (unsigned)((T + 8 * nn - 1) / (8 * nn)));
    switch (ty) {
    case DT_Q8_0: mmv_launch<DT_Q8_0>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q4_0: mmv_launch<DT_Q4_0>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q5_0: mmv_launch<DT_Q5_0>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q4_K: mmv_launch<DT_Q4_K>(dv, tpr, nn, grid, k, xb); break;
    case DT_Q5_K: mmv_launch<DT_Q5_K>(dv, tpr, nn, grid, k, xb); break;
    default: mmv_launch<DT_Q6_K>(dv, tpr, nn, grid, k, xb); break;
    }
}

HIDDEN int mmv_type(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }
