/* tokenizer.c - pl_tok_encode and the vocabulary accessors.
 *
 * Encoding first cuts the text at every occurrence of a token that is matched literally
 * (user-defined tokens always; control and unknown tokens when parse_special), longest
 * token first over the whole text as llama.cpp does; the raw stretches between go to the
 * model's encoder (SPM, BPE or WordPiece), the matched ones are their ids. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

bool pl_idvec_push(pl_idvec *v, int32_t id) {
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, (size_t)cap * sizeof *p);
        if (!p) return false;
        v->v = p, v->cap = cap;
    }
    v->v[v->n++] = id;
    return true;
}

int32_t pl_tok_n_vocab(const pl_tokenizer *t) {
    return t->n_vocab;
}
int32_t pl_tok_bos(const pl_tokenizer *t) {
    return t->sp.bos;
}
int32_t pl_tok_eos(const pl_tokenizer *t) {
    return t->sp.eos;
}
bool pl_tok_adds_bos(const pl_tokenizer *t) {
    return t->add_bos;
}

bool pl_tok_is_eog(const pl_tokenizer *t, int32_t id) {
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

/* ---- the split at literal tokens ---- */

typedef struct {
    int32_t token; /* -1: raw text */
    size_t off, len;
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, int32_t token, size_t off, size_t len) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = (fragment){token, off, len};
    return true;
}

static bool matchable(const pl_tokenizer *t, int32_t id, bool parse_special) {
    return parse_special || t->type[id] == PL_TT_USER_DEFINED;
}

/* Which special tokens (indices into t->specials) occur in the text at all: one pass over
 * the text checking only the tokens that start with each byte. */
static bool *find_present(const pl_tokenizer *t, const char *text, size_t len, bool parse_special,
                          bool *any) {
    *any = false;
    bool *present = calloc((size_t)t->n_specials + 1, 1);
    if (!present) return NULL;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)text[i];
        for (int32_t j = t->sp_byte_start[b]; j < t->sp_byte_start[b + 1]; j++) {
            int32_t k = t->sp_by_byte[j], id = t->specials[k];
            const char *tt = t->pool + t->off[id];
            uint32_t tl = t->len[id];
            if (present[k] || tl > len - i || (tl > 1 && tt[1] != text[i + 1]) ||
                !matchable(t, id, parse_special))
                continue;
            if (memcmp(text + i, tt, tl) == 0) present[k] = *any = true;
        }
    }
    return present;
}

/* Cut every raw fragment of *l at each occurrence of token id, left to right. */
static bool cut_at(const pl_tokenizer *t, const char *text, frag_list *l, frag_list *tmp,
                   int32_t id) {
    const char *tt = t->pool + t->off[id];
    size_t tl = t->len[id];
    tmp->n = 0;
    for (size_t f = 0; f < l->n; f++) {
        fragment fr = l->v[f];
        if (fr.token >= 0) {
            if (!frag_push(tmp, fr.token, fr.off, fr.len)) return false;
            continue;
        }
        size_t at = fr.off, end = fr.off + fr.len;
        while (at < end) {
            const char *hit = memmem(text + at, end - at, tt, tl);
            if (!hit) break;
            size_t h = (size_t)(hit - text);
            if (h > at && !frag_push(tmp, -1, at, h - at)) return false;
            if (!frag_push(tmp, id, h, tl)) return false;
            at = h + tl;
        }
        if (at < end && !frag_push(tmp, -1, at, end - at)) return false;
    }
    frag_list x = *l;
    *l = *tmp;
    *tmp = x;
    return true;
}

static pl_status encode_raw(const pl_tokenizer *t, const char *s, size_t n, bool prefix,
                            pl_idvec *out) {
    switch (t->kind) {
    case PL_TOK_SPM: return pl_tok_spm_encode(t, s, n, prefix, out);
    case PL_TOK_BPE: return pl_tok_bpe_encode(t, s, n, out);
    case PL_TOK_WPM: return pl_tok_wpm_encode(t, s, n, out);
    }
    return PL_ERR;
}

pl_status pl_tok_encode(const pl_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return pl_fail(PL_ERR_ARG, "tokenize: no text");
    pl_idvec out = {0};
    frag_list frags = {0}, tmp = {0};
    bool *present = NULL, any = false;
    pl_status st = PL_OK;
    if (len) {
        if (!frag_push(&frags, -1, 0, len)) goto nomem;
        present = find_present(t, text, len, parse_special, &any);
        if (!present) goto nomem;
        for (int32_t k = 0; any && k < t->n_specials; k++)
            if (present[k] && !cut_at(t, text, &frags, &tmp, t->specials[k])) goto nomem;
    }
    if (add_special && t->add_bos && !pl_idvec_push(&out, t->sp.bos)) goto nomem;
    /* SPM puts a space before text that starts the input or follows a special token */
    bool prev_special = true;
    for (size_t f = 0; f < frags.n; f++) {
        fragment fr = frags.v[f];
        if (fr.token >= 0) {
            if (!pl_idvec_push(&out, fr.token)) goto nomem;
            prev_special = true;
            continue;
        }
        st = encode_raw(t, text + fr.off, fr.len, t->add_space_prefix && prev_special, &out);
        if (st != PL_OK) goto done;
        prev_special = false;
    }
    if (add_special && t->add_eos) {
        int32_t e = t->kind == PL_TOK_WPM ? t->sp.sep : t->sp.eos;
        if (!pl_idvec_push(&out, e)) goto nomem;
    }
    /* the encoders only emit ids of the vocabulary; a slip would reach the model as an
     * out-of-range row, so it is an error here rather than a wrong answer later */
    for (int64_t i = 0; i < out.n; i++)
        if (out.v[i] < 0 || out.v[i] >= t->n_vocab) {
            st = pl_fail(PL_ERR, "tokenize: internal error: id %d outside the vocabulary",
                         (int)out.v[i]);
            goto done;
        }
    *ids = out.v ? out.v : malloc(sizeof(int32_t));
    if (!*ids) goto nomem;
    *n_ids = out.n;
    out.v = NULL;
    goto done;
nomem:
    st = pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
done:
    free(out.v), free(frags.v), free(tmp.v), free(present);
    return st;
}
