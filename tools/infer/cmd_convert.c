// infer convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_k_m|...]: write a GGUF file
// the way llama.cpp's convert_hf_to_gguf.py lays it out.
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *g_usage =
    "usage: infer convert HF_DIR OUT.gguf [--type TYPE] [--vocab-from GGUF]\n"
    "  writes a Hugging Face checkpoint as a GGUF file laid out as llama.cpp's convert_hf_to_gguf.py writes it;\n"
    "  each tensor's type as llama-quantize picks it for the file type.\n"
    "      --type, --outtype TYPE  f32, f16 (default), bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k, ...\n"
    "      --vocab-from GGUF       the vocabulary (tokenizer.* metadata) of this GGUF, whose token count must be the model's\n";

enum { OPT_TYPE = OPT_LOCAL, OPT_VOCAB };
static const struct option g_opts[] = {
    CLI_OPT_HELP,
    {"type", required_argument, NULL, OPT_TYPE},
    {"outtype", required_argument, NULL, OPT_TYPE},
    {"vocab-from", required_argument, NULL, OPT_VOCAB},
    {0},
};

int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type_name = "f16", *vocab = NULL;
    cli_opts o;
    cli_opts_init(&o, "convert", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "h", g_opts)) > 0)
        if (opt == OPT_TYPE) type_name = optarg;
        else if (opt == OPT_VOCAB) vocab = optarg;
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) in = argv[optind++];
    if (optind < argc) out = argv[optind++];
    if (optind < argc) return cli_error("convert: unexpected argument \"%s\"", argv[optind]);
    if (!in || !out) return cli_error("convert: usage: infer convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_k_m|...]");
    if (!infer_ftype_known(type_name)) return cli_error("convert: unknown --type \"%s\" (%s)", type_name, infer_ftype_names());
    double t0 = cli_now();
    infer_model *m;
    if (cli_model_load(in, &m)) return cli_error("%s", infer_last_error());
    infer_status st = infer_convert_gguf_vocab(m, out, type_name, vocab);
    infer_model_free(m);
    if (st) return cli_error("%s", infer_last_error());
    fprintf(stderr, "infer: wrote %s (%s) in %.2f s\n", out, type_name, cli_now() - t0);
    return 0;
}
