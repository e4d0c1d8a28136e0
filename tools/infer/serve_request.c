// infer serve's requests: a generation request's body (chat or completion)
// checked field by field and turned into a serve_request, the model's chat
// template rendered and the prompt tokenized. No sockets: tests/fuzz's
// fuzz_request drives it as the server does.
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vbad(serve_check *k, const char *param, const char *fmt, va_list ap) {
    if (k->status) return;
    vsnprintf(k->msg, sizeof k->msg, fmt, ap);
    snprintf(k->param, sizeof k->param, "%s", param);
    k->status = 400;
}

static int bad(serve_check *k, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(serve_check *k, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vbad(k, param, fmt, ap);
    va_end(ap);
    return -1;
}

int serve_bad(serve_check *k, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vbad(k, param, fmt, ap);
    va_end(ap);
    return -1;
}

// a number field in [lo, hi] (absent or null: *v unchanged); integer: whole numbers only
static void num_field(serve_check *k, const cJSON *o, const char *name, double lo, double hi, int integer, double *v) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!f || cJSON_IsNull(f)) return;
    if (!cJSON_IsNumber(f)) { bad(k, name, "'%s' must be a number", name); return; }
    double x = f->valuedouble;
    if (!isfinite(x) || x < lo || x > hi || (integer && x != floor(x))) {
        bad(k, name, "'%s' must be %s between %g and %g (got %g)", name, integer ? "an integer" : "a number", lo, hi, x);
        return;
    }
    *v = x;
}

void serve_num_field(serve_check *k, const cJSON *o, const char *name, double lo, double hi, int integer, double *v) {
    num_field(k, o, name, lo, hi, integer, v);
}

// The fields both endpoints share: sampling, max tokens, stop, stream.
static void common_fields(serve_check *k, const cJSON *o, serve_gen *g, int n_ctx, int chat) {
    static const char *const unsupported[] = {"functions", "logit_bias"}; // (tools: serve_tools.c)
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, unsupported[i]);
        if (f && !cJSON_IsNull(f) && !cJSON_IsFalse(f) && !(cJSON_IsObject(f) && !f->child))
            bad(k, unsupported[i], "'%s' is unsupported by this server", unsupported[i]);
    }
    double n = 1;
    num_field(k, o, "n", 1, 128, 1, &n);
    if (n != 1) bad(k, "n", "'n' other than 1 is unsupported by this server");
    infer_sampling *s = &g->r.sampling;
    double temp = s->temp, top_p = s->top_p, min_p = s->min_p, top_k = s->top_k, rp = s->repeat_penalty, pp = 0, fp = 0, seed = -1;
    double max_tokens = 0;
    num_field(k, o, "temperature", 0, 2, 0, &temp);
    num_field(k, o, "top_p", 0, 1, 0, &top_p);
    num_field(k, o, "min_p", 0, 1, 0, &min_p);
    num_field(k, o, "top_k", 0, 1e6, 1, &top_k);
    num_field(k, o, "repeat_penalty", 0, 10, 0, &rp);
    if (rp <= 0) bad(k, "repeat_penalty", "'repeat_penalty' must be above 0 (1: off; got %g)", rp);
    num_field(k, o, "presence_penalty", -2, 2, 0, &pp);
    num_field(k, o, "frequency_penalty", -2, 2, 0, &fp);
    num_field(k, o, "seed", -9007199254740991.0, 9007199254740991.0, 1, &seed);
    num_field(k, o, "max_tokens", 1, 1e9, 1, &max_tokens);
    num_field(k, o, "max_completion_tokens", 1, 1e9, 1, &max_tokens);
    s->temp = (float)temp, s->top_p = (float)top_p, s->min_p = (float)min_p, s->top_k = (int)top_k, s->repeat_penalty = (float)rp;
    s->presence_penalty = (float)pp, s->frequency_penalty = (float)fp;
    if (seed >= 0) s->seed = (uint64_t)seed;
    g->r.max_tokens = max_tokens > n_ctx ? n_ctx : (int)max_tokens;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (st && !cJSON_IsNull(st)) {
        int n_st = cJSON_IsString(st) ? 1 : cJSON_IsArray(st) ? cJSON_GetArraySize(st) : -1;
        if (n_st < 0 || n_st > 16) bad(k, "stop", "'stop' must be a string or an array of at most 16 strings");
        else if ((g->r.stop = calloc((size_t)(n_st ? n_st : 1), sizeof(char *)))) {
            const cJSON *x = cJSON_IsString(st) ? st : st->child;
            for (int i = 0; i < n_st && x && !k->status; i++, x = x->next) {
                if (!cJSON_IsString(x) || !*x->valuestring) bad(k, "stop", "'stop' strings must be non-empty strings");
                else if ((g->r.stop[g->r.n_stop] = strdup(x->valuestring))) g->r.n_stop++;
            }
        }
    }
    // log-probabilities: chat's logprobs (bool) + top_logprobs (0-20); completions' logprobs (0-5)
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(o, "logprobs");
    g->r.top_logprobs = -1;
    if (chat) {
        double top = 0;
        if (lp && !cJSON_IsNull(lp) && !cJSON_IsBool(lp)) bad(k, "logprobs", "'logprobs' must be a boolean");
        num_field(k, o, "top_logprobs", 0, 20, 1, &top);
        const cJSON *tl = cJSON_GetObjectItemCaseSensitive(o, "top_logprobs");
        if (tl && !cJSON_IsNull(tl) && !cJSON_IsTrue(lp)) bad(k, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (cJSON_IsTrue(lp)) g->r.top_logprobs = (int)top;
    } else if (lp && !cJSON_IsNull(lp)) {
        double n_lp = 0;
        num_field(k, o, "logprobs", 0, 5, 1, &n_lp);
        g->r.top_logprobs = (int)n_lp;
    }
    const cJSON *ie = cJSON_GetObjectItemCaseSensitive(o, "ignore_eos"); // (llama-server's)
    if (ie && !cJSON_IsNull(ie) && !cJSON_IsBool(ie)) bad(k, "ignore_eos", "'ignore_eos' must be a boolean");
    g->r.ignore_eos = cJSON_IsTrue(ie);
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(o, "stream");
    if (sm && !cJSON_IsNull(sm) && !cJSON_IsBool(sm)) bad(k, "stream", "'stream' must be a boolean");
    g->stream = cJSON_IsTrue(sm);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        const cJSON *iu = cJSON_IsObject(so) ? cJSON_GetObjectItemCaseSensitive(so, "include_usage") : NULL;
        if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu))) bad(k, "stream_options", "'stream_options' must be an object with a boolean 'include_usage'");
        g->include_usage = cJSON_IsTrue(iu);
    }
}

// The grammar the text must match, compiled here (a bad schema fails before
// the queue): response_format {"type": "json_object"} (any object; with
// llama-server's "schema", that schema) or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}} (OpenAI's), or llama-server's
// "json_schema" (a schema) and "grammar" (GBNF text). "strict" changes
// nothing: the output always matches the schema.
static void grammar_field(serve_check *k, infer_model *m, const cJSON *o, serve_gen *g) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format"), *js = cJSON_GetObjectItemCaseSensitive(o, "json_schema"),
                *gr = cJSON_GetObjectItemCaseSensitive(o, "grammar"), *schema = NULL;
    const char *param = NULL, *gbnf = NULL;
    int any_object = 0;
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *ty = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        param = "response_format";
        if (!cJSON_IsString(ty)) { bad(k, param, "'response_format' must be an object with a string 'type'"); return; }
        if (!strcmp(ty->valuestring, "text")) param = NULL;
        else if (!strcmp(ty->valuestring, "json_object")) {
            schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
            if (schema && !cJSON_IsNull(schema) && !cJSON_IsObject(schema)) { bad(k, param, "'response_format.schema' must be an object"); return; }
            if (!cJSON_IsObject(schema)) schema = NULL, any_object = 1;
        } else if (!strcmp(ty->valuestring, "json_schema")) {
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            schema = cJSON_IsObject(w) ? cJSON_GetObjectItemCaseSensitive(w, "schema") : NULL;
            if (!cJSON_IsObject(w)) { bad(k, param, "'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"}"); return; }
            if (!cJSON_IsObject(schema)) { bad(k, param, "'response_format.json_schema.schema' must be a JSON Schema object"); return; }
        } else {
            bad(k, param, "'response_format.type' must be text, json_object or json_schema (got '%.40s')", ty->valuestring);
            return;
        }
    }
    if (js && !cJSON_IsNull(js)) {
        if (param) { bad(k, "json_schema", "give one of 'response_format', 'json_schema' and 'grammar'"); return; }
        if (!cJSON_IsObject(js)) { bad(k, "json_schema", "'json_schema' must be a JSON Schema object"); return; }
        param = "json_schema", schema = js;
    }
    if (gr && !cJSON_IsNull(gr)) {
        if (param) { bad(k, "grammar", "give one of 'response_format', 'json_schema' and 'grammar'"); return; }
        if (!cJSON_IsString(gr)) { bad(k, "grammar", "'grammar' must be a string of GBNF"); return; }
        param = "grammar", gbnf = gr->valuestring;
    }
    if (!param || k->status) return;
    char *text = schema ? cJSON_PrintUnformatted(schema) : NULL;
    infer_status st = gbnf ? infer_grammar_from_gbnf(m, gbnf, NULL, &g->r.grammar)
                    : text || any_object ? infer_grammar_from_json_schema(m, text, &g->r.grammar) : INFER_ERR_NOMEM;
    free(text);
    if (st == INFER_ERR_NOMEM) k->status = 500, snprintf(k->msg, sizeof k->msg, "%s", infer_last_error());
    else if (st) bad(k, param, "'%s': %s", param, infer_last_error());
}

void serve_gen_free(serve_gen *g) {
    serve_tools_free(g->tools);
    g->tools = NULL;
    infer_grammar_free(g->r.grammar);
    free(g->r.prompt);
    for (int i = 0; i < g->r.n_stop; i++) free(g->r.stop[i]);
    free(g->r.stop);
    memset(&g->r, 0, sizeof g->r);
}

// The chat messages rendered by the model's template and tokenized (the
// messages' content as text: only the template's markup becomes special
// tokens) into the request's prompt, which must leave room for one token.
// The array is walked once (cJSON_GetArrayItem is a walk of its own).
static void chat_tokens(serve_check *k, infer_model *m, int n_ctx, const cJSON *msgs, serve_gen *g) {
    if (!msgs) { bad(k, "messages", "'messages' is required"); return; }
    if (!cJSON_IsArray(msgs) || !msgs->child) { bad(k, "messages", "'messages' must be a non-empty array"); return; }
    int n = cJSON_GetArraySize(msgs);
    infer_chat_message *v = calloc((size_t)n, sizeof *v);
    char **owned = calloc((size_t)n, sizeof *owned);
    int i = 0;
    for (const cJSON *m = msgs->child; m && v && owned && !k->status; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        char p[64];
        snprintf(p, sizeof p, "messages[%d]", i);
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) { bad(k, p, "%s must be an object with a string 'role'", p); break; }
        const char *r = role->valuestring;
        if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && strcmp(r, "assistant")) {
            bad(k, p, "%s: role '%.32s' is not one of system, developer, user, assistant", p, r);
            break;
        }
        v[i].role = strcmp(r, "developer") ? r : "system";
        if (cJSON_IsString(content)) {
            v[i].content = content->valuestring;
        } else if (cJSON_IsArray(content)) { // text parts, joined
            size_t len = 0, at = 0;
            const cJSON *part;
            cJSON_ArrayForEach(part, content) {
                const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type"), *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
                    bad(k, p, "%s: content parts must be {\"type\": \"text\", \"text\": ...}", p);
                    break;
                }
                len += strlen(tx->valuestring);
            }
            if (k->status || !(owned[i] = malloc(len + 1))) break;
            cJSON_ArrayForEach(part, content) {
                const char *tx = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
                size_t l = strlen(tx);
                memcpy(owned[i] + at, tx, l), at += l;
            }
            owned[i][at] = 0;
            v[i].content = owned[i];
        } else if (!strcmp(r, "assistant") && (!content || cJSON_IsNull(content))) {
            v[i].content = "";
        } else {
            bad(k, p, "%s: 'content' must be a string or an array of text parts", p);
        }
    }
    if (!k->status && (!v || !owned || i < n)) k->status = 500, snprintf(k->msg, sizeof k->msg, "out of memory");
    if (!k->status && infer_chat_tokenize(m, v, n, 1, &g->r.prompt, &g->r.n_prompt))
        bad(k, "messages", "the chat template: %s", infer_last_error());
    for (int j = 0; owned && j < n; j++) free(owned[j]);
    free(owned), free(v);
    if (k->status) return;
    if (g->r.n_prompt < 1) bad(k, "messages", "the prompt is empty");
    else if (g->r.n_prompt >= n_ctx)
        bad(k, "messages", "the prompt is %d tokens: this server's context holds %d, and one more is needed to answer", g->r.n_prompt, n_ctx);
}

// text -> the request's prompt tokens; the prompt must leave room for one token
static void tokenize_prompt(serve_check *k, infer_model *m, int n_ctx, const char *text, int add_special, int parse_special, serve_gen *g) {
    if (k->status) return;
    if (infer_tokenize(m, text, strlen(text), add_special, parse_special, &g->r.prompt, &g->r.n_prompt)) {
        bad(k, "prompt", "cannot tokenize the prompt: %s", infer_last_error());
        return;
    }
    if (g->r.n_prompt < 1) bad(k, "prompt", "the prompt is empty");
    else if (g->r.n_prompt >= n_ctx) {
        bad(k, "messages", "the prompt is %d tokens: this server's context holds %d, and one more is needed to answer", g->r.n_prompt, n_ctx);
        snprintf(k->param, sizeof k->param, "messages");
    }
}

// A JSON body: an object, with nothing but whitespace after it (NULL with k set).
cJSON *serve_parse_body(serve_check *k, const char *body, size_t len) {
    if (len && memchr(body, 0, len)) { bad(k, "", "the body holds a NUL byte"); return NULL; }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body ? body : "", len, &end, 0);
    if (!o) { bad(k, "", "the body is not valid JSON"); return NULL; }
    if (!cJSON_IsObject(o)) { cJSON_Delete(o), bad(k, "", "the body must be a JSON object"); return NULL; }
    size_t at = end ? (size_t)(end - (body ? body : "")) : len;
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' || body[at] == '\r')) at++;
    if (at < len) { cJSON_Delete(o), bad(k, "", "the body holds more than one JSON value (text after byte %zu)", at); return NULL; }
    return o;
}

void serve_parse_generate(serve_check *k, infer_model *m, int n_ctx, const char *body, size_t len, int chat, uint64_t seed,
                          serve_gen *g) {
    memset(g, 0, sizeof *g);
    g->r.sampling = infer_sampling_default();
    g->r.sampling.seed = seed;
    cJSON *o = serve_parse_body(k, body, len);
    if (!o) return;
    common_fields(k, o, g, n_ctx, chat);
    if (!k->status) grammar_field(k, m, o, g);
    if (chat) {
        cJSON *turns = k->status ? NULL : serve_tools_parse(k, m, o, g); // (tools: the messages the template gets)
        if (!k->status && cJSON_IsObject(turns)) serve_tools_tokenize(k, m, n_ctx, turns, g); // (the template renders the tools)
        else if (!k->status) chat_tokens(k, m, n_ctx, turns ? turns : cJSON_GetObjectItemCaseSensitive(o, "messages"), g);
        cJSON_Delete(turns);
    } else {
        const char *tl[] = {"tools", "tool_choice"};
        for (int i = 0; i < 2; i++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, tl[i]);
            if (f && !cJSON_IsNull(f)) bad(k, tl[i], "'%s' is for /v1/chat/completions", tl[i]);
        }
        // a completion's prompt is text; parse_special (llama-server's): special tokens' text becomes them
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt"), *ps = cJSON_GetObjectItemCaseSensitive(o, "parse_special");
        if (ps && !cJSON_IsNull(ps) && !cJSON_IsBool(ps)) bad(k, "parse_special", "'parse_special' must be a boolean");
        if (!p) bad(k, "prompt", "'prompt' is required");
        else if (!cJSON_IsString(p)) bad(k, "prompt", "'prompt' must be a string");
        else tokenize_prompt(k, m, n_ctx, p->valuestring, 1, cJSON_IsTrue(ps), g);
    }
    cJSON_Delete(o);
}
