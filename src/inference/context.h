// A generation context: the KV cache and the scratch buffers of the layer
// loop, all allocated once when the context is made.
#ifndef INFER_INFERENCE_CONTEXT_H
#define INFER_INFERENCE_CONTEXT_H

#include "infer.h"
#include "base/pool.h"
#include "compute/backend.h"
#include "compute/cpu/ops.h"
#include "models/model.h"
#include "inference/graph.h"

#ifndef N_BATCH
#define N_BATCH 512      // tokens per pass of the layer loop on the CPU
#endif
#define N_BATCH_DEV 512  // on a device backend (tensor-core tiles want many rows)
#define N_BATCH_MAX 512

// Phases of the forward pass timed when a context profiles (bench-components).
enum phase {
    PH_EMBED, PH_NORM, PH_QKV, PH_ROPE, PH_ATTN, PH_O, PH_GATE_UP, PH_ACT, PH_DOWN, PH_RESIDUAL, PH_MOE, PH_PLE, PH_WALK,
    PH_LOGITS, PH_COUNT
};
extern const char *const phase_names[PH_COUNT];

// The rows of one pass of the layer loop: each token row's sequence (the
// context whose KV cache and positions it uses) and its position there. A
// context alone: every row is its own, at n_past + t. A batch: runs of rows
// per sequence. Attention meets the rows in blocks of one sequence each (at
// most its attn_tokens rows, from the first row of its run), so a sequence's
// rows are computed the same in a batch as alone.
typedef struct {
    struct infer_ctx *seq[N_BATCH_MAX];
    int pos[N_BATCH_MAX];
    int run[N_BATCH_MAX];              // 1 where a sequence's run of rows starts
    int blk0[N_BATCH_MAX], blk_n[N_BATCH_MAX]; // attention blocks: first row, rows
    int n_blk;
    int B;      // the most rows in a block
    int stride; // scores per head row: the largest n_ctx + 1
} pass_rows;

// The layer loop's scratch for up to n_batch rows, in one memory.
typedef struct {
    float *x;           // (T, n_embd) residual stream
    float *xn;          // (T, n_embd) normed input of a block
    float *q;           // (T, n_head*hd_max)
    float *k, *v;       // (T, n_kv*hd_max)
    float *qkv;         // (T, q + 2 kv) fused projections
    float *att;         // (T, n_head*hd_max) attention output
    float *o;           // (T, n_embd) block output
    float *ff;          // (T, 2*n_ff_max) FFN hidden
    float *ff2;         // (T, n_ff_max)
    float *ple;         // (T, n_layer*ple_dim) Gemma 4 per-layer inputs
    float *ple_tmp;     // (T, max(n_layer*ple_dim, n_embd))
    float *row;         // (max(n_embd, n_expert)) one decoded row / router logits
    float *eo;          // (n_embd) one expert's output
} scratch;

// Where a pass runs: a backend and its memory. A context has its own side
// (its backend: the KV cache and scratch laid out in one allocation, the
// arena) and, split over two backends (infer_ctx_set_gpu_layers, pipelined
// layers), a host side beside it with the KV caches of its layers and a
// scratch of its own.
typedef struct {
    backend be;                   // what runs the operations (on the context's ex)
    const backend_ops *arena_ops; // the backend whose memory the arena is
    float *arena;                 // the caches and the scratch below: one allocation (context.c's layout)
    float *scr;                   // a device context's scratch, its own allocation (scratch_ensure; NULL: in arena, or none yet)
    // KV cache: layer l holds k_cache[l], n_ctx rows of n_kv_head*hd values
    // of type kt (enum kv_type), likewise v (vt); NULL for layers that read
    // another layer's K/V (or whose attention runs on the other side)
    void **k_cache, **v_cache;
    scratch s;                    // for up to n_batch rows
} side;

struct infer_ctx {
    infer_model *m;
    pool *pool;         // this context's threads (infer_ctx_set_threads)
    cpu_exec ex;        // the kernels' scratch, on pool
    int n_ctx;          // positions the cache holds
    int n_batch;        // rows a pass holds (N_BATCH, or N_BATCH_DEV on a device backend)
    int n_past;         // positions filled
    int scr_lazy;       // the scratch is own.scr, made at the first pass (scratch_ensure): a device context's
    size_t kv_chunk;    // a cache backed as it grows (the backend's kv_reserve): its unit of memory; 0: backed whole
    int kv_have;        // positions backed so far (kv_ensure)
    int kv_shared;      // positions below which chunks may be shared with other contexts' caches (infer_ctx_copy; kv_own)
    float *dev_logits;  // logit rows in a device backend's memory (forward.c), or NULL
    size_t dev_logit_cap;
    float *tp_part;     // tensor parallel: this rank's logit columns, in the backend's memory (forward.c)
    size_t tp_part_cap;
    float *tp_host;     // ... and the host's copies a device backend's buffers go through
    size_t tp_host_cap;
    int tp_failed;      // a collective failed this pass (comm_error says why)
    side own;           // the context's backend and its memory
    side host;          // a split context's host side (ops NULL: none)
    side *cur;          // the side a pass is on (forward.c's go); own between passes
    int kt, vt;         // the caches' types (enum kv_type)
    int kv_req[2];      // the types asked for (infer_ctx_set_kv_type), or -1: the default (kv_default)
    float *scores;      // (pool threads, attn_tokens, n_head, n_ctx + 1) attention scores per thread
    int attn_tokens;    // query tokens per attention task (a few, bounded by memory)
    float *hrow;        // (max(n_embd, n_expert)) in host memory (the router's logits, read there)
    const backend_ops *host_pick; // the host side's backend where chosen (ctx_set_host_side), else NULL
    int gpu_layers;     // the last gpu_layers layers on the context's backend, the others on the host side (-1: all)
    unsigned char *att_dev, *ffn_dev; // (n_layer) where each layer's attention and FFN run: 1 the context's backend, 0 the host side
    int out_dev;        // where the final norm and logits run
    int split;          // some part runs on the host side
    int on_dev;         // 1 while cur is own, 0 on the host side
    int ple_sides;      // the sides (bit 1 << on_dev) whose scratch holds this pass's per-layer inputs
    // layer graph (infer_ctx_set_graph): NULL is dense everywhere
    layer_plan *plan;
    int n_cached;       // layers [0, n_cached) come from the template
    struct walk_scratch *ws;
    // the template of cached layers (infer_ctx_set_template)
    int tmpl_n, tmpl_layers;   // its tokens, and the prefix it was recorded for
    float *tmpl_x;             // (tmpl_n, n_embd) residual after layer tmpl_layers - 1
    void **tmpl_k, **tmpl_v;   // per recorded layer with its own K/V: tmpl_n cache rows
    float *capture;            // while recording: where forward copies that residual
    float *ffn_in;             // NULL, or (n_layer, n_embd): each layer's normed FFN input at the last token
    int profiling;      // accumulate seconds per phase into prof
    double prof[PH_COUNT];
    pass_rows rows;     // the pass in flight (this context's, or a batch's when it is a batch's workspace)
    size_t scores_cap;  // floats c->scores holds
    float *logit_buf;   // batch workspace: (rows with logits, n_vocab)
    size_t logit_cap;
};

// The KV cache type a context of m starts with on a host backend: f16
// where the model has ggml's numerics (its K and V are rounded to f16 before
// they are stored, so f16 rows hold them exactly), else f32 (safetensors
// models, exact against transformers). A device backend's is f32.
int kv_default(const infer_model *m);

// Fills c->rows for a pass of T rows of the given sequences (row t of seq[t],
// positions from each sequence's n_past on, in order), and the attention blocks.
void pass_rows_set(infer_ctx *c, infer_ctx *const *seq, int T);

// What a pass gives back: logits, rows first..T-1's one after the other in
// the host's memory (logits NULL: none); or, with dst set, each row's where
// dst[t] says (NULL: none) and its greedy token where tok[t] says (tok NULL,
// or tok[t] NULL: none). hidden: NULL or (n_layer + 1, n_embd), the residual
// stream at the last row after each layer and the final norm.
typedef struct {
    float *logits;
    int first;
    float *const *dst;
    int32_t *const *tok;
    float *hidden;
    float *embd;        // NULL, or (n, n_embd): the wanted rows' states after the final norm
                        // (with logits NULL: infer_embed's)
} pass_out;

// One pass of the rows set in c->rows (pass_rows_set; c: the context whose
// scratch and backend run it, a batch's workspace or a sequence alone) of
// ids (T <= n_batch); each row's sequence's n_past advances by one.
infer_status forward_pass(infer_ctx *c, const int32_t *ids, int T, const pass_out *out);

// The backend of the host side of a split context (a host backend: "cpu" or
// "reference"; the default is "cpu", where the context's backend is a
// device's). With it, a context on a host backend splits too: the tests run
// a split between the two host backends, on a machine without a GPU. Only
// on a fresh context.
infer_status ctx_set_host_side(infer_ctx *c, const char *name);
// A device context's scratch, made at its first pass (context.c); INFER_OK where it has one
infer_status scratch_ensure(infer_ctx *c);
// Positions [0, n) of a context's caches backed, where they grow (kv_chunk); INFER_ERR_NOMEM where the memory is taken
infer_status kv_ensure(infer_ctx *c, int n);
// layer il's K and V caches' byte offsets in the context's arena; its values a position
size_t kv_layer(const infer_ctx *c, int il, size_t *ko, size_t *vo);
// Positions [from, n_ctx) of a context's caches its own before they are written (copy on write of the chunks
// a prefix shares with other contexts); INFER_ERR_NOMEM where the memory is taken
infer_status kv_own(infer_ctx *c, int from);

// A context's pass alone: T tokens at positions n_past.. (forward_pass of
// its own rows); logits: NULL or (T, n_vocab) (last_only: (1, n_vocab)).
infer_status forward(infer_ctx *c, const int32_t *ids, int T, float *logits, int last_only, float *hidden);

#endif
