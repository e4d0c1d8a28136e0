// The tokenizer: text <-> token ids, exactly as the reference of its source
// encodes: llama.cpp for a GGUF vocabulary (tokenizer.ggml.*), Hugging Face
// `tokenizers` for a tokenizer.json. The two differ in small ways (how added
// tokens are found, the space prefix after them, invalid UTF-8), so a
// tokenizer carries its flavor.
//
// Model kinds, as llama.cpp names them (tokenizer.ggml.model):
//   llama  SentencePiece BPE (SPM): spaces become U+2581 "▁", symbols merge by
//          token score (GGUF) or by listed merges (tokenizer.json); characters
//          missing from the vocabulary become <0xAB> byte tokens.
//   gpt2   byte-level BPE: a pre-tokenizer (tokenizer.ggml.pre: one of
//          llama.cpp's rows in pretok.c) splits the text into words, each
//          word's bytes are mapped to printable characters and merged by rank.
//          gemma4 is this kind on raw UTF-8 with "▁" for spaces.
//   bert   WordPiece (WPM): lowercased and accent-stripped words, each the
//          longest vocabulary matches from its start.
//   t5     Unigram (UGM): the text normalized by the vocabulary's precompiled
//          character map, then the segmentation of highest total score.
//   rwkv   RWKV "world": the longest tokens first, greedily, over raw bytes.
//
// A tokenizer is built from a tok_vocab, a read-only view that both sources
// fill: the GGUF reader (tokenizer_gguf.c) and tokenizer_json.c.
#ifndef INFER_TOKENIZER_H
#define INFER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum { TOK_KIND_LLAMA, TOK_KIND_GPT2, TOK_KIND_BERT, TOK_KIND_T5, TOK_KIND_RWKV } tok_kind;

// Whose behaviour the tokenizer reproduces.
typedef enum { TOK_FLAVOR_HF, TOK_FLAVOR_LLAMACPP } tok_flavor;

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
typedef enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,      // special: matched in text only when parse_special
    TOK_TYPE_USER_DEFINED = 4, // added token: always matched in text
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,         // <0xAB>, the byte-fallback tokens
} tok_type;

// The pre-tokenizer table (pretok.c): one row per tokenizer.ggml.pre value.
enum {
    PRE_IGNORE_MERGES = 1, // a word that is itself a token is not merged
    PRE_ADD_BOS = 2,       // BOS by default
    PRE_NO_CLEAN = 4,      // decoding keeps " ." and " 's" (clean_spaces off)
    PRE_RAW = 8,           // words stay UTF-8 (no GPT-2 byte map); <0xAB> byte fallback
    PRE_ESCAPE_WS = 16,    // spaces become "▁" before splitting
    PRE_ADD_SEP = 32,
    PRE_NO_BOS_ID = 64,    // no default BOS id
    PRE_GEMMA4 = 128,      // a word of newlines that is a token stays whole
};
// Hugging Face pipelines (tokenizer.json): normalizer steps, in order ...
enum {
    HF_NFC = 1, HF_NFD, HF_NFKC, HF_NFKD,
    HF_LOWERCASE,       // Lowercase (Unicode)
    HF_STRIP_MARKS,     // StripAccents: drop \p{M}
    HF_BERT_CLEAN,      // BertNormalizer clean_text: drop NUL, U+FFFD and controls; whitespace -> ' '
    HF_BERT_CJK,        // BertNormalizer handle_chinese_chars: a space each side of a CJK ideograph
    HF_BERT_STRIP,      // BertNormalizer strip_accents: NFD, then drop Mn
    HF_PREPEND_META,    // Prepend("▁") to a non-empty segment
    HF_SPACE_TO_META,   // Replace(" ", "▁")
    HF_COLLAPSE_SPACES, // Replace(Regex(" {2,}"), " ")
    HF_STRIP_LEFT,      // Strip(left)
    HF_STRIP_RIGHT,     // Strip(right)
};
// ... the pre-tokenizer ...
enum { HF_PRE_NONE, HF_PRE_BYTELEVEL, HF_PRE_METASPACE, HF_PRE_BERT, HF_PRE_WHITESPACE_SPLIT };
// ... and Metaspace's prepend_scheme.
enum { HF_PREPEND_NEVER, HF_PREPEND_FIRST, HF_PREPEND_ALWAYS };

typedef struct {
    const char *name;          // tokenizer.ggml.pre
    const char *const *regex;  // expressions, NULL-terminated
    unsigned flags;            // PRE_*
} tok_pre_row;
extern const tok_pre_row tok_pre_table[];
extern const int tok_pre_table_n;
int tok_pre_find(const char *name); // row index, or -1

// What the tokenizer needs, as the sources store it. Pointers are borrowed
// (e.g. into a mapped GGUF) and only read during tokenizer_from_vocab.
//
// From GGUF metadata (reject any other element type; never cast):
//   kind       tokenizer.ggml.model         string  -> tok_kind_from_name
//   pre        tokenizer.ggml.pre           string  -> tok_pre_find (gpt2 kind)
//   tokens     tokenizer.ggml.tokens        array of string
//   scores     tokenizer.ggml.scores        array of float32 (llama kind; same count)
//   types      tokenizer.ggml.token_type    array of int32 (same count)
//   merges     tokenizer.ggml.merges        array of string (gpt2 kind)
//   bos .. unk tokenizer.ggml.{bos,eos,eot,padding,unknown}_token_id  uint32
//   add_*      tokenizer.ggml.add_{bos,eos}_token, add_space_prefix   bool
//   chat_template tokenizer.chat_template   string
// In the gpt2 kind a byte missing from the vocabulary is dropped (HF with no
// unknown token, as upstream byte-level tokenizers have); unk is not used there.
// tests/test_tokenizer_gguf.c holds a minimal walker that does exactly this.
typedef struct {
    tok_kind kind;
    tok_flavor flavor;
    int pre;                       // gpt2 kind: row of tok_pre_table
    unsigned pre_flags;            // gpt2 kind: PRE_* in effect
    int32_t n_tokens;
    const char *const *tokens;     // (n_tokens) token text, UTF-8, not NUL-terminated
    const uint32_t *token_lens;    // (n_tokens) bytes of each token
    const float *scores;           // (n_tokens) or NULL; llama kind: merge priority
    const int32_t *types;          // (n_tokens) tok_type, or NULL for all normal
    int32_t n_merges;              // gpt2 kind: required; llama kind: 0 = derive from scores
    const char *const *merges;     // (n_merges) "left right", in rank order
    const uint32_t *merge_lens;    // (n_merges) bytes of each merge string
    int32_t bos, eos, eot, pad, unk, sep; // token ids, -1 when absent (eot -1: found by
                                     // name, <end_of_turn> / <|im_end|> / <|eot_id|> / <|end|>)
    bool add_bos, add_eos;         // what encode(add_special) adds (bert: always BOS and SEP)
    bool add_space_prefix;         // llama kind: prepend "▁" to the text
    bool ignore_merges;            // a word that is itself a token is not merged (llama3)
    const char *chat_template;     // NUL-terminated Jinja text, or NULL
    const uint8_t *strip;          // (n_tokens) or NULL: TOK_LSTRIP | TOK_RSTRIP of added
                                   // tokens (tokenizer.json's lstrip/rstrip; GGUF: llama.cpp's
                                   // per-model rules)
    bool lowercase, strip_accents; // bert kind: the normalizer
    const uint8_t *charsmap;       // t5 kind: tokenizer.ggml.precompiled_charsmap, or NULL
    size_t charsmap_len;
    bool remove_extra_ws;          // t5 kind: collapse runs of spaces
    // Hugging Face flavor: the pipeline of tokenizer.json
    uint8_t hf_norm[16];           // HF_* normalizer steps
    int n_hf_norm;
    int hf_pre;                    // HF_PRE_*
    int hf_prepend;                // Metaspace: HF_PREPEND_*
    bool hf_split;                 // Metaspace: split at each "▁"
    bool byte_fallback;            // t5 kind (Unigram): unknown text as <0xAB> tokens
    uint32_t wp_max_chars;         // bert kind (WordPiece): longer words are unknown
} tok_vocab;

// An added token with lstrip/rstrip also takes the whitespace before/after it.
enum { TOK_LSTRIP = 1, TOK_RSTRIP = 2 };

typedef struct tokenizer tokenizer;

// tokenizer.ggml.model as GGUF stores it ("llama", "gpt2", "gemma4", "bert", "t5", "rwkv").
infer_status tok_kind_from_name(const char *name, tok_kind *out);

// Validates the vocabulary (ids in range, known types, merges naming tokens)
// and builds the lookup tables; copies everything it keeps.
infer_status tokenizer_from_vocab(const tok_vocab *v, tokenizer **out);

// Loads a Hugging Face tokenizer.json (BPE model); reads tokenizer_config.json
// from the same folder when present (add_bos_token, add_eos_token, chat_template).
infer_status tokenizer_load_json(const char *path, tokenizer **out);

void tokenizer_free(tokenizer *t);

// text (len bytes, any bytes: invalid UTF-8 is encoded byte by byte) -> ids.
// add_special: add BOS/EOS as the vocabulary says. parse_special: text of a
// control token (e.g. "<start_of_turn>") becomes that token; user-defined
// tokens are always recognised. *ids is malloc'd; the caller frees it.
infer_status tokenizer_encode(const tokenizer *t, const char *text, size_t len,
                              bool add_special, bool parse_special,
                              int32_t **ids, size_t *n_ids);

// As tokenizer_encode with parse_special, except in the bytes plain[i] != 0
// marks (a chat's messages inside its template: text that is only text).
infer_status tokenizer_encode_marked(const tokenizer *t, const char *text, size_t len, bool add_special, const uint8_t *plain,
                                     int32_t **ids, size_t *n_ids);
// 1 when parse_special would find a special (control) token's text in text
// that plain text would not; -1 on failure.
int tokenizer_has_special(const tokenizer *t, const char *text, size_t len);

// ids -> bytes (malloc'd, NUL-terminated, *len excludes the NUL). Control
// tokens are written as their text unless skip_special.
infer_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n,
                              bool skip_special, char **text, size_t *len);

// One token's bytes as they appear inside a decoded text (not as the first
// token: no space prefix dropped, no spaces cleaned up), malloc'd; nothing
// for control, unknown and unused tokens (constrained generation never
// picks them). User-defined tokens are text (Gemma's "\n", runs of spaces).
infer_status tokenizer_piece(const tokenizer *t, int32_t id, char **text, size_t *len);

int32_t tokenizer_n_vocab(const tokenizer *t);
tok_kind tokenizer_kind(const tokenizer *t);
// Token ids of BOS, EOS, end-of-turn, padding, unknown; -1 when absent.
int32_t tokenizer_bos(const tokenizer *t);
int32_t tokenizer_eos(const tokenizer *t);
int32_t tokenizer_eot(const tokenizer *t);
int32_t tokenizer_pad(const tokenizer *t);
int32_t tokenizer_unk(const tokenizer *t);
// The id of the token whose text is exactly s, or -1.
int32_t tokenizer_find(const tokenizer *t, const char *s, size_t len);
// A token's text (not NUL-terminated) and type; NULL for an id out of range.
const char *tokenizer_token(const tokenizer *t, int32_t id, size_t *len, tok_type *type);
const char *tokenizer_chat_template(const tokenizer *t); // or NULL

#endif
