// tokenizer_from_vocab fed from GGUF metadata (tokenizer.ggml.*), the way
// the GGUF reader will feed it: the same corpus must give the same ids as
// through tokenizer.json. For Gemma 3 this is the path that derives the
// merges from the scores. A minimal metadata walker stands in for the GGUF
// reader here (it reads the key/value section only, checking every type).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mapfile.h"
#include "check.h"
#include "tokenizer/tokenizer.h"

#define ROOT TEST_DATA_DIR "/../.."

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };
static const size_t scalar_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct {
    const unsigned char *p, *end;
    int bad;
} rd;

static uint64_t get(rd *r, size_t n) {
    uint64_t v = 0;
    if ((size_t)(r->end - r->p) < n) {
        r->bad = 1;
        r->p = r->end;
        return 0;
    }
    memcpy(&v, r->p, n); // little-endian host
    r->p += n;
    return v;
}

// A string: returns a pointer into the mapping and its length.
static const char *get_str(rd *r, uint32_t *len) {
    uint64_t n = get(r, 8);
    if (r->bad || n > (uint64_t)(r->end - r->p) || n > UINT32_MAX) {
        r->bad = 1;
        return NULL;
    }
    const char *s = (const char *)r->p;
    r->p += n;
    *len = (uint32_t)n;
    return s;
}

typedef struct {
    tok_vocab v;
    const char **tokens, **merges;
    uint32_t *lens, *mlens;
    float *scores;
    int32_t *types;
    char model[32], pre[32];
    char *tmpl;
} gg;

static int key_is(const char *k, uint32_t kl, const char *want) { return strlen(want) == kl && !memcmp(k, want, kl); }

// Reads a token id; GGUF writers use UINT32 (llama.cpp) and sometimes INT32.
static infer_status read_id(rd *r, uint32_t type, const char *key, int32_t *out) {
    if (type != T_U32 && type != T_I32) return fail(INFER_ERR_FORMAT, "%s: type %u, want uint32", key, type);
    *out = (int32_t)get(r, 4);
    return INFER_OK;
}

static infer_status read_bool(rd *r, uint32_t type, const char *key, bool *out) {
    if (type != T_BOOL) return fail(INFER_ERR_FORMAT, "%s: type %u, want bool", key, type);
    *out = get(r, 1) != 0;
    return INFER_OK;
}

static infer_status skip_value(rd *r, uint32_t type, int depth) {
    if (type < sizeof scalar_size / sizeof *scalar_size && scalar_size[type]) {
        get(r, scalar_size[type]);
        return INFER_OK;
    }
    uint32_t len;
    if (type == T_STR) return get_str(r, &len) ? INFER_OK : fail(INFER_ERR_FORMAT, "bad string");
    if (type == T_ARR && depth < 2) {
        uint32_t et = (uint32_t)get(r, 4);
        uint64_t n = get(r, 8);
        for (uint64_t i = 0; i < n && !r->bad; i++)
            if (skip_value(r, et, depth + 1)) return INFER_ERR_FORMAT;
        return r->bad ? fail(INFER_ERR_FORMAT, "truncated array") : INFER_OK;
    }
    return fail(INFER_ERR_FORMAT, "value type %u", type);
}

// An array value of element type want and its count; count bounded by the bytes left.
static infer_status array_head(rd *r, uint32_t type, const char *key, uint32_t want, uint64_t *n) {
    if (type != T_ARR) return fail(INFER_ERR_FORMAT, "%s: type %u, want array", key, type);
    uint32_t et = (uint32_t)get(r, 4);
    *n = get(r, 8);
    if (et != want) return fail(INFER_ERR_FORMAT, "%s: array of type %u, want %u", key, et, want);
    if (r->bad || *n > (uint64_t)(r->end - r->p) || *n > (1u << 24))
        return fail(INFER_ERR_FORMAT, "%s: %llu elements", key, (unsigned long long)*n);
    return INFER_OK;
}

static infer_status read_gguf(const mapfile *m, gg *g) {
    rd r = {m->data, m->data + m->size, 0};
    if (get(&r, 4) != 0x46554747u) return fail(INFER_ERR_FORMAT, "not GGUF");
    uint32_t version = (uint32_t)get(&r, 4);
    if (version != 3) return fail(INFER_ERR_UNSUPPORTED, "GGUF version %u", version);
    get(&r, 8); // tensors
    uint64_t n_kv = get(&r, 8);
    g->v.bos = g->v.eos = g->v.eot = g->v.pad = g->v.unk = -1;
    infer_status st = INFER_OK;
    for (uint64_t k = 0; k < n_kv && !st && !r.bad; k++) {
        uint32_t kl, sl;
        const char *key = get_str(&r, &kl);
        uint32_t type = (uint32_t)get(&r, 4);
        if (!key) return fail(INFER_ERR_FORMAT, "bad key");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(kl < 100 ? kl : 100), key);
        uint64_t n;
        if (key_is(key, kl, "tokenizer.ggml.model") || key_is(key, kl, "tokenizer.ggml.pre")) {
            if (type != T_STR) return fail(INFER_ERR_FORMAT, "%s: type %u, want string", name, type);
            const char *s = get_str(&r, &sl);
            char *dst = key_is(key, kl, "tokenizer.ggml.model") ? g->model : g->pre;
            snprintf(dst, 32, "%.*s", (int)(sl < 31 ? sl : 31), s ? s : "");
        } else if (key_is(key, kl, "tokenizer.chat_template")) {
            if (type != T_STR) return fail(INFER_ERR_FORMAT, "%s: type %u, want string", name, type);
            const char *s = get_str(&r, &sl);
            g->tmpl = strndup(s ? s : "", s ? sl : 0);
        } else if (key_is(key, kl, "tokenizer.ggml.tokens")) {
            if ((st = array_head(&r, type, name, T_STR, &n))) break;
            g->tokens = malloc(sizeof *g->tokens * (n + 1));
            g->lens = malloc(sizeof *g->lens * (n + 1));
            for (uint64_t i = 0; i < n && !r.bad; i++) g->tokens[i] = get_str(&r, &g->lens[i]);
            g->v.n_tokens = (int32_t)n;
        } else if (key_is(key, kl, "tokenizer.ggml.merges")) {
            if ((st = array_head(&r, type, name, T_STR, &n))) break;
            g->merges = malloc(sizeof *g->merges * (n + 1));
            g->mlens = malloc(sizeof *g->mlens * (n + 1));
            for (uint64_t i = 0; i < n && !r.bad; i++) g->merges[i] = get_str(&r, &g->mlens[i]);
            g->v.n_merges = (int32_t)n;
        } else if (key_is(key, kl, "tokenizer.ggml.scores")) {
            if ((st = array_head(&r, type, name, T_F32, &n))) break;
            g->scores = malloc(sizeof(float) * (n + 1));
            for (uint64_t i = 0; i < n && !r.bad; i++) {
                uint32_t u = (uint32_t)get(&r, 4);
                memcpy(&g->scores[i], &u, 4);
            }
            if (n != (uint64_t)g->v.n_tokens) st = fail(INFER_ERR_FORMAT, "%s: %llu scores", name, (unsigned long long)n);
        } else if (key_is(key, kl, "tokenizer.ggml.token_type")) {
            if ((st = array_head(&r, type, name, T_I32, &n))) break;
            g->types = malloc(sizeof(int32_t) * (n + 1));
            for (uint64_t i = 0; i < n && !r.bad; i++) g->types[i] = (int32_t)get(&r, 4);
            if (n != (uint64_t)g->v.n_tokens) st = fail(INFER_ERR_FORMAT, "%s: %llu types", name, (unsigned long long)n);
        } else if (key_is(key, kl, "tokenizer.ggml.bos_token_id")) st = read_id(&r, type, name, &g->v.bos);
        else if (key_is(key, kl, "tokenizer.ggml.eos_token_id")) st = read_id(&r, type, name, &g->v.eos);
        else if (key_is(key, kl, "tokenizer.ggml.eot_token_id")) st = read_id(&r, type, name, &g->v.eot);
        else if (key_is(key, kl, "tokenizer.ggml.padding_token_id")) st = read_id(&r, type, name, &g->v.pad);
        else if (key_is(key, kl, "tokenizer.ggml.unknown_token_id")) st = read_id(&r, type, name, &g->v.unk);
        else if (key_is(key, kl, "tokenizer.ggml.add_bos_token")) st = read_bool(&r, type, name, &g->v.add_bos);
        else if (key_is(key, kl, "tokenizer.ggml.add_eos_token")) st = read_bool(&r, type, name, &g->v.add_eos);
        else if (key_is(key, kl, "tokenizer.ggml.add_space_prefix")) st = read_bool(&r, type, name, &g->v.add_space_prefix);
        else st = skip_value(&r, type, 0);
    }
    if (!st && r.bad) st = fail(INFER_ERR_FORMAT, "truncated metadata");
    if (st) return st;
    g->v.tokens = g->tokens;
    g->v.token_lens = g->lens;
    g->v.scores = g->scores;
    g->v.types = g->types;
    g->v.merges = g->merges;
    g->v.merge_lens = g->mlens;
    g->v.chat_template = g->tmpl;
    if ((st = tok_kind_from_name(g->model, &g->v.kind))) return st;
    if (g->v.kind == TOK_KIND_GPT2 && (st = tok_pre_from_name(g->pre, &g->v.pre))) return st;
    return INFER_OK;
}

static void free_gg(gg *g) {
    free(g->tokens), free(g->lens), free(g->merges), free(g->mlens), free(g->scores), free(g->types), free(g->tmpl);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    if (fread(d, 1, (size_t)n, f) != (size_t)n) n = 0;
    d[n] = 0;
    fclose(f);
    return d;
}

static void check_model(const char *name) {
    char cmd[2048], path[1024] = {0};
    snprintf(cmd, sizeof cmd, "cd '%s' && scripts/fetch-model.sh %s", ROOT, name);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (!fgets(path, sizeof path, p)) path[0] = 0;
        int rc = pclose(p);
        if (rc) path[0] = 0;
    }
    path[strcspn(path, "\n")] = 0;
    CHECK(path[0], "could not fetch the %s GGUF (`%s` failed; needs network and pip)", name, cmd);
    if (!path[0]) return;
    mapfile m;
    CHECK(mapfile_open(&m, path) == INFER_OK, "%s", infer_last_error());
    gg g = {0};
    infer_status st = read_gguf(&m, &g);
    CHECK(st == INFER_OK, "%s: %s", path, infer_last_error());
    tokenizer *t = NULL;
    if (!st) {
        st = tokenizer_from_vocab(&g.v, &t);
        CHECK(st == INFER_OK, "%s: %s", path, infer_last_error());
    }
    if (t) {
        char *corpus = slurp(TEST_DATA_DIR "/tokenizer/corpus.txt");
        snprintf(cmd, sizeof cmd, TEST_DATA_DIR "/tokenizer/%s.ids", name);
        char *exp = slurp(cmd);
        CHECK(corpus && exp, "corpus or %s missing", cmd);
        int n = 0, match = 0;
        int32_t *want = malloc(sizeof(int32_t) << 16);
        for (char *c = corpus, *e = exp; c && e && *c && *e; n++) {
            char *cn = strchr(c, '\n'), *en = strchr(e, '\n');
            if (!cn || !en) break;
            *cn = 0, *en = 0;
            size_t nw = 0;
            for (char *q = e, *end;; q = end) {
                long v = strtol(q, &end, 10);
                if (end == q || nw == 1 << 16) break;
                want[nw++] = (int32_t)v;
            }
            int32_t *ids;
            size_t nids;
            if (!tokenizer_encode(t, c, strlen(c), true, true, &ids, &nids)) {
                int same = nids == nw && !memcmp(ids, want, nw * sizeof *ids);
                match += same;
                if (!same && n - match < 4) fprintf(stderr, "%s (GGUF) line %d differs: \"%s\"\n", name, n, c);
                free(ids);
            }
            c = cn + 1, e = en + 1;
        }
        printf("%s from GGUF metadata: %d/%d lines match\n", name, match, n);
        CHECK(n >= 2000 && match == n, "%s from GGUF: %d of %d lines differ", name, n - match, n);
        free(want), free(corpus), free(exp);
        tokenizer_free(t);
    }
    free_gg(&g);
    mapfile_close(&m);
}

int main(void) {
    check_model("gemma3");
    check_model("smollm2");
    return check_summary("test_tokenizer_gguf");
}
