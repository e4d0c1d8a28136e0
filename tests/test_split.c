// Contexts split over two backends (infer_ctx_set_gpu_layers, pipelined
// layers), on a machine without a GPU: the context's own backend ("the
// device") and its host side are the two host backends (ctx_set_host_side),
// so every move of the residual stream, every FFN run on the other side and
// every KV cache kept on either side runs as it would beside a GPU. For every
// fixture family, llama.cpp's -ngl placements (0, 1, n_layer - 1, n_layer and
// n_layer + 1 layers on the device), pipelined layers (all, a range, and
// beside -ngl) and the roles the other way round must give the logits of the
// unsplit reference backend at every position of a prompt in two passes and
// of single-token decode steps, within the CPU backend's tolerance against
// the reference (test_fixtures); the caches must be where the placement says,
// and written. Then what is refused: pipelined without a second backend,
// placements changed after the first evaluation, batched passes, copies and
// cached layers of split contexts.
#include "check.h"
#include "infer.h"
#include "inference/context.h"

enum { NP1 = 7, NP2 = 5, ND = 3, NT = NP1 + NP2 + ND }; // prompt passes, decode steps: rows of logits

typedef struct {
    const char *home, *host; // the context's backend, the host side's (NULL: unsplit)
    int gpu_layers;          // -1: all
    const char *graph;       // NULL: dense
    int ngl_first;           // gpu layers set before the host side is chosen (either order works)
    int want_split;
} placement;

static void fill(int32_t *ids, int n, int V, unsigned seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((seed = seed * 1103515245u + 12345u) >> 8) % V;
}

// A context of m placed as p (NULL on an error, reported).
static infer_ctx *placed(infer_model *m, const placement *p, const char *what) {
    infer_ctx *c = NULL;
    int ok = infer_ctx_new(m, 32, &c) == INFER_OK && infer_ctx_set_backend(c, p->home) == INFER_OK;
    if (ok && p->ngl_first) ok = infer_ctx_set_gpu_layers(c, p->gpu_layers) == INFER_OK;
    if (ok && p->host) ok = ctx_set_host_side(c, p->host) == INFER_OK;
    if (ok && !p->ngl_first) ok = infer_ctx_set_gpu_layers(c, p->gpu_layers) == INFER_OK;
    if (ok && p->graph) ok = infer_ctx_set_graph(c, p->graph, 0) == INFER_OK;
    CHECK(ok, "%s: placing: %s", what, infer_last_error());
    if (!ok) infer_ctx_free(c);
    return ok ? c : NULL;
}

// Every layer's own K/V cache on the side of its attention (and nowhere
// else unless a layer on the other side reads it), its first row written.
static void check_caches(const infer_ctx *c, const char *what) {
    const infer_config *cf = &c->m->cfg;
    int L = cf->n_layer;
    for (int il = 0; il < L; il++) {
        if (cf->layers[il].kv_source != il) continue;
        int on[2] = {0, 0}; // readers of this cache per side (0: the host side)
        for (int j = 0; j < L; j++)
            if (cf->layers[j].kv_source == il) on[c->att_dev[j]] = 1;
        float *dev = c->own.k_cache[il], *host = c->host.k_cache[il];
        CHECK(!dev == !on[1] && !host == !on[0], "%s: layer %d's cache: on the device %d (want %d), on the host side %d (want %d)",
              what, il, dev != NULL, on[1], host != NULL, on[0]);
        float *k = c->att_dev[il] ? dev : host;
        int nz = 0;
        for (int i = 0; k && i < cf->layers[il].n_kv_head * cf->layers[il].head_dim; i++) nz |= k[i] != 0;
        CHECK(nz, "%s: layer %d's cache on the side of its attention holds nothing", what, il);
    }
}

// The prompt in two passes (logits at every position), then ND decode
// steps: NT rows of logits into out.
static int run(infer_ctx *c, const int32_t *ids, float *out, int V, const char *what) {
    int ok = infer_eval(c, ids, NP1, out, 0) == INFER_OK;
    ok = ok && infer_eval(c, ids + NP1, NP2, out + (size_t)NP1 * V, 0) == INFER_OK;
    for (int i = NP1 + NP2; ok && i < NT; i++) ok = infer_eval(c, ids + i, 1, out + (size_t)i * V, 1) == INFER_OK;
    CHECK(ok, "%s: %s", what, infer_last_error());
    return ok;
}

static void check_family(const char *name, const char *dir, int share_kv) {
    infer_model *m;
    if (infer_model_load(dir, &m)) {
        CHECK(0, "%s: %s", name, infer_last_error());
        return;
    }
    if (share_kv) // (no fixture shares K/V across layers: Gemma 4's layer 4 made to read layer 3's, both runs alike)
        m->cfg.layers[4].kv_source = 3;
    int V = infer_model_n_vocab(m), L = infer_model_n_layer(m), E = infer_model_n_embd(m);
    int32_t ids[NT];
    fill(ids, NT, V, 1234u);
    float *want = malloc(sizeof(float) * NT * V), *got = malloc(sizeof(float) * NT * V);
    placement ref = {"reference", NULL, -1, NULL, 0, 0};
    infer_ctx *c = placed(m, &ref, name);
    if (!c || !run(c, ids, want, V, name)) {
        infer_ctx_free(c), infer_model_free(m), free(want), free(got);
        return;
    }
    CHECK(!infer_ctx_split(c), "%s: an unsplit context says it is split", name);
    infer_ctx_free(c);

    char range[32], last[32];
    snprintf(range, sizeof range, "pipelined:1-%d", L - 2);
    snprintf(last, sizeof last, "pipelined:%d", L - 1);
    placement ps[] = {
        {"reference", "cpu", 0, NULL, 0, 1},       // every layer on the host side, the output on the device
        {"reference", "cpu", 1, NULL, 0, 1},
        {"reference", "cpu", L - 1, NULL, 1, 1},
        {"reference", "cpu", L, NULL, 0, 1},       // every layer on the device, the output on the host side
        {"reference", "cpu", L + 1, NULL, 0, 0},   // everything on the device: not split
        {"reference", "cpu", -1, "pipelined", 0, 1},
        {"reference", "cpu", -1, range, 1, 1},
        {"reference", "cpu", 1, "pipelined:0", 0, 1}, // beside -ngl: layer 0's FFN on the device, its attention not
        {"reference", "cpu", 2, last, 0, 1},          // the last layer pipelined among device layers
        {"cpu", "reference", 1, NULL, 0, 1},          // the roles the other way round
        {"cpu", "reference", -1, range, 0, 1},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        const placement *p = &ps[i];
        char what[160];
        snprintf(what, sizeof what, "%s%s: %s + %s, %d device layers%s%s", name, share_kv ? " (shared K/V)" : "", p->home, p->host,
                 p->gpu_layers, p->graph ? ", " : "", p->graph ? p->graph : "");
        if (!(c = placed(m, p, what))) continue;
        CHECK(infer_ctx_split(c) == p->want_split, "%s: split %d, want %d", what, infer_ctx_split(c), p->want_split);
        memset(got, 0, sizeof(float) * NT * V);
        if (run(c, ids, got, V, what)) {
            for (int r = 0; r < NT; r++) {
                double e = test_rel_err(got + (size_t)r * V, want + (size_t)r * V, (size_t)V);
                CHECK(e <= 1e-4, "%s: row %d (%s): max error %.3g of the RMS from unsplit", what, r, r < NP1 + NP2 ? "prompt" : "decode", e);
                if (e > worst) worst = e;
            }
            CHECK(infer_ctx_n_past(c) == NT, "%s: %d positions after the run", what, infer_ctx_n_past(c));
            CHECK(c->on_dev == 1 && !strcmp(infer_ctx_backend(c), p->home), "%s: left on the host side", what);
            if (p->want_split) check_caches(c, what);
        }
        // a fresh start (reset) runs the same again
        infer_ctx_reset(c);
        if (p->want_split && run(c, ids, got, V, what))
            CHECK(test_rel_err(got, want, (size_t)NT * V) <= 1e-4, "%s: again after a reset", what);
        infer_ctx_free(c);
    }
    // beside a GPU: the cuda backend with the CPU as the host side, against the unsplit reference (the
    // cuda backend's own tolerance: f16 K/V, its summation order), and against unsplit cuda where all is there
    if (infer_gpu_count() > 0 && !share_kv) {
        placement gs[] = {
            {"cuda", NULL, 0, NULL, 1, 1}, {"cuda", NULL, 1, NULL, 1, 1}, {"cuda", NULL, L - 1, NULL, 1, 1},
            {"cuda", NULL, L, NULL, 1, 1}, {"cuda", NULL, L + 1, NULL, 1, 0}, {"cuda", NULL, -1, "pipelined", 0, 1},
            {"cuda", NULL, -1, range, 0, 1},
        };
        double gworst = 0;
        int tried = 0;
        for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) {
            const placement *p = &gs[i];
            char what[160];
            snprintf(what, sizeof what, "%s: cuda + cpu, %d GPU layers%s%s", name, p->gpu_layers, p->graph ? ", " : "", p->graph ? p->graph : "");
            infer_ctx *g = NULL;
            int ok = infer_ctx_new(m, 32, &g) == INFER_OK && infer_ctx_set_gpu_layers(g, p->gpu_layers) == INFER_OK;
            if (ok && infer_ctx_set_backend(g, "cuda") == INFER_ERR_UNSUPPORTED) { // (a family the GPU does not run yet)
                printf("%-20s cuda placements not run: %s\n", name, infer_last_error());
                infer_ctx_free(g);
                break;
            }
            ok = ok && !strcmp(infer_ctx_backend(g), "cuda") && (!p->graph || infer_ctx_set_graph(g, p->graph, 0) == INFER_OK);
            CHECK(ok, "%s: placing: %s", what, infer_last_error());
            if (ok) CHECK(infer_ctx_split(g) == p->want_split, "%s: split %d, want %d", what, infer_ctx_split(g), p->want_split);
            if (ok && run(g, ids, got, V, what)) {
                tried++;
                for (int r = 0; r < NT; r++) {
                    double e = test_rel_err(got + (size_t)r * V, want + (size_t)r * V, (size_t)V);
                    CHECK(e <= 2e-3, "%s: row %d: max error %.3g of the RMS from the unsplit reference", what, r, e);
                    if (e > gworst) gworst = e;
                }
            }
            infer_ctx_free(g);
        }
        if (tried) printf("%-20s cuda + cpu: %d placements, max error %.2e of the RMS from the unsplit reference\n", name, tried, gworst);
    }
    // hidden states along a split pass
    if (!share_kv) {
        float *hw = malloc(sizeof(float) * (size_t)(L + 1) * E), *hg = malloc(sizeof(float) * (size_t)(L + 1) * E);
        placement half = {"reference", "cpu", L / 2, NULL, 0, 1};
        infer_ctx *a = placed(m, &ref, name), *b = placed(m, &half, name);
        if (a && b) {
            CHECK(infer_eval_hidden(a, ids, NP1, NULL, 1, hw) == INFER_OK && infer_eval_hidden(b, ids, NP1, NULL, 1, hg) == INFER_OK, "%s: %s", name,
                  infer_last_error());
            CHECK(test_rel_err(hg, hw, (size_t)(L + 1) * E) <= 1e-4, "%s: hidden states of a split pass differ", name);
        }
        infer_ctx_free(a), infer_ctx_free(b), free(hw), free(hg);
    }
    printf("%-20s %s%2d layers: %zu placements, max error %.2e of the RMS from unsplit\n", name, share_kv ? "(shared K/V) " : "", L,
           sizeof ps / sizeof *ps, worst);
    free(want), free(got);
    infer_model_free(m);
}

// What is refused, and what is left as it was.
static void check_errors(const char *dir) {
    infer_model *m;
    if (infer_model_load(dir, &m)) {
        CHECK(0, "%s", infer_last_error());
        return;
    }
    int V = infer_model_n_vocab(m), L = infer_model_n_layer(m);
    int32_t ids[4] = {1, 2, 3, 4};
    float *lg = malloc(sizeof(float) * V);
    infer_ctx *c, *d;

    // a context on the CPU alone: pipelined has no GPU to run on, -ngl changes nothing
    CHECK(infer_ctx_new(m, 16, &c) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_ctx_set_graph(c, "pipelined", 0) == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "GPU"), "pipelined on the CPU: %s",
          infer_last_error());
    CHECK(infer_ctx_set_graph(c, "pipelined:0", 0) == INFER_ERR_UNSUPPORTED, "pipelined:0 on the CPU accepted");
    CHECK(infer_ctx_set_gpu_layers(c, 1) == INFER_OK && !infer_ctx_split(c), "-ngl on the CPU: %s", infer_last_error());
    CHECK(infer_ctx_set_gpu_layers(c, -2) == INFER_ERR_ARG, "-2 GPU layers accepted");
    CHECK(ctx_set_host_side(c, "cuda") == INFER_ERR_ARG && ctx_set_host_side(c, "nonsense") == INFER_ERR_ARG, "a host side not a host backend");
    CHECK(infer_eval(c, ids, 2, lg, 1) == INFER_OK, "%s", infer_last_error());
    infer_ctx_free(c);

    // a split context, once evaluated: its placement stays
    CHECK(infer_ctx_new(m, 16, &c) == INFER_OK && ctx_set_host_side(c, "cpu") == INFER_OK && infer_ctx_set_gpu_layers(c, 1) == INFER_OK,
          "%s", infer_last_error());
    CHECK(infer_ctx_split(c), "1 device layer of %d: not split", L);
    CHECK(infer_eval(c, ids, 2, lg, 1) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_ctx_set_gpu_layers(c, 2) == INFER_ERR_ARG && strstr(infer_last_error(), "first evaluation"), "-ngl changed after evaluation: %s",
          infer_last_error());
    CHECK(infer_ctx_set_gpu_layers(c, -1) == INFER_ERR_ARG, "unsplit after evaluation");
    CHECK(infer_ctx_set_graph(c, "pipelined", 0) == INFER_ERR_ARG, "pipelined after evaluation");
    CHECK(infer_ctx_set_gpu_layers(c, 1) == INFER_OK, "the same placement again: %s", infer_last_error());
    CHECK(infer_ctx_n_past(c) == 2 && infer_ctx_split(c), "a refused change moved the context");
    CHECK(infer_eval(c, ids + 2, 1, lg, 1) == INFER_OK, "after the refusals: %s", infer_last_error());

    // batched passes and copies refuse it, and leave it as it was
    infer_batch *b;
    CHECK(infer_batch_new(m, &b) == INFER_OK, "%s", infer_last_error());
    const int32_t *pid[1] = {ids + 3};
    int n1[1] = {1};
    float *out[1] = {lg};
    CHECK(infer_batch_eval(b, &c, 1, pid, n1, out) == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "split"), "batch: %s",
          infer_last_error());
    CHECK(infer_ctx_n_past(c) == 3, "a refused batch moved the context");
    CHECK(infer_ctx_new(m, 16, &d) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_ctx_copy(d, c, 2) == INFER_ERR_UNSUPPORTED && infer_ctx_copy(c, d, 0) == INFER_ERR_UNSUPPORTED, "copies of a split context");
    CHECK(infer_batch_eval(b, &d, 1, pid, n1, out) == INFER_OK, "an unsplit context beside it: %s", infer_last_error());
    infer_ctx_free(d);
    infer_batch_free(b);
    infer_ctx_free(c);

    // cached layers run on one backend
    CHECK(infer_ctx_new(m, 16, &c) == INFER_OK && ctx_set_host_side(c, "cpu") == INFER_OK && infer_ctx_set_gpu_layers(c, 1) == INFER_OK,
          "%s", infer_last_error());
    CHECK(infer_ctx_set_graph(c, "cached:0-0", 0) == INFER_ERR_UNSUPPORTED, "cached layers on a split context");
    CHECK(infer_ctx_set_gpu_layers(c, -1) == INFER_OK && !infer_ctx_split(c), "unsplit again before evaluating: %s", infer_last_error());
    CHECK(infer_ctx_set_graph(c, "cached:0-0", 0) == INFER_OK, "cached layers unsplit: %s", infer_last_error());
    CHECK(infer_ctx_set_gpu_layers(c, 1) == INFER_ERR_UNSUPPORTED, "a split under cached layers");
    infer_ctx_free(c);
    free(lg);
    infer_model_free(m);
}

int main(int argc, char **argv) {
    char **dirs;
    int n = test_fixture_dirs(&dirs, argc > 1 ? argv[1] : NULL);
    CHECK(n > 0, "no fixture families under %s", FIXTURES_DIR);
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(dirs[i], '/') + 1;
        check_family(name, dirs[i], 0);
        if (!strcmp(name, "gemma4")) check_family(name, dirs[i], 1);
        if (!strcmp(name, "llama")) check_errors(dirs[i]);
        free(dirs[i]);
    }
    free(dirs);
    return check_summary("test_split");
}
