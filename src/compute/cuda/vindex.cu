// The vindex walk FFN (cuda.h's cuda_walk): a warp a feature for its
// activation, then the down vectors summed over chunks of 64 features (a
// thread an output element, the features in order), then the chunks in
// order: walk.c's order of additions.
// The lm_head index's probe and gather (cuda_lm_probe, cuda_lm_gather) read
// rows as the walk does.
#include "compute/cuda/common.cuh"
#include "compute/cuda/units.cuh"

enum { WALK_CHUNK = 64 };

// row . x of a raw row (f32, f16, or q8_0 blocks against x's q8_0 row: the CPU kernel's integer sums), a warp
static __device__ float walk_dot(int type, const uint8_t *row, const float *x, const uint8_t *xq, int H, int lane) {
    float acc = 0.0f;
    if (type == DT_F32) {
        for (int i = lane; i < H; i += 32) acc = fmaf(ld_f(row + 4 * (size_t)i), x[i], acc);
    } else if (type == DT_F16) {
        for (int i = lane; i < H; i += 32) acc = fmaf(ld_h(row + 2 * (size_t)i), x[i], acc);
    } else if (type == DT_BF16) {
        for (int i = lane; i < H; i += 32) acc = fmaf(elt<DT_BF16>::get(row + 2 * (size_t)i), x[i], acc);
    } else { // q8_0: a block a lane; x's row: nb x 32 quants, then nb f16 scales
        const int nb = H / QK;
        for (int b = lane; b < nb; b += 32) {
            const uint8_t *w = row + (size_t)b * qtype<DT_Q8_0>::B;
            const int8_t *q = (const int8_t *)(xq + 32 * b);
            int s = 0;
            for (int j = 0; j < 32; j++) s += (int8_t)w[2 + j] * q[j];
            acc += v_q32(ld_h(w), ld_h2(xq + 32 * nb + 2 * b), s);
        }
    }
    return warp_sum(acc);
}

static __device__ __forceinline__ float walk_elt(int type, const uint8_t *row, int h) {
    if (type == DT_F32) return ld_f(row + 4 * (size_t)h);
    if (type == DT_F16) return ld_h(row + 2 * (size_t)h);
    if (type == DT_BF16) return elt<DT_BF16>::get(row + 2 * (size_t)h);
    const uint8_t *w = row + (size_t)(h / QK) * qtype<DT_Q8_0>::B;
    return ld_h(w) * (float)(int8_t)w[2 + h % QK];
}

static __global__ void k_walk_act(int type, const uint8_t *ffn, size_t rb, int H, const int *idx, int k, const float *x, const uint8_t *xq,
                                  const float *bias, int gated, int act, float *a) {
    PDL_ENTRY();
    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (i >= k) return;
    int f = idx ? idx[i] : i;
    const uint8_t *r = ffn + rb * 3 * (size_t)f;
    float g = walk_dot(type, r, x, xq, H, lane) + (bias ? bias[f] : 0.0f);
    g = act1(g, act, 0);
    if (gated) g *= walk_dot(type, r + rb, x, xq, H, lane);
    if (lane == 0) a[i] = g;
}

static __global__ void k_walk_down(int type, const uint8_t *ffn, size_t rb, int H, const int *idx, int k, const float *a, float *part) {
    PDL_ENTRY();
    int h = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (h >= H) return;
    float acc = 0.0f;
    int e = (c + 1) * WALK_CHUNK < k ? (c + 1) * WALK_CHUNK : k;
    for (int i = c * WALK_CHUNK; i < e; i++) {
        int f = idx ? idx[i] : i;
        acc = fmaf(a[i], walk_elt(type, ffn + rb * (3 * (size_t)f + 2), h), acc);
    }
    part[(size_t)c * H + h] = acc;
}

static __global__ void k_walk_sum(const float *part, int nc, int H, const float *db, float *out) {
    PDL_ENTRY();
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    float s = part[h];
    for (int c = 1; c < nc; c++) s += part[(size_t)c * H + h];
    out[h] = db ? s + db[h] : s;
}

extern "C" HIDDEN int cuda_walk_ok(int type) { return type == DT_F32 || type == DT_F16 || type == DT_BF16 || type == DT_Q8_0; }

extern "C" HIDDEN int cuda_walk(cuda_dev *d, int type, const void *ffn, int H, const int *idx, int k, const float *x, const void *xq,
                                const float *bias, const float *down_bias, int gated, int act, float *a, float *part, float *out) {
    if (!cuda_walk_ok(type) || k < 1 || H < 1 || (type == DT_Q8_0 && (H % QK || !xq))) return -1;
    size_t rb = row_bytes(type, H);
    const uint8_t *w = (const uint8_t *)ffn;
    launch(k_walk_act, (k + 7) / 8, 256, 0, d->stream, type, w, rb, H, idx, k, x, (const uint8_t *)xq, bias, gated, act, a);
    int nc = (k + WALK_CHUNK - 1) / WALK_CHUNK;
    launch(k_walk_down, dim3((unsigned)((H + 127) / 128), (unsigned)nc), 128, 0, d->stream, type, w, rb, H, idx, k, a, part);
    launch(k_walk_sum, (H + 127) / 128, 128, 0, d->stream, part, nc, H, down_bias, out);
    return launched("walk");
}

// The lm_head index's probed clusters (cuda.h's cuda_lm_probe): a block a
// cluster, its place among the candidates the sum of the clusters before
// it, a warp a row.
static __global__ void k_lm_probe(int type, const uint8_t *rows, size_t rs, int H, const unsigned *off, const int *order,
                                  const int *best, int P, const float *x, const uint8_t *xq, float *cs, int *cid, int *dn) {
    PDL_ENTRY();
    __shared__ int part[32];
    const int b = blockIdx.x, lane = threadIdx.x % 32, wp = threadIdx.x / 32, nw = blockDim.x / 32;
    int base = 0;
    for (int j = threadIdx.x; j < b; j += blockDim.x) base += (int)(off[best[j] + 1] - off[best[j]]);
    for (int o = 16; o; o >>= 1) base += __shfl_xor_sync(0xffffffffu, base, o);
    if (lane == 0) part[wp] = base;
    __syncthreads();
    base = 0;
    for (int w = 0; w < nw; w++) base += part[w];
    const int c = best[b], c0 = (int)off[c], len = (int)off[c + 1] - c0;
    if (b == P - 1 && threadIdx.x == 0) *dn = base + len;
    for (int i = wp; i < len; i += nw) {
        float v = walk_dot(type, rows + rs * (size_t)(c0 + i), x, xq, H, lane);
        if (lane == 0) cs[base + i] = v, cid[base + i] = order[c0 + i];
    }
}
extern "C" HIDDEN int cuda_lm_probe(cuda_dev *d, int type, const void *rows, int H, const unsigned *off, const int *order, const int *best,
                                    int P, const float *x, const void *xq, float *cs, int *cid, int *dn) {
    if (!cuda_walk_ok(type) || P < 1 || H < 1 || (type == DT_Q8_0 && (H % QK || !xq))) return -1;
    launch(k_lm_probe, P, 256, 0, d->stream, type, (const uint8_t *)rows, row_bytes(type, H), H, off, order, best, P, x,
           (const uint8_t *)xq, cs, cid, dn);
    return launched("lm_head index");
}
// out_s[i], out_id[i] = s[pos[i]], id[pos[i]] (id NULL: pos[i] itself; pos[i] < 0: -inf, -1)
static __global__ void k_lm_gather(const int *pos, int k, const float *s, const int *id, float *out_s, int *out_id) {
    PDL_ENTRY();
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        int p = pos[i];
        out_s[i] = p < 0 ? -INFINITY : s[p], out_id[i] = p < 0 ? -1 : id ? id[p] : p;
    }
}
extern "C" HIDDEN int cuda_lm_gather(cuda_dev *d, const int *pos, int k, const float *s, const int *id, float *out_s, int *out_id) {
    if (k < 1) return -1;
    launch(k_lm_gather, 1, 256, 0, d->stream, pos, k, s, id, out_s, out_id);
    return launched("gather");
}
