// tokenizer_load_json: a Hugging Face tokenizer.json (BPE, WordPiece or Unigram model) and, when
// present, the tokenizer_config.json beside it, read into a tok_vocab.
// Only the pipelines this engine reproduces exactly are accepted; anything
// else (another model type, a normalizer or pre-tokenizer we do not
// implement) is refused by name rather than approximated.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"

#define MAX_JSON_BYTES ((long)1 << 30)
#define MAX_VOCAB (16 << 20)

static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char META[] = "\xE2\x96\x81"; // U+2581

static infer_status read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(INFER_ERR_IO, "%s: cannot open", path);
    long n = -1;
    if (!fseek(f, 0, SEEK_END)) n = ftell(f);
    if (n < 0 || n > MAX_JSON_BYTES || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return fail(INFER_ERR_IO, "%s: cannot size (or larger than 1 GiB)", path);
    }
    char *d = malloc((size_t)n + 1);
    if (!d) {
        fclose(f);
        return fail(INFER_ERR_NOMEM, "%s: %ld bytes", path, n);
    }
    size_t got = fread(d, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(d);
        return fail(INFER_ERR_IO, "%s: short read", path);
    }
    d[n] = 0;
    *data = d;
    *len = (size_t)n;
    return INFER_OK;
}

static const char *str_field(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// A type check for an optional field: absent or null is fine; otherwise it
// must satisfy is().
static infer_status want(const char *file, const cJSON *o, const char *k, cJSON_bool (*is)(const cJSON *const),
                         const char *what) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (v && !cJSON_IsNull(v) && !is(v)) return fail(INFER_ERR_FORMAT, "%s: '%s' is not %s", file, k, what);
    return INFER_OK;
}

static int is_byte_token(const char *s) {
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' &&
           strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF", s[4]) && s[3] && s[4];
}

typedef struct {
    const char *file;
    tok_vocab v;
    const char **tokens; // (n) borrowed from the cJSON tree
    uint32_t *lens;
    int32_t *types;
    char **merges; // (n_merges) owned "left right"
    uint32_t *merge_lens;
    char *template_copy;
    uint8_t *strip; // (n) or NULL
    float *scores;  // (n) Unigram, or NULL
} load;

static int32_t find_token(const load *L, const char *s) {
    if (!s) return -1;
    size_t n = strlen(s);
    for (int32_t i = 0; i < L->v.n_tokens; i++)
        if (L->lens[i] == n && !memcmp(L->tokens[i], s, n)) return i;
    return -1;
}

// A special token in tokenizer_config.json: "text" or {"content": "text"}.
static const char *config_token(const cJSON *cfg, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, k);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return str_field(v, "content");
    return NULL;
}

// model.vocab: {"text": id, ...} (BPE, WordPiece) or, with unigram, [["text", score], ...] (ids in order).
static infer_status read_vocab(load *L, const cJSON *model, const cJSON *added, int unigram) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (unigram ? !cJSON_IsArray(vocab) : !cJSON_IsObject(vocab))
        return fail(INFER_ERR_FORMAT, "%s: model.vocab is not %s", L->file, unigram ? "an array" : "an object");
    double max_id = -1;
    const cJSON *e;
    if (unigram) {
        int k = 0;
        cJSON_ArrayForEach(e, vocab) {
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(cJSON_GetArrayItem(e, 0)) ||
                !cJSON_IsNumber(cJSON_GetArrayItem(e, 1)) || !isfinite(cJSON_GetArrayItem(e, 1)->valuedouble))
                return fail(INFER_ERR_FORMAT, "%s: model.vocab[%d] is not [\"text\", score]", L->file, k);
            if (++k > MAX_VOCAB) return fail(INFER_ERR_FORMAT, "%s: more than %d tokens", L->file, MAX_VOCAB);
        }
        max_id = k - 1;
    } else
        cJSON_ArrayForEach(e, vocab) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= MAX_VOCAB ||
                e->valuedouble != floor(e->valuedouble))
                return fail(INFER_ERR_FORMAT, "%s: model.vocab['%.100s'] is not a token id", L->file, e->string);
            if (e->valuedouble > max_id) max_id = e->valuedouble;
        }
    if (added && !cJSON_IsArray(added)) return fail(INFER_ERR_FORMAT, "%s: added_tokens is not an array", L->file);
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= MAX_VOCAB ||
            id->valuedouble != floor(id->valuedouble) || !str_field(e, "content"))
            return fail(INFER_ERR_FORMAT, "%s: an added_tokens entry lacks an integer id or a content string", L->file);
        if (id->valuedouble > max_id) max_id = id->valuedouble;
    }
    int32_t n = (int32_t)max_id + 1;
    if (n <= 0) return fail(INFER_ERR_FORMAT, "%s: empty vocabulary", L->file);
    // Ids are dense in practice; a few holes are tolerated, but a small file
    // must not make us allocate for millions of ids it does not name.
    int entries = cJSON_GetArraySize(vocab) + cJSON_GetArraySize(added);
    if (n > entries + 1024)
        return fail(INFER_ERR_FORMAT, "%s: token id %d in a vocabulary of %d entries", L->file, n - 1, entries);
    L->tokens = calloc((size_t)n, sizeof *L->tokens);
    L->lens = calloc((size_t)n, sizeof *L->lens);
    L->types = malloc(sizeof *L->types * (size_t)n);
    if (!L->tokens || !L->lens || !L->types) return fail(INFER_ERR_NOMEM, "%s: %d tokens", L->file, n);
    for (int32_t i = 0; i < n; i++) L->types[i] = TOK_TYPE_UNUSED; // ids no entry names
    if (unigram) {
        if (!(L->scores = calloc((size_t)n, sizeof *L->scores))) return fail(INFER_ERR_NOMEM, "%s: scores", L->file);
        int32_t id = 0;
        cJSON_ArrayForEach(e, vocab) {
            L->tokens[id] = cJSON_GetArrayItem(e, 0)->valuestring;
            L->scores[id] = (float)cJSON_GetArrayItem(e, 1)->valuedouble;
            L->types[id++] = TOK_TYPE_NORMAL;
        }
    } else
        cJSON_ArrayForEach(e, vocab) {
            int32_t id = (int32_t)e->valuedouble;
            if (L->tokens[id]) return fail(INFER_ERR_FORMAT, "%s: token id %d appears twice in model.vocab", L->file, id);
            L->tokens[id] = e->string;
            L->types[id] = TOK_TYPE_NORMAL;
        }
    cJSON_ArrayForEach(e, added) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "single_word")))
            return fail(INFER_ERR_UNSUPPORTED, "%s: added token %d has single_word (not implemented)", L->file, id);
        uint8_t strip = (uint8_t)((cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lstrip")) ? TOK_LSTRIP : 0) |
                                  (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "rstrip")) ? TOK_RSTRIP : 0));
        if (strip && !L->strip && !(L->strip = calloc((size_t)n, 1)))
            return fail(INFER_ERR_NOMEM, "%s: strip flags", L->file);
        if (L->strip) L->strip[id] = strip;
        L->tokens[id] = str_field(e, "content");
        L->types[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TOK_TYPE_CONTROL
                                                                                     : TOK_TYPE_USER_DEFINED;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!L->tokens[i]) L->tokens[i] = "";
        size_t len = strlen(L->tokens[i]);
        if (len > 65536) return fail(INFER_ERR_FORMAT, "%s: token %d is %zu bytes", L->file, i, len);
        L->lens[i] = (uint32_t)len;
    }
    L->v.n_tokens = n;
    L->v.tokens = L->tokens;
    L->v.token_lens = L->lens;
    L->v.types = L->types;
    L->v.strip = L->strip;
    return INFER_OK;
}

static infer_status read_merges(load *L, const cJSON *model) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!m || cJSON_IsNull(m)) return INFER_OK;
    if (!cJSON_IsArray(m)) return fail(INFER_ERR_FORMAT, "%s: model.merges is not an array", L->file);
    int n = cJSON_GetArraySize(m);
    L->merges = calloc((size_t)n + 1, sizeof *L->merges);
    L->merge_lens = calloc((size_t)n + 1, sizeof *L->merge_lens);
    if (!L->merges || !L->merge_lens) return fail(INFER_ERR_NOMEM, "%s: %d merges", L->file, n);
    L->v.n_merges = n; // set first: the cleanup frees what was allocated
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, m) {
        const char *a, *b = NULL;
        if (cJSON_IsString(e)) a = e->valuestring;
        else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                 cJSON_IsString(cJSON_GetArrayItem(e, 1)))
            a = cJSON_GetArrayItem(e, 0)->valuestring, b = cJSON_GetArrayItem(e, 1)->valuestring;
        else return fail(INFER_ERR_FORMAT, "%s: model.merges[%d] is not \"a b\" nor [\"a\", \"b\"]", L->file, k);
        size_t la = strlen(a), lb = b ? strlen(b) : 0;
        char *s = malloc(la + lb + 2);
        if (!s) return fail(INFER_ERR_NOMEM, "%s: merges", L->file);
        memcpy(s, a, la);
        if (b) {
            s[la] = ' ';
            memcpy(s + la + 1, b, lb);
            la += lb + 1;
        }
        s[la] = 0;
        L->merges[k] = s;
        L->merge_lens[k] = (uint32_t)la;
        k++;
    }
    L->v.merges = (const char *const *)L->merges;
    L->v.merge_lens = L->merge_lens;
    return INFER_OK;
}

static infer_status add_norm(load *L, int op) {
    if (L->v.n_hf_norm == (int)sizeof L->v.hf_norm)
        return fail(INFER_ERR_UNSUPPORTED, "%s: more than %zu normalizer steps", L->file, sizeof L->v.hf_norm);
    L->v.hf_norm[L->v.n_hf_norm++] = (uint8_t)op;
    return INFER_OK;
}

static int json_bool(const cJSON *o, const char *k, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

// The normalizer as steps (Sequence flattened): the ones `tokenizers` has that
// this engine reproduces; any other is refused by name.
static infer_status read_normalizer(load *L, const cJSON *norm, int depth) {
    if (!norm || cJSON_IsNull(norm)) return INFER_OK;
    const char *type = str_field(norm, "type");
    if (!type) return fail(INFER_ERR_FORMAT, "%s: normalizer without a type", L->file);
    infer_status st = INFER_OK;
    if (!strcmp(type, "Sequence")) {
        if (depth > 8) return fail(INFER_ERR_FORMAT, "%s: normalizers nested too deep", L->file);
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(norm, "normalizers"))
            if ((st = read_normalizer(L, e, depth + 1))) return st;
        return INFER_OK;
    }
    static const struct {
        const char *name;
        int op;
    } simple[] = {{"NFC", HF_NFC}, {"NFD", HF_NFD}, {"NFKC", HF_NFKC}, {"NFKD", HF_NFKD},
                  {"Lowercase", HF_LOWERCASE}, {"StripAccents", HF_STRIP_MARKS}};
    for (size_t k = 0; k < sizeof simple / sizeof *simple; k++)
        if (!strcmp(type, simple[k].name)) return add_norm(L, simple[k].op);
    if (!strcmp(type, "BertNormalizer")) { // its steps in `tokenizers`' order
        int lower = json_bool(norm, "lowercase", 1);
        if ((json_bool(norm, "clean_text", 1) && (st = add_norm(L, HF_BERT_CLEAN))) ||
            (json_bool(norm, "handle_chinese_chars", 1) && (st = add_norm(L, HF_BERT_CJK))) ||
            (json_bool(norm, "strip_accents", lower) && (st = add_norm(L, HF_BERT_STRIP))) ||
            (lower && (st = add_norm(L, HF_LOWERCASE))))
            return st;
        return INFER_OK;
    }
    if (!strcmp(type, "Prepend") && str_field(norm, "prepend") && !strcmp(str_field(norm, "prepend"), META))
        return add_norm(L, HF_PREPEND_META);
    if (!strcmp(type, "Strip")) {
        if ((json_bool(norm, "strip_left", 1) && (st = add_norm(L, HF_STRIP_LEFT))) ||
            (json_bool(norm, "strip_right", 1) && (st = add_norm(L, HF_STRIP_RIGHT))))
            return st;
        return INFER_OK;
    }
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(norm, "pattern");
    const char *content = str_field(norm, "content");
    if (!strcmp(type, "Replace") && content) {
        if (str_field(pat, "String") && !strcmp(str_field(pat, "String"), " ") && !strcmp(content, META))
            return add_norm(L, HF_SPACE_TO_META);
        if (str_field(pat, "Regex") && !strcmp(str_field(pat, "Regex"), " {2,}") && !strcmp(content, " "))
            return add_norm(L, HF_COLLAPSE_SPACES);
    }
    return fail(INFER_ERR_UNSUPPORTED,
                "%s: normalizer '%s' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, "
                "BertNormalizer, Strip, Prepend('\u2581'), Replace(' ', '\u2581'), Replace(' {2,}', ' '), Sequence)",
                L->file, type);
}

// Metaspace: replacement "▁", prepend_scheme (or the older add_prefix_space), split.
static infer_status read_metaspace(load *L, const cJSON *pre) {
    const char *rep = str_field(pre, "replacement");
    if (rep && strcmp(rep, META))
        return fail(INFER_ERR_UNSUPPORTED, "%s: Metaspace with replacement '%s' (supported: '\u2581')", L->file, rep);
    const char *scheme = str_field(pre, "prepend_scheme");
    L->v.hf_pre = HF_PRE_METASPACE;
    if (!scheme) L->v.hf_prepend = json_bool(pre, "add_prefix_space", 1) ? HF_PREPEND_ALWAYS : HF_PREPEND_NEVER;
    else if (!strcmp(scheme, "always")) L->v.hf_prepend = HF_PREPEND_ALWAYS;
    else if (!strcmp(scheme, "first")) L->v.hf_prepend = HF_PREPEND_FIRST;
    else if (!strcmp(scheme, "never")) L->v.hf_prepend = HF_PREPEND_NEVER;
    else return fail(INFER_ERR_FORMAT, "%s: Metaspace prepend_scheme '%s' (known: always, first, never)", L->file, scheme);
    L->v.hf_split = json_bool(pre, "split", 1);
    return INFER_OK;
}

// The pre-tokenizer of a model that is not byte-level.
static infer_status read_pre_other(load *L, const cJSON *pre) {
    if (!pre || cJSON_IsNull(pre)) return INFER_OK;
    const char *type = str_field(pre, "type");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pre, "pattern");
    if (type && !strcmp(type, "Split") && str_field(pat, "String") && !strcmp(str_field(pat, "String"), " "))
        return INFER_OK; // a split on " " after the normalizer made every space "▁": nothing to split
    if (type && !strcmp(type, "Metaspace")) return read_metaspace(L, pre);
    if (type && !strcmp(type, "BertPreTokenizer")) return L->v.hf_pre = HF_PRE_BERT, INFER_OK;
    if (type && !strcmp(type, "WhitespaceSplit")) return L->v.hf_pre = HF_PRE_WHITESPACE_SPLIT, INFER_OK;
    return fail(INFER_ERR_UNSUPPORTED,
                "%s: pre_tokenizer '%s' is not supported here (supported: Metaspace, BertPreTokenizer, WhitespaceSplit, "
                "ByteLevel with the known expressions)", L->file, type ? type : "?");
}

static int is_byte_level(const cJSON *p) {
    const char *type = str_field(p, "type");
    return type && !strcmp(type, "ByteLevel");
}

// The gpt2 kind's pre-tokenizer: which of the known splitters it is.
static infer_status read_pre_gpt2(load *L, const cJSON *pre) {
    const char *type = str_field(pre, "type");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
    if (is_byte_level(pre) && !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pre, "use_regex")) &&
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space"))) {
        L->v.pre = tok_pre_find("gpt-2");
        return INFER_OK;
    }
    if (type && !strcmp(type, "Sequence") && cJSON_GetArraySize(list) == 2 && is_byte_level(b) &&
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "add_prefix_space"))) {
        const char *ta = str_field(a, "type");
        int regex = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(b, "use_regex"));
        if (ta && !strcmp(ta, "Digits") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "individual_digits")) &&
            regex) {
            L->v.pre = tok_pre_find("smollm");
            return INFER_OK;
        }
        const char *re = str_field(cJSON_GetObjectItemCaseSensitive(a, "pattern"), "Regex");
        const char *behavior = str_field(a, "behavior");
        if (ta && !strcmp(ta, "Split") && re && !regex && behavior && !strcmp(behavior, "Isolated") &&
            !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "invert"))) {
            if (!strcmp(re, RE_LLAMA3)) L->v.pre = tok_pre_find("llama-bpe");
            else if (!strcmp(re, RE_QWEN2)) L->v.pre = tok_pre_find("qwen2");
            else return fail(INFER_ERR_UNSUPPORTED, "%s: pre-tokenizer regex '%.200s'", L->file, re);
            return INFER_OK;
        }
    }
    return fail(INFER_ERR_UNSUPPORTED, "%s: byte-level pre_tokenizer '%s' of a shape not implemented", L->file,
                type ? type : "?");
}

// TemplateProcessing's "single" template: a leading/trailing SpecialToken
// means add_bos/add_eos.
static infer_status read_post(load *L, const cJSON *post) {
    const char *type = str_field(post, "type");
    if (!type) return INFER_OK;
    if (!strcmp(type, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(post, "processors")) {
            infer_status st = read_post(L, e);
            if (st) return st;
        }
        return INFER_OK;
    }
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) { // "cls": ["[CLS]", 101], "sep": [...]
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(post, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(post, "sep");
        int32_t c = find_token(L, cJSON_IsString(cJSON_GetArrayItem(cls, 0)) ? cJSON_GetArrayItem(cls, 0)->valuestring : NULL);
        int32_t e = find_token(L, cJSON_IsString(cJSON_GetArrayItem(sep, 0)) ? cJSON_GetArrayItem(sep, 0)->valuestring : NULL);
        if (c < 0 || e < 0) return fail(INFER_ERR_FORMAT, "%s: %s names an unknown token", L->file, type);
        L->v.bos = c, L->v.add_bos = true, L->v.eos = e, L->v.add_eos = true;
        return INFER_OK;
    }
    if (strcmp(type, "TemplateProcessing")) return INFER_OK; // ByteLevel (offsets only) and the like
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(post, "single");
    int n = cJSON_GetArraySize(single);
    for (int k = 0; k < n; k++) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, k), "SpecialToken");
        if (!sp) continue;
        int32_t id = find_token(L, str_field(sp, "id"));
        if (id < 0) return fail(INFER_ERR_FORMAT, "%s: post_processor names an unknown special token", L->file);
        if (k == 0) L->v.bos = id, L->v.add_bos = true;
        else if (k == n - 1) L->v.eos = id, L->v.add_eos = true;
    }
    return INFER_OK;
}

static infer_status read_config(load *L, const char *json_path) {
    // tokenizer_config.json beside tokenizer.json
    const char *slash = strrchr(json_path, '/');
    size_t dir = slash ? (size_t)(slash - json_path + 1) : 0;
    char *path = malloc(dir + 32);
    if (!path) return fail(INFER_ERR_NOMEM, "tokenizer_config.json path");
    memcpy(path, json_path, dir);
    strcpy(path + dir, "tokenizer_config.json");
    FILE *f = fopen(path, "rb");
    if (!f) {
        free(path);
        return INFER_OK;
    }
    fclose(f);
    char *data;
    size_t len;
    infer_status st = read_file(path, &data, &len);
    if (st) {
        free(path);
        return st;
    }
    cJSON *cfg = cJSON_ParseWithLength(data, len);
    free(data);
    if (!cJSON_IsObject(cfg)) {
        st = fail(INFER_ERR_FORMAT, "%s: not a JSON object", path);
        goto out;
    }
    if ((st = want(path, cfg, "add_bos_token", cJSON_IsBool, "a boolean")) ||
        (st = want(path, cfg, "add_eos_token", cJSON_IsBool, "a boolean")))
        goto out;
    const cJSON *v;
    if (cJSON_IsBool(v = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token"))) L->v.add_bos = cJSON_IsTrue(v);
    if (cJSON_IsBool(v = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token"))) L->v.add_eos = cJSON_IsTrue(v);
    int32_t id;
    if ((id = find_token(L, config_token(cfg, "bos_token"))) >= 0) L->v.bos = id;
    if ((id = find_token(L, config_token(cfg, "eos_token"))) >= 0) L->v.eos = id;
    if ((id = find_token(L, config_token(cfg, "pad_token"))) >= 0) L->v.pad = id;
    // (the unknown token stays model.unk_token's: HF's BPE uses only that one)
    v = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *tmpl = NULL;
    if (cJSON_IsString(v)) tmpl = v->valuestring;
    else if (cJSON_IsArray(v)) { // [{"name": "default", "template": "..."}, ...]
        const cJSON *e;
        cJSON_ArrayForEach(e, v) if (str_field(e, "name") && !strcmp(str_field(e, "name"), "default")) tmpl =
            str_field(e, "template");
    } else if (v && !cJSON_IsNull(v)) {
        st = fail(INFER_ERR_FORMAT, "%s: 'chat_template' is not a string or a list", path);
        goto out;
    }
    if (tmpl && !(L->template_copy = strdup(tmpl))) st = fail(INFER_ERR_NOMEM, "%s: chat_template", path);
    L->v.chat_template = L->template_copy;
out:
    cJSON_Delete(cfg);
    free(path);
    return st;
}

infer_status tokenizer_load_json(const char *path, tokenizer **out) {
    *out = NULL;
    char *data;
    size_t len;
    infer_status st = read_file(path, &data, &len);
    if (st) return st;
    cJSON *root = cJSON_ParseWithLength(data, len);
    free(data);
    load L = {.file = path};
    L.v.bos = L.v.eos = L.v.eot = L.v.pad = L.v.unk = L.v.sep = -1;
    L.v.flavor = TOK_FLAVOR_HF;
    if (!cJSON_IsObject(root)) {
        st = fail(INFER_ERR_FORMAT, "%s: not a JSON object", path);
        goto out;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = str_field(model, "type");
    if (!mtype) {
        st = fail(INFER_ERR_FORMAT, "%s: model.type missing", path);
        goto out;
    }
    int bpe = !strcmp(mtype, "BPE"), wordpiece = !strcmp(mtype, "WordPiece"), unigram = !strcmp(mtype, "Unigram");
    if (!bpe && !wordpiece && !unigram) {
        st = fail(INFER_ERR_UNSUPPORTED, "%s: model type '%s' is not supported (supported: BPE, WordPiece, Unigram)", path, mtype);
        goto out;
    }
    if ((st = want(path, model, "byte_fallback", cJSON_IsBool, "a boolean")) ||
        (st = want(path, model, "ignore_merges", cJSON_IsBool, "a boolean")) ||
        (st = want(path, model, "unk_token", cJSON_IsString, "a string")) ||
        (st = want(path, model, "unk_id", cJSON_IsNumber, "a number")) ||
        (st = want(path, model, "max_input_chars_per_word", cJSON_IsNumber, "a number")))
        goto out;
    const char *prefix = str_field(model, "continuing_subword_prefix");
    if ((bpe && (prefix || str_field(model, "end_of_word_suffix") || cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(model, "dropout")))) ||
        (wordpiece && prefix && strcmp(prefix, "##"))) {
        st = fail(INFER_ERR_UNSUPPORTED, "%s: %s with a subword prefix/suffix or dropout (supported: WordPiece's '##')", path, mtype);
        goto out;
    }
    if ((st = read_vocab(&L, model, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), unigram)) ||
        (bpe && (st = read_merges(&L, model))))
        goto out;
    L.v.ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    L.v.unk = find_token(&L, str_field(model, "unk_token"));
    if (unigram) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
        L.v.unk = cJSON_IsNumber(u) && u->valuedouble >= 0 && u->valuedouble < L.v.n_tokens ? (int32_t)u->valuedouble : -1;
        L.v.scores = L.scores;
        L.v.byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    }
    if (wordpiece) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
        L.v.wp_max_chars = cJSON_IsNumber(m) && m->valuedouble >= 1 && m->valuedouble < 1e9 ? (uint32_t)m->valuedouble : 100;
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    int byte_level = is_byte_level(pre);
    const cJSON *e;
    cJSON_ArrayForEach(e, list) byte_level |= is_byte_level(e);
    if ((st = read_normalizer(&L, norm, 0))) goto out;
    if (bpe && byte_level) {
        L.v.kind = TOK_KIND_GPT2;
        L.v.hf_pre = HF_PRE_BYTELEVEL;
        if ((st = read_pre_gpt2(&L, pre))) goto out;
    } else {
        L.v.kind = wordpiece ? TOK_KIND_BERT : unigram ? TOK_KIND_T5 : TOK_KIND_LLAMA;
        if ((st = read_pre_other(&L, pre))) goto out;
        if (bpe && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
            for (int32_t i = 0; i < L.v.n_tokens; i++)
                if (L.types[i] == TOK_TYPE_NORMAL && is_byte_token(L.tokens[i])) L.types[i] = TOK_TYPE_BYTE;
        if (unigram && L.v.byte_fallback)
            for (int32_t i = 0; i < L.v.n_tokens; i++)
                if (L.types[i] == TOK_TYPE_NORMAL && is_byte_token(L.tokens[i])) L.types[i] = TOK_TYPE_BYTE;
    }
    // decoding drops the first space that a "▁" prefix put there
    for (int k = 0; k < L.v.n_hf_norm; k++) L.v.add_space_prefix |= L.v.hf_norm[k] == HF_PREPEND_META;
    L.v.add_space_prefix |= L.v.hf_pre == HF_PRE_METASPACE && L.v.hf_prepend != HF_PREPEND_NEVER;
    if ((st = read_post(&L, cJSON_GetObjectItemCaseSensitive(root, "post_processor"))) || (st = read_config(&L, path)))
        goto out;
    st = tokenizer_from_vocab(&L.v, out);
    if (st) fail_wrap(st, "%s", path);
out:
    for (int32_t k = 0; L.merges && k < L.v.n_merges; k++) free(L.merges[k]);
    free(L.merges);
    free(L.merge_lens);
    free(L.tokens);
    free(L.lens);
    free(L.types);
    free(L.template_copy);
    free(L.strip);
    free(L.scores);
    cJSON_Delete(root);
    return st;
}
