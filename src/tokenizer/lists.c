// Growable lists shared by the tokenizer's files: ids, symbol and byte scratch, text.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"

infer_status scratch_sym(tok_scratch *s, size_t n) {
    if (n <= s->sym_cap) return INFER_OK;
    tok_sym *v = realloc(s->sym, n * sizeof *v);
    if (!v) return fail(INFER_ERR_NOMEM, "tokenizer: %zu symbols", n);
    s->sym = v;
    s->sym_cap = n;
    return INFER_OK;
}

infer_status scratch_buf(tok_scratch *s, size_t n) {
    if (n <= s->buf_cap) return INFER_OK;
    size_t cap = s->buf_cap ? s->buf_cap : 256;
    while (cap < n) cap *= 2;
    char *v = realloc(s->buf, cap);
    if (!v) return fail(INFER_ERR_NOMEM, "tokenizer: %zu bytes of scratch", n);
    s->buf = v;
    s->buf_cap = cap;
    return INFER_OK;
}

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

int tok_buf_put(tok_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    if (n) memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0;
    return 0;
}
