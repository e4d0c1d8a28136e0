// GGUF writer. Metadata is serialized as it is set; tensor infos are laid out
// with each tensor's data aligned, then the data is streamed row by row, so
// at most one row of floats and one encoded row are in memory at a time.
#include "models/gguf_write.h"
#include "tensor/dtype.h"
#include "base/error.h"
#include "base/tmpfile.h"
#include "base/pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *key;
    unsigned char *bytes; // type (u32) + value, serialized
    size_t n;
} kv_entry;

typedef struct {
    char *name;
    int type, nd;
    int64_t ne[MAX_DIMS];
    size_t nbytes;
    gguf_rows_fn fn;
    void *user;
    const void *raw;
} tensor_entry;

struct gguf_writer {
    kv_entry *kv;
    int n_kv, cap_kv;
    tensor_entry *t;
    int n_t, cap_t;
    uint32_t alignment;
};

typedef struct { unsigned char *p; size_t n, cap; int oom; } buf;

static void put(buf *b, const void *x, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { unsigned char x[4] = {v, v >> 8, v >> 16, v >> 24}; put(b, x, 4); }
static void put_u64(buf *b, uint64_t v) {
    unsigned char x[8];
    for (int i = 0; i < 8; i++) x[i] = (unsigned char)(v >> (8 * i));
    put(b, x, 8);
}
static void put_str(buf *b, const char *s) { size_t n = strlen(s); put_u64(b, n); put(b, s, n); }

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].bytes); }
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

// Takes ownership of b's bytes.
static infer_status set_kv(gguf_writer *w, const char *key, buf *b) {
    if (b->oom) { free(b->p); return fail(INFER_ERR_NOMEM, "gguf writer: out of memory"); }
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].bytes);
            w->kv[i].bytes = b->p;
            w->kv[i].n = b->n;
            return INFER_OK;
        }
    if (w->n_kv == w->cap_kv) {
        int cap = w->cap_kv ? 2 * w->cap_kv : 32;
        kv_entry *kv = realloc(w->kv, sizeof *kv * (size_t)cap);
        if (!kv) { free(b->p); return fail(INFER_ERR_NOMEM, "gguf writer: out of memory"); }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) { free(b->p); return fail(INFER_ERR_NOMEM, "gguf writer: out of memory"); }
    w->kv[w->n_kv++] = (kv_entry){k, b->p, b->n};
    return INFER_OK;
}

static infer_status set_scalar(gguf_writer *w, const char *key, int type, const void *le, size_t n) {
    buf b = {0};
    put_u32(&b, (uint32_t)type);
    put(&b, le, n);
    return set_kv(w, key, &b);
}

infer_status gguf_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    unsigned char x[4] = {v, v >> 8, v >> 16, v >> 24};
    return set_scalar(w, key, GGUF_U32, x, 4);
}
infer_status gguf_set_i32(gguf_writer *w, const char *key, int32_t v) {
    uint32_t u = (uint32_t)v;
    unsigned char x[4] = {u, u >> 8, u >> 16, u >> 24};
    return set_scalar(w, key, GGUF_I32, x, 4);
}
infer_status gguf_set_f32(gguf_writer *w, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    unsigned char x[4] = {u, u >> 8, u >> 16, u >> 24};
    return set_scalar(w, key, GGUF_F32, x, 4);
}
infer_status gguf_set_bool(gguf_writer *w, const char *key, int v) {
    unsigned char x = v != 0;
    return set_scalar(w, key, GGUF_BOOL, &x, 1);
}
infer_status gguf_set_str(gguf_writer *w, const char *key, const char *v) {
    if (!strcmp(key, "general.alignment")) return fail(INFER_ERR_ARG, "gguf writer: general.alignment must be a u32");
    buf b = {0};
    put_u32(&b, GGUF_STRING);
    put_str(&b, v);
    return set_kv(w, key, &b);
}
infer_status gguf_set_arr(gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n) {
    size_t es = gguf_type_size(elem_type);
    if (!es) return fail(INFER_ERR_ARG, "gguf writer: key %s: arrays of %s need their own setter", key, gguf_type_name(elem_type));
    buf b = {0};
    put_u32(&b, GGUF_ARRAY);
    put_u32(&b, (uint32_t)elem_type);
    put_u64(&b, n);
    put(&b, data, (size_t)n * es);
    return set_kv(w, key, &b);
}
infer_status gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    buf b = {0};
    put_u32(&b, GGUF_ARRAY);
    put_u32(&b, GGUF_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) put_str(&b, v[i]);
    return set_kv(w, key, &b);
}

static infer_status add(gguf_writer *w, const char *name, int type, int nd, const int64_t *ne, size_t nbytes, tensor_entry *e) {
    if (strlen(name) >= GGUF_MAX_NAME) return fail(INFER_ERR_ARG, "gguf writer: tensor name %s is longer than %d bytes", name, GGUF_MAX_NAME - 1);
    if (nd < 1 || nd > MAX_DIMS) return fail(INFER_ERR_ARG, "gguf writer: tensor %s: %d dimensions", name, nd);
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return fail(INFER_ERR_ARG, "gguf writer: tensor %s added twice", name);
    if (w->n_t == w->cap_t) {
        int cap = w->cap_t ? 2 * w->cap_t : 64;
        tensor_entry *t = realloc(w->t, sizeof *t * (size_t)cap);
        if (!t) return fail(INFER_ERR_NOMEM, "gguf writer: out of memory");
        w->t = t;
        w->cap_t = cap;
    }
    e->name = strdup(name);
    if (!e->name) return fail(INFER_ERR_NOMEM, "gguf writer: out of memory");
    e->type = type;
    e->nd = nd;
    for (int i = 0; i < MAX_DIMS; i++) e->ne[i] = i < nd ? ne[i] : 1;
    e->nbytes = nbytes;
    w->t[w->n_t++] = *e;
    return INFER_OK;
}

infer_status gguf_add_tensor(gguf_writer *w, const char *name, int type, int nd, const int64_t *ne, gguf_rows_fn fn, void *user) {
    const dtype_traits *tr = dtype_get(type);
    if (!tr || !tr->from_float) return fail(INFER_ERR_UNSUPPORTED, "gguf writer: tensor %s: no encoder for type %d", name, type);
    size_t rs = dtype_row_size(type, ne[0]);
    if (!rs) return fail(INFER_ERR_ARG, "gguf writer: tensor %s: row of %lld is not a whole number of %s blocks", name, (long long)ne[0], tr->name);
    int64_t rows = 1;
    for (int i = 1; i < nd; i++) rows *= ne[i];
    tensor_entry e = {0};
    e.fn = fn;
    e.user = user;
    return add(w, name, type, nd, ne, rs * (size_t)rows, &e);
}

infer_status gguf_add_tensor_raw(gguf_writer *w, const char *name, int type, int nd, const int64_t *ne, const void *data, size_t nbytes) {
    tensor_entry e = {0};
    e.raw = data;
    return add(w, name, type, nd, ne, nbytes, &e);
}

static size_t pad_to(size_t n, size_t a) { return (a - n % a) % a; }

// rows i0..i1 of a batch encoded (a pool job)
typedef struct { const dtype_traits *tr; const float *row; unsigned char *enc; size_t n0, rs; int64_t ne0; } enc_job;
static void encode_rows(void *arg, int i0, int i1) {
    const enc_job *j = arg;
    for (int k = i0; k < i1; k++) j->tr->from_float(j->row + j->n0 * (size_t)k, j->enc + j->rs * (size_t)k, j->ne0);
}

infer_status gguf_write_file(gguf_writer *w, const char *path) {
    buf h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)w->n_t);
    int has_align = 0;
    for (int i = 0; i < w->n_kv; i++) has_align |= !strcmp(w->kv[i].key, "general.alignment");
    put_u64(&h, (uint64_t)(w->n_kv + !has_align));
    if (!has_align) {
        put_str(&h, "general.alignment");
        put_u32(&h, GGUF_U32);
        put_u32(&h, w->alignment);
    }
    for (int i = 0; i < w->n_kv; i++) {
        put_str(&h, w->kv[i].key);
        put(&h, w->kv[i].bytes, w->kv[i].n);
    }
    size_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        const tensor_entry *e = &w->t[i];
        put_str(&h, e->name);
        put_u32(&h, (uint32_t)e->nd);
        for (int d = 0; d < e->nd; d++) put_u64(&h, (uint64_t)e->ne[d]);
        put_u32(&h, (uint32_t)e->type);
        put_u64(&h, off);
        off += e->nbytes + pad_to(e->nbytes, w->alignment);
    }
    static const unsigned char zeros[256];
    put(&h, zeros, pad_to(h.n, w->alignment));
    if (h.oom) { free(h.p); return fail(INFER_ERR_NOMEM, "%s: out of memory", path); }

    // Written beside the destination and renamed into place when whole, so
    // the file appears complete or not at all.
    char tmp[4200];
    if (tmp_name(tmp, sizeof tmp, path)) { free(h.p); return fail(INFER_ERR_ARG, "%s: the path is too long", path); }
    FILE *f = fopen(tmp, "wb");
    if (!f) { free(h.p); return fail(INFER_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    int track = tmp_track(tmp, 0); // (removed if a signal stops the process)
    int ok = fwrite(h.p, 1, h.n, f) == h.n;
    infer_status made = INFER_OK; // a row source's error
    free(h.p);
    // rows are read in order (the sources are not thread-safe) in batches of
    // up to ENC_FLOATS values, encoded on every core, written in order: the
    // same bytes whatever the thread count
    enum { ENC_FLOATS = 1 << 22 };
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pool *pl = pool_new(ncpu < 1 ? 1 : ncpu > 32 ? 32 : (int)ncpu);
    float *row = NULL;
    unsigned char *enc = NULL;
    size_t row_cap = 0, enc_cap = 0;
    for (int i = 0; i < w->n_t && ok; i++) {
        const tensor_entry *e = &w->t[i];
        if (e->raw) {
            ok = fwrite(e->raw, 1, e->nbytes, f) == e->nbytes;
        } else {
            const dtype_traits *tr = dtype_get(e->type);
            size_t rs = dtype_row_size(e->type, e->ne[0]), n0 = (size_t)(e->ne[0] ? e->ne[0] : 1);
            int64_t rows = e->ne[1] * e->ne[2] * e->ne[3], batch = (int64_t)(ENC_FLOATS / n0);
            if (batch < 1) batch = 1;
            if (batch > rows) batch = rows > 0 ? rows : 1;
            if (n0 * (size_t)batch > row_cap) {
                float *r2 = realloc(row, sizeof(float) * n0 * (size_t)batch);
                if (r2) row = r2, row_cap = n0 * (size_t)batch;
            }
            if ((rs ? rs : 1) * (size_t)batch > enc_cap) {
                unsigned char *e2 = realloc(enc, (rs ? rs : 1) * (size_t)batch);
                if (e2) enc = e2, enc_cap = (rs ? rs : 1) * (size_t)batch;
            }
            if (n0 * (size_t)batch > row_cap || (rs ? rs : 1) * (size_t)batch > enc_cap) {
                fclose(f), unlink(tmp), tmp_untrack(track), free(row), free(enc), pool_free(pl);
                return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
            }
            for (int64_t r0 = 0; r0 < rows && ok; r0 += batch) {
                int nb = (int)(rows - r0 < batch ? rows - r0 : batch);
                for (int k = 0; k < nb && !made; k++) made = e->fn(e->user, r0 + k, row + n0 * (size_t)k);
                if (made) { ok = 0; break; }
                enc_job job = {tr, row, enc, n0, rs, e->ne[0]};
                pool_for(pl, nb, 4, encode_rows, &job);
                ok = fwrite(enc, 1, rs * (size_t)nb, f) == rs * (size_t)nb;
            }
        }
        size_t p = pad_to(e->nbytes, w->alignment);
        if (ok && p) ok = fwrite(zeros, 1, p, f) == p;
    }
    pool_free(pl);
    free(row);
    free(enc);
    if (fclose(f) != 0) ok = 0;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        tmp_untrack(track);
        if (made) return fail_wrap(made, "%s", path);
        return fail(INFER_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        tmp_untrack(track);
        return fail(INFER_ERR_IO, "%s: cannot replace: %s", path, strerror(e));
    }
    tmp_untrack(track);
    return INFER_OK;
}

// A parsed value, re-encoded (arrays of strings and nested arrays included).
static void put_value(buf *b, const gguf_value *v, int with_type) {
    if (with_type) put_u32(b, (uint32_t)v->type);
    if (v->type == GGUF_STRING) {
        put_u64(b, v->n);
        put(b, v->data, (size_t)v->n);
    } else if (v->type == GGUF_ARRAY) {
        put_u32(b, (uint32_t)v->elem_type);
        put_u64(b, v->n);
        if (v->elem_type == GGUF_STRING)
            for (uint64_t i = 0; i < v->n; i++) {
                size_t len;
                const char *s = gguf_arr_str(v, i, &len);
                put_u64(b, len);
                put(b, s, len);
            }
        else if (v->elem_type == GGUF_ARRAY)
            for (uint64_t i = 0; i < v->n; i++) put_value(b, gguf_arr_item(v, i), 0);
        else
            put(b, v->data, (size_t)v->n * gguf_type_size(v->elem_type));
    } else {
        put(b, v->data, gguf_type_size(v->type));
    }
}

infer_status gguf_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    buf b = {0};
    put_value(&b, v, 1);
    return set_kv(w, key, &b);
}
