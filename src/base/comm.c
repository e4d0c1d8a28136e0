// The communicator (comm.h): the arguments checked, a world of one handled,
// the rest dispatched to its transport (comm_impl.h).
#include "base/comm_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char open_err[256];

const char *comm_last_error(void) { return open_err; }
const char *comm_error(const comm *c) { return c->err; }
int comm_rank(const comm *c) { return c->rank; }
int comm_world(const comm *c) { return c->world; }
const char *comm_transport(const comm *c) { return c->ops ? c->ops->name : "none"; }

double comm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void comm_set_err(comm *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
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

// addr NULL: shared memory, else TCP
static comm *open_job(const char *addr, const char *id, int rank, int world, double timeout_s) {
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
    int st = addr ? comm_tcp_open(c, addr, id, timeout_s, open_err, sizeof open_err)
                  : comm_shm_open(c, id, timeout_s, open_err, sizeof open_err);
    if (st) {
        free(c);
        return NULL;
    }
    return c;
}

comm *comm_open(const char *id, int rank, int world, double timeout_s) { return open_job(NULL, id, rank, world, timeout_s); }

comm *comm_open_tcp(const char *addr, const char *id, int rank, int world, double timeout_s) {
    if (!addr || !*addr) {
        snprintf(open_err, sizeof open_err, "tcp: no address (host:port)");
        return NULL;
    }
    return open_job(addr, id, rank, world, timeout_s);
}

void comm_abort(comm *c) {
    if (c && c->ops) c->ops->abort(c);
}

void comm_close(comm *c) {
    if (!c) return;
    if (c->ops) c->ops->close(c);
    free(c);
}

int comm_barrier(comm *c) { return c->ops ? c->ops->barrier(c) : 0; }

int comm_allreduce(comm *c, float *x, size_t n) { return c->ops && n ? c->ops->allreduce(c, x, n) : 0; }

int comm_allgather_cols(comm *c, const float *part, int rows, const int *cnt, float *out, size_t ld) {
    size_t off[COMM_MAX_RANKS];
    for (int r = 0, o = 0; r < c->world; r++) {
        if (cnt[r] < 0) {
            comm_set_err(c, "gather: rank %d's %d columns", r, cnt[r]);
            return -1;
        }
        off[r] = (size_t)o, o += cnt[r];
    }
    if (off[c->world - 1] + (size_t)cnt[c->world - 1] > ld) {
        comm_set_err(c, "gather: %zu columns into rows of %zu", off[c->world - 1] + (size_t)cnt[c->world - 1], ld);
        return -1;
    }
    if (!c->ops) {
        for (int t = 0; t < rows; t++) memcpy(out + ld * t, part + (size_t)cnt[0] * t, sizeof(float) * (size_t)cnt[0]);
        return 0;
    }
    return rows > 0 ? c->ops->allgather_cols(c, part, rows, cnt, off, out, ld) : 0;
}

int comm_bcast(comm *c, void *p, size_t n, int root) {
    if (root < 0 || root >= c->world) {
        comm_set_err(c, "bcast: root %d of %d ranks", root, c->world);
        return -1;
    }
    return c->ops && n ? c->ops->bcast(c, p, n, root) : 0;
}

void comm_new_id(char *out, size_t cap) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned x = (unsigned)ts.tv_nsec ^ (unsigned)getpid() * 2654435761u;
    snprintf(out, cap, "infer-%d-%08x", (int)getpid(), x);
}
