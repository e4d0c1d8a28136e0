// infer serve: an OpenAI-compatible HTTP server (GNU libmicrohttpd, a thread
// per connection). HTTP threads parse and check a request, render the chat
// template, tokenize, queue a task on the engine (serve_engine.c) and wait on
// it; the engine thread owns the model's contexts.
//
// Endpoints: GET /health, GET /metrics (Prometheus text), GET /v1/models,
// POST /v1/chat/completions, POST /v1/completions (streamed as OpenAI
// streams them, or not), POST /v1/embeddings (serve_embed.c), POST
// /v1/messages and /v1/messages/count_tokens (Anthropic's, serve_anthropic.c),
// POST /v1/responses (OpenAI's Responses API, serve_responses.c), POST
// /tokenize and /detokenize, GET /slots and POST /slots/ID (llama-server's,
// serve_misc.c and serve_slots.c), GET / (the chat page).
// Errors are {"error": {"message", "type", "param", "code"}} with their HTTP
// status (Anthropic's shape under /v1/messages).
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
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static const char g_usage[] =
    "usage: infer serve [-m MODEL] [--host 127.0.0.1] [--port 8080] [--parallel N] [-c N] [-t N] [--device cpu|cuda] [-ngl N]\n"
    "                   [-b N] [--queue N] [--max-body BYTES] [--api-key KEY] [--alias NAME] [--slot-save-path DIR]\n"
    "  an OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions, /v1/responses,\n"
    "  /v1/embeddings, /v1/messages (Anthropic's); GET /v1/models, /health, /slots\n"
    "  -m, --model MODEL      a Hugging Face directory or a .gguf file (default: SmolLM2-135M-Instruct)\n"
    "      --host ADDR        the IPv4 address to bind (default 127.0.0.1)\n"
    "      --port N           the port (default 8080; 0: a free one, printed)\n"
    "      --parallel N       sequences decoded together, each of -c positions (default 4)\n"
    "  -c, --ctx-size N       positions of each sequence (default 4096); on the CPU its KV cache takes memory as it\n"
    "                         grows, within INFER_KV_MEM MiB (default 90% of the memory available): a request waits,\n"
    "                         or the newest running one gives its cache back and is evaluated again later\n"
    "  -t, --threads N        threads (default: all cores)\n"
    CLI_USAGE_NUMA
    CLI_USAGE_DEVICE
    CLI_USAGE_CACHE
    "                         (fewer than all: each slot's step runs alone, as batched passes run on one device)\n"
    "  -b, --batch-size N     the most tokens a step takes: each generating sequence's next one and the\n"
    "                         waiting prompts' next chunks of up to 256, oldest first (default 512 on a GPU,\n"
    "                         256 on the CPU; one chunk at least)\n"
    "      --queue N          requests waiting beyond the running ones before 503 (default 64)\n"
    "      --max-body BYTES   the largest request body (default 1048576)\n"
    "      --timeout S        seconds for a request to come whole, and for a connection to stay idle (default 10)\n"
    "      --max-connections N  open connections served in full (default 512); more get /health and /metrics only\n"
    "      --conn-per-addr N  of them, from one address (default parallel + queue + 32)\n"
    "      --api-key KEY      requests must carry Authorization: Bearer KEY (or x-api-key: KEY)\n"
    "      --alias NAME       the model's id in responses (default: the file's name)\n"
    "      --slot-save-path DIR  where POST /slots/ID?action=save|restore keeps slots' KV caches (default: not served)\n"
    CLI_USAGE_SPEC
    "                         (each slot's; not under a grammar or with log-probabilities; /metrics counts them)\n";

enum { OPT_HOST = OPT_LOCAL, OPT_PORT, OPT_PARALLEL, OPT_BATCH, OPT_QUEUE, OPT_MAX_BODY, OPT_API_KEY, OPT_ALIAS, OPT_TIMEOUT, OPT_MAX_CONN, OPT_PER_ADDR, OPT_SLOT_PATH };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_NUMA, CLI_OPT_CTX, CLI_OPT_DEVICE, CLI_OPT_NGL, CLI_OPTS_CACHE, CLI_OPTS_SPEC,
    {"host", required_argument, NULL, OPT_HOST}, {"port", required_argument, NULL, OPT_PORT},
    {"parallel", required_argument, NULL, OPT_PARALLEL}, {"queue", required_argument, NULL, OPT_QUEUE},
    {"batch-size", required_argument, NULL, OPT_BATCH},
    {"max-body", required_argument, NULL, OPT_MAX_BODY}, {"api-key", required_argument, NULL, OPT_API_KEY},
    {"alias", required_argument, NULL, OPT_ALIAS}, {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN}, {"conn-per-addr", required_argument, NULL, OPT_PER_ADDR},
    {"slot-save-path", required_argument, NULL, OPT_SLOT_PATH}, {0},
};

// A connection, from MHD's notice of it to its close: the watchdog closes
// one whose request has not come whole within its deadline (idle, slow
// headers, a slow body), never one whose request is being answered.
typedef struct conn {
    int fd;
    uint32_t addr;      // the client's IPv4 address
    double since;       // when its current request began (the connection opened, or the last answer ended)
    int busy;           // its request is being answered
    int limited;        // beyond the pool or its address's share: /health and /metrics only, a deadline of a second
    struct conn *prev, *next;
} conn;

typedef struct {
    infer_model *m;
    serve_engine *e;
    const char *alias, *api_key;
    const char *slot_dir;            // --slot-save-path, or NULL
    size_t max_body;
    int n_ctx;
    pthread_mutex_t mu;              // guards the counts, the connections, active
    long long by_status[6];          // responses by status class (1xx .. 5xx)
    long long disconnects, requests; // clients gone before their answer; generation requests
    double started;
    conn *conns;                     // open connections
    int n_conns, max_conns, per_addr;
    double timeout;                  // seconds for a request to come whole
    int active;                      // requests being answered (waited for at shutdown)
    int stopping;                    // SIGTERM: requests are refused
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

// An error in the shape of the URL's API: Anthropic's under /v1/messages, else OpenAI's.
static int anthropic_url(const char *url) { return !strncmp(url, "/v1/messages", 12) && (!url[12] || url[12] == '/'); }

static enum MHD_Result reply_error_at(struct MHD_Connection *c, const char *url, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result reply_error_at(struct MHD_Connection *c, const char *url, int status, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!anthropic_url(url)) return reply_error(c, status, NULL, code, "%s", msg);
    char *body = serve_anth_error(status, msg);
    enum MHD_Result ok = reply(c, status, "application/json", body ? body : "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"out of memory\"}}");
    free(body);
    return ok;
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
    double probed;                  // when a keep-alive byte last went to a client that sent its FIN
    int late;                       // a waited-for answer sent as it comes (the client sent its FIN: answer_read)
    char *all;                      // (waited for, or tools) the text so far
    size_t n_all;
    serve_tools *tools;             // tool calls asked for: the answer parsed once whole (serve_tools.c)
    serve_anth *anth;               // Anthropic's Messages API: its answer's shape and events (NULL: OpenAI's)
    serve_resp *resp;               // OpenAI's Responses API: its answer's shape and events
} stream;

// The client is gone: an error on its socket (a reset: a write after it
// closed). Its FIN alone is not enough: a client may shut down its write
// side once the request is sent and still read the answer (peer_done).
static int hung_up(int fd) {
    struct pollfd pf = {fd, 0, 0};
    return fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR));
}

// The client has sent its FIN: gone, or only done writing. A byte written
// to it tells which (a closed socket answers with a reset: hung_up).
static int peer_done(int fd) {
    struct pollfd pf = {fd, POLLRDHUP, 0};
    return fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & POLLRDHUP);
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
    cJSON_AddItemToObject(c, "logprobs", s->chat ? serve_chat_logprobs(s->sv->m, v, n) : serve_cmpl_logprobs(s->sv->m, v, n, &s->lp_offset));
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
            if (text) serve_add_text(d, "content", text, strlen(text));
        } else {
            serve_add_text(c, "text", text ? text : "", text ? strlen(text) : 0);
        }
        if (s->logprobs && text && *text) chunk_logprobs(s, c);
        else cJSON_AddNullToObject(c, "logprobs");
        if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
        else cJSON_AddNullToObject(c, "finish_reason");
        cJSON_AddItemToArray(ch, c);
    }
    return j;
}

static void append(stream *s, const char *b, size_t n) {
    char *p = realloc(s->pend, s->pend_len + n + 1);
    if (p) memcpy(p + s->pend_len, b, n), s->pend = p, s->pend_len += n, p[s->pend_len] = 0;
}

// A client that sent its FIN gets a byte that changes nothing (an SSE
// comment, or JSON's whitespace) every 200 ms while it waits: if it has
// closed, its reset ends the answer (hung_up); if it only shut down its
// writing, it reads on.
static int probe_due(stream *s) {
    if (!peer_done(s->fd) || cli_now() - s->probed < 0.2) return 0;
    s->probed = cli_now();
    return 1;
}

// bytes made elsewhere (serve_anthropic.c's events) appended and freed
static void append_owned(stream *s, char *b) {
    if (b) append(s, b, strlen(b));
    free(b);
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

// A streamed answer with tools, once whole: a delta of each tool call (OpenAI's index, id, name and
// arguments in one), or the answer's text; 1 when it called tools.
static int tool_chunks(stream *s) {
    cJSON *content, *calls;
    serve_tools_answer(s->tools, s->all ? s->all : "", s->n_all, &content, &calls);
    int i = 0;
    if (calls && cJSON_IsString(content)) emit(s, chunk_json(s, NULL, content->valuestring, NULL)); // (text beside the calls)
    for (cJSON *c = calls ? calls->child : NULL; c; c = c->next, i++) {
        cJSON *j = chunk_json(s, NULL, "", NULL), *d = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "delta");
        cJSON_DeleteItemFromObject(d, "content");
        cJSON *one = cJSON_Duplicate(c, 1);
        cJSON_AddNumberToObject(one, "index", i);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), one);
        emit(s, j);
    }
    if (!calls) emit(s, chunk_json(s, NULL, cJSON_IsString(content) ? content->valuestring : s->all ? s->all : "", NULL));
    cJSON_Delete(content), cJSON_Delete(calls);
    return i > 0;
}

enum { STREAM_PAUSE_MS = 20 };

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream *s = cls;
    (void)pos;
    while (s->pend_at >= s->pend_len) {
        s->pend_len = s->pend_at = 0;
        if (s->phase == 4) return MHD_CONTENT_READER_END_OF_STREAM;
        if (s->phase == 0) {
            if (s->anth) append_owned(s, serve_anth_start(s->anth));
            else if (s->resp) append_owned(s, serve_resp_start(s->resp));
            else if (s->chat) emit(s, chunk_json(s, "assistant", "", NULL));
            s->phase = 1;
            continue;
        }
        if (s->phase == 3) {
            emit(s, NULL);
            s->phase = 4;
            continue;
        }
        if (hung_up(s->fd)) return MHD_CONTENT_READER_END_WITH_ERROR; // (stream_free cancels the task)
        if (probe_due(s)) {
            append(s, ":\n\n", 3);
            continue;
        }
        // (after a delta has gone out, a pause before the next wait: the text of the tokens made
        // meanwhile goes in one write, and this thread wakes once for them, not once a token, taking
        // less time from the engine's threads where cores are few)
        if (s->pause) nanosleep(&(struct timespec){0, STREAM_PAUSE_MS * 1000000L}, NULL), s->pause = 0;
        char *text;
        size_t len;
        serve_state st;
        serve_task_wait(s->t, s->from, 50, &text, &len, &st);
        if (!text) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (len && s->tools) { // (the answer is JSON to parse: kept until it is whole)
            char *p = realloc(s->all, s->n_all + len + 1);
            if (p) memcpy(p + s->n_all, text, len), s->all = p, s->n_all += len, p[s->n_all] = 0;
            s->from += len, len = 0;
        }
        if (len && s->anth) append_owned(s, serve_anth_delta(s->anth, text, len)), s->from += len;
        else if (len && s->resp) append_owned(s, serve_resp_delta(s->resp, text, len)), s->from += len;
        else if (len) emit(s, chunk_json(s, NULL, text, NULL)), s->from += len;
        free(text);
        s->pause = len && !st.done;
        if (st.done && s->phase == 1 && (s->anth || s->resp)) { // (their streams end with their last event: no [DONE])
            append_owned(s, s->anth ? serve_anth_end(s->anth, s->t, &st, s->all, s->n_all) : serve_resp_end(s->resp, &st));
            s->phase = 4;
            continue;
        }
        if (st.done && s->phase == 1) {
            if (!st.finish) { // failed or cancelled: an error event instead of a finish, then [DONE]
                s->phase = 3;
                cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
                cJSON_AddStringToObject(e, "message", st.failed ? st.error : "cancelled");
                cJSON_AddStringToObject(e, "type", "server_error");
                cJSON_AddNumberToObject(e, "code", st.stopping ? 503 : 500);
                emit(s, j);
                continue;
            }
            if (s->tools && tool_chunks(s)) st.finish = "tool_calls";
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
    free(s->pend), free(s->all);
    serve_tools_free(s->tools);
    serve_anth_free(s->anth);
    serve_resp_free(s->resp);
    free(s);
}

// A waited-for answer's body once the task is done (st): the completion, or
// the error; *status its HTTP status. malloc'd.
static char *answer_body(stream *s, const serve_state *st, int *status) {
    if (s->anth) return serve_anth_message(s->anth, s->t, st, s->all, s->n_all, status);
    if (s->resp) return serve_resp_message(s->resp, st, s->all, s->n_all, status);
    server *sv = s->sv;
    serve_logprob *lpv = NULL;
    int lp_n = s->logprobs && st->finish ? serve_task_logprobs(s->t, 0, &lpv) : -1;
    const char *finish = st->finish;
    cJSON *j = cJSON_CreateObject();
    if (!st->finish) {
        serve_failed_error(j, st, status);
    } else {
        *status = 200;
        cJSON *ch, *one = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "id", s->id);
        cJSON_AddStringToObject(j, "object", s->chat ? "chat.completion" : "text_completion");
        cJSON_AddNumberToObject(j, "created", (double)time(NULL));
        cJSON_AddStringToObject(j, "model", sv->alias);
        ch = cJSON_AddArrayToObject(j, "choices");
        cJSON_AddNumberToObject(one, "index", 0);
        if (s->chat) {
            cJSON *msg = cJSON_AddObjectToObject(one, "message"), *content = NULL, *calls = NULL;
            cJSON_AddStringToObject(msg, "role", "assistant");
            if (s->tools && serve_tools_answer(s->tools, s->all ? s->all : "", s->n_all, &content, &calls)) {
                if (cJSON_IsString(content)) cJSON_AddItemToObject(msg, "content", content), content = NULL; // (text beside the calls)
                else cJSON_AddNullToObject(msg, "content");
                cJSON_AddItemToObject(msg, "tool_calls", calls), calls = NULL;
                finish = "tool_calls";
            } else if (cJSON_IsString(content)) {
                cJSON_AddItemToObject(msg, "content", content), content = NULL;
            } else {
                serve_add_text(msg, "content", s->all ? s->all : "", s->all ? s->n_all : 0);
            }
            cJSON_Delete(content), cJSON_Delete(calls);
        } else {
            serve_add_text(one, "text", s->all ? s->all : "", s->all ? s->n_all : 0);
        }
        if (lp_n >= 0) {
            size_t off = 0;
            cJSON_AddItemToObject(one, "logprobs", s->chat ? serve_chat_logprobs(sv->m, lpv, lp_n) : serve_cmpl_logprobs(sv->m, lpv, lp_n, &off));
        } else {
            cJSON_AddNullToObject(one, "logprobs");
        }
        cJSON_AddStringToObject(one, "finish_reason", finish);
        cJSON_AddItemToArray(ch, one);
        cJSON_AddItemToObject(j, "usage", usage_json(st));
    }
    free(lpv);
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return txt;
}

// Waits (at most timeout_ms) for more of a waited-for answer's text; 1 when
// the task is done.
static int gather(stream *s, int timeout_ms, serve_state *st) {
    char *text;
    size_t len;
    serve_task_wait(s->t, s->n_all, timeout_ms, &text, &len, st);
    if (!text) return 0;
    char *p = realloc(s->all, s->n_all + len + 1);
    if (p) memcpy(p + s->n_all, text, len + 1), s->all = p, s->n_all += len;
    free(text);
    return st->done;
}

// A waited-for answer to a client that sent its FIN (its 200 went out
// then): whitespace while the text comes (probing the client), then the
// JSON (an error object when the generation failed after all).
static ssize_t answer_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream *s = cls;
    (void)pos;
    while (s->pend_at >= s->pend_len) {
        s->pend_len = s->pend_at = 0;
        if (s->phase == 4) return MHD_CONTENT_READER_END_OF_STREAM;
        if (hung_up(s->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
        serve_state st;
        if (gather(s, 200, &st)) {
            int status;
            char *body = answer_body(s, &st, &status);
            if (!body) return MHD_CONTENT_READER_END_WITH_ERROR;
            append(s, body, strlen(body));
            free(body);
            s->phase = 4;
        } else if (probe_due(s)) {
            append(s, " ", 1);
        }
    }
    size_t n = s->pend_len - s->pend_at < max ? s->pend_len - s->pend_at : max;
    memcpy(buf, s->pend + s->pend_at, n);
    s->pend_at += n;
    return (ssize_t)n;
}

// (anth, resp: an answer of Anthropic's Messages API or OpenAI's Responses API, which the stream takes)
static enum MHD_Result generate(struct MHD_Connection *c, server *sv, serve_gen *g, int chat, serve_anth *anth, serve_resp *resp) {
    stream *s = calloc(1, sizeof *s);
    if (!s) return serve_gen_free(g), serve_anth_free(anth), serve_resp_free(resp), reply_error(c, 500, NULL, NULL, "out of memory");
    s->sv = sv, s->chat = chat, s->anth = anth, s->resp = resp, s->include_usage = g->include_usage, s->created = (long)time(NULL), s->logprobs = g->r.top_logprobs >= 0;
    s->tools = g->tools, g->tools = NULL;
    snprintf(s->id, sizeof s->id, "%s-%016llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)cli_seed());
    int stream_it = g->stream;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    s->t = serve_submit(sv->e, &g->r);
    if (!s->t) { // 503 with Retry-After
        serve_tools_free(s->tools), serve_anth_free(anth), serve_resp_free(resp);
        free(s);
        const char *body = anth ? "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"the server is busy (its queue "
                                  "is full) or stopping; try again shortly\"}}"
                                : "{\"error\":{\"message\":\"the server is busy (its queue is full) or stopping; try again shortly\","
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
    // waited for: the whole text, then one response; a client that sends its FIN meanwhile gets its 200 now
    // and the answer as it comes (answer_read: a closed one is found by its reset)
    serve_state st = {0};
    while (!gather(s, 100, &st)) {
        if (hung_up(s->fd)) { // the client is gone: its slot is freed
            s->phase = 0;
            stream_free(s);
            return MHD_NO;
        }
        if (peer_done(s->fd)) {
            s->late = 1;
            struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, answer_read, s, stream_free);
            if (!r) return stream_free(s), MHD_NO;
            MHD_add_response_header(r, "Content-Type", "application/json");
            count(sv, 200, 0);
            enum MHD_Result ok = MHD_queue_response(c, 200, r);
            MHD_destroy_response(r);
            return ok;
        }
    }
    int status;
    char *body = answer_body(s, &st, &status);
    s->phase = 4;
    stream_free(s);
    if (!body) return reply(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
    enum MHD_Result ok = reply(c, status, "application/json", body);
    free(body);
    return ok;
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
    return generate(c, sv, &g, chat, NULL, NULL);
}

// OpenAI's POST /v1/responses (serve_responses.c)
static enum MHD_Result post_responses(struct MHD_Connection *c, server *sv, request *rq) {
    serve_check k = {0};
    serve_gen g;
    uint64_t id = cli_seed();
    serve_resp *r = serve_resp_parse(&k, sv->m, sv->n_ctx, sv->alias, rq->body, rq->len, id, &g);
    if (!r) {
        serve_gen_free(&g);
        return reply_error(c, k.status, k.param[0] ? k.param : NULL, strstr(k.msg, "context holds") ? "context_length_exceeded" : NULL, "%s", k.msg);
    }
    return generate(c, sv, &g, 1, NULL, r);
}

// Anthropic's POST /v1/messages and /v1/messages/count_tokens (serve_anthropic.c)
static enum MHD_Result post_messages(struct MHD_Connection *c, server *sv, request *rq, const char *url, int post) {
    int count = !strcmp(url, "/v1/messages/count_tokens");
    if (!count && strcmp(url, "/v1/messages")) return reply_error_at(c, url, 404, NULL, "no such endpoint: %s", url);
    if (!post) return reply_error_at(c, url, 405, NULL, "%s: use POST", url);
    if (infer_model_is_encoder(sv->m))
        return reply_error_at(c, url, 400, NULL, "%s: the served model is an encoder (BERT): it makes embeddings (POST /v1/embeddings), not text", url);
    serve_check k = {0};
    serve_gen g;
    serve_parse_messages(&k, sv->m, sv->n_ctx, rq->body, rq->len, count, cli_seed(), &g);
    if (k.status) return serve_gen_free(&g), reply_error_at(c, url, k.status, NULL, "%s", k.msg);
    if (count) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "input_tokens", g.r.n_prompt);
        serve_gen_free(&g);
        return reply_json(c, 200, j);
    }
    serve_anth *a = serve_anth_new(sv->m, sv->alias, &g, cli_seed());
    if (!a) return serve_gen_free(&g), reply_error_at(c, url, 500, NULL, "out of memory");
    return generate(c, sv, &g, 1, a, NULL);
}

// ---------------------------------------------------------------------------
// the Prometheus counts (serve_misc.c writes them)

static enum MHD_Result metrics(struct MHD_Connection *c, server *sv) {
    serve_counts k;
    serve_engine_counts(sv->e, &k);
    pthread_mutex_lock(&sv->mu);
    long long st[6], disc = sv->disconnects;
    memcpy(st, sv->by_status, sizeof st);
    pthread_mutex_unlock(&sv->mu);
    char *b = serve_metrics_text(&k, st, disc);
    enum MHD_Result ok = b ? reply(c, 200, "text/plain; version=0.0.4", b) : reply_error(c, 500, NULL, NULL, "out of memory");
    free(b);
    return ok;
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
            return reply_error_at(c, url, 413, NULL, "the body (%s bytes) is larger than this server's limit of %zu bytes", cl, sv->max_body);
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
    // the request is whole: it is answered now, with no deadline
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn *cn = ci ? ci->socket_context : NULL;
    int limited = 0;
    pthread_mutex_lock(&sv->mu);
    if (cn && !cn->busy) cn->busy = 1, sv->active++;
    if (cn) limited = cn->limited;
    pthread_mutex_unlock(&sv->mu);
    if (rq->too_big) return reply_error_at(c, url, 413, NULL, "the body is larger than this server's limit of %zu bytes", sv->max_body);
    if (limited && strcmp(url, "/health") && strcmp(url, "/metrics"))
        return reply_error_at(c, url, 503, NULL, "too many connections (this server's pool, or this address's share of it, is full); "
                                               "/health and /metrics are still answered");
    if (sv->api_key && strcmp(url, "/health") && strcmp(url, "/") && strcmp(url, "/index.html")) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                   *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"); // (Anthropic's)
        if ((!auth || strncasecmp(auth, "Bearer ", 7) || strcmp(auth + 7 + strspn(auth + 7, " "), sv->api_key)) && (!xkey || strcmp(xkey, sv->api_key)))
            return reply_error_at(c, url, 401, "invalid_api_key", "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)");
    }
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST"); // (HEAD: MHD sends no body)
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
    int tok = !strcmp(url, "/tokenize"), detok = !strcmp(url, "/detokenize"), emb = !strcmp(url, "/v1/embeddings");
    if (tok || detok || emb) { // (answered whole by serve_misc.c's and serve_embed.c's)
        if (!post) return reply_error(c, 405, NULL, NULL, "%s %s: use POST", method, url);
        serve_check k = {0};
        char *out;
        if (emb ? serve_embeddings(&k, sv->m, sv->alias, sv->n_ctx, rq->body, rq->len, &out)
                : serve_tokenize_answer(&k, sv->m, rq->body, rq->len, detok, &out))
            return reply_error(c, k.status, k.param[0] ? k.param : NULL, NULL, "%s", k.msg);
        enum MHD_Result ok = reply(c, 200, "application/json", out);
        free(out);
        return ok;
    }
    int chat = !strcmp(url, "/v1/chat/completions"), responses = !strcmp(url, "/v1/responses");
    if (chat || responses || !strcmp(url, "/v1/completions")) {
        if (!post) return reply_error(c, 405, NULL, NULL, "%s %s: use POST", method, url);
        if (infer_model_is_encoder(sv->m))
            return reply_error(c, 400, "model", "model_not_supported", "%s: the served model is an encoder (BERT): it makes embeddings "
                               "(POST /v1/embeddings), not text", url);
        return responses ? post_responses(c, sv, rq) : post_generate(c, sv, rq, chat);
    }
    if (anthropic_url(url)) return post_messages(c, sv, rq, url, post);
    if (!strcmp(url, "/slots") || !strncmp(url, "/slots/", 7)) { // (serve_slots.c)
        serve_check k = {0};
        char *out;
        if (serve_slots_answer(&k, sv->e, sv->slot_dir, url, method, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action"),
                               rq->body, rq->len, &out))
            return reply_error(c, k.status, k.param[0] ? k.param : NULL, NULL, "%s", k.msg);
        enum MHD_Result ok = reply(c, 200, "application/json", out);
        free(out);
        return ok;
    }
    return reply_error(c, 404, NULL, NULL, "no such endpoint: %s %s", method, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    server *sv = cls;
    (void)why;
    request *rq = *con_cls;
    if (rq) free(rq->body), free(rq);
    *con_cls = NULL;
    // the next request's deadline runs from now
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn *cn = ci ? ci->socket_context : NULL;
    pthread_mutex_lock(&sv->mu);
    if (cn && cn->busy) sv->active--;
    if (cn) cn->busy = 0, cn->since = cli_now();
    pthread_mutex_unlock(&sv->mu);
}

// ---------------------------------------------------------------------------
// connections: each noted from open to close; the watchdog closes those whose
// request has not come whole in time

static void notify_conn(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    server *sv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn *cn = calloc(1, sizeof *cn);
        *socket_context = cn;
        if (!cn) return;
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        cn->fd = fi ? fi->connect_fd : -1;
        cn->addr = ai && ai->client_addr && ai->client_addr->sa_family == AF_INET ? ((const struct sockaddr_in *)ai->client_addr)->sin_addr.s_addr : 0;
        cn->since = cli_now();
        pthread_mutex_lock(&sv->mu);
        int same = 0;
        for (const conn *x = sv->conns; x; x = x->next) same += x->addr == cn->addr;
        cn->limited = sv->n_conns >= sv->max_conns || same >= sv->per_addr;
        cn->next = sv->conns;
        if (sv->conns) sv->conns->prev = cn;
        sv->conns = cn, sv->n_conns++;
        pthread_mutex_unlock(&sv->mu);
    } else if (*socket_context) {
        conn *cn = *socket_context;
        pthread_mutex_lock(&sv->mu);
        if (cn->prev) cn->prev->next = cn->next;
        else sv->conns = cn->next;
        if (cn->next) cn->next->prev = cn->prev;
        sv->n_conns--;
        pthread_mutex_unlock(&sv->mu);
        free(cn);
        *socket_context = NULL;
    }
}

static volatile int g_watch_stop;

// Every 100 ms: a connection whose request has not come whole within the
// deadline (idle between requests, headers or a body sent slowly) is shut
// down; its thread then ends it. A limited connection has a second.
static void *watchdog(void *arg) {
    server *sv = arg;
    while (!__atomic_load_n(&g_watch_stop, __ATOMIC_ACQUIRE)) {
        nanosleep(&(struct timespec){0, 100000000L}, NULL);
        double now = cli_now();
        pthread_mutex_lock(&sv->mu); // (a connection is unlinked under it before its socket closes)
        for (conn *x = sv->conns; x; x = x->next)
            if (!x->busy && x->fd >= 0 && now - x->since > (x->limited ? 1.0 : sv->timeout)) shutdown(x->fd, SHUT_RDWR), x->fd = -1;
        pthread_mutex_unlock(&sv->mu);
    }
    return NULL;
}

int cmd_serve(int argc, char **argv) {
    const char *host = "127.0.0.1", *device = NULL, *api_key = NULL, *alias = NULL, *slot_dir = NULL;
    int spec = 0;
    cli_draft dr;
    cli_draft_init(&dr);
    long port = 8080, parallel = 4, batch = 0, queue = 64, max_body = 1 << 20, timeout = 10, max_conn = 512, per_addr = 0;
    int opt;
    cli_opts o;
    cli_opts_init(&o, "serve", g_usage);
    o.n_ctx = 4096;
    while ((opt = cli_next(&o, argc, argv, "hm:t:c:b:", g_opts)) > 0) {
        switch (opt) {
        case OPT_HOST: host = optarg; break;
        case OPT_SPEC: if ((spec = cli_spec_k("serve", argc, argv, optarg)) < 0) return 1; break;
        case OPT_DRAFT: case OPT_DRAFT_MAX: case OPT_DRAFT_PMIN: if (cli_draft_opt(&dr, "serve", opt, optarg)) return 1; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_API_KEY: api_key = optarg; break;
        case OPT_ALIAS: alias = optarg; break;
        case OPT_SLOT_PATH: slot_dir = optarg; break;
        case OPT_PORT: if ((port = cli_parse_count("--port", optarg, 65535)) < 0) return 1; break;
        case OPT_PARALLEL: if ((parallel = cli_parse_count("--parallel", optarg, 256)) < 1) return parallel < 0 ? 1 : cli_error("serve: --parallel must be at least 1"); break;
        case 'b':
        case OPT_BATCH: if ((batch = cli_parse_count("--batch-size", optarg, 1 << 20)) < 1) return batch < 0 ? 1 : cli_error("serve: --batch-size must be at least 1"); break;
        case OPT_QUEUE: if ((queue = cli_parse_count("--queue", optarg, 1 << 20)) < 0) return 1; break;
        case OPT_TIMEOUT: if ((timeout = cli_parse_count("--timeout", optarg, 86400)) < 1) return timeout < 0 ? 1 : cli_error("serve: --timeout must be at least 1"); break;
        case OPT_MAX_CONN: if ((max_conn = cli_parse_count("--max-connections", optarg, 65536)) < 1) return max_conn < 0 ? 1 : cli_error("serve: --max-connections must be at least 1"); break;
        case OPT_PER_ADDR: if ((per_addr = cli_parse_count("--conn-per-addr", optarg, 65536)) < 1) return per_addr < 0 ? 1 : cli_error("serve: --conn-per-addr must be at least 1"); break;
        case OPT_MAX_BODY: if ((max_body = cli_parse_count("--max-body", optarg, 1L << 30)) < 1) return max_body < 0 ? 1 : cli_error("serve: --max-body must be at least 1"); break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("serve: unexpected argument \"%s\"", argv[optind]);
    if (spec && dr.model) return cli_error("serve: give --spec-ngram or --model-draft, not both");
    if (device && strcmp(device, "cpu") && strcmp(device, "cuda")) return cli_error("serve: --device must be cpu or cuda (got \"%s\")", device);
    struct stat sd;
    if (slot_dir && (stat(slot_dir, &sd) || !S_ISDIR(sd.st_mode))) return cli_error("serve: --slot-save-path \"%s\" is not a directory", slot_dir);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET, addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) return cli_error("serve: --host \"%s\" is not an IPv4 address", host);
    if (!o.threads) cli_set_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
    const char *model = o.model;
    if (!model && !(model = cli_chat_model())) return 1;
    server sv = {.slot_dir = slot_dir};
    pthread_mutex_init(&sv.mu, NULL);
    g_sv = &sv;
    if (cli_model_load(model, &sv.m)) return cli_error("%s", infer_last_error());
    if (infer_model_is_encoder(sv.m)) { // (embeddings only, on the HTTP threads: one small slot; BERT's 512 positions)
        parallel = 1;
        if (o.n_ctx > 512) o.n_ctx = 512;
    }
    char err[256];
    int rank = infer_model_tp_rank(sv.m);
    if (rank > 0) { // (--tp N: rank 0 serves; this rank evaluates what it is told)
        int rc = serve_follow(sv.m, (int)parallel, (int)o.n_ctx, device, o.ngl, err, sizeof err);
        infer_model_free(sv.m);
        return rc ? cli_error("serve, rank %d: %s", rank, err) : 0;
    }
    if (!(sv.e = serve_engine_new(sv.m, (int)parallel, (int)o.n_ctx, device, o.ngl, (int)queue, (int)batch, err, sizeof err))) {
        infer_model_free(sv.m);
        return cli_error("serve: %s", err);
    }
    serve_engine_set_spec(sv.e, spec);
    if (dr.model && (cli_model_load(dr.model, &dr.m) || serve_engine_set_draft(sv.e, dr.m, dr.max, dr.p_min, err, sizeof err))) {
        if (!dr.m) snprintf(err, sizeof err, "--model-draft %s: %s", dr.model, infer_last_error());
        serve_engine_free(sv.e), infer_model_free(dr.m), infer_model_free(sv.m);
        return cli_error("serve: %s", err);
    }
    sv.n_ctx = serve_engine_n_ctx(sv.e), sv.api_key = api_key, sv.max_body = (size_t)max_body;
    sv.timeout = (double)timeout, sv.max_conns = (int)max_conn, sv.per_addr = per_addr ? (int)per_addr : (int)(parallel + queue + 32);
    // a socket a connection, and some for the reserve: the soft limit of open files raised to the hard one where it is lower
    struct rlimit nf;
    if (!getrlimit(RLIMIT_NOFILE, &nf) && nf.rlim_cur < nf.rlim_max) nf.rlim_cur = nf.rlim_max, setrlimit(RLIMIT_NOFILE, &nf);
    unsigned hard = (unsigned)max_conn + 64; // (past the pool: limited connections, for /health and /metrics)
    if (!getrlimit(RLIMIT_NOFILE, &nf) && nf.rlim_cur != RLIM_INFINITY && nf.rlim_cur < (rlim_t)hard + 64)
        hard = nf.rlim_cur > 128 ? (unsigned)nf.rlim_cur - 64 : 64;
    const char *base = strrchr(model, '/');
    sv.alias = alias ? alias : base && base[1] ? base + 1 : model;
    size_t kv = serve_engine_kv_per_pos(sv.e) * (size_t)sv.n_ctx;
    serve_counts k0;
    serve_engine_counts(sv.e, &k0);
    fprintf(stderr, "infer serve: %s, %ld slots of %d positions (KV cache %s, %.1f MiB in all%s), %s%s\n", sv.alias, parallel, sv.n_ctx,
            serve_engine_kv_types(sv.e), (double)kv * (double)parallel / (1 << 20),
            k0.kv_backed < k0.kv_bytes ? ", taken as the sequences grow" : "", serve_engine_backend(sv.e),
            serve_engine_split(sv.e) ? " and cpu (-ngl: the slots' steps one at a time)" : "");
    if (*serve_engine_kv_note(sv.e))
        fprintf(stderr, "infer serve: warning: a slot's whole context does not fit: %s; a request runs only where its prompt and "
                "max_tokens fit (a smaller -c makes every request fit)\n", serve_engine_kv_note(sv.e));

    // SIGINT / SIGTERM end the server: blocked here, waited for below
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    // (MHD's own timeout, of inactivity, stays long: a request being answered may send nothing for a while; the
    // watchdog holds the deadlines of requests coming in)
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port,
                                            NULL, NULL, handle, &sv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_CONNECTION_LIMIT, hard, MHD_OPTION_CONNECTION_TIMEOUT,
                                            (unsigned)600, MHD_OPTION_NOTIFY_COMPLETED, completed, &sv,
                                            MHD_OPTION_NOTIFY_CONNECTION, notify_conn, &sv, MHD_OPTION_END);
    pthread_t wd;
    int wd_ok = d && !pthread_create(&wd, NULL, watchdog, &sv);
    if (!d) {
        serve_engine_free(sv.e), infer_model_free(dr.m), infer_model_free(sv.m);
        return cli_error("serve: cannot listen on %s:%ld: %s", host, port, strerror(errno));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://%s:%u\n", host, di ? di->port : (unsigned)port);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "infer serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_quiesce_daemon(d);  // no new connections
    serve_engine_stop(sv.e); // running and queued requests end: streams get an error event and [DONE], waiting ones a 503
    for (int i = 0; i < 30; i++) { // (their answers go out: at most 3 s)
        pthread_mutex_lock(&sv.mu);
        int left = sv.active;
        pthread_mutex_unlock(&sv.mu);
        if (!left) break;
        nanosleep(&(struct timespec){0, 100000000L}, NULL);
    }
    MHD_stop_daemon(d);      // (joins the connections' threads)
    __atomic_store_n(&g_watch_stop, 1, __ATOMIC_RELEASE);
    if (wd_ok) pthread_join(wd, NULL);
    serve_engine_free(sv.e);
    infer_model_free(dr.m);
    infer_model_free(sv.m);
    return 0;
}

#else
int cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    return cli_error("serve: this build has no HTTP server (libmicrohttpd was not found at configure time; scripts/setup.sh installs it)");
}
#endif
