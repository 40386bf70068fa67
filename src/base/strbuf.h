/* strbuf.h - a growable byte string for building output (rendered templates, JSON, ...).
 *
 * Appends never fail loudly: on allocation failure (or past max, if set) the buffer stops
 * growing and sets `failed`; check it once at the end. The content is always NUL-terminated. */
#ifndef PL_BASE_STRBUF_H
#define PL_BASE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *s;
    size_t len, cap;
    size_t max; /* 0 = no limit; otherwise appends that would pass it fail */
    bool failed;
} pl_strbuf;

void pl_sb_append(pl_strbuf *b, const char *s, size_t n);
void pl_sb_puts(pl_strbuf *b, const char *s);
void pl_sb_putc(pl_strbuf *b, char c);
void pl_sb_printf(pl_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Take the string (malloc'd, NUL-terminated; "" if empty) and reset the buffer. NULL if the
 * buffer failed. */
char *pl_sb_take(pl_strbuf *b, size_t *len);
void pl_sb_free(pl_strbuf *b);

#endif
