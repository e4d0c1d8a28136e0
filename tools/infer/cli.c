#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("infer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int32_t *cli_parse_ids(const char *s, int *n) {
    *n = 0;
    size_t len = strlen(s), cap = 1;
    for (size_t i = 0; i < len; i++) cap += s[i] == ',';
    int32_t *ids = malloc(sizeof *ids * cap);
    if (!ids) { cli_error("out of memory"); return NULL; }
    const char *p = s;
    while (1) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') {
            cli_error("--ids: expected a token id at \"%.20s\" (ids are comma-separated non-negative integers)", p);
            free(ids);
            return NULL;
        }
        long v = strtol(p, &end, 10);
        if (errno || v > INT32_MAX) {
            cli_error("--ids: token id \"%.20s\" is too large", p);
            free(ids);
            return NULL;
        }
        ids[(*n)++] = (int32_t)v;
        if (*end == 0) break;
        if (*end != ',') {
            cli_error("--ids: unexpected \"%.20s\" after a token id", end);
            free(ids);
            return NULL;
        }
        p = end + 1;
    }
    return ids;
}

long cli_parse_count(const char *flag, const char *s, long max) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > max) {
        cli_error("%s: \"%s\" is not an integer in [0, %ld]", flag, s, max);
        return -1;
    }
    return v;
}

char *cli_read_text(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { cli_error("%s: cannot read %s", cmd, path); return NULL; }
    fseek(f, 0, SEEK_END);
    long fl = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (fl <= 0 || fl > (1 << 24)) { fclose(f); cli_error("%s: %s is empty or larger than 16 MB", cmd, path); return NULL; }
    char *text = malloc((size_t)fl + 1);
    size_t n = text ? fread(text, 1, (size_t)fl, f) : 0;
    fclose(f);
    if (!text || n != (size_t)fl) { free(text); cli_error("%s: cannot read %s", cmd, path); return NULL; }
    text[n] = 0;
    *len = n;
    return text;
}

const char *cli_bench_text(const char *path, char *buf, size_t cap) {
    if (path) return path;
    const char *src = getenv("INFER_SOURCE_DIR");
    snprintf(buf, cap, "%s/bench/data/english.txt", src ? src : INFER_SOURCE_DIR);
    return buf;
}

int cli_graph_flags(const cli_opts *o, const char *graph) {
    if ((o->calib || o->calib_tokens != CLI_CALIB_TOKENS) && !(graph && !strncmp(graph, "auto", 4)))
        return cli_error("%s: --calib and --calib-tokens are for --graph auto:KL", o->cmd);
    return 0;
}

int cli_graph(const cli_opts *o, infer_model *m, const char *graph, char *out, size_t cap) {
    const char *cmd = o->cmd, *calib = o->calib;
    long calib_tokens = o->calib_tokens;
    int contrib = !strncmp(graph, "autoc:", 6);
    if (strncmp(graph, "auto:", 5) && !contrib) {
        if (strlen(graph) >= cap) return cli_error("%s: --graph \"%.40s...\" is longer than %zu bytes", cmd, graph, cap - 1);
        snprintf(out, cap, "%s", graph);
        return 0;
    }
    const char *b = graph + (contrib ? 6 : 5);
    char *e;
    double budget = strtod(b, &e);
    if (e == b || *e || !(budget > 0) || budget > 100)
        return cli_error("%s: --graph %s: the KL budget after \"%s\" must be a number above 0, e.g. auto:0.01", cmd, graph, contrib ? "autoc:" : "auto:");
    if (!infer_model_walk_features(m)) return cli_error("%s: --graph %s chooses walk layers: it needs a vindex (-x)", cmd, graph);
    char def[4200];
    const char *path = cli_bench_text(calib, def, sizeof def);
    size_t len;
    char *text = cli_read_text(cmd, path, &len);
    if (!text) return 1;
    int32_t *ids = NULL;
    int n = 0;
    if (infer_tokenize(m, text, len, 1, 0, &ids, &n)) { free(text); return cli_error("%s: %s", cmd, infer_last_error()); }
    free(text);
    int used = calib_tokens > 0 && n > calib_tokens ? (int)calib_tokens : n;
    fprintf(stderr, "%s: choosing the graph for a mean KL <= %g on %d of the %d tokens of %s (--calib, --calib-tokens)\n", cmd, budget, used, n, path);
    infer_graph_auto_info info;
    double t0 = cli_now(), *lkl = malloc(sizeof(double) * 6 * (size_t)infer_model_n_layer(m));
    if (!lkl) { free(ids); return cli_error("%s: out of memory", cmd); }
    infer_status st = infer_graph_auto(m, ids, used, budget, contrib, &info, lkl);
    free(ids);
    if (st) { free(lkl); return cli_error("%s: %s", cmd, infer_last_error()); }
    for (int j = 0; j < info.n_pct; j++) { // each faster P: the layers' KLs walking alone
        if (lkl[j] < 0) continue;
        fprintf(stderr, "%s: each layer's KL walking alone at %d%%:", cmd, info.pct[j]);
        for (int l = 0; l < infer_model_n_layer(m); l++) fprintf(stderr, " %.4f", lkl[l * 6 + j]);
        fprintf(stderr, "\n");
    }
    free(lkl);
    fprintf(stderr, "%s: FFN µs a layer a token, dense %.1f;", cmd, info.dense_ffn_us);
    for (int j = 0; j < info.n_pct; j++) fprintf(stderr, " %s@%d%% %.1f", contrib ? "walkc" : "walk", info.pct[j], info.pct_ffn_us[j]);
    fprintf(stderr, "\n%s: chose %s (%d of %d layers walk): KL %.5f on the calibration (the layers' sum %.5f), FFN %.1f µs a layer "
            "against dense's %.1f (%.2fx); %d passes, %.1f s\n", cmd, info.spec, info.walked, infer_model_n_layer(m), info.kl, info.kl_sum,
            info.ffn_us, info.dense_ffn_us, info.ffn_us > 0 ? info.dense_ffn_us / info.ffn_us : 0.0, info.passes, cli_now() - t0);
    if (strlen(info.spec) >= cap) return cli_error("%s: the chosen graph is longer than %zu bytes", cmd, cap - 1);
    snprintf(out, cap, "%s", info.spec);
    return 0;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

long cli_peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

long cli_rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

// A model of the cache (scripts/fetch-model.sh NAME's FILE), fetched when absent.
static const char *cached_model(const char *name, const char *file, const char *what) {
    static char path[4096];
    const char *cache = getenv("INFER_CACHE"), *home = getenv("HOME");
    if (cache && *cache) snprintf(path, sizeof path, "%s/%s/%s", cache, name, file);
    else snprintf(path, sizeof path, "%s/.cache/infer/%s/%s", home ? home : ".", name, file);
    if (access(path, R_OK) == 0) return path;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/fetch-model.sh' %s >&2", INFER_SOURCE_DIR, name);
    fprintf(stderr, "infer: no -m given and the %s is not in the cache: fetching it (%s)\n", what, path);
    if (system(cmd) != 0 || access(path, R_OK) != 0) {
        cli_error("could not fetch the %s; run scripts/fetch-model.sh %s or give -m MODEL", what, name);
        return NULL;
    }
    return path;
}

const char *cli_default_model(void) { return cached_model("gemma3", "gemma-3-270m-q4_k_m.gguf", "default model"); }

const char *cli_chat_model(void) { return cached_model("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "default chat model"); }

// the -ctk / -ctv of the command line (cli_place applies them)
static const char *g_ctk, *g_ctv;
static int g_deterministic; // --deterministic

int cli_place(infer_ctx *c, const char *device, long ngl) {
    static int said_ngl, said_cpu;
    if ((g_ctk || g_ctv) && infer_ctx_set_kv_type(c, g_ctk, g_ctv)) return -1;
    if (infer_ctx_set_gpu_layers(c, (int)ngl)) return -1;
    if (device) {
        if (infer_ctx_set_backend(c, device)) return -1;
    } else if (infer_gpu_count() > 0) {
        infer_status st = infer_ctx_set_backend(c, "cuda");
        if (st && st != INFER_ERR_UNSUPPORTED) return -1;
        if (st && !said_cpu++) fprintf(stderr, "infer: running on the CPU: %s\n", infer_last_error()); // (the context stays there)
    }
    if (ngl >= 0 && strcmp(infer_ctx_backend(c), "cuda") && !said_ngl++)
        fprintf(stderr, "infer: -ngl %ld: the model runs on the %s, not a GPU; every layer there\n", ngl, infer_ctx_backend(c));
    return infer_ctx_prepare(c) ? -1 : 0; // (the CPU's copies of the weights: part of loading, not of the first prompt)
}

// -t: the threads of every context, batch and lookup this command makes
static int g_threads = 1;
void cli_set_threads(int n) { g_threads = n < 1 ? 1 : n; }
int cli_threads(void) { return g_threads; }
int cli_deterministic(void) { return g_deterministic; }

int cli_model_load(const char *path, infer_model **m) {
    if (infer_model_load(path, m)) return -1;
    infer_model_set_threads(*m, g_threads);
    return 0;
}

int cli_ctx_new(infer_model *m, int n_ctx, infer_ctx **c) {
    infer_ctx_params p = infer_ctx_default_params();
    p.n_ctx = n_ctx, p.n_threads = g_threads, p.deterministic = g_deterministic;
    return infer_ctx_create(m, &p, c) ? -1 : 0;
}

int cli_batch_new(infer_model *m, infer_batch **b) {
    if (infer_batch_new(m, b)) return -1;
    if (!infer_batch_set_threads(*b, g_threads)) return 0;
    infer_batch_free(*b);
    *b = NULL;
    return -1;
}

uint64_t cli_seed(void) {
    const char *e = getenv("INFER_TP_SEED"); // (the ranks of a --tp job: one seed)
    if (e && *e) return strtoull(e, NULL, 10);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40);
}

// ---------------------------------------------------------------------------
// Options

void cli_opts_init(cli_opts *o, const char *cmd, const char *usage) {
    *o = (cli_opts){.cmd = cmd, .usage = usage, .sampling = infer_sampling_default(), .ngl = -1, .calib_tokens = CLI_CALIB_TOKENS};
    o->sampling.seed = cli_seed();
}

// llama.cpp's sampling flags: each a field of infer_sampling and its range.
typedef struct {
    const char *flag;
    size_t off;    // of the field in infer_sampling
    int integer;   // an int field (a count), else a float
    double lo, hi;
} sampling_flag;

static const sampling_flag g_sampling[] = {
    [OPT_TEMP - OPT_TEMP] = {.flag = "--temp", .off = offsetof(infer_sampling, temp), .lo = 0, .hi = 1e6},
    [OPT_TOP_K - OPT_TEMP] = {.flag = "--top-k", .off = offsetof(infer_sampling, top_k), .integer = 1, .hi = 1 << 24},
    [OPT_TOP_P - OPT_TEMP] = {.flag = "--top-p", .off = offsetof(infer_sampling, top_p), .lo = 0, .hi = 1},
    [OPT_MIN_P - OPT_TEMP] = {.flag = "--min-p", .off = offsetof(infer_sampling, min_p), .lo = 0, .hi = 1},
    [OPT_REPEAT_PENALTY - OPT_TEMP] = {.flag = "--repeat-penalty", .off = offsetof(infer_sampling, repeat_penalty),
                                       .lo = 1e-3, .hi = 100},
    [OPT_REPEAT_LAST_N - OPT_TEMP] = {.flag = "--repeat-last-n", .off = offsetof(infer_sampling, repeat_last_n),
                                      .integer = 1, .hi = 1 << 24},
    [OPT_PRESENCE_PENALTY - OPT_TEMP] = {.flag = "--presence-penalty", .off = offsetof(infer_sampling, presence_penalty),
                                         .lo = -100, .hi = 100},
    [OPT_FREQUENCY_PENALTY - OPT_TEMP] = {.flag = "--frequency-penalty", .off = offsetof(infer_sampling, frequency_penalty),
                                          .lo = -100, .hi = 100},
};

// 0, or -1 (reported) when s is not a number in [lo, hi].
static int parse_float(const char *flag, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        cli_error("%s: \"%s\" is not a number in [%g, %g]", flag, s, lo, hi);
        return -1;
    }
    *out = (float)v;
    return 0;
}

// A shared flag into o: 1 taken, 0 not one, -1 a bad value (reported).
static int take_shared(cli_opts *o, int opt, const char *arg) {
    long n;
    switch (opt) {
    case 'm': o->model = arg; return 1;
    case 'c':
        if ((o->n_ctx = cli_parse_count("-c", arg, 1 << 24)) < 0) return -1;
        return 1;
    case 't':
        if ((o->threads = cli_parse_count("-t", arg, 256)) < 0) return -1;
        cli_set_threads(o->threads ? (int)o->threads : 1);
        return 1;
    case OPT_NGL: // (llama.cpp takes any count; -1: all)
        if (!strcmp(arg, "-1")) o->ngl = -1;
        else if ((o->ngl = cli_parse_count("-ngl", arg, 1 << 20)) < 0) return -1;
        return 1;
    case OPT_DETERMINISTIC: g_deterministic = 1; return 1;
    case OPT_NUMA:
        if (infer_numa_init(arg)) {
            cli_error("--numa: %s", infer_last_error());
            return -1;
        }
        return 1;
    case OPT_CTK: o->ctk = g_ctk = arg; return 1;
    case OPT_CTV: o->ctv = g_ctv = arg; return 1;
    case OPT_CALIB: o->calib = arg; return 1;
    case OPT_CALIB_TOKENS:
        if ((o->calib_tokens = cli_parse_count("--calib-tokens", arg, 1 << 20)) < 0) return -1;
        if (o->calib_tokens < 2) { cli_error("%s: --calib-tokens takes at least 2", o->cmd); return -1; }
        return 1;
    case 's': {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || *arg == '-') { cli_error("-s: \"%s\" is not a seed", arg); return -1; }
        o->sampling.seed = v;
        return 1;
    }
    }
    if (opt < OPT_TEMP || opt > OPT_FREQUENCY_PENALTY) return 0;
    const sampling_flag *f = &g_sampling[opt - OPT_TEMP];
    char *field = (char *)&o->sampling + f->off;
    if (!f->integer) return parse_float(f->flag, arg, f->lo, f->hi, (float *)field) ? -1 : 1;
    if ((n = cli_parse_count(f->flag, arg, (long)f->hi)) < 0) return -1;
    *(int *)field = (int)n;
    return 1;
}

// arg is an option whose value is the next argument: "-x" with "x:" in shortopts
// (not "-xVALUE"), or "--name" of a long option with a required value (not "--name=V")
static int takes_value(const char *arg, const char *shortopts, const struct option *longopts) {
    if (arg[0] != '-' || !arg[1]) return 0;
    if (arg[1] != '-') { // a cluster of short options: the last one decides
        for (const char *p = arg + 1; *p; p++) {
            const char *s = strchr(shortopts, *p);
            if (!s || *p == ':') return 0;
            if (s[1] == ':') return p[1] == '\0';
        }
        return 0;
    }
    if (strchr(arg, '=')) return 0;
    for (const struct option *l = longopts; l && l->name; l++)
        if (!strcmp(arg + 2, l->name)) return l->has_arg == required_argument;
    return 0;
}

int cli_next(cli_opts *o, int argc, char **argv, const char *shortopts, const struct option *longopts) {
    char spec[128];
    snprintf(spec, sizeof spec, ":%s", shortopts); // ':': a missing value is told apart from an unknown option
    opterr = 0;
    // llama.cpp's "-ngl" is one flag, which getopt would read as -n -g -l: an
    // argument "-ngl" in an option's place (not the value of the option before
    // it, as in -p -ngl) becomes --n-gpu-layers
    // (-ctk and -ctv likewise become --cache-type-k and --cache-type-v)
    for (int i = 1; i < argc && !o->ngl_read && strcmp(argv[i], "--"); i++) {
        const char *as = !strcmp(argv[i], "-ngl") ? "--n-gpu-layers" : !strcmp(argv[i], "-ctk") ? "--cache-type-k"
                         : !strcmp(argv[i], "-ctv") ? "--cache-type-v" : NULL;
        if (!as) continue;
        if (i > 1 && takes_value(argv[i - 1], shortopts, longopts)) continue;
        argv[i] = (char *)as;
    }
    o->ngl_read = 1;
    for (;;) {
        int opt = getopt_long(argc, argv, spec, longopts, NULL);
        if (opt == -1) return CLI_END;
        const char *at = argv[optind - 1]; // the argument that held the option (or its value)
        if (opt == ':') {
            if (optopt > 0 && optopt < 256 && strncmp(at, "--", 2)) cli_error("-%c needs a value", optopt);
            else cli_error("%s needs a value", at);
            o->status = 1;
            return CLI_STOP;
        }
        if (opt == '?') {
            // an unknown short option, or a long one (unknown, or given a value it does not take)
            if (optopt > 0 && optopt < 256 && !strchr(shortopts, optopt)) cli_error("%s: unknown option \"-%c\"", o->cmd, optopt);
            else if (optopt) cli_error("%s: option \"%s\" takes no value", o->cmd, at);
            else cli_error("%s: unknown option \"%s\"", o->cmd, at);
            o->status = 1;
            return CLI_STOP;
        }
        if (opt == 'h') {
            fputs(o->usage, stdout);
            o->status = 0;
            return CLI_STOP;
        }
        int r = take_shared(o, opt, optarg);
        if (r < 0) {
            o->status = 1;
            return CLI_STOP;
        }
        if (!r) return opt;
    }
}

int cli_spec_k(const char *cmd, int argc, char **argv, const char *arg) {
    if (!arg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9') arg = argv[optind++];
    if (!arg) return CLI_SPEC_K;
    char *end;
    long k = strtol(arg, &end, 10);
    if (*end || end == arg || k < 1 || k > CLI_SPEC_MAX)
        return cli_error("%s: --spec-ngram takes a draft length of 1 to %d tokens, not \"%s\"", cmd, CLI_SPEC_MAX, arg), -1;
    return (int)k;
}

void cli_draft_init(cli_draft *d) { *d = (cli_draft){.max = 16, .p_min = 0.75f}; }

int cli_draft_opt(cli_draft *d, const char *cmd, int opt, const char *arg) {
    char *end;
    if (opt == OPT_DRAFT) {
        d->model = arg;
    } else if (opt == OPT_DRAFT_MAX) {
        long k = strtol(arg, &end, 10);
        if (*end || end == arg || k < 1 || k > CLI_SPEC_MAX)
            return cli_error("%s: --draft-max takes 1 to %d tokens, not \"%s\"", cmd, CLI_SPEC_MAX, arg), -1;
        d->max = (int)k;
    } else if (opt == OPT_DRAFT_PMIN) {
        double p = strtod(arg, &end);
        if (*end || end == arg || !(p >= 0 && p <= 1)) return cli_error("%s: --draft-p-min takes a probability (0 to 1), not \"%s\"", cmd, arg), -1;
        d->p_min = (float)p;
    }
    return 0;
}

int cli_drafter_new(cli_draft *d, infer_model *target, int n_ctx, const char *device) {
    if (cli_model_load(d->model, &d->m) || cli_ctx_new(d->m, n_ctx, &d->c) || cli_place(d->c, device, -1) ||
        infer_drafter_new(d->m, d->c, target, &d->d))
        return cli_error("--model-draft %s: %s", d->model, infer_last_error()), -1;
    return 0;
}

void cli_draft_free(cli_draft *d) {
    infer_drafter_free(d->d);
    infer_ctx_free(d->c);
    infer_model_free(d->m);
    d->d = NULL, d->c = NULL, d->m = NULL;
}
