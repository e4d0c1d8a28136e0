// Pre-tokenizers of the byte-level BPE kind: llama.cpp's table of
// tokenizer.ggml.pre values, each a list of regular expressions applied in
// turn (every expression splits the pieces the previous one left), and the
// hand-written splitters llama.cpp uses in place of the common expressions.
//
// A piece is a run of code points; the unmatched text between two matches is
// a piece too, so the pieces always cover the text.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

// ---------------------------------------------------------------------------
// the expressions (as llama.cpp's llm_tokenizer_bpe lists them)

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                                  \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                                   \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                                  \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_NEWLINES "[^\\n]+|[\\n]+"
#define RE_DEEPSEEK3_MAIN                                                                                          \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O_CASE                                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" CONTRACTIONS                          \
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" CONTRACTIONS                        \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const re_llama3[] = {RE_LLAMA3, NULL};
static const char *const re_jais2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|"
                 "\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|"
                 "\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌ"
    "ῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
    NULL};
static const char *const re_deepseek3[] = {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", RE_DEEPSEEK3_MAIN, NULL};
static const char *const re_spark2_5[] = {
    "\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}", NULL};
static const char *const re_youtu[] = {
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS
    "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS
    "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}", NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_qwen2[] = {RE_QWEN2, NULL};
static const char *const re_qwen35[] = {RE_QWEN35, NULL};
static const char *const re_bloom[] = {" ?[^(\\s|.,!?…。，、।۔،)]+", NULL};
static const char *const re_viking[] = {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}", NULL};
static const char *const re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+"
    "((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_chameleon[] = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
                                           "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2, NULL};
static const char *const re_gpt4o[] = {RE_GPT4O_CASE, NULL};
static const char *const re_granite_emb_multi[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+" CONTRACTIONS
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*" CONTRACTIONS
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_tiny_aya[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS
    "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_kimi_k2[] = {"\\p{Han}+", NULL};
static const char *const re_superbpe[] = {"\\p{N}+", "(?=(\\d{3})+(?!\\d))", NULL};
static const char *const re_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|"
    "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_seed_coder[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const re_ufakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const re_afmoe[] = {
    "\\p{AFMoE_digits}", "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_laguna[] = {RE_NEWLINES, RE_QWEN2, NULL};
static const char *const re_exaone_moe[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|"
                 "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_newlines[] = {RE_NEWLINES, NULL};
static const char *const re_minicpm5[] = {
    "\\p{N}{1,3}",
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const re_whitespace[] = {"\\S+", NULL};

// One row per tokenizer.ggml.pre value (llama.cpp's llama_vocab::impl::load).
const tok_pre_row tok_pre_table[] = {
    {"default", re_default, 0},
    {"minicpm5", re_minicpm5, PRE_IGNORE_MERGES},
    {"llama3", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-v3", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-bpe", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon3", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon-h1", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"pixtral", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"midm-2.0", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"lfm2", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"jina-v5-nano", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"deepseek-llm", re_deepseek_llm, PRE_NO_CLEAN},
    {"deepseek-coder", re_deepseek_coder, PRE_NO_CLEAN},
    {"deepseek-v3", re_deepseek3, PRE_NO_CLEAN},
    {"spark2_5", re_spark2_5, PRE_NO_CLEAN},
    {"youtu", re_youtu, PRE_NO_CLEAN | PRE_IGNORE_MERGES},
    {"falcon", re_falcon, 0},
    {"mpt", re_gpt2, 0},
    {"starcoder", re_starcoder, 0},
    {"gpt-2", re_gpt2, 0},
    {"phi-2", re_gpt2, 0},
    {"jina-es", re_gpt2, 0},
    {"jina-de", re_gpt2, 0},
    {"gigachat", re_gpt2, 0},
    {"jina-v2-es", re_gpt2, 0},
    {"jina-v2-de", re_gpt2, 0},
    {"a.x-4.0", re_gpt2, 0},
    {"mellum", re_gpt2, 0},
    {"modern-bert", re_gpt2, 0},
    {"jais-2", re_jais2, 0},
    {"gemma4", re_newlines, PRE_RAW | PRE_ESCAPE_WS | PRE_GEMMA4},
    {"granite-embed-multi-311m", re_newlines, PRE_RAW | PRE_ESCAPE_WS | PRE_GEMMA4},
    {"sarvam-moe", re_newlines, PRE_RAW | PRE_ESCAPE_WS | PRE_NO_CLEAN},
    {"jina-v1-en", re_gpt2, PRE_ADD_SEP},
    {"jina-v2-code", re_gpt2, PRE_ADD_SEP},
    {"roberta-bpe", re_gpt2, PRE_ADD_SEP},
    {"whitespace", re_whitespace, PRE_RAW},
    {"refact", re_starcoder, 0},
    {"command-r", re_starcoder, PRE_NO_CLEAN},
    {"qwen2", re_qwen2, PRE_NO_CLEAN},
    {"deepseek-r1-qwen", re_qwen2, PRE_NO_CLEAN},
    {"kormo", re_qwen2, PRE_NO_CLEAN},
    {"f2llmv2", re_qwen2, PRE_NO_CLEAN},
    {"qwen35", re_qwen35, PRE_NO_CLEAN},
    {"stablelm2", re_qwen2, 0},
    {"olmo", re_gpt2, 0},
    {"dbrx", re_llama3, 0},
    {"smaug-bpe", re_llama3, 0},
    {"poro-chat", re_bloom, PRE_NO_CLEAN},
    {"chatglm-bpe", re_llama3, PRE_NO_BOS_ID},
    {"glm4", re_llama3, PRE_NO_BOS_ID | PRE_IGNORE_MERGES},
    {"glm5", re_llama3, PRE_NO_BOS_ID | PRE_IGNORE_MERGES},
    {"viking", re_viking, PRE_NO_CLEAN},
    {"jais", re_gpt2, 0},
    {"tekken", re_tekken, PRE_NO_CLEAN | PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"smollm", re_starcoder, PRE_NO_CLEAN},
    {"codeshell", re_starcoder, 0},
    {"bloom", re_bloom, 0},
    {"gpt3-finnish", re_bloom, 0},
    {"exaone", re_starcoder, 0},
    {"exaone4", re_gpt2, 0},
    {"exaone-moe", re_exaone_moe, 0},
    {"chameleon", re_chameleon, PRE_ADD_BOS | PRE_NO_CLEAN},
    {"minerva-7b", re_starcoder, 0},
    {"megrez", re_qwen2, 0},
    {"gpt-4o", re_gpt4o, PRE_NO_CLEAN},
    {"llama4", re_gpt4o, PRE_NO_CLEAN},
    {"kanana2", re_gpt4o, PRE_NO_CLEAN},
    {"talkie", re_gpt4o, PRE_NO_CLEAN},
    {"granite-embed-multi-97m", re_granite_emb_multi, PRE_NO_CLEAN | PRE_IGNORE_MERGES},
    {"tiny_aya", re_tiny_aya, PRE_NO_CLEAN},
    {"cohere2moe", re_tiny_aya, PRE_NO_CLEAN},
    {"superbpe", re_superbpe, PRE_NO_CLEAN},
    {"trillion", re_gpt2, PRE_NO_CLEAN},
    {"granite-docling", re_gpt2, PRE_NO_CLEAN},
    {"bailingmoe", re_bailingmoe, PRE_NO_CLEAN},
    {"bailingmoe2", re_bailingmoe, PRE_NO_CLEAN},
    {"llada-moe", re_bailingmoe, PRE_NO_CLEAN},
    {"seed-coder", re_seed_coder, PRE_NO_CLEAN},
    {"hunyuan", re_qwen2, PRE_NO_CLEAN},
    {"hunyuan-dense", re_deepseek3, PRE_NO_CLEAN},
    {"hy_v4", re_deepseek3, PRE_NO_CLEAN},
    {"joyai-llm", re_deepseek3, PRE_NO_CLEAN},
    {"kimi-k2", re_kimi_k2, PRE_NO_CLEAN},
    {"ufakzeka", re_ufakzeka, PRE_NO_CLEAN},
    {"grok-2", re_qwen2, PRE_NO_CLEAN},
    {"afmoe", re_afmoe, PRE_NO_CLEAN},
    {"laguna", re_laguna, PRE_NO_CLEAN},
    {"minimax-m2", re_gpt4o, PRE_NO_CLEAN},
    {"solar-open", re_qwen2, PRE_NO_CLEAN},
    {"mellum2", re_starcoder, 0},
};
const int tok_pre_table_n = (int)(sizeof tok_pre_table / sizeof *tok_pre_table);

int tok_pre_find(const char *name) {
    for (int i = 0; i < tok_pre_table_n; i++)
        if (!strcmp(tok_pre_table[i].name, name)) return i;
    return -1;
}

// ---------------------------------------------------------------------------
// splitting

typedef struct {
    size_t *v; // piece lengths in code points
    size_t n, cap;
    int oom;
} pieces;

static void put(pieces *p, size_t len) {
    if (!len || p->oom) return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        size_t *v = realloc(p->v, sizeof *v * cap);
        if (!v) {
            p->oom = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = len;
}

typedef struct {
    const uint32_t *cp; // (nc) code points
    const uint16_t *fl; // (nc) their flags
    size_t nc;
} text;

// One piece [a, b) of the text as llama.cpp's hand-written splitters see it:
// positions outside it have flags 0 and code point OUT.
enum { OUT = 0xFFFFFFFFu };
typedef struct {
    const text *t;
    size_t a, b, prev; // prev: end of the last piece emitted
    pieces *out;
} cursor;

static uint32_t cpt(const cursor *c, size_t i) { return i >= c->a && i < c->b ? c->t->cp[i] : OUT; }
static uint16_t flg(const cursor *c, size_t i) { return i >= c->a && i < c->b ? c->t->fl[i] : 0; }
static size_t cut(cursor *c, size_t end) {
    size_t len = end - c->prev;
    put(c->out, len);
    c->prev = end;
    return len;
}

// 's 't 'm 'd 're 've 'll at i, case-folded with fold: its end, or 0.
static size_t contraction(const cursor *c, size_t i, int fold) {
    if (cpt(c, i) != '\'' || i + 1 >= c->b) return 0;
    uint32_t x = cpt(c, i + 1);
    if (fold) x = uni_tolower(x);
    if (x == 's' || x == 't' || x == 'm' || x == 'd') return i + 2;
    if (i + 2 >= c->b) return 0;
    uint32_t y = cpt(c, i + 2);
    if (fold) y = uni_tolower(y);
    if ((x == 'r' && y == 'e') || (x == 'v' && y == 'e') || (x == 'l' && y == 'l')) return i + 3;
    return 0;
}

// The whitespace tail shared by the splitters: \s*[\r\n]+ (with_newlines),
// \s+(?!\S), \s+, or one unmatched character.
static void space_tail(cursor *c, size_t *pos, int with_newlines) {
    size_t i = *pos, n = 0, last_nl = 0;
    while (flg(c, i + n) & UNI_WS) {
        uint32_t x = cpt(c, i + n);
        if (x == '\r' || x == '\n') last_nl = i + n + 1;
        n++;
    }
    if (with_newlines && last_nl) *pos = last_nl;
    else if (n > 1 && cpt(c, i + n) != OUT) *pos = i + n - 1;
    else *pos = i + (n ? n : 1);
    cut(c, *pos);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
static void split_gpt2(cursor *c) {
    for (size_t pos = c->a; pos < c->b;) {
        size_t e = contraction(c, pos, 0);
        if (e) {
            pos = e, cut(c, e);
            continue;
        }
        uint32_t x = cpt(c, pos);
        uint16_t f2 = x == ' ' ? flg(c, pos + 1) : flg(c, pos);
        uint16_t want = f2 & UNI_L ? UNI_L : f2 & UNI_N ? UNI_N : 0;
        if (want) {
            pos += x == ' ';
            while (flg(c, pos) & want) pos++;
            cut(c, pos);
            continue;
        }
        if (!(f2 & (UNI_WS | UNI_L | UNI_N)) && f2) {
            pos += x == ' ';
            while (!(flg(c, pos) & (UNI_WS | UNI_L | UNI_N)) && flg(c, pos)) pos++;
            cut(c, pos);
            continue;
        }
        space_tail(c, &pos, 0);
    }
}

// Llama 3 / Qwen 2 / Qwen 3.5: contractions (case-folded), [^\r\n\p{L}\p{N}]?\p{L}+
// (letters: \p{L}, or \p{L}\p{M} for Qwen 3.5), \p{N}{1,max_digits},
// ' ?[^\s\p{L}\p{N}]+[\r\n]*', \s*[\r\n]+, \s+(?!\S), \s+.
static void split_llama3(cursor *c, size_t max_digits, uint16_t letter) {
    for (size_t pos = c->a; pos < c->b;) {
        size_t e = contraction(c, pos, 1);
        if (e) {
            pos = e, cut(c, e);
            continue;
        }
        uint32_t x = cpt(c, pos);
        uint16_t f = flg(c, pos);
        if (!(x == '\r' || x == '\n' || (f & UNI_N)) && ((f & letter) || (flg(c, pos + 1) & letter))) {
            pos++;
            while (flg(c, pos) & letter) pos++;
            cut(c, pos);
            continue;
        }
        if (f & UNI_N) {
            size_t ini = pos;
            while (flg(c, pos) & UNI_N) {
                if (++pos - ini >= max_digits) {
                    cut(c, pos);
                    ini = pos;
                }
            }
            cut(c, pos);
            continue;
        }
        uint16_t f2 = x == ' ' ? flg(c, pos + 1) : f;
        uint16_t stop = UNI_WS | UNI_L | UNI_N | (letter & UNI_M);
        if (!(f2 & stop) && f) {
            pos += x == ' ';
            while (!(flg(c, pos) & stop) && flg(c, pos)) pos++;
            while (cpt(c, pos) == '\r' || cpt(c, pos) == '\n') pos++;
            cut(c, pos);
            continue;
        }
        space_tail(c, &pos, 1);
    }
}

// Kimi K2: [\p{Han}]+, then letter words without Han with optional
// contractions, \p{N}{1,3}, and the Llama 3 tail.
static void split_kimi_k2(cursor *c) {
    for (size_t pos = c->a; pos < c->b;) {
        uint32_t x = cpt(c, pos);
        uint16_t f = flg(c, pos);
        if (uni_is_han(x)) {
            while (uni_is_han(cpt(c, pos))) pos++;
            cut(c, pos);
            continue;
        }
#define LETTER_NOT_HAN(i) ((flg(c, i) & UNI_L) && !uni_is_han(cpt(c, i)))
        int lead_ok = !(x == '\r' || x == '\n' || (f & (UNI_L | UNI_N)));
        if (LETTER_NOT_HAN(pos) || (lead_ok && LETTER_NOT_HAN(pos + 1))) {
            int lead = 0, letters = 0;
            if (lead_ok) lead = 1, pos++;
            while (LETTER_NOT_HAN(pos)) letters = 1, pos++;
            if (letters || (!lead && LETTER_NOT_HAN(pos))) {
                if (!letters) pos++;
                while (LETTER_NOT_HAN(pos)) pos++;
                size_t e = contraction(c, pos, 1);
                if (e) pos = e;
                cut(c, pos);
                continue;
            }
            if (lead) pos--;
        }
#undef LETTER_NOT_HAN
        if (f & UNI_N) {
            size_t ini = pos;
            while (flg(c, pos) & UNI_N) {
                if (++pos - ini >= 3) {
                    cut(c, pos);
                    ini = pos;
                }
            }
            cut(c, pos);
            continue;
        }
        uint16_t f2 = x == ' ' ? flg(c, pos + 1) : f;
        if (!(f2 & (UNI_WS | UNI_L | UNI_N)) && f2) {
            pos += x == ' ';
            while (!(flg(c, pos) & (UNI_WS | UNI_L | UNI_N)) && flg(c, pos)) pos++;
            while (cpt(c, pos) == '\r' || cpt(c, pos) == '\n') pos++;
            cut(c, pos);
            continue;
        }
        space_tail(c, &pos, 1);
    }
}

// Digit runs split so the first group takes the remainder: 1234567 -> 1 234 567
// (AFMoE's \p{AFMoE_digits}; also what llama.cpp runs for Tiny Aya's
// \d{1,3}(?=(?:\d{3})*\b)). Other text stays as it is.
static void split_digit_groups(cursor *c) {
    for (size_t pos = c->a; pos < c->b;) {
        if (!(flg(c, pos) & UNI_N)) {
            pos++;
            continue;
        }
        size_t start = pos;
        while (pos < c->b && (flg(c, pos) & UNI_N)) pos++;
        size_t count = pos - start, at = start + count % 3;
        if (at > start) cut(c, at);
        while (at < start + count) cut(c, at += 3);
    }
    if (c->prev < c->b) cut(c, c->b);
}

// [^\n]+|[\n]+
static void split_newlines(cursor *c) {
    for (size_t pos = c->a; pos < c->b;) {
        int nl = c->t->cp[pos] == '\n';
        while (pos < c->b && (c->t->cp[pos] == '\n') == nl) pos++;
        cut(c, pos);
    }
}

typedef enum { CUSTOM_NONE, CUSTOM_GPT2, CUSTOM_LLAMA3, CUSTOM_QWEN2, CUSTOM_QWEN35, CUSTOM_KIMI, CUSTOM_DIGITS,
               CUSTOM_NEWLINES } custom;

// llama.cpp's unicode_regex_split_custom: the expressions it does by hand.
static custom custom_of(const char *re) {
    if (!strcmp(re, RE_GPT2)) return CUSTOM_GPT2;
    if (!strcmp(re, RE_LLAMA3) ||
        !strcmp(re, "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"))
        return CUSTOM_LLAMA3;
    if (!strcmp(re, RE_QWEN2)) return CUSTOM_QWEN2;
    if (!strcmp(re, RE_QWEN35)) return CUSTOM_QWEN35;
    if (!strcmp(re, "\\p{Han}+")) return CUSTOM_KIMI;
    if (!strcmp(re, "\\p{AFMoE_digits}") || !strcmp(re, "\\d{1,3}(?=(?:\\d{3})*\\b)")) return CUSTOM_DIGITS;
    if (!strcmp(re, RE_NEWLINES)) return CUSTOM_NEWLINES;
    return CUSTOM_NONE;
}

int tok_pre_is_custom(const char *re) { return custom_of(re) != CUSTOM_NONE; }

// One generic expression over every piece, as std::regex_iterator walks a
// piece: the leftmost match after the previous one; after an empty match, a
// non-empty one at the same place, else the search moves on by one unit.
static infer_status split_regex(const tok_regex *re, const uint32_t *u, const pieces *in, pieces *out) {
    size_t start = 0;
    for (size_t k = 0; k < in->n; k++) {
        size_t a = start, b = start + in->v[k], at = a, prev = a;
        int after_empty = 0;
        start = b;
        while (at <= b) {
            size_t ms, me;
            int r = after_empty ? regex_search(re, u, a, b, at, 1, &ms, &me) : 0;
            if (after_empty && r == 0) {
                after_empty = 0;
                if (++at > b) break;
            }
            if (!r) r = regex_search(re, u, a, b, at, 0, &ms, &me);
            if (r < 0) return fail(INFER_ERR_ARG, "tokenizer: pre-tokenizer expression backtracked without bound on this text");
            if (!r) break;
            put(out, ms - prev);
            put(out, me - ms);
            prev = me;
            after_empty = me == ms;
            at = me;
            if (me == b && !after_empty) break;
        }
        put(out, b - prev);
    }
    return out->oom ? fail(INFER_ERR_NOMEM, "tokenizer: pieces") : INFER_OK;
}

infer_status pretokenize(const tokenizer *tk, const char *s, size_t n, word_fn emit, void *ctx) {
    if (n == 0) return INFER_OK;
    const tok_pre_row *row = &tok_pre_table[tk->pre];
    uint32_t *cp = malloc(sizeof *cp * n), *units = NULL;
    uint16_t *fl = malloc(sizeof *fl * n);
    size_t *off = malloc(sizeof *off * (n + 1));
    pieces cur = {0}, next = {0};
    infer_status st = INFER_OK;
    int units_mode = -1; // which units are in `units`: 0 wide, 1 collapsed
    if (!cp || !fl || !off) {
        st = fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
        goto out;
    }
    size_t nc = 0;
    for (size_t i = 0; i < n; nc++) {
        off[nc] = i;
        i += (size_t)utf8_decode_lenient((const unsigned char *)s + i, n - i, &cp[nc]);
        fl[nc] = uni_flags(cp[nc]);
    }
    off[nc] = n;
    text t = {cp, fl, nc};
    put(&cur, nc);
    for (const char *const *re = row->regex; *re && !st; re++) {
        custom k = custom_of(*re);
        next.n = 0;
        if (k != CUSTOM_NONE) {
            size_t a = 0;
            for (size_t p = 0; p < cur.n; p++) {
                cursor c = {&t, a, a + cur.v[p], a, &next};
                a += cur.v[p];
                switch (k) {
                case CUSTOM_GPT2: split_gpt2(&c); break;
                case CUSTOM_LLAMA3: split_llama3(&c, 3, UNI_L); break;
                case CUSTOM_QWEN2: split_llama3(&c, 1, UNI_L); break;
                case CUSTOM_QWEN35: split_llama3(&c, 1, UNI_L | UNI_M); break;
                case CUSTOM_KIMI: split_kimi_k2(&c); break;
                case CUSTOM_DIGITS: split_digit_groups(&c); break;
                default: split_newlines(&c); break;
                }
            }
            if (next.oom) st = fail(INFER_ERR_NOMEM, "tokenizer: pieces");
        } else {
            int collapsed = regex_uses_classes(*re);
            if (units_mode != collapsed) {
                if (!units && !(units = malloc(sizeof *units * (nc ? nc : 1)))) {
                    st = fail(INFER_ERR_NOMEM, "tokenizer: text of %zu bytes", n);
                    break;
                }
                for (size_t i = 0; i < nc; i++) units[i] = regex_unit(cp[i], collapsed);
                units_mode = collapsed;
            }
            const tok_regex *rx = tk->pre_regex[re - row->regex];
            st = rx ? split_regex(rx, units, &cur, &next) : fail(INFER_ERR_UNSUPPORTED, "tokenizer: expression %s", *re);
        }
        pieces tmp = cur;
        cur = next;
        next = tmp;
    }
    size_t a = 0;
    for (size_t p = 0; p < cur.n && !st; p++) {
        st = emit(ctx, s + off[a], off[a + cur.v[p]] - off[a]);
        a += cur.v[p];
    }
out:
    free(cp);
    free(fl);
    free(off);
    free(units);
    free(cur.v);
    free(next.v);
    return st;
}
