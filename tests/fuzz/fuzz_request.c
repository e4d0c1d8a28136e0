// One request body of infer serve through its parsing and validation (no
// sockets): the first byte picks the endpoint (chat or completions), the rest
// is the body, checked against a small model with a vocabulary and a chat
// template: fields, the grammar (JSON schema or GBNF) compiled, the messages
// rendered and the prompt tokenized, as an HTTP thread of the server does.
#include "fuzz.h"
#include "serve.h"

#ifndef FUZZ_MODEL
#define FUZZ_MODEL "corpus/gguf/llama-f32-spm"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static infer_model *m;
    if (!m) {
        const char *path = getenv("INFER_FUZZ_MODEL") ? getenv("INFER_FUZZ_MODEL") : FUZZ_MODEL;
        if (infer_model_load(path, &m)) fprintf(stderr, "fuzz_request: %s\n", infer_last_error()), abort();
    }
    if (!n) return 0;
    serve_check k = {0};
    serve_gen g;
    serve_parse_generate(&k, m, 64, (const char *)data + 1, n - 1, data[0] & 1, 1, &g);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s: %d %s %s\n", data[0] & 1 ? "chat" : "completion", k.status, k.param, k.msg);
    serve_gen_free(&g);
    return 0;
}
