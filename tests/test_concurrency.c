// Many contexts on one model at once: 4 threads x 2 contexts each (one of
// them with a pool of 2 threads of its own), every context with its own
// prompt, prefill then greedy decode, interleaved within each thread. Every
// logit must equal what the same context computes alone, bit for bit -- on
// every fixture family and on the default model (whose tokenizer is also
// built by whichever thread asks first). Run under ThreadSanitizer in CI.
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "infer.h"

enum { N_THREADS = 4, PER_THREAD = 2, N_PROMPT = 7, N_GEN = 5 };
enum { N_CTX = N_THREADS * PER_THREAD };

typedef struct {
    infer_model *m;
    int V;
    int32_t prompt[N_CTX][N_PROMPT];
    float *want[N_CTX]; // (N_GEN + 1, V): the last logits after the prompt and after each step
    float *got[N_CTX];
    int32_t *tok_want; // the tokenization of a text, alone
    int n_tok_want;
    int tok_ok[N_THREADS];
} shared;

// One context's run: prompt, then N_GEN greedy steps; logits into out.
static infer_status run_one(infer_model *m, int V, const int32_t *prompt, int threads, float *out) {
    infer_ctx *c = NULL;
    infer_status st = infer_ctx_new(m, N_PROMPT + N_GEN + 1, &c);
    if (!st) st = infer_ctx_set_threads(c, threads);
    if (!st) st = infer_eval(c, prompt, N_PROMPT, out, 1);
    for (int i = 0; !st && i < N_GEN; i++) {
        const float *last = out + (size_t)i * V;
        int32_t tok = 0;
        for (int v = 1; v < V; v++)
            if (last[v] > last[tok]) tok = v;
        st = infer_eval(c, &tok, 1, out + (size_t)(i + 1) * V, 1);
    }
    infer_ctx_free(c);
    return st;
}

typedef struct {
    shared *s;
    int t;
} worker;

// A thread's two contexts, stepped in turns so their passes interleave with
// the other threads'.
static void *run_thread(void *a) {
    worker *w = a;
    shared *s = w->s;
    if (s->tok_want) { // the tokenizer, possibly built right now by another thread
        int32_t *ids = NULL;
        int n = 0;
        const char *text = "The capital of France is <start_of_turn>model";
        s->tok_ok[w->t] = !infer_tokenize(s->m, text, strlen(text), 1, 1, &ids, &n) && n == s->n_tok_want &&
                          !memcmp(ids, s->tok_want, sizeof(int32_t) * (size_t)n);
        free(ids);
    }
    infer_ctx *c[PER_THREAD] = {NULL};
    int32_t tok[PER_THREAD];
    infer_status st = INFER_OK;
    for (int k = 0; k < PER_THREAD && !st; k++) {
        int i = w->t * PER_THREAD + k;
        st = infer_ctx_new(s->m, N_PROMPT + N_GEN + 1, &c[k]);
        if (!st) st = infer_ctx_set_threads(c[k], k == 0 ? 1 : 2);
        if (!st) st = infer_eval(c[k], s->prompt[i], N_PROMPT, s->got[i], 1);
    }
    for (int step = 0; step < N_GEN && !st; step++)
        for (int k = 0; k < PER_THREAD && !st; k++) {
            int i = w->t * PER_THREAD + k;
            const float *last = s->got[i] + (size_t)step * s->V;
            tok[k] = 0;
            for (int v = 1; v < s->V; v++)
                if (last[v] > last[tok[k]]) tok[k] = v;
            st = infer_eval(c[k], &tok[k], 1, s->got[i] + (size_t)(step + 1) * s->V, 1);
        }
    for (int k = 0; k < PER_THREAD; k++) infer_ctx_free(c[k]);
    return st ? (void *)1 : NULL;
}

static void check_model(const char *name, const char *path, int with_tokenizer) {
    shared s = {0};
    if (infer_model_load(path, &s.m)) {
        CHECK(0, "%s: %s", name, infer_last_error());
        return;
    }
    s.V = infer_model_n_vocab(s.m);
    unsigned r = 12345;
    for (int i = 0; i < N_CTX; i++)
        for (int j = 0; j < N_PROMPT; j++) s.prompt[i][j] = (int32_t)((r = r * 1103515245u + 12345u) >> 8) % s.V;
    for (int i = 0; i < N_CTX; i++) {
        s.want[i] = malloc(sizeof(float) * (size_t)(N_GEN + 1) * s.V);
        s.got[i] = calloc((size_t)(N_GEN + 1) * s.V, sizeof(float));
        CHECK(run_one(s.m, s.V, s.prompt[i], i % PER_THREAD == 0 ? 1 : 2, s.want[i]) == INFER_OK, "%s: %s", name,
              infer_last_error());
    }
    if (with_tokenizer) { // the reference tokenization on a model of its own, so the shared one is built in the race
        infer_model *m2 = NULL;
        const char *text = "The capital of France is <start_of_turn>model";
        CHECK(!infer_model_load(path, &m2) && !infer_tokenize(m2, text, strlen(text), 1, 1, &s.tok_want, &s.n_tok_want),
              "%s: %s", name, infer_last_error());
        infer_model_free(m2);
    }
    pthread_t th[N_THREADS];
    worker w[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        w[t] = (worker){&s, t};
        CHECK(pthread_create(&th[t], NULL, run_thread, &w[t]) == 0, "pthread_create");
    }
    int failed = 0;
    for (int t = 0; t < N_THREADS; t++) {
        void *ret;
        pthread_join(th[t], &ret);
        failed += ret != NULL;
    }
    CHECK(!failed, "%s: %d threads failed", name, failed);
    int same = 0;
    for (int i = 0; i < N_CTX; i++) same += !memcmp(s.want[i], s.got[i], sizeof(float) * (size_t)(N_GEN + 1) * s.V);
    CHECK(same == N_CTX, "%s: %d of %d contexts differ from their runs alone", name, N_CTX - same, N_CTX);
    if (with_tokenizer)
        for (int t = 0; t < N_THREADS; t++) CHECK(s.tok_ok[t], "%s: thread %d tokenized differently", name, t);
    printf("%-24s %d contexts on %d threads: %d bit-identical to alone\n", name, N_CTX, N_THREADS, same);
    for (int i = 0; i < N_CTX; i++) free(s.want[i]), free(s.got[i]);
    free(s.tok_want);
    infer_model_free(s.m);
}

int main(int argc, char **argv) {
    // every fixture family (a directory with reference.json)
    char **dirs;
    int n = test_fixture_dirs(&dirs, argc > 1 ? argv[1] : NULL);
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(dirs[i], '/') + 1;
        check_model(name, dirs[i], 0);
        free(dirs[i]);
    }
    free(dirs);
    CHECK(argc > 1 || n >= 17, "only %d fixture families found", n);
    if (argc < 2 || !strcmp(argv[1], "default")) {
        char model[1024];
        int have = test_default_model(model, sizeof model);
        CHECK(have, "could not fetch the default model");
        if (have) check_model("default (gemma3 270M)", model, 1);
    }
    return check_summary("test_concurrency");
}
