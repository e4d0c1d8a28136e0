// infer tokenize [-m MODEL] (-p TEXT | -f FILE): the token ids of a text, as
// llama.cpp's llama-tokenize prints them. MODEL may be a vocabulary alone (a
// GGUF with only tokenizer.ggml.* metadata, a tokenizer.json or its directory).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: infer tokenize [-m MODEL] (-p TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special]\n"
                    "                      [--show-count]\n"
                    "  prints each token as \"id -> 'piece'\", or with --ids the list [id, ...]\n");
    return 1;
}

static char *read_text(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    for (size_t k; s && (k = fread(s + len, 1, cap - len, f)) > 0;) {
        len += k;
        if (len == cap) {
            char *t = cap < ((size_t)1 << 30) ? realloc(s, cap *= 2) : NULL;
            if (!t) {
                free(s);
                s = NULL;
            } else s = t;
        }
    }
    fclose(f);
    *n = len;
    return s;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int ids_only = 0, add_special = 1, parse_special = 1, show_count = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt")) {
            if (!(prompt = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) {
            if (!(file = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(argv[i], "--ids")) ids_only = 1;
        else if (!strcmp(argv[i], "--no-bos")) add_special = 0;
        else if (!strcmp(argv[i], "--no-parse-special")) parse_special = 0;
        else if (!strcmp(argv[i], "--show-count")) show_count = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage();
        else return cli_error("tokenize: unknown option \"%s\"", argv[i]);
    }
    if (!prompt == !file) return cli_error("tokenize: give the text with -p TEXT or -f FILE (one of them)");
    if (!model && !(model = cli_default_model())) return 1;
    size_t len = 0;
    char *owned = NULL;
    if (file && !(owned = read_text(file, &len))) return cli_error("tokenize: cannot read %s", file);
    const char *text = file ? owned : prompt;
    if (!file) len = strlen(prompt);
    infer_vocab *v;
    if (infer_vocab_load(model, &v)) {
        free(owned);
        return cli_error("%s", infer_last_error());
    }
    int32_t *ids = NULL;
    int n = 0;
    int rc = 0;
    if (infer_vocab_tokenize(v, text, len, add_special, parse_special, &ids, &n)) rc = cli_error("%s", infer_last_error());
    else if (ids_only) {
        putchar('[');
        for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        printf("]\n");
    } else
        for (int i = 0; i < n; i++) {
            char *piece;
            size_t pl;
            if (infer_vocab_detokenize(v, &ids[i], 1, 0, &piece, &pl)) {
                rc = cli_error("%s", infer_last_error());
                break;
            }
            printf("%6d -> '%.*s'\n", ids[i], (int)pl, piece);
            free(piece);
        }
    if (!rc && show_count) printf("Total number of tokens: %d\n", n);
    free(ids);
    free(owned);
    infer_vocab_free(v);
    return rc;
}
