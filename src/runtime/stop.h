/* stop.h - stop strings over streamed text: text is passed on as soon as it cannot be the
 * start of a stop string, held back while it might be, and cut where one appears (the
 * stop string and everything after it are dropped). */
#ifndef PL_RUNTIME_STOP_H
#define PL_RUNTIME_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/status.h"

#define PL_STOP_MAX 16  /* stop strings at most */
#define PL_STOP_LEN 256 /* bytes of one stop string at most */

typedef struct {
    const char *const *stop; /* borrowed: they must outlive the filter */
    int n_stop;
    char *buf; /* the held text, then the new text */
    size_t n, cap;
    char *out; /* the text handed out by the last call, NUL-terminated */
    size_t out_cap;
} pl_stop;

/* Check the strings (at most PL_STOP_MAX, each 1 to PL_STOP_LEN bytes; what names the
 * option in the message) and start a filter over them. */
pl_status pl_stop_init(pl_stop *s, const char *const *stop, int n_stop, const char *what);
void pl_stop_free(pl_stop *s);

/* Feed len bytes of text; *out (NUL-terminated, valid until the next call) and *n_out get
 * the text that is now final. *hit: a stop string appeared (out is the text before it;
 * feed no more). last: the end of the stream, nothing is held back. */
pl_status pl_stop_feed(pl_stop *s, const char *text, size_t len, bool last, const char **out,
                       size_t *n_out, bool *hit);

#endif
