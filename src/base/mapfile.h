// Read-only memory-mapped files: weights are used straight from the mapping.
#ifndef INFER_BASE_MAPFILE_H
#define INFER_BASE_MAPFILE_H

#include <stddef.h>
#include "base/status.h"

typedef struct {
    const unsigned char *data; // mapped bytes (NULL when size == 0)
    size_t size;               // file size in bytes
    char *path;                // owned copy of the path, for messages
} mapfile;

infer_status mapfile_open(mapfile *m, const char *path);
void mapfile_close(mapfile *m);
// The whole pages inside [p, p + n) of a read-only file mapping handed back to
// the kernel (nothing is lost: a later read maps them in again); the bytes
// dropped. p must lie in such a mapping.
size_t map_drop_pages(const void *p, size_t n);
// p and its n bytes lie inside m's mapping
int mapfile_holds(const mapfile *m, const void *p, size_t n);

// Reads a whole small text file (config.json, index.json) into a NUL-terminated
// heap buffer; refuses files larger than max_bytes.
infer_status read_text_file(const char *path, size_t max_bytes, char **out, size_t *len);

#endif
