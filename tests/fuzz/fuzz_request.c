// One request body of infer serve through its parsing and validation (no
// sockets): the first byte picks the endpoint (bit 2 set: OpenAI's
// /v1/responses; else bit 1 clear: bit 0 chat or completions; bit 1 set:
// Anthropic's /v1/messages, bit 0 its count_tokens),
// the rest is the body, checked against a small model with a vocabulary and a
// chat template: fields, the grammar (JSON schema or GBNF) compiled, the
// messages rendered and the prompt tokenized, as an HTTP thread of the server
// does. A /v1/messages or /v1/responses body that passes is answered too, the
// body's own bytes as the text: the events and the message, every string
// valid UTF-8.
#include "fuzz.h"
#include "serve.h"

#ifndef FUZZ_MODEL
#define FUZZ_MODEL "corpus/gguf/llama-f32-spm"
#endif

// (the answer's writers read a finished task's tokens; no engine runs here)
int serve_task_logprobs(serve_task *t, int from, serve_logprob **out) {
    (void)t, (void)from;
    *out = NULL;
    return 0;
}

static void answer(infer_model *m, const serve_gen *g, const char *text, size_t n) {
    serve_anth *a = serve_anth_new(m, "m", g, 1);
    if (!a) return;
    serve_state st = {.done = 1, .finish = "stop", .n_prompt = g->r.n_prompt, .n_gen = 1};
    int status;
    free(serve_anth_start(a));
    free(serve_anth_delta(a, text, n));
    free(serve_anth_end(a, NULL, &st, text, n));
    free(serve_anth_message(a, NULL, &st, text, n, &status));
    serve_anth_free(a);
}

static void answer_resp(serve_resp *r, const char *text, size_t n) {
    serve_state st = {.done = 1, .finish = "stop", .n_prompt = 1, .n_gen = 1};
    int status;
    free(serve_resp_start(r));
    free(serve_resp_delta(r, text, n));
    free(serve_resp_end(r, &st));
    free(serve_resp_message(r, &st, text, n, &status));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static infer_model *m;
    if (!m) {
        const char *path = getenv("INFER_FUZZ_MODEL") ? getenv("INFER_FUZZ_MODEL") : FUZZ_MODEL;
        if (infer_model_load(path, &m)) fprintf(stderr, "fuzz_request: %s\n", infer_last_error()), abort();
    }
    if (!n) return 0;
    serve_check k = {0};
    serve_gen g;
    const char *body = (const char *)data + 1;
    if (data[0] & 4) {
        serve_resp *r = serve_resp_parse(&k, m, 64, "m", body, n - 1, 1, &g);
        if (r) answer_resp(r, body, n - 1);
        serve_resp_free(r);
    } else if (data[0] & 2) {
        serve_parse_messages(&k, m, 64, body, n - 1, data[0] & 1, 1, &g);
        if (!k.status && !(data[0] & 1)) answer(m, &g, body, n - 1);
    } else {
        serve_parse_generate(&k, m, 64, body, n - 1, data[0] & 1, 1, &g);
    }
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "%s: %d %s %s\n", data[0] & 4 ? "responses" : data[0] & 2 ? "messages" : data[0] & 1 ? "chat" : "completion", k.status, k.param, k.msg);
    serve_gen_free(&g);
    return 0;
}
