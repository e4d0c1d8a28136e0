// infer info -m MODEL [-c N]: what was loaded and what it costs, and what a
// context of N positions would take (KV cache per position and in all).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_usage =
    "usage: infer info [-m MODEL] [-c N] [-ctk T] [-ctv T]\n"
    "  the config in effect, tensors by dtype, parameters and memory, and the KV cache per position and for\n"
    "  a context of N positions (default: the model's, at most 4096).\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: Gemma 3 270M)\n"
    "  -c, --ctx-size N       the context to size\n"
    CLI_USAGE_CACHE;

static const struct option g_opts[] = {CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_CTX, CLI_OPTS_CACHE, {0}};

int cmd_info(int argc, char **argv) {
    cli_opts o;
    cli_opts_init(&o, "info", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:c:", g_opts)) > 0) {}
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("info: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    long n_ctx = o.n_ctx;
    if (!model && !(model = cli_default_model())) return 1;
    infer_model *m;
    if (cli_model_load(model, &m)) return cli_error("%s", infer_last_error());
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) { infer_model_free(m); return cli_error("out of memory"); }
    infer_model_describe(m, buf, cap);
    printf("model                = %s\n%s", model, buf);
    // the cache's types and bytes per position from a context of one position
    // (the default types, or -ctk / -ctv's), its size from infer_ctx_memory
    size_t kv1, kv, total;
    infer_ctx *c = NULL;
    infer_ctx_params p = infer_ctx_default_params();
    p.n_ctx = 1, p.n_threads = cli_threads(), p.type_k = o.ctk, p.type_v = o.ctv;
    int st = infer_ctx_memory(m, &p, &kv1, NULL) || infer_ctx_create(m, &p, &c);
    p.n_ctx = (int)n_ctx;
    st = st || infer_ctx_memory(m, &p, &kv, &total);
    if (st) {
        infer_ctx_free(c);
        free(buf);
        infer_model_free(m);
        return cli_error("%s", infer_last_error());
    }
    int nc = (int)(kv / (kv1 ? kv1 : 1));
    size_t per = infer_ctx_kv_bytes_per_pos(c), kvt = kv;
    printf("KV cache             = %zu bytes per position (K %s, V %s), %.2f MiB for %d positions\n", per, infer_ctx_kv_type(c, 0),
           infer_ctx_kv_type(c, 1), kvt / 1048576.0, nc);
    printf("gpu                  = %s\n", infer_gpu_status());
    printf("context              = %.2f MiB in all (KV cache, scratch, attention scores for %d threads)\n",
           total / 1048576.0, cli_threads());
    infer_ctx_free(c);
    printf("peak RSS             = %.2f MiB\n", cli_peak_rss_kib() / 1024.0);
    free(buf);
    infer_model_free(m);
    return 0;
}
