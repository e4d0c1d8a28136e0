// infer tokenize [-m MODEL] (-p TEXT | -f FILE): the token ids of a text, as
// llama.cpp's llama-tokenize prints them. MODEL may be a vocabulary alone (a
// GGUF with only tokenizer.ggml.* metadata, a tokenizer.json or its directory).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_usage =
    "usage: infer tokenize [-m MODEL] (-p TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special] [--show-count]\n"
    "  prints each token as \"id -> 'piece'\", or with --ids the list [id, ...], as llama-tokenize does.\n"
    "  -m, --model MODEL      a model, or a vocabulary alone: a vocab-only GGUF, a tokenizer.json or its directory\n"
    "  -p, --prompt TEXT      the text\n"
    "  -f, --file FILE        the text from a file\n"
    "      --ids              the ids alone\n"
    "      --no-bos           no BOS/EOS added\n"
    "      --no-parse-special special-token text stays text\n"
    "      --show-count       and the number of tokens\n";

enum { OPT_IDS = OPT_LOCAL, OPT_NO_BOS, OPT_NO_PARSE_SPECIAL, OPT_SHOW_COUNT };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL,
    {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"ids", no_argument, NULL, OPT_IDS},
    {"no-bos", no_argument, NULL, OPT_NO_BOS},
    {"no-parse-special", no_argument, NULL, OPT_NO_PARSE_SPECIAL},
    {"show-count", no_argument, NULL, OPT_SHOW_COUNT},
    {0},
};

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
    const char *prompt = NULL, *file = NULL;
    int ids_only = 0, add_special = 1, parse_special = 1, show_count = 0, opt;
    cli_opts o;
    cli_opts_init(&o, "tokenize", g_usage);
    while ((opt = cli_next(&o, argc, argv, "hm:p:f:", g_opts)) > 0) {
        switch (opt) {
        case 'p': prompt = optarg; break;
        case 'f': file = optarg; break;
        case OPT_IDS: ids_only = 1; break;
        case OPT_NO_BOS: add_special = 0; break;
        case OPT_NO_PARSE_SPECIAL: parse_special = 0; break;
        case OPT_SHOW_COUNT: show_count = 1; break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("tokenize: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
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
