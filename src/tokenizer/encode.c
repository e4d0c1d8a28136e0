// encode: added tokens are split out of the raw text first, each stretch
// between them is encoded by the model's kind, and BOS/EOS are added around
// the whole.
//
// Added tokens are found as the flavor finds them: llama.cpp takes the
// longest token first over the whole text (tokenizer_st_partition), Hugging
// Face the leftmost-longest match; lstrip/rstrip take ASCII whitespace in
// llama.cpp and Unicode whitespace in Hugging Face.
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

// Hard limit on input. Encoding takes about 40 bytes of scratch per input
// byte (symbols, links, heap), so this bounds it near 10 GiB.
#define MAX_TEXT_BYTES ((size_t)256 << 20)

static const char META[] = "\xE2\x96\x81"; // U+2581, SentencePiece's space

typedef struct {
    const tokenizer *t;
    id_list *out;
    tok_scratch sc;
} enc;

// ---------------------------------------------------------------------------
// byte-level BPE (gpt2 kind)

static infer_status encode_word_gpt2(void *ctx, const char *w, size_t n) {
    enc *e = ctx;
    return bpe_word(e->t, &e->sc, w, n, e->out);
}

// llama.cpp re-encodes the text from its code points before splitting it: a
// bad UTF-8 sequence becomes U+FFFD (EF BF BD), an overlong form its shortest.
static infer_status clean_utf8(enc *e, const char *s, size_t n, const char **out, size_t *out_n) {
    *out = s, *out_n = n;
    size_t i = 0;
    while (i < n && (unsigned char)s[i] < 0x80) i++;
    if (i == n) {
        *out = s, *out_n = n;
        return INFER_OK;
    }
    infer_status st = scratch_buf(&e->sc, 3 * n);
    if (st) return st;
    size_t m = 0;
    for (i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)utf8_decode_lenient((const unsigned char *)s + i, n - i, &cp);
        m += (size_t)utf8_encode(cp, e->sc.buf + m);
    }
    // the words are encoded into buf as well: hand over this copy
    char *copy = malloc(m ? m : 1);
    if (!copy) return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    memcpy(copy, e->sc.buf, m);
    *out = copy, *out_n = m;
    return INFER_OK;
}

static infer_status encode_gpt2(enc *e, const char *s, size_t n) {
    const tokenizer *t = e->t;
    char *esc = NULL;
    if (t->pre_flags & PRE_ESCAPE_WS) { // spaces -> "▁"
        size_t spaces = 0;
        for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
        if (!(esc = malloc(n + 2 * spaces + 1))) return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') memcpy(esc + m, META, 3), m += 3;
            else esc[m++] = s[i];
        }
        s = esc, n = m;
    }
    const char *clean;
    size_t cn;
    infer_status st = clean_utf8(e, s, n, &clean, &cn);
    if (!st) st = pretokenize(t, clean, cn, encode_word_gpt2, e);
    if (clean != s) free((char *)clean);
    free(esc);
    return st;
}

// ---------------------------------------------------------------------------
// SentencePiece BPE (llama kind)

// llama.cpp: spaces -> "▁" (one before the text when prefix), then spm_encode.
static infer_status encode_spm(enc *e, const char *s, size_t n, int prefix) {
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    infer_status st = scratch_buf(&e->sc, n + 2 * spaces + 3);
    if (st) return st;
    size_t m = 0;
    if (prefix) memcpy(e->sc.buf, META, 3), m = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') memcpy(e->sc.buf + m, META, 3), m += 3;
        else e->sc.buf[m++] = s[i];
    }
    return spm_encode(e->t, e->sc.buf, m, e->out);
}

// One stretch of raw text between added tokens. prev_special: the stretch
// begins the text or follows an added token.
static infer_status encode_stretch(enc *e, const char *s, size_t n, int prev_special, int first) {
    const tokenizer *t = e->t;
    if (t->flavor == TOK_FLAVOR_HF) return hf_encode(t, &e->sc, s, n, first, e->out);
    switch (t->kind) {
    case TOK_KIND_LLAMA: return encode_spm(e, s, n, t->add_space_prefix && prev_special);
    case TOK_KIND_GPT2: return encode_gpt2(e, s, n);
    case TOK_KIND_BERT: return wpm_encode(t, s, n, e->out);
    case TOK_KIND_T5: return ugm_encode(t, s, n, e->out);
    case TOK_KIND_RWKV: return rwkv_encode(t, s, n, e->out);
    }
    return fail(INFER_ERR_FORMAT, "tokenizer: kind %d", (int)t->kind);
}

// ---------------------------------------------------------------------------
// added tokens

typedef struct {
    size_t off, len; // raw text, or
    int32_t id;      // an added token (id >= 0)
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
} frags;

static infer_status frag_push(frags *f, frag x) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *v = realloc(f->v, sizeof *v * cap);
        if (!v) return fail(INFER_ERR_NOMEM, "tokenizer: text fragments");
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = x;
    return INFER_OK;
}

static int matchable(const tokenizer *t, int32_t id, bool parse_special) {
    return parse_special || (t->type[id] != TOK_TYPE_CONTROL && t->type[id] != TOK_TYPE_UNKNOWN);
}

// ... at s[pos, pos+len): where `plain` marks a byte (text that is only
// text, tokenizer_encode_marked), as without parse_special
static int matchable_at(const tokenizer *t, int32_t id, bool parse_special, const uint8_t *plain, size_t pos, size_t len) {
    if (parse_special && plain)
        for (size_t i = 0; i < len; i++)
            if (plain[pos + i]) return matchable(t, id, false);
    return matchable(t, id, parse_special);
}

// llama.cpp takes each added token in turn, longest first, and splits every
// raw fragment at its occurrences, leftmost first (tokenizer_st_partition).
// The same result in one pass: every occurrence of every added token is a
// candidate; candidates are taken longest first, then leftmost, when their
// bytes are still raw text (with lstrip/rstrip the whitespace they swallow is
// taken too). Only two tokens of one length that overlap in the text could
// come out differently, where llama.cpp's order (an unstable sort) decides.
typedef struct {
    size_t pos;
    uint32_t len;
    int32_t id;
} cand;

static int by_len_then_pos(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    if (a->len != b->len) return a->len < b->len ? 1 : -1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static infer_status partition_llamacpp(const tokenizer *t, const char *s, size_t n, bool parse_special, const uint8_t *plain, frags *out) {
    cand *c = NULL;
    size_t nc = 0, cap = 0;
    for (size_t p = 0; p < n; p++) {
        const uint32_t *L = t->added_lens[(unsigned char)s[p]];
        for (; L && *L; L++) {
            if (*L > n - p) continue;
            int32_t id = str_map_find(t, &t->added, s + p, *L);
            if (id < 0 || !matchable_at(t, id, parse_special, plain, p, *L)) continue;
            if (nc == cap) {
                cap = cap ? cap * 2 : 64;
                cand *v = realloc(c, sizeof *v * cap);
                if (!v) {
                    free(c);
                    return fail(INFER_ERR_NOMEM, "tokenizer: added-token matches");
                }
                c = v;
            }
            c[nc++] = (cand){p, *L, id};
        }
    }
    frags f = {0};
    infer_status st = INFER_OK;
    if (!nc) {
        free(c);
        st = frag_push(&f, (frag){0, n, -1});
        *out = f;
        return st;
    }
    qsort(c, nc, sizeof *c, by_len_then_pos);
    // owner[i]: 0 raw, 1 swallowed whitespace, 2 + k: byte of accepted candidate k's token
    int32_t *owner = calloc(n, sizeof *owner);
    if (!owner) {
        free(c);
        return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    }
    for (size_t k = 0; k < nc; k++) {
        size_t a = c[k].pos, b = a + c[k].len, i;
        for (i = a; i < b && !owner[i]; i++) {}
        if (i < b) continue;
        for (i = a; i < b; i++) owner[i] = (int32_t)(2 + k);
        uint8_t strip = t->strip ? t->strip[c[k].id] : 0;
        if (strip & TOK_LSTRIP)
            for (i = a; i > 0 && !owner[i - 1] && isspace((unsigned char)s[i - 1]); i--) owner[i - 1] = 1;
        if (strip & TOK_RSTRIP)
            for (i = b; i < n && !owner[i] && isspace((unsigned char)s[i]); i++) owner[i] = 1;
    }
    for (size_t i = 0; i < n && !st;) {
        if (owner[i] == 1) {
            i++;
        } else if (owner[i] >= 2) {
            const cand *k = &c[owner[i] - 2];
            st = frag_push(&f, (frag){0, 0, k->id});
            i += k->len;
        } else {
            size_t j = i;
            while (j < n && !owner[j]) j++;
            st = frag_push(&f, (frag){i, j - i, -1});
            i = j;
        }
    }
    free(owner);
    free(c);
    if (st) {
        free(f.v);
        return st;
    }
    *out = f;
    return INFER_OK;
}

// The longest added token at s[0..n), or -1 (Hugging Face).
static int32_t match_added(const tokenizer *t, const char *s, size_t n, bool parse_special, const uint8_t *plain) {
    const uint32_t *L = t->added_lens[(unsigned char)s[0]];
    if (!L) return -1;
    for (; *L; L++) {
        if (*L > n) continue;
        int32_t id = str_map_find(t, &t->added, s, *L);
        int special = parse_special;
        for (size_t i = 0; plain && special && i < *L; i++) special = !plain[i];
        if (id >= 0 && (special || t->type[id] == TOK_TYPE_USER_DEFINED)) return id;
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

// Hugging Face: the leftmost added token, the longest there.
static infer_status partition_hf(const tokenizer *t, const char *s, size_t n, bool parse_special, const uint8_t *plain, frags *out) {
    frags f = {0};
    infer_status st = INFER_OK;
    size_t a = 0;
    for (size_t i = 0; i < n && !st;) {
        int32_t id = match_added(t, s + i, n - i, parse_special, plain ? plain + i : NULL);
        if (id < 0) {
            i++;
            continue;
        }
        size_t b = i, end = i + t->len[id];
        if (t->strip && (t->strip[id] & TOK_LSTRIP)) b -= space_before(s, a, i);
        if (t->strip && (t->strip[id] & TOK_RSTRIP)) end += space_after(s, end, n);
        if (a < b) st = frag_push(&f, (frag){a, b - a, -1});
        if (!st) st = frag_push(&f, (frag){0, 0, id});
        i = a = end;
    }
    if (!st && a < n) st = frag_push(&f, (frag){a, n - a, -1});
    if (st) {
        free(f.v);
        return st;
    }
    *out = f;
    return INFER_OK;
}

static infer_status encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                           const uint8_t *plain, int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (len > MAX_TEXT_BYTES) return fail(INFER_ERR_ARG, "tokenizer: text of %zu bytes (limit %zu)", len, MAX_TEXT_BYTES);
    if (!text && len) return fail(INFER_ERR_ARG, "tokenizer: NULL text");
    id_list out = {0};
    enc e = {t, &out, {0}};
    frags f = {0};
    infer_status st = INFER_OK;
    // llama.cpp's WordPiece adds BOS (CLS) and SEP whatever the flags say
    int llamacpp = t->flavor == TOK_FLAVOR_LLAMACPP, bert = llamacpp && t->kind == TOK_KIND_BERT;
    if (t->kind == TOK_KIND_RWKV) add_special = false; // llama.cpp adds nothing around RWKV text
    if (len) st = llamacpp ? partition_llamacpp(t, text, len, parse_special, plain, &f) : partition_hf(t, text, len, parse_special, plain, &f);
    if (!st && add_special && (bert ? t->bos >= 0 : t->add_bos)) st = ids_push(&out, t->bos);
    int prev_special = 1;
    for (size_t i = 0; i < f.n && !st; i++) {
        if (f.v[i].id >= 0) {
            st = ids_push(&out, f.v[i].id);
            prev_special = 1;
        } else {
            st = encode_stretch(&e, text + f.v[i].off, f.v[i].len, prev_special, i == 0);
            prev_special = 0;
        }
    }
    if (!st && add_special && bert && t->sep >= 0) st = ids_push(&out, t->sep);
    else if (!st && add_special && !bert && t->add_eos) st = ids_push(&out, t->eos);
    free(e.sc.sym);
    free(e.sc.buf);
    free(f.v);
    if (st) {
        free(out.v);
        return st;
    }
    if (!out.v && !(out.v = malloc(sizeof(int32_t)))) return fail(INFER_ERR_NOMEM, "tokenizer: ids");
    *ids = out.v;
    *n_ids = out.n;
    return INFER_OK;
}

infer_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special, int32_t **ids,
                              size_t *n_ids) {
    return encode(t, text, len, add_special, parse_special, NULL, ids, n_ids);
}

infer_status tokenizer_encode_marked(const tokenizer *t, const char *text, size_t len, bool add_special, const uint8_t *plain,
                                     int32_t **ids, size_t *n_ids) {
    return encode(t, text, len, add_special, true, plain, ids, n_ids);
}

int tokenizer_has_special(const tokenizer *t, const char *text, size_t len) {
    frags f = {0};
    if (!len || len > MAX_TEXT_BYTES) return 0;
    infer_status st = t->flavor == TOK_FLAVOR_LLAMACPP ? partition_llamacpp(t, text, len, true, NULL, &f) : partition_hf(t, text, len, true, NULL, &f);
    int found = 0;
    for (size_t i = 0; !st && i < f.n && !found; i++) found = f.v[i].id >= 0 && matchable(t, f.v[i].id, false) == 0;
    free(f.v);
    return st ? -1 : found;
}
