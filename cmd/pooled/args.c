/* args.c - option parsing helpers shared by the subcommands. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int die(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* keep it to one line whatever the message holds */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "pooled: %s\n", msg);
    return 1;
}

static int out_errno; /* the first write error on stdout */

/* The reason a write to stdout failed when stdio did not keep it (a write inside printf, or
 * by a library that shares our stdout): a write of no bytes gives EBADF for a closed
 * descriptor and ENOSPC for a full device; 0 when it cannot tell. */
static int out_probe_errno(void) {
    errno = 0;
    return write(1, "", 0) < 0 ? errno : 0;
}

bool out_flush(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !out_errno) out_errno = errno ? errno : -1;
    if (ferror(stdout) && !out_errno) out_errno = -1;
    if (out_errno == -1) {
        int e = out_probe_errno();
        if (e) out_errno = e;
    }
    return !out_errno;
}

int out_close(int rc) {
    if (out_flush() || rc) return rc;
    if (out_errno < 0) return die("writing standard output failed");
    return die("writing standard output: %s", strerror(out_errno));
}

bool arg_take(int argc, char **argv, int *i, const char *name, const char *alias,
              const char **value, bool *err) {
    const char *a = argv[*i];
    size_t nl = strlen(name);
    /* --name=value */
    if (strncmp(a, name, nl) == 0 && a[nl] == '=' && name[0] == '-' && name[1] == '-') {
        *value = a + nl + 1;
        return true;
    }
    if (strcmp(a, name) != 0 && !(alias && strcmp(a, alias) == 0)) return false;
    if (*i + 1 >= argc) {
        die("option %s needs a value", a);
        *err = true;
        return true;
    }
    *value = argv[++*i];
    return true;
}

bool arg_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* the whole string: no junk after the number, and none before (strtoll skips spaces) */
    if (errno || end == s || *end || isspace((unsigned char)*s) || v < lo || v > hi) {
        die("%s: expected an integer in [%lld, %lld], got '%s'", opt, (long long)lo, (long long)hi,
            s);
        return false;
    }
    *out = v;
    return true;
}

bool arg_float(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || isspace((unsigned char)*s) || !isfinite(v) || v < lo ||
        v > hi) {
        die("%s: expected a number in [%g, %g], got '%s'", opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

int die_path(const char *path, const char *msg) {
    size_t n = strlen(path);
    if (!strncmp(msg, path, n) && msg[n] == ':') return die("%s", msg); /* it has the path */
    return die("%s: %s", path, msg);
}
