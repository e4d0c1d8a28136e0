#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

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
