/* unicode.c - UTF-8 coding, category look-up, lower-casing and canonical normalisation
 * over the generated tables of unicode_data.c. */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

#include "unicode_tables.h"

/* Hangul syllables compose and decompose algorithmically (Unicode ch. 3.12). */
enum {
    HANGUL_S = 0xAC00,
    HANGUL_L = 0x1100,
    HANGUL_V = 0x1161,
    HANGUL_T = 0x11A7,
    HANGUL_LC = 19,
    HANGUL_VC = 21,
    HANGUL_TC = 28,
    HANGUL_N = 21 * 28,
    HANGUL_SC = 19 * 21 * 28,
};

uint8_t pl_uni_flags(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    return pl_unitab_stage2[(size_t)pl_unitab_stage1[cp >> 8] * 256 + (cp & 255)];
}

const char *pl_uni_version_string(void) {
    return pl_unitab_version;
}

/* Binary search in a table of rows whose first column is sorted. */
static int find_row(const uint32_t (*rows)[2], int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (rows[mid][0] == cp) return mid;
        if (rows[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

uint32_t pl_uni_tolower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    int i = find_row(pl_unitab_lower, pl_unitab_n_lower, cp);
    return i < 0 ? cp : pl_unitab_lower[i][1];
}

uint32_t pl_uni_toupper(uint32_t cp) {
    if (cp < 0x80) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    int i = find_row(pl_unitab_upper, pl_unitab_n_upper, cp);
    return i < 0 ? cp : pl_unitab_upper[i][1];
}

int pl_uni_toupper_full(uint32_t cp, uint32_t out[3]) {
    if (cp < 0xDF) return 0;
    int lo = 0, hi = pl_unitab_n_upper_full - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const uint32_t *r = pl_unitab_upper_full[mid];
        if (r[0] == cp) {
            int n = 0;
            for (int k = 1; k < 4 && r[k]; k++) out[n++] = r[k];
            return n;
        }
        if (r[0] < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

static int find_decomp(uint32_t cp) {
    int lo = 0, hi = pl_unitab_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (pl_unitab_decomp[mid][0] == cp) return mid;
        if (pl_unitab_decomp[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

uint32_t pl_uni_nfd_first(uint32_t cp) {
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SC) return HANGUL_L + (cp - HANGUL_S) / HANGUL_N;
    for (int guard = 0; guard < 8; guard++) {
        int i = find_decomp(cp);
        if (i < 0) break;
        cp = pl_unitab_decomp[i][1];
    }
    return cp;
}

int pl_uni_ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    int lo = 0, hi = pl_unitab_n_ccc - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < pl_unitab_ccc[mid][0])
            hi = mid - 1;
        else if (cp > pl_unitab_ccc[mid][1])
            lo = mid + 1;
        else
            return (int)pl_unitab_ccc[mid][2];
    }
    return 0;
}

/* ---- NFC ---- */

bool pl_uni_nfc_trivial(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        /* nothing below U+0300 (lead bytes below 0xCC) can change */
        if ((unsigned char)s[i] < 0xCC) {
            i++;
            continue;
        }
        uint32_t cp;
        i += (size_t)pl_utf8_decode(s + i, len - i, &cp);
        if (pl_uni_flags(cp) & PL_UC_NFC_MAYBE) return false;
    }
    return true;
}

typedef struct {
    uint32_t *v;
    size_t n, cap;
} cpbuf;

static bool cp_push(cpbuf *b, uint32_t cp) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        uint32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v) return false;
        b->v = v, b->cap = cap;
    }
    b->v[b->n++] = cp;
    return true;
}

/* Append the full canonical decomposition of cp. */
static bool decompose(cpbuf *b, uint32_t cp, int depth) {
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SC) {
        uint32_t si = cp - HANGUL_S, t = si % HANGUL_TC;
        if (!cp_push(b, HANGUL_L + si / HANGUL_N)) return false;
        if (!cp_push(b, HANGUL_V + (si % HANGUL_N) / HANGUL_TC)) return false;
        return t ? cp_push(b, HANGUL_T + t) : true;
    }
    int i = cp >= 0xC0 && depth < 8 ? find_decomp(cp) : -1;
    if (i < 0) return cp_push(b, cp);
    if (!decompose(b, pl_unitab_decomp[i][1], depth + 1)) return false;
    return pl_unitab_decomp[i][2] ? decompose(b, pl_unitab_decomp[i][2], depth + 1) : true;
}

/* The primary composite of a + b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LC && b >= HANGUL_V && b < HANGUL_V + HANGUL_VC)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VC + (b - HANGUL_V)) * HANGUL_TC;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SC && (a - HANGUL_S) % HANGUL_TC == 0 &&
        b > HANGUL_T && b < HANGUL_T + HANGUL_TC)
        return a + (b - HANGUL_T);
    int lo = 0, hi = pl_unitab_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const uint32_t *r = pl_unitab_comp[mid];
        if (r[0] == a && r[1] == b) return r[2];
        if (r[0] < a || (r[0] == a && r[1] < b))
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

pl_status pl_uni_nfc(const char *s, size_t len, char **out, size_t *out_len) {
    cpbuf b = {0};
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += (size_t)pl_utf8_decode(s + i, len - i, &cp);
        if (!decompose(&b, cp, 0)) goto nomem;
    }
    /* canonical ordering: stable insertion sort of each run of non-starters */
    for (size_t i = 1; i < b.n; i++) {
        int c = pl_uni_ccc(b.v[i]);
        if (c == 0) continue;
        size_t j = i;
        while (j > 0 && pl_uni_ccc(b.v[j - 1]) > c) {
            uint32_t t = b.v[j - 1];
            b.v[j - 1] = b.v[j], b.v[j] = t;
            j--;
        }
    }
    /* canonical composition, in place */
    size_t n = 0;
    long starter = -1;
    for (size_t i = 0; i < b.n; i++) {
        uint32_t c = b.v[i];
        int cc = pl_uni_ccc(c);
        if (starter >= 0) {
            bool adjacent = (size_t)starter == n - 1;
            if (adjacent || pl_uni_ccc(b.v[n - 1]) < cc) {
                uint32_t m = compose(b.v[starter], c);
                if (m) {
                    b.v[starter] = m;
                    continue;
                }
            }
        }
        if (cc == 0) starter = (long)n;
        b.v[n++] = c;
    }
    char *o = malloc(n * 4 + 1);
    if (!o) goto nomem;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)pl_utf8_encode(b.v[i], o + k);
    o[k] = 0;
    free(b.v);
    *out = o;
    *out_len = k;
    return PL_OK;
nomem:
    free(b.v);
    return pl_fail(PL_ERR_NOMEM, "out of memory normalising text");
}
