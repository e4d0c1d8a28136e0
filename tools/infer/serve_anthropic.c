// infer serve's Anthropic Messages API: a body of POST /v1/messages (or
// /v1/messages/count_tokens) checked field by field and turned into the
// engine's request -- the system prompt and the messages rendered by the
// model's chat template, as /v1/chat/completions renders its own; tools,
// tool_choice, tool_use and tool_result blocks translated to OpenAI's form
// for serve_tools.c -- and the answer written in Anthropic's shape: a
// message (text, or tool_use blocks), or the server-sent events
// message_start, content_block_start, ping, content_block_delta...,
// content_block_stop, message_delta, message_stop. No sockets: cmd_serve.c
// routes the requests and drives the stream.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE // memmem
#endif
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// the request

enum { BLOCKS_MAX = 128 }; // tool_use (or tool_result) blocks a message: a result's check looks through its turn's calls

static void oom(serve_check *k) {
    if (!k->status) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
}

// a growing text: s[0, n) and its NUL, in cap bytes
typedef struct {
    char *s;
    size_t n, cap;
} buf;

// t appended (the room doubles: 60k blocks cost linear time)
static void cat(serve_check *k, buf *b, const char *t) {
    size_t l = strlen(t);
    if (b->n + l + 1 > b->cap) {
        size_t cap = 2 * (b->n + l + 1);
        char *p = realloc(b->s, cap);
        if (!p) { oom(k); return; }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, t, l + 1), b->n += l;
}

// Text blocks' text joined (malloc'd): a string, or an array of {"type":
// "text", "text"} blocks. what: the field, for the error.
static char *join_text(serve_check *k, const cJSON *c, const char *what) {
    buf out = {0};
    if (cJSON_IsString(c)) {
        cat(k, &out, c->valuestring);
        return out.s;
    }
    if (!cJSON_IsArray(c)) return serve_bad(k, what, "%s must be a string or an array of text blocks", what), NULL;
    cat(k, &out, "");
    int i = 0;
    for (const cJSON *b = c->child; b && !k->status; b = b->next, i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(b, "type"), *tx = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx))
            serve_bad(k, what, "%s: block %d must be {\"type\": \"text\", \"text\": a string} (text only)", what, i);
        else cat(k, &out, tx->valuestring);
    }
    if (k->status) free(out.s), out.s = NULL;
    return out.s;
}

// Whether the last assistant turn among OpenAI's messages v called this id
// (Anthropic's tool results answer the turn just before theirs).
static int called(const cJSON *v, const char *id) {
    const cJSON *x = v->child ? v->child->prev : NULL; // (cJSON's head keeps the tail)
    while (x && x != v->child && strcmp(cJSON_GetObjectItemCaseSensitive(x, "role")->valuestring, "assistant")) x = x->prev;
    const cJSON *tc = x ? cJSON_GetObjectItemCaseSensitive(x, "tool_calls") : NULL;
    for (const cJSON *c = tc ? tc->child : NULL; c; c = c->next)
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(c, "id")->valuestring, id)) return 1;
    return 0;
}

// One Anthropic message appended to OpenAI's messages v: its text blocks one
// text; an assistant's tool_use blocks its tool_calls ({id, type: function,
// function: {name, arguments: the input object}}); a user's tool_result
// blocks "tool" messages before its text (Anthropic puts them first). p: "messages[i]".
static void add_turn(serve_check *k, const cJSON *content, const char *role, const char *p, cJSON *v) {
    int user = !strcmp(role, "user"), results = 0, n_calls = 0, i = 0;
    char w[96];
    buf tx = {0};
    cJSON *calls = NULL;
    if (cJSON_IsString(content)) cat(k, &tx, content->valuestring);
    else if (!cJSON_IsArray(content)) serve_bad(k, p, "%s: 'content' must be a string or an array of content blocks", p);
    else cat(k, &tx, "");
    for (const cJSON *b = cJSON_IsArray(content) ? content->child : NULL; b && !k->status; b = b->next, i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(b, "type");
        snprintf(w, sizeof w, "%s.content[%d]", p, i);
        if (!cJSON_IsObject(b) || !cJSON_IsString(ty)) { serve_bad(k, w, "%s must be an object with a string 'type'", w); break; }
        const char *t = ty->valuestring;
        if (!strcmp(t, "text")) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(s)) serve_bad(k, w, "%s: a text block's 'text' must be a string", w);
            else cat(k, &tx, s->valuestring);
        } else if (!strcmp(t, "tool_use") && !user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *nm = cJSON_GetObjectItemCaseSensitive(b, "name"),
                        *in = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !*id->valuestring || !cJSON_IsString(nm) || !cJSON_IsObject(in)) {
                serve_bad(k, w, "%s: a tool_use block needs a string 'id', a string 'name' and an object 'input'", w);
                break;
            }
            if (++n_calls > BLOCKS_MAX) { serve_bad(k, w, "%s: a message holds at most %d tool_use blocks", w, BLOCKS_MAX); break; }
            cJSON *c = cJSON_CreateObject(), *f = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "id", id->valuestring);
            cJSON_AddStringToObject(c, "type", "function");
            cJSON_AddStringToObject(f, "name", nm->valuestring);
            cJSON_AddItemToObject(f, "arguments", cJSON_Duplicate(in, 1));
            cJSON_AddItemToObject(c, "function", f);
            if (!calls) calls = cJSON_CreateArray();
            cJSON_AddItemToArray(calls, c);
        } else if (!strcmp(t, "tool_result") && user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id"), *ct = cJSON_GetObjectItemCaseSensitive(b, "content"),
                        *er = cJSON_GetObjectItemCaseSensitive(b, "is_error");
            if (!cJSON_IsString(id)) { serve_bad(k, w, "%s: a tool_result block needs a string 'tool_use_id'", w); break; }
            if (results >= BLOCKS_MAX) { serve_bad(k, w, "%s: a message holds at most %d tool_result blocks", w, BLOCKS_MAX); break; }
            if (!called(v, id->valuestring)) {
                serve_bad(k, w, "%s: tool_use_id '%.64s' answers no tool_use block before it", w, id->valuestring);
                break;
            }
            if (er && !cJSON_IsNull(er) && !cJSON_IsBool(er)) { serve_bad(k, w, "%s: 'is_error' must be a boolean", w); break; }
            char cw[112], *r = NULL;
            buf res = {0};
            snprintf(cw, sizeof cw, "%s.content", w);
            if (ct && !cJSON_IsNull(ct) && !(r = join_text(k, ct, cw))) break;
            cat(k, &res, cJSON_IsTrue(er) ? "Error: " : ""); // (the model reads a failed call's result as one)
            cat(k, &res, r ? r : "");
            free(r);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "role", "tool");
            cJSON_AddStringToObject(x, "tool_call_id", id->valuestring);
            cJSON_AddStringToObject(x, "content", res.s ? res.s : "");
            cJSON_AddItemToArray(v, x);
            free(res.s), results++;
        } else if (!strcmp(t, "tool_use") || !strcmp(t, "tool_result")) {
            serve_bad(k, w, "%s: a %s block belongs in %s message", w, t, user ? "an assistant" : "a user");
        } else {
            serve_bad(k, w, "%s: type '%.32s' is unsupported by this server (text, tool_use, tool_result)", w, t);
        }
    }
    if (!k->status && (calls || !results || tx.n)) { // (a turn of tool results alone is no user turn)
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "role", role);
        cJSON_AddStringToObject(x, "content", tx.s ? tx.s : "");
        if (calls) cJSON_AddItemToObject(x, "tool_calls", calls), calls = NULL;
        cJSON_AddItemToArray(v, x);
    }
    cJSON_Delete(calls), free(tx.s);
}

// tools: [{"name", "description", "input_schema"}] as OpenAI's [{"type":
// "function", "function": {"name", "description", "parameters"}}]; serve_tools.c
// checks the names (the pattern, no two alike) and compiles the schemas.
static cJSON *tools_json(serve_check *k, const cJSON *tools) {
    if (!tools || cJSON_IsNull(tools)) return NULL;
    if (!cJSON_IsArray(tools)) return serve_bad(k, "tools", "'tools' must be an array of {\"name\", \"description\", \"input_schema\"}"), NULL;
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    for (const cJSON *t = tools->child; t && !k->status; t = t->next, i++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type"), *nm = cJSON_GetObjectItemCaseSensitive(t, "name"),
                    *de = cJSON_GetObjectItemCaseSensitive(t, "description"), *sc = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(sc, "type");
        char p[32];
        snprintf(p, sizeof p, "tools[%d]", i);
        if (!cJSON_IsObject(t)) serve_bad(k, p, "%s must be an object {\"name\", \"description\", \"input_schema\"}", p);
        else if (ty && !cJSON_IsNull(ty) && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "custom")))
            serve_bad(k, p, "%s: 'type' must be \"custom\" (this server runs no server tools)", p);
        else if (!cJSON_IsString(nm)) serve_bad(k, p, "%s: 'name' is required, a string", p);
        else if (!cJSON_IsObject(sc) || !cJSON_IsString(st) || strcmp(st->valuestring, "object"))
            serve_bad(k, p, "%s: 'input_schema' must be a JSON Schema object of type \"object\"", p);
        if (k->status) break;
        cJSON *x = cJSON_CreateObject(), *f = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "type", "function");
        cJSON_AddStringToObject(f, "name", nm->valuestring);
        if (de) cJSON_AddItemToObject(f, "description", cJSON_Duplicate(de, 1));
        cJSON_AddItemToObject(f, "parameters", cJSON_Duplicate(sc, 1));
        cJSON_AddItemToObject(x, "function", f);
        cJSON_AddItemToArray(out, x);
    }
    return out;
}

// tool_choice {"type": auto | any | tool | none, "name", "disable_parallel_tool_use"}
// as OpenAI's tool_choice and parallel_tool_calls in body b. Parallel calls
// only where disable_parallel_tool_use is false (serve_tools.c's default: one call).
static void choice_json(serve_check *k, const cJSON *c, cJSON *b) {
    if (!c || cJSON_IsNull(c)) return;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(c, "type"), *nm = cJSON_GetObjectItemCaseSensitive(c, "name"),
                *dp = cJSON_GetObjectItemCaseSensitive(c, "disable_parallel_tool_use");
    const char *t = cJSON_IsString(ty) ? ty->valuestring : "";
    if (!cJSON_IsObject(c) || (strcmp(t, "auto") && strcmp(t, "any") && strcmp(t, "tool") && strcmp(t, "none"))) {
        serve_bad(k, "tool_choice", "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
        return;
    }
    if (!strcmp(t, "tool") && !cJSON_IsString(nm)) { serve_bad(k, "tool_choice", "'tool_choice' of type \"tool\" needs the tool's 'name'"); return; }
    if (dp && !cJSON_IsNull(dp) && !cJSON_IsBool(dp)) {
        serve_bad(k, "tool_choice", "'tool_choice.disable_parallel_tool_use' must be a boolean");
        return;
    }
    if (!strcmp(t, "tool")) {
        cJSON *x = cJSON_AddObjectToObject(b, "tool_choice");
        cJSON_AddStringToObject(x, "type", "function");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(x, "function"), "name", nm->valuestring);
    } else {
        cJSON_AddStringToObject(b, "tool_choice", !strcmp(t, "any") ? "required" : t);
    }
    if (cJSON_IsFalse(dp)) cJSON_AddTrueToObject(b, "parallel_tool_calls");
}

// serve_tools.c compiles the tools' schemas as one grammar, and a fault's
// message gives its path in that: the tool at fault found (each schema
// compiled alone, on this error path only) and named in the request's terms.
static void name_bad_schema(serve_check *k, infer_model *m, const cJSON *tools) {
    if (k->status != 400 || strcmp(k->param, "tools") || !tools) return;
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "parameters"));
        infer_grammar *gr = NULL;
        infer_status st = s ? infer_grammar_from_json_schema(m, s, &gr) : INFER_ERR_NOMEM;
        infer_grammar_free(gr), free(s);
        if (st && st != INFER_ERR_NOMEM) {
            snprintf(k->param, sizeof k->param, "tools[%d]", i);
            snprintf(k->msg, sizeof k->msg, "tools[%d].input_schema: %s", i, infer_last_error());
            return;
        }
    }
}

// The request in OpenAI chat's form -- {"messages", "tools", "tool_choice",
// "parallel_tool_calls"} -- for serve_tools.c, which gives the messages the
// template gets where there are tools or tool turns; those rendered by the
// chat template and tokenized into the request's prompt, which must leave
// room for one token. (The messages' text stays text: only the template's
// markup becomes special tokens.)
static void messages_tokens(serve_check *k, infer_model *m, int n_ctx, const cJSON *o, serve_gen *g) {
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(o, "system"), *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!msgs) { serve_bad(k, "messages", "'messages' is required"); return; }
    if (!cJSON_IsArray(msgs) || !msgs->child) { serve_bad(k, "messages", "'messages' must be a non-empty array"); return; }
    cJSON *b = cJSON_CreateObject(), *v = cJSON_AddArrayToObject(b, "messages"), *turns = NULL;
    if (sys && !cJSON_IsNull(sys)) {
        char *s = join_text(k, sys, "system");
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "role", "system");
        cJSON_AddStringToObject(x, "content", s ? s : "");
        cJSON_AddItemToArray(v, x);
        free(s);
    }
    int i = 0;
    for (const cJSON *x = msgs->child; x && !k->status; x = x->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role"), *content = cJSON_GetObjectItemCaseSensitive(x, "content");
        char p[32];
        snprintf(p, sizeof p, "messages[%d]", i);
        if (!cJSON_IsObject(x) || !cJSON_IsString(role)) serve_bad(k, p, "%s must be an object with a string 'role'", p);
        else if (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))
            serve_bad(k, p, "%s: role '%.32s' is not one of user, assistant (the system prompt is the top-level 'system')", p, role->valuestring);
        else if (!content) serve_bad(k, p, "%s: 'content' is required", p);
        else add_turn(k, content, role->valuestring, p, v);
    }
    cJSON *tools = k->status ? NULL : tools_json(k, cJSON_GetObjectItemCaseSensitive(o, "tools"));
    if (tools) cJSON_AddItemToObject(b, "tools", tools);
    if (!k->status) choice_json(k, cJSON_GetObjectItemCaseSensitive(o, "tool_choice"), b);
    if (!k->status) turns = serve_tools_parse(k, m, b, g), name_bad_schema(k, m, tools);
    // every message now a role and a string content
    const cJSON *all = turns ? turns : v;
    int n = cJSON_GetArraySize(all);
    infer_chat_message *cm = k->status ? NULL : calloc((size_t)n, sizeof *cm);
    if (!k->status && !cm) oom(k);
    i = 0;
    for (const cJSON *x = all->child; cm && x; x = x->next, i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(x, "role"), *c = cJSON_GetObjectItemCaseSensitive(x, "content");
        cm[i].role = r->valuestring, cm[i].content = cJSON_IsString(c) ? c->valuestring : "";
    }
    if (cm && infer_chat_tokenize(m, cm, n, 1, &g->r.prompt, &g->r.n_prompt)) serve_bad(k, "messages", "the chat template: %s", infer_last_error());
    free(cm), cJSON_Delete(turns), cJSON_Delete(b);
    if (k->status) return;
    if (g->r.n_prompt < 1) serve_bad(k, "messages", "the prompt is empty");
    else if (g->r.n_prompt >= n_ctx)
        serve_bad(k, "messages", "the prompt is %d tokens: this server's context holds %d, and one more is needed to answer", g->r.n_prompt, n_ctx);
}

// stop_sequences: up to 16 non-empty strings (the task takes them)
static void stop_field(serve_check *k, const cJSON *o, serve_gen *g) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop_sequences"), *x;
    if (!st || cJSON_IsNull(st)) return;
    int n = cJSON_IsArray(st) ? cJSON_GetArraySize(st) : -1;
    if (n < 0 || n > 16) { serve_bad(k, "stop_sequences", "'stop_sequences' must be an array of at most 16 strings"); return; }
    if (!n || !(g->r.stop = calloc((size_t)n, sizeof(char *)))) {
        if (n) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
        return;
    }
    cJSON_ArrayForEach(x, st) {
        if (!cJSON_IsString(x) || !*x->valuestring) { serve_bad(k, "stop_sequences", "'stop_sequences' must be non-empty strings"); return; }
        if (!(g->r.stop[g->r.n_stop] = strdup(x->valuestring))) { k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"); return; }
        g->r.n_stop++;
    }
}

void serve_parse_messages(serve_check *k, infer_model *m, int n_ctx, const char *body, size_t len, int count, uint64_t seed,
                          serve_gen *g) {
    memset(g, 0, sizeof *g);
    g->r.sampling = infer_sampling_default();
    g->r.sampling.seed = seed;
    g->r.top_logprobs = -1;
    cJSON *o = serve_parse_body(k, body, len);
    if (!o) return;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model"), *mt = cJSON_GetObjectItemCaseSensitive(o, "max_tokens"),
                *sm = cJSON_GetObjectItemCaseSensitive(o, "stream"), *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    if (!model) serve_bad(k, "model", "'model' is required");
    else if (!cJSON_IsString(model)) serve_bad(k, "model", "'model' must be a string");
    if (!count && (!mt || cJSON_IsNull(mt))) serve_bad(k, "max_tokens", "'max_tokens' is required");
    double max_tokens = 0, temp = g->r.sampling.temp, top_p = g->r.sampling.top_p, top_k = g->r.sampling.top_k;
    serve_num_field(k, o, "max_tokens", 1, 1e9, 1, &max_tokens);
    serve_num_field(k, o, "temperature", 0, 1, 0, &temp); // (Anthropic's range)
    serve_num_field(k, o, "top_p", 0, 1, 0, &top_p);
    serve_num_field(k, o, "top_k", 0, 1e6, 1, &top_k);
    g->r.sampling.temp = (float)temp, g->r.sampling.top_p = (float)top_p, g->r.sampling.top_k = (int)top_k;
    g->r.max_tokens = max_tokens > n_ctx ? n_ctx : (int)max_tokens;
    if (sm && !cJSON_IsNull(sm) && !cJSON_IsBool(sm)) serve_bad(k, "stream", "'stream' must be a boolean");
    g->stream = cJSON_IsTrue(sm);
    if (md && !cJSON_IsNull(md) && !cJSON_IsObject(md)) serve_bad(k, "metadata", "'metadata' must be an object");
    stop_field(k, o, g);
    // the generated tokens' ids, to tell a stop sequence from the end of a turn (serve_anth_end)
    if (g->r.n_stop) g->r.top_logprobs = 0;
    if (!k->status) messages_tokens(k, m, n_ctx, o, g);
    cJSON_Delete(o);
}

// ---------------------------------------------------------------------------
// the answer

struct serve_anth {
    infer_model *m;
    char id[40];
    const char *model;   // (the server's: it outlives the answer)
    int n_prompt;
    char **stop;         // copies of the request's stop strings
    int n_stop;
    serve_tools *tools;   // tool calls asked for, or NULL (the stream's: it outlives the answer)
};

serve_anth *serve_anth_new(infer_model *m, const char *model, const serve_gen *g, uint64_t id) {
    serve_anth *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->m = m, a->model = model, a->n_prompt = g->r.n_prompt, a->tools = g->tools;
    snprintf(a->id, sizeof a->id, "msg_%016llx", (unsigned long long)id);
    if (g->r.n_stop && !(a->stop = calloc((size_t)g->r.n_stop, sizeof(char *)))) return free(a), NULL;
    for (; a->n_stop < g->r.n_stop; a->n_stop++)
        if (!(a->stop[a->n_stop] = strdup(g->r.stop[a->n_stop]))) return serve_anth_free(a), NULL;
    return a;
}

void serve_anth_free(serve_anth *a) {
    if (!a) return;
    for (int i = 0; i < a->n_stop; i++) free(a->stop[i]);
    free(a->stop), free(a);
}

// Why the task ended, in Anthropic's words; *seq: the stop sequence met, or
// NULL. The engine says "stop" both for an end-of-turn token and for a stop
// string: the generated tokens (asked for when there are stop strings) tell
// which, a stop string being in their text only when it ended the answer.
static const char *stop_reason(serve_anth *a, serve_task *t, const serve_state *st, const char **seq) {
    *seq = NULL;
    if (strcmp(st->finish, "stop")) return "max_tokens";
    if (!a->n_stop) return "end_turn";
    serve_logprob *v = NULL;
    int n = serve_task_logprobs(t, 0, &v);
    int32_t *ids = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    char *text = NULL;
    size_t len = 0;
    for (int i = 0; ids && i < n; i++) ids[i] = v[i].id;
    if (ids && !infer_detokenize(a->m, ids, n, 1, &text, &len)) { // (as the engine detokenizes)
        size_t best = len;
        for (int i = 0; i < a->n_stop; i++) {
            const char *p = memmem(text, len, a->stop[i], strlen(a->stop[i]));
            if (p && (size_t)(p - text) < best) best = (size_t)(p - text), *seq = a->stop[i];
        }
    }
    free(text), free(ids), free(v);
    return *seq ? "stop_sequence" : "end_turn";
}

static const char *error_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static cJSON *error_json(int status, const char *msg) {
    cJSON *j = cJSON_CreateObject(), *e;
    cJSON_AddStringToObject(j, "type", "error");
    e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddStringToObject(e, "message", msg);
    return j;
}

static char *print(cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

char *serve_anth_error(int status, const char *msg) { return print(error_json(status, msg)); }

// The answer's content blocks (an array): with tools, the answer parsed --
// a tool_use block a call, {"type": "tool_use", "id": "toolu_...", "name",
// "input"}, or its response's text -- else text[0, n) as it is. *calls: 1
// when it called tools.
static cJSON *answer_blocks(serve_anth *a, const char *text, size_t n, int *calls) {
    cJSON *c = cJSON_CreateArray(), *resp = NULL, *tc = NULL, *b;
    *calls = a->tools && serve_tools_answer(a->tools, text, n, &resp, &tc);
    for (const cJSON *x = tc ? tc->child : NULL; x; x = x->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "id"), *f = cJSON_GetObjectItemCaseSensitive(x, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"), *ar = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        cJSON *in = cJSON_IsString(ar) ? cJSON_Parse(ar->valuestring) : NULL;
        char tid[48];
        snprintf(tid, sizeof tid, "toolu_%s", cJSON_IsString(id) && !strncmp(id->valuestring, "call_", 5) ? id->valuestring + 5 : "0");
        cJSON_AddItemToArray(c, b = cJSON_CreateObject());
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", tid);
        cJSON_AddStringToObject(b, "name", cJSON_IsString(nm) ? nm->valuestring : "");
        cJSON_AddItemToObject(b, "input", cJSON_IsObject(in) ? in : (cJSON_Delete(in), cJSON_CreateObject()));
    }
    if (!*calls) {
        cJSON_AddItemToArray(c, b = cJSON_CreateObject());
        cJSON_AddStringToObject(b, "type", "text");
        if (cJSON_IsString(resp)) cJSON_AddStringToObject(b, "text", resp->valuestring);
        else serve_add_text(b, "text", text, n);
    }
    cJSON_Delete(resp), cJSON_Delete(tc);
    return c;
}

// the message object: its content blocks (or none yet; taken) and usage
static cJSON *message_json(serve_anth *a, cJSON *content, const char *reason, const char *seq, int n_gen) {
    cJSON *j = cJSON_CreateObject(), *u;
    cJSON_AddStringToObject(j, "id", a->id);
    cJSON_AddStringToObject(j, "type", "message");
    cJSON_AddStringToObject(j, "role", "assistant");
    cJSON_AddStringToObject(j, "model", a->model);
    cJSON_AddItemToObject(j, "content", content ? content : cJSON_CreateArray());
    if (reason) cJSON_AddStringToObject(j, "stop_reason", reason);
    else cJSON_AddNullToObject(j, "stop_reason");
    if (seq) cJSON_AddStringToObject(j, "stop_sequence", seq);
    else cJSON_AddNullToObject(j, "stop_sequence");
    u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", a->n_prompt);
    cJSON_AddNumberToObject(u, "output_tokens", n_gen);
    return j;
}

char *serve_anth_message(serve_anth *a, serve_task *t, const serve_state *st, const char *text, size_t n, int *status) {
    if (!st->finish) {
        char msg[300];
        snprintf(msg, sizeof msg, "generation failed: %s", st->error[0] ? st->error : "cancelled");
        *status = st->stopping ? 503 : 500;
        return serve_anth_error(*status, st->stopping ? "the server is stopping; try again shortly" : msg);
    }
    int calls;
    cJSON *c = answer_blocks(a, text ? text : "", text ? n : 0, &calls);
    const char *seq = NULL, *reason = calls ? "tool_use" : stop_reason(a, t, st, &seq);
    *status = 200;
    return print(message_json(a, c, reason, seq, st->n_gen));
}

// "event: NAME\ndata: JSON\n\n" appended to *out (of *len bytes); j is freed
static void event(char **out, size_t *len, const char *name, cJSON *j) {
    char *data = print(j);
    size_t need = strlen(name) + (data ? strlen(data) : 0) + 18;
    char *p = data ? realloc(*out, *len + need + 1) : NULL;
    if (p) *out = p, *len += (size_t)snprintf(p + *len, need + 1, "event: %s\ndata: %s\n\n", name, data);
    free(data);
}

// {"type": type, "index": i}: a content block's event
static cJSON *block_event(const char *type, int i) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", type);
    cJSON_AddNumberToObject(j, "index", i);
    return j;
}

// content_block_start of block i: b's type, with its text (or input) empty
static void block_start(char **out, size_t *len, int i, const cJSON *b) {
    cJSON *j = block_event("content_block_start", i), *c = cJSON_AddObjectToObject(j, "content_block");
    const char *ty = cJSON_GetObjectItemCaseSensitive(b, "type")->valuestring;
    cJSON_AddStringToObject(c, "type", ty);
    if (!strcmp(ty, "text")) {
        cJSON_AddStringToObject(c, "text", "");
    } else {
        cJSON_AddItemToObject(c, "id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(b, "id"), 1));
        cJSON_AddItemToObject(c, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(b, "name"), 1));
        cJSON_AddObjectToObject(c, "input");
    }
    event(out, len, "content_block_start", j);
}

// (with tools the blocks are known once the answer is whole: serve_anth_end sends them)
char *serve_anth_start(serve_anth *a) {
    char *out = NULL;
    size_t len = 0;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", "message_start");
    cJSON_AddItemToObject(j, "message", message_json(a, NULL, NULL, NULL, 0));
    event(&out, &len, "message_start", j);
    if (!a->tools) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        block_start(&out, &len, 0, b);
        cJSON_Delete(b);
    }
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", "ping");
    event(&out, &len, "ping", j);
    return out;
}

static void text_delta(char **out, size_t *len, int i, const char *text, size_t n) {
    cJSON *j = block_event("content_block_delta", i), *d = cJSON_AddObjectToObject(j, "delta");
    cJSON_AddStringToObject(d, "type", "text_delta");
    serve_add_text(d, "text", text, n);
    event(out, len, "content_block_delta", j);
}

char *serve_anth_delta(serve_anth *a, const char *text, size_t n) {
    (void)a;
    char *out = NULL;
    size_t len = 0;
    text_delta(&out, &len, 0, text, n);
    return out;
}

// With tools, the answer's blocks whole: each one's start, its text or its
// input's JSON in one delta (input_json_delta), and its stop. 1 when it called tools.
static int tool_blocks(serve_anth *a, char **out, size_t *len, const char *text, size_t n) {
    int calls, i = 0;
    cJSON *c = answer_blocks(a, text, n, &calls);
    for (const cJSON *b = c->child; b; b = b->next, i++) {
        block_start(out, len, i, b);
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (cJSON_IsString(tx) && *tx->valuestring) text_delta(out, len, i, tx->valuestring, strlen(tx->valuestring));
        if (!cJSON_IsString(tx)) {
            cJSON *j = block_event("content_block_delta", i), *d = cJSON_AddObjectToObject(j, "delta");
            char *in = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "input"));
            cJSON_AddStringToObject(d, "type", "input_json_delta");
            cJSON_AddStringToObject(d, "partial_json", in ? in : "{}");
            free(in);
            event(out, len, "content_block_delta", j);
        }
        event(out, len, "content_block_stop", block_event("content_block_stop", i));
    }
    cJSON_Delete(c);
    return calls;
}

char *serve_anth_end(serve_anth *a, serve_task *t, const serve_state *st, const char *text, size_t n) {
    char *out = NULL;
    size_t len = 0;
    if (!st->finish) { // failed or cancelled: an error event ends the stream
        char msg[300];
        snprintf(msg, sizeof msg, "generation failed: %s", st->error[0] ? st->error : "cancelled");
        event(&out, &len, "error", error_json(st->stopping ? 503 : 500, st->stopping ? "the server is stopping; try again shortly" : msg));
        return out;
    }
    int calls = 0;
    if (a->tools) calls = tool_blocks(a, &out, &len, text ? text : "", text ? n : 0);
    else event(&out, &len, "content_block_stop", block_event("content_block_stop", 0));
    const char *seq = NULL, *reason = calls ? "tool_use" : stop_reason(a, t, st, &seq);
    cJSON *j = cJSON_CreateObject(), *d, *u;
    cJSON_AddStringToObject(j, "type", "message_delta");
    d = cJSON_AddObjectToObject(j, "delta");
    cJSON_AddStringToObject(d, "stop_reason", reason);
    if (seq) cJSON_AddStringToObject(d, "stop_sequence", seq);
    else cJSON_AddNullToObject(d, "stop_sequence");
    u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", a->n_prompt);
    cJSON_AddNumberToObject(u, "output_tokens", st->n_gen);
    event(&out, &len, "message_delta", j);
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", "message_stop");
    event(&out, &len, "message_stop", j);
    return out;
}
