// infer serve's Responses API (OpenAI's POST /v1/responses): the body's
// instructions, input items and flat function tools turned into a chat
// completions body -- messages, function_call items as an assistant's
// tool_calls, function_call_output items as tool messages -- which
// serve_parse_generate parses and checks as /v1/chat/completions' (one parser,
// one set of rules); the answer written in the Responses shape: a response
// object whose output holds a message and/or function_call items, or the
// server-sent events response.created ... response.completed. Nothing is
// stored: previous_response_id is a 400. No sockets: cmd_serve.c routes the
// request and drives the stream.
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct serve_resp {
    char id[40], msg_id[40];
    const char *model;   // (the server's: it outlives the answer)
    long created;
    cJSON *echo;         // the request's fields a response repeats (instructions, tools, tool_choice, ...)
    serve_tools *tools;  // function tools offered: the answer is parsed once whole (serve_tools.c)
    int seq;             // the next event's sequence_number
    char *text;          // the text so far (streamed)
    size_t n;
};

// ---------------------------------------------------------------------------
// the request, as a chat completions body

static int oom(serve_check *k) {
    if (!k->status) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
    return -1;
}

// Text parts joined (malloc'd): [{"type": "input_text" | "output_text", "text"}]; what names the array.
static char *parts_text(serve_check *k, const cJSON *c, const char *what) {
    size_t len = 0, at = 0;
    int j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type"), *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        char q[64];
        snprintf(q, sizeof q, "%s[%d]", what, j++);
        if (!cJSON_IsObject(p) || !cJSON_IsString(ty)) return serve_bad(k, q, "%s must be an object with a string 'type'", q), NULL;
        if (strcmp(ty->valuestring, "input_text") && strcmp(ty->valuestring, "output_text"))
            return serve_bad(k, q, "%s: type '%.32s' is unsupported by this server (input_text and output_text only)", q, ty->valuestring), NULL;
        if (!cJSON_IsString(tx)) return serve_bad(k, q, "%s: 'text' must be a string", q), NULL;
        len += strlen(tx->valuestring);
    }
    char *s = malloc(len + 1);
    if (!s) return oom(k), NULL;
    cJSON_ArrayForEach(p, c) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t l = strlen(tx);
        memcpy(s + at, tx, l), at += l;
    }
    s[at] = 0;
    return s;
}

static cJSON *message(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

// One input item appended to msgs as chat messages: a message, a function_call
// (an assistant turn's tool call; consecutive calls share the turn) or a
// function_call_output (a tool message).
static void input_item(serve_check *k, const cJSON *x, int i, cJSON *msgs) {
    char p[24], q[64];
    snprintf(p, sizeof p, "input[%d]", i);
    if (!cJSON_IsObject(x)) { serve_bad(k, p, "%s must be an object", p); return; }
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(x, "type"), *role = cJSON_GetObjectItemCaseSensitive(x, "role");
    if (ty && !cJSON_IsString(ty)) { serve_bad(k, p, "%s: 'type' must be a string", p); return; }
    const char *type = ty ? ty->valuestring : "message";
    if (!strcmp(type, "message")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(x, "content");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant") &&
                                      strcmp(role->valuestring, "system") && strcmp(role->valuestring, "developer"))) {
            serve_bad(k, p, "%s: a message's 'role' must be user, assistant, system or developer", p);
            return;
        }
        snprintf(q, sizeof q, "%s.content", p);
        if (cJSON_IsString(c)) { cJSON_AddItemToArray(msgs, message(role->valuestring, c->valuestring)); return; }
        if (!cJSON_IsArray(c)) { serve_bad(k, q, "%s must be a string or an array of input_text parts", q); return; }
        char *s = parts_text(k, c, q);
        if (s) cJSON_AddItemToArray(msgs, message(role->valuestring, s));
        free(s);
    } else if (!strcmp(type, "function_call")) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "call_id"), *nm = cJSON_GetObjectItemCaseSensitive(x, "name"),
                    *ar = cJSON_GetObjectItemCaseSensitive(x, "arguments");
        if (!cJSON_IsString(id) || !cJSON_IsString(nm) || !cJSON_IsString(ar)) {
            serve_bad(k, p, "%s: a function_call needs string 'call_id', 'name' and 'arguments'", p);
            return;
        }
        cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1), *tc = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
        if (!tc) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddNullToObject(m, "content");
            tc = cJSON_AddArrayToObject(m, "tool_calls");
            cJSON_AddItemToArray(msgs, m);
        }
        cJSON *call = cJSON_CreateObject(), *f;
        cJSON_AddStringToObject(call, "id", id->valuestring);
        cJSON_AddStringToObject(call, "type", "function");
        f = cJSON_AddObjectToObject(call, "function");
        cJSON_AddStringToObject(f, "name", nm->valuestring);
        cJSON_AddStringToObject(f, "arguments", ar->valuestring);
        cJSON_AddItemToArray(tc, call);
    } else if (!strcmp(type, "function_call_output")) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "call_id"), *out = cJSON_GetObjectItemCaseSensitive(x, "output");
        snprintf(q, sizeof q, "%s.output", p);
        if (!cJSON_IsString(id)) { serve_bad(k, p, "%s: a function_call_output needs a string 'call_id'", p); return; }
        if (!cJSON_IsString(out) && !cJSON_IsArray(out)) { serve_bad(k, q, "%s must be a string or an array of input_text parts", q); return; }
        char *s = cJSON_IsString(out) ? strdup(out->valuestring) : parts_text(k, out, q);
        if (!s) { oom(k); return; }
        cJSON *m = message("tool", s);
        cJSON_AddStringToObject(m, "tool_call_id", id->valuestring);
        cJSON_AddItemToArray(msgs, m);
        free(s);
    } else {
        serve_bad(k, p, "%s: item type '%.40s' is unsupported by this server (message, function_call and function_call_output only)", p, type);
    }
}

// tools: Responses' flat [{"type": "function", "name", "description", "parameters", "strict"}] as chat's nested form
static cJSON *chat_tools(serve_check *k, const cJSON *tools) {
    if (!cJSON_IsArray(tools)) return serve_bad(k, "tools", "'tools' must be an array of {\"type\": \"function\", \"name\", \"parameters\"}"), NULL;
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    for (const cJSON *t = tools->child; t && !k->status; t = t->next, i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
        char p[32];
        snprintf(p, sizeof p, "tools[%d]", i);
        if (!cJSON_IsObject(t) || !cJSON_IsString(ty)) { serve_bad(k, p, "%s must be an object with a string 'type'", p); break; }
        if (strcmp(ty->valuestring, "function")) {
            serve_bad(k, p, "%s: tool type '%.40s' is unsupported by this server (function tools only)", p, ty->valuestring);
            break;
        }
        cJSON *one = cJSON_CreateObject(), *f = cJSON_CreateObject();
        static const char *const keys[] = {"name", "description", "parameters", "strict"};
        for (int j = 0; j < 4; j++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, keys[j]);
            if (v) cJSON_AddItemToObject(f, keys[j], cJSON_Duplicate(v, 1));
        }
        cJSON_AddStringToObject(one, "type", "function");
        cJSON_AddItemToObject(one, "function", f);
        cJSON_AddItemToArray(out, one);
    }
    return out;
}

// The chat completions body of a Responses body o (NULL with k set).
static cJSON *chat_body(serve_check *k, const cJSON *o) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input"), *ins = cJSON_GetObjectItemCaseSensitive(o, "instructions"),
                *tools = cJSON_GetObjectItemCaseSensitive(o, "tools"), *tc = cJSON_GetObjectItemCaseSensitive(o, "tool_choice"),
                *txt = cJSON_GetObjectItemCaseSensitive(o, "text"), *f;
    static const char *const unsupported[] = {"previous_response_id", "conversation", "prompt"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if ((f = cJSON_GetObjectItemCaseSensitive(o, unsupported[i])) && !cJSON_IsNull(f))
            return serve_bad(k, unsupported[i], "'%s' is unsupported by this server: it stores no responses (send the whole conversation in 'input')",
                             unsupported[i]), NULL;
    if ((f = cJSON_GetObjectItemCaseSensitive(o, "background")) && cJSON_IsTrue(f))
        return serve_bad(k, "background", "'background' is unsupported by this server"), NULL;
    if (ins && !cJSON_IsNull(ins) && !cJSON_IsString(ins)) return serve_bad(k, "instructions", "'instructions' must be a string"), NULL;
    if (!in) return serve_bad(k, "input", "'input' is required"), NULL;
    if (!cJSON_IsString(in) && (!cJSON_IsArray(in) || !in->child))
        return serve_bad(k, "input", "'input' must be a string or a non-empty array of input items"), NULL;
    double max_out = 0;
    serve_num_field(k, o, "max_output_tokens", 1, 1e9, 1, &max_out);
    if (k->status) return NULL;

    cJSON *c = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(c, "messages");
    if (cJSON_IsString(ins)) cJSON_AddItemToArray(msgs, message("system", ins->valuestring));
    if (cJSON_IsString(in)) cJSON_AddItemToArray(msgs, message("user", in->valuestring));
    int i = 0;
    for (const cJSON *x = cJSON_IsArray(in) ? in->child : NULL; x && !k->status; x = x->next, i++) input_item(k, x, i, msgs);
    if (max_out > 0) cJSON_AddNumberToObject(c, "max_tokens", max_out);
    static const char *const same[] = {"temperature", "top_p", "stream", "parallel_tool_calls", "seed"};
    for (size_t j = 0; j < sizeof same / sizeof *same; j++)
        if ((f = cJSON_GetObjectItemCaseSensitive(o, same[j]))) cJSON_AddItemToObject(c, same[j], cJSON_Duplicate(f, 1));
    if (tools && !cJSON_IsNull(tools) && !k->status) cJSON_AddItemToObject(c, "tools", chat_tools(k, tools));
    if (tc && !cJSON_IsNull(tc) && !k->status) { // "none" | "auto" | "required" | {"type": "function", "name"}
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(tc, "type"), *nm = cJSON_GetObjectItemCaseSensitive(tc, "name");
        if (cJSON_IsString(tc)) cJSON_AddItemToObject(c, "tool_choice", cJSON_Duplicate(tc, 1));
        else if (cJSON_IsObject(tc) && cJSON_IsString(ty) && !strcmp(ty->valuestring, "function") && cJSON_IsString(nm)) {
            cJSON *w = cJSON_AddObjectToObject(c, "tool_choice");
            cJSON_AddStringToObject(w, "type", "function");
            cJSON_AddStringToObject(cJSON_AddObjectToObject(w, "function"), "name", nm->valuestring);
        } else serve_bad(k, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\"}");
    }
    if (txt && !cJSON_IsNull(txt) && !k->status) { // text.format: text, json_object, or json_schema {name, schema, strict}
        const cJSON *fm = cJSON_GetObjectItemCaseSensitive(txt, "format"), *ft = cJSON_GetObjectItemCaseSensitive(fm, "type");
        if (!cJSON_IsObject(txt) || (fm && !cJSON_IsString(ft)))
            serve_bad(k, "text", "'text' must be {\"format\": {\"type\": \"text\" | \"json_object\" | \"json_schema\"}}");
        else if (ft && !strcmp(ft->valuestring, "json_schema")) {
            cJSON *rf = cJSON_AddObjectToObject(c, "response_format"), *js = cJSON_Duplicate(fm, 1);
            cJSON_DeleteItemFromObjectCaseSensitive(js, "type");
            cJSON_AddStringToObject(rf, "type", "json_schema");
            cJSON_AddItemToObject(rf, "json_schema", js);
        } else if (ft) {
            cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "response_format"), "type", ft->valuestring);
        }
    }
    if (k->status) return cJSON_Delete(c), NULL;
    return c;
}

// chat's names in errors -> the Responses body's
static void rename_param(serve_check *k) {
    static const char *const map[][2] = {{"messages", "input"}, {"max_tokens", "max_output_tokens"}, {"response_format", "text"}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strncmp(k->param, map[i][0], strlen(map[i][0]))) snprintf(k->param, sizeof k->param, "%s", map[i][1]);
}

// the fields a response repeats from its request
static cJSON *echo_fields(const cJSON *o) {
    cJSON *e = cJSON_CreateObject(), *f;
    static const char *const keys[] = {"instructions", "max_output_tokens", "temperature", "top_p"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        f = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        cJSON_AddItemToObject(e, keys[i], f ? cJSON_Duplicate(f, 1) : cJSON_CreateNull());
    }
    f = cJSON_GetObjectItemCaseSensitive(o, "tools");
    cJSON_AddItemToObject(e, "tools", cJSON_IsArray(f) ? cJSON_Duplicate(f, 1) : cJSON_CreateArray());
    f = cJSON_GetObjectItemCaseSensitive(o, "tool_choice");
    cJSON_AddItemToObject(e, "tool_choice", f && !cJSON_IsNull(f) ? cJSON_Duplicate(f, 1) : cJSON_CreateString("auto"));
    // (one call an answer unless asked for more: serve_tools.c)
    cJSON_AddBoolToObject(e, "parallel_tool_calls", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "parallel_tool_calls")));
    f = cJSON_GetObjectItemCaseSensitive(o, "text");
    if (cJSON_IsObject(f) && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(f, "format"))) cJSON_AddItemToObject(e, "text", cJSON_Duplicate(f, 1));
    else cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(e, "text"), "format"), "type", "text");
    f = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    cJSON_AddItemToObject(e, "metadata", cJSON_IsObject(f) ? cJSON_Duplicate(f, 1) : cJSON_CreateObject());
    cJSON_AddBoolToObject(e, "store", 0); // (nothing is stored)
    cJSON_AddStringToObject(e, "truncation", "disabled");
    cJSON_AddNullToObject(e, "previous_response_id");
    return e;
}

serve_resp *serve_resp_parse(serve_check *k, infer_model *m, int n_ctx, const char *model, const char *body, size_t len, uint64_t seed,
                             serve_gen *g) {
    memset(g, 0, sizeof *g);
    cJSON *o = serve_parse_body(k, body, len), *c = o ? chat_body(k, o) : NULL;
    char *txt = c ? cJSON_PrintUnformatted(c) : NULL;
    cJSON_Delete(c);
    if (c && !txt) oom(k);
    if (txt) {
        serve_parse_generate(k, m, n_ctx, txt, strlen(txt), 1, seed, g);
        rename_param(k);
    }
    free(txt);
    serve_resp *r = k->status ? NULL : calloc(1, sizeof *r);
    if (!k->status && (!r || !(r->echo = echo_fields(o)))) free(r), r = NULL, oom(k);
    cJSON_Delete(o);
    if (!r) return NULL;
    r->model = model, r->created = (long)time(NULL);
    r->tools = g->tools, g->tools = NULL;
    snprintf(r->id, sizeof r->id, "resp_%016llx", (unsigned long long)seed);
    snprintf(r->msg_id, sizeof r->msg_id, "msg_%016llx", (unsigned long long)seed);
    return r;
}

void serve_resp_free(serve_resp *r) {
    if (!r) return;
    cJSON_Delete(r->echo);
    serve_tools_free(r->tools);
    free(r->text), free(r);
}

// ---------------------------------------------------------------------------
// the answer

// a message item: its text (NULL: none yet, in progress); cut: by max_output_tokens
static cJSON *message_item(serve_resp *r, const char *text, size_t n, int cut) {
    cJSON *it = cJSON_CreateObject(), *c;
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "id", r->msg_id);
    cJSON_AddStringToObject(it, "status", !text ? "in_progress" : cut ? "incomplete" : "completed");
    cJSON_AddStringToObject(it, "role", "assistant");
    c = cJSON_AddArrayToObject(it, "content");
    if (text) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "output_text");
        serve_add_text(p, "text", text, n);
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddItemToArray(c, p);
    }
    return it;
}

// The output items of a finished answer (cut: by max_output_tokens): its
// function calls (tools offered, and the model called them), or its message.
static cJSON *output_items(serve_resp *r, const char *text, size_t n, int cut) {
    cJSON *out = cJSON_CreateArray(), *content = NULL, *calls = NULL;
    if (r->tools && serve_tools_answer(r->tools, text, n, &content, &calls)) {
        for (const cJSON *c = calls->child; c; c = c->next) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id"), *f = cJSON_GetObjectItemCaseSensitive(c, "function");
            cJSON *it = cJSON_CreateObject();
            char fc[48];
            snprintf(fc, sizeof fc, "fc_%.40s", cJSON_IsString(id) && !strncmp(id->valuestring, "call_", 5) ? id->valuestring + 5 : "0");
            cJSON_AddStringToObject(it, "type", "function_call");
            cJSON_AddStringToObject(it, "id", fc);
            cJSON_AddItemToObject(it, "call_id", cJSON_Duplicate(id, 1));
            cJSON_AddItemToObject(it, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "name"), 1));
            cJSON_AddItemToObject(it, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "arguments"), 1));
            cJSON_AddStringToObject(it, "status", "completed");
            cJSON_AddItemToArray(out, it);
        }
    } else if (cJSON_IsString(content)) { // ({"response": ...}: its text)
        cJSON_AddItemToArray(out, message_item(r, content->valuestring, strlen(content->valuestring), cut));
    } else {
        cJSON_AddItemToArray(out, message_item(r, text ? text : "", text ? n : 0, cut));
    }
    cJSON_Delete(content), cJSON_Delete(calls);
    return out;
}

// The response object: status "in_progress" (st NULL), "completed",
// "incomplete" (cut by max_output_tokens) or "failed"; output: taken (NULL: []).
static cJSON *response_json(serve_resp *r, const serve_state *st, cJSON *output) {
    cJSON *j = cJSON_CreateObject();
    const char *status = !st ? "in_progress" : !st->finish ? "failed" : !strcmp(st->finish, "length") ? "incomplete" : "completed";
    cJSON_AddStringToObject(j, "id", r->id);
    cJSON_AddStringToObject(j, "object", "response");
    cJSON_AddNumberToObject(j, "created_at", (double)r->created);
    cJSON_AddStringToObject(j, "status", status);
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON_AddItemToObject(j, "output", output ? output : cJSON_CreateArray());
    if (st && !st->finish) {
        cJSON *e = cJSON_AddObjectToObject(j, "error");
        char msg[300];
        snprintf(msg, sizeof msg, "generation failed: %s", st->error[0] ? st->error : "cancelled");
        cJSON_AddStringToObject(e, "code", "server_error");
        cJSON_AddStringToObject(e, "message", st->stopping ? "the server is stopping; try again shortly" : msg);
    } else {
        cJSON_AddNullToObject(j, "error");
    }
    if (!strcmp(status, "incomplete")) cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(j, "incomplete_details");
    for (const cJSON *f = r->echo->child; f; f = f->next) cJSON_AddItemToObject(j, f->string, cJSON_Duplicate(f, 1));
    if (st && st->finish) {
        cJSON *u = cJSON_AddObjectToObject(j, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", st->n_prompt);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", st->n_cached);
        cJSON_AddNumberToObject(u, "output_tokens", st->n_gen);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
        cJSON_AddNumberToObject(u, "total_tokens", st->n_prompt + st->n_gen);
    } else {
        cJSON_AddNullToObject(j, "usage");
    }
    return j;
}

static char *print(cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

char *serve_resp_message(serve_resp *r, const serve_state *st, const char *text, size_t n, int *status) {
    if (!st->finish) {
        cJSON *j = cJSON_CreateObject();
        serve_failed_error(j, st, status);
        return print(j);
    }
    *status = 200;
    return print(response_json(r, st, output_items(r, text, n, !strcmp(st->finish, "length"))));
}

// ---------------------------------------------------------------------------
// the events

// "event: TYPE\ndata: JSON\n\n" appended to *out (of *len bytes), with the
// next sequence_number; j ({"type", ...}) is freed
static void event(serve_resp *r, char **out, size_t *len, cJSON *j) {
    cJSON_AddNumberToObject(j, "sequence_number", r->seq++);
    char *data = cJSON_PrintUnformatted(j), *type = data ? strdup(cJSON_GetObjectItemCaseSensitive(j, "type")->valuestring) : NULL;
    cJSON_Delete(j);
    size_t need = (type ? strlen(type) : 0) + (data ? strlen(data) : 0) + 18;
    char *p = data && type ? realloc(*out, *len + need + 1) : NULL;
    if (p) *out = p, *len += (size_t)snprintf(p + *len, need + 1, "event: %s\ndata: %s\n\n", type, data);
    free(data), free(type);
}

static cJSON *typed(const char *type) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", type);
    return j;
}

// {"type", "output_index", "item": item}
static cJSON *item_event(const char *type, int index, cJSON *item) {
    cJSON *j = typed(type);
    cJSON_AddNumberToObject(j, "output_index", index);
    cJSON_AddItemToObject(j, "item", item);
    return j;
}

// {"type", "item_id", "output_index", "content_index": 0}, and the part (a copy) when given
static cJSON *part_event(const char *type, const char *item_id, int index, const cJSON *part) {
    cJSON *j = typed(type);
    cJSON_AddStringToObject(j, "item_id", item_id);
    cJSON_AddNumberToObject(j, "output_index", index);
    cJSON_AddNumberToObject(j, "content_index", 0);
    if (part) cJSON_AddItemToObject(j, "part", cJSON_Duplicate(part, 1));
    return j;
}

// a message's item.added and content_part.added (its text to come)
static void message_open(serve_resp *r, char **out, size_t *len, int index) {
    event(r, out, len, item_event("response.output_item.added", index, message_item(r, NULL, 0, 0)));
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", "");
    cJSON_AddArrayToObject(p, "annotations");
    event(r, out, len, part_event("response.content_part.added", r->msg_id, index, p));
    cJSON_Delete(p);
}

static cJSON *text_delta(serve_resp *r, int index, const char *text, size_t n) {
    cJSON *j = part_event("response.output_text.delta", r->msg_id, index, NULL);
    serve_add_text(j, "delta", text, n);
    cJSON_AddArrayToObject(j, "logprobs");
    return j;
}

char *serve_resp_start(serve_resp *r) {
    char *out = NULL;
    size_t len = 0;
    cJSON *j = typed("response.created");
    cJSON_AddItemToObject(j, "response", response_json(r, NULL, NULL));
    event(r, &out, &len, j);
    j = typed("response.in_progress");
    cJSON_AddItemToObject(j, "response", response_json(r, NULL, NULL));
    event(r, &out, &len, j);
    if (!r->tools) message_open(r, &out, &len, 0); // (with tools, the items are known once the answer is whole)
    return out;
}

char *serve_resp_delta(serve_resp *r, const char *text, size_t n) {
    char *p = realloc(r->text, r->n + n + 1);
    if (!p) return NULL;
    memcpy(p + r->n, text, n), r->text = p, r->n += n, p[r->n] = 0;
    if (r->tools) return NULL; // (JSON to parse once whole)
    char *out = NULL;
    size_t len = 0;
    event(r, &out, &len, text_delta(r, 0, text, n));
    return out;
}

char *serve_resp_end(serve_resp *r, const serve_state *st) {
    char *out = NULL;
    size_t len = 0;
    if (!st->finish) { // failed or cancelled: response.failed ends the stream
        cJSON *j = typed("response.failed");
        cJSON_AddItemToObject(j, "response", response_json(r, st, NULL));
        event(r, &out, &len, j);
        return out;
    }
    cJSON *items = output_items(r, r->text, r->n, !strcmp(st->finish, "length"));
    int i = 0;
    for (cJSON *it = items->child; it; it = it->next, i++) {
        const char *type = cJSON_GetObjectItemCaseSensitive(it, "type")->valuestring;
        if (!strcmp(type, "function_call")) { // added with empty arguments, the arguments in one delta
            const char *id = cJSON_GetObjectItemCaseSensitive(it, "id")->valuestring, *args = cJSON_GetObjectItemCaseSensitive(it, "arguments")->valuestring;
            cJSON *a = cJSON_Duplicate(it, 1), *j;
            cJSON_ReplaceItemInObjectCaseSensitive(a, "arguments", cJSON_CreateString(""));
            cJSON_ReplaceItemInObjectCaseSensitive(a, "status", cJSON_CreateString("in_progress"));
            event(r, &out, &len, item_event("response.output_item.added", i, a));
            j = typed("response.function_call_arguments.delta");
            cJSON_AddStringToObject(j, "item_id", id);
            cJSON_AddNumberToObject(j, "output_index", i);
            cJSON_AddStringToObject(j, "delta", args);
            event(r, &out, &len, j);
            j = typed("response.function_call_arguments.done");
            cJSON_AddStringToObject(j, "item_id", id);
            cJSON_AddNumberToObject(j, "output_index", i);
            cJSON_AddItemToObject(j, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "name"), 1));
            cJSON_AddStringToObject(j, "arguments", args);
            event(r, &out, &len, j);
        } else {
            const cJSON *part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "content"), 0);
            const char *text = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
            if (r->tools) { // (not streamed yet: the text in one delta)
                message_open(r, &out, &len, i);
                event(r, &out, &len, text_delta(r, i, text, strlen(text)));
            }
            cJSON *j = part_event("response.output_text.done", r->msg_id, i, NULL);
            cJSON_AddStringToObject(j, "text", text);
            cJSON_AddArrayToObject(j, "logprobs");
            event(r, &out, &len, j);
            event(r, &out, &len, part_event("response.content_part.done", r->msg_id, i, part));
        }
        event(r, &out, &len, item_event("response.output_item.done", i, cJSON_Duplicate(it, 1)));
    }
    // (cut by max_output_tokens: response.incomplete, as OpenAI ends such a stream)
    cJSON *j = typed(strcmp(st->finish, "length") ? "response.completed" : "response.incomplete");
    cJSON_AddItemToObject(j, "response", response_json(r, st, items));
    event(r, &out, &len, j);
    return out;
}
