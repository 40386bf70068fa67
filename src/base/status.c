/* status.c - the thread-local "last error" message behind pl_fail(). */
#include "status.h"

#include <stdio.h>

static _Thread_local char last_error[512];

pl_status pl_fail(pl_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *pl_last_error(void) { return last_error; }

void pl_clear_error(void) { last_error[0] = 0; }
