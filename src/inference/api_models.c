// The models part of the public API (infer.h): a model's numbers and
// description, storage types by name, and writing GGUF files (convert,
// quantize). Defined here, where infer.h's INFER_API reaches them (the
// library exports nothing else); the work is the models part's.
#include "infer.h"
#include "models/gguf_convert.h"
#include "models/gguf_quantize.h"
#include "models/quant_mix.h"
#include "models/model.h"
#include "tensor/dtype.h"
#include "base/error.h"
#include "base/tmpfile.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// A loaded model

int infer_model_n_vocab(const infer_model *m) { return m->cfg.n_vocab; }
int infer_model_n_layer(const infer_model *m) { return m->cfg.n_layer; }
int infer_model_n_embd(const infer_model *m) { return m->cfg.n_embd; }
const char *infer_model_arch(const infer_model *m) { return m->cfg.model_type; }
const char *infer_model_ftype(const infer_model *m) { return model_ftype(m); }
int64_t infer_model_n_params(const infer_model *m) { return model_n_params(m); }
size_t infer_model_tensor_bytes(const infer_model *m) { return model_tensor_bytes(m); }

int infer_model_eos(const infer_model *m, int32_t *ids, int max) {
    int n = 0;
    for (int i = 0; i < m->cfg.n_eos && n < max; i++) ids[n++] = m->cfg.eos[i];
    return n;
}

size_t infer_model_describe(const infer_model *m, char *buf, size_t cap) { return model_describe(m, buf, cap); }
infer_status infer_model_check_tensors(infer_model *m) { return model_check_tensors(m); }

// ---------------------------------------------------------------------------
// Storage types

// infer.h numbers the types as ggml does, and so does enum dtype.
#define SAME(t) ((int)INFER_TYPE_##t == (int)DT_##t)
_Static_assert(SAME(F32) && SAME(F16) && SAME(Q4_0) && SAME(Q4_1) && SAME(Q5_0) && SAME(Q5_1) && SAME(Q8_0) && SAME(Q2_K) &&
                   SAME(Q3_K) && SAME(Q4_K) && SAME(Q5_K) && SAME(Q6_K) && SAME(BF16) && SAME(MXFP4),
               "infer.h's INFER_TYPE_* differ from enum dtype");

const char *infer_type_name(int type) {
    const dtype_traits *tr = dtype_get(type);
    return tr ? tr->name : NULL;
}

int infer_type_block_size(int type) {
    const dtype_traits *tr = dtype_get(type);
    return tr ? tr->blck : 0;
}

const char *infer_ftype_names(void) { return quant_mix_names(); }

int infer_ftype_known(const char *ftype) {
    quant_mix probe;
    return quant_mix_init(&probe, ftype, 1, 0, 0) != 0;
}

// ---------------------------------------------------------------------------
// Writing GGUF files

// An output is never one of the files its input is read from (the model's
// file or directory, its shards, the vocabulary's GGUF).
static infer_status not_input(const infer_model *m, const char *path, const char *other) {
    int same = same_file(path, m->path) || (other && same_file(path, other));
    for (int i = 0; i < m->store.n_files && !same; i++) same = same_file(path, m->store.files[i].path);
    if (same) return fail(INFER_ERR_ARG, "%s: this is a file the model is read from; write the output to another path", path);
    return INFER_OK;
}

infer_status infer_convert_gguf(const infer_model *m, const char *path, const char *ftype) {
    infer_status st = not_input(m, path, NULL);
    return st ? st : gguf_convert_mix(m, path, ftype);
}

infer_status infer_convert_gguf_vocab(const infer_model *m, const char *path, const char *ftype, const char *vocab_from) {
    infer_status st = not_input(m, path, vocab_from);
    return st ? st : gguf_convert_mix_vocab(m, path, ftype, vocab_from);
}

infer_status infer_convert_gguf_spec(const infer_model_spec *spec, const char *path, const char *ftype, const char *vocab_from) {
    if (!spec->name || !*spec->name) return fail(INFER_ERR_ARG, "convert: the model spec has no name");
    if (vocab_from && same_file(path, vocab_from))
        return fail(INFER_ERR_ARG, "%s: this is the file the vocabulary is read from; write the output to another path", path);
    infer_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(spec->name))) { free(m); return fail(INFER_ERR_NOMEM, "out of memory"); }
    infer_status st = model_from_spec(m, spec);
    if (!st) st = gguf_convert_mix_vocab(m, path, ftype, vocab_from);
    model_release(m);
    free(m->path);
    free(m);
    return st;
}

infer_status infer_quantize_gguf(const infer_model *m, const char *path, const char *ftype) {
    infer_status st = not_input(m, path, NULL);
    return st ? st : gguf_quantize(m, path, ftype);
}

void infer_abandon_writes(void) { tmp_abandon(); }
