// ggml's quantized formats against vectors from an independent implementation
// (tests/data/quant/*.bin, made by scripts/gen-quant-vectors.py: gguf's Python
// quantizers and dequantizers, and ggml's C reference quantizers).
//
// Per type and row: to_float equals gguf's dequantized floats bit for bit
// (both do the same float products in the same order); dot equals the dot of
// those floats with a pseudo-random vector within 1e-5 of sum |w_i x_i| (dot
// factors the scales out of each block, so only the summation order
// differs); where the row's blocks are a reference quantizer's output,
// from_float gives the same bytes, and its round-trip error is small.
#include "check.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { F_INPUT = 1, F_GGML = 2, F_GGUF = 4, F_RANDOM = 8 };

// file, type, ggml's block size and bytes, bound on the round-trip rms error
// relative to each block's largest |x|
static const struct {
    const char *file;
    int type, blck, size;
    double rt_max;
} cases[] = {
    // a uniform rounding error of step h has rms h/sqrt(12): q4_0's h is max/8, so
    // 0.036; q8_0's max/127, so 0.0023; bounds allow about 25% over that
    {"q4_0", DT_Q4_0, 32, 18, 0.045},  {"q4_1", DT_Q4_1, 32, 20, 0.04},  {"q5_0", DT_Q5_0, 32, 22, 0.022},
    {"q5_1", DT_Q5_1, 32, 24, 0.02},   {"q8_0", DT_Q8_0, 32, 34, 0.003}, {"mxfp4", DT_MXFP4, 32, 17, 0.06},
    {"q2_K", DT_Q2_K, 256, 84, 0.13},  {"q3_K", DT_Q3_K, 256, 110, 0.07}, {"q4_K", DT_Q4_K, 256, 144, 0.025},
    {"q5_K", DT_Q5_K, 256, 176, 0.013}, {"q6_K", DT_Q6_K, 256, 210, 0.008}, {"q8_K", DT_Q8_K, 256, 292, 0.003},
};

static uint32_t g_rng = 12345;
static float frand(void) {  // uniform in [-1, 1)
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / 8388608.0f - 1.0f;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    fclose(f);
    *len = p ? (size_t)n : 0;
    return p;
}

// A bounded cursor over the file.
typedef struct { const unsigned char *p; size_t left; int bad; } cursor;

static const void *take(cursor *c, size_t n) {
    if (c->bad || n > c->left) { c->bad = 1; return NULL; }
    const void *r = c->p;
    c->p += n;
    c->left -= n;
    return r;
}

static uint32_t take_u32(cursor *c) {
    const unsigned char *p = take(c, 4);
    return p ? (uint32_t)p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24 : 0;
}

static void check_row(int ci, int row, int n, int flags, const float *input, const void *blocks_in,
                      const float *expect) {
    const char *name = cases[ci].file;
    const dtype_traits *t = dtype_get(cases[ci].type);
    size_t rs = dtype_row_size(cases[ci].type, n);
    // exact-size copies so any read or write past the row trips ASan
    unsigned char *blocks = malloc(rs);
    float *y = malloc((size_t)n * 4), *x = malloc((size_t)n * 4);
    memcpy(blocks, blocks_in, rs);

    // to_float: bit-exact against gguf
    t->to_float(blocks, y, n);
    int bad = 0, first = -1;
    for (int i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &y[i], 4);
        memcpy(&b, &expect[i], 4);
        if (a != b && !bad++) first = i;
    }
    CHECK(bad == 0, "%s row %d: to_float differs from gguf in %d of %d, first [%d] %.9g vs %.9g", name, row, bad, n,
          first, first >= 0 ? y[first] : 0, first >= 0 ? expect[first] : 0);

    // dot against the dequantized row
    double want = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        x[i] = frand();
        want += (double)expect[i] * x[i];
        mag += fabs((double)expect[i] * x[i]);
    }
    float got = t->dot(blocks, x, n);
    if (getenv("QUANT_VERBOSE"))
        printf("%s row %d: dot error / sum|wx| %.3g, / |dot| %.3g\n", name, row, fabs(got - want) / mag,
               fabs(got - want) / fabs(want));
    CHECK(fabs(got - want) <= 1e-5 * mag + 1e-30, "%s row %d: dot %.9g, want %.9g (sum|wx| %.3g)", name, row, got,
          want, mag);

    // from_float: same bytes as the reference quantizer, small round-trip error
    if ((flags & F_INPUT) && t->from_float) {
        unsigned char *q = malloc(rs);
        t->from_float(input, q, n);
        size_t diff = 0, at = 0;
        for (size_t i = 0; i < rs; i++)
            if (q[i] != blocks[i] && !diff++) at = i;
        CHECK(diff == 0, "%s row %d: from_float differs from %s in %zu of %zu bytes, first at %zu (block %zu)", name,
              row, flags & F_GGML ? "ggml" : "gguf", diff, rs, at, at / (size_t)t->size);
        // error relative to the block's largest |x| (error scales with it, so
        // one outlier block does not hide or swamp the others); a block of
        // zeros must come back as zeros
        t->to_float(q, y, n);
        double e2 = 0;
        int zero_bad = 0;
        for (int b0 = 0; b0 < n; b0 += t->blck) {
            float amax = 0;
            for (int i = b0; i < b0 + t->blck; i++) amax = fabsf(input[i]) > amax ? fabsf(input[i]) : amax;
            for (int i = b0; i < b0 + t->blck; i++) {
                if (amax == 0) zero_bad += y[i] != 0;
                else e2 += ((double)y[i] - input[i]) * ((double)y[i] - input[i]) / ((double)amax * amax);
            }
        }
        double rel = sqrt(e2 / n);
        if (getenv("QUANT_VERBOSE")) printf("%s row %d: round-trip rms error / block max %.4g\n", name, row, rel);
        CHECK(rel <= cases[ci].rt_max && !zero_bad,
              "%s row %d: round-trip rms error / block max %.4g > %.4g, %d zeros lost", name, row, rel,
              cases[ci].rt_max, zero_bad);
        free(q);
    }
    free(blocks);
    free(y);
    free(x);
}

static void check_file(int ci) {
    char path[512];
    snprintf(path, sizeof path, "%s/quant/%s.bin", TEST_DATA_DIR, cases[ci].file);
    size_t len;
    unsigned char *data = read_file(path, &len);
    CHECK(data != NULL, "cannot read %s", path);
    if (!data) return;
    cursor c = {data, len, 0};
    const void *magic = take(&c, 4);
    uint32_t type = take_u32(&c), nrows = take_u32(&c);
    CHECK(magic && !memcmp(magic, "IQV1", 4) && type == (uint32_t)cases[ci].type, "%s: bad header", path);
    int rows_done = 0;
    for (uint32_t r = 0; r < nrows && !c.bad; r++) {
        uint32_t n = take_u32(&c), flags = take_u32(&c);
        size_t rs = dtype_row_size(cases[ci].type, n);
        if (!rs || n > (1u << 20)) { c.bad = 1; break; }
        const float *input = NULL;
        if (flags & F_INPUT) input = take(&c, (size_t)n * 4);
        const void *blocks = take(&c, rs);
        const float *expect = take(&c, (size_t)n * 4);
        if (c.bad) break;
        // the file's floats are unaligned within it: copy out
        float *in = input ? malloc((size_t)n * 4) : NULL, *ex = malloc((size_t)n * 4);
        if (in) memcpy(in, input, (size_t)n * 4);
        memcpy(ex, expect, (size_t)n * 4);
        check_row(ci, (int)r, (int)n, (int)flags, in, blocks, ex);
        free(in);
        free(ex);
        rows_done++;
    }
    CHECK(!c.bad && c.left == 0 && rows_done == (int)nrows, "%s: truncated or malformed", path);
    free(data);
}

// Encoders must survive any floats (NaN, inf, huge, tiny) without UB or
// out-of-bounds writes; the values are unspecified.
static void check_hostile(void) {
    float x[512];
    for (int i = 0; i < 512; i++) x[i] = frand();
    x[3] = NAN;
    x[40] = INFINITY;
    x[77] = -INFINITY;
    x[300] = 3e38f;
    x[301] = -3e38f;
    x[400] = 1e-40f;
    for (int i = 256; i < 288; i++) x[i] = 1e-30f;
    for (int k = 0; k < DT_COUNT; k++) {
        const dtype_traits *t = dtype_get(k);
        if (!t || !t->from_float) continue;
        size_t rs = dtype_row_size(k, 512);
        unsigned char *q = malloc(rs);
        float *y = malloc(512 * 4);
        t->from_float(x, q, 512);
        t->to_float(q, y, 512);
        (void)t->dot(q, x, 512);
        free(q);
        free(y);
    }
    CHECK(1, "hostile floats");
}

int main(void) {
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int ci = 0; ci < n; ci++) {
        const dtype_traits *t = dtype_get(cases[ci].type);
        CHECK(t != NULL, "%s: not in the traits table", cases[ci].file);
        if (!t) continue;
        CHECK(!strcmp(t->name, cases[ci].file) && t->blck == cases[ci].blck && t->size == (size_t)cases[ci].size,
              "%s: traits %s %d %zu, ggml has %d %d", cases[ci].file, t->name, t->blck, t->size, cases[ci].blck,
              cases[ci].size);
        check_file(ci);
    }
    check_hostile();
    return check_summary("quant");
}
