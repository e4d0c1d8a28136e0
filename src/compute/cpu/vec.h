// f32 vector primitives of the attention and element-wise work, with an AVX2
// version picked at run time (the scalar one is the oracle).
#ifndef INFER_COMPUTE_CPU_VEC_H
#define INFER_COMPUTE_CPU_VEC_H

#include <stddef.h>
#include <stdint.h>
#include "base/cpu.h"

float vec_dot(const float *a, const float *b, int n);          // sum a[i] * b[i]
void vec_axpy(float *y, float a, const float *x, int n);       // y += a * x

// x = x rounded to f16 (round half to even), as ggml stores K/V in f16.
void vec_round_f16(float *x, size_t n);
void vec_round_f16_ref(float *x, size_t n);
// dst = x as f16 (round half to even), and back
void vec_to_f16(uint16_t *dst, const float *x, size_t n);
void vec_from_f16(float *dst, const uint16_t *h, size_t n);

// In place: x = softmax(x) (max subtracted, SIMD exp); returns the sum of
// the exponentials.
float vec_softmax(float *x, int n);
float vec_softmax_ref(float *x, int n);

// sum of x[i]^2: squares in float, summed in double (as ggml's rms_norm)
double vec_sumsq(const float *x, int n);
double vec_sumsq_ref(const float *x, int n);

// y += a * row, the row (n elements of dtype `type`) decoded on the fly.
void vec_axpy_row(float *y, float a, const void *row, int type, int n);
void vec_axpy_row_ref(float *y, float a, const void *row, int type, int n);

// In place: SiLU x / (1 + e^-x) and GELU 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void vec_silu(float *x, int n);
void vec_gelu_tanh(float *x, int n);
void vec_silu_ref(float *x, int n);
void vec_gelu_tanh_ref(float *x, int n);

// The first i < n with x[i] > thr (NaN is never above), or n.
int vec_first_above(const float *x, int n, float thr);
int vec_first_above_ref(const float *x, int n, float thr);

float vec_dot_ref(const float *a, const float *b, int n);
void vec_axpy_ref(float *y, float a, const float *x, int n);

#endif
