/* logprobs.c - log-softmax of a pick's logits: the chosen id's and the k largest. */
#include "logprobs.h"

#include <math.h>

void pl_logprobs_of(const float *l, int n_vocab, int32_t id, int k, pl_logprobs *out) {
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        if (l[i] > mx) mx = l[i];
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)l[i] - mx);
    float lse = mx + (float)log(sum);
    out->id = id;
    out->logprob = l[id] - lse;
    if (k > n_vocab) k = n_vocab;
    if (k > PL_MAX_TOP_LOGPROBS) k = PL_MAX_TOP_LOGPROBS;
    out->n_top = 0;
    for (int i = 0; i < n_vocab && k > 0; i++) { /* insertion into the k largest */
        if (out->n_top == k && !(l[i] - lse > out->top[k - 1].logprob)) continue;
        int j = out->n_top < k ? out->n_top++ : k - 1;
        for (; j > 0 && out->top[j - 1].logprob < l[i] - lse; j--) out->top[j] = out->top[j - 1];
        out->top[j].id = i, out->top[j].logprob = l[i] - lse;
    }
}
