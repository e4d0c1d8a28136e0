// SIMD row kernels against their scalar oracle (normalized MSE <= 1e-7), and
// the oracle's integer path against the float dot of the decoded row.
#include "check.h"
#include "compute/cpu/vecdot.h"
#include "compute/cpu/vec.h"
#include "compute/cpu/ops.h"
#include "base/half.h"
#include "models/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) { // uniform in [-1, 1)
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

// x quantized to the activation type, with the sidecar the SIMD kernel reads
static void quant_act(const vecdot_kernel *ref, const vecdot_kernel *simd, const float *x, void *xa, int n) {
    ref->quant(x, xa, n);
    if (simd && simd->sums) act_q8_0_sums(xa, n);
}

static void check_type(int wt, int n, int rows) {
    const dtype_traits *tw = dtype_get(wt);
    const vecdot_kernel *ref = vecdot_get_ref(wt), *simd = vecdot_get_simd(wt);
    CHECK(ref != NULL, "%s has no reference kernel", tw->name);
    if (!ref) return;
    size_t wrs = dtype_row_size(wt, n), ars = act_row_size(simd ? simd : ref, n);
    float *x = malloc(sizeof(float) * n), *row = malloc(sizeof(float) * n), *dec = malloc(sizeof(float) * n);
    unsigned char *w = malloc(wrs), *xa = malloc(ars);
    double se = 0, ss = 0, fe = 0, fs = 0;
    for (int r = 0; r < rows; r++) {
        float scale = r % 3 == 0 ? 0.01f : r % 3 == 1 ? 1.0f : 30.0f;
        for (int i = 0; i < n; i++) { row[i] = frand() * scale; x[i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f); }
        if (r == 1) for (int i = 0; i < n; i++) row[i] = fabsf(row[i]); // all positive
        tw->from_float(row, w, n);
        if (ref->quant) quant_act(ref, simd, x, xa, n);
        float a = ref->dot(w, ref->act_type == DT_F32 ? (const void *)x : xa, n);
        if (simd) {
            float b = simd->dot(w, ref->act_type == DT_F32 ? (const void *)x : xa, n);
            se += (double)(a - b) * (a - b);
            ss += (double)a * a;
        }
        // the integer path against the decoded row . f32 x
        tw->to_float(w, dec, n);
        double exact = 0, mag = 0;
        for (int i = 0; i < n; i++) { exact += (double)dec[i] * x[i]; mag += fabs((double)dec[i] * x[i]); }
        fe += (a - exact) * (a - exact);
        fs += mag * mag;
    }
    if (simd) CHECK(se / ss <= 1e-7, "%s n=%d: SIMD vs scalar normalized MSE %.3g", tw->name, n, se / ss);
    // the 8-row prefill kernel against 8 calls of the scalar oracle
    if (simd && simd->dot8) {
        unsigned char *x8 = malloc(ars * 8);
        double e8 = 0, s8 = 0;
        for (int r = 0; r < 8; r++) {
            for (int i = 0; i < n; i++) x[i] = frand() * (r + 1);
            quant_act(ref, simd, x, x8 + ars * r, n);
        }
        for (int i = 0; i < n; i++) row[i] = frand();
        tw->from_float(row, w, n);
        float got[8];
        simd->dot8(w, x8, ars, n, got);
        for (int r = 0; r < 8; r++) {
            float want = ref->dot(w, x8 + ars * r, n);
            e8 += (double)(got[r] - want) * (got[r] - want);
            s8 += (double)want * want;
        }
        CHECK(e8 / s8 <= 1e-7, "%s n=%d: dot8 vs scalar normalized MSE %.3g", tw->name, n, e8 / s8);
        free(x8);
    }
    // the 4- and 8-row kernels equal calls of the 1-row SIMD kernel bit for
    // bit, so a batch gives the token-by-token results
    if (simd && (simd->dot4 || simd->dot8)) {
        unsigned char *xs = malloc(ars * 8);
        float *x8 = malloc(sizeof(float) * 8 * (size_t)n), got[8];
        for (int i = 0; i < 8 * n; i++) x8[i] = frand() * (i % 5 == 0 ? 6.0f : 1.0f);
        size_t st = simd->act_type == DT_F32 ? sizeof(float) * (size_t)n : ars;
        const void *xr = simd->act_type == DT_F32 ? (const void *)x8 : xs;
        if (simd->act_type != DT_F32)
            for (int r = 0; r < 8; r++) quant_act(ref, simd, x8 + (size_t)r * n, xs + ars * r, n);
        for (int m = 4; m <= 8; m += 4) {
            vec_dot4_fn f = m == 4 ? simd->dot4 : simd->dot8;
            if (!f) continue;
            f(w, xr, st, n, got);
            int same = 1;
            for (int r = 0; r < m; r++) same &= got[r] == simd->dot(w, (const char *)xr + st * r, n);
            CHECK(same, "%s n=%d: dot%d differs from dot", tw->name, n, m);
        }
        free(xs), free(x8);
    }
    // the 4-weight-row decode kernel equals 4 calls of the 1-row kernel bit for bit
    if (simd && simd->dotr) {
        unsigned char *w4 = malloc(wrs * 4);
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < n; i++) row[i] = frand() * (k + 1);
            tw->from_float(row, w4 + wrs * k, n);
        }
        for (int i = 0; i < n; i++) x[i] = frand();
        quant_act(ref, simd, x, xa, n);
        float got[4];
        simd->dotr(w4, wrs, xa, n, got);
        int same = 1;
        for (int k = 0; k < 4; k++) same &= got[k] == simd->dot(w4 + wrs * k, xa, n);
        CHECK(same, "%s n=%d: dotr differs from dot", tw->name, n);
        free(w4);
    }
    // the 4-row prefill kernel against 4 calls of the scalar oracle
    if (simd && simd->dot4 && ref->act_type != DT_F32) {
        unsigned char *x4 = malloc(ars * 4);
        double e4 = 0, s4 = 0;
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < n; i++) x[i] = frand() * (r + 1);
            quant_act(ref, simd, x, x4 + ars * r, n);
        }
        for (int i = 0; i < n; i++) row[i] = frand();
        tw->from_float(row, w, n);
        float got[4];
        simd->dot4(w, x4, ars, n, got);
        for (int r = 0; r < 4; r++) {
            float want = ref->dot(w, x4 + ars * r, n);
            e4 += (double)(got[r] - want) * (got[r] - want);
            s4 += (double)want * want;
        }
        CHECK(e4 / s4 <= 1e-7, "%s n=%d: dot4 vs scalar normalized MSE %.3g", tw->name, n, e4 / s4);
        free(x4);
    }
    double tol = ref->act_type == DT_F32 ? 1e-10 : 1e-4; // q8 activations round x to ~1/127 of its block max
    CHECK(fe / fs <= tol, "%s n=%d: integer path vs decoded float dot: normalized error %.3g", tw->name, n, fe / fs);
    free(x); free(row); free(dec); free(w); free(xa);
}

int main(void) {
    printf("kernels: SIMD ISA %s\n", vecdot_isa());
    int floats[] = {DT_F32, DT_F16, DT_BF16};
    int lens[] = {1, 7, 67, 256, 1000, 2051};
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 6; l++) check_type(floats[k], lens[l], 24);
    int q32[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_MXFP4, DT_Q4_1};
    for (int k = 0; k < 5; k++) { check_type(q32[k], 32, 24); check_type(q32[k], 32 * 9, 24); check_type(q32[k], 2048, 24); }
    int qk[] = {DT_Q4_K, DT_Q5_K, DT_Q6_K};
    for (int k = 0; k < 3; k++) { check_type(qk[k], 256, 24); check_type(qk[k], 256 * 3, 24); check_type(qk[k], 2560, 24); }
    // every SIMD kernel has a scalar oracle with the same activation type
    for (int t = 0; t < DT_COUNT; t++) {
        const vecdot_kernel *s = vecdot_get_simd(t), *r = vecdot_get_ref(t);
        if (s) CHECK(r && r->act_type == s->act_type, "type %d: SIMD kernel without a matching oracle", t);
    }
    // f32 vector primitives of the attention
    for (int n = 1; n < 300; n += 37) {
        float a[300], b[300], y1[300], y2[300];
        for (int i = 0; i < n; i++) { a[i] = frand(); b[i] = frand(); y1[i] = y2[i] = frand(); }
        float d0 = vec_dot_ref(a, b, n), d1 = vec_dot(a, b, n);
        CHECK(fabsf(d0 - d1) <= 1e-5f * (1 + fabsf(d0)), "vec_dot n=%d: %g vs %g", n, d1, d0);
        vec_axpy_ref(y1, 0.37f, a, n);
        vec_axpy(y2, 0.37f, a, n);
        double e = 0;
        for (int i = 0; i < n; i++) e += (y1[i] - y2[i]) * (y1[i] - y2[i]);
        CHECK(e <= 1e-10, "vec_axpy n=%d: error %g", n, e);
    }
    // f16 rounding and the AVX2 activation quantizer against their oracles
    {
        float a[1031], b[1031];
        for (int i = 0; i < 1031; i++) a[i] = b[i] = frand() * (i % 5 == 0 ? 70000.0f : i % 3 == 0 ? 1e-6f : 3.0f);
        vec_round_f16(a, 1031);
        vec_round_f16_ref(b, 1031);
        CHECK(!memcmp(a, b, sizeof a), "vec_round_f16 differs from the scalar rounding");
        const vecdot_kernel *s8 = vecdot_get_simd(DT_Q8_0), *r8 = vecdot_get_ref(DT_Q8_0);
        if (s8) {
            unsigned char qa[34 * 32], qb[34 * 32];
            for (int i = 0; i < 1024; i++) a[i] = frand() * (i % 64 == 0 ? 50.0f : 1.0f);
            a[5] = 0.5f * 127.0f / 50.0f; // a tie on the grid of some blocks
            s8->quant(a, qa, 1024);
            r8->quant(a, qb, 1024);
            CHECK(!memcmp(qa, qb, sizeof qa), "AVX2 q8_0 activation quantizer differs from the scalar one");
        }
    }
    // GELU as ggml computes it: the f16 input looked up in an f16 table
    {
        float g[203], want[203];
        for (int i = 0; i < 203; i++) {
            g[i] = i == 0 ? -10.0f : i == 1 ? 10.0f : i == 2 ? 9.999f : frand() * 14.0f;
            float v = g[i];
            if (v <= -10.0f) want[i] = 0.0f;
            else if (v >= 10.0f) want[i] = v;
            else {
                float h = f16_to_f32(f32_to_f16(v));
                want[i] = f16_to_f32(f32_to_f16(0.5f * h * (1.0f + tanhf(0.7978845608028654f * (h + 0.044715f * h * h * h)))));
            }
        }
        activate_ggml(g, 203, ACT_GELU_TANH);
        CHECK(!memcmp(g, want, sizeof g), "activate_ggml differs from f16(gelu(f16(x)))");
    }
    return check_summary("kernels");
}
