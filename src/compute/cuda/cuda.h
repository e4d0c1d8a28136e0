// The CUDA device layer: device memory, the activation quantizers and the
// matrix products of every stored type on an NVIDIA GPU (sm_90 builds).
//
// Built from cuda.cu when nvcc is found at configure time (INFER_HAVE_CUDA);
// otherwise none.c answers "built without CUDA". A build with CUDA runs on a
// machine without a GPU or driver too: cuda_device_count() is then 0 and
// cuda_status() says why. Pointers named d_* are device memory.
//
// The products follow the CPU's oracles (tensor/vecdot_ref.c): quantized
// weights meet activations quantized as the CPU quantizes them (q8_0 blocks,
// or q8_K for the k-quants: the same bytes), each block's integer sum is
// scaled as the oracle scales it, and only the order in which the blocks'
// float contributions are added differs (a warp's tree).
#ifndef INFER_COMPUTE_CUDA_H
#define INFER_COMPUTE_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_dev cuda_dev;

// GPUs usable here (0 without a driver, a device, or CUDA in the build).
int cuda_device_count(void);
// Why cuda_device_count() is 0 (or "ok").
const char *cuda_status(void);
// Opens GPU `ordinal` with a stream of its own; NULL (and cuda_status says
// why) when it cannot.
cuda_dev *cuda_open(int ordinal);
void cuda_close(cuda_dev *d);
// The device's name, e.g. "NVIDIA H200".
const char *cuda_name(const cuda_dev *d);

void *cuda_alloc(cuda_dev *d, size_t bytes); // NULL on failure
void cuda_free(cuda_dev *d, void *p);
int cuda_upload(cuda_dev *d, void *d_dst, const void *src, size_t bytes);   // 0 on success
int cuda_download(cuda_dev *d, void *dst, const void *d_src, size_t bytes); // waits for the stream
int cuda_sync(cuda_dev *d);

// Bytes of one token's activations for weights of type wtype (n columns):
// q8_0 blocks for the 32-element types, q8_K for the k-quants, f32 for float
// weights; 0 for a type without a GPU product.
size_t cuda_act_row_size(int wtype, int n);
// Quantizes T rows of n floats (d_x) for weights of type wtype into d_xq
// (rows of cuda_act_row_size bytes); float types copy.
int cuda_quantize(cuda_dev *d, int wtype, const float *d_x, int T, int n, void *d_xq);
// d_y (T, rows) = activations (T, cols) @ W^T, W `rows` rows of `cols` in
// its stored type wtype (the mapped bytes, uploaded), the activations as
// cuda_quantize made them.
int cuda_matmul(cuda_dev *d, int wtype, const void *d_w, int rows, int cols, const void *d_xq, int T, float *d_y);

#ifdef __cplusplus
}
#endif

#endif
