/* logprobs.h - the log-probabilities of a pick: the log-softmax of the logits the sampler
 * chose from (after the penalties, before the temperature), for the chosen id and the most
 * likely ids. Shared by the public API (pooled_sample_opts.on_logprob) and `pooled serve`
 * (OpenAI's logprobs). */
#ifndef PL_RUNTIME_LOGPROBS_H
#define PL_RUNTIME_LOGPROBS_H

#include <stdint.h>

#define PL_MAX_TOP_LOGPROBS 20

typedef struct {
    int32_t id;
    float logprob;
    int n_top; /* the k asked for (at most the vocabulary), most likely first */
    struct {
        int32_t id;
        float logprob;
    } top[PL_MAX_TOP_LOGPROBS];
} pl_logprobs;

/* *out for the pick id from logits l[0..n_vocab) with the k (0 to PL_MAX_TOP_LOGPROBS) most
 * likely ids, ties lower id first. */
void pl_logprobs_of(const float *l, int n_vocab, int32_t id, int k, pl_logprobs *out);

#endif
