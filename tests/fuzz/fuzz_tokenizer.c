// A tokenizer.json: loaded as a vocabulary, then texts (plain, special
// tokens, bytes that are not UTF-8) tokenized and the ids detokenized.
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", fuzz_dir());
    if (fuzz_write(path, data, n)) return 0;
    infer_vocab *v = NULL;
    if (infer_vocab_load(path, &v)) return 0;
    static const char *const texts[] = {
        "Hello world! It's 2026.", "  leading spaces\tand\nnew lines  ", "<s>[INST] special <|im_start|> </s>",
        "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", "bad \xff\xfe utf8 \xc3", "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        for (int special = 0; special < 2; special++) {
            int32_t *ids = NULL;
            int nt = 0;
            if (infer_vocab_tokenize(v, texts[i], strlen(texts[i]), special, special, &ids, &nt)) continue;
            char *back = NULL;
            size_t len = 0;
            if (!infer_vocab_detokenize(v, ids, nt, !special, &back, &len)) free(back);
            free(ids);
        }
    }
    // every id's text, and ids out of range
    int32_t nv = infer_vocab_size(v);
    for (int32_t id = -1; id <= nv && id < 4096; id++) {
        size_t len;
        infer_vocab_token(v, id, &len);
    }
    int32_t odd[3] = {-5, nv, nv > 0 ? nv - 1 : 0};
    char *back = NULL;
    size_t len = 0;
    if (!infer_vocab_detokenize(v, odd, 3, 0, &back, &len)) free(back);
    infer_vocab_free(v);
    return 0;
}
