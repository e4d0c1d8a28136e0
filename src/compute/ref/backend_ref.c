// The reference backend: every layer operation in plain scalar C on one
// thread, with the types' scalar oracle kernels (tensor/vecdot_ref.c) for
// the products. It is the oracle of the CPU backend (and of the next ones):
// written to be read, not to be fast.
#include "compute/backend.h"
#include "compute/cpu/attn.h"
#include "compute/cpu/vec.h"
#include "tensor/dtype.h"
#include "tensor/vecdot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// y (T, n_out) = x W^T + bias, one dot per output element. Quantized
// weights meet x quantized to their activation type, as the CPU backend's
// integer kernels do; float weights meet x itself.
static void ref_matmul(backend *b, float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    const tensor *W = w->w;
    const dtype_traits *tr = dtype_get(W->type);
    if (w->trans) { // stored [n_in, n_out] (GPT-2's Conv1D): y[t] = sum_i x[t][i] W[i]
        float *row = malloc(sizeof(float) * (size_t)n_out);
        if (!row) { b->ex->oom = 1; return; }
        for (int t = 0; t < T; t++) {
            float *yt = y + (size_t)t * n_out;
            for (int j = 0; j < n_out; j++) yt[j] = bias ? bias[j] : 0.0f;
            for (int i = 0; i < n_in; i++) {
                tensor_row(W, i, row);
                for (int j = 0; j < n_out; j++) yt[j] += x[(size_t)t * n_in + i] * row[j];
            }
        }
        free(row);
        return;
    }
    const vecdot_kernel *k = w->ggml ? vecdot_get_ggml_ref(W->type) : vecdot_get_ref(W->type);
    size_t rs = dtype_row_size(W->type, n_in);
    unsigned char *xq = NULL;
    if (k && k->quant) {
        xq = malloc(act_row_size(k, n_in));
        if (!xq) { b->ex->oom = 1; return; }
    }
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n_in;
        if (xq) k->quant(xt, xq, n_in);
        for (int j = 0; j < n_out; j++) {
            const void *row = (const char *)W->data + rs * (size_t)j;
            float s = !k ? tr->dot(row, xt, n_in) : k->dot(row, xq ? (const void *)xq : (const void *)xt, n_in);
            y[(size_t)t * n_out + j] = s + (bias ? bias[j] : 0.0f);
        }
    }
    free(xq);
}

static void ref_matmul_multi(backend *b, int n, float *const *y, const float *x, const weight *const *w,
                             const float *const *bias, int T, int n_in, const int *n_out) {
    for (int i = 0; i < n; i++) ref_matmul(b, y[i], x, w[i], bias[i], T, n_in, n_out[i]);
}

static void ref_norm(backend *b, float *out, const float *x, const float *w, const float *bias, int rows, int n, float eps,
                     int kind) {
    (void)b;
    for (int t = 0; t < rows; t++) {
        const float *xt = x + (size_t)t * n;
        float *ot = out + (size_t)t * n;
        if (kind == NORM_OP_LAYER) {
            layernorm(ot, xt, w, bias, 1, n, eps); // scalar
            continue;
        }
        float r = 1.0f / sqrtf((float)(vec_sumsq_ref(xt, n) / n) + eps);
        for (int i = 0; i < n; i++) ot[i] = xt[i] * r * (w ? (kind == NORM_OP_RMS_PLUS_ONE ? 1.0f + w[i] : w[i]) : 1.0f);
    }
}

static void ref_rope(backend *b, float *x, int rows, int heads, int hd, const int *pos, const rope_table *r) {
    (void)b;
    for (int t = 0; t < rows; t++) rope(x + (size_t)t * heads * hd, heads, hd, pos[t], r); // scalar
}

// Each query row and head on its own: scores over its window, softcap,
// softmax (with the sink's share), then the probability-weighted values.
static void ref_attention(backend *b, const attn_desc *d) {
    (void)b;
    int group = d->H / d->KV, nq = d->H * d->hd, nkv = d->KV * d->hd, hd = d->hd;
    float *s = d->scores;
    for (int t = 0; t < d->T; t++) {
        int hi = d->pos[t], lo = d->window && hi - d->window + 1 > 0 ? hi - d->window + 1 : 0, n = hi - lo + 1;
        for (int h = 0; h < d->H; h++) {
            const float *q = d->q + (size_t)t * nq + (size_t)h * hd;
            // (the head's rows in the caches' types)
            size_t ks = kv_bytes(d->kt, (size_t)nkv), vs = kv_bytes(d->vt, (size_t)nkv);
            const char *k = (const char *)d->k[t] + kv_bytes(d->kt, (size_t)(h / group) * hd);
            const char *v = (const char *)d->v[t] + kv_bytes(d->vt, (size_t)(h / group) * hd);
            for (int p = lo; p <= hi; p++) {
                const char *kp = k + ks * p;
                float dot = 0;
                for (int i = 0; i < hd; i++) dot += q[i] * kv_at(kp, d->kt, i);
                s[p - lo] = dot * d->scale;
            }
            if (d->softcap)
                for (int i = 0; i < n; i++) s[i] = d->softcap * tanhf(s[i] / d->softcap);
            if (d->sinks) {
                s[n] = d->sinks[h];
                vec_softmax_ref(s, n + 1);
            } else {
                vec_softmax_ref(s, n);
            }
            if (d->ggml_numerics) vec_round_f16_ref(s, (size_t)n);
            float *o = d->out + (size_t)t * nq + (size_t)h * hd;
            memset(o, 0, sizeof(float) * (size_t)hd);
            for (int p = lo; p <= hi; p++)
                for (int i = 0; i < hd; i++) o[i] += s[p - lo] * kv_at(v + vs * p, d->vt, i);
        }
    }
}

static void ref_act(backend *b, float *x, int rows, int n, int act, int ggml) {
    (void)b;
    if (ggml) activate_ggml_ref(x, rows * n, act);
    else activate_ref(x, rows * n, act);
}

static void ref_glu(backend *b, float *g, const float *u, int rows, int n, int act, int ggml) {
    ref_act(b, g, rows, n, act, ggml);
    if (u)
        for (size_t i = 0; i < (size_t)rows * n; i++) g[i] *= u[i];
}

static void ref_residual(backend *b, float *x, const float *o, float s, int rows, int n) {
    (void)b;
    for (size_t i = 0; i < (size_t)rows * n; i++) x[i] += o[i] * s;
}

static void ref_round_f16(backend *b, float *x, size_t n) { (void)b; vec_round_f16_ref(x, n); }

static void ref_softmax(backend *b, float *x, int n) { (void)b; vec_softmax_ref(x, n); }

const backend_ops backend_ref_ops = {
    .name = "reference",
    .matmul = ref_matmul,
    .matmul_multi = ref_matmul_multi,
    .norm = ref_norm,
    .rope = ref_rope,
    .attention = ref_attention,
    .act = ref_act,
    .glu = ref_glu,
    .residual = ref_residual,
    .round_f16 = ref_round_f16,
    .softmax = ref_softmax,
    HOST_MEM_OPS,
    HOST_DATA_OPS,
    .host = 1,
};
