// infer_model_load and infer_model_free: the parts above models -- a vindex
// as a model, its walk layers, the tokenizer -- around models' loading.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "inference/grammar.h"
#include "base/comm.h"
#include "compute/nccl.h"
#include "base/error.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"
#include "vindex/vindex.h"
#include "vindex/walk.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static infer_status load_model(const char *path, int layers, int rank, int world, infer_model **out);

static infer_status load(const char *path, int layers, int rank, int world, const char *id, infer_model **out) {
    *out = NULL;
    double t0 = now();
    comm *k = NULL; // (the ranks meet first: one that fails to load fails the others at once)
    if (world > 1) {
        const char *e = getenv("INFER_TP_TIMEOUT");
        double wait = e && atof(e) > 0 ? atof(e) : 300;
        const char *addr = getenv("INFER_TP_ADDR"); // (rank 0's host:port: the ranks meet over TCP, across hosts)
        k = addr && *addr ? comm_open_tcp(addr, id, rank, world, wait) : comm_open(id, rank, world, wait);
        if (!k) return fail(INFER_ERR_IO, "tensor parallel, rank %d of %d: %s", rank, world, comm_last_error());
    }
    infer_status st = load_model(path, layers, rank, world, out);
    if (st) {
        comm_abort(k);
        comm_close(k);
        return st;
    }
    (*out)->comm = k;
    (*out)->load_seconds = now() - t0;
    return INFER_OK;
}

static infer_status load_model(const char *path, int layers, int rank, int world, infer_model **out) {
    struct stat sb;
    if (stat(path, &sb) != 0) return fail(INFER_ERR_IO, "%s: no such file or directory", path);
    int is_file = S_ISREG(sb.st_mode);
    if (!S_ISDIR(sb.st_mode) && !is_file)
        return fail(INFER_ERR_UNSUPPORTED, "%s: not a model (expected a directory with config.json and *.safetensors, or a .gguf file)", path);
    infer_model *m = calloc(1, sizeof *m);
    if (!m) return fail(INFER_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&m->lazy_mu, NULL);
    m->path = strdup(path);
    infer_status st;
    if (is_file) {
        st = model_load_gguf(m, path, NULL);
    } else if (vindex_is_dir(path)) {
        // a vindex: weights.gguf, the embedding from embeddings.bin, the FFN as feature rows
        st = vindex_open(path, &m->vx);
        if (!st) st = model_load_gguf(m, vindex_model_path(m->vx), vindex_embeddings(m->vx));
        if (!st) m->tok_embd = vindex_embeddings(m->vx), m->ffn_external = 1;
    } else {
        st = config_load(&m->cfg, path);
        if (!st) st = store_open_safetensors(&m->store, path);
    }
    if (!st) {
        st = model_bind(m);
        if (!st && m->vx) st = vindex_bind_walk(m, m->vx);
        if (!st) st = layers ? model_split_layers(m, rank, world) : model_shard(m, rank, world);
        if (!st) st = model_pack(m);
        if (st) fail_wrap(st, "%s", path);
    }
    if (st) {
        infer_model_free(m);
        return st;
    }
    *out = m;
    return INFER_OK;
}

void infer_tp_new_id(char *out, size_t cap) { comm_new_id(out, cap); }

const char *infer_model_tp_transport(const infer_model *m) { return m->tp_transport; }
int infer_model_tp_rank(const infer_model *m) { return m->tp_rank; }
int infer_model_tp_world(const infer_model *m) { return m->tp_world > 1 ? m->tp_world : 1; }

infer_status infer_tp_bcast(infer_model *m, void *buf, size_t bytes) {
    if (!m->comm) return INFER_OK;
    if (comm_bcast(m->comm, buf, bytes, 0)) return fail(INFER_ERR_IO, "tensor parallel, rank %d of %d: %s", m->tp_rank, m->tp_world, comm_error(m->comm));
    return INFER_OK;
}

infer_status infer_model_load_split(const char *path, const char *split, int rank, int world, const char *id, infer_model **out) {
    *out = NULL;
    int layers = split && !strcmp(split, "layer");
    if (split && !layers && strcmp(split, "row"))
        return fail(INFER_ERR_ARG, "split \"%s\": row (tensor parallel) or layer (pipeline)", split);
    if (world < 1 || world > INFER_TP_MAX_RANKS || rank < 0 || rank >= world)
        return fail(INFER_ERR_ARG, "%s split: rank %d of %d (ranks 0 to world - 1, world 1 to %d)", layers ? "layer" : "row", rank, world,
                    INFER_TP_MAX_RANKS);
    return load(path, layers, rank, world, id, out);
}

infer_status infer_model_load_tp(const char *path, int rank, int world, const char *id, infer_model **out) {
    return infer_model_load_split(path, "row", rank, world, id, out);
}

// An integer from the environment, or def; -1 when it is there but not a number.
static int env_int(const char *name, int def) {
    const char *e = getenv(name);
    if (!e || !*e) return def;
    char *end;
    long v = strtol(e, &end, 10);
    return *end || v < 0 || v > 1 << 20 ? -1 : (int)v;
}

infer_status infer_model_load(const char *path, infer_model **out) {
    int world = env_int("INFER_TP_WORLD", 1), rank = env_int("INFER_TP_RANK", 0);
    if (world < 0 || rank < 0) {
        *out = NULL;
        const char *w = getenv("INFER_TP_WORLD"), *r = getenv("INFER_TP_RANK");
        return fail(INFER_ERR_ARG, "INFER_TP_WORLD=\"%s\", INFER_TP_RANK=\"%s\": not numbers", w ? w : "", r ? r : "");
    }
    if (world > 1) return infer_model_load_split(path, getenv("INFER_TP_SPLIT"), rank, world, getenv("INFER_TP_ID"), out);
    return load(path, 0, 0, 1, NULL, out);
}

void infer_model_free(infer_model *m) {
    if (!m) return;
    free(m->walk);
    vindex_close(m->vx);
    tokenizer_free(m->tok);
    grammar_vocab_free(m->gvocab);
    free(m->chat_tmpl);
    nccl_close(m->nccl); // (opened by the first GPU pass of a rank: inference/parallel.c)
    m->nccl = NULL;
    model_release(m);
    pthread_mutex_destroy(&m->lazy_mu);
    free(m->path);
    free(m);
}
