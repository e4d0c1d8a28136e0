// Issue 41's AMX paths against their oracles (an AMX CPU only): the int8
// panels of prompt products (tensor/panel.h) and the bf16 flash attention of
// long prompts (compute/cpu/attn_amx.c).
#include "check.h"
#include "compute/backend.h"
#include "compute/cpu/attn.h"
#include "compute/cpu/ops.h"
#include "base/cpu.h"
#include "base/pool.h"
#include "base/half.h"
#include "tensor/dtype.h"
#include "tensor/panel.h"
#include "tensor/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) { // uniform in [-1, 1)
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

// q4_K's panel scale (panel.h: panel_q4_K_scale) times 127: the largest |d1 q - m1| of q = 0 .. 15 in its 8
// sub-blocks, each value rounded once
static float q4_K_range(const void *blk) {
    const block_q4_K *b = blk;
    const float d = f16_to_f32((uint16_t)(b->d[0] | b->d[1] << 8)), dmin = f16_to_f32((uint16_t)(b->dmin[0] | b->dmin[1] << 8));
    float m = 0;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        scale_min_k4(j, b->scales, &sc, &mn);
        for (int q = 0; q < 16; q++) m = fmaxf(m, fabsf(fmaf(d * (float)sc, (float)q, -dmin * (float)mn)));
    }
    return m;
}

// The AMX panels (panel.h) against their oracles: the decode equals to_float's
// values requantized (a unit of the last place aside, where the compiler
// fused the scalar decode's multiply-add; q4_K's scale from q4_K_range), the tokens' bytes a scalar
// quantization's, panel_run panel_run_ref's floats bit for bit, each token's
// outputs the same alone as among 37 (a gathered order too), and all within
// 4e-2 of the float sums' RMS (the requantized weights and the q8 tokens).
static void check_panel(int dt, int n, int rows) {
    const char *name = dtype_get(dt)->name;
    enum { T = 37 };
    size_t rs = dtype_row_size(dt, n);
    unsigned char *w = malloc(rs * rows), *p = aligned_alloc(64, (panel_bytes(n) + 63) & ~(size_t)63);
    unsigned char *xb = aligned_alloc(64, (panel_act_bytes(T, n) + 63) & ~(size_t)63), *x1 = aligned_alloc(64, (panel_act_bytes(1, n) + 63) & ~(size_t)63);
    float *x = malloc(sizeof(float) * n * T), *wf = malloc(sizeof(float) * n * rows), *y = malloc(sizeof(float) * 40 * T);
    float *yr = malloc(sizeof(float) * 40 * T), *y1 = malloc(sizeof(float) * 40), *yg = malloc(sizeof(float) * 40 * T);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) wf[(size_t)r * n + i] = frand() * (r % 5 == 0 && i % 17 == 0 ? 9.0f : 1.0f);
        dtype_get(dt)->from_float(wf + (size_t)r * n, w + rs * r, n);
        dtype_get(dt)->to_float(w + rs * r, wf + (size_t)r * n, n);
    }
    for (int i = 0; i < n * T; i++) x[i] = frand() * (i % 41 == 0 ? 30.0f : 1.0f);
    // (the layouts' width np: whole super-blocks, the last one zero-padded past n)
    const int np = (n + 255) / 256 * 256;
    float *wp = calloc((size_t)np * rows, sizeof(float)), *xp = calloc((size_t)np * 48, sizeof(float));
    for (int r = 0; r < rows; r++) memcpy(wp + (size_t)r * np, wf + (size_t)r * n, sizeof(float) * n);
    for (int t = 0; t < T; t++) memcpy(xp + (size_t)t * np, x + (size_t)t * n, sizeof(float) * n);
    CHECK(panel_type_ok(dt, n) && panel_decode(dt, w, rs, rows, n, p) == 0, "%s n=%d: panel_decode refused", name, n);
    const int8_t *tiles = (const int8_t *)p;
    const float *ps = (const float *)(p + (size_t)32 * np);
    int off = 0, bad = 0;
    for (int r = 0; r < 32; r++)
        for (int k = 0; k < np / 256; k++) {
            const float *v = wp + (size_t)r * np + 256 * k;
            float m = 0;
            for (int c = 0; c < 256 && r < rows; c++) m = fmaxf(m, fabsf(v[c]));
            if (dt == DT_Q4_K && r < rows) m = q4_K_range(w + rs * r + dtype_row_size(dt, 256 * k));
            const float sc = m / 127.0f, inv = sc > 0 ? 1.0f / sc : 0.0f, got = ps[((size_t)(r / 16) * (np / 256) + k) * 16 + r % 16];
            bad += got != sc;
            for (int c = 0; c < 256; c++) {
                int want = r < rows ? (int)lrintf(v[c] * inv) : 0;
                int have = tiles[(((size_t)(r / 16) * (np / 64) + 4 * k + c / 64) * 16 + r % 16) * 64 + c % 64];
                off += have != want, bad += abs(have - want) > 1;
            }
        }
    CHECK(!bad && off <= 32 * n / 1000, "%s n=%d: the panel's decode differs from to_float's values requantized (%d off by one, %d more)",
          name, n, off, bad);
    panel_act(x, n, NULL, T, n, xb, 0, (T + 15) / 16);
    const int8_t *xq = (const int8_t *)xb;
    const float *xd = (const float *)(xb + (size_t)((T + 15) / 16) * np * 16);
    bad = 0;
    for (int t = 0; t < 48; t++)
        for (int k = 0; k < np / 256; k++) {
            const float *v = xp + (size_t)t * np + 256 * k;
            float m = 0;
            for (int c = 0; c < 256 && t < T; c++) m = fmaxf(m, fabsf(v[c]));
            const float sc = m / 127.0f, inv = sc > 0 ? 1.0f / sc : 0.0f;
            bad += xd[((size_t)(t / 16) * (np / 256) + k) * 16 + t % 16] != sc;
            for (int c = 0; c < 256; c++)
                bad += xq[(((size_t)(t / 16) * (np / 64) + 4 * k + c / 64) * 16 + (c % 64) / 4) * 64 + 4 * (t % 16) + c % 4] !=
                       (t < T ? (int)lrintf(v[c] * inv) : 0);
        }
    CHECK(!bad, "%s n=%d: the panel's tokens differ from a scalar quantization (%d values)", name, n, bad);
    for (int b = 0; b < (T + 15) / 16; b++) {
        panel_run(p, n, xb, T, b, NULL, y, 40, rows, NULL);
        panel_run_ref(p, n, xb, T, b, NULL, yr, 40, rows, NULL);
    }
    int same = 1;
    for (int t = 0; t < T; t++) same &= !memcmp(y + 40 * t, yr + 40 * t, sizeof(float) * rows);
    CHECK(same, "%s n=%d: panel_run differs from panel_run_ref", name, n);
    int tok[T];
    for (int t = 0; t < T; t++) tok[t] = (7 * t + 3) % T; // (a gathered order: token tok[i] of x to row tok[i] of y)
    panel_act(x, n, tok, T, n, xb, 0, (T + 15) / 16);
    for (int b = 0; b < (T + 15) / 16; b++) panel_run(p, n, xb, T, b, tok, yg, 40, rows, NULL);
    same = 1;
    for (int t = 0; t < T; t++) {
        panel_act(x + (size_t)t * n, n, NULL, 1, n, x1, 0, 1);
        panel_run(p, n, x1, 1, 0, NULL, y1, 40, rows, NULL);
        same &= !memcmp(y1, y + 40 * t, sizeof(float) * rows) && !memcmp(yg + 40 * t, y + 40 * t, sizeof(float) * rows);
    }
    CHECK(same, "%s n=%d: a token's panel outputs differ alone, among %d, or gathered", name, n, T);
    double e = 0, s2 = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            double d = 0;
            for (int i = 0; i < n; i++) d += (double)wf[(size_t)r * n + i] * x[(size_t)t * n + i];
            e += (y[40 * t + r] - d) * (y[40 * t + r] - d), s2 += d * d;
        }
    CHECK(sqrt(e / s2) <= 4e-2, "%s n=%d: panel outputs vs float sums: relative RMS error %.3g", name, n, sqrt(e / s2));
    printf("amx: panel %s n=%d, %d rows: decode %d values off by one; error %.3g of the float sums' RMS\n", name, n, rows, off, sqrt(e / s2));
    free(w), free(p), free(xb), free(x1), free(x), free(wf), free(y), free(yr), free(y1), free(yg), free(wp), free(xp);
}

// bf16 weights read in place (panel_run_bf16): against its scalar oracle (f32 sums in column order; the
// tiles sum pairs, so within 1e-5 of the row's scale, not bit for bit), each token the same alone, among 37
// and gathered, and the tokens' bf16 bytes f32_to_bf16's.
static void check_panel_bf16(int n, int rows) {
    enum { T = 37 };
    uint16_t *wr = calloc((size_t)32 * n, 2), *w = aligned_alloc(64, panel_bf16_bytes(n));
    for (int i = 0; i < rows * n; i++) wr[i] = f32_to_bf16(frand());
    panel_pack_bf16(wr, 2 * (size_t)n, rows, n, w);
    int moved = 0; // (the pack: row r's column c at tile (r / 16, c / 32), row r % 16)
    for (int r = 0; r < 32; r++)
        for (int c = 0; c < n; c++)
            moved += w[(((size_t)(r / 16) * (n / 32) + c / 32) * 16 + r % 16) * 32 + c % 32] != (r < rows ? wr[(size_t)r * n + c] : 0);
    CHECK(!moved, "bf16 panel n=%d: the pack misplaces %d values", n, moved);
    size_t xbb = panel_act_bf16_bytes(T, n);
    unsigned char *xb = aligned_alloc(64, (xbb + 63) & ~(size_t)63), *x1 = aligned_alloc(64, (panel_act_bf16_bytes(1, n) + 63) & ~(size_t)63);
    float *x = malloc(sizeof(float) * n * T), *y = malloc(sizeof(float) * 40 * T), *yr = malloc(sizeof(float) * 40 * T);
    float *yg = malloc(sizeof(float) * 40 * T), *y1 = malloc(sizeof(float) * 40);
    for (int i = 0; i < n * T; i++) x[i] = frand() * (i % 41 == 0 ? 30.0f : 1.0f);
    panel_act_bf16(x, n, NULL, T, n, xb, 0, 2 * ((T + 31) / 32));
    int bad = 0;
    const uint16_t *xq = (const uint16_t *)xb;
    for (int t = 0; t < 64; t++)
        for (int c = 0; c < n; c++)
            bad += xq[((size_t)(t / 16) * (n / 32) + c / 32) * 512 + 32 * ((c % 32) / 2) + 2 * (t % 16) + c % 2] != (t < T ? f32_to_bf16(x[(size_t)t * n + c]) : 0);
    CHECK(!bad, "bf16 panel n=%d: the tokens' tiles differ from f32_to_bf16 (%d values)", n, bad);
    double e = 0, s2 = 0;
    for (int pr = 0; pr < (T + 31) / 32; pr++) {
        panel_run_bf16(w, rows, n, xb, T, pr, NULL, y, 40, NULL);
        panel_run_bf16_ref(w, rows, n, xb, T, pr, NULL, yr, 40, NULL);
    }
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) e = fmax(e, fabs(y[40 * t + r] - yr[40 * t + r])), s2 = fmax(s2, fabs(yr[40 * t + r]));
    CHECK(e <= 1e-5 * s2, "bf16 panel n=%d: the tiles' sums differ from the oracle's by %.3g of the largest", n, e / s2);
    int tok[T];
    for (int t = 0; t < T; t++) tok[t] = (11 * t + 5) % T;
    panel_act_bf16(x, n, tok, T, n, xb, 0, 2 * ((T + 31) / 32));
    for (int pr = 0; pr < (T + 31) / 32; pr++) panel_run_bf16(w, rows, n, xb, T, pr, tok, yg, 40, NULL);
    int same = 1;
    for (int t = 0; t < T; t++) {
        panel_act_bf16(x + (size_t)t * n, n, NULL, 1, n, x1, 0, 2);
        panel_run_bf16(w, rows, n, x1, 1, 0, NULL, y1, 40, NULL);
        same &= !memcmp(y1, y + 40 * t, sizeof(float) * rows) && !memcmp(yg + 40 * t, y + 40 * t, sizeof(float) * rows);
    }
    CHECK(same, "bf16 panel n=%d: a token's outputs differ alone, among %d, or gathered", n, T);
    printf("amx: bf16 panel n=%d, %d rows: %.2g of the largest output from the oracle\n", n, rows, e / s2);
    free(w), free(wr), free(xb), free(x1), free(x), free(y), free(yr), free(yg), free(y1);
}

// The flash attention of a pass's prompt runs (INFER_AMX_ATTN=1): within 2e-2
// of the reference backend (bf16 queries, keys, values and probabilities),
// over f32, f16 and q8_0 caches, with and without a window; every row the
// same floats whether the runs come in blocks of 8 or of 3 rows and on 1 or
// 2 threads; the decode row beside them (a run of 1) the f32 kernels' floats
// bit for bit (as with the flash kernel off).
static void attention_pass(const backend *be, attn_desc *d, float *out) {
    d->out = out;
    be->ops->attention((backend *)be, d);
}

static void check_flash(int avx, int HD) {
    const char *how = avx ? "AVX512-BF16" : "AMX";
    setenv("INFER_FLASH_AVX", avx ? "1" : "0", 1);
    enum { H = 8, KV = 2, NCTX = 1100, T = 41 };
    const int nq = H * HD, nkv = KV * HD, stride = NCTX + 1, B = 8;
    float *q = malloc(sizeof(float) * T * nq), *src = malloc(sizeof(float) * NCTX * nkv);
    for (int i = 0; i < T * nq; i++) q[i] = frand();
    for (int i = 0; i < NCTX * nkv; i++) src[i] = frand() * 2;
    pool *p2 = pool_new(2);
    cpu_exec ex2 = {.pool = p2}, ex1 = {0}, exr = {0};
    backend cpu2 = {&backend_cpu_ops, &ex2, NULL, NULL, 0}, cpu1 = {&backend_cpu_ops, &ex1, NULL, NULL, 0};
    backend ref = {&backend_ref_ops, &exr, NULL, NULL, 0};
    float *scores = malloc(sizeof(float) * 8 * B * H * stride);
    float *o_ref = malloc(sizeof(float) * T * nq), *o2 = malloc(sizeof(float) * T * nq), *o1 = malloc(sizeof(float) * T * nq);
    float *o0 = malloc(sizeof(float) * T * nq);
    // rows 0-19: sequence 0 at 1000..1019; rows 20-39: sequence 1 at 300..319; row 40: sequence 1 at 5 (decode)
    int pos[T], run[T];
    for (int t = 0; t < T; t++) pos[t] = t < 20 ? 1000 + t : t < 40 ? 280 + t : 5, run[t] = t == 0 || t == 20 || t == 40;
    int b8_0[7] = {0, 8, 16, 20, 28, 36, 40}, b8_n[7] = {8, 8, 4, 8, 8, 4, 1}, b3_0[15], b3_n[15], n3 = 0;
    for (int t = 0; t < 40; t += 3) b3_0[n3] = t, b3_n[n3++] = (t < 20 ? 20 : 40) - t < 3 ? (t < 20 ? 20 : 40) - t : 3;
    // (blocks of 3 that do not cross the runs: 0,3,..,18 (2 rows), then 20 is not a multiple of 3: redo)
    n3 = 0;
    for (int s = 0; s < 2; s++)
        for (int t = 20 * s; t < 20 * s + 20; t += 3) b3_0[n3] = t, b3_n[n3++] = 20 * s + 20 - t < 3 ? 20 * s + 20 - t : 3;
    b3_0[n3] = 40, b3_n[n3++] = 1;
    int ran = 0;
    for (int kt = 0; kt < KV_TYPES; kt++)
        for (int variant = 0; variant < 2; variant++) {
            size_t rb = kv_bytes(kt, nkv);
            unsigned char *kc[2], *vc[2];
            int32_t pos_all[NCTX];
            for (int i = 0; i < NCTX; i++) pos_all[i] = i;
            for (int c = 0; c < 2; c++) {
                kc[c] = malloc(rb * NCTX), vc[c] = malloc(rb * NCTX);
                void *kr[NCTX], *vr[NCTX];
                for (int i = 0; i < NCTX; i++) kr[i] = kc[c], vr[i] = vc[c];
                host_kv_store(NULL, kr, kt, pos_all, src, NCTX, nkv);
                host_kv_store(NULL, vr, kt, pos_all, src + (c ? 7 : 0), NCTX - 1, nkv);
            }
            const void *kp[T], *vp[T];
            for (int t = 0; t < T; t++) kp[t] = t < 20 ? kc[0] : kc[1], vp[t] = t < 20 ? vc[0] : vc[1];
            attn_desc d = {.q = q, .T = T, .H = H, .KV = KV, .hd = HD, .window = variant ? 300 : 0, .pos = pos, .k = kp, .v = vp,
                           .kt = kt, .vt = kt, .blk0 = b8_0, .blk_n = b8_n, .n_blk = 7, .scale = 0.3f,
                           .scores = scores, .B = B, .stride = stride};
            attention_pass(&ref, &d, o_ref);
            cpu_exec_pass(&ex2, run, T), cpu_exec_pass(&ex1, run, T);
            setenv("INFER_AMX_ATTN", "0", 1);
            attention_pass(&cpu2, &d, o0);
            setenv("INFER_AMX_ATTN", "1", 1);
            ran = attn_flash_ok(&d);
            attention_pass(&cpu2, &d, o2);
            double e = 0, r = 0;
            for (int i = 0; i < 40 * nq; i++) e = fmax(e, fabs(o2[i] - o_ref[i])), r = fmax(r, fabs(o_ref[i]));
            CHECK(e / r < 2e-2, "flash attention (%s; %s, window %d): max error %.3g of the reference's largest value", how, kv_type_name(kt),
                  d.window, e / r);
            CHECK(memcmp(o2, o0, sizeof(float) * 40 * nq) != 0, "flash attention (%s; %s): the prompt rows are the f32 kernels' (not run?)", how,
                  kv_type_name(kt));
            CHECK(!memcmp(o2 + 40 * nq, o0 + 40 * nq, sizeof(float) * nq), "flash attention (%s; %s): the decode row differs from the f32 kernels'",
                  how, kv_type_name(kt));
            d.blk0 = b3_0, d.blk_n = b3_n, d.n_blk = n3;
            attention_pass(&cpu1, &d, o1);
            CHECK(!memcmp(o1, o2, sizeof(float) * T * nq), "flash attention (%s; %s, window %d): blocks of 3 on one thread differ from blocks of 8 on two",
                  how, kv_type_name(kt), d.window);
            printf("amx: flash attention (%s, hd %d), %s cache, window %d: max error %.2g of the reference's largest value\n", how, HD, kv_type_name(kt), d.window,
                   e / r);
            for (int c = 0; c < 2; c++) free(kc[c]), free(vc[c]);
        }
    unsetenv("INFER_AMX_ATTN");
    unsetenv("INFER_FLASH_AVX");
    CHECK(ran, "flash attention: attn_flash_ok refused an %s CPU", how);
    cpu_exec_release(&ex1), cpu_exec_release(&ex2), cpu_exec_release(&exr);
    pool_free(p2);
    free(q), free(src), free(scores), free(o_ref), free(o1), free(o2), free(o0);
}

// The 32-column block types' bf16 panels (panel_decode_bf16): to_float's values rounded by f32_to_bf16, in
// panel_pack_bf16's layout, rows past `rows` zeros.
static void check_decode_bf16(int dt, int n, int rows) {
    size_t rs = dtype_row_size(dt, n), pb = panel_bf16_bytes(n);
    unsigned char *w = malloc(rs * rows), *p = aligned_alloc(64, pb), *q = aligned_alloc(64, pb);
    float *wf = malloc(sizeof(float) * n);
    uint16_t *wb = calloc((size_t)rows * n, 2);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) wf[i] = frand() * (r % 5 == 0 && i % 17 == 0 ? 9.0f : 1.0f);
        dtype_get(dt)->from_float(wf, w + rs * r, n);
        dtype_get(dt)->to_float(w + rs * r, wf, n);
        for (int i = 0; i < n; i++) wb[(size_t)r * n + i] = f32_to_bf16(wf[i]);
    }
    memset(p, 0xAB, pb);
    panel_decode_bf16(dt, w, rs, rows, n, p);
    panel_pack_bf16(wb, 2 * (size_t)n, rows, n, q);
    CHECK(!memcmp(p, q, pb), "%s n=%d: panel_decode_bf16 differs from to_float's values packed as bf16", dtype_get(dt)->name, n);
    free(w), free(p), free(q), free(wf), free(wb);
}

int main(void) {
    if (cpu_has_amx_int8()) {
        for (int dt = 0; dt < DT_COUNT; dt++)
            if (panel_type_ok(dt, 512) && dtype_get(dt)->from_float) {
                check_panel(dt, 512, 32), check_panel(dt, 1280, 19);
                // widths past whole super-blocks (Gemma 3 270M's 640): the types of 32-column blocks only
                CHECK(panel_type_ok(dt, 640) == (dtype_get(dt)->blck <= 32), "%s: panel_type_ok(640) %d", dtype_get(dt)->name,
                      panel_type_ok(dt, 640));
                if (panel_type_ok(dt, 640)) check_panel(dt, 640, 25), check_panel(dt, 288, 32);
            }
    } else printf("amx: this CPU has no AMX-INT8 (or the OS did not grant it): the panels are not run\n");
    if (cpu_has_avx512bf16()) check_flash(1, 64), check_flash(1, 128); // (the AVX512-BF16 kernel: AMD Zen 4 and 5's, an AMX CPU's too)
    else printf("amx: this CPU has no AVX512-BF16: its flash attention is not run\n");
    if (cpu_has_amx_bf16()) {
        check_flash(0, 64), check_panel_bf16(512, 32), check_panel_bf16(1280, 19), check_panel_bf16(640, 25);
        for (int dt = 0; dt < DT_COUNT; dt++)
            if (panel_bf16_type(dt) && dt != DT_BF16 && dtype_get(dt)->from_float) check_decode_bf16(dt, 640, 25), check_decode_bf16(dt, 256, 32);
        check_decode_bf16(DT_Q4_K, 512, 19);
        CHECK(panel_bf16_type(DT_Q4_0) && panel_bf16_type(DT_Q5_0) && panel_bf16_type(DT_Q8_0) && !panel_bf16_type(DT_Q4_K) && !panel_bf16_type(DT_Q6_K),
              "panel_bf16_type: the 32-column block types take bf16 panels, the k-quants int8");
    }
    else printf("amx: this CPU has no AMX-BF16 (or the OS did not grant it): the flash attention is not run\n");
    return check_summary("amx");
}
