// y (T, n_out) = x (T, n_in) @ W^T with W in its stored type, split over
// output rows across the thread pool. Each weight row is read once for all T
// tokens, so a prompt costs one pass over the weights per N_BATCH tokens.
#include "compute/cpu/ops.h"
#include "tensor/vecdot.h"
#include "tensor/dtype.h"
#include "tensor/pack.h"
#include "tensor/panel.h"
#include "base/cpu.h"
#include "base/pool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#ifndef TOKEN_BLOCK_BYTES
#define TOKEN_BLOCK_BYTES 24576
#endif
#ifndef ROW_PANEL_BYTES
#define ROW_PANEL_BYTES 524288
#endif

typedef struct {
    float *y;
    const float *x;
    const vecdot_kernel *k;  // NULL: the traits' f32 dot
    unsigned char *xq; // x in k->act_type (T rows of xq_row bytes), or NULL
    size_t xq_row;
    const tensor *W;
    const float *bias;
    int T, n_in, n_out;
    int trans;
    atomic_int next;         // next row (group of 8 rows, packed) to hand out
    int chunk;               // rows (groups) per hand-out
    const pack_kernel *pk;   // W's packed copy and its kernel (pack.h), or NULL
    const unsigned char *pack;
    size_t gbytes;           // bytes of a group of 8 packed rows
} mm_job;

// The packed path: groups [g0, g1) of 8 rows for tokens [t0, t1). Prefill
// walks a panel of groups that stays in L2 against blocks of tokens in L1,
// as rows_range does.
static void pk_groups(const mm_job *a, int g0, int g1, int t0, int t1) {
    enum { TB_MAX = 64 };
    float out[TB_MAX * 8];
    int tb = (int)(TOKEN_BLOCK_BYTES / a->xq_row) & ~7, panel = (int)(ROW_PANEL_BYTES / a->gbytes);
    if (tb < 8) tb = 8;
    if (a->pk->tokens > 1) tb = tb < a->pk->tokens ? a->pk->tokens : tb / a->pk->tokens * a->pk->tokens; // (AMX: whole tiles)
    if (tb > TB_MAX) tb = TB_MAX;
    if (panel < 1) panel = 1;
    for (int p0 = g0; p0 < g1; p0 += panel) {
        int p1 = p0 + panel < g1 ? p0 + panel : g1;
        for (int tt = t0; tt < t1; tt += tb) {
            int tn = t1 - tt < tb ? t1 - tt : tb;
            for (int g = p0; g < p1; g++) {
                const unsigned char *pg = a->pack + a->gbytes * (size_t)g, *xt = a->xq + a->xq_row * (size_t)tt;
                int r1 = a->n_out - 8 * g < 8 ? a->n_out - 8 * g : 8;
                if (a->pk->tile2 && !a->bias && g + 1 < p1 && a->n_out - 8 * g >= 16) { // two whole groups at once
                    a->pk->tile2(pg, a->gbytes, xt, a->xq_row, tn, a->n_in, a->y + (size_t)tt * a->n_out + 8 * g, (size_t)a->n_out);
                    g++;
                    continue;
                }
                if (!a->bias && r1 == 8) { // straight into y
                    a->pk->tile(pg, xt, a->xq_row, tn, a->n_in, a->y + (size_t)tt * a->n_out + 8 * g, (size_t)a->n_out);
                    continue;
                }
                a->pk->tile(pg, xt, a->xq_row, tn, a->n_in, out, 8);
                for (int t = 0; t < tn; t++) {
                    float *yt = a->y + (size_t)(tt + t) * a->n_out + 8 * g;
                    for (int r = 0; r < r1; r++) yt[r] = out[8 * t + r] + (a->bias ? a->bias[8 * g + r] : 0.0f);
                }
            }
        }
    }
}

// Row j (at `row`) of the output for tokens [t0, t1): 8 or 4 tokens per
// call where the kernel has it (the same results as one at a time).
static void row_tokens(const mm_job *a, const void *row, int j, int t0, int t1) {
    float b = a->bias ? a->bias[j] : 0.0f;
    float *yj = a->y + j;
    int t = t0;
    if (a->xq) {
        if (a->k->dot8)
            for (; t + 8 <= t1; t += 8) {
                float s8[8];
                a->k->dot8(row, a->xq + a->xq_row * t, a->xq_row, a->n_in, s8);
                for (int r = 0; r < 8; r++) yj[(size_t)(t + r) * a->n_out] = s8[r] + b;
            }
        if (a->k->dot4)
            for (; t + 4 <= t1; t += 4) {
                float s4[4];
                a->k->dot4(row, a->xq + a->xq_row * t, a->xq_row, a->n_in, s4);
                for (int r = 0; r < 4; r++) yj[(size_t)(t + r) * a->n_out] = s4[r] + b;
            }
        for (; t < t1; t++) yj[(size_t)t * a->n_out] = a->k->dot(row, a->xq + a->xq_row * t, a->n_in) + b;
    } else if (a->k) {
        if (a->k->dot4)
            for (; t + 4 <= t1; t += 4) {
                float s4[4];
                a->k->dot4(row, a->x + (size_t)t * a->n_in, sizeof(float) * (size_t)a->n_in, a->n_in, s4);
                for (int r = 0; r < 4; r++) yj[(size_t)(t + r) * a->n_out] = s4[r] + b;
            }
        for (; t < t1; t++) yj[(size_t)t * a->n_out] = a->k->dot(row, a->x + (size_t)t * a->n_in, a->n_in) + b;
    } else {
        const dtype_traits *tr = dtype_get(a->W->type);
        for (; t < t1; t++) yj[(size_t)t * a->n_out] = tr->dot(row, a->x + (size_t)t * a->n_in, a->n_in) + b;
    }
}


// Rows [j0, j1) of the output for every token. Prefill walks the tokens in
// blocks whose activations stay in the L1/L2 cache while the rows pass.
static void rows_range(const mm_job *a, int j0, int j1) {
    size_t rs = dtype_row_size(a->W->type, a->n_in);
    const char *base = a->W->data;
    if (a->T == 1) {
        // Decode streams the weights from memory, which delivers more to
        // several streams at once: the range is read as 4 quarters in step,
        // rows q apart (4-row kernels take the 4 at once).
        int q = (j1 - j0) / 4, j = j0;
        if (q >= 16) {
            for (; j < j0 + q; j++) {
                if (a->k && a->k->dotr && !a->bias) {
                    float s4[4];
                    a->k->dotr(base + rs * (size_t)j, rs * (size_t)q, a->xq ? (const void *)a->xq : a->x, a->n_in, s4);
                    for (int r = 0; r < 4; r++) a->y[j + r * q] = s4[r];
                } else
                    for (int r = 0; r < 4; r++) row_tokens(a, base + rs * (size_t)(j + r * q), j + r * q, 0, 1);
            }
            j = j0 + 4 * q;
        }
        for (; j < j1; j++) row_tokens(a, base + rs * (size_t)j, j, 0, 1);
        return;
    }
    // Prefill: a panel of rows that stays in L2 meets blocks of tokens whose
    // activations stay in L1.
    size_t xrow = a->xq ? a->xq_row : sizeof(float) * (size_t)a->n_in;
    int tb = (int)(TOKEN_BLOCK_BYTES / xrow) & ~7, panel = (int)(ROW_PANEL_BYTES / rs);
    if (tb < 8) tb = 8;
    if (panel < 8) panel = 8;
    for (int p0 = j0; p0 < j1; p0 += panel) {
        int p1 = p0 + panel < j1 ? p0 + panel : j1;
        for (int t0 = 0; t0 < a->T; t0 += tb) {
            int t1 = t0 + tb < a->T ? t0 + tb : a->T, j = p0;
            for (int rw = 4; rw >= 2; rw -= 2) { // float weights (and bf16 activations): 4 or 2 rows by 4 tokens
                vec_tile_fn tile = !a->k ? NULL : rw == 4 ? a->k->tile44 : a->k->tile24;
                if (!tile) continue;
                for (; j + rw <= p1; j += rw) {
                    int t = t0;
                    for (; t + 4 <= t1; t += 4) {
                        float s16[16];
                        const void *xt = a->xq ? (const void *)(a->xq + xrow * t) : (const void *)(a->x + (size_t)t * a->n_in);
                        tile(base + rs * (size_t)j, rs, xt, xrow, a->n_in, s16);
                        for (int k = 0; k < rw; k++)
                            for (int r = 0; r < 4; r++)
                                a->y[(size_t)(t + r) * a->n_out + j + k] = s16[k * 4 + r] + (a->bias ? a->bias[j + k] : 0.0f);
                    }
                    for (int k = 0; t < t1 && k < rw; k++) row_tokens(a, base + rs * (size_t)(j + k), j + k, t, t1);
                }
            }
            for (; j < p1; j++) row_tokens(a, base + rs * (size_t)j, j, t0, t1);
        }
    }
}

// W stored [n_in, n_out] (GPT-2 Conv1D): columns [j0, j1) of y, a row of W at a time.
static void trans_range(const mm_job *a, int j0, int j1) {
    const dtype_traits *tr = dtype_get(a->W->type);
    size_t rs = dtype_row_size(a->W->type, a->n_out);
    enum { CH = 256 };
    float buf[CH];
    for (int t = 0; t < a->T; t++)
        for (int j = j0; j < j1; j++) a->y[(size_t)t * a->n_out + j] = a->bias ? a->bias[j] : 0.0f;
    for (int i = 0; i < a->n_in; i++) {
        const char *row = (const char *)a->W->data + rs * (size_t)i;
        for (int c0 = j0; c0 < j1; c0 += CH) {
            int n = j1 - c0 < CH ? j1 - c0 : CH;
            // float types have 1-element blocks, so any chunk boundary works
            tr->to_float(row + (size_t)c0 * tr->size, buf, n);
            for (int t = 0; t < a->T; t++) {
                float xi = a->x[(size_t)t * a->n_in + i];
                float *yt = a->y + (size_t)t * a->n_out + c0;
                for (int j = 0; j < n; j++) yt[j] += xi * buf[j];
            }
        }
    }
}

// Threads take chunks of rows from a shared counter, so one that is slowed
// (by the OS, or by rows in slower memory) does not hold the others up.
static void mm_task(void *arg, int ith, int nth) {
    mm_job *a = arg;
    if (a->trans) {
        int per = (a->n_out + nth - 1) / nth;
        int j0 = ith * per, j1 = j0 + per > a->n_out ? a->n_out : j0 + per;
        if (j0 < j1) trans_range(a, j0, j1);
        return;
    }
    int units = a->pk ? (a->n_out + 7) / 8 : a->n_out;
    for (;;) {
        int j0 = atomic_fetch_add_explicit(&a->next, a->chunk, memory_order_relaxed);
        if (j0 >= units) break;
        int j1 = j0 + a->chunk > units ? units : j0 + a->chunk;
        if (a->pk) pk_groups(a, j0, j1, 0, a->T);
        else rows_range(a, j0, j1);
    }
}

// The quantized activations live in the caller's scratch; it grows, never
// shrinks, so the token loop does not allocate once the first pass has sized
// it. If it cannot grow, the caller's sticky oom is set and the product skipped.
static unsigned char *grow(cpu_exec *ex, unsigned char **p, size_t *cap, size_t need) {
    if (need > *cap) {
        unsigned char *q = realloc(*p, need);
        if (!q) {
            ex->oom = 1;
            return NULL;
        }
        *p = q;
        *cap = need;
    }
    return *p;
}

void cpu_exec_profile(cpu_exec *ex) {
    const char *e = getenv("INFER_PROFILE");
    if (e && *e && strcmp(e, "0") && !ex->prof) ex->prof = calloc(2 * PROF_N, sizeof(double));
}

double prof_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void prof_print(const double *p, int threads) {
    static const char *name[PROF_N] = {"matmul", "matmul_multi", "(quantize, in both)", "norm", "rope", "qkv_prep",
                                       "attention", "glu/act", "residual", "round_f16", "data (embed, copy, kv, ...)"};
    double total = 0;
    for (int i = 0; i < PROF_N; i++) total += i == PROF_QUANT ? 0 : p[i];
    fprintf(stderr, "profile (INFER_PROFILE, %d threads): %.3f s in the CPU backend's operations\n", threads, total);
    for (int i = 0; i < PROF_N; i++)
        if (p[PROF_N + i] > 0)
            fprintf(stderr, "  %-28s %9.0f calls %10.3f ms %5.1f%%\n", name[i], p[PROF_N + i], 1e3 * p[i], total > 0 ? 100 * p[i] / total : 0);
}

void cpu_exec_release(cpu_exec *ex) {
    if (ex->prof) prof_print(ex->prof, ex->pool ? pool_size(ex->pool) : 1);
    free(ex->prof);
    free(ex->xq);
    for (int i = 0; i < CPU_MULTI_MAX; i++) free(ex->mq[i]);
    free(ex->att);
    free(ex->run0), free(ex->pn), free(ex->pxb), free(ex->ptok), free(ex->kvt);
    pool *p = ex->pool;
    *ex = (cpu_exec){0};
    ex->pool = p;
}

static void quant_range(void *arg, int t0, int t1) {
    mm_job *a = arg;
    void (*q)(const float *, void *, int) = a->pk ? a->pk->quant : a->k->quant;
    for (int t = t0; t < t1; t++) q(a->x + (size_t)t * a->n_in, a->xq + a->xq_row * t, a->n_in);
}

// the row kernel of W (its numerics: vecdot.h)
static const vecdot_kernel *kernel_of(const weight *w) { return w->ggml ? vecdot_get_ggml(w->w->type) : vecdot_get(w->w->type); }

// W's packed copy, where it has one and the SIMD kernels are in use
static const pack_kernel *packed(const weight *w) {
    return w->pack && !w->trans && !vecdot_scalar_forced() ? pack_kernel_get(w->pack_kind) : NULL;
}

// ---------------------------------------------------------------------------
// Prefill's work items: chunks of about 1/8 of a thread's share of the rows
// (whole groups of 8 for packed weights) from a shared counter. Where a
// packed product has fewer groups than that makes useful chunks of (many
// threads, few rows), its chunks are panels of groups that stay in L2 and
// its tokens are split as well, so that the activations a chunk reads are
// read against several groups and the threads still get about 8 chunks each.

enum { MULTI_MAX = CPU_MULTI_MAX, MULTI_ITEMS = 512 };

typedef struct {
    mm_job jobs[MULTI_MAX];
    int n, total;
    int n_items;                 // T > 1: the chunks, as (job, first row, end row, first token, end token)
    short item_job[MULTI_ITEMS];
    int item_r0[MULTI_ITEMS], item_r1[MULTI_ITEMS], item_t0[MULTI_ITEMS], item_t1[MULTI_ITEMS];
    atomic_int next;
} multi_job;

static void multi_rows(mm_job *j, int a, int b, int t0, int t1) {
    if (j->pk) { // whole groups: a group goes to the range that holds its first row
        if ((a + 7) / 8 < (b + 7) / 8) pk_groups(j, (a + 7) / 8, (b + 7) / 8, t0, t1);
    } else
        rows_range(j, a, b);
}

static void multi_task(void *arg, int ith, int nth) {
    multi_job *m = arg;
    if (m->n_items) {
        for (int it; (it = atomic_fetch_add_explicit(&m->next, 1, memory_order_relaxed)) < m->n_items;)
            multi_rows(&m->jobs[m->item_job[it]], m->item_r0[it], m->item_r1[it], m->item_t0[it], m->item_t1[it]);
        return;
    }
    int r0 = (int)((long long)m->total * ith / nth), r1 = (int)((long long)m->total * (ith + 1) / nth), base = 0;
    for (int i = 0; i < m->n && r0 < r1; base += m->jobs[i].n_out, i++) {
        int a = r0 - base, b = r1 - base, n = m->jobs[i].n_out;
        if (b <= 0 || a >= n) continue;
        multi_rows(&m->jobs[i], a < 0 ? 0 : a, b > n ? n : b, 0, m->jobs[i].T);
    }
}

// m's items for T > 1 tokens over nth threads (the jobs and m->total set)
static void plan_items(multi_job *m, int T, int nth) {
    int chunk = (m->total / (nth * 8) + 7) & ~7, split = 1;
    if (chunk < 16) chunk = 16;
    for (;;) {
        m->n_items = 0;
        int full = 0;
        for (int i = 0; i < m->n && !full; i++) {
            const mm_job *a = &m->jobs[i];
            int rows = chunk, ts = 1;
            if (a->pk && split) { // panels of groups, and the tokens split where they are few
                int panel = (int)(ROW_PANEL_BYTES / a->gbytes), groups = (a->n_out + 7) / 8;
                panel = panel < 2 ? 2 : panel > groups ? groups : panel;
                if (8 * panel > rows) {
                    rows = 8 * panel;
                    int chunks = (groups + panel - 1) / panel, want = (int)((long long)nth * 8 * a->n_out / m->total);
                    ts = (want + chunks - 1) / chunks;
                    if (ts > T / 32) ts = T / 32;
                    if (ts < 1) ts = 1;
                }
            }
            int tr = ((T + ts - 1) / ts + 15) & ~15; // (whole AMX tiles)
            for (int r = 0; r < a->n_out && !full; r += rows)
                for (int t = 0; t < T; t += tr) {
                    if (m->n_items == MULTI_ITEMS) { full = 1; break; }
                    int k = m->n_items++;
                    m->item_job[k] = (short)i;
                    m->item_r0[k] = r, m->item_r1[k] = r + rows < a->n_out ? r + rows : a->n_out;
                    m->item_t0[k] = t, m->item_t1[k] = t + tr < T ? t + tr : T;
                }
        }
        if (!full) break;
        if (split) split = 0; // too many: no token split, then larger chunks
        else chunk *= 2;
    }
    atomic_init(&m->next, 0);
}

// Products that read a weight's stored layout though its type packs on this
// CPU (pack_kind_for): the packed kernels were skipped, because nothing made
// the model's packs before the product (infer_cpu_unpacked_products).
static atomic_ulong g_unpacked;

static void note_unpacked(const weight *w, int n_in) {
    if (!w->w || w->trans || w->pack || w->unpacked || w->w->nd != 2 || w->w->type < 0) return;
    int kind = pack_kind_for(w->w->type, n_in);
    if (kind == PACK_BF16 && !w->ggml) kind = PACK_NONE; // (as pack_one decides)
    if (kind != PACK_NONE) atomic_fetch_add_explicit(&g_unpacked, 1, memory_order_relaxed);
}

unsigned long matmul_unpacked_count(void) { return atomic_load_explicit(&g_unpacked, memory_order_relaxed); }

static void matmul_plain(cpu_exec *ex, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    mm_job a = {.y = y, .x = x, .W = w->w, .bias = bias, .T = T, .n_in = n_in, .n_out = n_out, .trans = w->trans};
    if (!packed(w)) note_unpacked(w, n_in);
    if ((a.pk = packed(w))) {
        a.pack = w->pack;
        a.gbytes = pack_group_bytes(w->pack_kind, n_in);
        a.xq_row = pack_act_row_size(w->pack_kind, n_in);
        if (!(a.xq = grow(ex, &ex->xq, &ex->xq_cap, a.xq_row * (size_t)T))) return;
        double t0 = ex->prof ? prof_now() : 0;
        pool_for(ex->pool, T, 8, quant_range, &a);
        if (ex->prof) ex->prof[PROF_QUANT] += prof_now() - t0, ex->prof[PROF_N + PROF_QUANT]++;
    } else if (!w->trans) {
        a.k = kernel_of(w);
        if (a.k && a.k->act_type != DT_F32) {
            a.xq_row = act_row_size(a.k, n_in);
            if (!(a.xq = grow(ex, &ex->xq, &ex->xq_cap, a.xq_row * (size_t)T))) return;
            pool_for(ex->pool, T, 8, quant_range, &a);
        }
    }
    // small products are not worth waking the pool
    if ((size_t)n_in * n_out * T < 32768 || pool_size(ex->pool) == 1) {
        if (w->trans) trans_range(&a, 0, n_out);
        else if (a.pk) pk_groups(&a, 0, (n_out + 7) / 8, 0, T);
        else rows_range(&a, 0, n_out);
        return;
    }
    // Decode streams the weights: one contiguous share per thread keeps each
    // thread's reads (and prefetches) sequential. Prefill is compute bound:
    // about 8 chunks per thread balance it.
    int nth = pool_size(ex->pool), units = a.pk ? (n_out + 7) / 8 : n_out;
    if (a.pk && T > 1) { // (items: plan_items)
        multi_job m = {.n = 1, .total = n_out};
        m.jobs[0] = a;
        plan_items(&m, T, nth);
        pool_run(ex->pool, multi_task, &m);
        return;
    }
    a.chunk = T == 1 ? (units + nth - 1) / nth : units / (nth * 8);
    if (a.chunk < (a.pk ? 2 : 16)) a.chunk = a.pk ? 2 : 16;
    atomic_init(&a.next, 0);
    pool_run(ex->pool, mm_task, &a);
}

typedef struct {
    mm_job *a;
    void (*q)(const float *, void *, int);
} mq_job;

static void mq_range(void *arg, int t0, int t1) {
    mq_job *j = arg;
    for (int t = t0; t < t1; t++) j->q(j->a->x + (size_t)t * j->a->n_in, j->a->xq + j->a->xq_row * t, j->a->n_in);
}

static void multi_plain(cpu_exec *ex, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias,
                        int T, int n_in, const int *n_out) {
    int plain = n <= MULTI_MAX && pool_size(ex->pool) > 1;
    for (int i = 0; i < n && plain; i++) plain = !w[i]->trans && kernel_of(w[i]);
    if (!plain) { // one by one
        for (int i = 0; i < n; i++) matmul_plain(ex, y[i], x, w[i], bias[i], T, n_in, n_out[i]);
        return;
    }
    multi_job m = {.n = n};
    for (int i = 0; i < n; i++) {
        if (!packed(w[i])) note_unpacked(w[i], n_in);
        mm_job *a = &m.jobs[i];
        *a = (mm_job){.y = y[i], .x = x, .k = kernel_of(w[i]), .W = w[i]->w, .bias = bias[i], .T = T,
                      .n_in = n_in, .n_out = n_out[i]};
        m.total += n_out[i];
        if ((a->pk = packed(w[i]))) {
            a->pack = w[i]->pack;
            a->gbytes = pack_group_bytes(w[i]->pack_kind, n_in);
            a->xq_row = pack_act_row_size(w[i]->pack_kind, n_in);
        } else if (a->k->act_type == DT_F32)
            continue;
        else
            a->xq_row = act_row_size(a->k, n_in);
        for (int j = 0; j < i && !a->xq; j++) // the same activation format as an earlier product: share it
            if (m.jobs[j].xq && (a->pk ? m.jobs[j].pk && m.jobs[j].pk->quant == a->pk->quant
                                       : !m.jobs[j].pk && m.jobs[j].k->act_type == a->k->act_type && m.jobs[j].k->grouped == a->k->grouped))
                a->xq = m.jobs[j].xq;
        if (!a->xq) {
            if (!(a->xq = grow(ex, &ex->mq[i], &ex->mq_cap[i], a->xq_row * (size_t)T))) return;
            mq_job q = {a, a->pk ? a->pk->quant : a->k->quant};
            double t0 = ex->prof ? prof_now() : 0;
            pool_for(ex->pool, T, 8, mq_range, &q);
            if (ex->prof) ex->prof[PROF_QUANT] += prof_now() - t0, ex->prof[PROF_N + PROF_QUANT]++;
        }
    }
    if (T > 1) plan_items(&m, T, pool_size(ex->pool));
    pool_run(ex->pool, multi_task, &m);
}

// ---------------------------------------------------------------------------
// Prompts on the AMX panels (panel.h). A pass's runs of PANEL_MIN rows and
// more (prompts) take the panels, the other rows (decode, draft tokens) the
// kernels above, so that every row is computed as its sequence alone would
// compute it: a run's rows take one way or the other by its length alone,
// and a panel's outputs for a token depend on that token alone. Each thread
// takes sets of up to 4 panels (within PANEL_SET_BYTES, in L2), decodes them
// and runs them against every block of 16 tokens in turn.

enum { PANEL_MIN = 32 }; // (fewer: the decode of the panels costs more than the kernels do; measured on the default model, 2 cores: 16 rows 0.72x, 32 1.06x, 64 1.14x, 128 1.55x)
#ifndef PANEL_KCHUNK
#define PANEL_KCHUNK 2
#endif
#ifndef PANEL_KCHUNK_BF16
#define PANEL_KCHUNK_BF16 8
#endif
#ifndef PANEL_SET_BYTES
#define PANEL_SET_BYTES 786432
#endif

void cpu_exec_pass(cpu_exec *ex, const int *run, int T) {
    ex->pass_T = 0, ex->n_run = 0;
    if (T + 1 > ex->run_cap) {
        int *r = realloc(ex->run0, sizeof(int) * (size_t)(T + 1));
        if (!r) return; // (no runs known: no product of the pass takes the panels)
        ex->run0 = r, ex->run_cap = T + 1;
    }
    for (int t = 0; t < T; t++)
        if (!t || run[t]) ex->run0[ex->n_run++] = t;
    ex->run0[ex->n_run] = T;
    ex->pass_T = T;
}

// the weight's rows decode into panels, and the CPU has them on
static int panel_weight(const cpu_exec *ex, const weight *w, int n_in) {
    if (ex->exact || !panel_enabled() || !w->w || w->trans || w->w->nd != 2 || vecdot_scalar_forced()) return 0;
    int t = w->w->type; // (the quantized types, and a GGUF file's bf16 weights; other float weights keep their exact kernels)
    return (t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q8_0 || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K || (t == DT_BF16 && w->ggml)) &&
           panel_type_ok(t, n_in) && (!panel_bf16_type(t) || cpu_has_amx_bf16());
}

// The rows of a T-row product that take the panels, into ex->ptok (in order);
// their count, or -1 where scratch could not grow.
static int panel_rows(cpu_exec *ex, int T) {
    if (T < PANEL_MIN || (ex->pass_T && ex->pass_T != T)) return 0; // (a product over part of a pass's rows: the kernels)
    if (T > ex->ptok_cap) {
        int *p = realloc(ex->ptok, sizeof(int) * (size_t)T);
        if (!p) return ex->oom = 1, -1;
        ex->ptok = p, ex->ptok_cap = T;
    }
    int n = 0;
    if (!ex->pass_T) {
        for (int t = 0; t < T; t++) ex->ptok[n++] = t;
        return n;
    }
    for (int i = 0; i < ex->n_run; i++)
        if (ex->run0[i + 1] - ex->run0[i] >= PANEL_MIN)
            for (int t = ex->run0[i]; t < ex->run0[i + 1]; t++) ex->ptok[n++] = t;
    return n;
}

typedef struct {
    const float *x;
    const int *tok;       // the rows taken (NULL: all T)
    int T, n_in, n, bf;   // (bf: bf16 panels: bf16 weights read in place, 32-column block types decoded; panel.h)
    unsigned char *xb;    // the tokens' tiles
    struct { float *y; const weight *w; const float *bias; int n_out, set, sets; } j[CPU_MULTI_MAX];
    int items;            // sets over all products
    unsigned char *scratch;
    size_t per_thread, pb;
    atomic_int next;
} pn_job;

static void pn_act(void *arg, int b0, int b1) {
    pn_job *a = arg;
    if (a->bf) panel_act_bf16(a->x, (size_t)a->n_in, a->tok, a->T, a->n_in, a->xb, b0, b1);
    else panel_act(a->x, (size_t)a->n_in, a->tok, a->T, a->n_in, a->xb, b0, b1);
}

static void pn_task(void *arg, int ith, int nth) {
    pn_job *a = arg;
    (void)nth;
    unsigned char *mine = a->scratch + a->per_thread * (size_t)ith;
    const int blocks = (a->T + PANEL_TOK - 1) / PANEL_TOK;
    for (int it; (it = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed)) < a->items;) {
        int i = 0;
        while (it >= a->j[i].sets) it -= a->j[i++].sets;
        const weight *w = a->j[i].w;
        const int n_out = a->j[i].n_out, r0 = it * a->j[i].set * PANEL_ROWS;
        const size_t rs = dtype_row_size(w->w->type, a->n_in);
        int np = 0, rows[4];
        const unsigned char *src[4];
        for (int r = r0; r < n_out && np < a->j[i].set; r += PANEL_ROWS, np++) {
            const char *wr = (const char *)w->w->data + rs * (size_t)r;
            rows[np] = n_out - r < PANEL_ROWS ? n_out - r : PANEL_ROWS;
            if (w->w->type == DT_BF16) panel_pack_bf16(wr, rs, rows[np], a->n_in, mine + a->pb * (size_t)np);
            else if (a->bf) panel_decode_bf16(w->w->type, wr, rs, rows[np], a->n_in, mine + a->pb * (size_t)np);
            else panel_decode(w->w->type, wr, rs, rows[np], a->n_in, mine + a->pb * (size_t)np);
            src[np] = mine + a->pb * (size_t)np;
        }
        float *acc = (float *)(mine + a->pb * (size_t)a->j[i].set);
        if (a->bf) { // (the same, PANEL_KCHUNK_BF16 K steps of 32 columns at a time, over pairs of token blocks)
            const int pairs = (blocks + 1) / 2, ns = a->n_in / 32;
            memset(acc, 0, sizeof(float) * 1024 * (size_t)np * (size_t)pairs);
            for (int s0 = 0; s0 < ns; s0 += PANEL_KCHUNK_BF16)
                for (int p = 0; p < np; p++)
                    for (int b = 0; b < pairs; b++)
                        panel_run_bf16_k(src[p], a->n_in, a->xb, b, s0, s0 + PANEL_KCHUNK_BF16 < ns ? s0 + PANEL_KCHUNK_BF16 : ns,
                                         acc + 1024 * ((size_t)p * pairs + b));
            for (int p = 0; p < np; p++) {
                const int r = r0 + p * PANEL_ROWS;
                for (int b = 0; b < pairs; b++)
                    panel_store_bf16(acc + 1024 * ((size_t)p * pairs + b), rows[p], a->T, b, a->tok, a->j[i].y + r, (size_t)n_out,
                                     a->j[i].bias ? a->j[i].bias + r : NULL);
            }
            continue;
        }
        // int8: the columns PANEL_KCHUNK super-blocks at a time (a panel's part, 16 KB, stays in L1 while every
        // token block runs against it), each (panel, block)'s sums in acc between the parts
        memset(acc, 0, sizeof(float) * PANEL_ROWS * PANEL_TOK * (size_t)np * (size_t)blocks);
        const int64_t nk = (a->n_in + 255) / 256;
        for (int64_t k0 = 0; k0 < nk; k0 += PANEL_KCHUNK)
            for (int p = 0; p < np; p++)
                for (int b = 0; b < blocks; b++)
                    panel_run_k(src[p], a->n_in, a->xb, a->T, b, k0, k0 + PANEL_KCHUNK < nk ? k0 + PANEL_KCHUNK : nk,
                                acc + (size_t)PANEL_ROWS * PANEL_TOK * ((size_t)p * blocks + b));
        for (int p = 0; p < np; p++) {
            const int r = r0 + p * PANEL_ROWS;
            for (int b = 0; b < blocks; b++)
                panel_store(acc + (size_t)PANEL_ROWS * PANEL_TOK * ((size_t)p * blocks + b), a->T, b, a->tok, a->j[i].y + r,
                            (size_t)n_out, rows[p], a->j[i].bias ? a->j[i].bias + r : NULL);
        }
    }
    panel_fence();
}

// the n products of the panel rows (ex->ptok[0..m), all T rows where m == T); 0, or -1 (scratch)
static int panel_products(cpu_exec *ex, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias,
                          int m, int T, int n_in, const int *n_out) {
    const int bf = panel_bf16_type(w[0]->w->type);
    pn_job a = {.x = x, .tok = m == T ? NULL : ex->ptok, .T = m, .n_in = n_in, .n = n, .bf = bf,
                .pb = ((bf ? panel_bf16_bytes(n_in) : panel_bytes(n_in)) + 63) & ~(size_t)63};
    const int nth = pool_size(ex->pool);
    int set = (int)(PANEL_SET_BYTES / a.pb);
    set = set < 1 ? 1 : set > 4 ? 4 : set;
    for (;; set--) { // (sets small enough that each thread gets about 4)
        a.items = 0;
        for (int i = 0; i < n; i++) a.items += (n_out[i] + set * PANEL_ROWS - 1) / (set * PANEL_ROWS);
        if (set == 1 || a.items >= 4 * nth) break;
    }
    for (int i = 0; i < n; i++)
        a.j[i].y = y[i], a.j[i].w = w[i], a.j[i].bias = bias[i], a.j[i].n_out = n_out[i], a.j[i].set = set,
        a.j[i].sets = (n_out[i] + set * PANEL_ROWS - 1) / (set * PANEL_ROWS);
    a.per_thread = a.pb * (size_t)set + // (then the sums of each (panel, token block): bf16 in pairs of blocks)
                   sizeof(float) * PANEL_ROWS * PANEL_TOK * (size_t)set * (size_t)((m + 2 * PANEL_TOK - 1) / (2 * PANEL_TOK) * 2);
    if (!(a.scratch = grow(ex, &ex->pn, &ex->pn_cap, a.per_thread * (size_t)nth + 64))) return -1;
    if (!(a.xb = grow(ex, &ex->pxb, &ex->pxb_cap, (bf ? panel_act_bf16_bytes(m, n_in) : panel_act_bytes(m, n_in)) + 64))) return -1;
    a.scratch += (64 - (uintptr_t)a.scratch % 64) % 64, a.xb += (64 - (uintptr_t)a.xb % 64) % 64; // (tiles: 64-byte rows)
    double t0 = ex->prof ? prof_now() : 0;
    pool_for(ex->pool, bf ? (m + 2 * PANEL_TOK - 1) / (2 * PANEL_TOK) * 2 : (m + PANEL_TOK - 1) / PANEL_TOK, 1, pn_act, &a);
    if (ex->prof) ex->prof[PROF_QUANT] += prof_now() - t0, ex->prof[PROF_N + PROF_QUANT]++;
    atomic_init(&a.next, 0);
    pool_run(ex->pool, pn_task, &a);
    return 0;
}

// The rows that do not take the panels, by the kernels: each stretch of them
// (rows [a, b) outside ex->ptok's m rows) as a product of its own.
static void rest_products(cpu_exec *ex, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias,
                          int m, int T, int n_in, const int *n_out) {
    float *ys[CPU_MULTI_MAX];
    for (int k = 0, t = 0; t < T;) {
        while (k < m && ex->ptok[k] == t) k++, t++;
        int b = k < m ? ex->ptok[k] : T;
        if (b > t) {
            for (int i = 0; i < n; i++) ys[i] = y[i] + (size_t)t * n_out[i];
            if (n == 1) matmul_plain(ex, ys[0], x + (size_t)t * n_in, w[0], bias[0], b - t, n_in, n_out[0]);
            else multi_plain(ex, n, ys, x + (size_t)t * n_in, w, bias, b - t, n_in, n_out);
        }
        t = b;
    }
}

static int panel_try(cpu_exec *ex, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias, int T,
                     int n_in, const int *n_out) {
    for (int i = 0; i < n; i++)
        if (!panel_weight(ex, w[i], n_in)) return 0;
    int m = panel_rows(ex, T);
    if (m <= 0) return m < 0;
    int mixed = 0; // (int8 and bf16 panels in one multi-product: each product alone)
    for (int i = 1; i < n; i++) mixed |= panel_bf16_type(w[i]->w->type) != panel_bf16_type(w[0]->w->type);
    for (int j = 0; j < (mixed ? n : 1); j++) {
        const int k = mixed ? 1 : n;
        if (panel_products(ex, k, y + j, x, w + j, bias + j, m, T, n_in, n_out + j) == 0 && m < T)
            rest_products(ex, k, y + j, x, w + j, bias + j, m, T, n_in, n_out + j);
    }
    return 1;
}

void matmul(cpu_exec *ex, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    if (!panel_try(ex, 1, &y, x, &w, &bias, T, n_in, &n_out)) matmul_plain(ex, y, x, w, bias, T, n_in, n_out);
}

void matmul_multi(cpu_exec *ex, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias,
                  int T, int n_in, const int *n_out) {
    if (n > CPU_MULTI_MAX || !panel_try(ex, n, y, x, w, bias, T, n_in, n_out)) multi_plain(ex, n, y, x, w, bias, T, n_in, n_out);
}
