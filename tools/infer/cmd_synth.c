// infer synth [--arch gemma3|llama] --shape NAME --type TYPE -o OUT.gguf
// A GGUF of random weights with a real model's shapes (llama.cpp loads it),
// for benchmarks of sizes we have no real weights for: converted as `infer
// convert` converts a checkpoint, each tensor's values made just before it is
// written, so the output is all the disk it needs.
#include "cli.h"
#include "synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *g_usage =
    "usage: infer synth [--arch gemma3|llama] --shape NAME [--type q4_k_m] [--layers N] -o OUT.gguf | --hf DIR\n"
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
    "      --hf DIR           instead, the same weights as a bf16 Hugging Face checkpoint (config.json,\n"
    "                         model.safetensors) in DIR; infer convert makes the same GGUF of it\n"
    "  disk: the output's size only (llama 70b q4_k_m 42.5 GB, gemma3 27b bf16 54 GB); memory: about one\n"
    "  tensor in bf16 (the embedding: llama 70b 2.1 GB, gemma3 27b 2.8 GB), its values made on every core.\n";

enum { OPT_ARCH = OPT_LOCAL, OPT_SHAPE, OPT_TYPE, OPT_LAYERS, OPT_VOCAB, OPT_VOCAB_FROM, OPT_HF };
static const struct option g_opts[] = {
    CLI_OPT_HELP,
    {"arch", required_argument, NULL, OPT_ARCH},
    {"shape", required_argument, NULL, OPT_SHAPE},
    {"type", required_argument, NULL, OPT_TYPE},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"vocab-from", required_argument, NULL, OPT_VOCAB_FROM},
    {"output", required_argument, NULL, 'o'},
    {"hf", required_argument, NULL, OPT_HF},
    {0},
};

int cmd_synth(int argc, char **argv) {
    const char *arch = "gemma3", *shape = NULL, *type = "q4_k_m", *out = NULL, *vocab_from = NULL, *hf = NULL;
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
        case OPT_HF: hf = optarg; break;
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
    if (!out && !hf) return cli_error("synth: -o OUT.gguf is required (or --hf DIR)");
    if (out && hf) return cli_error("synth: -o and --hf: one or the other");
    if (layers > sh->layers) return cli_error("synth: --layers %ld exceeds the %s shape's %d", layers, shape, sh->layers);
    if (vocab_from) {
        if (vocab) return cli_error("synth: --vocab and --vocab-from: one or the other");
        infer_vocab *v;
        if (infer_vocab_load(vocab_from, &v)) return cli_error("synth: --vocab-from: %s", infer_last_error());
        vocab = infer_vocab_size(v);
        infer_vocab_free(v);
        if (vocab < 256 || vocab > (1 << 20)) return cli_error("synth: --vocab-from %s: %ld tokens (256 to %d)", vocab_from, vocab, 1 << 20);
    }

    long L = layers ? layers : (long)sh->layers;
    if (hf) {
        if (mkdir(hf, 0777) && errno != EEXIST) return cli_error("synth: --hf %s: %s", hf, strerror(errno));
        if (!synth_write(hf, sh, (int)layers, (int)vocab)) return cli_error("synth: cannot write the bf16 checkpoint in %s", hf);
        fprintf(stderr, "infer: wrote %s (%s %s shape, %ld layers, random weights, bf16 checkpoint)\n", hf, title, shape, L);
        return 0;
    }
    infer_model_spec spec;
    if (!synth_spec(&spec, sh, (int)layers, (int)vocab)) return cli_error("synth: out of memory");
    int rc = 1;
    if (infer_convert_gguf_spec(&spec, out, type, vocab_from)) cli_error("%s", infer_last_error());
    else {
        fprintf(stderr, "infer: wrote %s (%s %s shape, %ld layers, random weights, %s)\n", out, title, shape, L, type);
        rc = 0;
    }
    synth_spec_free(&spec);
    return rc;
}
