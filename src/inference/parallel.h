// Tensor parallel and the layer split (models/shard.c): the hooks the
// forward pass calls where a model is shared over ranks -- the sums of the
// output products over the ranks, the logits' columns gathered, OLMo 2's
// whole-row norms, and a layer split's pipeline of micro-batches with its
// hand-overs. Through NCCL for a GPU backend's buffers where the job has it,
// else through the host communicator (base/comm.h). A model on one rank
// meets none of them (m->comm NULL: each returns at once).
#ifndef INFER_INFERENCE_PARALLEL_H
#define INFER_INFERENCE_PARALLEL_H

#include "inference/context.h"

// The operations of the pass run on the side it is on (forward.c's go).
#define OPS (c->cur->be.ops)
#define BE (&c->cur->be)

// x (n floats, the backend's) = its sum over the ranks
void tp_sum(infer_ctx *c, float *x, size_t n);
// x (n floats, the backend's) = rank root's x
void tp_bcast(infer_ctx *c, float *x, size_t n, int root);
// c->tp_part with room for n floats at least (in the backend's memory), or NULL
float *tp_reserve(infer_ctx *c, size_t n);
// out (n rows of ld floats) gets rank r's n rows of cnt[r] columns at column
// cnt[0] + ... + cnt[r-1]; this rank's are packed at the front of c->tp_part,
// reserved for tp_gather_room(n, cnt) floats
size_t tp_gather_room(const infer_ctx *c, int n, const int *cnt);
void tp_gather_cols(infer_ctx *c, float *out, size_t ld, int n, const int *cnt);
// n rows of logits (lg, rows of V) = the output head of c->cur->s.xn's n
// rows, on a rank of a model shared over ranks
void tp_head(infer_ctx *c, float *lg, int n);
// The norm of each of T rows (n of this rank's columns, in x) over the whole
// row (OLMo 2's q and k), with the whole row's weight w
void tp_norm_rows(infer_ctx *c, float *x, int T, int n, const float *w);
// A layer split's pass of T rows: this rank's layers (layer() each) in
// micro-batches, each stage's rows handed to the next rank
void pipeline_layers(infer_ctx *c, int T, void (*layer)(infer_ctx *c, int il, int T));
// Why a collective of the pass failed
const char *tp_why(const infer_ctx *c);
// Whether a pass of T rows, n with logits, may be captured as a graph
int tp_graph_ok(infer_ctx *c, int T, int n);

#endif
