#include "base/cpu.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

static int g_avx2, g_vnni, g_bf16, g_amx, g_amx_int8;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void cpu_detect(void) {
    __builtin_cpu_init();
    // (F16C from CPUID leaf 1: clang's __builtin_cpu_supports does not know "f16c")
    unsigned a, b, c = 0, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    g_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    // (libgcc's avx512 bits include the OS's saving of the AVX-512 state)
    const char *off = getenv("INFER_NO_VNNI");
    g_vnni = g_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni") && !(off && *off && *off != '0');
    g_bf16 = g_vnni && __builtin_cpu_supports("avx512bf16");
    // AMX: CPUID.7.0 EDX bits 22 (bf16) and 24 (tiles), XCR0 bits 17-18
    // (the OS saves the tile state), then the permission to use it
    unsigned a7, b7, c7, d7 = 0;
    const char *noamx = getenv("INFER_NO_AMX");
    if (g_bf16 && __get_cpuid_count(7, 0, &a7, &b7, &c7, &d7) && (d7 >> 22 & 1) && (d7 >> 24 & 1) && !(noamx && *noamx && *noamx != '0')) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        int os = (lo >> 17 & 3) == 3;
#ifdef __linux__
        if (os) os = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
        os = 0;
#endif
        g_amx = os;
        g_amx_int8 = os && (d7 >> 25 & 1); // (CPUID.7.0 EDX bit 25: AMX-INT8)
        const char *noi8 = getenv("INFER_NO_AMX_INT8");
        if (noi8 && *noi8 && *noi8 != '0') g_amx_int8 = 0;
    }
}

int cpu_has_avx2(void) {
    pthread_once(&g_cpu_once, cpu_detect);
    return g_avx2;
}

int cpu_has_vnni(void) {
    pthread_once(&g_cpu_once, cpu_detect);
    return g_vnni;
}

int cpu_has_avx512bf16(void) {
    pthread_once(&g_cpu_once, cpu_detect);
    return g_bf16;
}

int cpu_has_amx_bf16(void) {
    pthread_once(&g_cpu_once, cpu_detect);
    return g_amx;
}

int cpu_has_amx_int8(void) {
    pthread_once(&g_cpu_once, cpu_detect);
    return g_amx_int8;
}

size_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb << 10;
}
