// infer logits -m MODEL --ids 1,2,3 --out FILE
// Writes little-endian float32 logits, T x V, for every position of exactly
// these ids (no BOS added), from the exact dense path.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_usage =
    "usage: infer logits [-m MODEL] --ids 1,2,3 --out FILE [-t N] [--backend NAME] [-ngl N] [-ctk T] [-ctv T] [--graph SPEC]\n"
    "  writes little-endian f32 logits, T x V, for every position of exactly these ids (no BOS added),\n"
    "  from the exact dense path (or the layer graph given).\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: Gemma 3 270M)\n"
    "      --ids 1,2,3        the token ids\n"
    "  -o, --out FILE         where the logits go\n"
    "  -t, --threads N        threads (default 1)\n"
    CLI_USAGE_NUMA
    "      --backend NAME     cpu (default), reference (the scalar oracles, one thread: slow, for checking) or cuda\n"
    "  -ngl, --n-gpu-layers N with cuda: the last N layers on the GPU, the others on the CPU; the output\n"
    "                         layer too when N > the layer count (as llama.cpp: 99 = all, the default)\n"
    CLI_USAGE_CACHE
    "      --graph SPEC       a layer graph (as predict's), e.g. pipelined: attention on the CPU, FFN on the GPU\n";

enum { OPT_IDS = OPT_LOCAL, OPT_BACKEND, OPT_GRAPH };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_NUMA, CLI_OPT_NGL, CLI_OPTS_CACHE,
    {"ids", required_argument, NULL, OPT_IDS},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"out", required_argument, NULL, 'o'},
    {"graph", required_argument, NULL, OPT_GRAPH},
    {0},
};

int cmd_logits(int argc, char **argv) {
    const char *ids_s = NULL, *out = NULL, *backend = NULL, *graph = NULL;
    cli_opts o;
    cli_opts_init(&o, "logits", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:o:", g_opts)) > 0) {
        switch (opt) {
        case OPT_IDS: ids_s = optarg; break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_GRAPH: graph = optarg; break;
        case 'o': out = optarg; break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("logits: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    if (!ids_s) return cli_error("logits: no token ids given (--ids 1,2,3)");
    if (!out) return cli_error("logits: no output file given (--out FILE)");
    if (!model && !(model = cli_default_model())) return 1;
    int n;
    int32_t *ids = cli_parse_ids(ids_s, &n);
    if (!ids) return 1;

    int rc = 1;
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    char tmp[4200] = "";
    if (cli_model_load(model, &m) || cli_ctx_new(m, n, &c) || cli_place(c, backend ? backend : "cpu", o.ngl) ||
        (graph && infer_ctx_set_graph(c, graph, 0))) {
        cli_error("%s", infer_last_error());
        goto done;
    }
    size_t V = (size_t)infer_model_n_vocab(m);
    logits = malloc(sizeof(float) * V * (size_t)n);
    if (!logits) { cli_error("out of memory for %d x %zu logits", n, V); goto done; }
    if (infer_eval(c, ids, n, logits, 0)) { cli_error("%s", infer_last_error()); goto done; }
    // beside the destination, renamed into place when whole
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    f = fopen(tmp, "wb");
    if (!f) { cli_error("%s: cannot open for writing", tmp); goto done; }
    if (fwrite(logits, sizeof(float), V * (size_t)n, f) != V * (size_t)n) { cli_error("%s: write failed", out); goto done; }
    if (fclose(f)) { f = NULL; cli_error("%s: write failed", out); goto done; }
    f = NULL;
    if (rename(tmp, out)) { cli_error("%s: cannot replace", out); goto done; }
    tmp[0] = 0;
    rc = 0;
done:
    if (f) fclose(f);
    if (tmp[0]) unlink(tmp);
    free(logits);
    free(ids);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
