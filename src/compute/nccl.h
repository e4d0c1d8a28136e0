// NCCL for a tensor-parallel job's buffers in GPU memory (DESIGN.md): the
// library is opened at run time (INFER_NCCL_LIB, else libnccl.so.2 where the
// loader or a Python environment's nvidia-nccl package has it), so builds and
// machines without it are unaffected. The job's host communicator carries
// rank 0's unique id to the others; every rank agrees whether NCCL is used
// (all can open it) before any of them initializes it.
#ifndef INFER_COMPUTE_NCCL_H
#define INFER_COMPUTE_NCCL_H

#include <stddef.h>

struct comm;
typedef struct nccl nccl;

// The job's NCCL communicator on this process's current GPU, or NULL (then
// nccl_why() says why: no library, a rank without it, NCCL's own refusal --
// two ranks on one GPU -- ...). A collective call: every rank of `host`
// makes it at the same point.
nccl *nccl_open(struct comm *host);
void nccl_close(nccl *n);
const char *nccl_why(void);
// "2.21.5" (the library's version), or "" before a successful open
const char *nccl_version(void);

// In `stream`'s order (a cudaStream_t): x (n floats, device memory) = the
// sum over the ranks; recv (world x n floats) = every rank's send, by rank.
// 0, or -1 (nccl_why says why).
int nccl_allreduce(nccl *n, float *x, size_t count, void *stream);
int nccl_allgather(nccl *n, const float *send, float *recv, size_t count, void *stream);
// x (count floats) = rank root's x
int nccl_bcast(nccl *n, float *x, size_t count, int root, void *stream);
// Point to point, as one group: send (ns floats) to rank `to` and recv (nr
// floats) from rank `from`; either may be NULL (nothing that way).
int nccl_sendrecv(nccl *n, const float *send, size_t ns, int to, float *recv, size_t nr, int from, void *stream);

#endif
