// Making a vindex from a loaded model (infer extract). See vindex.h for the
// files; every source type the engine decodes is accepted, and the FFN rows,
// gate vectors and lm_head are re-encoded from floats.
#ifndef INFER_VINDEX_EXTRACT_H
#define INFER_VINDEX_EXTRACT_H

#include "infer.h"

// The options and the report are the public API's (infer.h).
typedef infer_progress_fn vindex_progress_fn;
typedef infer_extract_opts vindex_extract_opts;
typedef infer_extract_info vindex_extract_info;

void vindex_extract_defaults(vindex_extract_opts *o);

// Writes the vindex of m into dir (made if missing; files of an earlier
// vindex there are replaced, index.json last, so an interrupted extraction
// does not open). Mixture-of-experts models are refused (dense FFNs only).
// info may be NULL.
infer_status vindex_extract(const infer_model *m, const char *dir, const vindex_extract_opts *o, vindex_extract_info *info);

#endif
