// decode: ids -> bytes. Byte tokens (<0xAB>) give their byte, the llama
// kind's "▁" gives a space, the gpt2 kind's characters map back to bytes,
// added tokens give their text. Bytes are returned as they are: where HF's
// decoders replace an invalid UTF-8 sequence by U+FFFD, we keep the bytes,
// so that decode(encode(x)) == x for any x (and a caller streaming tokens
// can hold back an incomplete character itself).
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

typedef struct {
    char *v;
    size_t n, cap;
} buf;

static infer_status put(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return fail(INFER_ERR_NOMEM, "tokenizer: decoded text of %zu bytes", cap);
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0;
    return INFER_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static infer_status decode_one(const tokenizer *t, int32_t id, buf *b) {
    const char *s = t->text[id];
    size_t n = t->len[id];
    int ty = t->type[id];
    if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED) return put(b, s, n);
    if (t->kind == TOK_KIND_LLAMA) {
        if (ty == TOK_TYPE_BYTE && n == 6 && hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            char c = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            return put(b, &c, 1);
        }
        infer_status st = INFER_OK;
        for (size_t i = 0; i < n && !st;) {
            if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) {
                st = put(b, " ", 1);
                i += 3;
            } else {
                st = put(b, s + i, 1);
                i++;
            }
        }
        return st;
    }
    infer_status st = INFER_OK;
    for (size_t i = 0; i < n && !st;) {
        uint32_t cp;
        int l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        int byte = gpt2_cp_to_byte(cp);
        if (byte >= 0) {
            char c = (char)byte;
            st = put(b, &c, 1);
        } else st = put(b, s + i, (size_t)l);
        i += (size_t)l;
    }
    return st;
}

infer_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, bool skip_special, char **text,
                              size_t *len) {
    *text = NULL;
    *len = 0;
    buf b = {0};
    infer_status st = put(&b, "", 0);
    int first = 1;
    for (size_t i = 0; i < n && !st; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n) {
            st = fail(INFER_ERR_ARG, "tokenizer: decode: id %d at %zu outside [0, %d)", id, i, t->n);
            break;
        }
        if (skip_special && t->type[id] == TOK_TYPE_CONTROL) continue;
        size_t before = b.n;
        st = decode_one(t, id, &b);
        // SentencePiece's dummy prefix: the first piece's leading space is not text.
        if (!st && first && t->add_space_prefix && t->kind == TOK_KIND_LLAMA && b.n > before && b.v[before] == ' ') {
            memmove(b.v + before, b.v + before + 1, b.n - before);
            b.n--;
        }
        first = 0;
    }
    if (st) {
        free(b.v);
        return st;
    }
    *text = b.v;
    *len = b.n;
    return INFER_OK;
}
