// index.json of a vindex: what the model is (its full config: config.json of
// a Hugging Face source, or the GGUF metadata that is not an array, plus the
// values we parsed), the types, where every layer's part lies, and the size
// and sha256 of every file. vindex_open (open.c) is its reader.
#include "vindex/extract_impl.h"
#include "tensor/dtype.h"
#include "models/gguf.h"
#include "base/mapfile.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// One GGUF scalar or string as JSON (NULL for arrays: tokenizer vocabularies
// and the like are far too big for an index and stay in weights.gguf).
static cJSON *gguf_json(const gguf_value *v) {
    const unsigned char *p = v->data;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32; uint64_t u64;
            int64_t i64; double f64; } x;
    size_t n = gguf_type_size(v->type);
    if (n) memcpy(&x, p, n);
    switch (v->type) {
    case GGUF_U8: return cJSON_CreateNumber(x.u8);
    case GGUF_I8: return cJSON_CreateNumber(x.i8);
    case GGUF_U16: return cJSON_CreateNumber(x.u16);
    case GGUF_I16: return cJSON_CreateNumber(x.i16);
    case GGUF_U32: return cJSON_CreateNumber(x.u32);
    case GGUF_I32: return cJSON_CreateNumber(x.i32);
    case GGUF_F32: return cJSON_CreateNumber(x.f32);
    case GGUF_U64: return cJSON_CreateNumber((double)x.u64);
    case GGUF_I64: return cJSON_CreateNumber((double)x.i64);
    case GGUF_F64: return cJSON_CreateNumber(x.f64);
    case GGUF_BOOL: return cJSON_CreateBool(x.u8 != 0);
    case GGUF_STRING: {
        char *s = strndup((const char *)p, (size_t)v->n); // stops at a NUL inside, as C strings must
        cJSON *j = s ? cJSON_CreateString(s) : NULL;
        free(s);
        return j;
    }
    }
    return NULL;
}

// "config": the source's own description of the model.
static cJSON *source_config(const infer_model *m) {
    if (m->gguf) {
        cJSON *o = cJSON_CreateObject();
        for (uint64_t i = 0; o && i < m->gguf->n_kv; i++)
            if (m->gguf->vals[i].type != GGUF_ARRAY) cJSON_AddItemToObject(o, m->gguf->keys[i], gguf_json(&m->gguf->vals[i]));
        return o;
    }
    char path[4096], *text = NULL;
    snprintf(path, sizeof path, "%s/config.json", m->path);
    if (read_text_file(path, 16u << 20, &text, NULL)) return NULL;
    cJSON *o = cJSON_Parse(text);
    free(text);
    return o;
}

static cJSON *range_json(int file, vrange r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", vindex_file_names[file]);
    cJSON_AddNumberToObject(o, "offset", (double)r.off);
    cJSON_AddNumberToObject(o, "bytes", (double)r.bytes);
    return o;
}

static const char *tname(int t) { return dtype_get(t)->name; }

infer_status vindex_write_index(const infer_model *m, const char *path, const vindex_layout *lay) {
    const infer_config *c = &m->cfg;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", VINDEX_FORMAT);
    cJSON_AddNumberToObject(root, "version", VINDEX_VERSION);
    cJSON *cfg = source_config(m);
    if (!cfg) { cJSON_Delete(root); return fail(INFER_ERR_FORMAT, "%s: cannot re-read the model's config for index.json", m->path); }
    cJSON_AddItemToObject(root, "config", cfg);

    cJSON *mo = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(mo, "architecture", c->model_type);
    cJSON_AddStringToObject(mo, "source", m->path);
    cJSON_AddStringToObject(mo, "source_format", m->gguf ? "gguf" : "safetensors");
    cJSON_AddNumberToObject(mo, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(mo, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(mo, "n_vocab", c->n_vocab);
    cJSON *nff = cJSON_AddArrayToObject(mo, "n_ff");
    for (int il = 0; il < lay->n_layer; il++) cJSON_AddItemToArray(nff, cJSON_CreateNumber(lay->n_feat[il]));
    cJSON_AddBoolToObject(mo, "gated", lay->gated);
    cJSON_AddStringToObject(mo, "activation", act_kind_name(c->act));
    cJSON_AddBoolToObject(mo, "tied_output", !m->output.w || m->output.w == m->tok_embd);

    cJSON *ty = cJSON_AddObjectToObject(root, "types");
    cJSON_AddStringToObject(ty, "gate", tname(lay->types[0]));
    cJSON_AddStringToObject(ty, "ffn", tname(lay->types[1]));
    cJSON_AddStringToObject(ty, "lm_head", tname(lay->types[2]));
    cJSON_AddStringToObject(ty, "embeddings", tname(lay->types[3]));
    cJSON *rq = cJSON_AddObjectToObject(root, "types_requested");
    cJSON_AddStringToObject(rq, "gate", tname(lay->requested[0]));
    cJSON_AddStringToObject(rq, "ffn", tname(lay->requested[1]));
    cJSON_AddStringToObject(rq, "lm_head", tname(lay->requested[2]));

    cJSON_AddNumberToObject(root, "down_top", lay->down_top);
    cJSON_AddStringToObject(root, "down_meta_layout",
                            "per layer, per feature: down_top int32 token ids, then down_top f32 scores "
                            "(output weight row . down vector, no final norm or softcap), by score descending");
    cJSON_AddStringToObject(root, "ffn_layout", lay->gated ? "per feature: gate row, up row, down vector"
                                                            : "per feature: up row, zeros, down vector (not gated)");
    cJSON_AddItemToObject(root, "embeddings", range_json(VF_EMBD, lay->embd));
    cJSON_AddItemToObject(root, "lm_head", range_json(VF_LM, lay->lm));
    cJSON_AddStringToObject(root, "weights", vindex_file_names[VF_WEIGHTS]);

    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int il = 0; il < lay->n_layer; il++) {
        cJSON *l = cJSON_CreateObject();
        cJSON_AddNumberToObject(l, "features", lay->n_feat[il]);
        cJSON_AddItemToObject(l, "gate_vectors", range_json(VF_GATE, lay->gate[il]));
        cJSON_AddItemToObject(l, "ffn", range_json(VF_FFN, lay->ffn[il]));
        cJSON_AddItemToObject(l, "down_meta", range_json(VF_META, lay->meta[il]));
        cJSON_AddItemToArray(layers, l);
    }
    cJSON *files = cJSON_AddObjectToObject(root, "files");
    for (int i = 0; i < VF_COUNT; i++) {
        cJSON *f = cJSON_AddObjectToObject(files, vindex_file_names[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)lay->file_bytes[i]);
        cJSON_AddStringToObject(f, "sha256", lay->sha256[i]);
    }
    for (int i = 0; i < VF_OPT_COUNT; i++) {
        if (!lay->opt_present[i]) continue;
        cJSON *f = cJSON_AddObjectToObject(files, vindex_opt_names[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)lay->opt_bytes[i]);
        cJSON_AddStringToObject(f, "sha256", lay->opt_sha256[i]);
    }

    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    // beside it, then renamed: the index (which makes the vindex) appears whole or not at all
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) { free(text); return fail(INFER_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n && fputc('\n', f) != EOF;
    ok &= fclose(f) == 0;
    free(text);
    if (ok && rename(tmp, path) == 0) return INFER_OK;
    int e = errno;
    unlink(tmp);
    return fail(INFER_ERR_IO, "%s: write failed: %s", path, strerror(e));
}
