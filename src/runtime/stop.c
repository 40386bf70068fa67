/* stop.c - the stop-string filter (stop.h). */
#include "stop.h"

#include <stdlib.h>
#include <string.h>

pl_status pl_stop_init(pl_stop *s, const char *const *stop, int n_stop, const char *what) {
    memset(s, 0, sizeof *s);
    if (n_stop < 0 || n_stop > PL_STOP_MAX || (n_stop && !stop))
        return pl_fail(PL_ERR_ARG, "%s: at most %d stop strings", what, PL_STOP_MAX);
    for (int i = 0; i < n_stop; i++) {
        size_t l = stop[i] ? strlen(stop[i]) : 0;
        if (l < 1 || l > PL_STOP_LEN)
            return pl_fail(PL_ERR_ARG, "%s: a stop string takes 1 to %d bytes, got %zu", what,
                           PL_STOP_LEN, l);
    }
    s->stop = stop;
    s->n_stop = n_stop;
    return PL_OK;
}

void pl_stop_free(pl_stop *s) {
    free(s->buf);
    free(s->out);
    memset(s, 0, sizeof *s);
}

static bool grow(char **b, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t nc = need * 2;
    char *n = realloc(*b, nc);
    if (!n) return false;
    *b = n, *cap = nc;
    return true;
}

pl_status pl_stop_feed(pl_stop *s, const char *text, size_t len, bool last, const char **out,
                       size_t *n_out, bool *hit) {
    *hit = false;
    *n_out = 0;
    *out = "";
    if (!grow(&s->buf, &s->cap, s->n + len + 1))
        return pl_fail(PL_ERR_NOMEM, "out of memory for the generated text");
    memcpy(s->buf + s->n, text, len);
    size_t n = s->n + len, give = n, keep = 0;
    for (int i = 0; i < s->n_stop; i++) { /* the earliest stop string ends it */
        const char *p = memmem(s->buf, n, s->stop[i], strlen(s->stop[i]));
        if (p && (size_t)(p - s->buf) < give) give = (size_t)(p - s->buf), *hit = true;
    }
    /* else hold back the longest end that begins some stop string */
    for (int i = 0; !*hit && !last && i < s->n_stop; i++) {
        size_t ls = strlen(s->stop[i]);
        for (size_t k = ls - 1 < n ? ls - 1 : n; k > keep; k--)
            if (!memcmp(s->buf + n - k, s->stop[i], k)) {
                keep = k;
                break;
            }
    }
    if (!*hit) give = n - keep;
    if (!grow(&s->out, &s->out_cap, give + 1))
        return pl_fail(PL_ERR_NOMEM, "out of memory for the generated text");
    memcpy(s->out, s->buf, give);
    s->out[give] = 0;
    memmove(s->buf, s->buf + n - keep, keep);
    s->n = *hit ? 0 : keep;
    *out = s->out;
    *n_out = give;
    return PL_OK;
}
