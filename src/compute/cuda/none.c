// The CUDA device layer in a build without CUDA (nvcc was not found, or
// INFER_CUDA=OFF): no device, and cuda_status() says so.
#ifndef INFER_HAVE_CUDA
#include "compute/cuda/cuda.h"

int cuda_device_count(void) { return 0; }
const char *cuda_status(void) { return "built without CUDA (nvcc not found at configure time, or INFER_CUDA=OFF)"; }
cuda_dev *cuda_open(int ordinal) { (void)ordinal; return NULL; }
void cuda_close(cuda_dev *d) { (void)d; }
const char *cuda_name(const cuda_dev *d) { (void)d; return ""; }
void *cuda_alloc(cuda_dev *d, size_t bytes) { (void)d, (void)bytes; return NULL; }
void cuda_free(cuda_dev *d, void *p) { (void)d, (void)p; }
int cuda_upload(cuda_dev *d, void *dst, const void *src, size_t bytes) { (void)d, (void)dst, (void)src, (void)bytes; return -1; }
int cuda_download(cuda_dev *d, void *dst, const void *src, size_t bytes) { (void)d, (void)dst, (void)src, (void)bytes; return -1; }
int cuda_sync(cuda_dev *d) { (void)d; return -1; }
size_t cuda_act_row_size(int wtype, int n) { (void)wtype, (void)n; return 0; }
int cuda_quantize(cuda_dev *d, int wtype, const float *x, int T, int n, void *xq) { (void)d, (void)wtype, (void)x, (void)T, (void)n, (void)xq; return -1; }
int cuda_matmul(cuda_dev *d, int wtype, const void *w, int rows, int cols, const void *xq, int T, float *y) {
    (void)d, (void)wtype, (void)w, (void)rows, (void)cols, (void)xq, (void)T, (void)y;
    return -1;
}

#include "compute/backend.h"
const backend_ops *backend_cuda(void) { return NULL; }
#else
typedef int cuda_none_unused; // (ISO C wants a declaration in every file)
#endif
