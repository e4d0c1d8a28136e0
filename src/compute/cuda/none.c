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
void *cuda_host_alloc(size_t bytes) { (void)bytes; return NULL; }
void cuda_host_free(void *p) { (void)p; }
size_t cuda_act_row_size(int wtype, int n) { (void)wtype, (void)n; return 0; }
int cuda_quantize(cuda_dev *d, int wtype, const float *x, int T, int n, void *xq) { (void)d, (void)wtype, (void)x, (void)T, (void)n, (void)xq; return -1; }
void *cuda_weight_upload(cuda_dev *d, int type, const void *host, int rows, int cols) {
    (void)d, (void)type, (void)host, (void)rows, (void)cols;
    return NULL;
}
int cuda_matmul(cuda_dev *d, int wtype, const void *w, int rows, int cols, const void *xq, int T, float *y) {
    (void)d, (void)wtype, (void)w, (void)rows, (void)cols, (void)xq, (void)T, (void)y;
    return -1;
}
int cuda_matmul_multi(cuda_dev *d, int n, const cuda_mat *m, int cols, const void *xq, int T, int glu_act, int ggml) {
    (void)d, (void)n, (void)m, (void)cols, (void)xq, (void)T, (void)glu_act, (void)ggml;
    return -1;
}
int cuda_gemm_ok(int wtype, int cols, int T) { (void)wtype, (void)cols, (void)T; return 0; }
int cuda_gemm_lowp(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y, int lowp) {
    (void)d, (void)wtype, (void)w, (void)rows, (void)cols, (void)x, (void)T, (void)y, (void)lowp;
    return -1;
}
int cuda_gemm(cuda_dev *d, int wtype, const void *w, int rows, int cols, const float *x, int T, float *y) {
    (void)d, (void)wtype, (void)w, (void)rows, (void)cols, (void)x, (void)T, (void)y;
    return -1;
}
int cuda_gemm_blas(cuda_dev *d, int wtype, int rows, int cols, int T) {
    (void)d, (void)wtype, (void)rows, (void)cols, (void)T;
    return 0;
}
int cuda_chain_run(cuda_dev *d, const cuda_chain *c, int rows, int wtype) { (void)d, (void)c, (void)rows, (void)wtype; return -1; }
int cuda_qkv_prep(cuda_dev *d, const cuda_qkv *c, int T, const int *pos) { (void)d, (void)c, (void)T, (void)pos; return -1; }

// (the layer operations' launchers: never reached without a device)
int cuda_bias(cuda_dev *d, float *y, const float *b, int T, int n) { (void)d, (void)y, (void)b, (void)T, (void)n; return -1; }
int cuda_matmul_trans(cuda_dev *d, int wtype, const void *w, int n_in, int n_out, const float *x, int T, float *y) {
    (void)d, (void)wtype, (void)w, (void)n_in, (void)n_out, (void)x, (void)T, (void)y;
    return -1;
}
int cuda_norm(cuda_dev *d, float *out, const float *x, const float *w, const float *b, int rows, int n, float eps, int kind) {
    (void)d, (void)out, (void)x, (void)w, (void)b, (void)rows, (void)n, (void)eps, (void)kind;
    return -1;
}
int cuda_rope(cuda_dev *d, float *x, int rows, int heads, int hd, const int *pos, const float *inv_freq, int n_pairs, int pair_offset,
              int pair_stride, float mscale) {
    (void)d, (void)x, (void)rows, (void)heads, (void)hd, (void)pos, (void)inv_freq, (void)n_pairs, (void)pair_offset, (void)pair_stride,
        (void)mscale;
    return -1;
}
int cuda_attention(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                   const float *const *k, const float *const *v, float scale, float softcap, const float *sinks, int ggml, float *scores,
                   int stride) {
    (void)d, (void)q, (void)out, (void)T, (void)H, (void)KV, (void)hd, (void)window, (void)pos, (void)k, (void)v, (void)scale,
        (void)softcap, (void)sinks, (void)ggml, (void)scores, (void)stride;
    return -1;
}
int cuda_attention_q_ok(int wtype, int H, int hd) { (void)wtype, (void)H, (void)hd; return 0; }
int cuda_attention_q(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks, int ggml, float *scores,
                     int stride, int wtype, void *xq) {
    (void)d, (void)q, (void)out, (void)T, (void)H, (void)KV, (void)hd, (void)window, (void)pos, (void)k, (void)v, (void)scale,
        (void)softcap, (void)sinks, (void)ggml, (void)scores, (void)stride, (void)wtype, (void)xq;
    return -1;
}
int cuda_attention_d(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                     const float *const *k, const float *const *v, float scale, float softcap, const float *sinks, int ggml, float *scores,
                     int stride, int wtype, void *xq, int decode) {
    (void)d, (void)q, (void)out, (void)T, (void)H, (void)KV, (void)hd, (void)window, (void)pos, (void)k, (void)v, (void)scale,
        (void)softcap, (void)sinks, (void)ggml, (void)scores, (void)stride, (void)wtype, (void)xq, (void)decode;
    return -1;
}
int cuda_attention_gemm_ok(cuda_dev *d, int ggml, int kv16) { (void)d, (void)ggml, (void)kv16; return 0; }
int cuda_attention_gemm(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                        const int *pos_host, const void *k, const void *v, float scale, float softcap, const float *sinks, int ggml,
                        int wtype, void *xq, int kv16) {
    (void)d, (void)q, (void)out, (void)T, (void)H, (void)KV, (void)hd, (void)window, (void)pos, (void)pos_host, (void)k, (void)v,
        (void)scale, (void)softcap, (void)sinks, (void)ggml, (void)wtype, (void)xq, (void)kv16;
    return -1;
}
int cuda_attention_kv(cuda_dev *d, const float *q, float *out, int T, int H, int KV, int hd, int window, const int *pos,
                      const void *const *k, const void *const *v, float scale, float softcap, const float *sinks, int ggml, float *scores,
                      int stride, int wtype, void *xq, int decode, int kv16) {
    (void)d, (void)q, (void)out, (void)T, (void)H, (void)KV, (void)hd, (void)window, (void)pos, (void)k, (void)v, (void)scale,
        (void)softcap, (void)sinks, (void)ggml, (void)scores, (void)stride, (void)wtype, (void)xq, (void)decode, (void)kv16;
    return -1;
}
int cuda_act(cuda_dev *d, float *g, const float *u, size_t n, int act, int ggml) { (void)d, (void)g, (void)u, (void)n, (void)act, (void)ggml; return -1; }
int cuda_topk_abs(cuda_dev *d, const float *s, int n, int k, int *idx) { (void)d, (void)s, (void)n, (void)k, (void)idx; return -1; }
int cuda_topk_max(cuda_dev *d, const float *s, int n, const int *dn, int k, int *idx) { (void)d, (void)s, (void)n, (void)dn, (void)k, (void)idx; return -1; }
int cuda_lm_probe(cuda_dev *d, int type, const void *rows, int H, const unsigned *off, const int *order, const int *best, int P,
                  const float *x, const void *xq, float *cs, int *cid, int *dn) {
    (void)d, (void)type, (void)rows, (void)H, (void)off, (void)order, (void)best, (void)P, (void)x, (void)xq, (void)cs, (void)cid, (void)dn;
    return -1;
}
int cuda_lm_gather(cuda_dev *d, const int *pos, int k, const float *s, const int *id, float *out_s, int *out_id) {
    (void)d, (void)pos, (void)k, (void)s, (void)id, (void)out_s, (void)out_id;
    return -1;
}
int cuda_walk_ok(int type) { (void)type; return 0; }
int cuda_argmax(cuda_dev *d, const float *x, int rows, int n, int *out) { (void)d, (void)x, (void)rows, (void)n, (void)out; return -1; }
int cuda_walk(cuda_dev *d, int type, const void *ffn, int H, const int *idx, int k, const float *x, const void *xq, const float *bias,
              const float *down_bias, int gated, int act, float *a, float *part, float *out) {
    (void)d, (void)type, (void)ffn, (void)H, (void)idx, (void)k, (void)x, (void)xq, (void)bias, (void)down_bias, (void)gated, (void)act;
    (void)a, (void)part, (void)out;
    return -1;
}
int cuda_glu_oss(cuda_dev *d, float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    (void)d, (void)out, (void)gate, (void)gs, (void)up, (void)us, (void)n;
    return -1;
}
int cuda_axpy(cuda_dev *d, float *x, const float *o, float s, size_t n) { (void)d, (void)x, (void)o, (void)s, (void)n; return -1; }
int cuda_round_f16(cuda_dev *d, float *x, size_t n) { (void)d, (void)x, (void)n; return -1; }
int cuda_softmax(cuda_dev *d, float *x, int n) { (void)d, (void)x, (void)n; return -1; }
int cuda_scale(cuda_dev *d, float *x, size_t n, float s) { (void)d, (void)x, (void)n, (void)s; return -1; }
int cuda_mul(cuda_dev *d, float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    (void)d, (void)x, (void)xs, (void)y, (void)ys, (void)rows, (void)n;
    return -1;
}
int cuda_softcap(cuda_dev *d, float *x, size_t n, float cap) { (void)d, (void)x, (void)n, (void)cap; return -1; }
int cuda_copy2d(cuda_dev *d, float *dst, size_t ds, const float *src, size_t ss, int rows, int n) {
    (void)d, (void)dst, (void)ds, (void)src, (void)ss, (void)rows, (void)n;
    return -1;
}
int cuda_zero(cuda_dev *d, void *p, size_t bytes) { (void)d, (void)p, (void)bytes; return -1; }
int cuda_upload_async(cuda_dev *d, void *dst, const void *src, size_t bytes) { (void)d, (void)dst, (void)src, (void)bytes; return -1; }
int cuda_kv_store(cuda_dev *d, void *const *cache, const int *pos, const float *src, int T, int n, int kv16) {
    (void)kv16;
    (void)d, (void)cache, (void)pos, (void)src, (void)T, (void)n;
    return -1;
}
int cuda_graph_begin(cuda_dev *d) { (void)d; return -1; }
int cuda_graph_end(cuda_dev *d, void **exec) { (void)d; *exec = NULL; return -1; }
int cuda_graph_launch(cuda_dev *d, void *exec) { (void)d, (void)exec; return -1; }
void cuda_graph_free(void *exec) { (void)exec; }

#include "compute/backend.h"
const backend_ops *backend_cuda(void) { return NULL; }
void *backend_cuda_stream(backend *b) { (void)b; return NULL; }
void *cuda_stream(cuda_dev *d) { (void)d; return NULL; }
#else
typedef int cuda_none_unused; // (ISO C wants a declaration in every file)
#endif
