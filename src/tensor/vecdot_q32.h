// The 32-element block kernels (q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4), written
// once and compiled per instruction set: the including file defines
// Q32_TARGET (the function attribute), Q32_VNNI (1: dpbusd for the u8 x s8
// sums) and Q32_NAME(name) (the names of its functions). dpbusd gives the
// same int32 lanes as maddubs + madd (or the int16 sums of 4 blocks) on
// these ranges, and the float operations after the integer sums are the
// same, so every build returns the same floats bit for bit.
// No include guard: included once by each kernel file.

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
// q4_1 and q5_1 (w = d u + m) add m dy sum y; q8_0 keeps signed weights.
// The 1-token (decode) and R-token (prefill) kernels below run the same
// operations per token, so a batch gives the token-by-token results exactly.

// integer sum of weight block u (|u| for q8_0, with its signs in w) against y
Q32_TARGET static inline __attribute__((always_inline)) __m256i Q32_NAME(q32_isum)(int K, __m256i u, __m256i w, const int8_t *y) {
    __m256i yv = _mm256_loadu_si256((const __m256i *)y);
    if (K == K_Q8_0) yv = _mm256_sign_epi8(yv, w);
#if Q32_VNNI // the same sums of four u8 x s8 products, in one instruction
    return Q32_DPBUSD(_mm256_setzero_si256(), u, yv);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, yv), _mm256_set1_epi16(1));
#endif
}

// The integer sums of 4 blocks against 4 activation blocks y: lane j holds
// block j's elements 0..15, lane j + 4 its elements 16..31. Unsigned weights
// of at most 31 keep 8 products of an int16 lane below 2^15 (8 * 31 * 128),
// so they are summed as int16 by two hadds and widened by one madd (5
// multiplies, not 8); q8_0's larger products are widened per block first.
// Either way the sums are exact, so every tile shape gets the same integers.
// With dpbusd (Q32_VNNI) q8_0's per-block sums are one dpbusd each. (The
// unsigned kinds' int16 sums stay faster than 4 dpbusd on Zen 4: dot8 of
// q5_0 49.7 vs 47.0 GMAC/s a thread, so they have no VNNI kernels.)
Q32_TARGET static inline __attribute__((always_inline)) __m256i Q32_NAME(q32_isum4)(int K, const __m256i *u, const __m256i *sg, const int8_t *y) {
    if (K == K_Q8_0) {
        __m256i p0 = Q32_NAME(q32_isum)(K, u[0], sg[0], y), p1 = Q32_NAME(q32_isum)(K, u[1], sg[1], y + 32);
        __m256i p2 = Q32_NAME(q32_isum)(K, u[2], sg[2], y + 64), p3 = Q32_NAME(q32_isum)(K, u[3], sg[3], y + 96);
        return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    }
    __m256i m[4];
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) m[j] = _mm256_maddubs_epi16(u[j], _mm256_loadu_si256((const __m256i *)(y + 32 * j)));
    __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(m[0], m[1]), _mm256_hadd_epi16(m[2], m[3]));
    return _mm256_madd_epi16(h, _mm256_set1_epi16(1));
}

// The kernel for RW weight rows (w + k * ws bytes) by RT tokens (x + r *
// stride bytes): s[k * RT + r] = row k . token r. Decode runs 4 rows of one
// token, prefill one row of 4 or 8 tokens; each (row, token) pair sees the
// same operations either way.
Q32_TARGET static inline __attribute__((always_inline)) void Q32_NAME(q32_tile)(int K, const void *w0, size_t ws, int RW, const void *vx,
                                                                size_t stride, int RT, int n, float *s) {
    const int nb = n / QK, off = q32_off(K);
    const size_t bsz = q32_size(K);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int a = 0; a < RW * RT; a++) acc[a] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        _Pragma("GCC unroll 8")
        for (int k = 0; k < RW; k++) {
            const void *w = (const char *)w0 + ws * k;
            if (RT == 1) // every cache line of the next 4 blocks, PREFETCH_AHEAD bytes on
                for (size_t o = 0; o < 4 * bsz; o += 64) _mm_prefetch((const char *)w + bsz * (size_t)i + PREFETCH_AHEAD + o, PREFETCH_HINT);
            __m256i u[4], sg[4];
            _Pragma("GCC unroll 8")
            for (int j = 0; j < 4; j++) {
                sg[j] = q32_unpack(K, w, i + j);
                u[j] = K == K_Q8_0 ? _mm256_sign_epi8(sg[j], sg[j]) : sg[j];
            }
            __m128 dw = q32_scale4(K, w, i);
            __m256 dw8 = _mm256_set_m128(dw, dw);
            __m128 m4 = q32_has_min(K) ? q32_min4(K, w, i) : _mm_setzero_ps();
            _Pragma("GCC unroll 8")
            for (int r = 0; r < RT; r++) {
                const void *xr = (const char *)vx + stride * r;
                const int8_t *y = XG_QS(xr, i / 4);
                const float *yd = XG_D(xr, i / 4);
                const int32_t *ys = XG_S(xr, i / 4);
                __m256i p = Q32_NAME(q32_isum4)(K, u, sg, y);
                __m128i ys4 = _mm_loadu_si128((const __m128i *)ys);
                if (off) { // off * ys by shifts where off is a power of two (a multiply costs a mul-port slot)
                    __m128i o = off == 8 ? _mm_slli_epi32(ys4, 3) : off == 16 ? _mm_slli_epi32(ys4, 4) : _mm_mullo_epi32(ys4, _mm_set1_epi32(off));
                    p = _mm256_sub_epi32(p, _mm256_zextsi128_si256(o));
                }
                __m128 dy = _mm_loadu_ps(yd);
                __m256 sc = _mm256_mul_ps(dw8, _mm256_broadcast_ps((const __m128 *)yd)); // dw dy in both halves
                __m256 *ac = &acc[k * RT + r];
                *ac = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(p), *ac);
                if (q32_has_min(K))
                    *ac = _mm256_fmadd_ps(_mm256_zextps128_ps256(m4), _mm256_zextps128_ps256(_mm_mul_ps(dy, _mm_cvtepi32_ps(ys4))), *ac);
            }
        }
    }
    for (; i < nb; i++) {
        for (int k = 0; k < RW; k++) {
            const void *w = (const char *)w0 + ws * k;
            __m256i sg = q32_unpack(K, w, i), u = K == K_Q8_0 ? _mm256_sign_epi8(sg, sg) : sg;
            float dw = q32_scale(K, w, i);
            float m = q32_has_min(K) ? ld_f16((const uint8_t *)w + bsz * (size_t)i + 2) : 0.0f;
            for (int r = 0; r < RT; r++) {
                const void *xr = (const char *)vx + stride * r;
                const int8_t *y = XG_QS(xr, i / 4) + 32 * (i % 4);
                const float *yd = XG_D(xr, i / 4) + i % 4;
                int32_t ys = XG_S(xr, i / 4)[i % 4];
                __m256i p = Q32_NAME(q32_isum)(K, u, sg, y);
                if (off) p = _mm256_sub_epi32(p, _mm256_zextsi128_si256(_mm_cvtsi32_si128(off * ys)));
                __m256 *ac = &acc[k * RT + r];
                *ac = _mm256_fmadd_ps(_mm256_set1_ps(dw * yd[0]), _mm256_cvtepi32_ps(p), *ac);
                if (q32_has_min(K))
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
    Q32_TARGET static __attribute__((unused)) float Q32_NAME(dot_##t)(const void *w, const void *x, int n) { float s; Q32_NAME(q32_tile)(K, w, 0, 1, x, 0, 1, n, &s); return s; } \
    Q32_TARGET static __attribute__((unused)) void Q32_NAME(dotr_##t)(const void *w, size_t ws, const void *x, int n, float *s) { Q32_NAME(q32_tile)(K, w, ws, 4, x, 0, 1, n, s); } \
    Q32_TARGET static __attribute__((unused)) void Q32_NAME(dot4_##t)(const void *w, const void *x, size_t st, int n, float *s) { Q32_NAME(q32_tile)(K, w, 0, 1, x, st, 4, n, s); } \
    Q32_TARGET static __attribute__((unused)) void Q32_NAME(dot8_##t)(const void *w, const void *x, size_t st, int n, float *s) { Q32_NAME(q32_tile)(K, w, 0, 1, x, st, 8, n, s); }
Q32_KERNELS(q8_0, K_Q8_0)
Q32_KERNELS(q4_0, K_Q4_0)
Q32_KERNELS(q4_1, K_Q4_1)
Q32_KERNELS(q5_0, K_Q5_0)
Q32_KERNELS(q5_1, K_Q5_1)
Q32_KERNELS(mxfp4, K_MXFP4)
