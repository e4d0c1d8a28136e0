// infer serve's Anthropic Messages API: a body of POST /v1/messages (or
// /v1/messages/count_tokens) checked field by field and turned into the
// engine's request -- the system prompt and the messages rendered by the
// model's chat template, as /v1/chat/completions renders its own -- and the
// answer written in Anthropic's shape: a message, or the server-sent events
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

// A message's content as one text (malloc'd in *out): a string, or an array
// of {"type": "text", "text"} blocks joined. what: "system" or "messages[i]".
static void content_text(serve_check *k, const cJSON *c, const char *what, char **out) {
    if (cJSON_IsString(c)) {
        if (!(*out = strdup(c->valuestring))) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
        return;
    }
    if (!cJSON_IsArray(c)) {
        serve_bad(k, what, "%s: 'content' must be a string or an array of content blocks", what);
        return;
    }
    size_t len = 0, at = 0;
    int i = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(b, "type"), *tx = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsObject(b) || !cJSON_IsString(ty)) {
            serve_bad(k, what, "%s: content block %d must be an object with a string 'type'", what, i);
            return;
        }
        if (!strcmp(ty->valuestring, "tool_use") || !strcmp(ty->valuestring, "tool_result")) {
            serve_bad(k, what, "%s: content block %d: '%s' blocks are not yet supported by this server (tools are not)", what, i, ty->valuestring);
            return;
        }
        if (strcmp(ty->valuestring, "text")) {
            serve_bad(k, what, "%s: content block %d: type '%.32s' is unsupported by this server (text only)", what, i, ty->valuestring);
            return;
        }
        if (!cJSON_IsString(tx)) {
            serve_bad(k, what, "%s: content block %d: a text block's 'text' must be a string", what, i);
            return;
        }
        len += strlen(tx->valuestring), i++;
    }
    if (!(*out = malloc(len + 1))) {
        k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
        return;
    }
    cJSON_ArrayForEach(b, c) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(b, "text")->valuestring;
        size_t l = strlen(tx);
        memcpy(*out + at, tx, l), at += l;
    }
    (*out)[at] = 0;
}

// The system prompt and the messages rendered by the chat template and
// tokenized into the request's prompt, which must leave room for one token.
// (The messages' text stays text: only the template's markup becomes special
// tokens.)
static void messages_tokens(serve_check *k, infer_model *m, int n_ctx, const cJSON *o, serve_gen *g) {
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(o, "system"), *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!msgs) { serve_bad(k, "messages", "'messages' is required"); return; }
    if (!cJSON_IsArray(msgs) || !msgs->child) { serve_bad(k, "messages", "'messages' must be a non-empty array"); return; }
    int has_sys = sys && !cJSON_IsNull(sys), n = cJSON_GetArraySize(msgs) + has_sys, i = 0;
    infer_chat_message *v = calloc((size_t)n, sizeof *v);
    char **owned = calloc((size_t)n, sizeof *owned);
    if (!v || !owned) {
        free(v), free(owned);
        k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
        return;
    }
    if (has_sys) {
        if (!cJSON_IsString(sys) && !cJSON_IsArray(sys)) serve_bad(k, "system", "'system' must be a string or an array of text blocks");
        else content_text(k, sys, "system", &owned[0]);
        v[0].role = "system", v[0].content = owned[0], i = 1;
    }
    for (const cJSON *x = msgs->child; x && !k->status; x = x->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role"), *content = cJSON_GetObjectItemCaseSensitive(x, "content");
        char p[64];
        snprintf(p, sizeof p, "messages[%d]", i - has_sys);
        if (!cJSON_IsObject(x) || !cJSON_IsString(role)) { serve_bad(k, p, "%s must be an object with a string 'role'", p); break; }
        if (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")) {
            serve_bad(k, p, "%s: role '%.32s' is not one of user, assistant (the system prompt is the top-level 'system')", p, role->valuestring);
            break;
        }
        if (!content) { serve_bad(k, p, "%s: 'content' is required", p); break; }
        v[i].role = role->valuestring;
        content_text(k, content, p, &owned[i]);
        v[i].content = owned[i];
    }
    if (!k->status && infer_chat_tokenize(m, v, n, 1, &g->r.prompt, &g->r.n_prompt))
        serve_bad(k, "messages", "the chat template: %s", infer_last_error());
    for (int j = 0; j < n; j++) free(owned[j]);
    free(owned), free(v);
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
    static const char *const unsupported[] = {"tools", "tool_choice"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, unsupported[i]);
        if (f && !cJSON_IsNull(f) && !(cJSON_IsArray(f) && !f->child))
            serve_bad(k, unsupported[i], "'%s' is not yet supported by this server", unsupported[i]);
    }
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
};

serve_anth *serve_anth_new(infer_model *m, const char *model, const serve_gen *g, uint64_t id) {
    serve_anth *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->m = m, a->model = model, a->n_prompt = g->r.n_prompt;
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

// the message object: its content (text[0, n), or none yet) and usage
static cJSON *message_json(serve_anth *a, const char *text, size_t n, const char *reason, const char *seq, int n_gen) {
    cJSON *j = cJSON_CreateObject(), *c, *u;
    cJSON_AddStringToObject(j, "id", a->id);
    cJSON_AddStringToObject(j, "type", "message");
    cJSON_AddStringToObject(j, "role", "assistant");
    cJSON_AddStringToObject(j, "model", a->model);
    c = cJSON_AddArrayToObject(j, "content");
    if (text) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        serve_add_text(b, "text", text, n);
        cJSON_AddItemToArray(c, b);
    }
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
    const char *seq, *reason = stop_reason(a, t, st, &seq);
    *status = 200;
    return print(message_json(a, text ? text : "", text ? n : 0, reason, seq, st->n_gen));
}

// "event: NAME\ndata: JSON\n\n" appended to *out (of *len bytes); j is freed
static void event(char **out, size_t *len, const char *name, cJSON *j) {
    char *data = print(j);
    size_t need = strlen(name) + (data ? strlen(data) : 0) + 18;
    char *p = data ? realloc(*out, *len + need + 1) : NULL;
    if (p) *out = p, *len += (size_t)snprintf(p + *len, need + 1, "event: %s\ndata: %s\n\n", name, data);
    free(data);
}

// {"type": type, "index": 0} and its event
static cJSON *block_event(const char *type) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", type);
    cJSON_AddNumberToObject(j, "index", 0);
    return j;
}

char *serve_anth_start(serve_anth *a) {
    char *out = NULL;
    size_t len = 0;
    cJSON *j = cJSON_CreateObject(), *b;
    cJSON_AddStringToObject(j, "type", "message_start");
    cJSON_AddItemToObject(j, "message", message_json(a, NULL, 0, NULL, NULL, 0));
    event(&out, &len, "message_start", j);
    j = block_event("content_block_start");
    b = cJSON_AddObjectToObject(j, "content_block");
    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddStringToObject(b, "text", "");
    event(&out, &len, "content_block_start", j);
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", "ping");
    event(&out, &len, "ping", j);
    return out;
}

char *serve_anth_delta(serve_anth *a, const char *text, size_t n) {
    (void)a;
    char *out = NULL;
    size_t len = 0;
    cJSON *j = block_event("content_block_delta"), *d = cJSON_AddObjectToObject(j, "delta");
    cJSON_AddStringToObject(d, "type", "text_delta");
    serve_add_text(d, "text", text, n);
    event(&out, &len, "content_block_delta", j);
    return out;
}

char *serve_anth_end(serve_anth *a, serve_task *t, const serve_state *st) {
    char *out = NULL;
    size_t len = 0;
    if (!st->finish) { // failed or cancelled: an error event ends the stream
        char msg[300];
        snprintf(msg, sizeof msg, "generation failed: %s", st->error[0] ? st->error : "cancelled");
        event(&out, &len, "error", error_json(st->stopping ? 503 : 500, st->stopping ? "the server is stopping; try again shortly" : msg));
        return out;
    }
    const char *seq, *reason = stop_reason(a, t, st, &seq);
    event(&out, &len, "content_block_stop", block_event("content_block_stop"));
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
