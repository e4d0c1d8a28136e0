// infer bench-walk [-m MODEL] -x VINDEX [-f TEXT] [--ks 1,2,5,10,20,50,100 | --graph SPEC] [-t N] [-o md|json]
// Walk FFN accuracy and speed against dense: the text runs teacher-forced
// through the model and through walk graphs (every layer walks the top K% of
// its features); at every position the next-token distributions are
// compared (top-1 agreement, KL). The reference is dense over the same
// feature rows (the walk over all of them), so the figures measure the
// top-K selection alone; the vindex's own difference from the model (its
// FFN re-quantized, f32 activations) is a separate row, and each K is also
// compared with the model. Then the FFN's decode time per layer is measured
// one token at a time, for the walk at each K and for the model's dense FFN.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNK = 32, DECODE_TOKENS = 24 };

// log-softmax of logits (in place)
static void log_softmax(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    float ls = (float)(m + log(s));
    for (int i = 0; i < n; i++) x[i] -= ls;
}

// KL(p || q) of two log-distributions
static double kl_of(const float *lp, const float *lq, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)lp[i]) * ((double)lp[i] - lq[i]);
    return s;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

// µs per layer per token of the FFN (dense, or the walk's) over DECODE_TOKENS one-token steps
static double ffn_us(infer_model *m, const char *graph, const int32_t *ids, int n) {
    infer_ctx *c;
    if (cli_ctx_new(m, n, &c)) return -1;
    if (graph && infer_ctx_set_graph(c, graph, 0)) { infer_ctx_free(c); return -1; }
    infer_ctx_profile(c, 1);
    for (int i = 0; i < n; i++)
        if (infer_eval(c, ids + i, 1, NULL, 0)) { infer_ctx_free(c); return -1; }
    const infer_phase ffn[] = {INFER_PHASE_WALK, INFER_PHASE_GATE_UP, INFER_PHASE_ACT, INFER_PHASE_DOWN};
    double s = 0;
    for (int p = 0; p < 4; p++) s += infer_ctx_profile_seconds(c, ffn[p]);
    double us = s / n / infer_model_n_layer(m) * 1e6;
    infer_ctx_free(c);
    return us;
}

static int by_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

// --sparsity: how concentrated each layer's FFN output is. At each of the
// text's first n positions, every feature's contribution |act| |down| (the
// length of what it adds); per layer, the share of features that holds 50%,
// 90% and 99% of their sum when taken largest first, and the share of the sum
// in the top K% by |gate . x| (what the walk takes) and by contribution (the
// best any selection of K could hold).
static int sparsity(infer_model *m, const int32_t *ids, int n, const int *ks, int nks, int json) {
    int L = infer_model_n_layer(m), E = infer_model_n_embd(m), F = infer_model_walk_features(m), rc = 1;
    float *xin = malloc(sizeof(float) * (size_t)L * E), *c = malloc(sizeof(float) * (size_t)F);
    infer_feature *ft = malloc(sizeof *ft * (size_t)F);
    double *need = calloc((size_t)L * 3, sizeof(double)), *gm = calloc((size_t)L * nks, sizeof(double)), *cm = calloc((size_t)L * nks, sizeof(double));
    infer_ctx *ctx = NULL;
    if (!xin || !c || !ft || !need || !gm || !cm) { cli_error("out of memory"); goto out; }
    if (cli_ctx_new(m, n, &ctx)) { cli_error("%s", infer_last_error()); goto out; }
    static const double q[3] = {0.5, 0.9, 0.99};
    for (int p = 0; p < n; p++) {
        if (infer_eval_ffn_input(ctx, ids + p, 1, xin)) { cli_error("%s", infer_last_error()); goto out; }
        for (int l = 0; l < L; l++) {
            if (infer_walk_features(m, l, xin + (size_t)l * E, F, ft)) { cli_error("%s", infer_last_error()); goto out; }
            double tot = 0;
            for (int f = 0; f < F; f++) c[f] = fabsf(ft[f].act) * ft[f].down, tot += c[f];
            if (!(tot > 0)) continue;
            for (int ki = 0, f = 0; ki < nks; ki++) { // (ft is by |gate . x|, largest first)
                double g = 0;
                int k = (int)((long long)F * ks[ki] / 100);
                for (f = 0; f < k; f++) g += c[f];
                gm[l * nks + ki] += g / tot;
            }
            qsort(c, (size_t)F, sizeof *c, by_desc);
            double cum = 0;
            int qi = 0;
            for (int ki = 0, f = 0; f < F; f++) {
                cum += c[f];
                while (qi < 3 && cum >= q[qi] * tot) need[l * 3 + qi++] += (double)(f + 1) / F;
                while (ki < nks && f + 1 == (int)((long long)F * ks[ki] / 100)) cm[l * nks + ki++] += cum / tot;
            }
        }
        fprintf(stderr, "\rbench-walk --sparsity: %d/%d positions", p + 1, n);
    }
    fprintf(stderr, "\n");
    for (int i = 0; i < L * 3; i++) need[i] /= n;
    for (int i = 0; i < L * nks; i++) gm[i] /= n, cm[i] /= n;
    if (json) {
        printf("{\"positions\": %d, \"features\": %d, \"ks\": [", n, F);
        for (int ki = 0; ki < nks; ki++) printf("%s%d", ki ? ", " : "", ks[ki]);
        printf("], \"layers\": [");
        for (int l = 0; l < L; l++) {
            printf("%s{\"layer\": %d, \"need\": [%.6f, %.6f, %.6f], \"gate_mass\": [", l ? ", " : "", l, need[l * 3], need[l * 3 + 1], need[l * 3 + 2]);
            for (int ki = 0; ki < nks; ki++) printf("%s%.6f", ki ? ", " : "", gm[l * nks + ki]);
            printf("], \"contrib_mass\": [");
            for (int ki = 0; ki < nks; ki++) printf("%s%.6f", ki ? ", " : "", cm[l * nks + ki]);
            printf("]}");
        }
        printf("]}\n");
    } else {
        printf("FFN sparsity: %d positions, %d features a layer; a feature's contribution is |act| |down|\n\n", n, F);
        printf("| layer | features holding 50%% of the sum | 90%% | 99%% |\n| ---: | ---: | ---: | ---: |\n");
        double mn[3] = {0};
        for (int l = 0; l < L; l++) {
            printf("| %d | %.1f%% | %.1f%% | %.1f%% |\n", l, 100 * need[l * 3], 100 * need[l * 3 + 1], 100 * need[l * 3 + 2]);
            for (int i = 0; i < 3; i++) mn[i] += need[l * 3 + i] / L;
        }
        printf("| mean | %.1f%% | %.1f%% | %.1f%% |\n\n", 100 * mn[0], 100 * mn[1], 100 * mn[2]);
        printf("| K | share of the sum in the top K by \\|gate . x\\| (walk) | by contribution (the best K) |\n| ---: | ---: | ---: |\n");
        for (int ki = 0; ki < nks; ki++) {
            double a = 0, b = 0;
            for (int l = 0; l < L; l++) a += gm[l * nks + ki] / L, b += cm[l * nks + ki] / L;
            printf("| %d%% | %.1f%% | %.1f%% |\n", ks[ki], 100 * a, 100 * b);
        }
    }
    rc = 0;
out:
    infer_ctx_free(ctx);
    free(xin), free(c), free(ft), free(need), free(gm), free(cm);
    return rc;
}

static const char *g_usage =
    "usage: infer bench-walk [-m MODEL] -x VINDEX [-f TEXT] [--ks 1,2,5,10,20,50,100] [--rank gate|contrib] [-t N] [-o md|json]\n"
    "       infer bench-walk [-m MODEL] -x VINDEX [-f TEXT] --graph SPEC [--calib FILE] [-t N] [-o md|json]\n"
    "       infer bench-walk [-m MODEL] -x VINDEX [-f TEXT] --sparsity N [--ks ...] [-o md|json]\n"
    "  the walk FFN against dense over a text, teacher-forced: top-1 agreement and KL at every position for\n"
    "  each K (percent of the features), against dense over the vindex's rows and against the model, and\n"
    "  the FFN's decode time per layer.\n"
    "  -m, --model MODEL      the model the vindex was made from (default: Gemma 3 270M)\n"
    "  -x, --vindex DIR       the vindex (infer extract)\n"
    "  -f, --file TEXT        the text (default bench/data/english.txt)\n"
    "      --ks 1,2,...       K as percentages 1-100\n"
    "      --rank gate|contrib how the walk picks its K: by |gate . x| (walk, the default) or by the bound on\n"
    "                         each feature's contribution, |act(gate . x)| |up| |down| (walkc)\n"
    "      --sparsity N       instead: the FFN's sparsity at the text's first N positions, per layer: the share of\n"
    "                         features holding 50/90/99% of the sum of their contributions |act| |down|, and the\n"
    "                         share of that sum in the top K% by |gate . x| and by contribution\n"
    "      --graph SPEC       one graph instead of the Ks (as run's and predict's, e.g. \"walk:4-9@5%\");\n"
    CLI_USAGE_GRAPH_AUTO
    "  -t, --threads N        threads (default 1)\n"
    "  -o md|json             the table as markdown (default) or JSON\n";

enum { OPT_KS = OPT_LOCAL, OPT_RANK, OPT_GRAPH, OPT_SPARSITY };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPTS_GRAPH_AUTO,
    {"graph", required_argument, NULL, OPT_GRAPH},
    {"sparsity", required_argument, NULL, OPT_SPARSITY},
    {"vindex", required_argument, NULL, 'x'},
    {"file", required_argument, NULL, 'f'},
    {"ks", required_argument, NULL, OPT_KS},
    {"rank", required_argument, NULL, OPT_RANK},
    {0},
};

int cmd_bench_walk(int argc, char **argv) {
    const char *vdir = NULL, *file = NULL, *ks_s = "1,2,5,10,20,50,100", *fmt = "md", *kind = "walk", *graph = NULL;
    long sparse_n = 0;
    int ks_given = 0, rank_given = 0;
    cli_opts o;
    cli_opts_init(&o, "bench-walk", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:x:f:o:", g_opts)) > 0) {
        switch (opt) {
        case 'x': vdir = optarg; break;
        case 'f': file = optarg; break;
        case OPT_KS: ks_s = optarg, ks_given = 1; break;
        case OPT_GRAPH: graph = optarg; break;
        case OPT_SPARSITY:
            if ((sparse_n = cli_parse_count("--sparsity", optarg, 1 << 16)) < 0) return 1;
            if (!sparse_n) return cli_error("bench-walk: --sparsity takes a position count of at least 1");
            break;
        case OPT_RANK:
            rank_given = 1;
            if (!strcmp(optarg, "gate")) kind = "walk";
            else if (!strcmp(optarg, "contrib")) kind = "walkc";
            else return cli_error("bench-walk: --rank takes gate or contrib, not \"%s\"", optarg);
            break;
        case 'o':
            fmt = optarg;
            if (strcmp(fmt, "md") && strcmp(fmt, "json")) return cli_error("bench-walk: -o takes md or json, not \"%s\"", fmt);
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("bench-walk: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    if (!vdir) return cli_error("bench-walk: no vindex given (-x DIR, made by infer extract)");
    if (graph && (ks_given || rank_given)) return cli_error("bench-walk: --graph measures one graph: give it or --ks/--rank, not both");
    if (sparse_n && (graph || rank_given)) return cli_error("bench-walk: --sparsity measures the FFN itself: not with --graph or --rank");
    if (cli_graph_flags(&o, graph)) return 1;
    int nks = 0, ks[32];
    for (const char *p = graph ? "" : ks_s; *p;) {
        char *e;
        long k = strtol(p, &e, 10);
        if (e == p || k < 1 || k > 100 || nks == 32 || (*e && *e != ','))
            return cli_error("bench-walk: --ks \"%s\" is not a list of percentages 1-100", ks_s);
        ks[nks++] = (int)k;
        p = *e ? e + 1 : e;
    }
    if (graph) nks = 1, ks[0] = 0;
    if (!model && !(model = cli_default_model())) return 1;
    char default_file[4200];
    size_t tlen;
    char *text = cli_read_text("bench-walk", cli_bench_text(file, default_file, sizeof default_file), &tlen);
    if (!text) return 1;

    int rc = 1, n = 0;
    int32_t *ids = NULL;
    char (*specs)[2048] = NULL;
    infer_model *m = NULL;
    infer_ctx *cd = NULL, *cr = NULL, **cw = NULL;
    float *ld = NULL, *lw = NULL, *lr = NULL;
    double vx_agree = 0, vx_kl = 0;
    double *agree = calloc((size_t)nks, sizeof(double)), *kl = calloc((size_t)nks, sizeof(double)), *us = calloc((size_t)nks, sizeof(double));
    double *agree_m = calloc((size_t)nks, sizeof(double)), *kl_m = calloc((size_t)nks, sizeof(double));
    if (cli_model_load(model, &m) || infer_model_attach_vindex(m, vdir)) { cli_error("%s", infer_last_error()); goto done; }
    if (infer_tokenize(m, text, tlen, 1, 0, &ids, &n)) { cli_error("%s", infer_last_error()); goto done; }
    if (n < 2) { cli_error("bench-walk: the text gives fewer than 2 tokens"); goto done; }
    if (sparse_n) {
        if (sparse_n > n) { cli_error("bench-walk: --sparsity %ld: the text has %d tokens", sparse_n, n); goto done; }
        rc = sparsity(m, ids, (int)sparse_n, ks, nks, !strcmp(fmt, "json"));
        goto done;
    }
    // the graphs measured: each K's, or the one given (auto's choice made here, on its calibration text)
    specs = calloc(graph ? 1 : (size_t)nks, sizeof *specs);
    if (!specs) { cli_error("out of memory"); goto done; }
    if (graph) {
        if (cli_graph(&o, m, graph, specs[0], sizeof specs[0])) goto done;
    } else
        for (int ki = 0; ki < nks; ki++) snprintf(specs[ki], sizeof specs[ki], "%s@%d%%", kind, ks[ki]);
    int V = infer_model_n_vocab(m), npos = n - 1;
    ld = malloc(sizeof(float) * CHUNK * (size_t)V);
    lw = malloc(sizeof(float) * CHUNK * (size_t)V);
    if (!ld || !lw || !agree || !kl || !us || !agree_m || !kl_m) { cli_error("out of memory"); goto done; }
    // contexts: the model (cd), dense over the vindex's features (cr), one per K
    cw = calloc((size_t)nks, sizeof *cw);
    lr = malloc(sizeof(float) * CHUNK * (size_t)V);
    if (!cw || !lr || cli_ctx_new(m, n, &cd) || cli_ctx_new(m, n, &cr) || infer_ctx_set_graph(cr, "walk@100%", 0)) {
        cli_error("%s", cw && lr ? infer_last_error() : "out of memory");
        goto done;
    }
    for (int ki = 0; ki < nks; ki++)
        if (cli_ctx_new(m, n, &cw[ki]) || infer_ctx_set_graph(cw[ki], specs[ki], 0)) { cli_error("%s", infer_last_error()); goto done; }
    for (int p = 0; p < npos; p += CHUNK) {
        int T = npos - p < CHUNK ? npos - p : CHUNK;
        if (infer_eval(cd, ids + p, T, ld, 0) || infer_eval(cr, ids + p, T, lr, 0)) { cli_error("%s", infer_last_error()); goto done; }
        int top_d[CHUNK], top_r[CHUNK];
        for (int t = 0; t < T; t++) {
            float *a = ld + (size_t)t * V, *b = lr + (size_t)t * V;
            top_d[t] = argmax(a, V), top_r[t] = argmax(b, V);
            log_softmax(a, V), log_softmax(b, V);
            vx_agree += top_d[t] == top_r[t];
            vx_kl += kl_of(a, b, V);
        }
        for (int ki = 0; ki < nks; ki++) {
            if (infer_eval(cw[ki], ids + p, T, lw, 0)) { cli_error("%s", infer_last_error()); goto done; }
            for (int t = 0; t < T; t++) {
                float *w = lw + (size_t)t * V;
                int tw = argmax(w, V);
                log_softmax(w, V);
                agree[ki] += tw == top_r[t], agree_m[ki] += tw == top_d[t];
                kl[ki] += kl_of(lr + (size_t)t * V, w, V), kl_m[ki] += kl_of(ld + (size_t)t * V, w, V);
            }
        }
        fprintf(stderr, "\rbench-walk: %d/%d positions", p + T, npos);
    }
    fprintf(stderr, "\n");
    vx_agree /= npos, vx_kl /= npos;
    for (int ki = 0; ki < nks; ki++) {
        agree[ki] /= npos, kl[ki] /= npos, agree_m[ki] /= npos, kl_m[ki] /= npos;
        int dn = n < DECODE_TOKENS ? n : DECODE_TOKENS;
        us[ki] = ffn_us(m, specs[ki], ids, dn);
        fprintf(stderr, "%s: top-1 %.4f, KL %.5f, FFN %.1f µs/layer\n", specs[ki], agree[ki], kl[ki], us[ki]);
    }
    double dense_us = ffn_us(m, NULL, ids, n < DECODE_TOKENS ? n : DECODE_TOKENS);
    int F = infer_model_walk_features(m);
    if (graph && !strcmp(fmt, "json")) {
        printf("{\"graph\": \"%s\", \"tokens\": %d, \"positions\": %d, \"features\": %d, \"threads\": %d, \"dense_ffn_us\": %.3f, "
               "\"vindex_vs_model\": {\"top1\": %.6f, \"kl\": %.6f}, \"top1\": %.6f, \"kl\": %.6f, \"top1_vs_model\": %.6f, "
               "\"kl_vs_model\": %.6f, \"ffn_us\": %.3f}\n", specs[0], n, npos, F, cli_threads(), dense_us, vx_agree, vx_kl, agree[0], kl[0],
               agree_m[0], kl_m[0], us[0]);
    } else if (graph) {
        printf("%s: %d tokens (%d next-token positions), %d features per layer, %d threads\n", specs[0], n, npos, F, cli_threads());
        printf("the vindex's dense FFN (every feature) against the model's: top-1 agreement %.2f%%, mean KL %.5f\n\n", 100 * vx_agree, vx_kl);
        printf("| graph | top-1 agreement | mean KL | top-1 vs the model | KL vs the model | FFN µs/layer | dense FFN / graph's |\n");
        printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        printf("| %s | %.2f%% | %.5f | %.2f%% | %.5f | %.1f | %.2fx |\n", specs[0], 100 * agree[0], kl[0], 100 * agree_m[0], kl_m[0], us[0],
               dense_us / us[0]);
        printf("\ndense FFN (the model's own weights): %.1f µs/layer\n", dense_us);
    } else if (!strcmp(fmt, "json")) {
        printf("{\"graph\": \"%s\", \"tokens\": %d, \"positions\": %d, \"features\": %d, \"threads\": %d, \"dense_ffn_us\": %.3f, "
               "\"vindex_vs_model\": {\"top1\": %.6f, \"kl\": %.6f}, \"walk\": [", kind, n, npos, F, cli_threads(), dense_us, vx_agree, vx_kl);
        for (int ki = 0; ki < nks; ki++)
            printf("%s{\"k_pct\": %d, \"k\": %d, \"top1\": %.6f, \"kl\": %.6f, \"top1_vs_model\": %.6f, \"kl_vs_model\": %.6f, \"ffn_us\": %.3f}",
                   ki ? ", " : "", ks[ki], (int)((long long)F * ks[ki] / 100), agree[ki], kl[ki], agree_m[ki], kl_m[ki], us[ki]);
        printf("]}\n");
    } else {
        printf("%s: %d tokens (%d next-token positions), %d features per layer, %d threads\n", kind, n, npos, F, cli_threads());
        printf("the vindex's dense FFN (every feature) against the model's: top-1 agreement %.2f%%, mean KL %.5f\n\n", 100 * vx_agree, vx_kl);
        printf("| K | K (%% of features) | top-1 agreement | mean KL | top-1 vs the model | KL vs the model | walk FFN µs/layer | dense FFN / walk FFN |\n");
        printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (int ki = 0; ki < nks; ki++)
            printf("| %d | %d%% | %.2f%% | %.5f | %.2f%% | %.5f | %.1f | %.2fx |\n", (int)((long long)F * ks[ki] / 100), ks[ki], 100 * agree[ki], kl[ki],
                   100 * agree_m[ki], kl_m[ki], us[ki], dense_us / us[ki]);
        printf("\ndense FFN (the model's own weights): %.1f µs/layer\n", dense_us);
    }
    rc = 0;
done:
    free(specs);
    free(text), free(ids), free(ld), free(lw), free(lr), free(agree), free(kl), free(us), free(agree_m), free(kl_m);
    infer_ctx_free(cd);
    infer_ctx_free(cr);
    for (int ki = 0; cw && ki < nks; ki++) infer_ctx_free(cw[ki]);
    free(cw);
    infer_model_free(m);
    return rc;
}
