// A GGUF file: loaded, then (when the load succeeds) two tokens evaluated and
// a text tokenized, so a header that passes the reader still meets the
// forward pass and the tokenizer.
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static int init;
    if (!init) infer_set_threads(1), init = 1;
    char path[64];
    int fd = fuzz_memfile(data, n, path, sizeof path);
    if (fd < 0) return 0;
    infer_model *m = NULL;
    if (!infer_model_load(path, &m)) {
        fuzz_exercise(m);
        infer_model_free(m);
    }
    close(fd);
    return 0;
}
