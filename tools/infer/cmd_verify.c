// infer verify DIR.vindex: index.json, every byte range and every sha256;
// prints "OK" or the first problem (exit status 1).
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *g_usage =
    "usage: infer verify DIR.vindex\n"
    "  checks a vindex: index.json, every byte range and the sha256 of every file; prints \"OK DIR\", or the\n"
    "  first problem (exit status 1).\n";

static const struct option g_opts[] = {CLI_OPT_HELP, {0}};

int cmd_verify(int argc, char **argv) {
    cli_opts o;
    cli_opts_init(&o, "verify", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "h", g_opts)) > 0) {}
    if (opt == CLI_STOP) return o.status;
    const char *dir = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) return cli_error("verify: unexpected argument \"%s\"", argv[optind]);
    if (!dir) return cli_error("verify: usage: infer verify DIR.vindex");
    if (infer_vindex_verify(dir)) return cli_error("verify: %s", infer_last_error());
    printf("OK %s\n", dir);
    return 0;
}
