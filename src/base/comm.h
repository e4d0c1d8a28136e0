// A communicator of the ranks of one tensor-parallel model (one process a
// rank): sums of float buffers over the ranks (all-reduce) and rows gathered
// from every rank (all-gather), in host memory.
//
// Two transports, one behaviour. The ranks of one host meet in a POSIX
// shared-memory segment named by the job's id (comm_open): rank 0 makes it,
// the others open it, and every collective copies each rank's part into its
// slot and reads all the slots in rank order. Ranks on several hosts meet
// over TCP (comm_open_tcp): rank 0 listens at an address, the others connect,
// and every collective goes through rank 0, which sums in rank order and
// sends the result back. Either way each rank ends with the same bits, and a
// rank whose peer has died gets an error naming it instead of waiting for
// ever. (NCCL, for buffers in GPU memory, sits beside this in
// compute/nccl.c; the communicator also carries its unique id.)
#ifndef INFER_BASE_COMM_H
#define INFER_BASE_COMM_H

#include <stddef.h>

#define COMM_MAX_RANKS 64 // (infer.h's INFER_TP_MAX_RANKS)

typedef struct comm comm;

// Joins job `id` (letters, digits, '-', '_'; at most 64) as rank `rank` of
// `world`; waits up to timeout_s seconds for the others. NULL on failure
// (comm_last_error says why).
comm *comm_open(const char *id, int rank, int world, double timeout_s);
// The same over TCP: rank 0 listens at addr ("host:port", "[v6]:port"; the
// port its own), the others connect to it, retrying for up to timeout_s.
// Each rank says its job id, world and rank; rank 0 refuses a mismatch and
// the refused rank's error names what differs. Inside a collective, a
// message that has begun must end within timeout_s; the wait for one to
// begin has no limit (a server's ranks idle between requests), but a peer
// that exits closes its connection and one whose host is gone fails TCP's
// keepalive probes (about 30 s): the error names the rank.
comm *comm_open_tcp(const char *addr, const char *id, int rank, int world, double timeout_s);
// Marks the job failed: every rank's next wait on it fails (c NULL: nothing).
// (TCP: an abort message to the peers, then the connections closed.)
void comm_abort(comm *c);
void comm_close(comm *c);
int comm_rank(const comm *c);
int comm_world(const comm *c);
// "shared memory", "tcp", or "none" (a world of one).
const char *comm_transport(const comm *c);

// x (n floats, this rank's) = the sum over the ranks of their x. 0, or -1
// (comm_error says why; the communicator is then unusable).
int comm_allreduce(comm *c, float *x, size_t n);
// Rows gathered by columns: rank r holds `rows` rows of cnt[r] floats
// (part, packed); out (rows rows of ld floats) gets rank r's at column
// off[r] = cnt[0] + ... + cnt[r-1].
int comm_allgather_cols(comm *c, const float *part, int rows, const int *cnt, float *out, size_t ld);
// Every rank waits for all the others.
int comm_barrier(comm *c);
// Rank `root`'s n bytes of p to every rank.
int comm_bcast(comm *c, void *p, size_t n, int root);

// Why the last call on c failed.
const char *comm_error(const comm *c);
// Why the last comm_open failed.
const char *comm_last_error(void);

// A job id not in use on this host (for a launcher): "infer-<pid>-<random>".
void comm_new_id(char *out, size_t cap);

#endif
