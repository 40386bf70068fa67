/* tok_decode.c - ids back to text: one token's bytes (pl_tok_piece), a whole sequence
 * (pl_tok_decode), and the streaming detokeniser that only ever hands out whole UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "unicode.h"

/* Copy n bytes into buf as far as cap allows; return n. */
static int64_t put(char *buf, size_t cap, size_t at, const char *s, size_t n) {
    if (at < cap) memcpy(buf + at, s, n < cap - at ? n : cap - at);
    return (int64_t)n;
}

static int hexv(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

int64_t pl_tok_piece(const pl_tokenizer *t, int32_t id, bool show_special, char *buf, size_t cap) {
    if (id < 0 || id >= t->n_vocab) return -1;
    uint32_t len;
    const char *s = pl_tok_text(t, id, &len);
    switch (t->type[id]) {
    case PL_TT_CONTROL:
    case PL_TT_UNKNOWN: return show_special ? put(buf, cap, 0, s, len) : 0;
    case PL_TT_USER_DEFINED: return put(buf, cap, 0, s, len);
    case PL_TT_BYTE:
        if (len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && hexv(s[3]) >= 0 &&
            hexv(s[4]) >= 0) {
            char b = (char)(hexv(s[3]) * 16 + hexv(s[4]));
            return put(buf, cap, 0, &b, 1);
        }
        return put(buf, cap, 0, s, len);
    case PL_TT_NORMAL:
    case PL_TT_UNDEFINED: break;
    default: return 0; /* unused ids say nothing */
    }
    size_t n = 0;
    if (t->kind == PL_TOK_BPE) {
        /* undo the byte-to-code-point mapping; code points outside it stay as they are */
        for (uint32_t i = 0; i < len;) {
            uint32_t cp;
            int k = pl_utf8_decode(s + i, len - i, &cp);
            int b = pl_tok_cp_to_byte(cp);
            if (b >= 0) {
                char c = (char)b;
                n += (size_t)put(buf, cap, n, &c, 1);
            } else {
                n += (size_t)put(buf, cap, n, s + i, (size_t)k);
            }
            i += (uint32_t)k;
        }
        return (int64_t)n;
    }
    /* SPM and WordPiece: U+2581 stands for a space */
    for (uint32_t i = 0; i < len;) {
        if (len - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            n += (size_t)put(buf, cap, n, " ", 1);
            i += 3;
        } else {
            n += (size_t)put(buf, cap, n, s + i, 1);
            i++;
        }
    }
    return (int64_t)n;
}

pl_status pl_tok_piece_str(const pl_tokenizer *t, int32_t id, bool show_special, char **out,
                           size_t *len) {
    *out = NULL;
    int64_t k = pl_tok_piece(t, id, show_special, NULL, 0);
    if (k < 0) return pl_fail(PL_ERR_ARG, "invalid token id %d", (int)id);
    char *s = malloc((size_t)k + 1);
    if (!s) return pl_fail(PL_ERR_NOMEM, "out of memory");
    pl_tok_piece(t, id, show_special, s, (size_t)k);
    s[k] = 0;
    *out = s;
    if (len) *len = (size_t)k;
    return PL_OK;
}

pl_status pl_tok_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, bool show_special,
                        char **out, size_t *out_len) {
    size_t cap = 64, used = 0;
    char *s = malloc(cap);
    if (!s) return pl_fail(PL_ERR_NOMEM, "out of memory");
    bool first_text = true;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = pl_tok_piece(t, ids[i], show_special, s + used, cap - used - 1);
        if (k < 0) {
            free(s);
            return pl_fail(PL_ERR_ARG, "detokenize: invalid token id %d", (int)ids[i]);
        }
        if ((size_t)k >= cap - used - 1) {
            while ((size_t)k >= cap - used - 1) cap *= 2;
            char *p = realloc(s, cap);
            if (!p) {
                free(s);
                return pl_fail(PL_ERR_NOMEM, "out of memory");
            }
            s = p;
            pl_tok_piece(t, ids[i], show_special, s + used, cap - used - 1);
        }
        /* the space SPM put before the text is not part of it */
        if (first_text && k > 0 && t->add_space_prefix && t->type[ids[i]] == PL_TT_NORMAL &&
            s[used] == ' ') {
            memmove(s + used, s + used + 1, (size_t)k - 1);
            k--;
        }
        if (k > 0 || t->type[ids[i]] == PL_TT_NORMAL) first_text = false;
        used += (size_t)k;
    }
    s[used] = 0;
    *out = s;
    if (out_len) *out_len = used;
    return PL_OK;
}

/* ---- streaming ---- */

struct pl_tok_stream {
    const pl_tokenizer *t;
    bool show_special;
    char *held; /* bytes not yet handed out (an incomplete sequence) */
    size_t n_held, cap_held;
    char *out;
    size_t cap_out;
};

pl_tok_stream *pl_tok_stream_new(const pl_tokenizer *t, bool show_special) {
    pl_tok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    s->show_special = show_special;
    return s;
}

void pl_tok_stream_free(pl_tok_stream *s) {
    if (!s) return;
    free(s->held), free(s->out), free(s);
}

static bool reserve(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *v = realloc(*p, c);
    if (!v) return false;
    *p = v, *cap = c;
    return true;
}

/* True if s[0..n) (n < the length its first byte claims) could still become a valid
 * sequence when more bytes arrive. */
static bool incomplete_prefix(const unsigned char *s, size_t n) {
    if (s[0] < 0xC2 || s[0] > 0xF4 || n >= (size_t)pl_utf8_lead_len(s[0])) return false;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return false;
    return true;
}

/* Move the whole sequences of held to out (invalid bytes as U+FFFD); keep an incomplete tail
 * unless flushing. */
static const char *drain(pl_tok_stream *s, bool flush) {
    if (!reserve(&s->out, &s->cap_out, s->n_held * 3 + 1)) return "";
    size_t o = 0, i = 0;
    const unsigned char *h = (const unsigned char *)s->held;
    while (i < s->n_held) {
        size_t left = s->n_held - i;
        if (!flush && incomplete_prefix(h + i, left)) break;
        uint32_t cp;
        int k = pl_utf8_decode(s->held + i, left, &cp);
        if (cp == 0xFFFD && k == 1)
            o += (size_t)pl_utf8_encode(0xFFFD, s->out + o);
        else
            memcpy(s->out + o, s->held + i, (size_t)k), o += (size_t)k;
        i += (size_t)k;
    }
    if (s->n_held > i) memmove(s->held, s->held + i, s->n_held - i);
    s->n_held -= i;
    s->out[o] = 0;
    return s->out;
}

const char *pl_tok_stream_push(pl_tok_stream *s, int32_t id) {
    int64_t k = pl_tok_piece(s->t, id, s->show_special, NULL, 0);
    if (k <= 0) return drain(s, false);
    if (!reserve(&s->held, &s->cap_held, s->n_held + (size_t)k)) return "";
    pl_tok_piece(s->t, id, s->show_special, s->held + s->n_held, (size_t)k);
    s->n_held += (size_t)k;
    return drain(s, false);
}

const char *pl_tok_stream_flush(pl_tok_stream *s) {
    return drain(s, true);
}
