// Layer graphs: how each layer advances the residual stream (DESIGN.md,
// "Layer-graph strategies"). Dense is the reference; walk computes the FFN
// from the top-K features of a vindex; cached replaces a prefix of layers by
// the residual (and K/V) a template prompt left there, valid only for that
// template and length. Pipelined runs a layer's attention on the CPU and its
// FFN on the context's GPU (context.c places it; forward.c moves between the
// two): the spec names it here.
#ifndef INFER_INFERENCE_GRAPH_H
#define INFER_INFERENCE_GRAPH_H

enum graph_kind { G_DENSE, G_WALK, G_CACHED, G_PIPELINED };

typedef struct {
    int kind;  // enum graph_kind
    int k;     // walk: features (> 0), or a percentage of them when pct
    int pct;
    int rank;  // walk: how features are chosen (walk.h: WALK_BY_GATE, or WALK_BY_CONTRIB for "walkc")
} layer_plan;

// Parses "dense", "walk", "walk@64", "walk@5%", "walkc@5%" (the walk by
// contribution), "pipelined", "cached:0-12,walk:13-23@10%,dense:24-33"
// into one plan per layer (layers no item names are dense). An item is a
// kind, optionally ":A-B" or ":A" (layers, inclusive), optionally "@K" or
// "@P%" for walk (default_k features when absent; <= 0: all). Cached layers
// must be a prefix starting at layer 0.
int graph_parse(const char *spec, int n_layer, int default_k, layer_plan *out, char *err, int errcap);

#endif
