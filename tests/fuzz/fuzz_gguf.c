// A GGUF file: loaded, then (when the load succeeds) two tokens evaluated and
// a text tokenized, so a header that passes the reader still meets the
// forward pass and the tokenizer; and loaded as a vocabulary alone (llama.cpp's
// vocab-only files), a text tokenized with it.
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char path[64];
    int fd = fuzz_memfile(data, n, path, sizeof path);
    if (fd < 0) return 0;
    infer_model *m = NULL;
    if (!infer_model_load(path, &m)) {
        fuzz_exercise(m);
        infer_model_free(m);
    }
    infer_vocab *v = NULL;
    if (!infer_vocab_load(path, &v)) {
        int32_t *ids = NULL;
        int nt = 0;
        const char *text = "Hello <s> world \xe2\x96\x81x \xff";
        if (!infer_vocab_tokenize(v, text, strlen(text), 1, 1, &ids, &nt)) {
            char *back = NULL;
            size_t len = 0;
            if (!infer_vocab_detokenize(v, ids, nt, 0, &back, &len)) free(back);
            free(ids);
        }
        infer_vocab_free(v);
    }
    close(fd);
    return 0;
}
