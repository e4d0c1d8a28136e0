// The q4_K and q6_K kernels against q8_K activations, compiled per
// instruction set as vecdot_q32.h (the same macros). With VNNI the madd of
// the int16 pair sums with the scales and the add into the int32 sums are
// one vpdpwssd (KQ_MADD_ACC): the same integers, the same floats after them.
// No include guard: included once by each kernel file.

#if Q32_VNNI
#define KQ_MADD_ACC(acc, a, b) Q32_DPWSSD(acc, a, b)
#else
#define KQ_MADD_ACC(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#endif

// q4_K: each 32-element group's scale (q4K_scales_mins) is spread to 16-bit
// lanes by a byte shuffle, and the mins meet the activation's 16-element
// sums in one madd.
Q32_TARGET static inline __attribute__((always_inline)) void Q32_NAME(q4K_tokens)(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q4_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1) {
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD, PREFETCH_HINT);
            _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64, PREFETCH_HINT);
        }
        __m128i sm = q4K_scales_mins(w[i].scales);
        __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        float d = ld_f16(w[i].d), dmin = ld_f16(w[i].dmin);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int j = 0; j < 4; j++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            __m256i sl = _mm256_shuffle_epi8(sc, pick16(2 * j)), sh = _mm256_shuffle_epi8(sc, pick16(2 * j + 1));
            _Pragma("GCC unroll 8")
            for (int r = 0; r < R; r++) {
                const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 64 * j;
                __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
                __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
                sumi[r] = KQ_MADD_ACC(KQ_MADD_ACC(sumi[r], pl, sl), ph, sh);
            }
        }
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) {
            const block_q8_K *x = (const block_q8_K *)((const char *)vx + stride * r) + i;
            float dy = ld_f32(x->d);
            __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 16)));
            __m128i pm = _mm_madd_epi16(mins, bs);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dy * dmin), _mm256_cvtepi32_ps(_mm256_zextsi128_si256(pm)), acc[r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

Q32_TARGET static __attribute__((unused)) float Q32_NAME(dot_q4_K)(const void *w, const void *x, int n) { float s; Q32_NAME(q4K_tokens)(w, x, 0, n, 1, &s); return s; }
Q32_TARGET static __attribute__((unused)) void Q32_NAME(dot4_q4_K)(const void *w, const void *x, size_t st, int n, float *s) { Q32_NAME(q4K_tokens)(w, x, st, n, 4, s); }
Q32_TARGET static __attribute__((unused)) void Q32_NAME(dot8_q4_K)(const void *w, const void *x, size_t st, int n, float *s) { Q32_NAME(q4K_tokens)(w, x, st, n, 8, s); }

// q6_K: 6-bit values q in 0..63 with weight q - 32; sum (q - 32) y per
// 16-element group is sum q y - 32 times the activation's group sum, so the
// offset costs one madd of the 16 scales with the 16 sums per super-block.
Q32_TARGET static inline __attribute__((always_inline)) void Q32_NAME(q6K_tokens)(const void *vw, const void *vx, size_t stride, int n,
                                                                  int R, float *s) {
    const block_q6_K *w = vw;
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    __m256 acc[8];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        if (R == 1)
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 3; k++) _mm_prefetch((const char *)(w + i) + PREFETCH_AHEAD + 64 * k, PREFETCH_HINT);
        __m128i sc8 = _mm_loadu_si128((const __m128i *)w[i].scales);
        __m256i sumi[8];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            __m256i b1 = _mm256_loadu_si256((const __m256i *)ql), b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 4; k++) {
                int g = 8 * h + 2 * k; // scales g (elements 0..15 of part k) and g + 1 (16..31)
                __m128i pick = _mm_setr_epi8(g, g, g, g, g, g, g, g, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1);
                __m256i sck = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
                _Pragma("GCC unroll 8")
                for (int r = 0; r < R; r++) {
                    const int8_t *y = ((const block_q8_K *)((const char *)vx + stride * r) + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)y));
                    sumi[r] = KQ_MADD_ACC(sumi[r], p, sck);
                }
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        kq_offset_fma(acc, sumi, sc16, ld_f16(w[i].d), vx, stride, i, R, 5);
    }
    _Pragma("GCC unroll 8")
    for (int r = 0; r < R; r++) s[r] = hsum8(acc[r]);
}

Q32_TARGET static __attribute__((unused)) float Q32_NAME(dot_q6_K)(const void *w, const void *x, int n) { float s; Q32_NAME(q6K_tokens)(w, x, 0, n, 1, &s); return s; }
Q32_TARGET static __attribute__((unused)) void Q32_NAME(dot4_q6_K)(const void *w, const void *x, size_t st, int n, float *s) { Q32_NAME(q6K_tokens)(w, x, st, n, 4, s); }
Q32_TARGET static __attribute__((unused)) void Q32_NAME(dot8_q6_K)(const void *w, const void *x, size_t st, int n, float *s) { Q32_NAME(q6K_tokens)(w, x, st, n, 8, s); }
#undef KQ_MADD_ACC
