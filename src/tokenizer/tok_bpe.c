/* tok_bpe.c - byte-level BPE (tokenizer.ggml.model "gpt2"): the byte <-> code point map,
 * the merge table keyed by id pairs, and encoding of one raw-text fragment.
 *
 * Encoding: optional NFC; split into pieces by the pre-tokenizer; each piece's bytes are
 * mapped to GPT-2's printable code points, start as one symbol per byte, and the adjacent
 * pair with the lowest merge rank (leftmost among equals) is merged until none is left.
 * Symbols that are not tokens fall back to their bytes' tokens. */
#include <stdlib.h>
#include <string.h>

#include "../base/strbuf.h"
#include "tok_internal.h"
#include "unicode.h"

/* ---- GPT-2's bytes_to_unicode ---- */

static bool byte_is_printable(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t pl_tok_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    /* the others take 256, 257, ... in byte order */
    uint32_t n = 0;
    for (int i = 0; i < b; i++) n += !byte_is_printable(i);
    return 256 + n;
}

int pl_tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1; /* 68 bytes are not printable */
    uint32_t n = cp - 256;
    for (int i = 0; i < 256; i++)
        if (!byte_is_printable(i) && n-- == 0) return i;
    return -1;
}

/* ---- merges ---- */

static uint64_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static bool merge_find(const pl_tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank,
                       int32_t *merged) {
    if (!m->keys) return false;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    for (uint32_t i = (uint32_t)pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *rank = m->rank[i];
            *merged = (int32_t)m->merged[i];
            return true;
        }
        if (!m->keys[i]) return false;
    }
}

pl_status pl_tok_bpe_load_merges(pl_tokenizer *t, const pl_gguf_value *merges) {
    if (!merges) return PL_OK; /* a vocabulary without merges tokenizes by whole words/bytes */
    if (merges->type != PL_GGUF_ARRAY || merges->arr.elem_type != PL_GGUF_STRING)
        return pl_fail(PL_ERR_FORMAT, "tokenizer: bad tokenizer.ggml.merges");
    uint64_t n = merges->arr.count, cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (n > (1u << 28)) return pl_fail(PL_ERR_FORMAT, "tokenizer: too many merges");
    pl_tok_pairmap *m = &t->merges;
    m->keys = calloc(cap, sizeof *m->keys);
    m->rank = malloc(cap * sizeof *m->rank);
    m->merged = malloc(cap * sizeof *m->merged);
    if (!m->keys || !m->rank || !m->merged)
        return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    m->mask = (uint32_t)(cap - 1);
    size_t pool_cap = (t->n_text ? t->off[t->n_text - 1] + t->len[t->n_text - 1] : 0) + 1;
    size_t id_cap = (size_t)t->n_text;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (uint64_t r = 0; r < n; r++) {
        pl_gguf_str s = merges->arr.items[r].str;
        /* "left right", split at the first space after the first byte */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue;
        size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        if (ll + rl + 1 > buf_cap) {
            buf_cap = (ll + rl + 1) * 2;
            char *nb = realloc(buf, buf_cap);
            if (!nb) goto nomem;
            buf = nb;
        }
        memcpy(buf, s.ptr, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t a = pl_tok_intern_extra(t, s.ptr, ll, &pool_cap, &id_cap);
        int32_t b = a < 0 ? -1 : pl_tok_intern_extra(t, sp + 1, rl, &pool_cap, &id_cap);
        int32_t ab = b < 0 ? -1 : pl_tok_intern_extra(t, buf, ll + rl, &pool_cap, &id_cap);
        if (ab < 0) goto nomem;
        uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
        uint32_t i = (uint32_t)pair_hash(key) & m->mask;
        while (m->keys[i] && m->keys[i] != key) i = (i + 1) & m->mask;
        if (m->keys[i]) continue; /* a repeated merge keeps its first (lowest) rank */
        m->keys[i] = key;
        m->rank[i] = (uint32_t)r;
        m->merged[i] = (uint32_t)ab;
    }
    free(buf);
    for (int b = 0; b < 256; b++) {
        char c[4];
        int k = pl_utf8_encode(pl_tok_byte_to_cp((uint8_t)b), c);
        t->byte_sym[b] = pl_tok_find(t, c, (size_t)k);
    }
    return PL_OK;
nomem:
    free(buf);
    return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory loading merges");
}

/* ---- encoding ---- */

typedef struct {
    int32_t id;          /* the symbol's text as an id (maybe extra), -1 if it has none */
    int32_t prev, next;  /* neighbours in the word, -1 at the ends */
    uint32_t start, len; /* bytes of the piece */
} bpe_sym;

typedef struct {
    uint32_t rank;
    int32_t left, right, idl, idr, merged;
} bpe_pair;

typedef struct {
    bpe_sym *syms;
    size_t cap_syms;
    bpe_pair *heap;
    size_t n_heap, cap_heap;
    char *bytes, *mapped;
    size_t cap_bytes, cap_mapped;
    uint32_t *cps;
    size_t cap_cps;
} bpe_work;

static bool pair_less(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static bool heap_push(bpe_work *w, bpe_pair p) {
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        bpe_pair *v = realloc(w->heap, cap * sizeof *v);
        if (!v) return false;
        w->heap = v, w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_less(&p, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = p;
    return true;
}

static bpe_pair heap_pop(bpe_work *w) {
    bpe_pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static bool try_pair(const pl_tokenizer *t, bpe_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    int32_t a = w->syms[left].id, b = w->syms[right].id, merged;
    uint32_t rank;
    if (a < 0 || b < 0 || !merge_find(&t->merges, a, b, &rank, &merged)) return true;
    return heap_push(w, (bpe_pair){rank, left, right, a, b, merged});
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *v = realloc(*p, c * elem);
    if (!v) return false;
    *p = v, *cap = c;
    return true;
}

static pl_status nomem(void) {
    return pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
}

/* Emit the tokens of one symbol: its token, or the tokens of its bytes. */
static pl_status emit_sym(const pl_tokenizer *t, const bpe_work *w, const bpe_sym *s,
                          pl_idvec *out) {
    if (s->id >= 0 && s->id < t->n_vocab) return pl_idvec_push(out, s->id) ? PL_OK : nomem();
    for (uint32_t i = 0; i < s->len; i++) {
        int32_t id = pl_tok_byte_fallback(t, (uint8_t)w->bytes[s->start + i]);
        if (id < 0) return PL_ERR_FORMAT;
        if (!pl_idvec_push(out, id)) return nomem();
    }
    return PL_OK;
}

/* BPE of one pre-tokenized piece (UTF-8 bytes in w->bytes[0..n)). */
static pl_status encode_piece(const pl_tokenizer *t, bpe_work *w, size_t n, pl_idvec *out) {
    if (t->ignore_merges) {
        size_t m = 0;
        if (!grow((void **)&w->mapped, &w->cap_mapped, n * 2, 1)) return nomem();
        for (size_t i = 0; i < n; i++)
            m += (size_t)pl_utf8_encode(pl_tok_byte_to_cp((uint8_t)w->bytes[i]), w->mapped + m);
        int32_t id = pl_tok_find(t, w->mapped, m);
        if (id >= 0 && id < t->n_vocab) return pl_idvec_push(out, id) ? PL_OK : nomem();
    }
    if (!grow((void **)&w->syms, &w->cap_syms, n, sizeof *w->syms)) return nomem();
    for (size_t i = 0; i < n; i++)
        w->syms[i] = (bpe_sym){t->byte_sym[(uint8_t)w->bytes[i]], (int32_t)i - 1,
                               i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)i, 1};
    w->n_heap = 0;
    for (size_t i = 1; i < n; i++)
        if (!try_pair(t, w, (int32_t)i - 1, (int32_t)i)) return nomem();
    while (w->n_heap) {
        bpe_pair p = heap_pop(w);
        bpe_sym *l = &w->syms[p.left], *r = &w->syms[p.right];
        /* stale: one side was merged away or changed since the pair was queued */
        if (!l->len || !r->len || l->id != p.idl || r->id != p.idr || l->next != p.right) continue;
        l->id = p.merged;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = p.left;
        if (!try_pair(t, w, l->prev, p.left) || !try_pair(t, w, p.left, l->next)) return nomem();
    }
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        pl_status st = emit_sym(t, w, &w->syms[i], out);
        if (st != PL_OK) return st;
    }
    return PL_OK;
}

/* ---- a cache of pieces already encoded in this call (text repeats words a lot) ---- */

typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len, ids_off, n_ids;
} cache_entry;

typedef struct {
    cache_entry *slots; /* key_len == 0: empty */
    uint32_t mask, used;
    pl_strbuf keys;
    pl_idvec ids;
} piece_cache;

#define CACHE_MAX_PIECE 48

static uint64_t hash_piece(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h | 1;
}

static cache_entry *cache_slot(piece_cache *c, const char *s, size_t n, uint64_t h) {
    for (uint32_t i = (uint32_t)h & c->mask;; i = (i + 1) & c->mask) {
        cache_entry *e = &c->slots[i];
        if (!e->key_len) return e;
        if (e->hash == h && e->key_len == n && memcmp(c->keys.s + e->key_off, s, n) == 0) return e;
    }
}

static void work_free(bpe_work *w) {
    free(w->syms), free(w->heap), free(w->bytes), free(w->mapped), free(w->cps);
}

/* Where the next chunk of text may start: after a newline that stands alone between two
 * characters that are not whitespace (no piece of a line-safe pre-tokenizer spans that
 * point, and none looks past it), at or after `from`; len if there is none. Chunking keeps
 * the working buffers small for long texts. */
static size_t next_cut(const char *s, size_t len, size_t from) {
    for (size_t i = from; i + 1 < len; i++) {
        if (s[i] != '\n' || i == 0) continue;
        uint32_t next, prev = (unsigned char)s[i - 1];
        pl_utf8_decode(s + i + 1, len - i - 1, &next);
        if (prev >= 0x80) { /* back up to the start of the previous character */
            size_t j = i - 1;
            while (j > 0 && i - j < 4 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
            pl_utf8_decode(s + j, i - j, &prev);
        }
        if (!pl_uni_is_space(next) && !pl_uni_is_space(prev)) return i + 1;
    }
    return len;
}

#define CHUNK_BYTES 65536

/* Encode text[0..len) that contains no cut point worth using: decode, split, BPE. */
static pl_status encode_chunk(const pl_tokenizer *t, bpe_work *w, piece_cache *cache,
                              pl_pieces *pieces, pl_regex_scratch *scratch, const char *text,
                              size_t len, pl_idvec *out) {
    /* code points, with invalid bytes as U+FFFD (as llama.cpp does) */
    if (!grow((void **)&w->cps, &w->cap_cps, len + 1, sizeof *w->cps)) goto nomem;
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x80)
            w->cps[n] = c, i++;
        else
            i += (size_t)pl_utf8_decode(text + i, len - i, &w->cps[n]);
    }
    pl_status st = pl_pretok_split(t->pre, scratch, w->cps, n, pieces, !t->slow);
    if (st != PL_OK) return st;
    size_t at = 0;
    for (size_t k = 0; k < pieces->n; k++) {
        size_t m = 0, plen = pieces->len[k];
        if (!grow((void **)&w->bytes, &w->cap_bytes, plen * 4, 1)) goto nomem;
        for (size_t i = 0; i < plen; i++) {
            uint32_t c = w->cps[at + i];
            if (c < 0x80)
                w->bytes[m++] = (char)c;
            else
                m += (size_t)pl_utf8_encode(c, w->bytes + m);
        }
        at += plen;
        if (!m) continue;
        cache_entry *e = NULL;
        uint64_t h = 0;
        if (cache->slots && m <= CACHE_MAX_PIECE) {
            h = hash_piece(w->bytes, m);
            e = cache_slot(cache, w->bytes, m, h);
            if (e->key_len) {
                for (uint32_t i = 0; i < e->n_ids; i++)
                    if (!pl_idvec_push(out, cache->ids.v[e->ids_off + i])) goto nomem;
                continue;
            }
        }
        int64_t before = out->n;
        st = encode_piece(t, w, m, out);
        if (st != PL_OK) return st;
        if (e && cache->used * 2 < cache->mask) {
            uint32_t ids_off = (uint32_t)cache->ids.n;
            for (int64_t i = before; i < out->n; i++)
                if (!pl_idvec_push(&cache->ids, out->v[i])) goto nomem;
            *e = (cache_entry){h, (uint32_t)cache->keys.len, (uint32_t)m, ids_off,
                               (uint32_t)(out->n - before)};
            pl_sb_append(&cache->keys, w->bytes, m);
            if (cache->keys.failed) goto nomem;
            cache->used++;
        }
    }
    return PL_OK;
nomem:
    return pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
}

pl_status pl_tok_bpe_encode(const pl_tokenizer *t, const char *text, size_t len, pl_idvec *out) {
    bpe_work w = {0};
    piece_cache cache = {0};
    pl_pieces pieces = {0};
    pl_regex_scratch scratch = {0};
    char *norm = NULL;
    pl_status st = PL_OK;
    if (t->nfc && !pl_uni_nfc_trivial(text, len)) {
        size_t nlen;
        st = pl_uni_nfc(text, len, &norm, &nlen);
        if (st != PL_OK) return st;
        text = norm, len = nlen;
    }
    /* long texts get a cache of encoded pieces, sized to the text, at most 64k entries */
    if (len >= 4096 && !t->slow) {
        uint32_t cap = 1024;
        while (cap < 65536 && cap < len / 4) cap <<= 1;
        cache.slots = calloc(cap, sizeof *cache.slots);
        cache.mask = cap - 1;
    }
    bool chunked = pl_pretok_line_safe(t->pre) && !t->slow;
    for (size_t at = 0; at < len && st == PL_OK;) {
        size_t end =
            chunked && len - at > CHUNK_BYTES ? next_cut(text, len, at + CHUNK_BYTES) : len;
        st = encode_chunk(t, &w, &cache, &pieces, &scratch, text + at, end - at, out);
        at = end;
    }
    work_free(&w);
    free(cache.slots), free(cache.ids.v);
    pl_sb_free(&cache.keys);
    pl_pieces_free(&pieces);
    pl_regex_scratch_free(&scratch);
    free(norm);
    return st;
}
