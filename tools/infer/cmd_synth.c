// infer synth [--arch gemma3|llama] --shape NAME --type TYPE -o OUT.gguf
// A GGUF of random weights with a real model's shapes (llama.cpp loads it),
// for benchmarks of sizes we have no real weights for: a bf16 checkpoint is
// written to a temporary directory beside OUT and converted as `infer convert`
// does.
#include "cli.h"
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_usage =
    "usage: infer synth [--arch gemma3|llama] --shape NAME [--type q4_k_m] [--layers N] -o OUT.gguf\n"
    "  a GGUF of random weights with a real model's shapes (vocabulary, hidden size, heads, FFN, and\n"
    "  Gemma 3's sliding-window pattern), for benchmarks: speed does not depend on the values.\n"
    "      --arch NAME        gemma3 (default) or llama\n"
    "      --shape NAME       gemma3: 270m, 1b, 4b, 12b or 27b (Gemma 3's; vocabulary 262,144)\n"
    "                         llama: 8b or 70b (Llama 3's; vocabulary 128,256, untied output)\n"
    "      --type TYPE        the file type: f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m ... (default q4_k_m)\n"
    "      --layers N         fewer layers than the shape has (default: all)\n"
    "      --vocab N          a smaller vocabulary (small files for tests; default: the shape's)\n"
    "      --vocab-from GGUF  the vocabulary (tokenizer.* metadata) of this GGUF, so the file tokenizes text\n"
    "                         (a server's benchmark); its token count becomes the vocabulary's size\n"
    "  -o, --output PATH      the GGUF file to write\n"
    "  disk: a bf16 checkpoint is written beside OUT first and removed after: gemma3 12b 24 GB, 27b 54 GB;\n"
    "  llama 8b 16 GB (a 4.9 GB q4_k_m file), llama 70b 141 GB (a 42.5 GB q4_k_m file): about 185 GB free.\n";

enum { OPT_ARCH = OPT_LOCAL, OPT_SHAPE, OPT_TYPE, OPT_LAYERS, OPT_VOCAB, OPT_VOCAB_FROM };
static const struct option g_opts[] = {
    CLI_OPT_HELP,
    {"arch", required_argument, NULL, OPT_ARCH},
    {"shape", required_argument, NULL, OPT_SHAPE},
    {"type", required_argument, NULL, OPT_TYPE},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"vocab-from", required_argument, NULL, OPT_VOCAB_FROM},
    {"output", required_argument, NULL, 'o'},
    {0},
};

int cmd_synth(int argc, char **argv) {
    const char *arch = "gemma3", *shape = NULL, *type = "q4_k_m", *out = NULL, *vocab_from = NULL;
    long layers = 0, vocab = 0;
    cli_opts o;
    cli_opts_init(&o, "synth", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "ho:", g_opts)) > 0) {
        switch (opt) {
        case OPT_ARCH: arch = optarg; break;
        case OPT_SHAPE: shape = optarg; break;
        case OPT_TYPE: type = optarg; break;
        case OPT_LAYERS:
            if ((layers = cli_parse_count("--layers", optarg, 1024)) < 0) return 1;
            if (layers == 0) return cli_error("synth: --layers must be at least 1");
            break;
        case OPT_VOCAB:
            if ((vocab = cli_parse_count("--vocab", optarg, 262144)) < 0) return 1;
            if (vocab < 256) return cli_error("synth: --vocab must be at least 256");
            break;
        case OPT_VOCAB_FROM: vocab_from = optarg; break;
        case 'o': out = optarg; break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("synth: unexpected argument \"%s\"", argv[optind]);
    const char *title = synth_title(arch);
    if (!title) return cli_error("synth: unknown --arch \"%s\" (archs: %s)", arch, synth_archs());
    char names[256];
    synth_shape_names(arch, names, sizeof names);
    if (!shape) return cli_error("synth: --shape is required (--arch %s: %s)", arch, names);
    const synth_shape *sh = synth_find(arch, shape);
    if (!sh) return cli_error("synth: unknown --shape \"%s\" for --arch %s (shapes: %s)", shape, arch, names);
    if (!out) return cli_error("synth: -o OUT.gguf is required");
    if (layers > sh->layers) return cli_error("synth: --layers %ld exceeds the %s shape's %d", layers, shape, sh->layers);
    if (vocab_from) {
        if (vocab) return cli_error("synth: --vocab and --vocab-from: one or the other");
        infer_vocab *v;
        if (infer_vocab_load(vocab_from, &v)) return cli_error("synth: --vocab-from: %s", infer_last_error());
        vocab = infer_vocab_size(v);
        infer_vocab_free(v);
        if (vocab < 256 || vocab > (1 << 20)) return cli_error("synth: --vocab-from %s: %ld tokens (256 to %d)", vocab_from, vocab, 1 << 20);
    }

    // the bf16 checkpoint goes beside the output (it can be large: 54 GB for gemma3 27b, 141 GB for llama 70b)
    char dir[4200];
    const char *slash = strrchr(out, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s/.infer-synth-XXXXXX", (int)(slash - out), out);
    else snprintf(dir, sizeof dir, ".infer-synth-XXXXXX");
    if (!mkdtemp(dir)) return cli_error("synth: cannot make a temporary directory beside %s", out);
    int rc = 1;
    infer_model *m = NULL;
    if (!synth_write(dir, sh, (int)layers, (int)vocab)) cli_error("synth: cannot write the bf16 checkpoint in %s", dir);
    else if (infer_model_load(dir, &m) || infer_convert_gguf_vocab(m, out, type, vocab_from)) cli_error("%s", infer_last_error());
    else {
        fprintf(stderr, "infer: wrote %s (%s %s shape, %ld layers, random weights, %s)\n", out, title, shape,
                layers ? layers : (long)sh->layers, type);
        rc = 0;
    }
    infer_model_free(m);
    synth_remove(dir);
    return rc;
}
