// llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm_session): the
// text's characters (a lead byte's length, as llama.cpp reads it) are
// symbols; any two neighbours whose join is a token are a candidate; the
// candidate whose token has the highest score merges first (the leftmost on
// ties), until none is left. A symbol that is no token gives its bytes'
// <0xAB> tokens.
#include <stdlib.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

typedef struct {
    int32_t prev, next;
    uint32_t off, len; // bytes of the text; len 0: merged away
} spm_sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size; // bytes of the join when pushed
} bigram;

// max-heap: higher score first, then the smaller left index
static int before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    bigram *v;
    size_t n, cap;
} bheap;

static int push(bheap *h, bigram g) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *v = realloc(h->v, sizeof *v * cap);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&g, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = g;
    return 0;
}

static bigram pop(bheap *h) {
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int try_add(const tokenizer *t, const char *s, const spm_sym *sym, int32_t l, int32_t r, bheap *h) {
    if (l < 0 || r < 0) return 0;
    uint32_t size = sym[l].len + sym[r].len;
    int32_t id = str_map_find(t, &t->by_text, s + sym[l].off, size);
    if (id < 0) return 0;
    return push(h, (bigram){t->score ? t->score[id] : 0.0f, l, r, size});
}

// llama.cpp's byte_to_token: "<0xAB>", else the byte itself as a token
// (where llama.cpp throws for a byte with neither, the unknown token, if any).
static int32_t byte_token(const tokenizer *t, unsigned char c) {
    if (t->byte_id[c] >= 0) return t->byte_id[c];
    char b = (char)c;
    int32_t id = str_map_find(t, &t->by_text, &b, 1);
    return id >= 0 ? id : t->unk;
}

infer_status spm_encode(const tokenizer *t, const char *s, size_t n, id_list *out) {
    if (!n) return INFER_OK;
    if (n > INT32_MAX / 2) return fail(INFER_ERR_ARG, "tokenizer: text of %zu bytes", n);
    spm_sym *sym = malloc(sizeof *sym * n);
    bheap h = {0};
    infer_status st = INFER_OK;
    if (!sym) return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    int32_t k = 0;
    for (size_t off = 0; off < n; k++) {
        size_t len = (size_t)utf8_lead_len((unsigned char)s[off]);
        if (len > n - off) len = n - off;
        sym[k] = (spm_sym){k - 1, off + len == n ? -1 : k + 1, (uint32_t)off, (uint32_t)len};
        off += len;
    }
    for (int32_t i = 1; i < k; i++)
        if (try_add(t, s, sym, i - 1, i, &h)) goto oom;
    while (h.n) {
        bigram g = pop(&h);
        spm_sym *l = &sym[g.left], *r = &sym[g.right];
        if (!l->len || !r->len || l->len + r->len != g.size) continue; // one side merged since
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = g.left;
        if (try_add(t, s, sym, l->prev, g.left, &h) || try_add(t, s, sym, g.left, l->next, &h)) goto oom;
    }
    for (int32_t i = 0; i != -1 && !st; i = sym[i].next) {
        int32_t id = str_map_find(t, &t->by_text, s + sym[i].off, sym[i].len);
        if (id >= 0) {
            st = ids_push(out, id);
            continue;
        }
        for (uint32_t b = 0; b < sym[i].len && !st; b++) {
            int32_t bid = byte_token(t, (unsigned char)s[sym[i].off + b]);
            if (bid >= 0) st = ids_push(out, bid);
        }
    }
    free(sym);
    free(h.v);
    return st;
oom:
    free(sym);
    free(h.v);
    return fail(INFER_ERR_NOMEM, "tokenizer: merge candidates");
}
