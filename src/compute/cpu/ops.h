// CPU kernels of the forward pass (scalar reference versions).
// Shapes: T tokens, rows of n floats, row-major.
#ifndef INFER_COMPUTE_CPU_OPS_H
#define INFER_COMPUTE_CPU_OPS_H

#include "base/pool.h"
#include "tensor/tensor.h"

// The CPU's working state for one caller (a context, an extraction): its
// threads and the scratch the kernels reuse, so that callers never share any.
enum { CPU_MULTI_MAX = 4 };
typedef struct {
    pool *pool;                // borrowed; NULL runs on the caller alone
    unsigned char *xq;         // activations quantized for the integer dot products
    size_t xq_cap;
    unsigned char *mq[CPU_MULTI_MAX]; // the same for matmul_multi, per product
    size_t mq_cap[CPU_MULTI_MAX];
    float *att;                // attention's partial outputs where a block's keys are split among threads
    size_t att_cap;            // (floats)
    int *run0, run_cap;        // the pass's runs (begin_pass): run i is rows [run0[i], run0[i + 1])
    int pass_T, n_run;         // (pass_T 0: no pass begun; a product of another T is not the pass's rows)
    unsigned char *pn, *pxb;   // AMX panels (panel.h): the threads' decoded panels, the tokens' tiles
    size_t pn_cap, pxb_cap;
    int *ptok, ptok_cap;       // the rows a product runs on panels
    unsigned char *kvt;        // the caches' keys and values as bf16 tiles (attn_amx.c)
    size_t kvt_cap;
    int oom;                   // sticky: scratch could not grow, results since are not to be used
    int exact;                 // 1: no AMX panels or flash attention (infer_ctx_params.deterministic): a token's
                               // floats the same however its sequence's tokens are split into calls
    double *prof;              // INFER_PROFILE: per op (enum prof_op) seconds, then calls; NULL: off
    int prof_depth;            // (ops called from ops are counted in the outer one)
} cpu_exec;

// The CPU backend's time per operation, kept when the environment sets
// INFER_PROFILE (the device machine has no perf): cpu_exec_profile turns it
// on for ex, cpu_exec_release prints the table to stderr. Matmul's own
// activation quantization is counted apart as well (PROF_QUANT, inside it).
enum prof_op { PROF_MATMUL, PROF_MULTI, PROF_QUANT, PROF_NORM, PROF_ROPE, PROF_QKV, PROF_ATTN, PROF_GLU, PROF_RESID,
               PROF_ROUND, PROF_DATA, PROF_N };
void cpu_exec_profile(cpu_exec *ex);
double prof_now(void);
void cpu_exec_release(cpu_exec *ex); // frees the scratch (not the pool)
// A pass over T rows begins (backend.h's begin_pass): run[t] 1 where a
// sequence's rows begin. A prompt's rows (runs of 16 and more) take the AMX
// panels where they are on (panel.h), the rest the kernels they take alone.
void cpu_exec_pass(cpu_exec *ex, const int *run, int T);

// y (T, n_out) = x (T, n_in) @ W^T, W in its stored type ([n_out, n_in], or
// [n_in, n_out] when w->trans). bias (n_out) may be NULL.
void matmul(cpu_exec *ex, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out);
// products so far that read a packable weight unpacked (infer_cpu_unpacked_products)
unsigned long matmul_unpacked_count(void);
// y[i] = x W_i^T (+ bias[i]) for n <= 4 weights of the same T tokens x: the
// same results as n calls of matmul, with one wake of the pool.
void matmul_multi(cpu_exec *ex, int n, float *const *y, const float *x, const weight *const *w, const float *const *bias,
                  int T, int n_in, const int *n_out);

// out = x / rms(x) * w (w may be NULL: no scale; plus_one: (1 + w)), per row.
void rmsnorm(float *out, const float *x, const float *w, int T, int n, float eps, int plus_one);
// out = (x - mean) / std * w + b, per row.
void layernorm(float *out, const float *x, const float *w, const float *b, int T, int n, float eps);

// Rotates the n_heads heads of x (head_dim each) at position pos.
void rope(float *x, int n_heads, int head_dim, int pos, const rope_table *r);

// In place: softmax over n values.
void softmax(float *x, int n);

void activate(float *x, int n, int act);     // enum act_kind
// The same as ggml's CPU backend computes it (GELU from an f16 table).
void activate_ggml(float *x, int n, int act);
// The same with the scalar kernels only (the reference backend).
void activate_ref(float *x, int n, int act);
void activate_ggml_ref(float *x, int n, int act);
void softcap(float *x, int n, float cap);    // cap * tanh(x / cap)

// Decodes row `row` of a 2-D tensor (n elements) into f32.
void tensor_row(const tensor *t, int64_t row, float *out);

#endif
