// infer logits -m MODEL --ids 1,2,3 --out FILE
// Writes little-endian float32 logits, T x V, for every position of exactly
// these ids (no BOS added), from the exact dense path.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *ids_s = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_threads_flag(argc, argv, &i);
        if (r < 0) return 1;
        if (r) continue;
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) { if (!(model = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "--ids")) { if (!(ids_s = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "--out") || !strcmp(argv[i], "-o")) { if (!(out = cli_value(argc, argv, &i))) return 1; }
        else return cli_error("logits: unknown option \"%s\"", argv[i]);
    }
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
    if (infer_model_load(model, &m) || infer_ctx_new(m, n, &c)) { cli_error("%s", infer_last_error()); goto done; }
    size_t V = (size_t)infer_model_n_vocab(m);
    logits = malloc(sizeof(float) * V * (size_t)n);
    if (!logits) { cli_error("out of memory for %d x %zu logits", n, V); goto done; }
    if (infer_eval(c, ids, n, logits, 0)) { cli_error("%s", infer_last_error()); goto done; }
    f = fopen(out, "wb");
    if (!f) { cli_error("%s: cannot open for writing", out); goto done; }
    if (fwrite(logits, sizeof(float), V * (size_t)n, f) != V * (size_t)n) { cli_error("%s: write failed", out); goto done; }
    if (fclose(f)) { f = NULL; cli_error("%s: write failed", out); goto done; }
    f = NULL;
    rc = 0;
done:
    if (f) fclose(f);
    free(logits);
    free(ids);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
