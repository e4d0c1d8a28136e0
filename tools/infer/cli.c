#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("infer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int32_t *cli_parse_ids(const char *s, int *n) {
    *n = 0;
    size_t len = strlen(s), cap = 1;
    for (size_t i = 0; i < len; i++) cap += s[i] == ',';
    int32_t *ids = malloc(sizeof *ids * cap);
    if (!ids) { cli_error("out of memory"); return NULL; }
    const char *p = s;
    while (1) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') {
            cli_error("--ids: expected a token id at \"%.20s\" (ids are comma-separated non-negative integers)", p);
            free(ids);
            return NULL;
        }
        long v = strtol(p, &end, 10);
        if (errno || v > INT32_MAX) {
            cli_error("--ids: token id \"%.20s\" is too large", p);
            free(ids);
            return NULL;
        }
        ids[(*n)++] = (int32_t)v;
        if (*end == 0) break;
        if (*end != ',') {
            cli_error("--ids: unexpected \"%.20s\" after a token id", end);
            free(ids);
            return NULL;
        }
        p = end + 1;
    }
    return ids;
}

long cli_parse_count(const char *flag, const char *s, long max) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > max) {
        cli_error("%s: \"%s\" is not an integer in [0, %ld]", flag, s, max);
        return -1;
    }
    return v;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

long cli_peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

long cli_rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int parse_float(const char *flag, const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        cli_error("%s: \"%s\" is not a number in [%g, %g]", flag, s, lo, hi);
        return -1;
    }
    *out = (float)v;
    return 1;
}

int cli_sampling_flag(int argc, char **argv, int *i, infer_sampling *p) {
    const char *f = argv[*i], *v;
    long n;
    if (!strcmp(f, "-s") || !strcmp(f, "--seed")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end) { cli_error("%s: \"%s\" is not a seed", f, v); return -1; }
        p->seed = s;
        return 1;
    }
    if (!strcmp(f, "--temp")) return (v = cli_value(argc, argv, i)) ? parse_float(f, v, 0, 1e6f, &p->temp) : -1;
    if (!strcmp(f, "--top-p")) return (v = cli_value(argc, argv, i)) ? parse_float(f, v, 0, 1, &p->top_p) : -1;
    if (!strcmp(f, "--min-p")) return (v = cli_value(argc, argv, i)) ? parse_float(f, v, 0, 1, &p->min_p) : -1;
    if (!strcmp(f, "--repeat-penalty")) return (v = cli_value(argc, argv, i)) ? parse_float(f, v, 1e-3f, 100, &p->repeat_penalty) : -1;
    if (!strcmp(f, "--presence-penalty")) return (v = cli_value(argc, argv, i)) ? parse_float(f, v, -100, 100, &p->presence_penalty) : -1;
    if (!strcmp(f, "--frequency-penalty")) return (v = cli_value(argc, argv, i)) ? parse_float(f, v, -100, 100, &p->frequency_penalty) : -1;
    if (!strcmp(f, "--top-k")) {
        if (!(v = cli_value(argc, argv, i)) || (n = cli_parse_count(f, v, 1 << 24)) < 0) return -1;
        p->top_k = (int)n;
        return 1;
    }
    if (!strcmp(f, "--repeat-last-n")) {
        if (!(v = cli_value(argc, argv, i)) || (n = cli_parse_count(f, v, 1 << 24)) < 0) return -1;
        p->repeat_last_n = (int)n;
        return 1;
    }
    return 0;
}

const char *cli_default_model(void) {
    static char path[4096];
    const char *cache = getenv("INFER_CACHE"), *home = getenv("HOME");
    if (cache && *cache) snprintf(path, sizeof path, "%s/gemma3/gemma-3-270m-q4_k_m.gguf", cache);
    else snprintf(path, sizeof path, "%s/.cache/infer/gemma3/gemma-3-270m-q4_k_m.gguf", home ? home : ".");
    if (access(path, R_OK) == 0) return path;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/fetch-model.sh' gemma3 >&2", INFER_SOURCE_DIR);
    fprintf(stderr, "infer: no -m given and the default model is not in the cache: fetching it (%s)\n", path);
    if (system(cmd) != 0 || access(path, R_OK) != 0) {
        cli_error("could not fetch the default model; run scripts/fetch-model.sh gemma3 or give -m MODEL");
        return NULL;
    }
    return path;
}

int cli_threads_flag(int argc, char **argv, int *i) {
    if (strcmp(argv[*i], "-t") && strcmp(argv[*i], "--threads")) return 0;
    const char *v;
    long t;
    if (!(v = cli_value(argc, argv, i)) || (t = cli_parse_count("-t", v, 256)) < 0) return -1;
    infer_set_threads(t ? (int)t : 1);
    return 1;
}
