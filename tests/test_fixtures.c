// Checks one fixture family against transformers' float32 outputs:
// logits at every position, the residual stream after every layer, greedy
// generation with the KV cache, and the cache giving the same logits when the
// prompt arrives in pieces.
#include "check.h"
#include "infer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(n * sizeof *x);
    size_t got = x ? fread(x, sizeof *x, n, f) : 0;
    fclose(f);
    if (got != n) { free(x); return NULL; }
    return x;
}

static int32_t *ids_of(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int32_t *ids = malloc(sizeof *ids * (size_t)*n);
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next) ids[i++] = (int32_t)e->valuedouble;
    return ids;
}

// max |a - b| / rms(b)
int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) { fprintf(stderr, "usage: test_fixtures FAMILY [ROOT]\n"); return 2; }
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", argc == 3 ? argv[2] : FIXTURES_DIR, argv[1]);
    snprintf(path, sizeof path, "%s/reference.json", dir);
    char *text = test_read_file(path, NULL);
    if (!text) { fprintf(stderr, "cannot read %s\n", path); return 1; }
    cJSON *ref = cJSON_Parse(text);
    free(text);
    int T, n_prompt, n_greedy;
    int32_t *ids = ids_of(cJSON_GetObjectItem(ref, "input_ids"), &T);
    int32_t *prompt = ids_of(cJSON_GetObjectItem(ref, "greedy_prompt"), &n_prompt);
    int32_t *want = ids_of(cJSON_GetObjectItem(ref, "greedy_new_tokens"), &n_greedy);

    infer_model *m;
    if (infer_model_load(dir, &m)) { fprintf(stderr, "load: %s\n", infer_last_error()); return 1; }
    int V = infer_model_n_vocab(m), L = infer_model_n_layer(m), E = infer_model_n_embd(m);
    snprintf(path, sizeof path, "%s/ref_logits.f32", dir);
    float *ref_logits = read_f32(path, (size_t)T * V);
    snprintf(path, sizeof path, "%s/ref_hidden_last.f32", dir);
    float *ref_hidden = read_f32(path, (size_t)(L + 1) * E);
    CHECK(ref_logits && ref_hidden, "reference files of %s", dir);
    if (!ref_logits || !ref_hidden) return 1;

    // 1. logits at every position and the residual stream at the last one
    infer_ctx *c;
    CHECK(infer_ctx_new(m, T + n_greedy + 8, &c) == INFER_OK, "%s", infer_last_error());
    float *logits = malloc(sizeof(float) * (size_t)T * V);
    float *hidden = malloc(sizeof(float) * (size_t)(L + 1) * E);
    CHECK(infer_eval_hidden(c, ids, T, logits, 0, hidden) == INFER_OK, "%s", infer_last_error());
    double e = test_rel_err(logits, ref_logits, (size_t)T * V);
    CHECK(e <= 1e-3, "logits: max error %.3g of the RMS", e);
    int top_ok = 1;
    for (int t = 0; t < T; t++) top_ok &= test_argmax(logits + (size_t)t * V, V) == test_argmax(ref_logits + (size_t)t * V, V);
    CHECK(top_ok, "top-1 differs at some position");
    for (int l = 0; l <= L; l++) {
        double he = test_rel_err(hidden + (size_t)l * E, ref_hidden + (size_t)l * E, (size_t)E);
        CHECK(he <= 1e-3, "hidden row %d (%s): max error %.3g of the RMS", l, l == L ? "after final norm" : "residual", he);
    }

    // 2. the same logits when the prompt arrives in pieces through the cache
    float *piece = malloc(sizeof(float) * (size_t)T * V);
    infer_ctx_reset(c);
    int cuts[] = {0, 5, 6, 13, T};
    for (int k = 0; k + 1 < 5; k++) {
        int a = cuts[k], b = cuts[k + 1] < T ? cuts[k + 1] : T;
        if (a >= b) continue;
        CHECK(infer_eval(c, ids + a, b - a, piece + (size_t)a * V, 0) == INFER_OK, "%s", infer_last_error());
    }
    e = test_rel_err(piece, ref_logits, (size_t)T * V);
    CHECK(e <= 1e-3, "logits through the cache in pieces: max error %.3g of the RMS", e);

    // 3. greedy generation with the KV cache
    infer_ctx_reset(c);
    float *last = malloc(sizeof(float) * (size_t)V);
    CHECK(infer_eval(c, prompt, n_prompt, last, 1) == INFER_OK, "%s", infer_last_error());
    int same = 1;
    for (int i = 0; i < n_greedy; i++) {
        int32_t tok = test_argmax(last, V);
        if (tok != want[i]) { same = 0; fprintf(stderr, "greedy token %d: got %d want %d\n", i, tok, want[i]); break; }
        if (i + 1 < n_greedy) CHECK(infer_eval(c, &tok, 1, last, 1) == INFER_OK, "%s", infer_last_error());
    }
    CHECK(same, "greedy tokens differ");

    // 4. the thread pool splits rows without changing any result
    CHECK(infer_ctx_set_threads(c, 2) == INFER_OK, "%s", infer_last_error());
    infer_ctx_reset(c);
    CHECK(infer_eval(c, ids, T, piece, 0) == INFER_OK, "%s", infer_last_error());
    CHECK(memcmp(piece, logits, sizeof(float) * (size_t)T * V) == 0, "logits with 2 threads differ from 1 thread");
    CHECK(infer_ctx_set_threads(c, 1) == INFER_OK, "%s", infer_last_error());

    // 5. the reference backend (the scalar oracles) against transformers, and
    // the CPU backend against it
    CHECK(infer_ctx_set_backend(c, "nosuch") == INFER_ERR_ARG, "an unknown backend was accepted");
    CHECK(infer_ctx_set_backend(c, "reference") == INFER_OK && !strcmp(infer_ctx_backend(c), "reference"), "%s",
          infer_last_error());
    infer_ctx_reset(c);
    CHECK(infer_eval(c, ids, T, piece, 0) == INFER_OK, "%s", infer_last_error());
    e = test_rel_err(piece, ref_logits, (size_t)T * V);
    CHECK(e <= 1e-3, "reference backend: logits max error %.3g of the RMS", e);
    top_ok = 1;
    for (int t = 0; t < T; t++) top_ok &= test_argmax(piece + (size_t)t * V, V) == test_argmax(ref_logits + (size_t)t * V, V);
    CHECK(top_ok, "reference backend: top-1 differs at some position");
    double ec = test_rel_err(logits, piece, (size_t)T * V);
    CHECK(ec <= 1e-4, "CPU backend against the reference backend: max error %.3g of the RMS", ec);
    printf("%-12s reference backend: %.2e of RMS from transformers; CPU backend %.2e from it\n", argv[1], e, ec);
    CHECK(infer_ctx_set_backend(c, "cpu") == INFER_OK, "%s", infer_last_error());

    // 5b. a decoder's embedding (infer_embed, last-token pooling): transformers' final-norm row at the last
    // position, and normalized, that row over its L2 norm
    if (!infer_model_is_encoder(m)) {
        float *emb = malloc(sizeof(float) * (size_t)E * 2);
        CHECK(emb && infer_embed(c, ids, T, INFER_POOLING_LAST, 0, emb) == INFER_OK && infer_embed(c, ids, T, INFER_POOLING_LAST, 1, emb + E) == INFER_OK,
              "infer_embed: %s", infer_last_error());
        const float *want_e = ref_hidden + (size_t)L * E;
        double ee = emb ? test_rel_err(emb, want_e, (size_t)E) : 1, nn = 0, cs = 0, en = 0;
        for (int j = 0; emb && j < E; j++) nn += (double)want_e[j] * want_e[j], cs += (double)emb[E + j] * want_e[j], en += (double)emb[E + j] * emb[E + j];
        cs /= sqrt(nn) * sqrt(en) + 1e-30;
        CHECK(ee <= 1e-3 && fabs(en - 1) <= 1e-5 && cs >= 0.99999, "decoder embedding (last token): max error %.3g of the RMS, "
              "normalized |e|^2 %.7f, cosine %.7f against transformers' final-norm row", ee, en, cs);
        free(emb);
    }

    // 6. the CUDA backend, where there is a GPU, against transformers and the
    // reference backend (a fresh context: its cache lives on the GPU), whole
    // and through the cache a token at a time
    infer_ctx *g = NULL;
    if (infer_ctx_new(m, 0, &g) == INFER_OK) {
        infer_status st = infer_ctx_set_backend(g, "cuda");
        float *gl = malloc(sizeof(float) * (size_t)T * V);
        if (st == INFER_OK && gl) {
            float *last = gl;
            CHECK(infer_eval(g, ids, T, last, 0) == INFER_OK, "cuda: %s", infer_last_error());
            double eg = test_rel_err(last, ref_logits, (size_t)T * V), er = test_rel_err(last, piece, (size_t)T * V);
            CHECK(eg <= 1e-3, "cuda backend: logits max error %.3g of the RMS from transformers", eg);
            CHECK(er <= 1e-4, "cuda backend against the reference backend: max error %.3g of the RMS", er);
            infer_ctx_reset(g);
            for (int t = 0; t < T; t++) CHECK(infer_eval(g, ids + t, 1, last + (size_t)t * V, 0) == INFER_OK, "cuda: %s", infer_last_error());
            double ep = test_rel_err(last, piece, (size_t)T * V);
            CHECK(ep <= 1e-4, "cuda backend, a token at a time: max error %.3g of the RMS from the reference backend", ep);
            printf("%-12s cuda backend: %.2e of RMS from transformers, %.2e from the reference backend (%.2e a token at a time)\n",
                   argv[1], eg, er, ep);
            // fused kernels (INFER_CUDA_FUSE=1: the norm and the quantization of its product's input in one)
            // give the same bits
            float *gf = malloc(sizeof(float) * (size_t)T * V);
            infer_ctx *g2 = NULL;
            setenv("INFER_CUDA_FUSE", "1", 1);
            if (gf && infer_ctx_new(m, 0, &g2) == INFER_OK && infer_ctx_set_backend(g2, "cuda") == INFER_OK) {
                infer_ctx_reset(g);
                CHECK(infer_eval(g, ids, T, last, 0) == INFER_OK && infer_eval(g2, ids, T, gf, 0) == INFER_OK, "cuda: %s", infer_last_error());
                CHECK(!memcmp(gf, last, sizeof(float) * (size_t)T * V), "cuda backend: fused kernels change the logits");
            }
            unsetenv("INFER_CUDA_FUSE");
            infer_ctx_free(g2);
            free(gf);
        } else {
            CHECK(st == INFER_ERR_UNSUPPORTED, "cuda backend refused with %d: %s", st, infer_last_error());
            printf("%-12s cuda backend not run: %s\n", argv[1], infer_last_error());
        }
        free(gl);
        infer_ctx_free(g);
    }

    free(last);
    free(piece);
    free(hidden);
    free(logits);
    free(ref_logits);
    free(ref_hidden);
    free(ids);
    free(prompt);
    free(want);
    infer_ctx_free(c);
    infer_model_free(m);
    cJSON_Delete(ref);
    char name[256];
    snprintf(name, sizeof name, "fixture %s", argv[1]);
    return check_summary(name);
}
