// The tokenizer's tables, shared by the files of src/tokenizer/ only.
#ifndef INFER_TOKENIZER_INTERNAL_H
#define INFER_TOKENIZER_INTERNAL_H

#include "tokenizer/tokenizer.h"

// Open-addressing hash from token text to id. A slot keeps the upper 32 bits
// of the text's hash beside the id, so a probe that misses rarely touches the
// token's text (a cache miss each).
typedef struct {
    uint64_t *slots; // (cap) hash >> 32 << 32 | id, or UINT64_MAX for empty
    uint32_t cap;    // power of two, >= 2 * entries
} str_map;

// Open-addressing hash from a pair of token ids to its merge; one slot is
// one cache line's quarter, so a lookup usually costs one miss.
typedef struct {
    uint64_t key;   // left << 32 | right, or UINT64_MAX for empty
    int32_t rank;   // merge rank: lower merges first
    int32_t merged; // id of the merged token
} pair_slot;

typedef struct {
    pair_slot *slots; // (cap)
    uint32_t cap;
} pair_map;

struct tokenizer {
    tok_kind kind;
    tok_pre pre;
    int32_t n;          // vocabulary size
    char **text;        // (n) token text, NUL-terminated, in arena
    char *arena;        // every token's text, one allocation
    uint32_t *len;      // (n) bytes
    uint8_t *type;      // (n) tok_type
    str_map by_text;    // all tokens
    pair_map merges;    // listed merges (gpt2 kind, or a llama kind that lists them)
    // A SentencePiece vocabulary lists scores, not merges (GGUF "llama"): any
    // two adjacent tokens whose join is a token merge, ordered as Hugging
    // Face's converter orders the derived list (the merged token's score
    // descending, then the longer left part, then the merged id). score_rank
    // is the rank of each token's score among the distinct scores, highest 0.
    int32_t *score_rank; // (n), or NULL when merges are listed
    // Added tokens (control and user-defined), matched in the raw text
    // longest first: for each first byte, the distinct lengths, descending.
    str_map added;
    uint32_t *added_lens[256]; // per first byte, lengths descending, 0-terminated
    uint8_t *strip;            // (n) TOK_LSTRIP | TOK_RSTRIP, or NULL when no token has any
    int32_t byte_id[256];      // llama: <0xAB> token; gpt2: the mapped-byte token; -1 if none
    int32_t bos, eos, eot, pad, unk;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    char *chat_template;
};

uint64_t tok_hash(const char *s, size_t n);
// Id of the token s[0..n) in m, or -1.
int32_t str_map_find(const tokenizer *t, const str_map *m, const char *s, size_t n);
// The merge of (l, r): returns its rank and sets *merged, or returns -1.
int32_t pair_map_find(const pair_map *m, int32_t l, int32_t r, int32_t *merged);

// A growable id list.
typedef struct {
    int32_t *v;
    size_t n, cap;
} id_list;
infer_status ids_push(id_list *l, int32_t id);

// BPE-merges one word, given as symbols (token ids) already; appends the
// result to out. sym is scratch, changed in place.
infer_status bpe_merge(const tokenizer *t, int32_t *sym, size_t n, id_list *out);

// Pre-tokenizer: splits s[0..n) into words, calling emit for each.
typedef infer_status (*word_fn)(void *ctx, const char *w, size_t n);
infer_status pretokenize(tok_pre pre, const char *s, size_t n, word_fn emit, void *ctx);

#endif
