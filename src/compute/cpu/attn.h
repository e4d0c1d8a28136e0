// Attention kernels for one KV head and the group of query heads sharing it.
// Strides are in floats. The scalar versions are the oracle of the SIMD ones.
#ifndef INFER_COMPUTE_CPU_ATTN_H
#define INFER_COMPUTE_CPU_ATTN_H

#include <stddef.h>

// s[g * sstride + p] = (q_g . k_p) * scale for the group's heads g (q_g =
// q + g * hd) and positions p < n (k_p = k + p * kstride).
void attn_scores(const float *q, int group, int hd, const float *k, size_t kstride, int n, float scale, float *s, size_t sstride);
// o_g += sum_p s[g * sstride + p] * v_p for o_g = o + g * hd, in order of p
// (so a range split in pieces accumulates to the same floats).
void attn_mix(const float *s, size_t sstride, int group, int n, const float *v, size_t vstride, int hd, float *o);

void attn_scores_ref(const float *q, int group, int hd, const float *k, size_t kstride, int n, float scale, float *s, size_t sstride);
void attn_mix_ref(const float *s, size_t sstride, int group, int n, const float *v, size_t vstride, int hd, float *o);

#endif
