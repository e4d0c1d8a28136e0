// infer bench -m MODEL [-t N] [-p 512] [-n 128] [-r 5] [-o md|json]
// A llama-bench-shaped table: prompt processing (all tokens in one call) and
// text generation (one token at a time through the KV cache), mean +- stddev.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char test[32]; int n; double mean, sd; } result;

static void stats(const double *v, int r, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < r; i++) s += v[i];
    *mean = s / r;
    for (int i = 0; i < r; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = r > 1 ? sqrt(q / (r - 1)) : 0;
}

// Tokens per second of one run: pp feeds n tokens at once, tg one by one;
// as llama-bench, the logits of the last token of each call are computed.
static int run_once(infer_ctx *c, const int32_t *ids, int n, int pp, float *logits, double *tps) {
    infer_ctx_reset(c);
    double t0 = cli_now();
    if (pp) {
        if (infer_eval(c, ids, n, logits, 1)) return cli_error("%s", infer_last_error());
    } else {
        for (int i = 0; i < n; i++)
            if (infer_eval(c, ids + i, 1, logits, 1)) return cli_error("%s", infer_last_error());
    }
    *tps = n / (cli_now() - t0);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *fmt = "md";
    long threads = 1, n_pp = 512, n_tg = 128, reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) { if (!(model = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            if (!(v = cli_value(argc, argv, &i)) || (threads = cli_parse_count("-t", v, 256)) < 0) return 1;
        } else if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--n-prompt")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_pp = cli_parse_count("-p", v, 1 << 16)) < 0) return 1;
        } else if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--n-gen")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_tg = cli_parse_count("-n", v, 1 << 16)) < 0) return 1;
        } else if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "--repetitions")) {
            if (!(v = cli_value(argc, argv, &i)) || (reps = cli_parse_count("-r", v, 1000)) < 0) return 1;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (!(fmt = cli_value(argc, argv, &i))) return 1;
            if (strcmp(fmt, "md") && strcmp(fmt, "json")) return cli_error("bench: -o takes md or json, not \"%s\"", fmt);
        } else return cli_error("bench: unknown option \"%s\"", argv[i]);
    }
    if (!model && !(model = cli_default_model())) return 1;
    if (reps < 1) return cli_error("bench: -r must be at least 1");
    infer_set_threads(threads ? (int)threads : 1);
    infer_model *m;
    if (infer_model_load(model, &m)) return cli_error("%s", infer_last_error());
    int n_max = (int)(n_pp > n_tg ? n_pp : n_tg);
    infer_ctx *c;
    if (infer_ctx_new(m, n_max > 0 ? n_max : 1, &c)) { infer_model_free(m); return cli_error("%s", infer_last_error()); }
    int32_t *ids = malloc(sizeof *ids * (size_t)(n_max > 0 ? n_max : 1));
    int V = infer_model_n_vocab(m);
    uint64_t r = 12345;
    for (int i = 0; i < n_max; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; ids[i] = (int32_t)((r >> 33) % (uint64_t)V); }

    result res[2];
    int nres = 0, rc = 0;
    double *v = malloc(sizeof *v * (size_t)reps);
    float *logits = malloc(sizeof(float) * (size_t)V);
    for (int pp = 1; pp >= 0 && !rc; pp--) {
        int n = (int)(pp ? n_pp : n_tg);
        if (n <= 0) continue;
        double warm;
        if ((rc = run_once(c, ids, pp ? n : (n < 16 ? n : 16), pp, logits, &warm))) break; // warm-up
        for (int k = 0; k < reps && !rc; k++) rc = run_once(c, ids, n, pp, logits, &v[k]);
        snprintf(res[nres].test, sizeof res[nres].test, "%s%d", pp ? "pp" : "tg", n);
        stats(v, (int)reps, &res[nres].mean, &res[nres].sd);
        nres++;
    }
    if (!rc) {
        long long params = (long long)infer_model_n_params(m), bytes = (long long)infer_model_tensor_bytes(m);
        char name[96];
        snprintf(name, sizeof name, "%s %.0fM %s", infer_model_arch(m), params / 1e6, infer_model_ftype(m));
        if (!strcmp(fmt, "json")) {
            printf("[\n");
            for (int i = 0; i < nres; i++)
                printf("  {\"model\": \"%s\", \"size\": %lld, \"params\": %lld, \"backend\": \"CPU\", \"threads\": %ld, "
                       "\"test\": \"%s\", \"avg_ts\": %.3f, \"stddev_ts\": %.3f}%s\n",
                       name, bytes, params, threads ? threads : 1, res[i].test, res[i].mean, res[i].sd, i + 1 < nres ? "," : "");
            printf("]\n");
        } else {
            printf("| model | size | params | backend | threads | test | t/s |\n");
            printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
            for (int i = 0; i < nres; i++)
                printf("| %s | %.2f MiB | %.2f M | CPU | %ld | %s | %.2f ± %.2f |\n", name, bytes / 1048576.0, params / 1e6,
                       threads ? threads : 1, res[i].test, res[i].mean, res[i].sd);
        }
    }
    free(v);
    free(logits);
    free(ids);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
