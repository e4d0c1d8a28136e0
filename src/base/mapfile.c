#include "base/mapfile.h"
#include "base/error.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

infer_status mapfile_open(mapfile *m, const char *path) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(INFER_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(INFER_ERR_IO, "%s: not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return fail(INFER_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        }
        m->data = p;
    }
    close(fd);
    m->path = strdup(path);
    if (!m->path) { mapfile_close(m); return fail(INFER_ERR_NOMEM, "out of memory"); }
    return INFER_OK;
}

void mapfile_close(mapfile *m) {
    if (m->data) munmap((void *)m->data, m->size);
    free(m->path);
    memset(m, 0, sizeof *m);
}

infer_status read_text_file(const char *path, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(INFER_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return fail(INFER_ERR_IO, "%s: cannot seek", path); }
    long n = ftell(f);
    if (n < 0) { fclose(f); return fail(INFER_ERR_IO, "%s: cannot size", path); }
    if ((size_t)n > max_bytes) {
        fclose(f);
        return fail(INFER_ERR_FORMAT, "%s: file is %ld bytes, more than the %zu allowed", path, n, max_bytes);
    }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf) { fclose(f); return fail(INFER_ERR_NOMEM, "%s: out of memory", path); }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) { free(buf); return fail(INFER_ERR_IO, "%s: short read", path); }
    buf[n] = 0;
    *out = buf;
    if (len) *len = (size_t)n;
    return INFER_OK;
}

size_t map_drop_pages(const void *p, size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1), b = ((uintptr_t)p + n) & ~(uintptr_t)(pg - 1);
    if (b <= a) return 0;
    return madvise((void *)a, b - a, MADV_DONTNEED) == 0 ? b - a : 0;
}

int mapfile_holds(const mapfile *m, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)m->data, x = (uintptr_t)p;
    return m->data && x >= a && x - a <= m->size && n <= m->size - (x - a);
}
