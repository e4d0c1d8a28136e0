// A vindex attached to a model: its feature rows become the walk layers the
// layer graph uses (and the whole FFN of a model loaded from a vindex).
#include "vindex/vindex.h"
#include "vindex/walk.h"
#include "models/model.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int vindex_is_dir(const char *path) {
    char p[4200];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s/index.json", path) >= (int)sizeof p || stat(p, &sb) || !S_ISREG(sb.st_mode)) return 0;
    if (snprintf(p, sizeof p, "%s/weights.gguf", path) >= (int)sizeof p || stat(p, &sb) || !S_ISREG(sb.st_mode)) return 0;
    return 1;
}

static const float *f32_or_null(const tensor *t) { return t ? t->f32 : NULL; }

infer_status vindex_bind_walk(infer_model *m, vindex *v) {
    const infer_config *c = &m->cfg;
    const char *d = vindex_dir(v);
    if (c->n_expert) return fail(INFER_ERR_UNSUPPORTED, "%s: walking a mixture of experts is not supported", d);
    if (vindex_n_layer(v) != c->n_layer || vindex_n_embd(v) != c->n_embd || vindex_n_vocab(v) != c->n_vocab)
        return fail(INFER_ERR_ARG, "%s: made from another model (%d layers x %d, vocabulary %d; the model has %d x %d, %d)", d,
                    vindex_n_layer(v), vindex_n_embd(v), vindex_n_vocab(v), c->n_layer, c->n_embd, c->n_vocab);
    int gated = c->fam->ffn == FFN_GATED;
    if (vindex_gated(v) != gated) return fail(INFER_ERR_ARG, "%s: its FFN is %sgated, the model's is %sgated", d, vindex_gated(v) ? "" : "not ", gated ? "" : "not ");
    for (int il = 0; il < c->n_layer; il++)
        if (vindex_n_features(v, il) != c->n_ff)
            return fail(INFER_ERR_ARG, "%s: layer %d has %d features, the model's FFN %d", d, il, vindex_n_features(v, il), c->n_ff);
    // the layers, then each layer's feature norms (walk_norms), in one block
    size_t at = ((size_t)c->n_layer * sizeof(walk_layer) + 63) & ~(size_t)63;
    walk_layer *w = calloc(1, at + 2 * sizeof(float) * (size_t)c->n_layer * c->n_ff);
    if (!w) return fail(INFER_ERR_NOMEM, "out of memory");
    float *norms = (float *)((char *)w + at);
    int maxf = 0;
    for (int il = 0; il < c->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        int F = c->n_ff;
        float *nu = norms + (size_t)2 * il * F, *nd = nu + F;
        w[il] = (walk_layer){vindex_gate_vectors(v, il), vindex_ffn(v, il), gated, c->act,
                             gated ? NULL : f32_or_null(l->ffn_up_b), f32_or_null(l->ffn_down_b), nu, nd};
        walk_norms(w[il].ffn, nu, nd);
        if (F > maxf) maxf = F;
    }
    free(m->walk);
    m->walk = w;
    m->walk_max_features = maxf;
    return INFER_OK;
}

infer_status infer_model_attach_vindex(infer_model *m, const char *dir) {
    if (m->vx) return fail(INFER_ERR_ARG, "the model already has a vindex (%s)", vindex_dir(m->vx));
    vindex *v;
    infer_status st = vindex_open(dir, &v);
    if (st) return st;
    if ((st = vindex_bind_walk(m, v))) { vindex_close(v); return st; }
    m->vx = v;
    return INFER_OK;
}

const vindex *infer_model_vindex(const infer_model *m) { return m->vx; }
int infer_model_walk_features(const infer_model *m) { return m->walk ? m->walk_max_features : 0; }

infer_status infer_model_walk_only(infer_model *m, size_t *dropped) {
    *dropped = 0;
    if (!m->walk) return fail(INFER_ERR_ARG, "walk-only needs a vindex (attach one first)");
    for (int il = 0; il < m->cfg.n_layer; il++) {
        layer_weights *l = &m->layers[il];
        weight *ws[] = {&l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->ffn_gate_up};
        for (int k = 0; k < 4; k++) {
            if (!ws[k]->w) continue;
            *dropped += map_drop_pages(ws[k]->w->data, ws[k]->w->nbytes);
            ws[k]->w = NULL;
        }
    }
    m->ffn_external = 1;
    return INFER_OK;
}
