// A Hugging Face directory: config.json, safetensors (one file or shards with
// their index), tokenizer and generation files, packed in one input
// (fuzz.h's FUZZ_SEP); loaded, then exercised as a model.
#include "fuzz.h"

static const char *const g_files[] = {
    "config.json", "model.safetensors", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json", NULL,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *dir = fuzz_unpack_dir(data, n, g_files);
    infer_model *m = NULL;
    if (!infer_model_load(dir, &m)) {
        fuzz_exercise(m);
        infer_model_free(m);
    }
    return 0;
}
