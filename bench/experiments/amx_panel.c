// Issue 41's prompt product on AMX, as a prototype: weights decoded once to
// int8 per (row, 256 columns) with one float scale each (a requantization:
// not the VNNI kernel's bits), laid out as TDPBSSD's B tiles (16 rows x 64
// columns a tile), against q8_K-like activations (int8, a float scale a
// token and 256 columns): a super-block is four K=64 steps into int32 C
// tiles, then one convert and one fma a (token, row). Panels of 32 rows x 16
// tokens: two B tiles and one A tile a step, the C tiles of alternate
// super-blocks double-buffered (7 tiles). One core; prints GOPS against the
// tiles' peak (1024 int8 MACs a cycle at the clock given) and the error
// against float sums of the decoded weights.
//   cc -O2 -mavx512f -mavx512bw -o /tmp/amx_panel bench/experiments/amx_panel.c && /tmp/amx_panel [rows cols tokens GHz]
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

static void config(void) { // C 0-3: 16 x 64 B; A 4: 16 tokens x 64 B; B 6, 7: 16 x 64 B
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}

static float frand(unsigned *s) { return (float)((*s = *s * 1103515245u + 12345u) >> 8) / 16777216.0f * 2.0f - 1.0f; }

// w (rows x n floats) to the panel layout: for each group of 16 rows, for each 64-column step, 16 k4 rows of
// 16 rows x 4 bytes; scales ws[group][superblock][16]
static void pack_panel(const float *w, int rows, int n, int8_t *b, float *ws) {
    const int nb = n / 256;
    for (int g = 0; g < rows / 16; g++)
        for (int sb = 0; sb < nb; sb++) {
            float *s = ws + ((size_t)g * nb + sb) * 16;
            for (int r = 0; r < 16; r++) {
                float m = 0;
                for (int k = 0; k < 256; k++) m = fmaxf(m, fabsf(w[(size_t)(16 * g + r) * n + 256 * sb + k]));
                s[r] = m / 127.0f;
            }
            for (int st = 0; st < 4; st++) {
                int8_t *t = b + (((size_t)g * nb + sb) * 4 + st) * 1024;
                for (int k4 = 0; k4 < 16; k4++)
                    for (int r = 0; r < 16; r++)
                        for (int e = 0; e < 4; e++) {
                            float v = w[(size_t)(16 * g + r) * n + 256 * sb + 64 * st + 4 * k4 + e];
                            t[64 * k4 + 4 * r + e] = (int8_t)(s[r] ? lrintf(v / s[r]) : 0);
                        }
            }
        }
}

// y[t][row] for rows [32 p, 32 p + 32) and tokens [16 q, 16 q + 16)
static void panel(const int8_t *b, const float *ws, int n, const int8_t *xq, const float *xd, int p, int q, float *y, int ldy) {
    const int nb = n / 256;
    float acc[16][32] __attribute__((aligned(64)));
    int32_t cb[2][4][256] __attribute__((aligned(64)));
    memset(acc, 0, sizeof acc);
    const int8_t *b0 = b + (size_t)(2 * p) * nb * 4096, *b1 = b0 + (size_t)nb * 4096;
    const float *s0 = ws + (size_t)(2 * p) * nb * 16, *s1 = s0 + (size_t)nb * 16;
    const int8_t *a = xq + (size_t)16 * q * n;
    const long xs = n, cs = 64;
    for (int sb = 0; sb <= nb; sb++) {
        if (sb < nb) {
            if (sb & 1) __asm__ volatile("tilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
            else __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1" ::: "memory");
            for (int st = 0; st < 4; st++) {
                const int8_t *ap = a + 256 * sb + 64 * st, *bp0 = b0 + ((size_t)sb * 4 + st) * 1024, *bp1 = b1 + ((size_t)sb * 4 + st) * 1024;
                __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n\t"
                                 "tileloadd (%2,%3,1), %%tmm6\n\t"
                                 "tileloadd (%4,%3,1), %%tmm7" ::"r"(ap), "r"(xs), "r"(bp0), "r"(cs), "r"(bp1)
                                 : "memory");
                if (sb & 1) __asm__ volatile("tdpbssd %%tmm6, %%tmm4, %%tmm2\n\ttdpbssd %%tmm7, %%tmm4, %%tmm3" ::: "memory");
                else __asm__ volatile("tdpbssd %%tmm6, %%tmm4, %%tmm0\n\ttdpbssd %%tmm7, %%tmm4, %%tmm1" ::: "memory");
            }
        }
        if (sb >= 1) { // super-block sb - 1: its sums (their products had this one's issue to finish), then the floats
            const int k = sb - 1;
            int32_t *c0 = cb[k & 1][0], *c1 = cb[k & 1][1];
            if (k & 1) __asm__ volatile("tilestored %%tmm2, (%0,%2,1)\n\ttilestored %%tmm3, (%1,%2,1)" ::"r"(c0), "r"(c1), "r"(cs) : "memory");
            else __asm__ volatile("tilestored %%tmm0, (%0,%2,1)\n\ttilestored %%tmm1, (%1,%2,1)" ::"r"(c0), "r"(c1), "r"(cs) : "memory");
            const __m512 w0 = _mm512_loadu_ps(s0 + 16 * k), w1 = _mm512_loadu_ps(s1 + 16 * k);
            for (int t = 0; t < 16; t++) {
                const __m512 d = _mm512_set1_ps(xd[(size_t)(16 * q + t) * nb + k]);
                __m512 y0 = _mm512_load_ps(acc[t]), y1 = _mm512_load_ps(acc[t] + 16);
                y0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0 + 16 * t)), _mm512_mul_ps(w0, d), y0);
                y1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c1 + 16 * t)), _mm512_mul_ps(w1, d), y1);
                _mm512_store_ps(acc[t], y0), _mm512_store_ps(acc[t] + 16, y1);
            }
        }
    }
    for (int t = 0; t < 16; t++) memcpy(y + (size_t)(16 * q + t) * ldy + 32 * p, acc[t], sizeof acc[t]);
}

// The same for 32 rows x 32 tokens a panel: A tiles 4 and 5, B 6 and 7, C 0-3 each a (token group, row
// group); stored after each super-block (no double buffer: the 8 tiles are taken).
static void panel22(const int8_t *b, const float *ws, int n, const int8_t *xq, const float *xd, int p, int q, float *y, int ldy) {
    const int nb = n / 256;
    float acc[32][32] __attribute__((aligned(64)));
    int32_t cb[4][256] __attribute__((aligned(64)));
    memset(acc, 0, sizeof acc);
    const int8_t *b0 = b + (size_t)(2 * p) * nb * 4096, *b1 = b0 + (size_t)nb * 4096;
    const float *s0 = ws + (size_t)(2 * p) * nb * 16, *s1 = s0 + (size_t)nb * 16;
    const int8_t *a = xq + (size_t)32 * q * n, *a1 = a + (size_t)16 * n;
    const long xs = n, cs = 64;
    for (int sb = 0; sb < nb; sb++) {
        __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
        for (int st = 0; st < 4; st++) {
            const int8_t *ap = a + 256 * sb + 64 * st, *ap1 = a1 + 256 * sb + 64 * st;
            const int8_t *bp0 = b0 + ((size_t)sb * 4 + st) * 1024, *bp1 = b1 + ((size_t)sb * 4 + st) * 1024;
            __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n\t"
                             "tileloadd (%2,%3,1), %%tmm6\n\t"
                             "tdpbssd %%tmm6, %%tmm4, %%tmm0\n\t"
                             "tileloadd (%4,%3,1), %%tmm7\n\t"
                             "tdpbssd %%tmm7, %%tmm4, %%tmm1\n\t"
                             "tileloadd (%5,%1,1), %%tmm5\n\t"
                             "tdpbssd %%tmm6, %%tmm5, %%tmm2\n\t"
                             "tdpbssd %%tmm7, %%tmm5, %%tmm3" ::"r"(ap), "r"(xs), "r"(bp0), "r"(cs), "r"(bp1), "r"(ap1)
                             : "memory");
        }
        __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                         "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)" ::"r"(cb[0]), "r"(cb[1]), "r"(cb[2]), "r"(cb[3]), "r"(cs)
                         : "memory");
        const __m512 w0 = _mm512_loadu_ps(s0 + 16 * sb), w1 = _mm512_loadu_ps(s1 + 16 * sb);
        for (int t = 0; t < 32; t++) {
            const __m512 d = _mm512_set1_ps(xd[(size_t)(32 * q + t) * nb + sb]);
            const int32_t *c0 = cb[t < 16 ? 0 : 2] + 16 * (t % 16), *c1 = cb[t < 16 ? 1 : 3] + 16 * (t % 16);
            __m512 y0 = _mm512_load_ps(acc[t]), y1 = _mm512_load_ps(acc[t] + 16);
            y0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0)), _mm512_mul_ps(w0, d), y0);
            y1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c1)), _mm512_mul_ps(w1, d), y1);
            _mm512_store_ps(acc[t], y0), _mm512_store_ps(acc[t] + 16, y1);
        }
    }
    for (int t = 0; t < 32; t++) memcpy(y + (size_t)(32 * q + t) * ldy + 32 * p, acc[t], sizeof acc[t]);
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// bf16 instead (BF16=1): weights as A tiles (16 rows x 32 columns, row-major), tokens as B tiles (16 column
// pairs x 16 tokens), the fp32 C tiles summing the whole row: no per-block conversion. 32 rows x 32 tokens.
static void panel_bf16(const uint16_t *wb, int n, const uint16_t *xb, int p, int q, float *y, int ldy) {
    const int ns = n / 32;
    float cb[4][256] __attribute__((aligned(64)));
    const uint16_t *a0 = wb + (size_t)(2 * p) * ns * 512, *a1 = a0 + (size_t)ns * 512;
    const uint16_t *b0 = xb + (size_t)(2 * q) * ns * 512, *b1 = b0 + (size_t)ns * 512;
    const long cs = 64;
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
    for (int st = 0; st < ns; st++) {
        const uint16_t *pa0 = a0 + 512 * st, *pa1 = a1 + 512 * st, *pb0 = b0 + 512 * st, *pb1 = b1 + 512 * st;
        __asm__ volatile("tileloadd (%0,%4,1), %%tmm4\n\t"
                         "tileloadd (%2,%4,1), %%tmm6\n\t"
                         "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                         "tileloadd (%1,%4,1), %%tmm5\n\t"
                         "tdpbf16ps %%tmm6, %%tmm5, %%tmm1\n\t"
                         "tileloadd (%3,%4,1), %%tmm7\n\t"
                         "tdpbf16ps %%tmm7, %%tmm4, %%tmm2\n\t"
                         "tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::"r"(pa0), "r"(pa1), "r"(pb0), "r"(pb1), "r"(cs)
                         : "memory");
    }
    __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                     "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)" ::"r"(cb[0]), "r"(cb[1]), "r"(cb[2]), "r"(cb[3]), "r"(cs)
                     : "memory");
    for (int c = 0; c < 4; c++) // C tile c: rows 16 (c & 1) of the panel, tokens 16 (c >> 1): C[row][token]
        for (int r = 0; r < 16; r++)
            for (int t = 0; t < 16; t++) y[(size_t)(32 * q + 16 * (c >> 1) + t) * ldy + 32 * p + 16 * (c & 1) + r] = cb[c][16 * r + t];
}

int main(int argc, char **argv) {
    const int rows = argc > 1 ? atoi(argv[1]) : 4096, n = argc > 2 ? atoi(argv[2]) : 4096, T = argc > 3 ? atoi(argv[3]) : 512;
    const double ghz = argc > 4 ? atof(argv[4]) : 2.0;
    if (rows % 32 || n % 256 || T % 16) return fprintf(stderr, "rows %% 32, cols %% 256, tokens %% 16\n"), 1;
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return fprintf(stderr, "no AMX permission\n"), 1;
    const int nb = n / 256;
    unsigned seed = 7;
    float *w = malloc(sizeof(float) * (size_t)rows * n), *x = malloc(sizeof(float) * (size_t)T * n);
    for (size_t i = 0; i < (size_t)rows * n; i++) w[i] = frand(&seed) * (1.0f + (float)(i % 97) / 50.0f);
    for (size_t i = 0; i < (size_t)T * n; i++) x[i] = frand(&seed);
    int8_t *b = aligned_alloc(64, (size_t)rows * n), *xq = aligned_alloc(64, (size_t)T * n);
    float *ws = malloc(sizeof(float) * (size_t)rows * nb), *xd = malloc(sizeof(float) * (size_t)T * nb);
    float *y = malloc(sizeof(float) * (size_t)T * rows);
    pack_panel(w, rows, n, b, ws);
    for (int t = 0; t < T; t++) // (q8_K-like: a scale a 256 columns)
        for (int sb = 0; sb < nb; sb++) {
            float m = 0;
            for (int k = 0; k < 256; k++) m = fmaxf(m, fabsf(x[(size_t)t * n + 256 * sb + k]));
            float d = m / 127.0f;
            xd[(size_t)t * nb + sb] = d;
            for (int k = 0; k < 256; k++) xq[(size_t)t * n + 256 * sb + k] = (int8_t)(d ? lrintf(x[(size_t)t * n + 256 * sb + k] / d) : 0);
        }
    int bf = getenv("BF16") != NULL;
    uint16_t *wb = NULL, *xb = NULL;
    if (bf) {
        const int ns = n / 32;
        wb = aligned_alloc(64, (size_t)rows * n * 2), xb = aligned_alloc(64, (size_t)T * n * 2);
        for (int g = 0; g < rows / 16; g++)
            for (int st = 0; st < ns; st++)
                for (int r = 0; r < 16; r++)
                    for (int k = 0; k < 32; k++) wb[(((size_t)g * ns + st) * 16 + r) * 32 + k] = to_bf16(w[(size_t)(16 * g + r) * n + 32 * st + k]);
        for (int g = 0; g < T / 16; g++)
            for (int st = 0; st < ns; st++)
                for (int k2 = 0; k2 < 16; k2++)
                    for (int t = 0; t < 16; t++)
                        for (int e = 0; e < 2; e++)
                            xb[(((size_t)g * ns + st) * 16 + k2) * 32 + 2 * t + e] = to_bf16(x[(size_t)(16 * g + t) * n + 32 * st + 2 * k2 + e]);
        tilecfg c;
        memset(&c, 0, sizeof c);
        c.palette = 1;
        for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
        __asm__ volatile("ldtilecfg %0" ::"m"(c));
    } else
        config();
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (int p = 0; p < rows / 32; p++) // (a panel of weights against every token: its B tiles stay in L2)
            if (bf)
                for (int q = 0; q < T / 32; q++) panel_bf16(wb, n, xb, p, q, y, rows);
            else if (getenv("PANEL22"))
                for (int q = 0; q < T / 32; q++) panel22(b, ws, n, xq, xd, p, q, y, rows);
            else
                for (int q = 0; q < T / 16; q++) panel(b, ws, n, xq, xd, p, q, y, rows);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    __asm__ volatile("tilerelease");
    double macs = (double)rows * n * T, err = 0, ref2 = 0;
    for (int t = 0; t < T; t += 37)
        for (int r = 0; r < rows; r += 13) {
            double s = 0;
            for (int k = 0; k < n; k++) s += (double)w[(size_t)r * n + k] * x[(size_t)t * n + k];
            err += (y[(size_t)t * rows + r] - s) * (y[(size_t)t * rows + r] - s), ref2 += s * s;
        }
    printf("%d x %d, %d tokens: %.2f ms, %.1f GMAC/s, %.1f%% of the tiles' peak at %.1f GHz; error %.2e of the sums' RMS\n", rows, n, T,
           1e3 * best, macs / best * 1e-9, 100 * macs / best / (1024 * ghz * 1e9), ghz, sqrt(err / ref2));
    return 0;
}
