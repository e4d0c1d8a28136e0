#include "base/cpu.h"

#include <pthread.h>

static int g_avx2;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void cpu_detect(void) {
    __builtin_cpu_init();
    g_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

int cpu_has_avx2(void) {
    pthread_once(&g_cpu_once, cpu_detect);
    return g_avx2;
}
