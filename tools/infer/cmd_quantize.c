// infer quantize IN.gguf OUT.gguf TYPE: re-encode a GGUF model's matrices to
// a named mix (q8_0, q4_0, q4_k_m, q5_k_m, q6_k, f16, bf16, ...), choosing
// each tensor's type as llama-quantize does.
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *g_usage =
    "usage: infer quantize IN.gguf OUT.gguf TYPE\n"
    "  re-encodes a GGUF model's matrices to a file type (q8_0, q4_0, q4_k_m, q5_k_m, q6_k, f16, bf16, ...),\n"
    "  choosing each tensor's type as llama-quantize does.\n";

static const struct option g_opts[] = {CLI_OPT_HELP, {0}};

int cmd_quantize(int argc, char **argv) {
    cli_opts o;
    cli_opts_init(&o, "quantize", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "h", g_opts)) > 0) {}
    if (opt == CLI_STOP) return o.status;
    const char **args = (const char **)argv + optind;
    int n = argc - optind;
    if (n > 3) return cli_error("quantize: unexpected argument \"%s\"", args[3]);
    if (n != 3) return cli_error("quantize: usage: infer quantize IN.gguf OUT.gguf TYPE (%s)", infer_ftype_names());
    double t0 = cli_now();
    infer_model *m;
    if (cli_model_load(args[0], &m)) return cli_error("%s", infer_last_error());
    infer_status st = infer_quantize_gguf(m, args[1], args[2]);
    infer_model_free(m);
    if (st) return cli_error("%s", infer_last_error());
    fprintf(stderr, "infer: wrote %s (%s) in %.2f s\n", args[1], args[2], cli_now() - t0);
    return 0;
}
