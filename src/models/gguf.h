// GGUF (v2, v3) reader over bytes in memory (usually a mapped file).
//
// Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv,
// n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims,
// i64 ne[n_dims], u32 ggml type, u64 offset), padding to general.alignment
// (default 32), then the tensor data; offsets are relative to its start.
// A string is u64 length + bytes (no NUL). Every count, length, offset and
// shape is checked against the file before use.
#ifndef INFER_MODELS_GGUF_H
#define INFER_MODELS_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"
#include "models/tensor.h"

enum gguf_type { // GGUF's value types (append only)
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_TYPE_COUNT = 13,
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64 // ggml's GGML_MAX_NAME: names are at most 63 bytes

// One metadata value. Bytes point into the file.
typedef struct gguf_value {
    int type;                    // enum gguf_type
    int elem_type;               // arrays: the elements' type
    uint64_t n;                  // strings: byte length; arrays: element count
    const unsigned char *data;   // scalars and strings: the bytes; arrays of fixed-size elements: element 0
    const unsigned char **strs;  // arrays of strings: where each element (u64 length, bytes) starts (owned)
    struct gguf_value *items;    // arrays of arrays: n values (owned), else NULL
} gguf_value;

typedef struct {
    char *name;                  // NUL-terminated copy
    uint32_t n_dims;
    int64_t ne[MAX_DIMS];        // ne[0] innermost; unused dims are 1
    uint32_t type;               // ggml type number
    uint64_t offset;             // from the start of the data section
    uint64_t nbytes;             // known types: exact; others: up to the next tensor's offset
} gguf_tensor_info;

typedef struct gguf_file {
    char *path;                  // for messages
    mapfile map;                 // owned when opened with gguf_open
    const unsigned char *base;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    size_t data_offset;          // start of the data section in the file
    uint64_t n_kv, n_tensors;
    char **keys;                 // n_kv NUL-terminated copies
    gguf_value *vals;            // n_kv
    gguf_tensor_info *tensors;   // n_tensors
} gguf_file;

// Maps and parses a file; *out is NULL on failure (the message names the file
// and the problem).
infer_status gguf_open(gguf_file **out, const char *path);
// Parses bytes the caller keeps alive (path only for messages).
infer_status gguf_parse(gguf_file **out, const void *data, size_t size, const char *path);
void gguf_close(gguf_file *g);

// Adds every tensor of g to a store (names are GGUF's; type = ggml type
// number when dtype_get() knows it, else -1 with type_name naming it, an
// error only for a model that uses the tensor). g must outlive the store.
infer_status store_add_gguf(tensor_store *s, const gguf_file *g);

// ---------------------------------------------------------------------------
// Metadata by key. Getters of optional keys: when the key is absent they
// return INFER_OK and leave *out alone; a present key of the wrong type or out
// of range fails with a message naming the file and the key.

const gguf_value *gguf_find(const gguf_file *g, const char *key); // NULL if absent
const char *gguf_type_name(int type);

// Any integer or bool type, checked to lie in [lo, hi].
infer_status gguf_get_int(const gguf_file *g, const char *key, int64_t lo, int64_t hi, int64_t *out);
// f32 or f64 (integers are accepted too).
infer_status gguf_get_f64(const gguf_file *g, const char *key, double *out);
infer_status gguf_get_bool(const gguf_file *g, const char *key, int *out);
// A string: *s points into the file and is NOT NUL-terminated.
infer_status gguf_get_str(const gguf_file *g, const char *key, const char **s, size_t *len);
// A string copied into buf (NUL-terminated); fails if it needs more than cap - 1 bytes.
infer_status gguf_get_str_copy(const gguf_file *g, const char *key, char *buf, size_t cap);
// An array: elem_type (or -1: any); *out is NULL when absent.
infer_status gguf_get_arr(const gguf_file *g, const char *key, int elem_type, const gguf_value **out);
// A "key or per-layer array" value (llama.cpp's get_key_or_arr): n ints in [lo, hi].
infer_status gguf_get_int_or_arr(const gguf_file *g, const char *key, int n, int64_t lo, int64_t hi, int *out, int *found);

// Elements of an array value (i < a->n; the element type must fit the call).
int64_t gguf_arr_int(const gguf_value *a, uint64_t i);         // integer or bool elements
double gguf_arr_f64(const gguf_value *a, uint64_t i);          // float or integer elements
const char *gguf_arr_str(const gguf_value *a, uint64_t i, size_t *len); // string elements (not NUL-terminated)
const gguf_value *gguf_arr_item(const gguf_value *a, uint64_t i);       // array elements (nested arrays)

// Bytes of one value of a fixed-size type, 0 for strings, arrays and unknown types.
size_t gguf_type_size(int type);

#endif
