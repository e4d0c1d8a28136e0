// Grammars for constrained generation, in the manner of llama.cpp's
// llama-grammar: a rule is alternatives of sequences of elements (a set of
// characters, or a reference to a rule); a match in progress is a set of
// stacks of positions, advanced one Unicode code point at a time.
//
// grammar.c parses GBNF text (llama.cpp's grammar format) into rules and
// matches text against them; json_schema.c compiles a JSON Schema into GBNF.
// The public infer_grammar (include/infer.h) adds the model's vocabulary: a
// prefix trie over every token's decoded bytes, walked once per mask.
#ifndef INFER_INFERENCE_GRAMMAR_H
#define INFER_INFERENCE_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "infer.h"

// Element types, as llama.cpp's llama_gretype. A character set is CHAR or
// CHAR_NOT (negated) or ANY, then CHAR_ALT for each further character; an
// RNG_UPPER after a character makes it a range [value, upper].
enum { GE_END, GE_ALT, GE_RULE, GE_CHAR, GE_CHAR_NOT, GE_RNG_UPPER, GE_CHAR_ALT, GE_ANY };

typedef struct { uint32_t type, value; } gelem;

// Limits: everything a request can make the grammar do is bounded.
enum {
    GRAMMAR_MAX_RULES = 20000,     // rules (named and made for groups/repetitions)
    GRAMMAR_MAX_ELEMS = 1 << 20,   // elements in all
    GRAMMAR_MAX_REPEAT = 1024,     // x{m,n}: m and n
    GRAMMAR_MAX_STACKS = 1024,     // stacks of a match in progress
    GRAMMAR_MAX_DEPTH = 1024,      // positions on one stack (nesting of rules)
    GRAMMAR_MAX_NEST = 128,        // groups open at once in the text (the parser recurses into each)
    GRAMMAR_MAX_WORK = 1 << 25,    // work for one token (its mask, or accepting it), in words of stacks handled
};

// The budget of work in force: GRAMMAR_MAX_WORK, unless a fuzzing harness
// lowers it (its sanitized build runs ~60x slower: a step within the budget
// must still be quick there, and work the budget does not count still shows).
extern long grammar_max_work;

// Parsed rules: rule r's alternatives are el[start[r] ..], separated by
// GE_ALT, ended by GE_END.
typedef struct {
    gelem *el;
    int n_el;
    uint32_t *start; // (n_rule)
    int n_rule;
    uint32_t root;   // the rule a match begins with
} grules;

// GBNF text -> rules (root: the start rule's name, NULL for "root"). Errors
// name the line and what is wrong; left recursion and undefined rules are
// errors.
infer_status grammar_parse(const char *gbnf, const char *root, grules **out);
void grammar_rules_free(grules *g);

// A JSON Schema (text; NULL: any JSON object) -> GBNF text (malloc'd) whose
// root rule matches exactly the JSON text the schema accepts, written
// compactly or with bounded whitespace between tokens. Errors name the
// schema's path and keyword (e.g. "/properties/a: 'pattern' is unsupported").
infer_status json_schema_to_gbnf(const char *schema, char **gbnf);

// Text-level matching (the oracle for the token-level mask, and tests): 1 when
// s[0, n) is a prefix of some sentence of the grammar; *complete (optional):
// 1 when it is a whole sentence. Malformed UTF-8 does not match.
int grammar_match_text(const grules *g, const char *s, size_t n, int *complete);

// The vocabulary as the mask walks it (grammar.c): every token's decoded
// bytes in a prefix trie; end-of-generation and special tokens left out.
// One per model, made on first use (model_grammar_vocab, inference/text.c).
typedef struct gvocab gvocab;
struct tokenizer;
infer_status grammar_vocab_build(const struct tokenizer *t, const int32_t *eog, int n_eog, gvocab **out);
void grammar_vocab_free(gvocab *v);
infer_status model_grammar_vocab(infer_model *m, const gvocab **out);

#endif
