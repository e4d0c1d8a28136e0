// UTF-8 decoding, the Unicode classes the pre-tokenizers need, and GPT-2's
// byte-to-character map.
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

int uni_is_letter(uint32_t cp); // general category L*
int uni_is_number(uint32_t cp); // general category N*
int uni_is_space(uint32_t cp);  // White_Space property (regex \s)

// GPT-2's byte <-> printable code point map (bytes_to_unicode).
uint32_t gpt2_byte_to_cp(unsigned char b);
int gpt2_cp_to_byte(uint32_t cp); // -1 if cp is not an image of a byte

// Generated tables (unicode_table.c): sorted inclusive ranges.
extern const uint32_t uni_letter_ranges[][2];
extern const int uni_letter_ranges_n;
extern const uint32_t uni_number_ranges[][2];
extern const int uni_number_ranges_n;

#endif
