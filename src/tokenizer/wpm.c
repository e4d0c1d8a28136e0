// llama.cpp's WordPiece tokenizer (llm_tokenizer_wpm_session), for BERT
// vocabularies as llama.cpp's converter writes them: a word-initial piece is
// "▁word", a continuation piece is the bare text (the "##" dropped).
//
// The text is split into words at whitespace and around punctuation, ASCII
// symbols and CJK ideographs (each its own word); control characters, U+0000
// and U+FFFD are dropped; with the BERT normalizer, letters are lowercased and
// (strip_accents) reduced to the first code point of their NFD, combining
// marks dropped. Each word, "▁" prepended, is the longest vocabulary matches
// from its start; a word with a position no token starts at is the unknown token.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

// The ranges llama.cpp's is_chinese_char takes (from Hugging Face's BERT,
// whose Extension E starts at U+2B920).
static int is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// One word (its text after "▁" in w[3..n)): the longest matches, or unk.
static infer_status word(const tokenizer *t, const char *w, size_t n, id_list *out) {
    size_t before = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n < i + t->max_token_len + 1 ? n : i + t->max_token_len + 1;
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = str_map_find(t, &t->by_text, w + i, j - i)) >= 0) break;
        if (id < 0) { // a position no token starts at: the whole word is unknown
            out->n = before;
            break;
        }
        infer_status st = ids_push(out, id);
        if (st) return st;
        i = j;
    }
    return out->n == before ? ids_push(out, t->unk) : INFER_OK;
}

infer_status wpm_encode(const tokenizer *t, const char *s, size_t n, id_list *out) {
    // a word is at most the text's bytes, times 4/3 for lowercasing that
    // lengthens a character, plus "▁"
    char *w = malloc(2 * n + 8);
    if (!w) return fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
    size_t wn = 3;
    memcpy(w, "\xE2\x96\x81", 3);
    infer_status st = INFER_OK;
    for (size_t i = 0; i < n && !st;) {
        uint32_t cp;
        i += (size_t)utf8_decode_lenient((const unsigned char *)s + i, n - i, &cp);
        if (t->strip_accents) cp = uni_nfd_first(cp);
        uint16_t f = uni_flags(cp);
        if (f & UNI_WS) {
            if (wn > 3) st = word(t, w, wn, out);
            wn = 3;
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || (f & UNI_C)) continue;
        if (t->strip_accents && (f & UNI_M)) continue;
        char c[4];
        int cl = utf8_encode(t->lowercase ? uni_tolower(cp) : cp, c);
        if ((f & UNI_P) || (cp < 0x7F && (f & UNI_S)) || is_cjk(cp)) {
            if (wn > 3) st = word(t, w, wn, out);
            memcpy(w + 3, c, (size_t)cl);
            if (!st) st = word(t, w, 3 + (size_t)cl, out);
            wn = 3;
        } else {
            memcpy(w + wn, c, (size_t)cl);
            wn += (size_t)cl;
        }
    }
    if (!st && wn > 3) st = word(t, w, wn, out);
    free(w);
    return st;
}
