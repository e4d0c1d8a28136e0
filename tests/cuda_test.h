// Helpers of the CUDA tests (test_cuda.c, cuda_att.c): random floats, device
// copies and comparisons. Each file that includes it has its own generator.
#ifndef INFER_TESTS_CUDA_TEST_H
#define INFER_TESTS_CUDA_TEST_H

#include "compute/cuda/cuda.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static inline float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

static inline float *dev_copy(cuda_dev *d, const float *x, size_t n) {
    float *p = cuda_alloc(d, sizeof(float) * n);
    if (p && cuda_upload(d, p, x, sizeof(float) * n)) { cuda_free(d, p); p = NULL; }
    return p;
}

// n floats at device p, downloaded into a fresh host array (NULL on failure)
static inline float *host_of(cuda_dev *d, const float *p, size_t n) {
    float *h = malloc(sizeof(float) * n);
    if (h && cuda_download(d, h, p, sizeof(float) * n)) { free(h); h = NULL; }
    return h;
}

static inline int same_floats(cuda_dev *d, const float *a, const float *b, size_t n) {
    float *x = host_of(d, a, n), *y = host_of(d, b, n);
    int same = x && y && !memcmp(x, y, sizeof(float) * n);
    free(x), free(y);
    return same;
}

// T rows of xr bytes at x1 and x2 (device) agree in their first `used` bytes each
static inline int same_rows(cuda_dev *d, const void *x1, const void *x2, int T, size_t xr, size_t used) {
    unsigned char *h1 = malloc(T * xr), *h2 = malloc(T * xr);
    int ok = h1 && h2 && !cuda_download(d, h1, x1, T * xr) && !cuda_download(d, h2, x2, T * xr);
    for (int t = 0; t < T && ok; t++) ok = !memcmp(h1 + xr * t, h2 + xr * t, used);
    free(h1), free(h2);
    return ok;
}

#endif
