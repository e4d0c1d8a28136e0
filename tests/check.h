// A minimal test harness: CHECK counts failures and prints where; a test
// program's main returns check_summary().
#ifndef INFER_TESTS_CHECK_H
#define INFER_TESTS_CHECK_H

#include <stdio.h>

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

static inline int check_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, g_checks, g_failed);
    return g_failed ? 1 : 0;
}

#endif
