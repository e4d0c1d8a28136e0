// weights.gguf of a vindex: the model minus what the vindex's .bin files hold
// (the dense FFN matrices and the token embedding), so the vindex alone runs
// the model. A GGUF source is copied: its metadata as it is and its other
// tensors byte for byte. A Hugging Face source goes through the HF -> GGUF
// conversion (gguf_convert.c) with every matrix kept in its stored type.
#include "vindex/extract_impl.h"
#include "models/gguf.h"
#include "models/gguf_convert.h"
#include "models/gguf_write.h"
#include "base/error.h"

#include <string.h>

// A tensor the vindex holds elsewhere (a tied output head is tok_embd itself).
static int held_elsewhere(const infer_model *m, const tensor *t) {
    if (t == m->tok_embd) return 1;
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        if (t == l->ffn_gate.w || t == l->ffn_up.w || t == l->ffn_gate_up.w || t == l->ffn_down.w) return 1;
    }
    return 0;
}

static infer_status copy_gguf(const infer_model *m, const char *path) {
    const gguf_file *g = m->gguf;
    gguf_writer *w = gguf_writer_new();
    if (!w) return fail(INFER_ERR_NOMEM, "out of memory");
    infer_status st = INFER_OK;
    for (uint64_t i = 0; i < g->n_kv && !st; i++)
        if (strcmp(g->keys[i], "general.alignment")) st = gguf_set_value(w, g->keys[i], &g->vals[i]);
    for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
        const gguf_tensor_info *ti = &g->tensors[i];
        const tensor *t = store_find(&m->store, ti->name);
        if (t && held_elsewhere(m, t)) continue;
        st = gguf_add_tensor_raw(w, ti->name, (int)ti->type, (int)ti->n_dims, ti->ne, g->base + g->data_offset + ti->offset,
                                 (size_t)ti->nbytes);
    }
    if (!st) st = gguf_write_file(w, path);
    gguf_writer_free(w);
    return st;
}

infer_status vindex_write_weights(const infer_model *m, const char *path) {
    if (m->gguf) return copy_gguf(m, path);
    gguf_convert_opts o = {.keep_types = 1, .skip_ffn = 1, .skip_tok_embd = 1};
    return gguf_convert_part(m, path, &o);
}
