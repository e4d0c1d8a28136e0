// UTF-8, the Unicode properties the tokenizers need (Unicode 15.1, as
// llama.cpp's tables), and GPT-2's byte-to-character map.
#ifndef INFER_TOKENIZER_UNICODE_H
#define INFER_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

// A byte that starts no valid UTF-8 sequence decodes as this (outside Unicode),
// one byte long, and is in no class: it is "other" to the pre-tokenizers.
#define UNI_INVALID 0x110000u

// Decodes the character at s[0..n) (n >= 1); returns its length in bytes (1-4).
// Overlong forms, surrogates and values above U+10FFFF are invalid.
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
// Writes cp as UTF-8 into out (4 bytes room); returns the length.
int utf8_encode(uint32_t cp, char *out);

// llama.cpp's decoder (unicode_cpt_from_utf8 + unicode_cpts_from_utf8): the
// length comes from the lead byte alone, continuation bytes are checked,
// overlong forms and surrogates are accepted; a bad sequence is U+FFFD, one
// byte long. Values above U+10FFFF (F5..F7 leads) are U+FFFD too: llama.cpp
// throws on them when it encodes them back.
int utf8_decode_lenient(const unsigned char *s, size_t n, uint32_t *cp);
// The byte length llama.cpp gives a character from its lead byte alone
// (unicode_len_utf8): 1 for ASCII and stray continuation bytes.
static inline int utf8_lead_len(unsigned char c) {
    static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

// Code point flags: the general category as one bit (llama.cpp's classes)
// and White_Space.
enum {
    UNI_UNDEF = 0x01, // Cn
    UNI_N = 0x02,     // \p{N}
    UNI_L = 0x04,     // \p{L}
    UNI_Z = 0x08,     // \p{Z}
    UNI_M = 0x10,     // \p{M}
    UNI_P = 0x20,     // \p{P}
    UNI_S = 0x40,     // \p{S}
    UNI_C = 0x80,     // \p{C}: Cc Cf Cs Co
    UNI_CATEGORY = 0xFF,
    UNI_WS = 0x100,   // White_Space (regex \s in Unicode mode)
    UNI_MN = 0x200,   // Mn: nonspacing marks
    // what Hugging Face `tokenizers` does with the character (its Unicode tables are older)
    UNI_HF_MARK = 0x400,     // StripAccents drops it
    UNI_HF_MN = 0x800,       // BertNormalizer's strip_accents drops it
    UNI_HF_PUNCT = 0x1000,   // BertPreTokenizer isolates it
    UNI_HF_CONTROL = 0x2000, // BertNormalizer's clean_text drops it
    UNI_HF_SPACE = 0x4000,   // BertNormalizer's clean_text makes it ' '
};

// Flags of cp; 0 for values outside Unicode (UNI_INVALID and above).
uint16_t uni_flags(uint32_t cp);
uint32_t uni_tolower(uint32_t cp);   // simple lowercase mapping, or cp
uint32_t uni_nfd_first(uint32_t cp); // first code point of cp's NFD
int uni_is_han(uint32_t cp);         // llama.cpp's Han ranges (Kimi K2)

static inline int uni_is_letter(uint32_t cp) { return (uni_flags(cp) & UNI_L) != 0; }
static inline int uni_is_number(uint32_t cp) { return (uni_flags(cp) & UNI_N) != 0; }
static inline int uni_is_space(uint32_t cp) { return (uni_flags(cp) & UNI_WS) != 0; }

// The Unicode normalization forms of s[0..n) (UTF-8) into *out (malloc'd,
// NUL-terminated); bytes that are not UTF-8 pass through unchanged.
enum { UNI_NFD, UNI_NFKD, UNI_NFC, UNI_NFKC };
#include "base/status.h"
infer_status uni_normalize(int form, const char *s, size_t n, char **out, size_t *out_n);

// GPT-2's byte <-> printable code point map (bytes_to_unicode).
uint32_t gpt2_byte_to_cp(unsigned char b);
int gpt2_cp_to_byte(uint32_t cp); // -1 if cp is not an image of a byte

// Generated tables (unicode_table.c), sorted.
extern const uint16_t uni_ascii_flags[128];
extern const uint32_t uni_flag_runs[][2]; // {first, flags}
extern const int uni_flag_runs_n;
extern const uint32_t uni_lower[][2];     // {cp, lower}
extern const int uni_lower_n;
extern const uint32_t uni_nfd_ranges[][3]; // {first, last, nfd first}
extern const int uni_nfd_ranges_n;

#endif
