/* token_mask.h - which token ids a grammar allows next, for constrained decoding.
 *
 * A pl_vocab_trie holds every id's bytes (pl_tok_piece: special tokens have none and are
 * never allowed) sorted, so that ids sharing a prefix are walked once: the grammar's set of
 * configurations is stepped one byte per trie edge and a whole subtree is skipped at the
 * first refused byte. End-of-generation ids are allowed exactly when the value is complete.
 *
 * pl_json_constraint ties a grammar, a trie and a matcher to a sampler
 * (pl_sampler_constrain): before each pick it masks the logits, after it feeds the chosen
 * id's bytes. One constraint per generation; the trie may be shared by constraints that do
 * not mask at the same time (its scratch memory is its own). */
#ifndef PL_GRAMMAR_TOKEN_MASK_H
#define PL_GRAMMAR_TOKEN_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../runtime/sampler.h"
#include "../tokenizer/tokenizer.h"
#include "grammar.h"

typedef struct pl_vocab_trie pl_vocab_trie;

/* Over n_vocab ids: pieces[i][0..lens[i]) are id i's bytes; eog[i] marks the
 * end-of-generation ids (may be NULL: none). */
pl_status pl_vocab_trie_new(const char *const *pieces, const size_t *lens, const bool *eog,
                            int n_vocab, pl_vocab_trie **out);
/* The same from a tokenizer. */
pl_status pl_vocab_trie_from_tok(const pl_tokenizer *t, pl_vocab_trie **out);
void pl_vocab_trie_free(pl_vocab_trie *v);
int pl_vocab_trie_n_vocab(const pl_vocab_trie *v);

/* allow[0..n_vocab) = 1 for each id that may come next from s, else 0; *n_allowed counts
 * them. */
pl_status pl_token_mask(pl_vocab_trie *v, const pl_gstate *s, uint8_t *allow, int *n_allowed);

typedef struct pl_json_constraint pl_json_constraint;

/* A matcher for g at its start over v (both borrowed: they outlive it). */
pl_status pl_json_constraint_new(const pl_grammar *g, pl_vocab_trie *v, pl_json_constraint **out);
void pl_json_constraint_free(pl_json_constraint *c);
/* Constrain smp's picks (ids past the vocabulary's, where the model has more, are never
 * allowed; the sampler keeps a pointer to c until pl_sampler_constrain(smp,
 * NULL) or its free). */
pl_status pl_json_constraint_attach(pl_json_constraint *c, pl_sampler *smp);
/* The matcher (the bytes taken so far): complete or not. */
const pl_gstate *pl_json_constraint_state(const pl_json_constraint *c);

#endif
