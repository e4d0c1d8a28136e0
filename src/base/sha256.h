// SHA-256 (FIPS 180-4), streaming: the vindex checksums its files with it.
#ifndef INFER_BASE_SHA256_H
#define INFER_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];        // chaining state
    uint64_t n;           // bytes hashed so far
    unsigned char buf[64];
    size_t nbuf;          // bytes waiting in buf
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
// Writes the 32-byte digest; the context must be initialised again before reuse.
void sha256_final(sha256_ctx *c, unsigned char out[32]);
// The digest as 64 lowercase hex characters and a NUL.
void sha256_hex(const unsigned char digest[32], char out[65]);
// One call: hex digest of n bytes.
void sha256_buf_hex(const void *data, size_t n, char out[65]);

#endif
