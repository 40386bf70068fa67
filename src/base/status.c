/* status.c - the thread-local "last error" message behind pl_fail(). */
#include "status.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

pl_status pl_fail(pl_status code, const char *fmt, ...) {
    /* through a copy: callers often pass pl_last_error() itself ("%s: %s", name, it), and
     * vsnprintf into the buffer it reads from garbles the message */
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return code;
}

const char *pl_last_error(void) {
    return last_error;
}

void pl_clear_error(void) {
    last_error[0] = 0;
}
