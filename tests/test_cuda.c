// The CUDA device layer against the CPU's oracles: every stored type's GPU
// product against the scalar dot (normalized error <= 1e-7: the same integers
// and per-block scaling, the blocks summed in another order), and the GPU's
// activation quantizers against the CPU's, byte for byte. Skipped (exit 77)
// where there is no GPU, saying why.
#include "check.h"
#include "compute/cuda/cuda.h"
#include "tensor/dtype.h"
#include "tensor/vecdot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

static void check_type(cuda_dev *d, int wt, int rows, int cols, int T) {
    const dtype_traits *tr = dtype_get(wt);
    const vecdot_kernel *ref = vecdot_get_ref(wt);
    size_t rs = dtype_row_size(wt, cols), xr = cuda_act_row_size(wt, cols);
    CHECK(xr > 0, "%s: no GPU product for %d columns", tr->name, cols);
    if (!xr) return;
    size_t cr = ref->act_type == DT_F32 ? sizeof(float) * (size_t)cols : act_row_size(ref, cols);
    unsigned char *w = malloc(rs * rows), *xc = malloc(cr * T), *xg = malloc(xr * T);
    float *x = malloc(sizeof(float) * (size_t)T * cols), *f = malloc(sizeof(float) * cols), *y = malloc(sizeof(float) * (size_t)T * rows);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) f[i] = frand() * (i % 29 == 0 ? 4.0f : 1.0f);
        tr->from_float(f, w + rs * r, cols);
    }
    for (int t = 0; t < T; t++)
        for (int i = 0; i < cols; i++) x[(size_t)t * cols + i] = t == 1 ? 0.0f : frand() * (i % 53 == 0 ? 20.0f : 1.0f);
    for (int t = 0; t < T; t++) {
        if (ref->quant) ref->quant(x + (size_t)t * cols, xc + cr * t, cols);
        else memcpy(xc + cr * t, x + (size_t)t * cols, cr);
    }
    void *dw = cuda_alloc(d, rs * rows), *dx = cuda_alloc(d, sizeof(float) * (size_t)T * cols), *dq = cuda_alloc(d, xr * T);
    float *dy = cuda_alloc(d, sizeof(float) * (size_t)T * rows);
    CHECK(dw && dx && dq && dy, "%s: cuda_alloc: %s", tr->name, cuda_status());
    if (dw && dx && dq && dy) {
        int ok = !cuda_upload(d, dw, w, rs * rows) && !cuda_upload(d, dx, x, sizeof(float) * (size_t)T * cols) &&
                 !cuda_quantize(d, wt, dx, T, cols, dq) && !cuda_matmul(d, wt, dw, rows, cols, dq, T, dy) &&
                 !cuda_download(d, xg, dq, xr * T) && !cuda_download(d, y, dy, sizeof(float) * (size_t)T * rows);
        CHECK(ok, "%s: GPU calls failed: %s", tr->name, cuda_status());
        if (ok) {
            CHECK(xr == cr && !memcmp(xg, xc, cr * T), "%s %d cols: GPU activations differ from the CPU quantizer's", tr->name, cols);
            for (size_t i = 0; i < cr * T; i++)
                if (xg[i] != xc[i]) { // the first difference, to say where
                    printf("  first difference at byte %zu (row %zu, byte %zu of it): GPU %02x, CPU %02x\n", i, i / cr, i % cr, xg[i], xc[i]);
                    break;
                }
            double e = 0, s = 0;
            for (int t = 0; t < T; t++)
                for (int r = 0; r < rows; r++) {
                    double want = ref->dot(w + rs * r, xc + cr * t, cols), got = y[(size_t)t * rows + r];
                    e += (got - want) * (got - want), s += want * want;
                }
            CHECK(e <= 1e-7 * s, "%s %dx%d, %d tokens: GPU vs scalar dot: normalized error %.3g", tr->name, rows, cols, T, e / s);
        }
    }
    cuda_free(d, dw), cuda_free(d, dx), cuda_free(d, dq), cuda_free(d, dy);
    free(w), free(xc), free(xg), free(x), free(f), free(y);
}

int main(void) {
    int n = cuda_device_count();
    if (n == 0) {
        printf("test_cuda: skipped: %s\n", cuda_status());
        return 77;
    }
    cuda_dev *d = cuda_open(0);
    CHECK(d != NULL, "cuda_open: %s", cuda_status());
    if (!d) return check_summary("cuda");
    printf("test_cuda: %s\n", cuda_name(d));
    int q32[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_MXFP4};
    int kq[] = {DT_Q2_K, DT_Q3_K, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    int fl[] = {DT_F32, DT_F16, DT_BF16};
    for (int k = 0; k < 6; k++) check_type(d, q32[k], 37, 96, 3), check_type(d, q32[k], 100, 2048, 8);
    for (int k = 0; k < 5; k++) check_type(d, kq[k], 37, 256, 3), check_type(d, kq[k], 100, 2560, 8);
    for (int k = 0; k < 3; k++) check_type(d, fl[k], 37, 100, 3), check_type(d, fl[k], 100, 2048, 8);
    cuda_close(d);
    return check_summary("cuda");
}
