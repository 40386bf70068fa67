/* quantize.c - convert a GGUF file's weights to another format, streaming (see quantize.h).
 *
 * Per tensor: decide its type (quantizable? override? mixture rule? a fallback when the row
 * length is not a multiple of the type's block?), then convert it in chunks of rows:
 * dequantize to float32, quantize to the new type, write. */
#include "quantize.h"

#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/file_write.h"
#include "../base/thread.h"
#include "gguf.h"
#include "quant.h"
#include "quantize_mix.h"

/* Floats converted per chunk: bounds the two buffers to about 16 MiB + its quantized size. */
#define CHUNK_FLOATS (4 << 20)

/* ---- order ---- */

/* "blk.12.attn_q.weight" -> 12; -1 for tensors outside the layers. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return -1;
    long v = strtol(p, NULL, 10);
    return v > 1000000 ? 1000000 : (int)v;
}

typedef struct {
    const pl_gguf_tensor *t;
    char *name; /* NUL-terminated copy */
    int layer;
    uint32_t type; /* the output type */
} item;

/* llama.cpp's order: tensors outside the layers first, then layer by layer; by name within. */
static int by_layer_then_name(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* ---- which type ---- */

typedef struct {
    const pl_quantize_params *p;
    regex_t *re; /* one per override */
    pl_quant_mix mix;
} picker;

static void note(const picker *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const picker *k, const char *fmt, ...) {
    if (!k->p->note) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    k->p->note(k->p->ctx, line);
}

static uint32_t pick_type(picker *k, const pl_gguf_tensor *t, const char *name) {
    if (!pl_quant_mix_quantizable(name, t->n_dims)) return t->type;
    const pl_quantize_params *p = k->p;
    uint32_t type = k->mix.base;
    bool manual = false;
    for (int i = 0; i < p->n_overrides && !manual; i++)
        if (!regexec(&k->re[i], name, 0, NULL, 0)) {
            type = p->overrides[i].type;
            manual = true;
        }
    /* like llama-quantize: the mixture rules only for quantized file types */
    if (!manual && !p->pure && pl_type_get(type)->block_size > 1)
        type = pl_quant_mix_pick(&k->mix, name, t->ne[0]);
    const pl_type_traits *tr = pl_type_get(type);
    if (t->ne[0] % tr->block_size) {
        uint32_t fb = pl_quant_mix_fallback(type, t->ne[0]);
        note(k, "%s: rows of %lld values are not a multiple of %s's block of %d; stored as %s",
             name, (long long)t->ne[0], tr->name, tr->block_size, pl_type_get(fb)->name);
        type = fb;
    }
    return type;
}

/* What the mixture rules need from the model's metadata and tensor names. */
static void describe_model(const pl_gguf *in, const item *items, int64_t n, pl_quant_mix *m) {
    char *arch = pl_gguf_get_string(in, "general.architecture");
    const char *a = arch ? arch : "";
    char key[160];
    int64_t v, n_head = 0, n_head_kv = 0;
    for (int64_t i = 0; i < n; i++) {
        if (items[i].layer + 1 > m->n_layer) m->n_layer = items[i].layer + 1;
        if (pl_quant_mix_is_attn_v(items[i].name)) m->n_attn_v++;
    }
    snprintf(key, sizeof key, "%s.block_count", a);
    if (pl_gguf_get_int(in, key, &v) && v > 0 && v <= 1000000) m->n_layer = (int)v;
    snprintf(key, sizeof key, "%s.expert_count", a);
    if (pl_gguf_get_int(in, key, &v) && v > 0 && v <= 1000000) m->n_expert = (int)v;
    /* head counts may be per-layer arrays: layer 0 decides, as in llama.cpp */
    snprintf(key, sizeof key, "%s.attention.head_count", a);
    const pl_gguf_value *h = pl_gguf_get(in, key);
    if (h && pl_gguf_get_int(in, key, &v))
        n_head = v;
    else if (h && h->type == PL_GGUF_ARRAY && h->arr.count && pl_gguf_type_size(h->arr.elem_type))
        n_head = pl_gguf_arr_int(h, 0);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
    h = pl_gguf_get(in, key);
    n_head_kv = n_head;
    if (h && pl_gguf_get_int(in, key, &v))
        n_head_kv = v;
    else if (h && h->type == PL_GGUF_ARRAY && h->arr.count && pl_gguf_type_size(h->arr.elem_type))
        n_head_kv = pl_gguf_arr_int(h, 0);
    m->n_gqa = n_head_kv > 0 && n_head > 0 ? (int)(n_head / n_head_kv) : 1;
    m->tied = pl_gguf_find_tensor(in, "output.weight") == NULL;
    m->falcon = !strcmp(a, "falcon");
    /* llama.cpp calls an 80-layer llama with fewer KV heads than heads its 70B */
    m->is_70b = !strcmp(a, "llama") && m->n_layer == 80 && n_head_kv != n_head;
    free(arch);
}

/* ---- conversion ---- */

typedef struct {
    float *f;
    uint8_t *q;
    size_t fcap, qcap;
} buffers;

static pl_status grow(buffers *b, size_t nf, size_t nq) {
    if (nf > b->fcap) {
        float *f = realloc(b->f, nf * sizeof *f);
        if (!f) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        b->f = f, b->fcap = nf;
    }
    if (nq > b->qcap) {
        uint8_t *q = realloc(b->q, nq);
        if (!q) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        b->q = q, b->qcap = nq;
    }
    return PL_OK;
}

static pl_status write_bytes(FILE *f, const void *p, size_t n, const char *path) {
    if (!n || fwrite(p, 1, n, f) == n) return PL_OK;
    return pl_fail(PL_ERR_IO, "%s: write failed: %s", path, strerror(errno ? errno : EIO));
}

/* One thread's share of a chunk: rows [r0, r1) of the chunk. */
typedef struct {
    uint32_t from, to; /* types */
    const uint8_t *src;
    float *f;
    uint8_t *q;
    int64_t r0, r1, ne0, in_row, out_row;
    pl_status st;
    char err[256]; /* pl_last_error is per thread: carry the message back */
} share;

static void *convert_share(void *arg) {
    share *s = arg;
    const int64_t n = (s->r1 - s->r0) * s->ne0;
    if (n &&
        ((s->st = pl_dequant_row(s->from, s->src + s->r0 * s->in_row, s->f + s->r0 * s->ne0, n)) ||
         (s->st = pl_quant_row(s->to, s->f + s->r0 * s->ne0, s->q + s->r0 * s->out_row, n))))
        snprintf(s->err, sizeof s->err, "%s", pl_last_error());
    /* finite weights too large for the new type (above 65504 in f16) would become Inf */
    else if (n && pl_find_nonfinite(s->to, s->q + s->r0 * s->out_row, n) >= 0) {
        s->st = PL_ERR_FORMAT;
        snprintf(s->err, sizeof s->err, "values too large for %s (they would become Inf)",
                 pl_type_get(s->to)->name);
    }
    return NULL;
}

/* Convert `rows` rows, split across up to n_threads threads (rows are independent, so the
 * bytes do not depend on the split). */
static pl_status convert_rows(share *tmpl, int64_t rows, int n_threads) {
    share sh[PL_QUANTIZE_MAX_THREADS];
    pl_thread th[PL_QUANTIZE_MAX_THREADS];
    /* below ~64K values per thread, starting threads costs more than it saves */
    int64_t by_work = rows * tmpl->ne0 / 65536;
    int nt = n_threads < by_work ? n_threads : (int)(by_work > 1 ? by_work : 1);
    if (nt > rows) nt = (int)rows;
    uint32_t started = 0; /* bit k: share k runs on its own thread */
    for (int k = 0; k < nt; k++) {
        sh[k] = *tmpl;
        sh[k].r0 = rows * k / nt;
        sh[k].r1 = rows * (k + 1) / nt;
        if (k == nt - 1 || pl_thread_start(&th[k], convert_share, &sh[k]))
            convert_share(&sh[k]); /* the last share, or no thread to be had: do it here */
        else
            started |= 1u << k;
    }
    pl_status st = PL_OK;
    for (int k = 0; k < nt; k++) {
        if (started & 1u << k) pl_thread_join(th[k]);
        if (sh[k].st && !st) st = pl_fail(sh[k].st, "%s", sh[k].err);
    }
    return st;
}

/* Write tensor `it` converted to it->type, a chunk of rows at a time. */
static pl_status convert(FILE *f, const item *it, buffers *buf, const char *path, int n_threads) {
    const pl_gguf_tensor *t = it->t;
    if (it->type == t->type) return write_bytes(f, t->data, t->nbytes, path);
    const int64_t ne0 = t->ne[0];
    if (ne0 == 0) return PL_OK;
    const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    share s = {.from = t->type, .to = it->type, .ne0 = ne0};
    s.in_row = pl_row_size(t->type, ne0);
    s.out_row = pl_row_size(it->type, ne0);
    if (s.in_row < 0 || s.out_row < 0)
        return pl_fail(PL_ERR_FORMAT, "%s: bad row length", it->name);
    const int64_t chunk = ne0 >= CHUNK_FLOATS ? 1 : CHUNK_FLOATS / ne0;
    const int64_t chunk_rows = chunk < rows ? chunk : rows;
    pl_status st = grow(buf, (size_t)(chunk_rows * ne0), (size_t)(chunk_rows * s.out_row));
    s.f = buf->f;
    s.q = buf->q;
    for (int64_t r = 0; r < rows && !st; r += chunk) {
        const int64_t n_rows = rows - r < chunk ? rows - r : chunk;
        s.src = (const uint8_t *)t->data + r * s.in_row;
        if ((st = convert_rows(&s, n_rows, n_threads)))
            return pl_fail(st, "%s: %s", it->name, pl_last_error());
        st = write_bytes(f, buf->q, (size_t)(n_rows * s.out_row), path);
    }
    return st;
}

/* Threads to use: the caller's number, else one per online CPU. */
static int thread_count(int asked) {
    long n = asked > 0 ? asked : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > PL_QUANTIZE_MAX_THREADS ? PL_QUANTIZE_MAX_THREADS : (int)n;
}

/* ---- the file ---- */

/* Whether two paths name one existing file (writing over the mapped input would corrupt it
 * under our feet). */
static pl_status check_writable(uint32_t t, const char *what) {
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr) return pl_fail(PL_ERR_ARG, "%s: unknown type %u", what, t);
    if (!tr->quant) return pl_fail(PL_ERR_ARG, "%s: cannot write %s weights", what, tr->name);
    return PL_OK;
}

/* Copy the metadata, then set the two keys llama-quantize sets (at the end, in its order). */
static pl_status copy_metadata(const pl_gguf *in, pl_gguf *out, int file_type) {
    for (int64_t i = 0; i < pl_gguf_kv_count(in); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(in, i);
        char *key = strndup(kv->key.ptr, kv->key.len);
        if (!key) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        pl_status st = PL_OK;
        if (strncmp(key, "split.", 6)) st = pl_gguf_set_value(out, key, &kv->value);
        free(key);
        if (st) return st;
    }
    pl_gguf_remove(out, "general.quantization_version");
    pl_gguf_remove(out, "general.file_type");
    pl_status st = pl_gguf_set_u32(out, "general.quantization_version", 2);
    if (!st) st = pl_gguf_set_u32(out, "general.file_type", (uint32_t)file_type);
    return st;
}

/* The input's tensors with NUL-terminated names, in llama.cpp's order. */
static pl_status list_tensors(const pl_gguf *in, item **out) {
    const int64_t n = pl_gguf_tensor_count(in);
    item *items = calloc((size_t)n + 1, sizeof *items);
    if (!items) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
    *out = items;
    for (int64_t i = 0; i < n; i++) {
        items[i].t = pl_gguf_tensor_at(in, i);
        items[i].name = strndup(items[i].t->name.ptr, items[i].t->name.len);
        if (!items[i].name) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        items[i].layer = layer_of(items[i].name);
    }
    qsort(items, (size_t)n, sizeof *items, by_layer_then_name);
    return PL_OK;
}

/* NaN/Inf weights make the model's output meaningless, whatever they are converted to:
 * refuse the file before anything is planned or written. */
static pl_status check_finite(const item *items, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const pl_gguf_tensor *t = items[i].t;
        if (pl_find_nonfinite(t->type, t->data, t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]) >= 0)
            return pl_fail(PL_ERR_FORMAT,
                           "tensor %s holds NaN or Inf values: refusing to "
                           "convert a broken model",
                           items[i].name);
    }
    return PL_OK;
}

/* Pick every tensor's type and add its info to out (in the sorted order). */
static pl_status plan(picker *k, item *items, int64_t n, pl_gguf *out) {
    bool requant_noted = false;
    for (int64_t i = 0; i < n; i++) {
        const pl_gguf_tensor *t = items[i].t;
        items[i].type = pick_type(k, t, items[i].name);
        if (items[i].type != t->type) {
            const pl_type_traits *tr = pl_type_get(t->type);
            if (!tr || !tr->dequant)
                return pl_fail(PL_ERR_FORMAT, "%s: cannot convert %s weights", items[i].name,
                               tr ? tr->name : "unknown");
            if (tr->block_size > 1 && !requant_noted) {
                note(k, "requantizing %s weights (%s first): their error adds to the new one",
                     tr->name, items[i].name);
                requant_noted = true;
            }
        }
        pl_status st =
            pl_gguf_add_tensor(out, items[i].name, items[i].type, t->n_dims, t->ne, NULL);
        if (st) return st;
    }
    return PL_OK;
}

/* Write the header, then each tensor converted and padded. */
static pl_status write_all(const pl_quantize_params *p, const pl_gguf *out, const item *items,
                           int64_t n, FILE *f, const char *path) {
    buffers buf = {0};
    const int n_threads = thread_count(p->n_threads);
    uint64_t total = 0, done = 0;
    for (int64_t i = 0; i < n; i++) total += items[i].t->nbytes;
    pl_status st = pl_gguf_write_header(out, f);
    for (int64_t i = 0; i < n && !st; i++) {
        if ((st = convert(f, &items[i], &buf, path, n_threads))) break;
        if ((st = pl_gguf_write_padding(out, f, pl_gguf_tensor_at(out, i)->nbytes))) break;
        done += items[i].t->nbytes;
        if (p->progress) p->progress(p->ctx, i, n, done, total, items[i].name);
    }
    free(buf.f);
    free(buf.q);
    return st;
}

pl_status pl_quantize_file(const char *in_path, const char *out_path, const pl_quantize_params *p) {
    const int base = pl_quantize_base_type(p->file_type);
    if (base < 0) return pl_fail(PL_ERR_ARG, "quantize: unknown file type %d", p->file_type);
    pl_status st = check_writable((uint32_t)base, "quantize");
    for (int i = 0; i < p->n_overrides && !st; i++)
        st = check_writable(p->overrides[i].type, p->overrides[i].pattern);
    if (st) return st;

    pl_gguf *in = NULL, *out = NULL;
    item *items = NULL;
    pl_file_out f = {0};
    picker k = {p, calloc((size_t)p->n_overrides + 1, sizeof(regex_t)), {0}};
    int n_re = 0;
    int64_t n = 0;
    if (!k.re) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
    k.mix.file_type = p->file_type;
    k.mix.base = (uint32_t)base;
    for (; n_re < p->n_overrides; n_re++)
        if (regcomp(&k.re[n_re], p->overrides[n_re].pattern, REG_EXTENDED | REG_NOSUB)) {
            st = pl_fail(PL_ERR_ARG, "--tensor-type: bad pattern '%s'", p->overrides[n_re].pattern);
            goto done;
        }
    if ((st = pl_gguf_open(in_path, &in))) goto done;
    if (pl_file_same(in_path, out_path)) {
        st = pl_fail(PL_ERR_ARG, "%s: output would overwrite the input", out_path);
        goto done;
    }
    /* a temporary file renamed over OUT when complete: a failure leaves OUT as it was */
    if ((st = pl_file_out_open(&f, out_path))) goto done;
    n = pl_gguf_tensor_count(in);
    if ((st = list_tensors(in, &items)) || (st = check_finite(items, n))) goto done;
    describe_model(in, items, n, &k.mix);
    if (!(out = pl_gguf_new())) {
        st = pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    if ((st = copy_metadata(in, out, p->file_type)) || (st = plan(&k, items, n, out))) goto done;
    st = write_all(p, out, items, n, f.f, out_path);
    if (!st) st = pl_file_out_commit(&f);

done:
    pl_file_out_abort(&f);
    for (int i = 0; i < n_re; i++) regfree(&k.re[i]);
    free(k.re);
    for (int64_t i = 0; items && i < n; i++) free(items[i].name);
    free(items);
    pl_gguf_free(out);
    pl_gguf_free(in);
    return st;
}
