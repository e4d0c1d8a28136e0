// f32 vector primitives of the attention and element-wise work, with an AVX2
// version picked at run time (the scalar one is the oracle).
#ifndef INFER_COMPUTE_CPU_VEC_H
#define INFER_COMPUTE_CPU_VEC_H

float vec_dot(const float *a, const float *b, int n);          // sum a[i] * b[i]
void vec_axpy(float *y, float a, const float *x, int n);       // y += a * x

float vec_dot_ref(const float *a, const float *b, int n);
void vec_axpy_ref(float *y, float a, const float *x, int n);

#endif
