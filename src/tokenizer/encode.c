// encode: added tokens are split out of the raw text first (leftmost,
// longest), each stretch between them is encoded by the model's kind, and
// BOS/EOS are added around the whole.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

// Hard limit on input. Encoding takes about 40 bytes of scratch per input
// byte (symbols, links, heap), so this bounds it near 10 GiB.
#define MAX_TEXT_BYTES ((size_t)256 << 20)

typedef struct {
    const tokenizer *t;
    id_list *out;
    int32_t *sym; // scratch symbols, sym_cap of them
    size_t sym_cap;
} enc;

static infer_status reserve_sym(enc *e, size_t n) {
    if (n <= e->sym_cap) return INFER_OK;
    int32_t *s = realloc(e->sym, n * sizeof *s);
    if (!s) return fail(INFER_ERR_NOMEM, "tokenizer: %zu symbols", n);
    e->sym = s;
    e->sym_cap = n;
    return INFER_OK;
}

// gpt2 kind: one pre-tokenized word, bytes -> mapped characters -> merges.
static infer_status encode_word_gpt2(void *ctx, const char *w, size_t n) {
    enc *e = ctx;
    const tokenizer *t = e->t;
    infer_status st = reserve_sym(e, n);
    if (st) return st;
    if (t->ignore_merges && n <= 4096) {
        char buf[4096 * 2];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)utf8_encode(gpt2_byte_to_cp((unsigned char)w[i]), buf + m);
        int32_t id = str_map_find(t, &t->by_text, buf, m);
        if (id >= 0) return ids_push(e->out, id);
    }
    // A byte the vocabulary has no token for is dropped, as HF does when the
    // model has no unknown token (upstream byte-level tokenizers have none;
    // SmolLM2 lacks 21 bytes, e.g. 0x04 and 0xFF).
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)w[i]];
        if (id >= 0) e->sym[k++] = id;
    }
    return bpe_merge(t, e->sym, k, e->out);
}

// llama kind: one stretch of text. Spaces become "▁"; each character is a
// symbol, or its bytes' <0xAB> tokens when it is not in the vocabulary
// (or the unknown token, consecutive ones fused, when those are missing too).
static infer_status encode_llama(enc *e, const char *s, size_t n, int prefix) {
    const tokenizer *t = e->t;
    // A byte gives at most one symbol, except a space: "▁" falls back to 3 bytes
    // in a vocabulary without it. So 3 per byte, and 3 for the prefix.
    infer_status st = reserve_sym(e, 3 * (n + 1));
    if (st) return st;
    static const char meta[] = "\xE2\x96\x81"; // U+2581
    size_t k = 0;
    int last_unk = 0;
    for (size_t i = 0; i < n || prefix;) {
        const char *c = meta;
        size_t cl = 3;
        if (prefix) prefix = 0;
        else if (s[i] == ' ') i++;
        else {
            uint32_t cp;
            c = s + i;
            cl = (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp);
            i += cl;
        }
        int32_t id = str_map_find(t, &t->by_text, c, cl);
        if (id >= 0) {
            e->sym[k++] = id;
            last_unk = 0;
            continue;
        }
        int all = 1;
        for (size_t b = 0; b < cl; b++) all &= t->byte_id[(unsigned char)c[b]] >= 0;
        if (all) {
            for (size_t b = 0; b < cl; b++) e->sym[k++] = t->byte_id[(unsigned char)c[b]];
            last_unk = 0;
        } else if (t->unk >= 0 && !last_unk) {
            e->sym[k++] = t->unk;
            last_unk = 1;
        }
    }
    return bpe_merge(t, e->sym, k, e->out);
}

// One stretch of text between added tokens.
static infer_status encode_stretch(enc *e, const char *s, size_t n, int first) {
    const tokenizer *t = e->t;
    if (t->kind == TOK_KIND_LLAMA) {
        if (!n && !(first && t->add_space_prefix)) return INFER_OK;
        return encode_llama(e, s, n, first && t->add_space_prefix);
    }
    return pretokenize(t->pre, s, n, encode_word_gpt2, e);
}

// The longest added token at s[0..n), or -1.
static int32_t match_added(const tokenizer *t, const char *s, size_t n, bool parse_special) {
    const uint32_t *L = t->added_lens[(unsigned char)s[0]];
    if (!L) return -1;
    for (; *L; L++) {
        if (*L > n) continue;
        int32_t id = str_map_find(t, &t->added, s, *L);
        if (id >= 0 && (parse_special || t->type[id] == TOK_TYPE_USER_DEFINED)) return id;
    }
    return -1;
}

// Length of the whitespace run ending at s[end) and starting no earlier than
// s[start] (lstrip), or beginning at s[i] (rstrip).
static size_t space_before(const char *s, size_t start, size_t end) {
    size_t i = end;
    while (i > start) {
        size_t j = i - 1;
        while (j > start && ((unsigned char)s[j] & 0xC0) == 0x80 && i - j < 4) j--;
        uint32_t cp;
        if ((size_t)utf8_decode((const unsigned char *)s + j, i - j, &cp) != i - j || !uni_is_space(cp)) break;
        i = j;
    }
    return end - i;
}

static size_t space_after(const char *s, size_t i, size_t n) {
    size_t k = i;
    while (k < n) {
        uint32_t cp;
        int l = utf8_decode((const unsigned char *)s + k, n - k, &cp);
        if (!uni_is_space(cp)) break;
        k += (size_t)l;
    }
    return k - i;
}

infer_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                              bool parse_special, int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (len > MAX_TEXT_BYTES) return fail(INFER_ERR_ARG, "tokenizer: text of %zu bytes (limit %zu)", len, MAX_TEXT_BYTES);
    if (!text && len) return fail(INFER_ERR_ARG, "tokenizer: NULL text");
    id_list out = {0};
    enc e = {t, &out, NULL, 0};
    infer_status st = INFER_OK;
    if (add_special && t->add_bos) st = ids_push(&out, t->bos);
    size_t a = 0;
    int first = 1;
    for (size_t i = 0; i < len && !st;) {
        int32_t id = match_added(t, text + i, len - i, parse_special);
        if (id < 0) {
            i++;
            continue;
        }
        size_t b = i, end = i + t->len[id];
        if (t->strip && (t->strip[id] & TOK_LSTRIP)) b -= space_before(text, a, i);
        if (t->strip && (t->strip[id] & TOK_RSTRIP)) end += space_after(text, end, len);
        if (a < b) st = encode_stretch(&e, text + a, b - a, first);
        first = 0;
        if (!st) st = ids_push(&out, id);
        i = a = end;
    }
    if (!st && (a < len || (first && t->add_space_prefix && len))) st = encode_stretch(&e, text + a, len - a, first);
    if (!st && add_special && t->add_eos) st = ids_push(&out, t->eos);
    free(e.sym);
    if (st) {
        free(out.v);
        return st;
    }
    if (!out.v && !(out.v = malloc(sizeof(int32_t)))) return fail(INFER_ERR_NOMEM, "tokenizer: ids");
    *ids = out.v;
    *n_ids = out.n;
    return INFER_OK;
}
