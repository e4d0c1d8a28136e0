// A vindex directory: index.json and the files it names (weights.gguf,
// embeddings, gate vectors, feature rows, lm_head, down_meta), packed in one
// input (fuzz.h's FUZZ_SEP), and lm_index.bin where listed. Verified, opened
// alone and queried, then loaded as a model and exercised, its features
// walked, its lm_head index looked up.
#include "fuzz.h"

static const char *const g_files[] = {
    "index.json", "weights.gguf", "embeddings.bin", "gate_vectors.bin", "ffn.bin", "lm_head.bin", "down_meta.bin", "lm_index.bin", NULL,
};

static volatile float sink; // (down_meta's values read, as a user would)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *dir = fuzz_unpack_dir(data, n, g_files);
    infer_vindex_verify(dir);
    infer_vindex *vx = NULL;
    if (!infer_vindex_open(dir, &vx)) {
        int nl = infer_vindex_n_layer(vx);
        for (int l = -1; l <= nl && l < 64; l++) {
            int nf = infer_vindex_n_features(vx, l);
            const int32_t *ids = NULL;
            const float *scores = NULL;
            for (int f = -1; f <= nf && f < 4; f++) {
                int got = infer_vindex_feature_tokens(vx, l, f, &ids, &scores);
                for (int i = 0; i < got; i++) sink += (float)ids[i] + scores[i];
            }
        }
        infer_vindex_close(vx);
    }
    infer_model *m = NULL;
    if (!infer_model_load(dir, &m)) {
        fuzz_exercise(m);
        int E = infer_model_n_embd(m), nl = infer_model_n_layer(m);
        float *x = E > 0 ? calloc((size_t)E, sizeof *x) : NULL;
        if (x) {
            for (int i = 0; i < E; i++) x[i] = (float)((i % 7) - 3) * 0.25f;
            infer_feature f[4];
            for (int l = 0; l < nl && l < 8; l++) infer_walk_features(m, l, x, 4, f);
            int32_t ids[4]; // (the lm_head index, where the vindex has one)
            if (infer_lm_head_index_clusters(m) && infer_model_n_vocab(m) >= 4) infer_lm_head_topk_index(m, x, 4, 2, ids);
        }
        free(x);
        infer_model_free(m);
    }
    return 0;
}
