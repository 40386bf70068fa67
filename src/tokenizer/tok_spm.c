/* tok_spm.c - SentencePiece-style BPE (tokenizer.ggml.model "llama"): spaces become U+2581
 * (with one prepended when add_space_prefix asks), the text starts as one symbol per UTF-8
 * character, and the adjacent pair whose concatenation is the token with the highest score
 * is merged (leftmost among equals) until no pair is a token. Symbols that are not tokens
 * become their bytes' <0xNN> tokens. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "unicode.h"

typedef struct {
    int32_t prev, next;
    uint32_t start, len;
} spm_sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t len; /* of the merged text, to detect stale pairs */
} spm_pair;

typedef struct {
    spm_sym *syms;
    spm_pair *heap;
    size_t n_heap, cap_heap;
    const char *text;
} spm_work;

/* higher score first, then the leftmost */
static bool pair_before(const spm_pair *a, const spm_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool heap_push(spm_work *w, spm_pair p) {
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        spm_pair *v = realloc(w->heap, cap * sizeof *v);
        if (!v) return false;
        w->heap = v, w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0 && pair_before(&p, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = p;
    return true;
}

static spm_pair heap_pop(spm_work *w) {
    spm_pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static bool try_pair(const pl_tokenizer *t, spm_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const spm_sym *l = &w->syms[left], *r = &w->syms[right];
    uint32_t len = l->len + r->len;
    int32_t id = pl_tok_find(t, w->text + l->start, len);
    if (id < 0 || id >= t->n_vocab) return true;
    float score = t->scores ? t->scores[id] : 0.0f;
    return heap_push(w, (spm_pair){score, left, right, len});
}

static pl_status nomem(void) {
    return pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
}

/* Merge the symbols of buf[0..n) and emit their tokens. */
static pl_status encode_span(const pl_tokenizer *t, spm_work *w, const char *buf, size_t n,
                             pl_idvec *out) {
    w->text = buf;
    w->n_heap = 0;
    /* one symbol per UTF-8 character, by the length its first byte claims */
    int32_t n_sym = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = (size_t)pl_utf8_lead_len((unsigned char)buf[i]);
        if (cl > n - i) cl = n - i;
        w->syms[n_sym] = (spm_sym){n_sym - 1, -1, (uint32_t)i, (uint32_t)cl};
        if (n_sym > 0) w->syms[n_sym - 1].next = n_sym;
        n_sym++;
        i += cl;
    }
    for (int32_t i = 1; i < n_sym; i++)
        if (!try_pair(t, w, i - 1, i)) return nomem();
    while (w->n_heap) {
        spm_pair p = heap_pop(w);
        spm_sym *l = &w->syms[p.left], *r = &w->syms[p.right];
        if (!l->len || !r->len || l->len + r->len != p.len || l->next != p.right) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = p.left;
        if (!try_pair(t, w, l->prev, p.left) || !try_pair(t, w, p.left, l->next)) return nomem();
    }
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        const spm_sym *s = &w->syms[i];
        int32_t id = pl_tok_find(t, buf + s->start, s->len);
        if (id >= 0 && id < t->n_vocab) {
            if (!pl_idvec_push(out, id)) return nomem();
            continue;
        }
        for (uint32_t k = 0; k < s->len; k++) {
            int32_t b = pl_tok_byte_fallback(t, (uint8_t)buf[s->start + k]);
            if (b < 0) return PL_ERR_FORMAT;
            if (!pl_idvec_push(out, b)) return nomem();
        }
    }
    return PL_OK;
}

static bool is_space_mark(const char *s) {
    return memcmp(s, "\xe2\x96\x81", 3) == 0;
}

pl_status pl_tok_spm_encode(const pl_tokenizer *t, const char *text, size_t len, bool add_prefix,
                            pl_idvec *out) {
    /* escaped copy: ' ' -> U+2581 (3 bytes) */
    size_t cap = (len + 1) * 3;
    char *buf = malloc(cap ? cap : 1);
    spm_work w = {0};
    pl_status st = PL_OK;
    if (!buf) goto nomem;
    size_t n = 0;
    if (add_prefix) memcpy(buf, "\xe2\x96\x81", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ')
            memcpy(buf + n, "\xe2\x96\x81", 3), n += 3;
        else
            buf[n++] = text[i];
    }
    w.syms = malloc((n ? n : 1) * sizeof *w.syms);
    if (!w.syms) goto nomem;
    /* When no token has U+2581 after something else (t->spm_words), no merge can cross the
     * start of a U+2581 run, so each such word is encoded on its own: same result, small
     * working set. */
    size_t start = 0;
    for (size_t i = 3; t->spm_words && !t->slow && i + 3 <= n; i++) {
        if (is_space_mark(buf + i) && !is_space_mark(buf + i - 3)) {
            /* i - 3 .. i may straddle a character; only cut right after a whole one */
            size_t j = i - 1;
            while (j > start && ((unsigned char)buf[j] & 0xC0) == 0x80) j--;
            if (j + (size_t)pl_utf8_lead_len((unsigned char)buf[j]) != i) continue;
            if ((st = encode_span(t, &w, buf + start, i - start, out)) != PL_OK) goto done;
            start = i;
        }
    }
    if (n > start) st = encode_span(t, &w, buf + start, n - start, out);
    goto done;
nomem:
    st = nomem();
done:
    free(buf), free(w.syms), free(w.heap);
    return st;
}
