// infer serve: an OpenAI-compatible HTTP server (GNU libmicrohttpd, a thread
// per connection). HTTP threads parse and check a request, render the chat
// template, tokenize, queue a task on the engine (serve_engine.c) and wait on
// it; the engine thread owns the model's contexts.
//
// Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions, POST
// /v1/completions (streamed as OpenAI streams them, or not). Errors are
// {"error": {"message", "type", "param", "code"}} with their HTTP status.
#include "cli.h"
#include "serve.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef INFER_HAVE_MHD
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>

static const char g_usage[] =
    "usage: infer serve [-m MODEL] [--host 127.0.0.1] [--port 8080] [--parallel N] [-c N] [-t N] [--device cpu|cuda] [-ngl N]\n"
    "                   [--queue N] [--max-body BYTES] [--api-key KEY] [--alias NAME]\n"
    "  an OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions; GET /v1/models, /health\n"
    "  -m, --model MODEL      a Hugging Face directory or a .gguf file (default: SmolLM2-135M-Instruct)\n"
    "      --host ADDR        the IPv4 address to bind (default 127.0.0.1)\n"
    "      --port N           the port (default 8080; 0: a free one, printed)\n"
    "      --parallel N       sequences decoded together, each of -c positions (default 4)\n"
    "  -c, --ctx-size N       positions of each sequence (default 4096)\n"
    "  -t, --threads N        threads (default: all cores)\n"
    CLI_USAGE_DEVICE
    CLI_USAGE_CACHE
    "                         (fewer than all: each slot's step runs alone, as batched passes run on one device)\n"
    "      --queue N          requests waiting beyond the running ones before 503 (default 64)\n"
    "      --max-body BYTES   the largest request body (default 1048576)\n"
    "      --api-key KEY      requests must carry Authorization: Bearer KEY\n"
    "      --alias NAME       the model's id in responses (default: the file's name)\n";

enum { OPT_HOST = OPT_LOCAL, OPT_PORT, OPT_PARALLEL, OPT_QUEUE, OPT_MAX_BODY, OPT_API_KEY, OPT_ALIAS };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_CTX, CLI_OPT_DEVICE, CLI_OPT_NGL, CLI_OPTS_CACHE,
    {"host", required_argument, NULL, OPT_HOST}, {"port", required_argument, NULL, OPT_PORT},
    {"parallel", required_argument, NULL, OPT_PARALLEL}, {"queue", required_argument, NULL, OPT_QUEUE},
    {"max-body", required_argument, NULL, OPT_MAX_BODY}, {"api-key", required_argument, NULL, OPT_API_KEY},
    {"alias", required_argument, NULL, OPT_ALIAS}, {0},
};

typedef struct {
    infer_model *m;
    serve_engine *e;
    const char *alias, *api_key;
    size_t max_body;
    int n_ctx;
    pthread_mutex_t mu;              // guards the counts
    long long by_status[6];          // responses by status class (1xx .. 5xx)
    long long disconnects, requests; // clients gone before their answer; generation requests
    double started;
} server;

static void count(server *sv, int status, int disconnect) {
    pthread_mutex_lock(&sv->mu);
    if (status >= 100 && status < 600) sv->by_status[status / 100]++;
    sv->disconnects += disconnect;
    pthread_mutex_unlock(&sv->mu);
}

// one connection's request: its body as it comes
typedef struct {
    char *body;
    size_t len, cap;
    int too_big;
} request;

// ---------------------------------------------------------------------------
// responses

static server *g_sv; // (for the counts of every reply)

extern const unsigned char infer_chat_page[]; // tools/infer/page/chat.html (cmake/embed.cmake)

static enum MHD_Result reply(struct MHD_Connection *c, int status, const char *type, const char *body) {
    if (g_sv) count(g_sv, status, 0);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, int status, cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return reply(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
    enum MHD_Result ok = reply(c, status, "application/json", s);
    free(s);
    return ok;
}

// {"error": {...}} with its status; param and code may be NULL
static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *param, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error");
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return reply_json(c, status, j);
}

// ---------------------------------------------------------------------------
// text for JSON: UTF-8 made valid (a token or a cut may end inside a character)

static char *utf8_clean(const char *s, size_t n) {
    char *o = malloc(3 * n + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 && c >= 0xC2 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = k > 0 && i + k <= n && c != 0;
        for (size_t j = 1; ok && j < k; j++) ok = ((unsigned char)s[i + j] & 0xC0) == 0x80;
        if (ok && k == 3) ok = !(c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) && !(c == 0xED && (unsigned char)s[i + 1] >= 0xA0);
        if (ok && k == 4) ok = !(c == 0xF0 && (unsigned char)s[i + 1] < 0x90) && !(c == 0xF4 && (unsigned char)s[i + 1] >= 0x90);
        if (ok) memcpy(q, s + i, k), q += k, i += k;
        else memcpy(q, "\xEF\xBF\xBD", 3), q += 3, i++;
    }
    *q = 0;
    return o;
}

// a string field of valid UTF-8 from n bytes
static void add_text(cJSON *o, const char *name, const char *s, size_t n) {
    char *c = utf8_clean(s, n);
    cJSON_AddStringToObject(o, name, c ? c : "");
    free(c);
}

// {"token", "logprob", "bytes"} of one token
static cJSON *lp_entry(server *sv, int32_t id, float lp) {
    cJSON *e = cJSON_CreateObject(), *b;
    char *t = NULL;
    size_t n = 0;
    infer_detokenize(sv->m, &id, 1, 0, &t, &n);
    add_text(e, "token", t ? t : "", t ? n : 0);
    cJSON_AddNumberToObject(e, "logprob", lp);
    b = cJSON_AddArrayToObject(e, "bytes");
    for (size_t i = 0; t && i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)t[i]));
    free(t);
    return e;
}

// chat's {"content": [...]} of tokens v[0..n)
static cJSON *chat_logprobs(server *sv, const serve_logprob *v, int n) {
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "content");
    for (int i = 0; i < n; i++) {
        cJSON *e = lp_entry(sv, v[i].id, v[i].logprob), *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < v[i].n_top; k++) cJSON_AddItemToArray(top, lp_entry(sv, v[i].top_id[k], v[i].top_logprob[k]));
        cJSON_AddItemToArray(a, e);
    }
    return j;
}

// completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; *offset: text bytes before v[0]
static cJSON *cmpl_logprobs(server *sv, const serve_logprob *v, int n, size_t *offset) {
    cJSON *j = cJSON_CreateObject(), *tk = cJSON_AddArrayToObject(j, "tokens"), *tl = cJSON_AddArrayToObject(j, "token_logprobs"),
          *top = cJSON_AddArrayToObject(j, "top_logprobs"), *off = cJSON_AddArrayToObject(j, "text_offset");
    for (int i = 0; i < n; i++) {
        cJSON *e = lp_entry(sv, v[i].id, v[i].logprob), *m = cJSON_CreateObject();
        const char *txt = cJSON_GetObjectItemCaseSensitive(e, "token")->valuestring;
        cJSON_AddItemToArray(tk, cJSON_CreateString(txt));
        cJSON_AddItemToArray(tl, cJSON_CreateNumber(v[i].logprob));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)*offset));
        *offset += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "bytes"));
        for (int k = 0; k < v[i].n_top; k++) {
            cJSON *x = lp_entry(sv, v[i].top_id[k], v[i].top_logprob[k]);
            if (!cJSON_GetObjectItemCaseSensitive(m, cJSON_GetObjectItemCaseSensitive(x, "token")->valuestring))
                cJSON_AddNumberToObject(m, cJSON_GetObjectItemCaseSensitive(x, "token")->valuestring, v[i].top_logprob[k]);
            cJSON_Delete(x);
        }
        cJSON_AddItemToArray(top, m);
        cJSON_Delete(e);
    }
    return j;
}

// ---------------------------------------------------------------------------
// generation: waited for, or streamed

typedef struct {
    server *sv;
    serve_task *t;
    int chat, include_usage, phase; // phase: 0 role chunk, 1 text, 2 usage, 3 [DONE], 4 end
    int logprobs, lp_from;          // log-probabilities asked for; tokens whose were sent
    size_t lp_offset;               // (completions' text_offset)
    size_t from;                    // text bytes sent
    char id[48], *pend;             // events not yet handed to MHD
    size_t pend_len, pend_at;
    long created;
    int fd;                         // the connection's socket (-1: unknown)
    int pause;                      // a delta went out: pause before waiting for the next (STREAM_PAUSE_MS)
} stream;

// the client has hung up (a FIN or an error seen on its socket)
static int hung_up(int fd) {
    struct pollfd pf = {fd, POLLRDHUP, 0};
    return fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static cJSON *usage_json(const serve_state *st) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", st->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", st->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", st->n_prompt + st->n_gen);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", st->n_cached);
    return u;
}

static cJSON *chunk_json(stream *s, const char *role, const char *text, const char *finish);

// the log-probabilities of the tokens since the last chunk, into choice c
static void chunk_logprobs(stream *s, cJSON *c) {
    serve_logprob *v = NULL;
    int n = serve_task_logprobs(s->t, s->lp_from, &v);
    s->lp_from += n;
    cJSON_AddItemToObject(c, "logprobs", s->chat ? chat_logprobs(s->sv, v, n) : cmpl_logprobs(s->sv, v, n, &s->lp_offset));
    free(v);
}

static cJSON *chunk_json(stream *s, const char *role, const char *text, const char *finish) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", s->id);
    cJSON_AddStringToObject(j, "object", s->chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(j, "created", (double)s->created);
    cJSON_AddStringToObject(j, "model", s->sv->alias);
    cJSON *ch = cJSON_AddArrayToObject(j, "choices");
    if (role || text || finish) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", 0);
        if (s->chat) {
            cJSON *d = cJSON_AddObjectToObject(c, "delta");
            if (role) cJSON_AddStringToObject(d, "role", role);
            if (text) add_text(d, "content", text, strlen(text));
        } else {
            add_text(c, "text", text ? text : "", text ? strlen(text) : 0);
        }
        if (s->logprobs && text && *text) chunk_logprobs(s, c);
        else cJSON_AddNullToObject(c, "logprobs");
        if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
        else cJSON_AddNullToObject(c, "finish_reason");
        cJSON_AddItemToArray(ch, c);
    }
    return j;
}

// "data: {json}\n\n" appended to the stream's pending bytes
static void emit(stream *s, cJSON *j) {
    char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    const char *body = txt ? txt : "[DONE]";
    size_t n = strlen(body) + 8;
    char *p = realloc(s->pend, s->pend_len + n + 1);
    if (p) {
        s->pend = p;
        s->pend_len += (size_t)snprintf(p + s->pend_len, n + 1, "data: %s\n\n", body);
    }
    free(txt);
}

enum { STREAM_PAUSE_MS = 20 };

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream *s = cls;
    (void)pos;
    while (s->pend_at >= s->pend_len) {
        s->pend_len = s->pend_at = 0;
        if (s->phase == 4) return MHD_CONTENT_READER_END_OF_STREAM;
        if (s->phase == 0) {
            if (s->chat) emit(s, chunk_json(s, "assistant", "", NULL));
            s->phase = 1;
            continue;
        }
        if (s->phase == 3) {
            emit(s, NULL);
            s->phase = 4;
            continue;
        }
        if (hung_up(s->fd)) return MHD_CONTENT_READER_END_WITH_ERROR; // (stream_free cancels the task)
        // (after a delta has gone out, a pause before the next wait: the text of the tokens made
        // meanwhile goes in one write, and this thread wakes once for them, not once a token, taking
        // less time from the engine's threads where cores are few)
        if (s->pause) nanosleep(&(struct timespec){0, STREAM_PAUSE_MS * 1000000L}, NULL), s->pause = 0;
        char *text;
        size_t len;
        serve_state st;
        serve_task_wait(s->t, s->from, 50, &text, &len, &st);
        if (!text) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (len) emit(s, chunk_json(s, NULL, text, NULL)), s->from += len;
        free(text);
        s->pause = len && !st.done;
        if (st.done && s->phase == 1) {
            if (!st.finish) { // failed or cancelled: the stream ends without a finish
                s->phase = 4;
                if (st.failed) {
                    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
                    cJSON_AddStringToObject(e, "message", st.error);
                    cJSON_AddStringToObject(e, "type", "server_error");
                    emit(s, j);
                }
                continue;
            }
            emit(s, chunk_json(s, NULL, NULL, st.finish));
            if (s->include_usage) {
                cJSON *j = chunk_json(s, NULL, NULL, NULL);
                cJSON_AddItemToObject(j, "usage", usage_json(&st));
                emit(s, j);
            }
            s->phase = 3;
        }
    }
    size_t n = s->pend_len - s->pend_at < max ? s->pend_len - s->pend_at : max;
    memcpy(buf, s->pend + s->pend_at, n);
    s->pend_at += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream *s = cls;
    if (s->phase != 4) count(s->sv, 0, 1); // (the client left before the end)
    serve_task_cancel(s->t); // (nothing when it is done)
    serve_task_release(s->t);
    free(s->pend);
    free(s);
}

static enum MHD_Result generate(struct MHD_Connection *c, server *sv, serve_gen *g, int chat) {
    stream *s = calloc(1, sizeof *s);
    if (!s) return serve_gen_free(g), reply_error(c, 500, NULL, NULL, "out of memory");
    s->sv = sv, s->chat = chat, s->include_usage = g->include_usage, s->created = (long)time(NULL), s->logprobs = g->r.top_logprobs >= 0;
    snprintf(s->id, sizeof s->id, "%s-%016llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)cli_seed());
    int stream_it = g->stream;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    s->t = serve_submit(sv->e, &g->r);
    if (!s->t) { // 503 with Retry-After
        free(s);
        const char *body = "{\"error\":{\"message\":\"the server is busy (its queue is full) or stopping; try again shortly\","
                           "\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Retry-After", "1");
        count(sv, 503, 0);
        enum MHD_Result ok = MHD_queue_response(c, 503, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (stream_it) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
        if (!r) return stream_free(s), MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        count(sv, 200, 0);
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    // waited for: the whole text, then one response
    char *all = NULL, *text;
    size_t n_all = 0, len;
    serve_state st = {0};
    int gone = 0;
    for (;;) {
        serve_task_wait(s->t, n_all, 100, &text, &len, &st);
        if (!text) break;
        char *p = realloc(all, n_all + len + 1);
        if (p) memcpy(p + n_all, text, len + 1), all = p, n_all += len;
        free(text);
        if (st.done) break;
        if (hung_up(s->fd)) { // the client hung up: its slot is freed
            serve_task_cancel(s->t);
            gone = 1;
            break;
        }
    }
    serve_logprob *lpv = NULL;
    int lp_n = s->logprobs ? serve_task_logprobs(s->t, 0, &lpv) : -1;
    char id[48];
    memcpy(id, s->id, sizeof id);
    serve_task_release(s->t);
    free(s);
    if (gone || !st.done || !st.finish) free(lpv), lpv = NULL;
    if (gone) {
        free(all);
        count(sv, 0, 1);
        return MHD_NO; // (nobody to answer)
    }
    if (!st.done || !st.finish) {
        free(all);
        return reply_error(c, 500, NULL, NULL, "generation failed: %s", st.error[0] ? st.error : "cancelled");
    }
    cJSON *j = cJSON_CreateObject(), *ch, *one = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "object", chat ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(j, "created", (double)time(NULL));
    cJSON_AddStringToObject(j, "model", sv->alias);
    ch = cJSON_AddArrayToObject(j, "choices");
    cJSON_AddNumberToObject(one, "index", 0);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(one, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        add_text(msg, "content", all ? all : "", all ? n_all : 0);
    } else {
        add_text(one, "text", all ? all : "", all ? n_all : 0);
    }
    if (lp_n >= 0) {
        size_t off = 0;
        cJSON_AddItemToObject(one, "logprobs", chat ? chat_logprobs(sv, lpv, lp_n) : cmpl_logprobs(sv, lpv, lp_n, &off));
    } else {
        cJSON_AddNullToObject(one, "logprobs");
    }
    free(lpv);
    cJSON_AddStringToObject(one, "finish_reason", st.finish);
    cJSON_AddItemToArray(ch, one);
    cJSON_AddItemToObject(j, "usage", usage_json(&st));
    free(all);
    return reply_json(c, 200, j);
}

static enum MHD_Result post_generate(struct MHD_Connection *c, server *sv, request *rq, int chat) {
    serve_check k = {0};
    serve_gen g;
    serve_parse_generate(&k, sv->m, sv->n_ctx, rq->body, rq->len, chat, cli_seed(), &g);
    if (k.status) {
        serve_gen_free(&g);
        const char *code = strstr(k.msg, "context holds") ? "context_length_exceeded" : NULL;
        return reply_error(c, k.status, k.param[0] ? k.param : NULL, code, "%s", k.msg);
    }
    return generate(c, sv, &g, chat);
}

// ---------------------------------------------------------------------------
// llama-server's /tokenize and /detokenize, and the Prometheus counts

static cJSON *body_object(struct MHD_Connection *c, request *rq, enum MHD_Result *res) {
    cJSON *o = rq->len && memchr(rq->body, 0, rq->len) ? NULL : cJSON_ParseWithLength(rq->body ? rq->body : "", rq->len);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        *res = reply_error(c, 400, NULL, NULL, "the body must be a JSON object");
        return NULL;
    }
    return o;
}

static enum MHD_Result post_tokenize(struct MHD_Connection *c, server *sv, request *rq) {
    enum MHD_Result res;
    cJSON *o = body_object(c, rq, &res);
    if (!o) return res;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "content"), *sp = cJSON_GetObjectItemCaseSensitive(o, "add_special");
    if (!cJSON_IsString(t)) return cJSON_Delete(o), reply_error(c, 400, "content", NULL, "'content' must be a string");
    if (sp && !cJSON_IsBool(sp)) return cJSON_Delete(o), reply_error(c, 400, "add_special", NULL, "'add_special' must be a boolean");
    int32_t *ids = NULL;
    int n = 0;
    if (infer_tokenize(sv->m, t->valuestring, strlen(t->valuestring), cJSON_IsTrue(sp), 1, &ids, &n)) {
        cJSON_Delete(o);
        return reply_error(c, 400, "content", NULL, "cannot tokenize: %s", infer_last_error());
    }
    cJSON_Delete(o);
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "tokens");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    free(ids);
    return reply_json(c, 200, j);
}

static enum MHD_Result post_detokenize(struct MHD_Connection *c, server *sv, request *rq) {
    enum MHD_Result res;
    cJSON *o = body_object(c, rq, &res);
    if (!o) return res;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "tokens"), *x;
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1, V = infer_model_n_vocab(sv->m), i = 0;
    int32_t *ids = n >= 0 ? malloc(sizeof(int32_t) * (size_t)(n + 1)) : NULL;
    if (n < 0 || !ids) return free(ids), cJSON_Delete(o), reply_error(c, 400, "tokens", NULL, "'tokens' must be an array of token ids");
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 || x->valuedouble >= V) {
            free(ids), cJSON_Delete(o);
            return reply_error(c, 400, "tokens", NULL, "'tokens'[%d] is not a token id of this model (0 to %d)", i, V - 1);
        }
        ids[i++] = (int32_t)x->valuedouble;
    }
    cJSON_Delete(o);
    char *text = NULL;
    size_t len = 0;
    if (infer_detokenize(sv->m, ids, n, 0, &text, &len)) return free(ids), reply_error(c, 500, NULL, NULL, "%s", infer_last_error());
    free(ids);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "content", text);
    free(text);
    return reply_json(c, 200, j);
}

static enum MHD_Result metrics(struct MHD_Connection *c, server *sv) {
    serve_counts k;
    serve_engine_counts(sv->e, &k);
    pthread_mutex_lock(&sv->mu);
    long long st[6], disc = sv->disconnects;
    memcpy(st, sv->by_status, sizeof st);
    pthread_mutex_unlock(&sv->mu);
    char b[2048];
    int n = snprintf(b, sizeof b,
                     "# HELP infer_prompt_tokens_total Prompt tokens evaluated.\n# TYPE infer_prompt_tokens_total counter\n"
                     "infer_prompt_tokens_total %lld\n"
                     "# HELP infer_prompt_tokens_cached_total Prompt tokens a slot's cache already held.\n# TYPE infer_prompt_tokens_cached_total counter\n"
                     "infer_prompt_tokens_cached_total %lld\n"
                     "# HELP infer_tokens_generated_total Tokens generated.\n# TYPE infer_tokens_generated_total counter\n"
                     "infer_tokens_generated_total %lld\n"
                     "# HELP infer_steps_total Engine steps (one batched call each).\n# TYPE infer_steps_total counter\n"
                     "infer_steps_total %lld\n"
                     "# HELP infer_busy_slot_steps_total Slots at work summed over the steps.\n# TYPE infer_busy_slot_steps_total counter\n"
                     "infer_busy_slot_steps_total %lld\n"
                     "# HELP infer_requests_running Slots at work now.\n# TYPE infer_requests_running gauge\ninfer_requests_running %d\n"
                     "# HELP infer_requests_queued Requests waiting for a slot.\n# TYPE infer_requests_queued gauge\ninfer_requests_queued %d\n"
                     "# HELP infer_slots Slots of this server.\n# TYPE infer_slots gauge\ninfer_slots %d\n"
                     "# HELP infer_client_disconnects_total Clients gone before their answer ended.\n# TYPE infer_client_disconnects_total counter\n"
                     "infer_client_disconnects_total %lld\n"
                     "# HELP infer_responses_total Responses by status class.\n# TYPE infer_responses_total counter\n",
                     k.prompt_tokens, k.prompt_cached, k.generated_tokens, k.steps, k.busy_slot_steps, k.busy_slots, k.queued, k.slots, disc);
    for (int i = 2; i < 6 && n > 0 && (size_t)n < sizeof b; i++)
        n += snprintf(b + n, sizeof b - (size_t)n, "infer_responses_total{status=\"%dxx\"} %lld\n", i, st[i]);
    return reply(c, 200, "text/plain; version=0.0.4", b);
}

// ---------------------------------------------------------------------------
// the handler: every request of every connection

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                              const char *upload, size_t *upload_size, void **con_cls) {
    server *sv = cls;
    (void)version;
    request *rq = *con_cls;
    if (!rq) { // the headers: the size is decided before the body is read
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > sv->max_body) { // answered now: the body is never read
            rq->too_big = 1;
            return reply_error(c, 413, NULL, NULL, "the body (%s bytes) is larger than this server's limit of %zu bytes", cl, sv->max_body);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rq->too_big && rq->len + *upload_size <= sv->max_body) {
            if (rq->len + *upload_size + 1 > rq->cap) {
                size_t cap = (rq->len + *upload_size + 1) * 2;
                char *p = realloc(rq->body, cap < sv->max_body + 1 ? cap : sv->max_body + 1);
                if (!p) return MHD_NO;
                rq->body = p, rq->cap = cap < sv->max_body + 1 ? cap : sv->max_body + 1;
            }
            memcpy(rq->body + rq->len, upload, *upload_size);
            rq->len += *upload_size;
        } else {
            rq->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->too_big) return reply_error(c, 413, NULL, NULL, "the body is larger than this server's limit of %zu bytes", sv->max_body);
    if (sv->api_key && strcmp(url, "/health") && strcmp(url, "/") && strcmp(url, "/index.html")) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (!auth || strncmp(auth, "Bearer ", 7) || strcmp(auth + 7, sv->api_key))
            return reply_error(c, 401, NULL, "invalid_api_key", "a valid API key is required (Authorization: Bearer KEY)");
    }
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) { // the chat page
        if (!get) return reply_error(c, 405, NULL, NULL, "%s %s: use GET", method, url);
        return reply(c, 200, "text/html; charset=utf-8", (const char *)infer_chat_page);
    }
    if (!strcmp(url, "/health")) {
        if (!get) return reply_error(c, 405, NULL, NULL, "%s /health: use GET", method);
        return reply(c, 200, "application/json", "{\"status\":\"ok\"}");
    }
    if (!strcmp(url, "/v1/models") || (!strncmp(url, "/v1/models/", 11) && !strcmp(url + 11, sv->alias))) {
        if (!get) return reply_error(c, 405, NULL, NULL, "%s %s: use GET", method, url);
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "id", sv->alias);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", 0);
        cJSON_AddStringToObject(m, "owned_by", "infer");
        if (url[10] == '/') return reply_json(c, 200, m);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "object", "list");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "data"), m);
        return reply_json(c, 200, j);
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return reply_error(c, 405, NULL, NULL, "%s /metrics: use GET", method);
        return metrics(c, sv);
    }
    if (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")) {
        if (!post) return reply_error(c, 405, NULL, NULL, "%s %s: use POST", method, url);
        return url[1] == 't' ? post_tokenize(c, sv, rq) : post_detokenize(c, sv, rq);
    }
    int chat = !strcmp(url, "/v1/chat/completions");
    if (chat || !strcmp(url, "/v1/completions")) {
        if (!post) return reply_error(c, 405, NULL, NULL, "%s %s: use POST", method, url);
        return post_generate(c, sv, rq, chat);
    }
    return reply_error(c, 404, NULL, NULL, "no such endpoint: %s %s", method, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c, (void)why;
    request *rq = *con_cls;
    if (rq) free(rq->body), free(rq);
    *con_cls = NULL;
}

int cmd_serve(int argc, char **argv) {
    const char *host = "127.0.0.1", *device = NULL, *api_key = NULL, *alias = NULL;
    long port = 8080, parallel = 4, queue = 64, max_body = 1 << 20;
    int opt;
    cli_opts o;
    cli_opts_init(&o, "serve", g_usage);
    o.n_ctx = 4096;
    while ((opt = cli_next(&o, argc, argv, "hm:t:c:", g_opts)) > 0) {
        switch (opt) {
        case OPT_HOST: host = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_API_KEY: api_key = optarg; break;
        case OPT_ALIAS: alias = optarg; break;
        case OPT_PORT: if ((port = cli_parse_count("--port", optarg, 65535)) < 0) return 1; break;
        case OPT_PARALLEL: if ((parallel = cli_parse_count("--parallel", optarg, 256)) < 1) return parallel < 0 ? 1 : cli_error("serve: --parallel must be at least 1"); break;
        case OPT_QUEUE: if ((queue = cli_parse_count("--queue", optarg, 1 << 20)) < 0) return 1; break;
        case OPT_MAX_BODY: if ((max_body = cli_parse_count("--max-body", optarg, 1L << 30)) < 1) return max_body < 0 ? 1 : cli_error("serve: --max-body must be at least 1"); break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("serve: unexpected argument \"%s\"", argv[optind]);
    if (device && strcmp(device, "cpu") && strcmp(device, "cuda")) return cli_error("serve: --device must be cpu or cuda (got \"%s\")", device);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET, addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) return cli_error("serve: --host \"%s\" is not an IPv4 address", host);
    if (!o.threads) infer_set_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
    const char *model = o.model;
    if (!model && !(model = cli_chat_model())) return 1;
    server sv = {0};
    pthread_mutex_init(&sv.mu, NULL);
    g_sv = &sv;
    if (infer_model_load(model, &sv.m)) return cli_error("%s", infer_last_error());
    char err[256];
    int rank = infer_model_tp_rank(sv.m);
    if (rank > 0) { // (--tp N: rank 0 serves; this rank evaluates what it is told)
        int rc = serve_follow(sv.m, (int)parallel, (int)o.n_ctx, device, o.ngl, err, sizeof err);
        infer_model_free(sv.m);
        return rc ? cli_error("serve, rank %d: %s", rank, err) : 0;
    }
    if (!(sv.e = serve_engine_new(sv.m, (int)parallel, (int)o.n_ctx, device, o.ngl, (int)queue, err, sizeof err))) {
        infer_model_free(sv.m);
        return cli_error("serve: %s", err);
    }
    sv.n_ctx = serve_engine_n_ctx(sv.e), sv.api_key = api_key, sv.max_body = (size_t)max_body;
    const char *base = strrchr(model, '/');
    sv.alias = alias ? alias : base && base[1] ? base + 1 : model;
    size_t kv = serve_engine_kv_per_pos(sv.e) * (size_t)sv.n_ctx;
    fprintf(stderr, "infer serve: %s, %ld slots of %d positions (KV cache %s, %.1f MiB in all), %s%s\n", sv.alias, parallel, sv.n_ctx,
            serve_engine_kv_types(sv.e), (double)kv * (double)parallel / (1 << 20), serve_engine_backend(sv.e),
            serve_engine_split(sv.e) ? " and cpu (-ngl: the slots' steps one at a time)" : "");

    // SIGINT / SIGTERM end the server: blocked here, waited for below
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port,
                                            NULL, NULL, handle, &sv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(parallel + queue + 32), MHD_OPTION_CONNECTION_TIMEOUT,
                                            (unsigned)600, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    if (!d) {
        serve_engine_free(sv.e), infer_model_free(sv.m);
        return cli_error("serve: cannot listen on %s:%ld: %s", host, port, strerror(errno));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://%s:%u\n", host, di ? di->port : (unsigned)port);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "infer serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_quiesce_daemon(d);  // no new connections
    serve_engine_stop(sv.e); // running and queued requests end (their streams close), new ones get 503
    MHD_stop_daemon(d);      // (joins the connections' threads)
    serve_engine_free(sv.e);
    infer_model_free(sv.m);
    return 0;
}

#else
int cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    return cli_error("serve: this build has no HTTP server (libmicrohttpd was not found at configure time; scripts/setup.sh installs it)");
}
#endif
