// infer convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_k_m|...]: write a GGUF file
// the way llama.cpp's convert_hf_to_gguf.py lays it out.
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type_name = "f16";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--type") || !strcmp(argv[i], "--outtype")) {
            if (!(type_name = cli_value(argc, argv, &i))) return 1;
        } else if (argv[i][0] == '-') {
            return cli_error("convert: unknown option \"%s\"", argv[i]);
        } else if (!in) in = argv[i];
        else if (!out) out = argv[i];
        else return cli_error("convert: unexpected argument \"%s\"", argv[i]);
    }
    if (!in || !out) return cli_error("convert: usage: infer convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_k_m|...]");
    if (!infer_ftype_known(type_name)) return cli_error("convert: unknown --type \"%s\" (%s)", type_name, infer_ftype_names());
    double t0 = cli_now();
    infer_model *m;
    if (infer_model_load(in, &m)) return cli_error("%s", infer_last_error());
    infer_status st = infer_convert_gguf(m, out, type_name);
    infer_model_free(m);
    if (st) return cli_error("%s", infer_last_error());
    fprintf(stderr, "infer: wrote %s (%s) in %.2f s\n", out, type_name, cli_now() - t0);
    return 0;
}
