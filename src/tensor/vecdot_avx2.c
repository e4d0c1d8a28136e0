// AVX2 + FMA + F16C row kernels. Same arithmetic as the scalar references in
// vecdot.c (integer sums per block, then one float multiply-add per block),
// in the style of ggml's x86 kernels: nibbles unpacked with masks, u8 x s8
// products with maddubs, pairs summed with madd.
#include "tensor/vecdot_x86.h"


// ---------------------------------------------------------------------------
// float weights x f32 activations

AVX2 static inline __m256 bf16x8(const uint8_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
AVX2 static inline __m256 ld8_f32(const uint8_t *w, int i) { return _mm256_loadu_ps((const float *)(w + 4 * i)); }
AVX2 static inline __m256 ld8_f16(const uint8_t *w, int i) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))); }
AVX2 static inline __m256 ld8_bf16(const uint8_t *w, int i) { return bf16x8(w + 2 * i); }
static inline float tail_f32(const uint8_t *w, int j) { return ld_f32(w + 4 * j); }
AVX2 static inline float tail_f16(const uint8_t *w, int j) { return ld_f16(w + 2 * j); }
static inline float tail_bf16(const uint8_t *w, int j) { uint16_t h; memcpy(&h, w + 2 * j, 2); return bf16_to_f32(h); }

// Float weights against f32 activations: RW weight rows (ws bytes apart) by
// RT tokens (xs bytes apart), one accumulator per (row, token) over 8
// elements at a time, then hsum8 and the tail in order. Every pair sees the
// same operations in every tile shape, so a batch equals one-at-a-time calls
// bit for bit. Decode uses 4 rows x 1 token, prefill 2 rows x 4 tokens.
#define FLOAT_TILE(name, load8, tail, RW, RT, bytes)                                                 \
    AVX2 static void name(const void *vw, size_t ws, const void *vx, size_t xs, int n, float *s) {   \
        const uint8_t *w = vw;                                                                        \
        __m256 acc[RW * RT];                                                                          \
        _Pragma("GCC unroll 8") for (int a = 0; a < RW * RT; a++) acc[a] = _mm256_setzero_ps();      \
        int i = 0;                                                                                    \
        for (; i + 8 <= n; i += 8) {                                                                  \
            __m256 xv[RT];                                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) {                                    \
                xv[r] = _mm256_loadu_ps((const float *)((const char *)vx + xs * r) + i);              \
                if (RW > 1) __asm__("" : "+x"(xv[r])); /* keep it in a register for the RW rows */    \
            }                                                                                         \
            _Pragma("GCC unroll 4") for (int k = 0; k < RW; k++) {                                    \
                if (RT == 1 && i % 16 == 0) _mm_prefetch((const char *)w + ws * k + bytes * i + PREFETCH_AHEAD, PREFETCH_HINT); \
                __m256 wv = load8(w + ws * k, i);                                                     \
                _Pragma("GCC unroll 4") for (int r = 0; r < RT; r++) acc[k * RT + r] = _mm256_fmadd_ps(wv, xv[r], acc[k * RT + r]); \
            }                                                                                         \
        }                                                                                             \
        for (int k = 0; k < RW; k++)                                                                  \
            for (int r = 0; r < RT; r++) {                                                            \
                const float *x = (const float *)((const char *)vx + xs * r);                          \
                float v = hsum8(acc[k * RT + r]);                                                     \
                for (int j = i; j < n; j++) v += tail(w + ws * k, j) * x[j];                          \
                s[k * RT + r] = v;                                                                    \
            }                                                                                         \
    }

#define FLOAT_KERNELS(t, bytes)                                                                                  \
    FLOAT_TILE(tile1_##t, ld8_##t, tail_##t, 1, 1, bytes)                                                        \
    FLOAT_TILE(tile14_##t, ld8_##t, tail_##t, 1, 4, bytes)                                                       \
    FLOAT_TILE(tile41_##t, ld8_##t, tail_##t, 4, 1, bytes)                                                       \
    FLOAT_TILE(tile24_##t, ld8_##t, tail_##t, 2, 4, bytes)                                                       \
    AVX2 static float dot_##t(const void *w, const void *x, int n) { float s; tile1_##t(w, 0, x, 0, n, &s); return s; } \
    AVX2 static void dot4_##t(const void *w, const void *x, size_t st, int n, float *s) { tile14_##t(w, 0, x, st, n, s); } \
    AVX2 static void dotr_##t(const void *w, size_t ws, const void *x, int n, float *s) { tile41_##t(w, ws, x, 0, n, s); }
FLOAT_KERNELS(f32, 4)
FLOAT_KERNELS(f16, 2)
FLOAT_KERNELS(bf16, 2)

#define Q32_TARGET AVX2
#define Q32_VNNI 0
#define Q32_NAME(name) name
#include "tensor/vecdot_q32.h"


// ---------------------------------------------------------------------------
// k-quants x q8_K

static inline void scales_mins_k4(const uint8_t *q, int16_t *sc, int *m) {
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        if (j < 4) { sc[j] = q[j] & 63; m[j] = q[j + 4] & 63; }
        else { sc[j] = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4); m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
    }
}

static inline int mins_dot(const uint8_t *bsums, const int *m) {
    int s = 0;
    for (int g = 0; g < 8; g++) {
        int16_t a, b;
        memcpy(&a, bsums + 4 * g, 2);
        memcpy(&b, bsums + 4 * g + 2, 2);
        s += m[g] * (a + b);
    }
    return s;
}

#include "tensor/vecdot_kq.h"

// q4_K's 1-token kernel for the VNNI row (its VNNI build measured slower)
AVX2 float dot_q4_K_avx2(const void *w, const void *x, int n) { return dot_q4_K(w, x, n); }


AVX2 static float dot_q5_K(const void *vw, const void *vx, int n) {
    const block_q5_K *w = vw;
    const block_q8_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(15), b16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0;
    for (int i = 0; i < n / QK_K; i++) {
        _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, PREFETCH_HINT);
        int16_t sc[8];
        int m[8];
        scales_mins_k4(w[i].scales, sc, m);
        float dy = ld_f32(x[i].d);
        accm += dy * ld_f16(w[i].dmin) * mins_dot(x[i].bsums, m);
        const uint8_t *q = w[i].qs;
        const int8_t *y = x[i].qs;
        __m256i hb = _mm256_loadu_si256((const __m256i *)w[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q += 32, y += 64) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)q);
            __m256i ml = _mm256_set1_epi8((char)(1 << (2 * j))), mh = _mm256_set1_epi8((char)(1 << (2 * j + 1)));
            __m256i hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, ml), ml), b16);
            __m256i hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, mh), mh), b16);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, m4), hl);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh);
            __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
            __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * ld_f16(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc) - accm;
}


// q2_K and q3_K: 16 groups of 16 with 2 low bits per element, element 128h +
// 32k + l in bits 2k..2k+1 of qs[32h + l]. One 32-byte load per half gives
// its four 32-element chunks by a shift and a mask; chunk (h, k) spans groups
// 8h + 2k (the low 128-bit lane) and 8h + 2k + 1 (the high lane), so its
// scales come from one in-lane shuffle of the half's 8 scales (sch[h], in
// both lanes). Per token: maddubs of the chunk with the activations, madd
// with the scales, and one float multiply-add per super-block.

// shuffle picking 16-bit lane e into every lane of the low half and e + 1
// into every lane of the high half
AVX2 static inline __m256i pick16x2(int e) {
    return _mm256_set_m128i(_mm_set1_epi16((short)((2 * e + 3) << 8 | (2 * e + 2))),
                            _mm_set1_epi16((short)((2 * e + 1) << 8 | 2 * e)));
}

// q2_K: x = d (sc & 15) q - dmin (sc >> 4), q in 0..3; the mins meet the
// activation's 16 group sums in one madd per super-block, as q4_K.
AVX2 static inline __attribute__((always_inline)) void q2K_tokens(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q2_K *w = vw;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(15);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1) {
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, PREFETCH_HINT);
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64, PREFETCH_HINT);
        }
        __m128i sm = _mm_loadu_si128((const __m128i *)w[i].scales);
        __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
        __m256i sch[2] = {_mm256_permute4x64_epi64(sc, 0x44), _mm256_permute4x64_epi64(sc, 0xee)};
        float d = ld_f16(w[i].d), dmin = ld_f16(w[i].dmin);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * h));
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 4; k++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                __m256i sck = _mm256_shuffle_epi8(sch[h], pick16x2(2 * k));
                _Pragma("GCC unroll 8")
                for (int r = 0; r < R; r++) {
                    const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sck));
                }
            }
        }
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            float dy = ld_f32(x->d);
            __m256i pm = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)x->bsums));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dy * dmin), _mm256_cvtepi32_ps(pm), acc[r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

AVX2 static float dot_q2_K(const void *w, const void *x, int n) { float s; q2K_tokens(w, x, 0, n, 1, &s); return s; }
AVX2 static void dot4_q2_K(const void *w, const void *x, size_t st, int n, float *s) { q2K_tokens(w, x, st, n, 4, s); }
AVX2 static void dot8_q2_K(const void *w, const void *x, size_t st, int n, float *s) { q2K_tokens(w, x, st, n, 8, s); }

// q3_K's 16 signed 6-bit scales (sc - 32) as bytes, unpacked with 32-bit
// masks (q3_K_scales for all 16 at once): the low 4 bits are the nibbles of
// scales[0..7], the high 2 bits bit pairs of scales[8..11].
AVX2 static inline __m128i q3K_scales(const uint8_t *q) {
    uint32_t a[3];
    memcpy(a, q, 12);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    __m128i v = _mm_setr_epi32((int)((a[0] & m4) | (a[2] & m2) << 4),               // groups 0..3
                               (int)((a[1] & m4) | (a[2] >> 2 & m2) << 4),          // 4..7
                               (int)((a[0] >> 4 & m4) | (a[2] >> 4 & m2) << 4),     // 8..11
                               (int)((a[1] >> 4 & m4) | (a[2] >> 6 & m2) << 4));    // 12..15
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// q3_K: x = d (sc - 32) (q - 4) with q = the 2 low bits | the hmask bit << 2
// (a set high bit is the oracle's "no -4"), so sum (q - 4) y per group is
// sum q y - 4 times the activation's group sum: one maddubs per chunk, and
// the offset one madd of the 16 scales with the 16 bsums per super-block, as
// q6_K. The high bit of element 128h + 32k + l is bit 4h + k of hmask[l].
AVX2 static inline __attribute__((always_inline)) void q3K_tokens(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q3_K *w = vw;
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1) {
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, PREFETCH_HINT);
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64, PREFETCH_HINT);
        }
        __m256i sc = _mm256_cvtepi8_epi16(q3K_scales(w[i].scales));
        __m256i sch[2] = {_mm256_permute4x64_epi64(sc, 0x44), _mm256_permute4x64_epi64(sc, 0xee)};
        __m256i hm = _mm256_loadu_si256((const __m256i *)w[i].hmask);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * h));
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 4; k++) {
                // bit b = 4h + k of each hmask byte moved to bit 2: a 16-bit
                // shift by b - 2 keeps bit 2 of each byte within its byte
                int b = 4 * h + k;
                __m256i hb = b < 2 ? _mm256_slli_epi16(hm, 2 - b) : _mm256_srli_epi16(hm, b - 2);
                __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3), _mm256_and_si256(hb, b4));
                __m256i sck = _mm256_shuffle_epi8(sch[h], pick16x2(2 * k));
                _Pragma("GCC unroll 8")
                for (int r = 0; r < R; r++) {
                    const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sck));
                }
            }
        }
        kq_offset_fma(acc, sumi, sc, ld_f16(w[i].d), vx, stride, i, R, 2);
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

AVX2 static float dot_q3_K(const void *w, const void *x, int n) { float s; q3K_tokens(w, x, 0, n, 1, &s); return s; }
AVX2 static void dot4_q3_K(const void *w, const void *x, size_t st, int n, float *s) { q3K_tokens(w, x, st, n, 4, s); }
AVX2 static void dot8_q3_K(const void *w, const void *x, size_t st, int n, float *s) { q3K_tokens(w, x, st, n, 8, s); }


// q8_0 blocks as ggml's x86 quantize_row_q8_0 makes them (scale amax / 127,
// round half to even), in act_q8_0_group's layout.
AVX2 void act_quant_q8_0x4_avx2(const float *x, void *vy, int n) {
    int nb = n / QK;
    uint8_t *g = vy;
    for (int i = 0; i < nb; i++) {
        uint8_t *gi = g + ACT_GROUP_BYTES * (size_t)(i / 4);
        uint16_t h;
        int32_t sum;
        _mm256_storeu_si256((__m256i *)(gi + 32 * (i % 4)), quant_block(x + QK * i, &h, &sum));
        float d = _cvtsh_ss(h);
        memcpy(gi + 128 + 4 * (i % 4), &d, 4);
        memcpy(gi + 144 + 4 * (i % 4), &sum, 4);
    }
    for (int i = nb; i % 4; i++) { // empty slots of the last group
        uint8_t *gi = g + ACT_GROUP_BYTES * (size_t)(i / 4);
        memset(gi + 32 * (i % 4), 0, 32);
        memset(gi + 128 + 4 * (i % 4), 0, 4);
        memset(gi + 144 + 4 * (i % 4), 0, 4);
    }
}

const vecdot_kernel vecdot_avx2_f32 = {
    .act_type = DT_F32, .dot = dot_f32, .dot4 = dot4_f32, .dotr = dotr_f32, .tile24 = tile24_f32,
};
const vecdot_kernel vecdot_avx2_f16 = {
    .act_type = DT_F32, .dot = dot_f16, .dot4 = dot4_f16, .dotr = dotr_f16, .tile24 = tile24_f16,
};
const vecdot_kernel vecdot_avx2_bf16 = {
    .act_type = DT_F32, .dot = dot_bf16, .dot4 = dot4_bf16, .dotr = dotr_bf16, .tile24 = tile24_bf16,
};
const vecdot_kernel vecdot_avx2_q8_0 = {
    .act_type = DT_Q8_0, .dot = dot_q8_0, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q8_0, .dot8 = dot8_q8_0, .grouped = 1, .dotr = dotr_q8_0,
};
const vecdot_kernel vecdot_avx2_q4_0 = {
    .act_type = DT_Q8_0, .dot = dot_q4_0, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q4_0, .dot8 = dot8_q4_0, .grouped = 1, .dotr = dotr_q4_0,
};
const vecdot_kernel vecdot_avx2_q4_1 = {
    .act_type = DT_Q8_0, .dot = dot_q4_1, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q4_1, .dot8 = dot8_q4_1, .grouped = 1, .dotr = dotr_q4_1,
};
const vecdot_kernel vecdot_avx2_q5_0 = {
    .act_type = DT_Q8_0, .dot = dot_q5_0, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q5_0, .dot8 = dot8_q5_0, .grouped = 1, .dotr = dotr_q5_0,
};
const vecdot_kernel vecdot_avx2_q5_1 = {
    .act_type = DT_Q8_0, .dot = dot_q5_1, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_q5_1, .dot8 = dot8_q5_1, .grouped = 1, .dotr = dotr_q5_1,
};
const vecdot_kernel vecdot_avx2_mxfp4 = {
    .act_type = DT_Q8_0, .dot = dot_mxfp4, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_mxfp4, .dot8 = dot8_mxfp4, .grouped = 1, .dotr = dotr_mxfp4,
};
const vecdot_kernel vecdot_avx2_q2_K = {
    .act_type = DT_Q8_K, .dot = dot_q2_K, .quant = act_quant_q8_K, .dot4 = dot4_q2_K, .dot8 = dot8_q2_K,
};
const vecdot_kernel vecdot_avx2_q3_K = {
    .act_type = DT_Q8_K, .dot = dot_q3_K, .quant = act_quant_q8_K, .dot4 = dot4_q3_K, .dot8 = dot8_q3_K,
};
const vecdot_kernel vecdot_avx2_q4_K = {
    .act_type = DT_Q8_K, .dot = dot_q4_K, .quant = act_quant_q8_K, .dot4 = dot4_q4_K, .dot8 = dot8_q4_K,
};
const vecdot_kernel vecdot_avx2_q5_K = {
    .act_type = DT_Q8_K, .dot = dot_q5_K, .quant = act_quant_q8_K,
};
const vecdot_kernel vecdot_avx2_q6_K = {
    .act_type = DT_Q8_K, .dot = dot_q6_K, .quant = act_quant_q8_K, .dot4 = dot4_q6_K, .dot8 = dot8_q6_K,
};
