// What the vindex reader, verifier and writer share: the file set, the
// opened state, and type names.
#ifndef INFER_VINDEX_IMPL_H
#define INFER_VINDEX_IMPL_H

#include "vindex/vindex.h"
#include "base/mapfile.h"
#include "vindex/lm_index.h"
#include "base/pool.h"

#include <pthread.h>

enum vfile_id { VF_GATE, VF_FFN, VF_META, VF_EMBD, VF_LM, VF_WEIGHTS, VF_COUNT };

// "gate_vectors.bin", ... indexed by enum vfile_id.
extern const char *const vindex_file_names[VF_COUNT];

// Files a vindex may also hold, listed in "files" when present: a Hugging
// Face source's tokenizer, copied (its GGUF weights carry no vocabulary), and
// the lm_head index (lm_index.h).
enum { VF_OPT_TOKENIZERS = 2, VF_OPT_LM_INDEX = 2, VF_OPT_COUNT = 3 };
extern const char *const vindex_opt_names[VF_OPT_COUNT];

// Bounds of what an index.json may claim, so that no count drives an
// unreasonable allocation before the byte ranges are checked.
#define VINDEX_MAX_LAYERS 4096
#define VINDEX_MAX_EMBD (1 << 20)
#define VINDEX_MAX_VOCAB (1 << 24)
#define VINDEX_MAX_FEATURES (1 << 24)
#define VINDEX_MAX_DOWN_TOP 4096
#define VINDEX_MAX_INDEX_BYTES (64u << 20)

struct infer_vindex {
    char *dir;
    char *model_path;               // dir/weights.gguf
    int n_layer, n_embd, n_vocab;
    int down_top, gated;
    int gate_type, ffn_type, lm_head_type, embd_type; // enum dtype
    mapfile maps[VF_COUNT];         // the .bin files (weights.gguf is not mapped)
    uint64_t file_bytes[VF_COUNT];  // sizes recorded in index.json (= on disk)
    char sha256[VF_COUNT][65];      // digests recorded in index.json
    int opt_present[VF_OPT_COUNT];  // optional files listed in index.json
    uint64_t opt_bytes[VF_OPT_COUNT];
    char opt_sha256[VF_OPT_COUNT][65];
    int *n_feat;                    // (n_layer)
    tensor *gate, *ffn;             // (n_layer) views into gate_vectors.bin, ffn.bin
    const unsigned char **meta;     // (n_layer) start of each layer's down_meta part
    tensor embd, lm_head;
    mapfile lmi_map;                // lm_index.bin, where listed
    lm_index lmi;                   // its views (lmi.C 0: none)
    pthread_mutex_t lmi_mu;         // guards lmi_pool: a lookup's threads, kept between lookups
    pool *lmi_pool;
    struct lm_gpu_s *lmg;           // the head and index on a GPU (lm_device.c), or NULL
    pthread_mutex_t lmg_mu;         // one lookup there at a time; guards lmi_packed
    int lmi_packed;                 // lm_index_pack was tried (at the first CPU lookup)
    char (*names)[32];              // (2 n_layer + 2) names of the tensors above
};

// dtype by ggml's name ("f16", "q4_K"); -1 if unknown.
int vindex_type_by_name(const char *name);

// Streams a file through SHA-256 into hex (verify.c).
infer_status vindex_hash_file(const char *path, char hex[65]);

#endif
