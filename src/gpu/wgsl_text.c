/* wgsl_text.c - the text buffer behind the WGSL generators and their shared snippets. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wgsl_text.h"

void pl_wtext_add(pl_wtext *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->n;
        int w = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? room : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->oom = 1;
            return;
        }
        if (t->s && (size_t)w < room) {
            t->n += (size_t)w;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->n + (size_t)w + 1) cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->oom = 1;
            return;
        }
        t->s = s, t->cap = cap;
    }
}

pl_status pl_wtext_finish(pl_wtext *t, char **out) {
    *out = NULL;
    if (t->oom || !t->s) {
        pl_wtext_drop(t);
        return pl_fail(PL_ERR_NOMEM, "out of memory writing WGSL");
    }
    *out = t->s;
    t->s = NULL;
    return PL_OK;
}

void pl_wtext_drop(pl_wtext *t) {
    free(t->s);
    memset(t, 0, sizeof *t);
}

void pl_wtext_group_index(pl_wtext *t, unsigned groups) {
    pl_wtext_add(t,
                 "  let g = wid.x + wid.y * nwg.x;\n"
                 "  if (g >= %uu) { return; }\n",
                 groups);
}

void pl_wtext_f32(pl_wtext *t, float v) {
    char buf[48];
    snprintf(buf, sizeof buf, "%.9g", (double)v);
    /* WGSL needs a '.' or exponent to read a float */
    pl_wtext_add(t, "%s%s", buf, strpbrk(buf, ".eEn") ? "" : ".0");
}

void pl_wtext_tree_sum(pl_wtext *t, unsigned threads, unsigned copies) {
    pl_wtext_add(t, "  workgroupBarrier();\n");
    pl_wtext_add(t, "  for (var s = %uu; s > 0u; s >>= 1u) {\n    if (lid < s) {\n", threads / 2);
    for (unsigned c = 0; c < copies; c++)
        pl_wtext_add(t, "      red[%uu + lid] += red[%uu + lid + s];\n", c * threads, c * threads);
    pl_wtext_add(t, "    }\n    workgroupBarrier();\n  }\n");
}
