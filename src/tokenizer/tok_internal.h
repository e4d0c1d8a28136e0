// The tokenizer's tables, shared by the files of src/tokenizer/ only.
#ifndef INFER_TOKENIZER_INTERNAL_H
#define INFER_TOKENIZER_INTERNAL_H

#include "tokenizer/tokenizer.h"

struct tok_regex;

// Open-addressing hash from token text to id. A slot keeps the upper 32 bits
// of the text's hash beside the id, so a probe that misses rarely touches the
// token's text (a cache miss each).
typedef struct {
    uint64_t *slots; // (cap) hash >> 32 << 32 | id, or UINT64_MAX for empty
    uint32_t cap;    // power of two, >= 2 * entries
} str_map;

// Open-addressing hash from a pair of symbol ids to its merge; one slot is
// one cache line's quarter, so a lookup usually costs one miss.
typedef struct {
    uint64_t key;   // left << 32 | right, or UINT64_MAX for empty
    int32_t rank;   // merge rank: lower merges first
    int32_t merged; // id of the merged symbol
} pair_slot;

typedef struct {
    pair_slot *slots; // (cap)
    uint32_t cap;
} pair_map;

// A byte trie: node 0 is the root; children through one open-addressing
// table keyed by (node, byte).
typedef struct {
    uint64_t *keys;   // (cap) node << 8 | byte, or UINT64_MAX for empty
    int32_t *child;   // (cap)
    uint32_t cap, n_used;
    int32_t *value;   // (n_nodes) token id ending at the node, or -1
    int32_t n_nodes, cap_nodes;
} tok_trie;

int trie_insert(tok_trie *t, const char *s, size_t n, int32_t value); // 0, or -1 out of memory
int32_t trie_child(const tok_trie *t, int32_t node, unsigned char c);   // -1 if none
void trie_free(tok_trie *t);

struct tokenizer {
    tok_kind kind;
    tok_flavor flavor;
    int pre;            // gpt2 kind: row of tok_pre_table
    unsigned pre_flags; // gpt2 kind: PRE_* in effect
    struct tok_regex *pre_regex[8]; // the row's expressions, compiled (NULL: done by hand)
    int32_t n;          // vocabulary size
    // Symbol texts: ids [0, n) are the tokens; ids [n, n + n_extra) are
    // strings that llama.cpp's string-keyed merges name but the vocabulary
    // lacks (a merge may produce or join them; they fall back to bytes).
    char **text;        // (n + n_extra) NUL-terminated
    char *arena;        // the tokens' text, one allocation
    uint32_t *len;      // (n + n_extra) bytes
    int32_t n_extra;
    uint8_t *type;      // (n) tok_type
    float *score;       // (n) llama kind from GGUF: merge priority; else NULL
    str_map by_text;    // all tokens
    str_map extra;      // the extra strings
    pair_map merges;    // listed merges (gpt2 kind, or a llama kind that lists them)
    // Added tokens (control, user-defined and unknown), matched in the raw text:
    // for each first byte, the distinct lengths, descending.
    str_map added;
    uint32_t *added_lens[256]; // per first byte, lengths descending, 0-terminated
    uint8_t *strip;            // (n) TOK_LSTRIP | TOK_RSTRIP, or NULL when no token has any
    int32_t byte_id[256];      // <0xAB> token (llama kind, raw BPE) or the mapped-byte token; -1 if none
    int32_t byte_sym[256];     // gpt2 kind: symbol of each byte's mapped character (token or extra), or -1
    int32_t bos, eos, eot, pad, unk, sep;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    bool lowercase, strip_accents; // bert kind
    uint32_t max_token_len;        // bytes
    // t5 kind (Unigram): the precompiled character map (a uint32 byte count of
    // the XOR-compressed double array, the array, then NUL-terminated
    // replacement strings), the token tries, the unknown token's score
    char *charsmap;
    size_t xcda_n, repl_n; // entries of the array; bytes of the replacements
    tok_trie tok_trie, user_trie;
    double unk_score;
    bool remove_extra_ws;
    // Hugging Face flavor (tokenizer.json): see tok_vocab
    uint8_t hf_norm[16];
    int n_hf_norm, hf_pre, hf_prepend;
    bool hf_split, byte_fallback;
    uint32_t wp_max_chars;
    char *chat_template;
};

uint64_t tok_hash(const char *s, size_t n);
// Id of the token s[0..n) in m, or -1.
int32_t str_map_find(const tokenizer *t, const str_map *m, const char *s, size_t n);
// Id of the token or extra string s[0..n), or -1.
int32_t tok_symbol(const tokenizer *t, const char *s, size_t n);
// The merge of (l, r): returns its rank and sets *merged, or returns -1.
int32_t pair_map_find(const pair_map *m, int32_t l, int32_t r, int32_t *merged);

// A growable id list.
typedef struct {
    int32_t *v;
    size_t n, cap;
} id_list;
infer_status ids_push(id_list *l, int32_t id);

// Growable text, kept NUL-terminated; tok_buf_put returns -1 when out of memory.
typedef struct {
    char *v;
    size_t n, cap;
} tok_buf;
int tok_buf_put(tok_buf *b, const char *s, size_t n);

// A symbol of a word being merged: a token or extra string (id), or -1 for
// text with neither; its bytes are [off, off + len) of the word.
typedef struct {
    int32_t id;
    uint32_t off, len;
} tok_sym;

// Scratch reused across the words of one encode.
typedef struct {
    tok_sym *sym;
    size_t sym_cap;
    char *buf;
    size_t buf_cap;
} tok_scratch;
infer_status scratch_sym(tok_scratch *s, size_t n);
infer_status scratch_buf(tok_scratch *s, size_t n);

// One pre-tokenized word of the gpt2 kind: its bytes mapped to GPT-2's
// characters (or kept, PRE_RAW), one symbol per character, then the merges.
infer_status bpe_word(const tokenizer *t, tok_scratch *sc, const char *w, size_t n, id_list *out);

// BPE-merges one word given as symbols (changed in place) by the merge
// ranks, lowest first and leftmost on ties (Hugging Face's BPE::merge_word,
// llama.cpp's llm_tokenizer_bpe_session); appends the ids to out. A symbol
// that is not a token falls back as the flavor does: llama.cpp looks up each
// byte of its text (fallback_text(word) gives that text), Hugging Face drops it.
infer_status bpe_merge(const tokenizer *t, const char *word, tok_sym *sym, size_t n, id_list *out);

// llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm_session) on s[0..n),
// whose spaces are already "▁".
infer_status spm_encode(const tokenizer *t, const char *s, size_t n, id_list *out);

// llama.cpp's Unigram tokenizer (llm_tokenizer_ugm_session); ugm_init builds
// its tables once the tokens are in.
infer_status ugm_init(tokenizer *t, const uint8_t *charsmap, size_t n);
infer_status ugm_encode(const tokenizer *t, const char *s, size_t n, id_list *out);

// llama.cpp's RWKV world tokenizer: greedy longest matches of the unescaped
// tokens; rwkv_unescape writes a token's bytes (at most n) and returns their count.
infer_status rwkv_init(tokenizer *t);
infer_status rwkv_encode(const tokenizer *t, const char *s, size_t n, id_list *out);
size_t rwkv_unescape(const char *s, size_t n, char *out);

// llama.cpp's WordPiece tokenizer (llm_tokenizer_wpm_session).
infer_status wpm_encode(const tokenizer *t, const char *s, size_t n, id_list *out);

// Hugging Face's pipeline on one segment of raw text (between added tokens):
// normalizers, pre-tokenizer, model. first: the segment starts the text.
infer_status hf_encode(const tokenizer *t, tok_scratch *sc, const char *s, size_t n, int first, id_list *out);

// Pre-tokenizer: splits s[0..n) into words with t's row, calling emit for each.
typedef infer_status (*word_fn)(void *ctx, const char *w, size_t n);
infer_status pretokenize(const tokenizer *t, const char *s, size_t n, word_fn emit, void *ctx);
// Whether llama.cpp runs this expression by hand (no regex compiled for it).
int tok_pre_is_custom(const char *re);

#endif
