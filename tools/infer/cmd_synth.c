// infer synth --arch gemma3 --shape 270m|1b|4b|12b|27b --type TYPE -o OUT.gguf
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
    "usage: infer synth [--arch gemma3] --shape 270m|1b|4b|12b|27b [--type q4_k_m] [--layers N] -o OUT.gguf\n"
    "  a GGUF of random weights with Gemma 3's shapes (its vocabulary of 262,144, hidden size, heads, FFN,\n"
    "  sliding-window pattern), for benchmarks: speed does not depend on the values.\n"
    "      --arch NAME        gemma3 (the only one so far)\n"
    "      --shape NAME       270m, 1b, 4b, 12b or 27b\n"
    "      --type TYPE        the file type: f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m ... (default q4_k_m)\n"
    "      --layers N         fewer layers than the shape has (default: all)\n"
    "      --vocab N          a smaller vocabulary (small files for tests; default: the shape's 262,144)\n"
    "      --vocab-from GGUF  the vocabulary (tokenizer.* metadata) of this GGUF, so the file tokenizes text\n"
    "                         (a server's benchmark); its token count becomes the vocabulary's size\n"
    "  -o, --output PATH      the GGUF file to write\n";

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
    if (strcmp(arch, "gemma3")) return cli_error("synth: unknown --arch \"%s\" (archs: gemma3)", arch);
    if (!shape) return cli_error("synth: --shape is required (270m, 1b, 4b, 12b or 27b)");
    const synth_shape *sh = synth_find(shape);
    if (!sh) return cli_error("synth: unknown --shape \"%s\" (shapes: 270m, 1b, 4b, 12b, 27b)", shape);
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

    // the bf16 checkpoint goes beside the output (it can be large: 24 GB for 12b, 54 GB for 27b)
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
        fprintf(stderr, "infer: wrote %s (Gemma 3 %s shape, %ld layers, random weights, %s)\n", out, shape,
                layers ? layers : (long)sh->layers, type);
        rc = 0;
    }
    infer_model_free(m);
    synth_remove(dir);
    return rc;
}
