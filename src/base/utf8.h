/* utf8.h - decoding and encoding UTF-8, strictly (RFC 3629): overlong forms, surrogates
 * and values above U+10FFFF are invalid. Used wherever untrusted bytes become text. */
#ifndef PL_BASE_UTF8_H
#define PL_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decode one code point from s[0..len) (len >= 1). Returns the bytes consumed (1..4);
 * an invalid or truncated sequence yields U+FFFD and consumes 1 byte. */
int pl_utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Encode cp (<= U+10FFFF) into out; returns 1..4. */
int pl_utf8_encode(uint32_t cp, char *out);
/* The length a sequence starting with byte c claims (1 for ASCII, continuation or bad). */
static inline int pl_utf8_lead_len(unsigned char c) {
    return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
}
/* Length of the valid sequence at s[0..len), 0 if it is not one. */
static inline size_t pl_utf8_valid(const char *s, size_t len) {
    uint32_t cp;
    int k = pl_utf8_decode(s, len, &cp);
    return cp == 0xFFFD && k == 1 ? 0 : (size_t)k;
}

/* True if all of s[0..n) is valid UTF-8. */
bool pl_utf8_is_valid(const char *s, size_t n);

#endif
