// A tokenizer from a GGUF file's tokenizer.ggml.* metadata. Element types are
// checked, never cast: a vocabulary written with the wrong types is an error.
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

static infer_status get_id(const gguf_file *g, const char *key, int32_t *out) {
    int64_t v = -1;
    const gguf_value *x = gguf_find(g, key);
    if (x && x->type != GGUF_U32 && x->type != GGUF_I32)
        return fail(INFER_ERR_FORMAT, "%s: %s is %s, want uint32", g->path, key, gguf_type_name(x->type));
    infer_status st = gguf_get_int(g, key, -1, INT32_MAX, &v);
    if (!st) *out = (int32_t)v;
    return st;
}

static infer_status get_flag(const gguf_file *g, const char *key, bool *out) {
    int v = *out;
    infer_status st = gguf_get_bool(g, key, &v);
    *out = v != 0;
    return st;
}

// Pointers and lengths of every element of a string array.
static infer_status str_array(const gguf_value *a, const char ***s, uint32_t **lens) {
    *s = malloc(sizeof **s * (size_t)(a->n ? a->n : 1));
    *lens = malloc(sizeof **lens * (size_t)(a->n ? a->n : 1));
    if (!*s || !*lens) return fail(INFER_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < a->n; i++) {
        size_t len;
        (*s)[i] = gguf_arr_str(a, i, &len);
        if (len > UINT32_MAX) return fail(INFER_ERR_FORMAT, "token string of %zu bytes", len);
        (*lens)[i] = (uint32_t)len;
    }
    return INFER_OK;
}

infer_status tokenizer_from_gguf(const gguf_file *g, tokenizer **out) {
    *out = NULL;
    char model[32] = "", pre[32] = "default";
    infer_status st = gguf_get_str_copy(g, "tokenizer.ggml.model", model, sizeof model);
    if (st) return st;
    if (!model[0] || !strcmp(model, "none")) return INFER_OK; // no vocabulary in this file
    if ((st = gguf_get_str_copy(g, "tokenizer.ggml.pre", pre, sizeof pre))) return st;

    tok_vocab v;
    memset(&v, 0, sizeof v);
    v.bos = v.eos = v.eot = v.pad = v.unk = -1;
    if ((st = tok_kind_from_name(model, &v.kind))) return fail_wrap(st, "%s", g->path);
    if (v.kind == TOK_KIND_GPT2 && (st = tok_pre_from_name(pre, &v.pre))) return fail_wrap(st, "%s", g->path);
    v.add_bos = v.kind == TOK_KIND_LLAMA; // llama.cpp's defaults when the keys are absent
    v.add_space_prefix = false;

    const gguf_value *tokens = NULL, *scores = NULL, *types = NULL, *merges = NULL;
    if ((st = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens))) return st;
    if (!tokens) return fail(INFER_ERR_FORMAT, "%s: tokenizer.ggml.tokens is missing", g->path);
    if ((st = gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_F32, &scores))) return st;
    if ((st = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_I32, &types))) return st;
    if ((st = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_STRING, &merges))) return st;
    if (tokens->n > INT32_MAX) return fail(INFER_ERR_FORMAT, "%s: %llu tokens", g->path, (unsigned long long)tokens->n);
    if (scores && scores->n != tokens->n)
        return fail(INFER_ERR_FORMAT, "%s: %llu scores for %llu tokens", g->path, (unsigned long long)scores->n, (unsigned long long)tokens->n);
    if (types && types->n != tokens->n)
        return fail(INFER_ERR_FORMAT, "%s: %llu token types for %llu tokens", g->path, (unsigned long long)types->n, (unsigned long long)tokens->n);
    if ((st = get_id(g, "tokenizer.ggml.bos_token_id", &v.bos)) || (st = get_id(g, "tokenizer.ggml.eos_token_id", &v.eos)) ||
        (st = get_id(g, "tokenizer.ggml.eot_token_id", &v.eot)) || (st = get_id(g, "tokenizer.ggml.padding_token_id", &v.pad)) ||
        (st = get_id(g, "tokenizer.ggml.unknown_token_id", &v.unk)))
        return st;
    if ((st = get_flag(g, "tokenizer.ggml.add_bos_token", &v.add_bos)) || (st = get_flag(g, "tokenizer.ggml.add_eos_token", &v.add_eos)) ||
        (st = get_flag(g, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix)))
        return st;

    const char **tok_s = NULL, **merge_s = NULL;
    uint32_t *tok_l = NULL, *merge_l = NULL;
    float *sc = NULL;
    int32_t *ty = NULL;
    char *tmpl = NULL;
    st = str_array(tokens, &tok_s, &tok_l);
    if (!st && merges) st = str_array(merges, &merge_s, &merge_l);
    if (!st && scores) {
        sc = malloc(sizeof *sc * (size_t)(scores->n ? scores->n : 1));
        if (!sc) st = fail(INFER_ERR_NOMEM, "out of memory");
        else for (uint64_t i = 0; i < scores->n; i++) sc[i] = (float)gguf_arr_f64(scores, i);
    }
    if (!st && types) {
        ty = malloc(sizeof *ty * (size_t)(types->n ? types->n : 1));
        if (!ty) st = fail(INFER_ERR_NOMEM, "out of memory");
        else for (uint64_t i = 0; i < types->n; i++) ty[i] = (int32_t)gguf_arr_int(types, i);
    }
    if (!st) {
        const char *s = NULL;
        size_t len = 0;
        if ((st = gguf_get_str(g, "tokenizer.chat_template", &s, &len)) == INFER_OK && s) {
            tmpl = strndup(s, len);
            if (!tmpl) st = fail(INFER_ERR_NOMEM, "out of memory");
        }
    }
    if (!st) {
        v.n_tokens = (int32_t)tokens->n;
        v.tokens = tok_s;
        v.token_lens = tok_l;
        v.scores = sc;
        v.types = ty;
        v.n_merges = merges ? (int32_t)merges->n : 0;
        v.merges = merge_s;
        v.merge_lens = merge_l;
        v.chat_template = tmpl;
        st = tokenizer_from_vocab(&v, out);
        if (st) fail_wrap(st, "%s", g->path);
    }
    free(tok_s);
    free(tok_l);
    free(merge_s);
    free(merge_l);
    free(sc);
    free(ty);
    free(tmpl);
    return st;
}
