// infer run -m MODEL --ids 1,2,3 -n N: greedy generation with the KV cache,
// printing the new token ids. Timings go to stderr.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *ids_s = NULL;
    long n_new = 16, n_ctx = 0;
    int ignore_eos = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) { if (!(model = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "--ids")) { if (!(ids_s = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--n-predict")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_new = cli_parse_count("-n", v, 1 << 24)) < 0) return 1;
        } else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx-size")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_ctx = cli_parse_count("-c", v, 1 << 24)) < 0) return 1;
        } else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            long t;
            if (!(v = cli_value(argc, argv, &i)) || (t = cli_parse_count("-t", v, 256)) < 0) return 1;
            infer_set_threads(t ? (int)t : 1);
        } else if (!strcmp(argv[i], "--ignore-eos")) ignore_eos = 1;
        else return cli_error("run: unknown option \"%s\"", argv[i]);
    }
    if (!model) return cli_error("run: no model given (-m MODEL)");
    if (!ids_s) return cli_error("run: no prompt given (--ids 1,2,3)");
    int n;
    int32_t *ids = cli_parse_ids(ids_s, &n);
    if (!ids) return 1;

    int rc = 1;
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    float *logits = NULL;
    double t0 = cli_now();
    if (infer_model_load(model, &m)) { cli_error("%s", infer_last_error()); goto done; }
    if (n_ctx == 0) n_ctx = n + n_new;
    if (n + n_new > n_ctx) { cli_error("run: prompt (%d) + new tokens (%ld) exceed the context (%ld)", n, n_new, n_ctx); goto done; }
    if (infer_ctx_new(m, (int)n_ctx, &c)) { cli_error("%s", infer_last_error()); goto done; }
    int V = infer_model_n_vocab(m);
    int32_t eos[8];
    int n_eos = ignore_eos ? 0 : infer_model_eos(m, eos, 8);
    logits = malloc(sizeof(float) * (size_t)V);
    if (!logits) { cli_error("out of memory"); goto done; }
    double t1 = cli_now();
    if (infer_eval(c, ids, n, logits, 1)) { cli_error("%s", infer_last_error()); goto done; }
    double t2 = cli_now();
    int gen = 0;
    for (; gen < n_new; gen++) {
        int32_t tok = argmax(logits, V);
        printf("%s%d", gen ? "," : "", tok);
        fflush(stdout);
        int stop = 0;
        for (int k = 0; k < n_eos; k++) stop |= tok == eos[k];
        if (stop || gen + 1 == n_new) { gen++; break; }
        if (infer_eval(c, &tok, 1, logits, 1)) { cli_error("%s", infer_last_error()); goto done; }
    }
    printf("\n");
    double t3 = cli_now();
    fprintf(stderr, "load %.1f ms, prompt %d tokens %.1f tok/s, generated %d tokens %.1f tok/s\n", (t1 - t0) * 1e3, n,
            n / (t2 - t1), gen, gen > 1 ? (gen - 1) / (t3 - t2) : 0.0);
    rc = 0;
done:
    free(logits);
    free(ids);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
