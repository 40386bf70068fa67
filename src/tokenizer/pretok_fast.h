/* pretok_fast.h - hand-written equivalents of the common pre-tokenizer expressions
 * (see pretok_fast.c); pretok.c uses them in place of the regex engine when a table row's
 * expression is one of these. */
#ifndef PL_TOKENIZER_PRETOK_FAST_H
#define PL_TOKENIZER_PRETOK_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    PL_FAST_NONE,
    PL_FAST_GPT2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PL_FAST_LLAMA3, /* Llama 3: case-folded contractions, letters with one leading other, \p{N}{1,3}
                     */
    PL_FAST_QWEN2,  /* as Llama 3 with single digits */
    PL_FAST_QWEN35, /* as Qwen2 with marks joining letters */
} pl_pretok_fast;

/* Match length at cps[i] (0 = no match). flags[j] = pl_uni_flags(cps[j]). */
long pl_pretok_fast_match(pl_pretok_fast kind, const uint32_t *cps, const uint8_t *flags, size_t n,
                          size_t i);

#endif
