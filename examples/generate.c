// Greedy generation through infer's public API: load a model, evaluate a
// prompt, then append the most likely token N times.
//
//   generate MODEL [-n N] TEXT          prints the continuation of TEXT
//   generate MODEL [-n N] --ids 1,2,3   the prompt as token ids (no tokenizer
//                                       needed); prints the new ids
//
// Build it against an installed infer:
//   cc generate.c $(pkg-config --cflags --libs infer) -o generate
#include <infer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// "1,2,3" -> ids (malloc'd); NULL if malformed.
static int32_t *parse_ids(const char *s, int *n) {
    int32_t *ids = malloc(sizeof *ids * (strlen(s) / 2 + 1));
    *n = 0;
    for (char *end; ids; s = end + 1) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || (*end && *end != ',')) break;
        ids[(*n)++] = (int32_t)v;
        if (!*end) return ids;
    }
    free(ids);
    return NULL;
}

int main(int argc, char **argv) {
    const char *text = NULL, *ids_s = NULL;
    int n_new = 32;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n_new = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_s = argv[++i];
        else text = argv[i];
    }
    int32_t *ids = NULL;
    int n = 0;
    if (argc < 3 || !text == !ids_s || n_new < 0 || (ids_s && !(ids = parse_ids(ids_s, &n)))) {
        fprintf(stderr, "usage: generate MODEL [-n N] (TEXT | --ids 1,2,3)\n");
        return 1;
    }

    infer_model *model = NULL;
    infer_ctx *ctx = NULL;
    int32_t *out = NULL, eog[8];
    float *logits = NULL;
    char *piece = NULL;
    int n_out = 0, rc = 1;
    // errors are values: every call returns an infer_status, infer_last_error() says what went wrong
    if (infer_model_load(argv[1], &model)) goto done;
    if (text && infer_tokenize(model, text, strlen(text), 1, 1, &ids, &n)) goto done;
    // the tokenizer's end-of-generation tokens for text, the config's for ids
    int n_eog = text ? infer_model_eog(model, eog, 8) : infer_model_eos(model, eog, 8);
    int V = infer_model_n_vocab(model);
    logits = malloc(sizeof(float) * (size_t)V);
    out = malloc(sizeof(int32_t) * (size_t)(n_new + 1));
    if (!logits || !out || n == 0) {
        fprintf(stderr, "generate: %s\n", n ? "out of memory" : "the prompt gives no tokens");
        rc = 2;
        goto done;
    }
    infer_ctx_params cp = infer_ctx_default_params(); // (the CPU, one thread; n_threads, backend, ... as llama.cpp's)
    cp.n_ctx = n + n_new;
    if (infer_ctx_create(model, &cp, &ctx)) goto done;

    if (infer_eval(ctx, ids, n, logits, 1)) goto done; // the prompt; logits of its last position
    size_t printed = 0;
    while (n_out < n_new) {
        int32_t tok = argmax(logits, V);
        int stop = 0;
        for (int k = 0; k < n_eog; k++) stop |= tok == eog[k];
        if (stop) break;
        out[n_out++] = tok;
        if (text) { // the text of everything generated, printed from where the last print ended
            size_t len;
            free(piece);
            piece = NULL;
            if (infer_detokenize(model, out, n_out, 0, &piece, &len)) goto done;
            if (len > printed) fwrite(piece + printed, 1, len - printed, stdout), printed = len;
        } else {
            printf("%s%d", n_out > 1 ? "," : "", tok);
        }
        fflush(stdout);
        if (n_out < n_new && infer_eval(ctx, &tok, 1, logits, 1)) goto done;
    }
    printf("\n");
    rc = 0;
done:
    if (rc == 1) fprintf(stderr, "generate: %s\n", infer_last_error());
    free(piece), free(logits), free(out), free(ids);
    infer_ctx_free(ctx);
    infer_model_free(model);
    return rc ? 1 : 0;
}
