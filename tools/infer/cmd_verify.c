// infer verify DIR.vindex: index.json, every byte range and every sha256;
// prints "OK" or the first problem (exit status 1).
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cmd_verify(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) return cli_error("verify: unknown option \"%s\"", argv[i]);
        if (dir) return cli_error("verify: unexpected argument \"%s\"", argv[i]);
        dir = argv[i];
    }
    if (!dir) return cli_error("verify: usage: infer verify DIR.vindex");
    if (infer_vindex_verify(dir)) return cli_error("verify: %s", infer_last_error());
    printf("OK %s\n", dir);
    return 0;
}
