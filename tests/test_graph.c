// Layer graphs: spec parsing (and its errors), a cached prefix replayed on
// its own template giving the dense logits exactly, the walk over every
// feature giving the dense logits, a small-K walk staying close, and
// auto's choice (infer_graph_auto) within its budget and as reported.
#include "check.h"
#include "infer.h"
#include "inference/graph.h"
#include "inference/context.h"
#include "vindex/walk.h"
#include "models/model.h"
#include "tensor/dtype.h"
#include "compute/cpu/ops.h"
#include "feature_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Random specs from the grammar's own pieces: parsed, or refused with a
// "graph" message; a successful parse always plans every layer.
static void fuzz_parse(void) {
    static const char *piece[] = {"dense", "walk", "cached", "pipelined", ":", "-", ",", "@", "%", "0", "1", "7", "9",
                                  "12", "99999999999", "x", "", " "};
    uint64_t r = 0x853c49e6748fea9bull;
    layer_plan p[10];
    char spec[64], err[256];
    int bad = 0;
    for (int it = 0; it < 20000; it++) {
        int n = 0, parts = 1 + (int)(r % 7);
        spec[0] = 0;
        for (int k = 0; k < parts; k++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            const char *s = piece[r % (sizeof piece / sizeof piece[0])];
            if (n + (int)strlen(s) >= (int)sizeof spec) break;
            strcpy(spec + n, s), n += (int)strlen(s);
        }
        err[0] = 0;
        int ok = graph_parse(spec, 10, 4, p, err, sizeof err);
        if (ok) for (int l = 0; l < 10; l++) bad |= p[l].kind < G_DENSE || p[l].kind > G_PIPELINED || p[l].k < 0;
        else bad |= !strstr(err, "graph");
    }
    CHECK(!bad, "graph_parse on random specs: a plan out of range or an error without a message");
}

static void check_parse(void) {
    fuzz_parse();
    layer_plan p[10];
    char err[256];
    CHECK(graph_parse("dense", 10, 8, p, err, sizeof err) && p[3].kind == G_DENSE, "dense");
    CHECK(graph_parse("walk", 10, 8, p, err, sizeof err) && p[9].kind == G_WALK && p[9].k == 8 && !p[9].pct, "walk");
    CHECK(graph_parse("cached:0-2,walk:3-5@10%,dense:6-9", 10, 8, p, err, sizeof err) && p[0].kind == G_CACHED &&
              p[2].kind == G_CACHED && p[3].kind == G_WALK && p[5].k == 10 && p[5].pct && p[6].kind == G_DENSE,
          "mix: %s", err);
    CHECK(graph_parse("walk:4@3", 10, 0, p, err, sizeof err) && p[4].kind == G_WALK && p[4].k == 3 && p[3].kind == G_DENSE, "one layer");
    CHECK(graph_parse("dense:0-1,walkc:2-9@5%", 10, 0, p, err, sizeof err) && p[2].kind == G_WALK && p[2].rank == 1 && p[2].k == 5 && p[2].pct &&
          p[0].kind == G_DENSE && p[0].rank == 0, "walkc: the walk by contribution");
    CHECK(graph_parse("walk@5%", 10, 0, p, err, sizeof err) && p[2].rank == 0, "walk: by |gate . x|");
    const char *bad[] = {"fast", "walk:3-2", "walk:0-10", "cached", "cached:1-3", "cached:0-1,dense:2,cached:3",
                         "dense@4", "walk@0", "walk@101%", "walk:1-3,walk:3-4", "walk:", "walk:x", "dense,", "walk@5x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int ok = graph_parse(bad[i], 10, 8, p, err, sizeof err);
        CHECK(!ok && strstr(err, "graph"), "graph \"%s\" accepted (%s)", bad[i], err);
    }
}

// Feature rows of every layer, in f32, from the model's own weights.
// Each layer's tensor pair is kept in *store for free_walk.
static walk_layer *walk_from_weights(infer_model *m, void ***store) {
    int L = m->cfg.n_layer, H = m->cfg.n_embd, F = m->cfg.n_ff;
    walk_layer *w = calloc((size_t)L, sizeof *w);
    *store = calloc((size_t)L, sizeof(void *));
    for (int il = 0; il < L; il++) {
        int nf;
        float *rows = feature_rows(m, il, &nf), *gate = malloc(sizeof(float) * (size_t)F * H);
        for (int f = 0; f < F; f++) memcpy(gate + (size_t)f * H, rows + (size_t)3 * f * H, sizeof(float) * H);
        tensor *t = calloc(2, sizeof(tensor));
        t[0] = (tensor){"gate", DT_F32, "f32", 2, {H, F}, gate, sizeof(float) * (size_t)F * H, NULL};
        t[1] = (tensor){"ffn", DT_F32, "f32", 2, {H, 3 * F}, rows, sizeof(float) * 3 * (size_t)F * H, NULL};
        w[il] = (walk_layer){&t[0], &t[1], 1, m->cfg.act, NULL, NULL, NULL, NULL};
        (*store)[il] = t;
    }
    m->walk = w;
    m->walk_max_features = F;
    return w;
}

static void free_walk(infer_model *m, void **store) {
    for (int il = 0; il < m->cfg.n_layer; il++) {
        tensor *t = store[il];
        free((void *)t[0].data), free((void *)t[1].data), free(t);
    }
    free(store), free(m->walk);
    m->walk = NULL;
}

static double rel_err(const float *a, const float *b, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) e += (double)(a[i] - b[i]) * (a[i] - b[i]), s += (double)b[i] * b[i];
    return sqrt(e / s);
}

static void check_model(const char *fam) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES_DIR, fam);
    infer_model *m;
    CHECK(infer_model_load(dir, &m) == INFER_OK, "%s", infer_last_error());
    if (!m) return;
    int V = infer_model_n_vocab(m), T = 12, L = m->cfg.n_layer;
    int32_t ids[12];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 37 + 5) % V);
    float *dense = malloc(sizeof(float) * (size_t)T * V), *got = malloc(sizeof(float) * (size_t)T * V);
    infer_ctx *c;
    CHECK(infer_ctx_new(m, 32, &c) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_eval(c, ids, T, dense, 0) == INFER_OK, "%s", infer_last_error());

    // walk without a vindex is refused, and so is auto
    CHECK(infer_ctx_set_graph(c, "walk", 0) != INFER_OK && strstr(infer_last_error(), "vindex"), "%s: walk without a vindex accepted", fam);
    infer_graph_auto_info none;
    CHECK(infer_graph_auto(m, ids, T, 0.01, 0, &none, NULL) != INFER_OK && strstr(infer_last_error(), "vindex"), "%s: auto without a vindex accepted", fam);

    // pipelined is named, and refused without a second device
    CHECK(infer_ctx_set_graph(c, "pipelined", 0) != INFER_OK && strstr(infer_last_error(), "GPU"), "%s: pipelined accepted on the CPU", fam);

    // cached prefix replayed on its own template: the dense logits, bit for bit
    char spec[64];
    snprintf(spec, sizeof spec, "cached:0-%d", L / 2);
    CHECK(infer_ctx_set_graph(c, spec, 0) == INFER_OK, "%s", infer_last_error());
    infer_ctx_reset(c);
    CHECK(infer_eval(c, ids, T, got, 0) != INFER_OK, "%s: cached graph ran without a template", fam);
    CHECK(infer_ctx_set_template(c, ids, T) == INFER_OK, "%s", infer_last_error());
    infer_ctx_reset(c);
    CHECK(infer_eval(c, ids, T, got, 0) == INFER_OK, "%s", infer_last_error());
    CHECK(!memcmp(got, dense, sizeof(float) * (size_t)T * V), "%s: cached graph on its template differs from dense", fam);
    infer_ctx_reset(c);
    int32_t more[13];
    memcpy(more, ids, sizeof ids), more[12] = 1;
    CHECK(infer_eval(c, more, 13, NULL, 0) != INFER_OK, "%s: cached graph ran past its template", fam);

    // walk over every feature of an in-memory vindex: the dense logits
    void **store;
    walk_from_weights(m, &store);
    infer_ctx_free(c);
    CHECK(infer_ctx_new(m, 32, &c) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_ctx_set_graph(c, "walk", 0) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_eval(c, ids, T, got, 0) == INFER_OK, "%s", infer_last_error());
    double e = rel_err(got, dense, (size_t)T * V);
    CHECK(e < 1e-5, "%s: walk over all features vs dense: relative error %g", fam, e);
    // half the features on half the layers: close, not equal
    snprintf(spec, sizeof spec, "walk:%d-%d@50%%", L / 2, L - 1);
    infer_ctx_reset(c);
    CHECK(infer_ctx_set_graph(c, spec, 0) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_eval(c, ids, T, got, 0) == INFER_OK, "%s", infer_last_error());
    e = rel_err(got, dense, (size_t)T * V);
    printf("%s: walk@50%% on layers %d-%d: logits relative error %.3g\n", fam, L / 2, L - 1, e);
    CHECK(e > 0 && e < 0.5, "%s: walk@50%% relative error %g", fam, e);
    // the same walks on a GPU (the cuda backend's own walk) against the CPU's
    if (infer_gpu_count() > 0) {
        float *gpu = malloc(sizeof(float) * (size_t)T * V);
        infer_ctx *g;
        CHECK(infer_ctx_new(m, 32, &g) == INFER_OK && infer_ctx_set_backend(g, "cuda") == INFER_OK &&
              infer_ctx_set_graph(g, spec, 0) == INFER_OK, "%s: walk on cuda: %s", fam, infer_last_error());
        CHECK(infer_eval(g, ids, T, gpu, 0) == INFER_OK, "%s: walk on cuda: %s", fam, infer_last_error());
        double eg = rel_err(gpu, got, (size_t)T * V);
        CHECK(eg < 1e-4, "%s: walk@50%% on cuda vs the CPU's: relative error %g", fam, eg);
        infer_ctx_reset(g);
        CHECK(infer_ctx_set_graph(g, "walk", 0) == INFER_OK && infer_eval(g, ids, T, gpu, 0) == INFER_OK, "%s: %s", fam, infer_last_error());
        double ea = rel_err(gpu, dense, (size_t)T * V);
        CHECK(ea < 1e-4, "%s: walk over all features on cuda vs dense: relative error %g", fam, ea);
        printf("%s: on cuda: walk@50%% %.3g from the CPU's, walk over all features %.3g from dense\n", fam, eg, ea);
        infer_ctx_free(g);
        free(gpu);
    }

    // auto: refusals; then the choice on calibration tokens: within the budget, its spec a graph, and its
    // KL the one measured here again (a pass of its own), its walked layers the spec's
    infer_graph_auto_info info;
    CHECK(infer_graph_auto(m, ids, T, 0.0, 0, &info, NULL) != INFER_OK && strstr(infer_last_error(), "budget"), "%s: auto with budget 0", fam);
    CHECK(infer_graph_auto(m, ids, 1, 0.01, 0, &info, NULL) != INFER_OK && strstr(infer_last_error(), "at least 2"), "%s: auto on 1 token", fam);
    for (int bi = 0; bi < 3; bi++) {
        static const double budgets[3] = {1e-6, 0.01, 100};
        double budget = budgets[bi];
        int by_contrib = bi == 1;
        double lkl[64 * 6];
        CHECK(infer_graph_auto(m, ids, T, budget, by_contrib, &info, lkl) == INFER_OK, "%s: auto:%g: %s", fam, budget, infer_last_error());
        printf("%s: auto:%g%s chose %s: KL %.3g (sum %.3g), FFN %.1f vs dense %.1f us, %d passes\n", fam, budget, by_contrib ? " (walkc)" : "",
               info.spec, info.kl, info.kl_sum, info.ffn_us, info.dense_ffn_us, info.passes);
        CHECK(info.kl >= 0 && info.kl <= budget && info.positions == T && info.n_pct == 6, "%s: auto:%g: KL %g, %d positions", fam, budget,
              info.kl, info.positions);
        layer_plan plan[64];
        char err[256];
        CHECK(L <= 64 && graph_parse(info.spec, L, 0, plan, err, sizeof err), "%s: auto's spec \"%s\": %s", fam, info.spec, err);
        int walked = 0;
        for (int l = 0; l < L && l < 64; l++) walked += plan[l].kind == G_WALK && plan[l].rank == by_contrib;
        CHECK(walked == info.walked, "%s: auto's spec \"%s\" walks %d layers, its report says %d", fam, info.spec, walked, info.walked);
        double sum = 0; // (the walked layers' KLs alone add up to the predicted sum)
        int known = 1;
        for (int l = 0; l < L && l < 64; l++) {
            if (plan[l].kind != G_WALK) continue;
            int j = 0;
            while (j < info.n_pct && info.pct[j] != plan[l].k) j++;
            known &= j < info.n_pct && lkl[l * 6 + j] >= 0;
            if (j < info.n_pct) sum += lkl[l * 6 + j];
        }
        CHECK(known && fabs(sum - info.kl_sum) <= 1e-9 + 1e-9 * sum, "%s: the walked layers' KLs sum to %g, the report's sum %g", fam, sum,
              info.kl_sum);
        infer_ctx_reset(c);
        CHECK(infer_ctx_set_graph(c, info.spec, 0) == INFER_OK && infer_eval(c, ids, T, got, 0) == INFER_OK, "%s: %s", fam, infer_last_error());
        double klm = 0;
        for (int t = 0; t < T; t++) {
            const float *a = dense + (size_t)t * V, *b = got + (size_t)t * V;
            double ma = a[0], mb = b[0], sa = 0, sb = 0;
            for (int i = 1; i < V; i++) ma = a[i] > ma ? a[i] : ma, mb = b[i] > mb ? b[i] : mb;
            for (int i = 0; i < V; i++) sa += exp(a[i] - ma), sb += exp(b[i] - mb);
            for (int i = 0; i < V; i++) {
                double la = a[i] - ma - log(sa), lb = b[i] - mb - log(sb);
                klm += exp(la) * (la - lb);
            }
        }
        klm /= T;
        CHECK(fabs(klm - info.kl) <= 1e-6 + 1e-3 * info.kl, "%s: auto's spec measured again: KL %g, its report %g", fam, klm, info.kl);
        CHECK(!walked || info.ffn_us < info.dense_ffn_us, "%s: auto walks %d layers without a faster FFN (%g vs %g us)", fam, walked, info.ffn_us,
              info.dense_ffn_us);
    }

    infer_ctx_free(c);
    free_walk(m, store);
    free(dense), free(got);
    infer_model_free(m);
}

int main(void) {
    check_parse();
    check_model("llama");
    check_model("gemma3");
    return check_summary("graph");
}
