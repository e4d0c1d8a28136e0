// Layer-graph specs (see graph.h).
#include "inference/graph.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char **p, long *out) {
    if (!isdigit((unsigned char)**p)) return 0;
    char *e;
    long v = strtol(*p, &e, 10);
    if (v > 1000000000L) return 0;
    *out = v;
    *p = e;
    return 1;
}

int graph_parse(const char *spec, int n_layer, int default_k, layer_plan *out, char *err, int errcap) {
    for (int i = 0; i < n_layer; i++) out[i] = (layer_plan){G_DENSE, 0, 0, 0};
    char *seen = calloc((size_t)n_layer, 1);
    if (!seen) { snprintf(err, errcap, "out of memory"); return 0; }
    const char *p = spec;
    int ok = 1;
    while (ok && *p) {
        const char *item = p;
        int kind, rank = 0;
        if (!strncmp(p, "dense", 5)) kind = G_DENSE, p += 5;
        else if (!strncmp(p, "walkc", 5)) kind = G_WALK, rank = 1, p += 5; // (walk.h's WALK_BY_CONTRIB)
        else if (!strncmp(p, "walk", 4)) kind = G_WALK, p += 4;
        else if (!strncmp(p, "cached", 6)) kind = G_CACHED, p += 6;
        else if (!strncmp(p, "pipelined", 9)) kind = G_PIPELINED, p += 9;
        else { snprintf(err, errcap, "graph \"%s\": unknown strategy at \"%s\" (dense, walk, walkc, cached, pipelined)", spec, item); ok = 0; break; }
        long a = 0, b = n_layer - 1;
        if (*p == ':') {
            p++;
            if (!parse_int(&p, &a)) { snprintf(err, errcap, "graph \"%s\": expected a layer number after \":\"", spec); ok = 0; break; }
            b = a;
            if (*p == '-' && (p++, !parse_int(&p, &b))) { snprintf(err, errcap, "graph \"%s\": expected a layer number after \"-\"", spec); ok = 0; break; }
        } else if (kind == G_CACHED) {
            snprintf(err, errcap, "graph \"%s\": cached needs its layers (cached:0-B)", spec); ok = 0; break;
        }
        if (a > b || b >= n_layer) {
            snprintf(err, errcap, "graph \"%s\": layers %ld-%ld are not within 0-%d", spec, a, b, n_layer - 1); ok = 0; break;
        }
        long k = default_k;
        int pct = 0;
        if (*p == '@') {
            p++;
            if (kind != G_WALK) { snprintf(err, errcap, "graph \"%s\": only walk takes @K", spec); ok = 0; break; }
            if (!parse_int(&p, &k) || k <= 0) { snprintf(err, errcap, "graph \"%s\": @ needs a positive feature count or percentage", spec); ok = 0; break; }
            if (*p == '%') {
                p++, pct = 1;
                if (k > 100) { snprintf(err, errcap, "graph \"%s\": %ld%% is more than all features", spec, k); ok = 0; break; }
            }
        }
        if (*p && *p != ',') { snprintf(err, errcap, "graph \"%s\": unexpected \"%s\"", spec, p); ok = 0; break; }
        if (*p == ',' && !*++p) { snprintf(err, errcap, "graph \"%s\": nothing after the last \",\"", spec); ok = 0; break; }
        for (long l = a; l <= b; l++) {
            if (seen[l]) { snprintf(err, errcap, "graph \"%s\": layer %ld is named twice", spec, l); ok = 0; break; }
            seen[l] = 1;
            out[l] = (layer_plan){kind, (int)(k > 0 ? k : 0), pct, rank};
        }
    }
    // cached layers: a prefix from layer 0
    for (int l = 0, in_prefix = 1; ok && l < n_layer; l++) {
        if (out[l].kind != G_CACHED) in_prefix = 0;
        else if (!in_prefix) { snprintf(err, errcap, "graph \"%s\": cached layers must run from layer 0 without a gap", spec); ok = 0; }
    }
    free(seen);
    return ok;
}
