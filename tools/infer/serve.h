// The server's engine (serve_engine.c): one thread owns the model's contexts
// (--parallel slots of -c positions each) and runs every step: it admits
// queued tasks into free slots, evaluates at most one prompt chunk, and
// decodes one token for every generating slot in one batched call. HTTP
// threads (cmd_serve.c) submit tasks and wait on them; a task's text grows
// as tokens come, never splitting a UTF-8 character or showing part of a
// stop string.
#ifndef INFER_TOOLS_SERVE_H
#define INFER_TOOLS_SERVE_H

#include "infer.h"

#include <stddef.h>

typedef struct serve_engine serve_engine;
typedef struct serve_task serve_task;

typedef struct {
    int32_t *prompt;          // the tokens (the task takes the array)
    int n_prompt;
    int max_tokens;           // <= 0: until the context is full
    infer_sampling sampling;
    char **stop;              // stop strings (the task takes them), up to 16
    int n_stop;
    int top_logprobs;         // -1: no log-probabilities; else each token's and its top n (n <= 20)
    int ignore_eos;           // generate past end-of-generation tokens (llama-server's ignore_eos, for benchmarks)
    infer_grammar *grammar;   // or NULL: the text must match it, and ends ("stop") when complete (the task takes it)
} serve_request;

// A generated token's log-probability under the model (its logits'
// log-softmax) and the top alternatives'.
typedef struct {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[20];
    float top_logprob[20];
} serve_logprob;

// What a task has produced so far (serve_task_wait).
typedef struct {
    int done;                 // no more text will come
    const char *finish;       // when done: "stop", "length", or NULL after a failure or a cancel
    int n_prompt, n_gen;      // tokens
    int n_cached;             // prompt tokens a slot's cache already held
    int failed;               // the engine failed on it (error says why)
    int stopping;             // ... because the server is stopping (a 503: try again elsewhere or later)
    char error[256];
} serve_state;

// The engine over `slots` contexts of n_ctx positions each on device ("cpu"
// or "cuda"; NULL: the GPU where there is one) with ngl layers on a GPU (-1:
// all; fewer: each step runs the slots one after the other, as batched
// passes run on one device), queueing at most queue_max waiting tasks, a
// step taking at most step_tokens tokens (every generating slot's next one
// and waiting prompts' chunks, oldest first; one chunk at least; 0: 512 on a
// GPU, 256 on the CPU); NULL with
// the reason in err.
serve_engine *serve_engine_new(infer_model *m, int slots, int n_ctx, const char *device, long ngl, int queue_max, int step_tokens,
                               char *err, size_t errlen);
// A rank other than 0 of a job (infer serve --tp N): the same slots and
// placement as rank 0's engine, evaluating what rank 0 tells it each step,
// until rank 0's engine stops (0) or the job fails (-1, err says why).
int serve_follow(infer_model *m, int slots, int n_ctx, const char *device, long ngl, char *err, size_t errlen);
// Stops the engine: running and queued tasks end (done, finish NULL), the
// thread is joined, and later submissions are refused. Idempotent.
void serve_engine_stop(serve_engine *e);
// Stops it (when running) and frees the contexts.
void serve_engine_free(serve_engine *e);
int serve_engine_n_ctx(const serve_engine *e);
// The backend the slots run on ("cpu", "cuda"), and whether they are split between the GPU and the CPU (-ngl).
const char *serve_engine_backend(const serve_engine *e);
// a slot's KV cache: bytes per position, and its types ("f16 / f16")
size_t serve_engine_kv_per_pos(const serve_engine *e);
// where a slot's whole context does not fit the KV caches' memory (caches that grow: the CPU's; a GPU's
// under INFER_CUDA_KV_VM): why, else ""
const char *serve_engine_kv_note(const serve_engine *e);
const char *serve_engine_kv_types(const serve_engine *e);
int serve_engine_split(const serve_engine *e);

// The slots' caches (serve_slots.c's /slots), worked on by the engine thread
// between steps: SLOT_SAVE / SLOT_RESTORE a slot's cached tokens and their KV
// cache to / from path (infer_ctx_state_save / _load), SLOT_ERASE them,
// SLOT_INFO its state. status 0, or the HTTP status and msg (409: a request
// holds the slot; 503: the server is stopping).
enum { SLOT_INFO, SLOT_SAVE, SLOT_RESTORE, SLOT_ERASE };
typedef struct {
    int op, slot;       // slot: 0 .. serve_engine_n_slots - 1
    const char *path;
    int n_tokens;       // positions saved, restored or erased; SLOT_INFO: cached
    int busy;           // a request holds the slot
    size_t bytes;       // the file's
    double ms;
    int status;
    char msg[256];
} serve_slot_op;
// Does ops[0, n) on the engine thread, one after the other, and returns when they are done.
void serve_engine_slot_ops(serve_engine *e, serve_slot_op *ops, int n);
int serve_engine_n_slots(const serve_engine *e);
// Queues a request (taking its arrays, freed also on failure): the task, or
// NULL when the queue is full.
serve_task *serve_submit(serve_engine *e, serve_request *r);
// Waits until the task's text is longer than `from` bytes, or it is done, or
// timeout_ms pass; *chunk (malloc'd, NUL-terminated, the caller frees)
// gets the text from `from` on, *st the task's state.
void serve_task_wait(serve_task *t, size_t from, int timeout_ms, char **chunk, size_t *len, serve_state *st);
// The log-probabilities of generated tokens from..: a malloc'd copy (the
// caller frees) and its count.
int serve_task_logprobs(serve_task *t, int from, serve_logprob **out);
// The task is not wanted any more: its slot is freed at the next step.
void serve_task_cancel(serve_task *t);
// The HTTP side is done with it (the engine frees it when both are).
void serve_task_release(serve_task *t);

// A generation request's body checked (serve_request.c): status 0, or the
// HTTP status to answer with, the parameter at fault and the message.
typedef struct {
    int status;
    char param[64], msg[256];
} serve_check;
typedef struct serve_tools serve_tools;
typedef struct {
    serve_request r;
    int stream, include_usage;
    serve_tools *tools;       // tool calls asked for (serve_tools.c), or NULL
} serve_gen;
// Parses and checks a body of /v1/chat/completions (chat) or /v1/completions
// into *g (always initialized; free it with serve_gen_free): the fields, the
// grammar, the chat template rendered, the prompt tokenized and fitted to
// n_ctx. seed: the sampling seed when the request gives none.
void serve_parse_generate(serve_check *k, infer_model *m, int n_ctx, const char *body, size_t len, int chat, uint64_t seed,
                          serve_gen *g);
void serve_gen_free(serve_gen *g);

// Tool calls (serve_tools.c). A chat body's tools, tool_choice and
// parallel_tool_calls checked (k set on a bad one): where tools are to be
// offered, g->tools and the answer's grammar are set; where tools are offered
// or the conversation holds tool turns, the messages the chat template gets
// (the functions in the system turn, the tool turns as text), else NULL.
struct cJSON *serve_tools_parse(serve_check *k, infer_model *m, const struct cJSON *body, serve_gen *g);
void serve_tools_free(serve_tools *t);
// The answer text parsed: 1 with *calls OpenAI's tool_calls array (and
// *content text beside them, or NULL); else 0 with *content the answer's text (NULL: the text is not in the answer's
// form -- cut short -- and stands as it is). The caller frees both.
int serve_tools_answer(serve_tools *t, const char *text, size_t n, struct cJSON **content, struct cJSON **calls);
// /metrics' counts of answers to requests that offered tools, of those that
// called tools, and of the calls (each counted as its request's tools are freed).
void serve_tools_counts(long long *answers, long long *call_answers, long long *calls);
// Tool calls in a model's own format (serve_tools_native.c), where its chat
// template renders the tools: serve_tools_parse then returns {"messages",
// "tools", "prefill"}, which serve_tools_tokenize renders and tokenizes into
// g's prompt (the prefill, the call's opening markup, after it).
enum { TOOLS_GENERIC, TOOLS_HERMES, TOOLS_LLAMA3, TOOLS_MISTRAL, TOOLS_MISTRAL_ARGS };
// the format a chat template's source writes tool calls in (TOOLS_GENERIC: none it knows)
int serve_tools_format(const char *tmpl);
// OpenAI's messages as the template takes them (tool_calls' arguments objects,
// a tool result named after its call), or NULL with k set.
struct cJSON *serve_tools_native_messages(serve_check *k, int fmt, const struct cJSON *msgs);
// The tools as templates take them: a description and parameters each ("" and any object where absent).
struct cJSON *serve_tools_native_tools(const struct cJSON *tools);
// The JSON Schema (text, malloc'd) of what follows *prefill (malloc'd) in a
// required call: of the tools' (only's, when named) calls, one unless parallel.
char *serve_tools_native_schema(int fmt, const struct cJSON *tools, const char *only, int parallel, char **prefill);
// An answer (prefill included) read in the format: 1 with *calls OpenAI's
// tool_calls and *content the text outside them (or NULL); 0 when it is no
// call of the tools (text).
int serve_tools_native_parse(int fmt, const struct cJSON *tools, const char *text, size_t n, struct cJSON **content, struct cJSON **calls);
void serve_tools_tokenize(serve_check *k, infer_model *m, int n_ctx, const struct cJSON *turns, serve_gen *g);
// one of tool_calls: {"id": "call_...", "type": "function", "function": {"name", "arguments"}}
struct cJSON *serve_tool_call(const char *name, const char *args);
// A request's body: a JSON object and nothing after it but whitespace, or
// NULL with k->status 400 and why.
struct cJSON;
struct cJSON *serve_parse_body(serve_check *k, const char *body, size_t len);
// The field checks the parsers share: a 400 naming param (the first fault
// stays), and a number field in [lo, hi] (absent or null: *v unchanged;
// integer: whole numbers only).
int serve_bad(serve_check *k, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void serve_num_field(serve_check *k, const struct cJSON *o, const char *name, double lo, double hi, int integer, double *v);

// The Anthropic Messages API (serve_anthropic.c): a body of /v1/messages
// (count: of /v1/messages/count_tokens, where max_tokens is not asked for)
// parsed into *g as serve_parse_generate does (always initialized; free it
// with serve_gen_free), and the answer written in Anthropic's shape.
void serve_parse_messages(serve_check *k, infer_model *m, int n_ctx, const char *body, size_t len, int count, uint64_t seed,
                          serve_gen *g);
// An answer's state: its id, the model's name, the prompt's length, the
// stop strings (copied from g: the task takes g's) and g's tools (kept: they
// must outlive it). NULL: out of memory.
typedef struct serve_anth serve_anth;
serve_anth *serve_anth_new(infer_model *m, const char *model, const serve_gen *g, uint64_t id);
void serve_anth_free(serve_anth *a);
// Its events, malloc'd text ("event: NAME\ndata: JSON\n\n" each): the start
// (message_start, content_block_start, ping), a text delta, and the end once
// the task is done (content_block_stop, message_delta, message_stop; an
// error event when it failed). With tools (g->tools) no text deltas: the end
// sends the answer text[0, n) as its blocks (a tool_use block a call: its
// start, one input_json_delta, its stop) and stop_reason "tool_use".
char *serve_anth_start(serve_anth *a);
char *serve_anth_delta(serve_anth *a, const char *text, size_t n);
char *serve_anth_end(serve_anth *a, serve_task *t, const serve_state *st, const char *text, size_t n);
// The waited-for answer once the task is done: the message (text[0, n)) or
// the error, malloc'd; *status its HTTP status.
char *serve_anth_message(serve_anth *a, serve_task *t, const serve_state *st, const char *text, size_t n, int *status);
// {"type": "error", "error": {"type", "message"}} with the type of the
// HTTP status, malloc'd (NULL: out of memory).
char *serve_anth_error(int status, const char *msg);

// OpenAI's Responses API (serve_responses.c): a body of POST /v1/responses
// turned into a chat completions body and parsed by serve_parse_generate into
// *g (always initialized; free it with serve_gen_free; errors name the
// Responses field), and the answer's state: its id, the model's name, the
// request's fields a response repeats, the tools (taken from g). NULL with k
// set.
typedef struct serve_resp serve_resp;
serve_resp *serve_resp_parse(serve_check *k, infer_model *m, int n_ctx, const char *model, const char *body, size_t len, uint64_t seed,
                             serve_gen *g);
void serve_resp_free(serve_resp *r);
// Its events, malloc'd text ("event: TYPE\ndata: JSON\n\n" each): the start
// (response.created, response.in_progress; without tools, the message's
// output_item.added and content_part.added), a text delta (NULL with tools:
// the answer is parsed once whole), and the end once the task is done (the
// items' done events -- with tools, all of their events -- then
// response.completed or response.incomplete; response.failed when it failed).
char *serve_resp_start(serve_resp *r);
char *serve_resp_delta(serve_resp *r, const char *text, size_t n);
char *serve_resp_end(serve_resp *r, const serve_state *st);
// The waited-for answer once the task is done: the response (text[0, n)) or
// OpenAI's error, malloc'd; *status its HTTP status.
char *serve_resp_message(serve_resp *r, const serve_state *st, const char *text, size_t n, int *status);

// POST /v1/embeddings (serve_embed.c): the response JSON in *out (malloc'd)
// and 0, or -1 with k's status (400: the request's fault, naming the field),
// param and message. alias: the response's "model".
int serve_embeddings(serve_check *k, infer_model *m, const char *alias, int n_ctx, const char *body, size_t len, char **out);

// GET /slots and POST /slots/ID?action=save|restore|erase (llama-server's):
// the JSON in *out (malloc'd) and 0, or -1 with k set. dir: --slot-save-path
// (NULL: save and restore answer 501); e NULL: no slots (an encoder's server).
int serve_slots_answer(serve_check *k, serve_engine *e, const char *dir, const char *url, const char *method, const char *action,
                       const char *body, size_t len, char **out);

// Engine figures for /metrics.
typedef struct {
    long long prompt_tokens, prompt_cached, generated_tokens, steps, busy_slot_steps;
    long long prompt_copied; // of prompt_cached, positions copied from another slot's cache (a shared prefix)
    long long steps_retried; // failed batched steps whose sequences ran again one by one
    int step_chunks_max;     // the most prompt chunks one step held
    long long spec_drafted, spec_accepted; // speculative decoding (--spec-ngram): draft tokens checked, and kept
    int busy_slots, queued, slots;
    long long kv_tokens;     // positions the slots' caches hold (after the last step)
    long long kv_capacity;   // positions they can hold (slots x context)
    long long kv_bytes;      // the caches' memory (kv_capacity x bytes a position)
    long long kv_backed;     // of it, the memory held now (less where the caches grow as used: on the CPU, and on a GPU under INFER_CUDA_KV_VM=1)
    long long kv_waits;      // admissions held back: the caches' memory was taken
    long long kv_preempted;  // requests whose cache was given back for an older one's (their text evaluated again)
} serve_counts;
void serve_engine_counts(serve_engine *e, serve_counts *c);
// --spec-ngram K: a generating slot feeds its token and K tokens drafted from
// its own text (infer_spec_draft_ngram), all checked in the step, and takes
// the tokens its sampler keeps (infer_spec_accept); slots under a grammar or
// asking for log-probabilities, and a split or --tp model, decode one token
// a step. Set before the first request.
void serve_engine_set_spec(serve_engine *e, int k);
// --model-draft: each slot drafts with a context of the draft model dm (on
// the slots' backend) instead of the n-gram drafter, K tokens at most, as
// infer_drafter_draft with p_min. 0, or -1 with the reason in err. Set
// before the first request; the caller frees dm after the engine.
int serve_engine_set_draft(serve_engine *e, infer_model *dm, int k, float p_min, char *err, size_t errlen);

// Small answers (serve_misc.c). llama-server's POST /tokenize ({"content",
// "add_special", "parse_special"} -> {"tokens"}) and /detokenize ({"tokens"}
// -> {"content"}): the JSON in *out (malloc'd) and 0, or -1 with k set.
int serve_tokenize_answer(serve_check *k, infer_model *m, const char *body, size_t len, int detok, char **out);
// /metrics' Prometheus text (malloc'd; NULL: out of memory): the engine's
// counts, the responses by status class (by_status[2..5]: 2xx..5xx) and the
// clients gone before their answer.
char *serve_metrics_text(const serve_counts *k, const long long by_status[6], long long disconnects);

// The text rules (serve_text.c). Where the first of the stop strings begins
// in s[0, n) (n when none does):
size_t serve_stop_at(const char *s, size_t n, char *const *stop, int n_stop);
// How much of s[0, n) may be shown while more may come: not an end that could
// begin a stop string, nor an unfinished UTF-8 character.
size_t serve_visible(const char *s, size_t n, char *const *stop, int n_stop);
// s[0, n) as valid UTF-8 (a token or a cut may end inside a character):
// each invalid byte U+FFFD; malloc'd, NUL-terminated.
char *serve_utf8_clean(const char *s, size_t n);
// a string field of o: s[0, n) made valid UTF-8
void serve_add_text(struct cJSON *o, const char *name, const char *s, size_t n);
// OpenAI's error object of a task that did not finish (st), as j's "error";
// *status 503 where the server is stopping, else 500
void serve_failed_error(struct cJSON *j, const serve_state *st, int *status);

// Log-probabilities in OpenAI's JSON (serve_logprobs.c), of tokens v[0, n):
// chat's {"content": [...]}, and completions' {"tokens", "token_logprobs",
// "top_logprobs", "text_offset"} (*offset: text bytes before v[0], advanced).
struct cJSON *serve_chat_logprobs(infer_model *m, const serve_logprob *v, int n);
struct cJSON *serve_cmpl_logprobs(infer_model *m, const serve_logprob *v, int n, size_t *offset);

#endif
