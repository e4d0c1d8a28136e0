// A GBNF grammar through the parser, the text matcher and the token-level
// grammar of a small model: the input is the grammar's text, then a NUL, then
// a text to walk (at most 64 bytes): matched byte by byte, and tokenized and
// accepted token by token with a mask before each. Every step's work is
// bounded (grammar_max_work, lowered here to 1/256 of GRAMMAR_MAX_WORK: this
// build runs ~60x slower than a release one, and an input takes up to ~190 steps):
// the fuzzer's timeout finds work the budget does not count.
#include "fuzz.h"
#include "inference/grammar.h"

#include <math.h>

#ifndef FUZZ_MODEL
#define FUZZ_MODEL "corpus/gguf/llama-f32-spm"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static infer_model *m;
    static float *lg;
    if (!m) {
        grammar_max_work = GRAMMAR_MAX_WORK / 256;
        const char *path = getenv("INFER_FUZZ_MODEL") ? getenv("INFER_FUZZ_MODEL") : FUZZ_MODEL;
        if (infer_model_load(path, &m)) fprintf(stderr, "fuzz_grammar: %s\n", infer_last_error()), abort();
        lg = malloc(sizeof *lg * (size_t)infer_model_n_vocab(m));
    }
    const uint8_t *nul = memchr(data, 0, n);
    size_t gl = nul ? (size_t)(nul - data) : n, tl = nul ? n - gl - 1 : 0;
    if (tl > 64) tl = 64;
    char *text = malloc(gl + 1), *walk = malloc(tl + 1);
    memcpy(text, data, gl), text[gl] = 0;
    if (tl) memcpy(walk, nul + 1, tl);
    walk[tl] = 0;
    grules *r = NULL;
    if (!grammar_parse(text, NULL, &r)) {
        int complete = 0;
        grammar_match_text(r, walk, tl, &complete);
        grammar_rules_free(r);
        infer_grammar *g = NULL;
        if (!infer_grammar_from_gbnf(m, text, NULL, &g)) {
            int32_t *ids = NULL;
            int k = 0, V = infer_model_n_vocab(m);
            if (!infer_tokenize(m, walk, tl, 0, 0, &ids, &k))
                for (int i = 0; i < k; i++) {
                    for (int v = 0; v < V; v++) lg[v] = 0;
                    int allowed = infer_grammar_mask(g, lg);
                    if (allowed < 0 || !infer_grammar_allows(g, ids[i]) || infer_grammar_accept(g, ids[i])) break;
                    if (lg[ids[i]] != 0) abort(); // (allowed, so not masked out)
                    infer_grammar_complete(g);
                }
            free(ids);
            infer_grammar_free(g);
        }
    }
    free(text), free(walk);
    return 0;
}
