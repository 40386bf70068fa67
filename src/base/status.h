/* status.h - how libpooled reports failure.
 *
 * Every fallible function returns pl_status. On failure it has recorded a one-line,
 * human-readable reason with pl_fail(); pl_last_error() returns it. The message lives in
 * thread-local storage so threads never see each other's errors. Library code never
 * exits or aborts on bad input: the command prints the message and exits non-zero. */
#ifndef PL_BASE_STATUS_H
#define PL_BASE_STATUS_H

#include <stdarg.h>

typedef enum {
    PL_OK = 0,
    PL_ERR = 1,        /* generic failure: see pl_last_error() */
    PL_ERR_IO = 2,     /* could not open/read/write/map a file */
    PL_ERR_FORMAT = 3, /* input is malformed, truncated or unsupported */
    PL_ERR_NOMEM = 4,
    PL_ERR_ARG = 5, /* the caller passed something invalid */
} pl_status;

/* Record a reason (printf-style) and return `code`. Use as: return pl_fail(PL_ERR_FORMAT, ...). */
pl_status pl_fail(pl_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last recorded reason on this thread ("" if none). Valid until the next pl_fail. */
const char *pl_last_error(void);

/* Forget the last reason. */
void pl_clear_error(void);

#endif
