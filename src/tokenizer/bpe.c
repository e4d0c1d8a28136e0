// The BPE merge loop over one word, as Hugging Face's BPE::merge_word does
// it: a min-heap of candidate merges keyed by (rank, position); the popped
// merge is applied if its pair is still there, and the new token's pairs
// with its neighbours are pushed. O(n log n) in the word's symbols.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"

infer_status ids_push(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        int32_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) return fail(INFER_ERR_NOMEM, "tokenizer: %zu ids", cap);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return INFER_OK;
}

typedef struct {
    int64_t rank;
    int32_t pos; // index of the left symbol
} cand;

// The rank of merging l and r (lower first), or -1 if they do not merge.
// Listed merges: the list's order. Score vocabularies: the join must be a
// token; rank by its score, then the longer left part (in characters), then
// its id, as the derived list of Hugging Face's converter orders them.
static int64_t merge_rank(const tokenizer *t, int32_t l, int32_t r, int32_t *merged) {
    if (!t->score_rank) return pair_map_find(&t->merges, l, r, merged);
    size_t nl = t->len[l], nr = t->len[r];
    char small[512], *buf = nl + nr <= sizeof small ? small : malloc(nl + nr);
    if (!buf) return -1;
    memcpy(buf, t->text[l], nl);
    memcpy(buf + nl, t->text[r], nr);
    int32_t m = str_map_find(t, &t->by_text, buf, nl + nr);
    if (buf != small) free(buf);
    if (m < 0) return -1;
    int64_t chars = 0;
    for (size_t i = 0; i < nl; i++) chars += ((unsigned char)t->text[l][i] & 0xC0) != 0x80;
    if (chars > 0xFFFF) chars = 0xFFFF;
    *merged = m;
    return (int64_t)t->score_rank[m] << 40 | (0xFFFF - chars) << 24 | m;
}

static int cand_less(cand a, cand b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

typedef struct {
    cand *v;
    size_t n;
} heap;

static void heap_push(heap *h, cand c) {
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(c, h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
}

static cand heap_pop(heap *h) {
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_less(h->v[c + 1], h->v[c])) c++;
        if (!cand_less(h->v[c], last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

infer_status bpe_merge(const tokenizer *t, int32_t *sym, size_t n, id_list *out) {
    infer_status st = INFER_OK;
    if (n == 0) return INFER_OK;
    if (n > INT32_MAX / 4) return fail(INFER_ERR_ARG, "tokenizer: word of %zu symbols", n);
    // prev/next links; a merged-away symbol gets sym = -1. Each merge pushes
    // at most two candidates, and there are at most n - 1 merges: 3n bounds the heap.
    int32_t *prev = malloc(sizeof(int32_t) * n), *next = malloc(sizeof(int32_t) * n);
    heap h = {malloc(sizeof(cand) * 3 * n), 0};
    if (!prev || !next || !h.v) {
        st = fail(INFER_ERR_NOMEM, "tokenizer: word of %zu symbols", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    int32_t merged;
    for (size_t i = 0; i + 1 < n; i++) {
        int64_t r = merge_rank(t, sym[i], sym[i + 1], &merged);
        if (r >= 0) heap_push(&h, (cand){r, (int32_t)i});
    }
    while (h.n) {
        cand c = heap_pop(&h);
        int32_t a = c.pos, b = next[a];
        if (sym[a] < 0 || b < 0) continue;
        int64_t r = merge_rank(t, sym[a], sym[b], &merged);
        if (r != c.rank) continue; // the pair here changed since it was pushed
        sym[a] = merged;
        sym[b] = -1;
        next[a] = next[b];
        if (next[b] >= 0) prev[next[b]] = a;
        int32_t p = prev[a], q = next[a];
        if (p >= 0 && (r = merge_rank(t, sym[p], sym[a], &merged)) >= 0) heap_push(&h, (cand){r, p});
        if (q >= 0 && (r = merge_rank(t, sym[a], sym[q], &merged)) >= 0) heap_push(&h, (cand){r, a});
    }
    for (int32_t i = 0; i >= 0 && !st; i = next[i]) st = ids_push(out, sym[i]);
out:
    free(prev);
    free(next);
    free(h.v);
    return st;
}
