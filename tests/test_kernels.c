// SIMD row kernels against their scalar oracle (normalized MSE <= 1e-7), and
// the oracle's integer path against the float dot of the decoded row.
#include "check.h"
#include "tensor/vecdot.h"
#include "compute/cpu/vec.h"
#include "compute/cpu/ops.h"
#include "compute/cpu/attn.h"
#include "compute/backend.h"
#include "base/pool.h"
#include "base/half.h"
#include "tensor/dtype.h"
#include "base/cpu.h"
#include "tensor/pack.h"
#include "tensor/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) { // uniform in [-1, 1)
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

// Activations of 8 tokens in both kernels' types: xo for the oracle (rows of
// ors bytes), xs for the SIMD kernel (rows of srs bytes), both from x.
typedef struct { unsigned char *xo, *xs; size_t ors, srs; } acts;

static acts make_acts(const vecdot_kernel *ref, const vecdot_kernel *simd, const float *x, int n) {
    acts a = {0};
    a.ors = ref->act_type == DT_F32 ? sizeof(float) * (size_t)n : act_row_size(ref, n);
    a.srs = simd ? (simd->act_type == DT_F32 ? sizeof(float) * (size_t)n : act_row_size(simd, n)) : a.ors;
    a.xo = malloc(a.ors * 8);
    a.xs = malloc(a.srs * 8);
    for (int r = 0; r < 8; r++) {
        const float *xr = x + (size_t)r * n;
        if (ref->quant) ref->quant(xr, a.xo + a.ors * r, n);
        else memcpy(a.xo + a.ors * r, xr, a.ors);
        if (simd && simd->quant) simd->quant(xr, a.xs + a.srs * r, n);
        else memcpy(a.xs + a.srs * r, xr, a.srs);
    }
    return a;
}

// The SIMD kernel variants of a type this CPU runs: AVX2, and VNNI where it
// has one (vecdot_get_simd's pick, checked here to be the best one).
static int simd_variants(int wt, const vecdot_kernel **v) {
    const dtype_traits *tw = dtype_get(wt);
    const vecdot_kernel *best = vecdot_get_simd(wt);
    int nv = 0;
    if (!best) return 0;
    v[nv++] = tw->avx2;
    if (tw->vnni && cpu_has_vnni()) v[nv++] = tw->vnni;
    CHECK(best == v[nv - 1], "%s: vecdot_get_simd does not hand out the best kernel", tw->name);
    return nv;
}

static void check_kernel(int wt, int n, int rows, const vecdot_kernel *simd);

static void check_type(int wt, int n, int rows) {
    const vecdot_kernel *v[2];
    int nv = simd_variants(wt, v);
    if (!nv) check_kernel(wt, n, rows, NULL);
    for (int k = 0; k < nv; k++) check_kernel(wt, n, rows, v[k]);
}

// The VNNI kernels equal the AVX2 ones bit for bit (dot, dot4, dot8, dotr)
// on random rows and activations, including saturated ones.
static void check_vnni_bits(int wt, int n) {
    const dtype_traits *tw = dtype_get(wt);
    if (!tw->vnni || !cpu_has_vnni()) return;
    const vecdot_kernel *a2 = tw->avx2, *vn = tw->vnni;
    size_t wrs = dtype_row_size(wt, n), xrs = act_row_size(a2, n);
    float *x = malloc(sizeof(float) * 8 * (size_t)n), *row = malloc(sizeof(float) * n);
    unsigned char *w = malloc(wrs * 4), *xq = malloc(xrs * 8);
    int same = 1, trials = 0;
    for (int t = 0; t < 12; t++) {
        float ws = t % 4 == 0 ? 1e-3f : t % 4 == 1 ? 1.0f : t % 4 == 2 ? 50.0f : 1.0f;
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < n; i++) row[i] = t % 4 == 3 ? (i % 32 == 0 ? -1.0f : 1.0f) * (k + 1) : frand() * ws * (k + 1);
            if (t % 4 == 3 && t > 4) for (int i = 0; i < n; i++) row[i] = (i % 16 == 3 ? 0.5f : 1.0f) * (t % 8 < 4 ? 1 : -1);
            tw->from_float(row, w + wrs * k, n);
        }
        for (int i = 0; i < 8 * n; i++) x[i] = t % 4 == 3 ? (i % 2 ? 1.0f : -1.0f) * (t % 8 < 4 ? 1 : -1) : frand() * (i % 11 == 0 ? 9.0f : 1.0f);
        for (int r = 0; r < 8; r++) a2->quant(x + (size_t)r * n, xq + xrs * r, n);
        float g1[8], g2[8];
        for (int k = 0; k < 4; k++)
            for (int r = 0; r < 8; r++) {
                float d1 = a2->dot(w + wrs * k, xq + xrs * r, n), d2 = vn->dot(w + wrs * k, xq + xrs * r, n);
                same &= !memcmp(&d1, &d2, 4), trials++;
            }
        same &= !a2->dot4 == !vn->dot4 && !a2->dot8 == !vn->dot8 && !a2->dotr == !vn->dotr;
        if (a2->dot4 && vn->dot4) { a2->dot4(w, xq, xrs, n, g1), vn->dot4(w, xq, xrs, n, g2); same &= !memcmp(g1, g2, 4 * sizeof(float)); }
        if (a2->dot8 && vn->dot8) { a2->dot8(w, xq, xrs, n, g1), vn->dot8(w, xq, xrs, n, g2); same &= !memcmp(g1, g2, 8 * sizeof(float)); }
        if (a2->dotr && vn->dotr) { a2->dotr(w, wrs, xq, n, g1), vn->dotr(w, wrs, xq, n, g2); same &= !memcmp(g1, g2, 4 * sizeof(float)); }
    }
    CHECK(same && trials, "%s n=%d: VNNI kernels differ from the AVX2 ones", tw->name, n);
    free(x), free(row), free(w), free(xq);
}

static void check_kernel_ref(int wt, int n, int rows, const vecdot_kernel *ref, const vecdot_kernel *simd);
static void check_kernel(int wt, int n, int rows, const vecdot_kernel *simd) { check_kernel_ref(wt, n, rows, vecdot_get_ref(wt), simd); }

static void check_kernel_ref(int wt, int n, int rows, const vecdot_kernel *ref, const vecdot_kernel *simd) {
    const dtype_traits *tw = dtype_get(wt);
    CHECK(ref != NULL, "%s has no reference kernel", tw->name);
    if (!ref) return;
    size_t wrs = dtype_row_size(wt, n);
    float *x = malloc(sizeof(float) * 8 * (size_t)n), *row = malloc(sizeof(float) * n), *dec = malloc(sizeof(float) * n);
    unsigned char *w = malloc(wrs);
    double se = 0, ss = 0, fe = 0, fs = 0;
    for (int r = 0; r < rows; r++) {
        float scale = r % 3 == 0 ? 0.01f : r % 3 == 1 ? 1.0f : 30.0f;
        for (int i = 0; i < n; i++) { row[i] = frand() * scale; x[i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f); }
        if (r == 1) for (int i = 0; i < n; i++) row[i] = fabsf(row[i]); // all positive
        tw->from_float(row, w, n);
        acts a = make_acts(ref, simd, x, n);
        float want = ref->dot(w, a.xo, n);
        if (simd) {
            float got = simd->dot(w, a.xs, n);
            se += (double)(want - got) * (want - got);
            ss += (double)want * want;
        }
        // the integer path against the decoded row . f32 x
        tw->to_float(w, dec, n);
        double exact = 0, mag = 0;
        for (int i = 0; i < n; i++) { exact += (double)dec[i] * x[i]; mag += fabs((double)dec[i] * x[i]); }
        fe += (want - exact) * (want - exact);
        fs += mag * mag;
        free(a.xo), free(a.xs);
    }
    if (simd) CHECK(se / ss <= 1e-7, "%s n=%d: SIMD vs scalar normalized MSE %.3g", tw->name, n, se / ss);
    if (simd) {
        for (int i = 0; i < 8 * n; i++) x[i] = frand() * (1 + i / n) * (i % 5 == 0 ? 6.0f : 1.0f);
        for (int i = 0; i < n; i++) row[i] = frand();
        tw->from_float(row, w, n);
        acts a = make_acts(ref, simd, x, n);
        // the 4- and 8-token prefill kernels: against the oracle, and equal to
        // calls of the 1-token SIMD kernel bit for bit, so a batch gives the
        // token-by-token results
        for (int m = 4; m <= 8; m += 4) {
            vec_dot4_fn f = m == 4 ? simd->dot4 : simd->dot8;
            if (!f) continue;
            float got[8];
            f(w, a.xs, a.srs, n, got);
            double e = 0, s2 = 0;
            int same = 1;
            for (int r = 0; r < m; r++) {
                float want = ref->dot(w, a.xo + a.ors * r, n);
                e += (double)(got[r] - want) * (got[r] - want);
                s2 += (double)want * want;
                same &= got[r] == simd->dot(w, a.xs + a.srs * r, n);
            }
            CHECK(e / s2 <= 1e-7, "%s n=%d: dot%d vs scalar normalized MSE %.3g", tw->name, n, m, e / s2);
            CHECK(same, "%s n=%d: dot%d differs from dot", tw->name, n, m);
        }
        // the 4-weight-row decode kernel equals 4 calls of the 1-row kernel bit for bit
        if (simd->dotr) {
            unsigned char *w4 = malloc(wrs * 4);
            for (int k = 0; k < 4; k++) {
                for (int i = 0; i < n; i++) row[i] = frand() * (k + 1);
                tw->from_float(row, w4 + wrs * k, n);
            }
            float got[4];
            simd->dotr(w4, wrs, a.xs, n, got);
            int same = 1;
            for (int k = 0; k < 4; k++) same &= got[k] == simd->dot(w4 + wrs * k, a.xs, n);
            CHECK(same, "%s n=%d: dotr differs from dot", tw->name, n);
            free(w4);
        }
        // the 2- and 4-row x 4-token tiles equal calls of the 1-row kernel bit for bit
        for (int rw = 2; rw <= 4; rw += 2) {
            vec_tile_fn tile = rw == 2 ? simd->tile24 : simd->tile44;
            if (!tile) continue;
            unsigned char *w2 = malloc(wrs * rw);
            for (int k = 0; k < rw; k++) {
                for (int i = 0; i < n; i++) row[i] = frand() * (k + 1);
                tw->from_float(row, w2 + wrs * k, n);
            }
            float got[16];
            tile(w2, wrs, a.xs, a.srs, n, got);
            int same = 1;
            for (int k = 0; k < rw; k++)
                for (int r = 0; r < 4; r++) same &= got[k * 4 + r] == simd->dot(w2 + wrs * k, a.xs + a.srs * r, n);
            CHECK(same, "%s n=%d: tile%d4 differs from dot", tw->name, n, rw);
            free(w2);
        }
        // Saturated inputs: the largest weights of one sign against activations
        // of +-127, where the AVX2 q32 kernels' int16 partial sums (8 products)
        // come closest to overflowing.
        for (int sg = -1; sg <= 1; sg += 2) {
            float *xe = malloc(sizeof(float) * 8 * (size_t)n); // make_acts reads 8 tokens
            for (int i = 0; i < 8 * n; i++) xe[i] = (float)sg;
            for (int i = 0; i < n; i++) row[i] = i % 32 == 0 ? -1.0f : 1.0f;
            tw->from_float(row, w, n);
            acts e = make_acts(ref, simd, xe, n);
            float want = ref->dot(w, e.xo, n), got = simd->dot(w, e.xs, n);
            CHECK(fabsf(got - want) <= 1e-5f * fabsf(want) + 1e-6f, "%s n=%d: saturated inputs: SIMD %g vs scalar %g", tw->name, n, got, want);
            free(e.xo), free(e.xs), free(xe);
        }
        // grouped activations hold exactly the oracle's q8_0 blocks
        if (simd->grouped) {
            unsigned char *g = malloc(a.srs);
            act_q8_0_group(a.xo, g, n);
            CHECK(!memcmp(g, a.xs, a.srs), "%s n=%d: grouped activations differ from the q8_0 blocks", tw->name, n);
            free(g);
        }
        free(a.xo), free(a.xs);
    }
    double tol = ref->act_type == DT_F32 ? 1e-10 : 1e-4; // q8 activations round x to ~1/127 of its block max
    CHECK(fe / fs <= tol, "%s n=%d: integer path vs decoded float dot: normalized error %.3g", tw->name, n, fe / fs);
    free(x); free(row); free(dec); free(w);
}

// The packed kernels (pack.h) for weights of type wt, rows x n: against
// their C oracle bit for bit, for every token count the same bits as one
// token at a time, and against the type's scalar dot of the unpacked rows
// (ggml's order of float operations) within the q8 rounding; their
// activations hold the scalar quantizer's q8_0 blocks.
static void check_packed(int wt, int n, int rows) {
    int kind = pack_kind_for(wt, n);
    CHECK(kind != PACK_NONE, "%s: no packed kernel on a VNNI CPU", dtype_get(wt)->name);
    if (!kind) return;
    const pack_kernel *pk = pack_kernel_get(kind);
    const vecdot_kernel *ref = vecdot_get_ref(wt);
    const dtype_traits *tw = dtype_get(wt);
    enum { T = 13 };
    size_t rs = dtype_row_size(wt, n), xr = pack_act_row_size(kind, n), qr = act_row_size(ref, n), gb = pack_group_bytes(kind, n);
    int kq = wt == DT_Q4_K || wt == DT_Q6_K;
    unsigned char *w = malloc(rs * rows), *p = malloc(pack_bytes(kind, rows, n)), *x = malloc(xr * T), *xq = malloc(qr * T);
    float *f = malloc(sizeof(float) * n), *o = malloc(sizeof(float) * 8 * T), *o1 = malloc(sizeof(float) * 8 * T), *oref = malloc(sizeof(float) * 8 * T);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) f[i] = frand() * (r % 5 == 0 && i % 17 == 0 ? 9.0f : 1.0f);
        tw->from_float(f, w + rs * r, n);
    }
    pack_rows(kind, w, rows, n, p);
    int nb = n / 32;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n; i++) f[i] = frand() * (i % 41 == 0 ? 30.0f : 1.0f);
        if (t == 3) for (int i = 0; i < n; i++) f[i] = 0.0f; // an all-zero token
        if (t == 5) f[7] = -40.0f, f[n / 2 + 3] = 40.0f; // a tie of the largest magnitudes (the first sets the sign)
        pk->quant(f, x + xr * t, n);
        ref->quant(f, xq + qr * t, n);
        int same = 1;
        if (kq) { // q8_K blocks, with their sums of 16 and of 32
            const block_q8_K *b = (const block_q8_K *)(xq + qr * t);
            const unsigned char *xt = x + xr * t;
            for (int i = 0; i < n / 256; i++) {
                float d;
                memcpy(&d, b[i].d, 4);
                same &= !memcmp(XPK_QS(xt) + 256 * i, b[i].qs, 256) && XPK_D(xt, n)[i] == d;
                for (int g = 0; g < 16; g++) {
                    int16_t s16;
                    memcpy(&s16, b[i].bsums + 2 * g, 2);
                    same &= XPK_BS16(xt, n)[16 * i + g] == s16;
                    if (g % 2) {
                        int16_t prev;
                        memcpy(&prev, b[i].bsums + 2 * g - 2, 2);
                        same &= XPK_BS32(xt, n)[8 * i + g / 2] == prev + s16;
                    }
                }
            }
            CHECK(same, "%s n=%d: packed activations of token %d differ from the q8_K blocks", tw->name, n, t);
            continue;
        }
        const block_q8_0 *b = (const block_q8_0 *)(xq + qr * t);
        for (int i = 0; i < nb; i++) {
            int32_t s = 0;
            for (int j = 0; j < 32; j++) s += b[i].qs[j];
            same &= !memcmp(XP_QS(x + xr * t) + 32 * i, b[i].qs, 32) && XP_NEGSUM(x + xr * t, nb)[i] == -s &&
                    XP_D(x + xr * t, nb)[i] == f16_to_f32((uint16_t)(b[i].d[0] | b[i].d[1] << 8));
        }
        CHECK(same, "%s n=%d: packed activations of token %d differ from the q8_0 blocks", tw->name, n, t);
    }
    double fe = 0, fs = 0;
    for (int g = 0; g < (rows + 7) / 8; g++) {
        const unsigned char *pg = p + gb * g;
        pk->tile(pg, x, xr, T, n, o, 8);
        pack_tile_ref(kind, pg, x, xr, T, n, oref);
        CHECK(!memcmp(o, oref, sizeof(float) * 8 * T), "%s n=%d group %d: packed kernel differs from its oracle", tw->name, n, g);
        float os[11 * T]; // rows of a wider output (ldo 11): the same values
        pk->tile(pg, x, xr, T, n, os, 11);
        for (int t = 0; t < T; t++) CHECK(!memcmp(os + 11 * t, o + 8 * t, 8 * sizeof(float)), "%s n=%d: output stride 11 differs", tw->name, n);
        for (int t = 0; t < T; t++) {
            pk->tile(pg, x + xr * t, xr, 1, n, o1, 8);
            CHECK(!memcmp(o1, o + 8 * t, 8 * sizeof(float)), "%s n=%d group %d: token %d alone differs from the batch", tw->name, n, g, t);
            for (int r = 0; r < 8; r++) {
                if (8 * g + r >= rows) { // padding rows are zero
                    CHECK(o[8 * t + r] == 0.0f, "%s n=%d: padding row %d gives %g", tw->name, n, 8 * g + r, o[8 * t + r]);
                    continue;
                }
                float want = ref->dot(w + rs * (8 * g + r), xq + qr * t, n);
                fe += (double)(o[8 * t + r] - want) * (o[8 * t + r] - want), fs += (double)want * want;
            }
        }
    }
    CHECK(fe <= 1e-10 * (fs + 1e-30), "%s n=%d: packed kernel vs scalar dot: normalized error %.3g", tw->name, n, fe / (fs + 1e-30));
    free(w), free(p), free(x), free(xq), free(f), free(o), free(o1), free(oref);
}

// The CPU backend's attention over long rows against the reference
// backend's: a pass of three blocks of two sequences (one beyond a thousand
// positions, one short, one past the first piece of 256 positions), with
// windows, softcaps, sinks and each cache type; one thread's results equal
// two's, and each block alone on 8 threads (fewer tasks than threads: its
// keys split among them in pieces) equals its rows in the pass.
static void attention_pass(const backend *be, attn_desc *d, float *out) {
    d->out = out;
    be->ops->attention((backend *)be, d);
}

static void check_long_attention(void) {
    enum { H = 8, KV = 2, HD = 64, NCTX = 1100, T = 10 };
    const int nq = H * HD, nkv = KV * HD, stride = NCTX + 1, B = 8;
    float *q = malloc(sizeof(float) * T * nq), *src = malloc(sizeof(float) * NCTX * nkv);
    for (int i = 0; i < T * nq; i++) q[i] = frand();
    for (int i = 0; i < NCTX * nkv; i++) src[i] = frand() * 2;
    pool *p2 = pool_new(2), *p8 = pool_new(8);
    cpu_exec ex2 = {.pool = p2}, ex8 = {.pool = p8}, ex1 = {0};
    backend cpu2 = {&backend_cpu_ops, &ex2, NULL, NULL, 0}, cpu1 = {&backend_cpu_ops, &ex1, NULL, NULL, 0};
    backend cpu8 = {&backend_cpu_ops, &ex8, NULL, NULL, 0};
    backend ref = {&backend_ref_ops, &ex1, NULL, NULL, 0};
    float *scores = malloc(sizeof(float) * 8 * B * H * stride), sinks[H];
    for (int h = 0; h < H; h++) sinks[h] = frand();
    float *o_ref = malloc(sizeof(float) * T * nq), *o2 = malloc(sizeof(float) * T * nq), *o1 = malloc(sizeof(float) * T * nq);
    float *oa = malloc(sizeof(float) * T * nq);
    for (int kt = 0; kt < KV_TYPES; kt++)
        for (int variant = 0; variant < 3; variant++) {
            size_t rb = kv_bytes(kt, nkv);
            unsigned char *kc[2], *vc[2];
            int32_t pos_all[NCTX];
            for (int i = 0; i < NCTX; i++) pos_all[i] = i;
            for (int c = 0; c < 2; c++) {
                kc[c] = malloc(rb * NCTX), vc[c] = malloc(rb * NCTX);
                void *kr[NCTX], *vr[NCTX];
                for (int i = 0; i < NCTX; i++) kr[i] = kc[c], vr[i] = vc[c];
                host_kv_store(NULL, kr, kt, pos_all, src, NCTX, nkv);
                host_kv_store(NULL, vr, kt, pos_all, src + (c ? 7 : 0), NCTX - 1, nkv); // (the two caches differ)
            }
            // rows 0-3: sequence 0 at 1000..1003; row 4: sequence 1 at 5; rows 5-9: sequence 1 at 600..604
            int pos[T] = {1000, 1001, 1002, 1003, 5, 600, 601, 602, 603, 604};
            const void *kp[T], *vp[T];
            for (int t = 0; t < T; t++) kp[t] = t < 4 ? kc[0] : kc[1], vp[t] = t < 4 ? vc[0] : vc[1];
            int blk0[3] = {0, 4, 5}, blk_n[3] = {4, 1, 5};
            attn_desc d = {.q = q, .T = T, .H = H, .KV = KV, .hd = HD, .window = variant == 1 ? 300 : 0, .pos = pos, .k = kp, .v = vp,
                           .kt = kt, .vt = kt, .blk0 = blk0, .blk_n = blk_n, .n_blk = 3, .scale = 0.125f,
                           .softcap = variant == 2 ? 5.0f : 0, .sinks = variant == 2 ? sinks : NULL, .ggml_numerics = variant != 1,
                           .scores = scores, .B = B, .stride = stride};
            attention_pass(&ref, &d, o_ref);
            attention_pass(&cpu2, &d, o2);
            attention_pass(&cpu1, &d, o1);
            double e = test_rel_err(o2, o_ref, (size_t)T * nq);
            // (ggml's f16 probabilities: the CPU's SIMD exp and the reference's expf may round a probability to
            // neighbouring f16 values, 2^-11 apart)
            double tol = d.ggml_numerics ? 1e-3 : 2e-5;
            CHECK(e < tol, "long attention (%s, variant %d): max rel err %g against the reference (want < %g)", kv_type_name(kt), variant,
                  e, tol);
            CHECK(!memcmp(o1, o2, sizeof(float) * T * nq), "long attention (%s, variant %d): one thread's floats differ from two's",
                  kv_type_name(kt), variant);
            // each block alone: the same floats as in the pass
            for (int k = 0; k < 3; k++) {
                attn_desc a = d;
                a.q = q + (size_t)blk0[k] * nq, a.T = blk_n[k], a.pos = pos + blk0[k], a.k = kp + blk0[k], a.v = vp + blk0[k];
                int z = 0, n = blk_n[k];
                a.blk0 = &z, a.blk_n = &n, a.n_blk = 1;
                attention_pass(&cpu8, &a, oa);
                CHECK(!memcmp(oa, o2 + (size_t)blk0[k] * nq, sizeof(float) * blk_n[k] * nq),
                      "long attention (%s, variant %d): block %d alone differs from the pass", kv_type_name(kt), variant, k);
            }
            for (int c = 0; c < 2; c++) free(kc[c]), free(vc[c]);
        }
    cpu_exec_release(&ex1), cpu_exec_release(&ex2), cpu_exec_release(&ex8);
    pool_free(p2), pool_free(p8);
    free(q), free(src), free(scores), free(o_ref), free(o1), free(o2), free(oa);
}

// ggml's numerics for bf16 weights (vecdot_get_ggml): bf16 activations, the
// AVX2 and AVX512_BF16 kernels against the double-sum oracle, their
// quantizer equal to f32_to_bf16 bit for bit (ties, NaN, infinities,
// subnormals), and vecdot_get_ggml handing out the best one.
static void check_bf16_act(void) {
    const vecdot_kernel *ref = vecdot_get_ggml_ref(DT_BF16);
    CHECK(ref == &vecdot_ref_bf16_bf16 && ref->act_type == DT_BF16, "bf16 weights' ggml oracle");
    CHECK(vecdot_get_ggml(DT_Q4_K) == vecdot_get(DT_Q4_K), "ggml numerics change a q4_K kernel");
    const vecdot_kernel *best = vecdot_get_ggml(DT_BF16);
    CHECK(best == (cpu_has_avx512bf16() ? &vecdot_avx512bf16_bf16 : cpu_has_avx2() ? &vecdot_avx2_bf16_bf16 : ref),
          "vecdot_get_ggml(bf16) does not hand out the best kernel");
    const vecdot_kernel *v[2];
    int nv = 0;
    if (cpu_has_avx2()) v[nv++] = &vecdot_avx2_bf16_bf16;
    if (cpu_has_avx512bf16()) v[nv++] = &vecdot_avx512bf16_bf16;
    else printf("kernels: this CPU has no AVX512_BF16: its bf16 kernel is not run\n");
    int lens[] = {1, 31, 33, 64, 67, 100, 256, 1000, 2051};
    for (int k = 0; k < nv; k++)
        for (int l = 0; l < 9; l++) check_kernel_ref(DT_BF16, lens[l], 24, ref, v[k]);
    float x[203];
    uint16_t a[203], b[203];
    for (int i = 0; i < 203; i++) x[i] = frand() * (i % 3 ? 1e3f : 1e-39f); // (some subnormal)
    uint32_t tie = 0x3f808000u, tie2 = 0x3f818000u, qnan = 0x7fc00001u, snan = 0x7f800001u;
    memcpy(&x[0], &tie, 4), memcpy(&x[1], &tie2, 4), memcpy(&x[2], &qnan, 4), memcpy(&x[3], &snan, 4);
    x[4] = INFINITY, x[5] = -INFINITY, x[6] = -0.0f, x[7] = 3.4028235e38f;
    act_quant_bf16_ref(x, a, 203);
    int same = 1;
    for (int i = 0; i < 203; i++) same &= a[i] == f32_to_bf16(x[i]);
    CHECK(same && a[0] == 0x3f80 && a[1] == 0x3f82 && (a[2] & 0x7fc0) == 0x7fc0 && (a[3] & 0x7fc0) == 0x7fc0,
          "bf16 activations: not rounded to nearest even: %04x %04x %04x %04x", a[0], a[1], a[2], a[3]);
    for (int k = 0; k < nv; k++) {
        v[k]->quant(x, b, 203);
        CHECK(!memcmp(a, b, sizeof a), "bf16 activations: kernel %d's quantizer differs from f32_to_bf16", k);
    }
}

// The AMX-INT8 kernels of packed q8_0, q4_K and q6_K weights (an AMX-INT8 CPU
// only): bit for bit the VNNI kernels' for every token count (16 and 8 a pass
// on AMX, the rest by the VNNI kernel), so a batch on AMX equals one-token calls.
static void check_amx_int8(int dt, int n, int rows) {
    const pack_kernel *amx = dt == DT_Q8_0 ? &pack_amx_q8_0 : dt == DT_Q4_K ? &pack_amx_q4_K : &pack_amx_q6_K;
    const pack_kernel *vnni = dt == DT_Q8_0 ? &pack_vnni_q8_0 : dt == DT_Q4_K ? &pack_vnni_q4_K : &pack_vnni_q6_K;
    const int want = dt == DT_Q8_0 ? PACK_Q8_0 : dt == DT_Q4_K ? PACK_Q4_K : PACK_Q6_K;
    const char *name = dtype_get(dt)->name;
    int kind = pack_kind_for(dt, n);
    CHECK(kind == want, "%s n=%d: no packing on an AMX CPU", name, n);
    if (kind != want) return;
    CHECK(pack_kernel_get(kind) == amx, "%s: pack_kernel_get does not hand out the AMX kernel on an AMX-INT8 CPU", name);
    enum { T = 45 };
    size_t rs = dtype_row_size(dt, n), xr = pack_act_row_size(kind, n), gb = pack_group_bytes(kind, n);
    int ng = (rows + 7) / 8;
    unsigned char *w = malloc(rs * rows), *p = malloc(pack_bytes(kind, rows, n)), *x = calloc(T, xr);
    float *f = malloc(sizeof(float) * n), *oa = malloc(sizeof(float) * 8 * T), *ov = malloc(sizeof(float) * 8 * T);
    float *o2 = malloc(sizeof(float) * 16 * T);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) f[i] = frand() * (r % 5 == 0 && i % 17 == 0 ? 9.0f : 1.0f);
        dtype_get(dt)->from_float(f, w + rs * r, n);
    }
    pack_rows(kind, w, rows, n, p);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n; i++) f[i] = frand() * (i % 41 == 0 ? 30.0f : 1.0f);
        amx->quant(f, x + xr * t, n);
    }
    static const int counts[] = {1, 7, 8, 9, 15, 16, 17, 24, 32, 45};
    int same = 1;
    for (int g = 0; g < ng; g++)
        for (int c = 0; c < 10; c++) {
            const unsigned char *pg = p + gb * g;
            amx->tile(pg, x, xr, counts[c], n, oa, 8);
            vnni->tile(pg, x, xr, counts[c], n, ov, 8);
            same &= !memcmp(oa, ov, sizeof(float) * 8 * counts[c]);
        }
    CHECK(same, "%s n=%d: the AMX kernel's products differ from the VNNI kernel's", name, n);
    // two groups at once (tile2, 16 rows a token): each group's floats as the VNNI kernel's alone
    int same2 = 1;
    for (int g = 0; g + 1 < ng; g++)
        for (int c = 0; c < 10; c++) {
            amx->tile2(p + gb * g, gb, x, xr, counts[c], n, o2, 16);
            for (int h = 0; h < 2; h++) {
                vnni->tile(p + gb * (g + h), x, xr, counts[c], n, ov, 8);
                for (int t = 0; t < counts[c]; t++) same2 &= !memcmp(o2 + 16 * t + 8 * h, ov + 8 * t, sizeof(float) * 8);
            }
        }
    CHECK(!amx->tile2 || same2, "%s n=%d: the AMX kernel's two-group products differ from the VNNI kernel's", name, n);
    CHECK(amx->tile2 != NULL, "%s: the AMX kernel has no two-group pass", name);
    printf("kernels: AMX %s n=%d, %d rows: bit for bit the VNNI kernel's at 1 to %d tokens, one group and two at a time\n", name, n,
           rows, T);
    free(w), free(p), free(x), free(f), free(oa), free(ov), free(o2);
}

// The AMX kernel of packed bf16 weights (an AMX CPU only): against the
// oracle of its two f32 chains and the double-sum dot (normalized MSE <=
// 1e-7), T tokens at once equal to one token at a time bit for bit, rows past
// the end zero.
static void check_amx_bf16(int n, int rows) {
    int kind = pack_kind_for(DT_BF16, n);
    CHECK(kind == PACK_BF16, "bf16 n=%d: no AMX packing on an AMX CPU", n);
    if (kind != PACK_BF16) return;
    const pack_kernel *pk = pack_kernel_get(kind);
    enum { T = 37 };
    size_t rs = 2 * (size_t)n, xr = pack_act_row_size(kind, n), gb = pack_group_bytes(kind, n);
    int ng = (rows + 7) / 8;
    unsigned char *w = malloc(rs * rows), *p = malloc(pack_bytes(kind, rows, n)), *x = calloc(T, xr);
    float *f = malloc(sizeof(float) * n), *o = malloc(sizeof(float) * 8 * T), *o1 = malloc(sizeof(float) * 8), *oref = malloc(sizeof(float) * 8 * T);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) f[i] = frand() * (r % 5 == 0 && i % 17 == 0 ? 9.0f : 1.0f);
        dtype_get(DT_BF16)->from_float(f, w + rs * r, n);
    }
    pack_rows(kind, w, rows, n, p);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n; i++) f[i] = frand() * (i % 41 == 0 ? 30.0f : 1.0f);
        pk->quant(f, x + xr * t, n);
    }
    double e1 = 0, e2 = 0, s2 = 0;
    int same = 1;
    for (int g = 0; g < ng; g++) {
        const unsigned char *pg = p + gb * g;
        pk->tile(pg, x, xr, T, n, o, 8);
        pack_tile_ref(kind, pg, x, xr, T, n, oref);
        for (int t = 0; t < T; t++) {
            pk->tile(pg, x + xr * t, xr, 1, n, o1, 8);
            same &= !memcmp(o1, o + 8 * t, sizeof(float) * 8);
            for (int r = 0; r < 8; r++) {
                float want = 8 * g + r < rows ? vecdot_bf16_bf16(w + rs * (8 * g + r), x + xr * t, n) : 0.0f;
                e1 += (double)(o[8 * t + r] - oref[8 * t + r]) * (o[8 * t + r] - oref[8 * t + r]);
                e2 += (double)(o[8 * t + r] - want) * (o[8 * t + r] - want);
                s2 += (double)want * want;
                if (8 * g + r >= rows) same &= o[8 * t + r] == 0.0f;
            }
        }
    }
    // two groups at once (tile2): each group's rows as from tile, at T tokens and at one
    int same2 = pk->tile2 != NULL;
    float *o2 = malloc(sizeof(float) * 16 * T);
    for (int g = 0; g + 1 < ng && same2; g++)
        for (int tt = 1; tt <= T; tt += T - 1) {
            pk->tile2(p + gb * g, gb, x, xr, tt, n, o2, 16);
            for (int h = 0; h < 2; h++) {
                pk->tile(p + gb * (g + h), x, xr, tt, n, o, 8);
                for (int t = 0; t < tt; t++) same2 &= !memcmp(o2 + 16 * t + 8 * h, o + 8 * t, sizeof(float) * 8);
            }
        }
    free(o2);
    CHECK(same2, "bf16 n=%d: the AMX two-group pass differs from one group at a time (or is missing)", n);
    CHECK(e1 / s2 <= 1e-7 && e2 / s2 <= 1e-7, "bf16 n=%d: AMX vs its oracle %.3g, vs the dot %.3g (normalized MSE)", n, e1 / s2, e2 / s2);
    CHECK(same, "bf16 n=%d: AMX tokens at once differ from one at a time (or rows past the end are not zero)", n);
    printf("kernels: AMX bf16 n=%d: normalized MSE %.3g against its oracle, %s\n", n, e1 / s2, e1 == 0 ? "bit for bit" : "not bit for bit");
    free(w), free(p), free(x), free(f), free(o), free(o1), free(oref);
}

// Products of packed weights split over 16 threads (chunks of groups, and
// the tokens split where the groups are few: matmul.c's plan_items) give the
// same floats as one thread, for matmul and matmul_multi, whatever the split.
static void check_packed_threads(int wt, int n) {
    int kind = pack_kind_for(wt, n);
    if (!kind) return;
    enum { T = 100, R0 = 256, R1 = 72 };
    const dtype_traits *tw = dtype_get(wt);
    size_t rs = dtype_row_size(wt, n);
    tensor tn[2];
    weight wt2[2];
    unsigned char *raw[2], *pk[2];
    int nr[2] = {R0, R1};
    float *f = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * T * n);
    for (int k = 0; k < 2; k++) {
        raw[k] = malloc(rs * nr[k]), pk[k] = aligned_alloc(64, (pack_bytes(kind, nr[k], n) + 63) & ~(size_t)63);
        for (int r = 0; r < nr[k]; r++) {
            for (int i = 0; i < n; i++) f[i] = frand();
            tw->from_float(f, raw[k] + rs * r, n);
        }
        pack_rows(kind, raw[k], nr[k], n, pk[k]);
        tn[k] = (tensor){.type = wt, .data = raw[k]};
        tn[k].ne[0] = n, tn[k].ne[1] = nr[k];
        wt2[k] = (weight){.w = &tn[k], .pack_kind = kind, .pack = pk[k]};
    }
    for (int i = 0; i < T * n; i++) x[i] = frand();
    pool *p16 = pool_new(16);
    cpu_exec ex1 = {0}, ex16 = {.pool = p16};
    float *y1[2], *y16[2];
    for (int k = 0; k < 2; k++) y1[k] = malloc(sizeof(float) * T * nr[k]), y16[k] = malloc(sizeof(float) * T * nr[k]);
    for (int tt = 1; tt <= T; tt += 33) { // 1, 34, 67, 100 tokens
        for (int k = 0; k < 2; k++) {
            matmul(&ex1, y1[k], x, &wt2[k], NULL, tt, n, nr[k]);
            matmul(&ex16, y16[k], x, &wt2[k], NULL, tt, n, nr[k]);
            CHECK(!memcmp(y1[k], y16[k], sizeof(float) * tt * nr[k]), "%s n=%d rows=%d T=%d: 16 threads' matmul differs from one's",
                  tw->name, n, nr[k], tt);
        }
        const weight *ws[2] = {&wt2[0], &wt2[1]};
        const float *bs[2] = {NULL, NULL};
        memset(y16[0], 0, sizeof(float) * T * R0), memset(y16[1], 0, sizeof(float) * T * R1);
        matmul_multi(&ex16, 2, y16, x, ws, bs, tt, n, nr);
        for (int k = 0; k < 2; k++)
            CHECK(!memcmp(y1[k], y16[k], sizeof(float) * tt * nr[k]), "%s n=%d rows=%d T=%d: 16 threads' matmul_multi differs from one's",
                  tw->name, n, nr[k], tt);
    }
    cpu_exec_release(&ex1), cpu_exec_release(&ex16);
    pool_free(p16);
    for (int k = 0; k < 2; k++) free(raw[k]), free(pk[k]), free(y1[k]), free(y16[k]);
    free(f), free(x);
}

int main(void) {
    printf("kernels: SIMD ISA %s\n", vecdot_isa());
    check_long_attention();
    int floats[] = {DT_F32, DT_F16, DT_BF16};
    int lens[] = {1, 7, 67, 256, 1000, 2051};
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 6; l++) check_type(floats[k], lens[l], 24);
    int q32[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_MXFP4, DT_Q4_1, DT_Q5_1};
    for (int k = 0; k < 6; k++) { check_type(q32[k], 32, 24); check_type(q32[k], 32 * 9, 24); check_type(q32[k], 2048, 24); }
    for (int t = 0; t < DT_COUNT; t++) {
        int b = dtype_get(t) ? dtype_get(t)->blck : 0;
        if (dtype_get(t) && dtype_get(t)->vnni) { check_vnni_bits(t, b); check_vnni_bits(t, b * 7); check_vnni_bits(t, b * 16); }
    }
    if (cpu_has_vnni()) {
        int pt[] = {DT_Q8_0, DT_Q5_0, DT_Q4_0};
        for (int k = 0; k < 3; k++) { check_packed(pt[k], 32, 8); check_packed(pt[k], 32 * 9, 13); check_packed(pt[k], 2048, 24); }
        int pk[] = {DT_Q4_K, DT_Q6_K};
        for (int k = 0; k < 2; k++) { check_packed(pk[k], 256, 8); check_packed(pk[k], 256 * 3, 13); check_packed(pk[k], 2560, 17); }
        int all[] = {DT_Q8_0, DT_Q5_0, DT_Q4_0, DT_Q4_K, DT_Q6_K, DT_BF16};
        for (int k = 0; k < 6; k++) check_packed_threads(all[k], 512);
    } else
        printf("kernels: this CPU has no AVX-512 VNNI: the packed kernels are not run\n");
    int qk[] = {DT_Q2_K, DT_Q3_K, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    for (int k = 0; k < 5; k++) { check_type(qk[k], 256, 24); check_type(qk[k], 256 * 3, 24); check_type(qk[k], 2560, 24); }
    // every SIMD kernel has a scalar oracle with the same activation type
    for (int t = 0; t < DT_COUNT; t++) {
        const vecdot_kernel *s = vecdot_get_simd(t), *r = vecdot_get_ref(t);
        if (s) CHECK(r && r->act_type == s->act_type, "type %d: SIMD kernel without a matching oracle", t);
    }
    // the first value above a threshold (NaN never is), at every offset around the 32-float steps
    {
        float x[100];
        int ok = 1;
        for (int trial = 0; trial < 200; trial++) {
            for (int i = 0; i < 100; i++) x[i] = frand();
            if (trial % 3 == 0) x[trial % 100] = NAN;
            float thr = 0.9f + 0.1f * frand();
            for (int n = 0; n <= 100; n += 1 + trial % 7) ok &= vec_first_above(x, n, thr) == vec_first_above_ref(x, n, thr);
            ok &= vec_first_above(x, 100, INFINITY) == 100 && vec_first_above_ref(x, 100, -INFINITY) == (isnan(x[0]) ? 1 : 0);
        }
        CHECK(ok, "vec_first_above differs from its oracle");
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
    // attention kernels against their oracles, for group sizes 1..6 and
    // lengths around the 4-row and 16-float steps, over caches of each type;
    // an f16 or q8_0 cache gives the f32 kernels' floats of its decoded values
    // bit for bit (the SIMD kernels convert exactly, then compute the same)
    for (int kt = 0; kt < KV_TYPES; kt++)
        for (int group = 1; group <= 6; group++)
            for (int hd = 32; hd <= 288; hd += 128)
                for (int n = 1; n <= 23; n += 5) {
                    size_t ks = (size_t)hd * 3, ss = 29, kb = kv_bytes(kt, ks);
                    float *q = malloc(sizeof(float) * group * hd), *k = malloc(sizeof(float) * ks * n);
                    float *kd = malloc(sizeof(float) * ks * n); // the cache's values decoded
                    unsigned char *kc = malloc(kb * n);
                    float *s1 = calloc(group * ss, sizeof(float)), *s2 = calloc(group * ss, sizeof(float));
                    float *s3 = calloc(group * ss, sizeof(float));
                    float *o1 = malloc(sizeof(float) * group * hd), *o2 = malloc(sizeof(float) * group * hd);
                    float *o3 = malloc(sizeof(float) * group * hd);
                    for (int i = 0; i < group * hd; i++) q[i] = frand();
                    for (size_t i = 0; i < ks * n; i++) k[i] = frand();
                    int32_t pos[23];
                    void *rows[23];
                    for (int p = 0; p < n; p++) pos[p] = p, rows[p] = kc;
                    host_kv_store(NULL, rows, kt, pos, k, n, (int)ks);
                    for (int p = 0; p < n; p++)
                        for (size_t i = 0; i < ks; i++) kd[p * ks + i] = kv_at(kc + kb * p, kt, (int)i);
                    const char *tn = kv_type_name(kt);
                    attn_scores_ref(q, group, hd, kc, kt, kb, n, 0.3f, s1, ss);
                    attn_scores(q, group, hd, kc, kt, kb, n, 0.3f, s2, ss);
                    attn_scores(q, group, hd, kd, KV_F32, sizeof(float) * ks, n, 0.3f, s3, ss);
                    double e = 0, m = 0;
                    for (size_t i = 0; i < group * ss; i++) e += (s1[i] - s2[i]) * (s1[i] - s2[i]), m += s1[i] * s1[i];
                    CHECK(e <= 1e-10 * (m + 1), "attn_scores %s group=%d hd=%d n=%d: error %g", tn, group, hd, n, e);
                    CHECK(!memcmp(s2, s3, sizeof(float) * group * ss), "attn_scores %s group=%d hd=%d n=%d: not the f32 kernel's floats",
                          tn, group, hd, n);
                    for (int i = 0; i < group * hd; i++) o1[i] = o2[i] = o3[i] = frand();
                    // (values from a row offset by 32: a q8_0 block)
                    attn_mix_ref(s1, ss, group, n, kc + kv_bytes(kt, 32), kt, kb, hd, o1);
                    attn_mix(s1, ss, group, n, kc + kv_bytes(kt, 32), kt, kb, hd, o2);
                    attn_mix(s1, ss, group, n, kd + 32, KV_F32, sizeof(float) * ks, hd, o3);
                    e = 0, m = 0;
                    for (int i = 0; i < group * hd; i++) e += (o1[i] - o2[i]) * (o1[i] - o2[i]), m += o1[i] * o1[i];
                    CHECK(e <= 1e-10 * (m + 1), "attn_mix %s group=%d hd=%d n=%d: error %g", tn, group, hd, n, e);
                    CHECK(!memcmp(o2, o3, sizeof(float) * group * hd), "attn_mix %s group=%d hd=%d n=%d: not the f32 kernel's floats",
                          tn, group, hd, n);
                    // the stored values: f16 the rounded ones, q8_0 within half a step of the block's scale
                    double worst = 0;
                    for (size_t i = 0; i < ks * n; i++) {
                        double d = fabs(kd[i] - k[i]), tol = kt == KV_F16 ? fabs(k[i]) / 2048 : kt == KV_Q8_0 ? 1.0 / 254 + 1.0 / 2000 : 0; // (half a step; the f16 scale)
                        if (d > tol && d - tol > worst) worst = d - tol;
                    }
                    CHECK(worst == 0, "kv_store %s: a value %g beyond its rounding", tn, worst);
                    free(q), free(k), free(kd), free(kc), free(s1), free(s2), free(s3), free(o1), free(o2), free(o3);
                }
    // y += a * row decoded, for the types a vindex's FFN can have
    {
        int types[] = {DT_F32, DT_F16, DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_K, DT_Q6_K};
        for (int ti = 0; ti < 8; ti++) {
            int t = types[ti], n = t == DT_Q4_K || t == DT_Q6_K ? 512 : dtype_get(t)->blck == 1 ? 67 : 96;
            float src[512], y1[512], y2[512];
            unsigned char row[2048];
            for (int i = 0; i < n; i++) src[i] = frand(), y1[i] = y2[i] = frand();
            dtype_get(t)->from_float(src, row, n);
            vec_axpy_row_ref(y1, 0.37f, row, t, n);
            vec_axpy_row(y2, 0.37f, row, t, n);
            double e = 0;
            for (int i = 0; i < n; i++) e += (y1[i] - y2[i]) * (y1[i] - y2[i]);
            CHECK(e <= 1e-10, "vec_axpy_row %s: error %g", dtype_get(t)->name, e);
        }
    }
    // SiLU and GELU (tanh) with the SIMD exp against the scalar formulas
    {
        float a[203], b[203], c[203], d[203];
        for (int i = 0; i < 203; i++) a[i] = b[i] = c[i] = d[i] = i < 3 ? (i == 0 ? -100.0f : i == 1 ? 100.0f : 0.0f) : frand() * 12.0f;
        vec_silu(b, 203), vec_gelu_tanh(d, 203);
        double es = 0, eg = 0;
        for (int i = 0; i < 203; i++) { // against double precision
            // 0.5 (1 + tanh u) as 1 / (1 + e^-2u), which does not cancel
            double v = a[i], u2 = 2 * 0.7978845608028654 * (v + 0.044715 * v * v * v);
            double s = v / (1 + exp(-v)), g = v / (1 + exp(-u2));
            // relative, or absolute below 1e-6 (exp loses relative digits deep in its tail); in units of what a
            // float evaluation can hold: 1e-6, plus the exponent's own rounding (2 ulp of it) carried by e^z
            // into z times that (|z| up to ~90 before the tail)
            double ts = fabs(s - b[i]) / (fabs(s) + 1e-6), tg = fabs(g - d[i]) / (fabs(g) + 1e-6);
            if (fabs(s) < 1e-30) ts = fabs(b[i]);
            if (fabs(g) < 1e-30) tg = fabs(d[i]);
            ts /= 1e-6 + 2.4e-7 * fabs(v), tg /= 1e-6 + 2.4e-7 * fabs(u2);
            es = ts > es ? ts : es, eg = tg > eg ? tg : eg;
        }
        (void)c;
        CHECK(es <= 1 && eg <= 1, "vec_silu / vec_gelu_tanh: worst relative error %g / %g of what float arithmetic holds", es, eg);
    }
    // softmax with the SIMD exp: within a few ulp of expf, -inf gives 0
    for (int n = 1; n < 70; n += 6) {
        float a[70], b[70];
        for (int i = 0; i < n; i++) a[i] = b[i] = frand() * (i % 4 == 0 ? 120.0f : 8.0f);
        if (n > 3) a[2] = b[2] = -INFINITY;
        float sa = vec_softmax_ref(a, n), sb = vec_softmax(b, n);
        double worst = 0;
        for (int i = 0; i < n; i++) {
            double d = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-30);
            if (a[i] > 1e-30 && d > worst) worst = d;
        }
        CHECK(worst <= 4e-7 && fabsf(sa - sb) <= 4e-7f * sa && (n <= 3 || b[2] == 0.0f),
              "vec_softmax n=%d: worst relative error %g", n, worst);
    }
    for (int n = 1; n < 1000; n += 97) {
        float a[1000];
        for (int i = 0; i < n; i++) a[i] = frand() * 100.0f;
        double r = vec_sumsq_ref(a, n), v = vec_sumsq(a, n);
        CHECK(fabs(r - v) <= 1e-12 * r, "vec_sumsq n=%d: %.17g vs %.17g", n, v, r);
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
            unsigned char qa[ACT_GROUP_BYTES * 8], qb[34 * 32], qg[ACT_GROUP_BYTES * 8];
            for (int i = 0; i < 1024; i++) a[i] = frand() * (i % 64 == 0 ? 50.0f : 1.0f);
            a[5] = 0.5f * 127.0f / 50.0f; // a tie on the grid of some blocks
            s8->quant(a, qa, 1024);
            r8->quant(a, qb, 1024);
            act_q8_0_group(qb, qg, 1024);
            CHECK(!memcmp(qa, qg, sizeof qa), "AVX2 q8_0 activation quantizer differs from the scalar one");
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
    check_bf16_act();
    if (cpu_has_amx_bf16()) { check_amx_bf16(32, 8); check_amx_bf16(64 * 5, 13); check_amx_bf16(2560, 21); }
    else printf("kernels: this CPU has no AMX (or the OS did not grant it): the AMX kernel is not run\n");
    if (cpu_has_amx_int8()) {
        check_amx_int8(DT_Q8_0, 32, 16), check_amx_int8(DT_Q8_0, 96, 13), check_amx_int8(DT_Q8_0, 2048, 21);
        check_amx_int8(DT_Q4_K, 256, 16), check_amx_int8(DT_Q4_K, 768, 13), check_amx_int8(DT_Q4_K, 2560, 21);
        check_amx_int8(DT_Q6_K, 256, 16), check_amx_int8(DT_Q6_K, 768, 13), check_amx_int8(DT_Q6_K, 2560, 21);
    } else printf("kernels: this CPU has no AMX-INT8 (or the OS did not grant it): the AMX int8 kernels are not run\n");
    return check_summary("kernels");
}
