// The CPU backend: the SIMD kernels (chosen at run time), threaded over the
// context's pool. Element-wise work over many tokens is split by rows, each
// row computed as it would be alone, so batches equal token-by-token runs.
#include "compute/backend.h"
#include "compute/cpu/attn.h"
#include "compute/cpu/vec.h"
#include "base/pool.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PAR_ROWS = 4, PAR_ELEMS = 8192 };

// `call` timed into slot of the exec's profile when it keeps one (ops.h)
#define PROFILED(slot, call)                                     \
    do {                                                         \
        cpu_exec *ex_ = b->ex;                                   \
        if (!ex_->prof || ex_->prof_depth) {                     \
            call;                                                \
            break;                                               \
        }                                                        \
        ex_->prof_depth++;                                       \
        double t0_ = prof_now();                                 \
        call;                                                    \
        ex_->prof[slot] += prof_now() - t0_;                     \
        ex_->prof[PROF_N + slot]++;                              \
        ex_->prof_depth--;                                       \
    } while (0)

static void cpu_matmul(backend *b, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    PROFILED(PROF_MATMUL, matmul(b->ex, y, x, w, bias, T, n_in, n_out));
}

static void cpu_matmul_multi(backend *b, int n, float *const *y, const float *x, const weight *const *w,
                             const float *const *bias, int T, int n_in, const int *n_out) {
    PROFILED(PROF_MULTI, matmul_multi(b->ex, n, y, x, w, bias, T, n_in, n_out));
}

static void cpu_begin_pass(backend *b, const int *pos, const int *run, int T) {
    (void)pos;
    cpu_exec_pass(b->ex, run, T);
}

typedef struct { float *out; const float *x, *w, *b; int n, kind; float eps; } norm_job;
static void norm_range(void *a, int i0, int i1) {
    norm_job *j = a;
    float *o = j->out + (size_t)i0 * j->n;
    const float *x = j->x + (size_t)i0 * j->n;
    if (j->kind == NORM_OP_LAYER) layernorm(o, x, j->w, j->b, i1 - i0, j->n, j->eps);
    else rmsnorm(o, x, j->w, i1 - i0, j->n, j->eps, j->kind == NORM_OP_RMS_PLUS_ONE);
}
static void cpu_norm(backend *b, float *out, const float *x, const float *w, const float *bias, int rows, int n, float eps,
                     int kind) {
    norm_job j = {out, x, w, bias, n, kind, eps};
    PROFILED(PROF_NORM, pool_for(b->ex->pool, rows, PAR_ROWS, norm_range, &j));
}

typedef struct { float *x; int heads, hd; const int *pos; const rope_table *r; } rope_job;
static void rope_range(void *a, int t0, int t1) {
    rope_job *j = a;
    for (int t = t0; t < t1; t++) rope(j->x + (size_t)t * j->heads * j->hd, j->heads, j->hd, j->pos[t], j->r);
}
static void cpu_rope(backend *b, float *x, int rows, int heads, int hd, const int *pos, const rope_table *r) {
    rope_job j = {x, heads, hd, pos, r};
    PROFILED(PROF_ROPE, pool_for(b->ex->pool, rows, PAR_ROWS, rope_range, &j));
}

typedef struct { float *g; const float *u; int n, act, ggml; } glu_job;
static void glu_range(void *a, int i0, int i1) {
    glu_job *j = a;
    float *g = j->g + (size_t)i0 * j->n;
    size_t n = (size_t)(i1 - i0) * j->n;
    if (j->ggml) activate_ggml(g, (int)n, j->act);
    else activate(g, (int)n, j->act);
    if (j->u)
        for (size_t i = 0; i < n; i++) g[i] *= j->u[(size_t)i0 * j->n + i];
}
static void cpu_glu(backend *b, float *g, const float *u, int rows, int n, int act, int ggml) {
    glu_job j = {g, u, n, act, ggml};
    PROFILED(PROF_GLU, pool_for(b->ex->pool, rows, PAR_ROWS, glu_range, &j));
}
static void cpu_act(backend *b, float *x, int rows, int n, int act, int ggml) { cpu_glu(b, x, NULL, rows, n, act, ggml); }

typedef struct { float *x; const float *o; float s; int n; } resid_job;
static void resid_range(void *a, int i0, int i1) {
    resid_job *j = a;
    for (size_t i = (size_t)i0 * j->n; i < (size_t)i1 * j->n; i++) j->x[i] += j->o[i] * j->s;
}
static void cpu_residual(backend *b, float *x, const float *o, float s, int rows, int n) {
    resid_job j = {x, o, s, n};
    PROFILED(PROF_RESID, pool_for(b->ex->pool, rows, PAR_ROWS, resid_range, &j));
}

typedef struct { float *x; size_t n; } round_job;
static void round_range(void *a, int i0, int i1) {
    round_job *j = a;
    size_t s = (size_t)i0 * PAR_ELEMS, e = (size_t)i1 * PAR_ELEMS < j->n ? (size_t)i1 * PAR_ELEMS : j->n;
    vec_round_f16(j->x + s, e - s);
}
static void cpu_round_f16(backend *b, float *x, size_t n) {
    round_job j = {x, n};
    PROFILED(PROF_ROUND, pool_for(b->ex->pool, (int)((n + PAR_ELEMS - 1) / PAR_ELEMS), 1, round_range, &j));
}

static void cpu_softmax(backend *b, float *x, int n) { (void)b; softmax(x, n); }

// ---------------------------------------------------------------------------
// attention: one task per (block, kv head), which reads that head's cached
// keys and values once for all the query heads of its group. Keys and
// values are met in chunks of ATTN_CHUNK positions, which stay in the L1
// cache while every query token of the block uses them.

enum { ATTN_CHUNK = 16 };

// The values are met in pieces of ATTN_SPAN positions (at its multiples):
// each piece's probability-weighted values are summed apart and the pieces
// added in order, so that a long row's pieces may run on different threads
// (split_* below) and give the same floats.
enum { ATTN_SPAN = 256 };

typedef struct {
    const attn_desc *d;
    float *tmp; // per thread: B x group x hd floats (a piece's sums)
    atomic_int next; // tasks handed out so far
} attn_job;

// Block blk's rows see positions [lo[b], hi[b]] of the cache; returns the
// first position any sees, *p1 the last.
static int block_span(const attn_desc *d, int blk, int *lo, int *hi, int *p1) {
    int p0 = INT32_MAX;
    *p1 = 0;
    for (int b = 0; b < d->blk_n[blk]; b++) {
        hi[b] = d->pos[d->blk0[blk] + b];
        lo[b] = d->window && hi[b] - d->window + 1 > 0 ? hi[b] - d->window + 1 : 0;
        p0 = lo[b] < p0 ? lo[b] : p0;
        *p1 = hi[b] > *p1 ? hi[b] : *p1;
    }
    return p0;
}

// A row of n scores of query head h into probabilities: softcap, the sink's
// share (then dropped), softmax, and ggml's f16 rounding (it multiplies V by
// f16 probabilities).
static void row_probs(const attn_desc *d, float *s, int n, int h) {
    if (d->softcap) softcap(s, n, d->softcap);
    if (d->sinks) {
        s[n] = d->sinks[h];
        softmax(s, n + 1);
    } else {
        softmax(s, n);
    }
    if (d->ggml_numerics) vec_round_f16(s, (size_t)n);
}

// Tasks are handed out from a shared counter, the last blocks first (a
// prompt's later rows see more positions: the long tasks start early and the
// short ones fill in); which thread takes a task does not change its floats.
static void attn_task(void *arg, int ith, int nth) {
    (void)nth;
    attn_job *job = arg;
    const attn_desc *d = job->d;
    int H = d->H, KV = d->KV, hd = d->hd, group = H / KV, nq = H * hd, nkv = KV * hd, stride = d->stride;
    // this thread's scores: (B tokens, group heads, stride), row r of token b at S + (b * group + r) * stride
    float *S = d->scores + (size_t)ith * d->B * group * stride;
    for (int k; (k = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < d->n_blk * KV;) {
        int task = d->n_blk * KV - 1 - k;
        int t0 = d->blk0[task / KV], kh = task % KV, nt = d->blk_n[task / KV];
        int lo[8], hi[8], p1, p0 = block_span(d, task / KV, lo, hi, &p1);
        // this head's keys and values: rows of the caches' types, ks and vs bytes apart
        size_t ks = kv_bytes(d->kt, (size_t)nkv), vs = kv_bytes(d->vt, (size_t)nkv);
        const char *kh_k = (const char *)d->k[t0] + kv_bytes(d->kt, (size_t)kh * hd);
        const char *kh_v = (const char *)d->v[t0] + kv_bytes(d->vt, (size_t)kh * hd);
        // scores, a chunk of keys at a time for all the tokens
        for (int c0 = p0; c0 <= p1; c0 += ATTN_CHUNK)
            for (int b = 0; b < nt; b++) {
                int a0 = c0 > lo[b] ? c0 : lo[b], a1 = c0 + ATTN_CHUNK - 1 < hi[b] ? c0 + ATTN_CHUNK - 1 : hi[b];
                if (a0 > a1) continue;
                const float *q = d->q + (size_t)(t0 + b) * nq + (size_t)kh * group * hd;
                attn_scores(q, group, hd, kh_k + (size_t)a0 * ks, d->kt, ks, a1 - a0 + 1, d->scale,
                            S + (size_t)b * group * stride + (a0 - lo[b]), stride);
            }
        for (int b = 0; b < nt; b++) {
            int n = hi[b] - lo[b] + 1;
            for (int g = 0; g < group; g++) row_probs(d, S + (size_t)(b * group + g) * stride, n, kh * group + g);
            memset(d->out + (size_t)(t0 + b) * nq + (size_t)kh * group * hd, 0, sizeof(float) * (size_t)group * hd);
        }
        // o = probabilities v, piece by piece (the first into o, each later
        // one into tmp, then added), a chunk of values at a time for all the tokens
        float *tmp = job->tmp + (size_t)ith * d->B * group * hd;
        size_t gh = (size_t)group * hd;
        for (int pc = p0 / ATTN_SPAN; pc <= p1 / ATTN_SPAN; pc++) {
            int first = pc == p0 / ATTN_SPAN, a = pc * ATTN_SPAN > p0 ? pc * ATTN_SPAN : p0;
            int e = (pc + 1) * ATTN_SPAN - 1 < p1 ? (pc + 1) * ATTN_SPAN - 1 : p1;
            if (!first) memset(tmp, 0, sizeof(float) * nt * gh);
            for (int c0 = a; c0 <= e; c0 += ATTN_CHUNK)
                for (int b = 0; b < nt; b++) {
                    int a0 = c0 > lo[b] ? c0 : lo[b], a1 = c0 + ATTN_CHUNK - 1 < hi[b] ? c0 + ATTN_CHUNK - 1 : hi[b];
                    a1 = a1 < e ? a1 : e;
                    if (a0 > a1) continue;
                    attn_mix(S + (size_t)b * group * stride + (a0 - lo[b]), stride, group, a1 - a0 + 1, kh_v + (size_t)a0 * vs, d->vt,
                             vs, hd, first ? d->out + (size_t)(t0 + b) * nq + (size_t)kh * gh : tmp + b * gh);
                }
            for (int b = 0; !first && b < nt; b++) {
                float *o = d->out + (size_t)(t0 + b) * nq + (size_t)kh * gh;
                for (size_t i = 0; i < gh; i++) o[i] += tmp[b * gh + i];
            }
        }
    }
}

// Long rows, fewer (block, kv head) tasks than threads (a decode step at
// depth): a block whose keys span more than one piece has them split among
// the threads, one task per (block, kv head, piece), in four steps over all
// the threads: the scores into rows shared by the threads; each row's softmax
// whole (attn_task's probabilities); each piece's values into its own partial
// output (the first into the output); the partials added in the pieces'
// order -- attn_task's floats, whatever runs where. Blocks go in groups whose
// score rows fit the scores' memory (threads x B x H x stride floats).
enum { BLK_MAX = 512 };

typedef struct {
    const attn_desc *d;
    int g0, g1;                     // the group's blocks
    int lo[BLK_MAX][8], hi[BLK_MAX][8]; // per block and row: the positions it sees (as attn_task's)
    int p0[BLK_MAX], p1[BLK_MAX];   // per block: the first and last positions its rows see
    int c0[BLK_MAX], nch[BLK_MAX];  // per block: its first piece (position / ATTN_SPAN) and piece count
    int item0[BLK_MAX + 1];         // per block: its first task (tasks: kv head x piece)
    size_t srow[BLK_MAX];           // per block: its first score row in the shared rows
    size_t pbase[BLK_MAX];          // per block: its partial outputs (floats into part)
    int rows;                       // score rows of the group (rows x H)
    float *part;
} split_job;

// Task i of the group: its block, kv head and positions [a, e] (one piece).
static int split_item(const split_job *j, int i, int *kh, int *ch, int *a, int *e) {
    int blk = j->g0;
    while (j->item0[blk - j->g0 + 1] <= i) blk++;
    int r = i - j->item0[blk - j->g0], n = j->nch[blk];
    *kh = r / n, *ch = r % n;
    int s = (j->c0[blk] + *ch) * ATTN_SPAN;
    *a = s > j->p0[blk] ? s : j->p0[blk];
    *e = s + ATTN_SPAN - 1 < j->p1[blk] ? s + ATTN_SPAN - 1 : j->p1[blk];
    return blk;
}

static float *split_srow(const split_job *j, int blk, int b, int h) {
    return j->d->scores + (j->srow[blk] + (size_t)b * j->d->H + h) * j->d->stride;
}

static void split_scores(void *arg, int ith, int nth) {
    const split_job *j = arg;
    const attn_desc *d = j->d;
    int H = d->H, KV = d->KV, hd = d->hd, group = H / KV, nq = H * hd, nkv = KV * hd;
    size_t ks = kv_bytes(d->kt, (size_t)nkv);
    for (int i = ith; i < j->item0[j->g1 - j->g0]; i += nth) {
        int kh, ch, a, e, blk = split_item(j, i, &kh, &ch, &a, &e), t0 = d->blk0[blk];
        const char *k = (const char *)d->k[t0] + kv_bytes(d->kt, (size_t)kh * hd);
        for (int c0 = a; c0 <= e; c0 += ATTN_CHUNK)
            for (int b = 0; b < d->blk_n[blk]; b++) {
                int lo = j->lo[blk][b], hi = j->hi[blk][b];
                int a0 = c0 > lo ? c0 : lo, a1 = c0 + ATTN_CHUNK - 1 < hi ? c0 + ATTN_CHUNK - 1 : hi;
                a1 = a1 < e ? a1 : e;
                if (a0 > a1) continue;
                const float *q = d->q + (size_t)(t0 + b) * nq + (size_t)kh * group * hd;
                attn_scores(q, group, hd, k + (size_t)a0 * ks, d->kt, ks, a1 - a0 + 1, d->scale,
                            split_srow(j, blk, b, kh * group) + (a0 - lo), d->stride);
            }
    }
}

// score rows [r0, r1) of the group (row r: block row r / H, head r % H)
static void split_softmax(void *arg, int r0, int r1) {
    const split_job *j = arg;
    const attn_desc *d = j->d;
    for (int r = r0; r < r1; r++) {
        int row = r / d->H, h = r % d->H, blk = j->g0;
        while (blk + 1 < j->g1 && (int)(j->srow[blk + 1] / d->H) <= row) blk++;
        int b = row - (int)(j->srow[blk] / d->H), n = j->hi[blk][b] - j->lo[blk][b] + 1;
        row_probs(d, split_srow(j, blk, b, h), n, h);
    }
}

// where block blk's row b, kv head kh, piece ch accumulates: the output (one piece) or its partial
static float *split_dst(const split_job *j, int blk, int b, int kh, int ch) {
    const attn_desc *d = j->d;
    size_t nq = (size_t)d->H * d->hd, at = (size_t)kh * (d->H / d->KV) * d->hd;
    if (ch == 0) return d->out + (size_t)(d->blk0[blk] + b) * nq + at;
    return j->part + j->pbase[blk] + ((size_t)ch * d->blk_n[blk] + b) * nq + at;
}

static void split_mix(void *arg, int ith, int nth) {
    const split_job *j = arg;
    const attn_desc *d = j->d;
    int H = d->H, KV = d->KV, hd = d->hd, group = H / KV, nkv = KV * hd;
    size_t vs = kv_bytes(d->vt, (size_t)nkv);
    for (int i = ith; i < j->item0[j->g1 - j->g0]; i += nth) {
        int kh, ch, a, e, blk = split_item(j, i, &kh, &ch, &a, &e), t0 = d->blk0[blk];
        const char *v = (const char *)d->v[t0] + kv_bytes(d->vt, (size_t)kh * hd);
        for (int b = 0; b < d->blk_n[blk]; b++) memset(split_dst(j, blk, b, kh, ch), 0, sizeof(float) * (size_t)group * hd);
        for (int c0 = a; c0 <= e; c0 += ATTN_CHUNK)
            for (int b = 0; b < d->blk_n[blk]; b++) {
                int lo = j->lo[blk][b], hi = j->hi[blk][b];
                int a0 = c0 > lo ? c0 : lo, a1 = c0 + ATTN_CHUNK - 1 < hi ? c0 + ATTN_CHUNK - 1 : hi;
                a1 = a1 < e ? a1 : e;
                if (a0 > a1) continue;
                attn_mix(split_srow(j, blk, b, kh * group) + (a0 - lo), d->stride, group, a1 - a0 + 1, v + (size_t)a0 * vs, d->vt,
                         vs, hd, split_dst(j, blk, b, kh, ch));
            }
    }
}

// output rows [r0, r1) of the group's blocks: the sum of their pieces' partials, in order
static void split_sum(void *arg, int r0, int r1) {
    const split_job *j = arg;
    const attn_desc *d = j->d;
    size_t nq = (size_t)d->H * d->hd;
    for (int r = r0; r < r1; r++) {
        int blk = j->g0;
        while (blk + 1 < j->g1 && (int)(j->srow[blk + 1] / d->H) <= r) blk++;
        int b = r - (int)(j->srow[blk] / d->H);
        if (j->nch[blk] == 1) continue;
        float *o = d->out + (size_t)(d->blk0[blk] + b) * nq;
        const float *p = j->part + j->pbase[blk] + (size_t)b * nq;
        for (int ch = 1; ch < j->nch[blk]; ch++) { // (piece 0 is in o already)
            const float *pc = p + (size_t)ch * d->blk_n[blk] * nq;
            for (size_t i = 0; i < nq; i++) o[i] += pc[i];
        }
    }
}

static void attn_blocks(backend *b, const attn_desc *d);

// A pass's prompt blocks (of runs of 16 rows and more, as the AMX panels
// take them: ops.h) on the AMX flash kernel where it is on (attn_amx.c), the
// other blocks as before; a block's rows the same floats whatever runs beside.
static void cpu_attention_(backend *b, const attn_desc *d) {
    cpu_exec *ex = b->ex;
    if (!ex->exact && ex->pass_T == d->T && d->n_blk <= BLK_MAX && attn_flash_ok(d)) {
        int fl[BLK_MAX], r0[BLK_MAX], rn[BLK_MAX], nf = 0, nr = 0;
        for (int blk = 0, i = 0; blk < d->n_blk; blk++) {
            const int t0 = d->blk0[blk];
            while (i > 0 && ex->run0[i] > t0) i--;
            while (i + 1 < ex->n_run && ex->run0[i + 1] <= t0) i++;
            if (ex->run0[i + 1] - ex->run0[i] >= 16) fl[nf++] = blk;
            else r0[nr] = t0, rn[nr++] = d->blk_n[blk];
        }
        if (nf && attn_flash(ex, d, fl, nf) == 0) {
            if (!nr) return;
            attn_desc rest = *d;
            rest.blk0 = r0, rest.blk_n = rn, rest.n_blk = nr;
            attn_blocks(b, &rest);
            return;
        }
    }
    attn_blocks(b, d);
}

static void cpu_attention(backend *b, const attn_desc *d) { PROFILED(PROF_ATTN, cpu_attention_(b, d)); }
static void attn_blocks(backend *b, const attn_desc *d) {
    cpu_exec *ex = b->ex;
    int split = 0, nth = pool_size(ex->pool);
    split_job *j = NULL;
    // INFER_ATTN_SPLIT=1: every long block split, 0: none (for comparisons; the floats are the same)
    static atomic_int forced = -2; // (read once; contexts on other threads may ask at once)
    int force = atomic_load_explicit(&forced, memory_order_relaxed);
    if (force == -2) {
        const char *e = getenv("INFER_ATTN_SPLIT");
        force = e && *e ? *e != '0' : -1;
        atomic_store_explicit(&forced, force, memory_order_relaxed);
    }
    if (d->n_blk <= BLK_MAX && d->B <= 8 && (force == 1 || (force == -1 && d->n_blk * d->KV < nth)))
        for (int blk = 0; blk < d->n_blk && !split; blk++) {
            int lo[8], hi[8], p1, p0 = block_span(d, blk, lo, hi, &p1);
            split = p1 / ATTN_SPAN > p0 / ATTN_SPAN;
        }
    if (!split || !(j = malloc(sizeof *j))) {
        size_t need = (size_t)nth * d->B * (d->H / d->KV) * d->hd; // (attn_task's piece sums)
        if (need > ex->att_cap) {
            float *p = realloc(ex->att, sizeof(float) * need);
            if (!p) { ex->oom = 1; return; }
            ex->att = p, ex->att_cap = need;
        }
        attn_job job = {.d = d, .tmp = ex->att};
        atomic_init(&job.next, 0);
        pool_run(ex->pool, attn_task, &job);
        return;
    }
    // (the blocks' positions once; groups whose score rows fit the memory)
    j->d = d;
    size_t cap_rows = (size_t)pool_size(ex->pool) * d->B; // score rows of H heads the memory holds
    size_t nq = (size_t)d->H * d->hd;
    for (int g0 = 0; g0 < d->n_blk;) {
        int g1 = g0;
        size_t rows = 0, part = 0;
        for (; g1 < d->n_blk && rows + d->blk_n[g1] <= cap_rows; g1++) {
            int p0 = j->p0[g1] = block_span(d, g1, j->lo[g1], j->hi[g1], &j->p1[g1]), p1 = j->p1[g1];
            j->c0[g1] = p0 / ATTN_SPAN, j->nch[g1] = p1 / ATTN_SPAN - p0 / ATTN_SPAN + 1;
            j->item0[g1 - g0] = g1 == g0 ? 0 : j->item0[g1 - g0 - 1] + d->KV * j->nch[g1 - 1];
            j->srow[g1] = rows * d->H;
            j->pbase[g1] = part;
            rows += d->blk_n[g1];
            if (j->nch[g1] > 1) part += (size_t)j->nch[g1] * d->blk_n[g1] * nq;
        }
        j->item0[g1 - g0] = j->item0[g1 - g0 - 1] + d->KV * j->nch[g1 - 1];
        j->g0 = g0, j->g1 = g1, j->rows = (int)rows;
        if (part > ex->att_cap) {
            float *p = realloc(ex->att, sizeof(float) * part);
            if (!p) { ex->oom = 1; free(j); return; }
            ex->att = p, ex->att_cap = part;
        }
        j->part = ex->att;
        pool_run(ex->pool, split_scores, j);
        pool_for(ex->pool, (int)rows * d->H, 1, split_softmax, j);
        pool_run(ex->pool, split_mix, j);
        pool_for(ex->pool, (int)rows, 1, split_sum, j);
        g0 = g1;
    }
    free(j);
}


// the host's data steps, timed when profiled
static void cpu_qkv_prep(backend *b, const qkv_desc *d) { PROFILED(PROF_QKV, qkv_prep_ops(b, d)); }
static void cpu_embed(backend *b, float *out, const tensor *table, const int32_t *ids, int T, float scale) {
    PROFILED(PROF_DATA, host_embed(b, out, table, ids, T, scale));
}
static void cpu_copy(backend *b, float *dst, size_t ds, const float *src, size_t ss, int rows, int n) {
    PROFILED(PROF_DATA, host_copy(b, dst, ds, src, ss, rows, n));
}
static void cpu_scale(backend *b, float *x, size_t n, float s) { PROFILED(PROF_DATA, host_scale(b, x, n, s)); }
static void cpu_mul(backend *b, float *x, size_t xs, const float *y, size_t ys, int rows, int n) {
    PROFILED(PROF_DATA, host_mul(b, x, xs, y, ys, rows, n));
}
static void cpu_softcap(backend *b, float *x, size_t n, float cap) { PROFILED(PROF_DATA, host_softcap(b, x, n, cap)); }
static void cpu_kv_store(backend *b, void *const *cache, int type, const int *pos, const float *src, int T, int n) {
    PROFILED(PROF_DATA, host_kv_store(b, cache, type, pos, src, T, n));
}

const backend_ops backend_cpu_ops = {
    .name = "cpu",
    .matmul = cpu_matmul,
    .matmul_multi = cpu_matmul_multi,
    .norm = cpu_norm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .act = cpu_act,
    .glu = cpu_glu,
    .residual = cpu_residual,
    .round_f16 = cpu_round_f16,
    .softmax = cpu_softmax,
    HOST_MEM_OPS,
    .qkv_prep = cpu_qkv_prep, .embed = cpu_embed, .copy = cpu_copy, .scale = cpu_scale, .mul = cpu_mul,
    .softcap = cpu_softcap, .kv_store = cpu_kv_store, .download = host_download, .upload = host_upload,
    .glu_oss = host_glu_oss, .argmax = host_argmax, .begin_pass = cpu_begin_pass,
    .host = 1,
};

const backend_ops *backend_find(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, backend_cpu_ops.name)) return &backend_cpu_ops;
    if (!strcmp(name, backend_ref_ops.name)) return &backend_ref_ops;
    if (!strcmp(name, "cuda")) return backend_cuda();
    return NULL;
}
