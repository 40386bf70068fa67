/* gguf_read.c - parse a GGUF (v2, v3) held in memory, defensively.
 *
 * The parser walks a cursor over the buffer; every read checks the bytes left first, and
 * every count is bounded by what the remaining bytes could possibly hold. Memory is only
 * spent on entries that are really there (arrays of strings are walked before their item
 * array is allocated; the key and tensor tables grow as they fill), duplicate names are
 * found with a hash set, and sizes are computed without overflow. So a truncated or hostile
 * file costs O(file size) time and memory and gives one line of error. Values point into
 * the buffer (no copies of strings or tensor data). */
#include <stdlib.h>
#include <string.h>

#include "gguf_internal.h"
#include "quant.h"

#define MAX_NESTING  8     /* arrays of arrays of ... deeper than this are refused */
#define MAX_KEY_LEN  65536 /* keys are short names; anything longer is corruption */
#define MAX_NAME_LEN 4096  /* tensor names likewise (ggml itself allows 63 bytes) */

typedef struct {
    const uint8_t *p, *end, *base;
    pl_gguf *g; /* owns the arrays of items we allocate */
} cursor;

/* A name from the file made fit for a one-line message: at most 64 bytes, control
 * characters replaced (a key may hold a newline). */
typedef struct {
    char s[72];
} shown;

static shown show(pl_gguf_str name) {
    shown out;
    size_t n = name.len < 64 ? (size_t)name.len : 64;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name.ptr[i];
        out.s[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    strcpy(out.s + n, name.len > n ? "..." : "");
    return out;
}

static uint64_t cur_pos(const cursor *c) {
    return (uint64_t)(c->p - c->base);
}

static pl_status need(cursor *c, uint64_t n, const char *what) {
    if ((uint64_t)(c->end - c->p) < n)
        return pl_fail(PL_ERR_FORMAT, "gguf: truncated file: %s at byte %llu needs %llu bytes",
                       what, (unsigned long long)cur_pos(c), (unsigned long long)n);
    return PL_OK;
}

static pl_status rd_u32(cursor *c, uint32_t *v, const char *what) {
    if (need(c, 4, what)) return PL_ERR_FORMAT;
    memcpy(v, c->p, 4);
    c->p += 4;
    return PL_OK;
}

static pl_status rd_u64(cursor *c, uint64_t *v, const char *what) {
    if (need(c, 8, what)) return PL_ERR_FORMAT;
    memcpy(v, c->p, 8);
    c->p += 8;
    return PL_OK;
}

static pl_status rd_str(cursor *c, pl_gguf_str *s, const char *what) {
    uint64_t len;
    if (rd_u64(c, &len, what)) return PL_ERR_FORMAT;
    if (need(c, len, what)) return PL_ERR_FORMAT;
    s->ptr = (const char *)c->p;
    s->len = len;
    c->p += len;
    return PL_OK;
}

size_t pl_gguf_type_size(uint32_t t) {
    switch (t) {
    case PL_GGUF_UINT8:
    case PL_GGUF_INT8:
    case PL_GGUF_BOOL: return 1;
    case PL_GGUF_UINT16:
    case PL_GGUF_INT16: return 2;
    case PL_GGUF_UINT32:
    case PL_GGUF_INT32:
    case PL_GGUF_FLOAT32: return 4;
    case PL_GGUF_UINT64:
    case PL_GGUF_INT64:
    case PL_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Widen a scalar of type t stored at p into v. */
void pl_gguf_load_scalar(pl_gguf_value *v, uint32_t t, const void *p) {
    v->type = t;
    switch (t) {
    case PL_GGUF_UINT8:
    case PL_GGUF_BOOL: v->u = *(const uint8_t *)p; break;
    case PL_GGUF_INT8: v->i = *(const int8_t *)p; break;
    case PL_GGUF_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->u = x;
        break;
    }
    case PL_GGUF_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->i = x;
        break;
    }
    case PL_GGUF_UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v->u = x;
        break;
    }
    case PL_GGUF_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->i = x;
        break;
    }
    case PL_GGUF_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        v->f = x;
        break;
    }
    case PL_GGUF_UINT64: memcpy(&v->u, p, 8); break;
    case PL_GGUF_INT64: memcpy(&v->i, p, 8); break;
    case PL_GGUF_FLOAT64: memcpy(&v->f, p, 8); break;
    default: break;
    }
}

/* Read an array's element type and count, and refuse counts the remaining bytes could not
 * hold (a string element takes at least 8 bytes, a nested array at least 12) and nesting
 * deeper than MAX_NESTING. */
static pl_status rd_array_head(cursor *c, uint32_t *et, uint64_t *n, int depth) {
    if (rd_u32(c, et, "array element type")) return PL_ERR_FORMAT;
    if (rd_u64(c, n, "array length")) return PL_ERR_FORMAT;
    if (*et >= PL_GGUF_TYPE_COUNT)
        return pl_fail(PL_ERR_FORMAT, "gguf: bad array element type %u at byte %llu", *et,
                       (unsigned long long)cur_pos(c));
    size_t es = pl_gguf_type_size(*et);
    if (!es && depth >= MAX_NESTING)
        return pl_fail(PL_ERR_FORMAT, "gguf: arrays nested too deeply");
    uint64_t min_elem = es ? es : *et == PL_GGUF_STRING ? 8 : 12;
    if (*n > (uint64_t)(c->end - c->p) / min_elem)
        return pl_fail(PL_ERR_FORMAT, "gguf: array of %llu elements overruns the file",
                       (unsigned long long)*n);
    return PL_OK;
}

/* Walk over a value without storing it: checks that the whole of it is in the buffer
 * before rd_array allocates anything for it. */
static pl_status skip_value(cursor *c, uint32_t type, int depth) {
    if (type == PL_GGUF_STRING) {
        pl_gguf_str s;
        return rd_str(c, &s, "string value");
    }
    if (type == PL_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (rd_array_head(c, &et, &n, depth)) return PL_ERR_FORMAT;
        size_t es = pl_gguf_type_size(et);
        if (es) {
            c->p += n * es; /* rd_array_head checked it fits */
            return PL_OK;
        }
        for (uint64_t i = 0; i < n; i++)
            if (skip_value(c, et, depth + 1)) return PL_ERR_FORMAT;
        return PL_OK;
    }
    size_t es = pl_gguf_type_size(type);
    if (!es)
        return pl_fail(PL_ERR_FORMAT, "gguf: bad value type %u at byte %llu", type,
                       (unsigned long long)cur_pos(c));
    if (need(c, es, "scalar value")) return PL_ERR_FORMAT;
    c->p += es;
    return PL_OK;
}

static pl_status rd_value(cursor *c, uint32_t type, pl_gguf_value *v, int depth);

static pl_status rd_array(cursor *c, pl_gguf_value *v, int depth) {
    uint32_t et;
    uint64_t n;
    if (rd_array_head(c, &et, &n, depth)) return PL_ERR_FORMAT;
    v->type = PL_GGUF_ARRAY;
    v->arr.elem_type = et;
    v->arr.count = n;
    v->arr.data = NULL;
    v->arr.items = NULL;
    size_t es = pl_gguf_type_size(et);
    if (es) {
        v->arr.data = c->p;
        c->p += n * es;
        return PL_OK;
    }
    if (n == 0) return PL_OK;
    /* Strings and nested arrays get one pl_gguf_value each (40 bytes for as few as 8 in
     * the file): walk them first, so memory is only spent on elements that are there. */
    cursor probe = *c;
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(&probe, et, depth + 1)) return PL_ERR_FORMAT;
    v->arr.items = pl_gguf_alloc(c->g, n * sizeof *v->arr.items);
    if (!v->arr.items) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory for an array");
    for (uint64_t i = 0; i < n; i++)
        if (rd_value(c, et, &v->arr.items[i], depth + 1)) return PL_ERR_FORMAT;
    return PL_OK;
}

static pl_status rd_value(cursor *c, uint32_t type, pl_gguf_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->type = type;
    if (type == PL_GGUF_STRING) return rd_str(c, &v->str, "string value");
    if (type == PL_GGUF_ARRAY) return rd_array(c, v, depth);
    size_t es = pl_gguf_type_size(type);
    if (!es)
        return pl_fail(PL_ERR_FORMAT, "gguf: bad value type %u at byte %llu", type,
                       (unsigned long long)cur_pos(c));
    if (need(c, es, "scalar value")) return PL_ERR_FORMAT;
    pl_gguf_load_scalar(v, type, c->p);
    c->p += es;
    return PL_OK;
}

/* ---- duplicate detection: a growing open-addressing set of names (keys or tensor names),
 * so a file with many entries costs O(n), not O(n^2) comparisons ---- */

typedef struct {
    const char *ptr; /* NULL: empty slot */
    uint64_t len, hash;
} name_slot;

typedef struct {
    name_slot *slot;
    uint64_t cap, n; /* cap is a power of two, kept at least twice n */
} name_set;

static uint64_t hash_name(const char *p, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3u;
    return h;
}

static void set_put(name_slot *slot, uint64_t cap, name_slot x) {
    uint64_t i = x.hash & (cap - 1);
    while (slot[i].ptr) i = (i + 1) & (cap - 1);
    slot[i] = x;
}

/* Add name; *dup is set if it was there already. */
static pl_status set_add(name_set *s, pl_gguf_str name, bool *dup) {
    uint64_t h = hash_name(name.ptr, name.len);
    *dup = false;
    for (uint64_t i = s->cap ? h & (s->cap - 1) : 0; s->cap && s->slot[i].ptr;
         i = (i + 1) & (s->cap - 1))
        if (s->slot[i].hash == h && s->slot[i].len == name.len &&
            !memcmp(s->slot[i].ptr, name.ptr, name.len)) {
            *dup = true;
            return PL_OK;
        }
    if ((s->n + 1) * 2 > s->cap) {
        uint64_t cap = s->cap ? s->cap * 2 : 64;
        name_slot *ns = calloc(cap, sizeof *ns);
        if (!ns) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
        for (uint64_t i = 0; i < s->cap; i++)
            if (s->slot[i].ptr) set_put(ns, cap, s->slot[i]);
        free(s->slot);
        s->slot = ns;
        s->cap = cap;
    }
    set_put(s->slot, s->cap, (name_slot){name.ptr, name.len, h});
    s->n++;
    return PL_OK;
}

/* Bytes of a tensor of type tr and shape ne, or a message if that passes 2^62 (no file
 * is that big; stopping there keeps every product below overflow). */
static pl_status tensor_bytes(const pl_gguf_tensor *t, const pl_type_traits *tr, uint64_t *out) {
    const uint64_t lim = (uint64_t)1 << 62;
    uint64_t blocks = (uint64_t)t->ne[0] / (uint64_t)tr->block_size;
    if (blocks > lim / (uint64_t)tr->type_size) goto too_large;
    uint64_t bytes = blocks * (uint64_t)tr->type_size;
    for (int d = 1; d < PL_GGUF_MAX_DIMS; d++) {
        uint64_t ne = (uint64_t)t->ne[d];
        if (ne && bytes > lim / ne) goto too_large;
        bytes *= ne;
    }
    *out = bytes;
    return PL_OK;
too_large:
    return pl_fail(PL_ERR_FORMAT, "gguf: tensor '%s' is too large", show(t->name).s);
}

static pl_status parse_kv(pl_gguf *g, cursor *c, uint64_t n_kv, name_set *seen) {
    for (uint64_t i = 0; i < n_kv; i++) {
        if (pl_gguf_grow((void **)&g->kv, &g->kv_cap, i, n_kv, sizeof *g->kv)) return PL_ERR_NOMEM;
        pl_gguf_kv *kv = &g->kv[i];
        uint32_t type;
        bool dup;
        if (rd_str(c, &kv->key, "metadata key")) return PL_ERR_FORMAT;
        if (kv->key.len == 0 || kv->key.len > MAX_KEY_LEN)
            return pl_fail(PL_ERR_FORMAT, "gguf: metadata key %llu has bad length %llu",
                           (unsigned long long)i, (unsigned long long)kv->key.len);
        if (set_add(seen, kv->key, &dup)) return PL_ERR_NOMEM;
        if (dup) return pl_fail(PL_ERR_FORMAT, "gguf: duplicate key '%s'", show(kv->key).s);
        if (rd_u32(c, &type, "metadata type")) return PL_ERR_FORMAT;
        if (type >= PL_GGUF_TYPE_COUNT)
            return pl_fail(PL_ERR_FORMAT, "gguf: key '%s' has bad type %u", show(kv->key).s, type);
        if (rd_value(c, type, &kv->value, 0)) return PL_ERR_FORMAT;
        g->n_kv = i + 1;
    }
    return PL_OK;
}

static pl_status parse_tensor_info(pl_gguf *g, cursor *c, pl_gguf_tensor *t, uint64_t i) {
    if (rd_str(c, &t->name, "tensor name")) return PL_ERR_FORMAT;
    if (t->name.len == 0 || t->name.len > MAX_NAME_LEN)
        return pl_fail(PL_ERR_FORMAT, "gguf: tensor %llu has a bad name length",
                       (unsigned long long)i);
    if (rd_u32(c, &t->n_dims, "tensor dims")) return PL_ERR_FORMAT;
    if (t->n_dims < 1 || t->n_dims > PL_GGUF_MAX_DIMS)
        return pl_fail(PL_ERR_FORMAT, "gguf: tensor '%s' has %u dimensions (1..4 allowed)",
                       show(t->name).s, t->n_dims);
    for (int d = 0; d < PL_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (rd_u64(c, &ne, "tensor shape")) return PL_ERR_FORMAT;
        if (ne > (uint64_t)INT64_MAX / 2)
            return pl_fail(PL_ERR_FORMAT, "gguf: tensor '%s' dimension %u is absurd (%llu)",
                           show(t->name).s, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    if (rd_u32(c, &t->type, "tensor type") || rd_u64(c, &t->offset, "tensor offset"))
        return PL_ERR_FORMAT;
    const pl_type_traits *tr = pl_type_get(t->type);
    if (!tr)
        return pl_fail(PL_ERR_FORMAT, "gguf: tensor '%s' has unknown type %u", show(t->name).s,
                       t->type);
    if (t->ne[0] % tr->block_size)
        return pl_fail(PL_ERR_FORMAT,
                       "gguf: tensor '%s' row of %lld is not a multiple of %s's block %d",
                       show(t->name).s, (long long)t->ne[0], tr->name, tr->block_size);
    if (tensor_bytes(t, tr, &t->nbytes)) return PL_ERR_FORMAT;
    if (t->offset % g->alignment)
        return pl_fail(PL_ERR_FORMAT, "gguf: tensor '%s' offset %llu is not aligned to %u",
                       show(t->name).s, (unsigned long long)t->offset, g->alignment);
    return PL_OK;
}

/* header_only: buf ends anywhere after the tensor infos (a room's worker receives only
 * the header); tensors get no data, their extents are checked not to overflow instead. */
static pl_status parse(pl_gguf *g, const uint8_t *buf, size_t len, name_set *seen,
                       bool header_only) {
    cursor c = {buf, buf + len, buf, g};
    if (len < 4 || memcmp(buf, "GGUF", 4) != 0)
        return pl_fail(PL_ERR_FORMAT, "not a GGUF file (bad magic)");
    c.p += 4;
    if (rd_u32(&c, &g->version, "version")) return PL_ERR_FORMAT;
    if (g->version != 2 && g->version != 3)
        return pl_fail(PL_ERR_FORMAT, "gguf: unsupported version %u (only 2 and 3)", g->version);
    uint64_t n_tensors, n_kv;
    if (rd_u64(&c, &n_tensors, "tensor count") || rd_u64(&c, &n_kv, "metadata count"))
        return PL_ERR_FORMAT;
    uint64_t left = (uint64_t)(c.end - c.p);
    /* a key-value pair takes at least 8+1+4+1 bytes, a tensor info at least 8+1+4+8+4+8 */
    if (n_kv > left / 14)
        return pl_fail(PL_ERR_FORMAT, "gguf: metadata count %llu is impossible for the file size",
                       (unsigned long long)n_kv);
    if (n_tensors > left / 33)
        return pl_fail(PL_ERR_FORMAT, "gguf: tensor count %llu is impossible for the file size",
                       (unsigned long long)n_tensors);

    pl_status st = parse_kv(g, &c, n_kv, seen);
    if (st) return st;

    g->alignment = PL_GGUF_DEFAULT_ALIGNMENT;
    const pl_gguf_value *al = pl_gguf_get(g, "general.alignment");
    if (al) {
        if (al->type != PL_GGUF_UINT32 || al->u == 0 || (al->u & (al->u - 1)) || al->u > (1u << 30))
            return pl_fail(PL_ERR_FORMAT, "gguf: general.alignment must be a power-of-two u32");
        g->alignment = (uint32_t)al->u;
    }

    free(seen->slot);
    memset(seen, 0, sizeof *seen);
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (pl_gguf_grow((void **)&g->tensors, &g->tensor_cap, i, n_tensors, sizeof *g->tensors))
            return PL_ERR_NOMEM;
        pl_gguf_tensor *t = &g->tensors[i];
        bool dup;
        st = parse_tensor_info(g, &c, t, i);
        if (st) return st;
        g->n_tensors = i + 1;
        if (set_add(seen, t->name, &dup)) return PL_ERR_NOMEM;
        if (dup) return pl_fail(PL_ERR_FORMAT, "gguf: duplicate tensor '%s'", show(t->name).s);
    }

    /* The data section starts at the next multiple of the alignment. A file with no
     * tensors may end right after the infos (vocabulary-only files do). */
    uint64_t pos = cur_pos(&c);
    uint64_t data = (pos + g->alignment - 1) / g->alignment * g->alignment;
    g->data_offset = data;
    g->size = len;
    for (uint64_t i = 0; i < n_tensors; i++) {
        pl_gguf_tensor *t = &g->tensors[i];
        if (header_only) {
            if (t->offset > PL_GGUF_MAX_EXTENT || t->nbytes > PL_GGUF_MAX_EXTENT - t->offset)
                return pl_fail(PL_ERR_FORMAT,
                               "gguf: tensor '%s' (offset %llu, %llu bytes) ends past %llu bytes",
                               show(t->name).s, (unsigned long long)t->offset,
                               (unsigned long long)t->nbytes,
                               (unsigned long long)PL_GGUF_MAX_EXTENT);
            t->data = NULL;
            continue;
        }
        if (data > len || t->offset > len - data || t->nbytes > len - data - t->offset)
            return pl_fail(PL_ERR_FORMAT,
                           "gguf: tensor '%s' data (offset %llu, %llu bytes) lies past the end "
                           "of the file (truncated?)",
                           show(t->name).s, (unsigned long long)t->offset,
                           (unsigned long long)t->nbytes);
        t->data = buf + data + t->offset;
    }
    return PL_OK;
}

static pl_status parse_new(const void *buf, size_t len, bool header_only, pl_gguf **out) {
    *out = NULL;
    pl_gguf *g = calloc(1, sizeof *g);
    if (!g) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
    name_set seen = {NULL, 0, 0};
    pl_status st = parse(g, buf, len, &seen, header_only);
    free(seen.slot);
    if (st) {
        pl_gguf_free(g);
        return st;
    }
    *out = g;
    return PL_OK;
}

pl_status pl_gguf_parse(const void *buf, size_t len, pl_gguf **out) {
    return parse_new(buf, len, false, out);
}

pl_status pl_gguf_parse_header(const void *buf, size_t len, pl_gguf **out) {
    return parse_new(buf, len, true, out);
}

pl_status pl_gguf_open(const char *path, pl_gguf **out) {
    *out = NULL;
    pl_file_map m;
    pl_status st = pl_file_map_open(&m, path);
    if (st) return st;
    st = pl_gguf_parse(m.data, m.size, out);
    if (st) {
        pl_file_map_close(&m);
        /* prefix the file name so the one-line error says which file */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        return pl_fail(st, "%s: %s", path, msg);
    }
    (*out)->map = m;
    return PL_OK;
}
