// Storage types of weights and their traits. The numbering is ggml's
// (ggml_type), so GGUF tensor types map one to one; append only.
#ifndef INFER_TENSOR_DTYPE_H
#define INFER_TENSOR_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "tensor/vecdot.h"

enum dtype {
    DT_F32 = 0,
    DT_F16 = 1,
    DT_Q4_0 = 2,
    DT_Q4_1 = 3,
    DT_Q5_0 = 6,
    DT_Q5_1 = 7,
    DT_Q8_0 = 8,
    DT_Q8_1 = 9,
    DT_Q2_K = 10,
    DT_Q3_K = 11,
    DT_Q4_K = 12,
    DT_Q5_K = 13,
    DT_Q6_K = 14,
    DT_Q8_K = 15,
    DT_BF16 = 30,
    DT_MXFP4 = 39,
    DT_COUNT = 40,
};

// Everything a type is, in one row: one row of a weight matrix is n
// elements = n / blck blocks of `size` bytes.
typedef struct {
    const char *name;   // "f32", "bf16", "q4_K", ... (ggml's spelling)
    int blck;           // elements per block
    size_t size;        // bytes per block
    // y[0..n) = x decoded; n is a multiple of blck.
    void (*to_float)(const void *x, float *y, int64_t n);
    // sum_i w[i] * x[i] over one row of n stored elements (scalar reference).
    float (*dot)(const void *w, const float *x, int64_t n);
    // Encodes n floats (NULL where the type has no encoder).
    void (*from_float)(const float *x, void *y, int64_t n);
    // The matmul's row kernel: the activation format it dots with
    // (ref.act_type), its activation quantizer and the scalar dot, the oracle
    // (ref.dot NULL where there is none) ...
    vecdot_kernel ref;
    // ... and the AVX2 one vecdot_get hands out on a CPU that has it (or NULL).
    const vecdot_kernel *avx2;
    // ... and the AVX-512 VNNI one, preferred to it where the CPU has VNNI
    // (the same results; NULL for most types).
    const vecdot_kernel *vnni;
} dtype_traits;

// NULL for a type number we do not know.
const dtype_traits *dtype_get(int type);

// Bytes of a row of n elements, or 0 if n is not a whole number of blocks.
size_t dtype_row_size(int type, int64_t n);

#endif
