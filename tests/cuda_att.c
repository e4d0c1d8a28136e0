// test_cuda's attention checks (linked into test_cuda where CUDA is built):
// flash attention and the split decode kernels against the per-row kernel.
#include "check.h"
#include "cuda_test.h"
#include "tensor/dtype.h"
#include "base/half.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void cuda_att_counts(int *checks, int *failed) { *checks = g_checks, *failed = g_failed; }

// Single rows (each its sequence's only one: decode steps) with their
// positions split over blocks (cuda_attention_split, the default for them)
// against the per-row kernel (cuda_attention_kv) on f32 and f16 caches: rows
// at depths of one chunk, a few and many (5001 positions: 40 of 128), each
// value within 1e-5 of its row's scale (ggml: the probabilities rounded to
// f16 on both sides, 3e-4); each row alone equal to it among the others, bit
// for bit -- a row of one chunk alone goes through the one-block kernel (z =
// 1), among deeper ones through the two -- and the quantized rows
// cuda_quantize's of its floats.
double split_ggml_tol = 3e-4; // (the one-pass kernel rounds the unnormalized probabilities: flash attention's 4e-3)
void check_att_split(cuda_dev *d, int H, int KV, int HD, int kv16, int ggml, int window, float cap, int sink) {
    enum { T = 4, P = 5001 };
    const int pos[T] = {P - 1, 37, 1300, 127}, NQ = H * HD, NKV = KV * HD;
    float *q = malloc(sizeof(float) * T * NQ), *kv = malloc(sizeof(float) * 2 * (size_t)P * NKV), sk[64];
    uint16_t *h16 = malloc(2 * 2 * (size_t)P * NKV);
    for (int i = 0; q && i < T * NQ; i++) q[i] = ggml ? f16_to_f32(f32_to_f16(frand())) : frand();
    for (size_t i = 0; kv && h16 && i < 2 * (size_t)P * NKV; i++) h16[i] = f32_to_f16(frand() * 2), kv[i] = f16_to_f32(h16[i]);
    for (int i = 0; i < H; i++) sk[i] = frand();
    const size_t cb = (kv16 ? 2 : 4) * 2 * (size_t)P * NKV;
    float *dq = q ? dev_copy(d, q, T * NQ) : NULL, *dsk = dev_copy(d, sk, H);
    void *dc = cuda_alloc(d, cb);
    float *o1 = cuda_alloc(d, sizeof(float) * T * NQ), *o2 = cuda_alloc(d, sizeof(float) * T * NQ), *o3 = cuda_alloc(d, sizeof(float) * NQ);
    float *sc = cuda_alloc(d, sizeof(float) * T * H * (size_t)P);
    size_t xr = cuda_act_row_size(DT_Q8_0, NQ), used = (size_t)NQ / 32 * 34;
    void *x1 = cuda_alloc(d, T * xr), *x2 = cuda_alloc(d, T * xr);
    int *dp = cuda_alloc(d, sizeof pos);
    const void *kc = dc, *vc = (const void *)((char *)dc + cb / 2), *tab[2 * T];
    for (int t = 0; t < T; t++) tab[t] = kc, tab[T + t] = vc;
    const void **dt = cuda_alloc(d, sizeof tab);
    const void *const *tk = (const void *const *)dt, *const *tv = tk + T;
    float scale = 1.0f / sqrtf((float)HD);
    const float *sinks = sink ? dsk : NULL;
    const int z = cuda_attention_split_z(d, P);
    int ok = q && kv && h16 && dq && dsk && dc && o1 && o2 && o3 && sc && x1 && x2 && dp && dt && z > 1 && cuda_attention_split_ok(d, H, KV, HD) &&
             !cuda_upload(d, dc, kv16 ? (const void *)h16 : (const void *)kv, cb) && !cuda_upload(d, dp, pos, sizeof pos) &&
             !cuda_upload(d, (void *)dt, tab, sizeof tab) &&
             !cuda_attention_kv(d, dq, o1, T, H, KV, HD, window, dp, tk, tv, scale, cap, sinks, ggml, sc, P, 0, NULL, 0, kv16) &&
             !cuda_attention_split(d, dq, o2, T, H, KV, HD, window, dp, tk, tv, scale, cap, sinks, ggml, sc, P, 0, NULL, kv16, z) &&
             !cuda_sync(d);
    float *a = ok ? host_of(d, o1, (size_t)T * NQ) : NULL, *b = ok ? host_of(d, o2, (size_t)T * NQ) : NULL;
    double worst = 0;
    int finite = 1;
    for (int t = 0; a && b && t < T; t++) {
        double rs = 0;
        for (int i = 0; i < NQ; i++) rs += (double)a[(size_t)t * NQ + i] * a[(size_t)t * NQ + i];
        rs = sqrt(rs / NQ) + 1e-30;
        for (int i = 0; i < NQ; i++) {
            double df = fabs((double)b[(size_t)t * NQ + i] - a[(size_t)t * NQ + i]) / rs;
            finite &= isfinite(b[(size_t)t * NQ + i]);
            worst = df > worst ? df : worst;
        }
    }
    CHECK(ok && a && b && finite && worst <= (ggml ? split_ggml_tol : 1e-5),
          "split attention (%d heads on %d of %d, %s cache, ggml %d, window %d, softcap %g, sinks %d): worst %.3g of a row's scale from "
          "the per-row kernel (%s)", H, KV, HD, kv16 ? "f16" : "f32", ggml, window, cap, sink, worst, cuda_status());
    printf("split attention (%d heads on %d of %d, %s cache, ggml %d, window %d): worst %.3g of a row's scale from the per-row kernel\n",
           H, KV, HD, kv16 ? "f16" : "f32", ggml, window, worst);
    int alone = ok;
    for (int t = 0; t < T && alone; t++)
        alone = !cuda_attention_split(d, dq + (size_t)t * NQ, o3, 1, H, KV, HD, window, dp + t, tk + t, tv + t, scale, cap, sinks, ggml, sc, P,
                                      0, NULL, kv16, cuda_attention_split_z(d, pos[t] + 1)) &&
                same_floats(d, o2 + (size_t)t * NQ, o3, NQ);
    CHECK(alone, "split attention (%d heads on %d of %d, %s cache): a row alone differs from it among the others (%s)", H, KV, HD,
          kv16 ? "f16" : "f32", cuda_status());
    ok = ok && !cuda_attention_split(d, dq, o1, T, H, KV, HD, window, dp, tk, tv, scale, cap, sinks, ggml, sc, P, DT_Q8_0, x1, kv16, z) &&
         !cuda_quantize(d, DT_Q8_0, o2, T, NQ, x2) && same_floats(d, o1, o2, (size_t)T * NQ) && same_rows(d, x1, x2, T, xr, used);
    CHECK(ok, "split attention (%d heads of %d): its quantized rows are not cuda_quantize's of its floats, or its floats differ", H, HD);
    free(a), free(b), free(q), free(kv), free(h16);
    cuda_free(d, dq), cuda_free(d, dsk), cuda_free(d, dc), cuda_free(d, o1), cuda_free(d, o2), cuda_free(d, o3), cuda_free(d, sc);
    cuda_free(d, x1), cuda_free(d, x2), cuda_free(d, dp), cuda_free(d, (void *)dt);
}

// A prompt's rows of one sequence on the tensor cores (cuda_attention_flash) against the per-row
// kernel (cuda_attention_kv), f16 caches under ggml's numerics: the products are exact, the sums'
// order and the f16 rounding of the probabilities (unnormalized there, normalized here) differ, so
// each value is held within 4e-3 of its row's scale and the whole within a normalized error of 1e-6.
// Outside them (ggml 0: q as it is, the probabilities not rounded; flash attention's q and P in two
// halves each) within 1e-4 and 1e-9: the products to ~22 bits, a tolerance 40x under ggml's.
// T rows at positions P0.. of a cache of P0 + T positions: several tiles of keys and a partial one,
// rows past a block's 64. Its quantized rows are cuda_quantize's of its floats.
void check_att_flash(cuda_dev *d, int H, int KV, int HD, int P0, int T, int window, float cap, int sink, int ggml) {
    const int P = P0 + T, NQ = H * HD, NKV = KV * HD;
    float *q = malloc(sizeof(float) * T * NQ), sk[64];
    uint16_t *h16 = malloc(2 * 2 * (size_t)P * NKV);
    int *pos = malloc(sizeof(int) * T);
    for (int i = 0; q && i < T * NQ; i++) q[i] = ggml ? f16_to_f32(f32_to_f16(frand() * 2)) : frand() * 2;
    for (size_t i = 0; h16 && i < 2 * (size_t)P * NKV; i++) h16[i] = f32_to_f16(frand() * 2);
    for (int i = 0; i < H; i++) sk[i] = frand();
    for (int t = 0; pos && t < T; t++) pos[t] = P0 + t;
    float *dq = q ? dev_copy(d, q, T * NQ) : NULL, *dsk = dev_copy(d, sk, H);
    void *dh = cuda_alloc(d, 2 * 2 * (size_t)P * NKV);
    float *o1 = cuda_alloc(d, sizeof(float) * T * NQ), *o2 = cuda_alloc(d, sizeof(float) * T * NQ);
    float *sc = cuda_alloc(d, sizeof(float) * T * H * (size_t)(P + 1));
    size_t xr = cuda_act_row_size(DT_Q8_0, NQ), used = (size_t)NQ / 32 * 34;
    void *x1 = cuda_alloc(d, T * xr), *x2 = cuda_alloc(d, T * xr);
    int *dp = cuda_alloc(d, sizeof(int) * T);
    const void *kc = dh, *vc = (const void *)((char *)dh + 2 * (size_t)P * NKV);
    const void **tab = malloc(sizeof(void *) * 2 * T), **dt = cuda_alloc(d, sizeof(void *) * 2 * T);
    for (int t = 0; tab && t < T; t++) tab[t] = kc, tab[T + t] = vc;
    float scale = 1.0f / sqrtf((float)HD);
    const float *sinks = sink ? dsk : NULL;
    int ok = q && h16 && pos && tab && dq && dsk && dh && o1 && o2 && sc && x1 && x2 && dp && dt &&
             !cuda_upload(d, dh, h16, 2 * 2 * (size_t)P * NKV) && !cuda_upload(d, dp, pos, sizeof(int) * T) &&
             !cuda_upload(d, (void *)dt, tab, sizeof(void *) * 2 * T) && !cuda_sync(d) &&
             !cuda_attention_kv(d, dq, o1, T, H, KV, HD, window, dp, (const void *const *)dt, (const void *const *)dt + T, scale, cap, sinks,
                                ggml, sc, P + 1, 0, NULL, 0, 1) &&
             !cuda_attention_flash(d, dq, o2, T, H, KV, HD, window, dp, kc, vc, scale, cap, sinks, ggml, 0, NULL, 1) && !cuda_sync(d);
    float *a = ok ? host_of(d, o1, (size_t)T * NQ) : NULL, *b = ok ? host_of(d, o2, (size_t)T * NQ) : NULL;
    double e = 0, s2 = 0, worst = 0;
    int finite = 1;
    for (int t = 0; a && b && t < T; t++) {
        double rs = 0;
        for (int i = 0; i < NQ; i++) rs += (double)a[(size_t)t * NQ + i] * a[(size_t)t * NQ + i];
        rs = sqrt(rs / NQ) + 1e-30;
        for (int i = 0; i < NQ; i++) {
            double df = (double)b[(size_t)t * NQ + i] - a[(size_t)t * NQ + i];
            finite &= isfinite(b[(size_t)t * NQ + i]);
            e += df * df, s2 += (double)a[(size_t)t * NQ + i] * a[(size_t)t * NQ + i];
            if (fabs(df) / rs > worst) worst = fabs(df) / rs;
        }
    }
    CHECK(ok && a && b && finite && e <= (ggml ? 1e-6 : 1e-9) * s2 && worst <= (ggml ? 4e-3 : 1e-4),
          "flash attention (%d heads on %d of %d, %d rows at %d, window %d, softcap %g, sinks %d, ggml %d): normalized error %.3g, worst %.3g "
          "of a row's scale, against the per-row kernel (%s)", H, KV, HD, T, P0, window, cap, sink, ggml, s2 > 0 ? e / s2 : -1.0, worst,
          cuda_status());
    printf("flash attention (%d heads on %d of %d, %d rows at %d, ggml %d): normalized error %.3g, worst %.3g\n", H, KV, HD, T, P0, ggml,
           s2 > 0 ? e / s2 : -1.0, worst);
    ok = ok && !cuda_attention_flash(d, dq, o1, T, H, KV, HD, window, dp, kc, vc, scale, cap, sinks, ggml, DT_Q8_0, x1, 1) &&
         !cuda_quantize(d, DT_Q8_0, o2, T, NQ, x2) && same_floats(d, o1, o2, (size_t)T * NQ) && same_rows(d, x1, x2, T, xr, used);
    CHECK(ok, "flash attention (%d heads of %d): its quantized rows are not cuda_quantize's of its floats, or its floats differ", H, HD);
    free(a), free(b), free(q), free(h16), free(pos), free(tab);
    cuda_free(d, dq), cuda_free(d, dsk), cuda_free(d, dh), cuda_free(d, o1), cuda_free(d, o2), cuda_free(d, sc), cuda_free(d, x1);
    cuda_free(d, x2), cuda_free(d, dp), cuda_free(d, (void *)dt);
}
