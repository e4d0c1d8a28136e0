// infer predict [-m MODEL] [-x VINDEX] -p TEXT | --ids 1,2,3 [--graph SPEC] [-k K]
//               [--template TEXT] [--top N] [--walk-only] [--lm-head-topk K] [-o text|json] [-t N]
// The next-token distribution after a prompt: the top N tokens with their
// probabilities, and the time of each phase. With a graph other than dense
// the same prompt also runs dense, and the graph's measured error is printed
// next to its answer: KL(dense || graph), whether the top token is the same,
// and for cached layers the cosine similarity of the residual they hand on.
// --lm-head-topk K scores the vocabulary with the vindex's quantized lm_head,
// recomputes exact logits for its K best, and reports whether the true top-1
// and top-5 are among them.
// --walk-only drops the model's own FFN weights after a first dense pass
// and serves the FFN from the vindex, printing resident memory before and
// after.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int32_t id; float p; } tok_p;

static int by_p(const void *a, const void *b) {
    float x = ((const tok_p *)a)->p, y = ((const tok_p *)b)->p;
    return (x < y) - (x > y);
}

// probabilities of logits (in place), in double for the sum
static void softmax_d(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    for (int i = 0; i < n; i++) x[i] = (float)(exp((double)x[i] - m) / s);
}

static void json_str(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static const char *g_usage =
    "usage: infer predict [-m MODEL] [-x VINDEX] (-p TEXT | --ids 1,2,3) [--graph SPEC [--calib FILE]] [-k K] [--template TEXT]\n"
    "                     [--top N] [--walk-only] [--lm-head-topk K] [-o text|json] [-t N]\n"
    "  the next-token distribution after a prompt: the top N tokens with their probabilities, and the time of\n"
    "  each phase. A graph other than dense is also measured against dense (KL, same top-1, and for cached\n"
    "  layers the cosine of the residual they hand on).\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: Gemma 3 270M)\n"
    "  -x, --vindex DIR       a vindex made from the model, for walk layers (alone, it is the model too)\n"
    "  -p, --prompt TEXT      the prompt, tokenized with BOS\n"
    "      --ids 1,2,3        the prompt as token ids\n"
    "      --graph SPEC       per layer: dense | walk[@K|@P%] | cached:0-B, e.g. \"cached:0-8,walk:9-13@10%,dense:14-17\";\n"
    CLI_USAGE_GRAPH_AUTO
    "  -k K                   features a walk layer uses when SPEC gives none (default: all)\n"
    "      --template TEXT    the prompt cached layers were recorded for (default: the prompt itself)\n"
    "      --top N            tokens shown (default 5)\n"
    "      --walk-only        drop the model's own FFN weights and serve the FFN from the vindex; resident memory\n"
    "      --lm-head-topk K   candidates from the vindex's quantized lm_head, rescored exactly: recall of the true\n"
    "                         top 1 and top 5\n"
    "  -o text|json           the report as text (default) or JSON\n"
    "  -t, --threads N        threads (default 1)\n";

enum { OPT_IDS = OPT_LOCAL, OPT_GRAPH, OPT_TEMPLATE, OPT_WALK_ONLY, OPT_LM_HEAD_TOPK, OPT_TOP };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPTS_GRAPH_AUTO,
    {"vindex", required_argument, NULL, 'x'},
    {"prompt", required_argument, NULL, 'p'},
    {"ids", required_argument, NULL, OPT_IDS},
    {"graph", required_argument, NULL, OPT_GRAPH},
    {"template", required_argument, NULL, OPT_TEMPLATE},
    {"walk-only", no_argument, NULL, OPT_WALK_ONLY},
    {"lm-head-topk", required_argument, NULL, OPT_LM_HEAD_TOPK},
    {"top", required_argument, NULL, OPT_TOP},
    {0},
};

int cmd_predict(int argc, char **argv) {
    const char *vdir = NULL, *prompt = NULL, *ids_s = NULL, *graph = NULL, *tmpl = NULL, *fmt = "text";
    long top = 5, k = 0, lmk = 0;
    int walk_only = 0, opt;
    cli_opts o;
    cli_opts_init(&o, "predict", g_usage);
    while ((opt = cli_next(&o, argc, argv, "hm:t:x:p:k:o:", g_opts)) > 0) {
        switch (opt) {
        case 'x': vdir = optarg; break;
        case 'p': prompt = optarg; break;
        case OPT_IDS: ids_s = optarg; break;
        case OPT_GRAPH: graph = optarg; break;
        case OPT_TEMPLATE: tmpl = optarg; break;
        case OPT_WALK_ONLY: walk_only = 1; break;
        case OPT_LM_HEAD_TOPK:
            if ((lmk = cli_parse_count("--lm-head-topk", optarg, 1 << 30)) < 0) return 1;
            if (lmk == 0) return cli_error("predict: --lm-head-topk must be at least 1");
            break;
        case 'o':
            fmt = optarg;
            if (strcmp(fmt, "text") && strcmp(fmt, "json")) return cli_error("predict: -o takes text or json, not \"%s\"", fmt);
            break;
        case OPT_TOP:
            if ((top = cli_parse_count("--top", optarg, 1000)) < 0) return 1;
            if (top == 0) return cli_error("predict: --top must be at least 1");
            break;
        case 'k':
            if ((k = cli_parse_count("-k", optarg, 1 << 30)) < 0) return 1;
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("predict: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    if (!prompt && !ids_s) return cli_error("predict: no prompt given (-p TEXT or --ids 1,2,3)");
    if (prompt && ids_s) return cli_error("predict: give -p or --ids, not both");
    if (tmpl && !ids_s && !prompt) return cli_error("predict: --template needs a prompt");
    if (walk_only && !vdir) return cli_error("predict: --walk-only needs a vindex (-x DIR)");
    if (lmk && !vdir) return cli_error("predict: --lm-head-topk needs a vindex (-x DIR)");
    if (cli_graph_flags(&o, graph)) return 1;
    if (!model && !vdir && !(model = cli_default_model())) return 1;

    int rc = 1, n = 0, nt = 0;
    int32_t *ids = NULL, *tids = NULL;
    infer_model *m = NULL;
    infer_ctx *c = NULL, *cd = NULL;
    float *lg = NULL, *ld = NULL, *hg = NULL, *hd = NULL;
    tok_p *tp = NULL;
    double t0 = cli_now(), t_tmpl = 0, t_dense = 0;
    if (cli_model_load(model ? model : vdir, &m)) { cli_error("%s", infer_last_error()); goto done; }
    if (model && vdir && infer_model_attach_vindex(m, vdir)) { cli_error("%s", infer_last_error()); goto done; }
    double t1 = cli_now();
    if (prompt) {
        if (infer_tokenize(m, prompt, strlen(prompt), 1, 1, &ids, &n)) { cli_error("%s", infer_last_error()); goto done; }
        if (n == 0) { cli_error("predict: the prompt gives no tokens"); goto done; }
    } else if (!(ids = cli_parse_ids(ids_s, &n))) goto done;
    if (tmpl && infer_tokenize(m, tmpl, strlen(tmpl), 1, 1, &tids, &nt)) { cli_error("%s", infer_last_error()); goto done; }
    double t2 = cli_now();
    char gspec[2048]; // (the graph's choice, when auto, is not timed with the rest)
    if (graph) {
        if (cli_graph(&o, m, graph, gspec, sizeof gspec)) goto done;
        graph = gspec;
    }
    int V = infer_model_n_vocab(m), L = infer_model_n_layer(m), E = infer_model_n_embd(m);
    int approx = graph && strcmp(graph, "dense");
    lg = malloc(sizeof(float) * (size_t)V);
    hg = malloc(sizeof(float) * (size_t)(L + 1) * E);
    tp = malloc(sizeof(tok_p) * (size_t)V);
    if (!lg || !hg || !tp) { cli_error("out of memory"); goto done; }
    if (cli_ctx_new(m, n > nt ? n : nt, &c)) { cli_error("%s", infer_last_error()); goto done; }
    long rss_before = 0, rss_dropped = 0;
    size_t dropped = 0;
    if (walk_only && model) { // a dense pass touches every weight, then the FFN pages go
        if (infer_eval(c, ids, n, lg, 1)) { cli_error("%s", infer_last_error()); goto done; }
        infer_ctx_reset(c);
        rss_before = cli_rss_kib();
        if (infer_model_walk_only(m, &dropped)) { cli_error("%s", infer_last_error()); goto done; }
        rss_dropped = cli_rss_kib();
    }
    if (graph && infer_ctx_set_graph(c, graph, (int)k)) { cli_error("%s", infer_last_error()); goto done; }
    int n_cached = graph ? infer_ctx_n_cached(c) : 0;
    if (n_cached) { // the template (the prompt itself unless given) fills the cached layers
        double a = cli_now();
        if (tmpl && nt != n) { cli_error("predict: cached layers need the template's length: the prompt has %d tokens, the template %d", n, nt); goto done; }
        if (infer_ctx_set_template(c, tmpl ? tids : ids, n)) { cli_error("%s", infer_last_error()); goto done; }
        t_tmpl = cli_now() - a;
    }
    double t3 = cli_now();
    if (infer_eval_hidden(c, ids, n, lg, 1, hg)) { cli_error("%s", infer_last_error()); goto done; }
    double t4 = cli_now();
    double kl = 0, cosv = 0;
    int same_top = 1;
    if (approx) { // the dense reference
        double a = cli_now();
        ld = malloc(sizeof(float) * (size_t)V);
        hd = malloc(sizeof(float) * (size_t)(L + 1) * E);
        if (!ld || !hd) { cli_error("out of memory"); goto done; }
        if (cli_ctx_new(m, n, &cd) || infer_eval_hidden(cd, ids, n, ld, 1, hd)) { cli_error("%s", infer_last_error()); goto done; }
        t_dense = cli_now() - a;
    }
    // lm_head top-K: candidates from the quantized head, exact logits for them
    int lm_top1 = 0, lm_top5 = 0, lm_same = 0;
    double t_lm_q = 0, t_lm_exact = 0;
    if (lmk) {
        const float *xn = hg + (size_t)L * E; // the final-normed hidden state
        float *ql = malloc(sizeof(float) * (size_t)V);
        int32_t *cand = malloc(sizeof(int32_t) * (size_t)V);
        int K = lmk < V ? (int)lmk : V;
        if (!ql || !cand) { free(ql), free(cand); cli_error("out of memory"); goto done; }
        double a = cli_now();
        if (infer_lm_head_topk(m, xn, K, cand)) { free(ql), free(cand); cli_error("%s", infer_last_error()); goto done; }
        double b = cli_now();
        if (infer_lm_head_logits(m, xn, cand, K, ql)) { free(ql), free(cand); cli_error("%s", infer_last_error()); goto done; }
        int best = cand[0];
        float bestv = -INFINITY;
        for (int j = 0; j < K; j++)
            if (ql[j] > bestv) bestv = ql[j], best = cand[j];
        t_lm_exact = cli_now() - b;
        t_lm_q = b - a;
        char *in = calloc((size_t)V, 1); // the candidates
        for (int j = 0; in && j < K; j++) in[cand[j]] = 1;
        // the true top 5 from the full logits (into cand, free again)
        int32_t *t5 = cand, n5 = V < 5 ? V : 5, top1 = 0;
        infer_topk_max(lg, V, n5, t5);
        for (int r = 1; r < n5; r++) top1 = lg[t5[r]] > lg[t5[top1]] ? r : top1;
        lm_top1 = in && in[t5[top1]];
        for (int r = 0; in && r < n5; r++) lm_top5 += in[t5[r]];
        lm_same = best == t5[top1];
        free(in), free(ql), free(cand);
    }
    softmax_d(lg, V);
    { // the top N, then in order
        int N = top < V ? (int)top : V;
        int32_t *sel = malloc(sizeof(int32_t) * (size_t)V);
        if (!sel) { cli_error("out of memory"); goto done; }
        infer_topk_max(lg, V, N, sel);
        for (int i = 0; i < N; i++) tp[i] = (tok_p){sel[i], lg[sel[i]]};
        free(sel);
        qsort(tp, (size_t)N, sizeof *tp, by_p);
    }
    if (approx) {
        softmax_d(ld, V);
        int dtop = 0;
        for (int i = 0; i < V; i++) {
            if (ld[i] > 0) kl += ld[i] * (log(ld[i]) - log(lg[i] > 1e-30f ? lg[i] : 1e-30f));
            if (ld[i] > ld[dtop]) dtop = i;
        }
        same_top = dtop == tp[0].id;
        if (n_cached) { // the residual the cached layers hand to layer n_cached, at the last position
            const float *a = hg + (size_t)n_cached * E, *b = hd + (size_t)n_cached * E;
            double ab = 0, aa = 0, bb = 0;
            for (int i = 0; i < E; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
            cosv = ab / sqrt(aa * bb + 1e-300);
        }
    }
    double t5 = cli_now();
    int json = !strcmp(fmt, "json");
    if (json) printf("{\"tokens\": %d, \"graph\": \"%s\", \"top\": [", n, graph ? graph : "dense");
    else printf("prompt: %d tokens | graph: %s\n", n, graph ? graph : "dense");
    for (int i = 0; i < top && i < V; i++) {
        char *s = NULL;
        size_t len = 0;
        if (infer_detokenize(m, &tp[i].id, 1, 0, &s, &len)) len = 0; // no tokenizer (--ids): ids only
        if (json) {
            printf("%s{\"id\": %d, \"text\": ", i ? ", " : "", tp[i].id);
            json_str(s, len);
            printf(", \"p\": %.9g}", tp[i].p);
        } else {
            printf("%2d. %-20.*s (%.2f%%)  id %d\n", i + 1, (int)len, s, 100.0 * tp[i].p, tp[i].id);
        }
        free(s);
    }
    if (json) {
        printf("]");
        if (approx) printf(", \"kl_vs_dense\": %.9g, \"same_top1\": %s", kl, same_top ? "true" : "false");
        if (approx && n_cached) printf(", \"cached_layers\": %d, \"cached_residual_cos\": %.9g", n_cached, cosv);
        if (lmk) printf(", \"lm_head_topk\": {\"k\": %ld, \"top1_recall\": %d, \"top5_recall\": %d, \"same_top1\": %s, \"ms_quantized\": %.3f, \"ms_exact\": %.3f}",
                        lmk, lm_top1, lm_top5, lm_same ? "true" : "false", t_lm_q * 1e3, t_lm_exact * 1e3);
        printf(", \"ms\": {\"load\": %.3f, \"tokenize\": %.3f, \"template\": %.3f, \"forward\": %.3f, \"dense_reference\": %.3f, \"softmax_top\": %.3f}}\n",
               (t1 - t0) * 1e3, (t2 - t1) * 1e3, t_tmpl * 1e3, (t4 - t3) * 1e3, t_dense * 1e3, (t5 - t4 - t_dense) * 1e3);
    } else {
        if (approx) {
            printf("vs dense: KL %.6f, top-1 %s", kl, same_top ? "same" : "DIFFERENT");
            if (n_cached) printf(", cos(residual after cached layer %d) %.6f", n_cached - 1, cosv);
            printf("\n");
        }
        printf("phases: load %.1f ms | tokenize %.2f ms", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
        if (n_cached) printf(" | template %.1f ms", t_tmpl * 1e3);
        printf(" | forward %.1f ms", (t4 - t3) * 1e3);
        if (approx) printf(" | dense reference %.1f ms", t_dense * 1e3);
        printf(" | softmax+top %.2f ms\n", (t5 - t4 - t_dense) * 1e3);
        if (lmk)
            printf("lm_head top-%ld: true top-1 %s, %d of the true top 5 among them, top-1 after exact rescoring %s; quantized head %.2f ms, exact rescoring %.2f ms\n",
                   lmk, lm_top1 ? "found" : "MISSED", lm_top5, lm_same ? "same" : "DIFFERENT", t_lm_q * 1e3, t_lm_exact * 1e3);
        if (walk_only && model)
            printf("walk-only: resident %.1f MiB with the model's FFN, %.1f MiB after dropping it (%.1f MiB of FFN pages), %.1f MiB after the pass\n",
                   rss_before / 1024.0, rss_dropped / 1024.0, dropped / 1048576.0, cli_rss_kib() / 1024.0);
    }
    rc = 0;
done:
    free(ids), free(tids), free(lg), free(ld), free(hg), free(hd), free(tp);
    infer_ctx_free(c);
    infer_ctx_free(cd);
    infer_model_free(m);
    return rc;
}
