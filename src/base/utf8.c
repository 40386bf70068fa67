/* utf8.c - the strict UTF-8 decoder and encoder of utf8.h. */
#include "utf8.h"

int pl_utf8_decode(const char *s, size_t len, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int n;
    uint32_t v, min;
    if (c >= 0xC2 && c < 0xE0)
        n = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c < 0xF0)
        n = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c < 0xF5)
        n = 4, v = c & 0x07, min = 0x10000;
    else
        goto bad;
    if (len < (size_t)n) goto bad;
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return n;
bad:
    *cp = 0xFFFD;
    return 1;
}

int pl_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

bool pl_utf8_is_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = pl_utf8_valid(s + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}
