/* pretok.c - the table of pre-tokenizer regular expressions by tokenizer.ggml.pre name, and
 * the split that applies them in turn.
 *
 * The expressions are those the models' tokenizer.json files declare (the same ones
 * llama.cpp uses for each name). Matching is by regex.c over Unicode categories. */
#include "pretok.h"

#include "pretok_fast.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2's expression; several vocabularies reuse it after a first split. */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Llama 3 (and DBRX, Smaug, ChatGLM4): contractions in either case, numbers in threes. */
#define RX_LLAMA3                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen2/Qwen3: as Llama 3 but one digit per piece. */
#define RX_QWEN2                                                                                   \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen3.5: marks join letters. */
#define RX_QWEN35                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?"             \
    "[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* DeepSeek LLM's cased-letter class; three Greek Extended range ends are escaped so the
 * source file cannot be NFC-normalised into different code points. */
#define RX_DEEPSEEK_LETTERS                                                                                                                                                          \
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-"                                                  \
    "Ჿᴀ-"                                                                                                                                                                        \
    "ᴫᵫ-ᵷᵹ-ᶚ"                                                                                                                                                              \
    "Ḁ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\u1F7Dᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-\\u1FD3ῖ-\\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹ" \
    "ℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-"                                \
    "𐓻𐲀-"                                                                                                                                                                      \
    "𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
#define RX_CJK "[一-龥ࠀ-一가-퟿]+"

typedef struct {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *rx[6];
    bool ignore_merges, add_bos;
} pretok_row;

static const pretok_row k_pretoks[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", {RX_LLAMA3}, true, true},
    /* smaug-bpe is the Llama 3 tokenizer under another post-processor (reference-facts.md);
     * its tokenizer.json keeps ignore_merges, and so do we */
    {"smaug-bpe|dbrx|chatglm-bpe", {RX_LLAMA3}, true, false},
    {"deepseek-llm",
     {"[\r\n]", RX_DEEPSEEK_LETTERS, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RX_CJK, "\\p{N}+"},
     false,
     false},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}"}, false, false},
    {"deepseek-v3|hunyuan-dense|joyai-llm",
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./"
      ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     false,
     false},
    /* o200k (GPT-4o, Llama 4, gpt-oss): case-aware letter runs with contractions as suffixes */
    {"gpt-4o|llama4|minimax-m2|kanana2",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
      "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false,
     false},
    /* Mistral's Tekken: the same letter runs, no contractions, single digits */
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
      "\\p{N}|"
      " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true,
     true},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}, false, false},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|roberta-"
     "bpe|mpt|olmo|jais|trillion",
     {RX_GPT2},
     false,
     false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b",
     {"\\p{N}", RX_GPT2},
     false,
     false},
    {"qwen2|deepseek-r1-qwen|megrez|stablelm2|hunyuan", {RX_QWEN2}, false, false},
    {"qwen35", {RX_QWEN35}, false, false},
    {"poro-chat|bloom|gpt3-finnish", {" ?[^(\\s|.,!?…。，、।۔،)]+"}, false, false},
    {"viking", {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}, false, false},
};

struct pl_pretok {
    pl_regex *rx[6];
    pl_pretok_fast fast[6]; /* a hand-written matcher for rx[i], or PL_FAST_NONE */
    bool single_digit[6];   /* rx[i] is \p{N} */
    int n;
};

static pl_pretok_fast fast_kind(const char *rx) {
    if (!strcmp(rx, RX_GPT2)) return PL_FAST_GPT2;
    if (!strcmp(rx, RX_LLAMA3)) return PL_FAST_LLAMA3;
    if (!strcmp(rx, RX_QWEN2)) return PL_FAST_QWEN2;
    if (!strcmp(rx, RX_QWEN35)) return PL_FAST_QWEN35;
    return PL_FAST_NONE;
}

static bool name_in(const char *names, const char *name) {
    size_t len = strlen(name);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && memcmp(p, name, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

pl_status pl_pretok_new(const char *name, pl_pretok **out, pl_pretok_info *info) {
    *out = NULL;
    if (!name || !*name) name = "default";
    const pretok_row *row = NULL;
    for (size_t i = 0; i < sizeof k_pretoks / sizeof k_pretoks[0]; i++)
        if (name_in(k_pretoks[i].names, name)) row = &k_pretoks[i];
    if (!row) return pl_fail(PL_ERR_FORMAT, "unknown pre-tokenizer '%.60s'", name);
    pl_pretok *p = calloc(1, sizeof *p);
    if (!p) return pl_fail(PL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 6 && row->rx[i]; i++) {
        pl_status st = pl_regex_compile(row->rx[i], &p->rx[i]);
        if (st != PL_OK) {
            pl_pretok_free(p);
            return st;
        }
        p->fast[i] = fast_kind(row->rx[i]);
        p->single_digit[i] = !strcmp(row->rx[i], "\\p{N}");
        p->n = i + 1;
    }
    if (info) info->ignore_merges = row->ignore_merges, info->add_bos = row->add_bos;
    *out = p;
    return PL_OK;
}

void pl_pretok_free(pl_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pl_regex_free(p->rx[i]);
    free(p);
}

void pl_pieces_free(pl_pieces *p) {
    free(p->len);
    memset(p, 0, sizeof *p);
}

static bool piece_push(pl_pieces *p, size_t len) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        uint32_t *v = realloc(p->len, cap * sizeof *v);
        if (!v) return false;
        p->len = v, p->cap = cap;
    }
    p->len[p->n++] = (uint32_t)len;
    return true;
}

bool pl_pretok_line_safe(const pl_pretok *p) {
    for (int i = 0; i < p->n; i++)
        if (!p->fast[i] && !p->single_digit[i]) return false;
    return true;
}

/* Refine each piece of in by one expression (the hand-written matcher fast if there is one,
 * else rx) into out. */
static bool split_one(const pl_regex *rx, pl_pretok_fast fast, pl_regex_scratch *s,
                      const uint32_t *cps, const uint8_t *flags, const pl_pieces *in,
                      pl_pieces *out) {
    out->n = 0;
    size_t start = 0;
    for (size_t k = 0; k < in->n; k++) {
        const uint32_t *seg = cps + start;
        size_t n = in->len[k], gap = 0;
        for (size_t pos = 0; pos < n;) {
            long m = fast ? pl_pretok_fast_match(fast, seg, flags + start, n, pos)
                          : pl_regex_match_at(rx, s, seg, n, pos);
            if (m <= 0) {
                gap++, pos++;
                continue;
            }
            if ((gap && !piece_push(out, gap)) || !piece_push(out, (size_t)m)) return false;
            gap = 0;
            pos += (size_t)m;
        }
        if (gap && !piece_push(out, gap)) return false;
        start += n;
    }
    return true;
}

pl_status pl_pretok_split(const pl_pretok *p, pl_regex_scratch *scratch, const uint32_t *cps,
                          size_t n, pl_pieces *out, bool use_fast) {
    out->n = 0;
    if (n == 0) return PL_OK;
    if (n > UINT32_MAX / 2) return pl_fail(PL_ERR_ARG, "text too long to tokenize");
    pl_pieces tmp = {0};
    uint8_t *flags = NULL;
    bool any_fast = false;
    for (int i = 0; i < p->n; i++) any_fast |= use_fast && p->fast[i];
    if (any_fast) {
        if (!(flags = malloc(n))) goto nomem;
        for (size_t i = 0; i < n; i++) flags[i] = pl_uni_flags(cps[i]);
    }
    if (!piece_push(out, n)) goto nomem;
    /* Every expression here is linear per match attempt on ordinary text; the budget only
     * stops pathological inputs (the rest of the text then stays one piece). */
    scratch->budget = (int64_t)n * 512 + 100000;
    for (int i = 0; i < p->n; i++) {
        pl_pretok_fast fast = use_fast ? p->fast[i] : PL_FAST_NONE;
        if (!split_one(p->rx[i], fast, scratch, cps, flags, out, &tmp)) goto nomem;
        pl_pieces t = *out;
        *out = tmp;
        tmp = t;
    }
    pl_pieces_free(&tmp);
    free(flags);
    return PL_OK;
nomem:
    pl_pieces_free(&tmp);
    free(flags);
    return pl_fail(PL_ERR_NOMEM, "out of memory splitting text");
}
