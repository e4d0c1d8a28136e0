// Prompt products on AMX-INT8 in panels (layouts and numerics: panel.h).
//
// panel_run walks the columns a super-block (256) at a time: four K=64
// steps, each two A tiles (the panel's rows 0-15 and 16-31, tiles 4 and 5)
// against one B tile (16 tokens, tile 6) into two C tiles; the C tiles of
// alternate super-blocks are 0-1 and 2-3, so the sums of one are turned into
// floats (stored, converted, scaled, added) while the products of the next
// run. The instructions are inline assembly (AT&T order: sources first).
#include "tensor/panel.h"
#include "tensor/pack.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "base/cpu.h"
#include "base/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The int8 layouts' width: n rounded up to whole super-blocks (the last one's
// columns past n are zeros, in the weights and the tokens alike).
static int64_t padded(int64_t n) { return (n + 255) & ~(int64_t)255; }

static size_t tiles_of(int64_t n) { return (size_t)padded(n) * PANEL_ROWS; } // (int8: 32 rows x n)

size_t panel_bytes(int64_t n) { return tiles_of(n) + sizeof(float) * 2 * 16 * (size_t)(padded(n) / 256); }

size_t panel_act_bytes(int T, int64_t n) {
    size_t blocks = (size_t)(T + PANEL_TOK - 1) / PANEL_TOK;
    return blocks * ((size_t)padded(n) * PANEL_TOK + sizeof(float) * 16 * (size_t)(padded(n) / 256));
}

size_t panel_bf16_bytes(int64_t n) { return (size_t)PANEL_ROWS * (size_t)n * 2; }

void panel_pack_bf16(const void *w, size_t rb, int rows, int64_t n, void *p) {
    const int64_t ns = n / 32;
    for (int r = 0; r < PANEL_ROWS; r++)
        for (int64_t st = 0; st < ns; st++) {
            uint8_t *d = (uint8_t *)p + (((size_t)(r / 16) * ns + st) * 16 + r % 16) * 64;
            if (r < rows) memcpy(d, (const uint8_t *)w + rb * (size_t)r + 64 * st, 64);
            else memset(d, 0, 64);
        }
}

#if defined(__x86_64__)
#include <immintrin.h>
#define BF_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")))
// a q4_0 / q5_0 / q8_0 block's 32 values (to_float's: the integer times d, one rounding) to bf16 at o
BF_TARGET static void block_bf16(int dtype, const void *blk, uint16_t *o) {
    __m512 lo, hi;
    if (dtype == DT_Q8_0) {
        const block_q8_0 *b = blk;
        const __m512 d = _mm512_set1_ps(f16_to_f32((uint16_t)(b->d[0] | b->d[1] << 8)));
        lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->qs))), d);
        hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16)))), d);
    } else {
        const uint8_t *qs = dtype == DT_Q4_0 ? ((const block_q4_0 *)blk)->qs : ((const block_q5_0 *)blk)->qs;
        const uint8_t *dd = dtype == DT_Q4_0 ? ((const block_q4_0 *)blk)->d : ((const block_q5_0 *)blk)->d;
        const __m512 d = _mm512_set1_ps(f16_to_f32((uint16_t)(dd[0] | dd[1] << 8)));
        const __m128i q = _mm_loadu_si128((const __m128i *)qs);
        __m512i l = _mm512_cvtepu8_epi32(_mm_and_si128(q, _mm_set1_epi8(15)));
        __m512i h = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(15)));
        __m512i off = _mm512_set1_epi32(8);
        if (dtype == DT_Q5_0) {
            const uint8_t *qh = ((const block_q5_0 *)blk)->qh;
            const uint32_t bits = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
            const __m512i sixteen = _mm512_set1_epi32(16);
            l = _mm512_mask_or_epi32(l, (__mmask16)(bits & 0xFFFF), l, sixteen);
            h = _mm512_mask_or_epi32(h, (__mmask16)(bits >> 16), h, sixteen);
            off = sixteen;
        }
        lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(l, off)), d);
        hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(h, off)), d);
    }
    _mm512_storeu_si512(o, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}
#endif

// Rows of 32-column blocks (q4_0, q5_0, q8_0, f16) decoded to bf16 in
// panel_pack_bf16's layout: to_float's values, rounded to nearest even.
void panel_decode_bf16(int dtype, const void *w, size_t rb, int rows, int64_t n, void *p) {
    const dtype_traits *t = dtype_get(dtype);
    const int64_t ns = n / 32;
    const int cw = t->blck > 32 ? t->blck : 32; // (columns decoded at a time)
#if defined(__x86_64__)
    const int fast = (dtype == DT_Q4_0 || dtype == DT_Q5_0 || dtype == DT_Q8_0) && cpu_has_avx512bf16();
#endif
    const size_t bs = dtype_row_size(dtype, cw);
    float v[256];
    for (int r = 0; r < PANEL_ROWS; r++)
        for (int64_t st = 0; st < ns; st++) {
            uint16_t *d = (uint16_t *)((uint8_t *)p + (((size_t)(r / 16) * ns + st) * 16 + r % 16) * 64);
            if (r >= rows) { memset(d, 0, 64); continue; }
#if defined(__x86_64__)
            if (fast) {
                block_bf16(dtype, (const char *)w + rb * (size_t)r + bs * (size_t)st, d);
                continue;
            }
#endif
            if ((32 * st) % cw == 0) t->to_float((const char *)w + rb * (size_t)r + bs * (size_t)(32 * st / cw), v, cw);
            for (int i = 0; i < 32; i++) d[i] = f32_to_bf16(v[(32 * st) % cw + i]);
        }
}

size_t panel_act_bf16_bytes(int T, int64_t n) {
    size_t pairs = (size_t)(T + 2 * PANEL_TOK - 1) / (2 * PANEL_TOK);
    return pairs * 2 * (size_t)(n / 32) * 1024;
}

int panel_enabled(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("INFER_AMX_PANEL");
        on = !(e && !strcmp(e, "0")) && cpu_has_amx_int8();
    }
    return on;
}

int panel_type_ok(int dtype, int64_t n) {
    const dtype_traits *t = dtype >= 0 ? dtype_get(dtype) : NULL;
    if (n <= 0 || n % 32 || !t || n % t->blck) return 0;
    return t->to_float && (dtype == DT_Q4_K || dtype == DT_Q6_K || dtype == DT_Q8_0 || dtype == DT_Q4_0 || dtype == DT_Q5_0 ||
                                dtype == DT_Q5_K || dtype == DT_BF16 || dtype == DT_F16);
}

int panel_bf16_type(int dtype) { return dtype == DT_BF16 || dtype == DT_Q4_0 || dtype == DT_Q5_0 || dtype == DT_Q8_0 || dtype == DT_F16; }

// 256 floats to int8 (q = rint(v / s), s = max|v| / 127) at q; returns s.
// (The scalar oracle in test_kernels computes the same: v * (1 / s), rounded to even.)
static float quant256_ref(const float *v, int8_t *q) {
    float m = 0;
    for (int k = 0; k < 256; k++) m = fmaxf(m, fabsf(v[k]));
    const float s = m / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
    for (int k = 0; k < 256; k++) q[k] = (int8_t)lrintf(v[k] * inv);
    return s;
}

// the row's 256-column block k (k < padded(n) / 256) as floats, zeros past column n
static void block_ref(int dtype, const void *row, int64_t n, int64_t k, float *v) {
    const dtype_traits *t = dtype_get(dtype);
    const int64_t c = n - 256 * k < 256 ? n - 256 * k : 256; // (a multiple of the type's block: panel_type_ok)
    t->to_float((const char *)row + dtype_row_size(dtype, 256 * k), v, c);
    for (int64_t i = c; i < 256; i++) v[i] = 0;
}

// The scalar path: panel tiles of rows [0, rows) through to_float.
// q4_K's requantization scale: the largest value in size its sub-blocks' scales and mins can make (d1 q - m1,
// single-rounded, at q = 0 or 15: the ends of the line) over 127 -- not the largest value there (at most one
// step of a sub-block larger), so that the decode can look the int8 values up in a table a sub-block
// (panel_amx.c's q4_K_int8). The weights' requantization error on 8B-shape Q4_K_M weights: 0.391% -> 0.417%
// of their RMS (q4_K's own error: ~7%).
float panel_q4_K_scale(const void *blk) {
    const block_q4_K *b = blk;
    const float d = f16_to_f32((uint16_t)(b->d[0] | b->d[1] << 8)), dmin = f16_to_f32((uint16_t)(b->dmin[0] | b->dmin[1] << 8));
    float m = 0;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        scale_min_k4(j, b->scales, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        m = fmaxf(m, fmaxf(fabsf(m1), fabsf(fmaf(d1, 15.0f, -m1))));
    }
    return m / 127.0f;
}

static void decode_ref(int dtype, const void *w, size_t rb, int rows, int64_t n, int8_t *tiles, float *ps) {
    const int64_t nb = padded(n) / 256;
    float v[256];
    int8_t q[256];
    for (int r = 0; r < PANEL_ROWS; r++)
        for (int64_t k = 0; k < nb; k++) {
            float s = 0;
            if (r < rows && dtype == DT_Q4_K) {
                const char *blk = (const char *)w + rb * (size_t)r + dtype_row_size(dtype, 256 * k);
                block_ref(dtype, (const char *)w + rb * (size_t)r, n, k, v);
                s = panel_q4_K_scale(blk);
                const float inv = s > 0 ? 1.0f / s : 0.0f;
                for (int c = 0; c < 256; c++) {
                    const long x = lrintf(v[c] * inv);
                    q[c] = (int8_t)(x > 127 ? 127 : x < -128 ? -128 : x);
                }
            } else if (r < rows) block_ref(dtype, (const char *)w + rb * (size_t)r, n, k, v), s = quant256_ref(v, q);
            else memset(q, 0, sizeof q);
            ps[((size_t)(r / 16) * nb + k) * 16 + r % 16] = s;
            for (int st = 0; st < 4; st++) // A tile (half, 4 k + st): row r % 16, 64 bytes
                memcpy(tiles + (((size_t)(r / 16) * (padded(n) / 64) + 4 * k + st) * 16 + r % 16) * 64, q + 64 * st, 64);
        }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define PN_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq")))

// 256 floats to int8 into four 64-byte rows of A tiles (row stride 1024: the
// next K=64 step's tile); returns the scale. The same numbers as quant256_ref.
// (The decoders below leave a super-block's 256 floats in 16 registers, f[i] = columns 16 i .. 16 i + 15.)
#define PN_INLINE PN_TARGET static inline __attribute__((always_inline))
PN_INLINE float quant256(const __m512 *f, int8_t *q) {
    __m512 m[4]; // (a tree: the 16 maxima are not one chain)
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) m[i] = _mm512_max_ps(_mm512_max_ps(_mm512_abs_ps(f[i]), _mm512_abs_ps(f[4 + i])), _mm512_max_ps(_mm512_abs_ps(f[8 + i]), _mm512_abs_ps(f[12 + i])));
    const float s = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3]))) / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
    const __m512 vi = _mm512_set1_ps(inv);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        __m512i x = _mm512_cvtps_epi32(_mm512_mul_ps(f[i], vi)); // (round to even, as lrintf)
        _mm_storeu_si128((__m128i *)(q + (size_t)(i / 4) * 1024 + 16 * (i % 4)), _mm512_cvtsepi32_epi8(x));
    }
    return s;
}

// q4_K's super-block straight to int8: a table a sub-block of its 16 values d1 q - m1 (q = 0 .. 15, one
// rounding each) requantized once under panel_q4_K_scale's scale, then each nibble looked up (vpshufb): a
// third of the work of the values' floats (the decode had been twice the tiles' time in a 128-token pass).
PN_INLINE float q4_K_int8(const block_q4_K *b, int8_t *q) {
    const float d = f16_to_f32((uint16_t)(b->d[0] | b->d[1] << 8)), dmin = f16_to_f32((uint16_t)(b->dmin[0] | b->dmin[1] << 8));
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 t[8], mx = _mm512_setzero_ps();
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(j, b->scales, &sc, &m);
        t[j] = _mm512_fmsub_ps(_mm512_set1_ps(d * (float)sc), iota, _mm512_set1_ps(dmin * (float)m));
        mx = _mm512_max_ps(mx, _mm512_abs_ps(t[j])); // (the largest at q = 0 or 15: panel_q4_K_scale's)
    }
    const float s = _mm512_reduce_max_ps(mx) / 127.0f;
    const __m512 vi = _mm512_set1_ps(s > 0 ? 1.0f / s : 0.0f);
    const __m256i m15 = _mm256_set1_epi8(15);
    for (int k = 0; k < 4; k++) { // (row k of the A tiles: columns 64 k .. 64 k + 63, sub-blocks 2 k and 2 k + 1)
        const __m256i x = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * k));
        const __m256i t0 = _mm256_broadcastsi128_si256(_mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(t[2 * k], vi))));
        const __m256i t1 = _mm256_broadcastsi128_si256(_mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(t[2 * k + 1], vi))));
        _mm256_storeu_si256((__m256i *)(q + (size_t)k * 1024), _mm256_shuffle_epi8(t0, _mm256_and_si256(x, m15)));
        _mm256_storeu_si256((__m256i *)(q + (size_t)k * 1024 + 32), _mm256_shuffle_epi8(t1, _mm256_and_si256(_mm256_srli_epi16(x, 4), m15)));
    }
    return s;
}

// q6_K's block as floats, as q6_K_to_float computes them (d * sc * q)
PN_INLINE void floats_q6_K(const block_q6_K *b, __m512 *f) {
    const float d = f16_to_f32((uint16_t)(b->d[0] | b->d[1] << 8));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        const int8_t *sc = b->scales + 8 * h;
        for (int g = 0; g < 2; g++) { // l in [16 g, 16 g + 16)
            const __m512i l0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + 16 * g)));
            const __m512i l1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + 32 + 16 * g)));
            const __m512i hb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + 16 * g)));
            const __m512i f15 = _mm512_set1_epi32(15), t = _mm512_set1_epi32(3), o = _mm512_set1_epi32(32);
            __m512i q[4];
            q[0] = _mm512_sub_epi32(_mm512_or_si512(_mm512_and_si512(l0, f15), _mm512_slli_epi32(_mm512_and_si512(hb, t), 4)), o);
            q[1] = _mm512_sub_epi32(_mm512_or_si512(_mm512_and_si512(l1, f15), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 2), t), 4)), o);
            q[2] = _mm512_sub_epi32(_mm512_or_si512(_mm512_srli_epi32(l0, 4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 4), t), 4)), o);
            q[3] = _mm512_sub_epi32(_mm512_or_si512(_mm512_srli_epi32(l1, 4), _mm512_slli_epi32(_mm512_srli_epi32(hb, 6), 4)), o);
            for (int j = 0; j < 4; j++)
                f[8 * h + 2 * j + g] = _mm512_mul_ps(_mm512_set1_ps(d * sc[g + 2 * j]), _mm512_cvtepi32_ps(q[j]));
        }
    }
}

// q8_0's 8 blocks as floats (q * d)
PN_INLINE void floats_q8_0(const block_q8_0 *b, __m512 *f) {
    for (int j = 0; j < 8; j++, b++) {
        const __m512 d = _mm512_set1_ps(f16_to_f32((uint16_t)(b->d[0] | b->d[1] << 8)));
        for (int h = 0; h < 2; h++)
            f[2 * j + h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16 * h)))), d);
    }
}

PN_TARGET static void decode_avx(int dtype, const void *w, size_t rb, int rows, int64_t n, int8_t *tiles, float *ps) {
    const int64_t nb = padded(n) / 256, ns = padded(n) / 64;
    float v[256] __attribute__((aligned(64)));
    const size_t bs = dtype_row_size(dtype, 256);
    for (int r = 0; r < PANEL_ROWS; r++) {
        const char *row = (const char *)w + rb * (size_t)r;
        int8_t *t = tiles + ((size_t)(r / 16) * ns * 16 + r % 16) * 64;
        float *s = ps + (size_t)(r / 16) * nb * 16 + r % 16;
        for (int64_t k = 0; k < nb; k++, t += 4 * 1024, s += 16) {
            if (r >= rows) {
                for (int st = 0; st < 4; st++) memset(t + 1024 * st, 0, 64);
                *s = 0;
                continue;
            }
            const void *blk = row + bs * (size_t)k;
            if (dtype == DT_Q4_K) {
                *s = q4_K_int8(blk, t);
                continue;
            }
            __m512 f[16];
            if (dtype == DT_Q6_K) floats_q6_K(blk, f);
            else if (dtype == DT_Q8_0 && 256 * k + 256 <= n) floats_q8_0(blk, f);
            else {
                if (256 * k + 256 > n) block_ref(dtype, row, n, k, v); // (the last, partial super-block)
                else dtype_get(dtype)->to_float(blk, v, 256);
                for (int i = 0; i < 16; i++) f[i] = _mm512_load_ps(v + 16 * i);
            }
            *s = quant256(f, t);
        }
    }
}

int panel_decode(int dtype, const void *w, size_t rb, int rows, int64_t n, void *p) {
    if (!panel_type_ok(dtype, n)) return -1;
    int8_t *tiles = p;
    float *ps = (float *)(tiles + tiles_of(n));
    if (cpu_has_amx_int8()) decode_avx(dtype, w, rb, rows, n, tiles, ps);
    else decode_ref(dtype, w, rb, rows, n, tiles, ps);
    return 0;
}

PN_TARGET static inline void transpose16(__m512 r[16]);

// token i of the blocks [b0, b1): its 256-column blocks to int8; a block's 16 tokens' 64-column steps
// then to that step's B tile (byte 64 k + 4 t + e), their 16 x 16 granules transposed in registers
// and stored as whole lines
PN_TARGET static void act_avx(const float *x, size_t xs, const int *tok, int T, int64_t n, int8_t *xb, float *xd, int b0, int b1) {
    const int64_t nb = padded(n) / 256, ns = padded(n) / 64;
    int8_t q[PANEL_TOK][256] __attribute__((aligned(64)));
    float part[256] __attribute__((aligned(64)));
    for (int b = b0; b < b1; b++) {
        int8_t *base = xb + (size_t)b * ns * 1024;
        float *d = xd + (size_t)b * nb * 16;
        for (int64_t k = 0; k < nb; k++, d += 16) {
            for (int t = 0; t < PANEL_TOK; t++) {
                const int i = PANEL_TOK * b + t;
                float s = 0;
                if (i < T) {
                    const float *v = x + (size_t)(tok ? tok[i] : i) * xs + 256 * k;
                    if (256 * k + 256 > n) { // (the last, partial super-block: zeros past n)
                        memcpy(part, v, sizeof(float) * (size_t)(n - 256 * k));
                        memset(part + (n - 256 * k), 0, sizeof(float) * (size_t)(256 * k + 256 - n));
                        v = part;
                    }
                    __m512 m = _mm512_setzero_ps();
                    for (int c = 0; c < 256; c += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(v + c)));
                    s = _mm512_reduce_max_ps(m) / 127.0f;
                    const __m512 vi = _mm512_set1_ps(s > 0 ? 1.0f / s : 0.0f);
                    for (int c = 0; c < 256; c += 16)
                        _mm_store_si128((__m128i *)(q[t] + c), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + c), vi))));
                } else
                    memset(q[t], 0, sizeof q[t]);
                d[t] = s;
            }
            for (int st = 0; st < 4; st++) { // (token t's 16 granules of this step: row t; transposed, granule g's 16 tokens)
                __m512 r[16];
                for (int t = 0; t < PANEL_TOK; t++) r[t] = _mm512_castsi512_ps(_mm512_load_si512(q[t] + 64 * st));
                transpose16(r);
                int8_t *tile = base + (size_t)(4 * k + st) * 1024;
                for (int g = 0; g < 16; g++) _mm512_storeu_si512(tile + 64 * g, _mm512_castps_si512(r[g]));
            }
        }
    }
}

void panel_act(const float *x, size_t xs, const int *tok, int T, int64_t n, void *xb, int b0, int b1) {
    const size_t blocks = (size_t)(T + PANEL_TOK - 1) / PANEL_TOK;
    act_avx(x, xs, tok, T, n, xb, (float *)((int8_t *)xb + blocks * (size_t)padded(n) * PANEL_TOK), b0, b1);
}

PN_TARGET void panel_run_k(const void *p, int64_t n, const void *xbv, int T, int blk, int64_t k0, int64_t k1, float *accv) {
    const int64_t nb = padded(n) / 256, ns = padded(n) / 64;
    const int8_t *a0 = p, *a1 = a0 + (size_t)ns * 1024;
    const float *s0 = (const float *)(a0 + tiles_of(n)), *s1 = s0 + (size_t)nb * 16;
    const size_t blocks = (size_t)(T + PANEL_TOK - 1) / PANEL_TOK;
    const int8_t *b = (const int8_t *)xbv + (size_t)blk * ns * 1024;
    const float *xd = (const float *)((const int8_t *)xbv + blocks * (size_t)padded(n) * PANEL_TOK) + (size_t)blk * nb * 16;
    float (*acc)[16] = (float (*)[16])accv;
    int32_t cb[2][256] __attribute__((aligned(64)));
    const long st64 = 64;
    amx_configure_panel();
    for (int64_t k = k0; k <= k1; k++) {
        if (k < k1) {
            if (k & 1) __asm__ volatile("tilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
            else __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1" ::: "memory");
            for (int st = 0; st < 4; st++) {
                const size_t o = (size_t)(4 * k + st) * 1024;
                __asm__ volatile("tileloadd (%0,%3,1), %%tmm6\n\t"
                                 "tileloadd (%1,%3,1), %%tmm4\n\t"
                                 "tileloadd (%2,%3,1), %%tmm5" ::"r"(b + o), "r"(a0 + o), "r"(a1 + o), "r"(st64)
                                 : "memory");
                if (k & 1) __asm__ volatile("tdpbssd %%tmm6, %%tmm4, %%tmm2\n\ttdpbssd %%tmm6, %%tmm5, %%tmm3" ::: "memory");
                else __asm__ volatile("tdpbssd %%tmm6, %%tmm4, %%tmm0\n\ttdpbssd %%tmm6, %%tmm5, %%tmm1" ::: "memory");
            }
        }
        if (k > k0) { // super-block k - 1 (its products had this one's issue to finish): C[row][token] to floats
            const int64_t j = k - 1;
            if (j & 1) __asm__ volatile("tilestored %%tmm2, (%0,%2,1)\n\ttilestored %%tmm3, (%1,%2,1)" ::"r"(cb[0]), "r"(cb[1]), "r"(st64) : "memory");
            else __asm__ volatile("tilestored %%tmm0, (%0,%2,1)\n\ttilestored %%tmm1, (%1,%2,1)" ::"r"(cb[0]), "r"(cb[1]), "r"(st64) : "memory");
            const __m512 d = _mm512_loadu_ps(xd + 16 * j);
            for (int r = 0; r < 16; r++) {
                __m512 y0 = _mm512_load_ps(acc[r]), y1 = _mm512_load_ps(acc[16 + r]);
                y0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[0] + 16 * r)), _mm512_mul_ps(_mm512_set1_ps(s0[16 * j + r]), d), y0);
                y1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[1] + 16 * r)), _mm512_mul_ps(_mm512_set1_ps(s1[16 * j + r]), d), y1);
                _mm512_store_ps(acc[r], y0), _mm512_store_ps(acc[16 + r], y1);
            }
        }
    }
}

void panel_run(const void *p, int64_t n, const void *xbv, int T, int blk, const int *tok, float *y, size_t ldy, int rows,
               const float *bias) {
    float acc[PANEL_ROWS * 16] __attribute__((aligned(64)));
    memset(acc, 0, sizeof acc);
    panel_run_k(p, n, xbv, T, blk, 0, padded(n) / 256, acc);
    panel_store(acc, T, blk, tok, y, ldy, rows, bias);
}

void panel_fence(void) { _mm_sfence(); }

// 16 x 16 floats transposed in registers: r[i][j] -> r[j][i]
PN_TARGET static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int j = 0; j < 8; j++) t[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]), t[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
    for (int i = 0; i < 4; i++) { // (u[4 i + c], lane L: rows 4 i .. 4 i + 3 of column 4 L + c)
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
        const __m512 w0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44), w1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
        t[c] = _mm512_shuffle_f32x4(v0, w0, 0x88), t[4 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
        t[8 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88), t[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

// acc[row * 16 + token] -> y[token][row] (+ bias): each half's 16 x 16 transposed, a token's rows stored at once
PN_TARGET void panel_store(const float *acc, int T, int blk, const int *tok, float *y, size_t ldy, int rows, const float *bias) {
    const int nt = T - PANEL_TOK * blk < PANEL_TOK ? T - PANEL_TOK * blk : PANEL_TOK;
    for (int h = 0; h < 2 && 16 * h < rows; h++) {
        const int nr = rows - 16 * h < 16 ? rows - 16 * h : 16;
        const __mmask16 m = (__mmask16)((1u << nr) - 1);
        const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * h) : _mm512_setzero_ps();
        __m512 r[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_load_ps(acc + 16 * (16 * h + i));
        transpose16(r);
        for (int t = 0; t < nt; t++) {
            const int i = PANEL_TOK * blk + t;
            float *d = y + (size_t)(tok ? tok[i] : i) * ldy + 16 * h;
            const __m512 v = bias ? _mm512_add_ps(r[t], b) : r[t];
            // (a whole aligned line: streamed past the caches, no read for ownership; panel_fence before others read it)
            if (nr == 16 && !((uintptr_t)d % 64)) _mm512_stream_ps(d, v);
            else _mm512_mask_storeu_ps(d, m, v);
        }
    }
}

// tokens of 16-token blocks [b0, b1) to bf16 B tiles (rounded to nearest even, as f32_to_bf16): a K step's 16
// tokens' 16 column pairs transposed in registers, each pair's 16 tokens one whole line of the tile
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16"))) static void act_bf16_avx(const float *x, size_t xs, const int *tok, int T, int64_t n, uint16_t *xb, int b0, int b1) {
    const int64_t ns = n / 32;
    for (int b = b0; b < b1; b++) {
        uint16_t *base = xb + (size_t)b * ns * 512;
        const float *v[PANEL_TOK];
        for (int t = 0; t < PANEL_TOK; t++) {
            const int i = PANEL_TOK * b + t;
            v[t] = i < T ? x + (size_t)(tok ? tok[i] : i) * xs : NULL;
        }
        for (int64_t st = 0; st < ns; st++) {
            __m512 r[16];
            for (int t = 0; t < PANEL_TOK; t++)
                r[t] = v[t] ? (__m512)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(v[t] + 32 * st + 16), _mm512_loadu_ps(v[t] + 32 * st)) : _mm512_setzero_ps();
            transpose16(r);
            for (int g = 0; g < 16; g++) _mm512_storeu_ps((float *)(base + (size_t)st * 512 + 32 * g), r[g]);
        }
    }
}

void panel_act_bf16(const float *x, size_t xs, const int *tok, int T, int64_t n, void *xb, int b0, int b1) {
    act_bf16_avx(x, xs, tok, T, n, xb, b0, b1);
}

// 32 rows x 32 tokens (C tiles 2 tb + h: token block tb, rows 16 h ..): the K steps [st0, st1) added to acc,
// loaded into the C tiles and stored back (f32 both ways: any split gives the same bits)
PN_TARGET void panel_run_bf16_k(const void *p, int64_t n, const void *xbv, int pair, int64_t st0, int64_t st1, float *acc) {
    const int64_t ns = n / 32;
    const uint8_t *a0 = p, *a1 = a0 + (size_t)ns * 1024;
    const uint8_t *x0 = (const uint8_t *)xbv + (size_t)(2 * pair) * ns * 1024, *x1 = x0 + (size_t)ns * 1024;
    const long s64 = 64;
    amx_configure_panel();
    __asm__ volatile("tileloadd (%0,%4,1), %%tmm0\n\ttileloadd (%1,%4,1), %%tmm1\n\t"
                     "tileloadd (%2,%4,1), %%tmm2\n\ttileloadd (%3,%4,1), %%tmm3" ::"r"(acc), "r"(acc + 256), "r"(acc + 512), "r"(acc + 768), "r"(s64)
                     : "memory");
    for (int64_t st = st0; st < st1; st++) {
        __asm__ volatile("tileloadd (%0,%4,1), %%tmm4\n\t"
                         "tileloadd (%2,%4,1), %%tmm6\n\t"
                         "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                         "tileloadd (%1,%4,1), %%tmm5\n\t"
                         "tdpbf16ps %%tmm6, %%tmm5, %%tmm1\n\t"
                         "tileloadd (%3,%4,1), %%tmm7\n\t"
                         "tdpbf16ps %%tmm7, %%tmm4, %%tmm2\n\t"
                         "tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::"r"(a0 + 1024 * st), "r"(a1 + 1024 * st), "r"(x0 + 1024 * st), "r"(x1 + 1024 * st),
                         "r"(s64)
                         : "memory");
    }
    __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                     "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)" ::"r"(acc), "r"(acc + 256), "r"(acc + 512), "r"(acc + 768), "r"(s64)
                     : "memory");
}

void panel_store_bf16(const float *acc, int rows, int T, int pair, const int *tok, float *y, size_t ldy, const float *bias) {
    for (int tb = 0; tb < 2 && PANEL_TOK * (2 * pair + tb) < T; tb++) // (token block tb's C tiles: panel_store's layout)
        panel_store(acc + 512 * tb, T, 2 * pair + tb, tok, y, ldy, rows, bias);
}

void panel_run_bf16(const void *p, int rows, int64_t n, const void *xbv, int T, int pair, const int *tok, float *y, size_t ldy,
                    const float *bias) {
    float acc[1024] __attribute__((aligned(64)));
    memset(acc, 0, sizeof acc);
    panel_run_bf16_k(p, n, xbv, pair, 0, n / 32, acc);
    panel_store_bf16(acc, rows, T, pair, tok, y, ldy, bias);
}

#else
void panel_act_bf16(const float *x, size_t xs, const int *tok, int T, int64_t n, void *xb, int b0, int b1) {
    (void)x, (void)xs, (void)tok, (void)T, (void)n, (void)xb, (void)b0, (void)b1;
}
void panel_run_bf16(const void *p, int rows, int64_t n, const void *xb, int T, int pair, const int *tok, float *y, size_t ldy,
                    const float *bias) {
    panel_run_bf16_ref(p, rows, n, xb, T, pair, tok, y, ldy, bias);
}
void panel_run_bf16_k(const void *p, int64_t n, const void *xb, int pair, int64_t st0, int64_t st1, float *acc) {
    (void)p, (void)n, (void)xb, (void)pair, (void)st0, (void)st1, (void)acc; // (no AMX: panel_enabled is 0)
}
void panel_store_bf16(const float *acc, int rows, int T, int pair, const int *tok, float *y, size_t ldy, const float *bias) {
    (void)acc, (void)rows, (void)T, (void)pair, (void)tok, (void)y, (void)ldy, (void)bias;
}
int panel_decode(int dtype, const void *w, size_t rb, int rows, int64_t n, void *p) {
    if (!panel_type_ok(dtype, n)) return -1;
    decode_ref(dtype, w, rb, rows, n, p, (float *)((int8_t *)p + tiles_of(n)));
    return 0;
}
void panel_act(const float *x, size_t xs, const int *tok, int T, int64_t n, void *xb, int b0, int b1) {
    (void)x, (void)xs, (void)tok, (void)T, (void)n, (void)xb, (void)b0, (void)b1; // (no AMX: panel_enabled is 0)
}
void panel_run(const void *p, int64_t n, const void *xb, int T, int blk, const int *tok, float *y, size_t ldy, int rows, const float *bias) {
    panel_run_ref(p, n, xb, T, blk, tok, y, ldy, rows, bias);
}
void panel_run_k(const void *p, int64_t n, const void *xb, int T, int blk, int64_t k0, int64_t k1, float *acc) {
    (void)p, (void)n, (void)xb, (void)T, (void)blk, (void)k0, (void)k1, (void)acc; // (no AMX: panel_enabled is 0)
}
void panel_fence(void) {}
void panel_store(const float *acc, int T, int blk, const int *tok, float *y, size_t ldy, int rows, const float *bias) {
    for (int t = 0; t < PANEL_TOK && PANEL_TOK * blk + t < T; t++) {
        const int i = PANEL_TOK * blk + t;
        float *yt = y + (size_t)(tok ? tok[i] : i) * ldy;
        for (int r = 0; r < rows; r++) yt[r] = acc[16 * r + t] + (bias ? bias[r] : 0.0f);
    }
}
#endif

void panel_run_ref(const void *p, int64_t n, const void *xbv, int T, int blk, const int *tok, float *y, size_t ldy, int rows,
                   const float *bias) {
    const int64_t nb = padded(n) / 256, ns = padded(n) / 64;
    const int8_t *tiles = p;
    const float *ps = (const float *)(tiles + tiles_of(n));
    const size_t blocks = (size_t)(T + PANEL_TOK - 1) / PANEL_TOK;
    const int8_t *b = (const int8_t *)xbv + (size_t)blk * ns * 1024;
    const float *xd = (const float *)((const int8_t *)xbv + blocks * (size_t)padded(n) * PANEL_TOK) + (size_t)blk * nb * 16;
    for (int t = 0; t < PANEL_TOK && PANEL_TOK * blk + t < T; t++) {
        const int i = PANEL_TOK * blk + t;
        float *yt = y + (size_t)(tok ? tok[i] : i) * ldy;
        for (int r = 0; r < rows; r++) {
            float acc = 0;
            for (int64_t k = 0; k < nb; k++) {
                int32_t sum = 0;
                for (int st = 0; st < 4; st++) {
                    const int8_t *a = tiles + (((size_t)(r / 16) * ns + 4 * k + st) * 16 + r % 16) * 64, *x = b + (size_t)(4 * k + st) * 1024;
                    for (int c = 0; c < 64; c++) sum += a[c] * x[64 * (c / 4) + 4 * t + c % 4];
                }
                acc = fmaf((float)sum, ps[((size_t)(r / 16) * nb + k) * 16 + r % 16] * xd[16 * k + t], acc);
            }
            yt[r] = acc + (bias ? bias[r] : 0.0f);
        }
    }
}

void panel_run_bf16_ref(const void *p, int rows, int64_t n, const void *xbv, int T, int pair, const int *tok, float *y, size_t ldy,
                        const float *bias) {
    const int64_t ns = n / 32;
    for (int t = 0; t < 2 * PANEL_TOK && 2 * PANEL_TOK * pair + t < T; t++) {
        const int i = 2 * PANEL_TOK * pair + t;
        const uint16_t *xb = (const uint16_t *)xbv + (size_t)(2 * pair + t / 16) * ns * 512;
        float *yt = y + (size_t)(tok ? tok[i] : i) * ldy;
        for (int r = 0; r < rows; r++) {
            const uint16_t *wr = (const uint16_t *)p + ((size_t)(r / 16) * ns * 16 + r % 16) * 32; // (A tile rows, 512 apart a K step)
            float acc = 0;
            for (int64_t c = 0; c < n; c++) acc = fmaf(bf16_to_f32(wr[(size_t)(c / 32) * 512 + c % 32]), bf16_to_f32(xb[(size_t)(c / 32) * 512 + 32 * ((c % 32) / 2) + 2 * (t % 16) + c % 2]), acc);
            yt[r] = acc + (bias ? bias[r] : 0.0f);
        }
    }
}
