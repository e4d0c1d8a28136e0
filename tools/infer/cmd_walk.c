// infer walk -x VINDEX [-m MODEL] -p TEXT | --ids 1,2,3 [--layers A-B] [-k K] [--tokens N]
// What the model knows about a prompt, read from its own FFN: for the
// prompt's last token, at each layer, the K features whose gate vectors
// match the FFN's input best (by |gate . x|), with the gate score, the
// feature's activation act(gate . x) * (up . x), and the tokens its down
// vector writes (down_meta).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_usage =
    "usage: infer walk -x VINDEX [-m MODEL] (-p TEXT | --ids 1,2,3) [--layers A-B] [-k K] [--tokens N] [-t N]\n"
    "  what the model knows about a prompt, read from its own FFN: for the prompt's last token, at each layer,\n"
    "  the K features whose gate vectors match the FFN's input best (by |gate . x|), with the gate score, the\n"
    "  feature's activation act(gate . x) * (up . x), and the tokens its down vector writes (down_meta).\n"
    "  -x, --vindex DIR       the vindex (infer extract); alone, it is the model too\n"
    "  -m, --model MODEL      the model it was made from\n"
    "  -p, --prompt TEXT      the prompt, tokenized with BOS\n"
    "      --ids 1,2,3        the prompt as token ids\n"
    "      --layers A-B       the layers shown (default: all)\n"
    "  -k K                   features per layer (default 10)\n"
    "      --tokens N         tokens shown per feature (default 5)\n"
    "  -t, --threads N        threads (default 1)\n";

enum { OPT_IDS = OPT_LOCAL, OPT_LAYERS, OPT_TOKENS };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS,
    {"vindex", required_argument, NULL, 'x'},
    {"prompt", required_argument, NULL, 'p'},
    {"ids", required_argument, NULL, OPT_IDS},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {0},
};

int cmd_walk(int argc, char **argv) {
    const char *vdir = NULL, *prompt = NULL, *layers = NULL, *ids_s = NULL;
    long K = 10, ntok = 5;
    cli_opts o;
    cli_opts_init(&o, "walk", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:x:p:k:", g_opts)) > 0) {
        switch (opt) {
        case 'x': vdir = optarg; break;
        case 'p': prompt = optarg; break;
        case OPT_IDS: ids_s = optarg; break;
        case OPT_LAYERS: layers = optarg; break;
        case 'k':
            if ((K = cli_parse_count("-k", optarg, 1 << 20)) < 0) return 1;
            if (K == 0) return cli_error("walk: -k must be at least 1");
            break;
        case OPT_TOKENS:
            if ((ntok = cli_parse_count("--tokens", optarg, 1000)) < 0) return 1;
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("walk: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    if (!vdir) return cli_error("walk: no vindex given (-x DIR, made by infer extract)");
    if (!prompt && !ids_s) return cli_error("walk: no prompt given (-p TEXT or --ids 1,2,3)");
    if (prompt && ids_s) return cli_error("walk: give -p or --ids, not both");
    int rc = 1, n = 0;
    int32_t *ids = NULL;
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    float *ffn_in = NULL;
    infer_feature *feat = NULL;
    if (cli_model_load(model ? model : vdir, &m)) { cli_error("%s", infer_last_error()); goto done; }
    if (model && infer_model_attach_vindex(m, vdir)) { cli_error("%s", infer_last_error()); goto done; }
    const infer_vindex *vx = infer_model_vindex(m);
    int L = infer_model_n_layer(m), E = infer_model_n_embd(m);
    long a = 0, b = L - 1;
    if (layers) {
        char *e;
        a = strtol(layers, &e, 10);
        b = a;
        if (*e == '-') b = strtol(e + 1, &e, 10);
        if (e == layers || *e || a < 0 || b < a || b >= L)
            { cli_error("walk: --layers \"%s\" is not a range A-B within 0-%d", layers, L - 1); goto done; }
    }
    if (prompt) {
        if (infer_tokenize(m, prompt, strlen(prompt), 1, 1, &ids, &n)) { cli_error("%s", infer_last_error()); goto done; }
        if (n == 0) { cli_error("walk: the prompt gives no tokens"); goto done; }
    } else if (!(ids = cli_parse_ids(ids_s, &n))) goto done;
    if (cli_ctx_new(m, n, &c)) { cli_error("%s", infer_last_error()); goto done; }
    ffn_in = malloc(sizeof(float) * (size_t)L * E);
    if (!ffn_in) { cli_error("out of memory"); goto done; }
    if (infer_eval_ffn_input(c, ids, n, ffn_in)) { cli_error("%s", infer_last_error()); goto done; }
    char *last = NULL;
    size_t ll = 0;
    if (infer_detokenize(m, ids + n - 1, 1, 0, &last, &ll)) ll = 0; // no tokenizer (--ids): the id alone
    printf("prompt: %d tokens; features at the last token \"%.*s\" (id %d)\n", n, (int)ll, last ? last : "", ids[n - 1]);
    free(last);
    for (long il = a; il <= b; il++) {
        int F = infer_vindex_n_features(vx, (int)il), k = K < F ? (int)K : F;
        free(feat);
        if (!(feat = malloc(sizeof *feat * (size_t)k))) { cli_error("out of memory"); goto done; }
        if (infer_walk_features(m, (int)il, ffn_in + (size_t)il * E, k, feat)) { cli_error("%s", infer_last_error()); goto done; }
        printf("\nlayer %ld: top %d of %d features by |gate . x|\n", il, k, F);
        for (int j = 0; j < k; j++) {
            int f = feat[j].id;
            printf("  f%-6d gate %+8.3f  act %+8.3f  writes:", f, feat[j].score, feat[j].act);
            const int32_t *tid;
            const float *ts;
            int nt = infer_vindex_feature_tokens(vx, (int)il, f, &tid, &ts);
            for (int t = 0; t < nt && t < ntok; t++) {
                char *s = NULL;
                size_t len = 0;
                if (infer_detokenize(m, &tid[t], 1, 0, &s, &len)) printf(" %d %.2f", tid[t], ts[t]);
                else printf(" \"%.*s\" %.2f", (int)len, s, ts[t]);
                free(s);
            }
            printf("%s\n", nt ? "" : " (no down_meta in this vindex)");
        }
    }
    rc = 0;
done:
    free(ids), free(feat), free(ffn_in);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
