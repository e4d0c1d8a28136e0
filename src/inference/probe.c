// Reading a pass from outside (infer.h): the time of each phase while a
// context profiles, and the input of every layer's FFN at the last token.
#include "inference/context.h"

#include <string.h>

// infer.h's phases, append-only, as the forward pass's (context.h) name them.
static const int g_phase[INFER_PHASE_COUNT] = {
    [INFER_PHASE_EMBED] = PH_EMBED,     [INFER_PHASE_NORM] = PH_NORM,         [INFER_PHASE_QKV] = PH_QKV,
    [INFER_PHASE_ROPE] = PH_ROPE,       [INFER_PHASE_ATTN] = PH_ATTN,         [INFER_PHASE_O] = PH_O,
    [INFER_PHASE_GATE_UP] = PH_GATE_UP, [INFER_PHASE_ACT] = PH_ACT,           [INFER_PHASE_DOWN] = PH_DOWN,
    [INFER_PHASE_RESIDUAL] = PH_RESIDUAL, [INFER_PHASE_MOE] = PH_MOE,         [INFER_PHASE_PLE] = PH_PLE,
    [INFER_PHASE_WALK] = PH_WALK,       [INFER_PHASE_LOGITS] = PH_LOGITS,
};
_Static_assert((int)INFER_PHASE_COUNT == (int)PH_COUNT, "a phase of the forward pass is missing from infer.h");

static int in_range(infer_phase p) { return (int)p >= 0 && p < INFER_PHASE_COUNT; }

void infer_ctx_profile(infer_ctx *c, int on) {
    if (on) memset(c->prof, 0, sizeof c->prof);
    c->profiling = on != 0;
}

double infer_ctx_profile_seconds(const infer_ctx *c, infer_phase p) { return in_range(p) ? c->prof[g_phase[p]] : 0; }
const char *infer_phase_name(infer_phase p) { return in_range(p) ? phase_names[g_phase[p]] : NULL; }

infer_status infer_eval_ffn_input(infer_ctx *c, const int32_t *ids, int n, float *ffn_in) {
    c->ffn_in = ffn_in;
    infer_status st = infer_eval(c, ids, n, NULL, 0);
    c->ffn_in = NULL;
    return st;
}
