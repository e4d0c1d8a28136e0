// Batched decode products of the default pass on the tensor cores: k_mmq.
// Where k_mmv (mmv.cu) computes each (row, token) exactly as k_mv would
// alone -- a float value for every unit, k_mv's order of sums -- k_mmq
// keeps the integer sums of a scale block (a q4_K / q5_K / q6_K super-block,
// a 32-element block) as integers: each group's int8 mma sum times the
// group's integer scale, added exactly, then one float step a block and
// (row, token): d_x (d SI - dmin SM) for q4_K / q5_K (SM: the mins against
// the activations' sums of 32), d_x d SI for q6_K, d_w d_x SI for the
// 32-element types. The same quantized activations as k_mv's (quant.cuh's
// rows), so the fused norm and attention quantizers feed it.
//
// A block is 4 warps of 16 rows each (64 rows) x 8 NT tokens. The tokens'
// quants of a chunk of 512 columns go to shared memory (a row of 528 bytes:
// lane (g, tig)'s 4 bytes of token g fall in bank 4 g + tig), with their
// scales; each warp then reads its rows' weights from memory once (mq<TY>'s
// loads: the k_mmv layout) and multiplies them into every token of the
// chunk. The columns split in slices (blockIdx.z) where the blocks are few;
// the slices' sums (and a gated pair's activation) are added in order by
// k_mq_sum. A result depends on the tokens of its launch only through that
// split (not bit for bit as alone: the deterministic pass keeps k_mmv).
#include "compute/cuda/common.cuh"
#include "compute/cuda/units.cuh"
#include "compute/cuda/mq.cuh"

enum { MQ_WARPS = 4, MQ_ROWS = 16 * MQ_WARPS, MQ_SL = 512 };

// mz<TY>: a scale block's columns (BC), whether the activations are q8_K
// (KQ) and the mins take their sums of 32 (MIN), a row's scales of block b
// (S), group j of unit i's integer scale (sc; ONE: all 1), the float step.
// LD: a token's row of quants in shared memory (lane (g, tig)'s loads of 4
// bytes at 4 tig: 528 bytes, bank 4 g + tig; of 8 at 8 tig (PAIR): 544, each
// half warp's 16 lanes on banks of their own). PAIR: q4_K / q5_K's own loads
// (below).
template <int TY> struct mz32 {
    enum { BC = 32, KQ = 0, MIN = 0, ONE = 1, LD = MQ_SL + 16, PAIR = 0 };
    struct S { float d; };
    static __device__ S s(const wrow &m, int b) { return {mq<TY>::w(m, b * mq<TY>::UPB).d}; }
    static __device__ int sc(const S &, int, int) { return 1; }
    static __device__ float step(const S &s, float acc, int si, float dx, const int *) { return fmaf(__fmul_rn(dx, s.d), (float)si, acc); }
    static __device__ uint32_t mlo(const S &) { return 0; } // (no mins: MM is q4_K / q5_K's)
    static __device__ uint32_t mhi(const S &) { return 0; }
    static __device__ float step_m(const S &s, float acc, int si, float dx, int) { return step(s, acc, si, dx, NULL); }
};
template <int TY> struct mz;
template <> struct mz<DT_Q8_0> : mz32<DT_Q8_0> {};
template <> struct mz<DT_Q4_0> : mz32<DT_Q4_0> {};
template <> struct mz<DT_Q5_0> : mz32<DT_Q5_0> {};
// q4_K / q5_K: the 8 sub-blocks' 6-bit scales and mins as bytes of two words each
template <int BB> struct mzk4 {
    enum { BC = 256, KQ = 1, MIN = 1, ONE = 0, LD = MQ_SL + 32, PAIR = 1 };
    struct S { float d, dmin; uint32_t sl, sh, ml, mh; };
    static __device__ S s(const wrow &m, int b) {
        const uint4 h = *(const uint4 *)(m.w + ((size_t)m.r * m.nb + b) * BB); // (the header in one load: d, dmin, 12 scale bytes)
        const uint32_t s0 = h.y, s1 = h.z, s2 = h.w;
        const __half2 dm = *(const __half2 *)&h.x;
        return {__low2float(dm), __high2float(dm), s0 & 0x3f3f3f3fu, (s2 & 0x0f0f0f0fu) | ((s0 >> 2) & 0x30303030u), s1 & 0x3f3f3f3fu,
                ((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 2) & 0x30303030u)};
    }
    static __device__ int byte(uint32_t lo, uint32_t hi, int k) { return (int)(((k < 4 ? lo : hi) >> (8 * (k & 3))) & 0xff); }
    static __device__ uint32_t mlo(const S &s) { return s.ml; } // (mins 0-3 as bytes)
    static __device__ uint32_t mhi(const S &s) { return s.mh; }
    // unit i = (pair p, half h): group j is sub-block 2 p + j
    static __device__ int sc(const S &s, int i, int j) { return byte(s.sl, s.sh, 2 * (i >> 1) + j); }
    static __device__ float step(const S &s, float acc, int si, float dx, const int *bs) {
        int sm = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) sm += byte(s.ml, s.mh, k) * bs[k];
        return step_m(s, acc, si, dx, sm);
    }
    // sm: the mins against the activations' sums, sum_j m_j bs32_j (made by step or by two mma)
    static __device__ float step_m(const S &s, float acc, int si, float dx, int sm) {
        return fmaf(dx, fmaf(s.d, (float)si, -s.dmin * (float)sm), acc);
    }
};
template <> struct mz<DT_Q4_K> : mzk4<qtype<DT_Q4_K>::B> {};
template <> struct mz<DT_Q5_K> : mzk4<qtype<DT_Q5_K>::B> {};
// q6_K: the 16 sub-blocks' int8 scales in four words (unit i's group j: sub-block 8 (i >> 1) + (i & 1) + 2 j)
template <> struct mz<DT_Q6_K> {
    enum { BC = 256, KQ = 1, MIN = 0, ONE = 0, LD = MQ_SL + 16, PAIR = 0 };
    struct S { float d; uint32_t w[4]; };
    static __device__ S s(const wrow &m, int b) {
        const size_t blk = (size_t)m.r * m.nb + b, nall = (size_t)m.rows * m.nb;
        const uint4 v = *(const uint4 *)(m.w + 192 * nall + 16 * blk);
        return {ld_h2(m.w + 208 * nall + 2 * blk), {v.x, v.y, v.z, v.w}};
    }
    static __device__ int sc(const S &s, int i, int j) {
        const int k = 8 * (i >> 1) + (i & 1) + 2 * j;
        return (int)(int8_t)(uint8_t)(s.w[k >> 2] >> (8 * (k & 3)));
    }
    static __device__ float step(const S &s, float acc, int si, float dx, const int *) { return fmaf(__fmul_rn(dx, s.d), (float)si, acc); }
    static __device__ uint32_t mlo(const S &) { return 0; }
    static __device__ uint32_t mhi(const S &) { return 0; }
    static __device__ float step_m(const S &s, float acc, int si, float dx, int) { return step(s, acc, si, dx, NULL); }
};

struct mq_desc {
    mv_desc k;             // the products (blk0: their first blocks of MQ_ROWS rows)
    size_t poff[MV_MAX];   // where each one's slices start in the partial sums
};

// Blocks (token tile x, row block y, column slice z); part NULL: the sums go to y.
// MM (q4_K / q5_K; INFER_CUDA_MMQ_MIN=1): the mins' sums of a super-block as two int8 mma a token tile -- the
// 8 mins of rows g, g + 8 (k 0-7; k 8-15 zero) against the tokens' sums of 32 split as 64 h + l (h, l int8) --
// instead of 8 multiply-adds a (row, token): the same integers.
template <int TY, int NT, int MM = 0>
static __global__ void __launch_bounds__(MQ_WARPS * 32) k_mmq(const mq_desc q, const uint8_t *xq, float *part, int ks) {
    PDL_ENTRY();
    typedef mq<TY> Q;
    typedef mz<TY> Z;
    enum { TOK = 8 * NT, NBC = MQ_SL / Z::BC };
    __shared__ __align__(16) int8_t sq[TOK][Z::LD];
    __shared__ float sd[TOK][NBC];
    __shared__ int sb[Z::MIN && !MM ? TOK : 1][Z::MIN && !MM ? 8 * NBC : 1];
    __shared__ uint32_t sbm[MM ? TOK : 1][MM ? 4 * NBC : 1]; // (MM: h of sums 0-3, 4-7, then l of them, as bytes)
    const mv_desc &d = q.k;
    int mi = 0;
    while (mi + 1 < d.n && (int)blockIdx.y >= d.m[mi + 1].blk0) mi++;
    const mv_mat mt = d.m[mi];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
    const int r0 = ((int)blockIdx.y - mt.blk0) * MQ_ROWS + 16 * w, t0 = (int)blockIdx.x * TOK, T = d.T, cols = d.cols;
    const wrow w0 = {mt.w, mt.rows, min(r0 + g, mt.rows - 1), mt.nb}, w1 = {mt.w, mt.rows, min(r0 + g + 8, mt.rows - 1), mt.nb};
    const int chunks = (cols + MQ_SL - 1) / MQ_SL, per = (chunks + ks - 1) / ks;
    const int k_lo = (int)blockIdx.z * per * MQ_SL, k_hi = min(cols, k_lo + per * MQ_SL);
    const int nbx = cols / Z::BC; // (the activation rows' blocks)
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    for (int c0 = k_lo; c0 < k_hi; c0 += MQ_SL) {
        const int nc = min(k_hi, c0 + MQ_SL) - c0, n16 = nc / 16, nbb = nc / Z::BC;
        __syncthreads(); // (the chunk before is read)
        for (int i = threadIdx.x; i < TOK * n16; i += MQ_WARPS * 32) {
            const int tt = i / n16, c = i % n16;
            const uint8_t *row = xq + d.xrow * min(t0 + tt, T - 1);
            *(int4 *)&sq[tt][16 * c] = *(const int4 *)(row + c0 + 16 * c);
        }
        for (int i = threadIdx.x; i < TOK * nbb; i += MQ_WARPS * 32) {
            const int tt = i / nbb, bb = i % nbb, b = c0 / Z::BC + bb;
            const uint8_t *row = xq + d.xrow * min(t0 + tt, T - 1);
            if (Z::KQ) {
                sd[tt][bb] = ((const float *)(row + 256 * (size_t)nbx))[b];
                if (Z::MIN && !MM) {
                    const int16_t *bs = (const int16_t *)(row + 260 * (size_t)nbx) + 16 * b;
#pragma unroll
                    for (int s = 0; s < 8; s++) sb[Z::MIN && !MM ? tt : 0][Z::MIN && !MM ? 8 * bb + s : 0] = bs[2 * s] + bs[2 * s + 1];
                } else if (MM) {
                    const int16_t *bs = (const int16_t *)(row + 260 * (size_t)nbx) + 16 * b;
                    uint32_t h[2] = {0, 0}, l[2] = {0, 0};
#pragma unroll
                    for (int s = 0; s < 8; s++) { // (a sum of 32 int8: -4096 .. 4064, so h in -64 .. 63, l in 0 .. 63)
                        const int v = bs[2 * s] + bs[2 * s + 1];
                        h[s >> 2] |= (uint32_t)(uint8_t)(int8_t)(v >> 6) << (8 * (s & 3)), l[s >> 2] |= (uint32_t)(v & 63) << (8 * (s & 3));
                    }
                    uint32_t *o = &sbm[MM ? tt : 0][MM ? 4 * bb : 0];
                    o[0] = h[0], o[1] = h[1], o[2] = l[0], o[3] = l[1];
                }
            } else
                sd[tt][bb] = ld_h2(row + 32 * (size_t)nbx + 2 * b);
        }
        __syncthreads();
        for (int bb = 0; bb < nbb; bb++) {
            const int b = c0 / Z::BC + bb;
            const typename Z::S S0 = Z::s(w0, b), S1 = Z::s(w1, b);
            int si[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) si[n][0] = si[n][1] = si[n][2] = si[n][3] = 0;
            if (Z::PAIR) { // q4_K / q5_K: a pair of sub-blocks (32 bytes a row) in one 8-byte load a lane and row
                // (the mma's sum over its 16 k runs over any order of them: lane tig's k are bytes 8 tig .. 8 tig + 3
                // of the pair and, in a second mma, 8 tig + 4 .. 8 tig + 7; its activations the same)
                const int qo = TY == DT_Q5_K ? 48 : 16;
                const uint8_t *b0 = w0.w + ((size_t)w0.r * w0.nb + b) * qtype<TY>::B, *b1 = w1.w + ((size_t)w1.r * w1.nb + b) * qtype<TY>::B;
                uint2 h0 = make_uint2(0, 0), h1 = h0;
                if (TY == DT_Q5_K) h0 = *(const uint2 *)(b0 + 16 + 8 * tig), h1 = *(const uint2 *)(b1 + 16 + 8 * tig);
                const int xo = b * 256 - c0 + 8 * tig;
#pragma unroll
                for (int p = 0; p < 4; p++) {
                    const uint2 a0 = *(const uint2 *)(b0 + qo + 32 * p + 8 * tig), a1 = *(const uint2 *)(b1 + qo + 32 * p + 8 * tig);
                    const uint32_t m4 = 0x0f0f0f0fu;
                    int L0[2] = {(int)(a0.x & m4), (int)(a0.y & m4)}, L1[2] = {(int)(a1.x & m4), (int)(a1.y & m4)};
                    int H0[2] = {(int)((a0.x >> 4) & m4), (int)((a0.y >> 4) & m4)}, H1[2] = {(int)((a1.x >> 4) & m4), (int)((a1.y >> 4) & m4)};
                    if (TY == DT_Q5_K) {
                        L0[0] |= (int)(((h0.x >> (2 * p)) & 0x01010101u) << 4), L0[1] |= (int)(((h0.y >> (2 * p)) & 0x01010101u) << 4);
                        L1[0] |= (int)(((h1.x >> (2 * p)) & 0x01010101u) << 4), L1[1] |= (int)(((h1.y >> (2 * p)) & 0x01010101u) << 4);
                        H0[0] |= (int)(((h0.x >> (2 * p + 1)) & 0x01010101u) << 4), H0[1] |= (int)(((h0.y >> (2 * p + 1)) & 0x01010101u) << 4);
                        H1[0] |= (int)(((h1.x >> (2 * p + 1)) & 0x01010101u) << 4), H1[1] |= (int)(((h1.y >> (2 * p + 1)) & 0x01010101u) << 4);
                    }
                    const int sl0 = Z::sc(S0, 2 * p, 0), sh0 = Z::sc(S0, 2 * p, 1), sl1 = Z::sc(S1, 2 * p, 0), sh1 = Z::sc(S1, 2 * p, 1);
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        const uint2 bl = *(const uint2 *)&sq[8 * n + g][xo + 64 * p], bh = *(const uint2 *)&sq[8 * n + g][xo + 64 * p + 32];
                        int c[4] = {0, 0, 0, 0}, e[4] = {0, 0, 0, 0};
                        mma_s8(c, L0[0], L1[0], (int)bl.x), mma_s8(c, L0[1], L1[1], (int)bl.y);
                        mma_s8(e, H0[0], H1[0], (int)bh.x), mma_s8(e, H0[1], H1[1], (int)bh.y);
                        si[n][0] += sl0 * c[0] + sh0 * e[0], si[n][1] += sl0 * c[1] + sh0 * e[1];
                        si[n][2] += sl1 * c[2] + sh1 * e[2], si[n][3] += sl1 * c[3] + sh1 * e[3];
                    }
                }
            } else
#pragma unroll
            for (int i = 0; i < Q::UPB; i++) {
                const int u = b * Q::UPB + i;
                int A0[Q::G], A1[Q::G];
                Q::a(w0, u, tig, A0), Q::a(w1, u, tig, A1);
#pragma unroll
                for (int j = 0; j < Q::G; j++) {
                    const int x0 = Q::xo(u, j) - c0 + 4 * tig, s0 = Z::sc(S0, i, j), s1 = Z::sc(S1, i, j);
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        const int bx = *(const int *)&sq[8 * n + g][x0];
                        if (Z::ONE) {
                            mma_s8(si[n], A0[j], A1[j], bx);
                        } else {
                            int c[4] = {0, 0, 0, 0};
                            mma_s8(c, A0[j], A1[j], bx);
                            si[n][0] += s0 * c[0], si[n][1] += s0 * c[1], si[n][2] += s1 * c[2], si[n][3] += s1 * c[3];
                        }
                    }
                }
            }
            // c: row g + 8 (c >> 1), token 8 n + 2 tig + (c & 1)
            if (MM) {
                const int m0 = tig == 0 ? (int)Z::mlo(S0) : tig == 1 ? (int)Z::mhi(S0) : 0, m1 = tig == 0 ? (int)Z::mlo(S1) : tig == 1 ? (int)Z::mhi(S1) : 0;
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    const uint32_t *w = &sbm[MM ? 8 * n + g : 0][MM ? 4 * bb : 0];
                    int ch[4] = {0, 0, 0, 0}, cl[4] = {0, 0, 0, 0};
                    mma_s8(ch, m0, m1, tig < 2 ? (int)w[tig] : 0), mma_s8(cl, m0, m1, tig < 2 ? (int)w[2 + tig] : 0);
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int tt = 8 * n + 2 * tig + (c & 1);
                        acc[n][c] = Z::step_m(c >> 1 ? S1 : S0, acc[n][c], si[n][c], sd[tt][bb], 64 * ch[c] + cl[c]);
                    }
                }
            } else
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int tt = 8 * n + 2 * tig + (c & 1);
                    acc[n][c] = Z::step(c >> 1 ? S1 : S0, acc[n][c], si[n][c], sd[tt][bb], Z::MIN && !MM ? &sb[Z::MIN && !MM ? tt : 0][Z::MIN && !MM ? 8 * bb : 0] : NULL);
                }
        }
    }
    float *out = part ? part + q.poff[mi] + (size_t)blockIdx.z * T * mt.rows : mt.y;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int r = r0 + g + 8 * (c >> 1), t = t0 + 8 * n + 2 * tig + (c & 1);
            if (r < mt.rows && t < T) out[(size_t)t * mt.rows + r] = acc[n][c];
        }
}

// y of product blockIdx.y (a gated pair: act(gate) up into the gate's y) = its slices' sums in order
static __global__ void k_mq_sum(const mq_desc q, const float *part, int ks) {
    PDL_ENTRY();
    const mv_desc &d = q.k;
    const int i = (int)blockIdx.y;
    const size_t n = (size_t)d.T * d.m[i].rows, e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const float *p = part + q.poff[i];
    float a = p[e];
    for (int z = 1; z < ks; z++) a += p[(size_t)z * n + e];
    if (d.glu) {
        const float *p1 = part + q.poff[1];
        float u = p1[e];
        for (int z = 1; z < ks; z++) u += p1[(size_t)z * n + e];
        a = act1(a, d.act, d.ggml) * u;
    }
    d.m[i].y[e] = a;
}

template <int TY, int MM>
static void mmq_launch(cuda_dev *dv, int nt, dim3 grid, const mq_desc &q, const uint8_t *xb, float *part, int ks) {
    dim3 blk(MQ_WARPS * 32);
    if (nt == 1) launch(k_mmq<TY, 1, MM>, grid, blk, 0, dv->stream, q, xb, part, ks);
    else if (nt == 2) launch(k_mmq<TY, 2, MM>, grid, blk, 0, dv->stream, q, xb, part, ks);
    else if (nt == 4) launch(k_mmq<TY, 4, MM>, grid, blk, 0, dv->stream, q, xb, part, ks);
    else launch(k_mmq<TY, 8, MM>, grid, blk, 0, dv->stream, q, xb, part, ks);
}

HIDDEN int mmq_type(int t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }
extern "C" HIDDEN int cuda_mmq_type(int t) { return mmq_type(t); }

HIDDEN int mmq_run(cuda_dev *dv, int ty, const mv_desc &k, const uint8_t *xb) {
    mq_desc q;
    memset(&q, 0, sizeof q);
    q.k = k;
    int nblk = 0;
    for (int i = 0; i < k.n; i++) q.k.m[i].blk0 = nblk, nblk += (k.m[i].rows + MQ_ROWS - 1) / MQ_ROWS;
    int nt = k.T <= 8 ? 1 : k.T <= 16 ? 2 : k.T <= 32 ? 4 : 8;
    nt = nt > dv->mmq_nt ? dv->mmq_nt : nt; // (INFER_CUDA_MMQ_NT: fewer tokens a block)
    const int tiles = (k.T + 8 * nt - 1) / (8 * nt);
    // the columns split while the blocks are fewer than four an SM's worth (deterministic: the row blocks
    // alone count, so that a row's sums do not depend on the tokens beside it)
    const int chunks = (k.cols + MQ_SL - 1) / MQ_SL;
    const long each = dv->mmq_on == 2 ? 1 : tiles;
    int ks = 1;
    while (ks * 2 <= chunks && (long)nblk * each * ks < 4L * dv->sms) ks *= 2;
    dv->mmq_ks = ks, dv->n_mmq++;
    float *part = NULL;
    if (ks > 1 || k.glu) {
        size_t need = 0;
        for (int i = 0; i < k.n; i++) q.poff[i] = need, need += (size_t)ks * k.T * k.m[i].rows;
        if (grow(dv, (void **)&dv->part, &dv->part_cap, sizeof(float) * need)) return -1;
        part = dv->part;
    }
    dim3 grid((unsigned)tiles, (unsigned)nblk, (unsigned)ks);
    switch (ty) {
    case DT_Q8_0: mmq_launch<DT_Q8_0, 0>(dv, nt, grid, q, xb, part, ks); break;
    case DT_Q4_0: mmq_launch<DT_Q4_0, 0>(dv, nt, grid, q, xb, part, ks); break;
    case DT_Q5_0: mmq_launch<DT_Q5_0, 0>(dv, nt, grid, q, xb, part, ks); break;
    case DT_Q4_K:
        if (dv->mmq_min) mmq_launch<DT_Q4_K, 1>(dv, nt, grid, q, xb, part, ks);
        else mmq_launch<DT_Q4_K, 0>(dv, nt, grid, q, xb, part, ks);
        break;
    case DT_Q5_K:
        if (dv->mmq_min) mmq_launch<DT_Q5_K, 1>(dv, nt, grid, q, xb, part, ks);
        else mmq_launch<DT_Q5_K, 0>(dv, nt, grid, q, xb, part, ks);
        break;
    default: mmq_launch<DT_Q6_K, 0>(dv, nt, grid, q, xb, part, ks); break;
    }
    if (part) {
        int most = 0;
        for (int i = 0; i < k.n; i++) most = k.m[i].rows > most ? k.m[i].rows : most;
        launch(k_mq_sum, dim3(grid_for((size_t)k.T * most, 256), k.glu ? 1 : k.n), 256, 0, dv->stream, q, (const float *)part, ks);
    }
    return 0;
}
