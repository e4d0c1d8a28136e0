// A small regular-expression engine for the pre-tokenizers' patterns, with
// the semantics llama.cpp gets from std::regex (ECMAScript): leftmost match,
// alternatives tried in order, greedy or lazy quantifiers that backtrack,
// lookahead (?= ) (?! ), \b, classes. No captures, no backreferences.
//
// It runs over code units, not bytes, in one of llama.cpp's two modes:
//   wide       a unit is a code point; non-ASCII whitespace is 0x0B.
//   collapsed  (patterns that use \p{...}) a unit is the code point below
//              128, else one byte for its class: 0x0B whitespace, 0xD1 \p{N},
//              0xD2 \p{L}, 0xD3 \p{P}, 0xD4 \p{M}, 0xD5 \p{S}, 0xD0 other.
//              \p{X} matches its byte and the ASCII characters of class X,
//              and \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} all mean \p{L}.
// \s \d \w are ASCII classes in both modes ("C" locale), as in std::regex.
#ifndef INFER_TOKENIZER_REGEX_H
#define INFER_TOKENIZER_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct tok_regex tok_regex;

enum { RX_COLLAPSED_OTHER = 0xD0 };

// Whether the pattern needs the collapsed units (it names a \p{...} class).
int regex_uses_classes(const char *pattern);

// Compiles pattern (UTF-8). Patterns the engine cannot run exactly (unknown
// syntax, a loop whose body can match empty) are refused with a message.
infer_status regex_compile(const char *pattern, tok_regex **out);
void regex_free(tok_regex *re);

// The unit of code point cp in the given mode (flags = uni_flags(cp)).
uint32_t regex_unit(uint32_t cp, int collapsed);

// The leftmost match in u[begin, end) starting at or after from, as std::regex_search
// would find it; `not_empty_here` asks only for a non-empty match starting at from
// (regex_iterator's retry after an empty match). Returns 1 with [*ms, *me), 0 when
// there is none, -1 when the match took more steps than allowed (pathological input).
int regex_search(const tok_regex *re, const uint32_t *u, size_t begin, size_t end, size_t from, int not_empty_here,
                 size_t *ms, size_t *me);

#endif
