// The public text API: the model's tokenizer, made on first use from the GGUF
// metadata or from tokenizer.json beside a Hugging Face checkpoint.
#include "infer.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"
#include "base/error.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static infer_status get_tok(infer_model *m, tokenizer **out) {
    if (!m->tok_loaded) {
        m->tok_loaded = 1;
        infer_status st;
        if (m->gguf) st = tokenizer_from_gguf(m->gguf, &m->tok);
        else {
            char path[4096];
            struct stat sb;
            snprintf(path, sizeof path, "%s/tokenizer.json", m->path);
            st = stat(path, &sb) == 0 ? tokenizer_load_json(path, &m->tok) : INFER_OK;
        }
        if (st) { m->tok_loaded = 0; return st; }
    }
    if (!m->tok) return fail(INFER_ERR_UNSUPPORTED, "%s: the model has no tokenizer (no vocabulary in the GGUF, no tokenizer.json)", m->path);
    *out = m->tok;
    return INFER_OK;
}

infer_status infer_tokenize(infer_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **ids,
                            int *n_ids) {
    tokenizer *t;
    infer_status st = get_tok(m, &t);
    if (st) return st;
    size_t n = 0;
    st = tokenizer_encode(t, text, len, add_special != 0, parse_special != 0, ids, &n);
    if (st) return st;
    if (n > (size_t)INT32_MAX) return fail(INFER_ERR_ARG, "text gives %zu tokens", n);
    *n_ids = (int)n;
    return INFER_OK;
}

infer_status infer_detokenize(infer_model *m, const int32_t *ids, int n, int skip_special, char **text, size_t *len) {
    tokenizer *t;
    infer_status st = get_tok(m, &t);
    if (st) return st;
    return tokenizer_decode(t, ids, n < 0 ? 0 : (size_t)n, skip_special != 0, text, len);
}

int infer_model_eog(infer_model *m, int32_t *ids, int max) {
    int n = infer_model_eos(m, ids, max);
    tokenizer *t;
    if (get_tok(m, &t) == INFER_OK) {
        int32_t extra[2] = {tokenizer_eos(t), tokenizer_eot(t)};
        for (int k = 0; k < 2; k++) {
            int dup = extra[k] < 0;
            for (int i = 0; i < n; i++) dup |= ids[i] == extra[k];
            if (!dup && n < max) ids[n++] = extra[k];
        }
    }
    return n;
}

const char *infer_model_chat_template(infer_model *m) {
    tokenizer *t;
    return get_tok(m, &t) == INFER_OK ? tokenizer_chat_template(t) : NULL;
}

const char *infer_token_text(infer_model *m, int32_t id, size_t *len) {
    tokenizer *t;
    if (get_tok(m, &t)) return NULL;
    return tokenizer_token(t, id, len, NULL);
}
