// The host communicator (comm.h): one shared-memory segment a job.
#include "base/comm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COMM_MAGIC 0x31706d63u        // "cmp1"
#define SLOT_FLOATS ((size_t)1 << 20) // 4 MiB a rank: collectives go in chunks of it

typedef struct {
    uint32_t magic, world;
    int ready;                  // rank 0 has made the segment
    int joined;                 // ranks that have opened it
    int count, gen;             // the barrier: arrivals, generation
    int dead;                   // a rank gave up: every waiter fails
    int pids[COMM_MAX_RANKS];
} header;

struct comm {
    int rank, world;
    header *h;
    float *slots;               // world x SLOT_FLOATS
    size_t bytes;
    char name[80];
    char err[256];
};

static _Thread_local char open_err[256];

const char *comm_last_error(void) { return open_err; }
const char *comm_error(const comm *c) { return c->err; }
int comm_rank(const comm *c) { return c->rank; }
int comm_world(const comm *c) { return c->world; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void set_err(comm *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

// 1 while process pid runs (a zombie, dead but not yet reaped, counts as gone).
static int alive(int pid) {
    if (pid <= 0) return 1; // (not joined yet)
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

// Spins, then yields, until *flag != v; every 50 ms checks that the other
// ranks still run. 0, or -1 (set in c->err).
static int wait_change(comm *c, const int *flag, int v) {
    double t_check = 0;
    for (long i = 0;; i++) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != v) return 0;
        if (__atomic_load_n(&c->h->dead, __ATOMIC_ACQUIRE)) {
            set_err(c, "another rank of the job failed");
            return -1;
        }
        if (i < 4096) continue;
        if (i < 8192) {
            sched_yield();
            continue;
        }
        double t = now();
        if (t_check == 0) t_check = t;
        // (a rank idle for long, as a server's between requests, wakes 1000 times a second)
        struct timespec ts = {0, i > 100000 ? 1000000 : 50000};
        nanosleep(&ts, NULL);
        if (t - t_check > 0.05) {
            t_check = t;
            for (int r = 0; r < c->world; r++)
                if (r != c->rank && !alive(__atomic_load_n(&c->h->pids[r], __ATOMIC_ACQUIRE))) {
                    set_err(c, "rank %d (pid %d) of the job has exited", r, c->h->pids[r]);
                    __atomic_store_n(&c->h->dead, 1, __ATOMIC_RELEASE);
                    return -1;
                }
        }
    }
}

int comm_barrier(comm *c) {
    if (c->world == 1) return 0;
    header *h = c->h;
    int g = __atomic_load_n(&h->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&h->count, 1, __ATOMIC_ACQ_REL) == c->world) {
        __atomic_store_n(&h->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&h->gen, g + 1, __ATOMIC_RELEASE);
        return 0;
    }
    return wait_change(c, &h->gen, g);
}

static int valid_id(const char *id) {
    size_t n = strlen(id);
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(id[i] == '-' || id[i] == '_' || (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z') ||
              (id[i] >= 'A' && id[i] <= 'Z')))
            return 0;
    return 1;
}

comm *comm_open(const char *id, int rank, int world, double timeout_s) {
    open_err[0] = 0;
    if (world < 1 || world > COMM_MAX_RANKS || rank < 0 || rank >= world) {
        snprintf(open_err, sizeof open_err, "rank %d of %d: ranks are 0 to world - 1, world 1 to %d", rank, world, COMM_MAX_RANKS);
        return NULL;
    }
    if (world > 1 && (!id || !valid_id(id))) {
        snprintf(open_err, sizeof open_err, "job id \"%s\": 1 to 64 letters, digits, '-' or '_'", id ? id : "");
        return NULL;
    }
    comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(open_err, sizeof open_err, "out of memory");
        return NULL;
    }
    c->rank = rank, c->world = world;
    if (world == 1) return c; // (nothing to share)
    snprintf(c->name, sizeof c->name, "/%s", id);
    c->bytes = 4096 + sizeof(float) * SLOT_FLOATS * (size_t)world;
    int fd = -1;
    double t0 = now();
    if (rank == 0) {
        fd = shm_open(c->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)c->bytes) != 0) {
            snprintf(open_err, sizeof open_err, "shared memory %s: %s", c->name, strerror(errno));
            if (fd >= 0) close(fd), shm_unlink(c->name);
            free(c);
            return NULL;
        }
    } else {
        while ((fd = shm_open(c->name, O_RDWR, 0600)) < 0) {
            if (errno != ENOENT || now() - t0 > timeout_s) {
                snprintf(open_err, sizeof open_err, "shared memory %s: %s (rank 0 not there after %.0f s?)", c->name,
                         strerror(errno), timeout_s);
                free(c);
                return NULL;
            }
            usleep(2000);
        }
        struct stat sb; // (rank 0 may not have sized it yet)
        while (fstat(fd, &sb) == 0 && (size_t)sb.st_size < c->bytes && now() - t0 <= timeout_s) usleep(2000);
        if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != c->bytes) {
            snprintf(open_err, sizeof open_err, "shared memory %s: %lld bytes, not the %zu of a job of %d ranks", c->name,
                     (long long)sb.st_size, c->bytes, world);
            close(fd), free(c);
            return NULL;
        }
    }
    void *p = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(open_err, sizeof open_err, "mapping shared memory %s: %s", c->name, strerror(errno));
        if (rank == 0) shm_unlink(c->name);
        free(c);
        return NULL;
    }
    c->h = p, c->slots = (float *)((char *)p + 4096);
    header *h = c->h;
    if (rank == 0) {
        h->magic = COMM_MAGIC, h->world = (uint32_t)world;
        __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    } else {
        while (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) && now() - t0 <= timeout_s) usleep(1000);
        if (h->magic != COMM_MAGIC || h->world != (uint32_t)world) {
            snprintf(open_err, sizeof open_err, "job %s: not a job of %d ranks", id, world);
            munmap(p, c->bytes), free(c);
            return NULL;
        }
    }
    if (__atomic_exchange_n(&h->pids[rank], (int)getpid(), __ATOMIC_ACQ_REL) != 0) {
        snprintf(open_err, sizeof open_err, "job %s: rank %d has joined already", id, rank);
        munmap(p, c->bytes), free(c);
        return NULL;
    }
    // every rank in, within the time; then the name goes (the mappings stay)
    __atomic_add_fetch(&h->joined, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&h->joined, __ATOMIC_ACQUIRE) < world) {
        if (now() - t0 > timeout_s || __atomic_load_n(&h->dead, __ATOMIC_ACQUIRE)) {
            snprintf(open_err, sizeof open_err, "job %s: %d of %d ranks joined in %.0f s", id,
                     __atomic_load_n(&h->joined, __ATOMIC_ACQUIRE), world, timeout_s);
            __atomic_store_n(&h->dead, 1, __ATOMIC_RELEASE);
            if (rank == 0) shm_unlink(c->name);
            munmap(p, c->bytes), free(c);
            return NULL;
        }
        usleep(1000);
    }
    if (comm_barrier(c)) {
        snprintf(open_err, sizeof open_err, "job %s: %.200s", id, c->err);
        if (rank == 0) shm_unlink(c->name);
        munmap(p, c->bytes), free(c);
        return NULL;
    }
    if (rank == 0) shm_unlink(c->name);
    return c;
}

void comm_abort(comm *c) {
    if (c && c->h) __atomic_store_n(&c->h->dead, 1, __ATOMIC_RELEASE);
}

void comm_close(comm *c) {
    if (!c) return;
    if (c->h) munmap(c->h, c->bytes);
    free(c);
}

int comm_allreduce(comm *c, float *x, size_t n) {
    if (c->world == 1) return 0;
    float *mine = c->slots + SLOT_FLOATS * (size_t)c->rank;
    for (size_t at = 0; at < n; at += SLOT_FLOATS) {
        size_t len = n - at < SLOT_FLOATS ? n - at : SLOT_FLOATS;
        memcpy(mine, x + at, sizeof(float) * len);
        if (comm_barrier(c)) return -1;
        // the sum in rank order: every rank the same bits
        const float *s0 = c->slots;
        for (size_t i = 0; i < len; i++) x[at + i] = s0[i];
        for (int r = 1; r < c->world; r++) {
            const float *s = c->slots + SLOT_FLOATS * (size_t)r;
            for (size_t i = 0; i < len; i++) x[at + i] += s[i];
        }
        if (comm_barrier(c)) return -1; // (the slots are free again)
    }
    return 0;
}

int comm_allgather_cols(comm *c, const float *part, int rows, const int *cnt, float *out, size_t ld) {
    size_t off[COMM_MAX_RANKS], widest = 1;
    for (int r = 0, o = 0; r < c->world; r++) {
        off[r] = (size_t)o, o += cnt[r];
        if ((size_t)cnt[r] > widest) widest = (size_t)cnt[r];
    }
    if (off[c->world - 1] + (size_t)cnt[c->world - 1] > ld) {
        set_err(c, "gather: %zu columns into rows of %zu", off[c->world - 1] + (size_t)cnt[c->world - 1], ld);
        return -1;
    }
    if (c->world == 1) {
        for (int t = 0; t < rows; t++) memcpy(out + ld * t, part + (size_t)cnt[0] * t, sizeof(float) * (size_t)cnt[0]);
        return 0;
    }
    if (widest > SLOT_FLOATS) {
        set_err(c, "gather: rows of %zu floats are more than a slot's %zu", widest, SLOT_FLOATS);
        return -1;
    }
    int per = (int)(SLOT_FLOATS / widest); // rows a round
    float *mine = c->slots + SLOT_FLOATS * (size_t)c->rank;
    for (int t0 = 0; t0 < rows; t0 += per) {
        int nr = rows - t0 < per ? rows - t0 : per;
        memcpy(mine, part + (size_t)cnt[c->rank] * t0, sizeof(float) * (size_t)cnt[c->rank] * nr);
        if (comm_barrier(c)) return -1;
        for (int r = 0; r < c->world; r++) {
            const float *s = c->slots + SLOT_FLOATS * (size_t)r;
            for (int t = 0; t < nr; t++) memcpy(out + ld * (t0 + t) + off[r], s + (size_t)cnt[r] * t, sizeof(float) * cnt[r]);
        }
        if (comm_barrier(c)) return -1;
    }
    return 0;
}

int comm_bcast(comm *c, void *p, size_t n, int root) {
    if (c->world == 1) return 0;
    char *slot = (char *)(c->slots + SLOT_FLOATS * (size_t)root);
    for (size_t at = 0; at < n; at += sizeof(float) * SLOT_FLOATS) {
        size_t len = n - at < sizeof(float) * SLOT_FLOATS ? n - at : sizeof(float) * SLOT_FLOATS;
        if (c->rank == root) memcpy(slot, (char *)p + at, len);
        if (comm_barrier(c)) return -1;
        if (c->rank != root) memcpy((char *)p + at, slot, len);
        if (comm_barrier(c)) return -1;
    }
    return 0;
}

void comm_new_id(char *out, size_t cap) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned x = (unsigned)ts.tv_nsec ^ (unsigned)getpid() * 2654435761u;
    snprintf(out, cap, "infer-%d-%08x", (int)getpid(), x);
}
