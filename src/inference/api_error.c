// The error part of the public API (infer.h), defined where its INFER_API
// reaches it: base/error.c keeps the message and names the statuses.
#include "infer.h"
#include "base/error.h"

const char *infer_last_error(void) { return error_text(); }
const char *infer_status_name(infer_status st) { return status_name(st); }
