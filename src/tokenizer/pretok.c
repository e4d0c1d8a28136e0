// Pre-tokenizers of the gpt2 kind: the regular expressions Hugging Face and
// llama.cpp use, written out by hand over code points (no regex library).
// Each function walks the text once and emits every piece, matched or not,
// in order, so the pieces always cover the text.
#include <stdlib.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

typedef struct {
    const uint32_t *cp; // (nc) code points
    const size_t *off;  // (nc + 1) byte offset of each, off[nc] = bytes
    size_t nc;
    const char *s;
    word_fn emit;
    void *ctx;
} text;

static int is_l(uint32_t c) { return uni_is_letter(c); }
static int is_n(uint32_t c) { return uni_is_number(c); }
static int is_s(uint32_t c) { return uni_is_space(c); }
static int is_other(uint32_t c) { return !is_s(c) && !is_l(c) && !is_n(c); }
static int is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

static infer_status emit(const text *t, size_t a, size_t b) {
    return t->emit(t->ctx, t->s + t->off[a], t->off[b] - t->off[a]);
}

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitive with ci): its length in
// code points, or 0.
static size_t contraction(const text *t, size_t i, int ci) {
    if (t->cp[i] != '\'' || i + 1 >= t->nc) return 0;
    uint32_t a = t->cp[i + 1], b = i + 2 < t->nc ? t->cp[i + 2] : 0;
    if (ci) a = lower_ascii(a), b = lower_ascii(b);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static size_t run(const text *t, size_t i, int (*pred)(uint32_t)) {
    while (i < t->nc && pred(t->cp[i])) i++;
    return i;
}

// \s+(?!\S)|\s+ at i (cp[i] is whitespace): the end of the piece.
static size_t space_piece(const text *t, size_t i) {
    size_t k = run(t, i, is_s);
    if (k == t->nc || k - i == 1) return k;
    return k - 1; // leave the last space to lead the next word
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
static infer_status split_gpt2(const text *t, size_t a, size_t b) {
    text u = *t;
    u.nc = b; // pieces never look past b
    for (size_t i = a; i < b;) {
        size_t e = contraction(&u, i, 0);
        if (e) e += i;
        else {
            size_t j = i + (u.cp[i] == ' ' && i + 1 < b && !is_s(u.cp[i + 1]));
            if (is_l(u.cp[j])) e = run(&u, j, is_l);
            else if (is_n(u.cp[j])) e = run(&u, j, is_n);
            else if (!is_s(u.cp[j])) e = run(&u, j, is_other);
            else e = space_piece(&u, i);
        }
        infer_status st = emit(&u, i, e);
        if (st) return st;
        i = e;
    }
    return INFER_OK;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with max_digits = 3 (llama3) or 1 (qwen2).
static infer_status split_llama3(const text *t, size_t max_digits) {
    const uint32_t *cp = t->cp;
    size_t nc = t->nc;
    for (size_t i = 0; i < nc;) {
        size_t e = contraction(t, i, 1);
        if (e) e += i;
        else if (is_l(cp[i])) e = run(t, i, is_l);
        else if (!is_crlf(cp[i]) && !is_n(cp[i]) && i + 1 < nc && is_l(cp[i + 1])) e = run(t, i + 1, is_l);
        else if (is_n(cp[i])) {
            e = i;
            while (e < nc && e - i < max_digits && is_n(cp[e])) e++;
        } else {
            size_t j = i + (cp[i] == ' ' && i + 1 < nc);
            if (is_other(cp[j])) {
                e = run(t, j, is_other);
                e = run(t, e, is_crlf);
            } else {
                // cp[i] is whitespace: \s*[\r\n]+ ends after the run's last \r or \n.
                size_t k = run(t, i, is_s), p = k;
                while (p > i && !is_crlf(cp[p - 1])) p--;
                e = p > i ? p : space_piece(t, i);
            }
        }
        infer_status st = emit(t, i, e);
        if (st) return st;
        i = e;
    }
    return INFER_OK;
}

// \p{N} pieces alone (HF Digits(individual_digits)), gpt2 on the rest.
static infer_status split_smollm(const text *t) {
    size_t a = 0;
    for (size_t i = 0; i < t->nc; i++) {
        if (!is_n(t->cp[i])) continue;
        infer_status st;
        if (a < i && (st = split_gpt2(t, a, i))) return st;
        if ((st = emit(t, i, i + 1))) return st;
        a = i + 1;
    }
    return a < t->nc ? split_gpt2(t, a, t->nc) : INFER_OK;
}

infer_status pretokenize(tok_pre pre, const char *s, size_t n, word_fn fn, void *ctx) {
    if (n == 0) return INFER_OK;
    uint32_t *cp = malloc(sizeof(uint32_t) * n);
    size_t *off = malloc(sizeof(size_t) * (n + 1));
    if (!cp || !off) {
        free(cp);
        free(off);
        return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    }
    size_t nc = 0;
    for (size_t i = 0; i < n; nc++) {
        off[nc] = i;
        i += (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp[nc]);
    }
    off[nc] = n;
    text t = {cp, off, nc, s, fn, ctx};
    infer_status st;
    switch (pre) {
    case TOK_PRE_LLAMA3: st = split_llama3(&t, 3); break;
    case TOK_PRE_QWEN2: st = split_llama3(&t, 1); break;
    case TOK_PRE_SMOLLM: st = split_smollm(&t); break;
    default: st = split_gpt2(&t, 0, nc); break;
    }
    free(cp);
    free(off);
    return st;
}
