// Batched evaluation against each sequence alone, bit for bit: prompts of
// different lengths (one longer than a pass) evaluated together, then greedy
// decode steps of every sequence in one call each, a new sequence's prompt
// joining the decoders mid-way, a sequence truncated and continued, one
// removed, and one that starts from a copy of another's prompt prefix. Every
// step's logits must equal infer_eval's on the same sequence alone -- on every
// fixture family and on the default model, with 1 and 2 threads, and on the
// GPU where there is one (a pass there runs long prompt runs on the tensor
// cores and decode rows as q8 products, each as it would alone; the step
// with twelve more sequences makes a pass of over 16 decode-like rows; and
// on the llama fixture again with every graph capture failing).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "infer.h"

enum { MAX_SEQ = 20, MAX_IDS = 80 };

typedef struct {
    infer_model *m;
    const char *backend;      // NULL: the CPU
    int V, n_ctx, threads;
    infer_ctx *c[2][MAX_SEQ]; // [world][seq]: world 0 batched, world 1 alone
    infer_batch *batch;
    float *lg[2][MAX_SEQ];    // the logits after each sequence's last token of the step
    float *rows;              // every other step, the batch's logits into one buffer, a row a sequence (the pass
                              // copies rows that follow one another in one download)
    int diff, steps;
} world;

static int32_t argmax(const float *x, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

// One step: sequence seqs[k] takes ids[k][0..n[k]) in both worlds; compares
// the logits, and the batch's greedy tokens (infer_batch_eval_tokens) with
// the first largest logit; tokens_only: the batch gives the tokens alone (on a
// GPU the logits never leave it), compared with alone's logits.
static void step(world *w, int count, const int *seqs, int32_t *const *ids, const int *n, const char *what, int tokens_only) {
    infer_ctx *ctx[MAX_SEQ];
    float *out[MAX_SEQ];
    int32_t tok[MAX_SEQ], *tk[MAX_SEQ];
    const int contig = w->rows && w->steps % 2;
    for (int k = 0; k < count; k++)
        ctx[k] = w->c[0][seqs[k]], out[k] = tokens_only ? NULL : contig ? w->rows + (size_t)k * w->V : w->lg[0][seqs[k]], tk[k] = &tok[k],
        tok[k] = -1;
    infer_status st = infer_batch_eval_tokens(w->batch, ctx, count, (const int32_t *const *)ids, n, out, tk);
    CHECK(st == INFER_OK, "%s: batch: %s", what, infer_last_error());
    for (int k = 0; k < count && contig && !tokens_only; k++) memcpy(w->lg[0][seqs[k]], w->rows + (size_t)k * w->V, sizeof(float) * (size_t)w->V);
    for (int k = 0; k < count; k++) {
        int s = seqs[k];
        CHECK(infer_eval(w->c[1][s], ids[k], n[k], w->lg[1][s], 1) == INFER_OK, "%s: alone: %s", what, infer_last_error());
        if (!st && !tokens_only && memcmp(w->lg[0][s], w->lg[1][s], sizeof(float) * (size_t)w->V)) {
            w->diff++;
            fprintf(stderr, "%s: sequence %d differs from alone\n", what, s);
        }
        if (tokens_only) memcpy(w->lg[0][s], w->lg[1][s], sizeof(float) * (size_t)w->V);
        CHECK(st || tok[k] == argmax(w->lg[1][s], w->V), "%s: sequence %d: greedy token %d, the largest logit is at %d", what, s, tok[k],
              argmax(w->lg[1][s], w->V));
    }
    w->steps++;
}

static void new_seq(world *w, int s) {
    for (int k = 0; k < 2; k++) {
        CHECK(ctx_threads(w->m, w->n_ctx, w->threads, &w->c[k][s]) == INFER_OK, "%s", infer_last_error());
        if (w->backend) CHECK(infer_ctx_set_backend(w->c[k][s], w->backend) == INFER_OK, "%s", infer_last_error());
        // (a GPU's batch is each sequence alone bit for bit where the contexts are deterministic: by default
        // its products take the pass's rows as one)
        if (w->backend) CHECK(infer_ctx_set_deterministic(w->c[k][s], 1) == INFER_OK, "%s", infer_last_error());
        w->lg[k][s] = malloc(sizeof(float) * (size_t)w->V);
    }
}

static void fill(int32_t *ids, int n, int V, unsigned seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((seed = seed * 1103515245u + 12345u) >> 8) % V;
}

static void check_model(const char *name, const char *path, int threads, const char *backend) {
    world w = {0};
    w.backend = backend;
    if (infer_model_load(path, &w.m)) {
        CHECK(0, "%s: %s", name, infer_last_error());
        return;
    }
    w.V = infer_model_n_vocab(w.m);
    w.n_ctx = 96;
    w.threads = threads;
    w.rows = malloc(sizeof(float) * (size_t)MAX_SEQ * w.V);
    CHECK(infer_batch_new(w.m, &w.batch) == INFER_OK && infer_batch_set_threads(w.batch, threads) == INFER_OK, "%s", infer_last_error());
    // a model of fewer learned positions (the gpt2 fixture) gets a smaller context
    infer_ctx *probe = NULL;
    if (infer_ctx_new(w.m, w.n_ctx, &probe)) w.n_ctx = 32;
    infer_ctx_free(probe);
    probe = NULL;
    if (backend && (infer_ctx_new(w.m, w.n_ctx, &probe) || infer_ctx_set_backend(probe, backend) == INFER_ERR_UNSUPPORTED)) {
        printf("%-24s %-4s not run: %s\n", name, backend, infer_last_error()); // (what the backend does not run yet, said)
        infer_ctx_free(probe);
        infer_batch_free(w.batch);
        infer_model_free(w.m);
        free(w.rows);
        return;
    }
    infer_ctx_free(probe);
    int longp = w.n_ctx >= 96 ? 70 : 20; // longer than a pass (64 rows) where the model allows
    static int32_t buf[MAX_SEQ][MAX_IDS];
    int32_t *ids[MAX_SEQ];
    int n[MAX_SEQ], seqs[MAX_SEQ];
    for (int s = 0; s < MAX_SEQ; s++) ids[s] = buf[s];

    // step 0: four prompts together (5, long, 1 and 12 tokens)
    int plen[4] = {5, longp, 1, 12};
    for (int s = 0; s < 4; s++) {
        new_seq(&w, s);
        fill(buf[s], plen[s], w.V, 77u + (unsigned)s);
        seqs[s] = s, n[s] = plen[s];
    }
    step(&w, 4, seqs, ids, n, "prompts", 0);
    // steps 1..6: everyone decodes its greedy token; more sequences come and go; step 6 reads back tokens alone
    for (int it = 1; it <= 6; it++) {
        int count = 0;
        for (int s = 0; s < MAX_SEQ; s++) {
            if (!w.c[0][s]) continue;
            if (it >= 4 && s == 2) continue; // sequence 2 has left
            buf[s][0] = argmax(w.lg[0][s], w.V);
            seqs[count] = s, ids[count] = buf[s], n[count] = 1, count++;
        }
        if (it == 2) { // a new prompt joins the decoders
            new_seq(&w, 4);
            fill(buf[4], 9, w.V, 4242u);
            seqs[count] = 4, ids[count] = buf[4], n[count] = 9, count++;
        }
        if (it == 3) { // sequence 3 forgets its last 3 positions and goes on from there
            infer_ctx_truncate(w.c[0][3], infer_ctx_n_past(w.c[0][3]) - 3);
            infer_ctx_truncate(w.c[1][3], infer_ctx_n_past(w.c[1][3]) - 3);
            // sequence 5 starts from sequence 0's first 4 positions, then 2 tokens of its own
            new_seq(&w, 5);
            for (int k = 0; k < 2; k++)
                CHECK(infer_ctx_copy(w.c[k][5], w.c[k][0], 4) == INFER_OK, "%s", infer_last_error());
            fill(buf[5], 2, w.V, 555u);
            seqs[count] = 5, ids[count] = buf[5], n[count] = 2, count++;
        }
        if (it == 5) // twelve more sequences of two-token prompts: a pass of many short runs
            for (int s = 6; s < 18; s++) {
                new_seq(&w, s);
                fill(buf[s], 2, w.V, 9000u + (unsigned)s);
                seqs[count] = s, ids[count] = buf[s], n[count] = 2, count++;
            }
        char what[64];
        snprintf(what, sizeof what, "%s, %s, %d threads, step %d", name, backend ? backend : "cpu", threads, it);
        step(&w, count, seqs, ids, n, what, it == 6);
    }
    CHECK(w.diff == 0, "%s (%s): %d sequence steps differ from their runs alone", name, backend ? backend : "cpu", w.diff);
    printf("%-24s %-4s %d threads: %d batched steps, every sequence bit-identical to alone\n", name, backend ? backend : "cpu",
           threads, w.steps);
    // bad calls are refused and change nothing
    infer_ctx *both[2] = {w.c[0][0], w.c[0][0]};
    int32_t one = 0, *two[2] = {&one, &one};
    int n2[2] = {1, 1}, past = infer_ctx_n_past(w.c[0][0]);
    CHECK(infer_batch_eval(w.batch, both, 2, (const int32_t *const *)two, n2, NULL) == INFER_ERR_ARG, "a context twice");
    int32_t bad = w.V;
    int32_t *badp[1] = {&bad};
    CHECK(infer_batch_eval(w.batch, both, 1, (const int32_t *const *)badp, n2, NULL) == INFER_ERR_ARG, "id outside");
    CHECK(infer_ctx_n_past(w.c[0][0]) == past, "a refused call moved the sequence");
    for (int s = 0; s < MAX_SEQ; s++)
        for (int k = 0; k < 2; k++) infer_ctx_free(w.c[k][s]), free(w.lg[k][s]);
    free(w.rows);
    infer_batch_free(w.batch);
    infer_model_free(w.m);
}

int main(int argc, char **argv) {
    char **dirs;
    // (argument: one family, "default" (the default model), "fixtures" (every family, not the default model), or
    // a .gguf file (on the GPU where there is one: quantized products of several decode rows, on the tensor cores))
    size_t al = argc > 1 ? strlen(argv[1]) : 0;
    if (al > 5 && !strcmp(argv[1] + al - 5, ".gguf")) {
        int gpu = infer_gpu_count() > 0;
        check_model(argv[1], argv[1], 1, gpu ? "cuda" : NULL);
        return check_summary("test_batch");
    }
    int all = argc < 2 || !strcmp(argv[1], "fixtures");
    int n = test_fixture_dirs(&dirs, all ? NULL : argv[1]), gpu = infer_gpu_count() > 0;
    if (!gpu) printf("cuda: skipped (%s)\n", infer_gpu_status());
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(dirs[i], '/') + 1;
        check_model(name, dirs[i], 1, NULL);
        check_model(name, dirs[i], 2, NULL);
        if (gpu) check_model(name, dirs[i], 1, "cuda");
        if (gpu && !strcmp(name, "llama")) { // (a graph capture that fails -- an upload or a scratch that would grow inside
            // it -- is no failure: the pass runs again without it, with the same numbers)
            setenv("INFER_CUDA_CAPTURE_FAULT", "1", 1);
            check_model("llama, every graph capture failing", dirs[i], 1, "cuda");
            unsetenv("INFER_CUDA_CAPTURE_FAULT");
        }
        free(dirs[i]);
    }
    free(dirs);
    if (argc < 2 || !strcmp(argv[1], "default")) { // (fetched: the device machine has no network, and passes "fixtures")
        char model[1024];
        int have = test_default_model(model, sizeof model);
        CHECK(have, "could not fetch the default model");
        if (have) check_model("default (gemma3 270M)", model, 2, NULL);
        if (have && gpu) check_model("default (gemma3 270M)", model, 1, "cuda");
    }
    return check_summary("test_batch");
}
