#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[1024];
static _Thread_local infer_status g_status;

static void vset(infer_status st, const char *fmt, va_list ap) {
    g_status = st;
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
}

infer_status fail(infer_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(st, fmt, ap);
    va_end(ap);
    return st;
}

void *fail_null(infer_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(st, fmt, ap);
    va_end(ap);
    return NULL;
}

infer_status fail_wrap(infer_status st, const char *fmt, ...) {
    char old[sizeof g_msg];
    memcpy(old, g_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    // append ": <old message>", cut to fit
    for (const char *p = ": "; n >= 0 && (size_t)n + 1 < sizeof g_msg && *p; p++) g_msg[n++] = *p;
    for (const char *p = old; n >= 0 && (size_t)n + 1 < sizeof g_msg && *p; p++) g_msg[n++] = *p;
    if (n >= 0 && (size_t)n < sizeof g_msg) g_msg[n] = 0;
    g_status = st;
    return st;
}

const char *error_text(void) { return g_msg[0] ? g_msg : "no error"; }

const char *status_name(infer_status st) {
    switch (st) {
    case INFER_OK: return "ok";
    case INFER_ERR_IO: return "i/o error";
    case INFER_ERR_FORMAT: return "bad format";
    case INFER_ERR_UNSUPPORTED: return "unsupported";
    case INFER_ERR_ARG: return "bad argument";
    case INFER_ERR_NOMEM: return "out of memory";
    }
    return "unknown status";
}
