// infer bench --spec-ngram [K] | --model-draft M [-f TEXT]: greedy decode of -n tokens after a
// chat prompt (the text as the user's message, in the model's chat template),
// one token a pass against the n-gram drafter's K tokens checked in one pass
// of K + 1 rows (infer_spec_draft_ngram, or a draft model's guesses:
// infer_drafter_draft; infer_spec_accept), the two
// alternating r times. The tokens must be the same both ways (else the bench
// fails); the table has a row for each, and stderr the acceptance and the
// speed-up. The default text asks for a code snippet back with one name
// changed (bench/data/spec-edit.txt): a text that repeats its prompt.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int passes, drafted, accepted;
} spec_counts;

// n_tg greedy tokens (gen, room for n_tg + k + 1) after the prompt ids[0..n)
// in c (reset first), k draft tokens a pass (0: one token a pass as plain
// decoding); *tps: the decode's tokens a second (the prompt's pass not timed).
static int decode(infer_ctx *c, infer_sampler *s, const int32_t *ids, int n, int n_tg, int k, const cli_draft *dr, int32_t *hist,
                  float *lg, int V, int32_t *gen, double *tps, spec_counts *sc) {
    infer_ctx_reset(c);
    memcpy(hist, ids, sizeof(int32_t) * (size_t)n);
    if (infer_eval(c, ids, n, lg, 1)) return cli_error("%s", infer_last_error());
    double t0 = cli_now();
    int32_t t = infer_sample(s, lg, hist, n), draft[CLI_SPEC_MAX], rows[CLI_SPEC_MAX + 1];
    if (t < 0) return cli_error("%s", infer_last_error());
    int g = 0;
    hist[n] = gen[g++] = t;
    while (g < n_tg) {
        int nh = n + g, past = infer_ctx_n_past(c);
        int kd = !k ? 0 : dr->d ? infer_drafter_draft(dr->d, hist, nh, k, dr->p_min, draft)
                                : infer_spec_draft_ngram(hist, nh, CLI_SPEC_NMIN, CLI_SPEC_NMAX, k, draft);
        if (kd < 0) return cli_error("%s", infer_last_error());
        if (kd > n_tg - g - 1) kd = n_tg - g - 1;
        rows[0] = hist[nh - 1];
        memcpy(rows + 1, draft, sizeof(int32_t) * (size_t)kd);
        int got = 0;
        if (infer_eval(c, rows, kd + 1, lg, !k) || (got = infer_spec_accept(s, lg, V, draft, kd, hist, nh, gen + g)) < 0)
            return cli_error("%s", infer_last_error());
        infer_ctx_truncate(c, past + got);
        g += got, sc->passes++, sc->drafted += kd, sc->accepted += got - 1;
    }
    *tps = (n_tg - 1) / (cli_now() - t0); // (as run's: the tokens after the first, which the prompt's pass gave)
    return 0;
}

static void mean_sd(const double *v, int r, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < r; i++) s += v[i];
    *mean = s / r;
    for (int i = 0; i < r; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = r > 1 ? sqrt(q / (r - 1)) : 0;
}

int bench_spec(infer_model *m, const char *text_path, int n_tg, int reps, int k, cli_draft *dr, const char *fmt, long threads,
               const char *device, long ngl) {
    char def[1024];
    size_t len;
    if (!text_path) {
        const char *src = getenv("INFER_SOURCE_DIR");
        snprintf(def, sizeof def, "%s/bench/data/spec-edit.txt", src ? src : INFER_SOURCE_DIR);
        text_path = def;
    }
    char *text = cli_read_text("bench", text_path, &len);
    if (!text) return 1;
    int V = infer_model_n_vocab(m), n = 0, rc = 1;
    int32_t *ids = NULL, *hist = NULL, *gen[2] = {NULL, NULL};
    float *lg = NULL;
    double *tps[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
    infer_sampler *s = NULL;
    infer_ctx *c = NULL;
    spec_counts sc[2] = {{0}};
    infer_sampling sp = infer_sampling_default();
    sp.temp = 0;
    infer_chat_message msg = {"user", text};
    if (infer_chat_tokenize(m, &msg, 1, 1, &ids, &n) || infer_sampler_new(&sp, V, &s)) { cli_error("%s", infer_last_error()); goto done; }
    if (cli_ctx_new(m, n + n_tg + k + 1, &c) || cli_place(c, device, ngl)) { cli_error("%s", infer_last_error()); goto done; }
    if (dr->model && cli_drafter_new(dr, m, n + n_tg + k + 1, device)) goto done;
    const char *be = !strcmp(infer_ctx_backend(c), "cuda") ? "CUDA" : "CPU";
    hist = malloc(sizeof(int32_t) * (size_t)(n + n_tg + k + 1));
    gen[0] = malloc(sizeof(int32_t) * (size_t)(n_tg + k + 1)), gen[1] = malloc(sizeof(int32_t) * (size_t)(n_tg + k + 1));
    lg = infer_host_alloc(sizeof(float) * (size_t)V * (k + 1));
    if (!hist || !gen[0] || !gen[1] || !lg || !tps[0] || !tps[1]) { cli_error("out of memory"); goto done; }
    double warm;
    spec_counts none = {0};
    if (decode(c, s, ids, n, n_tg < 8 ? n_tg : 8, k, dr, hist, lg, V, gen[1], &warm, &none)) goto done; // warm-up
    for (int r = 0; r < reps; r++)
        for (int w = 0; w < 2; w++) { // (alternating: a machine's drift falls on both)
            if (decode(c, s, ids, n, n_tg, w ? k : 0, dr, hist, lg, V, gen[w], &tps[w][r], &sc[w])) goto done;
        }
    if (memcmp(gen[0], gen[1], sizeof(int32_t) * (size_t)n_tg)) {
        int at = 0;
        while (gen[0][at] == gen[1][at]) at++;
        cli_error("bench: greedy tokens differ with speculation, from token %d (%d, %d without)", at, gen[1][at], gen[0][at]);
        goto done;
    }
    double mean[2], sd[2];
    for (int w = 0; w < 2; w++) mean_sd(tps[w], reps, &mean[w], &sd[w]);
    char name[96], test[2][48];
    snprintf(name, sizeof name, "%s %.0fM %s", infer_model_arch(m), infer_model_n_params(m) / 1e6, infer_model_ftype(m));
    snprintf(test[0], sizeof test[0], "tg%d greedy", n_tg);
    snprintf(test[1], sizeof test[1], "tg%d greedy %s K%d", n_tg, dr->d ? "draft-model" : "spec-ngram", k);
    long long params = (long long)infer_model_n_params(m), bytes = (long long)infer_model_tensor_bytes(m);
    if (!strcmp(fmt, "json")) {
        printf("[\n");
        for (int w = 0; w < 2; w++)
            printf("  {\"model\": \"%s\", \"size\": %lld, \"params\": %lld, \"backend\": \"%s\", \"threads\": %ld, \"n_prompt\": %d, "
                   "\"test\": \"%s\", \"avg_ts\": %.3f, \"stddev_ts\": %.3f}%s\n",
                   name, bytes, params, be, threads, n, test[w], mean[w], sd[w], w ? "" : ",");
        printf("]\n");
    } else {
        printf("| model | size | params | backend | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
        for (int w = 0; w < 2; w++)
            printf("| %s | %.2f MiB | %.2f M | %s | %ld | %s | %.2f ± %.2f |\n", name, bytes / 1048576.0, params / 1e6, be, threads,
                   test[w], mean[w], sd[w]);
    }
    fflush(stdout);
    fprintf(stderr, "%s K %d: prompt %d tokens, the same %d greedy tokens both ways; %.2f tokens a pass (%d drafted, "
            "%d accepted, %.1f%%); decode %.2fx\n", dr->d ? "draft model" : "spec-ngram", k, n, n_tg, (double)(sc[1].accepted + sc[1].passes) / sc[1].passes,
            sc[1].drafted, sc[1].accepted, sc[1].drafted ? 100.0 * sc[1].accepted / sc[1].drafted : 0.0, mean[1] / mean[0]);
    rc = 0;
done:
    free(text), free(ids), free(hist), free(gen[0]), free(gen[1]), free(tps[0]), free(tps[1]);
    infer_host_free(lg);
    infer_sampler_free(s);
    infer_ctx_free(c);
    cli_draft_free(dr);
    return rc;
}
