// bf16 weights against bf16 activations: ggml's numerics for the bf16
// weights of a GGUF file. ggml's vec_dot_type for GGML_TYPE_BF16 is bf16, so
// llama.cpp rounds the activations to bf16 (nearest even) before every
// product and sums the exact products in f32; on a CPU with AVX512_BF16 one
// vdpbf16ps does 32 of them (16 lanes of pairs), twice the multiply-adds of f32 FMA. The bf16
// weights of a safetensors checkpoint keep f32 activations (exact against
// transformers).
//
// The scalar oracle sums in double (ggml's generic ggml_vec_dot_bf16). The
// SIMD kernels (AVX512_BF16, and an AVX2 one for CPUs without it) keep the
// same accumulators for every (row, token) in every tile shape, so a batch
// equals one-at-a-time calls bit for bit.
#include "tensor/vecdot_x86.h"
#include "base/cpu.h"

void act_quant_bf16_ref(const float *x, void *y, int n) {
    uint16_t *o = y;
    for (int i = 0; i < n; i++) o[i] = f32_to_bf16(x[i]);
}

float vecdot_bf16_bf16(const void *w, const void *x, int n) {
    const uint8_t *a = w, *b = x;
    double s = 0;
    for (int i = 0; i < n; i++) {
        uint16_t u, v;
        memcpy(&u, a + 2 * i, 2), memcpy(&v, b + 2 * i, 2);
        s += (double)(bf16_to_f32(u) * bf16_to_f32(v)); // (the product of two bf16 is exact in f32)
    }
    return (float)s;
}

// f32 -> bf16 as f32_to_bf16 (nearest even, NaN kept quiet), 8 at a time
AVX2 void act_quant_bf16_avx2(const float *x, void *y, int n) {
    uint16_t *o = y;
    int i = 0;
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000), one = _mm256_set1_epi32(1);
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        __m256i v = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), q, nan);
        v = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
        _mm_storeu_si128((__m128i *)(o + i), _mm256_castsi256_si128(v));
    }
    for (; i < n; i++) o[i] = f32_to_bf16(x[i]);
}

// ---------------------------------------------------------------------------
// AVX512_BF16

#define BF16X __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Each (row, token) sums 32 elements a step into one accumulator of 16
// lanes, the tail (fewer than 32) by a masked load, and ends as hsum8(low
// half + high half). The prefill tiles hold it in a 512-bit register; the
// decode kernel (4 rows, 1 token) as two 256-bit halves, the same lanes and
// the same operations: a GGUF file aligns its tensors to 32 bytes only, and
// 512-bit loads of rows streamed from memory that split over two cache lines
// made decode 20% slower on this Zen 4, while from the cache the 512-bit
// vdpbf16ps does twice the products a cycle (measured: one instruction per
// ~1.8 cycles at either width).
BF16X static inline __m512bh ld_bh(const uint8_t *p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }
BF16X static inline __m512bh ld_bh_full(const uint8_t *p) { return (__m512bh)_mm512_loadu_si512(p); }
BF16X static inline __m256bh ld_bh8(const uint8_t *p, __mmask16 m) { return (__m256bh)_mm256_maskz_loadu_epi16(m, p); }
BF16X static inline __m256bh ld_bh8_full(const uint8_t *p) { return (__m256bh)_mm256_loadu_si256((const __m256i *)p); }

BF16X static inline float bx_final(__m512 A) { return hsum8(_mm256_add_ps(_mm512_castps512_ps256(A), _mm512_extractf32x8_ps(A, 1))); }

// RW weight rows (ws bytes apart) by RT tokens (xs bytes apart), 512-bit
#define BF_TILE(name, RW, RT)                                                                                          \
    BF16X static void name(const void *vw, size_t ws, const void *vx, size_t xs, int n, float *s) {                  \
        const uint8_t *w = vw, *x = vx;                                                                                \
        __m512 A[RW * RT];                                                                                             \
        _Pragma("GCC unroll 16") for (int j = 0; j < RW * RT; j++) A[j] = _mm512_setzero_ps();                       \
        int i = 0;                                                                                                     \
        for (; i + 32 <= n; i += 32) {                                                                                 \
            __m512bh xv[RT];                                                                                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) xv[r] = ld_bh_full(x + xs * r + 2 * i);              \
            _Pragma("GCC unroll 4") for (int k = 0; k < RW; k++) {                                                     \
                __m512bh wv = ld_bh_full(w + ws * k + 2 * i);                                                          \
                _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) A[k * RT + r] = _mm512_dpbf16_ps(A[k * RT + r], wv, xv[r]); \
            }                                                                                                          \
        }                                                                                                              \
        if (i < n) {                                                                                                   \
            __mmask32 m = (1u << (n - i)) - 1;                                                                         \
            for (int k = 0; k < RW; k++)                                                                               \
                for (int r = 0; r < RT; r++)                                                                           \
                    A[k * RT + r] = _mm512_dpbf16_ps(A[k * RT + r], ld_bh(w + ws * k + 2 * i, m), ld_bh(x + xs * r + 2 * i, m)); \
        }                                                                                                              \
        for (int j = 0; j < RW * RT; j++) s[j] = bx_final(A[j]);                                                       \
    }

// 4 rows, 1 token, in 256-bit halves (A = a0|a1)
BF16X static void bx_dotr(const void *vw, size_t ws, const void *vx, int n, float *s) {
    const uint8_t *w = vw, *x = vx;
    __m256 a0[4], a1[4];
    for (int k = 0; k < 4; k++) a0[k] = a1[k] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256bh x0 = ld_bh8_full(x + 2 * i), x1 = ld_bh8_full(x + 2 * i + 32);
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const uint8_t *wk = w + ws * k + 2 * i;
            _mm_prefetch((const char *)wk + PREFETCH_AHEAD, _MM_HINT_T0); // (NTA: 13 GB/s against 21 here)
            a0[k] = _mm256_dpbf16_ps(a0[k], ld_bh8_full(wk), x0);
            a1[k] = _mm256_dpbf16_ps(a1[k], ld_bh8_full(wk + 32), x1);
        }
    }
    if (i < n) {
        uint32_t m = (1u << (n - i)) - 1;
        __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
        for (int k = 0; k < 4; k++) {
            const uint8_t *wk = w + ws * k + 2 * i;
            a0[k] = _mm256_dpbf16_ps(a0[k], ld_bh8(wk, m0), ld_bh8(x + 2 * i, m0));
            a1[k] = _mm256_dpbf16_ps(a1[k], ld_bh8(wk + 32, m1), ld_bh8(x + 2 * i + 32, m1));
        }
    }
    for (int k = 0; k < 4; k++) s[k] = hsum8(_mm256_add_ps(a0[k], a1[k]));
}

BF_TILE(bx_tile11, 1, 1)
BF_TILE(bx_tile14, 1, 4)
BF_TILE(bx_tile24, 2, 4)
BF_TILE(bx_tile44, 4, 4)

BF16X static float bx_dot(const void *w, const void *x, int n) { float s; bx_tile11(w, 0, x, 0, n, &s); return s; }
BF16X static void bx_dot4(const void *w, const void *x, size_t st, int n, float *s) { bx_tile14(w, 0, x, st, n, s); }

const vecdot_kernel vecdot_avx512bf16_bf16 = {
    .act_type = DT_BF16, .dot = bx_dot, .quant = act_quant_bf16_avx2, .dot4 = bx_dot4, .dotr = bx_dotr, .tile24 = bx_tile24,
    .tile44 = bx_tile44,
};

// ---------------------------------------------------------------------------
// AVX2: both sides widened to f32 (a shift), 16 elements a step, the first 8
// into acc0 and the second into acc1; the tail in order after the hsum.

AVX2 static inline __m256 bf8(const uint8_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

#define BF_TILE2(name, RW, RT)                                                                                         \
    AVX2 static void name(const void *vw, size_t ws, const void *vx, size_t xs, int n, float *s) {                   \
        const uint8_t *w = vw, *x = vx;                                                                                \
        __m256 a0[RW * RT], a1[RW * RT];                                                                               \
        _Pragma("GCC unroll 8") for (int j = 0; j < RW * RT; j++) a0[j] = a1[j] = _mm256_setzero_ps();               \
        int i = 0;                                                                                                     \
        for (; i + 16 <= n; i += 16) {                                                                                 \
            __m256 x0[RT], x1[RT];                                                                                     \
            _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) x0[r] = bf8(x + xs * r + 2 * i), x1[r] = bf8(x + xs * r + 2 * i + 16); \
            _Pragma("GCC unroll 4") for (int k = 0; k < RW; k++) {                                                     \
                const uint8_t *wk = w + ws * k + 2 * i;                                                                \
                if (RT == 1 && i % 32 == 0) _mm_prefetch((const char *)wk + PREFETCH_AHEAD, _MM_HINT_T0);            \
                __m256 w0 = bf8(wk), w1 = bf8(wk + 16);                                                                \
                _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) {                                                 \
                    a0[k * RT + r] = _mm256_fmadd_ps(w0, x0[r], a0[k * RT + r]);                                       \
                    a1[k * RT + r] = _mm256_fmadd_ps(w1, x1[r], a1[k * RT + r]);                                       \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int k = 0; k < RW; k++)                                                                                   \
            for (int r = 0; r < RT; r++) {                                                                             \
                const uint8_t *wk = w + ws * k, *xr = x + xs * r;                                                      \
                float v = hsum8(_mm256_add_ps(a0[k * RT + r], a1[k * RT + r]));                                       \
                for (int j = i; j < n; j++) {                                                                          \
                    uint16_t p, q;                                                                                     \
                    memcpy(&p, wk + 2 * j, 2), memcpy(&q, xr + 2 * j, 2);                                              \
                    v += bf16_to_f32(p) * bf16_to_f32(q);                                                              \
                }                                                                                                      \
                s[k * RT + r] = v;                                                                                     \
            }                                                                                                          \
    }

BF_TILE2(b2_tile11, 1, 1)
BF_TILE2(b2_tile14, 1, 4)
BF_TILE2(b2_tile41, 4, 1)
BF_TILE2(b2_tile24, 2, 4)

AVX2 static float b2_dot(const void *w, const void *x, int n) { float s; b2_tile11(w, 0, x, 0, n, &s); return s; }
AVX2 static void b2_dot4(const void *w, const void *x, size_t st, int n, float *s) { b2_tile14(w, 0, x, st, n, s); }
AVX2 static void b2_dotr(const void *w, size_t ws, const void *x, int n, float *s) { b2_tile41(w, ws, x, 0, n, s); }

const vecdot_kernel vecdot_avx2_bf16_bf16 = {
    .act_type = DT_BF16, .dot = b2_dot, .quant = act_quant_bf16_avx2, .dot4 = b2_dot4, .dotr = b2_dotr, .tile24 = b2_tile24,
};

const vecdot_kernel vecdot_ref_bf16_bf16 = {.act_type = DT_BF16, .dot = vecdot_bf16_bf16, .quant = act_quant_bf16_ref};
