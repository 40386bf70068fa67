/* sampler.c - penalties, temperature, top-k / top-p / min-p and a seeded draw (the rules
 * are spelled out in sampler.h). */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pl_sampler {
    pl_sampler_params p;
    int n_vocab;
    pl_candidate *cand; /* [n_vocab] scratch */
    pl_sampler_watch_fn watch;
    void *watch_ud;
    pl_sampler_constraint con;
    bool constrained;
    uint8_t *allow; /* [n_vocab] while constrained */
};

void pl_sampler_set_watch(pl_sampler *s, pl_sampler_watch_fn fn, void *ud) {
    s->watch = fn;
    s->watch_ud = ud;
}

pl_sampler_params pl_sampler_defaults(void) {
    return (pl_sampler_params){.temp = 0.8f,
                               .top_k = 40,
                               .top_p = 0.95f,
                               .min_p = 0.05f,
                               .repeat_penalty = 1.0f,
                               .penalty_last_n = -1};
}

/* ---- random numbers: counter-based, a pure function of (seed, position) ---- */

/* splitmix64's finaliser: a bijection of 64 bits that mixes every input bit into all. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double pl_sampler_unit(uint64_t seed, int64_t pos) {
    uint64_t key = mix64(seed + 0x9e3779b97f4a7c15ull);
    uint64_t r = mix64(key ^ mix64((uint64_t)pos * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
    return (double)(r >> 11) * 0x1.0p-53; /* 53 random bits in [0, 1) */
}

/* ---- steps ---- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void pl_sampler_penalize(const pl_sampler_params *p, float *logits, int n_vocab, const int32_t *ctx,
                         int64_t n_ctx) {
    bool rep = p->repeat_penalty != 1.0f && p->repeat_penalty > 0;
    if (!rep && p->presence_penalty == 0 && p->frequency_penalty == 0) return;
    int64_t n = p->penalty_last_n < 0 || p->penalty_last_n > n_ctx ? n_ctx : p->penalty_last_n;
    if (n <= 0) return;
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    if (!ids) return; /* a penalty is a refinement; without memory we sample without it */
    memcpy(ids, ctx + (n_ctx - n), sizeof *ids * (size_t)n);
    qsort(ids, (size_t)n, sizeof *ids, cmp_i32);
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && ids[j] == ids[i]) j++;
        int32_t id = ids[i];
        int64_t count = j - i;
        i = j;
        if (id < 0 || id >= n_vocab) continue;
        float *l = &logits[id];
        if (rep) *l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty; /* once per id */
        *l -= (float)count * p->frequency_penalty + p->presence_penalty;
    }
    free(ids);
}

static int cmp_cand(const void *a, const void *b) {
    const pl_candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The k-th largest of v[0..n) (1-based k), by quickselect on a scratch copy. */
static float kth_largest(const float *v, int64_t n, int64_t k, float *tmp) {
    memcpy(tmp, v, sizeof *tmp * (size_t)n);
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (hi - lo > 16) {
        float pivot = tmp[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > pivot) i++;
            while (tmp[j] < pivot) j--;
            if (i <= j) {
                float t = tmp[i];
                tmp[i++] = tmp[j];
                tmp[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return tmp[want];
    }
    qsort(tmp + lo, (size_t)(hi - lo + 1), sizeof *tmp, cmp_float_desc);
    return tmp[want];
}

/* Softmax of logit / temp over cand[0..n) (sorted, cand[0] the largest) into .p. The
 * maximum is subtracted before dividing, so a tiny temperature cannot overflow. */
static void softmax(pl_candidate *cand, int64_t n, double temp) {
    double sum = 0, mx = cand[0].logit;
    for (int64_t i = 0; i < n; i++) sum += exp(((double)cand[i].logit - mx) / temp);
    for (int64_t i = 0; i < n; i++)
        cand[i].p = (float)(exp(((double)cand[i].logit - mx) / temp) / sum);
}

static int64_t finish(const pl_sampler_params *p, pl_candidate *cand, int64_t n);
static pl_status pick(pl_sampler *s, float *logits, const int32_t *ctx, int64_t n_ctx,
                      int32_t *out);

int64_t pl_sampler_distribution(const pl_sampler_params *p, const float *logits, int n_vocab,
                                pl_candidate *cand) {
    float thr = -INFINITY;
    if (p->top_k > 0 && p->top_k < n_vocab) {
        /* reuse cand's memory as the float scratch: it is filled just below */
        thr = kth_largest(logits, n_vocab, p->top_k, (float *)cand);
    }
    int64_t n = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] >= thr) cand[n++] = (pl_candidate){.id = i, .logit = logits[i]};
    if (n == 0) { /* every logit NaN: nothing to rank, answer something valid */
        cand[0] = (pl_candidate){.id = 0, .logit = 0, .p = 1};
        return 1;
    }
    return finish(p, cand, n);
}

/* Steps after top-k on the n kept candidates (any order): rank, softmax, top-p, min-p. */
static int64_t finish(const pl_sampler_params *p, pl_candidate *cand, int64_t n) {
    qsort(cand, (size_t)n, sizeof *cand, cmp_cand);
    softmax(cand, n, p->temp);
    if (p->top_p < 1.0f) {
        double cum = 0;
        int64_t keep = 0;
        while (keep < n && (keep == 0 || cum < p->top_p)) cum += cand[keep++].p;
        n = keep;
    }
    if (p->min_p > 0) {
        float floor_p = p->min_p * cand[0].p;
        int64_t keep = 1;
        while (keep < n && cand[keep].p >= floor_p) keep++;
        n = keep;
    }
    softmax(cand, n, p->temp);
    return n;
}

/* ---- the sampler ---- */

pl_status pl_sampler_new(const pl_sampler_params *p, int n_vocab, pl_sampler **out) {
    *out = NULL;
    if (n_vocab < 1) return pl_fail(PL_ERR_ARG, "sampler: empty vocabulary");
    if (!(p->top_p > 0) || p->min_p > 1 || !(p->repeat_penalty > 0) || !isfinite(p->temp))
        return pl_fail(PL_ERR_ARG, "sampler: top-p must be > 0, min-p <= 1, repeat penalty > 0");
    pl_sampler *s = calloc(1, sizeof *s);
    pl_candidate *cand = malloc(sizeof *cand * (size_t)n_vocab);
    if (!s || !cand) {
        free(s);
        free(cand);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the sampler");
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = cand;
    *out = s;
    return PL_OK;
}

void pl_sampler_free(pl_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->allow);
    free(s);
}

/* The draw for position pos from the n candidates in s->cand. */
static int32_t draw(pl_sampler *s, int64_t n, int64_t pos) {
    double u = pl_sampler_unit(s->p.seed, pos), acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += s->cand[i].p;
        if (u < acc) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}

int pl_sampler_top_count(const pl_sampler *s) {
    const pl_sampler_params *p = &s->p;
    bool penalties =
        p->penalty_last_n != 0 &&
        (p->repeat_penalty != 1.0f || p->presence_penalty != 0 || p->frequency_penalty != 0);
    if (s->constrained || p->temp <= 0 || penalties || p->top_k <= 0 ||
        p->top_k > PL_SAMPLER_TOP_MAX || p->top_k >= s->n_vocab - 1 || s->watch)
        return 0;
    return p->top_k + 1;
}

bool pl_sampler_pick_top(pl_sampler *s, const int32_t *ids, const float *vals, int m, int64_t pos,
                         int32_t *out) {
    int k = s->p.top_k;
    if (m != k + 1 || pl_sampler_top_count(s) != m) return false;
    for (int i = 0; i < m; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab || isnan(vals[i])) return false;
    /* top-k keeps every logit >= the k-th largest: the set is exactly the first k unless
     * the (k+1)-th ties with the k-th */
    if (!(vals[k] < vals[k - 1])) return false;
    for (int i = 0; i < k; i++) s->cand[i] = (pl_candidate){.id = ids[i], .logit = vals[i]};
    *out = draw(s, finish(&s->p, s->cand, k), pos);
    return true;
}

bool pl_sampler_is_argmax(const pl_sampler *s) {
    return !s->watch && !s->constrained && s->p.temp <= 0 &&
           (s->p.repeat_penalty == 1.0f || s->p.penalty_last_n == 0) &&
           ((s->p.presence_penalty == 0 && s->p.frequency_penalty == 0) ||
            s->p.penalty_last_n == 0);
}

bool pl_sampler_constrain(pl_sampler *s, const pl_sampler_constraint *c) {
    s->constrained = false;
    if (!c) return true;
    if (!s->allow && !(s->allow = malloc((size_t)s->n_vocab))) return false;
    s->con = *c;
    s->constrained = true;
    return true;
}

bool pl_sampler_constrained(const pl_sampler *s) {
    return s->constrained;
}

/* Constrained: the most likely allowed id (the lowest allowed one if no logit compares). */
static int32_t best_allowed(const pl_sampler *s, const float *logits) {
    int32_t best = -1;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (s->allow[i] && (best < 0 || logits[i] > logits[best])) best = i;
    return best;
}

pl_status pl_sampler_pick(pl_sampler *s, float *logits, const int32_t *ctx, int64_t n_ctx,
                          int32_t *out) {
    if (s->constrained) {
        int n = s->con.allowed(s->con.ud, s->allow, s->n_vocab);
        if (n < 0) return PL_ERR;
        if (n == 0) return pl_fail(PL_ERR_ARG, "constrained decoding: no token may come next");
        for (int i = 0; i < s->n_vocab; i++)
            if (!s->allow[i]) logits[i] = -INFINITY;
    }
    pl_status st = pick(s, logits, ctx, n_ctx, out);
    if (st) return st;
    if (s->constrained && !s->allow[*out]) *out = best_allowed(s, logits);
    /* the watcher sees the id returned: after a constrained pick's correction */
    if (s->watch) s->watch(s->watch_ud, logits, s->n_vocab, *out);
    return s->constrained ? s->con.accept(s->con.ud, *out) : PL_OK;
}
static pl_status pick(pl_sampler *s, float *logits, const int32_t *ctx, int64_t n_ctx,
                      int32_t *out) {
    pl_sampler_penalize(&s->p, logits, s->n_vocab, ctx, n_ctx);
    if (s->p.temp <= 0) {
        int32_t best = 0;
        for (int32_t i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        *out = best;
    } else {
        *out = draw(s, pl_sampler_distribution(&s->p, logits, s->n_vocab, s->cand), n_ctx);
    }
    return PL_OK;
}
