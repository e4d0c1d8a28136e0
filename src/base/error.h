// Errors are values: a function returns an infer_status (or NULL) and records
// a message naming the file, tensor or field. Only main() decides to exit.
#ifndef INFER_BASE_ERROR_H
#define INFER_BASE_ERROR_H

#include "base/status.h"

// Records a printf-style message for error_text() and returns `st`.
infer_status fail(infer_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Same as fail() but returns NULL, for constructors.
void *fail_null(infer_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Prefix the current message with "what: " (e.g. a file name) to give context.
infer_status fail_wrap(infer_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// The message of the last failure on this thread ("no error" before any):
// infer.h's infer_last_error.
const char *error_text(void);
// A status in words ("bad format"): infer.h's infer_status_name.
const char *status_name(infer_status st);

#endif
