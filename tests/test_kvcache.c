// The KV cache's types (infer_ctx_set_kv_type, llama.cpp's -ctk / -ctv):
// on the default model (a GGUF: ggml's numerics, K and V rounded to f16
// before they are stored) the default f16 cache gives the f32 cache's logits
// bit for bit, in prompt passes and decode steps, alone and batched; q8_0 stays
// close to them (measured: mean KL 7e-3 to 2.6e-2 over 86 positions of a
// text, top-1 the same at 79-80 of 86); the bytes per position follow the types; a safetensors
// fixture defaults to f32; and every misuse is refused by name.
#include "check.h"
#include "infer.h"
#include "compute/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NP = 80, ND = 6 }; // a prompt of two passes (the CPU's 64 rows, then 16), then decode steps

// The prompt's logits at every position, then ND greedy steps' logits:
// (NP + ND) rows of V into out; 0 on an error.
static int run(infer_ctx *c, const int32_t *ids, float *out, int V) {
    if (infer_eval(c, ids, NP, out, 0)) return 0;
    for (int s = 0; s < ND; s++) {
        const float *last = out + (size_t)(NP + s - 1) * V;
        int32_t t = (int32_t)test_argmax(last, V);
        if (infer_eval(c, &t, 1, out + (size_t)(NP + s) * V, 1)) return 0;
    }
    return 1;
}

// mean over rows of KL(p || q) of the softmaxes of logits a (p) and b (q)
static double mean_kl(const float *a, const float *b, int rows, int V) {
    double sum = 0;
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * V, *y = b + (size_t)r * V;
        double mx = -INFINITY, my = -INFINITY, zx = 0, zy = 0, kl = 0;
        for (int i = 0; i < V; i++) mx = fmax(mx, x[i]), my = fmax(my, y[i]);
        for (int i = 0; i < V; i++) zx += exp(x[i] - mx), zy += exp(y[i] - my);
        for (int i = 0; i < V; i++) {
            double lp = x[i] - mx - log(zx), lq = y[i] - my - log(zy);
            kl += exp(lp) * (lp - lq);
        }
        sum += kl;
    }
    return sum / rows;
}

// The CPU's caches grow as they are used, within one budget of the process (host_mem.c; INFER_KV_MEM): a
// context of 262144 positions is made at once and holds nothing; past the budget a reserve is refused by a
// message naming it, and a trimmed or freed context's memory goes back to it; such a context's logits are a
// small one's (want: ref's, a context of 128) bit for bit.
static void budget(infer_model *m, const int32_t *ids, const float *ref, int V) {
    size_t b0, u0 = backend_host_kv_used(&b0);
    infer_ctx *a = NULL, *b = NULL;
    CHECK(!ctx_threads(m, 262144, 2, &a) && !ctx_threads(m, 262144, 2, &b), "two contexts of 262144 positions: %s", infer_last_error());
    if (!a || !b) { infer_ctx_free(a), infer_ctx_free(b); return; }
    const size_t pp = infer_ctx_kv_bytes_per_pos(a);
    CHECK(infer_ctx_kv_backed(a) == 0 && backend_host_kv_used(NULL) == u0, "a context of 262144 positions holds %zu bytes (want 0)",
          infer_ctx_kv_backed(a));
    backend_host_kv_budget(u0 + 1024 * pp + 64 * 4096); // (each layer's caches whole pages: some slack)
    CHECK(!infer_ctx_kv_reserve(a, 768) && infer_ctx_kv_backed(a) == 768 * pp, "768 positions within the budget: %s", infer_last_error());
    infer_status st = infer_ctx_kv_reserve(b, 512);
    CHECK(st == INFER_ERR_NOMEM && strstr(infer_last_error(), "INFER_KV_MEM") && infer_ctx_kv_backed(b) == 0,
          "512 more positions past the budget: %d %s (backed %zu)", st, infer_last_error(), infer_ctx_kv_backed(b));
    infer_ctx_kv_trim(a);
    CHECK(infer_ctx_kv_backed(a) == 0 && backend_host_kv_used(NULL) == u0 && !infer_ctx_kv_reserve(b, 512),
          "after a's trim its memory is b's: %s", infer_last_error());
    int32_t t = ids[0];
    st = infer_eval(a, &t, 1, NULL, 0); // (a pass backs its positions: 256, within the budget)
    CHECK(!st && infer_ctx_kv_backed(a) == 256 * pp, "a pass within the budget: %s (backed %zu)", st ? infer_last_error() : "",
          infer_ctx_kv_backed(a));
    infer_ctx_reset(a);
    CHECK(infer_ctx_kv_reserve(a, 1024) == INFER_ERR_NOMEM, "1024 positions beside b's 512: not refused");
    infer_ctx_free(b);
    CHECK(backend_host_kv_used(NULL) == u0 + 256 * pp && !infer_ctx_kv_reserve(a, 1024), "b's memory back when it is freed: %s",
          infer_last_error());
    float *got = malloc(sizeof(float) * (NP + ND) * V);
    CHECK(got && run(a, ids, got, V) && !memcmp(got, ref, sizeof(float) * (NP + ND) * V),
          "a context of 262144 positions: logits not a context of 128's (max rel err %g)", got ? test_rel_err(got, ref, (NP + ND) * V) : -1.0);
    infer_ctx_free(a);
    free(got);
    backend_host_kv_budget(b0);
    CHECK(backend_host_kv_used(NULL) == u0, "every cache freed: %zu bytes still charged (want %zu)", backend_host_kv_used(NULL), u0);
}

static void default_model(void) {
    char path[1200];
    CHECK(test_default_model(path, sizeof path), "could not fetch the default model");
    infer_model *m = NULL;
    CHECK(path[0] && infer_model_load(path, &m) == INFER_OK, "%s", infer_last_error());
    if (!m) return;
    int V = infer_model_n_vocab(m);
    // a real text's tokens (its first NP)
    const char *text =
        "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined movable metal "
        "type, oil-based ink and a wooden screw press into a system that could produce books quickly and cheaply. Within "
        "fifty years, presses were running in more than two hundred cities across Europe, and the number of books in "
        "circulation grew from thousands to millions. Scholars, merchants and reformers all found new audiences.";
    int32_t ids[NP], *tok = NULL;
    int n_tok = 0;
    CHECK(!infer_tokenize(m, text, strlen(text), 1, 0, &tok, &n_tok) && n_tok >= NP, "the text gives %d tokens (want %d)", n_tok, NP);
    for (int i = 0; i < NP; i++) ids[i] = tok && i < n_tok ? tok[i] : 2;
    free(tok);
    size_t rows = NP + ND;
    float *ref = malloc(sizeof(float) * rows * V), *got = malloc(sizeof(float) * rows * V);

    // f32, the default (f16), f16 asked for by name: bit for bit
    infer_ctx *c32 = NULL, *c16 = NULL;
    CHECK(!ctx_threads(m, 128, 2, &c32) && !infer_ctx_set_kv_type(c32, "f32", "f32"), "%s", infer_last_error());
    CHECK(!ctx_threads(m, 128, 2, &c16), "%s", infer_last_error());
    CHECK(c16 && !strcmp(infer_ctx_kv_type(c16, 0), "f16") && !strcmp(infer_ctx_kv_type(c16, 1), "f16"),
          "a GGUF's default cache is f16 (%s / %s)", c16 ? infer_ctx_kv_type(c16, 0) : "?", c16 ? infer_ctx_kv_type(c16, 1) : "?");
    CHECK(c32 && c16 && infer_ctx_kv_bytes_per_pos(c32) == 2 * infer_ctx_kv_bytes_per_pos(c16), "f16 rows are half of f32's (%zu, %zu)",
          c32 ? infer_ctx_kv_bytes_per_pos(c32) : 0, c16 ? infer_ctx_kv_bytes_per_pos(c16) : 0);
    // the cache's memory held: on the CPU (as on a GPU under INFER_CUDA_KV_VM) none at first, then what a
    // reserve or a pass backs (256 positions at a time, at most the context's); a reserve within the
    // context holds, past it or negative is refused; a trim gives back what lies past the positions held
    const size_t pp = c16 ? infer_ctx_kv_bytes_per_pos(c16) : 0;
    CHECK(c16 && infer_ctx_kv_backed(c16) == 0, "a fresh CPU cache holds %zu bytes (want 0)", c16 ? infer_ctx_kv_backed(c16) : 0);
    CHECK(c16 && !infer_ctx_kv_reserve(c16, 128) && infer_ctx_kv_reserve(c16, 129) == INFER_ERR_ARG &&
              infer_ctx_kv_reserve(c16, -1) == INFER_ERR_ARG && infer_ctx_kv_reserve(NULL, 1) == INFER_ERR_ARG,
          "infer_ctx_kv_reserve's bounds");
    CHECK(c16 && infer_ctx_kv_backed(c16) == 128 * pp, "a CPU cache reserved whole holds its 128 positions' %zu bytes (%zu)", 128 * pp,
          c16 ? infer_ctx_kv_backed(c16) : 0);
    if (c16) infer_ctx_kv_trim(c16);
    CHECK(c16 && infer_ctx_kv_backed(c16) == 0, "an empty CPU cache's trim gives back all (%zu bytes held)", c16 ? infer_ctx_kv_backed(c16) : 0);
    CHECK(c32 && run(c32, ids, ref, V), "f32 cache: %s", infer_last_error());
    CHECK(c16 && run(c16, ids, got, V), "f16 cache: %s", infer_last_error());
    CHECK(!memcmp(ref, got, sizeof(float) * rows * V), "f16 cache: logits differ from the f32 cache's (max rel err %g)",
          test_rel_err(got, ref, rows * V));
    CHECK(c16 && infer_ctx_kv_backed(c16) == 128 * pp, "after %zu positions the CPU cache holds %zu bytes (want %zu)", rows,
          c16 ? infer_ctx_kv_backed(c16) : 0, 128 * pp);
    budget(m, ids, got, V);

    // batched: three f16 sequences stepped together equal the f16 context alone -- deterministic contexts (the
    // batch splits a prompt into other passes than alone; on a CPU with AMX the default prompt paths take a
    // sequence's runs of 16+ rows, the decode kernels shorter ones: other floats)
    {
        infer_batch *b = NULL;
        infer_ctx *s[3] = {0}, *cd = NULL;
        float *refd = malloc(sizeof(float) * rows * V);
        CHECK(!ctx_threads(m, 128, 2, &cd) && !infer_ctx_set_deterministic(cd, 1) && run(cd, ids, refd, V), "%s", infer_last_error());
        CHECK(!infer_batch_new(m, &b) && !infer_batch_set_threads(b, 2), "%s", infer_last_error());
        int ok = b != NULL;
        for (int i = 0; i < 3 && ok; i++) ok = !ctx_threads(m, 128, 2, &s[i]) && !infer_ctx_set_deterministic(s[i], 1);
        const int32_t *pi[3] = {ids, ids + 10, ids + 20};
        int ni[3] = {NP, NP - 10, NP - 20};
        float *lg[3];
        for (int i = 0; i < 3; i++) lg[i] = malloc(sizeof(float) * V);
        ok = ok && !infer_batch_eval(b, s, 3, pi, ni, lg);
        CHECK(ok && !memcmp(lg[0], refd + (size_t)(NP - 1) * V, sizeof(float) * V), "batched f16 prompt: not the context's logits alone");
        // and a q8_0 sequence beside f16 ones is refused by name
        infer_ctx *q = NULL;
        CHECK(!ctx_threads(m, 128, 2, &q) && !infer_ctx_set_kv_type(q, "q8_0", "q8_0"), "%s", infer_last_error());
        infer_ctx *mix[2] = {s[0], q};
        int32_t one = 5;
        const int32_t *po[2] = {&one, &one};
        int no[2] = {1, 1};
        infer_status st = ok && q ? infer_batch_eval(b, mix, 2, po, no, NULL) : INFER_OK;
        CHECK(st == INFER_ERR_ARG && strstr(infer_last_error(), "q8_0"), "a batch of f16 and q8_0 caches: %d %s", st, infer_last_error());
        // copies between caches of different types are refused too
        st = q ? infer_ctx_copy(q, s[0], 4) : INFER_OK;
        CHECK(st == INFER_ERR_ARG && strstr(infer_last_error(), "types"), "a copy from f16 into q8_0: %d %s", st, infer_last_error());
        for (int i = 0; i < 3; i++) infer_ctx_free(s[i]), free(lg[i]);
        infer_ctx_free(q), infer_ctx_free(cd), free(refd);
        infer_batch_free(b);
    }

    // q8_0 keys and values: the bytes of the blocks, and the logits close to f32's
    const char *pairs[][2] = {{"q8_0", "f16"}, {"f16", "q8_0"}, {"q8_0", "q8_0"}};
    for (int k = 0; k < 3; k++) {
        infer_ctx *c = NULL;
        CHECK(!ctx_threads(m, 128, 2, &c) && !infer_ctx_set_kv_type(c, pairs[k][0], pairs[k][1]), "%s", infer_last_error());
        if (!c) continue;
        size_t want = 0, per32 = infer_ctx_kv_bytes_per_pos(c32) / 2; // (K or V alone, f32)
        for (int i = 0; i < 2; i++) want += !strcmp(pairs[k][i], "q8_0") ? per32 / 4 / 32 * 34 : per32 / 2;
        CHECK(infer_ctx_kv_bytes_per_pos(c) == want, "%s / %s: %zu bytes per position, want %zu", pairs[k][0], pairs[k][1],
              infer_ctx_kv_bytes_per_pos(c), want);
        CHECK(run(c, ids, got, V), "%s / %s: %s", pairs[k][0], pairs[k][1], infer_last_error());
        double kl = mean_kl(ref, got, (int)rows, V);
        int same = 0;
        for (size_t r = 0; r < rows; r++) same += test_argmax(ref + r * V, V) == test_argmax(got + r * V, V);
        printf("kvcache: K %s, V %s: KL against f32 %.3g (mean of %zu positions), top-1 the same at %d\n", pairs[k][0], pairs[k][1], kl,
               rows, same);
        CHECK(kl < 5e-2 && kl > 0, "%s / %s: mean KL %g against the f32 cache (want (0, 5e-2))", pairs[k][0], pairs[k][1], kl);
        CHECK(same >= (int)rows * 85 / 100, "%s / %s: top-1 the same at %d of %zu", pairs[k][0], pairs[k][1], same, rows);
        infer_ctx_free(c);
    }

    // refusals: an unknown name, a type after the first evaluation (the
    // context is unchanged), and q8_0 on the CUDA backend (f32 there)
    infer_ctx *c = NULL;
    CHECK(!ctx_threads(m, 16, 2, &c), "%s", infer_last_error());
    infer_status st = infer_ctx_set_kv_type(c, "q4_0", NULL);
    CHECK(st == INFER_ERR_ARG && strstr(infer_last_error(), "\"q4_0\""), "unknown type: %d %s", st, infer_last_error());
    st = infer_ctx_set_kv_type(c, NULL, "bf16");
    CHECK(st == INFER_ERR_ARG && strstr(infer_last_error(), "\"bf16\" for V"), "unknown V type: %d %s", st, infer_last_error());
    CHECK(!strcmp(infer_ctx_kv_type(c, 0), "f16"), "a refused type changed the cache (%s)", infer_ctx_kv_type(c, 0));
    int32_t t = 2;
    CHECK(!infer_eval(c, &t, 1, NULL, 0), "%s", infer_last_error());
    st = infer_ctx_set_kv_type(c, "f32", "f32");
    CHECK(st == INFER_ERR_ARG && !strcmp(infer_ctx_kv_type(c, 0), "f16"), "a type after an evaluation: %d %s", st, infer_last_error());
    infer_ctx_reset(c);
    CHECK(!infer_ctx_set_kv_type(c, "f32", NULL) && !strcmp(infer_ctx_kv_type(c, 0), "f32") && !strcmp(infer_ctx_kv_type(c, 1), "f16"),
          "after a reset the type can change: %s", infer_last_error());
    if (infer_gpu_count() > 0) {
        infer_ctx *g = NULL;
        CHECK(!ctx_threads(m, 16, 2, &g), "%s", infer_last_error());
        CHECK(g && !infer_ctx_set_backend(g, "cuda") && !strcmp(infer_ctx_kv_type(g, 0), "f16"), "on cuda a GGUF's default is f16 too: %s",
              infer_last_error());
        st = g ? infer_ctx_set_kv_type(g, "q8_0", NULL) : INFER_OK;
        CHECK(st == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "f16"), "q8_0 on cuda: %d %s", st, infer_last_error());
        st = g ? infer_ctx_set_kv_type(g, "f32", "f16") : INFER_OK;
        CHECK(st == INFER_ERR_UNSUPPORTED, "f32 keys and f16 values on cuda: %d %s", st, infer_last_error());
        infer_ctx_free(g);
        // on the GPU too, the f16 cache's logits are the f32 cache's bit for bit (its values are f16 already),
        // a prompt and decode steps; and a copy of the f16 context goes on as the context
        infer_ctx *g32 = NULL, *g16 = NULL, *gc = NULL;
        CHECK(!ctx_threads(m, 128, 2, &g32) && !infer_ctx_set_backend(g32, "cuda") && !infer_ctx_set_kv_type(g32, "f32", "f32") &&
                  !ctx_threads(m, 128, 2, &g16) && !infer_ctx_set_backend(g16, "cuda") && !ctx_threads(m, 128, 2, &gc) &&
                  !infer_ctx_set_backend(gc, "cuda"),
              "%s", infer_last_error());
        CHECK(g32 && g16 && infer_ctx_kv_bytes_per_pos(g32) == 2 * infer_ctx_kv_bytes_per_pos(g16), "cuda: f16 rows are half of f32's");
        float *g1 = malloc(sizeof(float) * rows * V), *g2 = malloc(sizeof(float) * rows * V);
        CHECK(g32 && run(g32, ids, g1, V), "cuda f32 cache: %s", infer_last_error());
        CHECK(g16 && run(g16, ids, g2, V), "cuda f16 cache: %s", infer_last_error());
        CHECK(!memcmp(g1, g2, sizeof(float) * rows * V), "cuda f16 cache: logits differ from the f32 cache's (max rel err %g)",
              test_rel_err(g2, g1, rows * V));
        CHECK(test_rel_err(g2, ref, rows * V) < 1e-2, "cuda f16 cache against the CPU's: max rel err %g", test_rel_err(g2, ref, rows * V));
        if (gc && g16 && !infer_ctx_copy(gc, g16, NP)) {
            int32_t nt = ids[NP - 1];
            float *l1 = malloc(sizeof(float) * V), *l2 = malloc(sizeof(float) * V);
            infer_ctx_truncate(g16, NP);
            CHECK(!infer_eval(g16, &nt, 1, l1, 0) && !infer_eval(gc, &nt, 1, l2, 0) && !memcmp(l1, l2, sizeof(float) * V),
                  "cuda: the copied f16 context's next logits differ from the context's: %s", infer_last_error());
            free(l1), free(l2);
        } else
            CHECK(0, "cuda: copying an f16 context: %s", infer_last_error());
        free(g1), free(g2);
        infer_ctx_free(g32), infer_ctx_free(g16), infer_ctx_free(gc);
    }
    infer_ctx_free(c);
    infer_ctx_free(c32);
    infer_ctx_free(c16);
    free(ref), free(got);
    infer_model_free(m);
}

// A safetensors fixture: f32 by default (exact against transformers); f16
// on request stays close; q8_0 refused where heads are not whole blocks.
static void fixture(void) {
    infer_model *m = NULL;
    CHECK(infer_model_load(FIXTURES_DIR "/llama", &m) == INFER_OK, "%s", infer_last_error());
    if (!m) return;
    int V = infer_model_n_vocab(m);
    infer_ctx *a = NULL, *b = NULL;
    CHECK(!ctx_threads(m, 32, 2, &a) && !ctx_threads(m, 32, 2, &b), "%s", infer_last_error());
    if (!a || !b) { infer_ctx_free(a), infer_ctx_free(b), infer_model_free(m); return; }
    CHECK(!strcmp(infer_ctx_kv_type(a, 0), "f32") && !strcmp(infer_ctx_kv_type(a, 1), "f32"), "a safetensors model's default is f32 (%s)",
          infer_ctx_kv_type(a, 0));
    infer_status st = infer_ctx_set_kv_type(b, "q8_0", NULL);
    CHECK(st == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "blocks of 32"), "q8_0 with heads of 16: %d %s", st, infer_last_error());
    CHECK(!infer_ctx_set_kv_type(b, "f16", "f16"), "%s", infer_last_error());
    int32_t ids[12] = {1, 5, 9, 22, 7, 3, 15, 2, 8, 30, 4, 11};
    float *la = malloc(sizeof(float) * 12 * V), *lb = malloc(sizeof(float) * 12 * V);
    CHECK(!infer_eval(a, ids, 12, la, 0) && !infer_eval(b, ids, 12, lb, 0), "%s", infer_last_error());
    double e = test_rel_err(lb, la, (size_t)12 * V);
    CHECK(e > 0 && e < 1e-2, "f16 cache on an f32 model: max rel err %g against f32 (want (0, 1e-2))", e);
    free(la), free(lb);
    infer_ctx_free(a), infer_ctx_free(b);
    infer_model_free(m);
}

int main(void) {
    fixture();
    default_model();
    return check_summary("test_kvcache");
}
