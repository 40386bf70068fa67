/* quantize.c - convert a GGUF file's weights to another format, streaming (see quantize.h).
 *
 * Per tensor: decide its type (quantizable? override? mixture rule? a fallback when the row
 * length is not a multiple of the type's block?), then convert it in chunks of rows:
 * dequantize to float32, quantize to the new type, write. */
#include "quantize.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "quant.h"

/* Floats converted per chunk: bounds the two buffers to about 16 MiB + its quantized size. */
#define CHUNK_FLOATS (4 << 20)

/* ---- naming: file types, type names ---- */

int pl_quantize_file_type(uint32_t t) {
    switch (t) {
    case PL_TYPE_F32: return 0;
    case PL_TYPE_F16: return 1;
    case PL_TYPE_Q4_0: return 2;
    case PL_TYPE_Q4_1: return 3;
    case PL_TYPE_Q8_0: return 7;
    case PL_TYPE_Q5_0: return 8;
    case PL_TYPE_Q5_1: return 9;
    case PL_TYPE_Q2_K: return 10;
    case PL_TYPE_Q3_K: return 12; /* Q3_K_M */
    case PL_TYPE_Q4_K: return 15; /* Q4_K_M */
    case PL_TYPE_Q5_K: return 17; /* Q5_K_M */
    case PL_TYPE_Q6_K: return 18;
    case PL_TYPE_IQ4_NL: return 25;
    case PL_TYPE_IQ4_XS: return 30;
    case PL_TYPE_BF16: return 32;
    case PL_TYPE_TQ1_0: return 36;
    case PL_TYPE_TQ2_0: return 37;
    default: return -1;
    }
}

int pl_quantize_type_from_name(const char *name) {
    char base[16];
    size_t n = strlen(name);
    /* "Q4_K_M" -> "Q4_K": the _M mixtures are what the plain K names mean here */
    if (n > 2 && n < sizeof base && (name[n - 1] == 'm' || name[n - 1] == 'M') &&
        name[n - 2] == '_') {
        memcpy(base, name, n - 2);
        base[n - 2] = 0;
        int t = pl_type_from_name(base);
        return t == PL_TYPE_Q3_K || t == PL_TYPE_Q4_K || t == PL_TYPE_Q5_K ? t : -1;
    }
    return pl_type_from_name(name);
}

/* ---- which tensors, which type ---- */

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Weights that stay as they are even though they are matrices: llama.cpp's list (routers
 * and embeddings that are small or need full precision, SSM/RWKV/T5 small matrices). */
static bool quantizable(const char *name, uint32_t n_dims) {
    static const char *const keep_substr[] = {"_norm.weight", "ffn_gate_inp.weight", "altup",
                                              "laurel", "per_layer_model_proj"};
    static const char *const keep_exact_suffix[] = {
        "position_embd.weight",       "token_types.weight",       "ssm_conv1d.weight",
        "shortconv.conv.weight",      "time_mix_first.weight",    "time_mix_w0.weight",
        "time_mix_w1.weight",         "time_mix_w2.weight",       "time_mix_v0.weight",
        "time_mix_v1.weight",         "time_mix_v2.weight",       "time_mix_a0.weight",
        "time_mix_a1.weight",         "time_mix_a2.weight",       "time_mix_g1.weight",
        "time_mix_g2.weight",         "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight"};
    if (n_dims < 2 || !ends_with(name, "weight")) return false;
    for (size_t i = 0; i < sizeof keep_substr / sizeof *keep_substr; i++)
        if (strstr(name, keep_substr[i])) return false;
    for (size_t i = 0; i < sizeof keep_exact_suffix / sizeof *keep_exact_suffix; i++)
        if (ends_with(name, keep_exact_suffix[i])) return false;
    return true;
}

/* "blk.12.attn_q.weight" -> 12; -1 for tensors outside the layers. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return -1;
    long v = strtol(p, NULL, 10);
    return v > 1000000 ? 1000000 : (int)v;
}

/* llama.cpp's choice of layers that get more bits in the _M mixtures: the first and last
 * eighth, and every third layer in between. */
static bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type a row of ne0 values gets when `t` cannot hold it (llama.cpp's fallbacks, using
 * types we can write), F16 as the last resort. */
static uint32_t fallback(uint32_t t, int64_t ne0) {
    switch (t) {
    case PL_TYPE_Q4_K: t = PL_TYPE_Q5_0; break;
    case PL_TYPE_Q5_K: t = PL_TYPE_Q5_1; break;
    case PL_TYPE_Q6_K: t = PL_TYPE_Q8_0; break;
    case PL_TYPE_Q2_K:
    case PL_TYPE_Q3_K:
    case PL_TYPE_TQ1_0:
    case PL_TYPE_TQ2_0: t = PL_TYPE_Q4_0; break;
    default: t = PL_TYPE_F16; break;
    }
    const pl_type_traits *tr = pl_type_get(t);
    return ne0 % tr->block_size == 0 && tr->quant ? t : PL_TYPE_F16;
}

typedef struct {
    const pl_quantize_params *p;
    regex_t *re; /* one per override */
    int n_layer;
    bool has_output;
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

static uint32_t pick_type(const picker *k, const pl_gguf_tensor *t, const char *name) {
    if (!quantizable(name, t->n_dims)) return t->type;
    const pl_quantize_params *p = k->p;
    uint32_t type = p->type;
    bool manual = false;
    for (int i = 0; i < p->n_overrides; i++)
        if (!regexec(&k->re[i], name, 0, NULL, 0)) {
            type = p->overrides[i].type;
            manual = true;
            break;
        }
    if (!manual && !p->pure) {
        const bool is_output = !strcmp(name, "output.weight") ||
                               (!k->has_output && !strcmp(name, "token_embd.weight"));
        const bool k_mix = type == PL_TYPE_Q4_K || type == PL_TYPE_Q5_K;
        const int layer = layer_of(name);
        if (is_output && pl_type_get(type)->block_size > 1 && type != PL_TYPE_Q8_0)
            type = PL_TYPE_Q6_K;
        else if (k_mix && layer >= 0 && more_bits(layer, k->n_layer) &&
                 (ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight")))
            type = PL_TYPE_Q6_K;
    }
    const pl_type_traits *tr = pl_type_get(type);
    if (t->ne[0] % tr->block_size) {
        uint32_t fb = fallback(type, t->ne[0]);
        note(k, "%s: rows of %lld values are not a multiple of %s's block of %d; stored as %s",
             name, (long long)t->ne[0], tr->name, tr->block_size, pl_type_get(fb)->name);
        type = fb;
    }
    return type;
}

/* ---- order ---- */

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
    return n && fwrite(p, 1, n, f) != n ? pl_fail(PL_ERR_IO, "%s: write failed", path) : PL_OK;
}

/* Write tensor `it` converted to it->type, a chunk of rows at a time. */
static pl_status convert(FILE *f, const item *it, buffers *buf, const char *path) {
    const pl_gguf_tensor *t = it->t;
    if (it->type == t->type) return write_bytes(f, t->data, t->nbytes, path);
    const int64_t ne0 = t->ne[0];
    if (ne0 == 0) return PL_OK;
    const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    const int64_t in_row = pl_row_size(t->type, ne0), out_row = pl_row_size(it->type, ne0);
    if (in_row < 0) return pl_fail(PL_ERR_FORMAT, "%s: bad row length", it->name);
    const int64_t chunk = ne0 >= CHUNK_FLOATS ? 1 : CHUNK_FLOATS / ne0;
    const int64_t chunk_rows = chunk < rows ? chunk : rows;
    pl_status st = grow(buf, (size_t)(chunk_rows * ne0), (size_t)(chunk_rows * out_row));
    for (int64_t r = 0; r < rows && !st; r += chunk) {
        const int64_t n = (rows - r < chunk ? rows - r : chunk) * ne0;
        const uint8_t *src = (const uint8_t *)t->data + r * in_row;
        if ((st = pl_dequant_row(t->type, src, buf->f, n)) ||
            (st = pl_quant_row(it->type, buf->f, buf->q, n)))
            return pl_fail(st, "%s: %s", it->name, pl_last_error());
        st = write_bytes(f, buf->q, (size_t)(n / ne0 * out_row), path);
    }
    return st;
}

/* ---- the file ---- */

/* Whether two paths name one existing file (writing over the mapped input would corrupt it
 * under our feet). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static pl_status check_writable(uint32_t t, const char *what) {
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr) return pl_fail(PL_ERR_ARG, "%s: unknown type %u", what, t);
    if (!tr->quant || pl_quantize_file_type(t) < 0)
        return pl_fail(PL_ERR_ARG, "%s: cannot write %s weights", what, tr->name);
    return PL_OK;
}

/* Copy the metadata, then set the two keys llama-quantize sets (at the end, in its order). */
static pl_status copy_metadata(const pl_gguf *in, pl_gguf *out, uint32_t type) {
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
    if (!st) st = pl_gguf_set_u32(out, "general.file_type", (uint32_t)pl_quantize_file_type(type));
    return st;
}

pl_status pl_quantize_file(const char *in_path, const char *out_path, const pl_quantize_params *p) {
    pl_status st = check_writable(p->type, "quantize");
    for (int i = 0; i < p->n_overrides && !st; i++)
        st = check_writable(p->overrides[i].type, p->overrides[i].pattern);
    if (st) return st;

    pl_gguf *in = NULL, *out = NULL;
    item *items = NULL;
    buffers buf = {0};
    FILE *f = NULL;
    picker k = {p, calloc((size_t)p->n_overrides + 1, sizeof(regex_t)), 0, false};
    int n_re = 0;
    int64_t n = 0;
    bool created = false;
    if (!k.re) return pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
    for (; n_re < p->n_overrides; n_re++)
        if (regcomp(&k.re[n_re], p->overrides[n_re].pattern, REG_EXTENDED | REG_NOSUB)) {
            st = pl_fail(PL_ERR_ARG, "--tensor-type: bad pattern '%s'", p->overrides[n_re].pattern);
            goto done;
        }
    if ((st = pl_gguf_open(in_path, &in))) goto done;

    /* what the picker needs to know about the model */
    n = pl_gguf_tensor_count(in);
    k.has_output = pl_gguf_find_tensor(in, "output.weight") != NULL;
    char *arch = pl_gguf_get_string(in, "general.architecture");
    char key[128];
    int64_t n_layer = 0;
    snprintf(key, sizeof key, "%s.block_count", arch ? arch : "");
    free(arch);

    items = calloc((size_t)n + 1, sizeof *items);
    if (!items) {
        st = pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        items[i].t = pl_gguf_tensor_at(in, i);
        items[i].name = strndup(items[i].t->name.ptr, items[i].t->name.len);
        if (!items[i].name) {
            st = pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
            goto done;
        }
        items[i].layer = layer_of(items[i].name);
        if (items[i].layer + 1 > n_layer) n_layer = items[i].layer + 1;
    }
    int64_t meta_layers; /* the metadata's count wins over the one seen in tensor names */
    if (pl_gguf_get_int(in, key, &meta_layers) && meta_layers > 0 && meta_layers <= 1000000)
        n_layer = meta_layers;
    k.n_layer = (int)n_layer;
    qsort(items, (size_t)n, sizeof *items, by_layer_then_name);

    out = pl_gguf_new();
    if (!out) {
        st = pl_fail(PL_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    if ((st = copy_metadata(in, out, p->type))) goto done;
    bool requant_noted = false;
    uint64_t total = 0, done_bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        const pl_gguf_tensor *t = items[i].t;
        items[i].type = pick_type(&k, t, items[i].name);
        total += t->nbytes;
        if (items[i].type != t->type) {
            const pl_type_traits *tr = pl_type_get(t->type);
            if (!tr || !tr->dequant) {
                st = pl_fail(PL_ERR_FORMAT, "%s: cannot convert %s weights", items[i].name,
                             tr ? tr->name : "unknown");
                goto done;
            }
            if (tr->block_size > 1 && !requant_noted) {
                note(&k, "requantizing %s weights (%s first): their error adds to the new one",
                     tr->name, items[i].name);
                requant_noted = true;
            }
        }
        if ((st = pl_gguf_add_tensor(out, items[i].name, items[i].type, t->n_dims, t->ne, NULL)))
            goto done;
    }

    if (same_file(in_path, out_path)) {
        st = pl_fail(PL_ERR_ARG, "%s: output would overwrite the input", out_path);
        goto done;
    }
    f = fopen(out_path, "wb");
    created = f != NULL;
    if (!f) {
        st = pl_fail(PL_ERR_IO, "%s: cannot create", out_path);
        goto done;
    }
    if ((st = pl_gguf_write_header(out, f))) goto done;
    for (int64_t i = 0; i < n; i++) {
        if ((st = convert(f, &items[i], &buf, out_path))) goto done;
        if ((st = pl_gguf_write_padding(out, f, pl_gguf_tensor_at(out, i)->nbytes))) goto done;
        done_bytes += items[i].t->nbytes;
        if (p->progress) p->progress(p->ctx, i, n, done_bytes, total, items[i].name);
    }
    if (fclose(f)) st = pl_fail(PL_ERR_IO, "%s: write failed", out_path);
    f = NULL;

done:
    if (f) fclose(f);
    if (st && created) remove(out_path);
    for (int i = 0; i < n_re; i++) regfree(&k.re[i]);
    free(k.re);
    for (int64_t i = 0; items && i < n; i++) free(items[i].name);
    free(items);
    free(buf.f);
    free(buf.q);
    pl_gguf_free(out);
    pl_gguf_free(in);
    return st;
}
