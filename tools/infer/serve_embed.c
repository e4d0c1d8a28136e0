// POST /v1/embeddings (OpenAI's shape): `input` a string, an array of
// strings, an array of token ids or an array of such arrays; `encoding_format`
// "float" (the default) or "base64" (little-endian float32 bytes, as OpenAI's
// client asks for by default); `model` a string (the served model answers).
// Each input's embedding is the model's default pooling and normalization
// (infer_model_embed_defaults), its inputs one after the other on a context
// of the request's own (the HTTP thread's; the engine's slots are the
// generators').
#include "serve.h"
#include "cli.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 2048 // OpenAI's limit per request

static int bad(serve_check *k, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bad(serve_check *k, int status, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->msg, sizeof k->msg, fmt, ap);
    va_end(ap);
    k->status = status;
    snprintf(k->param, sizeof k->param, "%s", param ? param : "");
    return -1;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// n bytes as base64 (malloc'd, NUL-terminated)
static char *base64(const unsigned char *p, size_t n) {
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = b64[v >> 18 & 63], *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *o = 0;
    return s;
}

// One input: a string (tokenized with the model's special tokens) or an
// array of token ids, into *ids (malloc'd); where names it for messages.
static int input_ids(serve_check *k, infer_model *m, const cJSON *in, const char *where, int32_t **ids, int *n) {
    *ids = NULL, *n = 0;
    if (cJSON_IsString(in)) {
        if (!in->valuestring[0]) return bad(k, 400, "input", "%s is an empty string (nothing to embed)", where);
        if (infer_tokenize(m, in->valuestring, strlen(in->valuestring), 1, 1, ids, n))
            return bad(k, 400, "input", "%s: cannot tokenize: %s", where, infer_last_error());
        return 0;
    }
    if (!cJSON_IsArray(in)) return bad(k, 400, "input", "%s must be a string or an array of token ids", where);
    int len = cJSON_GetArraySize(in), V = infer_model_n_vocab(m);
    if (len == 0) return bad(k, 400, "input", "%s is an empty array of token ids (nothing to embed)", where);
    if (!(*ids = malloc(sizeof(int32_t) * (size_t)len))) return bad(k, 500, NULL, "out of memory");
    int i = 0;
    for (const cJSON *e = in->child; e; e = e->next, i++) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || v != (double)(int)v || v < 0 || v >= V) {
            free(*ids), *ids = NULL;
            return bad(k, 400, "input", "%s[%d] is not a token id of this model (an integer 0 to %d)", where, i, V - 1);
        }
        (*ids)[i] = (int32_t)v;
    }
    *n = len;
    return 0;
}

int serve_embeddings(serve_check *k, infer_model *m, const char *alias, int n_ctx, const char *body, size_t len, char **out) {
    *out = NULL;
    cJSON *o = serve_parse_body(k, body, len);
    if (!o) return -1;
    int rc = -1;
    infer_ctx *c = NULL;
    float *e = NULL;
    cJSON *res = NULL;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input"), *fmt = cJSON_GetObjectItemCaseSensitive(o, "encoding_format");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model"), *dims = cJSON_GetObjectItemCaseSensitive(o, "dimensions");
    int E = infer_model_n_embd(m), b64_out = 0;
    infer_pooling pooling;
    int normalize;
    if (!in) { bad(k, 400, "input", "'input' is required: a string, an array of strings or token ids"); goto done; }
    if (model && !cJSON_IsString(model) && !cJSON_IsNull(model)) { bad(k, 400, "model", "'model' must be a string"); goto done; }
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64"))) {
            bad(k, 400, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
            goto done;
        }
        b64_out = !strcmp(fmt->valuestring, "base64");
    }
    if (dims && !cJSON_IsNull(dims) && !(cJSON_IsNumber(dims) && dims->valuedouble == E)) {
        bad(k, 400, "dimensions", "'dimensions' must be this model's %d (it does not shorten its embeddings)", E);
        goto done;
    }
    if (infer_model_embed_defaults(m, &pooling, &normalize)) { bad(k, 500, NULL, "%s", infer_last_error()); goto done; }
    // the inputs: one string or token array, else an array of them
    const cJSON *items[MAX_INPUTS];
    int n_in = 0;
    int one = cJSON_IsString(in) || (cJSON_IsArray(in) && (!in->child || cJSON_IsNumber(in->child)));
    if (one) items[n_in++] = in;
    else if (cJSON_IsArray(in)) {
        for (const cJSON *x = in->child; x; x = x->next) {
            if (n_in == MAX_INPUTS) { bad(k, 400, "input", "'input' holds more than %d inputs", MAX_INPUTS); goto done; }
            items[n_in++] = x;
        }
    } else {
        bad(k, 400, "input", "'input' must be a string, an array of strings or an array of token ids");
        goto done;
    }
    int limit = n_ctx > 0 && n_ctx < 512 ? n_ctx : 512; // (a pass's rows; an encoder's positions may be fewer: infer_embed says)
    if (infer_ctx_new(m, limit, &c) || infer_ctx_set_threads(c, cli_threads())) { bad(k, 500, NULL, "%s", infer_last_error()); goto done; }
    if (!(e = malloc(sizeof(float) * (size_t)E))) { bad(k, 500, NULL, "out of memory"); goto done; }
    res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(res, "data");
    long long total = 0;
    for (int i = 0; i < n_in; i++) {
        char where[48];
        snprintf(where, sizeof where, one ? "'input'" : "'input'[%d]", i);
        int32_t *ids;
        int n;
        if (input_ids(k, m, items[i], where, &ids, &n)) goto done;
        if (infer_embed(c, ids, n, pooling, normalize, e)) {
            free(ids);
            bad(k, 400, "input", "%s (%d tokens): %s", where, n, infer_last_error());
            goto done;
        }
        free(ids);
        total += n;
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", i);
        if (b64_out) {
            char *s = base64((const unsigned char *)e, sizeof(float) * (size_t)E); // (x86: little-endian already)
            if (!s) { cJSON_Delete(d); bad(k, 500, NULL, "out of memory"); goto done; }
            cJSON_AddStringToObject(d, "embedding", s);
            free(s);
        } else {
            cJSON *v = cJSON_AddArrayToObject(d, "embedding");
            for (int j = 0; j < E; j++) cJSON_AddItemToArray(v, cJSON_CreateNumber(e[j]));
        }
        cJSON_AddItemToArray(data, d);
    }
    cJSON_AddStringToObject(res, "model", alias);
    cJSON *u = cJSON_AddObjectToObject(res, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)total);
    cJSON_AddNumberToObject(u, "total_tokens", (double)total);
    if (!(*out = cJSON_PrintUnformatted(res))) { bad(k, 500, NULL, "out of memory"); goto done; }
    rc = 0;
done:
    cJSON_Delete(res);
    cJSON_Delete(o);
    free(e);
    infer_ctx_free(c);
    return rc;
}
