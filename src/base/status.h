// The status every fallible function returns (errors are values: base/error.h
// records the message). include/infer.h holds a copy of this definition, so
// that applications need only that header; the two are one guarded block, the
// same text in both files (tests/public_header.sh compares them), and a file
// that includes both gets whichever comes first.
#ifndef INFER_BASE_STATUS_H
#define INFER_BASE_STATUS_H

#ifndef INFER_STATUS_DEFINED
#define INFER_STATUS_DEFINED
typedef enum {           // append-only
    INFER_OK = 0,
    INFER_ERR_IO,          // a file could not be opened, mapped or read
    INFER_ERR_FORMAT,      // a file's contents are malformed or inconsistent
    INFER_ERR_UNSUPPORTED, // well-formed, but not something we run (architecture, dtype)
    INFER_ERR_ARG,         // a bad argument from the caller (ids out of range, ...)
    INFER_ERR_NOMEM,       // an allocation failed or would be unreasonably large
} infer_status;
#endif

#endif
