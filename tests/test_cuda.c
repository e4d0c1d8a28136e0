// The CUDA device layer against the CPU's oracles: every stored type's GPU
// product against the scalar dot (normalized error <= 1e-7: the same integers
// and per-block scaling, the blocks summed in another order), and the GPU's
// activation quantizers against the CPU's, byte for byte. Skipped (exit 77)
// where there is no GPU, saying why.
#include "check.h"
#ifndef INFER_HAVE_CUDA
#include <stdio.h>
int main(void) {
    printf("test_cuda: skipped: built without CUDA (nvcc not found at configure time, or INFER_CUDA=OFF)\n");
    return 77;
}
#else
#include "compute/cuda/cuda.h"
#include "cuda_test.h"
#include "tensor/dtype.h"
#include "tensor/vecdot.h"
#include "compute/cpu/ops.h"
#include "base/half.h"
#include "vindex/walk.h"
#include "infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


// CPU activation rows (q8_0 or q8_K blocks) in the GPU's layout: each
// field in an array of its own, the row padded to xr bytes (cuda.h)
static void split_rows(const unsigned char *cpu, size_t cr, unsigned char *gpu, size_t xr, int T, int k, int nb) {
    memset(gpu, 0, xr * T);
    for (int t = 0; t < T; t++) {
        const unsigned char *c = cpu + cr * t;
        unsigned char *g = gpu + xr * t;
        for (int b = 0; b < nb; b++) {
            if (!k) {
                memcpy(g + 32 * b, c + 34 * b + 2, 32), memcpy(g + 32 * nb + 2 * b, c + 34 * b, 2);
            } else {
                memcpy(g + 256 * b, c + 292 * b + 4, 256), memcpy(g + 256 * nb + 4 * b, c + 292 * b, 4);
                memcpy(g + 260 * nb + 32 * b, c + 292 * b + 260, 32);
            }
        }
    }
}

// g_mmq: the products through k_mmq (cuda_mmq_pass): 1, those of 2+ tokens (a pass that need not equal
// its rows alone: the check of a token against itself alone is left out); 2, every one (deterministic:
// a token as alone, bit for bit)
static int g_mmq;

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
    void *dw = cuda_weight_upload(d, wt, w, rows, cols), *dx = cuda_alloc(d, sizeof(float) * (size_t)T * cols), *dq = cuda_alloc(d, xr * T);
    float *dy = cuda_alloc(d, sizeof(float) * (size_t)T * rows);
    CHECK(dw && dx && dq && dy, "%s: cuda_alloc: %s", tr->name, cuda_status());
    if (dw && dx && dq && dy) {
        cuda_mmq_pass(d, g_mmq);
        int ok = !cuda_upload(d, dx, x, sizeof(float) * (size_t)T * cols) &&
                 !cuda_quantize(d, wt, dx, T, cols, dq) && !cuda_matmul(d, wt, dw, rows, cols, dq, T, dy) &&
                 !cuda_download(d, xg, dq, xr * T) && !cuda_download(d, y, dy, sizeof(float) * (size_t)T * rows);
        CHECK(ok, "%s: GPU calls failed: %s", tr->name, cuda_status());
        if (ok) {
            unsigned char *want = xc;
            size_t row = cr, used = cr; // (a GPU row's padding is not compared)
            if (ref->quant) { // the CPU's bytes in the GPU's layout
                int k = cols % 256 == 0 && cr == (size_t)cols / 256 * 292;
                want = malloc(xr * T), row = xr;
                split_rows(xc, cr, want, xr, T, k, k ? cols / 256 : cols / 32);
            }
            size_t bad = (size_t)-1;
            for (int t = 0; t < T && bad == (size_t)-1; t++)
                for (size_t i = 0; i < used; i++)
                    if (xg[row * t + i] != want[row * t + i]) { bad = row * t + i; break; }
            CHECK(bad == (size_t)-1, "%s %d cols: GPU activations differ from the CPU quantizer's (byte %zu: GPU %02x, CPU %02x)", tr->name, cols,
                  bad, bad == (size_t)-1 ? 0 : xg[bad], bad == (size_t)-1 ? 0 : want[bad]);
            if (want != xc) free(want);
            double e = 0, s = 0;
            for (int t = 0; t < T; t++)
                for (int r = 0; r < rows; r++) {
                    double want = ref->dot(w + rs * r, xc + cr * t, cols), got = y[(size_t)t * rows + r];
                    e += (got - want) * (got - want), s += want * want;
                }
            CHECK(e <= 1e-7 * s, "%s %dx%d, %d tokens%s: GPU vs scalar dot: normalized error %.3g", tr->name, rows, cols, T,
                  g_mmq ? " (k_mmq)" : "", e / s);
            // each token of a group (their weight loads shared) as that token alone, bit for bit
            int same = 1;
            float *one = malloc(sizeof(float) * rows);
            for (int t = 0; t < T && T > 1 && same && g_mmq != 1; t++) {
                same = !cuda_matmul(d, wt, dw, rows, cols, (const unsigned char *)dq + xr * t, 1, dy) &&
                       !cuda_download(d, one, dy, sizeof(float) * rows) && !memcmp(one, y + (size_t)t * rows, sizeof(float) * rows);
            }
            CHECK(same, "%s %dx%d, %d tokens%s: a token's products differ from the same token alone", tr->name, rows, cols, T,
                  g_mmq == 2 ? " (k_mmq, deterministic)" : "");
            free(one);
        }
        cuda_mmq_pass(d, 0);
    }
    cuda_free(d, dw), cuda_free(d, dx), cuda_free(d, dq), cuda_free(d, dy);
    free(w), free(xc), free(xg), free(x), free(f), free(y);
}

// k_mmq's launches of several products: a gate and up pair (wt) joined by
// SiLU, then the pair with a third matrix of type wt3 (its own launch),
// against the scalar dots
static void check_mmq_multi(cuda_dev *d, int wt, int wt3, int rows, int cols, int T) {
    int ty[3] = {wt, wt, wt3};
    const vecdot_kernel *ref[3];
    size_t rs[3], cr[3], xr = cuda_act_row_size(wt, cols);
    unsigned char *w[3], *xc[3];
    void *dw[3];
    float *dy[3], *y = malloc(sizeof(float) * (size_t)T * rows), *x = malloc(sizeof(float) * (size_t)T * cols), *f = malloc(sizeof(float) * cols);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < cols; i++) x[(size_t)t * cols + i] = frand();
    for (int k = 0; k < 3; k++) {
        const dtype_traits *tr = dtype_get(ty[k]);
        ref[k] = vecdot_get_ref(ty[k]), rs[k] = dtype_row_size(ty[k], cols), cr[k] = act_row_size(ref[k], cols);
        w[k] = malloc(rs[k] * rows), xc[k] = malloc(cr[k] * T);
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < cols; i++) f[i] = frand();
            tr->from_float(f, w[k] + rs[k] * r, cols);
        }
        for (int t = 0; t < T; t++) ref[k]->quant(x + (size_t)t * cols, xc[k] + cr[k] * t, cols);
        dw[k] = cuda_weight_upload(d, ty[k], w[k], rows, cols), dy[k] = cuda_alloc(d, sizeof(float) * (size_t)T * rows);
    }
    float *dx = cuda_alloc(d, sizeof(float) * (size_t)T * cols);
    void *dq = cuda_alloc(d, xr * T);
    int ok = dx && dq && dw[0] && dw[1] && dw[2] && dy[0] && dy[1] && dy[2] && cuda_act_row_size(wt3, cols) == xr;
    CHECK(ok, "k_mmq %s + %s: setup: %s", dtype_get(wt)->name, dtype_get(wt3)->name, cuda_status());
    cuda_mmq_pass(d, 1);
    for (int pass = 0; pass < 2 && ok; pass++) { // 0: the gated pair, 1: three products
        cuda_mat m[3];
        for (int k = 0; k < 3; k++) m[k] = (cuda_mat){ty[k], dw[k], rows, dy[k]};
        ok = !cuda_upload(d, dx, x, sizeof(float) * (size_t)T * cols) && !cuda_quantize(d, wt, dx, T, cols, dq) &&
             !cuda_matmul_multi(d, pass ? 3 : 2, m, cols, dq, T, pass ? -1 : 0, 0);
        CHECK(ok, "k_mmq %s: launch failed: %s", pass ? "three products" : "gated pair", cuda_status());
        for (int k = 0; k < (pass ? 3 : 1) && ok; k++) {
            ok = !cuda_download(d, y, dy[k], sizeof(float) * (size_t)T * rows);
            double e = 0, s = 0;
            for (int t = 0; t < T; t++)
                for (int r = 0; r < rows; r++) {
                    double want = ref[k]->dot(w[k] + rs[k] * r, xc[k] + cr[k] * t, cols);
                    if (!pass) {
                        double up = ref[1]->dot(w[1] + rs[1] * r, xc[1] + cr[1] * t, cols);
                        want = want / (1.0 + exp(-want)) * up;
                    }
                    e += (y[(size_t)t * rows + r] - want) * (y[(size_t)t * rows + r] - want), s += want * want;
                }
            CHECK(ok && e <= 1e-6 * s, "k_mmq %s %dx%d, %d tokens, %s %d: normalized error %.3g", dtype_get(ty[k])->name, rows, cols, T,
                  pass ? "product" : "gated pair", k, e / s);
        }
    }
    cuda_mmq_pass(d, 0);
    for (int k = 0; k < 3; k++) cuda_free(d, dw[k]), cuda_free(d, dy[k]), free(w[k]), free(xc[k]);
    cuda_free(d, dx), cuda_free(d, dq);
    free(y), free(x), free(f);
}

// device buffer of n floats holding x
// tests/cuda_att.c: flash attention and the split decode kernels against the per-row kernel (its checks
// counted into this program's)
void check_att_flash(cuda_dev *d, int H, int KV, int HD, int P0, int T, int window, float cap, int sink, int ggml);
void check_att_split(cuda_dev *d, int H, int KV, int HD, int kv16, int ggml, int window, float cap, int sink);
void cuda_att_counts(int *checks, int *failed);
void check_deep_prompt(void); // (cuda_kv.c)
void check_vm(cuda_dev *d);
void check_vm_share(cuda_dev *d);
void check_prefix_share(void);
void cuda_kv_counts(int *checks, int *failed);
extern double split_ggml_tol; // (check_att_split's bound under ggml's numerics)


static double max_rel(const float *a, const float *b, size_t n) { // max |a - b| over the RMS of b
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i])), s += (double)b[i] * b[i];
    return e / (sqrt(s / n) + 1e-30);
}

// The layer operations' kernels against the CPU's (compute/cpu/ops.h): norms,
// RoPE, activations, attention (the CPU's formula written out here).
static void check_ops(cuda_dev *d) {
    enum { R = 5, N = 640, A = R * N };
    float x[A], w[N], b[N], want[A], got[A];
    for (int i = 0; i < A; i++) x[i] = frand() * (i % 37 == 0 ? 8.0f : 1.0f);
    for (int i = 0; i < N; i++) w[i] = frand(), b[i] = frand();
    float *dx = dev_copy(d, x, A), *dw = dev_copy(d, w, N), *db = dev_copy(d, b, N), *dy = cuda_alloc(d, sizeof(float) * A);
    CHECK(dx && dw && db && dy, "ops: %s", cuda_status());
    if (!dx || !dw || !db || !dy) return;
    for (int kind = 0; kind < 3; kind++) { // rms, rms (1 + w), layer
        if (kind < 2) rmsnorm(want, x, w, R, N, 1e-6f, kind == 1);
        else layernorm(want, x, w, b, R, N, 1e-5f);
        int ok = !cuda_norm(d, dy, dx, dw, kind == 2 ? db : NULL, R, N, kind == 2 ? 1e-5f : 1e-6f, kind) && !cuda_download(d, got, dy, sizeof got);
        CHECK(ok && max_rel(got, want, A) <= 1e-5, "norm kind %d: %s, error %.3g", kind, cuda_status(), ok ? max_rel(got, want, A) : -1.0);
    }
    // RoPE: 4 heads of 64 at three positions, both pair layouts
    for (int layout = 0; layout < 2; layout++) {
        float inv[32];
        for (int i = 0; i < 32; i++) inv[i] = powf(10000.0f, -2.0f * i / 64);
        rope_table rt = {32, layout ? 1 : 32, layout ? 2 : 1, 1.0f, inv};
        int pos[3] = {0, 7, 1000};
        memcpy(want, x, sizeof(float) * 3 * 256);
        for (int t = 0; t < 3; t++) rope(want + 256 * t, 4, 64, pos[t], &rt);
        float *dinv = dev_copy(d, inv, 32), *dq = dev_copy(d, x, 3 * 256);
        int *dpos = cuda_alloc(d, sizeof pos);
        int ok = dinv && dq && dpos && !cuda_upload(d, dpos, pos, sizeof pos) &&
                 !cuda_rope(d, dq, 3, 4, 64, dpos, dinv, 32, rt.pair_offset, rt.pair_stride, 1.0f) && !cuda_download(d, got, dq, sizeof(float) * 3 * 256);
        CHECK(ok && max_rel(got, want, 3 * 256) <= 1e-5, "rope layout %d: %s, error %.3g", layout, cuda_status(), ok ? max_rel(got, want, 3 * 256) : -1.0);
        cuda_free(d, dinv), cuda_free(d, dq), cuda_free(d, dpos);
    }
    // activations, alone and gated, in both numerics
    for (int act = 0; act < 4; act++)
        for (int ggml = 0; ggml < 2; ggml++) {
            for (int i = 0; i < A; i++) want[i] = x[i] * 3.0f;
            float *dg = dev_copy(d, want, A);
            if (ggml) activate_ggml(want, A, act);
            else activate(want, A, act);
            int ok = dg && !cuda_act(d, dg, NULL, A, act, ggml) && !cuda_download(d, got, dg, sizeof got);
            if (ok && ggml && act == 1) { // ggml's GELU ends in f16: each value within one f16 step of the CPU's
                int far = 0;
                for (int i = 0; i < A; i++) far += fabsf(got[i] - want[i]) > fabsf(want[i]) * (1.0f / 1024) + 1e-7f;
                CHECK(!far, "activation %d (ggml): %d values more than an f16 step from the CPU's", act, far);
            } else
                CHECK(ok && max_rel(got, want, A) <= 1e-5, "activation %d (ggml %d): error %.3g", act, ggml, ok ? max_rel(got, want, A) : -1.0);
            cuda_free(d, dg);
        }
    // attention: 2 rows at positions 9 and 10 of an 11-position cache, 4 query heads on 2 KV heads of 64
    enum { H = 4, KV = 2, HD = 64, P = 11, NQ = H * HD, NKV = KV * HD };
    static float kc[P * NKV], vc[P * NKV], q[2 * NQ], out[2 * NQ], s[P + 1];
    for (int i = 0; i < P * NKV; i++) kc[i] = frand(), vc[i] = frand();
    for (int i = 0; i < 2 * NQ; i++) q[i] = frand();
    float sinks[H] = {0.5f, -1.0f, 2.0f, 0.0f};
    for (int variant = 0; variant < 4; variant++) {
        int window = variant & 1 ? 5 : 0;
        float cap = variant & 2 ? 3.0f : 0.0f, scale = 0.125f;
        const float *sk = variant == 3 ? sinks : NULL;
        int pos[2] = {9, 10};
        for (int t = 0; t < 2; t++)
            for (int h = 0; h < H; h++) {
                int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1, kh = h / (H / KV);
                for (int j = 0; j < n; j++) {
                    float a = 0;
                    for (int i = 0; i < HD; i++) a += q[t * NQ + h * HD + i] * kc[(lo + j) * NKV + kh * HD + i];
                    a *= scale;
                    s[j] = cap ? cap * tanhf(a / cap) : a;
                }
                if (sk) s[n] = sk[h];
                softmax(s, sk ? n + 1 : n);
                for (int i = 0; i < HD; i++) {
                    float o = 0;
                    for (int j = 0; j < n; j++) o += s[j] * vc[(lo + j) * NKV + kh * HD + i];
                    out[t * NQ + h * HD + i] = o;
                }
            }
        float *dk = dev_copy(d, kc, P * NKV), *dv = dev_copy(d, vc, P * NKV), *dq = dev_copy(d, q, 2 * NQ), *dout = cuda_alloc(d, sizeof out);
        float *dsc = cuda_alloc(d, sizeof(float) * 2 * H * (P + 1)), *dsk = dev_copy(d, sinks, H);
        int *dpos = cuda_alloc(d, sizeof pos);
        const float *kp[4] = {dk, dk, dv, dv};
        const float **dkp = cuda_alloc(d, sizeof kp);
        int ok = dk && dv && dq && dout && dsc && dsk && dpos && dkp && !cuda_upload(d, dpos, pos, sizeof pos) &&
                 !cuda_upload(d, (void *)dkp, kp, sizeof kp) &&
                 !cuda_attention(d, dq, dout, 2, H, KV, HD, window, dpos, dkp, dkp + 2, scale, cap, sk ? dsk : NULL, 0, dsc, P + 1) &&
                 !cuda_download(d, got, dout, sizeof out);
        CHECK(ok && max_rel(got, out, 2 * NQ) <= 1e-5, "attention variant %d: %s, error %.3g", variant, cuda_status(),
              ok ? max_rel(got, out, 2 * NQ) : -1.0);
        // the same writing the q8_0 rows of its output: the floats again, and cuda_quantize's bytes of them
        if (ok) {
            size_t xr = cuda_act_row_size(DT_Q8_0, NQ), used = NQ / 32 * 34;
            void *q1 = cuda_alloc(d, 2 * xr), *q2 = cuda_alloc(d, 2 * xr);
            float *dout2 = cuda_alloc(d, sizeof out);
            int qok = q1 && q2 && dout2 && cuda_attention_q_ok(DT_Q8_0, H, HD) && !cuda_attention_q_ok(DT_Q4_K, H, HD) &&
                      !cuda_attention_q(d, dq, dout2, 2, H, KV, HD, window, dpos, dkp, dkp + 2, scale, cap, sk ? dsk : NULL, 0, dsc, P + 1,
                                        DT_Q8_0, q2) &&
                      cuda_attention_q(d, dq, dout2, 2, H, KV, HD, window, dpos, dkp, dkp + 2, scale, cap, sk ? dsk : NULL, 0, dsc, P + 1,
                                       DT_Q4_K, q2) != 0 &&
                      same_floats(d, dout, dout2, 2 * NQ) && !cuda_quantize(d, DT_Q8_0, dout, 2, NQ, q1) && same_rows(d, q1, q2, 2, xr, used);
            CHECK(qok, "attention variant %d with its q8_0 rows: differs from cuda_attention and cuda_quantize (%s)", variant, cuda_status());
            cuda_free(d, q1), cuda_free(d, q2), cuda_free(d, dout2);
        }
        cuda_free(d, dk), cuda_free(d, dv), cuda_free(d, dq), cuda_free(d, dout), cuda_free(d, dsc), cuda_free(d, dsk);
        cuda_free(d, dpos), cuda_free(d, (void *)dkp);
    }
    // heads of 256 (Gemma 3's) writing the q8_K rows of their output: 2 rows, 3 query heads on 1 KV head, 7 positions
    {
        enum { H2 = 3, HD2 = 256, P2 = 7, NQ2 = H2 * HD2 };
        static float k2[P2 * HD2], v2[P2 * HD2], q2[2 * NQ2];
        for (int i = 0; i < P2 * HD2; i++) k2[i] = frand(), v2[i] = frand();
        for (int i = 0; i < 2 * NQ2; i++) q2[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
        int pos[2] = {5, 6};
        size_t xr = cuda_act_row_size(DT_Q4_K, NQ2), used = NQ2 / 256 * 292;
        float *dk = dev_copy(d, k2, P2 * HD2), *dv = dev_copy(d, v2, P2 * HD2), *dq = dev_copy(d, q2, 2 * NQ2);
        float *o1 = cuda_alloc(d, sizeof(float) * 2 * NQ2), *o2 = cuda_alloc(d, sizeof(float) * 2 * NQ2), *dsc = cuda_alloc(d, sizeof(float) * 2 * H2 * 8);
        int *dpos = cuda_alloc(d, sizeof pos);
        const float *kp[4] = {dk, dk, dv, dv};
        const float **dkp = cuda_alloc(d, sizeof kp);
        void *x1 = cuda_alloc(d, 2 * xr), *x2 = cuda_alloc(d, 2 * xr);
        int ok = dk && dv && dq && o1 && o2 && dsc && dpos && dkp && x1 && x2 && cuda_attention_q_ok(DT_Q4_K, H2, HD2) &&
                 !cuda_upload(d, dpos, pos, sizeof pos) && !cuda_upload(d, (void *)dkp, kp, sizeof kp) &&
                 !cuda_attention(d, dq, o1, 2, H2, 1, HD2, 0, dpos, dkp, dkp + 2, 0.0625f, 0, NULL, 1, dsc, 8) &&
                 !cuda_attention_q(d, dq, o2, 2, H2, 1, HD2, 0, dpos, dkp, dkp + 2, 0.0625f, 0, NULL, 1, dsc, 8, DT_Q4_K, x2) &&
                 same_floats(d, o1, o2, 2 * NQ2) && !cuda_quantize(d, DT_Q4_K, o1, 2, NQ2, x1) && same_rows(d, x1, x2, 2, xr, used);
        CHECK(ok, "attention of heads of 256 with its q8_K rows: differs from cuda_attention and cuda_quantize (%s)", cuda_status());
        cuda_free(d, dk), cuda_free(d, dv), cuda_free(d, dq), cuda_free(d, o1), cuda_free(d, o2), cuda_free(d, dsc), cuda_free(d, dpos);
        cuda_free(d, (void *)dkp), cuda_free(d, x1), cuda_free(d, x2);
    }
    cuda_free(d, dx), cuda_free(d, dw), cuda_free(d, db), cuda_free(d, dy);
}

// Long rows (with INFER_CUDA_ATT_SPLIT, a row's positions split over
// blocks): 3 rows at positions 299, 150 and 20 of a 300-position cache, 4
// query heads on 1 KV head of 128, plain and ggml numerics (probabilities
// rounded to f16), windows, softcaps and sinks; each row alone equal to it
// in the batch, bit for bit.
static void check_att_long(cuda_dev *d) {
    enum { H3 = 4, HD3 = 128, P3 = 300, NQ3 = H3 * HD3 };
    static float k3[P3 * HD3], v3[P3 * HD3], q3[3 * NQ3], w3[3 * NQ3], u3[3 * NQ3], g3[3 * NQ3], s3[P3 + 1];
    for (int i = 0; i < P3 * HD3; i++) k3[i] = frand(), v3[i] = frand();
    for (int i = 0; i < 3 * NQ3; i++) q3[i] = frand() * 0.5f;
    float sk3[H3] = {1.5f, -2.0f, 0.25f, 3.0f};
    int pos[3] = {299, 150, 20};
    float *dk = dev_copy(d, k3, P3 * HD3), *dv = dev_copy(d, v3, P3 * HD3), *dq = dev_copy(d, q3, 3 * NQ3), *dsk = dev_copy(d, sk3, H3);
    float *o1 = cuda_alloc(d, sizeof w3), *o2 = cuda_alloc(d, sizeof w3), *dsc = cuda_alloc(d, sizeof(float) * 3 * H3 * P3);
    int *dpos = cuda_alloc(d, sizeof pos);
    const float *kp[6] = {dk, dk, dk, dv, dv, dv};
    const float **dkp = cuda_alloc(d, sizeof kp);
    int ok0 = dk && dv && dq && dsk && o1 && o2 && dsc && dpos && dkp && !cuda_upload(d, dpos, pos, sizeof pos) &&
              !cuda_upload(d, (void *)dkp, kp, sizeof kp);
    for (int variant = 0; variant < 8; variant++) {
        int ggml = variant & 1, window = variant & 2 ? 100 : 0;
        float cap = variant & 4 ? 20.0f : 0.0f, scale = 0.088f;
        const float *sk = variant >= 6 ? sk3 : NULL;
        for (int t = 0; t < 3; t++)
            for (int h = 0; h < H3; h++) {
                int hi = pos[t], lo = window && hi - window + 1 > 0 ? hi - window + 1 : 0, n = hi - lo + 1;
                for (int j = 0; j < n; j++) {
                    float a = 0;
                    for (int i = 0; i < HD3; i++) a += q3[t * NQ3 + h * HD3 + i] * k3[(lo + j) * HD3 + i];
                    a *= scale;
                    s3[j] = cap ? cap * tanhf(a / cap) : a;
                }
                if (sk) s3[n] = sk[h];
                softmax(s3, sk ? n + 1 : n);
                for (int i = 0; i < HD3; i++) { // (u3: without ggml's rounding)
                    float o = 0;
                    for (int j = 0; j < n; j++) o += s3[j] * v3[(lo + j) * HD3 + i];
                    u3[t * NQ3 + h * HD3 + i] = o;
                }
                if (ggml)
                    for (int j = 0; j < n; j++) s3[j] = f16_to_f32(f32_to_f16(s3[j]));
                for (int i = 0; i < HD3; i++) {
                    float o = 0;
                    for (int j = 0; j < n; j++) o += s3[j] * v3[(lo + j) * HD3 + i];
                    w3[t * NQ3 + h * HD3 + i] = o;
                }
            }
        int ok = ok0 && !cuda_attention(d, dq, o1, 3, H3, 1, HD3, window, dpos, dkp, dkp + 3, scale, cap, sk ? dsk : NULL, ggml, dsc, P3) &&
                 !cuda_download(d, g3, o1, sizeof g3);
        // (ggml: a probability near an f16 rounding boundary may round the other way from the CPU's, each such
        // flip about 1e-4 of the output; the GPU is to be far closer to the rounded values than the unrounded are)
        double err = ok ? max_rel(g3, w3, 3 * NQ3) : -1.0, unr = max_rel(u3, w3, 3 * NQ3);
        CHECK(ok && (ggml ? err <= 3e-4 && err < 0.25 * unr : err <= 1e-5), "attention of long rows, variant %d: %s, error %.3g (unrounded %.3g)",
              variant, cuda_status(), err, unr);
        int alone = ok;
        for (int t = 0; t < 3 && alone; t++) {
            const float *kt[2] = {dk, dv};
            const float **dkt = cuda_alloc(d, sizeof kt);
            alone = dkt && !cuda_upload(d, (void *)dkt, kt, sizeof kt) &&
                    !cuda_attention(d, dq + t * NQ3, o2, 1, H3, 1, HD3, window, dpos + t, dkt, dkt + 1, scale, cap, sk ? dsk : NULL, ggml,
                                    dsc, P3) &&
                    same_floats(d, o1 + t * NQ3, o2, NQ3);
            cuda_free(d, (void *)dkt);
        }
        CHECK(alone, "attention of long rows, variant %d: a row alone differs from it among the others (%s)", variant, cuda_status());
    }
    cuda_free(d, dk), cuda_free(d, dv), cuda_free(d, dq), cuda_free(d, dsk), cuda_free(d, o1), cuda_free(d, o2), cuda_free(d, dsc);
    cuda_free(d, dpos), cuda_free(d, (void *)dkp);
}

// Decode rows' attention (cuda_attention_d: the cache rows before each row's
// position read before the kernel waits) against cuda_attention_q, bit for
// bit: 3 rows, a cache each, at positions 99, 40 and 0 of 100.
static void check_att_decode(cuda_dev *d, int H, int KV, int HD, int window, int ggml) {
    enum { R = 3, P = 100 };
    const int NQ = H * HD, NKV = KV * HD;
    float *q = malloc(sizeof(float) * R * NQ), *kv = malloc(sizeof(float) * 2 * R * P * NKV);
    uint16_t *kv16 = malloc(2 * 2 * R * P * NKV);
    for (int i = 0; i < R * NQ; i++) q[i] = frand();
    for (int i = 0; i < 2 * R * P * NKV; i++) kv16[i] = f32_to_f16(frand()), kv[i] = f16_to_f32(kv16[i]); // (f16 values: kv16 below)
    int pos[R] = {99, 40, 0};
    float *dq = dev_copy(d, q, R * NQ), *dkv = dev_copy(d, kv, 2 * R * P * NKV), *o1 = cuda_alloc(d, sizeof(float) * R * NQ);
    float *o2 = cuda_alloc(d, sizeof(float) * R * NQ), *sc = cuda_alloc(d, sizeof(float) * R * H * P);
    size_t xr = cuda_act_row_size(DT_Q8_0, NQ), used = (size_t)NQ / 32 * 34;
    void *x1 = cuda_alloc(d, R * xr), *x2 = cuda_alloc(d, R * xr);
    int *dp = cuda_alloc(d, sizeof pos);
    const float *tab[2 * R];
    for (int i = 0; i < 2 * R; i++) tab[i] = dkv ? dkv + (size_t)i * P * NKV : NULL;
    const float **dt = cuda_alloc(d, sizeof tab);
    float scale = 1.0f / sqrtf((float)HD);
    int qz = cuda_attention_q_ok(DT_Q8_0, H, HD);
    int ok = dq && dkv && o1 && o2 && sc && x1 && x2 && dp && dt && !cuda_upload(d, dp, pos, sizeof pos) &&
             !cuda_upload(d, (void *)dt, tab, sizeof tab) &&
             !cuda_attention_q(d, dq, o1, R, H, KV, HD, window, dp, dt, dt + R, scale, 0.0f, NULL, ggml, sc, P, DT_Q8_0, qz ? x1 : NULL) &&
             !cuda_attention_d(d, dq, o2, R, H, KV, HD, window, dp, dt, dt + R, scale, 0.0f, NULL, ggml, sc, P, DT_Q8_0, qz ? x2 : NULL, 1) &&
             same_floats(d, o1, o2, (size_t)R * NQ);
    if (ok && qz) ok = same_rows(d, x1, x2, R, xr, used);
    CHECK(ok, "decode rows' attention (%d heads on %d of %d, window %d, ggml %d): differs from cuda_attention_q (%s)", H, KV, HD, window,
          ggml, cuda_status());
    // the same values in f16 caches (cuda_attention_kv's kv16), decode rows and not: o1 bit for bit
    {
        void *h = cuda_alloc(d, 2 * 2 * (size_t)R * P * NKV), *ht[2 * R], **dh = cuda_alloc(d, sizeof ht);
        for (int i = 0; i < 2 * R; i++) ht[i] = h ? (char *)h + 2 * (size_t)i * P * NKV : NULL;
        int ok16 = ok && h && dh && !cuda_upload(d, h, kv16, 2 * 2 * (size_t)R * P * NKV) && !cuda_upload(d, dh, ht, sizeof ht);
        for (int dec = 0; dec < 2 && ok16; dec++)
            ok16 = !cuda_attention_kv(d, dq, o2, R, H, KV, HD, window, dp, (const void *const *)dh, (const void *const *)dh + R, scale, 0.0f,
                                      NULL, ggml, sc, P, DT_Q8_0, qz ? x2 : NULL, dec, 1) &&
                   same_floats(d, o1, o2, (size_t)R * NQ);
        CHECK(ok16, "attention over f16 caches (%d heads on %d of %d, window %d, ggml %d): differs from the f32 caches' (%s)", H, KV, HD,
              window, ggml, cuda_status());
        cuda_free(d, h), cuda_free(d, (void *)dh);
    }
    free(kv16);
    cuda_free(d, dq), cuda_free(d, dkv), cuda_free(d, o1), cuda_free(d, o2), cuda_free(d, sc), cuda_free(d, x1), cuda_free(d, x2);
    cuda_free(d, dp), cuda_free(d, (void *)dt), free(q), free(kv);
}

// A prompt's rows of one sequence through cuBLAS (cuda_attention_gemm) against the per-row kernel
// (cuda_attention_kv). Under ggml's numerics q, k and v are f16 values, so the products are exact and
// the sums' order differs; a probability near an f16 rounding boundary may then round to the next f16
// (2^-11 of it), so each value is held within 4e-3 of its row's scale and the whole within a
// normalized error of 1e-9; without them (f32 cache, f32 probabilities) within 1e-11 and 1e-5. Its
// quantized rows are cuda_quantize's of its floats. T rows at positions P0.. of a cache of P0 + T
// positions, f32 and f16 caches; chunked: a scratch budget of 64 KB, so the rows go a few at a time.
static void check_att_gemm(cuda_dev *d0, int H, int KV, int HD, int window, int kv16, int ggml, float cap, int sink, int chunked) {
    enum { T = 75, P0 = 41, P = P0 + T };
    if (chunked) setenv("INFER_CUDA_ATT_GEMM_BYTES", "65536", 1);
    cuda_dev *d = chunked ? cuda_open(0) : d0;
    if (chunked) unsetenv("INFER_CUDA_ATT_GEMM_BYTES");
    const int NQ = H * HD, NKV = KV * HD;
    float *q = malloc(sizeof(float) * T * NQ), *kv = malloc(sizeof(float) * 2 * P * NKV), sk[64];
    uint16_t *h16 = malloc(2 * 2 * (size_t)P * NKV);
    for (int i = 0; i < T * NQ; i++) q[i] = ggml ? f16_to_f32(f32_to_f16(frand() * 2)) : frand() * 2;
    for (int i = 0; i < 2 * P * NKV; i++) h16[i] = f32_to_f16(frand() * 2), kv[i] = ggml ? f16_to_f32(h16[i]) : frand() * 2;
    for (int i = 0; i < H; i++) sk[i] = frand();
    int pos[T];
    for (int t = 0; t < T; t++) pos[t] = P0 + t;
    float *dq = dev_copy(d0, q, T * NQ), *dkv = dev_copy(d0, kv, 2 * P * NKV), *dsk = dev_copy(d0, sk, H);
    void *dh = cuda_alloc(d0, 2 * 2 * (size_t)P * NKV);
    float *o1 = cuda_alloc(d0, sizeof(float) * T * NQ), *o2 = cuda_alloc(d0, sizeof(float) * T * NQ), *o3 = cuda_alloc(d0, sizeof(float) * T * NQ);
    float *sc = cuda_alloc(d0, sizeof(float) * T * H * (P + 1));
    size_t xr = cuda_act_row_size(DT_Q8_0, NQ), used = (size_t)NQ / 32 * 34;
    void *x1 = cuda_alloc(d0, T * xr), *x2 = cuda_alloc(d0, T * xr);
    int *dp = cuda_alloc(d0, sizeof pos);
    const void *kc = kv16 ? (const void *)dh : (const void *)dkv;
    const void *vc = kv16 ? (const void *)((char *)dh + 2 * (size_t)P * NKV) : (const void *)(dkv + (size_t)P * NKV);
    const void *tab[2 * T];
    for (int t = 0; t < T; t++) tab[t] = kc, tab[T + t] = vc;
    const void **dt = cuda_alloc(d0, sizeof tab);
    float scale = 1.0f / sqrtf((float)HD);
    const float *sinks = sink ? dsk : NULL;
    int ok = d && dq && dkv && dsk && dh && o1 && o2 && o3 && sc && x1 && x2 && dp && dt && !cuda_upload(d0, dh, h16, 2 * 2 * (size_t)P * NKV) &&
             !cuda_upload(d0, dp, pos, sizeof pos) && !cuda_upload(d0, (void *)dt, tab, sizeof tab) && !cuda_sync(d0) &&
             !cuda_attention_kv(d, dq, o1, T, H, KV, HD, window, dp, (const void *const *)dt, (const void *const *)dt + T, scale, cap, sinks,
                                ggml, sc, P + 1, 0, NULL, 0, kv16) &&
             !cuda_attention_gemm(d, dq, o2, T, H, KV, HD, window, dp, pos, kc, vc, scale, cap, sinks, ggml, 0, NULL, kv16) &&
             !cuda_attention_gemm(d, dq, o3, T, H, KV, HD, window, dp, pos, kc, vc, scale, cap, sinks, ggml, DT_Q8_0, x1, kv16) &&
             !cuda_quantize(d, DT_Q8_0, o3, T, NQ, x2) && !cuda_sync(d);
    float *a = ok ? host_of(d, o1, (size_t)T * NQ) : NULL, *b = ok ? host_of(d, o2, (size_t)T * NQ) : NULL;
    double e = 0, s2 = 0, worst = 0;
    for (int t = 0; a && b && t < T; t++) {
        double rs = 0;
        for (int i = 0; i < NQ; i++) rs += (double)a[(size_t)t * NQ + i] * a[(size_t)t * NQ + i];
        rs = sqrt(rs / NQ) + 1e-30;
        for (int i = 0; i < NQ; i++) {
            double df = (double)b[(size_t)t * NQ + i] - a[(size_t)t * NQ + i];
            e += df * df, s2 += (double)a[(size_t)t * NQ + i] * a[(size_t)t * NQ + i];
            if (fabs(df) / rs > worst) worst = fabs(df) / rs;
        }
    }
    CHECK(ok && a && b && e <= (ggml ? 4e-9 : 1e-11) * s2 && worst <= (ggml ? 4e-3 : 1e-5),
          "prompt attention through cuBLAS (%d heads on %d of %d, window %d, %s cache, ggml %d, softcap %g, sinks %d, chunked %d): "
          "normalized error %.3g, worst %.3g of a row's scale, against the per-row kernel (%s)", H, KV, HD, window, kv16 ? "f16" : "f32",
          ggml, cap, sink, chunked, s2 > 0 ? e / s2 : -1.0, worst, cuda_status());
    ok = ok && same_floats(d, o2, o3, (size_t)T * NQ);
    CHECK(ok, "prompt attention through cuBLAS (%d heads of %d): its floats differ when it also quantizes them", H, HD);
    if (ok) {
        ok = same_rows(d, x1, x2, T, xr, used);
        CHECK(ok, "prompt attention through cuBLAS (%d heads of %d): its quantized rows are not cuda_quantize's of its floats", H, HD);
    }
    free(a), free(b), free(q), free(kv), free(h16);
    cuda_free(d0, dq), cuda_free(d0, dkv), cuda_free(d0, dsk), cuda_free(d0, dh), cuda_free(d0, o1), cuda_free(d0, o2), cuda_free(d0, o3);
    cuda_free(d0, sc), cuda_free(d0, x1), cuda_free(d0, x2), cuda_free(d0, dp), cuda_free(d0, (void *)dt);
    if (chunked) cuda_close(d);
}



// The fused kernels against the kernels they join, bit for bit: products
// of one input in one launch, gate and up with their activation, the chain
// of row operations, and q/k/v's norms, RoPE, rounding and cache rows.
static void check_fused(cuda_dev *d) {
    enum { T = 3, E = 512, F = 768, EMAX = 6400 };
    static float x[T * EMAX], o[T * EMAX], w[EMAX], w2[EMAX];
    for (int i = 0; i < T * EMAX; i++) x[i] = frand() * (i % 41 == 0 ? 6.0f : 1.0f), o[i] = frand();
    for (int i = 0; i < EMAX; i++) w[i] = frand(), w2[i] = frand();
    // products: a q8_0-format trio of types, and a k-quant pair with its activation
    int trio[3] = {DT_Q5_0, DT_Q8_0, DT_Q4_0}, pair[2] = {DT_Q4_K, DT_Q6_K};
    for (int set = 0; set < 2; set++) {
        int n = set ? 2 : 3, *ty = set ? pair : trio, rows[3] = {F, F, 256};
        void *dw[3] = {0};
        float *dy[3] = {0}, *dz[3] = {0}, *dx = dev_copy(d, x, T * E), *f = malloc(sizeof(float) * E);
        size_t xr = cuda_act_row_size(ty[0], E);
        void *dq = cuda_alloc(d, xr * T);
        int ok = dx && dq && f && !cuda_quantize(d, ty[0], dx, T, E, dq);
        cuda_mat m[3];
        for (int i = 0; i < n && ok; i++) {
            size_t rs = dtype_row_size(ty[i], E);
            unsigned char *hw = malloc(rs * rows[i]);
            for (int r = 0; r < rows[i] && hw; r++) {
                for (int k = 0; k < E; k++) f[k] = frand();
                dtype_get(ty[i])->from_float(f, hw + rs * r, E);
            }
            dw[i] = hw ? cuda_weight_upload(d, ty[i], hw, rows[i], E) : NULL;
            dy[i] = cuda_alloc(d, sizeof(float) * T * rows[i]), dz[i] = cuda_alloc(d, sizeof(float) * T * rows[i]);
            ok = hw && dw[i] && dy[i] && dz[i] && !cuda_matmul(d, ty[i], dw[i], rows[i], E, dq, T, dy[i]);
            m[i] = (cuda_mat){ty[i], dw[i], rows[i], dz[i]};
            free(hw);
        }
        ok = ok && !cuda_matmul_multi(d, n, m, E, dq, T, -1, 0);
        for (int i = 0; i < n && ok; i++) ok = same_floats(d, dy[i], dz[i], (size_t)T * rows[i]);
        CHECK(ok, "%d products in one launch: %s", n, ok ? "" : "differ from one at a time (or failed)");
        if (set == 1)
            for (int ggml = 0; ggml < 2; ggml++) { // gate and up with GELU: the products, then cuda_act
                int gok = ok && !cuda_matmul(d, ty[0], dw[0], F, E, dq, T, dy[0]) && !cuda_matmul(d, ty[1], dw[1], F, E, dq, T, dy[1]) &&
                          !cuda_act(d, dy[0], dy[1], (size_t)T * F, 1, ggml) && !cuda_matmul_multi(d, 2, m, E, dq, T, 1, ggml) &&
                          same_floats(d, dy[0], dz[0], (size_t)T * F);
                CHECK(gok, "gate and up with the activation in one launch (ggml %d): differs from the three apart", ggml);
            }
        for (int i = 0; i < 3; i++) cuda_free(d, dw[i]), cuda_free(d, dy[i]), cuda_free(d, dz[i]);
        cuda_free(d, dx), cuda_free(d, dq), free(f);
    }
    // the chain: o = norm(o); x += o * s; xn = norm(x) [quantized], against the kernels one by one
    for (int variant = 0; variant < 16; variant++) {
        static const int sizes[4] = {512, 768, 2560, 6400}; // (256, 768 and 1024 threads in registers; the long rows' kernel)
        int E = sizes[variant / 4];
        int wtype = variant % 4 == 2 ? DT_Q8_0 : DT_Q4_K, quant = variant % 4 >= 2, kind = variant & 1;
        size_t xr = cuda_act_row_size(wtype, E);
        float *o1 = dev_copy(d, o, T * E), *x1 = dev_copy(d, x, T * E), *o2 = dev_copy(d, o, T * E), *x2 = dev_copy(d, x, T * E);
        float *n1 = cuda_alloc(d, sizeof(float) * T * E), *n2 = cuda_alloc(d, sizeof(float) * T * E), *dw = dev_copy(d, w, E), *dw2 = dev_copy(d, w2, E);
        void *q1 = cuda_alloc(d, xr * T), *q2 = cuda_alloc(d, xr * T);
        int ok = o1 && x1 && o2 && x2 && n1 && n2 && dw && dw2 && q1 && q2 && !cuda_norm(d, o1, o1, dw, NULL, T, E, 1e-6f, kind) &&
                 !cuda_axpy(d, x1, o1, 0.75f, (size_t)T * E) &&
                 !cuda_norm(d, n1, x1, dw2, NULL, T, E, 1e-6f, kind) && !(quant && cuda_quantize(d, wtype, n1, T, E, q1));
        cuda_chain c = {.o = o2, .x = x2, .xn = n2, .wa = dw, .wb = dw2, .norm_a = 1, .residual = 1, .norm_b = 1, .kind_a = kind,
                        .kind_b = kind, .n = E, .eps_a = 1e-6f, .eps_b = 1e-6f, .s = 0.75f, .xq = quant ? q2 : NULL};
        ok = ok && !cuda_chain_run(d, &c, T, wtype) && same_floats(d, o1, o2, T * E) && same_floats(d, x1, x2, T * E) &&
             same_floats(d, n1, n2, T * E);
        if (ok && quant) // (the rows' padding not compared)
            ok = same_rows(d, q1, q2, T, xr, wtype == DT_Q8_0 ? (size_t)E / 32 * 34 : (size_t)E / 256 * 292);
        CHECK(ok, "norm, residual, norm%s (kind %d, %d) in one kernel: differs from the kernels one by one", quant ? ", quantize" : "", kind, E);
        cuda_free(d, o1), cuda_free(d, x1), cuda_free(d, o2), cuda_free(d, x2), cuda_free(d, n1), cuda_free(d, n2);
        cuda_free(d, dw), cuda_free(d, dw2), cuda_free(d, q1), cuda_free(d, q2);
    }
    // q, k, v: 2 rows, 4 query heads and 2 KV heads of 128, caches of 8 positions
    {
        enum { R = 2, H = 4, KV = 2, HD = 128, P = 8, NQ = H * HD, NKV = KV * HD };
        static float q[R * NQ], kv[R * NKV], nw[HD], inv[HD / 2];
        for (int i = 0; i < R * NQ; i++) q[i] = frand() * 3;
        for (int i = 0; i < R * NKV; i++) kv[i] = frand() * 3;
        for (int i = 0; i < HD; i++) nw[i] = frand();
        for (int i = 0; i < HD / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / HD);
        int pos[R] = {3, 6};
        for (int layout = 0; layout < 2; layout++) {
            int off = layout ? 1 : HD / 2, stride = layout ? 2 : 1;
            float *q1 = dev_copy(d, q, R * NQ), *k1 = dev_copy(d, kv, R * NKV), *v1 = dev_copy(d, kv, R * NKV);
            float *q2 = dev_copy(d, q, R * NQ), *k2 = dev_copy(d, kv, R * NKV), *v2 = dev_copy(d, kv, R * NKV);
            float *dn = dev_copy(d, nw, HD), *di = dev_copy(d, inv, HD / 2);
            float *kc1 = cuda_alloc(d, sizeof(float) * P * NKV), *vc1 = cuda_alloc(d, sizeof(float) * P * NKV);
            float *kc2 = cuda_alloc(d, sizeof(float) * P * NKV), *vc2 = cuda_alloc(d, sizeof(float) * P * NKV);
            int *dp = cuda_alloc(d, sizeof pos);
            float *tabs[8] = {kc1, kc1, vc1, vc1, kc2, kc2, vc2, vc2};
            float **dt = cuda_alloc(d, sizeof tabs);
            int ok = q1 && k1 && v1 && q2 && k2 && v2 && dn && di && kc1 && vc1 && kc2 && vc2 && dp && dt &&
                     !cuda_zero(d, kc1, sizeof(float) * P * NKV) && !cuda_zero(d, vc1, sizeof(float) * P * NKV) &&
                     !cuda_zero(d, kc2, sizeof(float) * P * NKV) && !cuda_zero(d, vc2, sizeof(float) * P * NKV) &&
                     !cuda_upload(d, dp, pos, sizeof pos) && !cuda_upload(d, dt, tabs, sizeof tabs) &&
                     !cuda_norm(d, q1, q1, dn, NULL, R * H, HD, 1e-6f, 1) && !cuda_norm(d, k1, k1, dn, NULL, R * KV, HD, 1e-6f, 1) &&
                     !cuda_norm(d, v1, v1, NULL, NULL, R * KV, HD, 1e-6f, 0) &&
                     !cuda_rope(d, q1, R, H, HD, dp, di, HD / 2, off, stride, 1.0f) && !cuda_rope(d, k1, R, KV, HD, dp, di, HD / 2, off, stride, 1.0f) &&
                     !cuda_round_f16(d, q1, R * NQ) && !cuda_round_f16(d, k1, R * NKV) && !cuda_round_f16(d, v1, R * NKV) &&
                     !cuda_kv_store(d, (void *const *)dt, dp, k1, R, NKV, 0) && !cuda_kv_store(d, (void *const *)dt + 2, dp, v1, R, NKV, 0);
            cuda_qkv c = {.q = q2, .k = k2, .v = v2, .H = H, .KV = KV, .hd = HD, .kind = 1, .v_norm = 1, .round = 1,
                          .n_pairs = HD / 2, .pair_offset = off, .pair_stride = stride, .q_norm = dn, .k_norm = dn, .inv_freq = di,
                          .eps = 1e-6f, .mscale = 1.0f, .k_cache = (void *const *)dt + 4, .v_cache = (void *const *)dt + 6};
            ok = ok && !cuda_qkv_prep(d, &c, R, dp) && same_floats(d, q1, q2, R * NQ) && same_floats(d, k1, k2, R * NKV) &&
                 same_floats(d, v1, v2, R * NKV) && same_floats(d, kc1, kc2, P * NKV) && same_floats(d, vc1, vc2, P * NKV);
            CHECK(ok, "q, k, v norms, RoPE (layout %d), rounding and cache rows in one kernel: differ from the kernels one by one", layout);
            // f16 caches (kv16): the same rows as halves, by the fused kernel and by cuda_kv_store
            {
                void *h[4] = {cuda_alloc(d, 2 * P * NKV), cuda_alloc(d, 2 * P * NKV), cuda_alloc(d, 2 * P * NKV), cuda_alloc(d, 2 * P * NKV)};
                void *ht[8] = {h[0], h[0], h[1], h[1], h[2], h[2], h[3], h[3]};
                void **dh = cuda_alloc(d, sizeof ht);
                float *q3 = dev_copy(d, q, R * NQ), *k3 = dev_copy(d, kv, R * NKV), *v3 = dev_copy(d, kv, R * NKV);
                int ok16 = h[0] && h[1] && h[2] && h[3] && dh && q3 && k3 && v3 && !cuda_upload(d, dh, ht, sizeof ht);
                for (int i = 0; i < 4 && ok16; i++) ok16 = !cuda_zero(d, h[i], 2 * P * NKV);
                cuda_qkv c16 = c;
                c16.q = q3, c16.k = k3, c16.v = v3, c16.k_cache = (void *const *)dh, c16.v_cache = (void *const *)dh + 2, c16.kv16 = 1;
                ok16 = ok16 && !cuda_qkv_prep(d, &c16, R, dp) && !cuda_kv_store(d, (void *const *)dh + 4, dp, k1, R, NKV, 1) &&
                       !cuda_kv_store(d, (void *const *)dh + 6, dp, v1, R, NKV, 1);
                float *hk = host_of(d, kc1, P * NKV), *hv = host_of(d, vc1, P * NKV);
                uint16_t *g = malloc(2 * P * NKV);
                for (int i = 0; i < 4 && ok16; i++) {
                    ok16 = hk && hv && g && !cuda_download(d, g, h[i], 2 * P * NKV);
                    for (int j = 0; j < P * NKV && ok16; j++) ok16 = g[j] == f32_to_f16(i % 2 ? hv[j] : hk[j]);
                }
                CHECK(ok16, "q, k, v cache rows in f16 (layout %d): not the f32 rows' values as halves", layout);
                free(hk), free(hv), free(g);
                for (int i = 0; i < 4; i++) cuda_free(d, h[i]);
                cuda_free(d, dh), cuda_free(d, q3), cuda_free(d, k3), cuda_free(d, v3);
            }
            float *all[] = {q1, k1, v1, q2, k2, v2, dn, di, kc1, vc1, kc2, vc2};
            for (int i = 0; i < 12; i++) cuda_free(d, all[i]);
            cuda_free(d, dp), cuda_free(d, dt);
        }
    }
    int shapes[4][3] = {{8, 2, 128}, {4, 1, 256}, {2, 2, 64}, {2, 1, 512}};
    for (int v = 0; v < 16; v++) check_att_decode(d, shapes[v % 4][0], shapes[v % 4][1], shapes[v % 4][2], v & 4 ? 30 : 0, v >> 3 & 1);
    int gs[4][3] = {{8, 4, 256}, {4, 1, 256}, {8, 2, 128}, {4, 4, 64}};
    if (cuda_attention_gemm_ok(d, 1, 1))
        for (int v = 0; v < 12; v++)
            check_att_gemm(d, gs[v % 4][0], gs[v % 4][1], gs[v % 4][2], v & 4 ? 40 : 0, v & 1, v < 8 ? 1 : v & 1, v == 5 ? 30.0f : 0.0f, v == 6,
                           v == 3 || v == 6 || v == 9);
    else
        printf("skip: prompt attention through cuBLAS (cuBLAS or its strided batched product not found: %s)\n", cuda_status());
}

// The prompt products (tensor cores, f16 inputs): against the dequantized
// matrix with the weights and activations rounded to f16 as the kernel
// rounds them (normalized error <= 1e-7: the order of the f32 sums differs,
// and a weight whose dequantized value the CPU rounds otherwise may round to
// the next f16), and against the unrounded product (the f16 inputs' own
// error, documented: <= 1e-5). F16 and BF16 weights (their own values, the
// activations in two parts): against the exact product, <= 1e-9. lowp
// (cuda_gemm_lowp, ggml's f16 / bf16 products): where cuBLAS takes them, the
// activations in one part, against the product with them rounded to the
// weights' type, <= 1e-7 (elsewhere k_gemm2's two parts, as without).
static void check_gemm_p(cuda_dev *d, int wt, int rows, int cols, int T, int lowp) {
    const dtype_traits *tr = dtype_get(wt);
    size_t rs = dtype_row_size(wt, cols);
    unsigned char *w = malloc(rs * rows);
    float *wf = malloc(sizeof(float) * (size_t)rows * cols), *x = malloc(sizeof(float) * (size_t)T * cols), *y = malloc(sizeof(float) * (size_t)T * rows);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) wf[(size_t)r * cols + i] = frand() * (i % 29 == 0 ? 4.0f : 1.0f);
        tr->from_float(wf + (size_t)r * cols, w + rs * r, cols);
        tr->to_float(w + rs * r, wf + (size_t)r * cols, cols); // (the stored values)
    }
    for (size_t i = 0; i < (size_t)T * cols; i++) x[i] = frand() * (i % 53 == 0 ? 20.0f : 1.0f);
    void *dw = cuda_weight_upload(d, wt, w, rows, cols);
    float *dx = dev_copy(d, x, (size_t)T * cols), *dy = cuda_alloc(d, sizeof(float) * (size_t)T * rows);
    const int fl = wt == DT_F16 || wt == DT_BF16, one = lowp && fl && cuda_gemm_blas(d, wt, rows, cols, T);
    int ok = dw && dx && dy && cuda_gemm_ok(wt, cols, T) && !cuda_gemm_lowp(d, wt, dw, rows, cols, dx, T, dy, lowp) &&
             !cuda_download(d, y, dy, sizeof(float) * (size_t)T * rows);
    CHECK(ok, "%s gemm%s %dx%d, %d tokens: %s", tr->name, lowp ? " (lowp)" : "", rows, cols, T, cuda_status());
    if (ok) {
        double e16 = 0, e = 0, e1 = 0, s = 0;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < rows; r++) {
                double a = 0, a16 = 0, a1 = 0;
                for (int i = 0; i < cols; i++) {
                    float wv = wf[(size_t)r * cols + i], xv = x[(size_t)t * cols + i];
                    a += (double)wv * xv;
                    a16 += (double)f16_to_f32(f32_to_f16(wv)) * f16_to_f32(f32_to_f16(xv));
                    a1 += (double)wv * (wt == DT_BF16 ? bf16_to_f32(f32_to_bf16(xv)) : f16_to_f32(f32_to_f16(xv)));
                }
                double g = y[(size_t)t * rows + r];
                e16 += (g - a16) * (g - a16), e += (g - a) * (g - a), e1 += (g - a1) * (g - a1), s += a * a;
            }
        if (one) // (the activations in one part, rounded to the weights' type)
            CHECK(e1 <= 1e-7 * s, "%s gemm (lowp, cuBLAS) %dx%d, %d tokens: against the product of the rounded activations, normalized "
                  "error %.3g", tr->name, rows, cols, T, e1 / s);
        else if (fl) // (float weights: the activations in two parts, near f32)
            CHECK(e <= 1e-9 * s, "%s gemm %dx%d, %d tokens: against the exact product, normalized error %.3g", tr->name, rows, cols, T, e / s);
        else {
            CHECK(e16 <= 1e-7 * s, "%s gemm %dx%d, %d tokens: against the f16-rounded product, normalized error %.3g", tr->name, rows, cols, T, e16 / s);
            CHECK(e <= 1e-5 * s, "%s gemm %dx%d, %d tokens: against the exact product, normalized error %.3g", tr->name, rows, cols, T, e / s);
        }
    }
    cuda_free(d, dw), cuda_free(d, dx), cuda_free(d, dy);
    free(w), free(wf), free(x), free(y);
}
static void check_gemm(cuda_dev *d, int wt, int rows, int cols, int T) { check_gemm_p(d, wt, rows, cols, T, 0); }

// The GPU's top-K (one block) against walk.c's, index for index: scores with
// many ties, k from 1 to n; then gate KNN (infer_knn) on the GPU against the CPU's.
static void check_topk(cuda_dev *d) {
    enum { N = 10240 };
    float *s = malloc(sizeof(float) * N);
    int32_t *want = malloc(sizeof(int32_t) * N), *got = malloc(sizeof(int32_t) * N);
    float *ds = cuda_alloc(d, sizeof(float) * N);
    int *di = cuda_alloc(d, sizeof(int) * N);
    for (int i = 0; i < N; i++) s[i] = i % 7 == 0 ? (float)(i % 5) - 2.0f : frand() * 3.0f; // (ties: -2 .. 2, and +-0)
    int ks[] = {1, 2, 100, 1024, 5000, N - 1, N}, ok_all = 1;
    int up = ds && di && !cuda_upload(d, ds, s, sizeof(float) * N);
    CHECK(up, "top-k: %s", cuda_status());
    for (int j = 0; j < 7 && up; j++) {
        int k = ks[j];
        topk_abs(s, N, k, want);
        int ok = !cuda_topk_abs(d, ds, N, k, di) && !cuda_download(d, got, di, sizeof(int) * (size_t)k) &&
                 !memcmp(got, want, sizeof(int32_t) * (size_t)k);
        CHECK(ok, "top-k of %d, k %d: the GPU's indices differ from topk_abs's (%s)", N, k, cuda_status());
        ok_all &= ok;
    }
    cuda_free(d, ds), cuda_free(d, di);
    // gate KNN at a small layer's shape, each type: the same K vectors on both
    enum { F = 3000, H = 512, K = 300 };
    float *rows = malloc(sizeof(float) * F * H), x[H];
    for (int i = 0; i < F * H; i++) rows[i] = frand() * 0.05f;
    for (int i = 0; i < H; i++) x[i] = frand();
    const int types[] = {INFER_TYPE_F32, INFER_TYPE_F16, INFER_TYPE_Q4_0};
    for (int t = 0; t < 3; t++) {
        infer_knn *c = NULL, *g = NULL;
        int ok = !infer_knn_new(types[t], rows, F, H, &c) && !infer_knn_new(types[t], rows, F, H, &g) &&
                 !infer_knn_set_device(g, "cuda") && !infer_knn_topk(c, x, K, want) && !infer_knn_topk(g, x, K, got);
        CHECK(ok, "gate KNN %s: %s", infer_type_name(types[t]), infer_last_error());
        if (ok) { // (sums in another order: a vector at the K-th score's edge may swap; no more than 1 in 100)
            int same = 0;
            for (int a = 0, b = 0; a < K && b < K;) {
                if (want[a] == got[b]) same++, a++, b++;
                else if (want[a] < got[b]) a++;
                else b++;
            }
            CHECK(same >= K - K / 100, "gate KNN %s on the GPU: %d of the CPU's %d vectors", infer_type_name(types[t]), same, K);
        }
        infer_knn_free(c), infer_knn_free(g);
    }
    free(rows), free(s), free(want), free(got);
    (void)ok_all;
}

// One-token products in the kernels of one weight type (k_mv's TY, the
// default) against the kernel of any type (a device opened with
// INFER_CUDA_MV_SPEC=0), bit for bit: every type, 8, 32 and 128 threads a
// row, rows that do not fill the last block, three matrices in one launch,
// gate and up with GELU.
static void check_mv_spec(cuda_dev *d) {
    setenv("INFER_CUDA_MV_SPEC", "0", 1);
    cuda_dev *dn = cuda_open(0);
    unsetenv("INFER_CUDA_MV_SPEC");
    CHECK(dn != NULL, "cuda_open (INFER_CUDA_MV_SPEC=0): %s", cuda_status());
    if (!dn) return;
    static const int types[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_MXFP4, DT_Q2_K, DT_Q3_K,
                                DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_F32, DT_F16, DT_BF16};
    static const int shapes[][2] = {{2100, 512}, {1030, 2560}, {301, 4096}, {1500, 8192}, {37, 256}, {2051, 1024}};
    int differ = 0, failed = 0, cases = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            int ty = types[ti], rows = shapes[si][0], cols = shapes[si][1];
            size_t rs = dtype_row_size(ty, cols), xr = cuda_act_row_size(ty, cols);
            int rr[3] = {rows, rows / 2 + 3, rows / 4 + 1};
            unsigned char *hw = malloc(rs * rows);
            float *f = malloc(sizeof(float) * cols);
            void *dw[3] = {0}, *dq = cuda_alloc(d, xr);
            float *y[2][3] = {{0}}, *dx = NULL;
            int ok = hw && f && dq && xr;
            for (int i = 0; i < 3 && ok; i++) {
                for (int r = 0; r < rr[i]; r++) {
                    for (int k = 0; k < cols; k++) f[k] = frand() * (k % 29 == 0 ? 4.0f : 1.0f);
                    dtype_get(ty)->from_float(f, hw + rs * r, cols);
                }
                dw[i] = cuda_weight_upload(d, ty, hw, rr[i], cols);
                y[0][i] = cuda_alloc(d, sizeof(float) * rr[i]), y[1][i] = cuda_alloc(d, sizeof(float) * rr[i]);
                ok = dw[i] && y[0][i] && y[1][i];
            }
            for (int k = 0; k < cols && ok; k++) f[k] = frand() * (k % 53 == 0 ? 20.0f : 1.0f);
            ok = ok && (dx = dev_copy(d, f, cols)) && !cuda_quantize(d, ty, dx, 1, cols, dq) && !cuda_sync(d);
            for (int form = 0; form < 3 && ok; form++) { // one matrix, three, gate and up
                int n = form == 0 ? 1 : form == 1 ? 3 : 2;
                for (int v = 0; v < 2 && ok; v++) {
                    cuda_dev *dd = v ? dn : d;
                    cuda_mat m[3];
                    for (int i = 0; i < n; i++) m[i] = (cuda_mat){ty, dw[i], form == 2 ? rows : rr[i], y[v][i]};
                    if (form == 2) m[1].w = dw[0]; // (up: the gate's rows again, enough rows)
                    ok = !cuda_matmul_multi(dd, n, m, cols, dq, 1, form == 2 ? 1 : -1, 1) && !cuda_sync(dd);
                }
                for (int i = 0; i < (form == 2 ? 1 : n) && ok; i++) {
                    differ += !same_floats(d, y[0][i], y[1][i], form == 2 ? rows : rr[i]);
                    cases++;
                }
            }
            failed += !ok;
            for (int i = 0; i < 3; i++) cuda_free(d, dw[i]), cuda_free(d, y[0][i]), cuda_free(d, y[1][i]);
            cuda_free(d, dq), cuda_free(d, dx), free(hw), free(f);
        }
    CHECK(!failed, "k_mv of one type: %d products failed: %s", failed, cuda_status());
    CHECK(!differ, "k_mv of one type: %d of %d one-token products differ from the kernel of any type", differ, cases);
    printf("k_mv of one type against any type: %d products compared\n", cases);
    cuda_close(dn);
}

// the one-pass split kernels (INFER_CUDA_ATT_DEC=1; 2-5 on the tensor cores where the cache is f16 and heads 64 or 128,
// 4 and 5 through a cp.async ring of 3 and 2 stages)
static void check_decs(void) {
    static const char *decs[] = {"1", "2", "3", "4", "5"};
    for (int di = 0; di < 5; di++) {
        const char *dec = decs[di];
        setenv("INFER_CUDA_ATT_DEC", dec, 1);
        cuda_dev *d1 = cuda_open(0);
        unsetenv("INFER_CUDA_ATT_DEC");
        CHECK(d1 != NULL, "cuda_open (INFER_CUDA_ATT_DEC=%s): %s", dec, cuda_status());
        if (!d1) continue;
        split_ggml_tol = 4e-3;
        printf("(INFER_CUDA_ATT_DEC=%s)\n", dec);
        check_att_split(d1, 32, 8, 128, 1, 1, 0, 0.0f, 0), check_att_split(d1, 32, 8, 128, 0, 0, 0, 0.0f, 0);
        check_att_split(d1, 8, 1, 64, 1, 0, 2000, 30.0f, 1), check_att_split(d1, 4, 4, 256, 0, 0, 0, 0.0f, 1);
        check_att_split(d1, 16, 2, 128, 1, 0, 0, 0.0f, 0), check_att_split(d1, 8, 2, 512, 1, 1, 0, 0.0f, 0);
        check_att_split(d1, 32, 8, 128, 1, 0, 0, 0.0f, 1), check_att_split(d1, 16, 16, 64, 1, 1, 100, 0.0f, 0);
        check_att_split(d1, 28, 4, 128, 1, 1, 0, 0.0f, 0);
        split_ggml_tol = 3e-4;
        cuda_close(d1);
    }
}

// the checks of this file and of cuda_att.c / cuda_kv.c together
static int summary(void) {
    int ac, af;
    cuda_att_counts(&ac, &af);
    g_checks += ac, g_failed += af;
    cuda_kv_counts(&ac, &af);
    g_checks += ac, g_failed += af;
    return check_summary("cuda");
}

static void check_flashes(cuda_dev *d) {
    CHECK(cuda_attention_flash_ok(64, 1, 1) && cuda_attention_flash_ok(256, 1, 1) && !cuda_attention_flash_ok(96, 1, 1) &&
              cuda_attention_flash_ok(128, 0, 1) && !cuda_attention_flash_ok(128, 1, 0) && !cuda_attention_flash_ok(128, 0, 0),
          "flash attention: taken where it should not be, or not where it should");
    check_att_flash(d, 8, 2, 128, 1000, 130, 0, 0.0f, 0, 1), check_att_flash(d, 4, 1, 256, 41, 75, 40, 0.0f, 1, 1);
    check_att_flash(d, 4, 4, 64, 0, 200, 0, 30.0f, 0, 1), check_att_flash(d, 8, 8, 128, 3000, 64, 1000, 0.0f, 1, 1);
    check_att_flash(d, 32, 8, 128, 4096, 512, 0, 0.0f, 0, 1);
    // a block's pairs of 2 and 8 query heads a KV head (H / KV = 6 takes 2; 16 / 2 takes 8), rows past T in a block
    check_att_flash(d, 12, 2, 64, 500, 101, 50, 0.0f, 1, 1), check_att_flash(d, 16, 2, 128, 700, 90, 0, 20.0f, 0, 1);
    // outside ggml's numerics (a 16-bit model's f16 cache): q and P in two halves
    check_att_flash(d, 8, 2, 128, 1000, 130, 0, 0.0f, 0, 0), check_att_flash(d, 4, 1, 256, 41, 75, 40, 0.0f, 1, 0);
    check_att_flash(d, 4, 4, 64, 0, 200, 0, 30.0f, 0, 0), check_att_flash(d, 32, 8, 128, 4096, 512, 0, 0.0f, 0, 0);
    check_att_flash(d, 16, 2, 128, 700, 90, 0, 20.0f, 1, 0);
}

int main(void) {
    setenv("INFER_CUDA_FLASH_X", "1", 1); // (flash attention outside ggml's numerics: off by default until run here)
    int n = cuda_device_count();
    if (n == 0) {
        printf("test_cuda: skipped: %s\n", cuda_status());
        return 77;
    }
    cuda_dev *d = cuda_open(0);
    CHECK(d != NULL, "cuda_open: %s", cuda_status());
    if (!d) return check_summary("cuda");
    printf("test_cuda: %s\n", cuda_name(d));
    const char *only = getenv("TEST_CUDA_ONLY"); // (a part alone: "prefix", "dec", "flash")
    if (only) {
        if (strstr(only, "flash")) check_flashes(d);
        cuda_close(d);
        if (strstr(only, "prefix")) check_prefix_share();
        if (strstr(only, "dec")) check_decs();
        return summary();
    }
    check_vm(d);
    check_vm_share(d);
    int q32[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_MXFP4};
    int kq[] = {DT_Q2_K, DT_Q3_K, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    int fl[] = {DT_F32, DT_F16, DT_BF16};
    for (int k = 0; k < 6; k++) check_type(d, q32[k], 37, 96, 3), check_type(d, q32[k], 100, 2048, 8), check_type(d, q32[k], 9, 640, 1);
    for (int k = 0; k < 5; k++) check_type(d, kq[k], 37, 256, 3), check_type(d, kq[k], 100, 2560, 8), check_type(d, kq[k], 9, 2304, 1);
    for (int k = 0; k < 5; k++) check_type(d, kq[k], 1100, 2560, 19), check_type(d, q32[k], 3000, 1024, 19); // (groups of 8 tokens, 8 or 32 threads a row)
    // several tokens on the tensor cores (k_mmv) at each thread count a row (8, 32, 128), tails of units and of rows
    int mmv[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    for (int k = 0; k < 6; k++)
        check_type(d, mmv[k], 2500, k < 3 ? 1152 : 2304, 37), check_type(d, mmv[k], 1030, 2304, 5),
            check_type(d, mmv[k], 300, 8192, 17), check_type(d, mmv[k], 5, 4608, 2);
    // the default pass's k_mmq: token tiles of 8 to 64, tails of rows, chunks and slices
    g_mmq = 1;
    for (int k = 0; k < 6; k++)
        check_type(d, mmv[k], 2500, k < 3 ? 1152 : 2304, 37), check_type(d, mmv[k], 1030, 2304, 5), check_type(d, mmv[k], 300, 8192, 17),
            check_type(d, mmv[k], 5, 4608, 2), check_type(d, mmv[k], 130, 1536, 64), check_type(d, mmv[k], 70, 4096, 11);
    cuda_mmq_tune(d, 4, 1); // (token tiles of 32 at most; q4_K / q5_K's mins through int8 mma)
    for (int k = 3; k < 5; k++) check_type(d, mmv[k], 130, 1536, 64), check_type(d, mmv[k], 300, 2304, 37), check_type(d, mmv[k], 5, 4608, 2);
    cuda_mmq_tune(d, 8, 0);
    g_mmq = 2; // (deterministic: each token as alone)
    for (int k = 0; k < 6; k++) check_type(d, mmv[k], 300, k < 3 ? 1152 : 2304, 37), check_type(d, mmv[k], 70, 4096, 11);
    g_mmq = 0;
    check_mmq_multi(d, DT_Q4_K, DT_Q6_K, 300, 2048, 16), check_mmq_multi(d, DT_Q8_0, DT_Q4_0, 200, 1024, 40);
    check_mmq_multi(d, DT_Q5_K, DT_Q5_K, 70, 4096, 3);
    for (int k = 0; k < 3; k++) check_type(d, fl[k], 37, 100, 3), check_type(d, fl[k], 100, 2048, 8), check_type(d, fl[k], 9, 2304, 1);
    // many rows: the products' other thread counts a row (32, 8)
    int wide[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_1, DT_Q2_K, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_F16, DT_BF16, DT_F32};
    for (int k = 0; k < 11; k++) check_type(d, wide[k], 2100, 512, 2), check_type(d, wide[k], 8200, 256, 1);
    int gt[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_F16, DT_BF16};
    for (int k = 0; k < 8; k++) check_gemm(d, gt[k], 100, 512, 16), check_gemm(d, gt[k], 130, 768, 70);
    // blocks of 128 rows (a large product), and columns k_gemm2 does not take (96: k_gemm)
    check_gemm(d, DT_Q4_K, 20000, 256, 130), check_gemm(d, DT_F16, 20000, 256, 130), check_gemm(d, DT_Q8_0, 70, 96, 20);
    // large prompts: cuBLAS where it loads (f16 / bf16 from 64 tokens, the quantized types dequantized from 256)
    printf("gemm of 8192 x 256, 260 tokens: %s\n", cuda_gemm_blas(d, DT_Q4_K, 8192, 256, 260) ? "cuBLAS" : "k_gemm2 (no cuBLAS)");
    check_gemm(d, DT_Q4_K, 8192, 256, 260), check_gemm(d, DT_Q6_K, 8192, 256, 260), check_gemm(d, DT_Q8_0, 4096, 512, 300);
    check_gemm(d, DT_BF16, 8192, 256, 70), check_gemm(d, DT_F16, 4096, 512, 65);
    check_gemm_p(d, DT_BF16, 8192, 256, 70, 1), check_gemm_p(d, DT_F16, 4096, 512, 65, 1), check_gemm_p(d, DT_F16, 100, 512, 16, 1);
    CHECK(!cuda_gemm_ok(DT_F32, 512, 64) && !cuda_gemm_ok(DT_Q4_K, 512, 8) && !cuda_gemm_ok(DT_Q4_K, 640, 64), "gemm: taken where it should not be");
    check_ops(d);
    check_att_long(d);
    check_flashes(d);
    check_att_split(d, 32, 8, 128, 1, 1, 0, 0.0f, 0), check_att_split(d, 32, 8, 128, 0, 0, 0, 0.0f, 0);
    check_att_split(d, 8, 1, 64, 1, 0, 2000, 30.0f, 1), check_att_split(d, 4, 4, 256, 0, 0, 0, 0.0f, 1);
    check_att_split(d, 16, 2, 128, 1, 0, 0, 0.0f, 0), check_att_split(d, 8, 2, 512, 1, 1, 0, 0.0f, 0);
    check_fused(d);
    check_topk(d);
    check_mv_spec(d);
    cuda_close(d);
    check_deep_prompt();
    check_prefix_share();
    check_decs();
    // every row's positions split over blocks (INFER_CUDA_ATT_SPLIT=N; by default only single rows')
    setenv("INFER_CUDA_ATT_SPLIT", "16", 1);
    cuda_dev *ds = cuda_open(0);
    CHECK(ds != NULL, "cuda_open (INFER_CUDA_ATT_SPLIT=16): %s", cuda_status());
    if (ds) check_att_long(ds), cuda_close(ds);
    return summary();
}
#endif
