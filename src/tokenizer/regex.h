/* regex.h - a small backtracking regular-expression engine over code points, for the
 * pre-tokenizer patterns of BPE vocabularies (GPT-2, Llama 3, Qwen2, ...).
 *
 * Syntax (ECMAScript/PCRE subset): literals, `.`, `[...]` and `[^...]` classes with ranges,
 * \p{L} \p{N} \p{P} \p{M} \p{S} \p{Z} \p{C} (and \P{..}) by Unicode general category,
 * \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} for the kinds of letter,
 * \s \S (White_Space) \d \D \w \W, \r \n \t \f \v \xHH \uHHHH and escaped punctuation,
 * groups (...) (?:...) (?i:...), lookahead (?=...) (?!...), ^ $, alternation |, and the
 * quantifiers ? * + {n} {n,} {n,m} (greedy, or lazy with a trailing ?). Matching is
 * leftmost-first, like std::regex and PCRE. (?i:...) folds ASCII letters only.
 *
 * Patterns come from our own table (pretok.c), never from input; the text can be anything,
 * and a step budget keeps hostile text from making a match attempt take quadratic time. */
#ifndef PL_TOKENIZER_REGEX_H
#define PL_TOKENIZER_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

typedef struct pl_regex pl_regex;

pl_status pl_regex_compile(const char *pattern, pl_regex **out);
void pl_regex_free(pl_regex *re);

/* Scratch space for matching (a backtracking stack); one per thread. */
typedef struct {
    uint32_t *stack; /* pairs (pc, pos) */
    size_t sp, cap;
    int64_t budget; /* steps left; matching gives up (no match) when it runs out */
} pl_regex_scratch;
void pl_regex_scratch_free(pl_regex_scratch *s);

/* Length of the match of re anchored at text[pos] within text[0..n), or -1 if none
 * (also -1 when out of memory or out of budget). */
long pl_regex_match_at(const pl_regex *re, pl_regex_scratch *s, const uint32_t *text, size_t n,
                       size_t pos);

#endif
