// The data-movement and elementwise ops of the host backends (backend.h).
#include "compute/backend.h"
#include "compute/cpu/ops.h"
#include "compute/cpu/vec.h"
#include "tensor/vecdot.h"
#include "base/nan.h"

#include <math.h>
#include <string.h>

void host_embed(backend *b, float *out, const tensor *table, const int32_t *ids, int T, float scale) {
    (void)b;
    int n = (int)table->ne[0];
    for (int t = 0; t < T; t++) {
        float *x = out + (size_t)t * n;
        tensor_row(table, ids[t], x);
        for (int i = 0; i < n; i++) x[i] *= scale;
    }
}

void host_copy(backend *b, float *dst, size_t dst_stride, const float *src, size_t src_stride, int rows, int n) {
    (void)b;
    for (int r = 0; r < rows; r++) memmove(dst + dst_stride * r, src + src_stride * r, sizeof(float) * (size_t)n);
}

void host_scale(backend *b, float *x, size_t n, float s) {
    (void)b;
    if (s == 0.0f) memset(x, 0, sizeof(float) * n);
    else
        for (size_t i = 0; i < n; i++) x[i] *= s;
}

void host_mul(backend *b, float *x, size_t x_stride, const float *y, size_t y_stride, int rows, int n) {
    (void)b;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) x[x_stride * r + i] *= y[y_stride * r + i];
}

void host_softcap(backend *b, float *x, size_t n, float cap) {
    (void)b;
    softcap(x, (int)n, cap);
}

void host_download(backend *b, float *host, const float *src, size_t n) {
    (void)b;
    if (host != src) memmove(host, src, sizeof(float) * n);
}

void host_upload(backend *b, float *dst, const float *host, size_t n) {
    (void)b;
    if (dst != host) memmove(dst, host, sizeof(float) * n);
}

const char *kv_type_name(int type) {
    static const char *const names[KV_TYPES] = {"f32", "f16", "q8_0"};
    return type >= 0 && type < KV_TYPES ? names[type] : "?";
}

void host_kv_store(backend *b, void *const *cache, int type, const int *pos, const float *src, int T, int n) {
    (void)b;
    size_t rb = kv_bytes(type, (size_t)n);
    for (int t = 0; t < T; t++) {
        void *row = (char *)cache[t] + (size_t)pos[t] * rb;
        const float *x = src + (size_t)t * n;
        if (type == KV_F16) vec_to_f16(row, x, (size_t)n);
        else if (type == KV_Q8_0) act_quant_q8_0(x, row, n); // (as ggml's CPU backend copies f32 rows into a q8_0 cache)
        else memcpy(row, x, sizeof(float) * (size_t)n);
    }
}

void host_glu_oss(backend *b, float *out, const float *gate, size_t gs, const float *up, size_t us, int n) {
    (void)b;
    for (int i = 0; i < n; i++) {
        float gv = gate[(size_t)i * gs], uv = up[(size_t)i * us];
        gv = gv > 7.0f ? 7.0f : gv;
        uv = uv > 7.0f ? 7.0f : uv < -7.0f ? -7.0f : uv;
        out[i] = (uv + 1.0f) * gv / (1.0f + expf(-1.702f * gv));
    }
}

void host_argmax(backend *b, int32_t *out, const float *x, int rows, int n) {
    (void)b;
    for (int r = 0; r < rows; r++) {
        const float *v = x + (size_t)r * n;
        int best = 0;
        // (this loop as it is: gcc -O2 makes `v[i] > v[best]` alone a 3x slower loop, 0.5 ms a row of 262k at -t 2)
        for (int i = 1; i < n; i++)
            if (v[i] > v[best] || (v[best] != v[best] && v[i] == v[i])) best = i;
        out[r] = has_nan(v, (size_t)n) ? -1 : best; // (a row holding a NaN has no largest value)
    }
}

void qkv_prep_ops(backend *b, const qkv_desc *d) {
    const backend_ops *o = b->ops;
    int T = d->T, nq = d->H * d->hd, nkv = d->KV * d->hd;
    if (d->q_norm) o->norm(b, d->q, d->q, d->q_norm, NULL, T * nq / d->qn, d->qn, d->eps, d->norm_kind);
    if (d->k) {
        if (d->k_norm) o->norm(b, d->k, d->k, d->k_norm, NULL, T * nkv / d->kn, d->kn, d->eps, d->norm_kind);
        if (d->v_norm) o->norm(b, d->v, d->v, NULL, NULL, T * d->KV, d->hd, d->eps, NORM_OP_RMS);
    }
    if (d->rope) {
        o->rope(b, d->q, T, d->H, d->hd, d->pos, d->rope);
        if (d->k) o->rope(b, d->k, T, d->KV, d->hd, d->pos, d->rope);
    }
    if (d->round) {
        o->round_f16(b, d->q, (size_t)T * nq);
        if (d->k) o->round_f16(b, d->k, (size_t)T * nkv), o->round_f16(b, d->v, (size_t)T * nkv);
    }
    if (d->k) {
        o->kv_store(b, d->k_cache, d->kt, d->pos, d->k, T, nkv);
        o->kv_store(b, d->v_cache, d->vt, d->pos, d->v, T, nkv);
    }
}
