// The 32-element block kernels (q8_0, q4_0, q4_1, q5_0, mxfp4), written
// once and compiled per instruction set: the including file defines
// Q32_TARGET (the function attribute), Q32_VNNI (1: AVX-512 VNNI's dpbusd for
// the u8 x s8 sums, which gives the same integers as maddubs + madd on these
// ranges, so both builds return the same floats) and Q32_NAME(name).
// No include guard: included once by each of those files.
// ---------------------------------------------------------------------------
// 32-element blocks x q8_0, four blocks at a time
//
// The activations come in groups of four q8_0 blocks (act_q8_0_group's
// layout): 128 value bytes, the four scales as f32 and the four int32 sums
// of the values, so one pointer per token reaches all of a group. Weights are
// unpacked to unsigned bytes u = w + off (q4_0: 8, q5_0: 16, mxfp4: 12), so
// maddubs(u, y) needs no sign juggling and sum (u - off) y = sum u y - off
// sum y stays exact in integers. The sums of four blocks are reduced by two
// hadds into one vector (lanes j and j + 4 hold the halves of block j) and
// scaled by the four weight scales times the four activation scales at once.
// q4_1 (w = d u + m) adds m dy sum y; q8_0 keeps signed weights.
// The 1-token (decode) and R-token (prefill) kernels below run the same
// operations per token, so a batch gives the token-by-token results exactly.

enum { K_Q8_0, K_Q4_0, K_Q4_1, K_Q5_0, K_MXFP4 };

static inline float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// bytes of block i of row w, and its scale (and q4_1's min)
Q32_TARGET static inline __attribute__((always_inline)) __m256i q32_unpack(int K, const void *w, int i) {
    switch (K) {
    case K_Q8_0: return _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)w)[i].qs);
    case K_Q4_0: return nibbles32(((const block_q4_0 *)w)[i].qs);
    case K_Q4_1: return nibbles32(((const block_q4_1 *)w)[i].qs);
    case K_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)w + i;
        // byte j of the spread mask selects bit j of qh within its lane's 8 bytes
        const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
        const __m256i bitm = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
        h = _mm256_cmpeq_epi8(_mm256_or_si256(h, bitm), _mm256_set1_epi8(-1)); // bit set -> 0xFF
        return _mm256_or_si256(nibbles32(b->qs), _mm256_and_si256(h, _mm256_set1_epi8(16)));
    }
    default: { // mxfp4: the e2m1 values, doubled, plus 12
        const __m128i tab = _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
        return _mm256_shuffle_epi8(_mm256_set_m128i(tab, tab), nibbles32(((const block_mxfp4 *)w)[i].qs));
    }
    }
}

Q32_TARGET static inline __attribute__((always_inline)) float q32_scale(int K, const void *w, int i) {
    switch (K) {
    case K_Q8_0: return ld_f16(((const block_q8_0 *)w)[i].d);
    case K_Q4_0: return ld_f16(((const block_q4_0 *)w)[i].d);
    case K_Q4_1: return ld_f16(((const block_q4_1 *)w)[i].d);
    case K_Q5_0: return ld_f16(((const block_q5_0 *)w)[i].d);
    default: return e8m0_half(((const block_mxfp4 *)w)[i].e);
    }
}

Q32_TARGET static inline __attribute__((always_inline)) __m128 q32_scale4(int K, const void *w, int i) {
    if (K == K_MXFP4) {
        const block_mxfp4 *b = (const block_mxfp4 *)w + i;
        return _mm_setr_ps(e8m0_half(b[0].e), e8m0_half(b[1].e), e8m0_half(b[2].e), e8m0_half(b[3].e));
    }
    size_t bs = K == K_Q8_0 ? sizeof(block_q8_0) : K == K_Q4_0 ? sizeof(block_q4_0) : K == K_Q4_1 ? sizeof(block_q4_1) : sizeof(block_q5_0);
    const uint8_t *p = (const uint8_t *)w + bs * (size_t)i; // d leads every block
    uint16_t h[4];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) memcpy(&h[j], p + bs * (size_t)j, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

Q32_TARGET static inline __attribute__((always_inline)) __m128 q41_min4(const void *w, int i) {
    const block_q4_1 *b = (const block_q4_1 *)w + i;
    uint16_t h[4];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) memcpy(&h[j], b[j].m, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

static inline int q32_off(int K) { return K == K_Q4_0 ? 8 : K == K_Q5_0 ? 16 : K == K_MXFP4 ? 12 : 0; }

// activation group g of a row: values, scales, sums
#define XG_QS(x, g) ((const int8_t *)((const char *)(x) + ACT_GROUP_BYTES * (size_t)(g)))
#define XG_D(x, g) ((const float *)((const char *)(x) + ACT_GROUP_BYTES * (size_t)(g) + 128))
#define XG_S(x, g) ((const int32_t *)((const char *)(x) + ACT_GROUP_BYTES * (size_t)(g) + 144))

// integer sum of weight block u (|u| for q8_0, with its signs in w) against y
Q32_TARGET static inline __attribute__((always_inline)) __m256i q32_isum(int K, __m256i u, __m256i w, const int8_t *y) {
    __m256i yv = _mm256_loadu_si256((const __m256i *)y);
    if (K == K_Q8_0) yv = _mm256_sign_epi8(yv, w);
#if Q32_VNNI // the same sums of four u8 x s8 products in one instruction
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, yv);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, yv), _mm256_set1_epi16(1));
#endif
}

// The kernel for RW weight rows (w + k * ws bytes) by RT tokens (x + r *
// stride bytes): s[k * RT + r] = row k . token r. Decode runs 4 rows of one
// token, prefill one row of 4 or 8 tokens; each (row, token) pair sees the
// same operations either way.
Q32_TARGET static inline __attribute__((always_inline)) void q32_tile(int K, const void *w0, size_t ws, int RW, const void *vx,
                                                                size_t stride, int RT, int n, float *s) {
    const int nb = n / QK, off = q32_off(K);
    const size_t bsz = K == K_Q8_0 ? sizeof(block_q8_0) : K == K_Q4_0 ? sizeof(block_q4_0)
                     : K == K_Q4_1 ? sizeof(block_q4_1) : K == K_Q5_0 ? sizeof(block_q5_0) : sizeof(block_mxfp4);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int a = 0; a < RW * RT; a++) acc[a] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        _Pragma("GCC unroll 8")
        for (int k = 0; k < RW; k++) {
            const void *w = (const char *)w0 + ws * k;
            if (RT == 1) // every cache line of the next 4 blocks, PREFETCH_AHEAD bytes on
                for (size_t o = 0; o < 4 * bsz; o += 64) _mm_prefetch((const char *)w + bsz * (size_t)i + PREFETCH_AHEAD + o, _MM_HINT_NTA);
            __m256i u[4], sg[4];
            _Pragma("GCC unroll 8")
            for (int j = 0; j < 4; j++) {
                sg[j] = q32_unpack(K, w, i + j);
                u[j] = K == K_Q8_0 ? _mm256_sign_epi8(sg[j], sg[j]) : sg[j];
            }
            __m128 dw = q32_scale4(K, w, i);
            __m128 m4 = K == K_Q4_1 ? q41_min4(w, i) : _mm_setzero_ps();
            _Pragma("GCC unroll 8")
            for (int r = 0; r < RT; r++) {
                const void *xr = (const char *)vx + stride * r;
                const int8_t *y = XG_QS(xr, i / 4);
                const float *yd = XG_D(xr, i / 4);
                const int32_t *ys = XG_S(xr, i / 4);
                __m256i p0 = q32_isum(K, u[0], sg[0], y), p1 = q32_isum(K, u[1], sg[1], y + 32);
                __m256i p01 = _mm256_hadd_epi32(p0, p1);
                __m256i p2 = q32_isum(K, u[2], sg[2], y + 64), p3 = q32_isum(K, u[3], sg[3], y + 96);
                __m256i p = _mm256_hadd_epi32(p01, _mm256_hadd_epi32(p2, p3));
                __m128i ys4 = _mm_loadu_si128((const __m128i *)ys);
                if (off) p = _mm256_sub_epi32(p, _mm256_zextsi128_si256(_mm_mullo_epi32(ys4, _mm_set1_epi32(off))));
                __m128 dy = _mm_loadu_ps(yd);
                __m128 sc = _mm_mul_ps(dw, dy);
                __m256 *ac = &acc[k * RT + r];
                *ac = _mm256_fmadd_ps(_mm256_set_m128(sc, sc), _mm256_cvtepi32_ps(p), *ac);
                if (K == K_Q4_1)
                    *ac = _mm256_fmadd_ps(_mm256_zextps128_ps256(m4), _mm256_zextps128_ps256(_mm_mul_ps(dy, _mm_cvtepi32_ps(ys4))), *ac);
            }
        }
    }
    for (; i < nb; i++) {
        for (int k = 0; k < RW; k++) {
            const void *w = (const char *)w0 + ws * k;
            __m256i sg = q32_unpack(K, w, i), u = K == K_Q8_0 ? _mm256_sign_epi8(sg, sg) : sg;
            float dw = q32_scale(K, w, i);
            float m = K == K_Q4_1 ? ld_f16(((const block_q4_1 *)w)[i].m) : 0.0f;
            for (int r = 0; r < RT; r++) {
                const void *xr = (const char *)vx + stride * r;
                const int8_t *y = XG_QS(xr, i / 4) + 32 * (i % 4);
                const float *yd = XG_D(xr, i / 4) + i % 4;
                int32_t ys = XG_S(xr, i / 4)[i % 4];
                __m256i p = q32_isum(K, u, sg, y);
                if (off) p = _mm256_sub_epi32(p, _mm256_zextsi128_si256(_mm_cvtsi32_si128(off * ys)));
                __m256 *ac = &acc[k * RT + r];
                *ac = _mm256_fmadd_ps(_mm256_set1_ps(dw * yd[0]), _mm256_cvtepi32_ps(p), *ac);
                if (K == K_Q4_1)
                    *ac = _mm256_fmadd_ps(_mm256_zextps128_ps256(_mm_set_ss(m)), _mm256_zextps128_ps256(_mm_set_ss(yd[0] * (float)ys)), *ac);
            }
        }
    }
    if (RW * RT == 4) _mm_storeu_ps(s, hsum8x4(acc[0], acc[1], acc[2], acc[3]));
    else if (RW * RT == 8) {
        _mm_storeu_ps(s, hsum8x4(acc[0], acc[1], acc[2], acc[3]));
        _mm_storeu_ps(s + 4, hsum8x4(acc[4], acc[5], acc[6], acc[7]));
    }
    else
        for (int a = 0; a < RW * RT; a++) s[a] = hsum8(acc[a]);
}

#define Q32_KERNELS(t, K)                                                                                    \
    Q32_TARGET static float Q32_NAME(dot_##t)(const void *w, const void *x, int n) { float s; q32_tile(K, w, 0, 1, x, 0, 1, n, &s); return s; } \
    Q32_TARGET static void Q32_NAME(dotr_##t)(const void *w, size_t ws, const void *x, int n, float *s) { q32_tile(K, w, ws, 4, x, 0, 1, n, s); } \
    Q32_TARGET static void Q32_NAME(dot4_##t)(const void *w, const void *x, size_t st, int n, float *s) { q32_tile(K, w, 0, 1, x, st, 4, n, s); } \
    Q32_TARGET static void Q32_NAME(dot8_##t)(const void *w, const void *x, size_t st, int n, float *s) { q32_tile(K, w, 0, 1, x, st, 8, n, s); }
Q32_KERNELS(q8_0, K_Q8_0)
Q32_KERNELS(q4_0, K_Q4_0)
Q32_KERNELS(q4_1, K_Q4_1)
Q32_KERNELS(q5_0, K_Q5_0)
Q32_KERNELS(mxfp4, K_MXFP4)

