// A model's files: a GGUF's metadata and tensors, the slots bound to them,
// and their release. (infer_model_load, inference/model_load.c, chooses the
// source: a Hugging Face directory, a GGUF file, or a vindex.)
#include "models/model.h"
#include "base/comm.h"
#include "models/quant_mix.h"
#include "tensor/dtype.h"
#include "models/gguf.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// A GGUF file: metadata -> config (rope_freqs.weight folded into the rope
// tables), tensors -> store, then the same binding as safetensors.
infer_status model_load_gguf(infer_model *m, const char *path, const tensor *embd) {
    infer_status st = gguf_open(&m->gguf, path);
    if (st) return st;
    st = store_add_gguf(&m->store, m->gguf);
    if (st) return st;
    store_sort(&m->store);
    const tensor *rf = store_find(&m->store, "rope_freqs.weight");
    if (rf && (rf->type != DT_F32 || rf->nd != 1 || rf->ne[0] > (1 << 20)))
        return fail(INFER_ERR_FORMAT, "%s: rope_freqs.weight must be a 1-D f32 tensor", path);
    const tensor *te = embd ? embd : store_find(&m->store, "token_embd.weight");
    return config_from_gguf(&m->cfg, m->gguf, rf ? rf->data : NULL, rf ? (int)rf->ne[0] : 0, te && te->nd == 2 ? te->ne[1] : 0);
}

infer_status model_from_spec(infer_model *m, const infer_model_spec *s) {
    if (!s->config) return fail(INFER_ERR_ARG, "%s: the model spec has no config", s->name);
    infer_status st = config_parse(&m->cfg, s->config, s->name);
    if (!st && m->cfg.n_expert) st = fail(INFER_ERR_UNSUPPORTED, "%s: a model spec with experts (views of declared tensors)", s->name);
    if (!st) st = store_declare(&m->store, s->tensors, s->n_tensors, s->fill, s->user);
    if (!st) st = model_bind(m);
    return st;
}

void model_release(infer_model *m) {
    for (int i = 0; i < m->store.n; i++) free(m->store.t[i].f32);
    if (m->layers)
        for (int il = 0; il < m->cfg.n_layer; il++) {
            layer_weights *l = &m->layers[il];
            if (l->exp_gate_up_b)
                for (int e = 0; e < m->cfg.n_expert; e++) free(l->exp_gate_up_b[e].f32);
            if (l->exp_down_b)
                for (int e = 0; e < m->cfg.n_expert; e++) free(l->exp_down_b[e].f32);
            free(l->exp_gate);
            free(l->exp_up);
            free(l->exp_gate_up);
            free(l->exp_down);
            if (l->exp_gate_b)
                for (int e = 0; e < m->cfg.n_expert; e++) free(l->exp_gate_b[e].f32);
            if (l->exp_up_b)
                for (int e = 0; e < m->cfg.n_expert; e++) free(l->exp_up_b[e].f32);
            free(l->exp_gate_up_b);
            free(l->exp_down_b);
            free(l->exp_gate_b);
            free(l->exp_up_b);
        }
    free(m->layers);
    free(m->views);
    for (int i = 0; i < m->n_packs; i++) free(m->packs[i]);
    free(m->packs);
    for (int i = 0; i < m->n_tp_keep; i++) free(m->tp_keep[i]);
    free(m->tp_keep);
    comm_close(m->comm); // (its NCCL communicator, the inference's, is closed before: infer_model_free)
    store_close(&m->store);
    gguf_close(m->gguf);
    config_free(&m->cfg);
}

const char *model_ftype(const infer_model *m) {
    int64_t ft;
    if (m->gguf && gguf_find(m->gguf, "general.file_type") && !gguf_get_int(m->gguf, "general.file_type", 0, 1 << 20, &ft)) {
        const char *name = llama_ftype_name((int)ft);
        if (name) return name;
    }
    size_t bytes[DT_COUNT] = {0};
    for (int i = 0; i < m->store.n; i++)
        if (m->store.t[i].nd >= 2 && m->store.t[i].type >= 0) bytes[m->store.t[i].type] += m->store.t[i].nbytes;
    int best = DT_F32;
    for (int k = 0; k < DT_COUNT; k++)
        if (bytes[k] > bytes[best]) best = k;
    return dtype_get(best) ? dtype_get(best)->name : "?";
}

int64_t model_n_params(const infer_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->store.n; i++) n += tensor_nelem(&m->store.t[i]);
    return n;
}

size_t model_tensor_bytes(const infer_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->store.n; i++) n += m->store.t[i].nbytes;
    return n;
}

#define ADD(...) do { int k_ = snprintf(buf + o, o < cap ? cap - o : 0, __VA_ARGS__); if (k_ > 0) o += (size_t)k_; } while (0)

size_t model_describe(const infer_model *m, char *buf, size_t cap) {
    size_t o = config_describe(&m->cfg, buf, cap);
    int64_t counts[DT_COUNT + 1] = {0}, params = 0, other = 0;
    for (int i = 0; i < m->store.n; i++) {
        const tensor *t = &m->store.t[i];
        if (t->type >= 0) counts[t->type]++;
        else other++;
        params += tensor_nelem(t);
    }
    if (m->gguf) ADD("gguf                 = version %u, %llu keys, alignment %u\n", m->gguf->version,
                     (unsigned long long)m->gguf->n_kv, m->gguf->alignment);
    ADD("tensors              = %d (%d files):", m->store.n, m->store.n_files + (m->gguf != NULL));
    for (int k = 0; k < DT_COUNT; k++)
        if (counts[k]) ADD(" %s %lld", dtype_get(k) ? dtype_get(k)->name : "?", (long long)counts[k]);
    if (other) ADD(" other %lld", (long long)other);
    ADD("\n");
    if (m->n_unused) ADD("tensors not used     = %d\n", m->n_unused);
    ADD("parameters           = %lld (%.2f M)\n", (long long)params, params / 1e6);
    ADD("bytes mapped         = %zu (%.2f MiB)\n", m->store.bytes_mapped, m->store.bytes_mapped / 1048576.0);
    ADD("load time            = %.3f ms\n", m->load_seconds * 1e3);
    return o;
}
