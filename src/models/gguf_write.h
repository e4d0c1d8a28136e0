// GGUF writer: metadata in insertion order, tensors encoded row by row from
// float rows (any type whose traits have from_float: f32, f16, bf16, and the
// quantized types once their encoders exist), or copied raw.
#ifndef INFER_MODELS_GGUF_WRITE_H
#define INFER_MODELS_GGUF_WRITE_H

#include <stdint.h>
#include "base/status.h"
#include "models/gguf.h"

typedef struct gguf_writer gguf_writer;

// Produces row `row` (ne[0] floats) of a tensor being written; an error stops
// the write (the destination keeps what it had).
typedef infer_status (*gguf_rows_fn)(void *user, int64_t row, float *out);

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

// Metadata. Setting a key again replaces its value.
infer_status gguf_set_u32(gguf_writer *w, const char *key, uint32_t v);
infer_status gguf_set_i32(gguf_writer *w, const char *key, int32_t v);
infer_status gguf_set_f32(gguf_writer *w, const char *key, float v);
infer_status gguf_set_bool(gguf_writer *w, const char *key, int v);
infer_status gguf_set_str(gguf_writer *w, const char *key, const char *v);
// An array of n fixed-size elements of elem_type, little-endian in data.
infer_status gguf_set_arr(gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n);
infer_status gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
// A value read from another GGUF file, copied as it is.
infer_status gguf_set_value(gguf_writer *w, const char *key, const gguf_value *v);

// Tensors (ne[0] innermost). The rows are produced at write time: fn is
// called once per row (ne[1] * ne[2] * ne[3] rows), in order.
infer_status gguf_add_tensor(gguf_writer *w, const char *name, int type, int nd, const int64_t *ne, gguf_rows_fn fn,
                             void *user);
// Bytes already in the tensor's type (kept by pointer until written).
infer_status gguf_add_tensor_raw(gguf_writer *w, const char *name, int type, int nd, const int64_t *ne, const void *data,
                                 size_t nbytes);

// Writes version 3 with general.alignment (default 32).
infer_status gguf_write_file(gguf_writer *w, const char *path);

#endif
