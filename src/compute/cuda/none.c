// The CUDA backend in a build without CUDA (nvcc was not found, or INFER_CUDA=OFF): no GPU, and why.
#ifndef INFER_HAVE_CUDA
#include "compute/backend.h"

const backend_ops *backend_cuda(void) { return NULL; }
void *backend_cuda_stream(backend *b) { (void)b; return NULL; }
int backend_gpu_count(void) { return 0; }
const char *backend_gpu_status(void) { return "built without CUDA (nvcc not found at configure time, or INFER_CUDA=OFF)"; }
const char *backend_gpu_name(void) { return NULL; }
void *backend_pinned_alloc(size_t bytes) { (void)bytes; return NULL; }
void backend_pinned_free(void *p) { (void)p; }
#else
typedef int cuda_none_unused; // (ISO C wants a declaration in every file)
#endif
