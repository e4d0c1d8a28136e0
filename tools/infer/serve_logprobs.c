// infer serve's log-probabilities in OpenAI's JSON: chat's {"content": [...]}
// and completions' {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"}, each token's text valid UTF-8 beside its bytes.
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

// {"token", "logprob", "bytes"} of one token
static cJSON *lp_entry(infer_model *m, int32_t id, float lp) {
    cJSON *e = cJSON_CreateObject(), *b;
    char *t = NULL;
    size_t n = 0;
    infer_detokenize(m, &id, 1, 0, &t, &n);
    serve_add_text(e, "token", t ? t : "", t ? n : 0);
    cJSON_AddNumberToObject(e, "logprob", lp);
    b = cJSON_AddArrayToObject(e, "bytes");
    for (size_t i = 0; t && i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)t[i]));
    free(t);
    return e;
}

cJSON *serve_chat_logprobs(infer_model *m, const serve_logprob *v, int n) {
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "content");
    for (int i = 0; i < n; i++) {
        cJSON *e = lp_entry(m, v[i].id, v[i].logprob), *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < v[i].n_top; k++) cJSON_AddItemToArray(top, lp_entry(m, v[i].top_id[k], v[i].top_logprob[k]));
        cJSON_AddItemToArray(a, e);
    }
    return j;
}

cJSON *serve_cmpl_logprobs(infer_model *m, const serve_logprob *v, int n, size_t *offset) {
    cJSON *j = cJSON_CreateObject(), *tk = cJSON_AddArrayToObject(j, "tokens"), *tl = cJSON_AddArrayToObject(j, "token_logprobs"),
          *top = cJSON_AddArrayToObject(j, "top_logprobs"), *off = cJSON_AddArrayToObject(j, "text_offset");
    for (int i = 0; i < n; i++) {
        cJSON *e = lp_entry(m, v[i].id, v[i].logprob), *mt = cJSON_CreateObject();
        const char *txt = cJSON_GetObjectItemCaseSensitive(e, "token")->valuestring;
        cJSON_AddItemToArray(tk, cJSON_CreateString(txt));
        cJSON_AddItemToArray(tl, cJSON_CreateNumber(v[i].logprob));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)*offset));
        *offset += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "bytes"));
        for (int k = 0; k < v[i].n_top; k++) {
            cJSON *x = lp_entry(m, v[i].top_id[k], v[i].top_logprob[k]);
            if (!cJSON_GetObjectItemCaseSensitive(mt, cJSON_GetObjectItemCaseSensitive(x, "token")->valuestring))
                cJSON_AddNumberToObject(mt, cJSON_GetObjectItemCaseSensitive(x, "token")->valuestring, v[i].top_logprob[k]);
            cJSON_Delete(x);
        }
        cJSON_AddItemToArray(top, mt);
        cJSON_Delete(e);
    }
    return j;
}
