// Making a vindex from a loaded model (infer extract). See vindex.h for the
// files; every source type the engine decodes is accepted, and the FFN rows,
// gate vectors and lm_head are re-encoded from floats.
#ifndef INFER_VINDEX_EXTRACT_H
#define INFER_VINDEX_EXTRACT_H

#include "infer.h"

// Called as work advances: stage ("ffn", "embeddings", "lm_head",
// "down_meta", "weights.gguf", "index.json"), done of total units.
typedef void (*vindex_progress_fn)(void *user, const char *stage, int64_t done, int64_t total);

typedef struct {
    int gate_type;        // DT_F32, DT_F16 or DT_Q4_0 (default DT_F16)
    int ffn_type;         // any type with an encoder (default DT_Q8_0)
    int lm_head_type;     // any type with an encoder (default DT_Q4_K)
    int down_top;         // top tokens per feature in down_meta (default 10; 0: none)
    vindex_progress_fn progress; // may be NULL
    void *user;
} vindex_extract_opts;

// What was written. A type whose blocks do not divide a row of H falls back
// as llama.cpp does (quant_fit: q4_K -> q5_0, ...), so these may differ from
// the options.
typedef struct {
    int gate_type, ffn_type, lm_head_type, embd_type;
    double seconds;            // the whole extraction
    double seconds_down_meta;  // of which down_meta
    uint64_t bytes;            // all files together
} vindex_extract_info;

void vindex_extract_defaults(vindex_extract_opts *o);

// Writes the vindex of m into dir (made if missing; files of an earlier
// vindex there are replaced, index.json last, so an interrupted extraction
// does not open). Mixture-of-experts models are refused (dense FFNs only).
// info may be NULL.
infer_status vindex_extract(const infer_model *m, const char *dir, const vindex_extract_opts *o, vindex_extract_info *info);

#endif
