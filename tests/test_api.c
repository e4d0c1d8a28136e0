// The public API the CLI's tools use, through infer.h alone: storage types
// and file types by name, profiling, a vindex extracted, verified, opened
// and walked (features by |score|, the same at every k), gate KNN against
// plain dot products, and lm_head top-K over the whole vocabulary against
// the logits of infer_eval.
#include "check.h"
#include "infer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_progress;
static void count_progress(void *user, const char *stage, int64_t done, int64_t total) {
    (void)user, (void)stage, (void)done, (void)total;
    g_progress++;
}

static void types_and_ftypes(void) {
    CHECK(infer_type_name(INFER_TYPE_Q4_K) && !strcmp(infer_type_name(INFER_TYPE_Q4_K), "q4_K"), "q4_K's name");
    CHECK(infer_type_block_size(INFER_TYPE_Q4_K) == 256 && infer_type_block_size(INFER_TYPE_Q8_0) == 32 &&
              infer_type_block_size(INFER_TYPE_BF16) == 1, "block sizes");
    CHECK(infer_type_name(4) == NULL && infer_type_block_size(1000) == 0, "unknown types");
    CHECK(infer_ftype_known("q4_k_m") && infer_ftype_known("bf16") && !infer_ftype_known("q9_9"), "file types");
    CHECK(strstr(infer_ftype_names(), "q8_0") != NULL, "%s", infer_ftype_names());
    for (int p = 0; p < INFER_PHASE_COUNT; p++) CHECK(infer_phase_name(p) != NULL, "phase %d has no name", p);
    CHECK(infer_phase_name(INFER_PHASE_COUNT) == NULL, "a phase beyond the last");
}

static void knn(void) {
    enum { F = 200, H = 64, K = 7 };
    float *rows = malloc(sizeof(float) * F * H), x[H], s[F], ref[F];
    int32_t idx[F];
    uint32_t r = 1;
    for (int i = 0; i < F * H; i++) r = r * 1664525u + 1013904223u, rows[i] = ((r >> 8) / 16777216.0f - 0.5f);
    for (int i = 0; i < H; i++) r = r * 1664525u + 1013904223u, x[i] = ((r >> 8) / 16777216.0f - 0.5f);
    for (int f = 0; f < F; f++) {
        double d = 0;
        for (int i = 0; i < H; i++) d += (double)rows[f * H + i] * x[i];
        ref[f] = (float)d;
    }
    infer_knn *g;
    CHECK(infer_knn_new(INFER_TYPE_F32, rows, F, H, &g) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_knn_bytes(g) == sizeof(float) * F * H, "f32 bytes %zu", infer_knn_bytes(g));
    infer_knn_scores(g, x, s);
    float err = 0;
    for (int f = 0; f < F; f++) err = fmaxf(err, fabsf(s[f] - ref[f]));
    CHECK(err < 1e-4f, "f32 gate scores differ from dot products by %g", err);
    infer_topk_abs(s, F, K, idx);
    for (int j = 0; j < K; j++) {
        int above = 0; // features of larger |score| than a selected one: fewer than K
        for (int f = 0; f < F; f++) above += fabsf(s[f]) > fabsf(s[idx[j]]);
        CHECK(above < K && (j == 0 || idx[j] > idx[j - 1]), "topk_abs: %d is not among the %d largest, ascending", idx[j], K);
    }
    infer_knn_free(g);
    CHECK(infer_knn_new(INFER_TYPE_Q4_0, rows, F, 40, &g) == INFER_ERR_ARG && strstr(infer_last_error(), "blocks"),
          "q4_0 rows of 40: %s", infer_last_error());
    CHECK(infer_knn_new(INFER_TYPE_Q8_0, rows, F, H, &g) == INFER_ERR_ARG, "q8_0 gate vectors accepted");
    free(rows);
}

static void vindex(const char *tmp) {
    const char *path = FIXTURES_DIR "/llama";
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/l.vindex", tmp);
    infer_model *m;
    if (infer_model_load(path, &m) != INFER_OK) { CHECK(0, "%s", infer_last_error()); return; }
    int L = infer_model_n_layer(m), E = infer_model_n_embd(m), V = infer_model_n_vocab(m);
    const int32_t ids[] = {1, 17, 42, 99, 7};
    int n = 5;
    infer_ctx *c;
    CHECK(infer_ctx_new(m, n, &c) == INFER_OK, "%s", infer_last_error());
    float *ffn_in = malloc(sizeof(float) * (size_t)L * E);
    infer_feature f1[1];
    CHECK(infer_eval_ffn_input(c, ids, n, ffn_in) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_walk_features(m, 0, ffn_in, 1, f1) == INFER_ERR_ARG && strstr(infer_last_error(), "vindex"),
          "a walk query without a vindex: %s", infer_last_error());
    CHECK(infer_model_vindex(m) == NULL, "a vindex before one is attached");

    // extract, verify, open
    infer_extract_opts o = infer_extract_default();
    CHECK(o.gate_type == INFER_TYPE_F16 && o.ffn_type == INFER_TYPE_Q8_0 && o.down_top == 10, "extract defaults");
    o.gate_type = INFER_TYPE_F32;
    o.progress = count_progress;
    infer_extract_info info;
    CHECK(infer_vindex_extract(m, dir, &o, &info) == INFER_OK, "%s", infer_last_error());
    CHECK(g_progress > 0 && info.gate_type == INFER_TYPE_F32 && info.bytes > 0, "progress %d, gate type %d", g_progress,
          info.gate_type);
    CHECK(infer_vindex_verify(dir) == INFER_OK, "%s", infer_last_error());
    infer_vindex *vx;
    CHECK(infer_vindex_open(dir, &vx) == INFER_OK, "%s", infer_last_error());
    if (vx) {
        CHECK(infer_vindex_n_layer(vx) == L && infer_vindex_n_features(vx, L) == 0, "layers");
        const int32_t *tid;
        const float *ts;
        int nt = infer_vindex_feature_tokens(vx, 0, 3, &tid, &ts);
        CHECK(nt == 10 && tid[0] >= 0 && tid[0] < V && ts[0] >= ts[nt - 1], "down_meta: %d tokens", nt);
        CHECK(infer_vindex_feature_tokens(vx, 0, -1, &tid, &ts) == 0 && !tid, "a feature out of range");
        infer_vindex_close(vx);
    }

    // walk queries: every k is the first k of the whole order
    CHECK(infer_model_attach_vindex(m, dir) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_model_vindex(m) != NULL, "the attached vindex");
    int F = infer_vindex_n_features(infer_model_vindex(m), 1);
    infer_feature *all = malloc(sizeof *all * (size_t)F), few[5];
    const float *x = ffn_in + E;
    CHECK(infer_walk_features(m, 1, x, F, all) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_walk_features(m, 1, x, 5, few) == INFER_OK, "%s", infer_last_error());
    for (int j = 1; j < F; j++) CHECK(fabsf(all[j].score) <= fabsf(all[j - 1].score), "not by |score| at %d", j);
    for (int j = 0; j < 5; j++)
        CHECK(few[j].id == all[j].id && few[j].act == all[j].act && few[j].down == all[j].down, "k = 5 differs from k = F at %d", j);
    int bad_down = 0;
    for (int j = 0; j < F; j++) bad_down += !(all[j].down > 0 && isfinite(all[j].down));
    CHECK(!bad_down, "%d features without the length of their down vector", bad_down);
    CHECK(infer_walk_features(m, 1, x, F + 1, all) == INFER_ERR_ARG, "more features than the layer has");
    CHECK(infer_walk_features(m, L, x, 1, all) == INFER_ERR_ARG, "a layer out of range");
    free(all);

    // lm_head top-K over the whole vocabulary: every id, and exact logits
    float *logits = malloc(sizeof(float) * V), *hidden = malloc(sizeof(float) * (size_t)(L + 1) * E), *exact = malloc(sizeof(float) * V);
    int32_t *cand = malloc(sizeof(int32_t) * V);
    infer_ctx_reset(c);
    infer_ctx_profile(c, 1);
    CHECK(infer_eval_hidden(c, ids, n, logits, 1, hidden) == INFER_OK, "%s", infer_last_error());
    double total = 0;
    for (int p = 0; p < INFER_PHASE_COUNT; p++) total += infer_ctx_profile_seconds(c, p);
    CHECK(total > 0 && infer_ctx_profile_seconds(c, INFER_PHASE_ATTN) > 0, "profiling: %g s", total);
    infer_ctx_profile(c, 0);
    CHECK(infer_lm_head_topk(m, hidden + (size_t)L * E, V, cand) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_lm_head_logits(m, hidden + (size_t)L * E, cand, V, exact) == INFER_OK, "%s", infer_last_error());
    float err = 0;
    for (int i = 0; i < V; i++) {
        CHECK(cand[i] == i, "candidate %d is %d", i, cand[i]);
        err = fmaxf(err, fabsf(exact[i] - logits[i]));
    }
    CHECK(err < 1e-3f, "exact lm_head logits differ from infer_eval's by %g", err);
    const int32_t bad = V;
    CHECK(infer_lm_head_logits(m, hidden, &bad, 1, exact) == INFER_ERR_ARG, "an id outside the vocabulary");
    CHECK(infer_lm_head_topk(m, hidden, 0, cand) == INFER_ERR_ARG, "k = 0");

    free(logits), free(hidden), free(exact), free(cand), free(ffn_in);
    infer_ctx_free(c);
    infer_model_free(m);
}

// The GPU status: a line either way, naming CUDA where there is no GPU; a
// context on "cuda" is refused then, with INFER_ERR_UNSUPPORTED.
static void gpu(void) {
    const char *st = infer_gpu_status();
    CHECK(st && *st, "infer_gpu_status is empty");
    if (infer_gpu_count() > 0) return;
    CHECK(strstr(st, "CUDA") != NULL, "no GPU, and the status does not say why: \"%s\"", st);
    printf("api: no GPU here: %s\n", st);
}

int main(void) {
    char tmp[] = "/tmp/infer-test-api-XXXXXX";
    gpu();
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    types_and_ftypes();
    knn();
    vindex(tmp);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return check_summary("test_api");
}
