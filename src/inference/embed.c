// Embeddings (infer.h's infer_embed): a sequence in one pass, the states
// after the final norm of all its positions, pooled, and L2-normalized as
// sentence-transformers' Normalize module does.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/mapfile.h"
#include "inference/context.h"

#define TRY(x) do { infer_status st_ = (x); if (st_) return st_; } while (0)

int infer_model_is_encoder(const infer_model *m) { return m && m->cfg.fam && m->cfg.fam->encoder; }

// sentence-transformers' 1_Pooling/config.json: exactly one of the modes we
// run (mean, cls; max and the others refused).
static infer_status read_pooling(const char *path, infer_pooling *p) {
    char *text = NULL;
    infer_status st = read_text_file(path, 1u << 20, &text, NULL);
    if (st) return fail_wrap(st, "%s", path);
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return fail(INFER_ERR_FORMAT, "%s: not a JSON object", path);
    }
    static const struct { const char *key; int pooling; } modes[] = {
        {"pooling_mode_mean_tokens", INFER_POOLING_MEAN}, {"pooling_mode_cls_token", INFER_POOLING_CLS},
        {"pooling_mode_lasttoken", INFER_POOLING_LAST}, {"pooling_mode_max_tokens", -1},
        {"pooling_mode_mean_sqrt_len_tokens", -1}, {"pooling_mode_weightedmean_tokens", -1},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0] && !st; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, modes[i].key);
        if (!v || cJSON_IsFalse(v)) continue;
        if (!cJSON_IsTrue(v)) st = fail(INFER_ERR_FORMAT, "%s: \"%s\" is not a boolean", path, modes[i].key);
        else if (modes[i].pooling < 0) st = fail(INFER_ERR_UNSUPPORTED, "%s: \"%s\" is not supported (mean, cls, last are)", path, modes[i].key);
        else *p = (infer_pooling)modes[i].pooling, n++;
    }
    cJSON_Delete(o);
    if (!st && n != 1) st = fail(INFER_ERR_UNSUPPORTED, "%s: %d pooling modes are on (one is supported)", path, n);
    return st;
}

// modules.json: whether a sentence_transformers.models.Normalize module is listed.
static infer_status read_normalize(const char *path, int *normalize) {
    char *text = NULL;
    infer_status st = read_text_file(path, 1u << 20, &text, NULL);
    if (st) return fail_wrap(st, "%s", path);
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(o)) {
        cJSON_Delete(o);
        return fail(INFER_ERR_FORMAT, "%s: not a JSON array", path);
    }
    *normalize = 0;
    for (const cJSON *e = o->child; e; e = e->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type");
        if (cJSON_IsString(t) && strstr(t->valuestring, "Normalize")) *normalize = 1;
    }
    cJSON_Delete(o);
    return INFER_OK;
}

infer_status infer_model_embed_defaults(infer_model *m, infer_pooling *pooling, int *normalize) {
    if (!m || !pooling || !normalize) return fail(INFER_ERR_ARG, "infer_model_embed_defaults: NULL argument");
    *pooling = infer_model_is_encoder(m) ? INFER_POOLING_MEAN : INFER_POOLING_LAST;
    *normalize = 1;
    if (!m->path || !infer_model_is_encoder(m)) return INFER_OK;
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", m->path);
    if (stat(path, &sb) == 0) TRY(read_pooling(path, pooling));
    snprintf(path, sizeof path, "%s/modules.json", m->path);
    if (stat(path, &sb) == 0) TRY(read_normalize(path, normalize));
    return INFER_OK;
}

infer_status infer_embed(infer_ctx *c, const int32_t *ids, int n, infer_pooling pooling, int normalize, float *out) {
    if (!c || !ids || !out) return fail(INFER_ERR_ARG, "infer_embed: NULL argument");
    const infer_config *cf = &c->m->cfg;
    int E = cf->n_embd;
    if (pooling == INFER_POOLING_MODEL) {
        int nz;
        TRY(infer_model_embed_defaults(c->m, &pooling, &nz));
    }
    if (pooling < INFER_POOLING_MEAN || pooling > INFER_POOLING_LAST)
        return fail(INFER_ERR_ARG, "infer_embed: pooling %d is not one of mean, cls, last", (int)pooling);
    if (n < 1) return fail(INFER_ERR_ARG, "infer_embed: no tokens to embed");
    // (an encoder's positions are the model's; every row of the sequence in one pass)
    int max = c->n_ctx < c->n_batch ? c->n_ctx : c->n_batch;
    if (cf->fam->learned_pos && cf->n_ctx_train < max) max = cf->n_ctx_train;
    if (n > max)
        return fail(INFER_ERR_ARG, "infer_embed: %d tokens are more than the %d an embedding takes here (context %d, pass %d%s)", n,
                    max, c->n_ctx, c->n_batch, cf->fam->learned_pos ? ", the model's positions" : "");
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= cf->n_vocab)
            return fail(INFER_ERR_ARG, "infer_embed: token id %d (at %d) is outside the vocabulary of %d", ids[i], i, cf->n_vocab);
    float *h = malloc(sizeof(float) * (size_t)n * E);
    if (!h) return fail(INFER_ERR_NOMEM, "infer_embed: %d rows of %d", n, E);
    infer_ctx_reset(c);
    infer_ctx *self[N_BATCH_MAX];
    for (int t = 0; t < n; t++) self[t] = c;
    pass_rows_set(c, self, n);
    pass_out po = {.first = 0, .embd = h};
    infer_status st = forward_pass(c, ids, n, &po);
    infer_ctx_reset(c);
    if (st) {
        free(h);
        return st;
    }
    // pooled in double: the sum of many rows, as exact as the rows
    for (int j = 0; j < E; j++) {
        double s = 0;
        if (pooling == INFER_POOLING_MEAN) {
            for (int t = 0; t < n; t++) s += h[(size_t)t * E + j];
            s /= n;
        } else s = h[(size_t)(pooling == INFER_POOLING_CLS ? 0 : n - 1) * E + j];
        out[j] = (float)s;
    }
    free(h);
    if (normalize) { // x / max(|x|, 1e-12) (torch.nn.functional.normalize)
        double ss = 0;
        for (int j = 0; j < E; j++) ss += (double)out[j] * out[j];
        double d = sqrt(ss);
        if (d < 1e-12) d = 1e-12;
        for (int j = 0; j < E; j++) out[j] = (float)(out[j] / d);
    }
    return INFER_OK;
}
