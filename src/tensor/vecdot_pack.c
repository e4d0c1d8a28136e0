// The packed kernels (pack.h) on AVX-512 VNNI + VL + BW, 256-bit vectors.
//
// Per block of a group of 8 rows, the 8 granule vectors are unpacked once and
// kept in registers for all the tokens; per token, eight dpbusd against the
// token's values 4 at a time (broadcast) give the 8 rows' sums, started from
// -2^shift times the sum of the token's values (the weights carry +2^shift to
// be unsigned), then one convert and one fma with the 8 rows' scales times
// the token's scale. A token's dpbusd are split over 2 or 4 accumulators
// (fewer tokens, more chains) and added as integers, so the results do not
// depend on the split. On the 2-core Zen 4 here, one thread, 8 tokens
// against the unpacked dot8 (a throwaway timing harness, this session):
// q8_0 47 -> 143 GMAC/s, q5_0 44 -> 128, q4_K 70 -> 150, q6_K 77 -> 121.
#include "tensor/vecdot_x86.h"
#include "tensor/pack.h"

#define PK __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

#ifndef PK_AHEAD
#define PK_AHEAD 8 // records prefetched ahead
#endif
#include <stdlib.h>
// the prefetch distance in bytes: PK_AHEAD records, or INFER_PK_AHEAD=BYTES (a measuring switch; read once)
static long pk_ahead_bytes(size_t rec) {
    static long v = -1;
    long a = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (a < 0) {
        const char *e = getenv("INFER_PK_AHEAD");
        a = e && atol(e) > 0 ? atol(e) : 0;
        __atomic_store_n(&v, a, __ATOMIC_RELAXED);
    }
    return a ? a : (long)(PK_AHEAD * rec);
}

static inline int32_t ld_i32(const void *p) { int32_t v; memcpy(&v, p, 4); return v; }

// the 8 granule vectors of block record p, as unsigned bytes
PK static inline __attribute__((always_inline)) void pk_unpack(int K, const uint8_t *p, __m256i *v) {
    if (K == PACK_Q8_0) {
        _Pragma("GCC unroll 8")
        for (int g = 0; g < 8; g++) v[g] = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * g));
        return;
    }
    const uint8_t *nib = p + 16 + (K == PACK_Q5_0 ? 32 : 0);
    const __m256i m4 = _mm256_set1_epi8(15);
    _Pragma("GCC unroll 4")
    for (int h = 0; h < 4; h++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(nib + 32 * h));
        v[2 * h] = _mm256_and_si256(q, m4);
        v[2 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    if (K == PACK_Q5_0) {
        const __m256i b4 = _mm256_set1_epi8(16);
        _Pragma("GCC unroll 8")
        for (int g = 0; g < 8; g++) v[g] = _mm256_mask_add_epi8(v[g], (__mmask32)(uint32_t)ld_i32(p + 16 + 4 * g), v[g], b4);
    }
}

PK static inline __attribute__((always_inline)) void pk_tile(int K, const void *group, const void *vx, size_t xs, int T, int n,
                                                             float *out, size_t ldo) {
    const int nb = n / QK, sh = K == PACK_Q8_0 ? 7 : K == PACK_Q5_0 ? 4 : 3;
    const int NC = T >= 4 ? 2 : 4; // accumulators per token
    const size_t rec = pack_record_bytes(K);
    const long ahead = pk_ahead_bytes(rec);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *p = (const uint8_t *)group + rec * (size_t)i;
        for (size_t o = 0; o < rec; o += 64) _mm_prefetch((const char *)p + ahead + o, _MM_HINT_T0);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m256i v[8];
        pk_unpack(K, p, v);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const char *xt = (const char *)vx + xs * (size_t)t;
            const int8_t *a = XP_QS(xt) + 32 * (size_t)i;
            __m256i s[4];
            s[0] = _mm256_slli_epi32(_mm256_set1_epi32(XP_NEGSUM(xt, nb)[i]), sh);
            _Pragma("GCC unroll 4")
            for (int c = 1; c < NC; c++) s[c] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8")
            for (int g = 0; g < 8; g++) s[g % NC] = _mm256_dpbusd_epi32(s[g % NC], v[g], _mm256_set1_epi32(ld_i32(a + 4 * g)));
            __m256i st = NC == 2 ? _mm256_add_epi32(s[0], s[1]) : _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
            __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(XP_D(xt, nb)[i]));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(st), sc, acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + ldo * t, acc[t]);
}

// Activations in ACT_PACKED's layout: blocks quantized as ggml's
// quantize_row_q8_0 (quant_block), minus their sums, their scales.
PK static void pk_quant(const float *x, void *vy, int n) {
    const int nb = n / QK;
    int8_t *q = (int8_t *)vy;
    int32_t *ns = (int32_t *)((char *)vy + 32 * (size_t)nb);
    float *d = (float *)((char *)vy + 36 * (size_t)nb);
    for (int i = 0; i < nb; i++) {
        uint16_t h;
        int32_t sum;
        _mm256_storeu_si256((__m256i *)(q + 32 * (size_t)i), quant_block(x + QK * i, &h, &sum));
        ns[i] = (int32_t)(0u - (uint32_t)sum); // (wraps as the vector code does: NaN inputs give INT_MIN)
        d[i] = _cvtsh_ss(h);
    }
    memset(d + nb, 0, act_packed_row_size(n) - 40 * (size_t)nb);
}

// k-quants: a record is a 256-column super-block of the 8 rows. Its
// sub-blocks' sums (8 dpbusd for q4_K's 32 columns, 4 for q6_K's 16) are
// multiplied by the 8 rows' sub-block scales as int32 and added; the mins
// (q4_K) or the -32 offset (q6_K) meet the activations' sums of 32 or 16 in
// dpwssd; then one convert and fma per super-block and token.
PK static inline __attribute__((always_inline)) void pk_tile_k(int K, const void *group, const void *vx, size_t xs, int T, int n,
                                                               float *out, size_t ldo) {
    const int nb = n / QK_K, NC = T >= 4 || K == PACK_Q6_K ? 2 : 4; // (q6_K's 4 granules a sub-block: 2 chains of 2, +14% at one token)
    const size_t rec = pack_record_bytes(K);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *p = (const uint8_t *)group + rec * (size_t)i;
        if (T == 1)
            for (size_t o = 0; o < rec; o += 64) _mm_prefetch((const char *)p + 2 * rec + o, _MM_HINT_T0);
        __m256i isum[8];
        // the mins (q4_K: -sum m_j bs32_j, kept apart) or the offset (q6_K: -32 sum sc_j bs16_j, into isum)
        __m256i mo[8];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) mo[t] = _mm256_setzero_si256();
        const int NP = K == PACK_Q4_K ? 4 : 8; // pairs of sub-blocks
        _Pragma("GCC unroll 8")
        for (int q = 0; q < NP; q++) {
            __m256i pr = K == PACK_Q4_K ? _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p + 96 + 16 * q)))
                                        : _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 16 + 16 * q)));
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const char *xt = (const char *)vx + xs * (size_t)t;
                const int16_t *bs = K == PACK_Q4_K ? XPK_BS32(xt, n) + 8 * i : XPK_BS16(xt, n) + 16 * i;
                mo[t] = _mm256_dpwssd_epi32(mo[t], pr, _mm256_set1_epi32(ld_i32(bs + 2 * q)));
            }
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) isum[t] = K == PACK_Q4_K ? _mm256_setzero_si256() : _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(mo[t], 5));
        if (K == PACK_Q4_K) {
            __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const char *xt = (const char *)vx + xs * (size_t)t;
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), mo[t])),
                                         _mm256_mul_ps(dm, _mm256_set1_ps(XPK_D(xt, n)[i])), acc[t]);
            }
        }
        const int NS = K == PACK_Q4_K ? 8 : 16, W = K == PACK_Q4_K ? 32 : 16; // sub-blocks, their columns
        for (int j = 0; j < NS; j++) {
            __m256i v[8], sc;
            if (K == PACK_Q4_K) {
                const uint8_t *nib = p + 160 + 128 * (size_t)j;
                _Pragma("GCC unroll 4")
                for (int h = 0; h < 4; h++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)(nib + 32 * h));
                    v[2 * h] = _mm256_and_si256(q, m4);
                    v[2 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                }
                sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 32 + 8 * j)));
            } else {
                const uint8_t *sb = p + 144 + 96 * (size_t)j;
                __m256i l0 = _mm256_loadu_si256((const __m256i *)sb), l1 = _mm256_loadu_si256((const __m256i *)(sb + 32));
                __m256i h = _mm256_loadu_si256((const __m256i *)(sb + 64)), m30 = _mm256_set1_epi8(0x30);
                v[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
                v[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
                v[2] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(h, m30));
                v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
                __m256i pr = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 16 + 16 * (j / 2))));
                sc = j % 2 ? _mm256_srai_epi32(pr, 16) : _mm256_srai_epi32(_mm256_slli_epi32(pr, 16), 16);
            }
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const int8_t *a = XPK_QS((const char *)vx + xs * (size_t)t) + 256 * (size_t)i + W * (size_t)j;
                __m256i s[4];
                _Pragma("GCC unroll 4")
                for (int c = 0; c < NC; c++) s[c] = _mm256_setzero_si256();
                _Pragma("GCC unroll 8")
                for (int g = 0; g < W / 4; g++) s[g % NC] = _mm256_dpbusd_epi32(s[g % NC], v[g], _mm256_set1_epi32(ld_i32(a + 4 * g)));
                __m256i st = _mm256_add_epi32(s[0], s[1]);
                if (NC == 4) st = _mm256_add_epi32(st, _mm256_add_epi32(s[2], s[3]));
                isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(st, sc));
            }
        }
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const char *xt = (const char *)vx + xs * (size_t)t;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(XPK_D(xt, n)[i])), acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + ldo * t, acc[t]);
}

// q8_K activations (quantize_row_q8_K's values and scale, bit for bit: the
// first of the largest magnitudes sets the scale -127 / max, products rounded
// to nearest even and saturated) with their sums of 16 and 32.
PK static void pk_quant_k(const float *x, void *vy, int n) {
    uint8_t *y = vy;
    int16_t *bs16 = (int16_t *)XPK_BS16(y, n), *bs32 = (int16_t *)XPK_BS32(y, n);
    float *d = (float *)XPK_D(y, n);
    for (int i = 0; i < n / QK_K; i++) {
        const float *xb = x + QK_K * (size_t)i;
        int8_t *q = (int8_t *)y + QK_K * (size_t)i;
        __m512 m = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)));
        float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            memset(q, 0, QK_K);
            memset(bs16 + 16 * i, 0, 32), memset(bs32 + 8 * i, 0, 16);
            d[i] = 0.0f;
            continue;
        }
        int j = 0;
        for (int k = 0; k < 16; k++) {
            __mmask16 e = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (e) { j = 16 * k + __builtin_ctz(e); break; }
        }
        float iscale = -127.f / xb[j];
        __m512 is = _mm512_set1_ps(iscale);
        for (int k = 0; k < 16; k++)
            _mm_storeu_si128((__m128i *)(q + 16 * k), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * k), is))));
        d[i] = 1 / iscale;
        for (int k = 0; k < 4; k++) { // sums of 8 by sad on the bytes + 128, then of 16 and 32
            __m512i v = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 64 * k)), _mm512_set1_epi8((char)0x80));
            int64_t s8[8];
            _mm512_storeu_si512((void *)s8, _mm512_sad_epu8(v, _mm512_setzero_si512()));
            for (int g = 0; g < 4; g++) bs16[16 * i + 4 * k + g] = (int16_t)(s8[2 * g] + s8[2 * g + 1] - 16 * 128);
            for (int g = 0; g < 2; g++) bs32[8 * i + 2 * k + g] = (int16_t)(bs16[16 * i + 4 * k + 2 * g] + bs16[16 * i + 4 * k + 2 * g + 1]);
        }
    }
    memset(d + n / QK_K, 0, act_packed_k_row_size(n) - ((const uint8_t *)(d + n / QK_K) - y));
}

// A kind's kernel: tilefn (pk_tile or pk_tile_k) on 8, 4, 2 and 1 tokens at
// a time (constant counts, so each is unrolled), its activation quantizer.
#define PK_KERNEL(t, K, tilefn, quantfn)                                                                                     \
    PK static void pk_tile_##t(const void *g, const void *x, size_t xs, int T, int n, float *out, size_t ldo) {          \
        for (; T >= 8; T -= 8, x = (const char *)x + 8 * xs, out += 8 * ldo) tilefn(K, g, x, xs, 8, n, out, ldo);          \
        if (T >= 4) tilefn(K, g, x, xs, 4, n, out, ldo), T -= 4, x = (const char *)x + 4 * xs, out += 4 * ldo;             \
        if (T >= 2) tilefn(K, g, x, xs, 2, n, out, ldo), T -= 2, x = (const char *)x + 2 * xs, out += 2 * ldo;             \
        if (T >= 1) tilefn(K, g, x, xs, 1, n, out, ldo);                                                                   \
    }                                                                                                                    \
    const pack_kernel pack_vnni_##t = {.quant = quantfn, .tile = pk_tile_##t};
PK_KERNEL(q8_0, PACK_Q8_0, pk_tile, pk_quant)
PK_KERNEL(q5_0, PACK_Q5_0, pk_tile, pk_quant)
PK_KERNEL(q4_0, PACK_Q4_0, pk_tile, pk_quant)
PK_KERNEL(q4_K, PACK_Q4_K, pk_tile_k, pk_quant_k)
PK_KERNEL(q6_K, PACK_Q6_K, pk_tile_k, pk_quant_k)
