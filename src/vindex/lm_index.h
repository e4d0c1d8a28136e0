// The lm_head index: the output head's rows clustered (lm_index.c), so the
// best tokens for a hidden state are found from a few clusters' rows.
#ifndef INFER_VINDEX_LM_INDEX_H
#define INFER_VINDEX_LM_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "compute/cpu/ops.h"
#include "base/pool.h"
#include "tensor/tensor.h"

typedef struct lm_index_s {
    int C;                 // clusters
    const void *cent;      // C rows of H, of cent_type
    int cent_type;
    const uint32_t *off;   // C + 1
    const int32_t *order;  // V: token ids in cluster order
    int type;              // the rows' dtype
    size_t rs;             // bytes of a row
    const void *rows;      // V rows in cluster order
    // a sketch of the rows for the scan: q4_0 copies packed for this CPU's
    // kernels (pack.h: each cluster's rows in groups of 8, the last padded),
    // made by lm_index_pack; NULL: none (the rows themselves are scanned)
    void *sketch;
    uint32_t *gstart;      // C + 1: cluster c's groups from gstart[c]
} lm_index;

// The clusters an index gets by default: V / 64 (1 to 65536; measured on the
// default model's 262,144 rows: 4096 clusters reach its recall with fewer rows
// scored than 2048).
int lm_index_auto_clusters(int V);

// Clusters the V rows (row(src, r, out) decodes row r: H floats) into C and
// writes the index to path, with the rows' stored bytes from `rows` (a [V, H]
// tensor: the model's head) or, NULL, f32 from row(); *bytes its size.
infer_status lm_index_build(cpu_exec *ex, void (*row)(const void *src, int64_t r, float *out), const void *src, const tensor *rows, int V,
                            int H, int C, const char *path, uint64_t *bytes);

// An index file's contents (mapped: size bytes) checked whole against the
// head's V x H: views into data.
infer_status lm_index_parse(const void *data, size_t size, int V, int H, const char *path, lm_index *out);

// Makes the scan's sketch where the CPU has packed q4_0 kernels (a lookup
// then reads 0.53 of a q8_0 row's bytes a row, keeps the best candidates by
// the sketch's scores and scores those again from the rows); nothing where it
// has none. lm_index_unpack frees it.
infer_status lm_index_pack(lm_index *x, int H);
void lm_index_unpack(lm_index *x);

// ids (k) = the k best of the index's V rows for hidden (H), by the rows'
// kernel, among the rows of the `probes` clusters whose centroids score
// highest, best first (score, then the lower id; fewer candidates than k: the
// rest are the lowest other ids); the rows split over pool p's threads (NULL:
// the caller's), the same ids for any count.
infer_status lm_index_topk(const lm_index *x, const float *hidden, int V, int H, int k, int probes, pool *p, int32_t *ids);

#endif
