// Shared by the libFuzzer harnesses (tests/fuzz/README.md): inputs become
// files the way a user's would be, then go through the public API.
#ifndef INFER_FUZZ_H
#define INFER_FUZZ_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer.h"

// Writes all n bytes to fd; 0 on success.
__attribute__((unused)) static int fuzz_write_fd(int fd, const uint8_t *data, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

// Writes data to path whole (a harness's own scratch file); 0 on success.
__attribute__((unused)) static int fuzz_write(const char *path, const uint8_t *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    int st = fuzz_write_fd(fd, data, n);
    close(fd);
    return st;
}

// An anonymous file holding data, named as /proc/self/fd/N in *path (the
// caller closes the returned descriptor); -1 on failure.
__attribute__((unused)) static int fuzz_memfile(const uint8_t *data, size_t n, char *path, size_t cap) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    if (fuzz_write_fd(fd, data, n)) return close(fd), -1;
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

// A scratch directory of this process (made once, emptied by fuzz_clear).
__attribute__((unused)) static const char *fuzz_dir(void) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/infer-fuzz-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

__attribute__((unused)) static void fuzz_clear(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

// Files packed in one input: each part starts with FUZZ_SEP, the file's name
// and a newline; its bytes run to the next FUZZ_SEP (or the end). Names not in
// `allowed` (NULL-terminated) are skipped. Returns the number written.
#define FUZZ_SEP "\n@@file:"
__attribute__((unused)) static int fuzz_unpack(const uint8_t *data, size_t n, const char *dir, const char *const *allowed) {
    const size_t sl = sizeof FUZZ_SEP - 1;
    int written = 0;
    const uint8_t *p = memmem(data, n, FUZZ_SEP, sl);
    while (p) {
        const uint8_t *name = p + sl, *end = data + n;
        const uint8_t *nl = memchr(name, '\n', (size_t)(end - name));
        if (!nl) break;
        const uint8_t *body = nl + 1;
        const uint8_t *next = memmem(body, (size_t)(end - body), FUZZ_SEP, sl);
        const uint8_t *stop = next ? next : end;
        size_t nlen = (size_t)(nl - name);
        for (int i = 0; allowed[i]; i++) {
            if (strlen(allowed[i]) == nlen && !memcmp(allowed[i], name, nlen)) {
                char path[512];
                snprintf(path, sizeof path, "%s/%s", dir, allowed[i]);
                if (!fuzz_write(path, body, (size_t)(stop - body))) written++;
                break;
            }
        }
        p = next;
    }
    return written;
}

// The input unpacked into this process's scratch directory, emptied first
// (one thread, one input at a time); the directory.
__attribute__((unused)) static const char *fuzz_unpack_dir(const uint8_t *data, size_t n, const char *const *allowed) {
    const char *dir = fuzz_dir();
    fuzz_clear(dir);
    fuzz_unpack(data, n, dir, allowed);
    return dir;
}

// The short run a loaded model meets: a context, two tokens evaluated, a
// text tokenized and detokenized.
__attribute__((unused)) static void fuzz_exercise(infer_model *m) {
    int nv = infer_model_n_vocab(m);
    infer_ctx *c = NULL;
    if (nv > 0 && !infer_ctx_new(m, 8, &c)) {
        int32_t ids[2] = {1 % nv, 0};
        float *logits = malloc((size_t)nv * sizeof *logits);
        if (logits) infer_eval(c, ids, 2, logits, 1);
        free(logits);
        infer_ctx_free(c);
    }
    int32_t *tok = NULL;
    int nt = 0;
    const char *text = "Hello world, <s> 123 \xc3\xa9\xe4\xb8\xad!";
    if (!infer_tokenize(m, text, strlen(text), 1, 1, &tok, &nt)) {
        char *back = NULL;
        size_t len = 0;
        if (!infer_detokenize(m, tok, nt, 0, &back, &len)) free(back);
        free(tok);
    }
}

#endif
