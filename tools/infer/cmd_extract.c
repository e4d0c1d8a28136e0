// infer extract [-m MODEL] -o OUT.vindex [--gate f32|f16|q4] [--ffn f16|q8_0|q4_k]
//   [--lm-head q4_k|q8_0|q4_0|f16] [--down-top N] [-t N]: write a vindex
// (DESIGN.md, "The vindex") with a progress bar on stderr.
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int type;
} type_opt;

static const type_opt g_gate[] = {
    {"f32", INFER_TYPE_F32}, {"f16", INFER_TYPE_F16}, {"q4", INFER_TYPE_Q4_0}, {"q4_0", INFER_TYPE_Q4_0}, {NULL, 0},
};
static const type_opt g_ffn[] = {{"f16", INFER_TYPE_F16}, {"q8_0", INFER_TYPE_Q8_0}, {"q4_k", INFER_TYPE_Q4_K}, {NULL, 0}};
static const type_opt g_head[] = {
    {"q4_k", INFER_TYPE_Q4_K}, {"q8_0", INFER_TYPE_Q8_0}, {"q4_0", INFER_TYPE_Q4_0}, {"f16", INFER_TYPE_F16}, {NULL, 0},
};

// -1 (reported) when s is not one of the flag's types.
static int parse_type(const char *flag, const char *s, const type_opt *opts, const char *list) {
    for (int i = 0; opts[i].name; i++)
        if (!strcasecmp(s, opts[i].name)) return opts[i].type;
    cli_error("extract: %s: unknown type \"%s\" (%s)", flag, s, list);
    return -1;
}

// One line per stage: on a terminal redrawn in place as work advances
// ("  down_meta     [#######.......]  48%  17664/36864  92.1 s"), in a log
// written once when the stage ends.
typedef struct {
    const char *stage;
    int pct;
    double t0;
    int tty;
} bar;

static void draw(void *user, const char *stage, int64_t done, int64_t total) {
    bar *b = user;
    if (!b->stage || strcmp(b->stage, stage)) {
        if (b->stage && b->tty) fputc('\n', stderr);
        b->stage = stage;
        b->pct = -1;
        b->t0 = cli_now();
    }
    int pct = total > 0 ? (int)(100 * done / total) : 100;
    if (pct == b->pct || (!b->tty && done < total)) return;
    b->pct = pct;
    enum { W = 30 };
    char fill[W + 1];
    for (int i = 0; i < W; i++) fill[i] = i < pct * W / 100 ? '#' : '.';
    fill[W] = 0;
    fprintf(stderr, "%s  %-13s [%s] %3d%%  %lld/%lld  %.1f s%s", b->tty ? "\r" : "", stage, fill, pct, (long long)done,
            (long long)total, cli_now() - b->t0, b->tty ? "" : "\n");
    fflush(stderr);
}

static const char *tn(int t) { return infer_type_name(t); }

static const char *g_usage =
    "usage: infer extract [-m MODEL] -o OUT.vindex [--gate f32|f16|q4] [--ffn f16|q8_0|q4_k]\n"
    "                     [--lm-head q4_k|q8_0|q4_0|f16] [--down-top N] [--lm-index auto|C] [-t N]\n"
    "       infer extract MODEL OUT.vindex [options]\n"
    "  writes a vindex: the FFN laid out per feature, gate vectors, the top tokens each feature writes\n"
    "  (down_meta), the embeddings, a quantized lm_head and the rest of the model; progress on stderr.\n"
    "  -m, --model MODEL      a dense model (default: Gemma 3 270M)\n"
    "  -o, --out DIR          the vindex directory (made if missing)\n"
    "      --gate TYPE        gate vectors: f32, f16 (default) or q4\n"
    "      --ffn TYPE         feature rows: f16, q8_0 (default) or q4_k\n"
    "      --lm-head TYPE     q4_k (default), q8_0, q4_0 or f16\n"
    "      --down-top N       tokens per feature in down_meta (default 10; 0: none)\n"
    "      --lm-index auto|C  also an lm_head index: the head's rows in C k-means clusters (auto: vocabulary / 64),\n"
    "                         for run --lm-probe and bench-lm\n"
    "  -t, --threads N        threads (default 1)\n";

enum { OPT_GATE = OPT_LOCAL, OPT_FFN, OPT_LM_HEAD, OPT_DOWN_TOP, OPT_LM_INDEX };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS,
    {"out", required_argument, NULL, 'o'},
    {"gate", required_argument, NULL, OPT_GATE},
    {"ffn", required_argument, NULL, OPT_FFN},
    {"lm-head", required_argument, NULL, OPT_LM_HEAD},
    {"down-top", required_argument, NULL, OPT_DOWN_TOP},
    {"lm-index", required_argument, NULL, OPT_LM_INDEX},
    {0},
};

int cmd_extract(int argc, char **argv) {
    const char *out = NULL;
    long n;
    infer_extract_opts xo = infer_extract_default();
    cli_opts o;
    cli_opts_init(&o, "extract", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:o:", g_opts)) > 0) {
        switch (opt) {
        case 'o': out = optarg; break;
        case OPT_GATE:
            if ((xo.gate_type = parse_type("--gate", optarg, g_gate, "f32, f16, q4")) < 0) return 1;
            break;
        case OPT_FFN:
            if ((xo.ffn_type = parse_type("--ffn", optarg, g_ffn, "f16, q8_0, q4_k")) < 0) return 1;
            break;
        case OPT_LM_HEAD:
            if ((xo.lm_head_type = parse_type("--lm-head", optarg, g_head, "q4_k, q8_0, q4_0, f16")) < 0) return 1;
            break;
        case OPT_LM_INDEX:
            if (!strcmp(optarg, "auto")) xo.lm_clusters = -1;
            else if ((n = cli_parse_count("--lm-index", optarg, 1 << 24)) < 0) return 1;
            else if (n == 0) return cli_error("extract: --lm-index takes auto or a cluster count of at least 1");
            else xo.lm_clusters = (int)n;
            break;
        case OPT_DOWN_TOP:
            if ((n = cli_parse_count("--down-top", optarg, 4096)) < 0) return 1;
            xo.down_top = (int)n;
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    const char *model = o.model;
    if (optind < argc && !model) model = argv[optind++];
    if (optind < argc && !out) out = argv[optind++];
    if (optind < argc) return cli_error("extract: unexpected argument \"%s\"", argv[optind]);
    if (!out) return cli_error("extract: usage: infer extract [-m MODEL] -o OUT.vindex [--gate f32|f16|q4] [--ffn f16|q8_0|q4_k] "
                               "[--lm-head q4_k|q8_0|q4_0|f16] [--down-top N] [-t N]");
    if (!model && !(model = cli_default_model())) return 1;
    infer_model *m;
    if (cli_model_load(model, &m)) return cli_error("%s", infer_last_error());
    bar b = {NULL, -1, 0, isatty(2)};
    xo.progress = draw;
    xo.user = &b;
    infer_extract_info info;
    xo.threads = cli_threads();
    infer_status st = infer_vindex_extract(m, out, &xo, &info);
    if (b.stage && b.tty) fputc('\n', stderr);
    int H = infer_model_n_embd(m);
    infer_model_free(m);
    if (st) return cli_error("%s", infer_last_error());
    const int want[3] = {xo.gate_type, xo.ffn_type, xo.lm_head_type}, got[3] = {info.gate_type, info.ffn_type, info.lm_head_type};
    const char *what[3] = {"gate", "ffn", "lm_head"};
    for (int k = 0; k < 3; k++)
        if (want[k] != got[k])
            fprintf(stderr, "infer: %s: %s blocks of %d do not divide rows of %d: wrote %s instead (llama.cpp's fallback)\n",
                    what[k], tn(want[k]), infer_type_block_size(want[k]), H, tn(got[k]));
    fprintf(stderr, "infer: wrote %s (gate %s, ffn %s, lm_head %s, embeddings %s, down_top %d): %.1f MiB in %.2f s "
                    "(down_meta %.2f s)\n",
            out, tn(info.gate_type), tn(info.ffn_type), tn(info.lm_head_type), tn(info.embd_type), xo.down_top,
            info.bytes / 1048576.0, info.seconds, info.seconds_down_meta);
    return 0;
}
