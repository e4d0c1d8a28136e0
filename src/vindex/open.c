// Opening a vindex: index.json is read and every number in it is checked
// before it is used: counts against fixed bounds, types against the rows,
// each byte range against its file (aligned, inside, exact size, not
// overlapping another), and file sizes against the disk. Then the .bin files
// are mapped and the tensors are views into them.
#include "vindex/vindex_impl.h"
#include "tensor/dtype.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const vindex_file_names[VF_COUNT] = {"gate_vectors.bin", "ffn.bin", "down_meta.bin",
                                                 "embeddings.bin", "lm_head.bin", "weights.gguf"};
const char *const vindex_opt_names[VF_OPT_COUNT] = {"tokenizer.json", "tokenizer_config.json", "lm_index.bin"};

int vindex_type_by_name(const char *name) {
    for (int t = 0; t < DT_COUNT; t++)
        if (dtype_get(t) && !strcmp(dtype_get(t)->name, name)) return t;
    return -1;
}

// A byte range some field claims, for the overlap check.
typedef struct {
    int file;
    uint64_t off, bytes;
    char what[64];
} claim;

typedef struct {
    const char *path; // index.json, for messages
    vindex *v;
    claim *claims;
    int n_claims, cap_claims;
} parser;

#define JMAX 9007199254740992.0 // 2^53: larger JSON numbers are not exact integers

static const char *dot(const char *where) { return *where ? "." : ""; }

static const cJSON *item(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

// obj[key], of a JSON type checked by is (cJSON_IsObject, ...).
static infer_status get_item(parser *p, const cJSON *obj, const char *key, const char *where, cJSON_bool (*is)(const cJSON *),
                             const char *kind, const cJSON **out) {
    const cJSON *it = item(obj, key);
    if (!it) return fail(INFER_ERR_FORMAT, "%s: %s%s%s is missing", p->path, where, dot(where), key);
    if (!is(it)) return fail(INFER_ERR_FORMAT, "%s: %s%s%s must be %s", p->path, where, dot(where), key, kind);
    *out = it;
    return INFER_OK;
}

// An integer in [lo, hi] (hi <= 2^53).
static infer_status get_int(parser *p, const cJSON *obj, const char *key, const char *where, int64_t lo, int64_t hi,
                            int64_t *out) {
    const cJSON *it;
    infer_status st = get_item(p, obj, key, where, cJSON_IsNumber, "a number", &it);
    if (st) return st;
    double d = it->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return fail(INFER_ERR_FORMAT, "%s: %s%s%s = %.17g is not an integer in [%lld, %lld]", p->path, where, dot(where), key,
                    d, (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return INFER_OK;
}

static infer_status get_str(parser *p, const cJSON *obj, const char *key, const char *where, const char **out) {
    const cJSON *it;
    infer_status st = get_item(p, obj, key, where, cJSON_IsString, "a string", &it);
    if (!st) *out = it->valuestring;
    return st;
}

// A type name of "types" whose blocks divide a row of H.
static infer_status get_type(parser *p, const cJSON *types, const char *key, int *out) {
    const char *name;
    infer_status st = get_str(p, types, key, "types", &name);
    if (st) return st;
    int t = vindex_type_by_name(name);
    if (t < 0) return fail(INFER_ERR_FORMAT, "%s: types.%s: unknown type \"%s\"", p->path, key, name);
    if (!dtype_get(t)->to_float || !dtype_row_size(t, p->v->n_embd))
        return fail(INFER_ERR_FORMAT, "%s: types.%s: rows of %d are not whole %s blocks", p->path, key, p->v->n_embd, name);
    *out = t;
    return INFER_OK;
}

// {"file", "offset", "bytes"} of obj[key]: the file must be `file`, the
// offset aligned, the size exactly `want`, the range inside the file.
static infer_status get_range(parser *p, const cJSON *obj, const char *key, const char *where, int file, uint64_t want,
                              uint64_t *off) {
    char w[64];
    snprintf(w, sizeof w, "%s%s%s", where, dot(where), key);
    const cJSON *r;
    const char *name;
    int64_t o, n;
    infer_status st = get_item(p, obj, key, where, cJSON_IsObject, "an object", &r);
    if (!st) st = get_str(p, r, "file", w, &name);
    if (!st && strcmp(name, vindex_file_names[file]))
        st = fail(INFER_ERR_FORMAT, "%s: %s.file is \"%s\", expected \"%s\"", p->path, w, name, vindex_file_names[file]);
    if (!st) st = get_int(p, r, "offset", w, 0, (int64_t)JMAX, &o);
    if (!st) st = get_int(p, r, "bytes", w, 0, (int64_t)JMAX, &n);
    if (st) return st;
    if (o % VINDEX_ALIGN) return fail(INFER_ERR_FORMAT, "%s: %s.offset %lld is not a multiple of %d", p->path, w, (long long)o, VINDEX_ALIGN);
    if ((uint64_t)n != want)
        return fail(INFER_ERR_FORMAT, "%s: %s.bytes is %lld but its shape and type need %llu", p->path, w, (long long)n,
                    (unsigned long long)want);
    uint64_t size = p->v->file_bytes[file];
    if ((uint64_t)o > size || (uint64_t)n > size - (uint64_t)o)
        return fail(INFER_ERR_FORMAT, "%s: %s: bytes [%lld, %lld) run past the end of %s (%llu bytes)", p->path, w,
                    (long long)o, (long long)(o + n), vindex_file_names[file], (unsigned long long)size);
    if (p->n_claims == p->cap_claims) {
        int cap = p->cap_claims ? 2 * p->cap_claims : 64;
        claim *c = realloc(p->claims, sizeof *c * (size_t)cap);
        if (!c) return fail(INFER_ERR_NOMEM, "out of memory");
        p->claims = c;
        p->cap_claims = cap;
    }
    claim *c = &p->claims[p->n_claims++];
    c->file = file;
    c->off = (uint64_t)o;
    c->bytes = (uint64_t)n;
    snprintf(c->what, sizeof c->what, "%s", w);
    *off = (uint64_t)o;
    return INFER_OK;
}

static int by_place(const void *a, const void *b) {
    const claim *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static infer_status check_overlaps(parser *p) {
    qsort(p->claims, (size_t)p->n_claims, sizeof *p->claims, by_place);
    const claim *prev = NULL;
    for (int i = 0; i < p->n_claims; i++) {
        const claim *c = &p->claims[i];
        if (!c->bytes) continue;
        if (prev && prev->file == c->file && c->off < prev->off + prev->bytes)
            return fail(INFER_ERR_FORMAT, "%s: %s and %s overlap in %s", p->path, prev->what, c->what, vindex_file_names[c->file]);
        prev = c;
    }
    return INFER_OK;
}

// "files": each of the vindex's files with its size (which must be the size
// on disk) and sha256; the .bin files are mapped.
static infer_status read_files(parser *p, const cJSON *root) {
    vindex *v = p->v;
    const cJSON *files;
    infer_status st = get_item(p, root, "files", "", cJSON_IsObject, "an object", &files);
    if (st) return st;
    for (const cJSON *f = files->child; f; f = f->next) {
        int known = 0;
        for (int i = 0; i < VF_COUNT; i++) known |= !strcmp(f->string, vindex_file_names[i]);
        for (int i = 0; i < VF_OPT_COUNT; i++) known |= !strcmp(f->string, vindex_opt_names[i]);
        if (!known) return fail(INFER_ERR_FORMAT, "%s: files: unknown file \"%s\"", p->path, f->string);
    }
    for (int i = 0; i < VF_OPT_COUNT; i++) { // optional: checked when listed
        const char *name = vindex_opt_names[i], *hex;
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(files, name);
        if (!f) continue;
        char w[64], path[4096];
        int64_t n;
        snprintf(w, sizeof w, "files.%s", name);
        if (!cJSON_IsObject(f)) return fail(INFER_ERR_FORMAT, "%s: %s must be an object", p->path, w);
        if ((st = get_int(p, f, "bytes", w, 0, (int64_t)JMAX, &n))) return st;
        if ((st = get_str(p, f, "sha256", w, &hex))) return st;
        if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
            return fail(INFER_ERR_FORMAT, "%s: %s.sha256 is not 64 lowercase hex digits", p->path, w);
        snprintf(path, sizeof path, "%s/%s", v->dir, name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return fail(INFER_ERR_IO, "%s: missing or not a file", path);
        if ((uint64_t)sb.st_size != (uint64_t)n)
            return fail(INFER_ERR_FORMAT, "%s: %llu bytes, but index.json says %lld (truncated or replaced?)", path,
                        (unsigned long long)sb.st_size, (long long)n);
        v->opt_present[i] = 1;
        v->opt_bytes[i] = (uint64_t)n;
        memcpy(v->opt_sha256[i], hex, 65);
    }
    for (int i = 0; i < VF_COUNT; i++) {
        const char *name = vindex_file_names[i], *hex;
        const cJSON *f;
        char w[48];
        int64_t n;
        snprintf(w, sizeof w, "files.%s", name);
        if ((st = get_item(p, files, name, "files", cJSON_IsObject, "an object", &f))) return st;
        if ((st = get_int(p, f, "bytes", w, 0, (int64_t)JMAX, &n))) return st;
        if ((st = get_str(p, f, "sha256", w, &hex))) return st;
        if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
            return fail(INFER_ERR_FORMAT, "%s: %s.sha256 is not 64 lowercase hex digits", p->path, w);
        memcpy(v->sha256[i], hex, 65);
        v->file_bytes[i] = (uint64_t)n;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", v->dir, name);
        uint64_t size;
        if (i == VF_WEIGHTS) {
            struct stat sb;
            if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return fail(INFER_ERR_IO, "%s: missing or not a file", path);
            size = (uint64_t)sb.st_size;
        } else {
            if ((st = mapfile_open(&v->maps[i], path))) return st;
            size = v->maps[i].size;
        }
        if (size != (uint64_t)n)
            return fail(INFER_ERR_FORMAT, "%s: %llu bytes, but index.json says %lld (truncated or replaced?)", path,
                        (unsigned long long)size, (long long)n);
    }
    return INFER_OK;
}

static void set_view(tensor *t, const char *name, int type, int64_t H, int64_t rows, const mapfile *m, uint64_t off) {
    t->name = name;
    t->type = type;
    t->type_name = dtype_get(type)->name;
    t->nd = 2;
    t->ne[0] = H;
    t->ne[1] = rows;
    t->ne[2] = t->ne[3] = 1;
    t->nbytes = dtype_row_size(type, H) * (size_t)rows;
    t->data = t->nbytes ? m->data + off : NULL;
    t->f32 = NULL;
}

static infer_status read_layers(parser *p, const cJSON *root, const cJSON *n_ff) {
    vindex *v = p->v;
    const cJSON *layers;
    infer_status st = get_item(p, root, "layers", "", cJSON_IsArray, "an array", &layers);
    if (st) return st;
    if (cJSON_GetArraySize(layers) != v->n_layer)
        return fail(INFER_ERR_FORMAT, "%s: layers has %d entries but model.n_layer is %d", p->path, cJSON_GetArraySize(layers),
                    v->n_layer);
    size_t H = (size_t)v->n_embd;
    size_t rs_gate = dtype_row_size(v->gate_type, (int64_t)H), rs_ffn = dtype_row_size(v->ffn_type, (int64_t)H);
    int il = 0;
    const cJSON *nf = n_ff->child;
    for (const cJSON *l = layers->child; l; l = l->next, nf = nf->next, il++) {
        char w[32];
        snprintf(w, sizeof w, "layers[%d]", il);
        if (!cJSON_IsObject(l)) return fail(INFER_ERR_FORMAT, "%s: %s must be an object", p->path, w);
        int64_t F;
        if ((st = get_int(p, l, "features", w, 1, VINDEX_MAX_FEATURES, &F))) return st;
        if (!cJSON_IsNumber(nf) || nf->valuedouble != (double)F)
            return fail(INFER_ERR_FORMAT, "%s: %s.features is %lld but model.n_ff[%d] differs", p->path, w, (long long)F, il);
        v->n_feat[il] = (int)F;
        uint64_t og, of, om;
        if ((st = get_range(p, l, "gate_vectors", w, VF_GATE, rs_gate * (uint64_t)F, &og))) return st;
        if ((st = get_range(p, l, "ffn", w, VF_FFN, rs_ffn * 3 * (uint64_t)F, &of))) return st;
        if ((st = get_range(p, l, "down_meta", w, VF_META, 8 * (uint64_t)v->down_top * (uint64_t)F, &om))) return st;
        snprintf(v->names[2 * il], sizeof v->names[0], "gate_vectors.%d", il);
        snprintf(v->names[2 * il + 1], sizeof v->names[0], "ffn.%d", il);
        set_view(&v->gate[il], v->names[2 * il], v->gate_type, (int64_t)H, F, &v->maps[VF_GATE], og);
        set_view(&v->ffn[il], v->names[2 * il + 1], v->ffn_type, (int64_t)H, 3 * F, &v->maps[VF_FFN], of);
        v->meta[il] = v->down_top ? v->maps[VF_META].data + om : NULL;
    }
    return INFER_OK;
}

// Every stored id must be a token: a walk indexes the vocabulary with them.
static infer_status check_meta_ids(parser *p) {
    vindex *v = p->v;
    int K = v->down_top;
    for (int il = 0; il < v->n_layer && K; il++)
        for (int f = 0; f < v->n_feat[il]; f++) {
            const unsigned char *b = v->meta[il] + (size_t)f * 8 * (size_t)K;
            for (int k = 0; k < K; k++) {
                int32_t id;
                memcpy(&id, b + 4 * (size_t)k, 4);
                if (id < 0 || id >= v->n_vocab)
                    return fail(INFER_ERR_FORMAT, "%s/down_meta.bin: layer %d feature %d: token id %d is outside the vocabulary (%d)",
                                v->dir, il, f, (int)id, v->n_vocab);
            }
        }
    return INFER_OK;
}

static infer_status parse(parser *p, const cJSON *root) {
    vindex *v = p->v;
    const cJSON *model, *types, *n_ff, *cfg, *gated;
    const char *format;
    int64_t x;
    infer_status st;
    if (!cJSON_IsObject(root)) return fail(INFER_ERR_FORMAT, "%s: not a JSON object", p->path);
    if ((st = get_str(p, root, "format", "", &format))) return st;
    if (strcmp(format, VINDEX_FORMAT)) return fail(INFER_ERR_FORMAT, "%s: format is \"%s\", not \"%s\"", p->path, format, VINDEX_FORMAT);
    if ((st = get_int(p, root, "version", "", 0, 1 << 30, &x))) return st;
    if (x != VINDEX_VERSION)
        return fail(INFER_ERR_UNSUPPORTED, "%s: version %lld; this build reads version %d", p->path, (long long)x, VINDEX_VERSION);
    if ((st = get_item(p, root, "config", "", cJSON_IsObject, "an object", &cfg))) return st;
    if ((st = get_item(p, root, "model", "", cJSON_IsObject, "an object", &model))) return st;
    if ((st = get_int(p, model, "n_layer", "model", 1, VINDEX_MAX_LAYERS, &x))) return st;
    v->n_layer = (int)x;
    if ((st = get_int(p, model, "n_embd", "model", 1, VINDEX_MAX_EMBD, &x))) return st;
    v->n_embd = (int)x;
    if ((st = get_int(p, model, "n_vocab", "model", 1, VINDEX_MAX_VOCAB, &x))) return st;
    v->n_vocab = (int)x;
    if ((st = get_item(p, model, "gated", "model", cJSON_IsBool, "true or false", &gated))) return st;
    v->gated = cJSON_IsTrue(gated);
    if ((st = get_item(p, model, "n_ff", "model", cJSON_IsArray, "an array", &n_ff))) return st;
    if (cJSON_GetArraySize(n_ff) != v->n_layer)
        return fail(INFER_ERR_FORMAT, "%s: model.n_ff has %d entries for %d layers", p->path, cJSON_GetArraySize(n_ff), v->n_layer);
    if ((st = get_item(p, root, "types", "", cJSON_IsObject, "an object", &types))) return st;
    if ((st = get_type(p, types, "gate", &v->gate_type))) return st;
    if (v->gate_type != DT_F32 && v->gate_type != DT_F16 && v->gate_type != DT_Q4_0)
        return fail(INFER_ERR_FORMAT, "%s: types.gate is %s; gate vectors are f32, f16 or q4_0", p->path, dtype_get(v->gate_type)->name);
    if ((st = get_type(p, types, "ffn", &v->ffn_type))) return st;
    if ((st = get_type(p, types, "lm_head", &v->lm_head_type))) return st;
    if ((st = get_type(p, types, "embeddings", &v->embd_type))) return st;
    if ((st = get_int(p, root, "down_top", "", 0, v->n_vocab < VINDEX_MAX_DOWN_TOP ? v->n_vocab : VINDEX_MAX_DOWN_TOP, &x)))
        return st;
    v->down_top = (int)x;
    if ((st = read_files(p, root))) return st;

    int L = v->n_layer;
    v->n_feat = calloc((size_t)L, sizeof *v->n_feat);
    v->gate = calloc((size_t)L, sizeof *v->gate);
    v->ffn = calloc((size_t)L, sizeof *v->ffn);
    v->meta = calloc((size_t)L, sizeof *v->meta);
    v->names = calloc((size_t)(2 * L + 2), sizeof *v->names);
    if (!v->n_feat || !v->gate || !v->ffn || !v->meta || !v->names) return fail(INFER_ERR_NOMEM, "out of memory");

    uint64_t V = (uint64_t)v->n_vocab, off;
    if ((st = get_range(p, root, "embeddings", "", VF_EMBD, dtype_row_size(v->embd_type, v->n_embd) * V, &off))) return st;
    snprintf(v->names[2 * L], sizeof v->names[0], "embeddings");
    set_view(&v->embd, v->names[2 * L], v->embd_type, v->n_embd, (int64_t)V, &v->maps[VF_EMBD], off);
    if ((st = get_range(p, root, "lm_head", "", VF_LM, dtype_row_size(v->lm_head_type, v->n_embd) * V, &off))) return st;
    snprintf(v->names[2 * L + 1], sizeof v->names[0], "lm_head");
    set_view(&v->lm_head, v->names[2 * L + 1], v->lm_head_type, v->n_embd, (int64_t)V, &v->maps[VF_LM], off);
    if ((st = read_layers(p, root, n_ff))) return st;
    if ((st = check_overlaps(p))) return st;
    return check_meta_ids(p);
}

infer_status vindex_open(const char *dir, vindex **out) {
    *out = NULL;
    vindex *v = calloc(1, sizeof *v);
    if (!v) return fail(INFER_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&v->lmi_mu, NULL);
    pthread_mutex_init(&v->lmg_mu, NULL);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; // "x.vindex/" names the same directory
    v->dir = strndup(dir, n);
    v->model_path = malloc(n + 32);
    char *path = malloc(n + 32);
    if (!v->dir || !v->model_path || !path) { free(path); vindex_close(v); return fail(INFER_ERR_NOMEM, "out of memory"); }
    snprintf(v->model_path, n + 32, "%s/weights.gguf", v->dir);
    snprintf(path, n + 32, "%s/index.json", v->dir);
    char *text = NULL;
    size_t len;
    infer_status st = read_text_file(path, VINDEX_MAX_INDEX_BYTES, &text, &len);
    cJSON *root = NULL;
    if (!st) {
        root = cJSON_ParseWithLength(text, len);
        if (!root) {
            const char *e = cJSON_GetErrorPtr();
            long at = e && e >= text && e <= text + len ? (long)(e - text) : -1;
            st = fail(INFER_ERR_FORMAT, "%s: not valid JSON (near byte %ld)", path, at);
        }
    }
    parser p = {path, v, NULL, 0, 0};
    if (!st) st = parse(&p, root);
    if (!st && v->opt_present[VF_OPT_LM_INDEX]) { // the lm_head index: mapped and checked whole
        char lp[4200];
        snprintf(lp, sizeof lp, "%s/%s", v->dir, vindex_opt_names[VF_OPT_LM_INDEX]);
        st = mapfile_open(&v->lmi_map, lp);
        if (!st) st = lm_index_parse(v->lmi_map.data, v->lmi_map.size, v->n_vocab, v->n_embd, lp, &v->lmi);
    }
    cJSON_Delete(root);
    free(text);
    free(p.claims);
    free(path);
    if (st) { vindex_close(v); return st; }
    *out = v;
    return INFER_OK;
}

void vindex_close(vindex *v) {
    if (!v) return;
    for (int i = 0; i < VF_COUNT; i++) mapfile_close(&v->maps[i]);
    mapfile_close(&v->lmi_map);
    lm_index_unpack(&v->lmi);
    pool_free(v->lmi_pool);
    pthread_mutex_destroy(&v->lmi_mu);
    vindex_lm_release_device(v);
    pthread_mutex_destroy(&v->lmg_mu);
    free(v->n_feat);
    free(v->gate);
    free(v->ffn);
    free(v->meta);
    free(v->names);
    free(v->model_path);
    free(v->dir);
    free(v);
}

// ---------------------------------------------------------------------------
// accessors

static int in_layer(const vindex *v, int layer) { return layer >= 0 && layer < v->n_layer; }

int vindex_n_layer(const vindex *v) { return v->n_layer; }
int vindex_n_embd(const vindex *v) { return v->n_embd; }
int vindex_n_vocab(const vindex *v) { return v->n_vocab; }
int vindex_n_features(const vindex *v, int layer) { return in_layer(v, layer) ? v->n_feat[layer] : 0; }
int vindex_gated(const vindex *v) { return v->gated; }
int vindex_down_top(const vindex *v) { return v->down_top; }
const tensor *vindex_gate_vectors(const vindex *v, int layer) { return in_layer(v, layer) ? &v->gate[layer] : NULL; }
const tensor *vindex_ffn(const vindex *v, int layer) { return in_layer(v, layer) ? &v->ffn[layer] : NULL; }
const tensor *vindex_embeddings(const vindex *v) { return &v->embd; }
const tensor *vindex_lm_head(const vindex *v) { return &v->lm_head; }
const lm_index *vindex_lm_index(const vindex *v) { return v->lmi.C ? &v->lmi : NULL; }

infer_status vindex_lm_topk(vindex *v, const float *hidden, int k, int probes, int threads, int32_t *ids) {
    if (!v->lmi.C) return fail(INFER_ERR_ARG, "%s: no lm_head index (extract with --lm-index)", v->dir);
    if (probes < 1) return fail(INFER_ERR_ARG, "lm_head index: %d clusters probed (at least 1)", probes);
    if (v->lmg) return vindex_lm_device_topk(v, hidden, k, probes, ids);
    pthread_mutex_lock(&v->lmg_mu); // (the rows packed for the CPU's kernels at the first lookup)
    infer_status ps = v->lmi_packed ? INFER_OK : lm_index_pack(&v->lmi, v->n_embd);
    v->lmi_packed = 1;
    pthread_mutex_unlock(&v->lmg_mu);
    if (ps) return ps;
    // the vindex's pool where no other lookup holds it (else one for this lookup)
    pool *p = NULL, *own = NULL;
    int held = threads > 1 && pthread_mutex_trylock(&v->lmi_mu) == 0;
    if (held) {
        if (v->lmi_pool && pool_size(v->lmi_pool) != threads) pool_free(v->lmi_pool), v->lmi_pool = NULL;
        if (!v->lmi_pool) v->lmi_pool = pool_new(threads);
        p = v->lmi_pool;
    } else if (threads > 1)
        p = own = pool_new(threads);
    infer_status st = lm_index_topk(&v->lmi, hidden, v->n_vocab, v->n_embd, k, probes, p, ids);
    if (held) pthread_mutex_unlock(&v->lmi_mu);
    pool_free(own);
    return st;
}
const char *vindex_model_path(const vindex *v) { return v->model_path; }
const char *vindex_dir(const vindex *v) { return v->dir; }

int vindex_down_meta(const vindex *v, int layer, int f, const int32_t **ids, const float **scores) {
    *ids = NULL;
    *scores = NULL;
    if (!in_layer(v, layer) || f < 0 || f >= v->n_feat[layer] || !v->down_top) return 0;
    const unsigned char *b = v->meta[layer] + (size_t)f * 8 * (size_t)v->down_top;
    // mapped pages and 64-aligned layer parts: 4-byte aligned
    *ids = (const int32_t *)b;
    *scores = (const float *)(b + 4 * (size_t)v->down_top);
    return v->down_top;
}
