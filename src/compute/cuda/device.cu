// The device: open (each INFER_CUDA_* switch read there, once a device) and
// close, memory, uploads and downloads, the stream, the status, captured
// graphs, the cuBLAS loader and programmatic dependent launch's switch.
#include "compute/cuda/common.cuh"

enum { RING_BYTES = 4 << 20, RING_MAX_COPY = 64 << 10 };
enum { AG_BYTES = 96 << 20 }; // (cuda_attention_gemm's scores and probabilities of a chunk of rows at most)

static char g_status[256] = "not probed";

// cuBLAS, loaded when first wanted (common.cuh: the functions taken)
HIDDEN blas_api g_blas;
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;
static void blas_load(void) {
    const char *e = getenv("INFER_CUDA_CUBLAS");
    if (e && *e == '0') return;
    static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                                  "/usr/local/cuda/lib64/libcublas.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !g_blas.lib; i++) g_blas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g_blas.lib) return;
    g_blas.create = (blas_create_fn)dlsym(g_blas.lib, "cublasCreate_v2");
    g_blas.destroy = (blas_destroy_fn)dlsym(g_blas.lib, "cublasDestroy_v2");
    g_blas.stream = (blas_stream_fn)dlsym(g_blas.lib, "cublasSetStream_v2");
    g_blas.gemm = (blas_gemm_fn)dlsym(g_blas.lib, "cublasGemmEx");
    g_blas.gemm_sb = (blas_gemm_sb_fn)dlsym(g_blas.lib, "cublasGemmStridedBatchedEx");
    if (!g_blas.create || !g_blas.destroy || !g_blas.stream || !g_blas.gemm) g_blas.gemm = NULL, g_blas.gemm_sb = NULL;
}

HIDDEN int blas_ready(cuda_dev *d) {
    if (d->blas_state == 0) {
        pthread_once(&g_blas_once, blas_load);
        d->blas_state = g_blas.gemm && g_blas.create(&d->blas) == CUBLAS_STATUS_SUCCESS ? 1 : -1;
        if (d->blas_state > 0 && g_blas.stream(d->blas, d->stream) != CUBLAS_STATUS_SUCCESS) g_blas.destroy(d->blas), d->blas_state = -1;
    }
    return d->blas_state > 0;
}

// A scratch buffer of bytes+: never inside a capture (an allocation there breaks it: the caller fails the
// operation, so the pass runs again plainly, outside it); a graph captured before it moved is dropped
// (cu_graph: d->moved).
HIDDEN int grow(cuda_dev *d, void **p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return 0;
    cudaStreamCaptureStatus cs;
    if (cudaStreamIsCapturing(d->stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
        return set_status("scratch", cudaErrorStreamCaptureUnsupported);
    cudaStreamSynchronize(d->stream); // (its last users may still run)
    d->moved++;
    cudaFree(*p);
    *p = NULL, *cap = 0;
    if (cudaMalloc(p, bytes) != cudaSuccess) return set_status("scratch", cudaGetLastError());
    *cap = bytes;
    return 0;
}

extern "C" HIDDEN unsigned cuda_moved(cuda_dev *d) { return d->moved; }

extern "C" HIDDEN int cuda_mmq_max(cuda_dev *d) { return d->mmq_max; }
extern "C" HIDDEN void cuda_mmq_pass(cuda_dev *d, int on) { d->mmq_on = on; }
extern "C" HIDDEN void cuda_mmq_tune(cuda_dev *d, int nt, int min) {
    d->mmq_nt = nt == 1 || nt == 2 || nt == 4 ? nt : 8, d->mmq_min = min != 0;
}
extern "C" HIDDEN unsigned cuda_blas_total(cuda_dev *d) { return d->blas_total; }
extern "C" HIDDEN void cuda_counts(cuda_dev *d, unsigned *c) {
    c[0] = d->n_mmq, c[1] = d->n_gemm, c[2] = d->n_blas, c[3] = d->n_mv;
    d->n_mmq = d->n_gemm = d->n_blas = d->n_mv = 0;
}

// INFER_CUDA_PDL (common.cuh's launch), read once
static int g_pdl = -1;
static int pdl_mode(void) {
    if (g_pdl < 0) {
        const char *e = getenv("INFER_CUDA_PDL");
        g_pdl = e && *e == '0' ? 0 : e && *e == '2' ? 2 : 1;
    }
    return g_pdl;
}

HIDDEN int pdl_for(cudaStream_t stream) {
    int m = pdl_mode();
    if (m != 1) return m == 2;
    cudaStreamCaptureStatus st;
    return cudaStreamIsCapturing(stream, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
}

HIDDEN int set_status(const char *what, cudaError_t e) {
    snprintf(g_status, sizeof g_status, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

extern "C" HIDDEN int cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        set_status("no CUDA device", e);
        return 0;
    }
    if (n == 0) snprintf(g_status, sizeof g_status, "no CUDA device");
    else snprintf(g_status, sizeof g_status, "ok");
    return n;
}

extern "C" HIDDEN const char *cuda_status(void) { return g_status; }

extern "C" HIDDEN cuda_dev *cuda_open(int ordinal) {
    if (ordinal < 0 || ordinal >= cuda_device_count()) {
        if (!strcmp(g_status, "ok")) snprintf(g_status, sizeof g_status, "no CUDA device %d", ordinal);
        return NULL;
    }
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess) { set_status("cudaSetDevice", e); return NULL; }
    cuda_dev *d = (cuda_dev *)calloc(1, sizeof *d);
    if (!d) return NULL;
    d->ordinal = ordinal, d->gt_on = -1;
    const char *pf = getenv("INFER_CUDA_PREFETCH");
    d->prefetch = !(pf && *pf == '0');
    const char *ms = getenv("INFER_CUDA_MV_SPEC");
    d->mv_spec = !(ms && *ms == '0');
    const char *ap = getenv("INFER_CUDA_ATT_PF");
    d->att_pf = !(ap && *ap == '0');
    const char *gs = getenv("INFER_CUDA_GEMM_SPLIT");
    d->gemm_split = !gs || *gs != '0';
    const char *gh = getenv("INFER_CUDA_GEMM_XH");
    d->gemm_xh = !(gh && *gh == '0');
    const char *mm = getenv("INFER_CUDA_MMV");
    d->mmv = !mm || *mm != '0';
    const char *mq = getenv("INFER_CUDA_MMQ_MAX");
    d->mmq_max = mq && *mq ? atoi(mq) : 64;
    const char *mn = getenv("INFER_CUDA_MMQ_NT"), *mm2 = getenv("INFER_CUDA_MMQ_MIN");
    d->mmq_nt = mn && (atoi(mn) == 1 || atoi(mn) == 2 || atoi(mn) == 4) ? atoi(mn) : 8;
    d->mmq_min = mm2 && *mm2 == '1';
    const char *nw = getenv("INFER_CUDA_MV_NARROW");
    d->mv_narrow = !(nw && *nw == '0');
    const char *as = getenv("INFER_CUDA_ATT_SPLIT"), *ac = getenv("INFER_CUDA_ATT_CHUNK");
    d->att_split = as && *as ? atoi(as) : 64, d->att_chunk = ac && atoi(ac) > 0 ? atoi(ac) : 128;
    d->att_split = d->att_split < 0 ? 0 : d->att_split > 256 ? 256 : d->att_split;
    d->att_split_all = as && *as && d->att_split > 0;
    const char *adc = getenv("INFER_CUDA_ATT_DEC");
    d->att_dec = adc && *adc ? atoi(adc) : 0;
    const char *ab = getenv("INFER_CUDA_ATT_GEMM_BYTES");
    d->ag_bytes = ab && atol(ab) > 0 ? (size_t)atol(ab) : (size_t)AG_BYTES;
    if (cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, ordinal) != cudaSuccess || d->sms < 1) d->sms = 1;
    if ((e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        set_status("cudaStreamCreate", e);
        free(d);
        return NULL;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, ordinal) == cudaSuccess) snprintf(d->name, sizeof d->name, "%s", p.name);
    if ((e = cudaMallocHost((void **)&d->ring, RING_BYTES)) != cudaSuccess) {
        set_status("cudaMallocHost", e);
        cudaStreamDestroy(d->stream);
        free(d);
        return NULL;
    }
    return d;
}

extern "C" HIDDEN void cuda_close(cuda_dev *d) {
    if (!d) return;
    cudaSetDevice(d->ordinal);
    cudaStreamSynchronize(d->stream);
    if (d->blas_state > 0) g_blas.destroy(d->blas);
    cudaFree(d->gx), cudaFree(d->gw), cudaFree(d->ag_s), cudaFree(d->ag_p), cudaFree(d->ag_q);
    if (d->gt_on > 0) {
        if (d->gt_n) fprintf(stderr, "cuda: %d graph replays, %.2f us of GPU time each\n", d->gt_n, 1000.0 * d->gt_ms / d->gt_n);
        cudaEventDestroy(d->gt_a), cudaEventDestroy(d->gt_b);
    }
    cudaStreamDestroy(d->stream);
    cudaFreeHost(d->ring);
    cudaFree(d->part), cudaFree(d->ap), cudaFree(d->acnt);
    free(d);
}

extern "C" HIDDEN const char *cuda_name(const cuda_dev *d) { return d->name; }

extern "C" HIDDEN void *cuda_alloc(cuda_dev *d, size_t bytes) {
    void *p = NULL;
    cudaSetDevice(d->ordinal);
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) { set_status("cudaMalloc", e); return NULL; }
    return p;
}

extern "C" HIDDEN void cuda_free(cuda_dev *d, void *p) {
    if (!p) return;
    cudaSetDevice(d->ordinal);
    cudaFree(p);
}

extern "C" HIDDEN int cuda_upload(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream); // (src may be freed after)
    return e == cudaSuccess ? 0 : set_status("upload", e);
}

extern "C" HIDDEN int cuda_upload_async(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    if (bytes > RING_MAX_COPY) return cuda_upload(d, dst, src, bytes);
    size_t at = (d->ring_at + 255) & ~(size_t)255;
    if (at + bytes > RING_BYTES) at = 0;
    memcpy(d->ring + at, src, bytes);
    d->ring_at = at + bytes;
    cudaError_t e = cudaMemcpyAsync(dst, d->ring + at, bytes, cudaMemcpyHostToDevice, d->stream);
    return e == cudaSuccess ? 0 : set_status("upload", e);
}

extern "C" HIDDEN void *cuda_stream(cuda_dev *d) { return (void *)d->stream; }

extern "C" HIDDEN int cuda_download(cuda_dev *d, void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("download", e);
}

extern "C" HIDDEN void *cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    return cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) == cudaSuccess ? p : NULL;
}

extern "C" HIDDEN void cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" HIDDEN int cuda_sync(cuda_dev *d) {
    cudaError_t e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("kernel", e);
}

extern "C" HIDDEN int cuda_copy2d(cuda_dev *d, float *dst, size_t ds, const float *src, size_t ss, int rows, int n) {
    if (rows <= 0 || n <= 0) return 0;
    size_t w = sizeof(float) * (size_t)n;
    cudaError_t e = rows == 1 ? cudaMemcpyAsync(dst, src, w, cudaMemcpyDeviceToDevice, d->stream)
                              : cudaMemcpy2DAsync(dst, sizeof(float) * ds, src, sizeof(float) * ss, w, rows, cudaMemcpyDeviceToDevice, d->stream);
    return e == cudaSuccess ? 0 : set_status("copy", e);
}

extern "C" HIDDEN int cuda_zero(cuda_dev *d, void *p, size_t bytes) {
    cudaError_t e = cudaMemsetAsync(p, 0, bytes, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? 0 : set_status("memset", e);
}

extern "C" HIDDEN int cuda_graph_begin(cuda_dev *d) {
    cudaError_t e = cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? 0 : set_status("graph capture", e);
}

extern "C" HIDDEN int cuda_graph_end(cuda_dev *d, void **exec) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    *exec = NULL;
    cudaError_t e = cudaStreamEndCapture(d->stream, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (g) cudaGraphDestroy(g);
    if (e != cudaSuccess) return set_status("graph", e);
    *exec = (void *)x;
    return 0;
}

// INFER_CUDA_GRAPH_TIME=1: each replay's GPU time (events around it, read at
// the next replay), printed when the device closes -- a decode step's kernels
// alone, against the step's wall time (bench: the host's share of a token).
extern "C" HIDDEN int cuda_graph_launch(cuda_dev *d, void *exec) {
    if (d->gt_on < 0) {
        const char *e = getenv("INFER_CUDA_GRAPH_TIME");
        d->gt_on = e && *e == '1' && cudaEventCreate(&d->gt_a) == cudaSuccess && cudaEventCreate(&d->gt_b) == cudaSuccess;
    }
    if (d->gt_on && d->gt_pending) {
        float ms = 0;
        if (cudaEventSynchronize(d->gt_b) == cudaSuccess && cudaEventElapsedTime(&ms, d->gt_a, d->gt_b) == cudaSuccess)
            d->gt_ms += ms, d->gt_n++;
        d->gt_pending = 0;
    }
    if (d->gt_on) cudaEventRecord(d->gt_a, d->stream);
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, d->stream);
    if (d->gt_on && e == cudaSuccess) cudaEventRecord(d->gt_b, d->stream), d->gt_pending = 1;
    return e == cudaSuccess ? 0 : set_status("graph launch", e);
}

extern "C" HIDDEN void cuda_error_clear(void) { (void)cudaGetLastError(); }

extern "C" HIDDEN void cuda_graph_free(void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}
