/* strbuf.c - the growable byte string of strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(pl_strbuf *b, size_t extra) {
    if (b->failed) return false;
    if (extra > ((size_t)-1) / 4 - b->len || (b->max && b->len + extra > b->max)) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s, b->cap = cap;
    return true;
}

void pl_sb_append(pl_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void pl_sb_puts(pl_strbuf *b, const char *s) {
    pl_sb_append(b, s, strlen(s));
}
void pl_sb_putc(pl_strbuf *b, char c) {
    pl_sb_append(b, &c, 1);
}

void pl_sb_printf(pl_strbuf *b, const char *fmt, ...) {
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        pl_sb_append(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *pl_sb_take(pl_strbuf *b, size_t *len) {
    if (b->failed) {
        pl_sb_free(b);
        return NULL;
    }
    char *s = b->s ? b->s : calloc(1, 1);
    if (len) *len = b->len;
    b->s = NULL, b->len = b->cap = 0;
    return s;
}

void pl_sb_free(pl_strbuf *b) {
    free(b->s);
    b->s = NULL, b->len = b->cap = 0;
    b->failed = false;
}
