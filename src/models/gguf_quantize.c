// infer quantize: a GGUF file -> the same model with its matrices re-encoded
// to a named mix (as llama-quantize does). Metadata is copied as it is but
// for general.file_type; each tensor is decoded row by row from its stored
// type and encoded to the type the mix picks for it.
#include "models/gguf_quantize.h"
#include "models/gguf_write.h"
#include "models/quant_mix.h"
#include "tensor/dtype.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const tensor *t;
    size_t row_bytes;
} src;

static infer_status src_row(void *u, int64_t r, float *out) {
    const src *s = u;
    dtype_get(s->t->type)->to_float((const char *)s->t->data + s->row_bytes * (size_t)r, out, s->t->ne[0]);
    return INFER_OK;
}

infer_status gguf_quantize(const infer_model *m, const char *out_path, const char *mix_name) {
    const gguf_file *g = m->gguf;
    if (!g) return fail(INFER_ERR_ARG, "quantize: %s is not a GGUF file (use infer convert for Hugging Face models)", m->path);
    int tied = 1;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, "output.weight")) tied = 0;
    quant_mix mix;
    if (!quant_mix_init(&mix, mix_name, m->cfg.n_layer, m->cfg.n_expert, tied))
        return fail(INFER_ERR_ARG, "quantize: unknown type \"%s\" (%s)", mix_name, quant_mix_names());

    gguf_writer *w = gguf_writer_new();
    src *srcs = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *srcs);
    if (!w || !srcs) { gguf_writer_free(w); free(srcs); return fail(INFER_ERR_NOMEM, "out of memory"); }
    infer_status st = INFER_OK;
    for (uint64_t i = 0; i < g->n_kv && !st; i++) {
        if (!strcmp(g->keys[i], "general.alignment") || !strcmp(g->keys[i], "general.file_type") ||
            !strcmp(g->keys[i], "general.quantization_version"))
            continue;
        st = gguf_set_value(w, g->keys[i], &g->vals[i]);
    }
    if (!st) st = gguf_set_u32(w, "general.quantization_version", 2);
    if (!st) st = gguf_set_u32(w, "general.file_type", (uint32_t)mix.ftype);
    for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
        const gguf_tensor_info *ti = &g->tensors[i];
        const tensor *t = store_find(&m->store, ti->name);
        if (!t) { st = fail(INFER_ERR_FORMAT, "quantize: tensor %s not found", ti->name); break; }
        if (t->type < 0 || !dtype_get(t->type)) {
            st = fail(INFER_ERR_UNSUPPORTED, "quantize: tensor %s has type %s, which cannot be decoded", t->name, t->type_name);
            break;
        }
        int type = quant_mix_type(&mix, t->name, t->nd, t->ne[0], t->type);
        if (type == t->type) {
            st = gguf_add_tensor_raw(w, t->name, type, t->nd, t->ne, t->data, t->nbytes);
        } else {
            srcs[i].t = t;
            srcs[i].row_bytes = dtype_row_size(t->type, t->ne[0]);
            st = gguf_add_tensor(w, t->name, type, t->nd, t->ne, src_row, &srcs[i]);
        }
    }
    if (!st) st = gguf_write_file(w, out_path);
    gguf_writer_free(w);
    free(srcs);
    return st;
}
