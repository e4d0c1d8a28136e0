// Packing of 32-element block rows for the VNNI kernels (layouts: pack.h),
// and the scalar oracle of those kernels.
#include "tensor/pack.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "tensor/vecdot.h"
#include "base/cpu.h"
#include "base/half.h"

#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

// the offset added to the weights (2^shift)
static int pack_shift(int kind) { return kind == PACK_Q8_0 ? 7 : kind == PACK_Q5_0 ? 4 : 3; }

static int is_k(int kind) { return kind == PACK_Q4_K || kind == PACK_Q6_K; }

size_t pack_record_bytes(int kind) {
    switch (kind) {
    case PACK_Q8_0: return 16 + 256;
    case PACK_Q5_0: return 16 + 32 + 128;
    case PACK_Q4_0: return 16 + 128;
    case PACK_Q4_K: return 32 + 64 + 64 + 1024;
    case PACK_Q6_K: return 16 + 128 + 16 * 96;
    case PACK_BF16: return 512;
    default: return 0;
    }
}

size_t pack_group_bytes(int kind, int64_t cols) { return pack_record_bytes(kind) * (size_t)(cols / (is_k(kind) ? QK_K : QK)); }

size_t pack_act_row_size(int kind, int n) {
    if (kind == PACK_BF16) return (2 * (size_t)n + 63) & ~(size_t)63;
    return is_k(kind) ? act_packed_k_row_size(n) : act_packed_row_size(n);
}

size_t pack_bytes(int kind, int64_t rows, int64_t cols) { return pack_group_bytes(kind, cols) * (size_t)((rows + 7) / 8); }

static int dtype_of(int kind) {
    return kind == PACK_Q8_0 ? DT_Q8_0 : kind == PACK_Q5_0 ? DT_Q5_0 : kind == PACK_Q4_0 ? DT_Q4_0 : kind == PACK_Q4_K ? DT_Q4_K
         : kind == PACK_BF16 ? DT_BF16 : DT_Q6_K;
}

int pack_kind_for(int dtype, int64_t cols) {
    if (cols <= 0 || cols % QK || !cpu_has_vnni() || !cpu_has_avx2()) return PACK_NONE;
    if ((dtype == DT_Q4_K || dtype == DT_Q6_K) && cols % QK_K) return PACK_NONE;
    if (vecdot_scalar_forced()) return PACK_NONE;
    const char *off = getenv("INFER_NO_PACK");
    if (off && *off && *off != '0') return PACK_NONE;
    switch (dtype) {
    case DT_Q8_0: return PACK_Q8_0;
    case DT_Q5_0: return PACK_Q5_0;
    case DT_Q4_0: return PACK_Q4_0;
    case DT_Q4_K: return PACK_Q4_K;
    case DT_Q6_K: return PACK_Q6_K;
    case DT_BF16: return cpu_has_amx_bf16() ? PACK_BF16 : PACK_NONE;
    default: return PACK_NONE;
    }
}

// the 32 values of block i of a row as unsigned bytes w + 2^shift, and its f16 scale
static uint16_t block_unsigned(int kind, const void *row, int i, uint8_t *u) {
    uint16_t d;
    if (kind == PACK_Q8_0) {
        const block_q8_0 *b = (const block_q8_0 *)row + i;
        uint64_t q[4];
        memcpy(q, b->qs, 32);
        for (int k = 0; k < 4; k++) q[k] ^= 0x8080808080808080ull; // w + 128
        memcpy(u, q, 32);
        memcpy(&d, b->d, 2);
    } else if (kind == PACK_Q5_0) {
        const block_q5_0 *b = (const block_q5_0 *)row + i;
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        for (int j = 0; j < 16; j++) {
            u[j] = (uint8_t)((b->qs[j] & 15) | ((qh >> j) & 1) << 4);
            u[j + 16] = (uint8_t)((b->qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        }
        memcpy(&d, b->d, 2);
    } else {
        const block_q4_0 *b = (const block_q4_0 *)row + i;
        for (int j = 0; j < 16; j++) u[j] = b->qs[j] & 15, u[j + 16] = b->qs[j] >> 4;
        memcpy(&d, b->d, 2);
    }
    return d;
}

typedef struct {
    int kind;
    const void *src;
    int64_t rows, cols;
    void *dst;
} pack_job;

// A k-quant super-block of a row: its 256 values (q4_K 0..15, q6_K 0..63), f16
// d (and dmin), sub-block scales (and q4_K's mins).
typedef struct { uint8_t q[QK_K]; uint16_t d, dmin; int sc[16], m[8]; } kblock;

static void kblock_get(int kind, const void *row, int i, kblock *k) {
    if (kind == PACK_Q4_K) {
        const block_q4_K *b = (const block_q4_K *)row + i;
        memcpy(&k->d, b->d, 2), memcpy(&k->dmin, b->dmin, 2);
        for (int g = 0; g < 8; g++) scale_min_k4(g, b->scales, &k->sc[g], &k->m[g]);
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) k->q[64 * s + l] = b->qs[32 * s + l] & 15, k->q[64 * s + 32 + l] = b->qs[32 * s + l] >> 4;
    } else {
        const block_q6_K *b = (const block_q6_K *)row + i;
        memcpy(&k->d, b->d, 2);
        k->dmin = 0;
        for (int g = 0; g < 16; g++) k->sc[g] = b->scales[g];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            uint8_t *q = k->q + 128 * h;
            for (int l = 0; l < 32; l++) {
                q[l] = (uint8_t)((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4);
                q[l + 32] = (uint8_t)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
                q[l + 64] = (uint8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
                q[l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
            }
        }
    }
}

// One k-quant record: super-block i of the 8 rows k[0..7] (pack.h's layout).
static void pack_k_record(int kind, const kblock *k, uint8_t *out) {
    for (int r = 0; r < 8; r++) memcpy(out + 2 * r, &k[r].d, 2);
    if (kind == PACK_Q4_K) {
        for (int r = 0; r < 8; r++) memcpy(out + 16 + 2 * r, &k[r].dmin, 2);
        for (int j = 0; j < 8; j++)
            for (int r = 0; r < 8; r++) out[32 + 8 * j + r] = (uint8_t)k[r].sc[j];
        for (int p = 0; p < 4; p++)
            for (int r = 0; r < 8; r++) out[96 + 16 * p + 2 * r] = (uint8_t)k[r].m[2 * p], out[96 + 16 * p + 2 * r + 1] = (uint8_t)k[r].m[2 * p + 1];
        for (int j = 0; j < 8; j++) { // 32-column sub-blocks: granule g holds columns 32j + 4g .. + 3
            uint8_t *nib = out + 160 + 128 * j;
            for (int h = 0; h < 4; h++)
                for (int r = 0; r < 8; r++)
                    for (int e = 0; e < 4; e++)
                        nib[32 * h + 4 * r + e] = (uint8_t)(k[r].q[32 * j + 4 * (2 * h) + e] | k[r].q[32 * j + 4 * (2 * h + 1) + e] << 4);
        }
        return;
    }
    for (int p = 0; p < 8; p++)
        for (int r = 0; r < 8; r++) out[16 + 16 * p + 2 * r] = (uint8_t)(int8_t)k[r].sc[2 * p], out[16 + 16 * p + 2 * r + 1] = (uint8_t)(int8_t)k[r].sc[2 * p + 1];
    for (int j = 0; j < 16; j++) { // 16-column sub-blocks: granule g holds columns 16j + 4g .. + 3
        uint8_t *s = out + 144 + 96 * j;
        for (int r = 0; r < 8; r++)
            for (int e = 0; e < 4; e++) {
                const uint8_t *q = k[r].q + 16 * j + e;
                s[4 * r + e] = (uint8_t)((q[0] & 15) | (q[4] & 15) << 4);
                s[32 + 4 * r + e] = (uint8_t)((q[8] & 15) | (q[12] & 15) << 4);
                s[64 + 4 * r + e] = (uint8_t)((q[0] >> 4) | (q[4] >> 4) << 2 | (q[8] >> 4) << 4 | (q[12] >> 4) << 6);
            }
    }
}

static void pack_range(const pack_job *j, int64_t gb, int64_t ge) {
    const int kind = j->kind, nb = (int)(j->cols / (is_k(kind) ? QK_K : QK));
    const int64_t rows = j->rows;
    const void *src = j->src;
    const size_t rs = dtype_row_size(dtype_of(kind), j->cols), rec = pack_record_bytes(kind);
    uint8_t *out = (uint8_t *)j->dst + rec * (size_t)nb * (size_t)gb;
    if (kind == PACK_BF16) { // B tiles: row k = the 8 rows' columns 2k, 2k+1 (zero rows past the end)
        for (int64_t g0 = 8 * gb; g0 < 8 * ge; g0 += 8)
            for (int i = 0; i < nb; i++, out += rec)
                for (int r = 0; r < 8; r++)
                    for (int k = 0; k < 16; k++)
                        if (g0 + r < rows) memcpy(out + 32 * k + 4 * r, (const char *)src + rs * (size_t)(g0 + r) + 64 * (size_t)i + 4 * k, 4);
                        else memset(out + 32 * k + 4 * r, 0, 4);
        return;
    }
    if (is_k(kind)) {
        for (int64_t g0 = 8 * gb; g0 < 8 * ge; g0 += 8)
            for (int i = 0; i < nb; i++, out += rec) {
                kblock k[8];
                for (int r = 0; r < 8; r++)
                    if (g0 + r < rows) kblock_get(kind, (const char *)src + rs * (size_t)(g0 + r), i, &k[r]);
                    else memset(&k[r], 0, sizeof k[r]);
                pack_k_record(kind, k, out);
            }
        return;
    }
    for (int64_t g0 = 8 * gb; g0 < 8 * ge; g0 += 8)
        for (int i = 0; i < nb; i++, out += rec) {
            uint8_t v[8][32]; // the granule vectors V_0..V_7
            uint16_t d[8];
            for (int r = 0; r < 8; r++) {
                uint8_t u[QK];
                if (g0 + r < rows) d[r] = block_unsigned(kind, (const char *)src + rs * (size_t)(g0 + r), i, u);
                else memset(u, 0, QK), d[r] = 0;
                for (int g = 0; g < 8; g++) memcpy(&v[g][4 * r], &u[4 * g], 4);
            }
            memcpy(out, d, 16);
            if (kind == PACK_Q8_0) {
                memcpy(out + 16, v, 256);
                continue;
            }
            uint8_t *nib = out + 16;
            if (kind == PACK_Q5_0) {
                for (int g = 0; g < 8; g++) {
                    uint32_t m = 0;
                    for (int j = 0; j < 32; j++) m |= (uint32_t)(v[g][j] >> 4 & 1) << j;
                    memcpy(out + 16 + 4 * g, &m, 4);
                }
                nib += 32;
            }
            for (int h = 0; h < 4; h++)
                for (int j = 0; j < 32; j++) nib[32 * h + j] = (uint8_t)((v[2 * h][j] & 15) | (v[2 * h + 1][j] & 15) << 4);
        }
}

static void *pack_thread(void *arg) {
    const pack_job *j = ((void **)arg)[0];
    int64_t gb = ((int64_t *)((void **)arg)[1])[0], ge = ((int64_t *)((void **)arg)[1])[1];
    pack_range(j, gb, ge);
    return NULL;
}

// Large matrices are packed on several threads (a load-time copy of the
// whole matrix: 8 threads at most, each its own groups).
void pack_rows(int kind, const void *src, int64_t rows, int64_t cols, void *dst) {
    pack_job j = {kind, src, rows, cols, dst};
    int64_t ng = (rows + 7) / 8;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (size_t)rows * (size_t)cols < ((size_t)1 << 22) || ncpu < 2 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
    pthread_t th[8];
    int64_t rng[8][2];
    void *args[8][2];
    int started = 0;
    for (int t = 1; t < nt; t++) {
        rng[t][0] = ng * t / nt, rng[t][1] = ng * (t + 1) / nt;
        args[t][0] = &j, args[t][1] = rng[t];
        if (pthread_create(&th[t], NULL, pack_thread, args[t])) break;
        started = t;
    }
    pack_range(&j, 0, ng * 1 / nt);
    for (int t = started + 1; t < nt; t++) pack_range(&j, ng * t / nt, ng * (t + 1) / nt); // threads that did not start
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

// The k-quant oracle: per super-block the mins (q4_K) or the -32 offset
// (q6_K) through the activations' sums, the sub-blocks' integer sums times
// their scales, then the kernels' float operations.
static void pack_tile_ref_k(int kind, const void *group, const void *x, size_t xstride, int T, int n, float *out) {
    const int nb = n / QK_K;
    const size_t rec = pack_record_bytes(kind);
    for (int t = 0; t < T; t++) {
        const char *xt = (const char *)x + xstride * (size_t)t;
        const int8_t *a = XPK_QS(xt);
        for (int r = 0; r < 8; r++) {
            float acc = 0.0f;
            for (int i = 0; i < nb; i++) {
                const uint8_t *p = (const uint8_t *)group + rec * (size_t)i;
                float da = XPK_D(xt, n)[i];
                uint16_t dh;
                memcpy(&dh, p + 2 * r, 2);
                int32_t isum = 0;
                if (kind == PACK_Q4_K) {
                    uint16_t mh;
                    memcpy(&mh, p + 16 + 2 * r, 2);
                    int32_t msum = 0;
                    for (int j = 0; j < 8; j++) msum += p[96 + 16 * (j / 2) + 2 * r + j % 2] * XPK_BS32(xt, n)[8 * i + j];
                    acc = fmaf(-(float)msum, f16_to_f32(mh) * da, acc);
                    for (int j = 0; j < 8; j++) {
                        int32_t s = 0;
                        for (int c = 0; c < 32; c++) {
                            int g = c / 4, e = c % 4;
                            int u = p[160 + 128 * j + 32 * (g / 2) + 4 * r + e] >> (4 * (g % 2)) & 15;
                            s += u * a[256 * i + 32 * j + c];
                        }
                        isum += s * p[32 + 8 * j + r];
                    }
                } else {
                    int32_t o = 0;
                    for (int j = 0; j < 16; j++) o += (int8_t)p[16 + 16 * (j / 2) + 2 * r + j % 2] * XPK_BS16(xt, n)[16 * i + j];
                    isum = -32 * o;
                    for (int j = 0; j < 16; j++) {
                        int32_t s = 0;
                        const uint8_t *sb = p + 144 + 96 * j;
                        for (int c = 0; c < 16; c++) {
                            int g = c / 4, e = c % 4;
                            int lo = sb[32 * (g / 2) + 4 * r + e] >> (4 * (g % 2)) & 15, hi = sb[64 + 4 * r + e] >> (2 * g) & 3;
                            s += (lo | hi << 4) * a[256 * i + 16 * j + c];
                        }
                        isum += s * (int8_t)p[16 + 16 * (j / 2) + 2 * r + j % 2];
                    }
                }
                acc = fmaf((float)isum, f16_to_f32(dh) * da, acc);
            }
            out[t * 8 + r] = acc;
        }
    }
}

// The oracle: the same integers and the same float operations, in C.
void pack_tile_ref(int kind, const void *group, const void *x, size_t xstride, int T, int n, float *out) {
    if (kind == PACK_BF16) { // the two chains of f32 sums, exact products, in the tiles' order
        for (int t = 0; t < T; t++) {
            const uint8_t *xt = (const uint8_t *)x + xstride * (size_t)t;
            for (int r = 0; r < 8; r++) {
                float c[2] = {0.0f, 0.0f};
                for (int i = 0; i < n / QK; i++) {
                    const uint8_t *b = (const uint8_t *)group + 512 * (size_t)i;
                    for (int k = 0; k < 16; k++)
                        for (int e = 0; e < 2; e++) {
                            uint16_t wv, xv;
                            memcpy(&wv, b + 32 * k + 4 * r + 2 * e, 2), memcpy(&xv, xt + 64 * i + 4 * k + 2 * e, 2);
                            c[i % 2] += bf16_to_f32(wv) * bf16_to_f32(xv);
                        }
                }
                out[t * 8 + r] = c[0] + c[1];
            }
        }
        return;
    }
    if (is_k(kind)) {
        pack_tile_ref_k(kind, group, x, xstride, T, n, out);
        return;
    }
    const int nb = n / QK, sh = pack_shift(kind);
    const size_t rec = pack_record_bytes(kind);
    for (int t = 0; t < T; t++) {
        const char *xt = (const char *)x + xstride * (size_t)t;
        for (int r = 0; r < 8; r++) {
            float acc = 0.0f;
            for (int i = 0; i < nb; i++) {
                const uint8_t *p = (const uint8_t *)group + rec * (size_t)i;
                uint16_t dh;
                memcpy(&dh, p + 2 * r, 2);
                int32_t s = XP_NEGSUM(xt, nb)[i] * (1 << sh);
                for (int j = 0; j < QK; j++) {
                    int g = j / 4, e = j % 4, u;
                    if (kind == PACK_Q8_0) u = p[16 + 32 * g + 4 * r + e];
                    else {
                        const uint8_t *nib = p + 16 + (kind == PACK_Q5_0 ? 32 : 0);
                        u = nib[32 * (g / 2) + 4 * r + e] >> (4 * (g % 2)) & 15;
                        if (kind == PACK_Q5_0) {
                            uint32_t m;
                            memcpy(&m, p + 16 + 4 * g, 4);
                            u |= (int)(m >> (4 * r + e) & 1) << 4;
                        }
                    }
                    s += u * XP_QS(xt)[32 * i + j];
                }
                acc = fmaf((float)s, f16_to_f32(dh) * XP_D(xt, nb)[i], acc);
            }
            out[t * 8 + r] = acc;
        }
    }
}

const pack_kernel *pack_kernel_get(int kind) {
    switch (kind) {
    case PACK_Q8_0: return cpu_has_amx_int8() ? &pack_amx_q8_0 : &pack_vnni_q8_0;
    case PACK_Q5_0: return &pack_vnni_q5_0;
    case PACK_Q4_0: return &pack_vnni_q4_0;
    case PACK_Q4_K: return cpu_has_amx_int8() ? &pack_amx_q4_K : &pack_vnni_q4_K;
    case PACK_Q6_K: return cpu_has_amx_int8() ? &pack_amx_q6_K : &pack_vnni_q6_K;
    case PACK_BF16: return &pack_amx_bf16;
    default: return NULL;
    }
}

// q8_K as quantize_row_q8_K makes it (q8_K_from_float), with the sums of
// each 16 and 32 values, in XPK_*'s layout.
void pack_quant_k_ref(const float *x, void *vy, int n) {
    uint8_t *y = vy;
    block_q8_K b;
    memset(y, 0, act_packed_k_row_size(n));
    for (int i = 0; i < n / QK_K; i++) {
        q8_K_from_float(x + QK_K * i, &b, QK_K);
        memcpy(y + QK_K * i, b.qs, QK_K);
        float d;
        memcpy(&d, b.d, 4);
        memcpy((uint8_t *)XPK_D(y, n) + 4 * i, &d, 4);
        for (int g = 0; g < 16; g++) {
            int16_t s = 0;
            for (int l = 0; l < 16; l++) s = (int16_t)(s + b.qs[16 * g + l]);
            memcpy((uint8_t *)XPK_BS16(y, n) + 2 * (16 * i + g), &s, 2);
        }
        for (int g = 0; g < 8; g++) {
            int16_t s = 0;
            for (int l = 0; l < 32; l++) s = (int16_t)(s + b.qs[32 * g + l]);
            memcpy((uint8_t *)XPK_BS32(y, n) + 2 * (8 * i + g), &s, 2);
        }
    }
}
