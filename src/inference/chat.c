// Chat API over the Jinja interpreter: builds the variables transformers'
// apply_chat_template passes (messages, tools=None, documents=None,
// add_generation_prompt, bos_token, eos_token, extra kwargs) and renders.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/mapfile.h"
#include "inference/chat.h"
#include "inference/jinja.h"

const char *const chat_fallback_template =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static int blank(const char *s) {
    if (!s) return 1;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') return 0;
    return 1;
}

infer_status chat_render_json(const char *tmpl, const chat_request *req, char **out) {
    *out = NULL;
    if (!req || !req->messages || !cJSON_IsArray(req->messages))
        return fail(INFER_ERR_ARG, "chat template: messages must be a JSON array");
    if (req->tools && !cJSON_IsArray(req->tools) && !cJSON_IsNull(req->tools))
        return fail(INFER_ERR_ARG, "chat template: tools must be a JSON array");
    if (req->extra && !cJSON_IsObject(req->extra))
        return fail(INFER_ERR_ARG, "chat template: extra variables must be a JSON object");
    if (blank(tmpl)) tmpl = chat_fallback_template;

    cJSON *vars = cJSON_CreateObject();
    if (!vars) return fail(INFER_ERR_NOMEM, "chat template: out of memory");
    // extra kwargs first: the named arguments below win, as in transformers
    if (req->extra)
        for (const cJSON *c = req->extra->child; c; c = c->next)
            cJSON_AddItemToObject(vars, c->string, cJSON_Duplicate(c, 1));
    cJSON_DeleteItemFromObject(vars, "messages");
    cJSON_AddItemToObject(vars, "messages", cJSON_Duplicate(req->messages, 1));
    cJSON_DeleteItemFromObject(vars, "tools");
    cJSON_AddItemToObject(vars, "tools", req->tools ? cJSON_Duplicate(req->tools, 1) : cJSON_CreateNull());
    cJSON_DeleteItemFromObject(vars, "documents");
    cJSON_AddNullToObject(vars, "documents");
    cJSON_DeleteItemFromObject(vars, "add_generation_prompt");
    cJSON_AddBoolToObject(vars, "add_generation_prompt", req->add_generation_prompt != 0);
    cJSON_DeleteItemFromObject(vars, "bos_token");
    cJSON_AddStringToObject(vars, "bos_token", req->bos_token ? req->bos_token : "");
    cJSON_DeleteItemFromObject(vars, "eos_token");
    cJSON_AddStringToObject(vars, "eos_token", req->eos_token ? req->eos_token : "");

    infer_status st = jinja_render(tmpl, vars, req->now, out);
    cJSON_Delete(vars);
    return st;
}

infer_status chat_render(const char *tmpl, const chat_message *msgs, int n, int add_generation_prompt,
                         const char *bos_token, const char *eos_token, char **out) {
    *out = NULL;
    if (n < 0 || (n > 0 && !msgs)) return fail(INFER_ERR_ARG, "chat template: bad message list");
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return fail(INFER_ERR_NOMEM, "chat template: out of memory");
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role) {
            cJSON_Delete(arr);
            return fail(INFER_ERR_ARG, "chat template: message %d has no role", i);
        }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", msgs[i].role);
        if (msgs[i].content) cJSON_AddStringToObject(m, "content", msgs[i].content);
        else cJSON_AddNullToObject(m, "content");
        cJSON_AddItemToArray(arr, m);
    }
    chat_request req = {
        .messages = arr, .bos_token = bos_token, .eos_token = eos_token,
        .add_generation_prompt = add_generation_prompt, .now = -1,
    };
    infer_status st = chat_render_json(tmpl, &req, out);
    cJSON_Delete(arr);
    return st;
}

// ---- loading from a Hugging Face directory ---------------------------------

static char *token_string(const cJSON *cfg, const char *key) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(t)) t = cJSON_GetObjectItemCaseSensitive(t, "content");   // AddedToken form
    return cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
}

infer_status chat_template_load_hf(const char *dir, char **tmpl, char **bos, char **eos) {
    *tmpl = NULL;
    if (bos) *bos = NULL;
    if (eos) *eos = NULL;
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (stat(path, &sb) == 0) {
        infer_status st = read_text_file(path, 4u << 20, tmpl, NULL);
        if (st) return fail_wrap(st, "%s", path);
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (stat(path, &sb) != 0) return INFER_OK;
    char *text = NULL;
    infer_status st = read_text_file(path, 64u << 20, &text, NULL);
    if (st) return fail_wrap(st, "%s", path);
    cJSON *cfg = cJSON_Parse(text);
    free(text);
    if (!cfg) return fail(INFER_ERR_FORMAT, "%s: not valid JSON", path);
    if (!*tmpl) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        if (cJSON_IsString(t)) {
            *tmpl = strdup(t->valuestring);
        } else if (cJSON_IsArray(t)) {
            for (const cJSON *e = t->child; e; e = e->next) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
                const cJSON *tt = cJSON_GetObjectItemCaseSensitive(e, "template");
                if (cJSON_IsString(nm) && cJSON_IsString(tt) && !strcmp(nm->valuestring, "default"))
                    *tmpl = strdup(tt->valuestring);
            }
        } else if (t && !cJSON_IsNull(t)) {
            cJSON_Delete(cfg);
            return fail(INFER_ERR_FORMAT, "%s: chat_template is neither a string nor a list", path);
        }
    }
    if (bos) *bos = token_string(cfg, "bos_token");
    if (eos) *eos = token_string(cfg, "eos_token");
    cJSON_Delete(cfg);
    return INFER_OK;
}
