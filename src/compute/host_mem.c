// Host memory of the CPU backends (cpu, reference): a context's arena,
// zeroed and 64-byte aligned, and a KV cache that takes memory as its
// sequence grows (backend.h's kv_reserve / kv_commit / kv_trim).
//
// A growing cache is an anonymous mapping with nothing behind it: the kernel
// backs a page when it is first written and reads an untouched one as zeros.
// What the engine adds is the count: kv_commit charges the pages of a range
// to one budget of the process (a bit a page says which are charged) and
// refuses past it, kv_trim gives whole pages back (madvise: they read as
// zeros again) and uncharges them. So a server of many slots whose caches
// could not all be full at once (--parallel 256 -c 32768) starts at once,
// takes memory as its sequences grow and makes a request wait for memory
// (serve_engine's slot_room) instead of being killed for it.
//
// The budget: INFER_KV_MEM=MiB, else 90% of the memory the kernel reports
// available (/proc/meminfo's MemAvailable) when the first cache is reserved.
#include "compute/backend.h"
#include "base/cpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *backend_host_alloc(backend *b, size_t bytes) {
    (void)b;
    size_t n = (bytes + 63) & ~(size_t)63; // aligned_alloc wants a multiple of the alignment
    void *p = aligned_alloc(64, n ? n : 64);
    if (p) memset(p, 0, n);
    return p;
}

// a growing cache: its mapping, and which of its pages are charged
typedef struct kv_map {
    struct kv_map *next;
    char *p;
    size_t len;      // bytes mapped (whole pages)
    uint64_t *bits;  // a bit a page: charged
    size_t charged;  // pages charged
} kv_map;

static struct {
    pthread_mutex_t mu;
    kv_map *maps;
    size_t page, budget, used; // (budget and used in pages; budget 0: not read yet)
} g_kv = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

// the budget in pages (g_kv.mu held)
static size_t kv_budget_locked(void) {
    if (g_kv.budget) return g_kv.budget;
    size_t bytes = 0;
    const char *e = getenv("INFER_KV_MEM");
    if (e && *e) {
        char *end;
        unsigned long long mib = strtoull(e, &end, 10);
        if (*end == 0 && mib > 0 && mib < (1ull << 40)) bytes = (size_t)mib << 20;
        else fprintf(stderr, "infer: INFER_KV_MEM=%s is not a number of MiB; the KV caches' memory follows MemAvailable\n", e);
    }
    if (!bytes) {
        size_t avail = mem_available();
        bytes = avail ? avail / 10 * 9 : (size_t)sysconf(_SC_PHYS_PAGES) / 10 * 9 * (size_t)sysconf(_SC_PAGESIZE);
    }
    g_kv.budget = bytes / g_kv.page ? bytes / g_kv.page : 1;
    return g_kv.budget;
}

void backend_host_kv_budget(size_t bytes) {
    pthread_mutex_lock(&g_kv.mu);
    if (!g_kv.page) g_kv.page = (size_t)sysconf(_SC_PAGESIZE);
    g_kv.budget = bytes / g_kv.page ? bytes / g_kv.page : 1;
    pthread_mutex_unlock(&g_kv.mu);
}

size_t backend_host_kv_used(size_t *budget) {
    pthread_mutex_lock(&g_kv.mu);
    if (!g_kv.page) g_kv.page = (size_t)sysconf(_SC_PAGESIZE);
    size_t u = g_kv.used * g_kv.page;
    if (budget) *budget = kv_budget_locked() * g_kv.page;
    pthread_mutex_unlock(&g_kv.mu);
    return u;
}

static kv_map *kv_find(const void *p) {
    for (kv_map *m = g_kv.maps; m; m = m->next)
        if (m->p == p) return m;
    return NULL;
}

void *backend_host_kv_reserve(backend *b, size_t bytes, size_t *chunk) {
    (void)b;
    pthread_mutex_lock(&g_kv.mu);
    if (!g_kv.page) g_kv.page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t pg = g_kv.page;
    pthread_mutex_unlock(&g_kv.mu);
    size_t len = ((bytes ? bytes : 1) + pg - 1) / pg * pg, np = len / pg;
    kv_map *m = calloc(1, sizeof *m);
    uint64_t *bits = m ? calloc((np + 63) / 64, sizeof *bits) : NULL;
    void *p = bits ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(bits), free(m);
        return NULL;
    }
    madvise(p, len, MADV_NOHUGEPAGE); // (a huge page would back 2 MB of a cache charged for one page)
    *m = (kv_map){NULL, p, len, bits, 0};
    pthread_mutex_lock(&g_kv.mu);
    m->next = g_kv.maps, g_kv.maps = m;
    pthread_mutex_unlock(&g_kv.mu);
    *chunk = pg;
    return p;
}

int backend_host_kv_commit(backend *b, void *p, size_t off, size_t len) {
    (void)b;
    if (!len) return 0;
    pthread_mutex_lock(&g_kv.mu);
    kv_map *m = kv_find(p);
    const size_t pg = g_kv.page;
    int rc = -1;
    if (m && off + len <= m->len && off + len >= off) {
        size_t p0 = off / pg, p1 = (off + len + pg - 1) / pg, fresh = 0;
        for (size_t i = p0; i < p1; i++) fresh += !(m->bits[i / 64] >> (i % 64) & 1);
        if (g_kv.used + fresh <= kv_budget_locked()) {
            for (size_t i = p0; i < p1; i++) m->bits[i / 64] |= 1ull << (i % 64);
            m->charged += fresh, g_kv.used += fresh, rc = 0;
        }
    }
    pthread_mutex_unlock(&g_kv.mu);
    return rc;
}

void backend_host_kv_trim(backend *b, void *p, size_t off, size_t len) {
    (void)b;
    pthread_mutex_lock(&g_kv.mu);
    kv_map *m = kv_find(p);
    const size_t pg = g_kv.page;
    if (m && off < m->len) {
        len = len < m->len - off ? len : m->len - off;
        size_t p0 = (off + pg - 1) / pg, p1 = (off + len) / pg, gone = 0; // (the pages wholly inside)
        if (p1 > p0 && !madvise(m->p + p0 * pg, (p1 - p0) * pg, MADV_DONTNEED))
            for (size_t i = p0; i < p1; i++)
                if (m->bits[i / 64] >> (i % 64) & 1) m->bits[i / 64] &= ~(1ull << (i % 64)), gone++;
        m->charged -= gone, g_kv.used -= gone;
    }
    pthread_mutex_unlock(&g_kv.mu);
}

void backend_host_release(backend *b, void *p) {
    (void)b;
    if (!p) return;
    pthread_mutex_lock(&g_kv.mu);
    kv_map **at = &g_kv.maps;
    while (*at && (*at)->p != p) at = &(*at)->next;
    kv_map *m = *at;
    if (m) *at = m->next, g_kv.used -= m->charged;
    pthread_mutex_unlock(&g_kv.mu);
    if (!m) {
        free(p);
        return;
    }
    munmap(m->p, m->len);
    free(m->bits), free(m);
}
