// Gate KNN and the walk FFN: a layer's feed-forward computed from the top-K
// features that match the input, instead of every feature.
//
// Feature f of a layer is three rows of n_embd: its gate row, its up row and
// its down vector (column f of the FFN's down matrix). The walk scores every
// feature with the gate vectors (scores = gate_vectors . x), keeps the K of
// largest |score|, and returns sum_f act(gate_f . x) * (up_f . x) * down_f
// over those; with K = all features this is the dense FFN.
#ifndef INFER_VINDEX_WALK_H
#define INFER_VINDEX_WALK_H

#include "compute/backend.h" // (walk_layer: the backends' walk op takes it)
#include "compute/cpu/ops.h"
#include "tensor/tensor.h"

// scores[f] = gate_vectors_f . x for the F features: the product of a host
// backend b (the CPU's, threaded over b->ex; the rows are the vindex's
// mapped bytes, read as they are).
void gate_scores(backend *b, const tensor *gate_vectors, const float *x, float *scores);

// The k indices of largest |s[i]| (topk_max: largest s[i]) among n,
// ascending by index; ties go to the lower index. k <= n; idx has room for n.
void topk_abs(const float *s, int n, int k, int32_t *idx);
void topk_max(const float *s, int n, int k, int32_t *idx);

// A streamed top k: (score s, id t) enters the list (sc, id: k slots, *n of
// them filled, best first) where it beats the k-th by score, then by the
// lower id; NaN never does. Any order of arrival gives the same list.
static inline void topk_insert(float *sc, int32_t *id, int *n, int k, float s, int32_t t) {
    int m = *n;
    if (s != s || (m == k && !(s > sc[k - 1] || (s == sc[k - 1] && t < id[k - 1])))) return;
    int i = m < k ? m++ : k - 1;
    while (i > 0 && (sc[i - 1] < s || (sc[i - 1] == s && id[i - 1] > t))) sc[i] = sc[i - 1], id[i] = id[i - 1], i--;
    sc[i] = s, id[i] = t;
    *n = m;
}

// Scratch of a walk over layers of up to F features and width H (one per
// context; no allocation per token); it runs on ex (borrowed).
typedef struct walk_scratch walk_scratch;
// (the host walk: its products by the CPU backend's ops on ex's threads)
walk_scratch *walk_scratch_new(int F, int H, cpu_exec *ex);
// The CPU backend on ex's threads (the host's products of the vindex).
static inline backend walk_host_backend(cpu_exec *ex) { return (backend){.ops = &backend_cpu_ops, .ex = ex}; }
void walk_scratch_free(walk_scratch *w);

// out (H) = the walk FFN of x (H) over the k best features (k >= F: all,
// without the KNN). The selected indices stay in w (walk_selected).
void walk_ffn(const walk_layer *l, const float *x, int k, float *out, walk_scratch *w);

// How the k features are chosen: by |gate . x| (the KNN), or by what each
// contributes, the length of act(gate . x) (up_f . x) down_f: a feature whose
// activation is near zero (GELU's negative side) writes almost nothing
// however large its gate score. Gated: the WALK_CANDIDATES * k features of
// largest bound |act(gate . x)| |up_f| |down_f| (|up_f . x| <= |up_f| |x|,
// and |x| is the same for every feature), then the k of those whose exact
// |act(gate . x) (up_f . x)| |down_f| is largest. A plain MLP's bound is exact:
// |act(up . x + b)| |down_f|. Needs l->norm_up and norm_down (walk_norms).
enum { WALK_BY_GATE, WALK_BY_CONTRIB, WALK_CANDIDATES = 4 };
void walk_ffn_ranked(const walk_layer *l, const float *x, int k, int rank, float *out, walk_scratch *w);

// |row 3f+1| and |row 3f+2| of the F features of ffn ([3F, H]): a gated
// layer's up and down rows (plain: up is row 3f, so nu[f] is |down_f|, as nd).
void walk_norms(const tensor *ffn, float *nu, float *nd);
// The features the last walk_ffn used (ascending), and their count.
const int32_t *walk_selected(const walk_scratch *w, int *k);

#endif
