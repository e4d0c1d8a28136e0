// infer bench-lm [-m MODEL] -x VINDEX [-f TEXT] [--probes 8,16,32,64,128] [-t N]
// The lm_head index against the model's own head over a text, teacher-forced:
// at every position the final-normed hidden state's top 5 from the index
// (each probe count) against the top 5 of the model's logits: top-1 recall
// (the same best token) and top-5 recall (the share of the true top 5 in the
// index's top 5); and the time of one lookup against the dense head's (its
// product and top 5), on the CPU or (--device cuda) the GPU.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_usage =
    "usage: infer bench-lm [-m MODEL] -x VINDEX [-f TEXT | --tokens N] [--probes 8,16,32,64,128] [-t N] [--device cpu|cuda]\n"
    "  the vindex's lm_head index (infer extract --lm-index) against the model's own head over a text,\n"
    "  teacher-forced: top-1 and top-5 recall for each number of clusters probed, and the time of a lookup\n"
    "  against the dense head's (its product and top 5), both with -t threads, or both on the GPU.\n"
    "  -m, --model MODEL      the model the vindex was made from (default: Gemma 3 270M)\n"
    "  -x, --vindex DIR       the vindex, extracted with --lm-index\n"
    "  -f, --file TEXT        the text (default bench/data/english.txt)\n"
    "      --tokens N         N pseudo-random token ids instead of a text (a model without a tokenizer)\n"
    "      --probes 8,16,...  clusters scored per lookup\n"
    "  -t, --threads N        threads (default 1)\n"
    "      --device cpu|cuda  where the head and the index run (default cpu)\n";

enum { OPT_PROBES = OPT_LOCAL, OPT_TOKENS, NP_MAX = 16 };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS,
    {"vindex", required_argument, NULL, 'x'},
    {"file", required_argument, NULL, 'f'},
    {"probes", required_argument, NULL, OPT_PROBES},
    CLI_OPT_DEVICE,
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {0},
};

int cmd_bench_lm(int argc, char **argv) {
    long ntok = 0;
    const char *vdir = NULL, *file = NULL, *probes_s = "8,16,32,64,128", *device = "cpu";
    cli_opts o;
    cli_opts_init(&o, "bench-lm", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:x:f:", g_opts)) > 0) {
        switch (opt) {
        case 'x': vdir = optarg; break;
        case 'f': file = optarg; break;
        case OPT_PROBES: probes_s = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_TOKENS:
            if ((ntok = cli_parse_count("--tokens", optarg, 1 << 20)) < 0) return 1;
            if (ntok < 2) return cli_error("bench-lm: --tokens takes at least 2");
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("bench-lm: unexpected argument \"%s\"", argv[optind]);
    if (!vdir) return cli_error("bench-lm: no vindex given (-x DIR, made by infer extract --lm-index)");
    int np = 0, probes[NP_MAX];
    for (const char *p = probes_s; *p;) {
        char *e;
        long k = strtol(p, &e, 10);
        if (e == p || k < 1 || k > (1 << 24) || np == NP_MAX || (*e && *e != ','))
            return cli_error("bench-lm: --probes \"%s\" is not a list of up to %d cluster counts", probes_s, NP_MAX);
        probes[np++] = (int)k;
        p = *e ? e + 1 : e;
    }
    const char *model = o.model;
    if (!model && !(model = cli_default_model())) return 1;
    char default_file[4200];
    size_t tlen;
    if (ntok && file) return cli_error("bench-lm: give a text (-f) or --tokens, not both");
    char *text = ntok ? NULL : cli_read_text("bench-lm", cli_bench_text(file, default_file, sizeof default_file), &tlen);
    if (!ntok && !text) return 1;

    int rc = 1, n = 0;
    int32_t *ids = NULL;
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    float *lg = NULL, *hid = NULL;
    int32_t *sel = NULL; // (infer_topk_max's room: the whole vocabulary)
    double r1[NP_MAX] = {0}, r5[NP_MAX] = {0}, t_idx[NP_MAX] = {0}, t_dense = 0, d1 = 0;
    int32_t dense5[5];
    if (cli_model_load(model, &m) || infer_model_attach_vindex(m, vdir)) { cli_error("%s", infer_last_error()); goto done; }
    int C = infer_lm_head_index_clusters(m);
    if (!C) { cli_error("bench-lm: %s has no lm_head index (infer extract --lm-index auto)", vdir); goto done; }
    if (infer_lm_head_set_device(m, device)) { cli_error("bench-lm: %s", infer_last_error()); goto done; }
    if (ntok) { // (ids from a fixed LCG: the same sequence every run)
        if (!(ids = malloc(sizeof(int32_t) * (size_t)ntok))) { cli_error("out of memory"); goto done; }
        uint32_t r = 12345;
        for (n = 0; n < ntok; n++) r = r * 1664525u + 1013904223u, ids[n] = (int32_t)((r >> 8) % (uint32_t)infer_model_n_vocab(m));
    } else if (infer_tokenize(m, text, tlen, 1, 0, &ids, &n)) { cli_error("%s", infer_last_error()); goto done; }
    if (n < 2) { cli_error("bench-lm: the text gives fewer than 2 tokens"); goto done; }
    int V = infer_model_n_vocab(m), L = infer_model_n_layer(m), E = infer_model_n_embd(m), npos = n - 1;
    lg = malloc(sizeof(float) * (size_t)V);
    hid = malloc(sizeof(float) * (size_t)(L + 1) * E);
    sel = malloc(sizeof(int32_t) * (size_t)V);
    if (!lg || !hid || !sel) { cli_error("out of memory"); goto done; }
    if (cli_ctx_new(m, n, &c)) { cli_error("%s", infer_last_error()); goto done; }
    { // (a first lookup, untimed: the index's sketch is made then)
        int32_t w[5];
        memset(hid, 0, sizeof(float) * (size_t)E);
        if (infer_lm_head_topk_index(m, hid, 5, probes[0], w) || infer_lm_head_topk_dense(m, hid, 5, w)) { cli_error("%s", infer_last_error()); goto done; }
    }
    for (int p = 0; p < npos; p++) {
        if (infer_eval_hidden(c, ids + p, 1, lg, 1, hid)) { cli_error("%s", infer_last_error()); goto done; }
        const float *xn = hid + (size_t)L * E; // (the final-normed hidden state)
        int32_t want[5], got[5];
        infer_topk_max(lg, V, 5, sel); // (the true top 5, ascending by id)
        memcpy(want, sel, sizeof want);
        int best = want[0];
        for (int i = 1; i < 5; i++) best = lg[want[i]] > lg[best] ? want[i] : best;
        double a = cli_now();
        if (infer_lm_head_topk_dense(m, xn, 5, dense5)) { cli_error("%s", infer_last_error()); goto done; }
        t_dense += cli_now() - a;
        d1 += dense5[0] == best;
        for (int k = 0; k < np; k++) {
            a = cli_now();
            if (infer_lm_head_topk_index(m, xn, 5, probes[k], got)) { cli_error("%s", infer_last_error()); goto done; }
            t_idx[k] += cli_now() - a;
            r1[k] += got[0] == best;
            int in = 0;
            for (int i = 0; i < 5; i++)
                for (int j = 0; j < 5; j++) in += got[i] == want[j];
            r5[k] += in / 5.0;
        }
        fprintf(stderr, "\rbench-lm: %d/%d positions", p + 1, npos);
    }
    fprintf(stderr, "\n");
    printf("%d next-token positions, %d vocabulary rows in %d clusters, on %s (%d threads)\n", npos, V, C, device, cli_threads());
    printf("the dense head's top 5 (its product, then the top 5): %.3f ms a lookup, top-1 the model's at %.2f%%\n\n", 1e3 * t_dense / npos,
           100 * d1 / npos);
    printf("| clusters probed | rows scored (mean) | top-1 recall | top-5 recall | ms a lookup | dense head / index |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < np; k++)
        printf("| %d | ~%d | %.2f%% | %.2f%% | %.3f | %.2fx |\n", probes[k], (int)((long long)V * (probes[k] < C ? probes[k] : C) / C),
               100 * r1[k] / npos, 100 * r5[k] / npos, 1e3 * t_idx[k] / npos, t_dense / t_idx[k]);
    rc = 0;
done:
    free(text), free(ids), free(lg), free(hid), free(sel);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
