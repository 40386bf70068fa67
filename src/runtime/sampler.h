/* sampler.h - choosing the next token from the logits.
 *
 * The steps, in transformers' order:
 *   1. penalties over the context window (the last penalty_last_n ids, or all):
 *      repetition (transformers' RepetitionPenaltyLogitsProcessor: each DISTINCT id once,
 *      logit > 0 ? logit / p : logit * p), then presence and frequency as OpenAI defines
 *      them (logit -= count * frequency + (count > 0) * presence);
 *   2. temperature <= 0: greedy, the largest logit (ties: lowest id); otherwise
 *   3. logits / temperature, then top-k (keeps every logit >= the k-th largest, as
 *      transformers' TopKLogitsWarper does), top-p (keeps the most likely ids until their
 *      probability reaches top_p, the one that crosses included), min-p (drops ids whose
 *      probability is below min_p times the largest);
 *   4. one draw from the renormalised distribution. The draw is counter-based: its uniform
 *      number is a pure function of (seed, position of the id being chosen), never of how
 *      many draws came before, so the same seed gives the same tokens whether a position is
 *      reached by plain decoding, speculative decoding (several positions verified in one
 *      pass), a retry or a restart. */
#ifndef PL_RUNTIME_SAMPLER_H
#define PL_RUNTIME_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/status.h"

typedef struct {
    float temp;              /* <= 0: greedy */
    int top_k;               /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    int penalty_last_n;      /* ids of the context the penalties look at; < 0: all */
    uint64_t seed;
} pl_sampler_params;

/* temp 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties, whole context, seed 0. */
pl_sampler_params pl_sampler_defaults(void);

/* One candidate of the final distribution. */
typedef struct {
    int32_t id;
    float logit; /* after penalties (before temperature) */
    float p;     /* renormalised probability over the kept candidates */
} pl_candidate;

typedef struct pl_sampler pl_sampler;

pl_status pl_sampler_new(const pl_sampler_params *p, int n_vocab, pl_sampler **out);
void pl_sampler_free(pl_sampler *s);

/* A watcher sees each choice pl_sampler_pick makes: the n_vocab logits it chose from
 * (after the penalties, before the temperature) and the id chosen; the server's logprobs
 * come from it. While one is set the sampler needs every logit on the host, so
 * pl_sampler_is_argmax is false and pl_sampler_top_count 0 (no device fast path); without
 * one (the default, or fn NULL) nothing changes. */
typedef void (*pl_sampler_watch_fn)(void *ud, const float *logits, int n_vocab, int32_t id);
void pl_sampler_set_watch(pl_sampler *s, pl_sampler_watch_fn fn, void *ud);

/* True when the choice is a plain argmax of the raw logits (greedy, no penalties): the
 * runtime may then let the backend pick the id on the device. */
bool pl_sampler_is_argmax(const pl_sampler *s);

/* A constraint on what may come next (constrained decoding, src/grammar/token_mask.h).
 * With one set, pick first sets the logit of every id it does not allow to -infinity (so
 * the rest of the sampling sees only allowed ids), then always returns an allowed id
 * (the most likely allowed one where NaN logits defeat the ranking), and hands it to
 * accept. The runtime then reads every logit on the host: no device argmax or top-k, no
 * speculative decoding (pl_sampler_constrained). */
typedef struct {
    /* allow[0..n_vocab) = 1 for each id that may come next; returns how many (0: none, an
     * error for pick), or -1 after pl_fail */
    int (*allowed)(void *ud, uint8_t *allow, int n_vocab);
    /* the id picked */
    pl_status (*accept)(void *ud, int32_t id);
    void *ud;
} pl_sampler_constraint;

/* Set (c copied) or clear (NULL) the constraint. False when out of memory. */
bool pl_sampler_constrain(pl_sampler *s, const pl_sampler_constraint *c);
bool pl_sampler_constrained(const pl_sampler *s);

/* Pick the next id, the one at position n_ctx. logits (n_vocab values) are modified by the
 * penalties; ctx holds the n_ctx ids so far (prompt and generated), and n_ctx keys the
 * draw (pl_sampler_unit). */
pl_status pl_sampler_pick(pl_sampler *s, float *logits, const int32_t *ctx, int64_t n_ctx,
                          int32_t *out);

/* The largest top-k taken from the device's top-k (pl_sampler_top_count). */
#define PL_SAMPLER_TOP_MAX 256

/* Sampling from the device's top-k: the number of (id, value) pairs to fetch (top_k + 1,
 * most probable first, ties lower id first; at most PL_SAMPLER_TOP_MAX + 1), or 0 when this
 * sampler needs every logit (penalties, greedy, top-k off or above PL_SAMPLER_TOP_MAX). */
int pl_sampler_top_count(const pl_sampler *s);
/* Pick from those m pairs exactly as pl_sampler_pick would from all the logits (the same
 * candidates, order, probabilities and draw). False, with nothing consumed, when the pairs
 * cannot decide it (the (k+1)-th value ties the k-th, a NaN, a missing id): then read
 * the logits and call pl_sampler_pick. pos: the position of the id chosen (pick's n_ctx). */
bool pl_sampler_pick_top(pl_sampler *s, const int32_t *ids, const float *vals, int m, int64_t pos,
                         int32_t *out);

/* The uniform number in [0, 1) (53 random bits) that the draw for position pos uses. */
double pl_sampler_unit(uint64_t seed, int64_t pos);

/* ---- the steps, for tests and other samplers ---- */

/* Step 1 on logits in place. */
void pl_sampler_penalize(const pl_sampler_params *p, float *logits, int n_vocab, const int32_t *ctx,
                         int64_t n_ctx);
/* Step 3 (temp > 0): the kept candidates in cand (room for n_vocab), most probable first
 * (ties: lower id first), with probabilities summing to 1. Returns their count (>= 1). */
int64_t pl_sampler_distribution(const pl_sampler_params *p, const float *logits, int n_vocab,
                                pl_candidate *cand);

#endif
