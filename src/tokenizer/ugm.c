// llama.cpp's Unigram tokenizer (llm_tokenizer_ugm_session, T5-style
// SentencePiece): the text is normalized through the vocabulary's
// precompiled character map (SentencePiece's XOR-compressed double array of
// replacement prefixes), spaces become "▁" (one before the text, runs
// collapsed, as the vocabulary says), and the most probable segmentation is
// found by Viterbi over a trie of the tokens: the sum of token scores (log
// probabilities; user-defined tokens score 0, a character no token covers is
// the unknown token at the lowest score minus 10).
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

// ---------------------------------------------------------------------------
// byte trie: nodes are ints, node 0 the root; children found through one
// open-addressing table keyed by (node, byte).

static uint64_t child_key(int32_t node, unsigned char c) { return (uint64_t)(uint32_t)node << 8 | c; }

static uint32_t key_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

int32_t trie_child(const tok_trie *t, int32_t node, unsigned char c) {
    if (!t->cap) return -1;
    uint64_t k = child_key(node, c);
    uint32_t mask = t->cap - 1;
    for (uint32_t i = key_hash(k) & mask;; i = (i + 1) & mask) {
        if (t->keys[i] == k) return t->child[i];
        if (t->keys[i] == UINT64_MAX) return -1;
    }
}

static int trie_grow(tok_trie *t) {
    uint32_t cap = t->cap ? t->cap * 2 : 1024;
    uint64_t *keys = malloc(sizeof *keys * cap);
    int32_t *child = malloc(sizeof *child * cap);
    if (!keys || !child) {
        free(keys);
        free(child);
        return -1;
    }
    memset(keys, 0xff, sizeof *keys * cap);
    for (uint32_t j = 0; j < t->cap; j++) {
        if (t->keys[j] == UINT64_MAX) continue;
        uint32_t i = key_hash(t->keys[j]) & (cap - 1);
        while (keys[i] != UINT64_MAX) i = (i + 1) & (cap - 1);
        keys[i] = t->keys[j];
        child[i] = t->child[j];
    }
    free(t->keys);
    free(t->child);
    t->keys = keys;
    t->child = child;
    t->cap = cap;
    return 0;
}

// Inserts s[0..n) with value v (a later insert of the same text wins).
int trie_insert(tok_trie *t, const char *s, size_t n, int32_t v) {
    if (!t->n_nodes) {
        if (!(t->value = malloc(sizeof *t->value * 64))) return -1;
        t->value[0] = -1;
        t->n_nodes = 1, t->cap_nodes = 64;
    }
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = trie_child(t, node, (unsigned char)s[i]);
        if (c < 0) {
            if ((uint64_t)(t->n_used + 1) * 2 > t->cap && trie_grow(t)) return -1;
            if (t->n_nodes == t->cap_nodes) {
                int32_t *val = realloc(t->value, sizeof *val * (size_t)t->cap_nodes * 2);
                if (!val) return -1;
                t->value = val;
                t->cap_nodes *= 2;
            }
            c = t->n_nodes++;
            t->value[c] = -1;
            uint64_t k = child_key(node, (unsigned char)s[i]);
            uint32_t j = key_hash(k) & (t->cap - 1);
            while (t->keys[j] != UINT64_MAX) j = (j + 1) & (t->cap - 1);
            t->keys[j] = k;
            t->child[j] = c;
            t->n_used++;
        }
        node = c;
    }
    t->value[node] = v;
    return 0;
}

void trie_free(tok_trie *t) {
    free(t->keys);
    free(t->child);
    free(t->value);
    memset(t, 0, sizeof *t);
}

// ---------------------------------------------------------------------------
// the precompiled character map

static int xcda_node(const tokenizer *t, size_t i, uint32_t *out) {
    if (i >= t->xcda_n) return 0; // llama.cpp throws: the map is broken; no match here
    memcpy(out, t->charsmap + 4 + 4 * i, 4);
    return 1;
}

// The normalization of the text at s[i..n): a replacement (*rep, *rep_n) for
// the *used bytes taken. As llama.cpp: a user-defined token's trie path
// passes through unchanged, then the longest prefix the map replaces, then
// one UTF-8 character as it is (U+FFFD for a bad sequence).
static void normalize_prefix(const tokenizer *t, const char *s, size_t n, size_t i, const char **rep, size_t *rep_n,
                             size_t *used) {
    // llama.cpp's naive_trie::get_longest_prefix: the deepest node reached,
    // whether or not a token ends there
    size_t depth = 0;
    for (int32_t node = 0; t->user_trie.n_nodes && i + depth < n;) {
        node = trie_child(&t->user_trie, node, (unsigned char)s[i + depth]);
        if (node < 0) break;
        depth++;
    }
    if (depth) {
        *rep = s + i, *rep_n = depth, *used = depth;
        return;
    }
    size_t best = 0;
    uint32_t best_off = 0, v;
    if (t->xcda_n && xcda_node(t, 0, &v)) {
        uint32_t node = (v >> 10) << ((v & (1u << 9)) >> 6);
        for (size_t k = i; k < n; k++) {
            unsigned char c = (unsigned char)s[k];
            if (!c) break;
            node ^= c;
            if (!xcda_node(t, node, &v) || (v & ((1u << 31) | 0xff)) != c) break;
            int leaf = (v >> 8) & 1;
            node ^= (v >> 10) << ((v & (1u << 9)) >> 6);
            if (leaf) {
                if (!xcda_node(t, node, &v)) break;
                best = k - i + 1;
                best_off = v & ((1u << 31) - 1);
            }
        }
    }
    if (best) {
        const char *r = t->charsmap + 4 + 4 * t->xcda_n + best_off;
        size_t max = best_off < t->repl_n ? t->repl_n - best_off : 0, len = 0;
        while (len < max && r[len]) len++;
        if (len < max) { // (an unterminated or outside replacement is ignored; llama.cpp throws)
            *rep = r, *rep_n = len, *used = best;
            return;
        }
    }
    // one character as llama.cpp's decoder accepts it (lead byte and
    // continuation bytes; overlong forms pass), else U+FFFD for one byte
    const unsigned char *u = (const unsigned char *)s + i;
    size_t l = u[0] < 0x80 ? 1 : u[0] < 0xC0 ? 0 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : u[0] < 0xF8 ? 4 : 0;
    if (l > n - i) l = 0;
    for (size_t k = 1; k < l; k++)
        if ((u[k] & 0xC0) != 0x80) l = 0;
    if (!l) {
        *rep = "\xEF\xBF\xBD", *rep_n = 3, *used = 1;
        return;
    }
    *rep = s + i, *rep_n = l, *used = l;
}

static int normalize(const tokenizer *t, const char *s, size_t n, tok_buf *out) {
    static const char META[] = "\xE2\x96\x81";
    int prepend = t->add_space_prefix, merge = t->remove_extra_ws, prepended = 0, in_word = 0;
    for (size_t i = 0; i < n;) {
        const char *rep;
        size_t rn, used;
        normalize_prefix(t, s, n, i, &rep, &rn, &used);
        for (size_t k = 0; k < rn; k++) {
            if (rep[k] != ' ') {
                if (!in_word) {
                    in_word = 1;
                    if ((prepend && !prepended) || merge) {
                        if (tok_buf_put(out, META, 3)) return -1;
                        prepended = 1;
                    }
                }
                if (tok_buf_put(out, rep + k, 1)) return -1;
            } else {
                in_word = 0;
                if (!merge && tok_buf_put(out, META, 3)) return -1;
            }
        }
        i += used;
    }
    return 0;
}

// ---------------------------------------------------------------------------

typedef struct {
    int32_t id;
    size_t from; // where the token starts
    double score;
} best;

infer_status ugm_encode(const tokenizer *t, const char *s, size_t n, id_list *out) {
    tok_buf nb = {0};
    if (normalize(t, s, n, &nb)) {
        free(nb.v);
        return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    }
    size_t len = nb.n;
    if (!len) {
        free(nb.v);
        return INFER_OK;
    }
    best *b = malloc(sizeof *b * (len + 1));
    if (!b) {
        free(nb.v);
        return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    }
    for (size_t i = 0; i <= len; i++) b[i] = (best){t->unk, 0, -DBL_MAX};
    b[0].score = 0;
    const char *x = nb.v;
    for (size_t i = 0; i < len;) {
        size_t cl = (size_t)utf8_lead_len((unsigned char)x[i]);
        if (cl > len - i) cl = len - i;
        int whole = 0;
        double base = b[i].score;
        int32_t node = 0;
        for (size_t k = i; k < len && node >= 0;) {
            node = trie_child(&t->tok_trie, node, (unsigned char)x[k++]);
            if (node < 0) break;
            int32_t id = t->tok_trie.value[node];
            if (id < 0) continue;
            if (k - i == cl) whole = 1;
            double sc = base + (t->type[id] == TOK_TYPE_USER_DEFINED ? 0.0 : (double)t->score[id]);
            if (sc > b[k].score) b[k] = (best){id, i, sc};
        }
        if (!whole) {
            double sc = base + t->unk_score;
            if (sc > b[i + cl].score) b[i + cl] = (best){t->unk, i, sc};
        }
        i += cl;
    }
    // back from the end; runs of unknown tokens become one
    size_t start = out->n;
    infer_status st = INFER_OK;
    int prev_unk = 0;
    for (size_t at = len;;) {
        int unk = b[at].id == t->unk;
        if (!(prev_unk && unk) && (st = ids_push(out, b[at].id))) break;
        if (!b[at].from) break;
        prev_unk = unk;
        at = b[at].from;
    }
    for (size_t i = start, j = out->n ? out->n - 1 : 0; !st && i < j; i++, j--) {
        int32_t tmp = out->v[i];
        out->v[i] = out->v[j];
        out->v[j] = tmp;
    }
    free(b);
    free(nb.v);
    return st;
}

infer_status ugm_init(tokenizer *t, const uint8_t *charsmap, size_t n) {
    if (n) {
        uint32_t blob;
        if (n < 4) return fail(INFER_ERR_FORMAT, "tokenizer: precompiled_charsmap of %zu bytes", n);
        memcpy(&blob, charsmap, 4);
        if ((size_t)blob + 4 >= n || blob % 4)
            return fail(INFER_ERR_FORMAT, "tokenizer: precompiled_charsmap's index (%u bytes) does not fit its %zu bytes", blob, n);
        if (!(t->charsmap = malloc(n))) return fail(INFER_ERR_NOMEM, "tokenizer: precompiled_charsmap");
        memcpy(t->charsmap, charsmap, n);
        t->xcda_n = blob / 4;
        t->repl_n = n - 4 - blob;
    }
    float lo = FLT_MAX;
    for (int32_t i = 0; i < t->n; i++) {
        int ty = t->type[i];
        if (ty == TOK_TYPE_NORMAL && t->score && t->score[i] < lo) lo = t->score[i];
        if ((ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNUSED) &&
            trie_insert(&t->tok_trie, t->text[i], t->len[i], i))
            return fail(INFER_ERR_NOMEM, "tokenizer: token trie");
        if (ty == TOK_TYPE_USER_DEFINED && trie_insert(&t->user_trie, t->text[i], t->len[i], i))
            return fail(INFER_ERR_NOMEM, "tokenizer: token trie");
    }
    t->unk_score = (double)lo - 10.0;
    return INFER_OK;
}
