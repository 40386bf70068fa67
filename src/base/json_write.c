/* json_write.c - JSON string escaping (untrusted bytes in, valid JSON out) and UTF-8
 * clipping. */
#include "json_write.h"

#include <math.h>
#include <stdint.h>

/* Length of the well-formed UTF-8 sequence at s (n bytes left), or 0 if it is malformed
 * (bad lead byte, bad continuation, overlong form, surrogate, or past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k;
    unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlongs */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* <= U+10FFFF */
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return k;
}

void pl_json_str(FILE *f, const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c >= 0x80) {
            size_t k = utf8_seq(s + i, len - i);
            if (k)
                fwrite(s + i, 1, k, f);
            else
                fputs("\\ufffd", f);
            i += k ? k : 1;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                fputc((int)c, f);
        }
        i++;
    }
    fputc('"', f);
}

void pl_json_num(FILE *f, double v, int is_f32) {
    if (!isfinite(v))
        fputs("null", f);
    else
        fprintf(f, is_f32 ? "%.9g" : "%.17g", v);
}

size_t pl_utf8_clip(const char *s, size_t len, size_t max) {
    if (len <= max) return len;
    size_t n = max;
    /* step back over continuation bytes to the start of the sequence that was cut */
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80 && max - n < 3) n--;
    return n;
}
