// infer info -m MODEL: what was loaded and what it costs.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_info(int argc, char **argv) {
    const char *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 1;
        } else return cli_error("info: unknown option \"%s\"", argv[i]);
    }
    if (!model && !(model = cli_default_model())) return 1;
    infer_model *m;
    if (infer_model_load(model, &m)) return cli_error("%s", infer_last_error());
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) { infer_model_free(m); return cli_error("out of memory"); }
    infer_model_describe(m, buf, cap);
    printf("model                = %s\n%s", model, buf);
    printf("peak RSS             = %.2f MiB\n", cli_peak_rss_kib() / 1024.0);
    free(buf);
    infer_model_free(m);
    return 0;
}
