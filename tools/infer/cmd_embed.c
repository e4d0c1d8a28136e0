// infer embed -m MODEL (-p TEXT ... | -f FILE): one embedding per text, as
// llama.cpp's llama-embedding prints them: a line of floats each, or with
// --json the OpenAI /v1/embeddings response.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_usage =
    "usage: infer embed -m MODEL (-p TEXT [-p TEXT ...] | -f FILE) [--pooling mean|cls|last] [--no-normalize] [--json]\n"
    "  prints one embedding per text: a line of n_embd floats each, or with --json the OpenAI\n"
    "  /v1/embeddings response ({\"object\": \"list\", \"data\": [{\"embedding\": [...]}, ...]}).\n"
    "  -m, --model MODEL      an encoder (BERT, e.g. all-MiniLM-L6-v2) or a decoder model\n"
    "  -p, --prompt TEXT      a text (several -p: several embeddings)\n"
    "  -f, --file FILE        a text per line (empty lines skipped)\n"
    "      --pooling P        mean, cls or last (default: the model's -- sentence-transformers'\n"
    "                         1_Pooling/config.json for an encoder, last for a decoder)\n"
    "      --no-normalize     the pooled vector as it is (default: L2-normalized, as the model says)\n"
    "      --json             the OpenAI response as JSON\n"
    "  -t, --threads N        threads (default 1)\n"
    CLI_USAGE_DEVICE;

enum { OPT_POOLING = OPT_LOCAL, OPT_NO_NORMALIZE, OPT_JSON };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_DEVICE, CLI_OPT_NGL,
    {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"pooling", required_argument, NULL, OPT_POOLING},
    {"no-normalize", no_argument, NULL, OPT_NO_NORMALIZE},
    {"json", no_argument, NULL, OPT_JSON},
    {0},
};

#define MAX_TEXTS 4096

int cmd_embed(int argc, char **argv) {
    const char *texts[MAX_TEXTS], *file = NULL, *device = NULL;
    int n_texts = 0, normalize = -1, json = 0, opt;
    infer_pooling pooling = INFER_POOLING_MODEL;
    cli_opts o;
    cli_opts_init(&o, "embed", g_usage);
    while ((opt = cli_next(&o, argc, argv, "hm:t:p:f:", g_opts)) > 0) {
        switch (opt) {
        case 'p':
            if (n_texts == MAX_TEXTS) return cli_error("embed: more than %d texts", MAX_TEXTS);
            texts[n_texts++] = optarg;
            break;
        case 'f': file = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_NO_NORMALIZE: normalize = 0; break;
        case OPT_JSON: json = 1; break;
        case OPT_POOLING:
            if (!strcmp(optarg, "mean")) pooling = INFER_POOLING_MEAN;
            else if (!strcmp(optarg, "cls")) pooling = INFER_POOLING_CLS;
            else if (!strcmp(optarg, "last")) pooling = INFER_POOLING_LAST;
            else return cli_error("embed: --pooling \"%s\" is not mean, cls or last", optarg);
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("embed: unexpected argument \"%s\"", argv[optind]);
    if (!n_texts == !file) return cli_error("embed: give the texts with -p TEXT (repeatable) or -f FILE (one of them)");
    if (!o.model) return cli_error("embed: give the model with -m MODEL");
    char *owned = NULL;
    if (file) { // a text per line
        size_t len;
        if (!(owned = cli_read_text("embed", file, &len))) return 1;
        for (char *s = owned, *e; *s; s = e) {
            e = strchr(s, '\n');
            if (e) *e++ = 0;
            else e = s + strlen(s);
            size_t l = strlen(s);
            if (l && s[l - 1] == '\r') s[--l] = 0;
            if (!l) continue;
            if (n_texts == MAX_TEXTS) {
                free(owned);
                return cli_error("embed: %s: more than %d lines", file, MAX_TEXTS);
            }
            texts[n_texts++] = s;
        }
        if (!n_texts) {
            free(owned);
            return cli_error("embed: %s holds no text", file);
        }
    }
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    float *e = NULL;
    int rc = 1;
    infer_pooling model_pool;
    int model_norm;
    if (cli_model_load(o.model, &m)) goto done;
    if (infer_model_embed_defaults(m, &model_pool, &model_norm)) { cli_error("%s", infer_last_error()); goto done; }
    if (pooling == INFER_POOLING_MODEL) pooling = model_pool;
    if (normalize < 0) normalize = model_norm;
    int n_embd = infer_model_n_embd(m);
    if (!(e = malloc(sizeof(float) * (size_t)n_embd))) { cli_error("embed: out of memory"); goto done; }
    if (cli_ctx_new(m, 512, &c) || cli_place(c, device ? device : "cpu", o.ngl)) goto done;
    int total = 0;
    if (json) printf("{\"object\": \"list\", \"data\": [");
    for (int i = 0; i < n_texts; i++) {
        int32_t *ids = NULL;
        int n = 0;
        if (infer_tokenize(m, texts[i], strlen(texts[i]), 1, 1, &ids, &n) || infer_embed(c, ids, n, pooling, normalize, e)) {
            free(ids);
            if (json) printf("]}\n");
            cli_error("embed: text %d: %s", i, infer_last_error());
            goto done;
        }
        free(ids);
        total += n;
        if (json) printf("%s\n  {\"object\": \"embedding\", \"index\": %d, \"embedding\": [", i ? "," : "", i);
        for (int j = 0; j < n_embd; j++) printf(json ? (j ? ", %.9g" : "%.9g") : (j ? " %.9g" : "%.9g"), e[j]);
        printf(json ? "]}" : "\n");
    }
    if (json) printf("\n], \"usage\": {\"prompt_tokens\": %d, \"total_tokens\": %d}}\n", total, total);
    rc = 0;
done:
    free(e);
    infer_ctx_free(c);
    infer_model_free(m);
    free(owned);
    return rc;
}
