// infer serve's tool calls (OpenAI's `tools`), in a form every model can take:
// the functions are listed in the system turn, the answer is one JSON object
// -- {"tool_calls": [{"name", "arguments"}, ...]} to call functions, or
// {"response": "..."} to answer without them (tool_choice "auto") -- and the
// grammar holds the model to it, so a call's name is one of the tools' and
// its arguments match that tool's parameter schema. The conversation's tool
// turns become text the chat template takes: an assistant turn's tool_calls
// the same JSON object, the tool results a user turn. The answer is parsed
// back into OpenAI's message.tool_calls (finish_reason "tool_calls"). One call
// an answer unless parallel_tool_calls is true (llama-server's default: small
// models repeat a call while they may). A model whose chat template renders
// tools itself gets them in its own format instead (serve_tools_native.c).
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOOLS_MAX = 128 };

struct serve_tools {
    int calls_only; // tool_choice "required" or a named function: no {"response"}
    int fmt;        // TOOLS_GENERIC, or the template's own format (serve.h)
    char *prefill;  // (own format) the call's markup the prompt ends in, which the answer continues
    cJSON *tools;   // (own format) the tools, whose names a call must have
    int answered;   // the answer was parsed (serve_tools_answer; the last parse's calls: n_calls)
    int n_calls;
};

// /metrics' counts, added as each request's tools are freed (serve_tools_counts)
static long long g_answers, g_call_answers, g_calls;

void serve_tools_counts(long long *answers, long long *call_answers, long long *calls) {
    *answers = __atomic_load_n(&g_answers, __ATOMIC_RELAXED);
    *call_answers = __atomic_load_n(&g_call_answers, __ATOMIC_RELAXED);
    *calls = __atomic_load_n(&g_calls, __ATOMIC_RELAXED);
}

static int bad(serve_check *k, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(serve_check *k, const char *param, const char *fmt, ...) {
    if (k->status) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->msg, sizeof k->msg, fmt, ap);
    va_end(ap);
    snprintf(k->param, sizeof k->param, "%s", param);
    k->status = 400;
    return -1;
}

static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-')) return 0;
    return 1;
}

// The system turn's text: the functions, one JSON line each, and the answer's form.
static char *tools_prompt(const cJSON *tools, int calls_only) {
    size_t cap = 1024, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    len += (size_t)snprintf(s, cap, "You can call functions. Each function, as JSON:\n");
    for (const cJSON *t = tools->child; t; t = t->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        char *line = cJSON_PrintUnformatted(f);
        if (!line) return free(s), NULL;
        size_t need = len + strlen(line) + 2;
        if (need + 512 > cap) {
            char *p = realloc(s, cap = 2 * (need + 512));
            if (!p) return free(line), free(s), NULL;
            s = p;
        }
        len += (size_t)snprintf(s + len, cap - len, "%s\n", line);
        free(line);
    }
    snprintf(s + len, cap - len,
             "Answer with one JSON object: {\"tool_calls\": [{\"name\": \"<a function's name>\", \"arguments\": {<its arguments>}}]} "
             "to call functions%s.",
             calls_only ? "" : ", or {\"response\": \"<your answer>\"} to answer without them");
    return s;
}

// The answer's schema: tool_calls of the allowed functions (one: parallel off), or a response.
static cJSON *answer_schema(const cJSON *tools, const char *only, int parallel, int calls_only) {
    cJSON *root = cJSON_CreateObject(), *any = cJSON_CreateArray();
    for (const cJSON *t = tools->child; t; t = t->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function"), *nm = cJSON_GetObjectItemCaseSensitive(f, "name"),
                    *pa = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        if (only && strcmp(nm->valuestring, only)) continue;
        cJSON *call = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray(), *name = cJSON_CreateObject();
        cJSON_AddStringToObject(call, "type", "object");
        cJSON_AddStringToObject(name, "const", nm->valuestring);
        cJSON_AddItemToObject(props, "name", name);
        cJSON *args = cJSON_IsObject(pa) ? cJSON_Duplicate(pa, 1) : cJSON_CreateObject(); // (no parameters: any object)
        if (!cJSON_IsObject(pa)) cJSON_AddStringToObject(args, "type", "object");
        cJSON_AddItemToObject(props, "arguments", args);
        cJSON_AddItemToObject(call, "properties", props);
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
        cJSON_AddItemToObject(call, "required", req);
        cJSON_AddItemToArray(any, call);
    }
    cJSON *calls = cJSON_CreateObject(), *cp = cJSON_CreateObject(), *arr = cJSON_CreateObject(), *items = cJSON_CreateObject();
    cJSON_AddItemToObject(items, "anyOf", any);
    cJSON_AddStringToObject(arr, "type", "array");
    cJSON_AddItemToObject(arr, "items", items);
    cJSON_AddNumberToObject(arr, "minItems", 1);
    if (!parallel) cJSON_AddNumberToObject(arr, "maxItems", 1);
    cJSON_AddItemToObject(cp, "tool_calls", arr);
    cJSON_AddStringToObject(calls, "type", "object");
    cJSON_AddItemToObject(calls, "properties", cp);
    cJSON_AddItemToObject(calls, "required", cJSON_CreateStringArray((const char *const[]){"tool_calls"}, 1));
    if (calls_only) {
        cJSON_Delete(root);
        return calls;
    }
    cJSON *resp = cJSON_CreateObject(), *rp = cJSON_CreateObject(), *str = cJSON_CreateObject(), *alt = cJSON_CreateArray();
    cJSON_AddStringToObject(str, "type", "string");
    cJSON_AddItemToObject(rp, "response", str);
    cJSON_AddStringToObject(resp, "type", "object");
    cJSON_AddItemToObject(resp, "properties", rp);
    cJSON_AddItemToObject(resp, "required", cJSON_CreateStringArray((const char *const[]){"response"}, 1));
    cJSON_AddItemToArray(alt, calls);
    cJSON_AddItemToArray(alt, resp);
    cJSON_AddItemToObject(root, "anyOf", alt);
    return root;
}

// an assistant turn's tool_calls as the answer's JSON object (arguments parsed where they are JSON), the
// turn's text, where it has some, as its "response" before them (Anthropic's text beside tool_use blocks)
static char *calls_text(serve_check *k, const cJSON *tc, const cJSON *content, const char *p) {
    cJSON *o = cJSON_CreateObject();
    if (cJSON_IsString(content) && content->valuestring[0]) cJSON_AddStringToObject(o, "response", content->valuestring);
    cJSON *a = cJSON_AddArrayToObject(o, "tool_calls");
    for (const cJSON *c = tc->child; c && !k->status; c = c->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function"), *nm = cJSON_GetObjectItemCaseSensitive(f, "name"),
                    *ar = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (!cJSON_IsObject(f) || !cJSON_IsString(nm) || (ar && !cJSON_IsString(ar) && !cJSON_IsObject(ar))) {
            bad(k, p, "%s: tool_calls must be [{\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}]", p);
            break;
        }
        cJSON *one = cJSON_CreateObject(), *args = cJSON_IsString(ar) ? cJSON_Parse(ar->valuestring) : ar ? cJSON_Duplicate(ar, 1) : NULL;
        cJSON_AddStringToObject(one, "name", nm->valuestring);
        cJSON_AddItemToObject(one, "arguments", args ? args : cJSON_IsString(ar) ? cJSON_CreateString(ar->valuestring) : cJSON_CreateObject());
        cJSON_AddItemToArray(a, one);
    }
    char *s = k->status ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static cJSON *text_message(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

// the tool turns' text: a tool result's line {"tool_call_id", "name", "content"} (the name from the call it answers)
static char *result_line(const cJSON *m, const cJSON *msgs) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id"), *ct = cJSON_GetObjectItemCaseSensitive(m, "content");
    const char *name = NULL;
    for (const cJSON *a = msgs->child; a && cJSON_IsString(id) && !name; a = a->next)
        for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "tool_calls") ? cJSON_GetObjectItemCaseSensitive(a, "tool_calls")->child : NULL;
             c && !name; c = c->next) {
            const cJSON *ci = cJSON_GetObjectItemCaseSensitive(c, "id"), *f = cJSON_GetObjectItemCaseSensitive(c, "function");
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
            if (cJSON_IsString(ci) && cJSON_IsString(nm) && !strcmp(ci->valuestring, id->valuestring)) name = nm->valuestring;
        }
    cJSON *o = cJSON_CreateObject();
    if (cJSON_IsString(id)) cJSON_AddStringToObject(o, "tool_call_id", id->valuestring);
    if (name) cJSON_AddStringToObject(o, "name", name);
    if (cJSON_IsString(ct)) cJSON_AddStringToObject(o, "content", ct->valuestring);
    else if (ct) cJSON_AddItemToObject(o, "content", cJSON_Duplicate(ct, 1));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static int other_constraint(serve_check *k, const cJSON *o) {
    const char *other[] = {"response_format", "json_schema", "grammar"};
    for (int j = 0; j < 3; j++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, other[j]);
        if (f && !cJSON_IsNull(f)) return bad(k, other[j], "give 'tools' or '%s', not both", other[j]);
    }
    return 0;
}

static cJSON *nomem(serve_check *k) {
    k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
    return NULL;
}

// The template's own format: {"messages", "tools", "prefill"} (serve_tools_tokenize); a
// required call held to the format by the prefill and a grammar, an "auto" answer free and read back.
static cJSON *native(serve_check *k, infer_model *m, const cJSON *o, serve_gen *g, int fmt, int mode, const char *only, int par) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
    if (mode && other_constraint(k, o)) return NULL;
    char *prefill = NULL;
    if (mode == 2) {
        char *schema = serve_tools_native_schema(fmt, tools, only, par, &prefill);
        infer_status st = schema ? infer_grammar_from_json_schema(m, schema, &g->r.grammar) : INFER_ERR_NOMEM;
        free(schema);
        if (st == INFER_ERR_NOMEM) return free(prefill), nomem(k);
        if (st) return free(prefill), bad(k, "tools", "a tool's parameters: %s", infer_last_error()), NULL;
    }
    cJSON *out = cJSON_CreateObject(), *msgs = serve_tools_native_messages(k, fmt, cJSON_GetObjectItemCaseSensitive(o, "messages"));
    if (!msgs) return free(prefill), cJSON_Delete(out), k->status ? NULL : nomem(k);
    cJSON_AddItemToObject(out, "messages", msgs);
    if (mode) cJSON_AddItemToObject(out, "tools", serve_tools_native_tools(tools));
    cJSON_AddStringToObject(out, "prefill", prefill ? prefill : "");
    if (mode) {
        if (!(g->tools = calloc(1, sizeof *g->tools))) return free(prefill), cJSON_Delete(out), nomem(k);
        g->tools->calls_only = mode == 2, g->tools->fmt = fmt, g->tools->prefill = prefill, prefill = NULL;
        g->tools->tools = cJSON_Duplicate(tools, 1);
    }
    free(prefill);
    return out;
}

cJSON *serve_tools_parse(serve_check *k, infer_model *m, const cJSON *o, serve_gen *g) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools"), *choice = cJSON_GetObjectItemCaseSensitive(o, "tool_choice"),
                *par = cJSON_GetObjectItemCaseSensitive(o, "parallel_tool_calls"), *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (tools && (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > TOOLS_MAX))
        return bad(k, "tools", "'tools' must be an array of at most %d {\"type\": \"function\", \"function\": {...}}", TOOLS_MAX), NULL;
    int i = 0;
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next, i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type"), *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"), *pa = cJSON_GetObjectItemCaseSensitive(f, "parameters"),
                    *de = cJSON_GetObjectItemCaseSensitive(f, "description");
        char p[32];
        snprintf(p, sizeof p, "tools[%d]", i);
        if (!cJSON_IsObject(t) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsObject(f))
            return bad(k, p, "%s must be {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}", p), NULL;
        if (!cJSON_IsString(nm) || !name_ok(nm->valuestring))
            return bad(k, p, "%s: the function's name must be 1 to 64 letters, digits, '_' or '-'", p), NULL;
        if (pa && !cJSON_IsNull(pa) && !cJSON_IsObject(pa)) return bad(k, p, "%s: 'parameters' must be a JSON Schema object", p), NULL;
        if (de && !cJSON_IsNull(de) && !cJSON_IsString(de)) return bad(k, p, "%s: 'description' must be a string", p), NULL;
        for (const cJSON *u = tools->child; u != t; u = u->next)
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "function"), "name")->valuestring, nm->valuestring))
                return bad(k, p, "%s: two tools are named '%.64s'", p, nm->valuestring), NULL;
    }
    const char *only = NULL;
    int mode = tools && tools->child ? 1 : 0; // 0 none, 1 auto, 2 required
    if (choice && !cJSON_IsNull(choice)) {
        if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) mode = 0;
        else if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "auto")) mode = mode ? 1 : 0;
        else if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "required")) mode = 2;
        else if (cJSON_IsObject(choice)) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(choice, "function"), *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
            if (!cJSON_IsString(nm)) return bad(k, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}"), NULL;
            only = nm->valuestring, mode = 2;
            int found = 0;
            for (const cJSON *t = tools ? tools->child : NULL; t && !found; t = t->next)
                found = !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name")->valuestring, only);
            if (!found) return bad(k, "tool_choice", "'tool_choice' names '%.64s', which is none of the tools", only), NULL;
        } else {
            return bad(k, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}"), NULL;
        }
        if (mode == 2 && !(tools && tools->child)) return bad(k, "tool_choice", "'tool_choice' asks for a tool call, and there are no tools"), NULL;
    }
    if (par && !cJSON_IsNull(par) && !cJSON_IsBool(par)) return bad(k, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean"), NULL;
    // the tool turns: anything to convert?
    int turns = 0;
    for (const cJSON *x = cJSON_IsArray(msgs) ? msgs->child : NULL; x; x = x->next) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(x, "role"), *tc = cJSON_GetObjectItemCaseSensitive(x, "tool_calls");
        turns |= (cJSON_IsString(r) && !strcmp(r->valuestring, "tool")) || (tc && !cJSON_IsNull(tc));
    }
    if (!mode && !turns) return NULL;
    int fmt = serve_tools_format(infer_chat_template(m));
    if (fmt != TOOLS_GENERIC) return native(k, m, o, g, fmt, mode, only, cJSON_IsTrue(par));
    if (mode) {
        if (other_constraint(k, o)) return NULL;
        cJSON *schema = answer_schema(tools, only, cJSON_IsTrue(par), mode == 2); // (parallel calls: asked for, as llama-server)
        char *text = schema ? cJSON_PrintUnformatted(schema) : NULL;
        cJSON_Delete(schema);
        infer_status st = text ? infer_grammar_from_json_schema(m, text, &g->r.grammar) : INFER_ERR_NOMEM;
        free(text);
        if (st == INFER_ERR_NOMEM) return k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"), NULL;
        if (st) return bad(k, "tools", "a tool's parameters: %s", infer_last_error()), NULL;
        if (!(g->tools = calloc(1, sizeof *g->tools))) return k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"), NULL;
        g->tools->calls_only = mode == 2;
    }
    // the messages the template gets: the functions in the system turn, the tool turns as text
    cJSON *out = cJSON_CreateArray();
    char *sys = mode ? tools_prompt(tools, mode == 2) : NULL;
    if (!out || (mode && !sys)) return cJSON_Delete(out), free(sys), k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"), NULL;
    const cJSON *first = cJSON_IsArray(msgs) ? msgs->child : NULL, *r0 = cJSON_GetObjectItemCaseSensitive(first, "role");
    int sys_first = cJSON_IsString(r0) && (!strcmp(r0->valuestring, "system") || !strcmp(r0->valuestring, "developer"));
    if (sys && !sys_first) cJSON_AddItemToArray(out, text_message("system", sys));
    i = 0;
    char *results = NULL; // consecutive tool results, one user turn
    for (const cJSON *x = first; x && !k->status; x = x->next, i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(x, "role"), *tc = cJSON_GetObjectItemCaseSensitive(x, "tool_calls"),
                    *ct = cJSON_GetObjectItemCaseSensitive(x, "content");
        char p[32];
        snprintf(p, sizeof p, "messages[%d]", i);
        int tool = cJSON_IsString(r) && !strcmp(r->valuestring, "tool");
        if (!tool && results) cJSON_AddItemToArray(out, text_message("user", results)), free(results), results = NULL;
        if (tool) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "tool_call_id");
            if (!cJSON_IsString(id)) { bad(k, p, "%s: a tool message needs a string 'tool_call_id'", p); break; }
            char *line = result_line(x, msgs);
            size_t have = results ? strlen(results) : 0, add = line ? strlen(line) : 0;
            char *q = line ? realloc(results, have + add + 32) : NULL;
            if (!q) { free(line), k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"); break; }
            if (!have) strcpy(q, "Function results:");
            snprintf(q + strlen(q), add + 2, "\n%s", line);
            results = q;
            free(line);
        } else if (tc && !cJSON_IsNull(tc)) {
            if (!cJSON_IsString(r) || strcmp(r->valuestring, "assistant") || !cJSON_IsArray(tc)) {
                bad(k, p, "%s: only an assistant message carries 'tool_calls', an array", p);
                break;
            }
            char *t = calls_text(k, tc, ct, p);
            if (t) cJSON_AddItemToArray(out, text_message("assistant", t));
            free(t);
        } else if (sys && i == 0 && sys_first && cJSON_IsString(ct)) {
            size_t n = strlen(ct->valuestring) + strlen(sys) + 3;
            char *both = malloc(n);
            if (!both) { k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"); break; }
            snprintf(both, n, "%s\n\n%s", ct->valuestring, sys);
            cJSON_AddItemToArray(out, text_message("system", both));
            free(both);
        } else {
            cJSON_AddItemToArray(out, cJSON_Duplicate(x, 1));
        }
    }
    if (results && !k->status) cJSON_AddItemToArray(out, text_message("user", results));
    free(results), free(sys);
    if (k->status) return cJSON_Delete(out), NULL;
    return out;
}

void serve_tools_free(serve_tools *t) {
    if (t && t->answered) {
        __atomic_add_fetch(&g_answers, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_call_answers, t->n_calls > 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_calls, t->n_calls, __ATOMIC_RELAXED);
    }
    if (t) free(t->prefill), cJSON_Delete(t->tools);
    free(t);
}

static int answer(const serve_tools *t, const char *text, size_t n, cJSON **content, cJSON **calls);

int serve_tools_answer(serve_tools *t, const char *text, size_t n, cJSON **content, cJSON **calls) {
    int r = answer(t, text, n, content, calls);
    t->answered = 1, t->n_calls = r ? cJSON_GetArraySize(*calls) : 0;
    return r;
}

static int answer(const serve_tools *t, const char *text, size_t n, cJSON **content, cJSON **calls) {
    *content = NULL, *calls = NULL;
    if (t->fmt != TOOLS_GENERIC) { // (the prefill is the answer's beginning)
        size_t np = t->prefill ? strlen(t->prefill) : 0; // (none under "auto")
        char *all = malloc(np + n + 1);
        if (!all) return 0;
        if (np) memcpy(all, t->prefill, np);
        memcpy(all + np, text, n), all[np + n] = 0;
        int r = serve_tools_native_parse(t->fmt, t->tools, all, np + n, content, calls);
        free(all);
        return r;
    }
    cJSON *o = cJSON_ParseWithLength(text, n);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(o, "tool_calls"), *resp = cJSON_GetObjectItemCaseSensitive(o, "response");
    if (cJSON_IsArray(tc) && tc->child) {
        *calls = cJSON_CreateArray();
        for (const cJSON *c = tc->child; c; c = c->next) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "name"), *ar = cJSON_GetObjectItemCaseSensitive(c, "arguments");
            char *args = ar ? cJSON_PrintUnformatted(ar) : NULL;
            cJSON_AddItemToArray(*calls, serve_tool_call(cJSON_IsString(nm) ? nm->valuestring : "", args ? args : "{}"));
            free(args);
        }
    } else if (cJSON_IsString(resp)) {
        *content = cJSON_CreateString(resp->valuestring);
    }
    cJSON_Delete(o);
    return *calls != NULL;
}
