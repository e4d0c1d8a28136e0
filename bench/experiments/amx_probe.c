// The AMX tile unit's throughput on this CPU, one core: ns per TDPBSSD
// (16x16 int32 C, K = 64 or 32 bytes) with 1, 2 and 4 independent C tiles,
// per TILELOADD (A tile from L1, from a buffer in L2), per TILESTORED, and a
// step of the q8_0 kernel's shape (zero, 2 loads, dot, store). Compare two
// machines' figures to see whether the tile unit or what surrounds it differs.
//   cc -O2 -o /tmp/amx_probe bench/experiments/amx_probe.c && /tmp/amx_probe   (bench/device exp amx_probe)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void config(int kbytes) { // C tiles 0,1,6,7: 16 x 64 B; A tiles 2,4: 16 x kbytes; B tiles 3,5: kbytes/4 x 64 B
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    c.colsb[2] = c.colsb[4] = (uint16_t)kbytes;
    c.rows[3] = c.rows[5] = (uint8_t)(kbytes / 4);
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}

static uint8_t big[8 << 20] __attribute__((aligned(64)));
static uint8_t small[4096] __attribute__((aligned(64)));
static int32_t cbuf[4][256] __attribute__((aligned(64)));

int main(void) {
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        fprintf(stderr, "amx_probe: no AMX permission\n");
        return 1;
    }
    memset(big, 1, sizeof big), memset(small, 1, sizeof small);
    const long N = 20000000;
    for (int kb = 64; kb >= 32; kb -= 32) {
        config(kb);
        const long bs = 64, as = kb;
        __asm__ volatile("tileloadd (%0,%1,1), %%tmm2\n\ttileloadd (%2,%3,1), %%tmm3\n\ttilezero %%tmm0\n\ttilezero %%tmm1\n\t"
                         "tilezero %%tmm6\n\ttilezero %%tmm7" ::"r"(small),
                         "r"(as), "r"(small + 1024), "r"(bs));
        double t = now();
        for (long i = 0; i < N; i++) __asm__ volatile("tdpbssd %%tmm3, %%tmm2, %%tmm0" ::);
        double one = (now() - t) / N * 1e9;
        t = now();
        for (long i = 0; i < N / 2; i++) __asm__ volatile("tdpbssd %%tmm3, %%tmm2, %%tmm0\n\ttdpbssd %%tmm3, %%tmm2, %%tmm1" ::);
        double two = (now() - t) / N * 1e9;
        t = now();
        for (long i = 0; i < N / 4; i++)
            __asm__ volatile("tdpbssd %%tmm3, %%tmm2, %%tmm0\n\ttdpbssd %%tmm3, %%tmm2, %%tmm1\n\t"
                             "tdpbssd %%tmm3, %%tmm2, %%tmm6\n\ttdpbssd %%tmm3, %%tmm2, %%tmm7" ::);
        double four = (now() - t) / N * 1e9;
        printf("K=%d bytes: tdpbssd ns/op: 1 chain %.2f, 2 chains %.2f, 4 chains %.2f (%.0f GMAC/s)\n", kb, one, two, four,
               16.0 * 16 * kb / four);
    }
    config(32);
    const long as = 32, bs = 64, big_as = 2112; // (an activation row of 2048 values plus its scales)
    double t = now();
    for (long i = 0; i < N; i++) __asm__ volatile("tileloadd (%0,%1,1), %%tmm2" ::"r"(small), "r"(as));
    printf("tileloadd A (16 x 32 B) from L1: %.2f ns\n", (now() - t) / N * 1e9);
    t = now();
    const long M = N / 4;
    for (long i = 0; i < M; i++) {
        const uint8_t *p = big + (size_t)(i % 64) * 32 + (size_t)((i / 64) % 32) * 16 * big_as;
        __asm__ volatile("tileloadd (%0,%1,1), %%tmm2" ::"r"(p), "r"(big_as));
    }
    printf("tileloadd A (16 rows 2112 B apart, 1 MiB walked) from L2: %.2f ns\n", (now() - t) / M * 1e9);
    t = now();
    for (long i = 0; i < N; i++) __asm__ volatile("tilestored %%tmm0, (%0,%1,1)" ::"r"(cbuf[i & 3]), "r"(bs) : "memory");
    printf("tilestored C (16 x 64 B) to L1: %.2f ns\n", (now() - t) / N * 1e9);
    t = now();
    for (long i = 0; i < M; i++) {
        const uint8_t *p = big + (size_t)(i % 64) * 32 + (size_t)((i / 64) % 32) * 16 * big_as;
        __asm__ volatile("tilezero %%tmm0\n\t"
                         "tileloadd (%0,%1,1), %%tmm2\n\t"
                         "tileloadd (%2,%3,1), %%tmm3\n\t"
                         "tdpbssd %%tmm3, %%tmm2, %%tmm0\n\t"
                         "tilestored %%tmm0, (%4,%3,1)" ::"r"(p),
                         "r"(big_as), "r"(small + 512 * (i & 3)), "r"(bs), "r"(cbuf[i & 3])
                         : "memory");
    }
    printf("q8_0 step (zero, A from L2, B from L1, dot K=32, store): %.2f ns\n", (now() - t) / M * 1e9);
    __asm__ volatile("tilerelease" ::);
    return 0;
}
