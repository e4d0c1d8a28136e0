// Tool calls in a model's own format, where its chat template renders the
// tools itself: the template gets the tools and the conversation's tool turns
// as transformers' apply_chat_template takes them, and the answer is read in
// the family's syntax -- Hermes / Qwen ("<tool_call>\n{"name", "arguments"}\n
// </tool_call>", several), Llama 3.x (the answer one {"name", "parameters"},
// maybe after <|python_tag|>), Mistral ("[TOOL_CALLS][{"name", "arguments"}]",
// or the newer "[TOOL_CALLS]name[ARGS]{...}"). A call that must come
// (tool_choice required or named) is held to that syntax: the prompt ends in
// the call's opening markup (the prefill: special tokens, which a grammar
// cannot give) and the grammar holds the rest, one call (Hermes, Llama) or
// the calls (Mistral's array) whose arguments match the tool's parameters.
// The engine leaves special tokens out of the answer's text, so a call is
// also read without its markers.
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int serve_tools_format(const char *tmpl) {
    if (!tmpl || !strstr(tmpl, "tools")) return TOOLS_GENERIC;
    if (strstr(tmpl, "<tool_call>") && strstr(tmpl, "arguments") && (strstr(tmpl, "{\"name\": ") || strstr(tmpl, "{\\\"name\\\": ")) &&
        !strstr(tmpl, "<function=") && !strstr(tmpl, "<arg_key>"))
        return TOOLS_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return strstr(tmpl, "[ARGS]") ? TOOLS_MISTRAL_ARGS : TOOLS_MISTRAL;
    if (strstr(tmpl, "<|start_header_id|>") && strstr(tmpl, "\"parameters\"")) return TOOLS_LLAMA3;
    return TOOLS_GENERIC;
}

// a call's id: unique in the process (a counter mixed with the time it began, splitmix64)
static unsigned long long call_id(void) {
    static _Atomic unsigned long long n;
    unsigned long long x = (unsigned long long)time(NULL) * 0x9E3779B97F4A7C15ull + ++n * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

cJSON *serve_tool_call(const char *name, const char *args) {
    cJSON *one = cJSON_CreateObject(), *f = cJSON_CreateObject();
    char id[40];
    snprintf(id, sizeof id, "call_%016llx", call_id());
    cJSON_AddStringToObject(one, "id", id);
    cJSON_AddStringToObject(one, "type", "function");
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "arguments", args);
    cJSON_AddItemToObject(one, "function", f);
    return one;
}

// Mistral's templates take ids of 9 letters and digits: any id mapped to such (FNV-1a)
static cJSON *mistral_id(const char *id) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned long long h = 0xcbf29ce484222325ull;
    for (; *id; id++) h = (h ^ (unsigned char)*id) * 0x100000001b3ull;
    char s[10];
    for (int i = 0; i < 9; i++, h /= 62) s[i] = al[h % 62];
    s[9] = 0;
    return cJSON_CreateString(s);
}

// a message's content as text: a string, or text parts joined (NULL: neither)
static cJSON *content_text(const cJSON *ct) {
    if (cJSON_IsString(ct)) return cJSON_CreateString(ct->valuestring);
    if (!cJSON_IsArray(ct)) return NULL;
    size_t len = 0, at = 0;
    for (const cJSON *p = ct->child; p; p = p->next) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type"), *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) return NULL;
        len += strlen(tx->valuestring);
    }
    char *s = malloc(len + 1);
    if (!s) return NULL;
    for (const cJSON *p = ct->child; p; p = p->next) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        memcpy(s + at, tx, strlen(tx)), at += strlen(tx);
    }
    s[at] = 0;
    cJSON *o = cJSON_CreateString(s);
    free(s);
    return o;
}

// an assistant turn's tool_calls as templates take them: arguments an object
static cJSON *template_calls(serve_check *k, int fmt, const cJSON *tc, const char *p) {
    cJSON *out = cJSON_CreateArray();
    for (const cJSON *c = tc->child; c && !k->status; c = c->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function"), *nm = cJSON_GetObjectItemCaseSensitive(f, "name"),
                    *ar = cJSON_GetObjectItemCaseSensitive(f, "arguments"), *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        cJSON *args = cJSON_IsString(ar) ? cJSON_Parse(ar->valuestring) : cJSON_IsObject(ar) ? cJSON_Duplicate(ar, 1) : NULL;
        if (!ar) args = cJSON_CreateObject();
        if (!cJSON_IsObject(f) || !cJSON_IsString(nm) || !cJSON_IsObject(args)) {
            cJSON_Delete(args);
            serve_bad(k, p, "%s: tool_calls must be [{\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\": a JSON object's text}}]", p);
            break;
        }
        cJSON *one = cJSON_CreateObject(), *g = cJSON_CreateObject();
        const char *ids = cJSON_IsString(id) ? id->valuestring : "";
        cJSON_AddItemToObject(one, "id", fmt == TOOLS_MISTRAL || fmt == TOOLS_MISTRAL_ARGS ? mistral_id(ids) : cJSON_CreateString(ids));
        cJSON_AddStringToObject(one, "type", "function");
        cJSON_AddStringToObject(g, "name", nm->valuestring);
        cJSON_AddItemToObject(g, "arguments", args);
        cJSON_AddItemToObject(one, "function", g);
        cJSON_AddItemToArray(out, one);
    }
    if (k->status) return cJSON_Delete(out), NULL;
    return out;
}

// the name of the call a tool result answers (NULL: none found)
static const char *answered(const cJSON *msgs, const char *id) {
    for (const cJSON *a = msgs->child; a; a = a->next) {
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(a, "tool_calls");
        for (const cJSON *c = cJSON_IsArray(tc) ? tc->child : NULL; c; c = c->next) {
            const cJSON *ci = cJSON_GetObjectItemCaseSensitive(c, "id"),
                        *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "function"), "name");
            if (cJSON_IsString(ci) && cJSON_IsString(nm) && !strcmp(ci->valuestring, id)) return nm->valuestring;
        }
    }
    return NULL;
}

cJSON *serve_tools_native_messages(serve_check *k, int fmt, const cJSON *msgs) {
    if (!cJSON_IsArray(msgs) || !msgs->child) return serve_bad(k, "messages", "'messages' must be a non-empty array"), NULL;
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    for (const cJSON *x = msgs->child; x && !k->status; x = x->next, i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(x, "role"), *ct = cJSON_GetObjectItemCaseSensitive(x, "content"),
                    *tc = cJSON_GetObjectItemCaseSensitive(x, "tool_calls"), *id = cJSON_GetObjectItemCaseSensitive(x, "tool_call_id");
        char p[32];
        snprintf(p, sizeof p, "messages[%d]", i);
        const char *role = cJSON_IsString(r) ? r->valuestring : "";
        if (!cJSON_IsObject(x) || (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") && strcmp(role, "assistant") &&
                                   strcmp(role, "tool"))) {
            serve_bad(k, p, "%s must be an object whose 'role' is one of system, developer, user, assistant, tool", p);
            break;
        }
        int calls = tc && !cJSON_IsNull(tc);
        if (calls && (strcmp(role, "assistant") || !cJSON_IsArray(tc))) {
            serve_bad(k, p, "%s: only an assistant message carries 'tool_calls', an array", p);
            break;
        }
        cJSON *m = cJSON_CreateObject(), *text = content_text(ct);
        cJSON_AddItemToArray(out, m);
        cJSON_AddStringToObject(m, "role", strcmp(role, "developer") ? role : "system");
        if (!text && !strcmp(role, "assistant") && (!ct || cJSON_IsNull(ct))) text = cJSON_CreateString("");
        if (!text) { serve_bad(k, p, "%s: 'content' must be a string or an array of text parts", p); break; }
        cJSON_AddItemToObject(m, "content", text);
        if (calls) {
            cJSON *v = template_calls(k, fmt, tc, p);
            if (v) cJSON_AddItemToObject(m, "tool_calls", v);
        }
        if (!strcmp(role, "tool")) {
            if (!cJSON_IsString(id)) { serve_bad(k, p, "%s: a tool message needs a string 'tool_call_id'", p); break; }
            const char *name = answered(msgs, id->valuestring);
            cJSON_AddItemToObject(m, "tool_call_id",
                                  fmt == TOOLS_MISTRAL || fmt == TOOLS_MISTRAL_ARGS ? mistral_id(id->valuestring) : cJSON_CreateString(id->valuestring));
            if (name) cJSON_AddStringToObject(m, "name", name);
        }
    }
    if (k->status) return cJSON_Delete(out), NULL;
    return out;
}

cJSON *serve_tools_native_tools(const cJSON *tools) {
    cJSON *out = cJSON_Duplicate(tools, 1);
    for (cJSON *t = out ? out->child : NULL; t; t = t->next) {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *de = cJSON_GetObjectItemCaseSensitive(f, "description"), *pa = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        if (!cJSON_IsString(de)) cJSON_DeleteItemFromObjectCaseSensitive(f, "description"), cJSON_AddStringToObject(f, "description", "");
        if (!cJSON_IsObject(pa)) {
            cJSON_DeleteItemFromObjectCaseSensitive(f, "parameters");
            cJSON *p = cJSON_AddObjectToObject(f, "parameters");
            cJSON_AddStringToObject(p, "type", "object"), cJSON_AddObjectToObject(p, "properties");
        }
    }
    return out;
}

static const cJSON *tool_named(const cJSON *tools, const char *name, size_t n) {
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (cJSON_IsString(nm) && strlen(nm->valuestring) == n && !strncmp(nm->valuestring, name, n)) return t;
    }
    return NULL;
}

static cJSON *params_of(const cJSON *t) {
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "parameters");
    cJSON *s = cJSON_IsObject(pa) ? cJSON_Duplicate(pa, 1) : cJSON_CreateObject(); // (no parameters: any object)
    if (!cJSON_IsObject(pa)) cJSON_AddStringToObject(s, "type", "object");
    return s;
}

// {"name": const, key: the parameters} for each allowed tool
static cJSON *call_schema(const cJSON *tools, const char *only, const char *key) {
    cJSON *any = cJSON_CreateArray(), *root = cJSON_CreateObject();
    for (const cJSON *t = tools->child; t; t = t->next) {
        const char *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name")->valuestring;
        if (only && strcmp(nm, only)) continue;
        cJSON *call = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
        cJSON_AddStringToObject(call, "type", "object");
        cJSON_AddStringToObject(name, "const", nm);
        cJSON_AddItemToObject(props, "name", name);
        cJSON_AddItemToObject(props, key, params_of(t));
        cJSON_AddItemToObject(call, "properties", props);
        cJSON_AddItemToObject(call, "required", cJSON_CreateStringArray((const char *const[]){"name", key}, 2));
        cJSON_AddItemToArray(any, call);
    }
    cJSON_AddItemToObject(root, "anyOf", any);
    return root;
}

char *serve_tools_native_schema(int fmt, const cJSON *tools, const char *only, int parallel, char **prefill) {
    cJSON *s = NULL;
    *prefill = NULL;
    const cJSON *one = only ? tool_named(tools, only, strlen(only)) : tools->child && !tools->child->next ? tools->child : NULL;
    if (fmt == TOOLS_HERMES) {
        s = call_schema(tools, only, "arguments");
        *prefill = strdup("<tool_call>\n");
    } else if (fmt == TOOLS_LLAMA3) {
        s = call_schema(tools, only, "parameters");
        *prefill = strdup("");
    } else if (fmt == TOOLS_MISTRAL_ARGS && one && !parallel) {
        const char *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(one, "function"), "name")->valuestring;
        s = params_of(one);
        size_t n = strlen(nm) + 32;
        if ((*prefill = malloc(n))) snprintf(*prefill, n, "[TOOL_CALLS]%s[ARGS]", nm);
    } else { // Mistral's array (the newer form's several tools too: a grammar cannot give its [ARGS] token)
        s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "array");
        cJSON_AddItemToObject(s, "items", call_schema(tools, only, "arguments"));
        cJSON_AddNumberToObject(s, "minItems", 1);
        if (!parallel) cJSON_AddNumberToObject(s, "maxItems", 1);
        *prefill = strdup("[TOOL_CALLS]");
    }
    char *text = s && *prefill ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    if (!text) free(*prefill), *prefill = NULL;
    return text;
}

// ---- the answer read back ----

static const char *skip_ws(const char *s, const char *end) {
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
    return s;
}

static int starts(const char *s, const char *end, const char *w) {
    size_t n = strlen(w);
    return (size_t)(end - s) >= n && !memcmp(s, w, n);
}

// one call to calls: name a tool's, arguments a JSON object (or its text); 0: not so
static int add_call(cJSON *calls, const cJSON *tools, const char *name, size_t n, const cJSON *args) {
    if (!tool_named(tools, name, n)) return 0;
    cJSON *a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject();
    char *text = cJSON_IsObject(a) ? cJSON_PrintUnformatted(a) : NULL, nm[80];
    cJSON_Delete(a);
    if (!text) return 0;
    snprintf(nm, sizeof nm, "%.*s", (int)n, name);
    cJSON_AddItemToArray(calls, serve_tool_call(nm, text));
    free(text);
    return 1;
}

// {"name", "arguments" | "parameters"}
static int add_object(cJSON *calls, const cJSON *tools, const cJSON *o) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name"), *ar = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!ar) ar = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    return cJSON_IsObject(o) && cJSON_IsString(nm) && add_call(calls, tools, nm->valuestring, strlen(nm->valuestring), ar);
}

// a JSON value at *s (advanced past it), or NULL
static cJSON *json_at(const char **s, const char *end) {
    const char *e = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(*s, (size_t)(end - *s), &e, 0);
    if (v) *s = e;
    return v;
}

// a call object, or an array of them, at *s
static int json_calls(cJSON *calls, const cJSON *tools, const char **s, const char *end) {
    cJSON *v = json_at(s, end);
    int ok = v != NULL && (cJSON_IsArray(v) ? v->child != NULL : cJSON_IsObject(v));
    for (const cJSON *c = cJSON_IsArray(v) ? v->child : v; ok && c; c = cJSON_IsArray(v) ? c->next : NULL) ok = add_object(calls, tools, c);
    cJSON_Delete(v);
    return ok;
}

// Mistral's newer form, markers maybe gone: name ([CALL_ID]id)? ([ARGS])? {...}
static int named_call(cJSON *calls, const cJSON *tools, const char **s, const char *end) {
    const char *p = *s, *q = p;
    while (q < end && *q != '[' && *q != '{') q++;
    const char *name_end = q;
    if (starts(q, end, "[CALL_ID]"))
        for (q += 9; q < end && *q != '[' && *q != '{'; q++) {}
    if (starts(q, end, "[ARGS]")) q += 6;
    q = skip_ws(q, end);
    cJSON *args = q < end && *q == '{' ? json_at(&q, end) : NULL;
    int ok = args && add_call(calls, tools, p, (size_t)(name_end - p), args);
    cJSON_Delete(args);
    if (ok) *s = q;
    return ok;
}

int serve_tools_native_parse(int fmt, const cJSON *tools, const char *text, size_t n, cJSON **content, cJSON **calls) {
    const char *end = text + n, *s = text, *marker = fmt == TOOLS_HERMES ? "<tool_call>" : fmt == TOOLS_LLAMA3 ? "<|python_tag|>" : "[TOOL_CALLS]";
    const char *at = NULL;
    for (const char *p = text; p < end && !at; p++)
        if (starts(p, end, marker)) at = p;
    *content = NULL, *calls = cJSON_CreateArray();
    int ok = 1;
    const char *before = text, *before_end = text, *after = end;
    if (at) { // the calls after the first marker: text before it (and after the calls) is content
        before_end = at, s = at + strlen(marker);
        while (ok) {
            s = skip_ws(s, end);
            if (fmt == TOOLS_MISTRAL || fmt == TOOLS_MISTRAL_ARGS) ok = (s < end && (*s == '[' || *s == '{')) ? json_calls(*calls, tools, &s, end) : named_call(*calls, tools, &s, end);
            else ok = json_calls(*calls, tools, &s, end);
            if (fmt == TOOLS_HERMES && ok) {
                s = skip_ws(s, end);
                if (starts(s, end, "</tool_call>")) s += 12;
            }
            if (fmt == TOOLS_LLAMA3 && ok && starts(skip_ws(s, end), end, ";")) { s = skip_ws(s, end) + 1; continue; }
            const char *nx = skip_ws(s, end);
            if (ok && starts(nx, end, marker)) s = nx + strlen(marker);
            else break;
        }
        after = s;
    } else { // no marker (a special token, left out of the text): the whole answer a call
        s = skip_ws(text, end);
        if (s < end && (*s == '{' || *s == '['))
            ok = json_calls(*calls, tools, &s, end);
        else if (fmt == TOOLS_MISTRAL || fmt == TOOLS_MISTRAL_ARGS)
            while ((ok = named_call(*calls, tools, &s, end)) && skip_ws(s, end) < end) s = skip_ws(s, end);
        else ok = 0;
        ok = ok && skip_ws(s, end) == end;
        before_end = text, after = end;
    }
    if (!ok || !(*calls)->child) return cJSON_Delete(*calls), *calls = NULL, 0;
    // text outside the calls
    size_t nb = (size_t)(skip_ws(before, before_end) == before_end ? 0 : before_end - before);
    const char *a = skip_ws(after, end);
    size_t na = (size_t)(end - a);
    if (nb || na) {
        char *c = malloc(nb + na + 2);
        if (c) {
            memcpy(c, before, nb);
            size_t l = nb;
            while (l && (c[l - 1] == ' ' || c[l - 1] == '\n')) l--;
            if (l && na) c[l++] = '\n';
            memcpy(c + l, a, na), c[l + na] = 0;
            char *u = serve_utf8_clean(c, l + na);
            *content = u && l + na ? cJSON_CreateString(u) : NULL;
            free(u), free(c);
        }
    }
    return 1;
}

void serve_tools_tokenize(serve_check *k, infer_model *m, int n_ctx, const cJSON *turns, serve_gen *g) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(turns, "tools"), *pre = cJSON_GetObjectItemCaseSensitive(turns, "prefill");
    char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(turns, "messages")), *tl = tools ? cJSON_PrintUnformatted(tools) : NULL;
    int32_t *more = NULL;
    int n_more = 0;
    if (!msgs || (tools && !tl)) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
    else if (infer_chat_tokenize_json(m, msgs, tl, 1, &g->r.prompt, &g->r.n_prompt))
        serve_bad(k, "messages", "the chat template: %s", infer_last_error());
    else if (cJSON_IsString(pre) && *pre->valuestring && infer_tokenize(m, pre->valuestring, strlen(pre->valuestring), 0, 1, &more, &n_more))
        serve_bad(k, "tools", "the tool call's markup: %s", infer_last_error());
    free(msgs), free(tl);
    if (n_more) {
        int32_t *p = realloc(g->r.prompt, sizeof *p * (size_t)(g->r.n_prompt + n_more));
        if (!p) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
        else memcpy(p + g->r.n_prompt, more, sizeof *p * (size_t)n_more), g->r.prompt = p, g->r.n_prompt += n_more;
    }
    free(more);
    if (k->status) return;
    if (g->r.n_prompt < 1) serve_bad(k, "messages", "the prompt is empty");
    else if (g->r.n_prompt >= n_ctx)
        serve_bad(k, "messages", "the prompt is %d tokens: this server's context holds %d, and one more is needed to answer", g->r.n_prompt, n_ctx);
}
