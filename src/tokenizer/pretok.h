/* pretok.h - BPE pre-tokenizers: split text into the pieces that BPE merges work inside,
 * chosen by the GGUF's tokenizer.ggml.pre name.
 *
 * A pre-tokenizer is a list of regular expressions applied in turn, each one refining the
 * pieces of the previous one: within a piece, every match becomes a piece and so does
 * every stretch of text between matches (llama.cpp's unicode_regex_split semantics). */
#ifndef PL_TOKENIZER_PRETOK_H
#define PL_TOKENIZER_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "regex.h"

typedef struct pl_pretok pl_pretok;

/* Flags a pre-tokenizer name implies for the BPE model (as llama.cpp sets them). */
typedef struct {
    bool ignore_merges; /* a whole piece that is a token is taken as is (Llama 3) */
    bool add_bos;       /* default for tokenizer.ggml.add_bos_token when the key is absent */
} pl_pretok_info;

/* Build the pre-tokenizer for a tokenizer.ggml.pre name ("" or NULL = "default").
 * Fails for names we do not know. */
pl_status pl_pretok_new(const char *name, pl_pretok **out, pl_pretok_info *info);
void pl_pretok_free(pl_pretok *p);

/* True if no piece can span a newline that a non-whitespace character follows, so text may
 * be split there and the parts tokenized separately (the GPT-2 and Llama 3 families). */
bool pl_pretok_line_safe(const pl_pretok *p);

/* A growable list of piece lengths (in code points). */
typedef struct {
    uint32_t *len;
    size_t n, cap;
} pl_pieces;
void pl_pieces_free(pl_pieces *p);

/* Split cps[0..n) into pieces (appended to out, which is reset first). scratch is the
 * caller's regex scratch space. use_fast: use the hand-written matchers where there is one
 * (false runs every expression through regex.c; tests compare the two). */
pl_status pl_pretok_split(const pl_pretok *p, pl_regex_scratch *scratch, const uint32_t *cps,
                          size_t n, pl_pieces *out, bool use_fast);

#endif
