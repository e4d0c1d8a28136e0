// A minimal test harness: CHECK counts failures and prints where; a test
// program's main returns check_summary().
#ifndef INFER_TESTS_CHECK_H
#define INFER_TESTS_CHECK_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer.h"

static int g_checks, g_failed;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        g_checks++;                                                           \
        if (!(cond)) {                                                        \
            g_failed++;                                                       \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

// A context of n positions whose kernels run on `threads` threads.
static inline infer_status ctx_threads(infer_model *m, int n, int threads, infer_ctx **c) {
    infer_ctx_params p = infer_ctx_default_params();
    p.n_ctx = n, p.n_threads = threads;
    return infer_ctx_create(m, &p, c);
}

static inline int check_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, g_checks, g_failed);
    return g_failed ? 1 : 0;
}

// Resident memory of this process in KB (/proc/self/statm), 0 when unknown.
static inline long test_rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

// A whole file, NUL-terminated (malloc'd; NULL if unreadable); *n its length.
static inline char *test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (s && fread(s, 1, (size_t)len, f) != (size_t)len) { free(s); s = NULL; }
    if (s) s[len] = 0;
    fclose(f);
    if (n) *n = s ? (size_t)len : 0;
    return s;
}

// The model cache: $INFER_CACHE, else ~/.cache/infer.
static inline const char *test_cache_dir(void) {
    static char buf[1024];
    const char *c = getenv("INFER_CACHE");
    if (c && *c) return c;
    snprintf(buf, sizeof buf, "%s/.cache/infer", getenv("HOME") ? getenv("HOME") : ".");
    return buf;
}

static inline int test_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

// max |a - b| / rms(b) (infinite if a holds a NaN)
static inline double test_rel_err(const float *a, const float *b, size_t n) {
    double ss = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        ss += (double)b[i] * b[i];
        double d = fabs((double)a[i] - b[i]);
        if (d > mx || isnan(d)) mx = isnan(d) ? INFINITY : d;
    }
    return mx / sqrt(ss / (double)n);
}

#ifdef FIXTURES_DIR
static inline int test_cmp_base(const void *a, const void *b) {
    const char *x = strrchr(*(char *const *)a, '/'), *y = strrchr(*(char *const *)b, '/');
    return strcmp(x, y);
}

// The directory of every fixture family (one with reference.json): the
// shared fixtures, then the families made here (tests/data/fixtures), sorted
// by family name; only `only`'s when it is not NULL. Returns the count;
// free each and *dirs.
static inline int test_fixture_dirs(char ***dirs, const char *only) {
    const char *roots[] = {FIXTURES_DIR, REPO_FIXTURES_DIR};
    int n = 0, cap = 64;
    *dirs = malloc(sizeof(char *) * (size_t)cap);
    for (int r = 0; r < 2; r++) {
        DIR *d = opendir(roots[r]);
        for (struct dirent *e; d && (e = readdir(d));) {
            char p[1200];
            if (e->d_name[0] == '.' || (only && strcmp(only, e->d_name))) continue;
            snprintf(p, sizeof p, "%s/%s/reference.json", roots[r], e->d_name);
            if (access(p, R_OK)) continue;
            if (n == cap) *dirs = realloc(*dirs, sizeof(char *) * (size_t)(cap *= 2));
            p[strlen(p) - strlen("/reference.json")] = 0;
            (*dirs)[n++] = strdup(p);
        }
        if (d) closedir(d);
    }
    qsort(*dirs, (size_t)n, sizeof **dirs, test_cmp_base);
    return n;
}
#endif

#ifdef TEST_DATA_DIR
// The default model's path (fetched by scripts/fetch-model.sh when the cache
// lacks it) into buf; 0 if it could not be had.
static inline int test_default_model(char *buf, size_t cap) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cd '%s/../..' && scripts/fetch-model.sh gemma3", TEST_DATA_DIR);
    buf[0] = 0;
    FILE *p = popen(cmd, "r");
    if (p && fgets(buf, (int)cap, p)) buf[strcspn(buf, "\n")] = 0;
    if (p) pclose(p);
    return buf[0] != 0;
}
#endif

#endif
