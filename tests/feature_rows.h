// Test helper: a layer's FFN as a vindex lays it out (rows 3f, 3f + 1, 3f + 2
// = gate, up and down of feature f; a plain MLP's up row in the gate slot),
// in f32, read from the model's own weights, so walks can be checked against
// the dense FFN without a vindex file.
#ifndef INFER_TESTS_FEATURE_ROWS_H
#define INFER_TESTS_FEATURE_ROWS_H

#include "models/model.h"
#include "compute/cpu/ops.h"

#include <stdlib.h>
#include <string.h>

// The FFN of one layer as feature rows [3F, H] in f32, from the model's weights.
static float *feature_rows(const infer_model *m, int il, int *F_out) {
    const layer_weights *l = &m->layers[il];
    int H = m->cfg.n_embd, F = m->cfg.n_ff;
    float *rows = calloc((size_t)3 * F * H, sizeof(float)), *tmp = malloc(sizeof(float) * (size_t)F * H);
    int gated = l->ffn_gate.w != NULL || l->ffn_gate_up.w != NULL;
    if (l->ffn_gate_up.w) { // fused [gate; up] rows (Phi-3)
        for (int f = 0; f < F; f++) {
            tensor_row(l->ffn_gate_up.w, f, rows + (size_t)3 * f * H);
            tensor_row(l->ffn_gate_up.w, F + f, rows + (size_t)(3 * f + 1) * H);
        }
    }
    // up (and gate) rows: [F, H] stored, or [H, F] when transposed (GPT-2 Conv1D)
    for (int which = 0; which < 2 && !l->ffn_gate_up.w; which++) {
        const weight *w = which == 0 ? (gated ? &l->ffn_gate : &l->ffn_up) : &l->ffn_up;
        if (which == 1 && !gated) break;
        for (int r = 0; r < (w->trans ? H : F); r++) tensor_row(w->w, r, tmp + (size_t)r * (w->trans ? F : H));
        for (int f = 0; f < F; f++)
            for (int i = 0; i < H; i++)
                rows[(size_t)(3 * f + which) * H + i] = w->trans ? tmp[(size_t)i * F + f] : tmp[(size_t)f * H + i];
    }
    const weight *d = &l->ffn_down; // [H, F] stored (rows of F), or [F, H] transposed
    for (int r = 0; r < (d->trans ? F : H); r++) tensor_row(d->w, r, tmp + (size_t)r * (d->trans ? H : F));
    for (int f = 0; f < F; f++)
        for (int i = 0; i < H; i++) rows[(size_t)(3 * f + 2) * H + i] = d->trans ? tmp[(size_t)f * H + i] : tmp[(size_t)i * F + f];
    free(tmp);
    *F_out = F;
    return rows;
}

#endif
