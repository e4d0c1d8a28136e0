// Every dense fixture family extracted to a vindex and checked against the
// source model, read here independently of the extractor:
//   - ffn rows 3f, 3f+1, 3f+2 decode to the source's gate row, up row and
//     column f of ffn_down; gate_vectors to the gate rows. With --gate f32
//     the gate rows are exact; with --ffn f16 a bf16/f16 source is exact too
//     except values under 2^-14 (f16 subnormals: within 2^-25); an f32 source
//     rounds to f16 (half an ulp). Quantized types: within half a step of
//     their block scale (q8_0), one step (q4_0, q5_0: clamping at the far end).
//   - embeddings.bin is the source embedding byte for byte; lm_head decodes
//     to the output weight within its type's error.
//   - down_meta's ids are a brute-force double-precision top-K of W d_f for
//     several features (ties within 1e-5 may swap).
//   - vindex_verify passes; 1 and 2 threads write identical files.
//   - the vindex alone runs the model: weights.gguf plus the embedding and
//     the FFN rows (extracted as f32) rebuilt into one GGUF give
//     transformers' logits (test_fixtures' tolerance).
//   - the same from GGUF sources (f32 and q8_0 files converted from the
//     fixtures): weights.gguf is then a copy of the source's other tensors.
//   - a mixture of experts is refused.
#include "check.h"
#include "infer.h"
#include "models/model.h"
#include "tensor/dtype.h"
#include "models/gguf.h"
#include "models/gguf_write.h"
#include "models/gguf_convert.h"
#include "vindex/vindex.h"
#include "vindex/extract.h"
#include "compute/cpu/ops.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// A source matrix decoded whole, read as [out, in]: element (r, i).
typedef struct {
    float *v;
    int64_t ne0;
    int trans;
} mat;

static mat mat_of(const weight *w) {
    mat m = {NULL, 0, 0};
    if (!w->w) return m;
    int64_t n = tensor_nelem(w->w);
    m.v = malloc(sizeof(float) * (size_t)n);
    dtype_get(w->w->type)->to_float(w->w->data, m.v, n);
    m.ne0 = w->w->ne[0];
    m.trans = w->trans;
    return m;
}

static float at(const mat *m, int64_t r, int64_t i) { return m->trans ? m->v[i * m->ne0 + r] : m->v[r * m->ne0 + i]; }

// The largest error of a row encoded in type t whose largest |x| is amax.
static double tol_of(int t, double amax) {
    switch (t) {
    case DT_F32: return 0;
    case DT_F16: return amax * 0x1p-11 + 0x1p-25;
    case DT_Q8_0: return 0.6 * amax / 127;
    case DT_Q5_0: return 1.1 * amax / 16;
    case DT_Q4_0: return 1.1 * amax / 8;
    }
    return amax; // not expected here
}

static void decode_row(const tensor *t, int64_t r, float *out) {
    dtype_get(t->type)->to_float((const char *)t->data + dtype_row_size(t->type, t->ne[0]) * (size_t)r, out, t->ne[0]);
}

// Max |got - want| over a row, and whether that is within the type's bound.
static int row_ok(const float *got, const float *want, int64_t n, int type, double *worst) {
    double amax = 0, err = 0;
    for (int64_t i = 0; i < n; i++) {
        amax = fmax(amax, fabs(want[i]));
        err = fmax(err, fabs((double)got[i] - want[i]));
    }
    *worst = fmax(*worst, err);
    return err <= tol_of(type, amax);
}

static int is_low_float(int t) { return t == DT_BF16 || t == DT_F16; }

// ---------------------------------------------------------------------------

static int g_lm_clusters; // extract()'s lm_index clusters (0: none)
static int g_threads = 1; // extract()'s threads

static infer_status extract(const infer_model *m, const char *dir, int gate, int ffn, int head, int top) {
    vindex_extract_opts o;
    vindex_extract_defaults(&o);
    o.gate_type = gate;
    o.ffn_type = ffn;
    o.lm_head_type = head;
    o.down_top = top;
    o.lm_clusters = g_lm_clusters;
    o.threads = g_threads;
    return vindex_extract(m, dir, &o, NULL);
}

// The FFN rows and gate vectors of every layer against the source.
static void check_ffn(const char *fam, const infer_model *m, const vindex *v, int exact_f16) {
    int L = m->cfg.n_layer, H = m->cfg.n_embd, F = m->cfg.n_ff, gated = m->cfg.fam->ffn == FFN_GATED;
    float *got = malloc(sizeof(float) * H), *want = malloc(sizeof(float) * H);
    int ok_rows = 1, ok_gate = 1, exact = 1;
    double worst = 0, worst_gate = 0;
    for (int il = 0; il < L; il++) {
        const layer_weights *l = &m->layers[il];
        mat g = mat_of(&l->ffn_gate), u = mat_of(&l->ffn_up), gu = mat_of(&l->ffn_gate_up), d = mat_of(&l->ffn_down);
        const tensor *ft = vindex_ffn(v, il), *gt = vindex_gate_vectors(v, il);
        CHECK(vindex_n_features(v, il) == F && ft->ne[1] == 3 * F && gt->ne[1] == F && ft->ne[0] == H, "%s layer %d: shapes", fam, il);
        int src_type = (gu.v ? l->ffn_gate_up.w : l->ffn_up.w)->type;
        for (int f = 0; f < F; f++)
            for (int k = 0; k < 3; k++) {
                for (int i = 0; i < H; i++) {
                    if (k == 2) want[i] = at(&d, i, f);
                    else if (!gated) want[i] = k == 0 ? at(&u, f, i) : 0;
                    else if (gu.v) want[i] = at(&gu, k == 0 ? f : F + f, i);
                    else want[i] = k == 0 ? at(&g, f, i) : at(&u, f, i);
                }
                decode_row(ft, 3 * f + k, got);
                ok_rows &= row_ok(got, want, H, ft->type, &worst);
                if (exact_f16 && is_low_float(src_type))
                    for (int i = 0; i < H; i++) exact &= fabsf(want[i]) < 0x1p-14f || got[i] == want[i];
                if (k == 0) {
                    decode_row(gt, f, got);
                    ok_gate &= row_ok(got, want, H, gt->type, &worst_gate);
                }
            }
        free(g.v);
        free(u.v);
        free(gu.v);
        free(d.v);
    }
    CHECK(ok_rows, "%s: ffn rows (%s) off by up to %.3g", fam, dtype_get(vindex_ffn(v, 0)->type)->name, worst);
    CHECK(ok_gate, "%s: gate vectors (%s) off by up to %.3g", fam, dtype_get(vindex_gate_vectors(v, 0)->type)->name, worst_gate);
    CHECK(exact, "%s: f16 rows of a 16-bit source are not exact", fam);
    free(got);
    free(want);
}

// embeddings byte for byte; lm_head within its type's error.
static void check_heads(const char *fam, const infer_model *m, const vindex *v) {
    const tensor *e = vindex_embeddings(v), *h = vindex_lm_head(v);
    CHECK(e->type == m->tok_embd->type && e->nbytes == m->tok_embd->nbytes && !memcmp(e->data, m->tok_embd->data, e->nbytes),
          "%s: embeddings differ from the source", fam);
    int V = m->cfg.n_vocab, H = m->cfg.n_embd;
    mat o = mat_of(&m->output);
    float *got = malloc(sizeof(float) * H), *want = malloc(sizeof(float) * H);
    int ok = h->ne[1] == V && h->ne[0] == H;
    double worst = 0;
    for (int r = 0; r < V && ok; r++) {
        for (int i = 0; i < H; i++) want[i] = at(&o, r, i);
        decode_row(h, r, got);
        ok &= row_ok(got, want, H, h->type, &worst);
    }
    CHECK(ok, "%s: lm_head (%s) off by up to %.3g", fam, dtype_get(h->type)->name, worst);
    free(o.v);
    free(got);
    free(want);
}

// down_meta of some features against a brute-force top-K in double. tol:
// relative to the top score, how far a stored score may be from the exact
// one (a float head: rounding only; a quantized head: the engine quantizes
// the down vector to q8 as it does activations), and so how close two scores
// must be for their order to be a tie.
static void check_down_meta(const char *fam, const infer_model *m, const vindex *v, double tol) {
    int L = m->cfg.n_layer, H = m->cfg.n_embd, F = m->cfg.n_ff, V = m->cfg.n_vocab, K = vindex_down_top(v);
    mat o = mat_of(&m->output);
    double *s = malloc(sizeof(double) * V);
    int *order = malloc(sizeof(int) * V);
    int ok = K > 0, n_checked = 0;
    const int layers[2] = {0, L - 1}, feats[4] = {0, 5, F / 2 + 1, F - 1};
    for (int a = 0; a < 2; a++) {
        mat d = mat_of(&m->layers[layers[a]].ffn_down);
        for (int b = 0; b < 4; b++) {
            int f = feats[b];
            for (int t = 0; t < V; t++) {
                s[t] = 0;
                for (int i = 0; i < H; i++) s[t] += (double)at(&o, t, i) * at(&d, i, f);
                order[t] = t;
            }
            // partial selection sort: the K best, ties to the lower id
            for (int k = 0; k < K; k++) {
                int best = k;
                for (int t = k + 1; t < V; t++)
                    if (s[order[t]] > s[order[best]] || (s[order[t]] == s[order[best]] && order[t] < order[best])) best = t;
                int x = order[k]; order[k] = order[best]; order[best] = x;
            }
            const int32_t *ids;
            const float *sc;
            int n = vindex_down_meta(v, layers[a], f, &ids, &sc);
            ok &= n == K;
            double scale = fabs(s[order[0]]) + 1e-30;
            for (int k = 0; k < n && ok; k++) {
                int same = ids[k] == order[k] || fabs(s[ids[k]] - s[order[k]]) <= 2 * tol * scale;
                int score = fabs(sc[k] - s[ids[k]]) <= tol * scale;
                if (!same || !score)
                    fprintf(stderr, "%s layer %d feature %d rank %d: id %d (%.6g, stored %.6g), brute force %d (%.6g)\n", fam,
                            layers[a], f, k, ids[k], s[ids[k]], sc[k], order[k], s[order[k]]);
                ok &= same && score;
                if (k) ok &= sc[k] <= sc[k - 1];
            }
            n_checked++;
        }
        free(d.v);
    }
    CHECK(ok, "%s: down_meta differs from the brute-force top-%d (%d features checked)", fam, K, n_checked);
    free(o.v);
    free(s);
    free(order);
}

// down_meta exactly as the engine's own head computes its logits: for some
// features, the head's product of the down vector (matmul, one token: the
// packed kernels where the head has them) and its top K (a score enters when
// it beats the K-th strictly, so among equal scores the lower id stays);
// the stored ids and scores are those, bit for bit.
static void check_down_meta_exact(const char *fam, const infer_model *m, const vindex *v) {
    int L = m->cfg.n_layer, H = m->cfg.n_embd, F = m->cfg.n_ff, V = m->cfg.n_vocab, K = vindex_down_top(v);
    float *y = malloc(sizeof(float) * V), *d = malloc(sizeof(float) * H), *best = malloc(sizeof(float) * (K ? K : 1));
    int *bid = malloc(sizeof(int) * (K ? K : 1));
    cpu_exec ex = {0};
    int ok = K > 0, n_checked = 0;
    const int layers[2] = {0, L - 1}, feats[3] = {1, F / 3, F - 2};
    for (int a = 0; a < 2 && ok; a++) {
        mat dm = mat_of(&m->layers[layers[a]].ffn_down);
        for (int b = 0; b < 3 && ok; b++) {
            for (int i = 0; i < H; i++) d[i] = at(&dm, i, feats[b]);
            matmul(&ex, y, d, &m->output, NULL, 1, H, V);
            int n = 0;
            for (int t = 0; t < V; t++) {
                if (n == K && !(y[t] > best[K - 1])) continue;
                int i = n < K ? n++ : K - 1;
                while (i > 0 && best[i - 1] < y[t]) best[i] = best[i - 1], bid[i] = bid[i - 1], i--;
                best[i] = y[t], bid[i] = t;
            }
            const int32_t *ids;
            const float *sc;
            ok &= vindex_down_meta(v, layers[a], feats[b], &ids, &sc) == K;
            for (int k = 0; k < K && ok; k++) {
                if (ids[k] != bid[k] || sc[k] != best[k])
                    fprintf(stderr, "%s layer %d feature %d rank %d: stored %d (%.9g), the head's %d (%.9g)\n", fam, layers[a], feats[b],
                            k, ids[k], sc[k], bid[k], best[k]);
                ok &= ids[k] == bid[k] && sc[k] == best[k];
            }
            n_checked++;
        }
        free(dm.v);
    }
    CHECK(ok, "%s: down_meta is not the top-%d of the head's own products (%d features checked)", fam, K, n_checked);
    cpu_exec_release(&ex);
    free(y), free(d), free(best), free(bid);
}

static void rm_vindex(const char *dir);
static float frand(void) { return (float)((double)rand() / RAND_MAX * 2 - 1); }

// The lm_head index: verify covers it; probing every cluster gives the head's
// own top k (its kernel's scores, best first); fewer clusters give tokens whose
// scores are the head's; any thread count the same ids; a damaged index is
// refused at open, naming the file.
static void check_lm_index(const char *fam, const char *tmp) {
    char fix[1024], dir[1200];
    snprintf(fix, sizeof fix, "%s/%s", FIXTURES_DIR, fam);
    snprintf(dir, sizeof dir, "%s/%s-lm.vindex", tmp, fam);
    infer_model *m;
    if (infer_model_load(fix, &m)) { CHECK(0, "%s: %s", fam, infer_last_error()); return; }
    int V = m->cfg.n_vocab, H = m->cfg.n_embd, C = 5, K = 7;
    g_lm_clusters = C;
    CHECK(extract(m, dir, DT_F16, DT_Q8_0, DT_Q8_0, 0) == INFER_OK, "%s: extract: %s", fam, infer_last_error());
    g_lm_clusters = 0;
    CHECK(vindex_verify(dir) == INFER_OK, "%s: verify with an lm index: %s", fam, infer_last_error());
    infer_model_free(m);
    if (infer_model_load(fix, &m) || infer_model_attach_vindex(m, dir)) { CHECK(0, "%s: %s", fam, infer_last_error()); infer_model_free(m); return; }
    CHECK(infer_lm_head_index_clusters(m) == C, "%s: %d clusters, want %d", fam, infer_lm_head_index_clusters(m), C);
    float *x = malloc(sizeof(float) * H), *y = malloc(sizeof(float) * V);
    int32_t got[7], got2[7], want[7];
    cpu_exec ex = {0};
    for (int trial = 0; trial < 5; trial++) {
        for (int i = 0; i < H; i++) x[i] = frand();
        matmul(&ex, y, x, &m->output, NULL, 1, H, V); // (the head's own scores: its kernel, one token)
        int n = 0;
        float best[7];
        for (int t = 0; t < V; t++) {
            if (n == K && !(y[t] > best[K - 1])) continue;
            int i = n < K ? n++ : K - 1;
            while (i > 0 && best[i - 1] < y[t]) best[i] = best[i - 1], want[i] = want[i - 1], i--;
            best[i] = y[t], want[i] = t;
        }
        CHECK(infer_lm_head_topk_index(m, x, K, C, got) == INFER_OK, "%s: %s", fam, infer_last_error());
        int same = 1;
        for (int i = 0; i < K; i++) same &= got[i] == want[i] || y[got[i]] == y[want[i]];
        CHECK(same, "%s: every cluster probed: not the head's top %d", fam, K);
        infer_model_set_threads(m, 2);
        CHECK(infer_lm_head_topk_index(m, x, K, C, got2) == INFER_OK && !memcmp(got, got2, sizeof got), "%s: 2 threads differ", fam);
        CHECK(infer_lm_head_topk_index(m, x, K, 2, got2) == INFER_OK, "%s: %s", fam, infer_last_error());
        infer_model_set_threads(m, 1);
        int sorted = 1;
        for (int i = 1; i < K; i++) sorted &= y[got2[i]] <= y[got2[i - 1]] || got2[i] >= V || got2[i] < 0;
        for (int i = 0; i < K; i++) sorted &= got2[i] >= 0 && got2[i] < V;
        CHECK(sorted, "%s: 2 clusters probed: ids out of range or not best first", fam);
        CHECK(infer_lm_head_topk_dense(m, x, K, got2) == INFER_OK && !memcmp(got2, want, sizeof want), "%s: the dense head's top %d",
              fam, K);
        if (infer_gpu_count() > 0) { // the same lookups on the GPU: its products' floats, so the same tokens up to near-ties
            CHECK(infer_lm_head_set_device(m, "cuda") == INFER_OK, "%s: lm_head on cuda: %s", fam, infer_last_error());
            int near = 1;
            CHECK(infer_lm_head_topk_dense(m, x, K, got2) == INFER_OK, "%s: cuda: %s", fam, infer_last_error());
            for (int i = 0; i < K; i++) near &= got2[i] >= 0 && got2[i] < V && fabsf(y[got2[i]] - y[want[i]]) <= 1e-4f * (fabsf(y[want[0]]) + 1e-3f);
            CHECK(infer_lm_head_topk_index(m, x, K, C, got) == INFER_OK, "%s: cuda: %s", fam, infer_last_error());
            for (int i = 0; i < K; i++) near &= got[i] >= 0 && got[i] < V && fabsf(y[got[i]] - y[want[i]]) <= 1e-4f * (fabsf(y[want[0]]) + 1e-3f);
            CHECK(near, "%s: cuda: the dense head's or the whole index's top %d are not the CPU head's", fam, K);
            CHECK(infer_lm_head_topk_index(m, x, K, 2, got) == INFER_OK, "%s: cuda: %s", fam, infer_last_error());
            int fine = 1;
            for (int i = 0; i < K; i++) fine &= got[i] >= 0 && got[i] < V && (i == 0 || y[got[i]] <= y[got[i - 1]] + 1e-4f * (fabsf(y[want[0]]) + 1e-3f));
            CHECK(fine, "%s: cuda, 2 clusters probed: ids out of range or not best first", fam);
            CHECK(infer_lm_head_set_device(m, "cpu") == INFER_OK, "%s: back to the cpu", fam);
        }
    }
    if (infer_gpu_count() <= 0)
        CHECK(infer_lm_head_set_device(m, "cuda") == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "cuda"),
              "%s: the lm_head on cuda without a GPU: %s", fam, infer_last_error());
    CHECK(infer_lm_head_set_device(m, "tpu") == INFER_ERR_ARG && strstr(infer_last_error(), "tpu"), "%s: an unknown device accepted", fam);
    CHECK(infer_lm_head_topk_index(m, x, 0, C, got) == INFER_ERR_ARG, "%s: k 0 accepted", fam);
    CHECK(infer_lm_head_topk_index(m, x, K, 0, got) == INFER_ERR_ARG, "%s: 0 probes accepted", fam);
    cpu_exec_release(&ex);
    free(x), free(y);
    infer_model_free(m);
    // a repeated token id in the order (same size): refused at open, naming the file and the order
    char p[1300];
    snprintf(p, sizeof p, "%s/lm_index.bin", dir);
    size_t n = 0;
    unsigned char *b = (unsigned char *)test_read_file(p, &n);
    if (b && n > 64) {
        uint32_t hdr[6];
        memcpy(hdr, b + 8, 24);
        size_t cb = ((size_t)(H / 32) * 34 * C + 3) & ~(size_t)3, at = 32 + cb + 4 * ((size_t)C + 1);
        int32_t first;
        memcpy(&first, b + at, 4);
        memcpy(b + at + 4, &first, 4);
        FILE *f = fopen(p, "wb");
        CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0, "rewrite %s", p);
        vindex *v = NULL;
        infer_status st = vindex_open(dir, &v);
        CHECK(st == INFER_ERR_FORMAT && strstr(infer_last_error(), "lm_index.bin") && strstr(infer_last_error(), "permutation"),
              "%s: a repeated id in lm_index.bin: %d %s", fam, st, infer_last_error());
        vindex_close(v);
    } else CHECK(0, "%s: cannot read %s", fam, p);
    free(b);
    rm_vindex(dir);
    printf("%-20s ok (lm_head index)\n", fam);
}

// ---------------------------------------------------------------------------
// The vindex alone runs the model: one GGUF from weights.gguf, embeddings.bin
// and the f32 FFN rows, then transformers' logits.

static void rebuild(const char *fam, const vindex *v, const char *out) {
    gguf_file *g = NULL;
    CHECK(gguf_open(&g, vindex_model_path(v)) == INFER_OK, "%s: weights.gguf: %s", fam, infer_last_error());
    if (!g) return;
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->keys[i], "general.alignment")) gguf_set_value(w, g->keys[i], &g->vals[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor_info *t = &g->tensors[i];
        gguf_add_tensor_raw(w, t->name, (int)t->type, (int)t->n_dims, t->ne, g->base + g->data_offset + t->offset, t->nbytes);
    }
    const tensor *e = vindex_embeddings(v);
    gguf_add_tensor_raw(w, "token_embd.weight", e->type, 2, e->ne, e->data, e->nbytes);
    int L = vindex_n_layer(v), H = vindex_n_embd(v);
    float **keep = calloc((size_t)L * 3, sizeof *keep);
    for (int il = 0; il < L; il++) {
        const tensor *ft = vindex_ffn(v, il);
        int F = vindex_n_features(v, il);
        CHECK(ft->type == DT_F32, "%s: ffn rows are %s, not f32", fam, ft->type_name);
        const float *rows = ft->data;
        float *gate = keep[3 * il] = malloc(sizeof(float) * F * H), *up = keep[3 * il + 1] = malloc(sizeof(float) * F * H);
        float *down = keep[3 * il + 2] = malloc(sizeof(float) * F * H);
        for (int f = 0; f < F; f++)
            for (int i = 0; i < H; i++) {
                gate[f * H + i] = rows[(3 * f) * H + i];
                up[f * H + i] = rows[(3 * f + 1) * H + i];
                down[i * F + f] = rows[(3 * f + 2) * H + i]; // ffn_down is [H, F]: row i, column f
            }
        char name[64];
        int64_t ne_gu[2] = {H, F}, ne_d[2] = {F, H};
        size_t nb = sizeof(float) * F * H;
        if (vindex_gated(v)) {
            snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", il);
            gguf_add_tensor_raw(w, name, DT_F32, 2, ne_gu, gate, nb);
            snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
            gguf_add_tensor_raw(w, name, DT_F32, 2, ne_gu, up, nb);
        } else {
            snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il); // the gate slot holds the up row
            gguf_add_tensor_raw(w, name, DT_F32, 2, ne_gu, gate, nb);
        }
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
        gguf_add_tensor_raw(w, name, DT_F32, 2, ne_d, down, nb);
    }
    CHECK(gguf_write_file(w, out) == INFER_OK, "%s: rebuild: %s", fam, infer_last_error());
    gguf_writer_free(w);
    for (int i = 0; i < 3 * L; i++) free(keep[i]);
    free(keep);
    gguf_close(g);
}

static void check_runs(const char *fam, const char *fix, const vindex *v, const char *tmp) {
    char path[1200], out[1200];
    snprintf(out, sizeof out, "%s/rebuilt.gguf", tmp);
    rebuild(fam, v, out);
    snprintf(path, sizeof path, "%s/reference.json", fix);
    char *text = test_read_file(path, NULL);
    cJSON *ref = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *jids = cJSON_GetObjectItem(ref, "input_ids");
    int T = cJSON_GetArraySize(jids), k = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(T ? T : 1));
    for (const cJSON *e = jids ? jids->child : NULL; e; e = e->next) ids[k++] = (int32_t)e->valuedouble;
    infer_model *m = NULL;
    CHECK(infer_model_load(out, &m) == INFER_OK, "%s: the rebuilt GGUF does not load: %s", fam, infer_last_error());
    if (m && T) {
        int V = infer_model_n_vocab(m);
        size_t n_ref;
        snprintf(path, sizeof path, "%s/ref_logits.f32", fix);
        float *want = (float *)test_read_file(path, &n_ref), *got = malloc(sizeof(float) * (size_t)T * V);
        infer_ctx *c;
        CHECK(want && n_ref == sizeof(float) * (size_t)T * V, "%s: reference logits", fam);
        CHECK(infer_ctx_new(m, T + 4, &c) == INFER_OK, "%s", infer_last_error());
        CHECK(infer_eval(c, ids, T, got, 0) == INFER_OK, "%s", infer_last_error());
        double e = want ? test_rel_err(got, want, (size_t)T * V) : INFINITY;
        int top = 1;
        for (int t = 0; t < T && want; t++) top &= test_argmax(got + (size_t)t * V, V) == test_argmax(want + (size_t)t * V, V);
        CHECK(e <= 1e-3 && top, "%s: the rebuilt model's logits: max error %.3g of the RMS, top-1 %s", fam, e, top ? "same" : "differs");
        infer_ctx_free(c);
        free(want);
        free(got);
    }
    infer_model_free(m);
    free(ids);
    cJSON_Delete(ref);
    unlink(out);
}

// ---------------------------------------------------------------------------

static void rm_vindex(const char *dir) {
    const char *names[] = {"index.json", "gate_vectors.bin", "ffn.bin", "down_meta.bin", "embeddings.bin", "lm_head.bin", "weights.gguf",
                           "lm_index.bin"};
    char p[1200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void check_family(const char *fam, const char *tmp) {
    char fix[1024], dir[1200];
    snprintf(fix, sizeof fix, "%s/%s", FIXTURES_DIR, fam);
    infer_model *m;
    if (infer_model_load(fix, &m)) { CHECK(0, "%s: %s", fam, infer_last_error()); return; }
    snprintf(dir, sizeof dir, "%s/%s.vindex", tmp, fam);
    if (m->cfg.n_expert) {
        infer_status st = extract(m, dir, DT_F16, DT_Q8_0, DT_Q4_K, 10);
        CHECK(st == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "mixture of experts"), "%s: MoE not refused: %s", fam,
              infer_last_error());
        infer_model_free(m);
        rm_vindex(dir);
        return;
    }
    int low = 1;
    for (int il = 0; il < m->cfg.n_layer; il++)
        low &= is_low_float((m->layers[il].ffn_gate_up.w ? m->layers[il].ffn_gate_up.w : m->layers[il].ffn_up.w)->type);

    // 1. the defaults (f16 gate, q8_0 rows, q4_K head -> q5_0 for rows of 64)
    vindex *v = NULL;
    CHECK(extract(m, dir, DT_F16, DT_Q8_0, DT_Q4_K, 10) == INFER_OK, "%s: extract: %s", fam, infer_last_error());
    CHECK(vindex_verify(dir) == INFER_OK, "%s: verify: %s", fam, infer_last_error());
    CHECK(vindex_open(dir, &v) == INFER_OK, "%s: open: %s", fam, infer_last_error());
    if (v) {
        CHECK(vindex_n_layer(v) == m->cfg.n_layer && vindex_n_embd(v) == m->cfg.n_embd && vindex_n_vocab(v) == m->cfg.n_vocab,
              "%s: sizes", fam);
        CHECK(vindex_gated(v) == (m->cfg.fam->ffn == FFN_GATED), "%s: gated", fam);
        CHECK(vindex_lm_head(v)->type == DT_Q5_0, "%s: lm_head %s (q4_K falls back to q5_0 for rows of 64)", fam,
              vindex_lm_head(v)->type_name);
        check_ffn(fam, m, v, 0);
        check_heads(fam, m, v);
        check_down_meta(fam, m, v, 1e-5);
        vindex_close(v);
    }

    // 2. exact types: f32 gate, f16 rows, f16 head
    CHECK(extract(m, dir, DT_F32, DT_F16, DT_F16, 3) == INFER_OK, "%s: extract: %s", fam, infer_last_error());
    if (vindex_open(dir, &v) == INFER_OK) {
        check_ffn(fam, m, v, low);
        check_heads(fam, m, v);
        vindex_close(v);
    } else CHECK(0, "%s: open: %s", fam, infer_last_error());

    // 3. q4_0 gate vectors, no down_meta
    CHECK(extract(m, dir, DT_Q4_0, DT_Q8_0, DT_Q4_0, 0) == INFER_OK, "%s: extract: %s", fam, infer_last_error());
    if (vindex_open(dir, &v) == INFER_OK) {
        const int32_t *ids;
        const float *sc;
        CHECK(vindex_down_meta(v, 0, 0, &ids, &sc) == 0 && !ids && !sc, "%s: down_meta without --down-top", fam);
        check_ffn(fam, m, v, 0);
        vindex_close(v);
    } else CHECK(0, "%s: open: %s", fam, infer_last_error());

    // 4. f32 rows: the vindex alone gives the model's logits
    CHECK(extract(m, dir, DT_F16, DT_F32, DT_Q8_0, 0) == INFER_OK, "%s: extract: %s", fam, infer_last_error());
    if (vindex_open(dir, &v) == INFER_OK) {
        check_runs(fam, fix, v, tmp);
        vindex_close(v);
    } else CHECK(0, "%s: open: %s", fam, infer_last_error());
    infer_model_free(m);
    rm_vindex(dir);
    printf("%-20s ok\n", fam);
}

// A GGUF source (converted from the fixture): weights.gguf is a copy of the
// file without the FFN and the embedding, index.json's config its metadata.
// An f32 file must still run from the vindex alone; a q8_0 file checks the
// decoding of quantized sources and down_meta over a quantized head.
static void check_gguf_source(const char *fam, const char *tmp) {
    char fix[1024], gg[1200], dir[1200];
    snprintf(fix, sizeof fix, "%s/%s", FIXTURES_DIR, fam);
    snprintf(gg, sizeof gg, "%s/%s.gguf", tmp, fam);
    snprintf(dir, sizeof dir, "%s/%s-gguf.vindex", tmp, fam);
    infer_model *hf, *m;
    if (infer_model_load(fix, &hf)) { CHECK(0, "%s: %s", fam, infer_last_error()); return; }
    for (int q = 0; q < 2; q++) {
        CHECK(gguf_convert_mix(hf, gg, q ? "q8_0" : "f32") == INFER_OK, "%s: convert: %s", fam, infer_last_error());
        if (infer_model_load(gg, &m)) { CHECK(0, "%s: %s", fam, infer_last_error()); continue; }
        vindex *v;
        CHECK(extract(m, dir, DT_F16, DT_Q8_0, DT_Q8_0, 10) == INFER_OK, "%s gguf: extract: %s", fam, infer_last_error());
        CHECK(vindex_verify(dir) == INFER_OK, "%s gguf: verify: %s", fam, infer_last_error());
        if (vindex_open(dir, &v) == INFER_OK) {
            check_ffn(fam, m, v, 0);
            check_heads(fam, m, v);
            check_down_meta(fam, m, v, q ? 2e-2 : 1e-5);
            check_down_meta_exact(fam, m, v);
            vindex_close(v);
        } else CHECK(0, "%s gguf: open: %s", fam, infer_last_error());
        char p[1300];
        snprintf(p, sizeof p, "%s/index.json", dir);
        char *text = test_read_file(p, NULL);
        CHECK(text && strstr(text, "\"general.architecture\"") && strstr(text, "\"source_format\":\t\"gguf\""),
              "%s gguf: index.json lacks the GGUF metadata", fam);
        free(text);
        if (!q) {
            CHECK(extract(m, dir, DT_F16, DT_F32, DT_Q8_0, 0) == INFER_OK, "%s gguf: extract: %s", fam, infer_last_error());
            if (vindex_open(dir, &v) == INFER_OK) {
                check_runs(fam, fix, v, tmp);
                vindex_close(v);
            }
        }
        infer_model_free(m);
        rm_vindex(dir);
        unlink(gg);
    }
    infer_model_free(hf);
    printf("%-20s ok (from GGUF f32 and q8_0)\n", fam);
}

// The same files with 1 and 2 threads.
static void check_threads(const char *tmp) {
    char fix[1024], a[1200], b[1200];
    snprintf(fix, sizeof fix, "%s/gemma3", FIXTURES_DIR);
    snprintf(a, sizeof a, "%s/t1.vindex", tmp);
    snprintf(b, sizeof b, "%s/t2.vindex", tmp);
    infer_model *m;
    if (infer_model_load(fix, &m)) { CHECK(0, "%s", infer_last_error()); return; }
    g_lm_clusters = 6;
    CHECK(extract(m, a, DT_Q4_0, DT_Q8_0, DT_Q4_K, 10) == INFER_OK, "%s", infer_last_error());
    g_threads = 2;
    CHECK(extract(m, b, DT_Q4_0, DT_Q8_0, DT_Q4_K, 10) == INFER_OK, "%s", infer_last_error());
    g_threads = 1;
    g_lm_clusters = 0;
    const char *names[] = {"gate_vectors.bin", "ffn.bin", "down_meta.bin", "lm_head.bin", "weights.gguf", "lm_index.bin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pa[1300], pb[1300];
        snprintf(pa, sizeof pa, "%s/%s", a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, names[i]);
        size_t na = 0, nb = 0;
        char *x = test_read_file(pa, &na), *y = test_read_file(pb, &nb);
        CHECK(x && y && na == nb && !memcmp(x, y, na), "%s differs between 1 and 2 threads", names[i]);
        free(x);
        free(y);
    }
    infer_model_free(m);
    rm_vindex(a);
    rm_vindex(b);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    // The rebuilt GGUFs hold the fixtures' bf16 tensors: compared with
    // transformers, they keep f32 activations (a GGUF's bf16 products
    // otherwise take bf16 activations, as llama.cpp's; tests/cli_gguf_convert.sh).
    setenv("INFER_BF16_EXACT", "1", 1);
    char tmp[] = "/tmp/infer_vindex_XXXXXX";
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    DIR *d = opendir(FIXTURES_DIR);
    CHECK(d != NULL, "cannot open %s", FIXTURES_DIR);
    char *names[256];
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 256;) {
        char p[1200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/config.json", FIXTURES_DIR, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &sb) == 0) names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    int need = 0; // the families the brief names must be there
    for (int i = 0; i < n; i++)
        need += !strcmp(names[i], "llama") + !strcmp(names[i], "gemma3") + !strcmp(names[i], "gpt2") + !strcmp(names[i], "phi3");
    CHECK(need == 4, "fixtures llama, gemma3, gpt2 and phi3 are not all in %s", FIXTURES_DIR);
    for (int i = 0; i < n; i++) {
        check_family(names[i], tmp);
        free(names[i]);
    }
    const char *gguf_fams[] = {"llama", "gemma3", "gpt2", "phi3"};
    for (int i = 0; i < 4; i++) check_gguf_source(gguf_fams[i], tmp);
    check_threads(tmp);
    check_lm_index("llama", tmp);
    check_lm_index("gemma3", tmp);
    rmdir(tmp);
    return check_summary("test_vindex");
}
