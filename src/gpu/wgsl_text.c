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

void pl_wtext_group_guard(pl_wtext *t, const char *count) {
    pl_wtext_add(t, "  let g = wid.x + wid.y * nwg.x;\n  if (g >= %s) { return; }\n", count);
}

void pl_wtext_args(pl_wtext *t, int binding) {
    pl_wtext_add(t,
                 "struct Args { a0: u32, a1: u32, a2: u32, a3: u32, a4: u32, a5: u32, a6: u32, "
                 "a7: u32 };\n"
                 "@group(0) @binding(%d) var<uniform> args: Args;\n",
                 binding);
}

void pl_wtext_f32(pl_wtext *t, float v) {
    char buf[48];
    snprintf(buf, sizeof buf, "%.9g", (double)v);
    /* WGSL needs a '.' or exponent to read a float */
    pl_wtext_add(t, "%s%s", buf, strpbrk(buf, ".eEn") ? "" : ".0");
}

/* Two levels without a loop around a barrier: lavapipe (llvmpipe) compiles each barrier in
 * a loop into coroutine splits, which made a 6-step tree cost seconds of LLVM time per
 * shader; a GPU does the short serial sums just as fast. */
void pl_wtext_reduce(pl_wtext *t, unsigned threads, unsigned copies, int max) {
    unsigned parts = threads < 8 ? threads : 8, run = threads / parts;
    pl_wtext_add(t,
                 "  workgroupBarrier();\n"
                 "  for (var e = lid; e < %uu; e += %uu) {\n"
                 "    let base = (e / %uu) * %uu + (e %% %uu) * %uu;\n"
                 "    var acc = red[base];\n"
                 "    for (var j = 1u; j < %uu; j++) { acc = %s; }\n"
                 "    red2[e] = acc;\n"
                 "  }\n"
                 "  workgroupBarrier();\n",
                 copies * parts, threads, parts, threads, parts, run, run,
                 max ? "max(acc, red[base + j])" : "acc + red[base + j]");
    pl_wtext_add(t,
                 "  for (var c = lid; c < %uu; c += %uu) {\n"
                 "    var acc = red2[c * %uu];\n"
                 "    for (var j = 1u; j < %uu; j++) { acc = %s; }\n"
                 "    red[c * %uu] = acc;\n"
                 "  }\n"
                 "  workgroupBarrier();\n",
                 copies, threads, parts, parts,
                 max ? "max(acc, red2[c * PARTS + j])" : "acc + red2[c * PARTS + j]", threads);
}

void pl_wtext_reduce_decl(pl_wtext *t, unsigned threads, unsigned copies) {
    unsigned parts = threads < 8 ? threads : 8;
    pl_wtext_add(t, "const PARTS = %uu;\nvar<workgroup> red2: array<f32, %u>;\n", parts,
                 copies * parts);
}
