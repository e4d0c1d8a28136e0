// infer info -m MODEL [-c N]: what was loaded and what it costs, and what a
// context of N positions would take (KV cache per position and in all).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_info(int argc, char **argv) {
    const char *model = NULL, *v;
    long n_ctx = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx-size")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_ctx = cli_parse_count("-c", v, 1 << 24)) < 0) return 1;
        } else return cli_error("info: unknown option \"%s\"", argv[i]);
    }
    if (!model && !(model = cli_default_model())) return 1;
    infer_model *m;
    if (infer_model_load(model, &m)) return cli_error("%s", infer_last_error());
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) { infer_model_free(m); return cli_error("out of memory"); }
    infer_model_describe(m, buf, cap);
    printf("model                = %s\n%s", model, buf);
    size_t kv1, kv, total;
    if (!infer_ctx_memory(m, 1, &kv1, NULL) && !infer_ctx_memory(m, (int)n_ctx, &kv, &total)) {
        int nc = (int)(kv / (kv1 ? kv1 : 1));
        printf("KV cache             = %zu bytes per position (f32), %.2f MiB for %d positions\n", kv1, kv / 1048576.0, nc);
        printf("context              = %.2f MiB in all (KV cache, scratch, attention scores for %d threads)\n",
               total / 1048576.0, infer_get_threads());
    }
    printf("peak RSS             = %.2f MiB\n", cli_peak_rss_kib() / 1024.0);
    free(buf);
    infer_model_free(m);
    return 0;
}
