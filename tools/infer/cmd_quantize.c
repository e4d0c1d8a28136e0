// infer quantize IN.gguf OUT.gguf TYPE: re-encode a GGUF model's matrices to
// a named mix (q8_0, q4_0, q4_k_m, q5_k_m, q6_k, f16, bf16, ...), choosing
// each tensor's type as llama-quantize does.
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cmd_quantize(int argc, char **argv) {
    const char *args[3] = {NULL, NULL, NULL};
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) return cli_error("quantize: unknown option \"%s\"", argv[i]);
        if (n == 3) return cli_error("quantize: unexpected argument \"%s\"", argv[i]);
        args[n++] = argv[i];
    }
    if (n != 3) return cli_error("quantize: usage: infer quantize IN.gguf OUT.gguf TYPE (%s)", infer_ftype_names());
    double t0 = cli_now();
    infer_model *m;
    if (infer_model_load(args[0], &m)) return cli_error("%s", infer_last_error());
    infer_status st = infer_quantize_gguf(m, args[1], args[2]);
    infer_model_free(m);
    if (st) return cli_error("%s", infer_last_error());
    fprintf(stderr, "infer: wrote %s (%s) in %.2f s\n", args[1], args[2], cli_now() - t0);
    return 0;
}
