// llama.cpp's RWKV "world" tokenizer (llm_tokenizer_rwkv_session): tokens are
// stored escaped (Python's repr of their bytes: \t \n \r \xAB \\ \'), and the
// text is cut greedily into the longest tokens of a byte trie.
#include <stdlib.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"

// llama_unescape_rwkv_token: the bytes of an escaped token, into out (at most
// n bytes); returns their count. As llama.cpp, a hex digit above '9' is read
// as a lowercase letter.
size_t rwkv_unescape(const char *s, size_t n, char *out) {
    size_t k = 0;
    int escaping = 0, hex_left = 0;
    unsigned acc = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (hex_left) {
            acc = (acc << 4) + (unsigned)(c >= 'a' ? c - 'a' + 10 : c - '0');
            if (!--hex_left) out[k++] = (char)acc, acc = 0;
        } else if (escaping) {
            escaping = 0;
            if (c == 't') out[k++] = '\t';
            else if (c == 'n') out[k++] = '\n';
            else if (c == 'r') out[k++] = '\r';
            else if (c == 'x') hex_left = 2;
            else out[k++] = c;
        } else if (c == '\\') escaping = 1;
        else out[k++] = c;
    }
    return k;
}

infer_status rwkv_init(tokenizer *t) {
    char *buf = malloc(t->max_token_len + 1);
    if (!buf) return fail(INFER_ERR_NOMEM, "tokenizer: token trie");
    infer_status st = INFER_OK;
    for (int32_t i = 0; i < t->n && !st; i++) {
        size_t k = rwkv_unescape(t->text[i], t->len[i], buf);
        if (trie_insert(&t->tok_trie, buf, k, i)) st = fail(INFER_ERR_NOMEM, "tokenizer: token trie");
    }
    free(buf);
    return st;
}

infer_status rwkv_encode(const tokenizer *t, const char *s, size_t n, id_list *out) {
    infer_status st = INFER_OK;
    for (size_t pos = 0; pos < n && !st;) {
        int32_t node = 0, id = -1;
        size_t end = pos;
        for (size_t k = pos; k < n; k++) {
            node = trie_child(&t->tok_trie, node, (unsigned char)s[k]);
            if (node < 0) break;
            if (t->tok_trie.value[node] >= 0) id = t->tok_trie.value[node], end = k + 1;
        }
        if (id < 0) {
            // no token starts here: the unknown token for one byte (where no token
            // prefix matches either, llama.cpp loops forever; here it moves on)
            if (t->unk >= 0) st = ids_push(out, t->unk);
            pos++;
            continue;
        }
        st = ids_push(out, id);
        pos = end;
    }
    return st;
}
