// Long prompts' attention on AMX-BF16 (issue 41), flash-attention style:
// no row of scores in memory, the keys and values read once a 16-row chunk
// of queries rather than once a query row.
//
// Once a pass, each cache a flash block reads is converted, per KV head, to
// bf16 tiles: its keys as TDPBF16PS B tiles of 16 keys x 32 dimensions (row
// j, key c: dimensions 2j and 2j + 1), its values as B tiles of 32 keys x
// 16 dimensions (row j: keys 2j and 2j + 1 of each dimension), zeros past
// the last position. A block's query rows (token b, head g of the KV head's
// group: row b * group + g), scaled by scale * log2(e) and rounded to bf16,
// go 16 at a time as A tiles: scores of 64 keys a step into four C tiles, an
// online softmax in AVX-512 (exp2; positions a row does not see give exactly
// 0), the probabilities rounded to bf16 as two A tiles, and the output's 16
// x hd floats in memory, each 16-dimension tile loaded into C, two products
// added, stored. A row's floats depend on its own query, position and cache
// alone (the 64-key steps start at position 0), so a row comes out the same
// whatever rows share its chunk.
//
// Where the CPU has AVX512-BF16 and no AMX (AMD Zen 4 and 5), the same layouts
// feed VDPBF16PS (a tile's row of 16 key or dimension pairs is one zmm): the
// step's products in registers (4 query rows x 64 keys, 4 rows x 64
// dimensions), the softmax the same code. INFER_FLASH_AVX=1 takes that path on
// an AMX CPU too (the tests run both there).
#include "compute/cpu/attn.h"
#include "compute/cpu/ops.h"
#include "base/cpu.h"
#include "base/half.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// 0: no flash kernel; 1: AMX tiles; 2: AVX512-BF16 registers
static int flash_mode(void) {
    const char *e = getenv("INFER_AMX_ATTN"), *a = getenv("INFER_FLASH_AVX"); // (read each time: cheap beside a layer's attention, and the tests set them)
    if (e && !strcmp(e, "0")) return 0;
    if (cpu_has_amx_bf16() && !(a && !strcmp(a, "1"))) return 1;
    return cpu_has_avx512bf16() ? 2 : 0;
}

int attn_flash_enabled(void) { return flash_mode() != 0; }

int attn_flash_ok(const attn_desc *d) {
    const int m = flash_mode();
    return m && d->hd % (m == 2 ? 64 : 32) == 0 && d->hd <= 256 && !d->softcap && !d->sinks && d->KV > 0 && d->H % d->KV == 0;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define FL_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")))
enum { KB = 64 };

#include "tensor/pack.h" // (amx_configure_panel)

typedef struct {
    const void *k, *v;  // the cache (its rows: all KV heads)
    int n;              // positions converted (a multiple of 64)
    size_t off;         // its tiles in the scratch (bytes): per KV head, keys then values
} fl_cache;

typedef struct {
    const attn_desc *d;
    const int *blks;
    int nb, nc;
    fl_cache *c;
    int *blk_cache;     // per listed block: its cache
    int ng, *task0;     // groups of listed blocks (fl_task)
    unsigned char *tiles;
    int avx;            // chunk_step_avx (flash_mode 2)
    unsigned char *state; // per thread: its chunks' state (FL_CHUNKS fl_chunk, ~580 KB: not on a thread's stack)
    atomic_int next;
} fl_job;

static size_t head_bytes(int n, int hd) { return (size_t)n * hd * 2 * 2; } // (keys and values, bf16)

// the hd values of head kh at position p of a cache row, as floats
FL_TARGET static void row_floats(const void *cache, int ty, size_t rb, int kh, int hd, int p, float *out) {
    const char *row = (const char *)cache + rb * (size_t)p;
    if (ty == KV_F16)
        for (int i = 0; i < hd; i += 16) _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + (size_t)kh * hd + i))));
    else if (ty == KV_F32)
        memcpy(out, (const float *)row + (size_t)kh * hd, sizeof(float) * (size_t)hd);
    else
        for (int i = 0; i < hd; i++) out[i] = kv_at(row, ty, kh * hd + i);
}

// cache c's KV head kh to tiles (positions [0, n_real) of the cache, zeros to c->n)
FL_TARGET static void convert(const attn_desc *d, const fl_cache *c, int n_real, int kh, unsigned char *tiles) {
    const int hd = d->hd, nkv = d->KV * hd;
    const size_t ks = kv_bytes(d->kt, (size_t)nkv), vs = kv_bytes(d->vt, (size_t)nkv);
    uint16_t *kt = (uint16_t *)(tiles + c->off + head_bytes(c->n, hd) * (size_t)kh), *vt = kt + (size_t)c->n * hd;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(64));
    float a[256] __attribute__((aligned(64))), b[256] __attribute__((aligned(64)));
    for (int p = 0; p < c->n; p++) { // keys: tile (p / 16, ds), column p % 16
        if (p < n_real) row_floats(c->k, d->kt, ks, kh, hd, p, a);
        else memset(a, 0, sizeof(float) * (size_t)hd);
        for (int ds = 0; ds < hd / 32; ds++) {
            __m512i g = (__m512i)_mm512_cvtne2ps_pbh(_mm512_load_ps(a + 32 * ds + 16), _mm512_load_ps(a + 32 * ds));
            _mm512_i32scatter_epi32(kt + ((size_t)(p / 16) * (hd / 32) + ds) * 512 + 2 * (p % 16), idx, g, 1);
        }
    }
    for (int p = 0; p < c->n; p += 2) { // values: tile (p / 32, dt), row (p % 32) / 2
        if (p < n_real) row_floats(c->v, d->vt, vs, kh, hd, p, a);
        else memset(a, 0, sizeof(float) * (size_t)hd);
        if (p + 1 < n_real) row_floats(c->v, d->vt, vs, kh, hd, p + 1, b);
        else memset(b, 0, sizeof(float) * (size_t)hd);
        for (int dt = 0; dt < hd / 16; dt++) {
            __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(a + 16 * dt)));
            __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(b + 16 * dt)));
            _mm512_storeu_si512(vt + (((size_t)(p / 32) * (hd / 16) + dt) * 16 + (p % 32) / 2) * 32, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

// 2^x (x <= 0, clamped at -126), ~1e-7 relative
FL_TARGET static inline __m512 exp2_512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    __m512 fl = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(x, fl);
    __m512 p = _mm512_set1_ps(1.8775767e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(8.9893397e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5826318e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4015361e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9315308e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.9999994e-1f));
    return _mm512_scalef_ps(p, fl);
}

// One 16-row chunk of queries: rows [r0, r0 + 16) of block blk (row r: token r / group, head r % group; rows
// past the block's repeat its last and are dropped) of KV head kh, its output so far and softmax state.
typedef struct {
    int blk, r0, k0, k1; // (keys [k0, k1): the 64-key steps any of its rows sees)
    uint16_t qa[16 * 256] __attribute__((aligned(64)));
    float O[16 * 256] __attribute__((aligned(64)));
    float m[16], l[16];
    int hi[16], lo[16];
} fl_chunk;

FL_TARGET static void chunk_init(const attn_desc *d, int blk, int kh, int r0, fl_chunk *ch) {
    const int hd = d->hd, group = d->H / d->KV, nq = d->H * hd, t0 = d->blk0[blk], rows = d->blk_n[blk] * group;
    const float sc = d->scale * 1.4426950408889634f;
    ch->blk = blk, ch->r0 = r0, ch->k0 = INT32_MAX, ch->k1 = 0;
    for (int i = 0; i < 16; i++) {
        const int r = r0 + i < rows ? r0 + i : rows - 1, t = t0 + r / group;
        const float *q = d->q + (size_t)t * nq + (size_t)(kh * group + r % group) * hd;
        for (int x = 0; x < hd; x += 16)
            _mm256_store_si256((__m256i *)(ch->qa + i * hd + x), (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(q + x), _mm512_set1_ps(sc))));
        ch->hi[i] = d->pos[t], ch->lo[i] = d->window && ch->hi[i] - d->window + 1 > 0 ? ch->hi[i] - d->window + 1 : 0;
        ch->m[i] = -INFINITY, ch->l[i] = 0;
        ch->k0 = ch->lo[i] / KB * KB < ch->k0 ? ch->lo[i] / KB * KB : ch->k0, ch->k1 = ch->hi[i] + 1 > ch->k1 ? ch->hi[i] + 1 : ch->k1;
    }
    memset(ch->O, 0, sizeof(float) * 16 * (size_t)hd);
}

// The chunk's scores of 64 keys from kb (s[j][16 i + c]: row i, position kb + 16 j + c) to probabilities:
// the online softmax's maximum and sum, O rescaled where the maximum grew, pa the probabilities in bf16
// (row i's 64 from pa + 64 i)
FL_TARGET static void chunk_softmax(fl_chunk *ch, int kb, float s[4][256], uint16_t *pa, int hd) {
    float al[16];
    int rescale = 0;
    for (int i = 0; i < 16; i++) { // row i's 64 scores: s[j][16 i + c] is position kb + 16 j + c
        __m512 x[4];
        __mmask16 see[4];
        for (int j = 0; j < 4; j++) {
            const __m512i p = _mm512_add_epi32(_mm512_set1_epi32(kb + 16 * j), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
            see[j] = _mm512_cmple_epi32_mask(p, _mm512_set1_epi32(ch->hi[i])) & _mm512_cmpge_epi32_mask(p, _mm512_set1_epi32(ch->lo[i]));
            x[j] = _mm512_mask_blend_ps(see[j], _mm512_set1_ps(-INFINITY), _mm512_load_ps(s[j] + 16 * i));
        }
        const float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3])));
        const float mn = mx > ch->m[i] ? mx : ch->m[i];
        al[i] = mn == ch->m[i] ? 1.0f : exp2f(ch->m[i] - mn); // (m = -inf at first: 0, and O and l are 0)
        rescale |= al[i] != 1.0f;
        ch->m[i] = mn;
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < 4; j++) {
            const __m512 p = _mm512_maskz_mov_ps(see[j], exp2_512(_mm512_sub_ps(x[j], _mm512_set1_ps(mn))));
            sum = _mm512_add_ps(sum, p);
            _mm256_store_si256((__m256i *)(pa + i * KB + 16 * j), (__m256i)_mm512_cvtneps_pbh(p));
        }
        ch->l[i] = ch->l[i] * al[i] + _mm512_reduce_add_ps(sum);
    }
    if (rescale)
        for (int i = 0; i < 16; i++)
            if (al[i] != 1.0f)
                for (int x = 0; x < hd; x += 16)
                    _mm512_store_ps(ch->O + i * hd + x, _mm512_mul_ps(_mm512_load_ps(ch->O + i * hd + x), _mm512_set1_ps(al[i])));
}

// the chunk's 64 keys from kb: scores, softmax, values
FL_TARGET static void chunk_step(const attn_desc *d, fl_chunk *ch, int kb, const uint16_t *kt, const uint16_t *vt) {
    const int hd = d->hd;
    uint16_t pa[16 * KB] __attribute__((aligned(64)));
    float s[4][256] __attribute__((aligned(64)));
    const long s64 = 64, sq = 2 * hd, so = 4 * hd, sp = 2 * KB;
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
    for (int ds = 0; ds < hd / 32; ds++) {
        const uint16_t *kp = kt + ((size_t)(kb / 16) * (hd / 32) + ds) * 512, *kq = kp + (size_t)(hd / 32) * 512;
        __asm__ volatile("tileloadd (%0,%1,1), %%tmm4" ::"r"(ch->qa + 32 * ds), "r"(sq) : "memory");
        __asm__ volatile("tileloadd (%0,%2,1), %%tmm6\n\t"
                         "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                         "tileloadd (%1,%2,1), %%tmm7\n\t"
                         "tdpbf16ps %%tmm7, %%tmm4, %%tmm1" ::"r"(kp), "r"(kq), "r"(s64)
                         : "memory");
        __asm__ volatile("tileloadd (%0,%2,1), %%tmm6\n\t"
                         "tdpbf16ps %%tmm6, %%tmm4, %%tmm2\n\t"
                         "tileloadd (%1,%2,1), %%tmm7\n\t"
                         "tdpbf16ps %%tmm7, %%tmm4, %%tmm3" ::"r"(kq + (size_t)(hd / 32) * 512), "r"(kq + (size_t)(hd / 16) * 512), "r"(s64)
                         : "memory");
    }
    __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                     "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)" ::"r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s64)
                     : "memory");
    chunk_softmax(ch, kb, s, pa, hd);
    __asm__ volatile("tileloadd (%0,%2,1), %%tmm4\n\ttileloadd (%1,%2,1), %%tmm5" ::"r"(pa), "r"(pa + 32), "r"(sp) : "memory");
    for (int dt = 0; dt < hd / 16; dt++) {
        const uint16_t *v0 = vt + ((size_t)(kb / 32) * (hd / 16) + dt) * 512, *v1 = v0 + (size_t)(hd / 16) * 512;
        __asm__ volatile("tileloadd (%0,%3,1), %%tmm0\n\t"
                         "tileloadd (%1,%4,1), %%tmm6\n\t"
                         "tileloadd (%2,%4,1), %%tmm7\n\t"
                         "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                         "tdpbf16ps %%tmm7, %%tmm5, %%tmm0\n\t"
                         "tilestored %%tmm0, (%0,%3,1)" ::"r"(ch->O + 16 * dt), "r"(v0), "r"(v1), "r"(so), "r"(s64)
                         : "memory");
    }
}

// acc[r][g] += the pairs of row r of a (a + r * as + 2j, 2j + 1) times row j of the 4 tiles (b + g * bs + 32 j),
// j = 0..15: 4 rows x 64 lanes of sums over 32 values, each lane its own
FL_TARGET static inline __attribute__((always_inline)) void step_4x4(__m512 acc[4][4], const uint16_t *a, size_t as, const uint16_t *b,
                                                                     size_t bs) {
    #pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
        __m512bh t[4];
        #pragma GCC unroll 16
        for (int g = 0; g < 4; g++) t[g] = (__m512bh)_mm512_load_si512(b + g * bs + 32 * j);
        #pragma GCC unroll 16
        for (int r = 0; r < 4; r++) {
            uint32_t pr;
            memcpy(&pr, a + r * as + 2 * j, 4);
            const __m512bh ab = (__m512bh)_mm512_set1_epi32((int)pr);
            #pragma GCC unroll 16
            for (int g = 0; g < 4; g++) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], ab, t[g]);
        }
    }
}

// chunk_step in AVX512-BF16 registers: scores of 4 rows x 64 keys a pass over the dimensions (16 sums), then
// the probabilities times the values, 4 rows x 64 dimensions a pass over the keys (hd a multiple of 64)
FL_TARGET static void chunk_step_avx(const attn_desc *d, fl_chunk *ch, int kb, const uint16_t *kt, const uint16_t *vt) {
    const int hd = d->hd;
    uint16_t pa[16 * KB] __attribute__((aligned(64)));
    float s[4][256] __attribute__((aligned(64)));
    for (int i0 = 0; i0 < 16; i0 += 4) {
        __m512 acc[4][4];
        #pragma GCC unroll 16
        for (int r = 0; r < 4; r++)
            #pragma GCC unroll 16
            for (int g = 0; g < 4; g++) acc[r][g] = _mm512_setzero_ps();
        for (int ds = 0; ds < hd / 32; ds++) {
            const uint16_t *k0 = kt + ((size_t)(kb / 16) * (hd / 32) + ds) * 512, *q0 = ch->qa + (size_t)i0 * hd + 32 * ds;
            step_4x4(acc, q0, hd, k0, (size_t)(hd / 32) * 512); // (dimensions 32 ds + 2j, 2j + 1 of 64 keys: a row of each of 4 tiles)
        }
        #pragma GCC unroll 16
        for (int r = 0; r < 4; r++)
            #pragma GCC unroll 16
            for (int g = 0; g < 4; g++) _mm512_store_ps(s[g] + 16 * (i0 + r), acc[r][g]);
    }
    chunk_softmax(ch, kb, s, pa, hd);
    for (int i0 = 0; i0 < 16; i0 += 4)
        for (int d0 = 0; d0 < hd; d0 += 64) {
            __m512 acc[4][4];
            #pragma GCC unroll 16
            for (int r = 0; r < 4; r++)
                #pragma GCC unroll 16
                for (int g = 0; g < 4; g++) acc[r][g] = _mm512_load_ps(ch->O + (size_t)(i0 + r) * hd + d0 + 16 * g);
            #pragma GCC unroll 16
            for (int h = 0; h < 2; h++) { // (keys kb + 32 h ..: a tile of 32 keys, its rows key pairs of 16 dimensions)
                const uint16_t *v0 = vt + ((size_t)(kb / 32 + h) * (hd / 16) + d0 / 16) * 512;
                step_4x4(acc, pa + (size_t)i0 * KB + 32 * h, KB, v0, 512);
            }
            #pragma GCC unroll 16
            for (int r = 0; r < 4; r++)
                #pragma GCC unroll 16
                for (int g = 0; g < 4; g++) _mm512_store_ps(ch->O + (size_t)(i0 + r) * hd + d0 + 16 * g, acc[r][g]);
        }
}

FL_TARGET static void chunk_out(const attn_desc *d, int kh, const fl_chunk *ch) {
    const int hd = d->hd, group = d->H / d->KV, nq = d->H * hd, t0 = d->blk0[ch->blk], rows = d->blk_n[ch->blk] * group;
    for (int i = 0; i < 16 && ch->r0 + i < rows; i++) {
        const int r = ch->r0 + i, t = t0 + r / group;
        float *o = d->out + (size_t)t * nq + (size_t)(kh * group + r % group) * hd;
        const __m512 inv = _mm512_set1_ps(1.0f / ch->l[i]);
        for (int x = 0; x < hd; x += 16) _mm512_storeu_ps(o + x, _mm512_mul_ps(_mm512_load_ps(ch->O + i * hd + x), inv));
    }
}

// The chunks of n listed blocks (of one cache) for KV head kh, the keys walked once for all of them: each
// 64-key step's tiles, read from memory by the first chunk, stay in L2 for the others.
enum { FL_CHUNKS = 8 };
FL_TARGET static void chunks_run(const attn_desc *d, const int *blk, int n, int kh, const unsigned char *tiles, const fl_cache *c,
                                 fl_chunk *ch, int avx) {
    const int group = d->H / d->KV;
    const uint16_t *kt = (const uint16_t *)(tiles + c->off + head_bytes(c->n, d->hd) * (size_t)kh), *vt = kt + (size_t)c->n * d->hd;
    int nc = 0, k0 = INT32_MAX, k1 = 0;
    for (int b = 0; b < n; b++)
        for (int r0 = 0; r0 < d->blk_n[blk[b]] * group; r0 += 16) {
            chunk_init(d, blk[b], kh, r0, &ch[nc]);
            k0 = ch[nc].k0 < k0 ? ch[nc].k0 : k0, k1 = ch[nc].k1 > k1 ? ch[nc].k1 : k1;
            nc++;
        }
    if (!avx) amx_configure_panel();
    for (int kb = k0; kb < k1; kb += KB)
        for (int i = 0; i < nc; i++)
            if (kb >= ch[i].k0 && kb < ch[i].k1) {
                if (avx) chunk_step_avx(d, &ch[i], kb, kt, vt);
                else chunk_step(d, &ch[i], kb, kt, vt);
            }
    for (int i = 0; i < nc; i++) chunk_out(d, kh, &ch[i]);
}

static void fl_convert(void *arg, int ith, int nth) {
    fl_job *j = arg;
    const int KV = j->d->KV;
    for (int i = ith; i < j->nc * KV; i += nth) {
        const fl_cache *c = &j->c[i / KV];
        int n_real = 0; // (positions up to the last any of its blocks sees)
        for (int b = 0; b < j->nb; b++)
            if (j->blk_cache[b] == i / KV)
                for (int r = 0; r < j->d->blk_n[j->blks[b]]; r++) {
                    const int p = j->d->pos[j->d->blk0[j->blks[b]] + r] + 1;
                    n_real = p > n_real ? p : n_real;
                }
        convert(j->d, c, n_real, i % KV, j->tiles);
    }
}

// Tasks: (a group of blocks, a KV head), the last groups (the longest rows) first; a group is up to
// FL_CHUNKS chunks of consecutive listed blocks of one cache (task0[g]: its first listed block).
static void fl_task(void *arg, int ith, int nth) {
    (void)nth;
    fl_job *j = arg;
    fl_chunk *ch = (fl_chunk *)(j->state + sizeof(fl_chunk) * FL_CHUNKS * (size_t)ith);
    const attn_desc *d = j->d;
    for (int it; (it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->ng * d->KV;) {
        const int g = j->ng - 1 - it / d->KV, kh = it % d->KV, b0 = j->task0[g], b1 = j->task0[g + 1];
        int blk[FL_CHUNKS];
        for (int b = b0; b < b1; b++) blk[b - b0] = j->blks[b];
        chunks_run(d, blk, b1 - b0, kh, j->tiles, &j->c[j->blk_cache[b0]], ch, j->avx);
    }
}

int attn_flash(cpu_exec *ex, const attn_desc *d, const int *blks, int nb) {
    fl_cache c[64];
    int bc[512], nc = 0;
    if (nb > 512) return -1;
    size_t off = 0;
    for (int b = 0; b < nb; b++) {
        const int t0 = d->blk0[blks[b]];
        int i = 0, n = 0;
        for (int r = 0; r < d->blk_n[blks[b]]; r++) n = d->pos[t0 + r] + 1 > n ? d->pos[t0 + r] + 1 : n;
        while (i < nc && (c[i].k != d->k[t0] || c[i].v != d->v[t0])) i++;
        if (i == nc) {
            if (nc == 64) return -1;
            c[nc++] = (fl_cache){d->k[t0], d->v[t0], 0, 0};
        }
        n = (n + KB - 1) / KB * KB;
        c[i].n = n > c[i].n ? n : c[i].n;
        bc[b] = i;
    }
    for (int i = 0; i < nc; i++) c[i].off = off, off += head_bytes(c[i].n, d->hd) * (size_t)d->KV;
    const size_t state = off; // (then each thread's chunks)
    off += sizeof(fl_chunk) * FL_CHUNKS * (size_t)pool_size(ex->pool);
    if (off + 64 > ex->kvt_cap) {
        unsigned char *p = realloc(ex->kvt, off + 64);
        if (!p) return -1;
        ex->kvt = p, ex->kvt_cap = off + 64;
    }
    int task0[513], ng = 0, chunks = 0; // (groups: consecutive blocks of one cache, up to FL_CHUNKS chunks)
    const int group = d->H / d->KV;
    for (int b = 0; b < nb; b++) {
        const int k = (d->blk_n[blks[b]] * group + 15) / 16;
        if (k > FL_CHUNKS) return -1; // (a block of more query rows than a task holds: the f32 kernels)
        if (!b || bc[b] != bc[b - 1] || chunks + k > FL_CHUNKS) task0[ng++] = b, chunks = 0;
        chunks += k;
    }
    task0[ng] = nb;
    const int mode = flash_mode();
    if (!mode || (mode == 2 && d->hd % 64)) return -1;
    fl_job j = {.d = d, .blks = blks, .nb = nb, .nc = nc, .c = c, .blk_cache = bc, .ng = ng, .task0 = task0, .avx = mode == 2};
    j.tiles = ex->kvt + (64 - (uintptr_t)ex->kvt % 64) % 64;
    j.state = j.tiles + state;
    pool_run(ex->pool, fl_convert, &j);
    atomic_init(&j.next, 0);
    pool_run(ex->pool, fl_task, &j);
    return 0;
}
#else
int attn_flash(cpu_exec *ex, const attn_desc *d, const int *blks, int nb) { return (void)ex, (void)d, (void)blks, (void)nb, -1; }
#endif
