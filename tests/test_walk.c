// Gate KNN and the walk FFN: top-K selection against brute force, the walk
// over all features against the dense FFN of real fixture weights, a walk
// over K features against a double-precision sum over the same K, and the
// result independent of the thread count. Where a GPU is: the cuda
// backend's walk (f32 rows, and q8_0 rows with f16 gate vectors) against the
// CPU's walk_ffn, over all features and over K.
#include "check.h"
#include "infer.h"
#include "vindex/walk.h"
#include "models/model.h"
#include "tensor/dtype.h"
#include "compute/cpu/ops.h"
#include "compute/backend.h"
#include "base/pool.h"
#include "feature_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

static void check_topk(void) {
    enum { N = 300 };
    float s[N];
    int32_t idx[N];
    for (int i = 0; i < N; i++) s[i] = frand() * 10;
    s[7] = s[8] = -9.99f; // ties
    for (int k = 1; k <= N; k += 37) {
        topk_abs(s, N, k, idx);
        int ok = 1;
        for (int i = 1; i < k; i++) ok &= idx[i - 1] < idx[i];
        // every selected |s| is >= every unselected one
        float minsel = INFINITY, maxrest = 0;
        char sel[N] = {0};
        for (int i = 0; i < k; i++) sel[idx[i]] = 1, minsel = fminf(minsel, fabsf(s[idx[i]]));
        for (int i = 0; i < N; i++) if (!sel[i]) maxrest = fmaxf(maxrest, fabsf(s[i]));
        CHECK(ok && (k == N || minsel >= maxrest), "topk_abs k=%d: not the k largest |s| in index order", k);
        // topk_max: the k largest values, signed
        topk_max(s, N, k, idx);
        float mn = INFINITY, mx = -INFINITY;
        memset(sel, 0, sizeof sel);
        for (int i = 0; i < k; i++) sel[idx[i]] = 1, mn = fminf(mn, s[idx[i]]), ok &= i == 0 || idx[i - 1] < idx[i];
        for (int i = 0; i < N; i++) if (!sel[i]) mx = fmaxf(mx, s[i]);
        CHECK(ok && (k == N || mn >= mx), "topk_max k=%d: not the k largest s in index order", k);
    }
    // gate KNN's top-K in one call (infer_knn_topk) = its scores, then topk_abs; bad k refused
    enum { F = 200, H = 64 };
    static float rows[F * H], x[H], sc[F];
    int32_t a[F], b[F];
    for (int i = 0; i < F * H; i++) rows[i] = frand();
    for (int i = 0; i < H; i++) x[i] = frand();
    infer_knn *g = NULL;
    CHECK(infer_knn_new(INFER_TYPE_Q4_0, rows, F, H, &g) == INFER_OK, "%s", infer_last_error());
    if (g) {
        infer_knn_scores(g, x, sc);
        topk_abs(sc, F, 20, a);
        CHECK(infer_knn_topk(g, x, 20, b) == INFER_OK && !memcmp(a, b, sizeof(int32_t) * 20), "infer_knn_topk differs from scores + topk_abs");
        CHECK(infer_knn_topk(g, x, F + 1, b) == INFER_ERR_ARG && infer_knn_topk(g, x, 0, b) == INFER_ERR_ARG, "a bad k was taken");
        CHECK(infer_knn_set_device(g, "nosuch") == INFER_ERR_ARG, "an unknown device was taken");
        infer_knn_free(g);
    }
}

// The cuda backend's walk of layer wl against walk_ffn's, over all features and over k.
static void check_gpu_walk(const char *what, const walk_layer *wl, const float *x, int H, int F, walk_scratch *ws, const void *owner) {
    const backend_ops *cu = backend_cuda();
    if (!cu) return;
    cpu_exec ex = {0};
    backend b = {cu, &ex, NULL, owner, 0};
    float *dx = cu->alloc(&b, sizeof(float) * H), *dout = cu->alloc(&b, sizeof(float) * H);
    float *want = malloc(sizeof(float) * H), *got = malloc(sizeof(float) * H);
    CHECK(dx && dout, "%s: cuda alloc", what);
    int ks[2] = {F, F / 8};
    for (int i = 0; i < 2 && dx && dout; i++) {
        walk_ffn(wl, x, ks[i], want, ws);
        cu->upload(&b, dx, x, (size_t)H);
        cu->walk(&b, dout, dx, wl, ks[i], 1);
        cu->download(&b, got, dout, (size_t)H);
        CHECK(!ex.oom, "%s: the cuda walk failed", what);
        double e = 0, s = 0;
        for (int h = 0; h < H; h++) e += (got[h] - want[h]) * (got[h] - want[h]), s += (double)want[h] * want[h];
        CHECK(e <= 1e-9 * s, "%s: cuda walk over %d of %d features vs the CPU's: relative error %g", what, ks[i], F, sqrt(e / s));
    }
    if (dx) cu->release(&b, dx);
    if (dout) cu->release(&b, dout);
    if (cu->done) cu->done(&b);
    free(want), free(got);
}

static void check_family(const char *fam) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES_DIR, fam);
    infer_model *m;
    CHECK(infer_model_load(dir, &m) == INFER_OK, "%s", infer_last_error());
    if (!m) return;
    int H = m->cfg.n_embd, F, il = m->cfg.n_layer - 1;
    const layer_weights *l = &m->layers[il];
    int gated = l->ffn_gate.w != NULL || l->ffn_gate_up.w != NULL;
    float *rows = feature_rows(m, il, &F);
    tensor ffn = {"ffn", DT_F32, "f32", 2, {H, 3 * F}, rows, sizeof(float) * 3 * (size_t)F * H, NULL};
    tensor gv = {"gate", DT_F32, "f32", 2, {H, F}, NULL, 0, NULL};
    float *gate = malloc(sizeof(float) * (size_t)F * H);
    for (int f = 0; f < F; f++) memcpy(gate + (size_t)f * H, rows + (size_t)3 * f * H, sizeof(float) * H);
    gv.data = gate, gv.nbytes = sizeof(float) * (size_t)F * H;
    const float *ub = !gated && l->ffn_up_b ? l->ffn_up_b->f32 : NULL, *db = l->ffn_down_b ? l->ffn_down_b->f32 : NULL;
    float *nu = malloc(sizeof(float) * F), *nd = malloc(sizeof(float) * F);
    walk_norms(&ffn, nu, nd);
    walk_layer wl = {&gv, &ffn, gated, m->cfg.act, ub, db, nu, nd};
    cpu_exec ex = {0}, ex2 = {.pool = pool_new(2)};
    walk_scratch *ws = walk_scratch_new(F, H, &ex), *ws2 = walk_scratch_new(F, H, &ex2);
    float *x = malloc(sizeof(float) * H), *out = malloc(sizeof(float) * H), *ref = malloc(sizeof(float) * H);
    float *g = malloc(sizeof(float) * F), *u = malloc(sizeof(float) * F), *out2 = malloc(sizeof(float) * H);
    for (int i = 0; i < H; i++) x[i] = frand();

    // all features: the dense FFN (biases aside: the fixtures' are added outside the FFN core)
    walk_ffn(&wl, x, F, out, ws);
    if (l->ffn_gate_up.w) {
        float *gu = malloc(sizeof(float) * 2 * F);
        matmul(&ex, gu, x, &l->ffn_gate_up, NULL, 1, H, 2 * F);
        memcpy(g, gu, sizeof(float) * F), memcpy(u, gu + F, sizeof(float) * F);
        free(gu);
    } else {
        matmul(&ex, g, x, gated ? &l->ffn_gate : &l->ffn_up, NULL, 1, H, F);
        if (gated) matmul(&ex, u, x, &l->ffn_up, NULL, 1, H, F);
    }
    if (ub) for (int f = 0; f < F; f++) g[f] += ub[f];
    activate(g, F, m->cfg.act);
    if (gated) for (int f = 0; f < F; f++) g[f] *= u[f];
    matmul(&ex, ref, g, &l->ffn_down, db, 1, F, H);
    double e = 0, s = 0;
    for (int i = 0; i < H; i++) e += (out[i] - ref[i]) * (out[i] - ref[i]), s += ref[i] * ref[i];
    CHECK(e <= 1e-10 * s, "%s: walk over all %d features vs dense FFN: relative error %g", fam, F, sqrt(e / s));

    // k features: against a double sum over the k features of largest |gate . x|
    int k = F / 8;
    walk_ffn(&wl, x, k, out, ws);
    int nk;
    const int32_t *sel = walk_selected(ws, &nk);
    CHECK(nk == k, "%s: %d features selected, wanted %d", fam, nk, k);
    double *want = calloc(H, sizeof(double));
    for (int j = 0; j < nk; j++) {
        const float *fr = rows + (size_t)3 * sel[j] * H;
        double gs = 0, us = 0;
        for (int i = 0; i < H; i++) gs += (double)fr[i] * x[i], us += (double)fr[H + i] * x[i];
        float a = (float)gs + (ub ? ub[sel[j]] : 0.0f);
        activate(&a, 1, m->cfg.act);
        double av = gated ? a * us : a;
        for (int i = 0; i < H; i++) want[i] += av * fr[2 * H + i];
    }
    if (db) for (int i = 0; i < H; i++) want[i] += db[i];
    e = 0, s = 0;
    for (int i = 0; i < H; i++) e += (out[i] - want[i]) * (out[i] - want[i]), s += want[i] * want[i];
    CHECK(e <= 1e-9 * s, "%s: walk over %d features vs double sum: relative error %g", fam, k, sqrt(e / s));

    // ranked by contribution: walk_norms are |row 3f+1|, |row 3f+2|; the k chosen are the k largest
    // contributions |act(g) (up . x)| |down| among the 4k of largest bound |act(g)| |up| |down| (a plain
    // MLP: the k of largest |act(up . x + b)| |down|), in index order; over all features still the dense FFN
    {
        int nok = 1;
        for (int f = 0; f < F; f++) {
            double a = 0, b = 0;
            const float *fr = rows + (size_t)3 * f * H;
            for (int i = 0; i < H; i++) a += (double)fr[H + i] * fr[H + i], b += (double)fr[2 * H + i] * fr[2 * H + i];
            nok &= fabs(nu[f] - sqrt(a)) <= 1e-5 * (sqrt(a) + 1e-30) && fabs(nd[f] - sqrt(b)) <= 1e-5 * (sqrt(b) + 1e-30);
        }
        CHECK(nok, "%s: walk_norms differ from the rows' lengths", fam);
        float *gs = malloc(sizeof(float) * F), *c = malloc(sizeof(float) * F), *bound = malloc(sizeof(float) * F);
        backend hb = walk_host_backend(&ex);
        gate_scores(&hb, &gv, x, gs);
        for (int f = 0; f < F; f++) c[f] = gs[f] + (ub ? ub[f] : 0.0f);
        activate(c, F, m->cfg.act);
        int M = gated ? (4 * k < F ? 4 * k : F) : F;
        char *cand = calloc((size_t)F, 1);
        for (int f = 0; f < F; f++) bound[f] = gated ? fabsf(c[f]) * nu[f] * nd[f] : 0.0f;
        if (gated) { // the candidates: the M of largest bound
            int32_t *ci = malloc(sizeof(int32_t) * F);
            topk_max(bound, F, M, ci);
            for (int j = 0; j < M; j++) cand[ci[j]] = 1;
            free(ci);
        } else
            for (int f = 0; f < F; f++) cand[f] = 1;
        for (int f = 0; f < F; f++) {
            double up = 0;
            const float *fr = rows + (size_t)3 * f * H;
            for (int i = 0; i < H; i++) up += (double)fr[H + i] * x[i];
            c[f] = cand[f] ? (float)(gated ? fabs(c[f] * up) * nd[f] : fabs(c[f]) * nd[f]) : -1.0f;
        }
        walk_ffn_ranked(&wl, x, k, WALK_BY_CONTRIB, out, ws);
        sel = walk_selected(ws, &nk);
        char *in = calloc((size_t)F, 1);
        float minsel = INFINITY, maxrest = -INFINITY;
        int asc = 1, incand = 1;
        for (int j = 0; j < nk; j++) in[sel[j]] = 1, minsel = fminf(minsel, c[sel[j]]), asc &= j == 0 || sel[j] > sel[j - 1], incand &= cand[sel[j]];
        for (int f = 0; f < F; f++) if (!in[f]) maxrest = fmaxf(maxrest, c[f]);
        // (the kernel's up . x against a double one: near-ties may swap)
        CHECK(nk == k && asc && incand && minsel >= maxrest * (1 - 1e-4f), "%s: walkc's %d features are not the %d of largest contribution",
              fam, nk, k);
        free(bound), free(cand);
        walk_ffn_ranked(&wl, x, F, WALK_BY_CONTRIB, out2, ws);
        walk_ffn(&wl, x, F, out, ws);
        CHECK(!memcmp(out, out2, sizeof(float) * H), "%s: walkc over all features differs from the walk over all", fam);
        free(gs), free(c), free(in);
    }

    // on a GPU: f32 rows, then q8_0 and bf16 rows with f16 gate vectors
    if (backend_cuda()) {
        char what[64];
        snprintf(what, sizeof what, "%s f32", fam);
        check_gpu_walk(what, &wl, x, H, F, ws, m);
        size_t rq = dtype_row_size(DT_Q8_0, H), rh = dtype_row_size(DT_F16, H);
        unsigned char *q = malloc(rq * 3 * F), *gh = malloc(rh * F);
        for (int r = 0; r < 3 * F; r++) dtype_get(DT_Q8_0)->from_float(rows + (size_t)r * H, q + rq * r, H);
        for (int f = 0; f < F; f++) dtype_get(DT_F16)->from_float(gate + (size_t)f * H, gh + rh * f, H);
        tensor fq = {"ffn", DT_Q8_0, "q8_0", 2, {H, 3 * F}, q, rq * 3 * F, NULL}, gq = {"gate", DT_F16, "f16", 2, {H, F}, gh, rh * F, NULL};
        walk_layer wq = {&gq, &fq, gated, m->cfg.act, ub, db, NULL, NULL};
        snprintf(what, sizeof what, "%s q8_0", fam);
        if (H % 32 == 0) check_gpu_walk(what, &wq, x, H, F, ws, q);
        size_t rb = dtype_row_size(DT_BF16, H);
        unsigned char *b16 = malloc(rb * 3 * F);
        for (int r = 0; r < 3 * F; r++) dtype_get(DT_BF16)->from_float(rows + (size_t)r * H, b16 + rb * r, H);
        tensor fb = {"ffn", DT_BF16, "bf16", 2, {H, 3 * F}, b16, rb * 3 * F, NULL};
        walk_layer wb = {&gq, &fb, gated, m->cfg.act, ub, db, NULL, NULL};
        snprintf(what, sizeof what, "%s bf16", fam);
        check_gpu_walk(what, &wb, x, H, F, ws, b16);
        free(q), free(gh), free(b16);
    }

    // the same bits with 1 and 2 threads
    walk_ffn(&wl, x, F, out, ws);
    walk_ffn(&wl, x, F, out2, ws2);
    CHECK(!memcmp(out, out2, sizeof(float) * H), "%s: walk differs between 1 and 2 threads", fam);

    free(want), free(x), free(out), free(out2), free(ref), free(g), free(u), free(rows), free(gate), free(nu), free(nd);
    walk_scratch_free(ws);
    walk_scratch_free(ws2);
    cpu_exec_release(&ex);
    cpu_exec_release(&ex2);
    pool_free(ex2.pool);
    infer_model_free(m);
}

int main(void) {
    check_topk();
    const char *fams[] = {"llama", "gemma3", "gpt2", "phi3", "starcoder2"};
    for (int i = 0; i < 5; i++) check_family(fams[i]);
    return check_summary("walk");
}
