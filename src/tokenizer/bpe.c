// The BPE merge loop over one word, as Hugging Face's BPE::merge_word does
// it: a min-heap of candidate merges keyed by (rank, position); the popped
// merge is applied if its pair is still there, and the new token's pairs
// with its neighbours are pushed. O(n log n) in the word's symbols.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

typedef struct {
    int32_t rank;
    int32_t pos; // index of the left symbol
} cand;

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

static int32_t rank_of(const tokenizer *t, int32_t l, int32_t r, int32_t *merged) {
    if (l < 0 || r < 0) return -1;
    return pair_map_find(&t->merges, l, r, merged);
}

// A symbol that is not a token, as the flavor falls back.
static infer_status fallback(const tokenizer *t, const char *s, size_t n, id_list *out) {
    if (t->flavor != TOK_FLAVOR_LLAMACPP) return INFER_OK; // HF's BPE without an unknown token drops it
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->pre_flags & PRE_RAW ? t->byte_id[(unsigned char)s[i]] : str_map_find(t, &t->by_text, s + i, 1);
        if (id >= 0) {
            infer_status st = ids_push(out, id);
            if (st) return st;
        }
    }
    return INFER_OK;
}

infer_status bpe_merge(const tokenizer *t, const char *word, tok_sym *sym, size_t n, id_list *out) {
    infer_status st = INFER_OK;
    if (n == 0) return INFER_OK;
    if (n > INT32_MAX / 4) return fail(INFER_ERR_ARG, "tokenizer: word of %zu symbols", n);
    // prev/next links; a merged-away symbol gets len 0. Each merge pushes
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
        int32_t r = rank_of(t, sym[i].id, sym[i + 1].id, &merged);
        if (r >= 0) heap_push(&h, (cand){r, (int32_t)i});
    }
    while (h.n) {
        cand c = heap_pop(&h);
        int32_t a = c.pos, b = next[a];
        if (!sym[a].len || b < 0) continue;
        int32_t r = rank_of(t, sym[a].id, sym[b].id, &merged);
        if (r != c.rank) continue; // the pair here changed since it was pushed
        sym[a].id = merged;
        sym[a].len += sym[b].len;
        sym[b].len = 0;
        next[a] = next[b];
        if (next[b] >= 0) prev[next[b]] = a;
        int32_t p = prev[a], q = next[a];
        if (p >= 0 && (r = rank_of(t, sym[p].id, sym[a].id, &merged)) >= 0) heap_push(&h, (cand){r, p});
        if (q >= 0 && (r = rank_of(t, sym[a].id, sym[q].id, &merged)) >= 0) heap_push(&h, (cand){r, a});
    }
    for (int32_t i = 0; i >= 0 && !st; i = next[i]) {
        if (sym[i].id >= 0 && sym[i].id < t->n) st = ids_push(out, sym[i].id);
        else st = fallback(t, word + sym[i].off, sym[i].len, out);
    }
out:
    free(prev);
    free(next);
    free(h.v);
    return st;
}

// One pre-tokenized word: its bytes mapped to GPT-2's characters (or kept,
// PRE_RAW), one symbol per character, then the merges.
infer_status bpe_word(const tokenizer *t, tok_scratch *sc, const char *w, size_t n, id_list *out) {
    infer_status st = scratch_sym(sc, n);
    if (st) return st;
    const char *word = w;
    size_t k = 0, wn = n;
    if (t->pre_flags & PRE_RAW) {
        for (size_t i = 0; i < n; k++) {
            size_t cl = (size_t)utf8_lead_len((unsigned char)w[i]);
            if (cl > n - i) cl = n - i;
            sc->sym[k] = (tok_sym){tok_symbol(t, w + i, cl), (uint32_t)i, (uint32_t)cl};
            i += cl;
        }
        int whole = t->ignore_merges;
        if (t->pre_flags & PRE_GEMMA4) {
            whole = 1;
            for (size_t i = 0; i < n && whole; i++) whole = w[i] == '\n';
        }
        if (whole) {
            int32_t id = str_map_find(t, &t->by_text, w, n);
            if (id >= 0) return ids_push(out, id);
        }
    } else {
        if ((st = scratch_buf(sc, 2 * n))) return st;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char b = (unsigned char)w[i];
            int l = utf8_encode(gpt2_byte_to_cp(b), sc->buf + m);
            sc->sym[k++] = (tok_sym){t->byte_sym[b], (uint32_t)m, (uint32_t)l};
            m += (size_t)l;
        }
        word = sc->buf, wn = m;
        if (t->ignore_merges) {
            int32_t id = str_map_find(t, &t->by_text, word, wn);
            if (id >= 0) return ids_push(out, id);
        }
    }
    (void)wn;
    return bpe_merge(t, word, sc->sym, k, out);
}

