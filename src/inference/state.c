// A context's state on disk (infer_ctx_state_save / _load): the KV cache of
// its first n positions and the tokens they hold, so a long prompt's cache
// outlives the process (infer serve's /slots).
//
// The file, in the host's byte order:
//   header   (struct below)
//   ids      int32 x n_tokens
//   per layer that keeps its own K/V (kv_source == itself), in order:
//            K rows of positions [0, n_tokens), then V rows (kv_bytes of the types)
//   checksum uint64, FNV-1a of every byte before it
// Its size follows from the header, so a file cut short or grown is refused
// before anything is read into the context; a changed byte fails the checksum.
#include "inference/context.h"
#include "base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { STATE_VERSION = 1 };
static const char g_magic[8] = "INFERKV";

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t kt, vt;            // the caches' types (enum kv_type)
    uint32_t n_layer, n_vocab, n_embd;
    uint32_t n_tokens;
    uint32_t reserved;          // 0
    uint64_t model;             // model_hash: the model's shapes and a sample of its token embedding
} state_header;
_Static_assert(sizeof(state_header) == 48, "the state header is 48 bytes");

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV_SEED 0xcbf29ce484222325ULL

// The model's identity: its type, its shapes, each layer's K/V layout, and the
// first and last 4 KiB of its token embedding (two fine-tunes of one
// architecture differ there).
static uint64_t model_hash(const infer_model *m) {
    const infer_config *cf = &m->cfg;
    uint64_t h = fnv(FNV_SEED, cf->model_type, strlen(cf->model_type));
    int dims[3] = {cf->n_vocab, cf->n_embd, cf->n_layer};
    h = fnv(h, dims, sizeof dims);
    for (int il = 0; il < cf->n_layer; il++) {
        int l[3] = {cf->layers[il].n_kv_head, cf->layers[il].head_dim, cf->layers[il].kv_source};
        h = fnv(h, l, sizeof l);
    }
    const tensor *e = m->tok_embd;
    if (e && e->data) {
        size_t n = e->nbytes < 4096 ? e->nbytes : 4096;
        h = fnv(h, &e->nbytes, sizeof e->nbytes);
        h = fnv(h, e->data, n);
        h = fnv(h, (const char *)e->data + e->nbytes - n, n);
    }
    return h;
}

// What a context's state can be taken from or put into: its own side only.
static infer_status check_ctx(const infer_ctx *c, const char *what) {
    if (c->split) return fail(INFER_ERR_UNSUPPORTED, "%s: the context is split over two devices (-ngl / pipelined layers)", what);
    if (c->m->tp_world > 1) return fail(INFER_ERR_UNSUPPORTED, "%s: the model is split over %d ranks (--tp)", what, c->m->tp_world);
    if (c->plan && c->n_cached) return fail(INFER_ERR_UNSUPPORTED, "%s: the context's graph has cached layers (a template's K/V)", what);
    return INFER_OK;
}

// The bytes of a layer's K (v 0) or V (v 1) rows for n positions.
static size_t layer_bytes(const infer_ctx *c, int il, int v, int n) {
    const layer_config *lc = &c->m->cfg.layers[il];
    return kv_bytes(v ? c->vt : c->kt, (size_t)n * lc->n_kv_head * lc->head_dim);
}

// The largest layer's rows for n positions, in whole floats (the staging
// buffer the backend's download and upload go through).
static size_t stage_floats(const infer_ctx *c, int n) {
    size_t most = 0;
    for (int il = 0; il < c->m->cfg.n_layer; il++)
        for (int v = 0; v < 2; v++)
            if (c->m->cfg.layers[il].kv_source == il && layer_bytes(c, il, v, n) > most) most = layer_bytes(c, il, v, n);
    return (most + 3) / 4;
}

static void **cache_of(const infer_ctx *c, int v) { return v ? c->own.v_cache : c->own.k_cache; }

infer_status infer_ctx_state_save(infer_ctx *c, const char *path, const int32_t *ids, int n, size_t *bytes) {
    const infer_config *cf = &c->m->cfg;
    infer_status st = check_ctx(c, path);
    if (st) return st;
    if (n < 0 || n > c->n_past) return fail(INFER_ERR_ARG, "%s: %d positions of a context that holds %d", path, n, c->n_past);
    size_t tl = strlen(path) + 8;
    char *tmp = malloc(tl);
    float *stage = calloc(stage_floats(c, n) + 1, sizeof(float));
    if (!tmp || !stage) {
        free(tmp), free(stage);
        return fail(INFER_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, tl, "%s.tmp", path); // (written whole, then renamed: the file is whole or absent)
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        st = fail(INFER_ERR_IO, "%s: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        goto out;
    }
    state_header h = {.version = STATE_VERSION, .kt = (uint32_t)c->kt, .vt = (uint32_t)c->vt, .n_layer = (uint32_t)cf->n_layer,
                      .n_vocab = (uint32_t)cf->n_vocab, .n_embd = (uint32_t)cf->n_embd, .n_tokens = (uint32_t)n, .model = model_hash(c->m)};
    memcpy(h.magic, g_magic, sizeof h.magic);
    uint64_t sum = fnv(fnv(FNV_SEED, &h, sizeof h), ids, sizeof(int32_t) * (size_t)n);
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && (!n || fwrite(ids, sizeof(int32_t), (size_t)n, f) == (size_t)n);
    size_t written = sizeof h + sizeof(int32_t) * (size_t)n;
    for (int il = 0; ok && il < cf->n_layer; il++) {
        if (cf->layers[il].kv_source != il) continue;
        for (int v = 0; ok && v < 2; v++) {
            size_t nb = layer_bytes(c, il, v, n);
            if (!nb) continue;
            c->own.be.ops->download(&c->own.be, stage, cache_of(c, v)[il], (nb + 3) / 4);
            if (c->ex.oom) {
                c->ex.oom = 0;
                st = fail(INFER_ERR_NOMEM, "%s: the backend's copy of the KV cache to the host failed", path);
                ok = 0;
                break;
            }
            sum = fnv(sum, stage, nb);
            ok = fwrite(stage, 1, nb, f) == nb;
            written += nb;
        }
    }
    ok = ok && fwrite(&sum, sizeof sum, 1, f) == 1 && !fflush(f) && !fsync(fileno(f));
    if (!ok && !st) st = fail(INFER_ERR_IO, "%s: %s", tmp, errno ? strerror(errno) : "write failed");
    if (fclose(f) && !st) st = fail(INFER_ERR_IO, "%s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path)) st = fail(INFER_ERR_IO, "%s: %s", path, strerror(errno));
    if (st) unlink(tmp);
    else if (bytes) *bytes = written + sizeof sum;
out:
    free(tmp), free(stage);
    return st;
}

infer_status infer_ctx_state_load(infer_ctx *c, const char *path, int32_t *ids, int cap, int *n_out, size_t *bytes) {
    const infer_config *cf = &c->m->cfg;
    *n_out = 0;
    infer_status st = check_ctx(c, path);
    if (st) return st;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(INFER_ERR_IO, "%s: %s", path, strerror(errno));
    float *stage = NULL;
    state_header h;
    struct stat sb;
    if (fstat(fileno(f), &sb) || fread(&h, sizeof h, 1, f) != 1) {
        st = fail(INFER_ERR_FORMAT, "%s: not a context state (shorter than its %zu-byte header)", path, sizeof h);
        goto out;
    }
    if (memcmp(h.magic, g_magic, sizeof h.magic)) {
        st = fail(INFER_ERR_FORMAT, "%s: not a context state (no INFERKV magic)", path);
        goto out;
    }
    if (h.version != STATE_VERSION) {
        st = fail(INFER_ERR_FORMAT, "%s: state version %u, this build reads version %d", path, h.version, STATE_VERSION);
        goto out;
    }
    if (h.n_layer != (uint32_t)cf->n_layer || h.n_vocab != (uint32_t)cf->n_vocab || h.n_embd != (uint32_t)cf->n_embd ||
        h.model != model_hash(c->m)) {
        st = fail(INFER_ERR_ARG, "%s: saved from another model (%u layers, vocabulary %u, width %u; this one: %d, %d, %d%s)", path,
                  h.n_layer, h.n_vocab, h.n_embd, cf->n_layer, cf->n_vocab, cf->n_embd,
                  h.n_layer == (uint32_t)cf->n_layer && h.n_vocab == (uint32_t)cf->n_vocab && h.n_embd == (uint32_t)cf->n_embd
                      ? ", but other weights" : "");
        goto out;
    }
    if (h.kt != (uint32_t)c->kt || h.vt != (uint32_t)c->vt) {
        st = fail(INFER_ERR_ARG, "%s: a KV cache of %s / %s; this context's is %s / %s", path, h.kt < KV_TYPES ? kv_type_name((int)h.kt) : "?",
                  h.vt < KV_TYPES ? kv_type_name((int)h.vt) : "?", kv_type_name(c->kt), kv_type_name(c->vt));
        goto out;
    }
    if (h.n_tokens > (uint32_t)c->n_ctx || h.n_tokens > (uint32_t)cap) {
        st = fail(INFER_ERR_ARG, "%s: %u positions do not fit a context of %d", path, h.n_tokens, c->n_ctx < cap ? c->n_ctx : cap);
        goto out;
    }
    int n = (int)h.n_tokens;
    size_t want = sizeof h + sizeof(int32_t) * (size_t)n + sizeof(uint64_t);
    for (int il = 0; il < cf->n_layer; il++)
        if (cf->layers[il].kv_source == il) want += layer_bytes(c, il, 0, n) + layer_bytes(c, il, 1, n);
    if ((size_t)sb.st_size != want) {
        st = fail(INFER_ERR_FORMAT, "%s: %lld bytes, but a state of %d positions is %zu (cut short or changed)", path,
                  (long long)sb.st_size, n, want);
        goto out;
    }
    if (!(stage = calloc(stage_floats(c, n) + 1, sizeof(float)))) {
        st = fail(INFER_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((st = kv_ensure(c, n)) || (st = kv_own(c, 0))) goto out; // (a cache that grows: the file's positions backed, its own, first)
    c->n_past = 0; // (from here the cache is being overwritten: it holds nothing until the whole file is in)
    if (n && fread(ids, sizeof(int32_t), (size_t)n, f) != (size_t)n) {
        st = fail(INFER_ERR_IO, "%s: could not read its tokens", path);
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= cf->n_vocab) {
            st = fail(INFER_ERR_FORMAT, "%s: token id %d (at %d) is outside the vocabulary of %d", path, ids[i], i, cf->n_vocab);
            goto out;
        }
    uint64_t sum = fnv(fnv(FNV_SEED, &h, sizeof h), ids, sizeof(int32_t) * (size_t)n), saved;
    for (int il = 0; il < cf->n_layer && !st; il++) {
        if (cf->layers[il].kv_source != il) continue;
        for (int v = 0; v < 2; v++) {
            size_t nb = layer_bytes(c, il, v, n);
            if (!nb) continue;
            if (fread(stage, 1, nb, f) != nb) {
                st = fail(INFER_ERR_IO, "%s: could not read layer %d's %s rows", path, il, v ? "V" : "K");
                break;
            }
            sum = fnv(sum, stage, nb);
            c->own.be.ops->upload(&c->own.be, cache_of(c, v)[il], stage, (nb + 3) / 4); // (the tail's bytes: positions past n)
        }
    }
    if (st) goto out;
    if (c->ex.oom) {
        c->ex.oom = 0;
        st = fail(INFER_ERR_NOMEM, "%s: the backend's copy of the KV cache from the host failed", path);
        goto out;
    }
    if (fread(&saved, sizeof saved, 1, f) != 1 || saved != sum) {
        st = fail(INFER_ERR_FORMAT, "%s: the checksum does not match (the file was changed)", path);
        goto out;
    }
    c->n_past = n, *n_out = n;
    if (bytes) *bytes = want;
out:
    fclose(f);
    free(stage);
    return st;
}
