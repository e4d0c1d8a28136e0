// Verifying a vindex: everything vindex_open checks, then every file hashed
// against the sha256 index.json records, and weights.gguf parsed.
#include "vindex/vindex_impl.h"
#include "models/gguf.h"
#include "base/sha256.h"
#include "base/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

// Streams a file through SHA-256 (weights.gguf is not mapped by vindex_open,
// and reading beats mapping for one pass).
infer_status vindex_hash_file(const char *path, char hex[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(INFER_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    static _Thread_local unsigned char buf[1 << 16];
    sha256_ctx c;
    sha256_init(&c);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&c, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) return fail(INFER_ERR_IO, "%s: read error", path);
    unsigned char d[32];
    sha256_final(&c, d);
    sha256_hex(d, hex);
    return INFER_OK;
}

infer_status vindex_verify(const char *dir) {
    vindex *v;
    infer_status st = vindex_open(dir, &v);
    if (st) return st;
    char path[4096];
    for (int i = 0; i < VF_COUNT && !st; i++) {
        char hex[65];
        snprintf(path, sizeof path, "%s/%s", v->dir, vindex_file_names[i]);
        st = vindex_hash_file(path, hex);
        if (!st && strcmp(hex, v->sha256[i]))
            st = fail(INFER_ERR_FORMAT, "%s: sha256 %s differs from index.json's %s (the file was changed)", path, hex, v->sha256[i]);
    }
    for (int i = 0; i < VF_OPT_COUNT && !st; i++) {
        if (!v->opt_present[i]) continue;
        char hex[65];
        snprintf(path, sizeof path, "%s/%s", v->dir, vindex_opt_names[i]);
        st = vindex_hash_file(path, hex);
        if (!st && strcmp(hex, v->opt_sha256[i]))
            st = fail(INFER_ERR_FORMAT, "%s: sha256 %s differs from index.json's %s (the file was changed)", path, hex, v->opt_sha256[i]);
    }
    if (!st) {
        gguf_file *g;
        st = gguf_open(&g, v->model_path);
        gguf_close(g);
    }
    vindex_close(v);
    return st;
}
