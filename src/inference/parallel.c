// Tensor parallel and the layer split's hooks (parallel.h).
#include "inference/parallel.h"
#include "base/comm.h"
#include "compute/nccl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// n floats of the host's for a device buffer's trip through the communicator
static float *tp_host(infer_ctx *c, size_t n) {
    if (n > c->tp_host_cap) {
        free(c->tp_host);
        c->tp_host = malloc(sizeof(float) * n);
        c->tp_host_cap = c->tp_host ? n : 0;
    }
    return c->tp_host;
}

// The job's NCCL communicator for a GPU backend's buffers, opened by every
// rank at its first GPU pass (INFER_TP_NCCL=0: never), or NULL: then the
// buffers go through the host communicator (shared memory, or TCP).
static nccl *tp_nccl(infer_ctx *c) {
    infer_model *m = c->m;
    if (!m->nccl_tried) {
        m->nccl_tried = 1;
        const char *e = getenv("INFER_TP_NCCL");
        if (!(e && *e == '0')) m->nccl = nccl_open(m->comm);
        if (m->nccl) snprintf(m->tp_transport, sizeof m->tp_transport, "nccl %s", nccl_version());
        else
            snprintf(m->tp_transport, sizeof m->tp_transport, "%s (%s)", comm_transport(m->comm), e && *e == '0' ? "INFER_TP_NCCL=0" : nccl_why());
    }
    return m->nccl;
}

// x (n floats, the backend's) = its sum over the ranks
void tp_sum(infer_ctx *c, float *x, size_t n) {
    comm *k = c->m->comm;
    if (!k || c->tp_failed || c->m->tp_layers) return; // (a pipeline's layers are whole)
    if (OPS->host) {
        c->tp_failed = comm_allreduce(k, x, n) != 0;
        return;
    }
    nccl *g = tp_nccl(c);
    if (g) {
        void *st = backend_cuda_stream(BE);
        c->tp_failed = !st || nccl_allreduce(g, x, n, st) != 0;
        return;
    }
    float *h = tp_host(c, n);
    if (!h) {
        c->tp_failed = 1;
        return;
    }
    OPS->download(BE, h, x, n);
    c->tp_failed = comm_allreduce(k, h, n) != 0;
    OPS->upload(BE, x, h, n);
}

// x (n floats, the backend's) = rank root's x
void tp_bcast(infer_ctx *c, float *x, size_t n, int root) {
    comm *k = c->m->comm;
    if (!k || c->tp_failed) return;
    if (OPS->host) {
        c->tp_failed = comm_bcast(k, x, sizeof(float) * n, root) != 0;
        return;
    }
    nccl *g = tp_nccl(c);
    if (g) {
        void *st = backend_cuda_stream(BE);
        c->tp_failed = !st || nccl_bcast(g, x, n, root, st) != 0;
        return;
    }
    float *h = tp_host(c, n);
    if (!h) {
        c->tp_failed = 1;
        return;
    }
    int me = c->m->tp_rank == root;
    if (me) OPS->download(BE, h, x, n);
    c->tp_failed = comm_bcast(k, h, sizeof(float) * n, root) != 0;
    if (!me) OPS->upload(BE, x, h, n);
}

// c->tp_part with room for n floats at least (in the backend's memory), or NULL
float *tp_reserve(infer_ctx *c, size_t n) {
    if (n > c->tp_part_cap) {
        if (c->tp_part) c->own.arena_ops->release(&c->own.be, c->tp_part);
        c->tp_part = c->own.arena_ops->alloc(&c->own.be, sizeof(float) * n);
        c->tp_part_cap = c->tp_part ? n : 0;
    }
    if (!c->tp_part) c->tp_failed = 1;
    return c->tp_failed ? NULL : c->tp_part;
}

// out (n rows of ld floats) gets rank r's n rows of cnt[r] columns at column
// cnt[0] + ... + cnt[r-1]; this rank's are packed at the front of c->tp_part,
// reserved for tp_gather_room(n, cnt) floats (NCCL: every rank's block of n
// rows of at most the widest count side by side, then each into place).
size_t tp_gather_room(const infer_ctx *c, int n, const int *cnt) {
    int W = c->m->tp_world, w = 0;
    for (int r = 0; r < W; r++) w = cnt[r] > w ? cnt[r] : w;
    return (size_t)n * w * (W + 1);
}

void tp_gather_cols(infer_ctx *c, float *out, size_t ld, int n, const int *cnt) {
    const infer_model *m = c->m;
    int W = m->tp_world, me = m->tp_rank, w = 0, total = 0;
    for (int r = 0; r < W; r++) w = cnt[r] > w ? cnt[r] : w, total += cnt[r];
    if (c->tp_failed) return;
    if (OPS->host) {
        c->tp_failed = comm_allgather_cols(m->comm, c->tp_part, n, cnt, out, ld) != 0;
        return;
    }
    nccl *g = tp_nccl(c);
    if (g) {
        void *st = backend_cuda_stream(BE);
        size_t blk = (size_t)n * w;
        float *recv = c->tp_part + blk;
        if (!st || nccl_allgather(g, c->tp_part, recv, blk, st)) {
            c->tp_failed = 1;
            return;
        }
        for (int r = 0, off = 0; r < W; off += cnt[r++]) OPS->copy(BE, out + off, ld, recv + blk * r, (size_t)cnt[r], n, cnt[r]);
        return;
    }
    size_t mine = (size_t)n * cnt[me];
    float *h = tp_host(c, mine + (size_t)n * ld);
    if (!h) {
        c->tp_failed = 1;
        return;
    }
    OPS->download(BE, h, c->tp_part, mine);
    c->tp_failed = comm_allgather_cols(m->comm, h, n, cnt, h + mine, ld) != 0;
    if (ld == (size_t)total) OPS->upload(BE, out, h + mine, (size_t)n * ld);
    else c->tp_failed = 1; // (the host's rows go up whole)
}

// The norm of each of T rows (n of this rank's columns, in x) over the whole
// row, every rank's columns (OLMo 2's q and k): the rows gathered, normed
// with the whole row's weight w, this rank's columns back.
void tp_norm_rows(infer_ctx *c, float *x, int T, int n, const float *w) {
    const infer_model *m = c->m;
    int W = m->tp_world, cnt[COMM_MAX_RANKS];
    for (int r = 0; r < W; r++) cnt[r] = n;
    size_t room = tp_gather_room(c, T, cnt), N = (size_t)n * W;
    float *part = tp_reserve(c, room + (size_t)T * N);
    if (!part) return;
    float *full = part + room;
    OPS->copy(BE, part, (size_t)n, x, (size_t)n, T, n);
    tp_gather_cols(c, full, N, T, cnt);
    if (c->tp_failed) return;
    OPS->norm(BE, full, full, w, NULL, T, (int)N, (float)m->cfg.norm_eps, m->cfg.norm_plus_one ? NORM_OP_RMS_PLUS_ONE : NORM_OP_RMS);
    OPS->copy(BE, x, (size_t)n, full + (size_t)n * m->tp_rank, N, T, n);
}

// Rows [t0, t0 + n) of a pass's rows (their attention blocks the whole
// pass's, cut at t0 and t0 + n).
static void pass_rows_sub(pass_rows *d, const pass_rows *R, int t0, int n) {
    d->n_blk = 0, d->B = 1, d->stride = R->stride;
    for (int t = 0; t < n; t++) {
        d->seq[t] = R->seq[t0 + t], d->pos[t] = R->pos[t0 + t];
        d->run[t] = R->run[t0 + t] || t == 0;
    }
    for (int b = 0; b < R->n_blk; b++) {
        int a = R->blk0[b] > t0 ? R->blk0[b] : t0, e = R->blk0[b] + R->blk_n[b];
        e = e < t0 + n ? e : t0 + n;
        if (a >= e) continue;
        d->blk0[d->n_blk] = a - t0, d->blk_n[d->n_blk++] = e - a;
        if (e - a > d->B) d->B = e - a;
    }
}

// Rows a micro-batch of a pipeline's pass (INFER_PP_ROWS; 0: none)
static int pp_rows(void) {
    const char *e = getenv("INFER_PP_ROWS");
    int v = e && *e ? atoi(e) : 64;
    return v < 0 ? 0 : v;
}

// Micro-batch j of M of a pass of T rows: rows [*t0, *t0 + return)
static int micro_rows(int T, int M, int j, int *t0) {
    *t0 = (int)((int64_t)T * j / M);
    return (int)((int64_t)T * (j + 1) / M) - *t0;
}

// The hand-overs after step k of a pipeline's pass of M micro-batches (x:
// the pass's residual rows): each stage's micro-batch k - s to rank s + 1.
// NCCL: a rank sends what it ran to the next and receives what the one
// before ran, in one group; through the host: broadcasts (every rank takes
// part in each; the others' copies are not read).
static void tp_handover(infer_ctx *c, float *x, int k, int M, int T) {
    const infer_model *m = c->m;
    int W = m->tp_world, me = m->tp_rank, E = m->cfg.n_embd, t0;
    if (c->tp_failed) return;
    nccl *g = OPS->host ? NULL : tp_nccl(c);
    if (g) {
        int js = k - me, jr = k - me + 1; // (sent: what this rank ran; received: what the rank before ran)
        int send = me < W - 1 && js >= 0 && js < M, recv = me > 0 && jr >= 0 && jr < M;
        if (!send && !recv) return;
        size_t ns = 0, nr = 0;
        float *sp = NULL, *rp = NULL;
        if (send) ns = (size_t)micro_rows(T, M, js, &t0) * E, sp = x + (size_t)t0 * E;
        if (recv) nr = (size_t)micro_rows(T, M, jr, &t0) * E, rp = x + (size_t)t0 * E;
        void *st = backend_cuda_stream(BE);
        c->tp_failed = !st || nccl_sendrecv(g, sp, ns, me + 1, rp, nr, me - 1, st) != 0;
        return;
    }
    for (int s = 0; s < W - 1; s++) {
        int js = k - s;
        if (js < 0 || js >= M) continue;
        int n = micro_rows(T, M, js, &t0);
        tp_bcast(c, x + (size_t)t0 * E, (size_t)n * E, s);
    }
}

// The micro-batches of a pipeline's pass of T rows over W ranks
static int pp_micro(int T, int W) {
    int rows = pp_rows(), M = rows > 0 ? T / rows : 1;
    return M < 1 ? 1 : M > W * 8 ? W * 8 : M; // (more steps than that: more hand-overs, little more overlap)
}

// A pipeline split's pass (models/shard.c): stage s is rank s's run of
// layers; each stage's residual stream goes to the next rank. A pass of at
// least two micro-batches' rows goes through in micro-batches (GPipe's
// schedule): at step k rank r runs micro-batch k - r, then each stage's
// result goes on, so the W ranks work at once (M micro-batches take
// M + W - 1 steps rather than W M). A micro-batch's rows come after the
// rows before it, so its attention finds their K/V in the cache.
void pipeline_layers(infer_ctx *c, int T, void (*layer)(infer_ctx *c, int il, int T)) {
    const infer_model *m = c->m;
    int W = m->tp_world, me = m->tp_rank, E = m->cfg.n_embd, M = pp_micro(T, W);
    pass_rows whole = c->rows;
    float *x = c->cur->s.x, *ple = c->cur->s.ple;
    size_t LP = (size_t)m->cfg.n_layer * m->cfg.ple_dim;
    for (int k = 0; k < M + W - 1; k++) {
        int j = k - me, t0;
        if (j >= 0 && j < M && M == 1)
            for (int il = m->pp_l0; il < m->pp_l1; il++) layer(c, il, T);
        else if (j >= 0 && j < M) {
            int n = micro_rows(T, M, j, &t0);
            pass_rows_sub(&c->rows, &whole, t0, n);
            if (OPS->begin_pass) OPS->begin_pass(BE, c->rows.pos, c->rows.run, n);
            c->cur->s.x = x + (size_t)t0 * E;
            if (ple) c->cur->s.ple = ple + (size_t)t0 * LP;
            for (int il = m->pp_l0; il < m->pp_l1; il++) layer(c, il, n);
            c->cur->s.x = x, c->cur->s.ple = ple;
        }
        tp_handover(c, x, k, M, T);
    }
    if (M > 1) {
        c->rows = whole;
        if (OPS->begin_pass) OPS->begin_pass(BE, whole.pos, whole.run, T);
    }
}

// Whether a pass of T rows, n of them with logits, may be captured as a graph: always
// without ranks; with them only through NCCL and where INFER_TP_GRAPH=1 asks
// (every rank decides alike: the same calls, the same keys), with the
// logits' gather scratch in place first (nothing is allocated in a capture).
// Not yet the default: captured collectives have not run on two GPUs.
int tp_graph_ok(infer_ctx *c, int T, int n) {
    const infer_model *m = c->m;
    if (!m->comm) return 1;
    const char *e = getenv("INFER_TP_GRAPH");
    if (!(e && *e == '1') || OPS->host || m->cfg.fam->qk_norm_full || !tp_nccl(c)) return 0;
    int W = m->tp_world, cnt[COMM_MAX_RANKS];
    if (m->tp_layers) return pp_micro(T, W) == 1; // (micro-batches' positions go up mid-pass)
    for (int r = 0; r < W; r++) cnt[r] = (int)((int64_t)m->cfg.n_vocab * (r + 1) / W - (int64_t)m->cfg.n_vocab * r / W);
    return tp_reserve(c, tp_gather_room(c, n, cnt)) != NULL;
}


const char *tp_why(const infer_ctx *c) {
    const infer_model *m = c->m;
    return m->nccl && nccl_why()[0] ? nccl_why() : m->comm ? comm_error(m->comm) : "no communicator";
}

// A rank's head: its vocabulary's columns, then gathered; a pipeline's last
// rank has the logits, and every rank gets them.
void tp_head(infer_ctx *c, float *lg, int n) {
    const infer_model *m = c->m;
    int E = m->cfg.n_embd, V = m->cfg.n_vocab, W = m->tp_world;
    if (m->tp_layers) {
        if (m->tp_rank == W - 1) OPS->matmul(BE, lg, c->cur->s.xn, &m->output, NULL, n, E, V);
        tp_bcast(c, lg, (size_t)n * V, W - 1);
        return;
    }
    int cnt[COMM_MAX_RANKS];
    for (int r = 0; r < W; r++) cnt[r] = (int)((int64_t)V * (r + 1) / W - (int64_t)V * r / W);
    float *part = tp_reserve(c, tp_gather_room(c, n, cnt));
    if (!part) return;
    OPS->matmul(BE, part, c->cur->s.xn, &m->output, NULL, n, E, m->tp_nv);
    tp_gather_cols(c, lg, (size_t)V, n, cnt);
}
