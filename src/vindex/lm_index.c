// The lm_head index (lm_index.bin): the output head's rows clustered by
// k-means, so that the tokens a hidden state scores highest are found by
// scoring the centroids, then only the rows of the best clusters.
//
// File (little-endian): "INFERLMI", u32 version (1), V, H, C, the rows'
// dtype, the centroids' dtype (32 bytes in all); C centroid rows of H in
// theirs (q8_0 where H is a multiple of 32, else f16: a lookup reads them all,
// so they are small); zeros to a multiple of 4 bytes; C + 1 u32
// offsets (cluster c holds order[off[c] .. off[c+1])); V i32 token ids in
// cluster order (a permutation of 0..V-1); zeros to a multiple of 64 bytes;
// then the head's V rows in cluster order, in their stored type (the bytes of
// the model's own rows: a lookup scores clusters as contiguous memory).
//
// Building: C centroids seeded from rows spread over the vocabulary, LLOYD
// rounds of Lloyd's k-means on a sample of rows (every V/S-th), then every
// row assigned to its nearest centroid (the largest x.mu - |mu|^2 / 2). The
// products are the engine's f32 matmul (the same floats for any thread
// count) and the sums are made in row order, so the file is the same for any
// thread count.
#include "vindex/lm_index.h"
#include "vindex/walk.h"
#include "compute/cpu/ops.h"
#include "compute/cpu/vec.h"
#include "tensor/dtype.h"
#include "tensor/vecdot.h"
#include "tensor/pack.h"
#include "base/error.h"
#include "base/pool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { LLOYD = 6, SAMPLE = 65536, RB = 1024, HDR = 32 };

static int cent_type_for(int H) { return H % 32 == 0 ? DT_Q8_0 : DT_F16; }
// bytes of the centroids, padded to 4
static uint64_t cent_bytes(int type, uint64_t H, uint64_t C) { return (dtype_row_size(type, (int64_t)H) * C + 3) & ~(uint64_t)3; }
// bytes before the rows: header, centroids, offsets, order, padding to 64
static uint64_t rows_at(int ct, uint64_t V, uint64_t H, uint64_t C) { return (HDR + cent_bytes(ct, H, C) + 4 * (C + 1) + 4 * V + 63) & ~(uint64_t)63; }

static const char MAGIC[8] = {'I', 'N', 'F', 'E', 'R', 'L', 'M', 'I'};

int lm_index_auto_clusters(int V) {
    int c = V / 64;
    return c < 1 ? 1 : c > 65536 ? 65536 : c;
}

// assign[r - r0] = the nearest centroid of rows r0.. (n of them, decoded into x)
static void nearest(cpu_exec *ex, const tensor *cent, const float *half_sq, const float *x, int n, int H, int C, float *y,
                    int *assign) {
    weight w = {.w = cent, .unpacked = 1};
    backend hb = walk_host_backend(ex);
    hb.ops->matmul(&hb, y, x, &w, NULL, n, H, C);
    for (int t = 0; t < n; t++) {
        const float *yt = y + (size_t)t * C;
        int best = 0;
        float bv = yt[0] - half_sq[0];
        for (int c = 1; c < C; c++) {
            float v = yt[c] - half_sq[c];
            if (v > bv) bv = v, best = c;
        }
        assign[t] = best;
    }
}

static void half_norms(const float *cent, int C, int H, float *half_sq) {
    for (int c = 0; c < C; c++) half_sq[c] = (float)(vec_sumsq(cent + (size_t)c * H, H) / 2);
}

infer_status lm_index_build(cpu_exec *ex, void (*row)(const void *src, int64_t r, float *out), const void *src, const tensor *rows, int V,
                            int H, int C, const char *path, uint64_t *bytes) {
    if (C < 1 || C > V) return fail(INFER_ERR_ARG, "lm_index: %d clusters for %d rows", C, V);
    int S = V < SAMPLE ? V : SAMPLE;
    float *cent = malloc(sizeof(float) * (size_t)C * H), *half_sq = malloc(sizeof(float) * (size_t)C);
    float *xs = malloc(sizeof(float) * (size_t)S * H), *y = malloc(sizeof(float) * (size_t)RB * C);
    double *sum = malloc(sizeof(double) * (size_t)C * H);
    int *cnt = malloc(sizeof(int) * (size_t)C), *assign = malloc(sizeof(int) * (size_t)V);
    uint32_t *off = malloc(sizeof(uint32_t) * ((size_t)C + 1));
    int32_t *order = malloc(sizeof(int32_t) * (size_t)V);
    infer_status st = INFER_OK;
    if (!cent || !half_sq || !xs || !y || !sum || !cnt || !assign || !off || !order) {
        st = fail(INFER_ERR_NOMEM, "lm_index: out of memory for %d clusters of %d rows", C, V);
        goto out;
    }
    tensor cten = {"lm_index", DT_F32, "f32", 2, {H, C}, cent, sizeof(float) * (size_t)C * H, NULL};
    // the sample (every V/S-th row) and the seeds (every S/C-th of the sample)
    for (int s = 0; s < S; s++) row(src, (int64_t)s * V / S, xs + (size_t)s * H);
    for (int c = 0; c < C; c++) memcpy(cent + (size_t)c * H, xs + (size_t)((int64_t)c * S / C) * H, sizeof(float) * (size_t)H);
    for (int it = 0; it < LLOYD; it++) {
        half_norms(cent, C, H, half_sq);
        for (int s0 = 0; s0 < S; s0 += RB) {
            int n = S - s0 < RB ? S - s0 : RB;
            nearest(ex, &cten, half_sq, xs + (size_t)s0 * H, n, H, C, y, assign + s0);
        }
        memset(sum, 0, sizeof(double) * (size_t)C * H);
        memset(cnt, 0, sizeof(int) * (size_t)C);
        for (int s = 0; s < S; s++) {
            double *d = sum + (size_t)assign[s] * H;
            const float *x = xs + (size_t)s * H;
            for (int i = 0; i < H; i++) d[i] += x[i];
            cnt[assign[s]]++;
        }
        for (int c = 0; c < C; c++) // (an empty cluster keeps its centroid)
            for (int i = 0; cnt[c] && i < H; i++) cent[(size_t)c * H + i] = (float)(sum[(size_t)c * H + i] / cnt[c]);
    }
    // every row to its nearest centroid, then the rows in cluster order
    half_norms(cent, C, H, half_sq);
    for (int r0 = 0; r0 < V; r0 += RB) {
        int n = V - r0 < RB ? V - r0 : RB;
        float *xr = xs; // (the sample is no longer needed: the rows in blocks)
        for (int t = 0; t < n; t++) row(src, r0 + t, xr + (size_t)t * H);
        nearest(ex, &cten, half_sq, xr, n, H, C, y, assign + r0);
    }
    if (ex->oom) { st = fail(INFER_ERR_NOMEM, "lm_index: the kernels' scratch"); goto out; }
    memset(off, 0, sizeof(uint32_t) * ((size_t)C + 1));
    for (int r = 0; r < V; r++) off[assign[r] + 1]++;
    for (int c = 0; c < C; c++) off[c + 1] += off[c];
    memcpy(cnt, off, sizeof(int) * (size_t)C); // (the next free slot of each cluster)
    for (int r = 0; r < V; r++) order[cnt[assign[r]]++] = r;
    FILE *f = fopen(path, "wb");
    if (!f) { st = fail(INFER_ERR_IO, "%s: cannot create: %s", path, strerror(errno)); goto out; }
    // the rows: the stored bytes of `rows` where given, else f32 from row()
    int type = rows ? rows->type : DT_F32, ct = cent_type_for(H);
    size_t rs = dtype_row_size(type, H), crs = dtype_row_size(ct, H);
    uint32_t hdr[6] = {1, (uint32_t)V, (uint32_t)H, (uint32_t)C, (uint32_t)type, (uint32_t)ct};
    uint64_t cb = cent_bytes(ct, (uint64_t)H, (uint64_t)C), at = rows_at(ct, (uint64_t)V, (uint64_t)H, (uint64_t)C);
    uint64_t head = HDR + cb + 4 * ((uint64_t)C + 1) + 4 * (uint64_t)V;
    static const unsigned char zeros[64];
    unsigned char *cq = malloc(cb ? cb : 1);
    int ok = cq != NULL;
    if (cq) {
        memset(cq, 0, cb);
        for (int c = 0; c < C; c++) dtype_get(ct)->from_float(cent + (size_t)c * H, cq + crs * (size_t)c, H);
    }
    ok = ok && fwrite(MAGIC, 1, 8, f) == 8 && fwrite(hdr, 4, 6, f) == 6 && fwrite(cq, 1, (size_t)cb, f) == (size_t)cb &&
         fwrite(off, 4, (size_t)C + 1, f) == (size_t)C + 1 && fwrite(order, 4, (size_t)V, f) == (size_t)V &&
         fwrite(zeros, 1, (size_t)(at - head), f) == (size_t)(at - head);
    free(cq);
    for (int j = 0; ok && j < V; j++) {
        if (rows) ok = fwrite((const char *)rows->data + rs * (size_t)order[j], 1, rs, f) == rs;
        else row(src, order[j], xs), ok = fwrite(xs, sizeof(float), (size_t)H, f) == (size_t)H;
    }
    ok &= fclose(f) == 0;
    if (!ok) st = fail(INFER_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    *bytes = at + rs * (size_t)V;
out:
    free(cent), free(half_sq), free(xs), free(y), free(sum), free(cnt), free(assign), free(off), free(order);
    return st;
}

infer_status lm_index_parse(const void *data, size_t size, int V, int H, const char *path, lm_index *out) {
    const unsigned char *p = data;
    if (size < HDR || memcmp(p, MAGIC, 8)) return fail(INFER_ERR_FORMAT, "%s: not an lm_head index (its magic)", path);
    uint32_t hdr[6];
    memcpy(hdr, p + 8, 24);
    if (hdr[0] != 1) return fail(INFER_ERR_FORMAT, "%s: version %u (this build reads 1)", path, hdr[0]);
    const dtype_traits *tr = hdr[4] < 64 ? dtype_get((int)hdr[4]) : NULL;
    if (!tr || !tr->dot || H % tr->blck) return fail(INFER_ERR_FORMAT, "%s: rows of type %u, which this build does not read at %d columns", path, hdr[4], H);
    if (hdr[5] != (uint32_t)cent_type_for(H)) return fail(INFER_ERR_FORMAT, "%s: centroids of type %u (this build writes %d)", path, hdr[5], cent_type_for(H));
    int ct = (int)hdr[5];
    if (hdr[1] != (uint32_t)V || hdr[2] != (uint32_t)H)
        return fail(INFER_ERR_FORMAT, "%s: made for %u x %u rows, the head is %d x %d", path, hdr[1], hdr[2], V, H);
    uint64_t C = hdr[3];
    if (C < 1 || C > (uint64_t)V) return fail(INFER_ERR_FORMAT, "%s: %llu clusters for %d rows", path, (unsigned long long)C, V);
    uint64_t rs = dtype_row_size((int)hdr[4], H), want = rows_at(ct, (uint64_t)V, (uint64_t)H, C) + rs * (uint64_t)V;
    if (size != want)
        return fail(INFER_ERR_FORMAT, "%s: %zu bytes, %llu clusters of %d x %d need %llu", path, size, (unsigned long long)C, V, H,
                    (unsigned long long)want);
    lm_index x = {.C = (int)C, .cent = p + HDR, .cent_type = ct, .type = (int)hdr[4], .rs = (size_t)rs,
                  .rows = p + rows_at(ct, (uint64_t)V, (uint64_t)H, C)};
    x.off = (const uint32_t *)(p + HDR + cent_bytes(ct, (uint64_t)H, C));
    x.order = (const int32_t *)(x.off + C + 1);
    if (x.off[0] != 0 || x.off[C] != (uint32_t)V) return fail(INFER_ERR_FORMAT, "%s: the clusters do not cover the %d rows", path, V);
    for (uint64_t c = 0; c < C; c++)
        if (x.off[c + 1] < x.off[c]) return fail(INFER_ERR_FORMAT, "%s: cluster %llu ends before it starts", path, (unsigned long long)c);
    unsigned char *seen = calloc((size_t)V, 1);
    if (!seen) return fail(INFER_ERR_NOMEM, "out of memory");
    for (int r = 0; r < V; r++) {
        int32_t t = x.order[r];
        if (t < 0 || t >= V || seen[t]) {
            free(seen);
            return fail(INFER_ERR_FORMAT, "%s: the token order is not a permutation of 0-%d (at %d)", path, V - 1, r);
        }
        seen[t] = 1;
    }
    free(seen);
    *out = x;
    return INFER_OK;
}

infer_status lm_index_pack(lm_index *x, int H) {
    if (x->sketch || pack_kind_for(DT_Q4_0, H) != PACK_Q4_0) return INFER_OK;
    uint32_t *gs = malloc(sizeof(uint32_t) * ((size_t)x->C + 1));
    uint32_t big = 0; // (the largest cluster's rows)
    if (!gs) return fail(INFER_ERR_NOMEM, "out of memory");
    gs[0] = 0;
    for (int c = 0; c < x->C; c++) {
        uint32_t n = x->off[c + 1] - x->off[c];
        gs[c + 1] = gs[c] + (n + 7) / 8, big = n > big ? n : big;
    }
    uint32_t ng = gs[x->C];
    size_t gb = pack_group_bytes(PACK_Q4_0, H), r4 = dtype_row_size(DT_Q4_0, H);
    // (in 2 MiB pages where the kernel gives them: a lookup reads a few hundred clusters spread over the whole sketch)
    size_t bytes = (gb * ng + (1u << 21) - 1) & ~(((size_t)1 << 21) - 1);
    unsigned char *p = aligned_alloc((size_t)1 << 21, bytes), *q = malloc(r4 * big);
    if (p) madvise(p, bytes, MADV_HUGEPAGE);
    float *f = malloc(sizeof(float) * (size_t)H);
    if (!p || !q || !f) {
        free(gs), free(p), free(q), free(f);
        return fail(INFER_ERR_NOMEM, "out of memory for the lm_head index's sketch (%u groups of %zu bytes)", ng, gb);
    }
    const dtype_traits *tr = dtype_get(x->type), *t4 = dtype_get(DT_Q4_0);
    for (int c = 0; c < x->C; c++) { // (a cluster's rows as q4_0, then packed)
        uint32_t n = x->off[c + 1] - x->off[c];
        for (uint32_t r = 0; r < n; r++) {
            tr->to_float((const char *)x->rows + x->rs * (size_t)(x->off[c] + r), f, H);
            t4->from_float(f, q + r4 * r, H);
        }
        pack_rows(PACK_Q4_0, q, n, H, p + gb * gs[c]);
    }
    free(q), free(f);
    x->sketch = p, x->gstart = gs;
    return INFER_OK;
}

void lm_index_unpack(lm_index *x) {
    free(x->sketch), free(x->gstart);
    x->sketch = NULL, x->gstart = NULL;
}

typedef struct {
    const lm_index *x;
    const int32_t *best; // the probed clusters
    int probes, k, H;
    const vecdot_kernel *kern;
    const void *xa;      // the hidden state as the kernel takes it
    const float *hidden;
    int64_t total;       // rows of the probed clusters
    float *sc;           // per thread: k scores, ids, count
    int32_t *id;
    int *n;
    const pack_kernel *pk; // the packed rows' kernel (x->packed), and the hidden state as it takes it
    const void *xp;
} probe_job;

// The same over the sketch: groups [total * ith / nth, ...) of the probed
// clusters in turn, 8 rows a call of the kernel (a group's padding rows left
// out), each list's ids the rows' places in cluster order.
static void probe_packed_task(void *arg, int ith, int nth) {
    probe_job *j = arg;
    const lm_index *x = j->x;
    int64_t g0 = j->total * ith / nth, g1 = j->total * (ith + 1) / nth, at = 0;
    float *sc = j->sc + (size_t)ith * j->k, s8[8];
    int32_t *id = j->id + (size_t)ith * j->k;
    int *n = j->n + ith;
    size_t gb = pack_group_bytes(PACK_Q4_0, j->H), xr = pack_act_row_size(PACK_Q4_0, j->H);
    for (int b = 0; b < j->probes && at < g1; b++) {
        int c = j->best[b];
        int64_t len = x->gstart[c + 1] - x->gstart[c], rows = x->off[c + 1] - x->off[c];
        int64_t a = g0 > at ? g0 - at : 0, e = g1 - at < len ? g1 - at : len; // (this thread's part of the cluster)
        for (int64_t g = a; g < e; g++) {
            j->pk->tile((const unsigned char *)x->sketch + gb * (x->gstart[c] + (size_t)g), j->xp, xr, 1, j->H, s8, 8);
            for (int i = 0; i < 8 && 8 * g + i < rows; i++) topk_insert(sc, id, n, j->k, s8[i], (int32_t)(x->off[c] + 8 * g + i));
        }
        at += len;
    }
}

// rows [total * ith / nth, total * (ith + 1) / nth) of the probed clusters in turn
static void probe_task(void *arg, int ith, int nth) {
    probe_job *j = arg;
    const lm_index *x = j->x;
    int64_t r0 = j->total * ith / nth, r1 = j->total * (ith + 1) / nth, at = 0;
    float *sc = j->sc + (size_t)ith * j->k;
    int32_t *id = j->id + (size_t)ith * j->k;
    int *n = j->n + ith;
    const dtype_traits *tr = dtype_get(x->type);
    for (int b = 0; b < j->probes && at < r1; b++) {
        int64_t c0 = x->off[j->best[b]], c1 = x->off[j->best[b] + 1], len = c1 - c0;
        int64_t a = r0 > at ? r0 - at : 0, e = r1 - at < len ? r1 - at : len; // (this thread's part of the cluster)
        int64_t q = c0 + a;
        if (j->kern && j->kern->dotr) // (4 rows a call: the token's activations loaded once for them)
            for (; q + 4 <= c0 + e; q += 4) {
                float s4[4];
                j->kern->dotr((const char *)x->rows + x->rs * (size_t)q, x->rs, j->xa, j->H, s4);
                for (int i = 0; i < 4; i++) topk_insert(sc, id, n, j->k, s4[i], x->order[q + i]);
            }
        for (; q < c0 + e; q++) {
            const char *r = (const char *)x->rows + x->rs * (size_t)q;
            float s = j->kern ? j->kern->dot(r, j->xa, j->H) : tr->dot(r, j->hidden, j->H);
            topk_insert(sc, id, n, j->k, s, x->order[q]);
        }
        at += len;
    }
}

typedef struct { const lm_index *x; const vecdot_kernel *kern; const void *xa; const float *hidden; int H; float *cs; } cent_job;

static void cent_range(void *arg, int c0, int c1) {
    const cent_job *j = arg;
    size_t crs = dtype_row_size(j->x->cent_type, j->H);
    const dtype_traits *tr = dtype_get(j->x->cent_type);
    for (int c = c0; c < c1; c++) {
        const char *r = (const char *)j->x->cent + crs * (size_t)c;
        j->cs[c] = j->kern ? j->kern->dot(r, j->xa, j->H) : tr->dot(r, j->hidden, j->H);
    }
}

// The n candidates (places q[i] in cluster order) scored from the rows: by
// the packed kernel of their type where the CPU has one (the dense head's
// floats), else the row kernel; into the k best (sc, id: token ids).
static infer_status rescore(const lm_index *x, const int32_t *q, int n, const float *hidden, const void *xq, const vecdot_kernel *kern,
                            int H, int k, float *sc, int32_t *id, int *cnt) {
    int kind = pack_kind_for(x->type, H);
    if (kind != PACK_NONE && kind != PACK_BF16) {
        const pack_kernel *pk = pack_kernel_get(kind);
        size_t gb = pack_group_bytes(kind, H);
        unsigned char *rows = malloc(x->rs * 8), *g = malloc(gb), *xp = malloc(pack_act_row_size(kind, H));
        if (!rows || !g || !xp) return free(rows), free(g), free(xp), fail(INFER_ERR_NOMEM, "out of memory");
        pk->quant(hidden, xp, H);
        for (int i0 = 0; i0 < n; i0 += 8) { // (8 candidates' rows side by side, packed as a group)
            int m = n - i0 < 8 ? n - i0 : 8;
            float s8[8];
            for (int i = 0; i < m; i++) memcpy(rows + x->rs * i, (const char *)x->rows + x->rs * (size_t)q[i0 + i], x->rs);
            pack_rows(kind, rows, m, H, g);
            pk->tile(g, xp, pack_act_row_size(kind, H), 1, H, s8, 8);
            for (int i = 0; i < m; i++) topk_insert(sc, id, cnt, k, s8[i], x->order[q[i0 + i]]);
        }
        free(rows), free(g), free(xp);
        return INFER_OK;
    }
    const dtype_traits *tr = dtype_get(x->type);
    for (int i = 0; i < n; i++) {
        const char *r = (const char *)x->rows + x->rs * (size_t)q[i];
        topk_insert(sc, id, cnt, k, kern ? kern->dot(r, xq, H) : tr->dot(r, hidden, H), x->order[q[i]]);
    }
    return INFER_OK;
}

infer_status lm_index_topk(const lm_index *x, const float *hidden, int V, int H, int k, int probes, pool *p, int32_t *ids) {
    int C = x->C, nth = pool_size(p);
    if (k < 1 || k > V) return fail(INFER_ERR_ARG, "lm_head index: k %d is outside 1-%d", k, V);
    if (probes < 1) return fail(INFER_ERR_ARG, "lm_head index: %d clusters probed (at least 1)", probes);
    if (probes > C) probes = C;
    // the scan keeps R: k, or with a sketch the best 4k (at least 64) by its scores, scored again from the rows
    int R = !x->sketch ? k : 4 * k < 64 ? 64 : 4 * k;
    R = R < V ? R : V;
    float *cs = malloc(sizeof(float) * (size_t)C);
    int32_t *best = malloc(sizeof(int32_t) * (size_t)C);
    const vecdot_kernel *kern = vecdot_get(x->type);
    unsigned char *xq = kern && kern->act_type != DT_F32 ? malloc(act_row_size(kern, H)) : NULL;
    float *sc = malloc(sizeof(float) * (size_t)R * (nth + 2));
    int32_t *id = malloc(sizeof(int32_t) * (size_t)R * (nth + 2));
    int *cnt = calloc((size_t)nth + 1, sizeof(int));
    unsigned char *xp = x->sketch ? malloc(pack_act_row_size(PACK_Q4_0, H)) : NULL;
    if (!cs || !best || !sc || !id || !cnt || (kern && kern->act_type != DT_F32 && !xq) || (x->sketch && !xp)) {
        free(cs), free(best), free(xq), free(sc), free(id), free(cnt), free(xp);
        return fail(INFER_ERR_NOMEM, "out of memory");
    }
    const vecdot_kernel *ck = vecdot_get(x->cent_type);
    unsigned char *cq = ck && ck->act_type != DT_F32 ? malloc(act_row_size(ck, H)) : NULL;
    if (cq) ck->quant(hidden, cq, H);
    cent_job cj = {x, cq || !ck || ck->act_type == DT_F32 ? ck : NULL, cq ? (const void *)cq : hidden, hidden, H, cs};
    pool_for(p, C, 256, cent_range, &cj);
    free(cq);
    topk_max(cs, C, probes, best);
    if (xq) kern->quant(hidden, xq, H);
    probe_job j = {x, best, probes, R, H, kern, xq ? (const void *)xq : hidden, hidden, 0, sc, id, cnt, NULL, xp};
    if (x->sketch) {
        j.pk = pack_kernel_get(PACK_Q4_0);
        j.pk->quant(hidden, xp, H);
        for (int b = 0; b < probes; b++) j.total += x->gstart[best[b] + 1] - x->gstart[best[b]];
        if (nth > 1 && j.total >= 32) pool_run(p, probe_packed_task, &j);
        else probe_packed_task(&j, 0, 1), nth = 1;
    } else {
        for (int b = 0; b < probes; b++) j.total += x->off[best[b] + 1] - x->off[best[b]];
        if (nth > 1 && j.total >= 256) pool_run(p, probe_task, &j);
        else probe_task(&j, 0, 1), nth = 1;
    }
    // the threads' lists merged (into slot nth), by score then id
    float *msc = sc + (size_t)R * nth;
    int32_t *mid = id + (size_t)R * nth;
    int n = 0;
    for (int t = 0; t < nth; t++)
        for (int i = 0; i < cnt[t]; i++) topk_insert(msc, mid, &n, R, sc[(size_t)t * R + i], id[(size_t)t * R + i]);
    infer_status st = INFER_OK;
    if (x->sketch) { // (the sketch's candidates, places in cluster order, scored again into slot nth + 1's k best)
        int m = 0;
        st = rescore(x, mid, n, hidden, xq ? (const void *)xq : hidden, kern, H, k, msc + R, mid + R, &m);
        msc += R, mid += R, n = m;
    }
    // fewer candidates than k: the rest from the other rows in order (not scored)
    if (!st && n < k) {
        unsigned char *in = calloc((size_t)V, 1);
        if (!in) st = fail(INFER_ERR_NOMEM, "out of memory");
        for (int i = 0; in && i < n; i++) in[mid[i]] = 1;
        for (int t = 0, c = n; in && c < k && t < V; t++)
            if (!in[t]) mid[c++] = t;
        free(in);
    }
    if (!st) memcpy(ids, mid, sizeof(int32_t) * (size_t)k);
    free(cs), free(best), free(xq), free(sc), free(id), free(cnt), free(xp);
    return st;
}
