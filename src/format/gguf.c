/* gguf.c - GGUF accessors, building a GGUF in memory, and writing one out.
 *
 * A parsed pl_gguf points into its buffer. Building (set/add) works on any pl_gguf, parsed
 * or new: keys, values and names given by the caller are deep-copied into blocks owned by
 * the pl_gguf, so a parsed file can be edited (quantize does) and written back. The writer
 * emits exactly what a parse reads, so read-then-write reproduces a file byte for byte. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file_write.h"
#include "gguf_internal.h"
#include "quant.h"

void *pl_gguf_alloc(pl_gguf *g, size_t size) {
    if (g->n_allocs == g->allocs_cap) {
        uint64_t cap = g->allocs_cap ? g->allocs_cap * 2 : 16;
        void **na = realloc(g->allocs, cap * sizeof *na);
        if (!na) return NULL;
        g->allocs = na;
        g->allocs_cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p) g->allocs[g->n_allocs++] = p;
    return p;
}

pl_status pl_gguf_grow(void **arr, uint64_t *cap, uint64_t i, uint64_t limit, size_t elem) {
    if (i < *cap) return PL_OK;
    uint64_t nc = *cap ? *cap * 2 : 16;
    if (nc > limit) nc = limit;
    if (nc <= i) return pl_fail(PL_ERR_NOMEM, "gguf: too many entries");
    void *na = realloc(*arr, nc * elem);
    if (!na) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
    memset((char *)na + *cap * elem, 0, (nc - *cap) * elem);
    *arr = na;
    *cap = nc;
    return PL_OK;
}

void pl_gguf_free(pl_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; i < g->n_allocs; i++) free(g->allocs[i]);
    free(g->allocs);
    free(g->kv);
    free(g->tensors);
    pl_file_map_close(&g->map);
    free(g);
}

/* ---- reading accessors ---- */

uint32_t pl_gguf_version(const pl_gguf *g) {
    return g->version;
}
uint32_t pl_gguf_alignment(const pl_gguf *g) {
    return g->alignment;
}
uint64_t pl_gguf_file_size(const pl_gguf *g) {
    return g->size;
}
int64_t pl_gguf_kv_count(const pl_gguf *g) {
    return (int64_t)g->n_kv;
}
int64_t pl_gguf_tensor_count(const pl_gguf *g) {
    return (int64_t)g->n_tensors;
}

const pl_gguf_kv *pl_gguf_kv_at(const pl_gguf *g, int64_t i) {
    return i >= 0 && (uint64_t)i < g->n_kv ? &g->kv[i] : NULL;
}

const pl_gguf_tensor *pl_gguf_tensor_at(const pl_gguf *g, int64_t i) {
    return i >= 0 && (uint64_t)i < g->n_tensors ? &g->tensors[i] : NULL;
}

bool pl_gguf_str_eq(pl_gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

static int64_t find_kv(const pl_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (pl_gguf_str_eq(g->kv[i].key, key)) return (int64_t)i;
    return -1;
}

const pl_gguf_value *pl_gguf_get(const pl_gguf *g, const char *key) {
    int64_t i = find_kv(g, key);
    return i < 0 ? NULL : &g->kv[i].value;
}

const pl_gguf_tensor *pl_gguf_find_tensor(const pl_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (pl_gguf_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static bool is_unsigned(uint32_t t) {
    return t == PL_GGUF_UINT8 || t == PL_GGUF_UINT16 || t == PL_GGUF_UINT32 || t == PL_GGUF_UINT64;
}
static bool is_signed(uint32_t t) {
    return t == PL_GGUF_INT8 || t == PL_GGUF_INT16 || t == PL_GGUF_INT32 || t == PL_GGUF_INT64;
}

bool pl_gguf_get_int(const pl_gguf *g, const char *key, int64_t *out) {
    const pl_gguf_value *v = pl_gguf_get(g, key);
    if (!v) return false;
    if (is_unsigned(v->type)) {
        if (v->u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)v->u;
        return true;
    }
    if (is_signed(v->type)) {
        *out = v->i;
        return true;
    }
    return false;
}

bool pl_gguf_get_float(const pl_gguf *g, const char *key, double *out) {
    const pl_gguf_value *v = pl_gguf_get(g, key);
    if (!v) return false;
    if (v->type == PL_GGUF_FLOAT32 || v->type == PL_GGUF_FLOAT64)
        *out = v->f;
    else if (is_unsigned(v->type))
        *out = (double)v->u;
    else if (is_signed(v->type))
        *out = (double)v->i;
    else
        return false;
    return true;
}

bool pl_gguf_get_bool(const pl_gguf *g, const char *key, bool *out) {
    const pl_gguf_value *v = pl_gguf_get(g, key);
    if (!v || v->type != PL_GGUF_BOOL) return false;
    *out = v->u != 0;
    return true;
}

char *pl_gguf_get_string(const pl_gguf *g, const char *key) {
    const pl_gguf_value *v = pl_gguf_get(g, key);
    if (!v || v->type != PL_GGUF_STRING) return NULL;
    char *s = malloc(v->str.len + 1);
    if (!s) return NULL;
    memcpy(s, v->str.ptr, v->str.len);
    s[v->str.len] = 0;
    return s;
}

int64_t pl_gguf_arr_int(const pl_gguf_value *v, uint64_t i) {
    if (v->type != PL_GGUF_ARRAY || i >= v->arr.count || !v->arr.data) return 0;
    pl_gguf_value x;
    size_t es = pl_gguf_type_size(v->arr.elem_type);
    pl_gguf_load_scalar(&x, v->arr.elem_type, (const uint8_t *)v->arr.data + i * es);
    if (is_signed(x.type)) return x.i;
    if (x.type == PL_GGUF_FLOAT32 || x.type == PL_GGUF_FLOAT64) {
        /* a float past int64's range (or NaN) has no integer: converting it is undefined */
        if (!(x.f > -9223372036854775808.0 && x.f < 9223372036854775808.0)) return 0;
        return (int64_t)x.f;
    }
    return (int64_t)x.u;
}

double pl_gguf_arr_float(const pl_gguf_value *v, uint64_t i) {
    if (v->type != PL_GGUF_ARRAY || i >= v->arr.count || !v->arr.data) return 0;
    pl_gguf_value x;
    size_t es = pl_gguf_type_size(v->arr.elem_type);
    pl_gguf_load_scalar(&x, v->arr.elem_type, (const uint8_t *)v->arr.data + i * es);
    if (is_signed(x.type)) return (double)x.i;
    if (x.type == PL_GGUF_FLOAT32 || x.type == PL_GGUF_FLOAT64) return x.f;
    return (double)x.u;
}

bool pl_gguf_arr_at(const pl_gguf_value *v, uint64_t i, pl_gguf_value *out) {
    if (v->type != PL_GGUF_ARRAY || i >= v->arr.count) return false;
    size_t es = pl_gguf_type_size(v->arr.elem_type);
    if (es) {
        memset(out, 0, sizeof *out);
        pl_gguf_load_scalar(out, v->arr.elem_type, (const uint8_t *)v->arr.data + i * es);
    } else {
        *out = v->arr.items[i];
    }
    return true;
}

const char *pl_gguf_type_name(uint32_t t) {
    static const char *names[] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                  "bool", "str", "arr", "u64", "i64", "f64"};
    return t < PL_GGUF_TYPE_COUNT ? names[t] : "?";
}

/* ---- building ---- */

pl_gguf *pl_gguf_new(void) {
    pl_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->version = 3;
    g->alignment = PL_GGUF_DEFAULT_ALIGNMENT;
    return g;
}

static pl_status copy_str(pl_gguf *g, pl_gguf_str *dst, const char *src, size_t len) {
    char *p = pl_gguf_alloc(g, len + 1);
    if (!p) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
    memcpy(p, src, len);
    dst->ptr = p;
    dst->len = len;
    return PL_OK;
}

/* Deep-copy src into dst, with every heap part owned by g. */
static pl_status copy_value(pl_gguf *g, pl_gguf_value *dst, const pl_gguf_value *src) {
    *dst = *src;
    if (src->type == PL_GGUF_STRING) return copy_str(g, &dst->str, src->str.ptr, src->str.len);
    if (src->type != PL_GGUF_ARRAY) return PL_OK;
    size_t es = pl_gguf_type_size(src->arr.elem_type);
    if (es) {
        void *d = pl_gguf_alloc(g, src->arr.count * es);
        if (!d) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
        if (src->arr.count) memcpy(d, src->arr.data, src->arr.count * es);
        dst->arr.data = d;
        return PL_OK;
    }
    dst->arr.items = NULL;
    if (!src->arr.count) return PL_OK;
    dst->arr.items = pl_gguf_alloc(g, src->arr.count * sizeof *dst->arr.items);
    if (!dst->arr.items) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
    for (uint64_t i = 0; i < src->arr.count; i++)
        if (copy_value(g, &dst->arr.items[i], &src->arr.items[i])) return PL_ERR_NOMEM;
    return PL_OK;
}

pl_status pl_gguf_set_value(pl_gguf *g, const char *key, const pl_gguf_value *v) {
    if (!key || !*key) return pl_fail(PL_ERR_ARG, "gguf: empty key");
    pl_gguf_value copy;
    if (copy_value(g, &copy, v)) return PL_ERR_NOMEM;
    int64_t i = find_kv(g, key);
    if (i >= 0) {
        g->kv[i].value = copy;
        return PL_OK;
    }
    if (pl_gguf_grow((void **)&g->kv, &g->kv_cap, g->n_kv, UINT64_MAX, sizeof *g->kv))
        return PL_ERR_NOMEM;
    pl_gguf_kv *kv = &g->kv[g->n_kv];
    if (copy_str(g, &kv->key, key, strlen(key))) return PL_ERR_NOMEM;
    kv->value = copy;
    g->n_kv++;
    if (!strcmp(key, "general.alignment") && v->type == PL_GGUF_UINT32 && v->u &&
        !(v->u & (v->u - 1)))
        g->alignment = (uint32_t)v->u;
    return PL_OK;
}

static pl_status set_scalar(pl_gguf *g, const char *key, uint32_t type, const void *p) {
    pl_gguf_value v;
    memset(&v, 0, sizeof v);
    pl_gguf_load_scalar(&v, type, p);
    return pl_gguf_set_value(g, key, &v);
}

pl_status pl_gguf_set_u32(pl_gguf *g, const char *k, uint32_t v) {
    return set_scalar(g, k, PL_GGUF_UINT32, &v);
}
pl_status pl_gguf_set_i32(pl_gguf *g, const char *k, int32_t v) {
    return set_scalar(g, k, PL_GGUF_INT32, &v);
}
pl_status pl_gguf_set_u64(pl_gguf *g, const char *k, uint64_t v) {
    return set_scalar(g, k, PL_GGUF_UINT64, &v);
}
pl_status pl_gguf_set_f32(pl_gguf *g, const char *k, float v) {
    return set_scalar(g, k, PL_GGUF_FLOAT32, &v);
}
pl_status pl_gguf_set_bool(pl_gguf *g, const char *k, bool v) {
    uint8_t b = v;
    return set_scalar(g, k, PL_GGUF_BOOL, &b);
}

pl_status pl_gguf_set_str(pl_gguf *g, const char *key, const char *s) {
    pl_gguf_value v = {.type = PL_GGUF_STRING, .str = {s, strlen(s)}};
    return pl_gguf_set_value(g, key, &v);
}

pl_status pl_gguf_set_arr(pl_gguf *g, const char *key, uint32_t elem_type, const void *data,
                          uint64_t count) {
    if (!pl_gguf_type_size(elem_type))
        return pl_fail(PL_ERR_ARG, "gguf: pl_gguf_set_arr needs a numeric element type");
    pl_gguf_value v = {.type = PL_GGUF_ARRAY};
    v.arr.elem_type = elem_type;
    v.arr.count = count;
    v.arr.data = data;
    return pl_gguf_set_value(g, key, &v);
}

pl_status pl_gguf_set_str_arr(pl_gguf *g, const char *key, const char *const *strs,
                              uint64_t count) {
    pl_gguf_value v = {.type = PL_GGUF_ARRAY};
    v.arr.elem_type = PL_GGUF_STRING;
    v.arr.count = count;
    pl_gguf_value *items = calloc(count ? count : 1, sizeof *items);
    if (!items) return pl_fail(PL_ERR_NOMEM, "gguf: out of memory");
    for (uint64_t i = 0; i < count; i++) {
        items[i].type = PL_GGUF_STRING;
        items[i].str.ptr = strs[i];
        items[i].str.len = strlen(strs[i]);
    }
    v.arr.items = items;
    pl_status st = pl_gguf_set_value(g, key, &v); /* deep-copies the items */
    free(items);
    return st;
}

void pl_gguf_remove(pl_gguf *g, const char *key) {
    int64_t i = find_kv(g, key);
    if (i < 0) return;
    memmove(&g->kv[i], &g->kv[i + 1], (g->n_kv - (uint64_t)i - 1) * sizeof *g->kv);
    g->n_kv--;
}

static uint64_t align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

pl_status pl_gguf_add_tensor(pl_gguf *g, const char *name, uint32_t type, uint32_t n_dims,
                             const int64_t *ne, const void *data) {
    const pl_type_traits *tr = pl_type_get(type);
    if (!tr) return pl_fail(PL_ERR_ARG, "gguf: unknown tensor type %u", type);
    if (n_dims < 1 || n_dims > PL_GGUF_MAX_DIMS)
        return pl_fail(PL_ERR_ARG, "gguf: tensor '%s' needs 1..4 dims", name);
    if (pl_gguf_find_tensor(g, name))
        return pl_fail(PL_ERR_ARG, "gguf: duplicate tensor '%s'", name);
    if (ne[0] % tr->block_size)
        return pl_fail(PL_ERR_ARG, "gguf: tensor '%s' row %lld is not a multiple of %d", name,
                       (long long)ne[0], tr->block_size);
    if (pl_gguf_grow((void **)&g->tensors, &g->tensor_cap, g->n_tensors, UINT64_MAX,
                     sizeof *g->tensors))
        return PL_ERR_NOMEM;
    pl_gguf_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);
    if (copy_str(g, &t->name, name, strlen(name))) return PL_ERR_NOMEM;
    t->n_dims = n_dims;
    uint64_t bytes = (uint64_t)(ne[0] / tr->block_size) * (uint64_t)tr->type_size;
    for (int d = 0; d < PL_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < (int)n_dims ? ne[d] : 1;
        if (d > 0) bytes *= (uint64_t)t->ne[d];
    }
    t->type = type;
    t->nbytes = bytes;
    t->data = data;
    t->offset = 0;
    if (g->n_tensors) {
        const pl_gguf_tensor *prev = &g->tensors[g->n_tensors - 1];
        t->offset = align_up(prev->offset + prev->nbytes, g->alignment);
    }
    g->n_tensors++;
    return PL_OK;
}

/* ---- writing ---- */

/* A small buffered writer that counts bytes and remembers the first error (its errno). */
typedef struct {
    FILE *f;
    uint64_t n;
    int err;
} wr;

static void w_bytes(wr *w, const void *p, size_t n) {
    if (n && !w->err && fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
    w->n += n;
}
static void w_u32(wr *w, uint32_t v) {
    w_bytes(w, &v, 4);
}
static void w_u64(wr *w, uint64_t v) {
    w_bytes(w, &v, 8);
}
static void w_str(wr *w, pl_gguf_str s) {
    w_u64(w, s.len);
    w_bytes(w, s.ptr, s.len);
}

static void w_value(wr *w, const pl_gguf_value *v) {
    size_t es = pl_gguf_type_size(v->type);
    if (es) {
        /* narrow the widened scalar back to its stored width (little-endian host) */
        uint8_t buf[8];
        if (v->type == PL_GGUF_FLOAT32) {
            float f = (float)v->f;
            memcpy(buf, &f, 4);
        } else if (v->type == PL_GGUF_FLOAT64) {
            memcpy(buf, &v->f, 8);
        } else {
            uint64_t u = is_signed(v->type) ? (uint64_t)v->i : v->u;
            memcpy(buf, &u, 8);
        }
        w_bytes(w, buf, es);
    } else if (v->type == PL_GGUF_STRING) {
        w_str(w, v->str);
    } else {
        w_u32(w, v->arr.elem_type);
        w_u64(w, v->arr.count);
        size_t ees = pl_gguf_type_size(v->arr.elem_type);
        if (ees)
            w_bytes(w, v->arr.data, v->arr.count * ees);
        else
            for (uint64_t i = 0; i < v->arr.count; i++) w_value(w, &v->arr.items[i]);
    }
}

static const uint8_t zeros[4096];

static void w_pad(wr *w, uint64_t align) {
    uint64_t pad = align_up(w->n, align) - w->n;
    while (pad) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        w_bytes(w, zeros, k);
        pad -= k;
    }
}

pl_status pl_gguf_write_header(const pl_gguf *g, FILE *f) {
    wr w = {f, 0, 0};
    w_bytes(&w, "GGUF", 4);
    w_u32(&w, g->version);
    w_u64(&w, g->n_tensors);
    w_u64(&w, g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        w_str(&w, g->kv[i].key);
        w_u32(&w, g->kv[i].value.type);
        w_value(&w, &g->kv[i].value);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const pl_gguf_tensor *t = &g->tensors[i];
        w_str(&w, t->name);
        w_u32(&w, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) w_u64(&w, (uint64_t)t->ne[d]);
        w_u32(&w, t->type);
        w_u64(&w, t->offset);
    }
    /* Vocabulary-only files end right after the infos: no data section to align. */
    if (g->n_tensors) w_pad(&w, g->alignment);
    return w.err ? pl_fail(PL_ERR_IO, "gguf: write failed: %s", strerror(w.err)) : PL_OK;
}

pl_status pl_gguf_write_padding(const pl_gguf *g, FILE *f, uint64_t nbytes) {
    wr w = {f, nbytes, 0};
    w_pad(&w, g->alignment);
    return w.err ? pl_fail(PL_ERR_IO, "gguf: write failed: %s", strerror(w.err)) : PL_OK;
}

uint64_t pl_gguf_data_offset(const pl_gguf *g) {
    if (g->size) return g->data_offset;
    /* built in memory: measure the header by writing it nowhere */
    FILE *f = fopen("/dev/null", "wb");
    if (!f) return 0;
    pl_gguf_write_header(g, f);
    long n = ftell(f);
    fclose(f);
    return n < 0 ? 0 : (uint64_t)n;
}

pl_status pl_gguf_write_file(const pl_gguf *g, const char *path) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!g->tensors[i].data && g->tensors[i].nbytes)
            return pl_fail(PL_ERR_ARG, "gguf: tensor '%.*s' has no data to write",
                           (int)g->tensors[i].name.len, g->tensors[i].name.ptr);
    pl_file_out fo;
    pl_status st = pl_file_out_open(&fo, path);
    if (st) return st;
    FILE *f = fo.f;
    st = pl_gguf_write_header(g, f);
    uint64_t pos = 0; /* within the data section */
    for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
        const pl_gguf_tensor *t = &g->tensors[i];
        if (t->offset < pos) {
            st = pl_fail(PL_ERR_ARG, "gguf: tensor data out of order; cannot write %s", path);
            break;
        }
        /* keep the recorded offsets: pad up to this tensor's offset */
        while (pos < t->offset && !st) {
            size_t k = t->offset - pos < sizeof zeros ? (size_t)(t->offset - pos) : sizeof zeros;
            if (fwrite(zeros, 1, k, f) != k) st = pl_file_out_failed(&fo);
            pos += k;
        }
        if (!st && t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes)
            st = pl_file_out_failed(&fo);
        pos += t->nbytes;
    }
    if (!st && g->n_tensors) st = pl_gguf_write_padding(g, f, pos);
    if (!st) st = pl_file_out_commit(&fo);
    pl_file_out_abort(&fo);
    return st;
}
