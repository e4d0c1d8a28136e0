// infer run [-m MODEL] -p TEXT | --ids 1,2,3 [-n N] [sampling flags]
// Generates with the KV cache. With -p the continuation is printed as text as
// it is produced; with --ids the new token ids are printed. Timings go to
// stderr. Flags follow llama.cpp's.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Bytes of s[0..n) that form complete UTF-8 characters.
static size_t utf8_complete(const char *s, size_t n) {
    size_t i = n;
    int back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return n;
    unsigned char c = (unsigned char)s[i - 1];
    int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return (back + 1 >= need) ? n : i - 1;
}

static const char *g_usage =
    "usage: infer run [-m MODEL] (-p TEXT | --ids 1,2,3) [-n N] [-c N] [-t N] [--device cpu|cuda] [-ngl N] [--ignore-eos]\n"
    "                 [-x VINDEX] [--graph SPEC [--calib FILE]] [-k K] [--no-compare] [--lm-probe P [--lm-top N]]\n"
    "                 [--spec-ngram [K] | --model-draft M] [sampling]\n"
    "  generates N tokens (default 128) after the prompt: -p prints the text as it comes, --ids the new token ids\n"
    "  (the prompt's ids as given, no BOS added); load time and speeds go to stderr.\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: Gemma 3 270M)\n"
    "  -p, --prompt TEXT      the prompt, tokenized with BOS and special tokens\n"
    "      --ids 1,2,3        the prompt as token ids\n"
    "  -n, --n-predict N      tokens to generate (default 128)\n"
    "  -c, --ctx-size N       context positions (default: prompt + N)\n"
    "  -t, --threads N        threads (default 1)\n"
    CLI_USAGE_NUMA
    CLI_USAGE_DEVICE
    CLI_USAGE_CACHE
    "      --ignore-eos       do not stop at end-of-generation tokens\n"
    CLI_USAGE_SPEC
    "      --json             the output is a JSON object (grammar-constrained sampling)\n"
    "      --json-schema S    the output is JSON valid against schema S: its text ({...}) or a file holding it\n"
    "      --grammar FILE     the output matches the GBNF grammar in FILE (llama.cpp's format, rule root)\n"
    "      --check-tensors    check that every weight is a finite number before running (norms are always checked)\n"
    "  -x, --vindex DIR       a vindex made from the model, for walk layers (alone, it is the model too)\n"
    "      --graph SPEC       per layer: dense | walk[@K|@P%] (as predict's), e.g. \"walk@10%\" or \"dense:0-5,walk:6-17@25%\";\n"
    "                         an approximate graph is measured against dense as it generates (a dense context\n"
    "                         beside it takes the same tokens): mean KL and same top-1 at the end, on stderr;\n"
    CLI_USAGE_GRAPH_AUTO
    "  -k K                   features a walk layer takes where the spec gives none (default: all)\n"
    "      --no-compare       no dense context beside an approximate graph\n"
    "      --lm-probe P       the next token from the vindex's lm_head index (extract --lm-index): its N best\n"
    "                         tokens from the P best clusters, sampled among them (the head's other rows unread)\n"
    "      --lm-top N         tokens the index gives each step (default 64)\n"
    "sampling (llama.cpp's flags and defaults; --temp 0 is greedy):\n"
    "  -s, --seed N  --temp T (0.8)  --top-k K (40)  --top-p P (0.95)  --min-p P (0.05)  --repeat-penalty R (1.0)\n"
    "  --repeat-last-n N (64)  --presence-penalty P (0)  --frequency-penalty P (0)\n";

enum { OPT_IDS = OPT_LOCAL, OPT_IGNORE_EOS, OPT_JSON, OPT_JSON_SCHEMA, OPT_GRAMMAR, OPT_GRAPH, OPT_NO_COMPARE, OPT_LM_PROBE, OPT_LM_TOP, OPT_CHECK_TENSORS };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_NUMA, CLI_OPT_CTX, CLI_OPT_DEVICE, CLI_OPT_NGL, CLI_OPTS_CACHE, CLI_OPTS_SAMPLING,
    CLI_OPTS_GRAPH_AUTO, CLI_OPTS_SPEC,
    {"prompt", required_argument, NULL, 'p'},
    {"ids", required_argument, NULL, OPT_IDS},
    {"n-predict", required_argument, NULL, 'n'},
    {"ignore-eos", no_argument, NULL, OPT_IGNORE_EOS},
    {"json", no_argument, NULL, OPT_JSON},
    {"json-schema", required_argument, NULL, OPT_JSON_SCHEMA},
    {"check-tensors", no_argument, NULL, OPT_CHECK_TENSORS}, {"grammar", required_argument, NULL, OPT_GRAMMAR},
    {"vindex", required_argument, NULL, 'x'},
    {"graph", required_argument, NULL, OPT_GRAPH},
    {"no-compare", no_argument, NULL, OPT_NO_COMPARE},
    {"lm-probe", required_argument, NULL, OPT_LM_PROBE},
    {"lm-top", required_argument, NULL, OPT_LM_TOP},
    {0},
};

// A whole file, NUL-terminated (malloc'd), or NULL.
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *s = malloc(cap);
    for (size_t k; s && (k = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *p = realloc(s, cap *= 2);
            if (!p) free(s);
            s = p;
        }
    }
    fclose(f);
    if (s) s[n] = 0;
    return s;
}

// KL(p || q) of the softmaxes of logits a (p) and b (q), and whether their
// first largest entries are the same token
static double kl_logits(const float *a, const float *b, int V, int *same) {
    double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, kl = 0;
    int ta = 0, tb = 0;
    for (int i = 0; i < V; i++) {
        if (a[i] > a[ta]) ta = i;
        if (b[i] > b[tb]) tb = i;
    }
    ma = a[ta], mb = b[tb];
    for (int i = 0; i < V; i++) za += exp((double)a[i] - ma), zb += exp((double)b[i] - mb);
    for (int i = 0; i < V; i++) {
        double la = a[i] - ma - log(za), lb = b[i] - mb - log(zb);
        kl += exp(la) * (la - lb);
    }
    *same = ta == tb;
    return kl;
}

// The grammar of --json, --json-schema or --grammar (NULL: none, or *failed).
static infer_grammar *run_grammar(infer_model *m, int json, const char *schema, const char *gbnf_file, int *failed) {
    infer_grammar *g = NULL;
    char *text = NULL;
    infer_status st = INFER_OK;
    *failed = 0;
    if (schema) {
        text = schema[0] == '{' ? strdup(schema) : read_text(schema);
        if (!text) { *failed = 1; cli_error("run: --json-schema %s: cannot read it", schema); return NULL; }
        st = infer_grammar_from_json_schema(m, text, &g);
    } else if (gbnf_file) {
        if (!(text = read_text(gbnf_file))) { *failed = 1; cli_error("run: --grammar %s: cannot read it", gbnf_file); return NULL; }
        st = infer_grammar_from_gbnf(m, text, NULL, &g);
    } else if (json) st = infer_grammar_from_json_schema(m, NULL, &g);
    free(text);
    if (st) *failed = 1, cli_error("run: %s", infer_last_error());
    return g;
}

int cmd_run(int argc, char **argv) {
    const char *ids_s = NULL, *prompt = NULL, *device = NULL, *schema = NULL, *gbnf_file = NULL, *vdir = NULL, *graph = NULL;
    long n_new = 128, k = 0, lm_probe = 0, lm_top = 64;
    int ignore_eos = 0, json = 0, compare = 1, check_tensors = 0, spec = 0, opt;
    cli_draft dr;
    cli_draft_init(&dr);
    cli_opts o;
    cli_opts_init(&o, "run", g_usage);
    while ((opt = cli_next(&o, argc, argv, "hm:t:c:s:p:n:x:k:", g_opts)) > 0) {
        switch (opt) {
        case 'p': prompt = optarg; break;
        case OPT_IDS: ids_s = optarg; break;
        case 'n':
            if ((n_new = cli_parse_count("-n", optarg, 1 << 24)) < 0) return 1;
            break;
        case OPT_IGNORE_EOS: ignore_eos = 1; break;
        case OPT_JSON: json = 1; break;
        case OPT_JSON_SCHEMA: schema = optarg; break;
        case OPT_GRAMMAR: gbnf_file = optarg; break;
        case OPT_CHECK_TENSORS: check_tensors = 1; break;
        case OPT_SPEC:
            if ((spec = cli_spec_k("run", argc, argv, optarg)) < 0) return 1;
            break;
        case OPT_DRAFT: case OPT_DRAFT_MAX: case OPT_DRAFT_PMIN:
            if (cli_draft_opt(&dr, "run", opt, optarg)) return 1;
            break;
        case OPT_DEVICE: device = optarg; break;
        case 'x': vdir = optarg; break;
        case OPT_GRAPH: graph = optarg; break;
        case OPT_NO_COMPARE: compare = 0; break;
        case OPT_LM_PROBE:
            if ((lm_probe = cli_parse_count("--lm-probe", optarg, 1 << 24)) < 0) return 1;
            if (!lm_probe) return cli_error("run: --lm-probe takes a cluster count of at least 1");
            break;
        case OPT_LM_TOP:
            if ((lm_top = cli_parse_count("--lm-top", optarg, 1 << 24)) < 0) return 1;
            if (!lm_top) return cli_error("run: --lm-top takes a token count of at least 1");
            break;
        case 'k':
            if ((k = cli_parse_count("-k", optarg, 1 << 30)) < 0) return 1;
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("run: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    long n_ctx = o.n_ctx;
    infer_sampling sp = o.sampling;
    if (!prompt && !ids_s) return cli_error("run: no prompt given (-p TEXT or --ids 1,2,3)");
    if (prompt && ids_s) return cli_error("run: give -p or --ids, not both");
    if (json + !!schema + !!gbnf_file > 1) return cli_error("run: give one of --json, --json-schema and --grammar");
    if (k && !graph) return cli_error("run: -k is the walk's feature count: give a --graph with walk layers");
    if (cli_graph_flags(&o, graph)) return 1;
    if (lm_probe && !vdir) return cli_error("run: --lm-probe reads a vindex's lm_head index: give -x VINDEX");
    if (lm_probe && (json || schema || gbnf_file)) return cli_error("run: --lm-probe and a grammar do not go together (the grammar needs every logit)");
    if (spec && dr.model) return cli_error("run: give --spec-ngram or --model-draft, not both");
    if (dr.model) spec = dr.max;
    if (spec && (json || schema || gbnf_file || lm_probe || graph))
        return cli_error("run: %s does not go with %s (speculation checks dense logits, every token's)", dr.model ? "--model-draft" : "--spec-ngram",
                         lm_probe ? "--lm-probe" : graph ? "--graph" : "a grammar");
    if (!model && !vdir && !(model = cli_default_model())) return 1;

    int rc = 1, n = 0, approx = 0;
    char gspec[2048];
    int32_t *ids = NULL, *hist = NULL;
    infer_model *m = NULL;
    infer_ctx *c = NULL, *cd = NULL; // cd: the dense context beside an approximate graph
    infer_sampler *smp = NULL;
    infer_grammar *g = NULL;
    float *logits = NULL, *masked = NULL, *dlogits = NULL, *hidden = NULL, *cl = NULL;
    int32_t *cand = NULL, *queue = NULL, draft[CLI_SPEC_MAX]; // queue: the tokens a speculative pass gave, in order
    float *slog = NULL; // a speculative pass's rows of logits
    int nq = 0, qi = 0, passes = 0, drafted = 0, accepted = 0;
    double kl_sum = 0, t_dense = 0;
    int n_cmp = 0, n_same = 0;
    char *text = NULL;
    double t0 = cli_now();
    if (cli_model_load(model ? model : vdir, &m)) { cli_error("%s", infer_last_error()); goto done; }
    if (check_tensors && infer_model_check_tensors(m)) { cli_error("%s", infer_last_error()); goto done; }
    if (model && vdir && infer_model_attach_vindex(m, vdir)) { cli_error("%s", infer_last_error()); goto done; }
    if (prompt) {
        if (infer_tokenize(m, prompt, strlen(prompt), 1, 1, &ids, &n)) { cli_error("%s", infer_last_error()); goto done; }
        if (n == 0) { cli_error("run: the prompt gives no tokens"); goto done; }
    } else if (!(ids = cli_parse_ids(ids_s, &n))) goto done;
    if (n_ctx == 0) n_ctx = n + n_new;
    if (n + n_new > n_ctx) { cli_error("run: prompt (%d tokens) + %ld new tokens exceed the context (%ld)", n, n_new, n_ctx); goto done; }
    if (graph) {
        if (cli_graph(&o, m, graph, gspec, sizeof gspec)) goto done;
        graph = gspec, approx = strcmp(graph, "dense") != 0;
    }
    if (cli_ctx_new(m, (int)n_ctx, &c) || cli_place(c, device, o.ngl) || (graph && infer_ctx_set_graph(c, graph, (int)k)) ||
        infer_sampler_new(&sp, infer_model_n_vocab(m), &smp)) {
        cli_error("%s", infer_last_error());
        goto done;
    }
    if (dr.model && cli_drafter_new(&dr, m, (int)n_ctx, device)) goto done;
    if (graph && infer_ctx_n_cached(c)) { cli_error("run: cached layers hold one template's positions; generation goes past them (use predict)"); goto done; }
    if (approx && compare && (cli_ctx_new(m, (int)n_ctx, &cd) || cli_place(cd, device, o.ngl))) {
        cli_error("%s", infer_last_error());
        goto done;
    }
    int V = infer_model_n_vocab(m), failed;
    if (!(g = run_grammar(m, json, schema, gbnf_file, &failed)) && failed) goto done;
    int32_t eog[8];
    int n_eog = ignore_eos ? 0 : (prompt ? infer_model_eog(m, eog, 8) : infer_model_eos(m, eog, 8));
    logits = infer_host_alloc(sizeof(float) * (size_t)V);
    masked = malloc(sizeof(float) * (size_t)V);
    hist = malloc(sizeof(int32_t) * (size_t)(n + n_new + 1 + spec));
    if (spec && (!(slog = infer_host_alloc(sizeof(float) * (size_t)V * (spec + 1))) ||
                 !(queue = malloc(sizeof(int32_t) * (size_t)(spec + 1))))) { cli_error("out of memory"); goto done; }
    if (cd) dlogits = malloc(sizeof(float) * (size_t)V);
    if (!logits || !masked || !hist || (cd && !dlogits)) { cli_error("out of memory"); goto done; }
    if (lm_probe) {
        if (!infer_lm_head_index_clusters(m)) { cli_error("run: %s has no lm_head index (infer extract --lm-index auto)", vdir); goto done; }
        if (lm_top > V) lm_top = V;
        hidden = malloc(sizeof(float) * (size_t)(infer_model_n_layer(m) + 1) * infer_model_n_embd(m));
        cl = malloc(sizeof(float) * (size_t)lm_top), cand = malloc(sizeof(int32_t) * (size_t)lm_top);
        if (!hidden || !cl || !cand) { cli_error("out of memory"); goto done; }
        memset(hidden, 0, sizeof(float) * (size_t)infer_model_n_embd(m)); // (a first lookup before the clock: the index's sketch is made)
        if (infer_lm_head_topk_index(m, hidden, (int)lm_top, (int)lm_probe, cand)) { cli_error("%s", infer_last_error()); goto done; }
    }
    // (with --lm-probe: the pass stops at the final norm, and the index gives
    // lm_top tokens' logits; the others are -inf)
#define EVAL(toks, nt)                                                                                           \
    do {                                                                                                         \
        if (!lm_probe) {                                                                                         \
            if (infer_eval(c, toks, nt, logits, 1)) { cli_error("%s", infer_last_error()); goto done; }          \
            break;                                                                                               \
        }                                                                                                        \
        const float *xn_ = hidden + (size_t)infer_model_n_layer(m) * infer_model_n_embd(m);                     \
        if (infer_eval_hidden(c, toks, nt, NULL, 1, hidden) ||                                                   \
            infer_lm_head_index_logits(m, xn_, (int)lm_top, (int)lm_probe, cand, cl)) {                         \
            cli_error("%s", infer_last_error());                                                                 \
            goto done;                                                                                           \
        }                                                                                                        \
        for (int i_ = 0; i_ < V; i_++) logits[i_] = -INFINITY;                                                   \
        for (int i_ = 0; i_ < lm_top; i_++) logits[cand[i_]] = cl[i_];                                           \
    } while (0)
    memcpy(hist, ids, sizeof(int32_t) * (size_t)n);
    double t1 = cli_now();
    EVAL(ids, n);
    double t2 = cli_now();
    // (the dense context beside: the same positions, its distribution against the graph's; not timed)
#define COMPARE(toks, nt)                                                                        \
    do {                                                                                         \
        double a_ = cli_now();                                                                   \
        if (infer_eval(cd, toks, nt, dlogits, 1)) { cli_error("%s", infer_last_error()); goto done; } \
        int same_;                                                                               \
        kl_sum += kl_logits(dlogits, logits, V, &same_), n_same += same_, n_cmp++;              \
        t_dense += cli_now() - a_;                                                               \
    } while (0)
    if (cd) COMPARE(ids, n);
    int gen = 0;
    size_t printed = 0;
    while (gen < n_new) {
        int32_t tok = qi < nq ? queue[qi++] : infer_sample(smp, logits, hist, n + gen);
        if (tok >= 0 && g && !infer_grammar_allows(g, tok)) { // drawn again from the logits the grammar allows
            memcpy(masked, logits, sizeof(float) * (size_t)V);
            int n_ok = infer_grammar_mask(g, masked);
            if (n_ok < 0) { cli_error("%s", infer_last_error()); goto done; }
            if (!n_ok) break;
            tok = infer_sample(smp, masked, hist, n + gen);
        }
        if (tok < 0) { cli_error("%s", infer_last_error()); goto done; }
        int stop = 0;
        for (int k = 0; k < n_eog; k++) stop |= tok == eog[k];
        if (stop) break;
        if (g && infer_grammar_accept(g, tok)) { cli_error("%s", infer_last_error()); goto done; }
        hist[n + gen++] = tok;
        if (prompt) {
            // print what the new token completes; hold back a split UTF-8 character
            size_t len;
            free(text);
            text = NULL;
            if (infer_detokenize(m, hist + n, gen, 0, &text, &len)) { cli_error("%s", infer_last_error()); goto done; }
            size_t ok = utf8_complete(text, len);
            if (ok > printed) { fwrite(text + printed, 1, ok - printed, stdout); printed = ok; }
        } else {
            printf("%s%d", gen > 1 ? "," : "", tok);
        }
        fflush(stdout);
        if (gen == n_new || (g && infer_grammar_complete(g))) break;
        if (spec && qi == nq) { // tok and a draft in one pass; the tokens it gives queue
            int k = dr.d ? infer_drafter_draft(dr.d, hist, n + gen, spec, dr.p_min, draft)
                         : infer_spec_draft_ngram(hist, n + gen, CLI_SPEC_NMIN, CLI_SPEC_NMAX, spec, draft), past = infer_ctx_n_past(c);
            if (k < 0) { cli_error("%s", infer_last_error()); goto done; }
            if (k > n_new - gen - 1) k = (int)n_new - gen - 1;
            int32_t rows[CLI_SPEC_MAX + 1] = {tok};
            memcpy(rows + 1, draft, sizeof(int32_t) * (size_t)k);
            if (infer_eval(c, rows, k + 1, slog, 0) || (nq = infer_spec_accept(smp, slog, V, draft, k, hist, n + gen, queue)) < 0) {
                cli_error("%s", infer_last_error());
                goto done;
            }
            infer_ctx_truncate(c, past + nq); // (the rejected rows; the last token is the next pass's first)
            qi = 0, passes++, drafted += k, accepted += nq - 1;
            continue;
        }
        if (!spec) EVAL(&tok, 1);
        if (cd) COMPARE(&tok, 1);
    }
#undef COMPARE
#undef EVAL
    if (prompt && text) {
        size_t len = strlen(text);
        if (len > printed) fwrite(text + printed, 1, len - printed, stdout);
    }
    printf("\n");
    fflush(stdout); // (before the timings on stderr)
    double t3 = cli_now();
    fprintf(stderr, "load %.1f ms | prompt %d tokens, %.2f tok/s | generated %d tokens, %.2f tok/s\n", (t1 - t0) * 1e3, n,
            n / (t2 - t1), gen, gen > 1 ? (gen - 1) / (t3 - t2 - t_dense) : 0.0);
    if (spec)
        fprintf(stderr, "speculation (%s, K %d): %d passes, %d tokens drafted, %d accepted (%.1f%%), %.2f tokens a pass\n",
                dr.d ? "draft model" : "n-gram", spec,
                passes, drafted, accepted, drafted ? 100.0 * accepted / drafted : 0.0, passes ? (double)(accepted + passes) / passes : 0.0);
    if (cd && n_cmp)
        fprintf(stderr, "graph %s vs dense: mean KL %.6f over %d positions, top-1 the same at %d (%.1f%%)\n", graph, kl_sum / n_cmp,
                n_cmp, n_same, 100.0 * n_same / n_cmp);
    rc = 0;
done:
    free(text);
    infer_host_free(logits);
    infer_host_free(slog);
    free(queue);
    free(masked);
    free(dlogits);
    free(hidden), free(cl), free(cand);
    infer_ctx_free(cd);
    free(hist);
    infer_grammar_free(g);
    free(ids);
    infer_sampler_free(smp);
    infer_ctx_free(c);
    cli_draft_free(&dr);
    infer_model_free(m);
    return rc;
}
