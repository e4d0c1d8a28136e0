// infer predict through the CLI: with the dense graph its top 5 and
// probabilities equal the softmax of infer logits; with a vindex, a cached +
// walk mix reports its KL against dense, cached layers replayed on their own
// prompt hand on the exact residual (cos 1), and lm_head top-K over the whole
// vocabulary recalls the true top 5.
#include "check.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *run(const char *cmd) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    int rc = pclose(p);
    if (!buf || rc != 0) { free(buf); return NULL; }
    buf[n] = 0;
    return buf;
}

int main(void) {
    char tmp[] = "/tmp/infer_predict_XXXXXX", cmd[4096];
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    const char *ids = "1,17,33,5,250,9,77";
    const char *m = FIXTURES_DIR "/llama";
    int V = 512, T = 7;

    // dense: the same top 5 and probabilities as infer logits
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids %s --out %s/l.bin", INFER_BIN, m, ids, tmp);
    char *out = run(cmd);
    CHECK(out != NULL, "infer logits failed");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/l.bin", tmp);
    size_t len = 0;
    float *lg = (float *)test_read_file(cmd, &len);
    CHECK(lg && len == sizeof(float) * (size_t)T * V, "logits file of %zu bytes", len);
    snprintf(cmd, sizeof cmd, "%s predict -m %s --ids %s -o json --top 5", INFER_BIN, m, ids);
    out = run(cmd);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    CHECK(j != NULL, "predict -o json gave no JSON: %s", out ? out : "(failed)");
    if (lg && j) {
        const float *last = lg + (size_t)(T - 1) * V;
        double mx = last[0], s = 0;
        for (int i = 1; i < V; i++) mx = last[i] > mx ? last[i] : mx;
        for (int i = 0; i < V; i++) s += exp(last[i] - mx);
        cJSON *top = cJSON_GetObjectItem(j, "top");
        CHECK(cJSON_GetArraySize(top) == 5, "top has %d entries", cJSON_GetArraySize(top));
        int r = 0;
        double prev = 2;
        for (cJSON *e = top ? top->child : NULL; e; e = e->next, r++) {
            int id = (int)cJSON_GetObjectItem(e, "id")->valuedouble;
            double p = cJSON_GetObjectItem(e, "p")->valuedouble, want = exp(last[id] - mx) / s;
            int rank = 0; // how many tokens beat it in the logits file
            for (int i = 0; i < V; i++) rank += last[i] > last[id];
            CHECK(rank == r && fabs(p - want) <= 1e-6 * want && p <= prev, "top %d: id %d p %.9g, logits give rank %d p %.9g", r, id, p, rank, want);
            prev = p;
        }
    }
    cJSON_Delete(j), free(out), free(lg);

    // with a vindex
    snprintf(cmd, sizeof cmd, "%s extract -m %s -o %s/v.vindex --gate f32 --ffn f16 2>&1", INFER_BIN, m, tmp);
    out = run(cmd);
    CHECK(out != NULL, "extract failed");
    free(out);
    snprintf(cmd, sizeof cmd, "%s predict -m %s -x %s/v.vindex --ids %s -o json --graph cached:0-1,walk:2-3@25%% --lm-head-topk %d", INFER_BIN, m, tmp, ids, V);
    out = run(cmd);
    j = out ? cJSON_Parse(out) : NULL;
    CHECK(j != NULL, "predict with a graph gave no JSON: %s", out ? out : "(failed)");
    if (j) {
        cJSON *kl = cJSON_GetObjectItem(j, "kl_vs_dense"), *cosv = cJSON_GetObjectItem(j, "cached_residual_cos"), *lm = cJSON_GetObjectItem(j, "lm_head_topk");
        CHECK(kl && kl->valuedouble > 0 && kl->valuedouble < 5, "KL vs dense %g", kl ? kl->valuedouble : -1);
        CHECK(cosv && fabs(cosv->valuedouble - 1) < 1e-6, "cached residual cos %g on its own template", cosv ? cosv->valuedouble : -1);
        CHECK(lm && cJSON_GetObjectItem(lm, "top1_recall")->valuedouble == 1 && cJSON_GetObjectItem(lm, "top5_recall")->valuedouble == 5 &&
                  cJSON_IsTrue(cJSON_GetObjectItem(lm, "same_top1")),
              "lm_head top-%d over the whole vocabulary missed the true top 5", V);
    }
    cJSON_Delete(j), free(out);
    // a vindex alone is the model: dense there is the walk over every (f16) feature
    snprintf(cmd, sizeof cmd, "%s predict -x %s/v.vindex --ids %s -o json --top 1", INFER_BIN, tmp, ids);
    out = run(cmd);
    j = out ? cJSON_Parse(out) : NULL;
    CHECK(j != NULL, "predict -x alone gave no JSON: %s", out ? out : "(failed)");
    cJSON_Delete(j), free(out);

    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return check_summary("predict");
}
