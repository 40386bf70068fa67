/* token_mask.c - the vocabulary sorted by bytes, walked along a grammar's configurations
 * (an implicit prefix trie: each id reuses the states of the prefix it shares with the id
 * before it), and the sampler constraint built on it. */
#include "token_mask.h"

#include <stdlib.h>
#include <string.h>

struct pl_vocab_trie {
    int n_vocab;
    char *bytes;       /* every piece, back to back */
    size_t *off, *len; /* [n_vocab] */
    bool *eog;         /* [n_vocab] */
    int32_t *order;    /* the ids with bytes, not end-of-generation, sorted by bytes */
    uint32_t *lcp;     /* bytes order[k] shares with order[k - 1] */
    int n_order;
    /* inside a string's body: the ids of plain text (pl_grammar_plain_text) are allowed as
     * they are, only the others (odd, sorted, with their own lcp) are walked */
    int32_t *plain, *odd;
    uint32_t *odd_lcp;
    int n_plain, n_odd;
    size_t max_len;
    /* scratch of a mask: the set after d bytes of the current id at arena + soff[d] */
    uint8_t *arena;
    size_t cap;
    size_t *soff, *slen; /* [max_len + 1] */
};

static const pl_vocab_trie *sort_v;

static int cmp_ids(const void *a, const void *b) {
    const pl_vocab_trie *v = sort_v;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t n = v->len[x] < v->len[y] ? v->len[x] : v->len[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], n);
    if (c) return c;
    if (v->len[x] != v->len[y]) return v->len[x] < v->len[y] ? -1 : 1;
    return (x > y) - (x < y);
}

void pl_vocab_trie_free(pl_vocab_trie *v) {
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->eog);
    free(v->order);
    free(v->lcp);
    free(v->plain);
    free(v->odd);
    free(v->odd_lcp);
    free(v->arena);
    free(v->soff);
    free(v->slen);
    free(v);
}

int pl_vocab_trie_n_vocab(const pl_vocab_trie *v) {
    return v->n_vocab;
}

/* lcp[k]: the bytes ids[k] shares with ids[k - 1]. */
static void fill_lcp(const pl_vocab_trie *v, const int32_t *ids, int n, uint32_t *lcp) {
    for (int k = 0; k < n; k++) {
        uint32_t l = 0;
        if (k) {
            int32_t a = ids[k - 1], b = ids[k];
            size_t m = v->len[a] < v->len[b] ? v->len[a] : v->len[b];
            while (l < m && v->bytes[v->off[a] + l] == v->bytes[v->off[b] + l]) l++;
        }
        lcp[k] = l;
    }
}

pl_status pl_vocab_trie_new(const char *const *pieces, const size_t *lens, const bool *eog,
                            int n_vocab, pl_vocab_trie **out) {
    *out = NULL;
    if (n_vocab < 1) return pl_fail(PL_ERR_ARG, "vocabulary: no tokens");
    pl_vocab_trie *v = calloc(1, sizeof *v);
    size_t total = 0;
    for (int i = 0; i < n_vocab; i++) total += lens[i];
    size_t n = (size_t)n_vocab;
    if (v) {
        v->n_vocab = n_vocab;
        v->bytes = malloc(total ? total : 1);
        v->off = malloc(n * sizeof *v->off);
        v->len = malloc(n * sizeof *v->len);
        v->eog = calloc(n, sizeof *v->eog);
        v->order = malloc(n * sizeof *v->order);
        v->lcp = malloc(n * sizeof *v->lcp);
        v->plain = malloc(n * sizeof *v->plain);
        v->odd = malloc(n * sizeof *v->odd);
        v->odd_lcp = malloc(n * sizeof *v->odd_lcp);
    }
    if (!v || !v->bytes || !v->off || !v->len || !v->eog || !v->order || !v->lcp || !v->plain ||
        !v->odd || !v->odd_lcp) {
        pl_vocab_trie_free(v);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the vocabulary trie");
    }
    size_t at = 0;
    for (int i = 0; i < n_vocab; i++) {
        v->off[i] = at;
        v->len[i] = lens[i];
        if (lens[i]) memcpy(v->bytes + at, pieces[i], lens[i]);
        at += lens[i];
        v->eog[i] = eog && eog[i];
        if (lens[i] && !v->eog[i]) v->order[v->n_order++] = i;
        if (lens[i] > v->max_len) v->max_len = lens[i];
    }
    sort_v = v; /* qsort has no context argument; building is not concurrent */
    qsort(v->order, (size_t)v->n_order, sizeof *v->order, cmp_ids);
    for (int k = 0; k < v->n_order; k++) {
        int32_t id = v->order[k];
        if (pl_grammar_plain_text(v->bytes + v->off[id], v->len[id]))
            v->plain[v->n_plain++] = id;
        else
            v->odd[v->n_odd++] = id;
    }
    fill_lcp(v, v->order, v->n_order, v->lcp);
    fill_lcp(v, v->odd, v->n_odd, v->odd_lcp);
    v->soff = malloc((v->max_len + 1) * sizeof *v->soff);
    v->slen = malloc((v->max_len + 1) * sizeof *v->slen);
    if (!v->soff || !v->slen) {
        pl_vocab_trie_free(v);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the vocabulary trie");
    }
    *out = v;
    return PL_OK;
}

pl_status pl_vocab_trie_from_tok(const pl_tokenizer *t, pl_vocab_trie **out) {
    int n = pl_tok_n_vocab(t);
    char **p = calloc((size_t)n + 1, sizeof *p);
    size_t *l = calloc((size_t)n + 1, sizeof *l);
    bool *e = calloc((size_t)n + 1, sizeof *e);
    pl_status st = p && l && e ? PL_OK : pl_fail(PL_ERR_NOMEM, "out of memory for the vocabulary");
    for (int i = 0; i < n && !st; i++) {
        st = pl_tok_piece_str(t, i, false, &p[i], &l[i]);
        e[i] = pl_tok_is_eog(t, i);
    }
    if (!st) st = pl_vocab_trie_new((const char *const *)p, l, e, n, out);
    for (int i = 0; p && i < n; i++) free(p[i]);
    free(p);
    free(l);
    free(e);
    return st;
}

static bool reserve(pl_vocab_trie *v, size_t need) {
    if (need <= v->cap) return true;
    size_t nc = v->cap ? v->cap * 2 : need;
    while (nc < need) nc *= 2;
    uint8_t *a = realloc(v->arena, nc);
    if (!a) return false;
    v->arena = a;
    v->cap = nc;
    return true;
}

/* Walk ids[0..n) (sorted, lcp their shared prefixes) from the set in the arena at depth 0;
 * mark the ids whose every byte is taken. Returns how many, or -1 out of memory. */
static int walk(pl_vocab_trie *v, const pl_grammar *g, const int32_t *ids, const uint32_t *lcp,
                int n, uint8_t *allow) {
    size_t room = pl_gset_max_bytes();
    size_t have = 0, dead = SIZE_MAX; /* states 0..have valid; the one at dead is empty */
    int count = 0;
    for (int k = 0; k < n; k++) {
        size_t l = lcp[k];
        if (l >= dead) continue; /* shares the refused prefix (only lcp is read) */
        int32_t id = ids[k];
        size_t len = v->len[id];
        const uint8_t *p = (const uint8_t *)v->bytes + v->off[id];
        if (have > l) have = l;
        dead = SIZE_MAX;
        for (size_t d = have; d < len; d++) {
            size_t top = v->soff[d] + v->slen[d];
            if (!reserve(v, top + room)) return -1;
            v->slen[d + 1] =
                pl_gset_step(g, v->arena + v->soff[d], v->slen[d], p[d], v->arena + top);
            v->soff[d + 1] = top;
            if (!v->slen[d + 1]) {
                dead = d + 1;
                break;
            }
        }
        if (dead == SIZE_MAX) {
            have = len;
            allow[id] = 1;
            count++;
        } else
            have = dead - 1;
    }
    return count;
}

pl_status pl_token_mask(pl_vocab_trie *v, const pl_gstate *s, uint8_t *allow, int *n_allowed) {
    size_t n0;
    const uint8_t *set0 = pl_gstate_set(s, &n0);
    *n_allowed = 0;
    memset(allow, 0, (size_t)v->n_vocab);
    if (!reserve(v, n0 + pl_gset_max_bytes()))
        return pl_fail(PL_ERR_NOMEM, "out of memory for the token mask");
    memcpy(v->arena, set0, n0);
    v->soff[0] = 0, v->slen[0] = n0;
    int count;
    if (pl_gset_in_string(set0, n0)) {
        for (int k = 0; k < v->n_plain; k++) allow[v->plain[k]] = 1;
        count = walk(v, pl_gstate_grammar(s), v->odd, v->odd_lcp, v->n_odd, allow);
        if (count >= 0) count += v->n_plain;
    } else
        count = walk(v, pl_gstate_grammar(s), v->order, v->lcp, v->n_order, allow);
    if (count < 0) return pl_fail(PL_ERR_NOMEM, "out of memory for the token mask");
    if (pl_gstate_complete(s))
        for (int i = 0; i < v->n_vocab; i++)
            if (v->eog[i]) allow[i] = 1, count++;
    *n_allowed = count;
    return PL_OK;
}

/* ---- the sampler constraint ---- */

struct pl_json_constraint {
    pl_vocab_trie *v;
    pl_gstate *s;
};

pl_status pl_json_constraint_new(const pl_grammar *g, pl_vocab_trie *v, pl_json_constraint **out) {
    pl_json_constraint *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c) return pl_fail(PL_ERR_NOMEM, "out of memory for the constraint");
    pl_status st = pl_gstate_new(g, &c->s);
    if (st) {
        free(c);
        return st;
    }
    c->v = v;
    *out = c;
    return PL_OK;
}

void pl_json_constraint_free(pl_json_constraint *c) {
    if (!c) return;
    pl_gstate_free(c->s);
    free(c);
}

static int c_allowed(void *ud, uint8_t *allow, int n_vocab) {
    pl_json_constraint *c = ud;
    int n;
    if (n_vocab < c->v->n_vocab) {
        pl_fail(PL_ERR_ARG, "constraint: the model has %d ids, the vocabulary %d", n_vocab,
                c->v->n_vocab);
        return -1;
    }
    /* ids past the tokenizer's (a padded output matrix) are never allowed */
    memset(allow + c->v->n_vocab, 0, (size_t)(n_vocab - c->v->n_vocab));
    return pl_token_mask(c->v, c->s, allow, &n) ? -1 : n;
}

static pl_status c_accept(void *ud, int32_t id) {
    pl_json_constraint *c = ud;
    if (id < 0 || id >= c->v->n_vocab) return pl_fail(PL_ERR_ARG, "constraint: id %d", id);
    if (c->v->eog[id]) return PL_OK;
    if (!c->v->len[id] || !pl_gstate_feed(c->s, c->v->bytes + c->v->off[id], c->v->len[id]))
        return pl_fail(PL_ERR_ARG, "constraint: id %d does not continue the JSON value", id);
    return PL_OK;
}

pl_status pl_json_constraint_attach(pl_json_constraint *c, pl_sampler *smp) {
    pl_sampler_constraint sc = {.allowed = c_allowed, .accept = c_accept, .ud = c};
    if (!pl_sampler_constrain(smp, &sc))
        return pl_fail(PL_ERR_NOMEM, "out of memory for the constraint");
    return PL_OK;
}

const pl_gstate *pl_json_constraint_state(const pl_json_constraint *c) {
    return c->s;
}
