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
#include <immintrin.h>

#if defined(__x86_64__)

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static _Thread_local int g_cfg; // the loaded configuration: its kind x 64 + wide x 32 + M (0: none)

// M tokens a pass; bf16: C m x 8 f32, A m x 32 bf16, B 16 pairs x 8 rows;
// q8_0, q4_K: C m x 8 int32 (tiles 0, 1, 6, 7), A m x 32 int8, B 8 granules (4 columns) x 8 rows; q6_K: A m x
// 16 int8, B 4 granules. wide (two groups a pass): B and C 16 rows wide (64-byte rows), C tiles 0 and 1.
static void configure_w(int kind, int m, int wide) {
    kind = kind == PACK_BF16 || kind == PACK_Q6_K ? kind : PACK_Q8_0; // (q8_0 and q4_K share one configuration)
    if (g_cfg == 64 * kind + 32 * wide + m) return;
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int cw = wide ? 64 : 32;
    c.rows[0] = c.rows[1] = (uint8_t)m, c.colsb[0] = c.colsb[1] = (uint16_t)cw;
    c.rows[2] = c.rows[4] = (uint8_t)m, c.colsb[2] = c.colsb[4] = kind == PACK_BF16 ? 64 : kind == PACK_Q6_K ? 16 : 32;
    c.rows[3] = c.rows[5] = kind == PACK_BF16 ? 16 : kind == PACK_Q6_K ? 4 : 8, c.colsb[3] = c.colsb[5] = (uint16_t)cw;
    c.rows[6] = c.rows[7] = (uint8_t)m, c.colsb[6] = c.colsb[7] = (uint16_t)cw; // (a second pair of C)
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
    g_cfg = 64 * kind + 32 * wide + m;
}
static void configure(int kind, int m) { configure_w(kind, m, 0); }

// panel_amx.c's configuration: all eight tiles 16 rows of 64 bytes
void amx_configure_panel(void) {
    if (g_cfg == 63) return; // (no kind's key: those are 64 and up)
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
    g_cfg = 63;
}

// The tokens against one group (two = 0) or two (at g and g + gb, each with
// its own pair of C tiles, 0 and 1; 6 and 7), fed the same tiles in the same
// order, so each row comes out the same either way; two groups' records are
// read side by side (two streams in decode).
static inline __attribute__((always_inline)) void bf16_tiles(const void *group, size_t gb, const void *x, size_t xstride, int T, int n,
                                                            float *out, size_t ldo, int two) {
    const uint8_t *g = group, *h = g + gb, *xb = x;
    const int nb = n / QK;
    const long xs = (long)xstride, bs = 32;
    float c[4][16 * 8];
    for (int t0 = 0; t0 < T; t0 += 16) {
        const int m = T - t0 < 16 ? T - t0 : 16;
        configure(PACK_BF16, m);
        __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm6\n\ttilezero %%tmm7" ::);
        const uint8_t *xt = xb + xstride * (size_t)t0;
        int i = 0;
        for (; i + 2 <= nb; i += 2) {
            // the tile loads wait on memory one by one: fetch the records 8 ahead (decode streams them)
            for (int o = 0; o < 1024; o += 64) {
                __builtin_prefetch(g + 512 * (size_t)(i + 8) + o, 0, 3);
                if (two) __builtin_prefetch(h + 512 * (size_t)(i + 8) + o, 0, 3);
            }
            if (two)
                __asm__ volatile("tileloadd (%0,%1,1), %%tmm2\n\t"
                                 "tileloadd (%2,%3,1), %%tmm3\n\t"
                                 "tileloadd (%4,%1,1), %%tmm4\n\t"
                                 "tileloadd (%5,%3,1), %%tmm5\n\t"
                                 "tdpbf16ps %%tmm3, %%tmm2, %%tmm0\n\t"
                                 "tdpbf16ps %%tmm5, %%tmm4, %%tmm1\n\t"
                                 "tileloadd (%6,%3,1), %%tmm3\n\t"
                                 "tileloadd (%7,%3,1), %%tmm5\n\t"
                                 "tdpbf16ps %%tmm3, %%tmm2, %%tmm6\n\t"
                                 "tdpbf16ps %%tmm5, %%tmm4, %%tmm7" ::"r"(xt + 64 * (size_t)i),
                                 "r"(xs), "r"(g + 512 * (size_t)i), "r"(bs), "r"(xt + 64 * (size_t)(i + 1)), "r"(g + 512 * (size_t)(i + 1)),
                                 "r"(h + 512 * (size_t)i), "r"(h + 512 * (size_t)(i + 1))
                                 : "memory");
            else
                __asm__ volatile("tileloadd (%0,%1,1), %%tmm2\n\t"
                                 "tileloadd (%2,%3,1), %%tmm3\n\t"
                                 "tileloadd (%4,%1,1), %%tmm4\n\t"
                                 "tileloadd (%5,%3,1), %%tmm5\n\t"
                                 "tdpbf16ps %%tmm3, %%tmm2, %%tmm0\n\t"
                                 "tdpbf16ps %%tmm5, %%tmm4, %%tmm1" ::"r"(xt + 64 * (size_t)i),
                                 "r"(xs), "r"(g + 512 * (size_t)i), "r"(bs), "r"(xt + 64 * (size_t)(i + 1)), "r"(g + 512 * (size_t)(i + 1))
                                 : "memory");
        }
        if (i < nb) {
            __asm__ volatile("tileloadd (%0,%1,1), %%tmm2\n\t"
                             "tileloadd (%2,%3,1), %%tmm3\n\t"
                             "tdpbf16ps %%tmm3, %%tmm2, %%tmm0" ::"r"(xt + 64 * (size_t)i),
                             "r"(xs), "r"(g + 512 * (size_t)i), "r"(bs)
                             : "memory");
            if (two)
                __asm__ volatile("tileloadd (%0,%1,1), %%tmm3\n\t"
                                 "tdpbf16ps %%tmm3, %%tmm2, %%tmm6" ::"r"(h + 512 * (size_t)i), "r"(bs)
                                 : "memory");
        }
        __asm__ volatile("tilestored %%tmm0, (%0,%2,1)\n\t"
                         "tilestored %%tmm1, (%1,%2,1)" ::"r"(c[0]),
                         "r"(c[1]), "r"(bs)
                         : "memory");
        if (two)
            __asm__ volatile("tilestored %%tmm6, (%0,%2,1)\n\t"
                             "tilestored %%tmm7, (%1,%2,1)" ::"r"(c[2]),
                             "r"(c[3]), "r"(bs)
                             : "memory");
        for (int t = 0; t < m; t++)
            for (int r = 0; r < 8; r++) {
                out[(size_t)(t0 + t) * ldo + r] = c[0][8 * t + r] + c[1][8 * t + r];
                if (two) out[(size_t)(t0 + t) * ldo + 8 + r] = c[2][8 * t + r] + c[3][8 * t + r];
            }
    }
}
static void tile_bf16_amx(const void *group, const void *x, size_t xstride, int T, int n, float *out, size_t ldo) {
    bf16_tiles(group, 0, x, xstride, T, n, out, ldo, 0);
}
static void tile2_bf16_amx(const void *group, size_t gb, const void *x, size_t xstride, int T, int n, float *out, size_t ldo) {
    bf16_tiles(group, gb, x, xstride, T, n, out, ldo, 1);
}

const pack_kernel pack_amx_bf16 = {.quant = act_quant_bf16_avx2, .tile = tile_bf16_amx, .tile2 = tile2_bf16_amx};

// q8_0 on AMX-INT8 (PACK_Q8_0's records, the VNNI kernel's activations):
// block i of 32 columns is one TDPBSUD of the M tokens' 32 signed values (A,
// read in place from the activation rows) against the record's 8 granule
// vectors (B: the 8 rows' values + 128, unsigned), giving each (token, row)
// the integer sum the VNNI kernel's dpbusd chain gives; the float part is
// that kernel's operation for operation (the sum plus -128 times the
// token's sum, converted, times the rows' scales times the token's scale,
// added into the token's accumulator), so each (row, token) comes out bit
// for bit as from the VNNI kernel, which takes the tokens short of 8 (and
// decode).
#define AMXQ __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

static inline int32_t ld32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

// An AMX kernel: passes of 16 and then 8 tokens (pass_fn, one group or two: gb apart), the tokens short of 8 by the
// VNNI kernel vn, whose activation quantizer it shares.
#define AMX_KERNEL(t, pass_fn, vn)                                                                                        \
    AMXQ static inline __attribute__((always_inline)) void tiles_##t(const uint8_t *g, size_t gb, const uint8_t *xb,     \
                                                                    size_t xs, int T, int n, float *out, size_t ldo,    \
                                                                    int two) {                                          \
        int t0 = 0;                                                                                                      \
        for (; T - t0 >= 16; t0 += 16) pass_fn(g, gb, xb + xs * (size_t)t0, xs, n, out + ldo * (size_t)t0, ldo, 16, two); \
        if (T - t0 >= 8) pass_fn(g, gb, xb + xs * (size_t)t0, xs, n, out + ldo * (size_t)t0, ldo, 8, two), t0 += 8;      \
        if (t0 < T) {                                                                                                    \
            vn.tile(g, xb + xs * (size_t)t0, xs, T - t0, n, out + ldo * (size_t)t0, ldo);                                \
            if (two) vn.tile(g + gb, xb + xs * (size_t)t0, xs, T - t0, n, out + ldo * (size_t)t0 + 8, ldo);              \
        }                                                                                                                \
    }                                                                                                                    \
    AMXQ static void tile_##t##_amx(const void *group, const void *x, size_t xs, int T, int n, float *out, size_t ldo) { \
        tiles_##t(group, 0, x, xs, T, n, out, ldo, 0);                                                                   \
    }                                                                                                                    \
    AMXQ static void tile2_##t##_amx(const void *group, size_t gb, const void *x, size_t xs, int T, int n, float *out,   \
                                     size_t ldo) {                                                                       \
        tiles_##t(group, gb, x, xs, T, n, out, ldo, 1);                                                                  \
    }                                                                                                                    \
    static void quant_##t(const float *x, void *y, int n) { vn.quant(x, y, n); }                                         \
    const pack_kernel pack_amx_##t = {.quant = quant_##t, .tile = tile_##t##_amx, .tokens = 16, .tile2 = tile2_##t##_amx};

// q4_K on AMX-INT8 (PACK_Q4_K's records, the VNNI kernel's q8_K activations):
// each 32-column sub-block's nibbles are unpacked to bytes (0..15) in the
// layout of a B tile, and one TDPBSUD of the tokens' 32 signed values against
// them gives each (token, row) the sub-block's integer sum that the VNNI
// kernel's dpbusd chain gives; the rest is that kernel's, operation for
// operation (the sums times the rows' sub-block scales added as int32; the
// mins against the activations' sums of 32 by dpwssd; per super-block a
// convert and an fma each for the mins and the sums), so each (row, token) is
// bit for bit the VNNI kernel's, which takes the tokens short of 8 (and
// decode). Two sub-blocks a step, unpacked a step ahead, their sums added up
// a step later, between the next step's products and their stores.

// (granule g of the 8 rows to u + st * g: st 32 for a B tile of 8 rows, 64 for one group's half of 16)
AMXQ static inline __attribute__((always_inline)) void q4k_unpack_s(const uint8_t *nib, uint8_t *u, int st) {
    const __m256i m4 = _mm256_set1_epi8(15);
    _Pragma("GCC unroll 4")
    for (int h = 0; h < 4; h++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(nib + 32 * h));
        _mm256_store_si256((__m256i *)(u + st * (2 * h)), _mm256_and_si256(q, m4));
        _mm256_store_si256((__m256i *)(u + st * (2 * h + 1)), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    }
}


// q6_K the same way (PACK_Q6_K's records, q8_K activations): a 16-column
// sub-block's 6-bit values (0..63) unpacked to a B tile of 4 granules, its
// sums by TDPBSUD of the tokens' 16 values, times the sub-block's signed
// scales into the tokens' int32 sums, the -32 offset as -32 sum sc_j bs16_j
// (dpwssd) added to them as integers at the end (the same int32 as the VNNI
// kernel's, which starts from it), one convert and fma a super-block.
AMXQ static inline __attribute__((always_inline)) void q6k_unpack_s(const uint8_t *sb, uint8_t *u, int st) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)sb), l1 = _mm256_loadu_si256((const __m256i *)(sb + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(sb + 64));
    _mm256_store_si256((__m256i *)u, _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)));
    _mm256_store_si256((__m256i *)(u + st), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)));
    _mm256_store_si256((__m256i *)(u + 2 * st), _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(h, m30)));
    _mm256_store_si256((__m256i *)(u + 3 * st), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30)));
}
// Two groups a pass (16 rows): B tiles 16 rows wide (granule k's row: group
// 0's 32 bytes, then group 1's: copied from the two records for q8_0, unpacked
// so for the k-quants), one TDPBSUD a step into a C tile of 16 rows' sums
// per token, and the arithmetic after it on 16 lanes at once. Lane r is row r's operations exactly as in the one-group passes, so
// the floats are the same.
#define AMX_STEPW(C)                                                                                                          \
    __asm__ volatile("tilezero %%" C "\n\t"                                                                                    \
                     "tileloadd (%0,%1,1), %%tmm2\n\t"                                                                          \
                     "tileloadd (%2,%3,1), %%tmm3\n\t"                                                                          \
                     "tdpbsud %%tmm3, %%tmm2, %%" C ::"r"(a0), "r"(xsl), "r"(ub), "r"(cs)                                        \
                     : "memory")
// (q8_0: the B tile holds the weights' signed values, so TDPBSSD's sums need no -128 x the token's sum)
#define AMX_STEPW_SS(C)                                                                                                       \
    __asm__ volatile("tilezero %%" C "\n\t"                                                                                    \
                     "tileloadd (%0,%1,1), %%tmm2\n\t"                                                                          \
                     "tileloadd (%2,%3,1), %%tmm3\n\t"                                                                          \
                     "tdpbssd %%tmm3, %%tmm2, %%" C ::"r"(a0), "r"(xsl), "r"(ub), "r"(cs)                                        \
                     : "memory")
#define STOREW(C) __asm__ volatile("tilestored %%" C ", (%0,%1,1)" ::"r"(c), "r"(cs) : "memory")

// 16 bytes at p then 16 at q, as one vector
AMXQ static inline __m256i two128(const void *p, const void *q) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)), _mm_loadu_si128((const __m128i *)q), 1);
}
AMXQ static inline __m128i two64(const void *p, const void *q) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p), _mm_loadl_epi64((const __m128i *)q));
}

// (Tile loads do not take data from the store buffer: a B tile unpacked by
// vector stores is loaded LAG steps later; a C tile is stored a step after
// its product, and its sums are read by vector loads LAG steps after it.)
enum { LAG = 3 };

// a block's B tile for two groups: granule k of record r then of record r + gb, 64 bytes a row, the stored
// values (w + 128) turned back to the signed w
AMXQ static inline __attribute__((always_inline)) void q8_0_wide(const uint8_t *r, size_t gb, uint8_t *w) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k++)
        _mm512_store_si512(w + 64 * k, _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(r + 16 + 32 * k))),
                                                                           _mm256_loadu_si256((const __m256i *)(r + gb + 16 + 32 * k)), 1),
                                                        flip));
}

AMXQ static inline __attribute__((always_inline)) void q8_0_pass2(const uint8_t *g, size_t gb, const uint8_t *xt, size_t xs, int n, float *out,
                                                                 size_t ldo, int M, int two) {
    enum { REC = 16 + 256 };
    const int nb = n / QK;
    const long xsl = (long)xs, cs = 64;
    int32_t cb[LAG + 1][16 * 16] __attribute__((aligned(64)));
    uint8_t wb[LAG + 1][512] __attribute__((aligned(64))); // (B tiles of 16 rows, copied LAG steps ahead)
    __m512 acc[16];
    _Pragma("GCC unroll 16")
    for (int t = 0; t < M; t++) acc[t] = _mm512_setzero_ps();
    configure_w(PACK_Q8_0, M, 1);
    for (int i = 0; i < LAG + 1 && i < nb; i++) q8_0_wide(g + REC * (size_t)i, gb, wb[i]);
    for (int i = 0; i < nb + LAG; i++) {
        if (i < nb) {
            const uint8_t *p = g + REC * (size_t)i;
            for (int o = 0; o < REC; o += 64) {
                __builtin_prefetch(p + 8 * REC + o, 0, 3);
                if (two) __builtin_prefetch(p + gb + 8 * REC + o, 0, 3);
            }
            const int8_t *a0 = XP_QS(xt) + 32 * (size_t)i;
            const uint8_t *ub = wb[i % (LAG + 1)];
            if (i & 1) AMX_STEPW_SS("tmm1");
            else AMX_STEPW_SS("tmm0");
        }
        if (i >= 1 && i <= nb) { // the step before's sums (its product had this step's issue to finish)
            int32_t *c = cb[(i - 1) % (LAG + 1)];
            if (i & 1) STOREW("tmm0");
            else STOREW("tmm1");
        }
        if (i >= LAG) { // block i - LAG: the VNNI kernel's float part, 16 rows a vector
            const int k = i - LAG;
            const int32_t *q = cb[k % (LAG + 1)];
            const uint8_t *pp = g + REC * (size_t)k;
            const __m512 dw = _mm512_cvtph_ps(two128(pp, pp + gb));
            _Pragma("GCC unroll 16")
            for (int t = 0; t < M; t++) { // (the VNNI kernel's integer sum: its -128 x the token's sum is in TDPBSSD's)
                const uint8_t *x = xt + xs * (size_t)t;
                const __m512i st = _mm512_load_si512(q + 16 * t);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(st), _mm512_mul_ps(dw, _mm512_set1_ps(XP_D(x, nb)[k])), acc[t]);
            }
        }
        if (i >= 1 && i + LAG < nb) q8_0_wide(g + REC * (size_t)(i + LAG), gb, wb[(i + LAG) % (LAG + 1)]);
    }
    _Pragma("GCC unroll 16")
    for (int t = 0; t < M; t++) _mm512_mask_storeu_ps(out + ldo * (size_t)t, two ? 0xffff : 0xff, acc[t]);
}

// q4_K (K) or q6_K, two groups: a step is sub-block j of super-block i of
// both, unpacked LAG steps ahead; its sums are taken LAG steps later (the
// mins first where it opens a super-block, the float part after where it
// closes one: the VNNI kernel's order).
AMXQ static inline __attribute__((always_inline)) void kq_pass2(int K, const uint8_t *g, size_t gb, const uint8_t *xt, size_t xs, int n,
                                                               float *out, size_t ldo, int M, int two) {
    const int Q4 = K == PACK_Q4_K, SB = Q4 ? 8 : 16;                  // sub-blocks a super-block
    const size_t REC = Q4 ? 32 + 64 + 64 + 1024 : 16 + 128 + 16 * 96; // (pack_record_bytes)
    const int W = Q4 ? 32 : 16, V0 = Q4 ? 160 : 144, VS = Q4 ? 128 : 96;
    const int nb = n / QK_K, steps = nb * SB;
    const long xsl = (long)xs, cs = 64;
    int32_t cb[LAG + 1][16 * 16] __attribute__((aligned(64)));
    uint8_t ubuf[LAG + 1][512] __attribute__((aligned(64))); // (B tiles of 16 rows)
    __m512 acc[16];
    __m512i isum[16];
    _Pragma("GCC unroll 16")
    for (int t = 0; t < M; t++) acc[t] = _mm512_setzero_ps(), isum[t] = _mm512_setzero_si512();
    configure_w(K, M, 1);
    if (!two) memset(ubuf, 0, sizeof ubuf); // (one group: the B tiles' second half stays zero)
    for (int s = 0; s < LAG && s < steps; s++) {
        const uint8_t *nv = g + REC * (size_t)(s / SB) + V0 + VS * (size_t)(s % SB);
        if (Q4) q4k_unpack_s(nv, ubuf[s], 64);
        else q6k_unpack_s(nv, ubuf[s], 64);
        if (two && Q4) q4k_unpack_s(nv + gb, ubuf[s] + 32, 64);
        else if (two) q6k_unpack_s(nv + gb, ubuf[s] + 32, 64);
    }
    for (int s = 0; s < steps + LAG; s++) {
        if (s < steps) {
            const int i = s / SB, j = s % SB;
            const uint8_t *p = g + REC * (size_t)i;
            if (j == 0)
                for (size_t o = 0; o < REC; o += 64) {
                    __builtin_prefetch(p + 2 * REC + o, 0, 3);
                    if (two) __builtin_prefetch(p + gb + 2 * REC + o, 0, 3);
                }
            const uint8_t *ub = ubuf[s % (LAG + 1)];
            const int8_t *a0 = XPK_QS(xt) + 256 * (size_t)i + W * (size_t)j;
            if (s & 1) AMX_STEPW("tmm1");
            else AMX_STEPW("tmm0");
        }
        if (s >= 1 && s <= steps) { // the step before's sums (its product had this step's issue to finish)
            int32_t *c = cb[(s - 1) % (LAG + 1)];
            if (s & 1) STOREW("tmm0");
            else STOREW("tmm1");
        }
        if (s >= LAG) { // step s - LAG retires
            const int k = s - LAG, pi = k / SB, pj = k % SB;
            const uint8_t *pp = g + REC * (size_t)pi, *pp2 = pp + gb;
            const int32_t *q = cb[k % (LAG + 1)];
            if (Q4 && pj == 0) { // super-block pi's mins, before its sums
                __m512i pr[4];
                _Pragma("GCC unroll 4")
                for (int r = 0; r < 4; r++) pr[r] = _mm512_cvtepu8_epi16(two128(pp + 96 + 16 * r, pp2 + 96 + 16 * r));
                const __m512 dm = _mm512_cvtph_ps(two128(pp + 16, pp2 + 16));
                _Pragma("GCC unroll 16")
                for (int t = 0; t < M; t++) {
                    const uint8_t *x = xt + xs * (size_t)t;
                    const int16_t *b32 = XPK_BS32(x, n) + 8 * pi;
                    __m512i mo = _mm512_setzero_si512();
                    _Pragma("GCC unroll 4")
                    for (int r = 0; r < 4; r++) mo = _mm512_dpwssd_epi32(mo, pr[r], _mm512_set1_epi32(ld32(b32 + 2 * r)));
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), mo)),
                                             _mm512_mul_ps(dm, _mm512_set1_ps(XPK_D(x, n)[pi])), acc[t]);
                }
            }
            __m512i sc;
            if (Q4) sc = _mm512_cvtepu8_epi32(two64(pp + 32 + 8 * pj, pp2 + 32 + 8 * pj));
            else {
                const __m512i pr = _mm512_cvtepi8_epi16(two128(pp + 16 + 16 * (pj / 2), pp2 + 16 + 16 * (pj / 2)));
                sc = pj % 2 ? _mm512_srai_epi32(pr, 16) : _mm512_srai_epi32(_mm512_slli_epi32(pr, 16), 16);
            }
            _Pragma("GCC unroll 16")
            for (int t = 0; t < M; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_load_si512(q + 16 * t), sc));
            if (pj == SB - 1) { // super-block pi's float part
                __m512i pr[8];
                for (int r = 0; r < 8; r++) pr[r] = Q4 ? _mm512_setzero_si512() : _mm512_cvtepi8_epi16(two128(pp + 16 + 16 * r, pp2 + 16 + 16 * r));
                const __m512 d = _mm512_cvtph_ps(two128(pp, pp2));
                _Pragma("GCC unroll 16")
                for (int t = 0; t < M; t++) {
                    const uint8_t *x = xt + xs * (size_t)t;
                    __m512i v = isum[t];
                    if (!Q4) { // (the -32 offset, as kq_pass)
                        const int16_t *b16 = XPK_BS16(x, n) + 16 * pi;
                        __m512i mo = _mm512_setzero_si512();
                        _Pragma("GCC unroll 8")
                        for (int r = 0; r < 8; r++) mo = _mm512_dpwssd_epi32(mo, pr[r], _mm512_set1_epi32(ld32(b16 + 2 * r)));
                        v = _mm512_sub_epi32(v, _mm512_slli_epi32(mo, 5));
                    }
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(d, _mm512_set1_ps(XPK_D(x, n)[pi])), acc[t]);
                    isum[t] = _mm512_setzero_si512();
                }
            }
        }
        if (s + LAG < steps) { // the sub-block LAG steps ahead, both groups
            const int u = s + LAG;
            const uint8_t *nv = g + REC * (size_t)(u / SB) + V0 + VS * (size_t)(u % SB);
            uint8_t *d = ubuf[u % (LAG + 1)];
            if (Q4) q4k_unpack_s(nv, d, 64);
            else q6k_unpack_s(nv, d, 64);
            if (two && Q4) q4k_unpack_s(nv + gb, d + 32, 64);
            else if (two) q6k_unpack_s(nv + gb, d + 32, 64);
        }
    }
    _Pragma("GCC unroll 16")
    for (int t = 0; t < M; t++) _mm512_mask_storeu_ps(out + ldo * (size_t)t, two ? 0xffff : 0xff, acc[t]);
}

// (the passes for M = 16 and 8, one group and two, compiled apart: M and two constants in each)
#define PASS_M(call) \
    if (M == 16 && two) call(16, 1); \
    else if (M == 16) call(16, 0); \
    else if (two) call(8, 1); \
    else call(8, 0)
#define Q8(m, w) q8_0_pass2(g, gb, xt, xs, n, out, ldo, m, w)
#define Q4K(m, w) kq_pass2(PACK_Q4_K, g, gb, xt, xs, n, out, ldo, m, w)
#define Q6K(m, w) kq_pass2(PACK_Q6_K, g, gb, xt, xs, n, out, ldo, m, w)
AMXQ static void q8_0_pass(const uint8_t *g, size_t gb, const uint8_t *xt, size_t xs, int n, float *out, size_t ldo, int M, int two) { PASS_M(Q8); }
AMXQ static void q4k_pass(const uint8_t *g, size_t gb, const uint8_t *xt, size_t xs, int n, float *out, size_t ldo, int M, int two) { PASS_M(Q4K); }
AMXQ static void q6k_pass(const uint8_t *g, size_t gb, const uint8_t *xt, size_t xs, int n, float *out, size_t ldo, int M, int two) { PASS_M(Q6K); }
#undef PASS_M
#undef Q8
#undef Q4K
#undef Q6K

AMX_KERNEL(q8_0, q8_0_pass, pack_vnni_q8_0)
AMX_KERNEL(q4_K, q4k_pass, pack_vnni_q4_K)
AMX_KERNEL(q6_K, q6k_pass, pack_vnni_q6_K)
#undef AMX_STEPW
#undef AMX_STEPW_SS
#undef STOREW
#undef AMX_KERNEL

#else
void amx_configure_panel(void) {}
const pack_kernel pack_amx_bf16 = {0};
const pack_kernel pack_amx_q8_0 = {0};
const pack_kernel pack_amx_q4_K = {0};
const pack_kernel pack_amx_q6_K = {0};
#endif
