// The AMX kernel of packed bf16 weights (layout: pack.h, PACK_BF16).
//
// A group of 8 weight rows against T tokens, 16 tokens a pass: tile 2 holds
// 16 tokens' activations for 32 columns (A: 16 rows of 64 bytes, read in
// place from the activation rows), tile 3 the group's record for those
// columns (B: 16 rows of 32 bytes), and TDPBF16PS adds A.B into C (16 x 8
// f32). Two C tiles (0: the even 32-column blocks, 1: the odd ones) keep two
// chains in flight; they are stored and added at the end. A token's row of C
// depends on that token alone, so every (row, token) sees the same operations
// whatever T: a batch equals one-token calls bit for bit, and decode (T = 1)
// takes the same path. The tile configuration is loaded once per thread and
// again only when the token count of a pass changes.
//
// The instructions are written as inline assembly (AT&T operand order:
// sources first), which gcc and clang both assemble without AMX intrinsics.
#include "tensor/pack.h"
#include "tensor/vecdot.h"
#include "tensor/quant.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static _Thread_local int g_rows; // the M of the loaded configuration (0: none)

static void configure(int m) {
    if (g_rows == m) return;
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = c.rows[1] = (uint8_t)m, c.colsb[0] = c.colsb[1] = 32; // C: m tokens x 8 f32
    c.rows[2] = c.rows[4] = (uint8_t)m, c.colsb[2] = c.colsb[4] = 64; // A: m tokens x 32 bf16
    c.rows[3] = c.rows[5] = 16, c.colsb[3] = c.colsb[5] = 32;         // B: 16 pairs x 8 rows
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
    g_rows = m;
}

static void tile_bf16_amx(const void *group, const void *x, size_t xstride, int T, int n, float *out, size_t ldo) {
    const uint8_t *g = group, *xb = x;
    const int nb = n / QK;
    const long xs = (long)xstride, bs = 32;
    float c0[16 * 8], c1[16 * 8];
    for (int t0 = 0; t0 < T; t0 += 16) {
        const int m = T - t0 < 16 ? T - t0 : 16;
        configure(m);
        __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1" ::);
        const uint8_t *xt = xb + xstride * (size_t)t0;
        int i = 0;
        for (; i + 2 <= nb; i += 2) {
            // the tile loads wait on memory one by one: fetch the records 8 ahead (decode streams them)
            for (int o = 0; o < 1024; o += 64) __builtin_prefetch(g + 512 * (size_t)(i + 8) + o, 0, 3);
            __asm__ volatile("tileloadd (%0,%1,1), %%tmm2\n\t"
                             "tileloadd (%2,%3,1), %%tmm3\n\t"
                             "tileloadd (%4,%1,1), %%tmm4\n\t"
                             "tileloadd (%5,%3,1), %%tmm5\n\t"
                             "tdpbf16ps %%tmm3, %%tmm2, %%tmm0\n\t"
                             "tdpbf16ps %%tmm5, %%tmm4, %%tmm1" ::"r"(xt + 64 * (size_t)i),
                             "r"(xs), "r"(g + 512 * (size_t)i), "r"(bs), "r"(xt + 64 * (size_t)(i + 1)), "r"(g + 512 * (size_t)(i + 1))
                             : "memory");
        }
        if (i < nb)
            __asm__ volatile("tileloadd (%0,%1,1), %%tmm2\n\t"
                             "tileloadd (%2,%3,1), %%tmm3\n\t"
                             "tdpbf16ps %%tmm3, %%tmm2, %%tmm0" ::"r"(xt + 64 * (size_t)i),
                             "r"(xs), "r"(g + 512 * (size_t)i), "r"(bs)
                             : "memory");
        __asm__ volatile("tilestored %%tmm0, (%0,%2,1)\n\t"
                         "tilestored %%tmm1, (%1,%2,1)" ::"r"(c0),
                         "r"(c1), "r"(bs)
                         : "memory");
        for (int t = 0; t < m; t++)
            for (int r = 0; r < 8; r++) out[(size_t)(t0 + t) * ldo + r] = c0[8 * t + r] + c1[8 * t + r];
    }
}

const pack_kernel pack_amx_bf16 = {.quant = act_quant_bf16_avx2, .tile = tile_bf16_amx};

#else
const pack_kernel pack_amx_bf16 = {0};
#endif
