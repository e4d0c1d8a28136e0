// GGUF reader. The checks follow llama.cpp's own list of corrupt files
// (tests/test-gguf.cpp): bad magic, unsupported version, impossible counts,
// lengths past the end, unknown value types, duplicate keys, alignment not a
// power of two, long names, too many dims, bad shapes, unknown tensor types,
// offsets outside the data or misaligned, duplicate names, short data.
#include "models/gguf.h"
#include "tensor/dtype.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 8 // nesting of arrays
// Hard caps beside the file-size bounds, so that what we allocate per entry
// (about 50 bytes) stays small whatever the counts say; real files have tens
// of keys and at most some thousands of tensors.
#define MAX_KV (1u << 20)
#define MAX_TENSORS (1u << 20)
#define MAX_NESTED (1u << 20) // elements of arrays of arrays, over the file

// ggml's type names by number (ggml.h); NULL: a removed or unknown number.
static const char *const g_ggml_names[] = {
    "f32", "f16", "q4_0", "q4_1", NULL, NULL, "q5_0", "q5_1", "q8_0", "q8_1",
    "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
    "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8", "i16", "i32", "i64", "f64", "iq1_m",
    "bf16", NULL, NULL, NULL, "tq1_0", "tq2_0", NULL, NULL, NULL, "mxfp4",
    "nvfp4", "q1_0", "q2_0",
};
#define N_GGML_TYPES (sizeof g_ggml_names / sizeof g_ggml_names[0])

static const char *const g_type_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *gguf_type_name(int type) {
    return type >= 0 && type < GGUF_TYPE_COUNT ? g_type_names[type] : "unknown";
}

size_t gguf_type_size(int type) {
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// A cursor over the bytes: every read checks what is left.

typedef struct {
    const unsigned char *p;
    size_t size, pos;
    const char *path;
    uint64_t nested; // elements of arrays of arrays so far
} cursor;

static size_t left(const cursor *c) { return c->size - c->pos; }

static int rd(cursor *c, void *dst, size_t n) {
    if (left(c) < n) return 0;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return 1;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int rd_u32(cursor *c, uint32_t *v) {
    unsigned char b[4];
    if (!rd(c, b, 4)) return 0;
    *v = le32(b);
    return 1;
}
static int rd_u64(cursor *c, uint64_t *v) {
    unsigned char b[8];
    if (!rd(c, b, 8)) return 0;
    *v = le64(b);
    return 1;
}

// A string: its bytes stay in the file. what names it in messages.
static infer_status rd_str(cursor *c, const unsigned char **s, uint64_t *len, const char *what) {
    if (!rd_u64(c, len)) return fail(INFER_ERR_FORMAT, "%s: %s: truncated (no string length)", c->path, what);
    if (*len > left(c))
        return fail(INFER_ERR_FORMAT, "%s: %s: string length %llu runs past the end of the file (%zu bytes left)", c->path,
                    what, (unsigned long long)*len, left(c));
    *s = c->p + c->pos;
    c->pos += (size_t)*len;
    return INFER_OK;
}

static void value_free(gguf_value *v) {
    free(v->strs);
    v->strs = NULL;
    if (v->items) {
        for (uint64_t i = 0; i < v->n; i++) value_free(&v->items[i]);
        free(v->items);
        v->items = NULL;
    }
}

// One value of a known type; arrays recurse (depth-limited).
static infer_status rd_value(cursor *c, int type, gguf_value *v, const char *key, int depth) {
    memset(v, 0, sizeof *v);
    v->type = type;
    if (type < 0 || type >= GGUF_TYPE_COUNT)
        return fail(INFER_ERR_FORMAT, "%s: key \"%s\": unknown value type %d", c->path, key, type);
    size_t sz = gguf_type_size(type);
    if (sz) {
        if (left(c) < sz) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": value runs past the end of the file", c->path, key);
        v->data = c->p + c->pos;
        v->n = 1;
        c->pos += sz;
        return INFER_OK;
    }
    if (type == GGUF_STRING) return rd_str(c, &v->data, &v->n, key);
    // array: u32 element type, u64 count, elements
    if (depth >= MAX_DEPTH) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": arrays nested more than %d deep", c->path, key, MAX_DEPTH);
    uint32_t et;
    uint64_t n;
    if (!rd_u32(c, &et) || !rd_u64(c, &n)) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": truncated array header", c->path, key);
    if (et >= GGUF_TYPE_COUNT) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": array of unknown value type %u", c->path, key, et);
    v->elem_type = (int)et;
    size_t es = gguf_type_size((int)et);
    // The smallest encoding of one element bounds the count by the bytes left.
    size_t min = es ? es : et == GGUF_STRING ? 8 : 12;
    if (n > left(c) / min)
        return fail(INFER_ERR_FORMAT, "%s: key \"%s\": array of %llu %s elements runs past the end of the file", c->path, key,
                    (unsigned long long)n, gguf_type_name((int)et));
    v->n = n;
    v->data = c->p + c->pos;
    if (es) {
        c->pos += (size_t)n * es;
        return INFER_OK;
    }
    if (et == GGUF_STRING) {
        // One pointer per string (8 bytes for at least 8 in the file): a
        // hostile count cannot make us allocate more than the file's size.
        v->strs = malloc(sizeof *v->strs * (size_t)(n ? n : 1));
        if (!v->strs) return fail(INFER_ERR_NOMEM, "%s: key \"%s\": out of memory for %llu strings", c->path, key, (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            v->strs[i] = c->p + c->pos;
            const unsigned char *s;
            uint64_t len;
            infer_status st = rd_str(c, &s, &len, key);
            if (st) return st;
        }
        return INFER_OK;
    }
    if (n > MAX_NESTED - c->nested)
        return fail(INFER_ERR_FORMAT, "%s: key \"%s\": more than %u elements in nested arrays", c->path, key, MAX_NESTED);
    c->nested += n;
    v->items = calloc((size_t)(n ? n : 1), sizeof *v->items);
    if (!v->items) return fail(INFER_ERR_NOMEM, "%s: key \"%s\": out of memory for %llu elements", c->path, key, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        infer_status st = rd_value(c, (int)et, &v->items[i], key, depth + 1);
        if (st) { v->n = i + 1; return st; }
    }
    return INFER_OK;
}

// ---------------------------------------------------------------------------

void gguf_close(gguf_file *g) {
    if (!g) return;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        if (g->keys) free(g->keys[i]);
        if (g->vals) value_free(&g->vals[i]);
    }
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->keys);
    free(g->vals);
    free(g->tensors);
    mapfile_close(&g->map);
    free(g->path);
    free(g);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Sets *dup to the first name that appears twice (or NULL); sorts a copy of
// the pointers. Returns 0, or -1 when out of memory.
static int first_dup(char **names, uint64_t n, size_t stride, const char **dup) {
    *dup = NULL;
    if (n < 2) return 0;
    const char **v = malloc(sizeof *v * (size_t)n);
    if (!v) return -1;
    for (uint64_t i = 0; i < n; i++) v[i] = *(char **)((char *)names + i * stride);
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    for (uint64_t i = 1; i < n && !*dup; i++)
        if (!strcmp(v[i - 1], v[i])) *dup = v[i];
    free(v);
    return 0;
}

static int cmp_off(const void *a, const void *b) {
    const gguf_tensor_info *x = *(gguf_tensor_info *const *)a, *y = *(gguf_tensor_info *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static infer_status parse(gguf_file *g) {
    cursor c = {g->base, g->size, 0, g->path, 0};
    const char *path = g->path;
    unsigned char magic[4];
    if (!rd(&c, magic, 4)) return fail(INFER_ERR_FORMAT, "%s: not a GGUF file: %zu bytes, too short for the magic", path, g->size);
    if (memcmp(magic, "GGUF", 4))
        return fail(INFER_ERR_FORMAT, "%s: not a GGUF file: bad magic %02x %02x %02x %02x (expected \"GGUF\")", path, magic[0],
                    magic[1], magic[2], magic[3]);
    if (!rd_u32(&c, &g->version)) return fail(INFER_ERR_FORMAT, "%s: truncated: no version", path);
    if (g->version == 1) return fail(INFER_ERR_UNSUPPORTED, "%s: unsupported GGUF version 1 (only 2 and 3 are read)", path);
    if ((g->version & 0xffff) == 0 && g->version)
        return fail(INFER_ERR_UNSUPPORTED, "%s: unsupported GGUF version %u (a big-endian file?)", path, g->version);
    if (g->version != 2 && g->version != 3) return fail(INFER_ERR_UNSUPPORTED, "%s: unsupported GGUF version %u", path, g->version);
    uint64_t nt, nkv;
    if (!rd_u64(&c, &nt) || !rd_u64(&c, &nkv)) return fail(INFER_ERR_FORMAT, "%s: truncated header (no tensor or kv count)", path);
    // A tensor info is at least 8 + 4 + 4 + 8 bytes, a kv at least 8 + 4 + 1.
    if ((int64_t)nt < 0 || nt > left(&c) / 24)
        return fail(INFER_ERR_FORMAT, "%s: tensor count %lld is impossible for a file of %zu bytes", path, (long long)nt, g->size);
    if ((int64_t)nkv < 0 || nkv > left(&c) / 13)
        return fail(INFER_ERR_FORMAT, "%s: key-value count %lld is impossible for a file of %zu bytes", path, (long long)nkv, g->size);
    if (nt > MAX_TENSORS) return fail(INFER_ERR_FORMAT, "%s: tensor count %llu is more than %u", path, (unsigned long long)nt, MAX_TENSORS);
    if (nkv > MAX_KV) return fail(INFER_ERR_FORMAT, "%s: key-value count %llu is more than %u", path, (unsigned long long)nkv, MAX_KV);

    // metadata
    g->keys = calloc((size_t)(nkv ? nkv : 1), sizeof *g->keys);
    g->vals = calloc((size_t)(nkv ? nkv : 1), sizeof *g->vals);
    if (!g->keys || !g->vals) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < nkv; i++) {
        char what[64];
        snprintf(what, sizeof what, "key %llu", (unsigned long long)i);
        const unsigned char *k;
        uint64_t kl;
        infer_status st = rd_str(&c, &k, &kl, what);
        if (st) return st;
        if (kl == 0) return fail(INFER_ERR_FORMAT, "%s: %s is empty", path, what);
        if (memchr(k, 0, (size_t)kl)) return fail(INFER_ERR_FORMAT, "%s: %s contains a NUL byte", path, what);
        g->keys[i] = malloc((size_t)kl + 1);
        if (!g->keys[i]) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
        memcpy(g->keys[i], k, (size_t)kl);
        g->keys[i][kl] = 0;
        g->n_kv = i + 1;
        uint32_t type;
        if (!rd_u32(&c, &type)) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": truncated (no value type)", path, g->keys[i]);
        if (type >= GGUF_TYPE_COUNT) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": unknown value type %u", path, g->keys[i], type);
        st = rd_value(&c, (int)type, &g->vals[i], g->keys[i], 0);
        if (st) return st;
    }
    const char *dk;
    if (first_dup(g->keys, g->n_kv, sizeof(char *), &dk)) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    if (dk) return fail(INFER_ERR_FORMAT, "%s: duplicate key \"%s\"", path, dk);
    const gguf_value *al = gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != GGUF_U32)
            return fail(INFER_ERR_FORMAT, "%s: general.alignment must be u32, not %s", path, gguf_type_name(al->type));
        uint32_t a = le32(al->data);
        if (a == 0 || (a & (a - 1))) return fail(INFER_ERR_FORMAT, "%s: general.alignment %u is not a power of two", path, a);
        g->alignment = a;
    }

    // tensor infos
    g->tensors = calloc((size_t)(nt ? nt : 1), sizeof *g->tensors);
    if (!g->tensors) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; i < nt; i++) {
        gguf_tensor_info *t = &g->tensors[i];
        char what[64];
        snprintf(what, sizeof what, "tensor %llu name", (unsigned long long)i);
        const unsigned char *nm;
        uint64_t nl;
        infer_status st = rd_str(&c, &nm, &nl, what);
        if (st) return st;
        if (nl >= GGUF_MAX_NAME)
            return fail(INFER_ERR_FORMAT, "%s: tensor %llu: name of %llu bytes is too long (at most %d)", path,
                        (unsigned long long)i, (unsigned long long)nl, GGUF_MAX_NAME - 1);
        if (memchr(nm, 0, (size_t)nl)) return fail(INFER_ERR_FORMAT, "%s: tensor %llu: name contains a NUL byte", path, (unsigned long long)i);
        t->name = malloc((size_t)nl + 1);
        if (!t->name) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
        memcpy(t->name, nm, (size_t)nl);
        t->name[nl] = 0;
        g->n_tensors = i + 1;
        if (!rd_u32(&c, &t->n_dims)) return fail(INFER_ERR_FORMAT, "%s: tensor %s: truncated (no dimension count)", path, t->name);
        if (t->n_dims > MAX_DIMS)
            return fail(INFER_ERR_FORMAT, "%s: tensor %s: %u dimensions (at most %d)", path, t->name, t->n_dims, MAX_DIMS);
        int64_t nel = 1;
        for (int d = 0; d < MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t v;
            if (!rd_u64(&c, &v)) return fail(INFER_ERR_FORMAT, "%s: tensor %s: truncated shape", path, t->name);
            if ((int64_t)v < 0) return fail(INFER_ERR_FORMAT, "%s: tensor %s: negative dimension %lld", path, t->name, (long long)v);
            t->ne[d] = (int64_t)v;
        }
        for (int d = 0; d < MAX_DIMS; d++) {
            if (t->ne[d] && nel > INT64_MAX / t->ne[d])
                return fail(INFER_ERR_FORMAT, "%s: tensor %s: shape overflows 64 bits", path, t->name);
            nel *= t->ne[d];
        }
        if (!rd_u32(&c, &t->type)) return fail(INFER_ERR_FORMAT, "%s: tensor %s: truncated (no type)", path, t->name);
        if (t->type >= N_GGML_TYPES || !g_ggml_names[t->type])
            return fail(INFER_ERR_FORMAT, "%s: tensor %s: unknown tensor type %u", path, t->name, t->type);
        if (!rd_u64(&c, &t->offset)) return fail(INFER_ERR_FORMAT, "%s: tensor %s: truncated (no offset)", path, t->name);
        if (t->offset % g->alignment)
            return fail(INFER_ERR_FORMAT, "%s: tensor %s: offset %llu is not a multiple of the alignment %u", path, t->name,
                        (unsigned long long)t->offset, g->alignment);
        const dtype_traits *tr = dtype_get((int)t->type);
        if (tr) {
            if (t->ne[0] % tr->blck)
                return fail(INFER_ERR_FORMAT, "%s: tensor %s: row of %lld is not a whole number of %s blocks of %d", path,
                            t->name, (long long)t->ne[0], tr->name, tr->blck);
            uint64_t blocks = (uint64_t)(nel / tr->blck);
            if (blocks && tr->size > UINT64_MAX / blocks)
                return fail(INFER_ERR_FORMAT, "%s: tensor %s: byte size overflows", path, t->name);
            t->nbytes = blocks * tr->size;
        } else {
            t->nbytes = UINT64_MAX; // bounded below, by the next tensor or the end
        }
    }
    const char *dn;
    if (first_dup((char **)g->tensors, g->n_tensors, sizeof(gguf_tensor_info), &dn)) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    if (dn) return fail(INFER_ERR_FORMAT, "%s: duplicate tensor name \"%s\"", path, dn);

    // data section: aligned after the infos
    size_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    g->data_offset = c.pos + pad;
    if (nt == 0) return INFER_OK;
    if (g->data_offset > g->size)
        return fail(INFER_ERR_FORMAT, "%s: truncated: the data section would start at byte %zu of %zu", path, g->data_offset, g->size);
    uint64_t data_size = g->size - g->data_offset;
    gguf_tensor_info **order = malloc(sizeof *order * (size_t)nt);
    if (!order) return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; i < nt; i++) order[i] = &g->tensors[i];
    qsort(order, (size_t)nt, sizeof *order, cmp_off);
    infer_status st = INFER_OK;
    for (uint64_t i = 0; i < nt && !st; i++) {
        gguf_tensor_info *t = order[i];
        uint64_t end_bound = i + 1 < nt ? order[i + 1]->offset : data_size;
        if (end_bound > data_size) end_bound = data_size;
        if (t->offset > data_size) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: offset %llu is outside the %llu data bytes (file truncated?)", path, t->name,
                      (unsigned long long)t->offset, (unsigned long long)data_size);
        } else if (t->nbytes == UINT64_MAX) {
            t->nbytes = end_bound - t->offset; // a type we cannot size: its bytes reach the next tensor
        } else if (t->nbytes > data_size - t->offset) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: needs bytes [%llu, %llu) but the data section has %llu (file truncated?)", path,
                      t->name, (unsigned long long)t->offset, (unsigned long long)(t->offset + t->nbytes), (unsigned long long)data_size);
        } else if (t->offset + t->nbytes > end_bound) {
            st = fail(INFER_ERR_FORMAT, "%s: tensor %s: data [%llu, %llu) overlaps tensor %s at %llu", path, t->name,
                      (unsigned long long)t->offset, (unsigned long long)(t->offset + t->nbytes), order[i + 1]->name,
                      (unsigned long long)order[i + 1]->offset);
        }
    }
    free(order);
    return st;
}

infer_status gguf_parse(gguf_file **out, const void *data, size_t size, const char *path) {
    *out = NULL;
    gguf_file *g = calloc(1, sizeof *g);
    if (!g) return fail(INFER_ERR_NOMEM, "out of memory");
    g->path = strdup(path ? path : "(memory)");
    g->base = data;
    g->size = size;
    if (!g->path) { gguf_close(g); return fail(INFER_ERR_NOMEM, "out of memory"); }
    infer_status st = parse(g);
    if (st) { gguf_close(g); return st; }
    *out = g;
    return INFER_OK;
}

infer_status gguf_open(gguf_file **out, const char *path) {
    *out = NULL;
    mapfile m;
    infer_status st = mapfile_open(&m, path);
    if (st) return st;
    gguf_file *g;
    st = gguf_parse(&g, m.data, m.size, path);
    if (st) { mapfile_close(&m); return st; }
    g->map = m;
    *out = g;
    return INFER_OK;
}

infer_status store_add_gguf(tensor_store *s, const gguf_file *g) {
    if (g->n_tensors > (uint64_t)(INT32_MAX - s->n)) return fail(INFER_ERR_FORMAT, "%s: too many tensors", g->path);
    size_t n = (size_t)(s->n + (int)g->n_tensors);
    tensor *t = realloc(s->t, sizeof *t * (n ? n : 1));
    if (!t) return fail(INFER_ERR_NOMEM, "out of memory");
    s->t = t;
    char **nm = realloc(s->names, sizeof *nm * (n ? n : 1));
    if (!nm) return fail(INFER_ERR_NOMEM, "out of memory");
    s->names = nm;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor_info *gi = &g->tensors[i];
        tensor x = {0};
        x.name = strdup(gi->name);
        if (!x.name) return fail(INFER_ERR_NOMEM, "out of memory");
        x.type = dtype_get((int)gi->type) ? (int)gi->type : -1;
        x.type_name = g_ggml_names[gi->type];
        // Trailing dims of 1 are dropped, as ggml_n_dims does.
        x.nd = (int)gi->n_dims;
        while (x.nd > 1 && gi->ne[x.nd - 1] == 1) x.nd--;
        memcpy(x.ne, gi->ne, sizeof x.ne);
        x.data = g->base + g->data_offset + gi->offset;
        x.nbytes = (size_t)gi->nbytes;
        s->names[s->n] = (char *)x.name;
        s->t[s->n++] = x;
    }
    s->bytes_mapped += g->size;
    return INFER_OK;
}

// ---------------------------------------------------------------------------
// metadata getters

const gguf_value *gguf_find(const gguf_file *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->keys[i], key)) return &g->vals[i];
    return NULL;
}

static int is_int_type(int t) {
    return t == GGUF_U8 || t == GGUF_I8 || t == GGUF_U16 || t == GGUF_I16 || t == GGUF_U32 || t == GGUF_I32 ||
           t == GGUF_U64 || t == GGUF_I64 || t == GGUF_BOOL;
}

// Reads one fixed-size scalar of type t at p. Unsigned 64-bit values above
// INT64_MAX come back as INT64_MAX (callers range-check).
static int64_t scalar_int(int t, const unsigned char *p) {
    switch (t) {
    case GGUF_U8: case GGUF_BOOL: return p[0];
    case GGUF_I8: return (int8_t)p[0];
    case GGUF_U16: return (uint16_t)(p[0] | p[1] << 8);
    case GGUF_I16: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    case GGUF_U32: return le32(p);
    case GGUF_I32: return (int32_t)le32(p);
    case GGUF_U64: { uint64_t v = le64(p); return v > INT64_MAX ? INT64_MAX : (int64_t)v; }
    case GGUF_I64: return (int64_t)le64(p);
    }
    return 0;
}

static double scalar_f64(int t, const unsigned char *p) {
    if (t == GGUF_F32) { uint32_t u = le32(p); float f; memcpy(&f, &u, 4); return f; }
    if (t == GGUF_F64) { uint64_t u = le64(p); double d; memcpy(&d, &u, 8); return d; }
    return (double)scalar_int(t, p);
}

infer_status gguf_get_int(const gguf_file *g, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const gguf_value *v = gguf_find(g, key);
    if (!v) return INFER_OK;
    if (!is_int_type(v->type)) return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be an integer, not %s", g->path, key, gguf_type_name(v->type));
    int64_t x = scalar_int(v->type, v->data);
    if (x < lo || x > hi) return fail(INFER_ERR_FORMAT, "%s: key \"%s\" = %lld is outside [%lld, %lld]", g->path, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return INFER_OK;
}

infer_status gguf_get_f64(const gguf_file *g, const char *key, double *out) {
    const gguf_value *v = gguf_find(g, key);
    if (!v) return INFER_OK;
    if (v->type != GGUF_F32 && v->type != GGUF_F64 && (!is_int_type(v->type) || v->type == GGUF_BOOL))
        return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be a number, not %s", g->path, key, gguf_type_name(v->type));
    *out = scalar_f64(v->type, v->data);
    return INFER_OK;
}

infer_status gguf_get_bool(const gguf_file *g, const char *key, int *out) {
    const gguf_value *v = gguf_find(g, key);
    if (!v) return INFER_OK;
    if (v->type != GGUF_BOOL) return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be a bool, not %s", g->path, key, gguf_type_name(v->type));
    *out = v->data[0] != 0;
    return INFER_OK;
}

infer_status gguf_get_str(const gguf_file *g, const char *key, const char **s, size_t *len) {
    const gguf_value *v = gguf_find(g, key);
    if (!v) return INFER_OK;
    if (v->type != GGUF_STRING) return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be a string, not %s", g->path, key, gguf_type_name(v->type));
    *s = (const char *)v->data;
    if (len) *len = (size_t)v->n;
    return INFER_OK;
}

infer_status gguf_get_str_copy(const gguf_file *g, const char *key, char *buf, size_t cap) {
    const char *s = NULL;
    size_t n = 0;
    infer_status st = gguf_get_str(g, key, &s, &n);
    if (st || !s) return st;
    if (n >= cap) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": string of %zu bytes is longer than %zu", g->path, key, n, cap - 1);
    if (memchr(s, 0, n)) return fail(INFER_ERR_FORMAT, "%s: key \"%s\": string contains a NUL byte", g->path, key);
    memcpy(buf, s, n);
    buf[n] = 0;
    return INFER_OK;
}

infer_status gguf_get_arr(const gguf_file *g, const char *key, int elem_type, const gguf_value **out) {
    *out = NULL;
    const gguf_value *v = gguf_find(g, key);
    if (!v) return INFER_OK;
    if (v->type != GGUF_ARRAY) return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be an array, not %s", g->path, key, gguf_type_name(v->type));
    if (elem_type >= 0 && v->elem_type != elem_type)
        return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be an array of %s, not of %s", g->path, key, gguf_type_name(elem_type),
                    gguf_type_name(v->elem_type));
    *out = v;
    return INFER_OK;
}

infer_status gguf_get_int_or_arr(const gguf_file *g, const char *key, int n, int64_t lo, int64_t hi, int *out, int *found) {
    const gguf_value *v = gguf_find(g, key);
    if (found) *found = v != NULL;
    if (!v) return INFER_OK;
    if (v->type == GGUF_ARRAY) {
        if (!is_int_type(v->elem_type))
            return fail(INFER_ERR_FORMAT, "%s: key \"%s\" must be an integer array, not of %s", g->path, key, gguf_type_name(v->elem_type));
        if (v->n != (uint64_t)n)
            return fail(INFER_ERR_FORMAT, "%s: key \"%s\" has %llu entries, expected one per layer (%d)", g->path, key, (unsigned long long)v->n, n);
        for (int i = 0; i < n; i++) {
            int64_t x = gguf_arr_int(v, (uint64_t)i);
            if (x < lo || x > hi) return fail(INFER_ERR_FORMAT, "%s: key \"%s\"[%d] = %lld is outside [%lld, %lld]", g->path, key, i, (long long)x, (long long)lo, (long long)hi);
            out[i] = (int)x;
        }
        return INFER_OK;
    }
    int64_t x = 0;
    infer_status st = gguf_get_int(g, key, lo, hi, &x);
    if (st) return st;
    for (int i = 0; i < n; i++) out[i] = (int)x;
    return INFER_OK;
}

int64_t gguf_arr_int(const gguf_value *a, uint64_t i) {
    if (a->type != GGUF_ARRAY || i >= a->n || !is_int_type(a->elem_type)) return 0;
    return scalar_int(a->elem_type, a->data + i * gguf_type_size(a->elem_type));
}

double gguf_arr_f64(const gguf_value *a, uint64_t i) {
    size_t es = gguf_type_size(a->elem_type);
    if (a->type != GGUF_ARRAY || i >= a->n || !es) return 0;
    return scalar_f64(a->elem_type, a->data + i * es);
}

const char *gguf_arr_str(const gguf_value *a, uint64_t i, size_t *len) {
    if (a->type != GGUF_ARRAY || i >= a->n || a->elem_type != GGUF_STRING || !a->strs) { if (len) *len = 0; return NULL; }
    if (len) *len = (size_t)le64(a->strs[i]); // checked against the file when parsed
    return (const char *)a->strs[i] + 8;
}

const gguf_value *gguf_arr_item(const gguf_value *a, uint64_t i) {
    if (a->type != GGUF_ARRAY || i >= a->n || !a->items) return NULL;
    return &a->items[i];
}
