// The server's small answers (serve.h): llama-server's /tokenize and
// /detokenize, and /metrics' Prometheus text.
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int json_out(cJSON *j, char **out) {
    *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return *out ? 0 : -1;
}

static int tokenize(serve_check *k, infer_model *m, const cJSON *o, char **out) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "content"), *sp = cJSON_GetObjectItemCaseSensitive(o, "add_special"),
                *ps = cJSON_GetObjectItemCaseSensitive(o, "parse_special");
    if (!cJSON_IsString(t)) return serve_bad(k, "content", "'content' must be a string");
    if (sp && !cJSON_IsBool(sp)) return serve_bad(k, "add_special", "'add_special' must be a boolean");
    if (ps && !cJSON_IsBool(ps)) return serve_bad(k, "parse_special", "'parse_special' must be a boolean");
    int32_t *ids = NULL;
    int n = 0;
    // (llama-server's: special tokens' text becomes them unless parse_special is false)
    if (infer_tokenize(m, t->valuestring, strlen(t->valuestring), cJSON_IsTrue(sp), !cJSON_IsFalse(ps), &ids, &n))
        return serve_bad(k, "content", "cannot tokenize: %s", infer_last_error());
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "tokens");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    free(ids);
    return json_out(j, out);
}

static int detokenize(serve_check *k, infer_model *m, const cJSON *o, char **out) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "tokens"), *x;
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1, V = infer_model_n_vocab(m), i = 0;
    if (n < 0) return serve_bad(k, "tokens", "'tokens' must be an array of token ids");
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!ids) return k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory"), -1;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 || x->valuedouble >= V)
            return free(ids), serve_bad(k, "tokens", "'tokens'[%d] is not a token id of this model (0 to %d)", i, V - 1);
        ids[i++] = (int32_t)x->valuedouble;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = infer_detokenize(m, ids, n, 0, &text, &len);
    free(ids);
    if (rc) return k->status = 500, snprintf(k->msg, sizeof k->msg, "%s", infer_last_error()), -1;
    cJSON *j = cJSON_CreateObject();
    serve_add_text(j, "content", text, len); // (a partial character: U+FFFD, so the JSON is valid UTF-8)
    free(text);
    return json_out(j, out);
}

int serve_tokenize_answer(serve_check *k, infer_model *m, const char *body, size_t len, int detok, char **out) {
    *out = NULL;
    cJSON *o = serve_parse_body(k, body, len);
    if (!o) return -1;
    int rc = detok ? detokenize(k, m, o, out) : tokenize(k, m, o, out);
    cJSON_Delete(o);
    if (rc && !k->status) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
    return rc ? -1 : 0;
}

char *serve_metrics_text(const serve_counts *k, const long long by_status[6], long long disconnects) {
    char *b = malloc(8192);
    if (!b) return NULL;
    long long ta, tca, tc;
    serve_tools_counts(&ta, &tca, &tc);
    int n = snprintf(b, 8192,
                     "# HELP infer_prompt_tokens_total Prompt tokens evaluated.\n# TYPE infer_prompt_tokens_total counter\n"
                     "infer_prompt_tokens_total %lld\n"
                     "# HELP infer_prompt_tokens_cached_total Prompt tokens a slot's cache already held.\n# TYPE infer_prompt_tokens_cached_total counter\n"
                     "infer_prompt_tokens_cached_total %lld\n"
                     "# HELP infer_tokens_generated_total Tokens generated.\n# TYPE infer_tokens_generated_total counter\n"
                     "infer_tokens_generated_total %lld\n"
                     "# HELP infer_steps_total Engine steps (one batched call each).\n# TYPE infer_steps_total counter\n"
                     "infer_steps_total %lld\n"
                     "# HELP infer_busy_slot_steps_total Slots at work summed over the steps.\n# TYPE infer_busy_slot_steps_total counter\n"
                     "infer_busy_slot_steps_total %lld\n"
                     "# HELP infer_steps_retried_total Failed steps whose sequences ran again one by one.\n# TYPE infer_steps_retried_total counter\n"
                     "infer_steps_retried_total %lld\n"
                     "# HELP infer_step_prompt_chunks_max The most prompt chunks one step held.\n# TYPE infer_step_prompt_chunks_max gauge\n"
                     "infer_step_prompt_chunks_max %d\n"
                     "# HELP infer_requests_running Slots at work now.\n# TYPE infer_requests_running gauge\ninfer_requests_running %d\n"
                     "# HELP infer_requests_queued Requests waiting for a slot.\n# TYPE infer_requests_queued gauge\ninfer_requests_queued %d\n"
                     "# HELP infer_slots Slots of this server.\n# TYPE infer_slots gauge\ninfer_slots %d\n"
                     "# HELP infer_client_disconnects_total Clients gone before their answer ended.\n# TYPE infer_client_disconnects_total counter\n"
                     "infer_client_disconnects_total %lld\n"
                     "# HELP infer_spec_drafted_total Draft tokens checked (--spec-ngram, --model-draft).\n# TYPE infer_spec_drafted_total counter\n"
                     "infer_spec_drafted_total %lld\n"
                     "# HELP infer_spec_accepted_total Draft tokens kept (--spec-ngram, --model-draft).\n# TYPE infer_spec_accepted_total counter\n"
                     "infer_spec_accepted_total %lld\n"
                     "# HELP infer_tool_answers_total Answers to requests that offered tools.\n# TYPE infer_tool_answers_total counter\n"
                     "infer_tool_answers_total %lld\n"
                     "# HELP infer_tool_call_answers_total Of them, answers that called tools.\n# TYPE infer_tool_call_answers_total counter\n"
                     "infer_tool_call_answers_total %lld\n"
                     "# HELP infer_tool_calls_total Tool calls made.\n# TYPE infer_tool_calls_total counter\n"
                     "infer_tool_calls_total %lld\n"
                     "# HELP infer_prompt_tokens_copied_total Of the cached prompt tokens, those copied from another slot's cache.\n# TYPE infer_prompt_tokens_copied_total counter\n"
                     "infer_prompt_tokens_copied_total %lld\n"
                     "# HELP infer_kv_cache_tokens Positions the slots' KV caches hold.\n# TYPE infer_kv_cache_tokens gauge\n"
                     "infer_kv_cache_tokens %lld\n"
                     "# HELP infer_kv_cache_capacity_tokens Positions the slots' KV caches can hold.\n# TYPE infer_kv_cache_capacity_tokens gauge\n"
                     "infer_kv_cache_capacity_tokens %lld\n"
                     "# HELP infer_kv_cache_usage_ratio The share of the KV caches' positions held.\n# TYPE infer_kv_cache_usage_ratio gauge\n"
                     "infer_kv_cache_usage_ratio %.6f\n"
                     "# HELP infer_kv_cache_bytes The slots' KV cache memory.\n# TYPE infer_kv_cache_bytes gauge\n"
                     "infer_kv_cache_bytes %lld\n"
                     "# HELP infer_kv_cache_backed_bytes Of it, the memory the caches hold now (less where they grow as used).\n# TYPE infer_kv_cache_backed_bytes gauge\n"
                     "infer_kv_cache_backed_bytes %lld\n"
                     "# HELP infer_kv_cache_waits_total Admissions held back while the caches' memory was taken.\n# TYPE infer_kv_cache_waits_total counter\n"
                     "infer_kv_cache_waits_total %lld\n"
                     "# HELP infer_kv_cache_preemptions_total Requests whose cache was given back for an older one's (their text evaluated again).\n# TYPE infer_kv_cache_preemptions_total counter\n"
                     "infer_kv_cache_preemptions_total %lld\n"
                     "# HELP infer_responses_total Responses by status class.\n# TYPE infer_responses_total counter\n",
                     k->prompt_tokens, k->prompt_cached, k->generated_tokens, k->steps, k->busy_slot_steps, k->steps_retried,
                     k->step_chunks_max, k->busy_slots, k->queued, k->slots, disconnects, k->spec_drafted, k->spec_accepted,
                     ta, tca, tc, k->prompt_copied, k->kv_tokens, k->kv_capacity, k->kv_capacity > 0 ? (double)k->kv_tokens / (double)k->kv_capacity : 0.0,
                     k->kv_bytes, k->kv_backed, k->kv_waits, k->kv_preempted);
    for (int i = 2; i < 6 && n > 0 && n < 8192; i++) n += snprintf(b + n, 8192 - (size_t)n, "infer_responses_total{status=\"%dxx\"} %lld\n", i, by_status[i]);
    return b;
}
