// decode: ids -> bytes, as the flavor's reference does.
//
// llama.cpp (llama_detokenize, special tokens kept): each token's piece --
// control and unknown tokens their text unless skipped, "▁" a space in
// SentencePiece-style vocabularies, GPT-2's characters mapped back to bytes,
// <0xAB> its byte; the first piece loses one leading space when the
// vocabulary adds a space prefix; then, where the vocabulary says so
// (clean_spaces), " ." " ," " ?" " !" lose their space, " ' " its spaces and
// " 's" " 'm" " 're" " 've" theirs.
//
// Hugging Face: the same pieces, except that bytes are returned as they are:
// where HF's decoders replace an invalid UTF-8 sequence by U+FFFD, we keep
// the bytes, so that decode(encode(x)) == x for any x (and a caller streaming
// tokens can hold back an incomplete character itself).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

typedef tok_buf buf;

static infer_status put(buf *b, const char *s, size_t n) {
    return tok_buf_put(b, s, n) ? fail(INFER_ERR_NOMEM, "tokenizer: decoded text of %zu bytes", b->n + n) : INFER_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int byte_of(const char *s, size_t n) {
    return n == 6 && hexval(s[3]) >= 0 && hexval(s[4]) >= 0 ? hexval(s[3]) * 16 + hexval(s[4]) : -1;
}

// "▁" -> " "
static infer_status put_unescaped(buf *b, const char *s, size_t n) {
    infer_status st = INFER_OK;
    for (size_t i = 0; i < n && !st;) {
        if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) {
            st = put(b, " ", 1);
            i += 3;
        } else st = put(b, s + i++, 1);
    }
    return st;
}

// GPT-2's characters -> bytes. llama.cpp writes a character that is no
// byte's image as "[UNK_BYTE_0x<its UTF-8 in hex><the token>]".
static infer_status put_bytes(const tokenizer *t, buf *b, const char *s, size_t n) {
    infer_status st = INFER_OK;
    for (size_t i = 0; i < n && !st;) {
        uint32_t cp;
        int l = t->flavor == TOK_FLAVOR_LLAMACPP ? utf8_decode_lenient((const unsigned char *)s + i, n - i, &cp)
                                                 : utf8_decode((const unsigned char *)s + i, n - i, &cp);
        int byte = gpt2_cp_to_byte(cp);
        if (byte >= 0) {
            char c = (char)byte;
            st = put(b, &c, 1);
        } else if (t->flavor == TOK_FLAVOR_LLAMACPP) {
            char hex[16], u[4];
            int ul = utf8_encode(cp, u);
            st = put(b, "[UNK_BYTE_0x", 12);
            for (int k = 0; k < ul && !st; k++) {
                snprintf(hex, sizeof hex, "%02x", (unsigned char)u[k]);
                st = put(b, hex, 2);
            }
            if (!st) st = put(b, s, n);
            if (!st) st = put(b, "]", 1);
        } else st = put(b, s + i, (size_t)l);
        i += (size_t)l;
    }
    return st;
}

// llama.cpp's token_to_piece (special pieces included).
static infer_status piece_llamacpp(const tokenizer *t, int32_t id, buf *b) {
    const char *s = t->text[id];
    size_t n = t->len[id];
    int ty = t->type[id];
    if (t->kind == TOK_KIND_RWKV) { // every token, special or not: its unescaped bytes
        char tmp[256], *u = n <= sizeof tmp ? tmp : malloc(n);
        if (!u) return fail(INFER_ERR_NOMEM, "tokenizer: decode");
        infer_status st = put(b, u, rwkv_unescape(s, n, u));
        if (u != tmp) free(u);
        return st;
    }
    if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN || ty == TOK_TYPE_USER_DEFINED) return put(b, s, n);
    if (ty == TOK_TYPE_BYTE) {
        int c = byte_of(s, n);
        char ch = (char)c;
        return c >= 0 ? put(b, &ch, 1) : INFER_OK;
    }
    if (ty != TOK_TYPE_NORMAL) return INFER_OK; // unused and undefined tokens print nothing
    if (t->kind != TOK_KIND_GPT2 || (t->pre_flags & PRE_ESCAPE_WS)) return put_unescaped(b, s, n);
    return put_bytes(t, b, s, n);
}

// clean_up_tokenization_spaces, as llama.cpp's detokenize does it (three passes).
static size_t clean_spaces(char *x, size_t n) {
    size_t k = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char c = x[i];
        if (x[i - 1] == ' ' && (c == '?' || c == '!' || c == '.' || c == ',')) k--;
        x[k++] = c;
    }
    n = k, k = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char c = x[i];
        if (c == '\'' && i + 1 < n && x[i - 1] == ' ' && x[i + 1] == ' ') {
            k--;
            x[++i] = 0;
        }
        x[k++] = c;
    }
    n = k, k = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char c = x[i];
        if (x[i - 1] == ' ' && c == '\'' && i + 1 < n) {
            char c1 = x[i + 1];
            if (c1 == 's' || c1 == 'm') k--;
            else if (i + 2 < n && ((c1 == 'r' && x[i + 2] == 'e') || (c1 == 'v' && x[i + 2] == 'e'))) k--;
        }
        x[k++] = c;
    }
    return k;
}

static infer_status decode_llamacpp(const tokenizer *t, const int32_t *ids, size_t n, bool skip_special, buf *b) {
    infer_status st = INFER_OK;
    int remove_space = t->add_space_prefix;
    for (size_t i = 0; i < n && !st; i++) {
        int ty = t->type[ids[i]];
        size_t before = b->n;
        if (!(skip_special && (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN))) st = piece_llamacpp(t, ids[i], b);
        if (!st && remove_space && b->n > before && b->v[before] == ' ') {
            memmove(b->v + before, b->v + before + 1, b->n - before);
            b->n--;
        }
        remove_space = 0;
    }
    int clean = (t->kind == TOK_KIND_GPT2 && !(t->pre_flags & PRE_NO_CLEAN)) || t->kind == TOK_KIND_BERT;
    if (!st && clean) {
        b->n = clean_spaces(b->v, b->n);
        b->v[b->n] = 0;
    }
    return st;
}

static infer_status decode_one_hf(const tokenizer *t, int32_t id, int first, buf *b) {
    const char *s = t->text[id];
    size_t n = t->len[id];
    int ty = t->type[id];
    if (t->kind == TOK_KIND_BERT) { // WordPiece's decoder: "##" joins, anything else follows a space
        if (n >= 2 && !memcmp(s, "##", 2)) return put(b, s + 2, n - 2);
        infer_status st = first ? INFER_OK : put(b, " ", 1);
        return st ? st : put(b, s, n);
    }
    if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED) return put(b, s, n);
    if (t->kind == TOK_KIND_LLAMA || t->kind == TOK_KIND_T5) {
        int c = ty == TOK_TYPE_BYTE ? byte_of(s, n) : -1;
        if (c >= 0) {
            char ch = (char)c;
            return put(b, &ch, 1);
        }
        return put_unescaped(b, s, n);
    }
    return put_bytes(t, b, s, n);
}

infer_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, bool skip_special, char **text,
                              size_t *len) {
    *text = NULL;
    *len = 0;
    buf b = {0};
    infer_status st = put(&b, "", 0);
    for (size_t i = 0; i < n && !st; i++)
        if (ids[i] < 0 || ids[i] >= t->n)
            st = fail(INFER_ERR_ARG, "tokenizer: decode: id %d at %zu outside [0, %d)", ids[i], i, t->n);
    if (!st && t->flavor == TOK_FLAVOR_LLAMACPP) st = decode_llamacpp(t, ids, n, skip_special, &b);
    else {
        int first = 1;
        for (size_t i = 0; i < n && !st; i++) {
            int32_t id = ids[i];
            if (skip_special && t->type[id] == TOK_TYPE_CONTROL) continue;
            size_t before = b.n;
            st = decode_one_hf(t, id, first, &b);
            // SentencePiece's dummy prefix: the first piece's leading space is not text.
            if (!st && first && t->add_space_prefix && (t->kind == TOK_KIND_LLAMA || t->kind == TOK_KIND_T5) &&
                b.n > before && b.v[before] == ' ') {
                memmove(b.v + before, b.v + before + 1, b.n - before);
                b.n--;
            }
            first = 0;
        }
    }
    if (st) {
        free(b.v);
        return st;
    }
    *text = b.v;
    *len = b.n;
    return INFER_OK;
}

infer_status tokenizer_piece(const tokenizer *t, int32_t id, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (id < 0 || id >= t->n) return fail(INFER_ERR_ARG, "tokenizer: piece: id %d outside [0, %d)", id, t->n);
    buf b = {0};
    infer_status st = put(&b, "", 0);
    int ty = t->type[id];
    int special = ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN || ty == TOK_TYPE_UNUSED || ty == TOK_TYPE_UNDEFINED;
    if (!st && !special) st = t->flavor == TOK_FLAVOR_LLAMACPP ? piece_llamacpp(t, id, &b) : decode_one_hf(t, id, 0, &b);
    if (st) { free(b.v); return st; }
    *text = b.v;
    *len = b.n;
    return INFER_OK;
}
