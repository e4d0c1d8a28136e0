// infer bench -m MODEL [-t N] [-p 512] [-n 128] [-d 0] [-r 5] [-o md|json] [--batch 1,2,4,8,16]
// A llama-bench-shaped table: prompt processing (all tokens in one call) and
// text generation (one token at a time through the KV cache), mean +- stddev.
// With --batch: for each count B, B sequences each take a prompt of -p tokens
// (together), then -n decode steps (all B in each step, infer_batch_eval), as
// llama-batched-bench measures them: aggregate t/s of the prompts (pp) and of
// the decode steps (tg, B * n tokens over their time).
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char test[48]; int n; double mean, sd; } result;

static void stats(const double *v, int r, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < r; i++) s += v[i];
    *mean = s / r;
    for (int i = 0; i < r; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = r > 1 ? sqrt(q / (r - 1)) : 0;
}

// Tokens per second of one run: pp feeds n tokens at once, tg one by one;
// as llama-bench, the logits of the last token of each call are computed.
// depth: tokens (dids) in the cache first, not timed (llama-bench's -d). Their
// last logits are read back so that a device has finished them before the
// clock starts (llama-bench synchronizes there too): without logits a GPU's
// passes are queued, and their tail would be timed as the test's.
static int run_once(infer_ctx *c, const int32_t *ids, int n, int pp, float *logits, double *tps, const int32_t *dids, int depth) {
    infer_ctx_reset(c);
    if (depth && infer_eval(c, dids, depth, logits, 1)) return cli_error("%s", infer_last_error());
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

// One batched run of B sequences: prompts, then n_tg steps; aggregate t/s of each.
static int run_batch(infer_model *m, infer_batch *b, infer_ctx **c, int B, const int32_t *ids, int n_pp, int n_tg,
                     float *logits, int greedy, double *pp_tps, double *tg_tps) { // (logits NULL: none read back)
    int V = infer_model_n_vocab(m);
    const int32_t *seq_ids[256];
    int n[256];
    float *out[256];
    int32_t got[256], *gt[256]; // (greedy: each step's tokens instead of the logits)
    for (int i = 0; i < 256; i++) gt[i] = &got[i];
    if (greedy) logits = NULL;
    for (int i = 0; i < B; i++) {
        infer_ctx_reset(c[i]);
        seq_ids[i] = ids + (size_t)i * n_pp, n[i] = n_pp, out[i] = logits ? logits + (size_t)i * V : NULL;
    }
    double t0 = cli_now();
    if (n_pp > 0 && infer_batch_eval_tokens(b, c, B, seq_ids, n, logits ? out : NULL, greedy ? gt : NULL))
        return cli_error("%s", infer_last_error());
    double t1 = cli_now();
    int32_t tok[256];
    for (int s = 0; s < n_tg; s++) {
        for (int i = 0; i < B; i++) tok[i] = ids[(size_t)i * n_pp + (size_t)s % (n_pp ? n_pp : 1)], seq_ids[i] = &tok[i], n[i] = 1;
        if (infer_batch_eval_tokens(b, c, B, seq_ids, n, logits ? out : NULL, greedy ? gt : NULL))
            return cli_error("%s", infer_last_error());
    }
    double t2 = cli_now();
    *pp_tps = n_pp ? (double)B * n_pp / (t1 - t0) : 0;
    *tg_tps = n_tg ? (double)B * n_tg / (t2 - t1) : 0;
    return 0;
}

// llama-bench's ngl column: the layers on the GPU (-ngl as given, "all" by
// default), 0 off a GPU; gpu_layers: the same as a number (-1: all).
static const char *ngl_column(const infer_ctx *c, long ngl, char *buf, size_t cap, long *gpu_layers) {
    int gpu = !strcmp(infer_ctx_backend(c), "cuda");
    *gpu_layers = gpu ? ngl : 0;
    if (gpu && ngl < 0) return "all";
    snprintf(buf, cap, "%ld", *gpu_layers);
    return buf;
}

// --batch: a row per count and phase.
static int bench_batch(infer_model *m, const int *batch, int n_batch, int n_pp, int n_tg, int reps, const char *fmt,
                       long threads, const char *device, long ngl, int no_logits) {
    int Bmax = 0, V = infer_model_n_vocab(m), rc = 0;
    for (int i = 0; i < n_batch; i++) Bmax = batch[i] > Bmax ? batch[i] : Bmax;
    infer_ctx **c = calloc((size_t)Bmax, sizeof *c);
    int32_t *ids = malloc(sizeof *ids * ((size_t)Bmax * n_pp + 1));
    float *logits = infer_host_alloc(sizeof(float) * (size_t)Bmax * V); // (page-locked with a GPU: as llama.cpp's output buffer)
    double *pp = malloc(sizeof *pp * (size_t)reps), *tg = malloc(sizeof *tg * (size_t)reps);
    infer_batch *b = NULL;
    if (!c || !ids || !logits || !pp || !tg) rc = cli_error("out of memory");
    if (!rc && cli_batch_new(m, &b)) rc = cli_error("%s", infer_last_error());
    uint64_t r = 12345;
    for (size_t i = 0; !rc && i < (size_t)Bmax * n_pp; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((r >> 33) % (uint64_t)V);
    }
    for (int i = 0; !rc && i < Bmax; i++)
        if (cli_ctx_new(m, n_pp + n_tg + 1, &c[i]) || cli_place(c[i], device, ngl))
            rc = cli_error("%s", infer_last_error());
    if (!rc && infer_ctx_split(c[0])) // (before the model's tables are printed)
        rc = cli_error("bench: -ngl %ld splits the model between the GPU and the CPU; batched passes (--batch) run on one", ngl);
    const char *be = rc ? "" : infer_ctx_backend(c[0]);
    char nbuf[24];
    long gl = 0;
    const char *ngl_s = rc ? "" : ngl_column(c[0], ngl, nbuf, sizeof nbuf, &gl);
    char name[96];
    snprintf(name, sizeof name, "%s %.0fM %s", infer_model_arch(m), infer_model_n_params(m) / 1e6, infer_model_ftype(m));
    int json = !strcmp(fmt, "json"), first = 1;
    if (!rc && json) printf("[\n");
    if (!rc && !json)
        printf("| model | backend | ngl | threads | B | test | t/s (all sequences) |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < n_batch && !rc; k++) {
        int B = batch[k];
        double w1, w2;
        float *lg = no_logits ? NULL : logits; // (no_logits 2: greedy tokens instead)
        int gr = no_logits == 2;
        if ((rc = run_batch(m, b, c, B, ids, n_pp < 16 ? n_pp : 16, n_tg < 4 ? n_tg : 4, lg, gr, &w1, &w2))) break; // warm-up
        for (int i = 0; i < reps && !rc; i++) rc = run_batch(m, b, c, B, ids, n_pp, n_tg, lg, gr, &pp[i], &tg[i]);
        if (rc) break;
        double mean[2], sd[2];
        stats(pp, reps, &mean[0], &sd[0]);
        stats(tg, reps, &mean[1], &sd[1]);
        for (int ph = 0; ph < 2; ph++) {
            if (!(ph ? n_tg : n_pp)) continue;
            char test[32];
            snprintf(test, sizeof test, "%s%d", ph ? "tg" : "pp", ph ? n_tg : n_pp);
            if (json)
                printf("%s  {\"model\": \"%s\", \"backend\": \"%s\", \"n_gpu_layers\": %ld, \"threads\": %ld, \"batch\": %d, \"test\": \"%s\", "
                       "\"avg_ts\": %.3f, \"stddev_ts\": %.3f}", first ? "" : ",\n", name, be, gl, threads, B, test, mean[ph], sd[ph]);
            else printf("| %s | %s | %s | %ld | %d | %s | %.2f ± %.2f |\n", name, be, ngl_s, threads, B, test, mean[ph], sd[ph]);
            first = 0;
        }
        fflush(stdout);
    }
    if (!rc && json) printf("\n]\n");
    for (int i = 0; c && i < Bmax; i++) infer_ctx_free(c[i]);
    infer_batch_free(b);
    free(c), free(ids), free(pp), free(tg);
    infer_host_free(logits);
    infer_model_free(m);
    return rc;
}

static const char *g_usage =
    "usage: infer bench [-m MODEL] [-t N] [--device cpu|cuda] [-ngl N] [-p 512] [-n 128] [-d 0] [-r 5] [-o md|json] [--batch 1,2,4,8,16] [--graph SPEC]\n"
    "  a llama-bench-shaped table: prompt processing (pp, all tokens in one call) and text generation (tg,\n"
    "  one token at a time), mean +- stddev of r runs. With --batch: for each count B, B sequences each take a\n"
    "  prompt of -p tokens, then -n decode steps, all in batched passes (llama-batched-bench's S_PP, S_TG).\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: Gemma 3 270M)\n"
    "  -t, --threads N        threads (default 1)\n"
    CLI_USAGE_NUMA
    CLI_USAGE_DEVICE
    CLI_USAGE_CACHE
    "  -p, --n-prompt N       prompt tokens (default 512)\n"
    "  -n, --n-gen N          generated tokens (default 128)\n"
    "  -r, --repetitions N    runs of each test (default 5)\n"
    "  -o, --output md|json   the table as markdown (default) or JSON\n"
    "      --batch 1,2,...    batched decode at these sequence counts (1 to 256, at most 16 counts)\n"
    "      --no-logits        (--batch) no logits read back: the passes alone\n"
    "      --greedy           (--batch) each step's greedy tokens read back instead of the logits\n"
    "  -d, --n-depth N        tokens in the cache before each test, not timed (as llama-bench's -d)\n"
    "      --graph SPEC       a layer graph (as predict's), e.g. pipelined: attention on the CPU, FFN on the GPU\n"
    "      --spec-ngram [K]   instead: greedy decode of -n tokens after a chat prompt (-f's text as the user's message),\n"
    "                         one token a pass against K (default 8) drafted by the n-gram drafter checked in one pass\n"
    "                         (also --draft-ngram); the tokens must be the same both ways\n"
    "      --model-draft M    as --spec-ngram, the draft model M guessing (--draft-max N, --draft-p-min P as run's)\n"
    "  -f, --file TEXT        --spec-ngram's text (default bench/data/spec-edit.txt: code to repeat with one name changed)\n";

enum { OPT_BATCH = OPT_LOCAL, OPT_NO_LOGITS, OPT_GRAPH, OPT_GREEDY };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_NUMA, CLI_OPT_DEVICE, CLI_OPT_NGL, CLI_OPTS_CACHE, CLI_OPTS_SPEC,
    {"file", required_argument, NULL, 'f'},
    {"n-prompt", required_argument, NULL, 'p'},
    {"n-depth", required_argument, NULL, 'd'},
    {"n-gen", required_argument, NULL, 'n'},
    {"repetitions", required_argument, NULL, 'r'},
    {"output", required_argument, NULL, 'o'},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"no-logits", no_argument, NULL, OPT_NO_LOGITS},
    {"graph", required_argument, NULL, OPT_GRAPH},
    {"greedy", no_argument, NULL, OPT_GREEDY},
    {0},
};

int cmd_bench(int argc, char **argv) {
    const char *fmt = "md", *batch_list = NULL, *device = NULL;
    int no_logits = 0;
    const char *graph = NULL, *spec_text = NULL;
    int spec = 0;
    cli_draft dr;
    cli_draft_init(&dr);
    long n_pp = 512, n_tg = 128, reps = 5, depth = 0;
    cli_opts o;
    cli_opts_init(&o, "bench", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:p:n:r:o:d:f:", g_opts)) > 0) {
        switch (opt) {
        case 'd':
            if ((depth = cli_parse_count("-d", optarg, 1 << 20)) < 0) return 1;
            break;
        case 'p':
            if ((n_pp = cli_parse_count("-p", optarg, 1 << 16)) < 0) return 1;
            break;
        case 'n':
            if ((n_tg = cli_parse_count("-n", optarg, 1 << 16)) < 0) return 1;
            break;
        case 'r':
            if ((reps = cli_parse_count("-r", optarg, 1000)) < 0) return 1;
            break;
        case 'o':
            fmt = optarg;
            if (strcmp(fmt, "md") && strcmp(fmt, "json")) return cli_error("bench: -o takes md or json, not \"%s\"", fmt);
            break;
        case OPT_BATCH: batch_list = optarg; break;
        case OPT_NO_LOGITS: no_logits = 1; break;
        case OPT_GREEDY: no_logits = 2; break;
        case OPT_GRAPH: graph = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_SPEC:
            if ((spec = cli_spec_k("bench", argc, argv, optarg)) < 0) return 1;
            break;
        case OPT_DRAFT: case OPT_DRAFT_MAX: case OPT_DRAFT_PMIN:
            if (cli_draft_opt(&dr, "bench", opt, optarg)) return 1;
            break;
        case 'f': spec_text = optarg; break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("bench: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    long threads = o.threads;
    int batch[16], n_batch = 0;
    if (batch_list) {
        int *bl = cli_parse_ids(batch_list, &n_batch);
        if (!bl) return 1;
        if (n_batch > 16) { free(bl); return cli_error("bench: --batch takes at most 16 counts"); }
        for (int i = 0; i < n_batch; i++) {
            if (bl[i] < 1 || bl[i] > 256) {
                int bad = bl[i];
                free(bl);
                return cli_error("bench: --batch counts must be 1 to 256, not %d", bad);
            }
            batch[i] = bl[i];
        }
        free(bl);
    }
    if (no_logits && !batch_list) return cli_error("bench: %s applies to --batch", no_logits == 2 ? "--greedy" : "--no-logits");
    if (spec && dr.model) return cli_error("bench: give --spec-ngram or --model-draft, not both");
    if (dr.model) spec = dr.max;
    if (spec_text && !spec) return cli_error("bench: -f is --spec-ngram's text");
    if (spec && (batch_list || graph || depth))
        return cli_error("bench: --spec-ngram runs one sequence, dense; not with %s", batch_list ? "--batch" : graph ? "--graph" : "-d");
    if (spec && n_tg < 2) return cli_error("bench: --spec-ngram decodes -n tokens: give at least 2");
    if (!model && !(model = cli_default_model())) return 1;
    if (reps < 1) return cli_error("bench: -r must be at least 1");
    cli_set_threads(threads ? (int)threads : 1);
    infer_model *m;
    if (cli_model_load(model, &m)) return cli_error("%s", infer_last_error());
    if (n_batch && depth) { infer_model_free(m); return cli_error("bench: -d runs one sequence; not with --batch"); }
    if (n_batch && graph) { infer_model_free(m); return cli_error("bench: --graph runs one sequence; not with --batch"); }
    if (spec) {
        int rc = bench_spec(m, spec_text, (int)n_tg, (int)reps, spec, &dr, fmt, threads ? threads : 1, device, o.ngl);
        infer_model_free(m);
        return rc;
    }
    if (n_batch) return bench_batch(m, batch, n_batch, (int)n_pp, (int)n_tg, (int)reps, fmt, threads ? threads : 1, device, o.ngl, no_logits);
    int n_max = (int)(n_pp > n_tg ? n_pp : n_tg);
    infer_ctx *c;
    if (cli_ctx_new(m, (n_max > 0 ? n_max : 1) + (int)depth, &c)) { infer_model_free(m); return cli_error("%s", infer_last_error()); }
    if (cli_place(c, device, o.ngl) || (graph && infer_ctx_set_graph(c, graph, 0))) {
        cli_error("%s", infer_last_error());
        infer_ctx_free(c), infer_model_free(m);
        return 1;
    }
    char bbuf[96]; // (a split context: both; a graph: named)
    snprintf(bbuf, sizeof bbuf, "%s%s%s%s", !strcmp(infer_ctx_backend(c), "cuda") ? "CUDA" : "CPU", infer_ctx_split(c) ? "+CPU" : "",
             graph ? " graph " : "", graph ? graph : "");
    const char *be = bbuf;
    char nbuf[24];
    long gl;
    const char *ngl_s = ngl_column(c, o.ngl, nbuf, sizeof nbuf, &gl);
    int32_t *ids = malloc(sizeof *ids * ((size_t)(n_max > 0 ? n_max : 1) + (size_t)depth)), *dids = ids + (n_max > 0 ? n_max : 1);
    int V = infer_model_n_vocab(m);
    uint64_t r = 12345;
    for (long i = 0; i < (n_max > 0 ? n_max : 1) + depth; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; ids[i] = (int32_t)((r >> 33) % (uint64_t)V); }

    result res[2];
    int nres = 0, rc = 0;
    double *v = malloc(sizeof *v * (size_t)reps);
    float *logits = infer_host_alloc(sizeof(float) * (size_t)V);
    for (int pp = 1; pp >= 0 && !rc; pp--) {
        int n = (int)(pp ? n_pp : n_tg);
        if (n <= 0) continue;
        double warm;
        if ((rc = run_once(c, ids, pp ? n : (n < 16 ? n : 16), pp, logits, &warm, dids, (int)depth))) break; // warm-up
        for (int k = 0; k < reps && !rc; k++) rc = run_once(c, ids, n, pp, logits, &v[k], dids, (int)depth);
        if (depth) snprintf(res[nres].test, sizeof res[nres].test, "%s%d @ d%ld", pp ? "pp" : "tg", n, depth);
        else snprintf(res[nres].test, sizeof res[nres].test, "%s%d", pp ? "pp" : "tg", n);
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
                printf("  {\"model\": \"%s\", \"size\": %lld, \"params\": %lld, \"backend\": \"%s\", \"n_gpu_layers\": %ld, \"threads\": %ld, "
                       "\"n_depth\": %ld, \"test\": \"%s\", \"avg_ts\": %.3f, \"stddev_ts\": %.3f}%s\n",
                       name, bytes, params, be, gl, threads ? threads : 1, depth, res[i].test, res[i].mean, res[i].sd, i + 1 < nres ? "," : "");
            printf("]\n");
        } else {
            printf("| model | size | params | backend | ngl | threads | test | t/s |\n");
            printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
            for (int i = 0; i < nres; i++)
                printf("| %s | %.2f MiB | %.2f M | %s | %s | %ld | %s | %.2f ± %.2f |\n", name, bytes / 1048576.0, params / 1e6, be, ngl_s,
                       threads ? threads : 1, res[i].test, res[i].mean, res[i].sd);
        }
    }
    free(v);
    infer_host_free(logits);
    free(ids);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
