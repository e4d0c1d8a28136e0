// The communicator's shared-memory transport (comm.h: comm_open): one
// segment a job, on one host. Each round of a collective writes a rank's part
// into its slot, meets the others at one barrier and reads; rounds alternate
// between two banks of slots, so a rank may write the next round's part while
// another still reads this one's (it cannot come back to this bank before
// every rank has passed the next barrier, so has finished reading).
#include "base/comm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
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

typedef struct {
    header *h;
    float *slots;               // 2 banks x world x SLOT_FLOATS
    int bank;                   // the next round's
    size_t bytes;
    char name[80];
} shm;

#define S(c) ((shm *)(c)->t)
#define now comm_now
#define set_err comm_set_err

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
        if (__atomic_load_n(&S(c)->h->dead, __ATOMIC_ACQUIRE)) {
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
                if (r != c->rank && !alive(__atomic_load_n(&S(c)->h->pids[r], __ATOMIC_ACQUIRE))) {
                    set_err(c, "rank %d (pid %d) of the job has exited", r, S(c)->h->pids[r]);
                    __atomic_store_n(&S(c)->h->dead, 1, __ATOMIC_RELEASE);
                    return -1;
                }
        }
    }
}

static int shm_barrier(comm *c) {
    header *h = S(c)->h;
    int g = __atomic_load_n(&h->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&h->count, 1, __ATOMIC_ACQ_REL) == c->world) {
        __atomic_store_n(&h->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&h->gen, g + 1, __ATOMIC_RELEASE);
        return 0;
    }
    return wait_change(c, &h->gen, g);
}

static void shm_abort(comm *c) { __atomic_store_n(&S(c)->h->dead, 1, __ATOMIC_RELEASE); }

static void shm_close(comm *c) {
    shm *s = S(c);
    munmap(s->h, s->bytes);
    free(s);
    c->t = NULL;
}

// This round's slots (then the next round takes the other bank)
static float *round_slots(comm *c) {
    shm *s = S(c);
    float *p = s->slots + SLOT_FLOATS * (size_t)c->world * (size_t)s->bank;
    s->bank ^= 1;
    return p;
}

static int shm_allreduce(comm *c, float *x, size_t n) {
    for (size_t at = 0; at < n; at += SLOT_FLOATS) {
        size_t len = n - at < SLOT_FLOATS ? n - at : SLOT_FLOATS;
        float *slots = round_slots(c);
        memcpy(slots + SLOT_FLOATS * (size_t)c->rank, x + at, sizeof(float) * len);
        if (shm_barrier(c)) return -1;
        // the sum in rank order: every rank the same bits
        const float *s0 = slots;
        for (size_t i = 0; i < len; i++) x[at + i] = s0[i];
        for (int r = 1; r < c->world; r++) {
            const float *s = slots + SLOT_FLOATS * (size_t)r;
            for (size_t i = 0; i < len; i++) x[at + i] += s[i];
        }
    }
    return 0;
}

static int shm_allgather_cols(comm *c, const float *part, int rows, const int *cnt, const size_t *off, float *out, size_t ld) {
    size_t widest = 1;
    for (int r = 0; r < c->world; r++)
        if ((size_t)cnt[r] > widest) widest = (size_t)cnt[r];
    if (widest > SLOT_FLOATS) {
        set_err(c, "gather: rows of %zu floats are more than a slot's %zu", widest, SLOT_FLOATS);
        return -1;
    }
    int per = (int)(SLOT_FLOATS / widest); // rows a round
    for (int t0 = 0; t0 < rows; t0 += per) {
        int nr = rows - t0 < per ? rows - t0 : per;
        float *slots = round_slots(c);
        memcpy(slots + SLOT_FLOATS * (size_t)c->rank, part + (size_t)cnt[c->rank] * t0, sizeof(float) * (size_t)cnt[c->rank] * nr);
        if (shm_barrier(c)) return -1;
        for (int r = 0; r < c->world; r++) {
            const float *s = slots + SLOT_FLOATS * (size_t)r;
            for (int t = 0; t < nr; t++) memcpy(out + ld * (t0 + t) + off[r], s + (size_t)cnt[r] * t, sizeof(float) * cnt[r]);
        }
    }
    return 0;
}

static int shm_bcast(comm *c, void *p, size_t n, int root) {
    for (size_t at = 0; at < n; at += sizeof(float) * SLOT_FLOATS) {
        size_t len = n - at < sizeof(float) * SLOT_FLOATS ? n - at : sizeof(float) * SLOT_FLOATS;
        char *slot = (char *)(round_slots(c) + SLOT_FLOATS * (size_t)root);
        if (c->rank == root) memcpy(slot, (char *)p + at, len);
        if (shm_barrier(c)) return -1;
        if (c->rank != root) memcpy((char *)p + at, slot, len);
    }
    return 0;
}

static const comm_ops shm_ops = {
    .name = "shared memory",
    .barrier = shm_barrier,
    .allreduce = shm_allreduce,
    .allgather_cols = shm_allgather_cols,
    .bcast = shm_bcast,
    .abort = shm_abort,
    .close = shm_close,
};

int comm_shm_open(comm *c, const char *id, double timeout_s, char *err, size_t cap) {
    int rank = c->rank, world = c->world;
    shm *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    snprintf(s->name, sizeof s->name, "/%s", id);
    s->bytes = 4096 + sizeof(float) * SLOT_FLOATS * (size_t)world * 2;
    int fd = -1;
    double t0 = now();
    if (rank == 0) {
        fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)s->bytes) != 0) {
            snprintf(err, cap, "shared memory %s: %s", s->name, strerror(errno));
            if (fd >= 0) close(fd), shm_unlink(s->name);
            free(s);
            return -1;
        }
    } else {
        while ((fd = shm_open(s->name, O_RDWR, 0600)) < 0) {
            if (errno != ENOENT || now() - t0 > timeout_s) {
                snprintf(err, cap, "shared memory %s: %s (rank 0 not there after %.0f s?)", s->name, strerror(errno), timeout_s);
                free(s);
                return -1;
            }
            usleep(2000);
        }
        struct stat sb; // (rank 0 may not have sized it yet)
        while (fstat(fd, &sb) == 0 && (size_t)sb.st_size < s->bytes && now() - t0 <= timeout_s) usleep(2000);
        if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != s->bytes) {
            snprintf(err, cap, "shared memory %s: %lld bytes, not the %zu of a job of %d ranks", s->name, (long long)sb.st_size,
                     s->bytes, world);
            close(fd), free(s);
            return -1;
        }
    }
    void *p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, cap, "mapping shared memory %s: %s", s->name, strerror(errno));
        if (rank == 0) shm_unlink(s->name);
        free(s);
        return -1;
    }
    s->h = p, s->slots = (float *)((char *)p + 4096);
    c->t = s, c->ops = &shm_ops;
    header *h = s->h;
    int ok = 0;
    if (rank == 0) {
        h->magic = COMM_MAGIC, h->world = (uint32_t)world;
        __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    } else {
        while (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) && now() - t0 <= timeout_s) usleep(1000);
        if (h->magic != COMM_MAGIC || h->world != (uint32_t)world) {
            snprintf(err, cap, "job %s: not a job of %d ranks", id, world);
            goto fail;
        }
    }
    if (__atomic_exchange_n(&h->pids[rank], (int)getpid(), __ATOMIC_ACQ_REL) != 0) {
        snprintf(err, cap, "job %s: rank %d has joined already", id, rank);
        goto fail;
    }
    // every rank in, within the time; then the name goes (the mappings stay)
    __atomic_add_fetch(&h->joined, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&h->joined, __ATOMIC_ACQUIRE) < world) {
        if (now() - t0 > timeout_s || __atomic_load_n(&h->dead, __ATOMIC_ACQUIRE)) {
            snprintf(err, cap, "job %s: %d of %d ranks joined in %.0f s", id, __atomic_load_n(&h->joined, __ATOMIC_ACQUIRE), world,
                     timeout_s);
            __atomic_store_n(&h->dead, 1, __ATOMIC_RELEASE);
            goto fail;
        }
        usleep(1000);
    }
    if (shm_barrier(c)) {
        snprintf(err, cap, "job %s: %.200s", id, c->err);
        goto fail;
    }
    ok = 1;
fail:
    if (rank == 0) shm_unlink(s->name);
    if (ok) return 0;
    shm_close(c);
    c->ops = NULL;
    return -1;
}
