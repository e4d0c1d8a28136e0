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
#include "compute/cuda/mq.cuh"

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
