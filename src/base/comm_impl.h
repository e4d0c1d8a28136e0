// Inside the communicator (comm.h): what a transport provides. comm.c checks
// the arguments, handles a world of one and dispatches; comm_shm.c (one
// host's shared memory) and comm_tcp.c (sockets, across hosts) move the bytes.
#ifndef INFER_BASE_COMM_IMPL_H
#define INFER_BASE_COMM_IMPL_H

#include "base/comm.h"

#include <stddef.h>

// Every collective returns 0, or -1 with c->err set; after a failure the
// transport has told the other ranks (they fail too) and stays unusable.
typedef struct {
    const char *name; // "shared memory", "tcp"
    int (*barrier)(comm *c);
    int (*allreduce)(comm *c, float *x, size_t n);
    // rank r's rows of cnt[r] floats at column off[r] of out's rows of ld
    int (*allgather_cols)(comm *c, const float *part, int rows, const int *cnt, const size_t *off, float *out, size_t ld);
    int (*bcast)(comm *c, void *p, size_t n, int root);
    void (*abort)(comm *c);
    void (*close)(comm *c); // (frees c->t)
} comm_ops;

struct comm {
    const comm_ops *ops; // NULL: a world of one (nothing to send)
    void *t;             // the transport's state
    int rank, world;
    char err[256];
};

void comm_set_err(comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double comm_now(void); // seconds, monotonic

// Each joins c's job (c->rank, c->world set; world > 1): 0, or -1 with the
// reason in err (cap bytes).
int comm_shm_open(comm *c, const char *id, double timeout_s, char *err, size_t cap);
int comm_tcp_open(comm *c, const char *addr, const char *id, double timeout_s, char *err, size_t cap);

#endif
