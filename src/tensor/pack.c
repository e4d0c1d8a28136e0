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

size_t pack_record_bytes(int kind) {
    switch (kind) {
    case PACK_Q8_0: return 16 + 256;
    case PACK_Q5_0: return 16 + 32 + 128;
    case PACK_Q4_0: return 16 + 128;
    default: return 0;
    }
}

size_t pack_group_bytes(int kind, int64_t cols) { return pack_record_bytes(kind) * (size_t)(cols / QK); }

size_t pack_bytes(int kind, int64_t rows, int64_t cols) { return pack_group_bytes(kind, cols) * (size_t)((rows + 7) / 8); }

static int dtype_of(int kind) { return kind == PACK_Q8_0 ? DT_Q8_0 : kind == PACK_Q5_0 ? DT_Q5_0 : DT_Q4_0; }

int pack_kind_for(int dtype, int64_t cols) {
    if (cols <= 0 || cols % QK || !cpu_has_vnni() || !cpu_has_avx2()) return PACK_NONE;
    if (vecdot_scalar_forced()) return PACK_NONE;
    const char *off = getenv("INFER_NO_PACK");
    if (off && *off && *off != '0') return PACK_NONE;
    switch (dtype) {
    case DT_Q8_0: return PACK_Q8_0;
    case DT_Q5_0: return PACK_Q5_0;
    case DT_Q4_0: return PACK_Q4_0;
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

static void pack_range(const pack_job *j, int64_t gb, int64_t ge) {
    const int kind = j->kind, nb = (int)(j->cols / QK);
    const int64_t rows = j->rows;
    const void *src = j->src;
    const size_t rs = dtype_row_size(dtype_of(kind), j->cols), rec = pack_record_bytes(kind);
    uint8_t *out = (uint8_t *)j->dst + rec * (size_t)nb * (size_t)gb;
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

// The oracle: the same integers and the same float operations, in C.
void pack_tile_ref(int kind, const void *group, const void *x, size_t xstride, int T, int n, float *out) {
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
    case PACK_Q8_0: return &pack_vnni_q8_0;
    case PACK_Q5_0: return &pack_vnni_q5_0;
    case PACK_Q4_0: return &pack_vnni_q4_0;
    default: return NULL;
    }
}
