/* cmd_info.c - `pooled info FILE [--json] [--full]`: what a GGUF file holds.
 *
 * Prints the header facts (version, alignment, data offset, architecture), every metadata
 * key with its type and value, a table of tensors (name, type, shape, offset, bytes) and
 * totals. Long arrays (the vocabulary) and long strings (the chat template) are shortened
 * unless --full; --json prints the same as one JSON object. Everything printed comes from
 * the file (read through pooled.h's GGUF functions), so names and strings are escaped: a
 * hostile file cannot break the output. */
#include <inttypes.h>
#include <pooled.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "base/json_write.h"
#include "commands.h"

enum {
    TEXT_ARRAY_ITEMS = 8,  /* array elements shown in text mode */
    TEXT_STR_BYTES = 64,   /* bytes of a string value shown in text mode */
    TEXT_ITEM_BYTES = 24,  /* bytes of each string inside an array, text mode */
    JSON_ARRAY_ITEMS = 16, /* array elements kept in --json without --full */
    JSON_STR_BYTES = 1024, /* bytes of a string kept in --json without --full */
};

typedef struct {
    FILE *f;
    bool full;
} out;

static const char *usage_text = "usage: pooled info FILE [--json] [--full]\n"
                                "\n"
                                "Show a GGUF file's header, metadata and tensors.\n"
                                "  --json   print one JSON object instead of text\n"
                                "  --full   do not shorten long arrays and strings\n";

/* ---- helpers shared by both formats ---- */

static uint64_t tensor_elements(const pooled_gguf_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < 4; d++) {
        if (t->ne[d] == 0) return 0;
        n *= (uint64_t)t->ne[d];
    }
    return n;
}

static const char *tensor_type_name(int type) {
    const char *n = pooled_tensor_type_name(type);
    return n ? n : "?";
}

/* A string of the file: its bytes and length (not NUL-terminated). */
typedef struct {
    const char *ptr;
    uint64_t len;
} fstr;

/* The file's header, read once. */
typedef struct {
    const pooled_gguf *g;
    pooled_gguf_header h;
} file;

typedef struct {
    uint64_t params, bytes;
    int64_t per_type[POOLED_TENSOR_TYPES];
} totals;

static totals count_totals(const file *fl) {
    totals s;
    memset(&s, 0, sizeof s);
    for (int64_t i = 0; i < fl->h.n_tensors; i++) {
        pooled_gguf_tensor t;
        if (pooled_gguf_tensor_at(fl->g, i, &t)) continue;
        s.params += tensor_elements(&t);
        s.bytes += t.nbytes;
        if (t.type >= 0 && t.type < POOLED_TENSOR_TYPES) s.per_type[t.type]++;
    }
    return s;
}

/* A name (key or tensor) as is when it is plain printable ASCII, else as a JSON string. */
static void print_name(FILE *f, fstr s, int width) {
    bool plain = s.len > 0;
    for (uint64_t i = 0; i < s.len && plain; i++) plain = s.ptr[i] > 0x20 && s.ptr[i] < 0x7f;
    if (plain)
        fprintf(f, "%-*.*s", width, (int)s.len, s.ptr);
    else
        pl_json_str(f, s.ptr, s.len);
}

/* ---- text ---- */

static void text_scalar(FILE *f, const pooled_gguf_value *v) {
    switch (v->type) {
    case POOLED_GGUF_BOOL: fputs(v->u ? "true" : "false", f); break;
    case POOLED_GGUF_FLOAT32: fprintf(f, "%.7g", v->f); break;
    case POOLED_GGUF_FLOAT64: fprintf(f, "%.15g", v->f); break;
    case POOLED_GGUF_INT8:
    case POOLED_GGUF_INT16:
    case POOLED_GGUF_INT32:
    case POOLED_GGUF_INT64: fprintf(f, "%" PRId64, v->i); break;
    default: fprintf(f, "%" PRIu64, v->u); break;
    }
}

static void text_string(const out *o, fstr s, size_t limit) {
    size_t n = o->full ? (size_t)s.len : pl_utf8_clip(s.ptr, (size_t)s.len, limit);
    pl_json_str(o->f, s.ptr, n);
    if (n < s.len) fprintf(o->f, "... (%" PRIu64 " bytes)", s.len);
}

static void text_value(const out *o, const pooled_gguf_value *v, bool in_array) {
    if (v->type == POOLED_GGUF_STRING) {
        text_string(o, (fstr){v->str, v->len}, in_array ? TEXT_ITEM_BYTES : TEXT_STR_BYTES);
        return;
    }
    if (v->type != POOLED_GGUF_ARRAY) {
        text_scalar(o->f, v);
        return;
    }
    uint64_t n = v->count, shown = n;
    if (!o->full && shown > TEXT_ARRAY_ITEMS) shown = TEXT_ARRAY_ITEMS;
    fputc('[', o->f);
    for (uint64_t i = 0; i < shown; i++) {
        pooled_gguf_value x;
        pooled_gguf_array_at(v, i, &x);
        if (i) fputs(", ", o->f);
        text_value(o, &x, true);
    }
    if (shown < n) fprintf(o->f, ", ... %" PRIu64 " more", n - shown);
    fputc(']', o->f);
}

static void type_label(char *buf, size_t size, const pooled_gguf_value *v) {
    if (v->type == POOLED_GGUF_ARRAY)
        snprintf(buf, size, "arr[%s,%" PRIu64 "]", pooled_gguf_type_name(v->elem_type), v->count);
    else
        snprintf(buf, size, "%s", pooled_gguf_type_name(v->type));
}

/* 1234567 -> "1.23 M" (decimal, as model sizes are quoted) */
static void human_count(char *buf, size_t size, uint64_t n) {
    const char *unit[] = {"", " K", " M", " B", " T"};
    double x = (double)n;
    int u = 0;
    while (x >= 1000 && u < 4) x /= 1000, u++;
    if (u == 0)
        snprintf(buf, size, "%" PRIu64, n);
    else
        snprintf(buf, size, "%.2f%s", x, unit[u]);
}

static void human_bytes(char *buf, size_t size, uint64_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)n;
    int u = 0;
    while (x >= 1024 && u < 4) x /= 1024, u++;
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", n);
    else
        snprintf(buf, size, "%.2f %s", x, unit[u]);
}

/* The file's architecture key as a string, or {NULL, 0}. */
static fstr arch_of(const file *fl) {
    pooled_gguf_value v;
    if (pooled_gguf_find(fl->g, "general.architecture", &v) || v.type != POOLED_GGUF_STRING)
        return (fstr){NULL, 0};
    return (fstr){v.str, v.len};
}

static void print_text(const out *o, const char *path, const file *fl) {
    FILE *f = o->f;
    const pooled_gguf_header *h = &fl->h;
    char buf[64], buf2[64];
    fprintf(f, "file:          %s\n", path);
    fprintf(f, "gguf version:  %u\n", h->version);
    fprintf(f, "alignment:     %u\n", h->alignment);
    fprintf(f, "data offset:   %" PRIu64 "\n", h->data_offset);
    human_bytes(buf, sizeof buf, h->file_size);
    fprintf(f, "file size:     %" PRIu64 " (%s)\n", h->file_size, buf);
    fstr arch = arch_of(fl);
    fputs("architecture:  ", f);
    if (arch.ptr)
        print_name(f, arch, 0);
    else
        fputs("(none)", f);
    fputc('\n', f);

    fprintf(f, "\nmetadata (%" PRId64 " keys):\n", h->n_kv);
    for (int64_t i = 0; i < h->n_kv; i++) {
        fstr key;
        pooled_gguf_value v;
        if (pooled_gguf_kv_at(fl->g, i, &key.ptr, &key.len, &v)) continue;
        fputs("  ", f);
        print_name(f, key, 40);
        type_label(buf, sizeof buf, &v);
        fprintf(f, " %-16s ", buf);
        text_value(o, &v, false);
        fputc('\n', f);
    }

    int64_t nt = h->n_tensors;
    fprintf(f, "\ntensors (%" PRId64 "):\n", nt);
    if (nt)
        fprintf(f, "  %5s %-32s %-7s %-24s %12s %12s\n", "#", "name", "type", "shape", "offset",
                "bytes");
    for (int64_t i = 0; i < nt; i++) {
        pooled_gguf_tensor t;
        if (pooled_gguf_tensor_at(fl->g, i, &t)) continue;
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t.n_dims; d++)
            n +=
                snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "", t.ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        fprintf(f, "  %5" PRId64 " ", i);
        print_name(f, (fstr){t.name, t.name_len}, 32);
        fprintf(f, " %-7s %-24s %12" PRIu64 " %12" PRIu64 "\n", t.type_name, shape, t.offset,
                t.nbytes);
    }

    totals s = count_totals(fl);
    human_count(buf, sizeof buf, s.params);
    human_bytes(buf2, sizeof buf2, s.bytes);
    fprintf(f,
            "\ntotals: %" PRId64 " tensors, %" PRIu64 " parameters (%s), %" PRIu64 " bytes (%s)\n",
            nt, s.params, buf, s.bytes, buf2);
    fputs("types: ", f);
    bool any = false;
    for (int t = 0; t < POOLED_TENSOR_TYPES; t++)
        if (s.per_type[t]) {
            fprintf(f, "%s%s %" PRId64, any ? ", " : "", tensor_type_name(t), s.per_type[t]);
            any = true;
        }
    fputs(any ? "\n" : "(none)\n", f);
}

/* ---- JSON ---- */

static void json_scalar(FILE *f, const pooled_gguf_value *v) {
    switch (v->type) {
    case POOLED_GGUF_BOOL: fputs(v->u ? "true" : "false", f); break;
    case POOLED_GGUF_FLOAT32: pl_json_num(f, v->f, 1); break;
    case POOLED_GGUF_FLOAT64: pl_json_num(f, v->f, 0); break;
    case POOLED_GGUF_INT8:
    case POOLED_GGUF_INT16:
    case POOLED_GGUF_INT32:
    case POOLED_GGUF_INT64: fprintf(f, "%" PRId64, v->i); break;
    default: fprintf(f, "%" PRIu64, v->u); break;
    }
}

/* {"type": "str", "value": "...", ["len": N, "truncated": true]} and likewise for arrays
 * ("elem_type", "count"); nested array elements are such objects too. */
static void json_value(const out *o, const pooled_gguf_value *v) {
    FILE *f = o->f;
    fprintf(f, "{\"type\": \"%s\", ", pooled_gguf_type_name(v->type));
    bool truncated = false;
    if (v->type == POOLED_GGUF_STRING) {
        size_t n = o->full ? (size_t)v->len : pl_utf8_clip(v->str, (size_t)v->len, JSON_STR_BYTES);
        fputs("\"value\": ", f);
        pl_json_str(f, v->str, n);
        if (n < v->len) {
            fprintf(f, ", \"len\": %" PRIu64, v->len);
            truncated = true;
        }
    } else if (v->type == POOLED_GGUF_ARRAY) {
        uint64_t n = v->count, shown = n;
        if (!o->full && shown > JSON_ARRAY_ITEMS) shown = JSON_ARRAY_ITEMS;
        fprintf(f, "\"elem_type\": \"%s\", \"count\": %" PRIu64 ", \"value\": [",
                pooled_gguf_type_name(v->elem_type), n);
        for (uint64_t i = 0; i < shown; i++) {
            pooled_gguf_value x;
            pooled_gguf_array_at(v, i, &x);
            if (i) fputs(", ", f);
            if (x.type == POOLED_GGUF_STRING) {
                size_t k =
                    o->full ? (size_t)x.len : pl_utf8_clip(x.str, (size_t)x.len, JSON_STR_BYTES);
                pl_json_str(f, x.str, k);
                truncated |= k < x.len;
            } else if (x.type == POOLED_GGUF_ARRAY) {
                json_value(o, &x);
            } else {
                json_scalar(f, &x);
            }
        }
        fputc(']', f);
        truncated |= shown < n;
    } else {
        fputs("\"value\": ", f);
        json_scalar(f, v);
    }
    if (truncated) fputs(", \"truncated\": true", f);
    fputc('}', f);
}

static void print_json(const out *o, const char *path, const file *fl) {
    FILE *f = o->f;
    const pooled_gguf_header *h = &fl->h;
    fputs("{\n  \"file\": ", f);
    pl_json_str(f, path, strlen(path));
    fprintf(f,
            ",\n  \"version\": %u,\n  \"alignment\": %u,\n  \"data_offset\": %" PRIu64
            ",\n  \"file_size\": %" PRIu64 ",\n  \"architecture\": ",
            h->version, h->alignment, h->data_offset, h->file_size);
    fstr arch = arch_of(fl);
    if (arch.ptr)
        pl_json_str(f, arch.ptr, arch.len);
    else
        fputs("null", f);

    fputs(",\n  \"metadata\": {", f);
    for (int64_t i = 0; i < h->n_kv; i++) {
        fstr key;
        pooled_gguf_value v;
        if (pooled_gguf_kv_at(fl->g, i, &key.ptr, &key.len, &v)) continue;
        fputs(i ? ",\n    " : "\n    ", f);
        pl_json_str(f, key.ptr, key.len);
        fputs(": ", f);
        json_value(o, &v);
    }
    fputs(h->n_kv ? "\n  },\n  \"tensors\": [" : "},\n  \"tensors\": [", f);
    int64_t nt = h->n_tensors;
    for (int64_t i = 0; i < nt; i++) {
        pooled_gguf_tensor t;
        if (pooled_gguf_tensor_at(fl->g, i, &t)) continue;
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        pl_json_str(f, t.name, t.name_len);
        fprintf(f, ", \"type\": \"%s\", \"shape\": [", t.type_name);
        for (int d = 0; d < t.n_dims; d++) fprintf(f, "%s%" PRId64, d ? ", " : "", t.ne[d]);
        fprintf(f, "], \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", t.offset, t.nbytes);
    }
    totals s = count_totals(fl);
    fprintf(f,
            "%s],\n  \"totals\": {\"tensors\": %" PRId64 ", \"parameters\": %" PRIu64
            ", \"bytes\": %" PRIu64 ", \"types\": {",
            nt ? "\n  " : "", nt, s.params, s.bytes);
    bool any = false;
    for (int t = 0; t < POOLED_TENSOR_TYPES; t++)
        if (s.per_type[t]) {
            fprintf(f, "%s\"%s\": %" PRId64, any ? ", " : "", tensor_type_name(t), s.per_type[t]);
            any = true;
        }
    fputs("}}\n}\n", f);
}
int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool json = false, full = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--full"))
            full = true;
        else if (a[0] == '-' && a[1])
            return die("info: unknown option '%s' (see pooled info --help)", a);
        else if (path)
            return die("info: only one FILE, got '%s' and '%s'", path, a);
        else
            path = a;
    }
    if (!path) return die("info: no FILE given (usage: pooled info FILE [--json] [--full])");

    pooled_gguf *g;
    if (pooled_gguf_open(path, &g)) return die("%s", pooled_last_error());
    file fl = {g, {.size = sizeof fl.h}};
    pooled_gguf_get_header(g, &fl.h);
    out o = {stdout, full};
    if (json)
        print_json(&o, path, &fl);
    else
        print_text(&o, path, &fl);
    pooled_gguf_close(g);
    return 0;
}
