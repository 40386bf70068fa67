/* pretok_fast.c - hand-written matchers for the most used pre-tokenizer expressions (GPT-2's
 * and the Llama 3 / Qwen2 / Qwen3.5 family), an order of magnitude faster than running them
 * through regex.c. Each function returns what the expression would match at cps[i] (the
 * first alternative that matches, as a backtracking engine picks it), or 0 for no match.
 * tests/tokenizer/pretok_test.c checks them against regex.c on random text.
 *
 * f[] holds pl_uni_flags() of each code point. */
#include "pretok_fast.h"

#include "unicode.h"

static inline int cat(const uint8_t *f, size_t i) {
    return f[i] & PL_UC_CAT_MASK;
}
static inline bool space(const uint8_t *f, size_t i) {
    return (f[i] & PL_UC_SPACE) != 0;
}
static inline bool crlf(uint32_t c) {
    return c == '\r' || c == '\n';
}

/* Length of the run from i of code points whose category is in mask (bits 1 << PL_UC_x). */
static size_t run_cats(const uint8_t *f, size_t n, size_t i, unsigned mask) {
    size_t j = i;
    while (j < n && ((mask >> cat(f, j)) & 1)) j++;
    return j - i;
}

/* Length of the run from i of "other" code points: not White_Space, category not in mask. */
static size_t run_other(const uint8_t *f, size_t n, size_t i, unsigned mask) {
    size_t j = i;
    while (j < n && !space(f, j) && !((mask >> cat(f, j)) & 1)) j++;
    return j - i;
}

static size_t run_space(const uint8_t *f, size_t n, size_t i) {
    size_t j = i;
    while (j < n && space(f, j)) j++;
    return j - i;
}

static uint32_t lower_ascii(uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's 't 're 've 'm 'll 'd at i (folding ASCII case when icase). */
static size_t contraction(const uint32_t *c, size_t n, size_t i, bool icase) {
    if (c[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = icase ? lower_ascii(c[i + 1]) : c[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint32_t b = icase ? lower_ascii(c[i + 2]) : c[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S) then \s+ : a whitespace run, leaving its last character to the next piece when
 * something other than whitespace follows (unless the run is a single character). */
static size_t space_tail(const uint8_t *f, size_t n, size_t i, bool plain_fallback) {
    size_t e = run_space(f, n, i);
    if (!e) return 0;
    if (i + e == n || e > 1) return i + e == n ? e : e - 1;
    return plain_fallback ? e : 0;
}

#define M_L (1u << PL_UC_LETTER)
#define M_N (1u << PL_UC_NUMBER)
#define M_M (1u << PL_UC_MARK)

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const uint32_t *c, const uint8_t *f, size_t n, size_t i) {
    size_t k = contraction(c, n, i, false);
    if (k) return k;
    size_t s = c[i] == ' ' && i + 1 < n ? 1 : 0; /* the optional space */
    for (int alt = 0; alt < 3; alt++) {
        /* try with the space, then without (a space itself is none of the three classes) */
        size_t j = i + s, r;
        if (alt == 0)
            r = run_cats(f, n, j, M_L);
        else if (alt == 1)
            r = run_cats(f, n, j, M_N);
        else
            r = run_other(f, n, j, M_L | M_N);
        if (r) return s + r;
    }
    return space_tail(f, n, i, true);
}

/* The Llama 3 family:
 *   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?LETTER+|
 *   \p{N}{1,max_digits}| ?[^\s\p{L}\p{N}...]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * LETTER is \p{L} (Llama 3, Qwen2) or [\p{L}\p{M}] (Qwen3.5, which also keeps marks out of
 * the punctuation run). */
static size_t match_llama3(const uint32_t *c, const uint8_t *f, size_t n, size_t i,
                           size_t max_digits, unsigned letter) {
    size_t k = contraction(c, n, i, true);
    if (k) return k;
    int ci = cat(f, i);
    /* optional prefix: not \r \n, not L, not N */
    if ((letter >> ci) & 1) return run_cats(f, n, i, letter);
    if (!crlf(c[i]) && ci != PL_UC_LETTER && ci != PL_UC_NUMBER && i + 1 < n &&
        ((letter >> cat(f, i + 1)) & 1))
        return 1 + run_cats(f, n, i + 1, letter);
    if (ci == PL_UC_NUMBER) {
        size_t r = run_cats(f, n, i, M_N);
        return r < max_digits ? r : max_digits;
    }
    /* ?[^\s\p{L}\p{N}]+[\r\n]* */
    unsigned other = M_L | M_N | (letter & M_M);
    size_t s = c[i] == ' ' ? 1 : 0;
    size_t r = i + s < n ? run_other(f, n, i + s, other) : 0;
    if (r) {
        size_t e = i + s + r;
        while (e < n && crlf(c[e])) e++;
        return e - i;
    }
    /* \s*[\r\n]+ : the whitespace run up to and including its last \r or \n */
    size_t w = run_space(f, n, i);
    for (size_t j = i + w; j > i; j--)
        if (crlf(c[j - 1])) return j - i;
    return space_tail(f, n, i, true);
}

long pl_pretok_fast_match(pl_pretok_fast kind, const uint32_t *cps, const uint8_t *flags, size_t n,
                          size_t i) {
    if (i >= n) return 0;
    switch (kind) {
    case PL_FAST_GPT2: return (long)match_gpt2(cps, flags, n, i);
    case PL_FAST_LLAMA3: return (long)match_llama3(cps, flags, n, i, 3, M_L);
    case PL_FAST_QWEN2: return (long)match_llama3(cps, flags, n, i, 1, M_L);
    case PL_FAST_QWEN35: return (long)match_llama3(cps, flags, n, i, 1, M_L | M_M);
    case PL_FAST_NONE: break;
    }
    return 0;
}
