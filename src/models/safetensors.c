// Safetensors reader over mapped files.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...},
// then the data; offsets are relative to the end of the header. Every number
// is checked against the file before use.
#include "models/tensor.h"
#include "tensor/dtype.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER (100u << 20) // the format's own limit: 100 MB
#define MAX_TENSORS 1000000

static const struct { const char *name; int type; int elsize; } g_st_types[] = {
    {"F32", DT_F32, 4}, {"F16", DT_F16, 2}, {"BF16", DT_BF16, 2},
    // Known to the format, not computed with; an error only if a model uses them.
    {"F64", -1, 8}, {"I64", -1, 8}, {"I32", -1, 4}, {"I16", -1, 2}, {"I8", -1, 1},
    {"U64", -1, 8}, {"U32", -1, 4}, {"U16", -1, 2}, {"U8", -1, 1}, {"BOOL", -1, 1},
    {"F8_E4M3", -1, 1}, {"F8_E5M2", -1, 1}, {"E8M0", -1, 1},
};

static int cmp_off(const void *a, const void *b) {
    const size_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

// Reads a JSON number that must be a non-negative integer below 2^53.
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static infer_status grow(tensor_store *s, int extra) {
    tensor *t = realloc(s->t, sizeof *t * (size_t)(s->n + extra));
    if (!t) return fail(INFER_ERR_NOMEM, "out of memory");
    s->t = t;
    char **nm = realloc(s->names, sizeof *nm * (size_t)(s->n + extra));
    if (!nm) return fail(INFER_ERR_NOMEM, "out of memory");
    s->names = nm;
    return INFER_OK;
}

infer_status store_add_safetensors(tensor_store *s, const char *path) {
    mapfile *files = realloc(s->files, sizeof *files * (size_t)(s->n_files + 1));
    if (!files) return fail(INFER_ERR_NOMEM, "out of memory");
    s->files = files;
    mapfile *m = &s->files[s->n_files];
    infer_status st = mapfile_open(m, path);
    if (st) return st;
    s->n_files++;
    s->bytes_mapped += m->size;

    if (m->size < 8) return fail(INFER_ERR_FORMAT, "%s: truncated: %zu bytes, no header length", path, m->size);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)m->data[i] << (8 * i);
    if (hlen > m->size - 8)
        return fail(INFER_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)",
                    path, (unsigned long long)hlen, m->size);
    if (hlen > MAX_HEADER)
        return fail(INFER_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit", path, (unsigned long long)hlen);
    const char *hdr = (const char *)m->data + 8;
    const unsigned char *base = m->data + 8 + hlen;
    size_t data_size = m->size - 8 - hlen;

    cJSON *root = cJSON_ParseWithLength(hdr, hlen);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail(INFER_ERR_FORMAT, "%s: header is not a JSON object", path);
    }
    int count = cJSON_GetArraySize(root);
    if (count > MAX_TENSORS) {
        cJSON_Delete(root);
        return fail(INFER_ERR_FORMAT, "%s: %d header entries is too many", path, count);
    }
    st = grow(s, count);
    if (st) { cJSON_Delete(root); return st; }
    size_t *ranges = malloc(sizeof *ranges * 2 * (size_t)(count ? count : 1));
    if (!ranges) { cJSON_Delete(root); return fail(INFER_ERR_NOMEM, "out of memory"); }
    int nr = 0;

    for (cJSON *e = root->child; e; e = e->next) {
        if (!e->string) continue;
        if (strcmp(e->string, "__metadata__") == 0) continue;
        const char *name = e->string;
        if (!cJSON_IsObject(e)) { st = fail(INFER_ERR_FORMAT, "%s: tensor %s: entry is not an object", path, name); break; }
        const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: needs dtype, shape and data_offsets [begin, end]", path, name);
            break;
        }
        int ti = -1;
        for (size_t k = 0; k < sizeof g_st_types / sizeof g_st_types[0]; k++)
            if (strcmp(jd->valuestring, g_st_types[k].name) == 0) ti = (int)k;
        if (ti < 0) { st = fail(INFER_ERR_FORMAT, "%s: tensor %s: unknown dtype \"%s\"", path, name, jd->valuestring); break; }
        int nd = cJSON_GetArraySize(js);
        if (nd > MAX_DIMS) { st = fail(INFER_ERR_UNSUPPORTED, "%s: tensor %s: %d dimensions (at most %d)", path, name, nd, MAX_DIMS); break; }
        tensor t = {0};
        t.type = g_st_types[ti].type;
        t.type_name = g_st_types[ti].name;
        t.nd = nd;
        uint64_t nel = 1;
        int bad = 0;
        for (int d = 0; d < nd; d++) {
            uint64_t v;
            if (!json_uint(cJSON_GetArrayItem(js, d), &v) || v > (uint64_t)INT64_MAX) { bad = 1; break; }
            t.ne[nd - 1 - d] = (int64_t)v; // safetensors lists outermost first
            if (v && nel > UINT64_MAX / 2 / v / 8) { bad = 2; break; }
            nel *= v;
        }
        for (int d = nd; d < MAX_DIMS; d++) t.ne[d] = 1;
        if (bad == 1) { st = fail(INFER_ERR_FORMAT, "%s: tensor %s: shape entries must be non-negative integers", path, name); break; }
        if (bad == 2) { st = fail(INFER_ERR_FORMAT, "%s: tensor %s: shape overflows", path, name); break; }
        uint64_t b, en;
        if (!json_uint(cJSON_GetArrayItem(jo, 0), &b) || !json_uint(cJSON_GetArrayItem(jo, 1), &en) || b > en) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: data_offsets must be integers with begin <= end", path, name);
            break;
        }
        if (en > data_size) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] outside the %zu data bytes (file truncated?)",
                      path, name, (unsigned long long)b, (unsigned long long)en, data_size);
            break;
        }
        uint64_t want = nel * (uint64_t)g_st_types[ti].elsize;
        if (en - b != want) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: shape x dtype is %llu bytes but data_offsets span %llu",
                      path, name, (unsigned long long)want, (unsigned long long)(en - b));
            break;
        }
        t.data = base + b;
        t.nbytes = (size_t)want;
        char *nm = strdup(name);
        if (!nm) { st = fail(INFER_ERR_NOMEM, "out of memory"); break; }
        t.name = nm;
        s->names[s->n] = nm;
        s->t[s->n++] = t;
        ranges[2 * nr] = (size_t)b;
        ranges[2 * nr + 1] = (size_t)en;
        nr++;
    }
    cJSON_Delete(root);
    if (!st) {
        qsort(ranges, (size_t)nr, 2 * sizeof *ranges, cmp_off);
        for (int i = 1; i < nr; i++)
            if (ranges[2 * i] < ranges[2 * i - 1]) {
                st = fail(INFER_ERR_FORMAT, "%s: tensor data ranges overlap at byte %zu", path, ranges[2 * i]);
                break;
            }
    }
    free(ranges);
    return st;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const tensor *)a)->name, ((const tensor *)b)->name);
}

void store_sort(tensor_store *s) { if (s->n) qsort(s->t, (size_t)s->n, sizeof *s->t, cmp_tensor); }

const tensor *store_find(const tensor_store *s, const char *name) {
    if (!s->n) return NULL;
    tensor key = {.name = name};
    return bsearch(&key, s->t, (size_t)s->n, sizeof *s->t, cmp_tensor);
}

void store_close(tensor_store *s) {
    for (int i = 0; i < s->n_files; i++) mapfile_close(&s->files[i]);
    for (int i = 0; i < s->n; i++) free(s->names[i]);
    free(s->files);
    free(s->t);
    free(s->names);
    memset(s, 0, sizeof *s);
}

static int has_dup(const tensor_store *s) {
    for (int i = 1; i < s->n; i++)
        if (strcmp(s->t[i - 1].name, s->t[i].name) == 0) return i;
    return 0;
}

infer_status store_declare(tensor_store *s, const infer_tensor_spec *t, int n, infer_fill_fn fill, void *user) {
    if (!fill) return fail(INFER_ERR_ARG, "model spec: no fill function");
    if (n < 0 || n > MAX_TENSORS) return fail(INFER_ERR_ARG, "model spec: %d tensors", n);
    infer_status st = grow(s, n);
    if (st) return st;
    s->fill = fill, s->fill_user = user;
    for (int i = 0; i < n; i++) {
        const infer_tensor_spec *x = &t[i];
        const dtype_traits *tr = dtype_get(x->type);
        if (!x->name || !*x->name) return fail(INFER_ERR_ARG, "model spec: tensor %d has no name", i);
        if (x->type != DT_F32 && x->type != DT_F16 && x->type != DT_BF16)
            return fail(INFER_ERR_ARG, "model spec: tensor %s: type %d (f32, f16 or bf16)", x->name, x->type);
        if (x->nd < 1 || x->nd > MAX_DIMS) return fail(INFER_ERR_ARG, "model spec: tensor %s: %d dimensions", x->name, x->nd);
        tensor d = {.type = x->type, .type_name = tr->name, .nd = x->nd, .ne = {1, 1, 1, 1}};
        uint64_t nel = 1;
        for (int k = 0; k < x->nd; k++) {
            int64_t v = x->shape[k];
            if (v < 1 || nel > UINT64_MAX / 2 / (uint64_t)v / 8)
                return fail(INFER_ERR_ARG, "model spec: tensor %s: dimension %d is %lld", x->name, k, (long long)v);
            d.ne[x->nd - 1 - k] = v; // outermost first, as safetensors lists it
            nel *= (uint64_t)v;
        }
        d.nbytes = (size_t)nel * (size_t)(x->type == DT_F32 ? 4 : 2);
        char *nm = strdup(x->name);
        if (!nm) return fail(INFER_ERR_NOMEM, "out of memory");
        d.name = nm;
        s->names[s->n] = nm;
        s->t[s->n++] = d;
    }
    store_sort(s);
    int k = has_dup(s);
    if (k) return fail(INFER_ERR_ARG, "model spec: tensor %s appears twice", s->t[k].name);
    return INFER_OK;
}

infer_status store_open_safetensors(tensor_store *s, const char *dir) {
    memset(s, 0, sizeof *s);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    infer_status st = INFER_OK;
    char *text = NULL;
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        st = read_text_file(path, 64u << 20, &text, NULL);
        if (st) return st;
        cJSON *root = cJSON_Parse(text);
        free(text);
        const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
        if (!cJSON_IsObject(wm)) {
            cJSON_Delete(root);
            return fail(INFER_ERR_FORMAT, "%s: not JSON with a \"weight_map\" object", path);
        }
        // Open each distinct shard once, in order of first mention.
        const char **seen = NULL;
        int n_seen = 0;
        for (const cJSON *e = wm->child; e && !st; e = e->next) {
            if (!cJSON_IsString(e)) { st = fail(INFER_ERR_FORMAT, "%s: weight_map[%s] is not a file name", path, e->string); break; }
            const char *f = e->valuestring;
            if (!*f || strchr(f, '/') || strcmp(f, "..") == 0) { st = fail(INFER_ERR_FORMAT, "%s: bad shard name \"%s\"", path, f); break; }
            int dup = 0;
            for (int i = 0; i < n_seen; i++) if (strcmp(seen[i], f) == 0) dup = 1;
            if (dup) continue;
            const char **ns = realloc(seen, sizeof *ns * (size_t)(n_seen + 1));
            if (!ns) { st = fail(INFER_ERR_NOMEM, "out of memory"); break; }
            seen = ns;
            seen[n_seen++] = f;
            char sp[4096];
            snprintf(sp, sizeof sp, "%s/%s", dir, f);
            st = store_add_safetensors(s, sp);
        }
        // Every tensor the index names must be in its shard.
        if (!st) {
            store_sort(s);
            for (const cJSON *e = wm->child; e; e = e->next)
                if (!store_find(s, e->string)) {
                    st = fail(INFER_ERR_FORMAT, "%s: tensor %s listed in the index is missing from %s", path, e->string, e->valuestring);
                    break;
                }
        }
        free(seen);
        cJSON_Delete(root);
        if (st) { store_close(s); return st; }
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        st = store_add_safetensors(s, path);
        if (st) { store_close(s); return st; }
        store_sort(s);
    }
    int d = has_dup(s);
    if (d) {
        st = fail(INFER_ERR_FORMAT, "%s: tensor %s appears twice", dir, s->t[d].name);
        store_close(s);
        return st;
    }
    return INFER_OK;
}
