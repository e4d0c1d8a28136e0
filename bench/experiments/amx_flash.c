// Issue 41's long-prompt attention on AMX-BF16, as a prototype: one KV head
// (hd 128), its GQA group of 4 query heads, a prompt block of T tokens at
// depth D (causal: token t sees keys 0 .. D + t). Keys and values converted
// once to bf16 tiles (K as B tiles of 16 keys x 32 dims, V as B tiles of 32
// keys x 16 dims); the query rows (token, head) 16 at a time as A tiles,
// scores of 64 keys a step into four C tiles, an online softmax (exp2) in
// AVX-512 writing bf16 probabilities as an A tile, and the output's 16 x 128
// floats in memory, each 16-dim tile loaded into C, two TDPBF16PS added, stored.
// Against the plain way (AVX-512 f32: every query row's scores, softmax, then
// the values, as the CPU backend does it today) and a double-precision oracle.
//   cc -O2 -march=native -o /tmp/amx_flash bench/experiments/amx_flash.c -lm && /tmp/amx_flash [T D]
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { HD = 128, G = 4, KB = 64 };

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

static uint16_t bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float frand(unsigned *s) { return (float)((*s = *s * 1103515245u + 12345u) >> 8) / 16777216.0f * 2.0f - 1.0f; }

// 2^x for x <= 0 (x >= -126 after clamping), ~1e-7 relative
static inline __m512 exp2_512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    __m512 fl = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(x, fl);
    __m512 p = _mm512_set1_ps(1.8775767e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(8.9893397e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5826318e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4015361e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9315308e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.9999994e-1f));
    return _mm512_scalef_ps(p, fl);
}

// the plain way: per query row, its scores (f32), softmax, then the values
static void plain(const float *q, const float *k, const float *v, int T, int D, float scale, float *o, float *s) {
    for (int t = 0; t < T; t++)
        for (int g = 0; g < G; g++) {
            const float *qr = q + ((size_t)t * G + g) * HD;
            int n = D + t + 1;
            float m = -INFINITY;
            for (int p = 0; p < n; p++) {
                __m512 a = _mm512_setzero_ps();
                for (int i = 0; i < HD; i += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(qr + i), _mm512_loadu_ps(k + (size_t)p * HD + i), a);
                s[p] = _mm512_reduce_add_ps(a) * scale;
                m = fmaxf(m, s[p]);
            }
            float l = 0;
            for (int p = 0; p < n; p++) s[p] = expf(s[p] - m), l += s[p];
            __m512 acc[8];
            for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
            for (int p = 0; p < n; p++) {
                __m512 w = _mm512_set1_ps(s[p] / l);
                for (int j = 0; j < 8; j++) acc[j] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + (size_t)p * HD + 16 * j), acc[j]);
            }
            for (int j = 0; j < 8; j++) _mm512_storeu_ps(o + ((size_t)t * G + g) * HD + 16 * j, acc[j]);
        }
}

// K (n keys) as B tiles: tile (key block kb of 16, dim step ds of 32): row j, key c: dims 32 ds + 2 j, +1
static void pack_k(const float *k, int n, uint16_t *kt) {
    for (int kb = 0; kb < (n + 15) / 16; kb++)
        for (int ds = 0; ds < HD / 32; ds++)
            for (int j = 0; j < 16; j++)
                for (int c = 0; c < 16; c++)
                    for (int e = 0; e < 2; e++) {
                        int key = 16 * kb + c;
                        kt[(((size_t)kb * 4 + ds) * 16 + j) * 32 + 2 * c + e] = key < n ? bf(k[(size_t)key * HD + 32 * ds + 2 * j + e]) : 0;
                    }
}

// V as B tiles: tile (key block kb of 32, dim tile dt of 16): row j, dim c: keys 32 kb + 2 j, +1
static void pack_v(const float *v, int n, uint16_t *vt) {
    for (int kb = 0; kb < (n + 31) / 32; kb++)
        for (int dt = 0; dt < HD / 16; dt++)
            for (int j = 0; j < 16; j++)
                for (int c = 0; c < 16; c++)
                    for (int e = 0; e < 2; e++) {
                        int key = 32 * kb + 2 * j + e;
                        vt[(((size_t)kb * 8 + dt) * 16 + j) * 32 + 2 * c + e] = key < n ? bf(v[(size_t)key * HD + 16 * dt + c]) : 0;
                    }
}

// 16 query rows (row r: token t0 + r / G, head r % G) against keys [0, D + t0 + 3]
static void flash16(const float *q, const uint16_t *kt, const uint16_t *vt, int t0, int D, float scale, float *o) {
    uint16_t qa[16 * HD] __attribute__((aligned(64))), pa[16 * KB] __attribute__((aligned(64)));
    float s[4][256] __attribute__((aligned(64))), O[16 * HD] __attribute__((aligned(64))), m[16], l[16], al[16];
    int lim[16];
    const float c = scale * 1.4426950408889634f; // (exp2)
    for (int r = 0; r < 16; r++) {
        for (int i = 0; i < HD; i++) qa[r * HD + i] = bf(q[((size_t)(t0 + r / G) * G + r % G) * HD + i] * c);
        m[r] = -INFINITY, l[r] = 0, lim[r] = D + t0 + r / G;
    }
    memset(O, 0, sizeof O);
    const int n = D + t0 + 16 / G; // keys any row sees
    const long s64 = 64, s256 = 256, s512 = 512, s128 = 128;
    for (int k0 = 0; k0 < n; k0 += KB) {
        __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
        for (int ds = 0; ds < HD / 32; ds++) {
            const uint16_t *kp = kt + ((size_t)(k0 / 16) * 4 + ds) * 512;
            __asm__ volatile("tileloadd (%0,%1,1), %%tmm4" ::"r"(qa + 32 * ds), "r"(s256) : "memory");
            __asm__ volatile("tileloadd (%0,%2,1), %%tmm6\n\t"
                             "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                             "tileloadd (%1,%2,1), %%tmm7\n\t"
                             "tdpbf16ps %%tmm7, %%tmm4, %%tmm1" ::"r"(kp), "r"(kp + 4 * 512), "r"(s64)
                             : "memory");
            __asm__ volatile("tileloadd (%0,%2,1), %%tmm6\n\t"
                             "tdpbf16ps %%tmm6, %%tmm4, %%tmm2\n\t"
                             "tileloadd (%1,%2,1), %%tmm7\n\t"
                             "tdpbf16ps %%tmm7, %%tmm4, %%tmm3" ::"r"(kp + 8 * 512), "r"(kp + 12 * 512), "r"(s64)
                             : "memory");
        }
        __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                         "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)" ::"r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s64)
                         : "memory");
        int rescale = 0;
        for (int r = 0; r < 16; r++) { // row r's 64 scores: s[j][16 r + c] is key k0 + 16 j + c
            __m512 x[4];
            for (int j = 0; j < 4; j++) {
                x[j] = _mm512_load_ps(s[j] + 16 * r);
                int over = k0 + 16 * j + 16 - 1 - lim[r]; // keys past the row's position: -inf
                if (over > 0) {
                    __mmask16 keep = over >= 16 ? 0 : (__mmask16)((1u << (16 - over)) - 1);
                    x[j] = _mm512_mask_blend_ps(keep, _mm512_set1_ps(-INFINITY), x[j]);
                }
            }
            float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3])));
            float mn = fmaxf(m[r], mx);
            al[r] = m[r] == mn ? 1.0f : exp2f(m[r] - mn);
            rescale |= al[r] != 1.0f;
            m[r] = mn;
            __m512 sum = _mm512_setzero_ps();
            for (int j = 0; j < 4; j++) {
                __m512 p = exp2_512(_mm512_sub_ps(x[j], _mm512_set1_ps(mn)));
                sum = _mm512_add_ps(sum, p);
                _mm256_storeu_si256((__m256i *)(pa + r * KB + 16 * j), (__m256i)_mm512_cvtneps_pbh(p));
            }
            l[r] = l[r] * al[r] + _mm512_reduce_add_ps(sum);
        }
        if (rescale)
            for (int r = 0; r < 16; r++)
                if (al[r] != 1.0f)
                    for (int i = 0; i < HD; i += 16) _mm512_store_ps(O + r * HD + i, _mm512_mul_ps(_mm512_load_ps(O + r * HD + i), _mm512_set1_ps(al[r])));
        __asm__ volatile("tileloadd (%0,%2,1), %%tmm4\n\ttileloadd (%1,%2,1), %%tmm5" ::"r"(pa), "r"(pa + 32), "r"(s128) : "memory");
        for (int dt = 0; dt < HD / 16; dt++) {
            const uint16_t *v0 = vt + ((size_t)(k0 / 32) * 8 + dt) * 512, *v1 = v0 + 8 * 512;
            __asm__ volatile("tileloadd (%0,%3,1), %%tmm0\n\t"
                             "tileloadd (%1,%4,1), %%tmm6\n\t"
                             "tileloadd (%2,%4,1), %%tmm7\n\t"
                             "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                             "tdpbf16ps %%tmm7, %%tmm5, %%tmm0\n\t"
                             "tilestored %%tmm0, (%0,%3,1)" ::"r"(O + 16 * dt), "r"(v0), "r"(v1), "r"(s512), "r"(s64)
                             : "memory");
        }
    }
    for (int r = 0; r < 16; r++)
        for (int i = 0; i < HD; i++) o[((size_t)(t0 + r / G) * G + r % G) * HD + i] = O[r * HD + i] / l[r];
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 512, D = argc > 2 ? atoi(argv[2]) : 4096, n = D + T;
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return fprintf(stderr, "no AMX permission\n"), 1;
    unsigned seed = 3;
    float *q = malloc(sizeof(float) * T * G * HD), *k = calloc((size_t)(n + 64) * HD, sizeof(float)), *v = calloc((size_t)(n + 64) * HD, sizeof(float));
    for (size_t i = 0; i < (size_t)T * G * HD; i++) q[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)n * HD; i++) k[i] = frand(&seed), v[i] = frand(&seed);
    float *o1 = malloc(sizeof(float) * T * G * HD), *o2 = malloc(sizeof(float) * T * G * HD), *s = malloc(sizeof(float) * n);
    uint16_t *kt = aligned_alloc(64, (size_t)(n + 64) * HD * 2), *vt = aligned_alloc(64, (size_t)(n + 64) * HD * 2);
    const float scale = 0.3f; // (sharper than 1/sqrt(128): the softmax's max moves)
    tilecfg cf;
    memset(&cf, 0, sizeof cf);
    cf.palette = 1;
    for (int t = 0; t < 8; t++) cf.rows[t] = 16, cf.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(cf));
    double tp = 1e30, tf = 1e30, tk = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        plain(q, k, v, T, D, scale, o1, s);
        double t1 = now();
        pack_k(k, n + 64, kt), pack_v(v, n + 64, vt);
        double t2 = now();
        for (int t0q = 0; t0q < T; t0q += 16 / G) flash16(q, kt, vt, t0q, D, scale, o2);
        double t3 = now();
        tp = fmin(tp, t1 - t0), tk = fmin(tk, t2 - t1), tf = fmin(tf, t3 - t2);
    }
    __asm__ volatile("tilerelease");
    double e1 = 0, e2 = 0, r2 = 0;
    for (int t = 0; t < T; t += 7)
        for (int g = 0; g < G; g++) {
            const float *qr = q + ((size_t)t * G + g) * HD;
            int nn = D + t + 1;
            double *sc = malloc(sizeof(double) * nn), mx = -1e300, l = 0;
            for (int p = 0; p < nn; p++) {
                double d = 0;
                for (int i = 0; i < HD; i++) d += (double)qr[i] * k[(size_t)p * HD + i];
                sc[p] = d * scale, mx = fmax(mx, sc[p]);
            }
            for (int p = 0; p < nn; p++) sc[p] = exp(sc[p] - mx), l += sc[p];
            for (int i = 0; i < HD; i++) {
                double w = 0;
                for (int p = 0; p < nn; p++) w += sc[p] * v[(size_t)p * HD + i];
                w /= l;
                double a = o1[((size_t)t * G + g) * HD + i], b = o2[((size_t)t * G + g) * HD + i];
                e1 += (a - w) * (a - w), e2 += (b - w) * (b - w), r2 += w * w;
            }
            free(sc);
        }
    double macs = 0;
    for (int t = 0; t < T; t++) macs += 2.0 * G * HD * (D + t + 1);
    printf("T %d at depth %d, hd %d, %d heads a KV head: plain %.1f ms (%.1f GMAC/s), flash AMX %.1f ms (%.1f GMAC/s) + K/V to tiles %.1f ms; "
           "error vs double: plain %.2e, flash %.2e\n",
           T, D, HD, G, 1e3 * tp, macs / tp * 1e-9, 1e3 * tf, macs / tf * 1e-9, 1e3 * tk, sqrt(e1 / r2), sqrt(e2 / r2));
    return 0;
}
