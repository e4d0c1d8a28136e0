// Entry point of the Jinja interpreter: normalizes the source, parses,
// renders, and turns a longjmp'd error into an infer_status.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "inference/jinja.h"
#include "inference/jinja_impl.h"

infer_status jinja_render(const char *tmpl, const cJSON *vars, long long now, char **out) {
    *out = NULL;
    if (!tmpl) return fail(INFER_ERR_ARG, "chat template: no template");
    size_t n = strlen(tmpl);
    if (n > J_MAX_TEMPLATE)
        return fail(INFER_ERR_ARG, "chat template: %zu bytes is larger than the %u MiB limit", n, J_MAX_TEMPLATE >> 20);
    if (vars && !cJSON_IsObject(vars)) return fail(INFER_ERR_ARG, "chat template: variables must be a JSON object");

    jstate *J = calloc(1, sizeof *J);
    if (!J) return fail(INFER_ERR_NOMEM, "chat template: out of memory");
    J->now = now;
    infer_status st = INFER_OK;
    if (setjmp(J->fail)) {
        st = J->status ? (infer_status)J->status : INFER_ERR_UNSUPPORTED;
        fail(st, "chat template: %s", J->msg);
        jarena_free(&J->arena);
        free(J);
        return st;
    }
    // jinja2 reads \r\n and \r as \n and drops one trailing newline
    char *src = jalloc(J, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (tmpl[i] == '\r') {
            src[m++] = '\n';
            if (i + 1 < n && tmpl[i + 1] == '\n') i++;
        } else {
            src[m++] = tmpl[i];
        }
    }
    if (m && src[m - 1] == '\n') m--;
    src[m] = 0;
    J->src = src;
    J->src_n = m;

    nlist top = jparse(J);
    J->depth = 0;
    J->globals = jalloc(J, sizeof *J->globals);
    J->cur = J->globals;
    if (vars)
        for (const cJSON *c = vars->child; c; c = c->next)
            dict_setc(J, &J->globals->vars, jstrdup(J, c->string ? c->string : "", strlen(c->string ? c->string : "")),
                      v_from_json(J, c));
    jbuf b = {0};
    J->out = &b;
    exec_list(J, &top);
    // a "\0" escape can put a NUL in the text, which a C string cannot carry
    if (b.n && memchr(b.p, 0, b.n)) jerr(J, -1, "template output contains a NUL character");

    char *r = malloc(b.n + 1);
    if (!r) {
        jarena_free(&J->arena);
        free(J);
        return fail(INFER_ERR_NOMEM, "chat template: out of memory");
    }
    if (b.n) memcpy(r, b.p, b.n);
    r[b.n] = 0;
    jarena_free(&J->arena);
    free(J);
    *out = r;
    return INFER_OK;
}
