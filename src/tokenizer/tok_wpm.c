/* tok_wpm.c - WordPiece (tokenizer.ggml.model "bert"), as llama.cpp runs it on the GGUF
 * form of BERT vocabularies (word-initial pieces carry U+2581, continuations have no "##").
 *
 * Pre-processing: each code point is reduced to the first code point of its canonical
 * decomposition (which drops accents of precomposed letters) and lower-cased; White_Space
 * separates words; controls, NUL and U+FFFD vanish; punctuation, ASCII symbols and CJK
 * ideographs are words of their own. Each word, prefixed with U+2581, is covered greedily
 * by the longest matching tokens; a word that cannot be covered becomes [UNK]. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "unicode.h"

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Cover word (already prefixed with U+2581) greedily, longest match first; false when out
 * of memory or when the word cannot be covered and there is no [UNK] (the error is set). */
static bool encode_word(const pl_tokenizer *t, const char *word, size_t n, pl_idvec *out) {
    int64_t mark = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > t->max_len ? i + t->max_len : n;
        int32_t id = -1;
        for (; j > i; j--) {
            id = pl_tok_find(t, word + i, j - i);
            if (id >= 0 && id < t->n_vocab) break;
        }
        if (j == i) { /* no token covers position i: the whole word is unknown */
            out->n = mark;
            break;
        }
        if (!pl_idvec_push(out, id)) return !pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
        i = j;
    }
    if (out->n > mark) return true;
    if (t->sp.unk < 0)
        return !pl_fail(PL_ERR_FORMAT, "tokenize: a word has no WordPiece tokens and the "
                                       "vocabulary has no unknown token");
    if (!pl_idvec_push(out, t->sp.unk)) return !pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
    return true;
}

pl_status pl_tok_wpm_encode(const pl_tokenizer *t, const char *text, size_t len, pl_idvec *out) {
    char *word = malloc(len * 4 + 8);
    if (!word) return pl_fail(PL_ERR_NOMEM, "out of memory tokenizing");
    size_t wn = 3;
    memcpy(word, "\xe2\x96\x81", 3);
    bool ok = true;
    for (size_t i = 0; i < len && ok;) {
        uint32_t cp;
        i += (size_t)pl_utf8_decode(text + i, len - i, &cp);
        cp = pl_uni_nfd_first(cp);
        uint8_t f = pl_uni_flags(cp);
        int cat = f & PL_UC_CAT_MASK;
        if (f & PL_UC_SPACE) {
            if (wn > 3) ok = encode_word(t, word, wn, out);
            wn = 3;
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || cat == PL_UC_OTHER) continue;
        char enc[4];
        int el = pl_utf8_encode(pl_uni_tolower(cp), enc);
        if (cat == PL_UC_PUNCT || (cp < 0x7F && cat == PL_UC_SYMBOL) || is_cjk(cp)) {
            if (wn > 3) ok = encode_word(t, word, wn, out);
            memcpy(word + 3, enc, (size_t)el);
            if (ok) ok = encode_word(t, word, 3 + (size_t)el, out);
            wn = 3;
            continue;
        }
        memcpy(word + wn, enc, (size_t)el);
        wn += (size_t)el;
    }
    if (ok && wn > 3) ok = encode_word(t, word, wn, out);
    free(word);
    return ok ? PL_OK : PL_ERR;
}
