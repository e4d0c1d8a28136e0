// A tokenizer from a GGUF file's tokenizer.ggml.* metadata, with llama.cpp's
// meaning (llama_vocab::impl::load): its defaults where keys are absent, its
// token-type fixes by token text, its per-model lstrip/rstrip rules. Element
// types are checked, never cast: a vocabulary written with the wrong types is
// an error.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

// A special-token id key: present and in range replaces the default; present
// and out of range keeps it (llama.cpp warns and goes on).
static infer_status get_id(const gguf_file *g, const char *key, int32_t n_tokens, int32_t *out) {
    const gguf_value *x = gguf_find(g, key);
    if (!x) return INFER_OK;
    if (x->type != GGUF_U32 && x->type != GGUF_I32)
        return fail(INFER_ERR_FORMAT, "%s: %s is %s, want uint32", g->path, key, gguf_type_name(x->type));
    int64_t v = -1;
    infer_status st = gguf_get_int(g, key, INT32_MIN, UINT32_MAX, &v);
    if (!st && v >= 0 && v < n_tokens) *out = (int32_t)v;
    return st;
}

static infer_status get_flag(const gguf_file *g, const char *key, bool *out) {
    int v = *out;
    infer_status st = gguf_get_bool(g, key, &v);
    *out = v != 0;
    return st;
}

// Pointers and lengths of every element of a string array; an empty token is
// "[EMPTY_<id>]", as llama.cpp names it (held in *empty).
static infer_status str_array(const gguf_value *a, const char ***s, uint32_t **lens, char **empty) {
    *s = malloc(sizeof **s * (size_t)(a->n ? a->n : 1));
    *lens = malloc(sizeof **lens * (size_t)(a->n ? a->n : 1));
    if (!*s || !*lens) return fail(INFER_ERR_NOMEM, "out of memory");
    size_t n_empty = 0;
    for (uint64_t i = 0; i < a->n; i++) {
        size_t len;
        (*s)[i] = gguf_arr_str(a, i, &len);
        if (len > UINT32_MAX) return fail(INFER_ERR_FORMAT, "token string of %zu bytes", len);
        (*lens)[i] = (uint32_t)len;
        n_empty += len == 0;
    }
    if (n_empty && empty) {
        char *e = malloc(n_empty * 24), *at = e;
        if (!e) return fail(INFER_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < a->n; i++)
            if (!(*lens)[i]) {
                int k = snprintf(at, 24, "[EMPTY_%llu]", (unsigned long long)i);
                (*s)[i] = at, (*lens)[i] = (uint32_t)k;
                at += k + 1;
            }
        *empty = e;
    }
    return INFER_OK;
}

static int32_t find(const char *const *tok, const uint32_t *len, int32_t n, const char *s) {
    size_t l = strlen(s);
    for (int32_t i = 0; i < n; i++)
        if (len[i] == l && !memcmp(tok[i], s, l)) return i;
    return -1;
}

// Tokens llama.cpp makes control tokens by their text (end of turn, end of
// generation, fill-in-the-middle), whatever their stored type.
static const char *const control_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "<end_of_utterance>",
    "<|eom_id|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "</s>", "[EOS]", "<eos>", "<turn|>",
    "<|tool_response>", "[e~[",
    // fill-in-the-middle
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
    "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
    "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};

// llama.cpp's fixes of token types by text (after its auto-detection of
// special tokens), on a writable copy of the types.
static void fix_types(int32_t *ty, const char *const *tok, const uint32_t *len, int32_t n, int32_t eos, int32_t eot) {
    for (size_t k = 0; k < sizeof control_names / sizeof *control_names; k++) {
        int32_t id = find(tok, len, n, control_names[k]);
        if (id >= 0 && ty[id] != TOK_TYPE_CONTROL) ty[id] = TOK_TYPE_CONTROL;
    }
    // gpt-oss: always rendered
    static const char *const user[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t k = 0; k < 4; k++) {
        int32_t id = find(tok, len, n, user[k]);
        if (id >= 0) ty[id] = TOK_TYPE_USER_DEFINED;
    }
    // o200k_harmony and solar-open: <|end|> ends no generation, it is text
    int32_t end = find(tok, len, n, "<|end|>");
    int ret = find(tok, len, n, "<|return|>") >= 0, flush = find(tok, len, n, "<|flush|>") >= 0;
    int call = find(tok, len, n, "<|call|>") >= 0 || find(tok, len, n, "<|calls|>") >= 0;
    if (end >= 0 && ((ret && call) || (call && flush))) ty[end] = TOK_TYPE_USER_DEFINED;
    // Gemma 4 and PLaMo: </s> is a normal token
    int32_t s = find(tok, len, n, "</s>"), pe = find(tok, len, n, "<|plamo:eos|>");
    if (s >= 0 && (find(tok, len, n, "<|tool_response>") >= 0 || (pe >= 0 && (pe == eos || pe == eot))))
        ty[s] = TOK_TYPE_NORMAL;
}

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

// llama.cpp's lstrip/rstrip rules, by model name, architecture and pre-tokenizer.
static infer_status strip_rules(const gguf_file *g, const char *pre, const int32_t *ty, const char *const *tok,
                                const uint32_t *len, int32_t n, uint8_t **strip) {
    char name[256] = "", arch[64] = "";
    const char *s = NULL;
    size_t sl = 0;
    if (gguf_get_str(g, "general.name", &s, &sl) == INFER_OK && s) {
        if (sl >= sizeof name) sl = sizeof name - 1;
        for (size_t i = 0; i < sl; i++) name[i] = (char)tolower((unsigned char)s[i]);
    }
    s = NULL, sl = 0;
    if (gguf_get_str(g, "general.architecture", &s, &sl) == INFER_OK && s && sl < sizeof arch) memcpy(arch, s, sl);
    int mask = contains(pre, "jina-v2-de") || contains(pre, "jina-v2-es") || contains(pre, "jina-v2-code") ||
               contains(arch, "nomic-bert-moe") || contains(arch, "jina-bert-v3");
    int phi3 = !mask && (contains(name, "phi-3") || contains(name, "phi3"));
    int mbert = !mask && !phi3 && contains(name, "modern-bert");
    if (!mask && !phi3 && !mbert) return INFER_OK;
    if (!(*strip = calloc((size_t)n, 1))) return fail(INFER_ERR_NOMEM, "out of memory");
    int32_t id;
    if (mask && (id = find(tok, len, n, "<mask>")) >= 0) (*strip)[id] |= TOK_LSTRIP;
    if (mbert && (id = find(tok, len, n, "[MASK]")) >= 0) (*strip)[id] |= TOK_LSTRIP;
    if (phi3) {
        for (int32_t i = 0; i < n; i++)
            if (ty[i] == TOK_TYPE_CONTROL || ty[i] == TOK_TYPE_USER_DEFINED || ty[i] == TOK_TYPE_UNKNOWN) (*strip)[i] |= TOK_RSTRIP;
        if ((id = find(tok, len, n, "</s>")) >= 0) (*strip)[id] |= TOK_RSTRIP;
        static const char *const off[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (int k = 0; k < 3; k++)
            if ((id = find(tok, len, n, off[k])) >= 0) (*strip)[id] &= (uint8_t)~TOK_RSTRIP;
    }
    return INFER_OK;
}

static char *pre_names(void) {
    size_t total = 1;
    for (int i = 0; i < tok_pre_table_n; i++) total += strlen(tok_pre_table[i].name) + 2;
    char *s = malloc(total);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; i < tok_pre_table_n; i++) {
        if (i) strcat(s, ", ");
        strcat(s, tok_pre_table[i].name);
    }
    return s;
}

infer_status tokenizer_from_gguf(const gguf_file *g, tokenizer **out) {
    *out = NULL;
    char model[64] = "", pre[64] = "";
    infer_status st = gguf_get_str_copy(g, "tokenizer.ggml.model", model, sizeof model);
    if (st) return st;
    if (!model[0] || !strcmp(model, "none") || !strcmp(model, "no_vocab")) return INFER_OK; // no vocabulary in this file
    if ((st = gguf_get_str_copy(g, "tokenizer.ggml.pre", pre, sizeof pre))) return st;

    tok_vocab v;
    memset(&v, 0, sizeof v);
    v.flavor = TOK_FLAVOR_LLAMACPP;
    v.bos = v.eos = v.eot = v.pad = v.unk = v.sep = -1;
    if ((st = tok_kind_from_name(model, &v.kind))) return fail_wrap(st, "%s", g->path);
    if (!strcmp(model, "gemma4")) strcpy(pre, "gemma4");
    if (v.kind == TOK_KIND_GPT2) {
        if (!pre[0]) strcpy(pre, "default"); // llama.cpp warns: quality will be degraded
        v.pre = tok_pre_find(pre);
        if (v.pre < 0) {
            char *names = pre_names();
            st = fail(INFER_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre '%s' is not supported (known: %s)", g->path, pre,
                      names ? names : "?");
            free(names);
            return st;
        }
        v.pre_flags = tok_pre_table[v.pre].flags;
    }

    const gguf_value *tokens = NULL, *scores = NULL, *types = NULL, *merges = NULL;
    if ((st = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens))) return st;
    if (!tokens) return fail(INFER_ERR_FORMAT, "%s: tokenizer.ggml.tokens is missing", g->path);
    if ((st = gguf_get_arr(g, "tokenizer.ggml.scores", -1, &scores))) return st;
    if (scores && scores->elem_type != GGUF_F32 && scores->elem_type != GGUF_I32)
        return fail(INFER_ERR_FORMAT, "%s: tokenizer.ggml.scores holds %s, want float32 or int32", g->path,
                    gguf_type_name(scores->elem_type));
    if ((st = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_I32, &types))) return st;
    if ((st = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_STRING, &merges))) return st;
    if (tokens->n == 0 || tokens->n > INT32_MAX)
        return fail(INFER_ERR_FORMAT, "%s: tokenizer.ggml.tokens holds %llu tokens", g->path, (unsigned long long)tokens->n);
    int32_t n = (int32_t)tokens->n;
    if (scores && scores->n < tokens->n)
        return fail(INFER_ERR_FORMAT, "%s: %llu scores for %llu tokens", g->path, (unsigned long long)scores->n, (unsigned long long)tokens->n);
    if (types && types->n < tokens->n)
        return fail(INFER_ERR_FORMAT, "%s: %llu token types for %llu tokens", g->path, (unsigned long long)types->n, (unsigned long long)tokens->n);
    if (v.kind == TOK_KIND_GPT2 && !merges && strcmp(pre, "kimi-k2"))
        return fail(INFER_ERR_FORMAT, "%s: tokenizer.ggml.merges is missing (tokenizer.ggml.model '%s' needs it)", g->path, model);

    // llama.cpp's defaults, by model kind and pre-tokenizer
    switch (v.kind) {
    case TOK_KIND_LLAMA:
        v.bos = 1, v.eos = 2, v.unk = 0;
        v.add_bos = true, v.add_space_prefix = true;
        break;
    case TOK_KIND_GPT2:
        if (strcmp(model, "gemma4")) v.bos = v.eos = 11;
        if (v.pre_flags & PRE_NO_BOS_ID) v.bos = -1;
        v.add_bos = (v.pre_flags & PRE_ADD_BOS) != 0;
        v.ignore_merges = (v.pre_flags & PRE_IGNORE_MERGES) != 0;
        break;
    case TOK_KIND_BERT:
        v.bos = 101, v.unk = 100, v.sep = 102, v.pad = 0;
        v.add_bos = true;
        v.lowercase = true;
        break;
    case TOK_KIND_T5:
        v.eos = 1, v.unk = 2, v.pad = 0;
        v.add_eos = true;
        break;
    case TOK_KIND_RWKV: break;
    }
    if (v.bos >= n) v.bos = -1;
    if (v.eos >= n) v.eos = -1;
    if (v.unk >= n) v.unk = -1;
    if (v.sep >= n) v.sep = -1;
    if (v.pad >= n) v.pad = -1;
    if ((st = get_id(g, "tokenizer.ggml.bos_token_id", n, &v.bos)) || (st = get_id(g, "tokenizer.ggml.eos_token_id", n, &v.eos)) ||
        (st = get_id(g, "tokenizer.ggml.eot_token_id", n, &v.eot)) || (st = get_id(g, "tokenizer.ggml.padding_token_id", n, &v.pad)) ||
        (st = get_id(g, "tokenizer.ggml.unknown_token_id", n, &v.unk)) ||
        (st = get_id(g, "tokenizer.ggml.seperator_token_id", n, &v.sep)))
        return st;
    bool space_prefix = v.add_space_prefix;
    if ((st = get_flag(g, "tokenizer.ggml.add_bos_token", &v.add_bos)) || (st = get_flag(g, "tokenizer.ggml.add_eos_token", &v.add_eos)) ||
        (st = get_flag(g, "tokenizer.ggml.add_space_prefix", &space_prefix)) ||
        (st = get_flag(g, "tokenizer.ggml.normalizer.lowercase", &v.lowercase)))
        return st;
    v.strip_accents = v.lowercase;
    if ((st = get_flag(g, "tokenizer.ggml.normalizer.strip_accents", &v.strip_accents))) return st;
    v.add_space_prefix = space_prefix;
    if ((st = get_flag(g, "tokenizer.ggml.remove_extra_whitespaces", &v.remove_extra_ws))) return st;
    if (v.kind == TOK_KIND_T5) {
        const gguf_value *cm = NULL;
        if ((st = gguf_get_arr(g, "tokenizer.ggml.precompiled_charsmap", -1, &cm))) return st;
        if (cm && cm->elem_type != GGUF_U8 && cm->elem_type != GGUF_I8)
            return fail(INFER_ERR_FORMAT, "%s: tokenizer.ggml.precompiled_charsmap holds %s, want uint8", g->path,
                        gguf_type_name(cm->elem_type));
        if (cm) v.charsmap = cm->data, v.charsmap_len = (size_t)cm->n;
    }
    if (v.pre_flags & PRE_GEMMA4) v.add_bos = true; // llama.cpp's workaround for Gemma 4
    // encode refuses what it cannot add
    if (v.add_bos && v.bos < 0) v.add_bos = false;
    if (v.add_eos && v.eos < 0) v.add_eos = false;

    const char **tok_s = NULL, **merge_s = NULL;
    uint32_t *tok_l = NULL, *merge_l = NULL;
    float *sc = NULL;
    int32_t *ty = NULL;
    char *tmpl = NULL, *empty = NULL;
    uint8_t *strip = NULL;
    st = str_array(tokens, &tok_s, &tok_l, &empty);
    if (!st && merges) st = str_array(merges, &merge_s, &merge_l, NULL);
    if (!st && scores) {
        sc = malloc(sizeof *sc * (size_t)n);
        if (!sc) st = fail(INFER_ERR_NOMEM, "out of memory");
        else for (int32_t i = 0; i < n; i++) sc[i] = (float)gguf_arr_f64(scores, (uint64_t)i);
    }
    if (!st) {
        ty = malloc(sizeof *ty * (size_t)n);
        if (!ty) st = fail(INFER_ERR_NOMEM, "out of memory");
        else for (int32_t i = 0; i < n; i++) ty[i] = types ? (int32_t)gguf_arr_int(types, (uint64_t)i) : TOK_TYPE_NORMAL;
    }
    if (!st) {
        // llama.cpp reads an unknown type as "undefined"
        for (int32_t i = 0; i < n; i++)
            if (ty[i] < TOK_TYPE_UNDEFINED || ty[i] > TOK_TYPE_BYTE) ty[i] = TOK_TYPE_UNDEFINED;
        fix_types(ty, tok_s, tok_l, n, v.eos, v.eot);
        st = strip_rules(g, pre, ty, tok_s, tok_l, n, &strip);
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
        v.n_tokens = n;
        v.tokens = tok_s;
        v.token_lens = tok_l;
        v.scores = sc;
        v.types = ty;
        v.n_merges = merges ? (int32_t)merges->n : 0;
        v.merges = merge_s;
        v.merge_lens = merge_l;
        v.chat_template = tmpl;
        v.strip = strip;
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
    free(empty);
    free(strip);
    return st;
}
