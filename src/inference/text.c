// The public text API: the model's tokenizer, made on first use from the GGUF
// metadata or from tokenizer.json beside a Hugging Face checkpoint.
#include "infer.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"
#include "models/gguf.h"
#include "base/error.h"
#include "inference/chat.h"
#include "inference/grammar.h"

#include <pthread.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static infer_status get_tok_locked(infer_model *m, tokenizer **out);

// The tokenizer is built once, on first use, whichever thread asks first.
static infer_status get_tok(infer_model *m, tokenizer **out) {
    pthread_mutex_lock(&m->lazy_mu);
    infer_status st = get_tok_locked(m, out);
    pthread_mutex_unlock(&m->lazy_mu);
    return st;
}

static infer_status get_tok_locked(infer_model *m, tokenizer **out) {
    if (!m->tok_loaded) {
        m->tok_loaded = 1;
        infer_status st;
        st = m->gguf ? tokenizer_from_gguf(m->gguf, &m->tok) : INFER_OK;
        if (!st && !m->tok) { // a Hugging Face directory, or a vindex made from one
            char path[4096];
            struct stat sb;
            snprintf(path, sizeof path, "%s/tokenizer.json", m->path);
            st = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? tokenizer_load_json(path, &m->tok) : INFER_OK;
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

// The grammar's view of the vocabulary, made once whichever thread asks first.
infer_status model_grammar_vocab(infer_model *m, const gvocab **out) {
    int32_t eog[16];
    int n_eog = infer_model_eog(m, eog, 16);
    pthread_mutex_lock(&m->lazy_mu);
    tokenizer *t;
    infer_status st = get_tok_locked(m, &t);
    if (!st && !m->gvocab) st = grammar_vocab_build(t, eog, n_eog, &m->gvocab);
    *out = m->gvocab;
    pthread_mutex_unlock(&m->lazy_mu);
    return st;
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

// ---------------------------------------------------------------------------
// a vocabulary alone

struct infer_vocab {
    tokenizer *tok;
};

infer_status infer_vocab_load(const char *path, infer_vocab **out) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb)) return fail(INFER_ERR_IO, "%s: no such file or directory", path);
    tokenizer *t = NULL;
    infer_status st;
    size_t n = strlen(path);
    if (S_ISDIR(sb.st_mode)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/tokenizer.json", path);
        st = stat(p, &sb) == 0 ? tokenizer_load_json(p, &t)
                                : fail(INFER_ERR_IO, "%s: a directory without tokenizer.json", path);
    } else if (n >= 5 && !strcmp(path + n - 5, ".json")) {
        st = tokenizer_load_json(path, &t);
    } else {
        gguf_file *g = NULL;
        st = gguf_open(&g, path);
        if (!st) st = tokenizer_from_gguf(g, &t);
        if (!st && !t) st = fail(INFER_ERR_UNSUPPORTED, "%s: no vocabulary (tokenizer.ggml.model absent or \"none\")", path);
        gguf_close(g); // the tokenizer keeps copies
    }
    if (st) return st;
    infer_vocab *v = malloc(sizeof *v);
    if (!v) {
        tokenizer_free(t);
        return fail(INFER_ERR_NOMEM, "vocabulary");
    }
    v->tok = t;
    *out = v;
    return INFER_OK;
}

void infer_vocab_free(infer_vocab *v) {
    if (!v) return;
    tokenizer_free(v->tok);
    free(v);
}

infer_status infer_vocab_tokenize(const infer_vocab *v, const char *text, size_t len, int add_special, int parse_special,
                                  int32_t **ids, int *n_ids) {
    size_t n = 0;
    infer_status st = tokenizer_encode(v->tok, text, len, add_special != 0, parse_special != 0, ids, &n);
    if (st) return st;
    if (n > (size_t)INT32_MAX) {
        free(*ids);
        *ids = NULL;
        return fail(INFER_ERR_ARG, "text gives %zu tokens", n);
    }
    *n_ids = (int)n;
    return INFER_OK;
}

infer_status infer_vocab_detokenize(const infer_vocab *v, const int32_t *ids, int n, int skip_special, char **text,
                                    size_t *len) {
    return tokenizer_decode(v->tok, ids, n < 0 ? 0 : (size_t)n, skip_special != 0, text, len);
}

int32_t infer_vocab_size(const infer_vocab *v) { return tokenizer_n_vocab(v->tok); }

const char *infer_vocab_token(const infer_vocab *v, int32_t id, size_t *len) { return tokenizer_token(v->tok, id, len, NULL); }

const char *infer_model_chat_template(infer_model *m) {
    tokenizer *t;
    return get_tok(m, &t) == INFER_OK ? tokenizer_chat_template(t) : NULL;
}

const char *infer_token_text(infer_model *m, int32_t id, size_t *len) {
    tokenizer *t;
    if (get_tok(m, &t)) return NULL;
    return tokenizer_token(t, id, len, NULL);
}

// ---------------------------------------------------------------------------
// chat

// Gemma's turn format, for Gemma files that carry no template (the Gemma 3
// 270M GGUF has none): the same text as google/gemma-3-it's template renders
// for string contents.
static const char *const g_gemma_template =
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] + '\\n\\n' %}"
    "{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}"
    "{% for m in msgs %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\\n' + (sys if loop.first else '')"
    " + (m['content'] | trim) + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

const char *infer_chat_builtin_gemma(void) { return g_gemma_template; }

static const char *chat_template_of(infer_model *m, const char **source) {
    const char *t = infer_model_chat_template(m);
    struct stat sb;
    pthread_mutex_lock(&m->lazy_mu);
    if (!t && !m->chat_tmpl_loaded && stat(m->path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        m->chat_tmpl_loaded = 1;
        char *bos = NULL, *eos = NULL;
        if (chat_template_load_hf(m->path, &m->chat_tmpl, &bos, &eos) != INFER_OK) m->chat_tmpl = NULL;
        free(bos);
        free(eos);
    }
    if (!t) t = m->chat_tmpl;
    pthread_mutex_unlock(&m->lazy_mu);
    if (t) { *source = "model"; return t; }
    const char *own = m->cfg.fam->chat_template; // the family's built-in one
    if (own && !strcmp(own, "gemma")) { *source = "builtin:gemma"; return g_gemma_template; }
    *source = "builtin:chatml";
    return NULL; // chat_render falls back to ChatML
}

const char *infer_chat_template_source(infer_model *m) {
    const char *src;
    chat_template_of(m, &src);
    return src;
}

static void token_string(infer_model *m, int32_t id, char *buf, size_t cap) {
    size_t len = 0;
    const char *s = id >= 0 ? infer_token_text(m, id, &len) : NULL;
    snprintf(buf, cap, "%.*s", s ? (int)(len < cap ? len : cap - 1) : 0, s ? s : "");
}

infer_status infer_chat_render(infer_model *m, const infer_chat_message *msgs, int n, int add_generation_prompt, char **out) {
    *out = NULL;
    tokenizer *t;
    infer_status st = get_tok(m, &t);
    if (st) return st;
    const char *src;
    const char *tmpl = chat_template_of(m, &src);
    char bos[256], eos[256];
    token_string(m, tokenizer_bos(t), bos, sizeof bos);
    token_string(m, tokenizer_eos(t), eos, sizeof eos);
    chat_message *cm = malloc(sizeof *cm * (size_t)(n > 0 ? n : 1));
    if (!cm) return fail(INFER_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) { cm[i].role = msgs[i].role; cm[i].content = msgs[i].content; }
    st = chat_render(tmpl, cm, n, add_generation_prompt, bos, eos, out);
    free(cm);
    return st;
}

// The conversation's tokens with the messages' content as text: only the
// template's own markup may become special tokens. Where no message holds a
// special token's text, the rendered prompt tokenized with parse_special (as
// before, and as llama.cpp does). Where one does, the template is rendered
// again with each message's content replaced by a placeholder; when putting
// the contents back in gives the same prompt, the contents' bytes are known
// and tokenized as text (tokenizer_encode_marked), the rest as before. A
// template that changes or tests such a message's content (so its bytes
// cannot be found) is refused for it rather than let its text become markup.
// Other strings (tool calls, tools) cannot be found so: one that holds a
// special token's text is refused.
static infer_status render_json(infer_model *m, tokenizer *t, const cJSON *msgs, const cJSON *tools, int add_generation_prompt, char **out) {
    const char *src;
    const char *tmpl = chat_template_of(m, &src);
    char bos[256], eos[256];
    token_string(m, tokenizer_bos(t), bos, sizeof bos);
    token_string(m, tokenizer_eos(t), eos, sizeof eos);
    chat_request req = {.messages = msgs, .tools = tools, .bos_token = bos, .eos_token = eos,
                        .add_generation_prompt = add_generation_prompt, .now = -1};
    return chat_render_json(tmpl, &req, out);
}

// a string under j (a message's "content" left out when skip_content) holding a special token's text
static int special_inside(tokenizer *t, const cJSON *j, int skip_content) {
    if (cJSON_IsString(j)) return tokenizer_has_special(t, j->valuestring, strlen(j->valuestring)) != 0;
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next)
        if (!(skip_content && c->string && !strcmp(c->string, "content")) && special_inside(t, c, 0)) return 1;
    return 0;
}

static const char *content_of(const cJSON *msg) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static infer_status tokenize_json(infer_model *m, const cJSON *msgs, const cJSON *tools, int add_generation_prompt, int32_t **ids,
                                  int *n_ids) {
    *ids = NULL, *n_ids = 0;
    tokenizer *t;
    infer_status st = get_tok(m, &t);
    if (st) return st;
    for (const cJSON *x = msgs->child; x; x = x->next)
        if (special_inside(t, x, 1)) return fail(INFER_ERR_ARG, "a message's tool call holds the text of a special token");
    if (special_inside(t, tools, 0)) return fail(INFER_ERR_ARG, "a tool's definition holds the text of a special token");
    char *prompt = NULL;
    if ((st = render_json(m, t, msgs, tools, add_generation_prompt, &prompt))) return st;
    int n = cJSON_GetArraySize(msgs), risky = 0;
    for (const cJSON *x = msgs->child; x && !risky; x = x->next)
        risky = content_of(x) && tokenizer_has_special(t, content_of(x), strlen(content_of(x))) != 0;
    size_t len = strlen(prompt), n_out = 0;
    uint8_t *plain = NULL;
    if (risky) {
        // placeholders: U+E000 <index> U+E001 (not in any content, else the check below fails)
        cJSON *ph = cJSON_Duplicate(msgs, 1);
        const char **text = malloc(sizeof *text * (size_t)(n ? n : 1));
        char *with = NULL;
        if (!ph || !text) st = fail(INFER_ERR_NOMEM, "out of memory");
        int i = 0;
        for (cJSON *x = ph ? ph->child : NULL, *y = msgs->child; !st && x; x = x->next, y = y->next, i++) {
            char mark[32];
            snprintf(mark, sizeof mark, "\xEE\x80\x80%d\xEE\x80\x81", i);
            if ((text[i] = content_of(y))) cJSON_ReplaceItemInObjectCaseSensitive(x, "content", cJSON_CreateString(mark));
        }
        if (!st) st = render_json(m, t, ph, tools, add_generation_prompt, &with);
        // put the contents back, noting their bytes; the result must be the prompt
        int same = !st;
        if (same && !(plain = calloc(len + 1, 1))) st = fail(INFER_ERR_NOMEM, "out of memory"), same = 0;
        size_t at = 0;
        for (const char *p = with; same && p && *p;) {
            int k = -1, used = 0;
            if (!strncmp(p, "\xEE\x80\x80", 3) && sscanf(p + 3, "%d%n", &k, &used) == 1 && k >= 0 && k < n &&
                !strncmp(p + 3 + used, "\xEE\x80\x81", 3) && text[k]) {
                size_t cl = strlen(text[k]);
                same = at + cl <= len && !memcmp(prompt + at, text[k], cl);
                if (same) memset(plain + at, 1, cl), at += cl, p += 3 + used + 3;
            } else {
                same = at < len && prompt[at] == *p;
                at++, p++;
            }
        }
        same = same && at == len;
        free(with), free(text), cJSON_Delete(ph);
        if (!st && !same) {
            int i = 0;
            for (const cJSON *x = msgs->child; x && !(content_of(x) && tokenizer_has_special(t, content_of(x), strlen(content_of(x)))); x = x->next) i++;
            st = fail(INFER_ERR_ARG, "message %d holds the text of a special token, and the chat template changes or tests that "
                      "message's content, so it cannot be kept as text", i);
        }
    }
    if (!st) st = plain ? tokenizer_encode_marked(t, prompt, len, false, plain, ids, &n_out) : tokenizer_encode(t, prompt, len, false, true, ids, &n_out);
    free(plain), free(prompt);
    if (st) return st;
    if (n_out > (size_t)INT32_MAX) return free(*ids), *ids = NULL, fail(INFER_ERR_ARG, "the conversation gives %zu tokens", n_out);
    *n_ids = (int)n_out;
    return INFER_OK;
}

infer_status infer_chat_tokenize(infer_model *m, const infer_chat_message *msgs, int n, int add_generation_prompt, int32_t **ids,
                                 int *n_ids) {
    *ids = NULL, *n_ids = 0;
    if (n < 0 || (n > 0 && !msgs)) return fail(INFER_ERR_ARG, "chat template: bad message list");
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) {
        if (!msgs[i].role) return cJSON_Delete(arr), fail(INFER_ERR_ARG, "chat template: message %d has no role", i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", msgs[i].role);
        if (msgs[i].content) cJSON_AddStringToObject(o, "content", msgs[i].content);
        else cJSON_AddNullToObject(o, "content");
        cJSON_AddItemToArray(arr, o);
    }
    if (!arr || cJSON_GetArraySize(arr) != n) return cJSON_Delete(arr), fail(INFER_ERR_NOMEM, "out of memory");
    infer_status st = tokenize_json(m, arr, NULL, add_generation_prompt, ids, n_ids);
    cJSON_Delete(arr);
    return st;
}

infer_status infer_chat_tokenize_json(infer_model *m, const char *messages, const char *tools, int add_generation_prompt, int32_t **ids,
                                      int *n_ids) {
    *ids = NULL, *n_ids = 0;
    cJSON *msgs = cJSON_Parse(messages ? messages : ""), *tl = tools ? cJSON_Parse(tools) : NULL;
    infer_status st = INFER_OK;
    if (!cJSON_IsArray(msgs)) st = fail(INFER_ERR_ARG, "chat: the messages must be a JSON array");
    else if (tools && !cJSON_IsArray(tl)) st = fail(INFER_ERR_ARG, "chat: the tools must be a JSON array");
    else st = tokenize_json(m, msgs, tl, add_generation_prompt, ids, n_ids);
    cJSON_Delete(msgs), cJSON_Delete(tl);
    return st;
}

const char *infer_chat_template(infer_model *m) {
    const char *src;
    return chat_template_of(m, &src);
}
